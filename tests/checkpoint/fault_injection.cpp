// Fault injection for the checkpoint kill tests (fault_injection.hpp).
#include "fault_injection.hpp"

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/impl/test_hooks.hpp>
#include <mtk/parallel/communicator.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace mtk::ckpt_test {
namespace {

std::string g_abort_after;  // the phase, empty: none
int g_abort_rank = -1;      // -1: any rank
long g_delay_ms = 0;

long number(const char* name, const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0)
    fail("ckpt_writer", cat(name, " is '", text, "'; allowed: a whole number >= 0"));
  return v;
}

void at_phase(const char* phase) {
  if (g_abort_after != phase)
    return;
  const int rank = Communicator::world_rank();
  if (g_abort_rank >= 0 && g_abort_rank != rank)
    return;
  std::fprintf(stderr, "[mtk checkpoint test hook] rank %d: SIGKILL at phase '%s'\n", rank, phase);
  std::fflush(stderr);
  std::raise(SIGKILL);
}

void after_dataset() {
  std::this_thread::sleep_for(std::chrono::milliseconds(g_delay_ms));
}

}  // namespace

void install_fault_injection() {
  const char* after = std::getenv("MTK_CKPT_TEST_ABORT_AFTER");
  const char* who = std::getenv("MTK_CKPT_TEST_ABORT_RANK");
  const char* ms = std::getenv("MTK_CKPT_TEST_DELAY_MS");
  g_abort_after = after ? after : "";
  g_abort_rank = who && *who ? static_cast<int>(number("MTK_CKPT_TEST_ABORT_RANK", who)) : -1;
  g_delay_ms = ms && *ms ? number("MTK_CKPT_TEST_DELAY_MS", ms) : 0;
  ckpt::TestHooks hooks;
  if (!g_abort_after.empty())
    hooks.at_phase = &at_phase;
  if (g_delay_ms > 0)
    hooks.after_dataset = &after_dataset;
  ckpt::set_test_hooks(hooks);
}

}  // namespace mtk::ckpt_test
