// JSON Lines metrics and the progress line.
#include <mtk/base/error.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/metrics/peak_memory.hpp>

#include <gtest/gtest.h>

#include "lm_data_test_util.hpp"
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

namespace {

using mtk::MetricRecord;

TEST(Metrics, JsonObjects) {
  const MetricRecord r = {{"step", std::int64_t{100}},
                          {"loss", 2.5},
                          {"lr", 0.01},
                          {"tokens_per_s", 12345.678},
                          {"big", std::int64_t{9007199254740993}},
                          {"name", std::string("a \"quoted\"\\ line\n\ttab \x01")},
                          {"nan", std::nan("")},
                          {"inf", std::numeric_limits<double>::infinity()}};
  EXPECT_EQ(mtk::to_json(r),
            "{\"step\": 100, \"loss\": 2.5, \"lr\": 0.01, \"tokens_per_s\": 12345.678, "
            "\"big\": 9007199254740993, \"name\": \"a \\\"quoted\\\"\\\\ line\\n\\ttab \\u0001\", "
            "\"nan\": null, \"inf\": null}");
  EXPECT_EQ(mtk::to_json({}), "{}");
  EXPECT_EQ(mtk::to_json({{"x", 0.1 + 0.2}}), "{\"x\": 0.30000000000000004}");
  // nlohmann-json keeps a whole double a double: a reader gets 3.0, not the integer 3.
  EXPECT_EQ(mtk::to_json({{"x", 3.0}}), "{\"x\": 3.0}");
  EXPECT_EQ(mtk::to_json({{"x", 1e20}, {"y", -2.5e-7}}), "{\"x\": 1e+20, \"y\": -2.5e-07}");
  // Bytes that are not UTF-8 (a path) are replaced, never thrown or written raw.
  EXPECT_EQ(mtk::to_json({{"path", std::string("a\xff")}}), "{\"path\": \"a\xef\xbf\xbd\"}");
}

// The learning rate is a float in the program: logged by the float's shortest text.
TEST(Metrics, FloatsAsTheirShortestText) {
  EXPECT_EQ(static_cast<double>(0.1f), 0.10000000149011612);
  EXPECT_EQ(mtk::metric_from_float(0.1f), 0.1);
  EXPECT_EQ(mtk::to_json({{"lr", mtk::metric_from_float(0.1f)}}), "{\"lr\": 0.1}");
  EXPECT_EQ(mtk::to_json({{"lr", mtk::metric_from_float(1e-3f)}}), "{\"lr\": 0.001}");
  EXPECT_EQ(mtk::to_json({{"lr", mtk::metric_from_float(3.0517578e-05f)}}),
            "{\"lr\": 3.0517578e-05}");
  for (const float f : {0.0f, -0.0f, 1.0f, 0.01f, 1.17549435e-38f, 3.4028235e38f, 7e-45f})
    EXPECT_EQ(static_cast<float>(mtk::metric_from_float(f)), f) << f;  // the same float
  EXPECT_TRUE(std::isnan(mtk::metric_from_float(std::nanf(""))));
  EXPECT_EQ(mtk::metric_from_float(std::numeric_limits<float>::infinity()),
            std::numeric_limits<double>::infinity());
}

TEST(Metrics, ModelFlopsUtilization) {
  // 1e12 FLOPs per step on 4 processors of 1e12 FLOP/s in 0.5 s: half of the ceiling.
  EXPECT_DOUBLE_EQ(mtk::model_flops_utilization(1e12, 4, 0.5, 1e12), 0.5);
  EXPECT_TRUE(std::isnan(mtk::model_flops_utilization(1e12, 4, 0.5, 0)));   // no ceiling
  EXPECT_TRUE(std::isnan(mtk::model_flops_utilization(1e12, 4, 0, 1e12)));  // no step time
  EXPECT_TRUE(std::isnan(mtk::model_flops_utilization(0, 4, 0.5, 1e12)));
  EXPECT_EQ(mtk::to_json({{"mfu", mtk::model_flops_utilization(1e12, 4, 0.5, 0)}}),
            "{\"mfu\": null}");
}

TEST(Metrics, PeakResidentMemoryGrowsWithWhatWasTouched) {
  const std::int64_t before = mtk::peak_resident_bytes();
  EXPECT_GT(before, 0);
  std::vector<char> block(std::size_t(64) << 20, 1);  // 64 MiB, every page touched
  const std::int64_t after = mtk::peak_resident_bytes();
  EXPECT_GE(after, static_cast<std::int64_t>(block.size()));
  EXPECT_GE(after, before);
}

TEST(Metrics, WriterAppendsLines) {
  mtk::test::TempDir dir;
  const std::string path = dir / "metrics.jsonl";
  {
    mtk::MetricsWriter w(path);
    w.write({{"step", std::int64_t{1}}, {"loss", 4.0}});
    w.write({{"step", std::int64_t{2}}, {"loss", 3.5}});
  }
  {
    mtk::MetricsWriter w(path);  // a resumed run continues the file
    w.write({{"step", std::int64_t{3}}, {"loss", 3.25}});
    mtk::MetricsWriter moved = std::move(w);
    EXPECT_FALSE(w.is_open());
    EXPECT_TRUE(moved.is_open());
  }
  EXPECT_EQ(mtk::test::read_text(path),
            "{\"step\": 1, \"loss\": 4.0}\n{\"step\": 2, \"loss\": 3.5}\n{\"step\": 3, \"loss\": "
            "3.25}\n");
  { mtk::MetricsWriter(path, true).write({{"step", std::int64_t{7}}}); }
  EXPECT_EQ(mtk::test::read_text(path), "{\"step\": 7}\n");
  EXPECT_THROW(mtk::MetricsWriter("/nonexistent-dir/m.jsonl"), mtk::Error);
  mtk::MetricsWriter closed;
  EXPECT_THROW(closed.write({}), mtk::Error);
}

TEST(Metrics, Formatting) {
  EXPECT_EQ(mtk::format_duration(0), "0s");
  EXPECT_EQ(mtk::format_duration(59.4), "59s");
  EXPECT_EQ(mtk::format_duration(185), "3m05s");
  EXPECT_EQ(mtk::format_duration(3 * 3600 + 5 * 60 + 9), "3h05m");
  EXPECT_EQ(mtk::format_duration(2 * 86400 + 3 * 3600), "2d03h");
  EXPECT_EQ(mtk::format_duration(-1), "?");
  EXPECT_EQ(mtk::format_count(950), "950");
  EXPECT_EQ(mtk::format_count(1234), "1.23k");
  EXPECT_EQ(mtk::format_count(52100), "52.1k");
  EXPECT_EQ(mtk::format_count(464000), "464k");
  EXPECT_EQ(mtk::format_count(1.25e6), "1.25M");

  mtk::ProgressInfo p;
  p.step = 1200;
  p.total_steps = 136000;
  p.loss = 4.12341;
  p.tokens_per_s = 52100;
  p.lr = 0.01;
  p.eta_s = 3 * 3600 + 5 * 60;
  EXPECT_EQ(mtk::format_progress(p),
            "step   1200/136000 (0.9%) | loss 4.1234 | 52.1k tok/s | lr 1.00e-02 | ETA 3h05m");
  p.total_steps = 0;
  EXPECT_EQ(mtk::format_progress(p), "step 1200 | loss 4.1234 | 52.1k tok/s | lr 1.00e-02");
}

TEST(Metrics, ProgressMeter) {
  mtk::ProgressMeter m(10, 110);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  m.tick(11, 1000);
  m.tick(20, 1000);
  const auto p = m.report(3.0, 0.001);
  EXPECT_EQ(p.step, 20);
  EXPECT_GT(p.tokens_per_s, 0);
  EXPECT_LT(p.tokens_per_s, 2000 / 0.019);
  // 10 steps took elapsed seconds; 90 remain.
  EXPECT_NEAR(p.eta_s, m.elapsed_s() * 9, m.elapsed_s() * 9 * 0.5);
  // Steps 11..20 (10 steps) took at least the 20 ms slept.
  EXPECT_GE(p.step_time_s, 0.019 / 10);
  EXPECT_LE(p.step_time_s, m.elapsed_s() / 10);
  const auto q = m.report(3.0, 0.001);
  EXPECT_EQ(q.tokens_per_s, 0);  // nothing since the last report
  EXPECT_EQ(q.step_time_s, 0);   // no step either
}

TEST(Metrics, JsonIntField) {
  const std::string line = mtk::to_json({{"step", std::int64_t{1500}},
                                         {"checkpoint", std::string("run/\"step\": 7, x")},
                                         {"loss", 2.5},
                                         {"start", std::int64_t{-3}}});
  EXPECT_EQ(mtk::json_int_field(line, "step"), 1500);
  EXPECT_EQ(mtk::json_int_field(line, "start"), -3);
  EXPECT_EQ(mtk::json_int_field(line, "loss"), std::nullopt);             // not an integer
  EXPECT_EQ(mtk::json_int_field(line, "checkpoint"), std::nullopt);       // a string
  EXPECT_EQ(mtk::json_int_field(line, "x"), std::nullopt);                // only inside a string
  EXPECT_EQ(mtk::json_int_field("{\"step\": 12", "step"), std::nullopt);  // torn
  EXPECT_EQ(mtk::json_int_field("{}", "step"), std::nullopt);
  EXPECT_EQ(mtk::json_int_field("[1, 2]", "step"), std::nullopt);  // not an object
  EXPECT_EQ(mtk::json_int_field("{\"step\":7}", "step"), 7);       // any JSON spacing
  EXPECT_EQ(mtk::json_int_field("{\"step\": 9223372036854775808}", "step"), std::nullopt);
  EXPECT_EQ(mtk::json_int_field("{\"a\": {\"step\": 1}}", "step"), std::nullopt);  // nested
}

TEST(Metrics, TimestampAndJob) {
  EXPECT_EQ(mtk::utc_timestamp(std::chrono::system_clock::from_time_t(1700000000)),
            "2023-11-14T22:13:20Z");
  EXPECT_EQ(mtk::utc_timestamp().size(), 20u);
  const char* saved = std::getenv("SLURM_JOB_ID");
  const std::string old = saved ? saved : "";
  setenv("SLURM_JOB_ID", "4242", 1);
  EXPECT_EQ(mtk::batch_job_id(), "4242");
  unsetenv("SLURM_JOB_ID");
  if (!std::getenv("PBS_JOBID")) {
    EXPECT_EQ(mtk::batch_job_id(), "local");
  }
  if (saved)
    setenv("SLURM_JOB_ID", old.c_str(), 1);
}

// A run logged steps 1..5 (and was killed mid-line) but its newest checkpoint is step 3: resuming
// drops steps 4 and 5 and the torn line, so after the new run logs 4, 5, 6 no step appears twice.
TEST(Metrics, ResumeDropsStepsAfterTheCheckpoint) {
  mtk::test::TempDir dir;
  const std::string path = dir / "metrics.jsonl";
  EXPECT_EQ(mtk::resume_metrics_log(path, 0).start, 1);  // no log yet
  {
    mtk::MetricsWriter w(path);
    for (std::int64_t s = 1; s <= 5; ++s)
      w.write({{"step", s}, {"loss", 5.0 - s}, {"start", std::int64_t{1}}});
    w.write({{"step", std::int64_t{2}}, {"kind", std::string("eval")}});
    w.write({{"note", std::string("no step")}});
  }
  std::string text = mtk::test::read_text(path);
  mtk::test::write_text(path, text + "{\"step\": 6, \"lo");
  const auto r = mtk::resume_metrics_log(path, 3);
  EXPECT_EQ(r.kept, 5);
  EXPECT_EQ(r.dropped, 3);
  EXPECT_EQ(r.start, 2);
  EXPECT_EQ(mtk::test::read_text(path),
            "{\"step\": 1, \"loss\": 4.0, \"start\": 1}\n"
            "{\"step\": 2, \"loss\": 3.0, \"start\": 1}\n"
            "{\"step\": 3, \"loss\": 2.0, \"start\": 1}\n"
            "{\"step\": 2, \"kind\": \"eval\"}\n"
            "{\"note\": \"no step\"}\n");
  {
    mtk::MetricsWriter w(path);
    for (std::int64_t s = 4; s <= 6; ++s)
      w.write({{"step", s}, {"loss", 1.0}, {"start", r.start}});
  }
  std::vector<std::int64_t> steps;
  std::istringstream lines(mtk::test::read_text(path));
  for (std::string line; std::getline(lines, line);)
    if (line.find("\"loss\"") != std::string::npos)
      steps.push_back(*mtk::json_int_field(line, "step"));
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}));

  // Nothing to drop: the file is left alone; the next start counts on.
  text = mtk::test::read_text(path);
  const auto again = mtk::resume_metrics_log(path, 6);
  EXPECT_EQ(again.dropped, 0);
  EXPECT_EQ(again.start, 3);
  EXPECT_EQ(mtk::test::read_text(path), text);
  // A fresh start (step 0) keeps only records without a step.
  EXPECT_EQ(mtk::resume_metrics_log(path, 0).kept, 1);
  // Records of an older log without "start" count as start 1.
  mtk::test::write_text(path, "{\"step\": 1, \"loss\": 4}\n");
  EXPECT_EQ(mtk::resume_metrics_log(path, 1).start, 2);
}

}  // namespace
