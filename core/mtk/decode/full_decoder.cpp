#include <mtk/base/error.hpp>
#include <mtk/decode/full_decoder.hpp>
#include <mtk/decode/weights.hpp>
#include <mtk/lower/lowering.hpp>

#include <algorithm>

namespace mtk::decode {

FullDecoder::FullDecoder(const nn::TransformerConfig& config, const nn::DecodingShape& shape,
                         const Mesh& mesh, const LayoutRules& rules, const ProgramOptions& options)
    : config_(config), shape_(shape.resolved(config)) {
  nn::TransformerConfig c = config;
  c.batch = shape_.batch * shape_.beam;
  graph_ = std::make_unique<Graph>(options);
  model_ = nn::build_transformer(*graph_, c, false);
  program_ = lower(*graph_, mesh, rules);
  prefixes_.assign(static_cast<size_t>(c.batch), {});
}

void FullDecoder::load_weights(Program& source) {
  copy_weights(source, *program_);
}

void FullDecoder::encode(const std::vector<std::vector<std::int32_t>>& sources) {
  const char* where = "mtk::decode::FullDecoder::encode";
  if (config_.num_encoder_layers <= 0)
    fail(where, "the model has no encoder (model.num_encoder_layers = 0)");
  if (static_cast<std::int64_t>(sources.size()) > shape_.batch)
    fail(where, cat(sources.size(), " sources for a batch of ", shape_.batch));
  for (const auto& s : sources)
    if (static_cast<std::int64_t>(s.size()) > shape_.source_length)
      fail(where,
           cat("a source has ", s.size(), " tokens; source_length is ", shape_.source_length));
  sources_ = sources;
}

HostTensor FullDecoder::step(std::int64_t position, const std::vector<std::int32_t>& tokens,
                             const std::vector<std::int32_t>& parents) {
  const char* where = "mtk::decode::FullDecoder::step";
  const std::int64_t B = shape_.batch, K = shape_.beam, L = config_.length, V = config_.vocab_size;
  if (position < 0 || position >= shape_.max_length)
    fail(where, cat("position ", position, " not in [0, max_length = ", shape_.max_length, ")"));
  if (static_cast<std::int64_t>(tokens.size()) != B * K ||
      static_cast<std::int64_t>(parents.size()) != B * K)
    fail(where, cat("tokens and parents need batch x beam = ", B * K, " values"));
  std::vector<std::vector<std::int32_t>> next(prefixes_.size());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t k = 0; k < K; ++k) {
      const auto r = static_cast<size_t>(b * K + k);
      next[r] = position == 0 ? std::vector<std::int32_t>{}
                              : prefixes_[static_cast<size_t>(b * K + parents[r])];
      next[r].resize(static_cast<size_t>(position));
      next[r].push_back(tokens[r]);
    }
  prefixes_ = std::move(next);
  const auto n = static_cast<size_t>(B * K * L);
  std::vector<std::int32_t> in(n, 0), seg(n, 0), pos(n, 0), zeros(n, 0), src(n, 0), sseg(n, 0),
      spos(n, 0);
  for (size_t r = 0; r < prefixes_.size(); ++r) {
    for (size_t i = 0; i < prefixes_[r].size(); ++i) {
      in[r * static_cast<size_t>(L) + i] = prefixes_[r][i];
      seg[r * static_cast<size_t>(L) + i] = 1;
      pos[r * static_cast<size_t>(L) + i] = static_cast<std::int32_t>(i);
    }
    const size_t b = r / static_cast<size_t>(K);
    if (b < sources_.size())
      for (size_t i = 0; i < sources_[b].size(); ++i) {
        src[r * static_cast<size_t>(L) + i] = sources_[b][i];
        sseg[r * static_cast<size_t>(L) + i] = 1;
        spos[r * static_cast<size_t>(L) + i] = static_cast<std::int32_t>(i);
      }
  }
  const Shape shape{{"batch", B * K}, {"length", L}};
  std::map<int, HostTensor> feeds{{model_.inputs.id(), HostTensor::ints(shape, in)},
                                  {model_.targets.id(), HostTensor::ints(shape, zeros)},
                                  {model_.segments.id(), HostTensor::ints(shape, seg)},
                                  {model_.positions.id(), HostTensor::ints(shape, pos)}};
  if (config_.num_encoder_layers > 0) {
    feeds[model_.encoder_inputs.id()] = HostTensor::ints(shape, src);
    feeds[model_.encoder_segments.id()] = HostTensor::ints(shape, sseg);
    feeds[model_.encoder_positions.id()] = HostTensor::ints(shape, spos);
  }
  const HostTensor all = std::move(program_->run(feeds, {model_.logits})[0]);
  std::vector<float> at(static_cast<size_t>(B * K * V));
  const float* p = all.data<float>();
  for (std::int64_t r = 0; r < B * K; ++r)
    std::copy(p + (r * L + position) * V, p + (r * L + position + 1) * V, at.begin() + r * V);
  return HostTensor::floats(Shape{{"batch", B}, {"beam", K}, {"vocab", V}}, at);
}

StepFunction FullDecoder::step_function() {
  return [this](std::int64_t position, const std::vector<std::int32_t>& tokens,
                const std::vector<std::int32_t>& parents) {
    const HostTensor logits = step(position, tokens, parents);
    return log_softmax_rows(logits.data<float>(), static_cast<std::int64_t>(tokens.size()),
                            config_.vocab_size);
  };
}

std::vector<std::vector<Hypothesis>> FullDecoder::beam_search(const BeamSearchOptions& options) {
  return search_in_decoder(step_function(), shape_.batch, shape_.beam, shape_.max_length,
                           config_.vocab_size, options, "mtk::decode::FullDecoder::beam_search");
}

}  // namespace mtk::decode
