#include <mtk/app/memory_budget.hpp>
#include <mtk/base/allocation.hpp>
#include <mtk/base/error.hpp>
#include <mtk/metrics/metrics.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

namespace mtk {

namespace {

// A number from a one-line file ("max" and unreadable files give -1).
std::int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max")
    return -1;
  try {
    return std::stoll(text);
  } catch (const std::exception&) {
    return -1;
  }
}

std::int64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    std::string key, unit;
    long long kib = 0;
    if (ss >> key >> kib >> unit && key == "MemAvailable:")
      return static_cast<std::int64_t>(kib) * 1024;
  }
  return -1;
}

}  // namespace

MemoryBudget host_memory_budget(const Communicator& comm) {
  MemoryBudget b;
  b.ranks_on_node = comm.split_node().size();
  auto consider = [&](std::int64_t bytes, const char* source) {
    if (bytes >= 0 && (b.node_bytes < 0 || bytes < b.node_bytes)) {
      b.node_bytes = bytes;
      b.source = source;
    }
  };
  consider(mem_available(), "/proc/meminfo MemAvailable");
  // A container's or a batch job's limit (the cgroup namespace's root is the job's cgroup).
  const std::int64_t v2_max = read_number("/sys/fs/cgroup/memory.max");
  const std::int64_t v2_cur = read_number("/sys/fs/cgroup/memory.current");
  if (v2_max >= 0 && v2_cur >= 0)
    consider(std::max<std::int64_t>(0, v2_max - v2_cur), "cgroup memory.max - memory.current");
  const std::int64_t v1_max = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  const std::int64_t v1_cur = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
  // v1 reports "no limit" as a huge number; consider() keeps the smaller figure anyway.
  if (v1_max >= 0 && v1_cur >= 0 && v1_max < (std::int64_t{1} << 60))
    consider(std::max<std::int64_t>(0, v1_max - v1_cur),
             "cgroup memory.limit_in_bytes - memory.usage_in_bytes");
  return b;
}

void check_memory_fits(const Communicator& comm, std::int64_t peak_bytes, const std::string& what) {
  // On a GPU the peak is device memory, which this check does not measure.
  constexpr bool host =
      std::is_same_v<Kokkos::DefaultExecutionSpace::memory_space, Kokkos::HostSpace>;
  if (!host)
    return;
  const MemoryBudget b = host_memory_budget(comm);
  set_memory_context(comm.rank(), peak_bytes, b.per_rank());
  std::string failure;
  if (b.per_rank() >= 0 && peak_bytes > b.per_rank())
    failure = cat(
        "mtk::check_memory_fits: ", what, " needs ", format_bytes(static_cast<double>(peak_bytes)),
        " per rank at its peak, but rank ", comm.rank(), "'s node has ",
        format_bytes(static_cast<double>(b.node_bytes)), " available (", b.source, ") for its ",
        b.ranks_on_node, " rank(s), ", format_bytes(static_cast<double>(b.per_rank())),
        " each; use a smaller model.batch or model, or more ranks/nodes with a layout that "
        "splits it");
  agree(comm, failure);
}

}  // namespace mtk
