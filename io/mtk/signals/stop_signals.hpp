#pragma once
// Stop requests from the batch system: Slurm (`--signal`), PBS and `kill` send SIGTERM or SIGUSR1
// before a job's time limit; Ctrl-C sends SIGINT (MPICH's mpiexec forwards all three to every
// rank). The handlers only set a flag; the training loop polls stop_requested() once per step,
// which agrees across ranks, then saves a checkpoint and exits.

#include <mtk/parallel/communicator.hpp>
#include <mtk/parallel/mpi_interop.hpp>

#include <stdexcept>
#include <string>

namespace mtk {

/// Thrown on every rank when a stop signal ends work that has no step to finish (the `mesh: auto`
/// planning of a training start-up): app_main() reports it and exits kExitStoppedBeforeStart (76).
class StopRequested : public std::runtime_error {
 public:
  explicit StopRequested(int signal_number)
      : std::runtime_error("stop requested (signal " + std::to_string(signal_number) +
                           ") during start-up, before the first step; nothing was saved (exit 76)"),
        signal_(signal_number) {}
  int signal_number() const { return signal_; }

 private:
  int signal_;
};

/// Installs handlers for SIGTERM, SIGUSR1 and SIGINT (idempotent) that record the signal. A
/// second SIGTERM (SIGINT) while that stop is already pending restores the default action and
/// re-raises it, so a process that stopped polling can still be terminated.
void install_stop_signal_handlers();

/// Whether this process has received SIGTERM, SIGUSR1 or SIGINT since the handlers were installed
/// (or since clear_stop_request()). Local and async-signal-safe to read; no communication.
bool stop_signal_received();
/// The signal number received (SIGTERM, SIGUSR1 or SIGINT), or 0.
int stop_signal_number();

/// Collective over `comm`: true on every rank when any rank has received a stop signal (an
/// allreduce max), so all ranks finish the same step, save together and exit.
bool stop_requested(const Communicator& comm);
/// The same over an MPI communicator.
inline bool stop_requested(MPI_Comm comm) {
  return stop_requested(borrow(comm));
}

/// Forgets a received signal (tests, or a trainer that handled the stop and continues).
void clear_stop_request();

/// Asks for a stop as if a signal had arrived (tests, or a trainer's own time limit).
void request_stop(int signal_number);

}  // namespace mtk
