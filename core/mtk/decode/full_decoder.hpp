#pragma once
// The naive decoder, for reference and benchmarks: every step re-runs the whole model of
// build_transformer (encoder included) over the full prefix of every hypothesis and reads the
// logits at the current position. Same interface as IncrementalDecoder.

#include <mtk/base/program_options.hpp>
#include <mtk/decode/beam_search.hpp>
#include <mtk/nn/decoding_graphs.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/nn/transformer_config.hpp>
#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh.hpp>
#include <mtk/runtime/program.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace mtk::decode {

class FullDecoder {
 public:
  /// Lowers build_transformer(config, training = false) with batch = shape.batch x shape.beam
  /// rows of config.length positions, with `options` (program.*). Collective.
  FullDecoder(const nn::TransformerConfig& config, const nn::DecodingShape& shape, const Mesh& mesh,
              const LayoutRules& rules, const ProgramOptions& options = {});
  void load_weights(Program& source);
  /// Keeps the sources (encoder-decoder only) for every later step.
  void encode(const std::vector<std::vector<std::int32_t>>& sources);
  /// Appends `tokens` at `position` to the prefixes (reordered by `parents` first, as
  /// IncrementalDecoder does) and returns the logits [batch, beam, vocab] at `position`.
  HostTensor step(std::int64_t position, const std::vector<std::int32_t>& tokens,
                  const std::vector<std::int32_t>& parents);
  StepFunction step_function();
  /// Beam search (greedy for beam 1) of the encoded rows, as IncrementalDecoder::beam_search.
  std::vector<std::vector<Hypothesis>> beam_search(const BeamSearchOptions& options);
  Program& program() { return *program_; }

 private:
  nn::TransformerConfig config_;
  nn::DecodingShape shape_;
  std::unique_ptr<Graph> graph_;
  nn::ModelGraph model_;
  std::unique_ptr<Program> program_;
  std::vector<std::vector<std::int32_t>> sources_;
  std::vector<std::vector<std::int32_t>> prefixes_;  // per hypothesis, positions 0..position
};

}  // namespace mtk::decode
