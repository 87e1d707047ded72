# shellcheck shell=bash
# Sourced by MTK's Slurm batch scripts (scripts/slurm/*.sbatch, docs/cluster.md): how a job step is
# launched, and how a training job that stopped resumably requeues itself.
#
#   mtk_step [--ranks N] COMMAND...   a job step on the job's tasks (or N of them); stop signals
#                                     are only noted while it runs
#   mtk_train COMMAND...              the training step; a stop signal is forwarded to it, and its
#                                     exit status decides: 0 finished (return 0); 75 or 76 stopped
#                                     resumably (the job requeues itself and exits); else failed
#                                     (exit with that status, no requeue)
#
# Slurm sends the batch shell SIGUSR1 before the time limit (`#SBATCH --signal=B:USR1@SECONDS`, or
# by hand: `scancel --batch --signal=USR1 JOBID`); the trap below forwards it to the running
# training step (srun passes it on to every task), which finishes its step, saves a checkpoint and
# exits 75 (io/mtk/app/exit_status.hpp). The script then runs `scontrol requeue`, and the requeued
# job (SLURM_RESTART_COUNT = 1, 2, ...) resumes from the run directory's newest checkpoint.
# SIGTERM (scancel, or a time limit reached without a warning signal) is never requeued: Slurm
# signals the steps itself and the job ends.
#
# Environment, all optional:
#   MTK_ROOT          the MTK source tree (default: the directory sbatch was run in)
#   MTK_BUILD_DIR     its build tree (default $MTK_ROOT/build)
#   MTK_LM1B          the mtk-lm1b binary (default: the build tree's, else mtk-lm1b on PATH)
#   MTK_LAUNCH        what starts a step's ranks (default srun; e.g. "srun --mpi=pmix", or
#                     "mpiexec", to which -n $SLURM_NTASKS is added)
#   MTK_MAX_REQUEUES  how often a job may requeue itself (default 20): a job that keeps stopping
#                     without finishing ends after that many restarts instead of looping

mtk_root="${MTK_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}}"
mtk_build="${MTK_BUILD_DIR:-$mtk_root/build}"
if [ -n "${MTK_LM1B:-}" ]; then
  mtk_lm1b="$MTK_LM1B"
elif [ -x "$mtk_build/apps/lm1b/mtk-lm1b" ]; then
  mtk_lm1b="$mtk_build/apps/lm1b/mtk-lm1b"
else
  mtk_lm1b="$(command -v mtk-lm1b || echo "$mtk_build/apps/lm1b/mtk-lm1b")"
fi
# One BLAS/OpenMP thread per rank: a rank per core (docs/building.md).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

mtk_log() {
  echo "[mtk-job $(date -u +%Y-%m-%dT%H:%M:%SZ) job ${SLURM_JOB_ID:-none} restart ${SLURM_RESTART_COUNT:-0}] $*"
}

mtk_fail() {
  mtk_log "error: $*" >&2
  exit 1
}

[ -n "${SLURM_JOB_ID:-}" ] || mtk_fail "not inside a Slurm job; submit with sbatch (docs/cluster.md)"
[ -x "$mtk_lm1b" ] || mtk_fail "no mtk-lm1b at '$mtk_lm1b': build MTK first (cmake --build build) or set MTK_LM1B"

_mtk_stop=""        # the stop signal received: USR1 (requeue) or TERM (cancelled)
_mtk_step_pid=""    # the running step's launcher
_mtk_forward=0      # 1 while a training step runs: USR1 goes on to it
_mtk_interrupted=0  # set by the traps so that the wait loop waits again
_mtk_requeued=0     # set once `scontrol requeue` ran: Slurm's SIGTERM that follows is expected

_mtk_on_signal() {
  _mtk_interrupted=1
  if [ "$1" = TERM ]; then
    [ "$_mtk_requeued" = 1 ] && return
    _mtk_stop=TERM
    mtk_log "SIGTERM: the job is being cancelled or reached its time limit; no requeue"
    return
  fi
  [ "$_mtk_stop" = TERM ] || _mtk_stop=USR1
  if [ "$_mtk_forward" = 1 ] && [ -n "$_mtk_step_pid" ]; then
    mtk_log "SIGUSR1: asking the training step to save and stop"
    kill -USR1 "$_mtk_step_pid" 2> /dev/null || true
  else
    mtk_log "SIGUSR1: will stop before the training step"
  fi
}
trap '_mtk_on_signal USR1' USR1
trap '_mtk_on_signal TERM' TERM

