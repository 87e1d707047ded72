#pragma once
// What `mtk-ckpt export`, `import` and `logits` share: the Transformer a checkpoint recorded, its
// variables (names, dims) and the `__metadata__` of an exported safetensors file
// (docs/checkpoint-format.md#safetensors).

#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/checkpoint/safetensors.hpp>
#include <mtk/graph/graph.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/nn/transformer_config.hpp>
#include <mtk/runtime/program.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mtk::ckpt_tool {

/// Format tag in `__metadata__` ("format": "pt" as PyTorch writers put it; "mtk_format" ours).
inline constexpr const char* kMtkFormat = "mtk-safetensors-1";

/// The model a checkpoint's metadata.yaml records (its config's `model` section); fails naming
/// the checkpoint `dir` when it records none (not an mtk-lm1b or mtk-wmt checkpoint).
nn::TransformerConfig recorded_model(const CheckpointMetadata& meta, const std::string& dir,
                                     const std::string& where);

/// A checkpoint's model restored for evaluation, every variable whole on every rank.
struct CheckpointModel {
  std::string dir;  ///< the checkpoint directory
  CheckpointMetadata meta;
  nn::TransformerConfig model;
  Graph graph;
  nn::ModelGraph outputs;
  std::unique_ptr<Program> program;
};

/// Resolves `path` (checkpoint, checkpoints/ or run directory), builds the model it recorded for
/// evaluation with `batch` sequences (0: the recorded model.batch) on a mesh of all the ranks of
/// `world` with every tensor whole (any rank count), and restores the checkpoint into it (its
/// hashes checked). Collective; every rank fails alike.
void load_checkpoint_model(const Communicator& world, const std::string& path, std::int64_t batch,
                           CheckpointModel& out, const std::string& where);

/// The model's weights, in name order: name -> shape (dims named), from a graph of the model
/// built for evaluation (no optimizer slots, no counters).
std::map<std::string, Shape> model_variables(const nn::TransformerConfig& model);

/// The fields of `model` that decide what its weights compute, as compact JSON (sorted keys):
/// sizes, layers, norm, gelu, shared embedding, local attention window, mixture of experts at
/// evaluation, activation dtype. The batch and the training-only settings are not included.
std::string model_json(const nn::TransformerConfig& model);
/// model_json()'s fields read back into `into` (the others kept); fails as `where` naming `what`.
void read_model_json(const std::string& text, nn::TransformerConfig& into, const std::string& what,
                     const std::string& where);

/// The `__metadata__` of an export: format tags, model_json(), the vocabulary fingerprint and
/// the dim names of every variable (JSON {name: [dims]}).
std::map<std::string, std::string> export_metadata(const nn::TransformerConfig& model,
                                                   const std::string& vocab_fingerprint,
                                                   const std::map<std::string, Shape>& variables);

/// One line per field of model_json() on which `a` and `b` differ ("model.gelu: true (file),
/// false (config)"); empty when none.
std::vector<std::string> model_differences(const nn::TransformerConfig& file,
                                           const nn::TransformerConfig& config);

/// Copies the block at `origin` of shape `local` out of the row-major tensor `global` of sizes
/// `sizes` (this rank's slice of a variable).
std::vector<float> block_of(const std::vector<float>& global,
                            const std::vector<std::int64_t>& sizes,
                            const std::vector<std::int64_t>& origin,
                            const std::vector<std::int64_t>& local);

/// The sizes of `shape`'s dims, in order.
std::vector<std::int64_t> sizes_of(const Shape& shape);

}  // namespace mtk::ckpt_tool
