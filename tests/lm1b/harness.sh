# Sourced by the LM1B and WMT test scripts after setting `mpi_timeout` (seconds per mpiexec): a scratch
# working directory removed on exit, one BLAS thread per rank, mpirun with a timeout, fail().
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export OPENBLAS_NUM_THREADS=1
mpirun() { timeout "$mpi_timeout" mpiexec "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# check_auto_plan LOG RUN_DIR RANKS: a `mesh: auto` / `layout: auto` run printed its plan for RANKS
# ranks, trained on it and recorded it in RUN_DIR/config.resolved.yaml; sets `mesh` and `layout`.
check_auto_plan() {
  local log="$1" dir="$2" ranks="$3"
  grep -q "plan (mesh: auto, layout: auto, $ranks ranks" "$log" || { cat "$log"; fail "no plan printed"; }
  mesh=$(sed -n 's/.*plan (.*): mesh \([^;]*\); layout \([^;]*\);.*/\1/p' "$log")
  layout=$(sed -n 's/.*plan (.*): mesh \([^;]*\); layout \([^;]*\);.*/\2/p' "$log")
  [ -n "$mesh" ] || fail "no planned mesh in the log"
  grep -q "mesh $mesh; layout $layout" "$log" || fail "the run did not train on the printed plan ($mesh / $layout)"
  grep -q "^# planned at start-up" "$dir/config.resolved.yaml" || { cat "$dir/config.resolved.yaml"; fail "config.resolved.yaml does not record the plan"; }
  grep -q "^mesh: \"\?$mesh\"\?$" "$dir/config.resolved.yaml" || { cat "$dir/config.resolved.yaml"; fail "config.resolved.yaml: mesh is not $mesh"; }
}
# finish: waits for the background job $job, then stops its watchdog $watchdog; sets $status.
finish() {
  wait "$job"; status=$?
  kill "$watchdog" 2>/dev/null; wait "$watchdog" 2>/dev/null
}
# saved_step RUN_DIR: the step of the checkpoint `latest` names there.
saved_step() {
  [ -f "$1/checkpoints/latest" ] || fail "no checkpoint in $1"
  sed 's/^step-0*//; s/^$/0/' "$1/checkpoints/latest"
}
