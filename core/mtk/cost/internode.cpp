#include <mtk/base/error.hpp>
#include <mtk/cost/internode.hpp>

#include <algorithm>
#include <vector>

namespace mtk::cost {
namespace {

// The groups of a collective over mesh `axes`: every processor's group is the set of processors
// that differ from it only along `axes`; each group listed once, members in rank order.
std::vector<std::vector<int>> groups_over(const MeshShape& mesh, const std::vector<int>& axes) {
  std::vector<std::vector<int>> groups;
  std::vector<bool> seen(static_cast<size_t>(mesh.num_processors()), false);
  for (int p = 0; p < mesh.num_processors(); ++p) {
    if (seen[static_cast<size_t>(p)])
      continue;
    std::vector<int> members;
    for (int q = p; q < mesh.num_processors(); ++q) {
      const std::vector<int> a = mesh.coordinates_of(p), b = mesh.coordinates_of(q);
      bool same = true;
      for (int d = 0; d < mesh.ndims() && same; ++d)
        same = std::find(axes.begin(), axes.end(), d) != axes.end() || a[d] == b[d];
      if (same) {
        members.push_back(q);
        seen[static_cast<size_t>(q)] = true;
      }
    }
    groups.push_back(members);
  }
  return groups;
}

// Bytes out of each node for one call of `payload` bytes per member over one group's members.
std::map<int, double> node_out_bytes(Collective kind, double payload,
                                     const std::vector<int>& members, int per_node) {
  std::map<int, int> on_node;  // node -> members there
  for (int r : members)
    ++on_node[r / per_node];
  std::map<int, double> out;
  const double n = static_cast<double>(on_node.size()), p = static_cast<double>(members.size());
  if (on_node.size() < 2)
    return out;
  for (const auto& [node, m] : on_node) {
    switch (kind) {
      case Collective::allreduce:
        out[node] = 2 * (n - 1) / n * payload;
        break;
      case Collective::allconcat:
      case Collective::reduce_scatter:
        out[node] = (n - 1) * m * payload;
        break;
      case Collective::alltoall:
        out[node] = m * payload * (p - m) / p;
        break;
      case Collective::halo:
        break;  // below: by neighbour
    }
  }
  if (kind == Collective::halo)  // both strips counted in payload: half to each neighbour
    for (size_t i = 0; i + 1 < members.size(); ++i)
      if (members[i] / per_node != members[i + 1] / per_node) {
        out[members[i] / per_node] += payload / 2;
        out[members[i + 1] / per_node] += payload / 2;
      }
  return out;
}

}  // namespace

InternodeVolume internode_volume(const Counters& counters, const MeshShape& mesh,
                                 int ranks_per_node) {
  if (ranks_per_node < 1)
    fail("mtk::cost::internode_volume",
         cat("ranks_per_node is ", ranks_per_node, "; it must be >= 1"));
  InternodeVolume v;
  v.nodes = (mesh.num_processors() + ranks_per_node - 1) / ranks_per_node;
  std::map<int, double> per_node;
  for (const auto& [group, bytes] : counters.group_bytes) {
    const auto calls = counters.group_calls.count(group) ? counters.group_calls.at(group) : 0;
    if (bytes <= 0 || calls <= 0)
      continue;
    // node-level algorithms move per call; the payloads of the calls add up linearly
    for (const auto& members : groups_over(mesh, group.second))
      for (const auto& [node, b] :
           node_out_bytes(group.first, static_cast<double>(bytes), members, ranks_per_node)) {
        per_node[node] += b;
        v.by_kind[group.first] += b;
        v.total_bytes += b;
      }
  }
  for (const auto& [node, b] : per_node)
    v.busiest_node_bytes = std::max(v.busiest_node_bytes, b);
  return v;
}

}  // namespace mtk::cost
