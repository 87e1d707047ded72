#include <mtk/base/error.hpp>
#include <mtk/data/lm_batches.hpp>

#include <algorithm>
#include <sstream>

namespace mtk {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The key of epoch `epoch`'s order.
std::uint64_t epoch_key(std::uint64_t seed, std::int64_t epoch) {
  return splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(epoch) + 0x6C6D2D6F72646572ull));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// IndexPermutation

IndexPermutation::IndexPermutation(std::int64_t n, std::uint64_t key) : n_(n) {
  if (n < 0)
    fail("mtk::IndexPermutation", cat("size ", n, " is negative"));
  int bits = 0;
  while (bits < 62 && (std::int64_t{1} << bits) < n)
    ++bits;
  half_bits_ = std::max(1, (bits + 1) / 2);
  mask_ = (std::uint64_t{1} << half_bits_) - 1;
  for (int r = 0; r < 6; ++r)
    keys_[r] = splitmix64(key + 0x9E3779B97F4A7C15ull * (r + 1));
}

std::uint64_t IndexPermutation::round(int r, std::uint64_t x) const {
  return splitmix64(x ^ keys_[r]) & mask_;
}

std::int64_t IndexPermutation::operator()(std::int64_t i) const {
  if (i < 0 || i >= n_)
    fail("mtk::IndexPermutation", cat("index ", i, " is outside [0, ", n_, ")"));
  if (n_ <= 1)
    return i;
  // A balanced Feistel network permutes [0, 4^half_bits); walking the cycle until the value falls
  // in [0, n) permutes [0, n) (fewer than 4 steps on average, as 4^half_bits < 4n).
  auto x = static_cast<std::uint64_t>(i);
  do {
    std::uint64_t left = x >> half_bits_, right = x & mask_;
    for (int r = 0; r < 6; ++r) {
      const std::uint64_t next = left ^ round(r, right);
      left = right;
      right = next;
    }
    x = (left << half_bits_) | right;
  } while (x >= static_cast<std::uint64_t>(n_));
  return static_cast<std::int64_t>(x);
}

// ---------------------------------------------------------------------------------------------
// PackedSequences

PackedSequences::PackedSequences(std::vector<TokenShard> shards, std::int64_t length)
    : shards_(std::move(shards)), length_(length) {
  const char* where = "mtk::PackedSequences";
  if (length < 1)
    fail(where, cat("sequence length ", length, " must be positive"));
  if (shards_.empty())
    fail(where, "no token shards");
  const TokenShardInfo& first = shards_.front().info();
  vocab_size_ = first.vocab_size;
  for (const auto& shard : shards_) {
    const TokenShardInfo& info = shard.info();
    if (info.vocab_fingerprint != first.vocab_fingerprint || info.vocab_size != first.vocab_size ||
        info.eos_id != first.eos_id)
      fail(where, cat("'", shard.path(), "' was encoded with another vocabulary than '",
                      shards_.front().path(), "' (", info.vocab_size, " vs ", first.vocab_size,
                      " pieces); prepare all shards with one vocabulary"));
    const std::int64_t* off = shard.offsets();
    const std::int64_t n = info.num_sentences;
    std::vector<std::int64_t> bounds{0};
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t b = off[i], e = off[i + 1];
      if (e <= b || e > info.num_tokens)
        fail(where, cat("'", shard.path(), "' has damaged sentence offsets at sentence ", i));
      const std::int64_t len = e - b, fill = b - bounds.back();
      if (len > length_) {
        ++cut_;
        if (fill > 0)
          bounds.push_back(b);
        std::int64_t p = b;
        while (e - p > length_) {
          p += length_;
          bounds.push_back(p);
        }
      } else if (fill + len > length_) {
        bounds.push_back(b);
      }
    }
    if (info.num_tokens > bounds.back())
      bounds.push_back(info.num_tokens);
    first_.push_back(total_);
    total_ += static_cast<std::int64_t>(bounds.size()) - 1;
    num_tokens_ += info.num_tokens;
    num_sentences_ += n;
    bounds_.push_back(std::move(bounds));
  }
}

std::shared_ptr<const PackedSequences> PackedSequences::open(const std::vector<std::string>& paths,
                                                             std::int64_t length) {
  std::vector<TokenShard> shards;
  shards.reserve(paths.size());
  for (const auto& p : paths)
    shards.push_back(TokenShard::open(p));
  return std::make_shared<const PackedSequences>(std::move(shards), length);
}

std::int64_t PackedSequences::tokens_in(std::int64_t s) const {
  if (s < 0 || s >= total_)
    fail("mtk::PackedSequences", cat("sequence ", s, " is outside [0, ", total_, ")"));
  const auto k = static_cast<std::size_t>(std::upper_bound(first_.begin(), first_.end(), s) -
                                          first_.begin() - 1);
  const auto j = static_cast<std::size_t>(s - first_[k]);
  return bounds_[k][j + 1] - bounds_[k][j];
}

