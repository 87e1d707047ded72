#include <mtk/base/error.hpp>
#include <mtk/data/lm_batches.hpp>
#include <mtk/data/prepare_record.hpp>
#include <mtk/data/wmt_pairs.hpp>

#include <algorithm>
#include <sstream>

namespace mtk::wmt {

PairStream::PairStream(TokenShard source, TokenShard target, std::int64_t global_batch,
                       std::int64_t length, int batch_slices, int slice_index, std::uint64_t seed,
                       bool pack)
    : source_(std::move(source)),
      target_(std::move(target)),
      global_batch_(global_batch),
      length_(length),
      slices_(batch_slices),
      slice_(slice_index),
      seed_(seed),
      pack_(pack) {
  if (source_.num_sentences() != target_.num_sentences())
    fail("mtk::wmt::PairStream",
         cat("source shard ", source_.path(), " has ", source_.num_sentences(),
             " sentences but target shard ", target_.path(), " has ", target_.num_sentences(), "; ",
             prepare_again_advice(source_.path(), "mtk-wmt prepare")));
  if (source_.num_sentences() == 0)
    fail("mtk::wmt::PairStream", cat("no training pairs in ", source_.path()));
  if (global_batch_ % slices_ != 0)
    fail("mtk::wmt::PairStream", cat("model.batch = ", global_batch_, " is not divisible by the ",
                                     slices_, " batch slices"));
  if (pack_)
    pack_rows();
}

// First-fit packing in a keyed order of the pairs (independent of the epoch) over a few open rows:
// a pair joins the first open row where both sides still fit in length_, else opens a row,
// closing the oldest when too many are open.
void PairStream::pack_rows() {
  constexpr std::size_t kOpenRows = 16;
  struct Row {
    std::int64_t source = 0, target = 0;
    std::vector<std::int64_t> pairs;
  };
  std::vector<Row> open;
  auto close = [&](std::size_t i) {
    row_begin_.push_back(static_cast<std::int64_t>(packed_pairs_.size()));
    packed_pairs_.insert(packed_pairs_.end(), open[i].pairs.begin(), open[i].pairs.end());
    open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
  };
  const IndexPermutation order(size(), seed_ * 0x9E3779B97F4A7C15ull + 0x5ACCEDull);
  auto tokens = [&](const TokenShard& s, std::int64_t pair) {
    return std::min(length_, s.sentence_offset(pair + 1) - s.sentence_offset(pair));
  };
  packed_pairs_.reserve(static_cast<std::size_t>(size()));
  for (std::int64_t i = 0; i < size(); ++i) {
    const std::int64_t pair = order(i), ns = tokens(source_, pair), nt = tokens(target_, pair);
    std::size_t r = 0;
    while (r < open.size() && (open[r].source + ns > length_ || open[r].target + nt > length_))
      ++r;
    if (r == open.size()) {
      if (open.size() == kOpenRows)
        close(0);
      open.emplace_back();
      r = open.size() - 1;
    }
    open[r].pairs.push_back(pair);
    open[r].source += ns;
    open[r].target += nt;
  }
  while (!open.empty())
    close(0);
  row_begin_.push_back(static_cast<std::int64_t>(packed_pairs_.size()));
}

std::int64_t PairStream::rows_per_epoch() const {
  return pack_ ? static_cast<std::int64_t>(row_begin_.size()) - 1 : size();
}

std::int64_t PairStream::batches_per_epoch() const {
  return (rows_per_epoch() + global_batch_ - 1) / global_batch_;
}

std::int64_t PairStream::row_at(std::int64_t epoch, std::int64_t index) const {
  const std::uint64_t key = seed_ * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(epoch);
  return IndexPermutation(rows_per_epoch(), key)(index);
}

std::int64_t fill_pair_row(PairBatch& b, std::int64_t row, const std::vector<std::int32_t>& source,
                           const std::vector<std::int32_t>& target, std::int32_t segment,
                           std::int64_t source_at, std::int64_t target_at) {
  const std::int64_t L = b.length;
  const std::int64_t ns =
      std::min<std::int64_t>(L - source_at, static_cast<std::int64_t>(source.size()));
  const std::int64_t nt =
      std::min<std::int64_t>(L - target_at, static_cast<std::int64_t>(target.size()));
  for (std::int64_t i = 0; i < ns; ++i) {
    const auto k = static_cast<std::size_t>(row * L + source_at + i);
    b.sources[k] = source[static_cast<std::size_t>(i)];
    b.source_segments[k] = segment;
    b.source_positions[k] = static_cast<std::int32_t>(i);
  }
  for (std::int64_t i = 0; i < nt; ++i) {
    const auto k = static_cast<std::size_t>(row * L + target_at + i);
    b.targets[k] = target[static_cast<std::size_t>(i)];
    b.inputs[k] = i == 0 ? 0 : target[static_cast<std::size_t>(i - 1)];
    b.segments[k] = segment;
    b.positions[k] = static_cast<std::int32_t>(i);
  }
  return std::max<std::int64_t>(nt, 0);
}

PairBatch PairStream::next() {
  const std::int64_t rows = global_batch_ / slices_;
  PairBatch b;
  b.rows = rows;
  b.length = length_;
  const auto n = static_cast<std::size_t>(rows * length_);
  for (auto* v : {&b.sources, &b.source_segments, &b.source_positions, &b.inputs, &b.targets,
                  &b.segments, &b.positions})
    v->assign(n, 0);
  // Every rank walks the whole global batch (for the token count), filling only its rows.
  auto tokens = [&](const TokenShard& s, std::int64_t pair) {
    return std::min(length_, s.sentence_offset(pair + 1) - s.sentence_offset(pair));
  };
  for (std::int64_t r = 0; r < global_batch_; ++r) {
    if (index_ >= rows_per_epoch()) {
      ++epoch_;
      index_ = 0;
    }
    const std::int64_t unit = row_at(epoch_, index_++);
    const std::int64_t first = pack_ ? row_begin_[static_cast<std::size_t>(unit)] : unit;
    const std::int64_t last = pack_ ? row_begin_[static_cast<std::size_t>(unit) + 1] : unit + 1;
    const std::int64_t local = r - slice_ * rows;
    std::int64_t source_at = 0, target_at = 0;
    for (std::int64_t k = first; k < last; ++k) {
      const std::int64_t pair = pack_ ? packed_pairs_[static_cast<std::size_t>(k)] : k;
      b.global_tokens += tokens(target_, pair);
      if (local < 0 || local >= rows)
        continue;
      fill_pair_row(b, local, source_.sentence(pair), target_.sentence(pair),
                    static_cast<std::int32_t>(k - first + 1), source_at, target_at);
      source_at += tokens(source_, pair);
      target_at += tokens(target_, pair);
    }
  }
  return b;
}

std::string PairStream::save() const {
  return cat(epoch_, " ", index_, " seed=", seed_, " pairs=", size(),
             pack_ ? cat(" packed_rows=", rows_per_epoch()) : std::string());
}

void PairStream::restore(const std::string& saved) {
  const char* where = "mtk::wmt::PairStream";
  std::istringstream is(saved);
  std::int64_t e = -1, i = -1;
  if (!(is >> e >> i) || e < 0 || i < 0 || i > rows_per_epoch())
    fail(where, cat("data position '", saved, "' is not 'epoch index' with index in [0, ",
                    rows_per_epoch(), "]"));
  std::string packed_rows;
  // Written since MTK records them: the order of the pairs depends on both, so a resume under
  // another seed or other data would not continue the same epoch.
  for (std::string field; is >> field;) {
    const auto eq = field.find('=');
    const std::string key = field.substr(0, eq),
                      value = eq == std::string::npos ? "" : field.substr(eq + 1);
    if (key == "seed" && value != cat(seed_))
      fail(where, cat("the checkpoint was trained with train.seed = ", value, ", now ", seed_,
                      ": resuming would shuffle the epoch differently; set train.seed back to ",
                      value, " or start a new run directory"));
    if (key == "pairs" && value != cat(size()))
      fail(where,
           cat("the checkpoint was trained on ", value, " pairs, the prepared data has ", size(),
               ": resume on the data it was trained on, or start a new run directory"));
    if (key == "packed_rows")
      packed_rows = value;
  }
  // The index counts rows: packed and unpacked positions are different things.
  if (packed_rows != (pack_ ? cat(rows_per_epoch()) : std::string()))
    fail(where,
         cat("the checkpoint was trained with data.pack = ", packed_rows.empty() ? "false" : "true",
             packed_rows.empty() ? "" : cat(" (", packed_rows, " rows an epoch)"),
             ", now data.pack = ", pack_ ? cat("true (", rows_per_epoch(), " rows)") : "false",
             ": set data.pack back or start a new run directory"));
  epoch_ = e;
  index_ = i;
}

}  // namespace mtk::wmt
