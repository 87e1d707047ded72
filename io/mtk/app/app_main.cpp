#include <mtk/app/app_main.hpp>
#include <mtk/app/exit_status.hpp>
#include <mtk/base/error.hpp>
#include <mtk/parallel/environment.hpp>
#include <mtk/signals/stop_signals.hpp>

#include <csignal>
#include <cstdio>
#include <exception>
#include <optional>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace mtk {
namespace {

// A rank whose launcher (mpiexec's proxy, slurmstepd) died must not run on as an orphan holding
// its run directory: the kernel sends it SIGTERM when its parent dies, which the stop-signal
// handlers turn into "save and exit 75" (or a plain exit before training starts).
void stop_when_launcher_dies() {
#ifdef __linux__
  const pid_t parent = ::getppid();
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && ::getppid() != parent)
    ::kill(::getpid(), SIGTERM);  // the parent died before the request took effect
#endif
}

}  // namespace

int app_main(int argc, char** argv, const AppOptions& options,
             const std::function<int(const Communicator& world,
                                     const std::vector<std::string>& args)>& run) {
  int status = 1;
  if (options.stop_signals)
    install_stop_signal_handlers();  // first: a signal during start-up must not be lost
  {
    std::optional<Environment> env;
    try {
      env.emplace(argc, argv);
    } catch (const Error& e) {  // a bad MTK_* run-time option: nothing has started yet
      std::fprintf(stderr, "%s: %s\n", options.name.c_str(), e.what());
      return 1;
    }
    const Communicator world = Communicator::world();
    if (world.size() > 1)
      stop_when_launcher_dies();
    const char* name = options.name.c_str();
    const bool reports = options.every_rank_reports || world.rank() == 0;
    try {
      status = run(world, std::vector<std::string>(argv + 1, argv + argc));
    } catch (const StopRequested& e) {
      // Every rank stopped alike (a collective agreed on it): the contract's "before the first
      // step" status.
      if (world.rank() == 0)
        std::fprintf(stderr, "%s: %s\n", name, e.what());
      status = kExitStoppedBeforeStart;
    } catch (const AgreedError& e) {
      // Every rank failed alike: finish normally.
      if (reports)
        std::fprintf(stderr, "%s: %s\n", name, e.what());
      status = 1;
    } catch (const std::exception& e) {
      if (options.abort_on_local_error) {
        std::fprintf(stderr, "%s (rank %d): %s\n", name, world.rank(), e.what());
        std::fflush(stderr);
        if (world.size() > 1)
          world.abort(1);
      } else if (reports) {
        std::fprintf(stderr, "%s: %s\n", name, e.what());
      }
      status = 1;
    }
    std::fflush(stdout);
  }
  return status;
}

}  // namespace mtk
