#pragma once
// Starting a run from another run's weights (`train --init-from`, docs/lm1b.md "Fine-tuning"):
// the trained variables only, from a checkpoint of any mesh, layout and rank count; the optimizer's
// slots, the step and the data position start afresh. Variables named by pattern are left out
// (they keep their initializers' values), and the new run records where its weights came from.

#include <mtk/checkpoint/checkpoint.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk {

/// Restores only the variables `names` of `program` from checkpoint directory `path` (any mesh
/// and layout, verified as restore_checkpoint() does); the others and Program::step() are left as
/// they are. Every variable of `names` that the checkpoint lacks or stores in another shape is
/// named in one error, each with both shapes; the program is then untouched. `metadata` receives
/// the checkpoint's. Collective over the program's mesh.
void restore_variables(Program& program, const std::string& path,
                       const std::vector<std::string>& names,
                       CheckpointMetadata* metadata = nullptr);

/// Whether `pattern` (a shell glob: `*`, `?`, `[...]`; `*` also crosses `/`) matches variable
/// `name` whole or one of its tails after a `/`: `embedding*` matches `decoder/embedding`,
/// `layer_1/*` every variable of `decoder/layer_1/`, `decoder/*` every one under `decoder/`.
bool weight_pattern_matches(const std::string& pattern, const std::string& name);

/// The trained variables `names` split by the exclusion `patterns`: those loaded from the source
/// checkpoint and those it leaves to their initializers, both in the order of `names`. A pattern
/// that matches none of `names` (a typo would silently load everything) fails naming it and
/// `where`.
struct WeightSelection {
  std::vector<std::string> loaded, excluded;
};
WeightSelection select_weights(const std::vector<std::string>& names,
                               const std::vector<std::string>& patterns, const std::string& where);

/// SHA-256 (hex) of checkpoint `dir`'s manifest.sha256, which hashes its metadata and every slice:
/// names the checkpoint's contents wherever it is copied. Local.
std::string checkpoint_manifest_sha256(const std::string& dir);

/// Where a run's weights came from, as CheckpointMetadata::init_from and config.resolved.yaml
/// record it.
struct WeightsOrigin {
  std::string checkpoint;             ///< the source checkpoint directory (absolute)
  std::int64_t step = 0;              ///< its training step
  std::string manifest_sha256;        ///< checkpoint_manifest_sha256() of it
  std::string created_utc;            ///< when it was saved
  std::vector<std::string> exclude;   ///< --init-exclude patterns
  std::vector<std::string> excluded;  ///< the variables they matched, initialised afresh

  /// A YAML map of the fields above; parse() reads it back (failing with `where`).
  std::string to_yaml() const;
  static WeightsOrigin parse(const std::string& yaml, const std::string& where);
  /// One line: "PATH (step N, manifest sha256 0123abcd...; K variables initialised afresh)".
  std::string summary() const;
};

}  // namespace mtk
