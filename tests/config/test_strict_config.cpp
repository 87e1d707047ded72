// Strict configs (issue 64): no setting is silently ignored or misread. A key given twice in any
// YAML map (yaml-cpp keeps the first) and a key with a '.' inside a section (never addressable)
// are errors naming the key and its lines; every number of a machine file is finite and in range,
// memory sizes converted with a range check; byte sizes (--memory, train.memory_per_rank) of
// less than a byte or beyond 64 bits are refused; elementwise_by_kind names known step kinds only.

#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/machine_config.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/config/training_config.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>

using namespace mtk;
using mtk::test::contains;
using mtk::test::error_of;
using mtk::test::expect_parts;

namespace {

Config yaml(const std::string& text, const std::string& origin = "run.yaml") {
  return Config::from_string(text, origin);
}

const std::string kMachine =
    "name: test\nmatmul_flops: 1e10\nelementwise_bytes: 1e10\n"
    "links: {node: {span: 0, bandwidth: 1e10, latency: 1e-6}}\n";

// The error machine_from_config gives for kMachine with `line` added (or replacing its key).
std::string machine_error(const std::string& line) {
  std::string text;
  std::istringstream in(kMachine);
  const std::string key = line.substr(0, line.find(':'));
  for (std::string l; std::getline(in, l);)
    if (l.rfind(key + ":", 0) != 0)
      text += l + "\n";
  return error_of([&] { machine_from_config(yaml(text + line + "\n", "m.yaml")); });
}

}  // namespace

TEST(StrictConfig, DuplicateKeysNameTheKeyAndBothLines) {
  // A key repeated inside a section: the second would be silently dropped.
  std::string e = error_of([] { yaml("model:\n  d_model: 32\n  num_layers: 2\n  d_model: 64\n"); });
  expect_parts(e, {"mtk::Config", "run.yaml", "'model.d_model'", "line 2", "line 4", "twice"});
  // A second section of the same name (its num_layers would be dropped).
  e = error_of(
      [] { yaml("model:\n  d_model: 32\ntrain:\n  steps: 20\nmodel:\n  num_layers: 4\n"); });
  expect_parts(e, {"run.yaml", "'model'", "line 1", "line 5"});
  e = error_of([] { yaml("train: {steps: 20, steps: 3}\n"); });
  expect_parts(e, {"'train.steps'", "line 1"});
  // Deeper, and inside lists.
  e = error_of([] { yaml("model:\n  moe:\n    num_experts: 2\n    num_experts: 4\n"); });
  expect_parts(e, {"'model.moe.num_experts'", "line 3", "line 4"});
  e = error_of([] { yaml("items:\n  - {a: 1, a: 2}\n"); });
  expect_parts(e, {"'items[0].a'"});
  // Mesh and layout maps too: a tensor dim given two rules.
  e = error_of([] { yaml("layout:\n  batch: batch\n  batch: model\n"); });
  expect_parts(e, {"'layout.batch'", "line 2", "line 3"});
  // The same key in different sections, or a key equal to its section's, is fine.
  EXPECT_NO_THROW(yaml("model: {batch: 8}\ntrain: {batch: 8}\nbatch: {batch: 1}\n"));
}

TEST(StrictConfig, DuplicateKeysInFilesAndOverrides) {
  const auto dir = std::filesystem::temp_directory_path() / "mtk_strict_config";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "dup.yaml").string();
  std::ofstream(path) << "# a comment\ntrain:\n  steps: 20\n  steps: 3\n";
  expect_parts(error_of([&] { Config::from_file(path); }),
               {path, "'train.steps'", "line 3", "line 4"});
  // A machine file repeating matmul_flops.
  std::ofstream(path) << kMachine << "matmul_flops: 2e10\n";
  expect_parts(error_of([&] { machine_from_file(path); }),
               {path, "'matmul_flops'", "line 2", "line 5"});
  std::filesystem::remove_all(dir);
  // --set with a map value repeating a key.
  Config c = yaml("train: {steps: 1}\n");
  expect_parts(error_of([&] { c.apply_override("model={d_model: 32, d_model: 64}"); }),
               {"'model.d_model'", "twice"});
}

