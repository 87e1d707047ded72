#include <mtk/checkpoint/impl/fault_injection.hpp>
#include <mtk/parallel/communicator.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace mtk::ckpt {

void test_hook(const char* phase) {
  const char* after = std::getenv("MTK_CKPT_TEST_ABORT_AFTER");
  if (after == nullptr || std::strcmp(after, phase) != 0)
    return;
  const int rank = Communicator::world_rank();
  const char* who = std::getenv("MTK_CKPT_TEST_ABORT_RANK");
  if (who != nullptr && std::atoi(who) != rank)
    return;
  std::fprintf(stderr, "[mtk checkpoint test hook] rank %d: SIGKILL at phase '%s'\n", rank, phase);
  std::fflush(stderr);
  std::raise(SIGKILL);
}

void test_delay() {
  const char* ms = std::getenv("MTK_CKPT_TEST_DELAY_MS");
  if (ms != nullptr)
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

}  // namespace mtk::ckpt
