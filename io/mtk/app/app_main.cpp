#include <mtk/app/app_main.hpp>
#include <mtk/base/error.hpp>
#include <mtk/parallel/environment.hpp>
#include <mtk/signals/stop_signals.hpp>

#include <cstdio>
#include <exception>

namespace mtk {

int app_main(int argc, char** argv, const AppOptions& options,
             const std::function<int(const Communicator& world,
                                     const std::vector<std::string>& args)>& run) {
  int status = 1;
  if (options.stop_signals)
    install_stop_signal_handlers();  // first: a signal during start-up must not be lost
  {
    Environment env(argc, argv);
    const Communicator world = Communicator::world();
    const char* name = options.name.c_str();
    const bool reports = options.every_rank_reports || world.rank() == 0;
    try {
      status = run(world, std::vector<std::string>(argv + 1, argv + argc));
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
