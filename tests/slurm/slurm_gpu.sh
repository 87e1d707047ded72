#!/usr/bin/env bash
# GPU jobs on a real one-node Slurm cluster (tests/slurm/cluster.sh), root only, without a GPU: the
# node declares 8 CPUs and a GRES of 4 GPUs over stand-in device files (CLUSTER_GPUS), so Slurm
# hands out GPU indices (CUDA_VISIBLE_DEVICES) as on a GPU node, and each rank's start-up lines
# (io/mtk/app/device_report.hpp) say which GPU it was given. Each job: 1 node, 4 ranks, 4 "GPUs".
#   I. a script from `generate --gpus-per-node 4 --cpus-per-task 2` (a block-style mesh of 4):
#      every rank sees all 4 GPUs from Slurm; mtk-rank leaves each the one of its local rank;
#   J. train.sbatch with --gpus-per-task=1: Slurm binds one GPU per task, kept as it is;
#   K. train-gpu.sbatch (4 GPUs per node) with MTK_LAUNCH=mpiexec (MPICH's Hydra): the local
#      rank comes from MPI_LOCALRANKID;
#   L. MTK_GPU_BIND=none: every rank keeps all 4, and the report warns that ranks share them.
# In I-K ranks 0-3 get GPUs 0-3, one each, and no warning; the job logs the GPU set-up (CUDA-aware
# MPI off for this build: MPIR_CVAR_ENABLE_GPU=0) and completes.
# Exits 77 (skipped) where the daemons cannot start (not root, Slurm or munge missing).
#   slurm_gpu.sh MTK_LM1B_BINARY CONFIG MTK_SOURCE_DIR
set -euo pipefail
lm1b="$1"
config="$2"
root="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mpi_timeout=300
source "$here/../lm1b/harness.sh"
source "$here/../lm1b/corpus.sh"
source "$here/cluster.sh"
source "$here/jobs.sh"
trap 'stop_cluster; rm -rf "$work"' EXIT
start=$SECONDS

CLUSTER_CPUS=8 CLUSTER_GPUS=4 start_cluster "$work/cluster" || exit $?
scontrol show node | grep -q "Gres=gpu:4" || fail "the node does not offer gpu:4"
export MTK_ROOT="$root" MTK_LM1B="$lm1b"
make_corpus corpus
mpirun -n 2 "$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 ||
  { cat prepare.log; fail "prepare"; }

# The test config with a block-style mesh of 4 ranks.
python3 - "$config" tiny4.yaml <<'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
c.pop("mesh")
with open(sys.argv[2], "w") as f:
    f.write("mesh:\n  batch: 4\n" + yaml.safe_dump(c, sort_keys=False))
PY
short=(--set data.dir=prepared --set train.steps=2 --set checkpoint.every=1000000000)

# bound JOB: ranks 0-3 each report GPU r, given by Slurm's CUDA_VISIBLE_DEVICES, and none shares.
bound() {
  local r
  for r in 0 1 2 3; do
    expect "$1" "^  rank $r on .* (local $r): host (Kokkos [A-Za-z]*), given GPU $r (CUDA_VISIBLE_DEVICES=$r; not used by this build), cores "
  done
  ! grep -q "share GPU" "$work/job-$1.out" || { show "$1"; fail "job $1: ranks share a GPU"; }
  expect "$1" "mtk-lm1b train: 4 rank(s) on 1 node(s), Kokkos .*, CUDA-aware MPI off; devices:"
  expect "$1" "GPU job: 4 GPU(s) per node"
  expect "$1" "CUDA-aware MPI off (MPIR_CVAR_ENABLE_GPU=0, MPICH_GPU_SUPPORT_ENABLED=0)"
  expect "$1" "training finished"
}

python3 "$root/scripts/slurm/generate" --gpus-per-node 4 --cpus-per-task 2 --out gpu4 \
  --config tiny4.yaml > generate.log || { cat generate.log; fail "generate --gpus-per-node 4"; }
grep -q "^#SBATCH --gpus-per-node=4$" gpu4/tiny4.sbatch && grep -q "^#SBATCH --ntasks-per-node=4$" gpu4/tiny4.sbatch &&
  grep -q "^#SBATCH --cpus-per-task=2$" gpu4/tiny4.sbatch || { cat gpu4/tiny4.sbatch; fail "the generated GPU script"; }
job_i=$(submit gpu4/tiny4.sbatch "${short[@]}")
job_j=$(submit --nodes=1 --ntasks-per-node=4 --gpus-per-task=1 "$root/scripts/slurm/train.sbatch" tiny4.yaml run-j "${short[@]}")
job_k=$(MTK_LAUNCH=mpiexec submit --cpus-per-task=2 "$root/scripts/slurm/train-gpu.sbatch" tiny4.yaml run-k "${short[@]}")
job_l=$(MTK_GPU_BIND=none submit --nodes=1 --ntasks-per-node=4 --gpus-per-node=4 "$root/scripts/slurm/train.sbatch" tiny4.yaml run-l "${short[@]}")
echo "submitted I=$job_i J=$job_j K=$job_k L=$job_l"

wait_job "$job_i" 180
show "$job_i"
bound "$job_i"
expect "$job_i" "ranks bound by local_rank (MTK_GPU_BIND)"
expect "$job_i" "2 core(s) per task"
expect "$job_i" "/scripts/slurm/mtk-rank $lm1b train --config"
expect_state "$job_i" COMPLETED 0
echo "I: generated GPU script: ranks 0-3 on GPUs 0-3"

wait_job "$job_j" 180
bound "$job_j"
expect_state "$job_j" COMPLETED 0
echo "J: --gpus-per-task=1: ranks 0-3 on GPUs 0-3"

wait_job "$job_k" 180
show "$job_k"
bound "$job_k"
expect "$job_k" "step: mpiexec -n 4 .*/mtk-rank "
expect "$job_k" "2 core(s) per task"
expect_state "$job_k" COMPLETED 0
echo "K: train-gpu.sbatch, Hydra's mpiexec: ranks 0-3 on GPUs 0-3"

wait_job "$job_l" 180
expect "$job_l" "ranks bound by none (MTK_GPU_BIND)"
expect "$job_l" "given GPU 0,1,2,3 (CUDA_VISIBLE_DEVICES=0,1,2,3"
expect "$job_l" "warning: ranks 0 and 1 on .* share GPU 0,1,2,3"
echo "L: MTK_GPU_BIND=none: the report shows the ranks sharing the node's GPUs"
echo "slurm_gpu: $((SECONDS - start)) s; 1 passed, 0 failed"
