# Sourced by the LM1B test scripts after setting `mpi_timeout` (seconds per mpiexec): a scratch
# working directory removed on exit, one BLAS thread per rank, mpirun with a timeout, fail().
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export OPENBLAS_NUM_THREADS=1
mpirun() { timeout "$mpi_timeout" mpiexec "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
