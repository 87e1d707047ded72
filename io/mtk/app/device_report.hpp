#pragma once
// Which device each rank computes on, for the start-up lines of the training applications: on a
// GPU cluster a rank bound to the wrong GPU (or every rank on GPU 0) is the first thing to rule
// out, and only the rank itself knows what it was given (docs/cluster.md#gpu-jobs).

#include <mtk/parallel/communicator.hpp>

#include <string>
#include <vector>

namespace mtk {

/// What this rank was given and uses: its node, its local rank, the GPU its launcher left it
/// (CUDA_VISIBLE_DEVICES, else ROCR_/HIP_VISIBLE_DEVICES), the Kokkos device it uses in a GPU
/// build (and its PCI bus id), and the CPU cores it may run on.
struct RankDevice {
  std::string host;
  int local_rank = 0;
  /// The physical GPU this rank computes on (GPU builds), or the GPU(s) its launcher gave it
  /// (host builds: given, not used); "" when none.
  std::string gpu;
  /// e.g. "GPU 2 (Kokkos Cuda device 0 of CUDA_VISIBLE_DEVICES=2, PCI 0000:3b:00.0)" or
  /// "host (Kokkos Serial), given GPU 2 (CUDA_VISIBLE_DEVICES=2; not used by this build)".
  std::string text;
  /// The CPU cores the rank may run on, e.g. "0-3,8".
  std::string cores;
};

/// This rank's RankDevice. `local_rank`: its rank among the ranks of its node.
RankDevice local_device(int local_rank);

/// The start-up lines of `tool` (collective over `world`; the lines on rank 0, none elsewhere):
/// "<tool>: N rank(s) on M node(s), <Kokkos>, CUDA-aware MPI on|off", then, when any rank has or
/// was given a GPU, one line per rank ("  rank r on HOST (local l): <device>, cores <c>") and a
/// warning for ranks of one node that share a GPU.
std::vector<std::string> device_report(const Communicator& world, const std::string& tool);

}  // namespace mtk