const std::int32_t* PackedSequences::checked_tokens(std::int64_t s, const char* where,
                                                    std::int64_t* count,
                                                    const TokenShard** shard_out) const {
  if (s < 0 || s >= total_)
    fail(where, cat("sequence ", s, " is outside [0, ", total_, ")"));
  const auto k = static_cast<std::size_t>(std::upper_bound(first_.begin(), first_.end(), s) -
                                          first_.begin() - 1);
  const auto j = static_cast<std::size_t>(s - first_[k]);
  const std::int64_t b = bounds_[k][j], e = bounds_[k][j + 1];
  const TokenShard& shard = shards_[k];
  const std::int32_t* tok = shard.tokens(b, e - b);  // checksums of the blocks read
  for (std::int64_t t = 0; t < e - b; ++t)
    if (tok[t] < 0 || tok[t] >= vocab_size_)
      fail(where, cat("'", shard.path(), "': token ", b + t, " is ", tok[t],
                      ", outside the vocabulary of ", vocab_size_));
  *count = e - b;
  if (shard_out != nullptr)
    *shard_out = &shard;
  return tok;
}

void PackedSequences::check(std::int64_t s) const {
  std::int64_t count = 0;
  checked_tokens(s, "mtk::PackedSequences::fill", &count, nullptr);
}

