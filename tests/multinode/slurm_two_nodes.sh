#!/usr/bin/env bash
# MTK's batch scripts on a Slurm cluster of 2 emulated nodes (slurm_nodes.sh, inside
# scripts/testbed), submitted as a user does (`sbatch --nodes=2`):
#   A. scripts/slurm/train.sbatch on 2 nodes x 1 rank: SIGUSR1 to the batch shell once step 10 is
#      logged (what --signal=B:USR1 sends before the time limit) -> the run saves and exits 75 ->
#      the job requeues itself -> resumes from that checkpoint on 2 nodes and completes;
#   B. the same run continued on another node count (1 node x 2 ranks), resumed and completed;
#   C. a rank on node2 killed with SIGKILL mid-training ends the job (srun --kill-on-bad-exit=1,
#      scripts/slurm/mtk-job.sh) in seconds, FAILED and not requeued.
# Exits 77 (skipped) where the daemons cannot start.
#   slurm_two_nodes.sh SOURCE_DIR MTK_LM1B CONFIG
set -euo pipefail
root="$1" lm1b="$2" config="$3"
tb="$root/scripts/testbed"
work="$(mktemp -d)"
cd "$work"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$root/tests/lm1b/corpus.sh"
source "$root/tests/multinode/slurm_nodes.sh"
# the client commands of jobs.sh run on the login node (node1), where slurmctld is reachable
sbatch() { on_head sbatch "$@"; }
scontrol() { on_head scontrol "$@"; }
scancel() { on_head scancel "$@"; }
source "$root/tests/slurm/jobs.sh"
trap 'stop_node_cluster; rm -rf "$work"' EXIT

start_node_cluster "$work/cluster" || exit $?
make_corpus corpus
"$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 ||
  { cat prepare.log; fail "prepare"; }
export MTK_ROOT="$root" MTK_LM1B="$lm1b"
# the ranks get the test bed's MPI_Finalize (finalize_shim.c), the batch shell does not
[ -f "${TESTBED_PRELOAD:-}" ] && export MTK_LAUNCH="srun --export=ALL,LD_PRELOAD=$TESTBED_PRELOAD"

# A: 2 nodes, stopped by SIGUSR1, requeued, resumed on 2 nodes.
job_a=$(submit --nodes=2 --ntasks-per-node=1 "$root/scripts/slurm/train.sbatch" "$config" run \
  --set data.dir=prepared --set train.steps=300 --set checkpoint.every=1000000000)
# Signalled at its second step: on an idle machine the tiny model's 300 steps take several
# seconds, so the signal reaches a running job (at step 10 of 40 it could already have ended).
usr1_on_log "^step *2/" 120 "$job_a"
wait_job "$job_a" 240
show "$job_a"
expect_state "$job_a" COMPLETED 1
[ "$(job_field "$job_a" NodeList)" = "node[1-2]" ] || fail "job A ran on $(job_field "$job_a" NodeList)"
expect "$job_a" "2 rank(s) on 2 node(s)"
expect "$job_a" "SIGUSR1: asking the training step to save and stop"
expect "$job_a" "requeueing (restart 1 of at most"
expect "$job_a" "resumed from run/checkpoints/step-"
expect "$job_a" "done: [0-9]* steps in this job ([1-9][0-9]* -> 300), 300 of 300 overall"
echo "ok: A: 2 nodes, SIGUSR1 -> save -> requeue -> resumed and completed"

# B: the same run continued on 1 node x 2 ranks.
job_b=$(submit --nodes=1 --ntasks-per-node=2 "$root/scripts/slurm/train.sbatch" "$config" run \
  --set data.dir=prepared --set train.steps=310 --set checkpoint.every=1000000000)
wait_job "$job_b" 180
show "$job_b"
expect_state "$job_b" COMPLETED 0
expect "$job_b" "2 rank(s) on 1 node(s)"
expect "$job_b" "resumed from run/checkpoints/step-000000300"
expect "$job_b" "done: 10 steps in this job (300 -> 310), 310 of 310 overall"
echo "ok: B: continued on 1 node x 2 ranks"

# C: a rank of node2 killed -9: the job ends at once, not requeued.
job_c=$(submit --nodes=2 --ntasks-per-node=1 "$root/scripts/slurm/train.sbatch" "$config" run-c \
  --set data.dir=prepared --set train.steps=1000000 --set checkpoint.every=1000000000)
for ((i = 0; i < 600; i++)); do
  grep -q "^step *5/" "$work/job-$job_c.out" 2> /dev/null && break
  sleep 0.2
done
victims=""
for p in $(ip netns pids "$(basename "$TESTBED_DIR")-node2"); do
  [ "$(cat "/proc/$p/comm" 2> /dev/null)" = mtk-lm1b ] && victims+=" $p"
done
[ -n "$victims" ] || { show "$job_c"; fail "job C: no rank of node2 to kill"; }
kill -9 $victims
start=$SECONDS
wait_job "$job_c" 60
show "$job_c"
expect_state "$job_c" FAILED 0
echo "ok: C: kill -9 of node2's rank ended the job in $((SECONDS - start)) s, not requeued"
