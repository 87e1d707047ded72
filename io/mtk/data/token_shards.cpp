#include <mtk/base/error.hpp>
#include <mtk/data/impl/shard_checksums.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/prepare_record.hpp>
#include <mtk/data/token_shards.hpp>
#include <mtk/files/files.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>

namespace mtk {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "token shards are little-endian and read in place: a big-endian port must convert");

namespace {

// What to run after a damaged shard: the command recorded in its prepared folder (the same
// settings keep the vocabulary), else the tool that writes shards like it (.tokens: mtk-wmt).
std::string prepare_advice(const std::string& path) {
  const bool wmt = path.size() >= 7 && path.compare(path.size() - 7, 7, ".tokens") == 0;
  return prepare_again_advice(path, wmt ? "mtk-wmt prepare" : "mtk-lm1b prepare");
}

constexpr char kMagic[8] = {'M', 'T', 'K', 'T', 'O', 'K', 'E', 'N'};
constexpr std::uint32_t kVersion = 3;        // written: XXH3-64 checksums
constexpr std::uint32_t kLegacyVersion = 2;  // still read: MTK's own checksums
constexpr std::int64_t kHeaderBytes = 128;
constexpr std::size_t kWriteBuffer = std::size_t{4} << 20;

std::int64_t num_blocks(std::int64_t num_tokens) {
  return (num_tokens + kTokenShardBlock - 1) / kTokenShardBlock;
}

// The checksum of `n` int32 values (a token block, or the offsets seen as int32 pairs).
std::uint64_t checksum_of(TokenShardChecksum kind, const std::int32_t* t, std::size_t n) {
  return kind == TokenShardChecksum::xxh3_64 ? shard_checksums::xxh3_64(t, 4 * n)
                                             : shard_checksums::legacy_tokens(t, n);
}

std::int64_t offsets_offset(std::int64_t num_tokens) {
  const std::int64_t end = kHeaderBytes + 4 * num_tokens;
  return (end + 7) / 8 * 8;
}

std::int64_t checksums_offset(const TokenShardInfo& info) {
  return offsets_offset(info.num_tokens) + 8 * (info.num_sentences + 1);
}

// Header, tokens, padding, offsets, then one checksum per token block and one of the offsets.
std::int64_t file_bytes(const TokenShardInfo& info) {
  return checksums_offset(info) + 8 * (num_blocks(info.num_tokens) + 1);
}

// The header as it lies on disk (host byte order, as always): a struct whose layout the
// static_asserts pin, so a field cannot move without the format version changing.
struct ShardHeader {
  char magic[8];
  std::uint32_t version;
  std::uint16_t header_bytes;
  std::uint16_t checksum_kind;  ///< TokenShardChecksum (version 2's u32 header size left it 0)
  std::int32_t vocab_size;
  std::int32_t eos_id;
  std::uint64_t vocab_fingerprint;
  std::int64_t num_sentences;
  std::int64_t num_tokens;
  std::int64_t num_words;
  std::int64_t tokens_offset;
  std::int64_t offsets_offset;
  std::uint64_t source_bytes;
  std::int64_t max_line_bytes;
  std::int64_t source_lines;
  std::int64_t skipped_empty;
  std::int64_t skipped_invalid_utf8;
  std::int64_t skipped_too_long;
  std::uint64_t checksum;  ///< of the 120 bytes before it (XXH3-64; FNV-1a 64 in version 2)
};
static_assert(std::is_trivially_copyable_v<ShardHeader> && sizeof(ShardHeader) == kHeaderBytes);
static_assert(offsetof(ShardHeader, version) == 8 && offsetof(ShardHeader, checksum_kind) == 14 &&
              offsetof(ShardHeader, vocab_size) == 16 &&
              offsetof(ShardHeader, vocab_fingerprint) == 24 &&
              offsetof(ShardHeader, num_sentences) == 32 &&
              offsetof(ShardHeader, tokens_offset) == 56 &&
              offsetof(ShardHeader, source_bytes) == 72 &&
              offsetof(ShardHeader, skipped_too_long) == 112 &&
              offsetof(ShardHeader, checksum) == 120);

std::uint64_t header_checksum(TokenShardChecksum kind, const unsigned char* h) {
  constexpr std::size_t n = offsetof(ShardHeader, checksum);
  return kind == TokenShardChecksum::xxh3_64 ? shard_checksums::xxh3_64(h, n)
                                             : shard_checksums::legacy_header(h, n);
}

void encode_header(const TokenShardInfo& info, unsigned char* h) {
  ShardHeader s{};
  std::memcpy(s.magic, kMagic, sizeof s.magic);
  s.version = kVersion;
  s.header_bytes = static_cast<std::uint16_t>(kHeaderBytes);
  s.checksum_kind = static_cast<std::uint16_t>(TokenShardChecksum::xxh3_64);
  s.vocab_size = info.vocab_size;
  s.eos_id = info.eos_id;
  s.vocab_fingerprint = info.vocab_fingerprint;
  s.num_sentences = info.num_sentences;
  s.num_tokens = info.num_tokens;
  s.num_words = info.num_words;
  s.tokens_offset = kHeaderBytes;
  s.offsets_offset = offsets_offset(info.num_tokens);
  s.source_bytes = info.source_bytes;
  s.max_line_bytes = info.max_line_bytes;
  s.source_lines = info.source_lines;
  s.skipped_empty = info.skipped_empty;
  s.skipped_invalid_utf8 = info.skipped_invalid_utf8;
  s.skipped_too_long = info.skipped_too_long;
  std::memcpy(h, &s, sizeof s);
  s.checksum = header_checksum(TokenShardChecksum::xxh3_64, h);
  std::memcpy(h, &s, sizeof s);
}

// Decodes and checks a header against the size of its file.
TokenShardInfo decode_header(const unsigned char* h, std::int64_t size, const std::string& path) {
  const char* where = "mtk::TokenShard::open";
  if (size < kHeaderBytes)
    fail(where, cat("'", path, "' is not a token shard: ", size, " bytes, shorter than a header"));
  ShardHeader s;
  std::memcpy(&s, h, sizeof s);
  if (std::memcmp(s.magic, kMagic, sizeof s.magic) != 0)
    fail(where, cat("'", path, "' is not a token shard (no MTKTOKEN magic)"));
  if (s.version != kVersion && s.version != kLegacyVersion)
    fail(where,
         cat("'", path, "' has format version ", s.version, "; this MTK reads versions ",
             kLegacyVersion, " and ", kVersion,
             s.version < kLegacyVersion ? cat(" (with token checksums): ", prepare_advice(path))
                                        : std::string(" (made by a newer MTK)")));
  // Each version has one checksum algorithm: a mismatch is damage, like a wrong checksum.
  const auto kind =
      s.version == kVersion ? TokenShardChecksum::xxh3_64 : TokenShardChecksum::legacy;
  if (s.header_bytes != kHeaderBytes || s.checksum_kind != static_cast<std::uint16_t>(kind) ||
      s.checksum != header_checksum(kind, h))
    fail(where, cat("'", path, "' has a damaged header (checksum mismatch)"));
  TokenShardInfo info;
  info.checksum = kind;
  info.vocab_size = s.vocab_size;
  info.eos_id = s.eos_id;
  info.vocab_fingerprint = s.vocab_fingerprint;
  info.num_sentences = s.num_sentences;
  info.num_tokens = s.num_tokens;
  info.num_words = s.num_words;
  info.source_bytes = s.source_bytes;
  info.max_line_bytes = s.max_line_bytes;
  info.source_lines = s.source_lines;
  info.skipped_empty = s.skipped_empty;
  info.skipped_invalid_utf8 = s.skipped_invalid_utf8;
  info.skipped_too_long = s.skipped_too_long;
  if (info.num_sentences < 0 || info.num_tokens < info.num_sentences ||
      s.tokens_offset != kHeaderBytes || s.offsets_offset != offsets_offset(info.num_tokens))
    fail(where, cat("'", path, "' has an inconsistent header (", info.num_sentences, " sentences, ",
                    info.num_tokens, " tokens)"));
  if (size != file_bytes(info))
    fail(where, cat("'", path, "' has ", size, " bytes; its header (", info.num_sentences,
                    " sentences, ", info.num_tokens, " tokens) needs ", file_bytes(info),
                    " (truncated or damaged: ", prepare_advice(path), ")"));
  return info;
}

}  // namespace

