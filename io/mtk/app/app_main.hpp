#pragma once
// The main() of MTK's executables, written once: MPI and Kokkos start-up, error reporting and
// the exit status.
//
//   int main(int argc, char** argv) {
//     return mtk::app_main(argc, argv, {"mtk-ckpt"}, [](const mtk::Communicator& world,
//                                                      const std::vector<std::string>& args) {
//       ...
//       return 0;
//     });
//   }

#include <mtk/parallel/communicator.hpp>

#include <functional>
#include <string>
#include <vector>

namespace mtk {

/// How app_main() reports an error that escapes the program.
struct AppOptions {
  /// Prefix of the messages: "mtk-ckpt" -> "mtk-ckpt: <error>".
  std::string name;
  /// Every rank that caught the error prints it (true), or rank 0 alone (false).
  bool every_rank_reports = false;
  /// An error only some ranks raised (not an mtk::AgreedError) is printed by its rank as
  /// "<name> (rank r): <error>" and ends the whole job (Communicator::abort) when there are
  /// several ranks: the other ranks may be waiting in a collective.
  bool abort_on_local_error = false;
  /// Installs the stop-signal handlers (mtk/signals) before anything else, MPI and Kokkos
  /// start-up included, so that a SIGTERM/SIGUSR1/SIGINT during a long start-up is recorded
  /// (and acted on once training begins) instead of killing one rank and leaving the others
  /// waiting in a collective.
  bool stop_signals = false;
};

/// Installs the stop-signal handlers when `options.stop_signals`, starts MPI and Kokkos
/// (mtk::Environment), runs `run` with a duplicate of MPI_COMM_WORLD and the arguments after the
/// program name, and returns its exit status. An exception is reported
/// as `options` say and gives status 1; so does a bad MTK_* run-time option, on every rank, before
/// anything starts ("mtk-x: mtk::runtime_options: ..."). Flushes stdout at the end.
int app_main(
    int argc, char** argv, const AppOptions& options,
    const std::function<int(const Communicator& world, const std::vector<std::string>& args)>& run);

}  // namespace mtk
