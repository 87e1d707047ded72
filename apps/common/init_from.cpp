#include "init_from.hpp"

#include <mtk/base/error.hpp>

#include "checkpoint_match.hpp"
#include <algorithm>
#include <filesystem>

namespace mtk::app {

void add_init_from_options(CLI::App& app, RunOptions& o) {
  auto* init = app.add_option("--init-from", o.init_from,
                              "Starts a new run at step 0 from this checkpoint's trained weights "
                              "(a checkpoint, checkpoints/ or run directory; any mesh and layout): "
                              "optimizer, schedule and data from the config")
                   ->type_name("CHECKPOINT");
  if (auto* restore = app.get_option_no_throw("--restore"))
    init->excludes(restore);
  app.add_option("--init-exclude", o.init_exclude,
                 "With --init-from: leaves the variables this glob names to their initializers "
                 "(repeatable), e.g. 'embedding' or 'layer_1/*'; matched against the whole name "
                 "and each tail after a '/'")
      ->type_name("PATTERN")
      ->allow_extra_args(false)
      ->needs(init);
}

namespace {

std::string joined(const std::vector<std::string>& names, const std::string& sep = ", ") {
  std::string out;
  for (const auto& n : names)
    out += (out.empty() ? "" : sep) + n;
  return out;
}

// The trained (float32, trainable) variables of `g`, in creation order: what a fine-tune takes.
std::vector<std::string> trained_variables(Graph& g) {
  std::vector<std::string> names;
  for (int i : g.variable_ops())
    if (g.variable_attrs(i).trainable)
      names.push_back(g.op(i).name);
  return names;
}

// Another vocabulary than the data's: token ids mean other pieces, so every variable indexed by
// them must start afresh (excluded), else refused naming them.
void check_vocabulary_change(const InitFromPlan& plan, const RunOptions& o, Graph& g,
                             const std::string& tool) {
  const std::string& was = plan.meta.vocab_fingerprint;
  if (was.empty() || o.vocab_fingerprint.empty() || was == o.vocab_fingerprint)
    return;
  std::vector<std::string> loaded_vocab_vars;
  for (const auto& name : plan.weights.loaded)
    if (g.tensor_info(g.variable(name).id()).shape.contains("vocab"))
      loaded_vocab_vars.push_back(name);
  if (loaded_vocab_vars.empty()) {
    say(cat("  --init-from: the checkpoint's vocabulary (", was, ") is not the data's (",
            o.vocab_fingerprint, "); its vocabulary's variables are initialised afresh\n"));
    return;
  }
  std::string flags;
  for (const auto& name : loaded_vocab_vars)
    flags += cat(flags.empty() ? "" : " ", "--init-exclude '", name, "'");
  fail(tool, cat("--init-from ", plan.origin.checkpoint,
                 " was trained with the vocabulary of "
                 "fingerprint ",
                 was, ", but the data has vocabulary ", o.vocab_fingerprint,
                 ": token ids mean other pieces in ", joined(loaded_vocab_vars),
                 "; initialise them afresh with ", flags,
                 ", or use data prepared with the "
                 "checkpoint's vocabulary"));
}

}  // namespace

InitFromPlan plan_init_from(const RunOptions& o, Graph& g, const Mesh& mesh,
                            const std::string& tool) {
  InitFromPlan plan;
  agree_on_failure(mesh.comm(), [&] {
    namespace fs = std::filesystem;
    const std::string path =
        fs::absolute(resolve_checkpoint_path(o.init_from)).lexically_normal().string();
    plan.meta = checkpoint_info(path).metadata;
    WeightsOrigin& origin = plan.origin;
    origin.checkpoint = path;
    origin.step = plan.meta.step;
    origin.created_utc = plan.meta.created_utc;
    origin.manifest_sha256 = checkpoint_manifest_sha256(path);
    origin.exclude = o.init_exclude;
    plan.weights = select_weights(trained_variables(g), o.init_exclude, tool);
    origin.excluded = plan.weights.excluded;
    check_vocabulary_change(plan, o, g, tool);
    // Activation, norm or window changed on purpose (fine-tuning with a window): told.
    check_model(plan.meta, o, path, tool, true);
  });
  return plan;
}

void load_init_weights(Program& program, const InitFromPlan& plan, const Mesh& mesh,
                       const std::string& tool) {
  const WeightsOrigin& origin = plan.origin;
  say(cat("  --init-from ", origin.checkpoint, " (step ", origin.step, ", saved on ",
          plan.meta.num_ranks, " rank(s), mesh ", plan.meta.mesh, "): loading ",
          plan.weights.loaded.size(), " trained variables onto mesh ", mesh.shape().to_string(),
          "\n"));
  const auto& excluded = plan.weights.excluded;
  if (!excluded.empty()) {  // the first 12; config.resolved.yaml lists them all
    const std::vector<std::string> shown(
        excluded.begin(), excluded.begin() + std::min<std::size_t>(excluded.size(), 12));
    say(cat(
        "  initialised afresh (--init-exclude): ", joined(shown),
        excluded.size() > shown.size() ? cat(" and ", excluded.size() - shown.size(), " more") : "",
        "\n"));
  }
  try {
    restore_variables(program, origin.checkpoint, plan.weights.loaded);
  } catch (const std::exception& e) {
    // Every rank throws the same agreed error: name the command and the way out.
    fail(tool, cat(e.what(),
                   "; the config's model must have the checkpoint's shapes (or leave "
                   "those variables out with --init-exclude)"));
  }
  say("  starting at step 0: optimizer slots, learning-rate schedule and data position afresh\n");
}

void check_resumed_origin(const std::string& restored_origin, const std::string& restored,
                          const InitFromPlan& plan, const RunOptions& o, const std::string& tool) {
  if (!restored_origin.empty()) {
    const WeightsOrigin was = WeightsOrigin::parse(restored_origin, tool);
    if (was.manifest_sha256 == plan.origin.manifest_sha256) {
      say(cat("  --init-from: run directory '", o.run_dir,
              "' started from this checkpoint "
              "already; resuming it (its weights, slots, step and data position)\n"));
      return;
    }
    fail(tool, cat("--init-from ", plan.origin.checkpoint, ": run directory '", o.run_dir,
                   "' has checkpoints of a run that started from another checkpoint, ",
                   was.summary(), " (restored ", restored,
                   "); use a new --run-dir for a new "
                   "fine-tune, or leave out --init-from to resume that run"));
  }
  fail(tool, cat("--init-from ", plan.origin.checkpoint, ": run directory '", o.run_dir,
                 "' has checkpoints of a run that did not start from it (restored ", restored,
                 "); use a new --run-dir for a new fine-tune, or leave out --init-from to resume "
                 "that run"));
}

}  // namespace mtk::app
