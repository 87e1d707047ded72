#pragma once
// Incremental decoding of a Transformer on a mesh: the encoder program runs once per batch of
// sources, the decoder step program once per position; the keys and values of earlier positions
// (with model.attention_window W, only the last W: a ring buffer) stay in the step program (state
// variables updated in place), reordered by beam parent on the device. Lowered on the training mesh
// and layout rules, so any layout works (batch split over data-parallel processors,
// heads/d_ff/vocab over model-parallel ones).

#include <mtk/base/program_options.hpp>
#include <mtk/decode/beam_search.hpp>
#include <mtk/nn/decoding_graphs.hpp>
#include <mtk/nn/transformer_config.hpp>
#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh.hpp>
#include <mtk/runtime/program.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace mtk::decode {

class IncrementalDecoder {
 public:
  /// Builds and lowers the step program (and, for an encoder-decoder, the encoder program) for
  /// `shape` (batch rows x beam hypotheses; the batch must divide over the mesh dims that split
  /// `batch`). Weights start from their initializers; load trained ones with load_weights().
  /// Lowered with `options` (program.*). Collective over the mesh.
  IncrementalDecoder(const nn::TransformerConfig& config, const nn::DecodingShape& shape,
                     const Mesh& mesh, const LayoutRules& rules,
                     const ProgramOptions& options = {});

  /// Copies the model weights by name from `source` (a training or evaluation program of the
  /// same config, or one a checkpoint was restored into; see copy_weights). Collective.
  void load_weights(Program& source);

  /// Encodes a batch of sources (encoder-decoder only): row b gets sources[b] (at most
  /// source_length ids, as the training data had them, e.g. ending with EOS); rows past
  /// sources.size() are empty. Sets the memories every later step attends to. Collective.
  void encode(const std::vector<std::vector<std::int32_t>>& sources);

  /// One decoder step for all batch x beam hypotheses (see nn::DecoderStepGraph): `tokens` and
  /// `parents` have batch x beam values; returns the logits [batch, beam, vocab]. Positions run
  /// 0, 1, 2, ... from a fresh start at 0. Collective; every rank gets the same values.
  HostTensor step(std::int64_t position, const std::vector<std::int32_t>& tokens,
                  const std::vector<std::int32_t>& parents);

  /// step() as log-probabilities: the StepFunction of beam_search (beam_size = shape().beam) and
  /// greedy_search (beam 1).
  StepFunction step_function();

  /// Beam search from the current memories (after encode(); for a decoder-only model, from the
  /// start token). options.beam_size must equal shape().beam; max_length at most
  /// shape().max_length.
  std::vector<std::vector<Hypothesis>> beam_search(const BeamSearchOptions& options);

  const nn::TransformerConfig& config() const { return config_; }
  const nn::DecodingShape& shape() const { return shape_; }
  Program& step_program() { return *step_program_; }
  /// Null for a decoder-only model.
  Program* encoder_program() { return encoder_program_.get(); }

 private:
  nn::TransformerConfig config_;
  nn::DecodingShape shape_;
  std::unique_ptr<Graph> encoder_graph_, step_graph_;
  nn::DecodingEncoderGraph encoder_;
  nn::DecoderStepGraph step_;
  std::unique_ptr<Program> encoder_program_, step_program_;
};

}  // namespace mtk::decode
