// SPDX-License-Identifier: Apache-2.0
#include <mtk/base/error.hpp>
#include <mtk/data/text_corpus.hpp>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <glob.h>
#include <map>

namespace mtk {

namespace fs = std::filesystem;

namespace {

const char* const kWhere = "mtk::expand_file_patterns";

bool has_glob_characters(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

std::vector<std::string> glob_matches(const std::string& pattern, const std::string& what) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  for (std::size_t i = 0; rc == 0 && i < g.gl_pathc; ++i)
    out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && out.empty()))
    fail(kWhere, cat(what, " '", pattern, "' matches no file"));
  if (rc != 0)
    fail(kWhere, cat(what, " '", pattern, "': cannot read a folder it names"));
  return out;
}

void check_file(const std::string& path, const std::string& pattern, const std::string& what) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    fail(kWhere, cat(what, " '", path, "' does not exist"));
  if (fs::is_directory(st))
    fail(kWhere, cat(what, " '", path, "' is a folder: give its files, e.g. '",
                     (fs::path(path) / "*.txt").string(), "'"));
  if (!fs::is_regular_file(st))
    fail(kWhere, cat(what, " '", path, "' (from '", pattern, "') is not a regular file"));
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<std::string> expand_file_patterns(const std::vector<std::string>& patterns,
                                              const std::string& what) {
  std::vector<std::string> out;
  std::map<std::string, std::string> seen;  // canonical path -> the pattern that gave it
  for (const auto& pattern : patterns) {
    const auto matches =
        has_glob_characters(pattern) ? glob_matches(pattern, what) : std::vector{pattern};
    for (const auto& path : matches) {
      check_file(path, pattern, what);
      std::error_code ec;
      const std::string canonical = fs::weakly_canonical(path, ec).string();
      const auto [it, fresh] = seen.emplace(ec ? path : canonical, pattern);
      if (!fresh)
        fail(kWhere, cat(what, ": '", path, "' is named twice (by '", it->second, "' and '",
                         pattern, "'): each file may be read once"));
      out.push_back(path);
    }
  }
  if (out.empty())
    fail(kWhere, cat(what, ": no file given"));
  return out;
}

bool HeldoutSplit::held_out(std::size_t file, std::int64_t line) const {
  if (fraction <= 0)
    return false;
  const std::uint64_t h =
      mix(mix(seed ^ 0x68656C646F7574ull) ^ mix(static_cast<std::uint64_t>(file) << 1) ^
          static_cast<std::uint64_t>(line));
  // The top 53 bits as a double in [0, 1).
  return static_cast<double>(h >> 11) * 0x1.0p-53 < fraction;
}

TokenShardInfo concatenate_token_shards(const std::vector<std::string>& pieces,
                                        const std::string& output) {
  const char* where = "mtk::concatenate_token_shards";
  if (pieces.empty())
    fail(where, cat("no piece to join into '", output, "'"));
  const TokenShardInfo first = TokenShard::read_info(pieces.front());
  TokenShardInfo info = first;
  info.source_bytes = 0;
  info.source_lines = info.skipped_empty = info.skipped_invalid_utf8 = info.skipped_too_long = 0;
  std::vector<TokenShard> shards;
  for (const auto& path : pieces) {
    shards.push_back(TokenShard::open(path));
    const TokenShardInfo& p = shards.back().info();
    if (p.vocab_fingerprint != first.vocab_fingerprint || p.vocab_size != first.vocab_size ||
        p.eos_id != first.eos_id)
      fail(where, cat("'", path, "' was encoded with another vocabulary than '", pieces.front(),
                      "' (", p.vocab_size, " pieces, fingerprint ", p.vocab_fingerprint,
                      " against ", first.vocab_size, ", ", first.vocab_fingerprint, ")"));
    info.source_bytes += p.source_bytes;
    info.source_lines += p.source_lines;
    info.skipped_empty += p.skipped_empty;
    info.skipped_invalid_utf8 += p.skipped_invalid_utf8;
    info.skipped_too_long += p.skipped_too_long;
  }
  TokenShardWriter writer(output, info);
  for (const TokenShard& shard : shards) {
    const std::int64_t n = shard.num_sentences();
    const std::int32_t* tokens = shard.tokens();  // every block checked
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t begin = shard.sentence_offset(i), end = shard.sentence_offset(i + 1);
      // Words are counted per shard, not per sentence: the piece's total goes with its first.
      writer.add_sentence(tokens + begin, static_cast<std::size_t>(end - begin - 1),
                          i == 0 ? shard.info().num_words : 0);
    }
  }
  return writer.finish();  // the source fields of `info` are kept
}

std::string piece_name(int index, const std::string& source_path) {
  std::string base = fs::path(source_path).filename().string();
  for (char& c : base)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      c = '_';
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "%05d-", index);
  return prefix + base;
}

}  // namespace mtk