const char* token_shard_checksum_name(TokenShardChecksum checksum) {
  return checksum == TokenShardChecksum::xxh3_64 ? "xxh3-64" : "legacy (format 2)";
}

void TokenShardInfo::set_source_stats(const LineStats& stats) {
  source_lines = stats.lines;
  skipped_empty = stats.empty;
  skipped_invalid_utf8 = stats.invalid_utf8;
  skipped_too_long = stats.too_long;
}

// ---------------------------------------------------------------------------------------------
// Writer

TokenShardWriter::TokenShardWriter(const std::string& path, const TokenShardInfo& info)
    : path_(path), tmp_(temp_path(path)), info_(info) {
  const char* where = "mtk::TokenShardWriter";
  if (info_.vocab_size <= 0)
    fail(where, cat(path, ": vocab_size must be positive"));
  if (info_.eos_id < 0 || info_.eos_id >= info_.vocab_size)
    fail(where, cat(path, ": eos_id ", info_.eos_id, " is outside [0, ", info_.vocab_size, ")"));
  info_.num_sentences = info_.num_tokens = info_.num_words = 0;
  info_.checksum = TokenShardChecksum::xxh3_64;
  block_.reserve(static_cast<std::size_t>(kTokenShardBlock));
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    fail(where, cat("cannot create '", tmp_, "': ", std::strerror(errno)));
  buffer_.reserve(kWriteBuffer);
  const std::vector<char> placeholder(kHeaderBytes, 0);
  write(placeholder.data(), placeholder.size());
  offsets_.push_back(0);
}

