# shellcheck shell=bash
# Sourced by mtk-job.sh: what the end of a training step means, decided from what the run wrote
# and not from the launcher's exit status, which can lie (MPICH 4.0's Hydra returns 0 about one
# time in three after forwarding a signal to ranks that all exited 75: docs/checkpoint-format.md).
#
# Rank 0 writes RUN_DIR/status.json (io/mtk/app/run_status.hpp) when training starts ("running")
# and when it ends: "completed", "stopped" (a stop signal; the step reached is saved),
# "stopped_before_start" or "failed", with "step" (reached), "steps" (asked for), "exit_code",
# "job" (SLURM_JOB_ID) and "time" (UTC). Only a record of this job written since the launch counts.
#
#   state of this launch's record       outcome
#   completed, stopped*, step >= steps  finished                       (whatever the launcher says)
#   stopped, step < steps               resumable, 75: requeue         (whatever the launcher says)
#   stopped_before_start, step < steps  resumable, 76: requeue         (whatever the launcher says)
#   failed                              failed, its exit_code          (whatever the launcher says)
#   running                             failed: the run died without recording its end
#   no record, launcher 75 / 76         resumable (stopped before training recorded anything)
#   no record, launcher 0               failed, 1: a launcher's 0 alone is never a success
#   no record, launcher N               failed, N (bad config, missing data, ...)

# _mtk_run_dir ARGS...: the run directory of a train command line: its (last) --run-dir, else
# --set train.run_dir=DIR, else "run" (the applications' default).
_mtk_run_dir() {
  local prev="" a dir="" set_dir=""
  for a in "$@"; do
    [ "$prev" = --run-dir ] && dir="$a"
    case "$a" in
      --run-dir=*) dir="${a#--run-dir=}" ;;
      train.run_dir=*) set_dir="${a#train.run_dir=}" ;;
      --set=train.run_dir=*) set_dir="${a#--set=train.run_dir=}" ;;
    esac
    prev="$a"
  done
  echo "${dir:-${set_dir:-run}}"
}

# _mtk_field FILE KEY: KEY's value in the one-line JSON object FILE (a string or a number).
_mtk_field() {
  sed -n "s/.*\"$2\": \"\{0,1\}\([^\",}]*\).*/\1/p" "$1" | head -1
}

# _mtk_outcome LAUNCHER_STATUS STATUS_FILE SINCE COMMAND_LINE: sets _mtk_result (finished,
# resumable or failed), _mtk_code (the job's exit status) and _mtk_reason (for the log).
# SINCE: the UTC time (date -u +%Y-%m-%dT%H:%M:%SZ) the step was launched.
_mtk_outcome() {
  local status="$1" file="$2" since="$3" cmd="$4" state="" step=0 steps=0 code time
  local launcher="the launcher exited $status"
  if [ -f "$file" ] && [ "$(_mtk_field "$file" job)" = "${SLURM_JOB_ID:-}" ]; then
    time="$(_mtk_field "$file" time)"
    if [ -n "$time" ] && ! [[ "$time" < "$since" ]]; then
      state="$(_mtk_field "$file" state)"
      step="$(_mtk_field "$file" step)"
      steps="$(_mtk_field "$file" steps)"
      code="$(_mtk_field "$file" exit_code)"
    fi
  fi
  [[ "$step" =~ ^[0-9]+$ ]] || step=0
  [[ "$steps" =~ ^[0-9]+$ ]] || steps=0
  local where="$file: $state at step $step of $steps; $launcher"
  _mtk_result=failed
  _mtk_code=1
  case "$state" in
    completed | stopped | stopped_before_start)
      if [ "$step" -ge "$steps" ]; then
        _mtk_result=finished
        _mtk_code=0
      elif [ "$state" = completed ]; then
        where="$file says completed before its last step; $launcher"
      else
        _mtk_result=resumable
        _mtk_code=75
        [ "$state" = stopped_before_start ] && _mtk_code=76
      fi
      ;;
    failed)
      [[ "$code" =~ ^[1-9][0-9]*$ ]] && _mtk_code="$code"
      ;;
    running)
      where="$file still says running at step $step of $steps: the run ended without recording how (a rank was killed or crashed); $launcher"
      case "$status" in 0 | 75 | 76) ;; *) _mtk_code="$status" ;; esac
      ;;
    "")
      where="$launcher and the run recorded no end in $file"
      if [ "$status" = 75 ] || [ "$status" = 76 ]; then
        _mtk_result=resumable
        _mtk_code="$status"
      elif [ "$status" != 0 ]; then
        _mtk_code="$status"
      elif [[ " $cmd " =~ \ (--dry-run|--print-config|-h|--help)\  ]]; then
        _mtk_result=finished  # nothing to train: the launcher's 0 is all there is
        _mtk_code=0
      else
        where+=" (a launcher's 0 alone is not a success; --run-dir must name the run directory)"
      fi
      ;;
    *)
      where="$file has an unknown state '$state'; $launcher"
      ;;
  esac
  _mtk_reason="$where"
}
