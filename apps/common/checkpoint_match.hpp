#pragma once
// What a restored checkpoint must agree with before its weights are used: the data's vocabulary
// (token ids) and the model keys that change what the same weights compute; and what a resumed run
// is told: the program and checkpoint settings that differ from the checkpoint's.

#include <mtk/checkpoint/checkpoint.hpp>

#include "training.hpp"
#include <string>

namespace mtk::app {

/// Fails naming both fingerprints when `meta`'s vocabulary is not the data's (token ids would mean
/// other pieces); nothing to compare when either is unknown.
void check_vocabulary(const CheckpointMetadata& meta, const RunOptions& o, const std::string& path,
                      const std::string& tool);

/// Compares the checkpoint's recorded model with o.config's on the keys that change what the same
/// weights compute (model.gelu, model.norm, model.attention_window, the layer counts,
/// model.shared_embedding, model.moe_every, model.moe.num_experts): a difference fails naming each
/// key and both values, or with `explicit_restore` (--restore) is only told.
void check_model(const CheckpointMetadata& meta, const RunOptions& o, const std::string& path,
                 const std::string& tool, bool explicit_restore);

/// Rank 0 says which program.* keys and checkpoint.fletcher32 differ between the checkpoint's
/// recorded config and `now`, each with both values and whether the change can change the
/// results (node_allreduce: the order of the sums) or only time, memory or the files. Returns the
/// text said ("" when nothing differs or the checkpoint records no config).
std::string tell_setting_changes(const CheckpointMetadata& meta, const TrainingSettings& now,
                                 const std::string& path);

}  // namespace mtk::app
