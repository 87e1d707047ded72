#include "fmnist_config.hpp"

#include <mtk/base/error.hpp>
#include <mtk/config/known_keys.hpp>
#include <mtk/config/program_config.hpp>
#include <mtk/config/training_config.hpp>

#include "say.hpp"
#include "training.hpp"
#include <algorithm>

namespace mtk::fmnist {
namespace {

using config::Schema;
constexpr const char* kTool = "mtk-fmnist";

// The top-level sections; those after `layout` are on field tables (checkpoint and program are
// the other training apps' tables).
const std::vector<std::string> kSections = {"mesh",  "layout",     "data",   "model",
                                            "train", "checkpoint", "program"};

Schema<Settings> make_data_schema() {
  Schema<Settings> s;
  s.text("dir", &Settings::data_dir, "the folder of Fashion-MNIST's four IDX files (.gz)")
      .integer("train_limit", &Settings::train_limit, 0, 60000,
               "training images used, the first ones; 0: all of the file's")
      .integer("test_limit", &Settings::test_limit, 0, 10000,
               "test images evaluated after every epoch; 0: all; a multiple of train.eval_batch");
  return s;
}

Schema<ModelConfig> make_model_fields() {
  Schema<ModelConfig> s;
  s.integer("hb", &ModelConfig::hb, 1, 28,
            "blocks of the image height (28 = hb x h; 1, 2, 7 or 14), which a layout may split")
      .integer("wb", &ModelConfig::wb, 1, 28, "blocks of the image width (as model.hb)")
      .integer("c1", &ModelConfig::c1, 1, 4096, "channels of conv 1")
      .integer("c2", &ModelConfig::c2, 1, 4096, "channels of conv 2")
      .integer("hidden", &ModelConfig::hidden, 1, 65536, "units of the dense layer");
  return s;
}

// The members of ModelConfig the train section sets.
Schema<ModelConfig> make_train_fields() {
  Schema<ModelConfig> s;
  s.integer("batch", &ModelConfig::batch, 1, 60000, "training batch (images per step)")
      .integer("eval_batch", &ModelConfig::eval_batch, 1, 10000, "evaluation batch")
      .choice("optimizer", &ModelConfig::optimizer, {"adam", "sgd"}, "the optimizer")
      .real("lr", &ModelConfig::lr, 1e-9, 100.0, "learning rate (constant)")
      .integer("seed", &ModelConfig::seed, 0, std::int64_t{1} << 30,
               "initial weights and data order");
  return s;
}

Schema<Settings> make_model_schema() {
  Schema<Settings> s;
  s.nested("", &Settings::model, make_model_fields());
  return s;
}

Schema<Settings> make_train_schema() {
  Schema<Settings> s;
  s.integer("epochs", &Settings::epochs, 1, 1000, "passes over the training images")
      .integer("steps", &Settings::steps, 0, config::kMaxSteps,
               "stop after this many steps (the test set is evaluated then); 0: every epoch")
      .integer("log_every", &Settings::log_every, 1, std::int64_t{1} << 30,
               "steps per progress line")
      .text("run_dir", &Settings::run_dir, "the run directory when --run-dir is not given")
      .nested("", &Settings::model, make_train_fields());
  return s;
}

}  // namespace

const Schema<Settings>& data_schema() {
  static const Schema<Settings> schema = make_data_schema();
  return schema;
}

const Schema<Settings>& model_schema() {
  static const Schema<Settings> schema = make_model_schema();
  return schema;
}

const Schema<Settings>& train_schema() {
  static const Schema<Settings> schema = make_train_schema();
  return schema;
}

Settings read_settings(const Config& c) {
  reject_unknown_sections(c, kTool, kSections);
  Settings s = data_schema().read(c, "data");
  s = model_schema().read(c, "model", s);
  s = train_schema().read(c, "train", s);
  // The checkpoint section is the other training apps' (one table, one meaning).
  const config::TrainingSettings ckpt = config::checkpoint_schema().read(c, "checkpoint");
  s.checkpoint_every = ckpt.checkpoint_every;
  s.checkpoint_keep = ckpt.checkpoint_keep;
  s.checkpoint_fletcher32 = ckpt.checkpoint_fletcher32;
  s.program = config::program_schema().read(c, "program");
  try {
    s.model.check();
  } catch (const Error& e) {
    config::fail_in(c, "mtk::fmnist::read_settings", e);
  }
  return s;
}

Config effective_config(const Config& given, const Settings& settings, const std::string& mesh,
                        const std::string& layout) {
  Config out = app::effective_config(
      given, {kSections.begin() + 2, kSections.end()},
      [&](Config& c) {
        data_schema().write(c, "data", settings);
        model_schema().write(c, "model", settings);
        train_schema().write(c, "train", settings);
        config::TrainingSettings ckpt;
        ckpt.checkpoint_every = settings.checkpoint_every;
        ckpt.checkpoint_keep = settings.checkpoint_keep;
        ckpt.checkpoint_fletcher32 = settings.checkpoint_fletcher32;
        config::checkpoint_schema().write(c, "checkpoint", ckpt);
        config::program_schema().write(c, "program", settings.program);
      },
      1);
  out.set_scalar("mesh", mesh);
  out.set_scalar("layout", layout);
  return out;
}

std::string config_reference() {
  const config::TrainingSettings shared;
  return config::markdown_block("fmnist.data", data_schema().markdown("data")) +
         config::markdown_block("fmnist.model", model_schema().markdown("model")) +
         config::markdown_block("fmnist.train", train_schema().markdown("train")) +
         config::markdown_block("checkpoint",
                                config::checkpoint_schema().markdown("checkpoint", shared)) +
         config::markdown_block("program", config::program_schema().markdown("program"));
}

MeshShape mesh_for_ranks(Config& config, int ranks) {
  if (!config.has("mesh") && (ranks == 1 || ranks == 4))
    config.set_scalar("mesh", ranks == 1 ? "rows:1;cols:1" : "rows:2;cols:2");
  if (!config.has("mesh"))
    fail(kTool, cat("give a mesh (--mesh, or `mesh` in the config) for ", ranks,
                    " ranks; without one mtk-fmnist runs rows:2;cols:2 on 4 ranks and "
                    "rows:1;cols:1 on one"));
  if (config.keys("mesh").empty()) {  // a string, not a map
    std::string text = config.get_string("mesh");
    if (text.find(',') != std::string::npos) {
      const std::string old = text;
      std::replace(text.begin(), text.end(), ',', ';');
      app::say(cat(kTool, ": warning: mesh \"", old, "\" separates its dims with ','; that ",
                   "spelling is deprecated and goes in the next release: write \"", text, "\"\n"));
      config.set_scalar("mesh", text);
    }
  }
  return app::mesh_for_ranks(config, ranks, kTool);
}

}  // namespace mtk::fmnist
