#include <mtk/base/error.hpp>
#include <mtk/decode/beam_search.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace mtk::decode {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

struct Live {
  std::vector<std::int32_t> tokens;
  double log_prob = kNegInf;  // -inf: an empty slot
};

struct Row {
  std::vector<Live> live;
  std::vector<Hypothesis> finished;
  bool done = false;
};

Hypothesis make_hypothesis(std::vector<std::int32_t> tokens, double log_prob, bool finished,
                           double alpha) {
  Hypothesis h;
  h.tokens = std::move(tokens);
  h.log_prob = log_prob;
  h.finished = finished;
  h.score = log_prob / length_penalty(h.length(), alpha);
  return h;
}

void check_options(const BeamSearchOptions& o, std::int64_t batch, std::int64_t vocab,
                   const char* where) {
  if (batch < 1)
    fail(where, cat("batch = ", batch, " must be >= 1"));
  if (vocab < 1)
    fail(where, cat("vocab_size = ", vocab, " must be >= 1"));
  if (o.beam_size < 1)
    fail(where, cat("beam_size = ", o.beam_size, " must be >= 1"));
  if (o.max_length < 1)
    fail(where, cat("max_length = ", o.max_length, " must be >= 1"));
  if (o.eos_id >= vocab)
    fail(where, cat("eos_id = ", o.eos_id, " not below vocab_size = ", vocab));
  if (o.alpha < 0)
    fail(where, cat("alpha = ", o.alpha, " must be >= 0"));
  if (!o.min_lengths.empty() && static_cast<std::int64_t>(o.min_lengths.size()) != batch)
    fail(where, cat("min_lengths has ", o.min_lengths.size(), " rows; the batch has ", batch));
}

std::int64_t min_length_of(const BeamSearchOptions& o, std::int64_t row) {
  return o.min_lengths.empty() ? 0 : o.min_lengths[static_cast<size_t>(row)];
}

std::vector<float> call_step(const StepFunction& step, std::int64_t position,
                             const std::vector<std::int32_t>& tokens,
                             const std::vector<std::int32_t>& parents, std::int64_t vocab,
                             const char* where) {
  std::vector<float> lp = step(position, tokens, parents);
  const auto want = static_cast<std::int64_t>(tokens.size()) * vocab;
  if (static_cast<std::int64_t>(lp.size()) != want)
    fail(where, cat("the step function returned ", lp.size(), " log-probabilities at position ",
                    position, "; expected ", tokens.size(), " hypotheses x ", vocab, " = ", want));
  return lp;
}

