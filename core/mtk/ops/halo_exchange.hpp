#pragma once
// Halo exchange along a blocks dim (spatial partitioning): a spatial dim of size N is written as
// two dims, `blocks` (B blocks, which the layout may split over a mesh dim) and `block` (N / B
// positions per block, never split). halo_exchange widens every block by the borders of its
// neighbour blocks, fetched from the neighbouring processors along the mesh dim that splits
// `blocks`; a local copy where `blocks` is not split. docs/spatial.md.

#include <mtk/graph/graph.hpp>

#include <cstdint>
#include <string>

namespace mtk {

/// What a block at either end of the blocks dim receives where it has no neighbour.
enum class HaloBoundary {
  zero,     ///< the fill value (0 unless given): a zero-padded domain
  periodic  ///< the block at the other end: a periodic domain
};

/// x with `block_dim` widened from n to left + n + right: block b gets positions [n - left, n) of
/// block b - 1 before its own and positions [0, right) of block b + 1 after them (the global
/// positions b * n - left .. b * n + n + right - 1 of the unblocked dim). The result keeps the
/// dims' names. Fails when a halo is wider than a block or the dims are missing.
Tensor halo_exchange(const Tensor& x, const std::string& blocks_dim, const std::string& block_dim,
                     std::int64_t left, std::int64_t right,
                     HaloBoundary boundary = HaloBoundary::zero, double fill = 0.0);

/// The adjoint of halo_exchange (its gradient): `dy` has blocks widened by left + right; each
/// position of the result sums its own entry and the halo entries copied from it, sent back to
/// the processor that owns it. `block_dim` shrinks back by left + right.
Tensor halo_reduce(const Tensor& dy, const std::string& blocks_dim, const std::string& block_dim,
                   std::int64_t left, std::int64_t right,
                   HaloBoundary boundary = HaloBoundary::zero);

}  // namespace mtk
