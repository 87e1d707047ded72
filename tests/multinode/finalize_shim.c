// Preloaded into the ranks of scripts/testbed's mpiexec (TESTBED_PRELOAD): an MPI_Finalize that
// does not hang. With UCX 1.13's tcp transport (the only way between emulated nodes) MPICH
// 4.0.2's MPI_Finalize can leave one rank flushing an endpoint forever while its peer waits in
// a PMI barrier without progressing UCX (openucx/ucx#8738; 1 run in 4-10 of 2 nodes here).
// This one waits for every rank (MPI_Barrier: no message is left in flight after it), tells the
// process manager the rank is done (PMI-1 `finalize`, so hydra takes its exit as a clean one and
// reports its exit code), and skips the endpoint teardown: the process's exit closes its sockets.
// MPI_Finalized answers as after a finalize. Everything else is MPICH's own.
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int finalized = 0;

static int pmi_finalize(void) {
  const char* fd_text = getenv("PMI_FD");
  if (!fd_text)
    return 0;  // not started by hydra (a singleton): nothing to tell
  const int fd = atoi(fd_text);
  static const char cmd[] = "cmd=finalize\n";
  if (write(fd, cmd, sizeof cmd - 1) != (ssize_t)(sizeof cmd - 1))
    return -1;
  char reply[256];
  size_t n = 0;
  while (n + 1 < sizeof reply) {  // "cmd=finalize_ack\n"
    const ssize_t r = read(fd, reply + n, 1);
    if (r <= 0)
      return -1;
    if (reply[n++] == '\n')
      break;
  }
  reply[n] = '\0';
  close(fd);
  return strstr(reply, "finalize_ack") ? 0 : -1;
}

int MPI_Finalize(void) {
  int initialized = 0;
  PMPI_Initialized(&initialized);
  if (!initialized || finalized)
    return PMPI_Finalize();  // MPICH's own error for a finalize without init or a second one
  const int rc = PMPI_Barrier(MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS || pmi_finalize() != 0)
    return PMPI_Finalize();
  finalized = 1;
  return MPI_SUCCESS;
}

int MPI_Finalized(int* flag) {
  if (finalized) {
    *flag = 1;
    return MPI_SUCCESS;
  }
  return PMPI_Finalized(flag);
}
