#include <mtk/base/runtime_options.hpp>
#include <mtk/parallel/collective_wait.hpp>
#include <mtk/parallel/node_cpus.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

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
  const std::int64_t cpus = node_cpus(node);
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
