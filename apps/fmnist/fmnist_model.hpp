#pragma once
// The Fashion-MNIST classifier of mtk-fmnist: a small CNN over an image written in blocks
// [b, hb, h, wb, w, c0] (28 = hb * h = wb * w), so a layout can split its height and width over
// mesh dims (halo exchanges between neighbours, docs/spatial.md):
//   conv 3x3 (c0 -> c1) + bias, relu, max pool 2x2 / 2, conv 3x3 (c1 -> c2) + bias, relu,
//   dense (hb, h, wb, w, c2 -> hidden) + bias, relu, dense (hidden -> classes) + bias,
//   softmax cross-entropy averaged over the batch.
// Trainer holds its training program (Adam or SGD through optim::minimize) and an evaluation
// program of the same weights. Initial values depend only on the names and the seed, and the data
// order only on the seed, so every mesh and layout computes the same losses.

#include <mtk/lower/lowering.hpp>

#include "idx_reader.hpp"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtk::fmnist {

struct ModelConfig {
  std::int64_t batch = 100;       ///< training batch (b)
  std::int64_t eval_batch = 500;  ///< evaluation batch
  std::int64_t hb = 2, wb = 2;    ///< blocks of the height and width (28 / hb, 28 / wb per block)
  std::int64_t c1 = 16, c2 = 32, hidden = 64;
  std::string optimizer = "adam";  ///< adam or sgd
  double lr = 1e-3;
  std::uint64_t seed = 1;  ///< initial weights and data order
  /// Fails naming the setting unless the blocks divide 28 into blocks of an even size.
  void check() const;
};

/// The tensors of one built model.
struct Model {
  Tensor images, labels;  ///< placeholders [b, hb, h, wb, w, c0] float32, [b] int32
  Tensor logits, loss;    ///< [b, classes]; the mean cross-entropy
  Tensor correct;         ///< number of rows whose largest logit is the label (float32 scalar)
};

/// Builds the model on `g` with batch `batch`.
Model build_model(Graph& g, const ModelConfig& config, std::int64_t batch);

/// The feeds of the images `indices` of `images` (pixels scaled and centred), and their labels.
HostTensor image_feed(const IdxImages& images, const std::vector<std::int64_t>& indices,
                      const ModelConfig& config);
HostTensor label_feed(const std::vector<std::uint8_t>& labels,
                      const std::vector<std::int64_t>& indices);

/// The order of the training images in `epoch` (0-based): a permutation of [0, count) drawn from
/// the seed and the epoch, the same on every rank.
std::vector<std::int64_t> epoch_order(std::int64_t count, std::uint64_t seed, std::int64_t epoch);

struct StepResult {
  double loss = 0, correct = 0;
};

class Trainer {
 public:
  /// Builds and lowers both programs with `program` (the run's program.* settings).
  Trainer(const ModelConfig& config, const ProgramOptions& program, const Mesh& mesh,
          const LayoutRules& rules);
  /// One optimizer step on the images `indices` (config.batch of them).
  StepResult step(const IdxImages& images, const std::vector<std::uint8_t>& labels,
                  const std::vector<std::int64_t>& indices);
  /// Mean loss and accuracy on the first `limit` images (0: all; a multiple of eval_batch).
  StepResult evaluate(const IdxImages& images, const std::vector<std::uint8_t>& labels,
                      std::int64_t limit = 0);
  Program& program() { return *train_program_; }

 private:
  ModelConfig config_;
  Graph train_graph_, eval_graph_;
  Model train_, eval_;
  std::unique_ptr<Program> train_program_, eval_program_;
};

}  // namespace mtk::fmnist
