// The hook points of impl/test_hooks.hpp: empty unless a test installs hooks.
#include <mtk/checkpoint/impl/test_hooks.hpp>

#include <atomic>

namespace mtk::ckpt {
namespace {

std::atomic<void (*)(const char*)> g_at_phase{nullptr};
std::atomic<void (*)()> g_after_dataset{nullptr};

}  // namespace

void set_test_hooks(const TestHooks& hooks) {
  g_at_phase.store(hooks.at_phase);
  g_after_dataset.store(hooks.after_dataset);
}

void test_hook(const char* phase) {
  if (auto* f = g_at_phase.load(std::memory_order_relaxed))
    f(phase);
}

void test_delay() {
  if (auto* f = g_after_dataset.load(std::memory_order_relaxed))
    f();
}

}  // namespace mtk::ckpt
