#!/usr/bin/env bash
# The decision of scripts/slurm/mtk-outcome.sh, without Slurm: from a launcher's exit status and
# the run's status.json, finished / resumable / failed, for every state rank 0 writes; a launcher's
# 0 never makes a stopped, failed, killed or silent run a success, and a launcher's non-zero
# never hides a completed one. A record of another job, or one older than the launch, is ignored.
#   job_outcome.sh MTK_SOURCE_DIR
set -euo pipefail
source "$1/scripts/slurm/mtk-outcome.sh"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
export SLURM_JOB_ID=4242
since=2026-01-02T03:04:05Z
fails=0

# record STATE STEP STEPS EXIT [JOB] [TIME]: a status.json as io/mtk/app/run_status.cpp writes it.
record() {
  printf '{"state": "%s", "step": %s, "steps": %s, "exit_code": %s, "message": "x \\"state\\": \\"completed\\"", "tool": "mtk-lm1b train", "job": "%s", "pid": 7, "time": "%s"}\n' \
    "$1" "$2" "$3" "$4" "${5:-4242}" "${6:-2026-01-02T03:04:09Z}" > "$dir/status.json"
}
# expect LAUNCHER_STATUS RESULT CODE [COMMAND_LINE]
expect() {
  _mtk_outcome "$1" "$dir/status.json" "$since" "${4:-mtk-lm1b train --run-dir $dir}"
  if [ "$_mtk_result $_mtk_code" != "$2 $3" ]; then
    echo "FAIL: launcher $1, $(cat "$dir/status.json" 2> /dev/null || echo 'no status.json'): got $_mtk_result $_mtk_code, expected $2 $3 ($_mtk_reason)" >&2
    fails=$((fails + 1))
  else
    echo "ok: launcher $1 + ${state_text:-?} -> $2 $3 ($_mtk_reason)"
  fi
}

state_text="completed 40/40"; record completed 40 40 0
expect 0 finished 0; expect 1 finished 0; expect 137 finished 0
state_text="stopped 12/40"; record stopped 12 40 75
expect 75 resumable 75; expect 0 resumable 75; expect 1 resumable 75
state_text="stopped 40/40"; record stopped 40 40 75
expect 75 finished 0; expect 0 finished 0
state_text="stopped_before_start 20/40"; record stopped_before_start 20 40 76
expect 76 resumable 76; expect 0 resumable 76
state_text="failed 3/40"; record failed 3 40 1
expect 1 failed 1; expect 0 failed 1; expect 75 failed 1
state_text="running 9/40 (killed)"; record running 9 40 0
expect 0 failed 1; expect 137 failed 137; expect 75 failed 1
state_text="completed, another job's"; record completed 40 40 0 999
expect 0 failed 1; expect 75 resumable 75; expect 2 failed 2
state_text="completed, before the launch"; record completed 40 40 0 4242 2026-01-02T03:04:04Z
expect 0 failed 1
state_text="completed, the launch's second"; record completed 40 40 0 4242 "$since"
expect 1 finished 0
rm -f "$dir/status.json"
state_text="no status.json"
expect 0 failed 1; expect 75 resumable 75; expect 76 resumable 76; expect 2 failed 2
expect 0 finished 0 "mtk-lm1b train --print-config --run-dir x"

# The run directory of a command line: the last --run-dir, else --set train.run_dir, else run.
check_dir() {
  local got
  got="$(_mtk_run_dir "${@:2}")"
  [ "$got" = "$1" ] || { echo "FAIL: _mtk_run_dir ${*:2}: got '$got', expected '$1'" >&2; fails=$((fails + 1)); }
}
check_dir run/a train --config c.yaml --run-dir run/a
check_dir run/b train --run-dir run/a --set x=1 --run-dir run/b
check_dir run/c train --run-dir=run/c
check_dir run/d train --set train.run_dir=run/d
check_dir run train --config c.yaml

[ "$fails" = 0 ] || { echo "job_outcome: $fails failure(s)" >&2; exit 1; }
echo "job_outcome: every case decided as expected"