// One step of one row: its best 2K continuations, the hypotheses that finish, the next live
// ones, and the tokens and parents (the row's K slots) the step function is fed next. `lp`: the
// row's K x V log-probabilities.
void advance_row(Row& row, const float* lp, std::int64_t K, std::int64_t V, std::int64_t t,
                 std::int64_t min_length, const BeamSearchOptions& options,
                 std::vector<std::int64_t>& order, std::int32_t* tokens, std::int32_t* parents) {
  if (row.done) {
    for (std::int64_t k = 0; k < K; ++k) {
      tokens[k] = options.start_id;
      parents[k] = static_cast<std::int32_t>(k);
    }
    return;
  }
  // Candidates k * V + v with a finite cumulative log-probability.
  order.clear();
  std::vector<double> cum(static_cast<size_t>(K * V), kNegInf);
  for (std::int64_t k = 0; k < K; ++k) {
    const double base = row.live[static_cast<size_t>(k)].log_prob;
    if (base == kNegInf)
      continue;
    const float* p = lp + k * V;
    for (std::int64_t v = 0; v < V; ++v) {
      if (v == options.eos_id && t < min_length)
        continue;
      const double c = base + static_cast<double>(p[v]);
      if (c > kNegInf) {  // false for -inf and NaN
        cum[static_cast<size_t>(k * V + v)] = c;
        order.push_back(k * V + v);
      }
    }
  }
  const auto take = std::min<std::int64_t>(2 * K, static_cast<std::int64_t>(order.size()));
  auto better = [&](std::int64_t a, std::int64_t c) {
    const double x = cum[static_cast<size_t>(a)], y = cum[static_cast<size_t>(c)];
    return x > y || (x == y && a < c);
  };
  std::partial_sort(order.begin(), order.begin() + take, order.end(), better);
  std::vector<Live> next;
  std::vector<std::int32_t> next_parent;
  std::vector<std::int64_t> next_rank;  // rank among the candidates
  for (std::int64_t i = 0; i < take; ++i) {
    const std::int64_t c = order[static_cast<size_t>(i)];
    const std::int64_t k = c / V;
    const auto v = static_cast<std::int32_t>(c % V);
    const Live& from = row.live[static_cast<size_t>(k)];
    if (v == options.eos_id) {
      if (i < K)  // an EOS only among the best beam_size candidates finishes
        row.finished.push_back(
            make_hypothesis(from.tokens, cum[static_cast<size_t>(c)], true, options.alpha));
    } else if (static_cast<std::int64_t>(next.size()) < K) {
      Live h{from.tokens, cum[static_cast<size_t>(c)]};
      h.tokens.push_back(v);
      next.push_back(std::move(h));
      next_parent.push_back(static_cast<std::int32_t>(k));
      next_rank.push_back(i);
    }
  }
  // At max_length the live hypotheses among the best beam_size candidates end unended (as an EOS
  // would have there; so beam 1 stays greedy).
  if (t + 1 == options.max_length)
    for (size_t j = 0; j < next.size(); ++j)
      if (next_rank[j] < K)
        row.finished.push_back(
            make_hypothesis(next[j].tokens, next[j].log_prob, false, options.alpha));
  std::stable_sort(row.finished.begin(), row.finished.end(),
                   [](const Hypothesis& a, const Hypothesis& c) { return a.score > c.score; });
  if (static_cast<std::int64_t>(row.finished.size()) > K)
    row.finished.resize(static_cast<size_t>(K));
  // Tensor2Tensor's stop: beam_size finished and none live can beat the worst of them (the
  // best live log-probability only falls; the length penalty grows at most to max_length's).
  // Beam 1 stops at its first EOS, as greedy search does.
  const bool full = static_cast<std::int64_t>(row.finished.size()) >= K;
  const double best_live =
      next.empty() ? kNegInf
                   : next.front().log_prob / length_penalty(options.max_length, options.alpha);
  row.done = t + 1 == options.max_length || next.empty() ||
             (full && (K == 1 || best_live <= row.finished.back().score));
  for (std::int64_t k = 0; k < K; ++k) {
    const bool used = k < static_cast<std::int64_t>(next.size());
    tokens[k] = used && !row.done ? next[static_cast<size_t>(k)].tokens.back() : options.start_id;
    parents[k] = used ? next_parent[static_cast<size_t>(k)] : static_cast<std::int32_t>(k);
  }
  next.resize(static_cast<size_t>(K));  // empty slots: log_prob -inf
  row.live = std::move(next);
}

}  // namespace

double length_penalty(std::int64_t length, double alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, alpha);
}

std::vector<std::vector<Hypothesis>> beam_search(const StepFunction& step, std::int64_t batch,
                                                 std::int64_t vocab_size,
                                                 const BeamSearchOptions& options) {
  const char* where = "mtk::decode::beam_search";
  check_options(options, batch, vocab_size, where);
  const std::int64_t K = options.beam_size, V = vocab_size;
  std::vector<Row> rows(static_cast<size_t>(batch));
  for (auto& r : rows) {
    r.live.resize(static_cast<size_t>(K));
    r.live[0].log_prob = 0;  // one start hypothesis; the other slots fill at the first step
  }
  std::vector<std::int32_t> tokens(static_cast<size_t>(batch * K), options.start_id);
  std::vector<std::int32_t> parents(static_cast<size_t>(batch * K));
  for (std::int64_t i = 0; i < batch * K; ++i)
    parents[static_cast<size_t>(i)] = static_cast<std::int32_t>(i % K);
  std::vector<std::int64_t> order;
  for (std::int64_t t = 0; t < options.max_length; ++t) {
    if (std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.done; }))
      break;
    const std::vector<float> lp = call_step(step, t, tokens, parents, V, where);
    for (std::int64_t b = 0; b < batch; ++b)
      advance_row(rows[static_cast<size_t>(b)], lp.data() + static_cast<size_t>(b * K * V), K, V, t,
                  min_length_of(options, b), options, order, tokens.data() + b * K,
                  parents.data() + b * K);
  }
  std::vector<std::vector<Hypothesis>> out;
  out.reserve(rows.size());
  for (auto& r : rows)
    out.push_back(std::move(r.finished));
  return out;
}

