#pragma once
// The settings that shape a lowered program, its memory and its predicted time: the run config's
// `program` section (docs/configuration.md#program), recorded with the run and its checkpoints.
// Graph building (a Graph carries them: nn::conv reads overlap_halo), lower() and analyze(), the
// cost model and Program take them as values; nothing reads them from the environment.
//
//   ProgramOptions o;
//   o.overlap_halo = true;
//   Graph g(o);                       // conv layers built split
//   auto program = lower(g, mesh, rules);   // lowered with g.options(), or pass others

#include <cstdint>

namespace mtk {

/// How activations that only bf16 contractions read are kept (program.bf16_activations).
enum class Bf16Activations {
  automatic,  ///< as bf16 values where that lowers the predicted peak
  on,         ///< always as bf16 values
  off,        ///< in float32
};

/// program.*: every field's default is the behaviour MTK had before the section existed.
struct ProgramOptions {
  /// Allreduces of pending sums start when their tensor is final (mtk/lower/overlap.hpp).
  bool overlap_collectives = true;
  /// With overlap_collectives, the sharded optimizer's allgathers are overlapped too.
  bool overlap_allgather = true;
  /// Overlapped allreduces of tensors under this many MiB share buckets (0: none).
  std::int64_t allreduce_bucket_mib = 4;
  /// A tensor several bf16 contractions read is converted once per run (mtk/lower/bf16_reuse.hpp).
  bool bf16_copies = true;
  /// mtk/lower/bf16_activations.hpp.
  Bf16Activations bf16_activations = Bf16Activations::automatic;
  /// Optimizer updates write into the variables' storage (mtk/lower/in_place_updates.hpp).
  bool in_place_updates = true;
  /// Split halo exchanges overlap the convolutions' interiors (docs/spatial.md).
  bool overlap_halo = false;
  /// Non-blocking float allreduces and halo exchanges inside one node go through shared memory
  /// (mtk/parallel/node_reducer.hpp): a different summation order than MPI's.
  bool node_allreduce = true;
  /// The buffer pool plans shared buffers after a recorded run (mtk/base/buffer_plan.hpp).
  bool buffer_plan = true;
  /// Program::run draws temporaries from its buffer pool.
  bool buffer_reuse = true;

  friend bool operator==(const ProgramOptions& a, const ProgramOptions& b) {
    return a.overlap_collectives == b.overlap_collectives &&
           a.overlap_allgather == b.overlap_allgather &&
           a.allreduce_bucket_mib == b.allreduce_bucket_mib && a.bf16_copies == b.bf16_copies &&
           a.bf16_activations == b.bf16_activations && a.in_place_updates == b.in_place_updates &&
           a.overlap_halo == b.overlap_halo && a.node_allreduce == b.node_allreduce &&
           a.buffer_plan == b.buffer_plan && a.buffer_reuse == b.buffer_reuse;
  }
  friend bool operator!=(const ProgramOptions& a, const ProgramOptions& b) { return !(a == b); }
};

}  // namespace mtk