TEST(StrictConfig, DottedKeysInsideSectionsAreRefused) {
  // Today "learning_rate.value" passed the unknown-key check and was ignored.
  std::string e = error_of([] { yaml("train: {\"learning_rate.value\": 0.5}\n"); });
  expect_parts(e, {"run.yaml", "'learning_rate.value'", "'train'", "line 1",
                   "train: {learning_rate: {value: 0.5}}"});
  e = error_of([] { yaml("model:\n  \"moe.num_experts\": 4\n"); });
  expect_parts(e, {"'moe.num_experts'", "line 2", "model: {moe: {num_experts: 4}}"});
  e = error_of([] { yaml("\"train.steps\": 5\n"); });
  expect_parts(e, {"'train.steps'", "train: {steps: 5}"});
  // The nested forms are read.
  EXPECT_EQ(transformer_config_from(yaml("model: {moe: {num_experts: 4}}\n")).moe.num_experts, 4);
  EXPECT_EQ(config::read_training_settings(yaml("train: {learning_rate: {value: 0.5}}\n")).lr.value,
            0.5);
  // --set keys stay dotted paths.
  Config c = yaml("{}");
  c.apply_override("model.moe.num_experts=4");
  EXPECT_EQ(transformer_config_from(c).moe.num_experts, 4);
}

TEST(StrictConfig, NumbersAreFinite) {
  const Config c = yaml("a: .nan\nb: .inf\nc: -.inf\nd: 1.5\n");
  for (const std::string key : {"a", "b", "c"})
    expect_parts(error_of([&] { c.get_double(key); }), {"run.yaml", key + " = ", "finite"});
  EXPECT_EQ(c.get_double("d"), 1.5);
  expect_parts(error_of([&] { c.get_positive("a"); }), {"a = .nan", "a finite number > 0"});
  expect_parts(error_of([&] { c.get_double("b", 0.0, 0.0, std::numeric_limits<double>::max()); }),
               {"b = .inf", "a finite number >= 0"});
  EXPECT_EQ(c.get_positive("d"), 1.5);
  EXPECT_EQ(c.get_positive("e", 2.0), 2.0);
}

TEST(StrictConfig, WholeNumbersAreConvertedWithARangeCheck) {
  const Config c = yaml("a: 4.0e9\nb: 4e+09\nc: 1.0e30\nd: .nan\ne: 0.5\nf: -1\ng: 7\n");
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(c.get_whole("a", 0, 0, max), 4000000000);
  EXPECT_EQ(c.get_whole("b", 0, 0, max), 4000000000);
  EXPECT_EQ(c.get_whole("g", 0, 0, max), 7);
  EXPECT_EQ(c.get_whole("missing", 3, 0, max), 3);
  for (const std::string key : {"c", "d", "e", "f"})
    expect_parts(error_of([&] { c.get_whole(key, 0, 0, max); }),
                 {"run.yaml", key + " = ", "is not a whole number >= 0"});
  std::int64_t v = 0;
  EXPECT_TRUE(config::whole_int64(-9223372036854775808.0, v));
  EXPECT_EQ(v, std::numeric_limits<std::int64_t>::min());
  EXPECT_FALSE(config::whole_int64(9223372036854775808.0, v));
  EXPECT_FALSE(config::whole_int64(std::numeric_limits<double>::quiet_NaN(), v));
  EXPECT_FALSE(config::whole_int64(std::numeric_limits<double>::infinity(), v));
  EXPECT_FALSE(config::whole_int64(0.5, v));
}

