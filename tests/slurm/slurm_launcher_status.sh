#!/usr/bin/env bash
# Never a false success, on a real one-node Slurm cluster (tests/slurm/cluster.sh), root only.
# scripts/slurm/mtk-job.sh decides from the run's status.json, not from the launcher:
#   E. a launcher that exits 0 after the run stopped on SIGUSR1 (tests/slurm/launcher-exits-0, as
#      MPICH 4.0's Hydra does about one time in three): the job is requeued, not completed; it
#      resumes and completes on its second start;
#   F. the same with the real MPICH Hydra `mpiexec` as launcher: requeued whatever it returned;
#   G. a launcher that exits 0 after the run failed before training (no status.json written): the
#      job fails, it does not complete;
#   H. srun --kill-on-bad-exit=1: one rank that exits 3 ends the step at once; the other rank
#      does not wait out its 300 s;
#   W. the job script runs any MTK application: a script from `generate --app mtk-wmt` trains
#      mtk-wmt, stops on SIGUSR1, is requeued and completes.
# H runs alone first; then E, F, G and W run side by side (the node declares 8 CPUs,
# CLUSTER_CPUS), each signalled as soon as it logs step 5, so that their requeues overlap.
# Exits 77 (skipped) where the daemons cannot start (not root, Slurm or munge missing).
#   slurm_launcher_status.sh MTK_LM1B_BINARY CONFIG MTK_SOURCE_DIR MTK_WMT_BINARY WMT_CONFIG
set -euo pipefail
lm1b="$1"
config="$2"
root="$3"
wmt="$4"
wmt_config="$5"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mpi_timeout=300
source "$here/../lm1b/harness.sh"
source "$here/../lm1b/corpus.sh"
source "$here/cluster.sh"
source "$here/jobs.sh"
trap 'stop_cluster; rm -rf "$work"' EXIT
start=$SECONDS

CLUSTER_CPUS=8 start_cluster "$work/cluster" || exit $?
export MTK_ROOT="$root" MTK_LM1B="$lm1b" MTK_WMT="$wmt"
make_corpus corpus
mpirun -n 2 "$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 ||
  { cat prepare.log; fail "prepare"; }
python3 "$root/tests/wmt/make_corpus.py" wmt-corpus copy
sed 's|corpus/|wmt-corpus/|g; s|dir: prepared|dir: wmt-prepared|' "$wmt_config" > wmt.yaml
"$wmt" prepare --config wmt.yaml > prepare-wmt.log 2>&1 || { cat prepare-wmt.log; fail "mtk-wmt prepare"; }
train=(--nodes=1 --ntasks-per-node=2 "$root/scripts/slurm/train.sbatch" "$config")
steps=$((600 / ${OMP_NUM_THREADS:-1}))  # the signal lands about step 30 here: far from the end
long=(--set data.dir=prepared --set train.steps=$steps --set train.log_every=5 --set checkpoint.every=1000000000)

# H first: it must end long before its ranks' 300 s.
cat > bad-rank.sbatch <<'SB'
#!/bin/bash
source "$MTK_ROOT/scripts/slurm/mtk-job.sh" || exit 1
mtk_step bash -c '[ "$SLURM_PROCID" = 1 ] && exit 3; exec sleep 300' || mtk_fail "the step failed ($?)"
SB
t0=$SECONDS
job_h=$(submit --nodes=1 --ntasks-per-node=2 bad-rank.sbatch)
wait_job "$job_h" 90
expect "$job_h" "step: srun --kill-on-bad-exit=1 bash -c"
expect "$job_h" "error: the step failed"
expect_state "$job_h" FAILED 0
echo "H: one rank exited 3, the job ended FAILED after $((SECONDS - t0)) s, not 300"

# W's script: generated for mtk-wmt (2 ranks on nodes of 2).
python3 "$root/scripts/slurm/generate" --tasks-per-node 2 --app mtk-wmt --out wmt-jobs \
  --config wmt.yaml > generate.log || { cat generate.log; fail "generate --app mtk-wmt"; }
grep -q '^mtk_train "$mtk_wmt" train --config ' wmt-jobs/wmt.sbatch || { cat wmt-jobs/wmt.sbatch; fail "the WMT script"; }
wmt_steps=$((150 / ${OMP_NUM_THREADS:-1}))  # the signal lands about step 10

# E: the lying stand-in. F: the real Hydra; whatever it returns, the job requeues.
# G: the run fails before training (unknown key); the stand-in still exits 0.
# W: mtk-wmt through the generated script.
job_e=$(MTK_LAUNCH="$here/launcher-exits-0" submit "${train[@]}" run-e "${long[@]}")
job_f=$(MTK_LAUNCH=mpiexec submit "${train[@]}" run-f "${long[@]}")
job_g=$(MTK_LAUNCH="$here/launcher-exits-0" submit "${train[@]}" run-g --set data.dir=prepared --set train.stepz=1)
job_w=$(submit wmt-jobs/wmt.sbatch --set train.steps=$wmt_steps --set train.log_every=5 --set checkpoint.every=1000000000)
echo "submitted E=$job_e F=$job_f G=$job_g W=$job_w"
# Each stops on SIGUSR1 once it has logged step 5.
usr1_on_log "^step *5/" 120 "$job_e" "$job_f" "$job_w"

wait_job "$job_e" 300
show "$job_e"
expect "$job_e" "launcher-exits-0: the step exited 75; returning 0"
expect "$job_e" "training stopped resumably (run-e/status.json: stopped at step [0-9]* of $steps; the launcher exited 0)"
expect "$job_e" "requeueing (restart 1 of at most 20)"
expect "$job_e" "training finished (run-e/status.json: completed at step $steps of $steps; the launcher exited 0)"
expect_state "$job_e" COMPLETED 1
echo "E: a launcher's 0 after a stop: requeued, resumed, completed"

wait_job "$job_f" 300
show "$job_f"
expect "$job_f" "step: mpiexec -n 2 "
expect "$job_f" "training stopped resumably (run-f/status.json: stopped at step [0-9]* of $steps; the launcher exited [0-9]*)"
expect "$job_f" "requeueing (restart 1 of at most 20)"
expect_state "$job_f" COMPLETED 1
echo "F: Hydra's mpiexec $(grep -o 'stopped at step [0-9]* of [0-9]*; the launcher exited [0-9]*' "$work/job-$job_f.out" | head -1): requeued, completed"

wait_job "$job_g" 120
expect "$job_g" "unknown key 'train.stepz'"
expect "$job_g" "training failed (exit 1): not requeueing; the launcher exited 0 and the run recorded no end in run-g/status.json"
expect_state "$job_g" FAILED 0
echo "G: a launcher's 0 without a status record: FAILED, not COMPLETED"

wait_job "$job_w" 300
show "$job_w"
expect "$job_w" "step: srun --kill-on-bad-exit=1 $wmt train --config "
expect "$job_w" "training stopped resumably (run/wmt/status.json: stopped at step [0-9]* of $wmt_steps; the launcher exited 75)"
expect "$job_w" "mtk-wmt train: done: [0-9]* steps in this job"
expect "$job_w" "training finished (run/wmt/status.json: completed at step $wmt_steps of $wmt_steps"
expect_state "$job_w" COMPLETED 1
echo "W: mtk-wmt from a generated script: stopped, requeued, completed"
echo "slurm_launcher_status: $((SECONDS - start)) s; 1 passed, 0 failed"