TokenShardWriter::~TokenShardWriter() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!finished_)
    ::unlink(tmp_.c_str());
}

void TokenShardWriter::write(const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  if (buffer_.size() + bytes > kWriteBuffer || p == nullptr) {
    std::size_t done = 0;
    while (done < buffer_.size()) {
      const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        fail("mtk::TokenShardWriter", cat("cannot write '", tmp_, "': ", std::strerror(errno)));
      done += static_cast<std::size_t>(n);
    }
    written_ += static_cast<std::int64_t>(buffer_.size());
    buffer_.clear();
  }
  if (p)
    buffer_.insert(buffer_.end(), p, p + bytes);
}

void TokenShardWriter::add_sentence(const std::int32_t* ids, std::size_t count,
                                    std::int64_t words) {
  if (finished_)
    fail("mtk::TokenShardWriter::add_sentence", cat(path_, ": already finished"));
  for (std::size_t i = 0; i < count; ++i)
    if (ids[i] < 0 || ids[i] >= info_.vocab_size || ids[i] == info_.eos_id)
      fail("mtk::TokenShardWriter::add_sentence",
           cat(path_, ": sentence ", info_.num_sentences + 1, " has id ", ids[i],
               ids[i] == info_.eos_id ? " (the end-of-sentence id)" : "", " at token ", i,
               " (vocabulary of ", info_.vocab_size, ")"));
  if (count)
    write(ids, count * sizeof(std::int32_t));
  write(&info_.eos_id, sizeof(std::int32_t));
  for (std::size_t i = 0; i <= count; ++i) {
    block_.push_back(i < count ? ids[i] : info_.eos_id);
    if (static_cast<std::int64_t>(block_.size()) == kTokenShardBlock) {
      block_sums_.push_back(checksum_of(info_.checksum, block_.data(), block_.size()));
      block_.clear();
    }
  }
  info_.num_tokens += static_cast<std::int64_t>(count) + 1;
  info_.num_words += words;
  ++info_.num_sentences;
  offsets_.push_back(info_.num_tokens);
}

