#pragma once
// The checksums of token shards (token_shards.cpp): XXH3-64 for shards written now (format
// version 3), and the hashes of format version 2, kept only to read shards written before it.

#include <cstddef>
#include <cstdint>

namespace mtk::shard_checksums {

/// XXH3-64 (seed 0) of `bytes` bytes at `data`: a format-3 shard's header, token blocks and
/// offsets.
std::uint64_t xxh3_64(const void* data, std::size_t bytes);

/// Format 2 (read only): FNV-1a 64 of the header's first `n` bytes.
std::uint64_t legacy_header(const unsigned char* data, std::size_t n);

/// Format 2 (read only): the 4-lane multiply-rotate chain over `n` int32 values (a token block,
/// or the offsets seen as int32 pairs).
std::uint64_t legacy_tokens(const std::int32_t* t, std::size_t n);

}  // namespace mtk::shard_checksums
