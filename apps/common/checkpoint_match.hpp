#pragma once
// What a restored checkpoint must agree with before its weights are used: the data's vocabulary
// (token ids) and the model keys that change what the same weights compute.

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

}  // namespace mtk::app