TokenShardInfo TokenShardWriter::finish() {
  const char* where = "mtk::TokenShardWriter::finish";
  if (finished_)
    fail(where, cat(path_, ": already finished"));
  const std::int64_t pad = offsets_offset(info_.num_tokens) - (kHeaderBytes + 4 * info_.num_tokens);
  const char zeros[8] = {};
  if (pad)
    write(zeros, static_cast<std::size_t>(pad));
  write(offsets_.data(), offsets_.size() * sizeof(std::int64_t));
  if (!block_.empty())
    block_sums_.push_back(checksum_of(info_.checksum, block_.data(), block_.size()));
  block_sums_.push_back(checksum_of(
      info_.checksum, reinterpret_cast<const std::int32_t*>(offsets_.data()), offsets_.size() * 2));
  write(block_sums_.data(), block_sums_.size() * sizeof(std::uint64_t));
  write(nullptr, 0);  // flush
  if (written_ != file_bytes(info_))
    fail(where, cat(tmp_, ": wrote ", written_, " bytes, expected ", file_bytes(info_)));
  unsigned char header[kHeaderBytes];
  encode_header(info_, header);
  if (::pwrite(fd_, header, kHeaderBytes, 0) != kHeaderBytes || ::fsync(fd_) != 0)
    fail(where, cat("cannot write '", tmp_, "': ", std::strerror(errno)));
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail(where, cat("cannot close '", tmp_, "': ", std::strerror(errno)));
  }
  fd_ = -1;
  rename_path(tmp_, path_, where);
  finished_ = true;
  return info_;
}

// ---------------------------------------------------------------------------------------------
// Reader

struct TokenShard::Mapping {
  std::string path;
  TokenShardInfo info;
  void* base = nullptr;
  std::size_t bytes = 0;
  // Token blocks whose checksum was found right (each is checked on first read, by any copy).
  std::unique_ptr<std::atomic<bool>[]> verified;
  ~Mapping() {
    if (base)
      ::munmap(base, bytes);
  }
};

