#include <mtk/base/error.hpp>
#include <mtk/decode/incremental_decoder.hpp>
#include <mtk/decode/weights.hpp>
#include <mtk/lower/lowering.hpp>

#include <Kokkos_Core.hpp>

#include <map>
#include <string>

namespace mtk::decode {
namespace {

void check_ids(const std::vector<std::int32_t>& ids, std::int64_t count, std::int64_t bound,
               const char* what, const char* where) {
  if (static_cast<std::int64_t>(ids.size()) != count)
    fail(where, cat(what, " has ", ids.size(), " values; expected batch x beam = ", count));
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= bound)
      fail(where, cat(what, "[", i, "] = ", ids[i], " not in [0, ", bound, ")"));
}

}  // namespace

IncrementalDecoder::IncrementalDecoder(const nn::TransformerConfig& config,
                                       const nn::DecodingShape& shape, const Mesh& mesh,
                                       const LayoutRules& rules, const ProgramOptions& options)
    : config_(config), shape_(shape.resolved(config)) {
  step_graph_ = std::make_unique<Graph>(options);
  step_ = nn::build_decoder_step(*step_graph_, config_, shape_);
  if (config_.num_encoder_layers > 0) {
    encoder_graph_ = std::make_unique<Graph>(options);
    encoder_ = nn::build_decoding_encoder(*encoder_graph_, config_, shape_);
    encoder_program_ = lower(*encoder_graph_, mesh, rules);
  }
  step_program_ = lower(*step_graph_, mesh, rules);
}

void IncrementalDecoder::load_weights(Program& source) {
  if (encoder_program_)
    copy_weights(source, *encoder_program_);
  copy_weights(source, *step_program_);
}

void IncrementalDecoder::encode(const std::vector<std::vector<std::int32_t>>& sources) {
  const char* where = "mtk::decode::IncrementalDecoder::encode";
  if (!encoder_program_)
    fail(where, "the model has no encoder (model.num_encoder_layers = 0)");
  const std::int64_t B = shape_.batch, L = shape_.source_length;
  if (static_cast<std::int64_t>(sources.size()) > B)
    fail(where, cat(sources.size(), " sources for a batch of ", B));
  std::vector<std::int32_t> ids(static_cast<size_t>(B * L), 0), seg(ids.size(), 0),
      pos(ids.size(), 0);
  for (size_t b = 0; b < sources.size(); ++b) {
    const auto& s = sources[b];
    if (static_cast<std::int64_t>(s.size()) > L)
      fail(where, cat("source ", b, " has ", s.size(), " tokens; source_length is ", L));
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] < 0 || s[i] >= config_.vocab_size)
        fail(where,
             cat("source ", b, " token ", i, " = ", s[i], " not in [0, ", config_.vocab_size, ")"));
      const size_t k = b * static_cast<size_t>(L) + i;
      ids[k] = s[i];
      seg[k] = 1;
      pos[k] = static_cast<std::int32_t>(i);
    }
  }
  const Shape tokens{{"batch", B}, {"length", L}};
  encoder_program_->run({{encoder_.inputs.id(), HostTensor::ints(tokens, ids)},
                         {encoder_.segments.id(), HostTensor::ints(tokens, seg)},
                         {encoder_.positions.id(), HostTensor::ints(tokens, pos)}});
  // The memories move to the step program on the device (same names, shapes and layouts).
  for (const auto& name : encoder_program_->variable_names())
    if (nn::is_decoding_state(name))
      Kokkos::deep_copy(step_program_->variable_slice(name),
                        encoder_program_->variable_slice(name));
}

HostTensor IncrementalDecoder::step(std::int64_t position, const std::vector<std::int32_t>& tokens,
                                    const std::vector<std::int32_t>& parents) {
  const char* where = "mtk::decode::IncrementalDecoder::step";
  const std::int64_t B = shape_.batch, K = shape_.beam;
  if (position < 0 || position >= shape_.max_length)
    fail(where, cat("position ", position, " not in [0, max_length = ", shape_.max_length, ")"));
  check_ids(tokens, B * K, config_.vocab_size, "tokens", where);
  check_ids(parents, B * K, K, "parents", where);
  const Shape rows{{"batch", B}, {"beam", K}};
  auto out = step_program_->run(
      {{step_.tokens.id(), HostTensor::ints(rows, tokens)},
       {step_.parents.id(), HostTensor::ints(rows, parents)},
       {step_.position.id(), HostTensor::ints(Shape(), {static_cast<std::int32_t>(position)})}},
      {step_.logits});
  return std::move(out[0]);
}

StepFunction IncrementalDecoder::step_function() {
  return [this](std::int64_t position, const std::vector<std::int32_t>& tokens,
                const std::vector<std::int32_t>& parents) {
    const HostTensor logits = step(position, tokens, parents);
    return log_softmax_rows(logits.data<float>(), static_cast<std::int64_t>(tokens.size()),
                            config_.vocab_size);
  };
}

std::vector<std::vector<Hypothesis>> IncrementalDecoder::beam_search(
    const BeamSearchOptions& options) {
  return search_in_decoder(step_function(), shape_.batch, shape_.beam, shape_.max_length,
                           config_.vocab_size, options,
                           "mtk::decode::IncrementalDecoder::beam_search");
}

}  // namespace mtk::decode
