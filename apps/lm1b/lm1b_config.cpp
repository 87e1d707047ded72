#include "lm1b_config.hpp"

#include <mtk/config/known_keys.hpp>
#include <mtk/config/model_config.hpp>

#include "training.hpp"

namespace mtk::lm1b {
namespace {

using config::Schema;

// The top-level sections; those after `layout` are on field tables.
const std::vector<std::string> kSections = {"mesh", "layout",     "model", "train",
                                            "data", "checkpoint", "eval",  "program"};

Schema<Settings> make_data_schema() {
  Schema<Settings> s;
  s.text("dir", &Settings::data_dir, "the folder `mtk-lm1b prepare --out` wrote")
      .default_text("dir", "(required)");
  return s;
}

Schema<Settings> make_eval_schema() {
  Schema<Settings> s;
  s.real("logit_scale", &Settings::eval_logit_scale, 1e-6, 1e6,
         "logits multiplied before the softmax in eval (the paper also reports 0.9); "
         "--logit-scale overrides it")
      .integer("max_batches", &Settings::eval_max_batches, 0, config::kMaxSteps,
               "held-out batches evaluated; 0: the whole held-out shard");
  return s;
}

}  // namespace

const Schema<Settings>& data_schema() {
  static const Schema<Settings> schema = make_data_schema();
  return schema;
}

const Schema<Settings>& eval_schema() {
  static const Schema<Settings> schema = make_eval_schema();
  return schema;
}

Settings read_settings(const Config& c) {
  reject_unknown_sections(c, "mtk-lm1b", kSections);
  c.require_section("model");
  Settings s;
  static_cast<config::TrainingSettings&>(s) = config::read_training_settings(c);
  s = data_schema().read(c, "data", s);
  return eval_schema().read(c, "eval", s);
}

Config effective_config(const Config& given, const Settings& settings,
                        const nn::TransformerConfig& model, int ranks) {
  return app::effective_config(
      given, {kSections.begin() + 2, kSections.end()},
      [&](Config& out) {
        write_transformer_config(out, model);
        config::write_training_settings(out, settings);
        data_schema().write(out, "data", settings);
        eval_schema().write(out, "eval", settings);
      },
      ranks);
}

std::string config_reference() {
  return app::shared_config_reference() +
         config::markdown_block("lm1b.data", data_schema().markdown("data")) +
         config::markdown_block("lm1b.eval", eval_schema().markdown("eval"));
}

}  // namespace mtk::lm1b
