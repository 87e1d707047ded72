// mtk-fmnist: trains a small CNN on Fashion-MNIST with its images written in spatial blocks that a
// layout splits over mesh dims (halo exchanges between neighbouring ranks), evaluates it on the
// 10k test images after every epoch and writes the figures as JSON. docs/spatial.md.
//   mpiexec -n 4 mtk-fmnist --config apps/fmnist/configs/fmnist.yaml

#include <mtk/app/app_main.hpp>
#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/training_config.hpp>
#include <mtk/parallel/environment.hpp>

#include "cli.hpp"
#include "fmnist_model.hpp"
#include "say.hpp"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

using namespace mtk;
constexpr const char* kTool = "mtk-fmnist";

struct Settings {
  fmnist::ModelConfig model;
  std::string data_dir, mesh, layout;
  std::int64_t train_limit = 0, test_limit = 0, epochs = 2, steps = 0, log_every = 100;
};

// Mesh text with ',' read as ';' (rows:2,cols:2); "" picks rows:2;cols:2 on 4 ranks, 1x1 on one.
MeshShape mesh_shape(std::string text, int ranks) {
  std::replace(text.begin(), text.end(), ',', ';');
  if (text.empty() && (ranks == 1 || ranks == 4))
    text = ranks == 1 ? "rows:1;cols:1" : "rows:2;cols:2";
  if (text.empty())
    fail(kTool, cat("give --mesh for ", ranks, " ranks (the default mesh is rows:2;cols:2 on 4 ",
                    "ranks or rows:1;cols:1 on one)"));
  const MeshShape shape = MeshShape::parse(text);
  if (shape.num_processors() != ranks)
    fail(kTool, cat("mesh ", shape.to_string(), " has ", shape.num_processors(),
                    " processors, but ", ranks, " ranks run"));
  return shape;
}

// Fails naming a key of `c` that mtk-fmnist does not read (a typo would be ignored otherwise).
void check_keys(const Config& c) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> known = {
      {"", {"mesh", "layout", "data", "model", "train"}},
      {"data", {"dir", "train_limit", "test_limit"}},
      {"model", {"hb", "wb", "c1", "c2", "hidden"}},
      {"train",
       {"batch", "eval_batch", "epochs", "steps", "optimizer", "lr", "seed", "log_every"}}};
  for (const auto& [section, keys] : known) {
    if (!section.empty() && !c.has(section))
      continue;
    if (!section.empty())
      c.require_section(section);
    for (const auto& key : c.keys(section))
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        std::string allowed;
        for (const auto& k : keys)
          allowed += (allowed.empty() ? "" : ", ") + k;
        fail(kTool, cat(c.origin(), ": unknown key '", section.empty() ? "" : section + ".", key,
                        "'; ", section.empty() ? "the sections" : section, " allow: ", allowed));
      }
  }
}

Settings read_settings(const Config& c) {
  check_keys(c);
  Settings s;
  s.mesh = c.get_string("mesh", "");
  s.layout = c.get_string("layout", "hb:rows;wb:cols");
  s.data_dir = c.get_string("data.dir", fmnist::kDefaultDataDir);
  s.train_limit = c.get_int("data.train_limit", 0, 0, 60000);
  s.test_limit = c.get_int("data.test_limit", 0, 0, 10000);
  auto& m = s.model;
  m.hb = c.get_int("model.hb", m.hb, 1, 28);
  m.wb = c.get_int("model.wb", m.wb, 1, 28);
  m.c1 = c.get_int("model.c1", m.c1, 1, 4096);
  m.c2 = c.get_int("model.c2", m.c2, 1, 4096);
  m.hidden = c.get_int("model.hidden", m.hidden, 1, 65536);
  m.batch = c.get_int("train.batch", m.batch, 1, 60000);
  m.eval_batch = c.get_int("train.eval_batch", m.eval_batch, 1, 10000);
  m.optimizer = c.get_string("train.optimizer", m.optimizer);
  m.lr = c.get_double("train.lr", m.lr, 1e-9, 100.0);
  m.seed = static_cast<std::uint64_t>(c.get_int("train.seed", 1, 0, 1 << 30));
  s.epochs = c.get_int("train.epochs", s.epochs, 1, 1000);
  s.steps = c.get_int("train.steps", 0, 0, config::kMaxSteps);
  s.log_every = c.get_int("train.log_every", s.log_every, 1, 1 << 30);
  m.check();
  return s;
}

struct Figures {
  std::vector<double> losses;  // every training step's loss
  std::vector<double> epoch_accuracy, epoch_loss, epoch_seconds;
  double seconds = 0;
};

void write_json(const std::string& path, const Settings& s, const MeshShape& mesh, int ranks,
                const Figures& f) {
  std::ofstream out(path);
  if (!out)
    fail(kTool, cat("cannot write '", path, "'"));
  const auto list = [](const std::vector<double>& v) {
    std::string t = "[";
    char number[32];
    for (size_t i = 0; i < v.size(); ++i) {
      std::snprintf(number, sizeof number, "%.9g", v[i]);
      t += (i ? ", " : "") + std::string(number);
    }
    return t + "]";
  };
  out.precision(9);
  out << "{\"tool\": \"" << kTool << "\", \"ranks\": " << ranks << ", \"mesh\": \""
      << mesh.to_string() << "\", \"layout\": \"" << s.layout << "\", \"batch\": " << s.model.batch
      << ", \"epochs\": " << f.epoch_accuracy.size() << ", \"steps\": " << f.losses.size()
      << ", \"optimizer\": \"" << s.model.optimizer << "\", \"lr\": " << s.model.lr
      << ", \"test_accuracy\": " << (f.epoch_accuracy.empty() ? 0.0 : f.epoch_accuracy.back())
      << ", \"seconds\": " << f.seconds << ", \"epoch_test_accuracy\": " << list(f.epoch_accuracy)
      << ", \"epoch_test_loss\": " << list(f.epoch_loss)
      << ", \"epoch_seconds\": " << list(f.epoch_seconds) << ", \"losses\": " << list(f.losses)
      << "}\n";
}

