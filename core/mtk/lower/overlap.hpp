#pragma once
// Overlapped halo exchanges (docs/spatial.md#overlap): a split halo_exchange or halo_reduce lowers
// to a start step (pack, post the transfers) and a finish step (wait, place the strips); the
// pass below moves each start up to just after its input is final and each finish down to just
// before its output is first used, so the steps between (a convolution's interior) run while the
// strips travel.
//
// Overlapped reductions of pending sums (docs/ops-and-lowering.md#overlapped-gradient-reductions).
// The blocking allreduce a pending partial sum gets before its first reader
// (Lowering::materialize) becomes a non-blocking start right after the last step that touches the
// tensor and a wait where the allreduce was; the steps in between (the rest of the backward pass,
// for a weight gradient) run while MPI moves the data, progressed by MPI_Test between steps.
// Small tensors share a bucket (packed, one call); large ones are reduced in place, alone. A
// reduce-scatter of a pending sum (Lowering::relayout) moves the same way, alone, in place in its
// input (which no later step reads), its output a View into it. The sharded optimizer's in-place
// allgather of a new variable (zero_gather) starts where its blocking step was and is waited for
// before the next step touching the variable, else at the end of the run.

#include <mtk/parallel/mesh.hpp>
#include <mtk/runtime/program.hpp>
#include <mtk/runtime/reductions_in_flight.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace mtk {

/// A reduce-scatter step's slice shape and dim, by its output tensor (ReductionBucket::scatter_*).
struct ScatterSpec {
  Shape local;
  int dim = 0;
};
using ScatterSpecs = std::map<int, ScatterSpec>;

/// The buckets for `steps`, in start order: one per in-place allreduce step of a pending sum
/// (Step::sum_axes) over more than one processor of `shape` with other steps between it and the
/// last step touching its tensor, except that tensors under `bucket_bytes` share buckets of at
/// most `bucket_bytes` (0: every tensor alone). `elements_of(t)`: elements of tensor t's slice. The
/// plan depends on the steps only, so every rank of an SPMD program starts the same collectives in
/// the same order. Reduce-scatter steps (one read, sum_axes, their output in `scatters`) whose
/// input no later step touches get a bucket each, and so do allgather steps (their output in
/// `gathers`) with steps between them and the next step touching their variable or output (or
/// the end of the run), where they are waited for.
std::vector<ReductionBucket> plan_reductions(const std::vector<Program::Step>& steps,
                                             const MeshShape& shape,
                                             const std::function<std::int64_t(int)>& elements_of,
                                             std::int64_t bucket_bytes,
                                             const ScatterSpecs& scatters = {},
                                             const GatherSpecs& gathers = {});

/// Rewrites `steps` by plan_reductions(): start steps after, wait steps before, the replaced
/// allreduce steps removed. Returns the state the new steps share (null when nothing changed).
/// `shape`: the mesh lowered for (mesh.shape() unless `dry`: analysis, no communicator made).
/// Creates the sub-communicators the buckets use (collective).
std::shared_ptr<ReductionsInFlight> overlap_reductions(
    std::vector<Program::Step>& steps, const Mesh& mesh, const MeshShape& shape,
    const std::function<std::int64_t(int)>& elements_of, std::int64_t bucket_bytes, bool dry,
    const ScatterSpecs& scatters = {}, const GatherSpecs& gathers = {});

/// The kind of the step that starts an overlapped halo exchange (pack, post the transfers).
StepKind halo_start_kind();
/// The kind of a halo op's local copying (an unsplit dim's copy; a split exchange's interior,
/// between its start and its finish): fresh output storage, not the exchange's time.
StepKind halo_copy_kind();

/// Moves every halo start step (kind halo_start_kind(), writing a token buffer)
/// up past the steps before it and its finish step (the next step reading the token) down past
/// the steps after it, as far as no step in between reads or writes what the moved step writes or
/// writes what it reads, nor updates in place (a blocking allreduce of a pending sum) a buffer
/// whose storage the moved step's buffers may share: a tensor may be the storage of any tensor it
/// was made from by steps without gemm calls (aliases, reshapes), a product's and a start's
/// outputs are storage of their own. Then an exchange with no product between its start and
/// finish takes the nearest product before its start that it does not depend on (with the steps
/// between that depend on that product), unless another exchange would lose its only product
/// (the second and third split dims' halo_reduce take a filter gradient's einsum and allreduce).
/// Only the order of independent steps changes, the same on every rank; each exchange's messages
/// keep their order. Returns how many exchanges have steps between their start and their finish
/// besides their own interior copy.
int overlap_halos(std::vector<Program::Step>& steps);

/// Per halo start step of `steps` (in their final order), the exchange it starts: its halo
/// collective (Step::comm), and the gemm calls (Step::gemms) of the steps between it and its
/// finish, the next step reading its token (Counters::halo_exchanges).
std::vector<Counters::Exchange> record_halo_exchanges(const std::vector<Program::Step>& steps);

}  // namespace mtk