TEST(StrictConfig, MachineFileNumbersAreFiniteAndInRange) {
  ASSERT_EQ(machine_error(""), "");
  // memory_bytes: today 1.0e30 and .nan read as -9223372036854775808, 0.5 as 0 ("no limit").
  for (const std::string v : {"1.0e30", ".nan", "0.5", "-1", ".inf", "lots"})
    expect_parts(machine_error("memory_bytes: " + v),
                 {"m.yaml", "memory_bytes = " + v, "whole number"});
  EXPECT_EQ(machine_from_config(yaml(kMachine + "memory_bytes: 4.0e9\n")).memory_bytes, 4000000000);
  EXPECT_EQ(machine_from_config(yaml(kMachine + "memory_bytes: 17179869184\n")).memory_bytes,
            17179869184);
  // Rates > 0, times >= 0, all finite.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"matmul_flops", ".inf"},      {"matmul_flops", ".nan"},      {"matmul_flops", "0"},
      {"elementwise_bytes", ".inf"}, {"matmul_bf16_flops", ".inf"}, {"matmul_bf16_flops", "-1"},
      {"op_overhead_s", ".nan"},     {"op_overhead_s", ".inf"},     {"op_overhead_s", "-1e-6"}};
  for (const auto& [key, value] : bad)
    expect_parts(machine_error(key + ": " + value), {"m.yaml", key + " = " + value, "finite"});
  const std::string links = "links: {node: {span: 0, bandwidth: 1e10, latency: 1e-6}}";
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{{"latency: 1e-6", "latency: .nan"},
                                                        {"latency: 1e-6", "latency: .inf"},
                                                        {"bandwidth: 1e10", "bandwidth: .inf"},
                                                        {"span: 0", "span: 1e30"},
                                                        {"span: 0", "span: 0.5"}}) {
    std::string line = links;
    line.replace(line.find(from), from.size(), to);
    expect_parts(machine_error(line), {"m.yaml", "links.node." + to.substr(0, to.find(':')),
                                       to.substr(to.find(' ') + 1)});
  }
  // Measured points too.
  expect_parts(machine_error("matmul_sizes: {a: {gemm_flops: .inf, flops: 1e9}}"),
               {"m.yaml", "matmul_sizes.a.gemm_flops = .inf"});
  expect_parts(
      machine_error("links: {node: {bandwidth: 1e10, halo_sizes: {a: {bytes: 8, seconds: .nan}}}}"),
      {"m.yaml", "links.node.halo_sizes.a.seconds = .nan"});
}

TEST(StrictConfig, ElementwiseKindsMustBeStepKinds) {
  const cost::Machine m =
      machine_from_config(yaml(kMachine + "elementwise_by_kind: {binary: 2e10, reduce: 1e9}\n"));
  EXPECT_EQ(m.elementwise_by_kind.at(cost::KindKey::named("binary")), 2e10);
  // Keys are made from known kinds only.
  expect_parts(error_of([] { cost::KindKey::named("binray"); }),
               {"mtk::cost::KindKey::named", "'binray'", "binary"});
  // A misspelt kind fell back to elementwise_bytes without a word.
  const std::string e = machine_error("elementwise_by_kind: {binray: 2e10}");
  expect_parts(e, {"mtk::machine_from_config", "m.yaml", "'binray'", "did you mean 'binary'",
                   "known: ", "einsum", "reduce", "unary"});
  expect_parts(machine_error("elementwise_by_kind: {unary: .inf}"),
               {"elementwise_by_kind.unary = .inf"});
  expect_parts(machine_error("elementwise_by_kind: 5"), {"'elementwise_by_kind'", "section"});
}

TEST(StrictConfig, StepKindsAreEveryOpKindOfTheSources) {
  // machine_step_kinds() is a list: every make_op_kind name in core/, no other.
  const std::regex define(R"(make_op_kind<[^>]*>\(\s*"([^"]+)\")");
  std::set<std::string> defined;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(std::string(MTK_SOURCE_DIR) + "/core")) {
    const std::string path = entry.path().string();
    if (!entry.is_regular_file() || (path.size() < 4 || (path.substr(path.size() - 4) != ".cpp" &&
                                                         path.substr(path.size() - 4) != ".hpp")))
      continue;
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (std::sregex_iterator it(text.begin(), text.end(), define), end; it != end; ++it)
      defined.insert((*it)[1].str());
  }
  ASSERT_GT(defined.size(), 20u) << "the search looks in the wrong place";
  const auto& listed = machine_step_kinds();
  const std::set<std::string> in_list(listed.begin(), listed.end());
  for (const auto& kind : defined)
    EXPECT_TRUE(in_list.count(kind))
        << "step kind '" << kind << "' (make_op_kind in core/) is missing from "
        << "cost::step_kind_names() in core/mtk/cost/kind_key.cpp";
  for (const auto& kind : in_list)
    EXPECT_TRUE(defined.count(kind))
        << "machine_step_kinds() lists '" << kind << "', which no make_op_kind in core/ defines";
  EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end())) << "KindKey::named searches it";
}

