#pragma once
// Writing one checkpoint directory (variables.h5, slices.sha256, metadata.yaml,
// manifest.sha256), without the commit protocol of CheckpointManager::save. Internal.

#include <mtk/checkpoint/checkpoint.hpp>

#include <string>

namespace mtk::ckpt {

/// Collective: creates `dir` (which must not exist) and writes the checkpoint of `program` into
/// it, each file fsynced. Every rank throws the same error when any rank fails.
void write_directory(Program& program, const std::string& dir, const CheckpointMetadata& meta_in,
                     const CheckpointOptions& options, const std::string& where);

}  // namespace mtk::ckpt
