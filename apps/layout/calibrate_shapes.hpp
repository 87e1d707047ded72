#pragma once
// mtk-layout calibrate: the kernels whose rate depends on their shape more than on their size
// (calibrate_shapes.cpp): skinny matrix products (a convolution's few channels, attention's d_kv)
// and a 3-D convolution's patch kernels.

#include <mtk/base/exec_space.hpp>
#include <mtk/cost/machine.hpp>
#include <mtk/parallel/communicator.hpp>

namespace mtk::layout_app {

/// m.matmul_narrow_outer and _inner: einsums [4096, 256] x [256, d] and [4096, d] x [d, 256] for d
/// = 2, 8, 32 and 128, each repeated to ~2e8 FLOPs a run.
void measure_narrow_matmul(const Communicator& world, const ExecSpace& space, int reps,
                           cost::Machine& m);

/// m.elementwise_by_kind's extract_patches and fold_patches: the 3x3x3 patches (SAME) of a
/// [16, 16, 16, 16] block and their fold, bytes read and written over the time; and its einsum:
/// an einsum step's operand and result bytes are priced as one transposed copy of them (what an
/// operand out of the gemm's order costs; the gemm's own reads are in its matmul rate), the rate
/// of reordering [1024, 16, 64] into [16, 1024, 64] (an attention operand's).
void measure_patches(const Communicator& world, const ExecSpace& space, int reps, cost::Machine& m);

}  // namespace mtk::layout_app
