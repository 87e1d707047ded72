#include <mtk/base/error.hpp>
#include <mtk/signals/stop_signals.hpp>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>

namespace mtk {

namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
std::atomic<bool> g_installed{false};

extern "C" void mtk_stop_signal_handler(int sig) {
  if ((sig == SIGTERM || sig == SIGINT) && g_stop_signal == sig) {
    // A second SIGTERM (or Ctrl-C): the process is not polling; let the default action end it.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_stop_signal = sig;
}

void install(int sig) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = &mtk_stop_signal_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // interrupted read()/write() resume instead of failing with EINTR
  if (sigaction(sig, &sa, nullptr) != 0)
    fail("mtk::install_stop_signal_handlers",
         cat("sigaction(", sig, ") failed: ", std::strerror(errno)));
}

}  // namespace

void install_stop_signal_handlers() {
  if (g_installed.exchange(true))
    return;
  install(SIGTERM);
  install(SIGUSR1);
  install(SIGINT);  // Ctrl-C, and what `mpiexec` forwards to every rank when it gets one
}

bool stop_signal_received() {
  return g_stop_signal != 0;
}

int stop_signal_number() {
  return static_cast<int>(g_stop_signal);
}

bool stop_requested(const Communicator& comm) {
  return comm.max(stop_signal_received());
}

void clear_stop_request() {
  g_stop_signal = 0;
}

void request_stop(int signal_number) {
  g_stop_signal = signal_number;
}

}  // namespace mtk
