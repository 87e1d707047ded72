#include <mtk/parallel/node_cpus.hpp>

#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace mtk {

std::int64_t node_cpus(const Communicator& node) {
#if defined(__linux__)
  cpu_set_t mine;
  CPU_ZERO(&mine);
  std::vector<int> cpu(CPU_SETSIZE, 0);  // 1 where this rank may run
  if (sched_getaffinity(0, sizeof mine, &mine) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      cpu[static_cast<size_t>(c)] = CPU_ISSET(c, &mine) ? 1 : 0;
  std::int64_t cpus = 0;  // in the union over the node's ranks
  for (int any : node.max(cpu))
    cpus += any;
  return cpus;
#else
  return node.max(static_cast<std::int64_t>(std::thread::hardware_concurrency()));
#endif
}

}  // namespace mtk