void PackedSequences::fill(std::int64_t s, std::int32_t* inputs, std::int32_t* targets,
                           std::int32_t* segment_ids, std::int32_t* positions) const {
  const auto L = static_cast<std::size_t>(length_);
  std::fill(inputs, inputs + L, 0);
  std::fill(targets, targets + L, 0);
  std::fill(segment_ids, segment_ids + L, 0);
  std::fill(positions, positions + L, 0);
  if (s == -1)
    return;
  if (s < 0 || s >= total_)
    fail("mtk::PackedSequences::fill", cat("sequence ", s, " is outside [0, ", total_, ")"));
  std::int64_t count = 0;
  const TokenShard* shard = nullptr;
  const std::int32_t* tok = checked_tokens(s, "mtk::PackedSequences::fill", &count, &shard);
  const std::int32_t eos = shard->info().eos_id;
  std::int32_t segment = 1, position = 0, previous = 0;
  for (std::int64_t t = 0; t < count; ++t) {
    const std::int32_t x = tok[t];
    targets[t] = x;
    inputs[t] = position == 0 ? 0 : previous;
    segment_ids[t] = segment;
    positions[t] = position;
    previous = x;
    if (x == eos) {
      ++segment;
      position = 0;
    } else {
      ++position;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// LmBatchStream

LmBatchStream::LmBatchStream(std::shared_ptr<const PackedSequences> sequences,
                             const LmBatchOptions& options)
    : sequences_(std::move(sequences)), options_(options) {
  const char* where = "mtk::LmBatchStream";
  if (!sequences_)
    fail(where, "no sequences");
  if (sequences_->size() == 0)
    fail(where, "the token shards hold no sentence, so there is no sequence to batch");
  if (options_.global_batch <= 0)
    fail(where, cat("global batch ", options_.global_batch, " must be positive"));
  if (options_.batch_slices <= 0)
    fail(where, cat("batch_slices ", options_.batch_slices, " must be positive"));
  if (options_.global_batch % options_.batch_slices != 0)
    fail(where, cat("global batch ", options_.global_batch, " is not divisible by the ",
                    options_.batch_slices, " slices of the batch dimension"));
  if (options_.slice_index < 0 || options_.slice_index >= options_.batch_slices)
    fail(where,
         cat("slice_index ", options_.slice_index, " is outside [0, ", options_.batch_slices, ")"));
}

std::int64_t LmBatchStream::sequence_at(std::int64_t epoch, std::int64_t index) const {
  const std::int64_t n = sequences_->size();
  if (index < 0 || index >= n || epoch < 0)
    fail("mtk::LmBatchStream::sequence_at",
         cat("epoch ", epoch, " index ", index, " is outside [0, ", n, ")"));
  if (!options_.shuffle)
    return index;
  return IndexPermutation(n, epoch_key(options_.seed, epoch))(index);
}

bool LmBatchStream::done() const {
  return !options_.repeat && position_.epoch >= 1;
}

std::int64_t LmBatchStream::batches_per_epoch() const {
  return (sequences_->size() + options_.global_batch - 1) / options_.global_batch;
}

LmBatch LmBatchStream::next() {
  if (done())
    fail("mtk::LmBatchStream::next", "the pass over the data is complete (repeat is off)");
  const std::int64_t n = sequences_->size();
  const std::int64_t B = options_.global_batch;
  const std::int64_t L = sequences_->length();
  LmBatch batch;
  batch.rows = B / options_.batch_slices;
  batch.length = L;
  batch.first_row = batch.rows * options_.slice_index;
  batch.position = position_;
  const auto cells = static_cast<std::size_t>(batch.rows * L);
  batch.inputs.resize(cells);
  batch.targets.resize(cells);
  batch.segment_ids.resize(cells);
  batch.positions.resize(cells);

  // Each row's sequence follows from the position alone: the same on every rank.
  std::int64_t epoch = position_.epoch, index = position_.index;
  std::unique_ptr<IndexPermutation> order;
  auto make_order = [&] {
    order = options_.shuffle
                ? std::make_unique<IndexPermutation>(n, epoch_key(options_.seed, epoch))
                : nullptr;
  };
  make_order();
  for (std::int64_t r = 0; r < B; ++r) {
    std::int64_t s = -1;
    if (options_.repeat || epoch == 0)
      s = order ? (*order)(index) : index;
    if (s >= 0) {
      const std::int64_t tokens = sequences_->tokens_in(s);
      batch.global_tokens += tokens;
      ++batch.global_sequences;
      if (r >= batch.first_row && r < batch.first_row + batch.rows)
        batch.local_tokens += tokens;
    }
    if (r >= batch.first_row && r < batch.first_row + batch.rows) {
      const auto at = static_cast<std::size_t>((r - batch.first_row) * L);
      sequences_->fill(s, batch.inputs.data() + at, batch.targets.data() + at,
                       batch.segment_ids.data() + at, batch.positions.data() + at);
    } else if (s >= 0) {
      // Other ranks' rows are checked too, so a damaged shard or an id outside the vocabulary
      // stops every rank with the same message, not only the rank that reads it.
      sequences_->check(s);
    }
    if (++index == n) {
      index = 0;
      ++epoch;
      make_order();
    }
  }
  position_ = (!options_.repeat && epoch >= 1) ? LmPosition{1, 0} : LmPosition{epoch, index};
  return batch;
}

void LmBatchStream::seek(const LmPosition& p) {
  if (p.epoch < 0 || p.index < 0 || p.index >= sequences_->size())
    fail("mtk::LmBatchStream::seek", cat("position epoch ", p.epoch, " index ", p.index,
                                         " is outside [0, ", sequences_->size(), ")"));
  position_ = p;
}

std::string LmBatchStream::save() const {
  return cat("lm-position v1 epoch=", position_.epoch, " index=", position_.index,
             " sequences=", sequences_->size(), " length=", sequences_->length(),
             " seed=", options_.seed, " shuffle=", options_.shuffle ? 1 : 0);
}

void LmBatchStream::restore(const std::string& saved) {
  const char* where = "mtk::LmBatchStream::restore";
  std::istringstream in(saved);
  std::string magic, version, item;
  in >> magic >> version;
  if (magic != "lm-position" || version != "v1")
    fail(where, cat("'", saved, "' is not a saved data position (expected 'lm-position v1 ...')"));
  LmPosition p{-1, -1};
  std::string sequences, length, seed, shuffle;
  while (in >> item) {
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      fail(where, cat("'", saved, "': '", item, "' is not key=value"));
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    try {
      if (key == "epoch") {
        p.epoch = std::stoll(value);
      } else if (key == "index") {
        p.index = std::stoll(value);
      } else if (key == "sequences") {
        sequences = value;
      } else if (key == "length") {
        length = value;
      } else if (key == "seed") {
        seed = value;
      } else if (key == "shuffle") {
        shuffle = value;
      } else {
        fail(where, cat("'", saved, "': unknown key '", key, "'"));
      }
    } catch (const std::logic_error&) {
      fail(where, cat("'", saved, "': '", item, "' is not a number"));
    }
  }
  if (p.epoch < 0 || p.index < 0)
    fail(where, cat("'", saved, "' lacks epoch or index"));
  std::vector<std::string> differ;
  auto check = [&](const char* what, const std::string& was, const std::string& now) {
    if (was != now)
      differ.push_back(cat(what, " ", was, " (now ", now, ")"));
  };
  check("sequences", sequences, cat(sequences_->size()));
  check("length", length, cat(sequences_->length()));
  check("seed", seed, cat(options_.seed));
  check("shuffle", shuffle, options_.shuffle ? "1" : "0");
  if (!differ.empty()) {
    std::string list;
    for (const auto& d : differ)
      list += (list.empty() ? "" : ", ") + d;
    fail(where, cat("the position was saved for other data or settings: ", list));
  }
  seek(p);
}

}  // namespace mtk
