// Every config shipped in apps/lm1b/configs and apps/wmt/configs reads through the apps' own
// tables (every section), and its effective config (--print-config, config.resolved.yaml: every
// key written) reads back to the same settings and prints the same again.

#include <mtk/config/model_config.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include "lm1b_config.hpp"
#include "wmt_config.hpp"
#include <filesystem>

using namespace mtk;

namespace {

using mtk::test::error_of;

std::vector<std::string> configs_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(MTK_SOURCE_DIR) + "/" + dir))
    if (e.path().extension() == ".yaml")
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The model as the apps read it, model.vocab_size defaulting to a vocabulary of 8000.
nn::TransformerConfig model_of(const Config& c) {
  Config cfg = c;
  if (!cfg.has("model.vocab_size"))
    cfg.set("model.vocab_size", "8000");
  return transformer_config_from(cfg);
}

}  // namespace

TEST(AppConfigs, Lm1bConfigsReadAndTheirEffectiveConfigsRoundTrip) {
  const auto paths = configs_in("apps/lm1b/configs");
  ASSERT_GE(paths.size(), 8u);
  for (const auto& path : paths) {
    const Config given = Config::from_file(path);
    const lm1b::Settings s = lm1b::read_settings(given);
    const nn::TransformerConfig model = model_of(given);
    const Config effective = lm1b::effective_config(given, s, model, 4);
    const Config again = Config::from_string(effective.dump(), "effective");
    const lm1b::Settings s2 = lm1b::read_settings(again);
    const nn::TransformerConfig model2 = transformer_config_from(again);
    EXPECT_EQ(lm1b::effective_config(again, s2, model2, 4).dump(), effective.dump()) << path;
    EXPECT_EQ(model2.to_string(), model.to_string()) << path;
    EXPECT_FALSE(again.has("model.preset")) << path;
    for (const auto& key : config::train_schema().keys())
      // Only the chosen optimizer's (adafactor in these); `mesh: auto`'s memory_per_rank and
      // machine are empty texts unless set, and left out then.
      if (key.rfind("adam.", 0) != 0 && key != "memory_per_rank" && key != "machine") {
        EXPECT_TRUE(again.has("train." + key)) << path << ": train." << key;
      }
  }
}

TEST(AppConfigs, WmtConfigsReadAndTheirEffectiveConfigsRoundTrip) {
  const auto paths = configs_in("apps/wmt/configs");
  ASSERT_GE(paths.size(), 7u);
  for (const auto& path : paths) {
    const Config given = Config::from_file(path);
    const wmt::Settings s = wmt::read_settings(given);
    const wmt::DataSettings data = wmt::read_data_settings(given);  // what prepare reads
    EXPECT_FALSE(data.train.empty()) << path;
    EXPECT_EQ(data.max_length, given.get_int("data.max_length", model_of(given).length)) << path;
    const nn::TransformerConfig model = model_of(given);
    const Config effective = wmt::effective_config(given, s, model, 2);
    const Config again = Config::from_string(effective.dump(), "effective");
    const wmt::Settings s2 = wmt::read_settings(again);
    const nn::TransformerConfig model2 = transformer_config_from(again);
    EXPECT_EQ(wmt::effective_config(again, s2, model2, 2).dump(), effective.dump()) << path;
    EXPECT_EQ(s2.data.train, s.data.train) << path;
    EXPECT_EQ(s2.translate.alpha, s.translate.alpha) << path;
  }
}

TEST(AppConfigs, AppSectionsAreChecked) {
  std::string e = error_of(
      [] { lm1b::read_settings(Config::from_string("eval: {logit_scale: 0}\n", "a.yaml")); });
  EXPECT_NE(e.find("a.yaml: eval.logit_scale = 0 is not a number in [1e-06, 1e+06]"),
            std::string::npos)
      << e;
  e = error_of(
      [] { wmt::read_settings(Config::from_string("translate: {beam: 65}\n", "w.yaml")); });
  EXPECT_NE(e.find("w.yaml: translate.beam = 65 is not an integer in [1, 64]"), std::string::npos)
      << e;
  e = error_of(
      [] { wmt::read_settings(Config::from_string("data: {model_tyep: bpe}\n", "w.yaml")); });
  EXPECT_NE(e.find("unknown key 'data.model_tyep'; did you mean 'data.model_type'?"),
            std::string::npos)
      << e;
  e = error_of([] { lm1b::read_settings(Config::from_string("translate: {}\n", "a.yaml")); });
  EXPECT_NE(e.find("unknown section 'translate'"), std::string::npos) << e;
}
