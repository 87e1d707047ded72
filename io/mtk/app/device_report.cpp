#include <mtk/app/device_report.hpp>
#include <mtk/parallel/environment.hpp>
#include <mtk/version.hpp>

#include <Kokkos_Core.hpp>
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime_api.h>
#elif defined(KOKKOS_ENABLE_HIP)
#include <hip/hip_runtime_api.h>
#endif

#include <cstdlib>
#include <map>
#include <sstream>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#endif

namespace mtk {
namespace {

// Fields of one rank's record in the gather: none of them holds this separator.
constexpr char kSep = '\x1f';

// The GPU list the launcher left this rank: the variable and its value ("" when none is set).
std::pair<std::string, std::string> visible_gpus() {
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0')
      return {name, value};
  }
  return {"", ""};
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);)
    parts.push_back(part);
  return parts;
}

std::string host_name() {
  char name[256] = {0};
  if (::gethostname(name, sizeof name - 1) != 0)
    return "?";
  return name;
}

// The cores this rank may run on as ranges ("0-3,8"); "?" where the affinity cannot be read.
std::string core_list() {
#ifdef __linux__
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0)
    return "?";
  std::string text;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set))
      continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set))
      ++last;
    text += (text.empty() ? "" : ",") + std::to_string(c);
    if (last > c)
      text += "-" + std::to_string(last);
    c = last;
  }
  return text;
#else
  return "?";
#endif
}

// The device Kokkos computes on (an index into the visible devices), -1 on host backends.
int kokkos_device_id() {
#if KOKKOS_VERSION >= 40100
  return Kokkos::device_id();
#elif defined(KOKKOS_ENABLE_CUDA)
  return Kokkos::Cuda().cuda_device();
#else
  return -1;
#endif
}

// The PCI bus id of visible device `id` ("" where unknown): the same physical GPU has the same
// one whatever the numbering each rank sees.
std::string pci_bus_id(int id) {
#if defined(KOKKOS_ENABLE_CUDA)
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, id) == cudaSuccess)
    return bus;
#elif defined(KOKKOS_ENABLE_HIP)
  char bus[32] = {0};
  if (hipDeviceGetPCIBusId(bus, sizeof bus, id) == hipSuccess)
    return bus;
#endif
  (void)id;
  return "";
}

std::string encode(const RankDevice& d) {
  return d.host + kSep + std::to_string(d.local_rank) + kSep + d.gpu + kSep + d.text + kSep +
         d.cores;
}

RankDevice decode(const std::string& record) {
  std::vector<std::string> f = split(record, kSep);
  f.resize(5);
  RankDevice d;
  d.host = f[0];
  d.local_rank = f[1].empty() ? 0 : std::atoi(f[1].c_str());
  d.gpu = f[2];
  d.text = f[3];
  d.cores = f[4];
  return d;
}

}  // namespace

RankDevice local_device(int local_rank) {
  RankDevice d;
  d.host = host_name();
  d.local_rank = local_rank;
  d.cores = core_list();
  const auto [variable, list] = visible_gpus();
  const std::string space = Kokkos::DefaultExecutionSpace::name();
  const int id = kokkos_device_id();
  if (id >= 0) {
    // The physical GPU: the id-th entry of the visible list, else the id itself.
    const std::vector<std::string> visible = split(list, ',');
    d.gpu = id < static_cast<int>(visible.size()) ? visible[static_cast<size_t>(id)]
                                                  : std::to_string(id);
    const std::string pci = pci_bus_id(id);
    d.text = "GPU " + d.gpu + " (Kokkos " + space + " device " + std::to_string(id) +
             (variable.empty() ? "" : " of " + variable + "=" + list) +
             (pci.empty() ? "" : ", PCI " + pci) + ")";
    if (!pci.empty())
      d.gpu = pci;
  } else if (!Kokkos::SpaceAccessibility<Kokkos::HostSpace,
                                         Kokkos::DefaultExecutionSpace::memory_space>::accessible) {
    // A device backend whose device id this Kokkos cannot tell (HIP, SYCL before Kokkos 4.1).
    d.gpu = list;
    d.text = "a device (Kokkos " + space + "; id unknown before Kokkos 4.1)" +
             (variable.empty() ? "" : " of " + variable + "=" + list);
  } else {
    d.gpu = list;
    d.text = "host (Kokkos " + space + ")";
    if (!variable.empty())
      d.text += ", given GPU " + list + " (" + variable + "=" + list + "; not used by this build)";
  }
  return d;
}

std::vector<std::string> device_report(const Communicator& world, const std::string& tool) {
  const Communicator node = world.split_node();
  const std::vector<std::string> records = world.gather(encode(local_device(node.rank())));
  if (world.rank() != 0)
    return {};
  std::vector<RankDevice> ranks;
  std::map<std::string, int> nodes;
  bool any_gpu = false;
  for (const std::string& r : records) {
    ranks.push_back(decode(r));
    ++nodes[ranks.back().host];
    any_gpu = any_gpu || !ranks.back().gpu.empty();
  }
  std::vector<std::string> lines;
  lines.push_back(tool + ": " + std::to_string(ranks.size()) + " rank(s) on " +
                  std::to_string(nodes.size()) + " node(s), " + kokkos_description() +
                  ", CUDA-aware MPI " + (cuda_aware_mpi() ? "on" : "off") +
                  (any_gpu ? "; devices:" : ""));
  if (!any_gpu)
    return lines;
  std::map<std::pair<std::string, std::string>, int> holder;  // (host, gpu) -> first rank
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankDevice& d = ranks[r];
    lines.push_back("  rank " + std::to_string(r) + " on " + d.host + " (local " +
                    std::to_string(d.local_rank) + "): " + d.text + ", cores " + d.cores);
    if (d.gpu.empty())
      continue;
    const auto [it, first] = holder.emplace(std::make_pair(d.host, d.gpu), static_cast<int>(r));
    if (!first)
      lines.push_back("  warning: ranks " + std::to_string(it->second) + " and " +
                      std::to_string(r) + " on " + d.host + " share GPU " + d.gpu +
                      " (one rank per GPU: docs/cluster.md#gpu-jobs)");
  }
  return lines;
}

}  // namespace mtk