std::vector<Hypothesis> greedy_search(const StepFunction& step, std::int64_t batch,
                                      std::int64_t vocab_size, const BeamSearchOptions& options) {
  const char* where = "mtk::decode::greedy_search";
  BeamSearchOptions o = options;
  o.beam_size = 1;
  check_options(o, batch, vocab_size, where);
  const std::int64_t V = vocab_size;
  std::vector<Hypothesis> out(static_cast<size_t>(batch));
  std::vector<bool> done(static_cast<size_t>(batch), false);
  std::vector<std::int32_t> tokens(static_cast<size_t>(batch), o.start_id);
  const std::vector<std::int32_t> parents(static_cast<size_t>(batch), 0);
  for (std::int64_t t = 0; t < o.max_length; ++t) {
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; }))
      break;
    const std::vector<float> lp = call_step(step, t, tokens, parents, V, where);
    for (std::int64_t b = 0; b < batch; ++b) {
      const auto sb = static_cast<size_t>(b);
      if (done[sb]) {
        tokens[sb] = o.start_id;
        continue;
      }
      const float* p = lp.data() + sb * static_cast<size_t>(V);
      const bool no_eos = t < min_length_of(o, b);
      std::int64_t best = no_eos && V == 1 ? o.eos_id : -1;
      for (std::int64_t v = 0; v < V; ++v)
        if (!(no_eos && v == o.eos_id) && (best < 0 || p[v] > p[best]))
          best = v;
      Hypothesis& h = out[sb];
      h.log_prob += static_cast<double>(p[best]);
      if (best == o.eos_id) {
        h.finished = true;
        done[sb] = true;
      } else {
        h.tokens.push_back(static_cast<std::int32_t>(best));
        tokens[sb] = static_cast<std::int32_t>(best);
      }
      if (t + 1 == o.max_length)
        done[sb] = true;
    }
  }
  for (auto& h : out)
    h.score = h.log_prob / length_penalty(h.length(), o.alpha);
  return out;
}

std::vector<float> log_softmax_rows(const float* logits, std::int64_t rows,
                                    std::int64_t vocab_size) {
  std::vector<float> out(static_cast<size_t>(rows * vocab_size));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = logits + r * vocab_size;
    double mx = kNegInf;
    for (std::int64_t v = 0; v < vocab_size; ++v)
      mx = std::max(mx, static_cast<double>(x[v]));
    double sum = 0;
    for (std::int64_t v = 0; v < vocab_size; ++v)
      sum += std::exp(static_cast<double>(x[v]) - mx);
    const double lse = mx + std::log(sum);
    for (std::int64_t v = 0; v < vocab_size; ++v)
      out[static_cast<size_t>(r * vocab_size + v)] = static_cast<float>(x[v] - lse);
  }
  return out;
}

std::vector<std::vector<Hypothesis>> search_in_decoder(const StepFunction& step, std::int64_t batch,
                                                       std::int64_t beam, std::int64_t max_length,
                                                       std::int64_t vocab_size,
                                                       const BeamSearchOptions& options,
                                                       const char* where) {
  if (options.beam_size != beam)
    fail(where, cat("beam_size ", options.beam_size, " differs from the programs' beam ", beam));
  if (options.max_length > max_length)
    fail(where,
         cat("max_length ", options.max_length, " exceeds the programs' max_length ", max_length));
  if (beam == 1) {
    std::vector<std::vector<Hypothesis>> out;
    for (auto& h : greedy_search(step, batch, vocab_size, options))
      out.push_back({std::move(h)});
    return out;
  }
  return beam_search(step, batch, vocab_size, options);
}

}  // namespace mtk::decode
