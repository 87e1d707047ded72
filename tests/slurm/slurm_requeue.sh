#!/usr/bin/env bash
# MTK's batch scripts on a real one-node Slurm cluster (tests/slurm/cluster.sh), root only:
#   A. the time-limit path: a long training job submitted with --time=1 --signal=B:USR1@20 gets
#      SIGUSR1 from slurmctld before its limit, saves a checkpoint and exits 75; with
#      MTK_MAX_REQUEUES=0 it is not requeued (the cap);
#   B. the demo batch script (scripts/slurm/demo.sbatch) on a tiny corpus: once step 10 is logged
#      the test sends the batch shell SIGUSR1 as Slurm's --signal=B:USR1 would (scancel --batch
#      --signal=USR1, the same signal to the same process, without waiting for a time limit); the
#      run saves and exits 75, the job requeues itself, resumes from its checkpoint and finishes;
#      its losses equal an uninterrupted run's step by step, no step is logged twice, eval's
#      record joins metrics.jsonl, and a finished job is not requeued again;
#   C. a job whose training fails (exit 1) is not requeued;
#   D. a cancelled job (scancel: SIGTERM) saves and stops, and is not requeued.
# The node declares 8 CPUs (CLUSTER_CPUS): once A trains, C, D and B run beside it while it waits
# for its warning, as does the reference run, so the test waits for Slurm's delays side by side.
# Exits 77 (skipped) where the daemons cannot start (not root, Slurm or munge missing).
#   slurm_requeue.sh MTK_LM1B_BINARY CONFIG MTK_SOURCE_DIR
set -euo pipefail
lm1b="$1"
config="$2"
root="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mpi_timeout=600  # the reference run: 1500 steps, longer with threads per rank on a busy machine
source "$here/../lm1b/harness.sh"
source "$here/../lm1b/corpus.sh"
source "$here/cluster.sh"
source "$here/jobs.sh"
# the background reference run and B's watcher (below) end with the test
trap 'for p in ${ref_pid:-} ${b_watch:-}; do kill "$p" 2> /dev/null; done; stop_cluster; rm -rf "$work"' EXIT
start=$SECONDS

CLUSTER_CPUS=8 start_cluster "$work/cluster" || exit $?
export MTK_ROOT="$root" MTK_LM1B="$lm1b"
# Long enough (seconds) for the signal to land mid-training on a fast machine; each OpenMP thread
# per rank beyond one makes this tiny model's steps slower (fork/join per kernel), so fewer steps
# keep the same wall time (2 threads: 750 steps, 3x the per-step time of 1 thread).
steps=$((1500 / ${OMP_NUM_THREADS:-1}))

# step loss pairs of the training records
losses() { sed -n 's/.*"step": \([0-9]*\), "loss": \([0-9.e+-]*\).*/\1 \2/p' "$1"; }

make_corpus corpus
mpirun -n 2 "$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 ||
  { cat prepare.log; fail "prepare"; }

# A: the real time-limit warning; the run is far from done when it arrives.
job_a=$(MTK_MAX_REQUEUES=0 submit --time=1 --signal=B:USR1@20 --nodes=1 --ntasks-per-node=2 \
  "$root/scripts/slurm/train.sbatch" "$config" run-a --set data.dir=prepared \
  --set train.steps=1000000 --set train.log_every=50 --set checkpoint.every=1000000000)
# Meanwhile the uninterrupted reference run, outside Slurm.
timeout "$mpi_timeout" mpiexec -n 2 "$lm1b" train --config "$config" --run-dir ref \
  --set data.dir=prepared --set train.steps=$steps > ref.log 2>&1 &
ref_pid=$!  # timeout passes the trap's SIGTERM on to mpiexec
# A trains before the others start beside it (its warning comes from slurmctld's periodic check,
# not from the test, and must find it training).
for ((i = 0; i < 600; i++)); do
  grep -q "^step *50/" "$work/job-$job_a.out" 2>/dev/null && break
  sleep 0.2
done
# C: fails at once (unknown key).
job_c=$(submit --nodes=1 --ntasks-per-node=2 "$root/scripts/slurm/train.sbatch" "$config" run-c \
  --set data.dir=prepared --set train.stepz=1)
# D: cancelled once training runs.
job_d=$(submit --nodes=1 --ntasks-per-node=2 "$root/scripts/slurm/train.sbatch" "$config" run-d \
  --set data.dir=prepared --set train.steps=1000000 --set train.log_every=5 --set checkpoint.every=1000000000)
# B: the demo. Its prepare step (which reuses the shards already there) rewrites the manifest
# that A, C, D and the reference run read: B gets a copy of the prepared data.
cp -r prepared prepared-b
job_b=$(MTK_DEMO_CONFIG="$config" MTK_DEMO_CORPUS=corpus MTK_DEMO_PREPARED=prepared-b \
  MTK_DEMO_RUN=run-b MTK_DEMO_VOCAB=300 MTK_DEMO_PROMPT="the king" \
  submit "$root/scripts/slurm/demo.sbatch" --set train.steps=$steps --set checkpoint.every=1000000000)
echo "submitted A=$job_a C=$job_c D=$job_d B=$job_b"
# B: SIGUSR1 to the batch shell once step 10 is logged (no periodic checkpoints: the resume needs
# the one the stop saves), watched in the background while the test checks C and D; the watcher
# notes B's restarts when it signals and fails if B logs no step 10 in 180 s.
(
  logged=0
  for ((i = 0; i < 900 && logged < 10; i++)); do
    sleep 0.2
    [ -f run-b/metrics.jsonl ] && logged=$(losses run-b/metrics.jsonl | tail -1 | cut -d" " -f1)
    logged=${logged:-0}
  done
  [ "$logged" -ge 10 ] || exit 1
  job_field "$job_b" Restarts > b-restarts-at-signal
  scancel --batch --signal=USR1 "$job_b"
) &
b_watch=$!

