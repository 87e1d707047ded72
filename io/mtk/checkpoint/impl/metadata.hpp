#pragma once
// metadata.yaml: what a checkpoint records besides the variables (docs/checkpoint-format.md).
// Internal: yaml-cpp stays inside metadata.cpp.

#include <mtk/checkpoint/checkpoint.hpp>

#include <string>
#include <vector>

namespace mtk::ckpt {

/// The contents of metadata.yaml.
struct StoredCheckpoint {
  CheckpointMetadata meta;
  std::vector<CheckpointVariable> vars;
};

/// The text of metadata.yaml; fails naming the field that does not survive YAML.
std::string emit_metadata(const CheckpointMetadata& m, const std::vector<CheckpointVariable>& vars,
                          const std::string& where);
/// Parses metadata.yaml (`origin` names it in errors) and checks every field.
StoredCheckpoint parse_metadata(const std::string& text, const std::string& origin,
                                const std::string& where);

}  // namespace mtk::ckpt
