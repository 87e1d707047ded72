# shellcheck shell=bash
# Sourced by MTK's Slurm batch scripts (scripts/slurm/*.sbatch, docs/cluster.md): how a job step is
# launched (on GPU nodes: one rank per GPU), and how a training job decides, from what the run
# wrote, whether it finished, requeues itself or stops.
#
#   mtk_app NAME                      the path of MTK application NAME (mtk-lm1b, mtk-wmt, ...)
#   mtk_step [--ranks N] COMMAND...   a job step on the job's tasks (or N of them); stop signals
#                                     are only noted while it runs
#   mtk_train COMMAND...              the training step (COMMAND: an MTK application's `train`
#                                     with --run-dir RUN_DIR); a stop signal is forwarded to it.
#                                     What RUN_DIR/status.json says decides, whatever the launcher
#                                     returned: finished (return 0), stopped resumably (the job
#                                     requeues itself and exits), or failed (exit, no requeue)
#
# Slurm sends the batch shell SIGUSR1 before the time limit (`#SBATCH --signal=B:USR1@SECONDS`, or
# by hand: `scancel --batch --signal=USR1 JOBID`); the trap below forwards it to the running
# training step (srun passes it on to every task), which finishes its step, saves a checkpoint,
# records "stopped" in RUN_DIR/status.json and exits 75 (io/mtk/app/exit_status.hpp). The script
# then runs `scontrol requeue`, and the requeued job (SLURM_RESTART_COUNT = 1, 2, ...) resumes from
# the run directory's newest checkpoint. SIGTERM (scancel, or a time limit reached without a
# warning signal) is never requeued: Slurm signals the steps itself and the job ends.
#
# Environment, all optional:
#   MTK_ROOT          the MTK source tree (default: the directory sbatch was run in)
#   MTK_BUILD_DIR     its build tree (default $MTK_ROOT/build)
#   MTK_BIN_DIR       where the applications are (default: the build tree's apps/*/, else PATH)
#   MTK_LM1B, MTK_WMT one application's path (overrides MTK_BIN_DIR for it)
#   MTK_LAUNCH        what starts a step's ranks (default srun, run with --kill-on-bad-exit=1;
#                     e.g. "srun --mpi=pmix", or "mpiexec", to which -n $SLURM_NTASKS is added)
#   MTK_MAX_REQUEUES  how often a job may requeue itself (default 20): a job that keeps stopping
#                     without finishing ends after that many restarts instead of looping
#   MTK_GPU_BIND      on GPU nodes (the job has GPUs: SLURM_GPUS_ON_NODE): local_rank (default)
#                     gives each rank the GPU of its local rank (scripts/slurm/mtk-rank); none
#                     leaves the GPUs Slurm gave each task as they are
#   MTK_CUDA_AWARE_MPI  on GPU nodes: 1 / 0 turn the MPI's GPU support on / off (MPICH:
#                     MPIR_CVAR_ENABLE_GPU, Cray MPICH: MPICH_GPU_SUPPORT_ENABLED); auto (default)
#                     follows the build (MTK_CUDA_AWARE_MPI in its include/mtk/version.hpp)

mtk_root="${MTK_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}}"
mtk_build="${MTK_BUILD_DIR:-$mtk_root/build}"
_mtk_scripts="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

mtk_log() {
  echo "[mtk-job $(date -u +%Y-%m-%dT%H:%M:%SZ) job ${SLURM_JOB_ID:-none} restart ${SLURM_RESTART_COUNT:-0}] $*"
}

mtk_fail() {
  mtk_log "error: $*" >&2
  exit 1
}

