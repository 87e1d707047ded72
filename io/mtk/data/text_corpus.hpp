#pragma once
// SPDX-License-Identifier: Apache-2.0
// A corpus of one's own for `mtk-lm1b prepare --text` (docs/lm1b.md, "Any corpus"): the files that
// file names and glob patterns give, a held-out split by a fraction of the lines, and token
// shards joined into one (the held-out pieces of the ranks, mtk-wmt's per-file pairs).

#include <mtk/data/token_shards.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk {

/// The files `patterns` name, in the order given, each pattern's matches sorted (glob(3)); `what`
/// names the option in errors ("--text"). Errors: a pattern that matches no file, a name that
/// does not exist, a folder ("give FOLDER/*.txt"), anything but a regular file, and a file named
/// twice (by one pattern or two).
std::vector<std::string> expand_file_patterns(const std::vector<std::string>& patterns,
                                              const std::string& what);

/// Which lines of a corpus are held out: each line independently with probability `fraction`, by
/// a keyed hash of (file index, line number) and `seed`, so the split depends neither on the
/// number of ranks nor on which rank reads a file.
struct HeldoutSplit {
  double fraction = 0;
  std::uint64_t seed = 1;
  bool held_out(std::size_t file, std::int64_t line) const;
};

/// Joins `pieces` (token shards of one vocabulary, in order) into the shard `output`, every token
/// block checked as it is read; the pieces' counts are summed into the header (source_bytes: the
/// sum of theirs). Returns the header. An error names the piece that does not fit.
TokenShardInfo concatenate_token_shards(const std::vector<std::string>& pieces,
                                        const std::string& output);

/// "00003-news.txt": a piece's file name from its index (1-based) and its source's base name,
/// with characters other than [A-Za-z0-9._-] replaced by '_'.
std::string piece_name(int index, const std::string& source_path);

}  // namespace mtk
