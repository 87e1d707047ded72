// Layout rules naming no tensor dimension (apps/common/layout_check.hpp, issue 64): a typo such as
// `batchh:batch` or `d_fff:model` left the dim unsplit without a word. A rule for a dim the model
// has under other settings (`experts` in a dense model: the paper's rules are shared) passes; one
// matching no dim of the model and no known dim name is a warning, printed once, and with
// --strict-layout an error naming the rule and the nearest dim.

#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/nn/transformer.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include "layout_check.hpp"
#include "model_fixtures.hpp"
#include <algorithm>
#include <filesystem>

using namespace mtk;
using mtk::test::contains;
using mtk::test::error_of;
using mtk::test::expect_parts;

namespace {

nn::TransformerConfig dense() {
  // vocab, d_model, d_ff, heads x d_kv, layers, length, batch
  return test::sized_transformer({32, 16, 32, 2, 8, 1, 8, 4});
}

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST(LayoutRulesCheck, TransformerDimNamesCoverEveryFeature) {
  const auto& names = app::transformer_dim_names();
  for (const std::string dim :
       {"batch", "length", "d_model", "d_ff", "heads", "d_kv", "vocab", "experts",
        "expert_capacity", "moe_group", "attention_block", "beam", "cache_length", "memory_length"})
    EXPECT_TRUE(has(names, dim)) << dim;
  EXPECT_FALSE(has(names, "batchh"));
  EXPECT_FALSE(has(names, "d_fff"));
}

TEST(LayoutRulesCheck, UnmatchedDimsAskTheKnownNamesOnlyWhenNeeded) {
  int asked = 0;
  const auto known = [&] {
    ++asked;
    return std::vector<std::string>{"experts"};
  };
  const std::vector<std::string> dims = {"batch", "d_ff"};
  EXPECT_TRUE(app::unmatched_rule_dims(LayoutRules::parse("batch:b;d_ff:m"), dims, known).empty());
  EXPECT_EQ(asked, 0);
  EXPECT_EQ(app::unmatched_rule_dims(LayoutRules::parse("batch:b;experts:m;batchh:b;d_fff:m"), dims,
                                     known),
            (std::vector<std::string>{"batchh", "d_fff"}));
  EXPECT_EQ(asked, 1);
}

TEST(LayoutRulesCheck, TyposWarnOnceAndFailWhenStrict) {
  Graph g;
  nn::build_transformer(g, dense(), true);
  const auto dims = app::graph_dim_names(g);
  EXPECT_TRUE(has(dims, "d_ff"));
  EXPECT_FALSE(has(dims, "experts"));
  // The paper's shared rules on a dense model: `experts` is a dim of MoE models, no typo.
  testing::internal::CaptureStderr();
  app::check_layout_rules(g, LayoutRules::parse("batch:batch;experts:model;d_ff:model"),
                          app::transformer_dim_names, true, "mtk-test");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  // A typo: a warning naming the rule and the nearest dim, once.
  const LayoutRules typo = LayoutRules::parse("batch:batch;d_fff:model");
  testing::internal::CaptureStderr();
  app::check_layout_rules(g, typo, app::transformer_dim_names, false, "mtk-test");
  app::check_layout_rules(g, typo, app::transformer_dim_names, false, "mtk-test");
  const std::string warned = testing::internal::GetCapturedStderr();
  expect_parts(warned, {"mtk-test: warning", "'d_fff:model'", "did you mean 'd_ff'?",
                        "--strict-layout makes this an error"});
  EXPECT_EQ(warned.find("warning"), warned.rfind("warning")) << warned;  // once
  // --strict-layout: an error.
  const std::string e = error_of([&] {
    app::check_layout_rules(g, LayoutRules::parse("batchh:batch"), app::transformer_dim_names, true,
                            "mtk-test");
  });
  expect_parts(e, {"mtk::app::check_layout_rules", "'batchh:batch'", "did you mean 'batch'?",
                   "--strict-layout", "the model's dims: "});
}

TEST(LayoutRulesCheck, ShippedLayoutsNameKnownDims) {
  // No false alarm on the layouts MTK ships (every one a Transformer's).
  const std::string root = MTK_SOURCE_DIR;
  int checked = 0;
  for (const std::string dir :
       {"layouts", "apps/lm1b/configs", "apps/wmt/configs", "bench/layout-search",
        "bench/reproduction", "tests/lm1b", "tests/wmt"}) {
    for (const auto& entry : std::filesystem::directory_iterator(root + "/" + dir)) {
      if (entry.path().extension() != ".yaml")
        continue;
      const Config c = Config::from_file(entry.path().string());
      if (!c.has("layout") || (c.keys("layout").empty() && c.get_string("layout") == "auto"))
        continue;
      const auto unmatched =
          app::unmatched_rule_dims(c.layout_rules(), {}, app::transformer_dim_names);
      EXPECT_TRUE(unmatched.empty()) << entry.path() << ": " << unmatched.front();
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}