# mtk_app NAME: MTK_<NAME> (MTK_LM1B for mtk-lm1b), else MTK_BIN_DIR/NAME, else the build tree's
# apps/*/NAME, else NAME on PATH; prints the build tree's path when none exists (for the message).
mtk_app() {
  local name="$1" var found
  var="MTK_$(tr 'a-z-' 'A-Z_' <<< "${name#mtk-}")"
  if [ -n "${!var:-}" ]; then
    echo "${!var}"
  elif [ -n "${MTK_BIN_DIR:-}" ]; then
    echo "$MTK_BIN_DIR/$name"
  else
    for found in "$mtk_build"/apps/*/"$name"; do
      [ -x "$found" ] && { echo "$found"; return; }
    done
    command -v "$name" || echo "$mtk_build/apps/${name#mtk-}/$name"
  fi
}
mtk_lm1b="$(mtk_app mtk-lm1b)"
mtk_wmt="$(mtk_app mtk-wmt)"

[ -n "${SLURM_JOB_ID:-}" ] || mtk_fail "not inside a Slurm job; submit with sbatch (docs/cluster.md)"

# Threads per rank: the job's cores per task (--cpus-per-task), one by default. Slurm 22.05's srun
# no longer takes --cpus-per-task from the allocation by itself: SRUN_CPUS_PER_TASK passes it on.
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}"
[ -n "${SLURM_CPUS_PER_TASK:-}" ] && export SRUN_CPUS_PER_TASK="${SRUN_CPUS_PER_TASK:-$SLURM_CPUS_PER_TASK}"

source "$_mtk_scripts/mtk-gpu.sh" || mtk_fail "cannot read $_mtk_scripts/mtk-gpu.sh"
source "$_mtk_scripts/mtk-outcome.sh" || mtk_fail "cannot read $_mtk_scripts/mtk-outcome.sh"

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

# The launcher for N ranks (default: every task of the job). srun ends the whole step when one
# task fails (--kill-on-bad-exit=1): the other ranks would wait in a collective until the time
# limit; Hydra's and Open MPI's mpiexec do so by default.
_mtk_launcher() {
  local ranks="$1" launch
  read -r -a launch <<< "${MTK_LAUNCH:-srun}"
  case "${launch[0]##*/}" in
    mpiexec | mpirun | mpiexec.*) launch+=(-n "${ranks:-${SLURM_NTASKS:?}}") ;;
    srun)
      [[ " ${launch[*]} " == *" --kill-on-bad-exit"* || " ${launch[*]} " == *" -K"* ]] ||
        launch+=(--kill-on-bad-exit=1)
      [ -n "$ranks" ] && launch+=(--ntasks="$ranks")
      ;;
  esac
  printf '%s\n' "${launch[@]}"
}

# Runs a step in the background and waits for it, so that the traps run while it does; returns
# its exit status. On GPU nodes each rank starts through mtk-rank, which binds it to its GPU.
_mtk_run() {
  local ranks="$1" status launch
  shift
  [ -x "$1" ] || command -v "$1" > /dev/null ||
    mtk_fail "no program '$1': build MTK first (cmake --build build), or set MTK_BIN_DIR / MTK_LM1B / MTK_WMT"
  mapfile -t launch < <(_mtk_launcher "$ranks")
  if _mtk_gpu_binds; then
    launch+=("$_mtk_scripts/mtk-rank")
  fi
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

mtk_train() {
  local status since run_dir
  if [ -n "$_mtk_stop" ]; then  # the signal came before training began: nothing to save
    [ "$_mtk_stop" = TERM ] && exit 143
    mtk_requeue 76
  fi
  run_dir="$(_mtk_run_dir "$@")"
  since="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  _mtk_forward=1
  _mtk_run "" "$@"
  status=$?
  _mtk_forward=0
  _mtk_outcome "$status" "$run_dir/status.json" "$since" "$*"
  case "$_mtk_result" in
    finished)
      mtk_log "training finished ($_mtk_reason)"
      return 0
      ;;
    resumable)
      if [ "$_mtk_stop" = TERM ]; then
        mtk_log "training stopped (exit $_mtk_code) on SIGTERM: cancelled, not requeueing"
        exit "$_mtk_code"
      fi
      mtk_log "training stopped resumably ($_mtk_reason)"
      mtk_requeue "$_mtk_code"
      ;;
    *)
      mtk_log "training failed (exit $_mtk_code): not requeueing; $_mtk_reason"
      exit "$_mtk_code"
      ;;
  esac
}