TEST(StrictConfig, ByteSizesAreWholeBytesInsideSixtyFourBits) {
  const char* where = "mtk-layout search";
  EXPECT_EQ(config::parse_byte_size("16GiB", where, "--memory"), std::int64_t{16} << 30);
  EXPECT_EQ(config::parse_byte_size("1.5K", where, "--memory"), 1500);
  EXPECT_EQ(config::parse_byte_size("8e9", where, "--memory"), 8000000000);
  // "0.5" silently meant "no limit" (0); "1e30" and "inf" wrapped.
  for (const std::string text : {"0.5", "0.9B", "1e30", "inf", "1e30GiB", "nan", "0", "-4G"})
    expect_parts(error_of([&] { config::parse_byte_size(text, where, "--memory"); }),
                 {where, "--memory '" + text + "'"});
  expect_parts(error_of([] { config::parse_byte_size("0.5", "w", "--memory"); }),
               {"less than one byte"});
  // train.memory_per_rank the same, naming the file.
  expect_parts(
      error_of([] { config::read_training_settings(yaml("train: {memory_per_rank: \"0.5\"}\n")); }),
      {"run.yaml", "train.memory_per_rank", "0.5"});
}

// Every machine file shipped in layouts/machines reads, writes and reads again to the same file
// (machine_to_yaml's numbers have 4 digits: the second write is the first's fixed point), with
// the same step kinds, links and values within that rounding; required keys are named when missing.
TEST(StrictConfig, ShippedMachineFilesRoundTrip) {
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(MTK_SOURCE_DIR) + "/layouts/machines")) {
    if (entry.path().extension() != ".yaml")
      continue;
    ++files;
    const std::string path = entry.path().string();
    const cost::Machine m = machine_from_file(path);
    const std::string once = machine_to_yaml(m, "round trip");
    const cost::Machine back = machine_from_config(yaml(once, "back.yaml"));
    EXPECT_EQ(machine_to_yaml(back, "round trip"), once) << path;
    EXPECT_EQ(back.name, m.name) << path;
    auto close = [&](double a, double b) { return std::abs(a - b) <= 5e-4 * std::abs(a); };
    EXPECT_TRUE(close(m.matmul_flops, back.matmul_flops)) << path;
    EXPECT_TRUE(close(m.elementwise_bytes, back.elementwise_bytes)) << path;
    ASSERT_EQ(back.elementwise_by_kind.size(), m.elementwise_by_kind.size()) << path;
    for (const auto& [kind, rate] : m.elementwise_by_kind)
      EXPECT_TRUE(close(rate, back.elementwise_by_kind.at(kind))) << path << " " << kind.name();
    ASSERT_EQ(back.links.size(), m.links.size()) << path;
    for (std::size_t i = 0; i < m.links.size(); ++i) {
      EXPECT_EQ(back.links[i].span, m.links[i].span) << path;
      EXPECT_EQ(back.links[i].stride, m.links[i].stride) << path;
      EXPECT_TRUE(close(m.links[i].bandwidth, back.links[i].bandwidth)) << path;
      EXPECT_EQ(back.links[i].halo_by_copies, m.links[i].halo_by_copies) << path;
      EXPECT_EQ(back.links[i].allreduce_sizes.size(), m.links[i].allreduce_sizes.size()) << path;
    }
  }
  EXPECT_GE(files, 4);
  expect_parts(machine_error("matmul_flops:"), {"m.yaml", "'matmul_flops'"});
  std::string no_bandwidth = kMachine;
  no_bandwidth.replace(no_bandwidth.find("bandwidth: 1e10, "), 17, "");
  expect_parts(error_of([&] { machine_from_config(yaml(no_bandwidth, "m.yaml")); }),
               {"m.yaml", "'links.node.bandwidth' is missing"});
  // The schema's ranges: a rate below one per second, a negative latency.
  expect_parts(machine_error("elementwise_bytes: 0.5"), {"elementwise_bytes = 0.5", ">= 1"});
  expect_parts(error_of([&] {
                 machine_from_config(
                     yaml("name: t\nmatmul_flops: 1e10\nelementwise_bytes: 1e10\n"
                          "links: {node: {span: 0, bandwidth: 1e10, latency: -1}}\n",
                          "m.yaml"));
               }),
               {"m.yaml", "links.node.latency = -1"});
}
