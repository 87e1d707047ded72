#include <mtk/base/error.hpp>
#include <mtk/data/lm_batches.hpp>
#include <mtk/data/wmt_pairs.hpp>

#include <algorithm>
#include <sstream>

namespace mtk::wmt {

PairStream::PairStream(TokenShard source, TokenShard target, std::int64_t global_batch,
                       std::int64_t length, int batch_slices, int slice_index, std::uint64_t seed)
    : source_(std::move(source)),
      target_(std::move(target)),
      global_batch_(global_batch),
      length_(length),
      slices_(batch_slices),
      slice_(slice_index),
      seed_(seed) {
  if (source_.num_sentences() != target_.num_sentences())
    fail("mtk::wmt::PairStream",
         cat("source shard ", source_.path(), " has ", source_.num_sentences(),
             " sentences but target shard ", target_.path(), " has ", target_.num_sentences(),
             "; run `mtk-wmt prepare` again"));
  if (source_.num_sentences() == 0)
    fail("mtk::wmt::PairStream", cat("no training pairs in ", source_.path()));
  if (global_batch_ % slices_ != 0)
    fail("mtk::wmt::PairStream", cat("model.batch = ", global_batch_, " is not divisible by the ",
                                     slices_, " batch slices"));
}

std::int64_t PairStream::batches_per_epoch() const {
  return (size() + global_batch_ - 1) / global_batch_;
}

std::int64_t PairStream::pair_at(std::int64_t epoch, std::int64_t index) const {
  const std::uint64_t key = seed_ * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(epoch);
  return IndexPermutation(size(), key)(index);
}

void fill_pair_row(PairBatch& b, std::int64_t row, const std::vector<std::int32_t>& source,
                   const std::vector<std::int32_t>& target) {
  const std::int64_t L = b.length;
  const std::int64_t ns = std::min<std::int64_t>(L, static_cast<std::int64_t>(source.size()));
  const std::int64_t nt = std::min<std::int64_t>(L, static_cast<std::int64_t>(target.size()));
  for (std::int64_t i = 0; i < ns; ++i) {
    const auto k = static_cast<std::size_t>(row * L + i);
    b.sources[k] = source[static_cast<std::size_t>(i)];
    b.source_segments[k] = 1;
    b.source_positions[k] = static_cast<std::int32_t>(i);
  }
  for (std::int64_t i = 0; i < nt; ++i) {
    const auto k = static_cast<std::size_t>(row * L + i);
    b.targets[k] = target[static_cast<std::size_t>(i)];
    b.inputs[k] = i == 0 ? 0 : target[static_cast<std::size_t>(i - 1)];
    b.segments[k] = 1;
    b.positions[k] = static_cast<std::int32_t>(i);
  }
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
  for (std::int64_t r = 0; r < global_batch_; ++r) {
    if (index_ >= size()) {
      ++epoch_;
      index_ = 0;
    }
    const std::int64_t pair = pair_at(epoch_, index_++);
    const std::int64_t target_tokens = std::min<std::int64_t>(
        length_, target_.sentence_offset(pair + 1) - target_.sentence_offset(pair));
    b.global_tokens += target_tokens;
    const std::int64_t local = r - slice_ * rows;
    if (local >= 0 && local < rows)
      fill_pair_row(b, local, source_.sentence(pair), target_.sentence(pair));
  }
  return b;
}

std::string PairStream::save() const {
  return cat(epoch_, " ", index_, " seed=", seed_, " pairs=", size());
}

void PairStream::restore(const std::string& saved) {
  const char* where = "mtk::wmt::PairStream";
  std::istringstream is(saved);
  std::int64_t e = -1, i = -1;
  if (!(is >> e >> i) || e < 0 || i < 0 || i > size())
    fail(where,
         cat("data position '", saved, "' is not 'epoch index' with index in [0, ", size(), "]"));
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
  }
  epoch_ = e;
  index_ = i;
}

}  // namespace mtk::wmt
