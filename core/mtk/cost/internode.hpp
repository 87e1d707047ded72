#pragma once
// Bytes a training step sends between nodes: for a run of `ranks_per_node` consecutive ranks per
// node (how mpiexec -ppn and Slurm's block distribution place them), from analyze()'s exact
// per-rank collective payloads. Each collective whose group spans nodes is charged what a
// node-aware algorithm must move at least (MPICH's recursive-halving allreduce, for example,
// moves this much on 2 nodes): allreduce 2 (n-1)/n x payload out of each of the group's n nodes;
// allconcat and reduce_scatter each node's share of the slices to the (n-1) other nodes; alltoall
// the parts for members on other nodes; halo the strips whose neighbour is on another node.
// A run's link counters (scripts/testbed counters) read at least this, plus protocol headers.

#include <mtk/parallel/mesh_shape.hpp>
#include <mtk/runtime/program.hpp>

#include <cstdint>
#include <map>

namespace mtk::cost {

struct InternodeVolume {
  int nodes = 1;                         ///< ceil(processors / ranks_per_node)
  double total_bytes = 0;                ///< sent between nodes per step, all nodes together
  double busiest_node_bytes = 0;         ///< sent out of the node that sends the most
  std::map<Collective, double> by_kind;  ///< total_bytes per collective
};

/// The volume of one step of a program with `counters` (one rank's, as every rank's) on `mesh`
/// with `ranks_per_node` ranks per node. Throws naming the value when ranks_per_node < 1.
InternodeVolume internode_volume(const Counters& counters, const MeshShape& mesh,
                                 int ranks_per_node);

}  // namespace mtk::cost
