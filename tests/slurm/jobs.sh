# shellcheck shell=bash
# Sourced by the Slurm tests after tests/lm1b/harness.sh (fail, $work) and cluster.sh: jobs and
# their logs.
#   submit SBATCH_ARGS...     sbatch --parsable, the log in $work/job-JOBID.out
#   job_field JOB KEY         a field of `scontrol show job` (JobState, Restarts, ExitCode)
#   wait_job JOB SECONDS      until the job has ended (fails after SECONDS)
#   usr1_on_log PATTERN S JOB...  SIGUSR1 to each job's batch shell (scancel --batch, as Slurm's
#                             --signal=B:USR1 sends it) as soon as its log has a line matching
#                             PATTERN, the jobs watched together (fails after S)
#   expect JOB PATTERN        the job's log has PATTERN (grep), else fail with the log
#   expect_state JOB STATE RESTARTS   the job ended in STATE after RESTARTS requeues

submit() { sbatch --parsable --output="$work/job-%j.out" "$@"; }
job_field() { scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
show() { cat "$work/job-$1.out" 2> /dev/null; scontrol show job "$1"; }
wait_job() {
  local state end=$((SECONDS + $2))
  while :; do
    state="$(job_field "$1" JobState)"
    case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) return 0 ;; esac
    ((SECONDS < end)) || break
    sleep 0.2
  done
  show "$1"
  fail "job $1 still $state after $2 s"
}
usr1_on_log() {
  local pattern="$1" seconds="$2" i j
  shift 2
  local pending=("$@") left
  for ((i = 0; i < seconds * 5 && ${#pending[@]} > 0; i++)); do
    left=()
    for j in "${pending[@]}"; do
      if grep -q -- "$pattern" "$work/job-$j.out" 2> /dev/null; then
        scancel --batch --signal=USR1 "$j"
      else
        left+=("$j")
      fi
    done
    pending=("${left[@]+"${left[@]}"}")
    [ ${#pending[@]} -eq 0 ] || sleep 0.2
  done
  for j in "${pending[@]+"${pending[@]}"}"; do
    show "$j"
    fail "job $j's log has no '$pattern' after $seconds s"
  done
}
expect() {
  grep -q -- "$2" "$work/job-$1.out" || { show "$1"; fail "job $1's log lacks '$2'"; }
}
expect_state() {
  [ "$(job_field "$1" JobState)" = "$2" ] && [ "$(job_field "$1" Restarts)" = "$3" ] ||
    { show "$1"; fail "job $1: expected $2 after $3 requeue(s)"; }
}
