// JSON Lines metrics and the progress line.
#include <mtk/base/error.hpp>
#include <mtk/metrics/metrics.hpp>

#include <gtest/gtest.h>

#include "lm_data_test_util.hpp"
#include <cmath>
#include <limits>
#include <thread>

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
  EXPECT_EQ(mtk::to_json({{"x", 3.0}}), "{\"x\": 3}");
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
  EXPECT_EQ(
      mtk::test::read_text(path),
      "{\"step\": 1, \"loss\": 4}\n{\"step\": 2, \"loss\": 3.5}\n{\"step\": 3, \"loss\": 3.25}\n");
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
  const auto q = m.report(3.0, 0.001);
  EXPECT_EQ(q.tokens_per_s, 0);  // nothing since the last report
}

}  // namespace