wait_job "$job_c" 60
expect "$job_c" "training failed (exit 1): not requeueing"
expect "$job_c" "unknown key 'train.stepz'"
[ "$(job_field "$job_c" JobState)" = FAILED ] && [ "$(job_field "$job_c" Restarts)" = 0 ] ||
  { show "$job_c"; fail "job C: a failed run must not be requeued"; }

for ((i = 0; i < 600; i++)); do
  grep -q "^step *5/" "$work/job-$job_d.out" 2>/dev/null && break
  sleep 0.2
done
scancel "$job_d"
wait_job "$job_d" 60
expect "$job_d" "SIGTERM: the job is being cancelled"
expect "$job_d" "saved checkpoint run-d/checkpoints/step-"
expect "$job_d" "training stopped (exit 75) on SIGTERM: cancelled, not requeueing"
[ "$(job_field "$job_d" JobState)" = CANCELLED ] && [ "$(job_field "$job_d" Restarts)" = 0 ] ||
  { show "$job_d"; fail "job D: a cancelled job must not be requeued"; }

b_status=0
wait "$b_watch" || b_status=$?
b_watch=""
[ "$b_status" = 0 ] || { show "$job_b"; fail "job B did not log step 10 in 180 s"; }
[ "$(cat b-restarts-at-signal)" = 0 ] || fail "job B restarted before the signal"

wait_job "$job_a" 150
show "$job_a"
expect "$job_a" "SIGUSR1: asking the training step to save and stop"
expect "$job_a" "stopped, resumable: [0-9]* steps in this job (0 -> "
expect "$job_a" "saved checkpoint run-a/checkpoints/step-"
expect "$job_a" "after 0 requeues (MTK_MAX_REQUEUES=0): not requeueing"
[ "$(job_field "$job_a" JobState)" = FAILED ] && [ "$(job_field "$job_a" ExitCode)" = 75:0 ] ||
  fail "job A: expected FAILED with exit 75 (stopped resumably, not requeued)"
[ "$(job_field "$job_a" Restarts)" = 0 ] || fail "job A was requeued past MTK_MAX_REQUEUES=0"

wait_job "$job_b" 600
show "$job_b"
[ "$(job_field "$job_b" JobState)" = COMPLETED ] || fail "job B did not complete"
[ "$(job_field "$job_b" Restarts)" = 1 ] || fail "job B: expected exactly one requeue"
expect "$job_b" "SIGUSR1: asking the training step to save and stop"
expect "$job_b" "requeueing (restart 1 of at most 20)"
expect "$job_b" "restart 1\] step: "
expect "$job_b" "resumed from run-b/checkpoints/step-"
expect "$job_b" "done: [0-9]* steps in this job ([1-9][0-9]* -> $steps), $steps of $steps overall"
expect "$job_b" "training finished"
expect "$job_b" "log-perplexity per token"
expect "$job_b" "demo done: run-b"
[ -s run-b/loss.png ] || fail "no loss plot"

ref_status=0
wait "$ref_pid" || ref_status=$?
ref_pid=""
[ "$ref_status" = 0 ] || { cat ref.log; fail "reference run (exit $ref_status)"; }

# The metrics: every step once, in order, from two starts of job B; eval's record in the stream.
losses run-b/metrics.jsonl | cut -d' ' -f1 > steps.txt
seq 1 $steps | diff - steps.txt > /dev/null || { diff <(seq 1 $steps) steps.txt | head; fail "steps missing or logged twice"; }
grep '"kind": "train"' run-b/metrics.jsonl | grep -c "\"job\": \"$job_b\"" | grep -qx $steps ||
  fail "train records lack \"job\": \"$job_b\""
grep -q '"start": 1}' run-b/metrics.jsonl && grep -q '"start": 2}' run-b/metrics.jsonl || fail "no start 1 and 2"
grep -q '"time": "20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-9:]*Z"' run-b/metrics.jsonl || fail "no ISO-8601 time"
grep -q "\"step\": $steps, \"kind\": \"eval\", \"log_ppl_per_token\": [0-9]" run-b/metrics.jsonl ||
  fail "no eval record in metrics.jsonl"
# The plot marks the restart and the eval point, with and without matplotlib.
for opt in "" --no-matplotlib; do
  python3 "$root/scripts/plot-metrics" run-b/metrics.jsonl "plot$opt.png" $opt > plot.log ||
    { cat plot.log; fail "plot-metrics $opt"; }
  grep -q "$steps points, .*, 1 eval, 1 restart(s)" plot.log && [ -s "plot$opt.png" ] ||
    { cat plot.log; fail "plot-metrics $opt: expected $steps points, 1 eval, 1 restart"; }
done
# The same losses as the uninterrupted run, bitwise.
diff <(losses ref/metrics.jsonl) <(losses run-b/metrics.jsonl) ||
  fail "the requeued run's losses differ from the uninterrupted run's"
stop_at=$(grep -o 'done: [0-9]* steps in this job ([0-9]*' "$work/job-$job_b.out" | sed 's/.*(//')
echo "job B stopped at step $stop_at, requeued, resumed and finished: $steps steps equal the reference"
echo "slurm_requeue: $((SECONDS - start)) s; 1 passed, 0 failed"