# The launcher for N ranks (default: every task of the job).
_mtk_launcher() {
  local ranks="$1" launch
  read -r -a launch <<< "${MTK_LAUNCH:-srun}"
  case "${launch[0]##*/}" in
    mpiexec | mpirun | mpiexec.*) launch+=(-n "${ranks:-${SLURM_NTASKS:?}}") ;;
    srun) [ -n "$ranks" ] && launch+=(--ntasks="$ranks") ;;
  esac
  printf '%s\n' "${launch[@]}"
}

# Runs a step in the background and waits for it, so that the traps run while it does; returns
# its exit status.
_mtk_run() {
  local ranks="$1" status launch
  shift
  mapfile -t launch < <(_mtk_launcher "$ranks")
  mtk_log "step: ${launch[*]} $*"
  "${launch[@]}" "$@" &
  _mtk_step_pid=$!
  while :; do
    _mtk_interrupted=0
    wait "$_mtk_step_pid"
    status=$?
    [ "$_mtk_interrupted" = 1 ] || break  # a trap interrupted `wait`: the step still runs
  done
  _mtk_step_pid=""
  return "$status"
}

mtk_step() {
  local ranks=""
  if [ "${1:-}" = --ranks ]; then
    ranks="$2"
    shift 2
  fi
  _mtk_forward=0
  _mtk_run "$ranks" "$@"
}

# Requeues this job (it restarts from the top with SLURM_RESTART_COUNT + 1) unless it has been
# requeued MTK_MAX_REQUEUES times already; exits either way.
mtk_requeue() {
  local status="$1" restarts="${SLURM_RESTART_COUNT:-0}" max="${MTK_MAX_REQUEUES:-20}"
  if [ "$restarts" -ge "$max" ]; then
    mtk_log "stopped resumably (exit $status) after $restarts requeues (MTK_MAX_REQUEUES=$max): not requeueing; resubmit the job to continue"
    exit "$status"
  fi
  mtk_log "stopped resumably (exit $status): requeueing (restart $((restarts + 1)) of at most $max)"
  _mtk_requeued=1
  if ! scontrol requeue "$SLURM_JOB_ID"; then
    mtk_log "error: scontrol requeue $SLURM_JOB_ID failed; resubmit the job to continue" >&2
    exit "$status"
  fi
  exit 0  # Slurm ends this run of the job and queues the next
}

# The exit status the run itself recorded in RUN_DIR/status.json (written by rank 0 as training
# ends), if that file was written after $1 (a marker made before the launch): 75 / 76 for a
# stopped run, 1 for a failed one, 0 when it completed; empty when there is no such record.
# The launcher's own status is not enough: MPICH 4.0's hydra may return 0 after forwarding a
# signal while every rank exited 75.
_mtk_recorded_status() {
  local marker="$1" run_dir="run" prev="" a file state
  shift
  for a in "$@"; do
    [ "$prev" = --run-dir ] && run_dir="$a"
    case "$a" in --run-dir=*) run_dir="${a#--run-dir=}" ;; esac
    prev="$a"
  done
  file="$run_dir/status.json"
  [ -f "$file" ] && [ "$file" -nt "$marker" ] || return 0
  state=$(sed -n 's/.*"state": "\([a-z_]*\)".*/\1/p' "$file")
  case "$state" in
    completed) echo 0 ;;
    stopped) echo 75 ;;
    stopped_before_start) echo 76 ;;
    failed) echo 1 ;;
  esac
}

mtk_train() {
  local status recorded marker
  if [ -n "$_mtk_stop" ]; then  # the signal came before training began: nothing to save
    [ "$_mtk_stop" = TERM ] && exit 143
    mtk_requeue 76
  fi
  marker="$(mktemp)"
  sleep 1  # status.json must be newer than the marker at the file system's time resolution
  _mtk_forward=1
  _mtk_run "" "$@"
  status=$?
  _mtk_forward=0
  recorded="$(_mtk_recorded_status "$marker" "$@")"
  rm -f "$marker"
  if [ "$status" = 0 ] && [ -n "$recorded" ] && [ "$recorded" != 0 ]; then
    mtk_log "the launcher exited 0 but the run recorded exit $recorded (status.json): using $recorded"
    status="$recorded"
  fi
  case "$status" in
    0)
      mtk_log "training finished"
      return 0
      ;;
    75 | 76)
      if [ "$_mtk_stop" = TERM ]; then
        mtk_log "training stopped (exit $status) on SIGTERM: cancelled, not requeueing"
        exit "$status"
      fi
      mtk_requeue "$status"
      ;;
    *)
      mtk_log "training failed (exit $status): not requeueing"
      exit "$status"
      ;;
  esac
}