TokenShard TokenShard::open(const std::string& path) {
  const char* where = "mtk::TokenShard::open";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(where, cat("cannot open '", path, "': ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(where, cat("'", path, "' is not a regular file"));
  }
  auto map = std::make_shared<Mapping>();
  map->path = path;
  map->bytes = static_cast<std::size_t>(st.st_size);
  if (map->bytes > 0) {
    map->base = ::mmap(nullptr, map->bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (map->base == MAP_FAILED) {
      map->base = nullptr;
      const int e = errno;
      ::close(fd);
      fail(where, cat("cannot map '", path, "': ", std::strerror(e)));
    }
  }
  ::close(fd);
  const auto* bytes = static_cast<const unsigned char*>(map->base);
  if (map->bytes < static_cast<std::size_t>(kHeaderBytes))
    fail(where,
         cat("'", path, "' is not a token shard: ", map->bytes, " bytes, shorter than a header"));
  map->info = decode_header(bytes, static_cast<std::int64_t>(map->bytes), path);
  TokenShard shard;
  shard.map_ = map;
  const std::int64_t* off = shard.offsets();
  const std::int64_t blocks = num_blocks(map->info.num_tokens);
  const auto* sums = reinterpret_cast<const std::uint64_t*>(bytes + checksums_offset(map->info));
  if (checksum_of(map->info.checksum, reinterpret_cast<const std::int32_t*>(off),
                  static_cast<std::size_t>(2 * (map->info.num_sentences + 1))) != sums[blocks])
    fail(where, cat("'", path, "': the sentence offsets (bytes ",
                    offsets_offset(map->info.num_tokens), "..", checksums_offset(map->info) - 1,
                    ") do not match their checksum: the shard is damaged; run `mtk-lm1b prepare` "
                    "again"));
  if (off[0] != 0 || off[map->info.num_sentences] != map->info.num_tokens)
    fail(where, cat("'", path, "' has damaged sentence offsets"));
  map->verified = std::make_unique<std::atomic<bool>[]>(static_cast<std::size_t>(blocks));
  for (std::int64_t b = 0; b < blocks; ++b)
    map->verified[static_cast<std::size_t>(b)].store(false, std::memory_order_relaxed);
  return shard;
}

TokenShardInfo TokenShard::read_info(const std::string& path) {
  const char* where = "mtk::TokenShard::open";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail(where, cat("cannot open '", path, "': ", std::strerror(errno)));
  struct stat st {};
  unsigned char header[kHeaderBytes] = {};
  const bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const ssize_t got = ok ? ::pread(fd, header, kHeaderBytes, 0) : -1;
  ::close(fd);
  if (!ok)
    fail(where, cat("'", path, "' is not a regular file"));
  if (got < kHeaderBytes)
    fail(where, cat("'", path, "' is not a token shard: shorter than a header"));
  return decode_header(header, static_cast<std::int64_t>(st.st_size), path);
}

bool TokenShard::is_current(const std::string& path, std::uint64_t vocab_fingerprint,
                            std::uint64_t source_bytes, std::int64_t max_line_bytes,
                            std::string* why) {
  auto reason = [&](const std::string& text) {
    if (why)
      *why = text;
    return false;
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return reason("not written yet");
  TokenShard shard;
  try {
    shard = TokenShard::open(path);
  } catch (const Error& e) {
    return reason(e.what());
  }
  const TokenShardInfo& info = shard.info();
  if (info.vocab_fingerprint != vocab_fingerprint)
    return reason("made with another vocabulary");
  if (info.source_bytes != source_bytes)
    return reason(cat("made from a source of ", info.source_bytes, " bytes, now ", source_bytes));
  if (info.max_line_bytes != max_line_bytes)
    return reason(cat("made with max line bytes ", info.max_line_bytes, ", now ", max_line_bytes));
  // The same settings are not enough: a damaged shard (what a reader's error advises `prepare`
  // for) must be rebuilt, so every block is checked against its checksum here too.
  try {
    shard.tokens();
  } catch (const Error& e) {
    return reason(e.what());
  }
  return true;
}

const std::string& TokenShard::path() const {
  if (!map_)
    fail("mtk::TokenShard", "not opened");
  return map_->path;
}

const TokenShardInfo& TokenShard::info() const {
  if (!map_)
    fail("mtk::TokenShard", "not opened");
  return map_->info;
}

const std::int32_t* TokenShard::tokens() const {
  return tokens(0, num_tokens());
}

const std::int32_t* TokenShard::tokens(std::int64_t begin, std::int64_t count) const {
  const TokenShardInfo& in = info();
  if (begin < 0 || count < 0 || begin + count > in.num_tokens)
    fail("mtk::TokenShard::tokens", cat(path(), ": tokens [", begin, ", ", begin + count,
                                        ") are outside [0, ", in.num_tokens, ")"));
  const auto* all =
      reinterpret_cast<const std::int32_t*>(static_cast<const char*>(map_->base) + kHeaderBytes);
  if (count == 0)
    return all + begin;
  const auto* sums = reinterpret_cast<const std::uint64_t*>(static_cast<const char*>(map_->base) +
                                                            checksums_offset(in));
  for (std::int64_t b = begin / kTokenShardBlock; b <= (begin + count - 1) / kTokenShardBlock;
       ++b) {
    auto& ok = map_->verified[static_cast<std::size_t>(b)];
    if (ok.load(std::memory_order_acquire))
      continue;
    const std::int64_t first = b * kTokenShardBlock;
    const std::int64_t n = std::min(kTokenShardBlock, in.num_tokens - first);
    if (checksum_of(in.checksum, all + first, static_cast<std::size_t>(n)) != sums[b])
      fail("mtk::TokenShard",
           cat("'", path(), "': tokens ", first, "..", first + n - 1, " (bytes ",
               kHeaderBytes + 4 * first, "..", kHeaderBytes + 4 * (first + n) - 1,
               " of the file) do not match their checksum: the shard is damaged; ",
               prepare_advice(path())));
    ok.store(true, std::memory_order_release);
  }
  return all + begin;
}

const std::int64_t* TokenShard::offsets() const {
  return reinterpret_cast<const std::int64_t*>(static_cast<const char*>(map_->base) +
                                               offsets_offset(map_->info.num_tokens));
}

std::int64_t TokenShard::sentence_offset(std::int64_t i) const {
  if (i < 0 || i > num_sentences())
    fail("mtk::TokenShard::sentence_offset",
         cat(path(), ": sentence ", i, " is outside [0, ", num_sentences(), "]"));
  return offsets()[i];
}

std::vector<std::int32_t> TokenShard::sentence(std::int64_t i) const {
  if (i < 0 || i >= num_sentences())
    fail("mtk::TokenShard::sentence",
         cat(path(), ": sentence ", i, " is outside [0, ", num_sentences(), ")"));
  const std::int64_t b = offsets()[i], e = offsets()[i + 1];
  if (b < 0 || e < b || e > num_tokens())
    fail("mtk::TokenShard::sentence", cat(path(), ": damaged offsets at sentence ", i));
  const std::int32_t* t = tokens(b, e - b);
  return std::vector<std::int32_t>(t, t + (e - b));
}

}  // namespace mtk
