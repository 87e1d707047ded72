#include <mtk/base/runtime_options.hpp>
#include <mtk/parallel/collective_wait.hpp>

#include <atomic>
#include <cstdint>
#include <sched.h>
#include <string>
#include <thread>
#include <vector>

namespace mtk {

namespace {
std::atomic<CollectiveWait> g_wait{CollectiveWait::spin};
}  // namespace

CollectiveWait collective_wait() {
  return g_wait.load(std::memory_order_relaxed);
}

void pause_between_polls(unsigned polls) {
  if (polls >= 1000 || collective_wait() == CollectiveWait::yield)
    std::this_thread::yield();
}

void set_collective_wait(CollectiveWait wait) {
  g_wait.store(wait, std::memory_order_relaxed);
}

const char* to_string(CollectiveWait wait) {
  return wait == CollectiveWait::yield ? "yield" : "spin";
}

bool node_oversubscribed(const Communicator& comm) {
  const Communicator node = comm.split_node();
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
#else
  const std::int64_t cpus =
      node.max(static_cast<std::int64_t>(std::thread::hardware_concurrency()));
#endif
  return cpus > 0 && node.size() > cpus;
}

CollectiveWait choose_collective_wait(const Communicator& comm) {
  const std::string& s = runtime_options().collective_wait();  // checked: auto, spin or yield
  if (s == "spin")
    return CollectiveWait::spin;
  if (s == "yield")
    return CollectiveWait::yield;
  return node_oversubscribed(comm) ? CollectiveWait::yield : CollectiveWait::spin;
}

}  // namespace mtk
