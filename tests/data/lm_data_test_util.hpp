#pragma once
// Helpers of the language-model data tests: temporary folders (shared by the ranks of a test),
// files, and small synthetic corpora in the LM1B layout.

#include <mtk/data/lm1b_corpus.hpp>

#include <mpi.h>

#include "../temp_dir.hpp"
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdlib.h>
#include <string>
#include <vector>

namespace mtk::test {

inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// A small deterministic generator (no dependence on the standard library's distributions).
class TestRng {
 public:
  explicit TestRng(std::uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_;
  }
  int uniform(int lo, int hi) {
    return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }

 private:
  std::uint64_t state_;
};

/// English-looking sentences (Moses-style tokens, single spaces) from a few hundred made-up words.
inline std::vector<std::string> synthetic_sentences(int count, std::uint64_t seed,
                                                    int min_words = 3, int max_words = 25) {
  static const char* const syllables[] = {"ba", "ke",  "lo",  "mi",  "nu", "ra", "se", "ti",  "vo",
                                          "wa", "the", "and", "ing", "er", "on", "st", "pre", "un"};
  static const char* const punctuation[] = {",", ".", "'s", ";", "?"};
  TestRng rng(seed);
  std::vector<std::string> words;
  TestRng word_rng(12345);
  for (int w = 0; w < 300; ++w) {
    std::string word;
    const int n = word_rng.uniform(1, 3);
    for (int s = 0; s < n; ++s)
      word += syllables[word_rng.uniform(0, 17)];
    if (w % 17 == 0)
      word[0] = static_cast<char>(word[0] - 'a' + 'A');
    words.push_back(word);
  }
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    const int n = rng.uniform(min_words, max_words);
    std::string s;
    for (int k = 0; k < n; ++k) {
      if (k)
        s += ' ';
      // Zipf-like: small indices are frequent.
      const int a = rng.uniform(0, 299), b = rng.uniform(0, 299);
      s += words[static_cast<std::size_t>(std::min(a, b))];
      if (k + 1 < n && rng.uniform(0, 9) == 0)
        s += std::string(" ") + punctuation[rng.uniform(0, 4)];
    }
    s += " .";
    out.push_back(s);
  }
  return out;
}

inline std::string join_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines)
    text += l + "\n";
  return text;
}

/// Writes an LM1B-layout corpus under `root`: `shards` training shards of `lines_per_shard`
/// synthetic sentences and held-out shard 00000 with `heldout_lines`.
inline void write_lm1b_corpus(const std::string& root, int shards, int lines_per_shard,
                              int heldout_lines) {
  namespace fs = std::filesystem;
  for (int s = 1; s <= shards; ++s)
    write_text((fs::path(root) / Lm1bCorpus::kTrainingDir / lm1b_training_shard_name(s)).string(),
               join_lines(synthetic_sentences(lines_per_shard, static_cast<std::uint64_t>(s))));
  write_text((fs::path(root) / Lm1bCorpus::kHeldoutDir / lm1b_heldout_shard_name(0)).string(),
             join_lines(synthetic_sentences(heldout_lines, 999)));
}

}  // namespace mtk::test
