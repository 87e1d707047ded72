#pragma once
// Halo kernels (the local work of ops/halo_exchange.hpp): a tensor whose `blocks` dim counts
// blocks and whose `block` dim indexes the positions inside one block. Strips of a block's border
// are packed for the neighbours, the received strips are assembled around the blocks, and the
// adjoint sums the halos' gradients back into the positions they were copied from.
// (kernels/halo.cpp; conventions in kernels/view.hpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>

namespace mtk::kernels {

/// Positions [begin, begin + width) of `block_dim` in block `block` of `blocks_dim`: a strip of
/// `shape` with those two dims resized to 1 and `width`.
template <class T>
View<T> halo_strip(const ExecSpace& space, const Shape& shape, const View<T>& x, int blocks_dim,
                   int block_dim, std::int64_t block, std::int64_t begin, std::int64_t width);

/// halo_strip written into `out` (its size), e.g. a shared-memory slot the strip is sent from.
template <class T>
void halo_strip_into(const ExecSpace& space, const Shape& shape, const View<T>& x, int blocks_dim,
                     int block_dim, std::int64_t block, std::int64_t begin, std::int64_t width,
                     const View<T>& out);

/// Every block of x widened by `left` positions of the block before it and `right` of the block
/// after it along `block_dim`; the first block's left halo is `from_left` (a strip of width
/// `left`), the last block's right halo `from_right` (width `right`).
template <class T>
View<T> halo_assemble(const ExecSpace& space, const Shape& shape, const View<T>& x, int blocks_dim,
                      int block_dim, const View<T>& from_left, const View<T>& from_right,
                      std::int64_t left, std::int64_t right);

/// The adjoint of halo_assemble: `shape` is that of dy (blocks widened by left + right); each
/// position of the result sums its own gradient, then the one from the right halo of the block
/// before it (`from_left`, width `right`, for the first block), then the one from the left halo of
/// the block after it (`from_right`, width `left`, for the last block), in that order.
template <class T>
View<T> halo_fold(const ExecSpace& space, const Shape& shape, const View<T>& dy, int blocks_dim,
                  int block_dim, const View<T>& from_left, const View<T>& from_right,
                  std::int64_t left, std::int64_t right);

/// Rewrites, in place, the positions of `out` (halo_fold's result, computed with placeholder
/// strips) that read a strip: halo_fold's values there, bitwise, with the strips that arrived.
template <class T>
void halo_fold_edges(const ExecSpace& space, const Shape& shape, const View<T>& dy, int blocks_dim,
                     int block_dim, const View<T>& from_left, const View<T>& from_right,
                     std::int64_t left, std::int64_t right, const View<T>& out);

/// Overwrites, in place, the first block's left halo of `y` (shape `shape`: blocks widened by
/// left + right) with `from_left` and the last block's right halo with `from_right`: what an
/// overlapped exchange does when the strips arrive after halo_assemble ran with placeholders.
template <class T>
void halo_place(const ExecSpace& space, const Shape& shape, const View<T>& y, int blocks_dim,
                int block_dim, const View<T>& from_left, const View<T>& from_right,
                std::int64_t left, std::int64_t right);

}  // namespace mtk::kernels