// Trains, evaluating after every epoch (and after train.steps when that stops it early).
Figures train(const Settings& s, const Mesh& mesh, const fmnist::Dataset& data) {
  using clock = std::chrono::steady_clock;
  fmnist::Trainer trainer(s.model, mesh, LayoutRules::parse(s.layout));
  const std::int64_t n = s.train_limit > 0 ? s.train_limit : data.train_images.count;
  const std::int64_t per_epoch = n / s.model.batch;
  Figures f;
  const auto start = clock::now();
  for (std::int64_t epoch = 0; epoch < s.epochs; ++epoch) {
    const auto epoch_start = clock::now();
    const auto order = fmnist::epoch_order(n, s.model.seed, epoch);
    double sum = 0, correct = 0;
    std::int64_t done = 0;
    for (std::int64_t k = 0; k < per_epoch && !(s.steps && f.losses.size() >= size_t(s.steps));
         ++k, ++done) {
      const std::vector<std::int64_t> batch(order.begin() + k * s.model.batch,
                                            order.begin() + (k + 1) * s.model.batch);
      const auto r = trainer.step(data.train_images, data.train_labels, batch);
      f.losses.push_back(r.loss);
      sum += r.loss;
      correct += r.correct;
      if ((k + 1) % s.log_every == 0)
        app::say("  epoch %lld step %lld/%lld: loss %.4f (mean %.4f), train accuracy %.4f\n",
                 static_cast<long long>(epoch + 1), static_cast<long long>(k + 1),
                 static_cast<long long>(per_epoch), r.loss, sum / double(k + 1),
                 correct / double((k + 1) * s.model.batch));
    }
    const auto test = trainer.evaluate(data.test_images, data.test_labels, s.test_limit);
    f.epoch_seconds.push_back(std::chrono::duration<double>(clock::now() - epoch_start).count());
    f.epoch_accuracy.push_back(test.correct);
    f.epoch_loss.push_back(test.loss);
    app::say(
        "epoch %lld: %lld steps, train loss %.4f, test loss %.4f, test accuracy %.4f, %.1f s\n",
        static_cast<long long>(epoch + 1), static_cast<long long>(done),
        done ? sum / double(done) : 0.0, test.loss, test.correct, f.epoch_seconds.back());
    if (done < per_epoch || (s.steps && f.losses.size() >= size_t(s.steps)))
      break;  // train.steps reached: no epoch of 0 steps after it
  }
  f.seconds = std::chrono::duration<double>(clock::now() - start).count();
  return f;
}

int run(const Communicator& world, const std::vector<std::string>& args) {
  std::string config_path, mesh_text, layout_text, data_dir, json_path = "fmnist-result.json";
  std::vector<std::string> sets;
  CLI::App app{
      "Trains a small CNN on Fashion-MNIST with its images split in height and width\n"
      "over the mesh, and evaluates it on the test set after every epoch.",
      kTool};
  cli::configure(app);
  app.add_option("--config", config_path, "YAML config (apps/fmnist/configs/fmnist.yaml)")
      ->type_name("FILE");
  app.add_option("--set", sets, "Overrides a config key: --set train.epochs=3")->type_name("K=V");
  app.add_option("--mesh", mesh_text, "The mesh, e.g. rows:2,cols:2")->type_name("M");
  app.add_option("--layout", layout_text, "Layout rules, e.g. \"hb:rows;wb:cols\"")->type_name("L");
  app.add_option("--data-dir", data_dir, "Fashion-MNIST's IDX files (data.dir)")->type_name("DIR");
  app.add_option("--json", json_path, "Where the result JSON goes")->type_name("FILE");
  if (const int status = cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;
  Config config = config_path.empty() ? Config::from_string("{}") : Config::from_file(config_path);
  for (const auto& s : sets)
    config.apply_override(s);
  if (!mesh_text.empty())
    config.set_scalar("mesh", mesh_text);
  if (!layout_text.empty())
    config.set_scalar("layout", layout_text);
  if (!data_dir.empty())
    config.set_scalar("data.dir", data_dir);
  const Settings s = read_settings(config);
  const MeshShape shape = mesh_shape(s.mesh, world.size());
  const Mesh mesh(shape, world);
  app::say(cat(kTool, ": mesh ", shape.to_string(), ", layout ", s.layout, ", ", world.size(),
               " ranks, ", kokkos_description(), "\n"));
  const auto data = fmnist::read_fashion_mnist(s.data_dir, s.train_limit, s.test_limit);
  app::say("  %lld training and %lld test images from %s\n",
           static_cast<long long>(data.train_images.count),
           static_cast<long long>(data.test_images.count), s.data_dir.c_str());
  const Figures f = train(s, mesh, data);
  app::say("%s: test accuracy %.4f after %zu steps in %.1f s -> %s\n", kTool,
           f.epoch_accuracy.empty() ? 0.0 : f.epoch_accuracy.back(), f.losses.size(), f.seconds,
           json_path.c_str());
  if (world.rank() == 0)
    write_json(json_path, s, shape, world.size(), f);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mtk::app_main(argc, argv, {kTool}, run);
}
