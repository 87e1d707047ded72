# shellcheck shell=bash
# Sourced by mtk-job.sh: GPU jobs. A job has GPUs when Slurm gave it some (--gpus-per-node,
# --gpus-per-task, --gres=gpu:N: SLURM_GPUS_ON_NODE > 0). Then:
#   - each rank starts through scripts/slurm/mtk-rank, which leaves it the one GPU of its local
#     rank (MTK_GPU_BIND=local_rank, the default; `none` keeps what Slurm gave each task);
#   - the MPI's GPU support follows MTK_CUDA_AWARE_MPI: 1 on, 0 off, auto (default) as the build
#     was configured (MTK_ENABLE_CUDA_AWARE_MPI, recorded in include/mtk/version.hpp). MPICH reads
#     MPIR_CVAR_ENABLE_GPU, Cray MPICH MPICH_GPU_SUPPORT_ENABLED; values already set are kept.
# Cores per rank come from --cpus-per-task (mtk-job.sh sets OMP_NUM_THREADS from it).

_mtk_gpus="${SLURM_GPUS_ON_NODE:-0}"
[[ "$_mtk_gpus" =~ ^[0-9]+$ ]] || _mtk_gpus=0

# Whether steps start their ranks through mtk-rank.
_mtk_gpu_binds() {
  [ "$_mtk_gpus" -gt 0 ] && [ "${MTK_GPU_BIND:-local_rank}" = local_rank ]
}

# MTK_CUDA_AWARE_MPI=auto: the build's choice, from the version.hpp of the build tree or install
# prefix of mtk-lm1b / mtk-wmt; "" when neither is found.
_mtk_built_cuda_aware() {
  local app dir header
  for app in "$mtk_lm1b" "$mtk_wmt"; do
    dir="$(dirname "$app")"
    for header in "$dir/../../include/mtk/version.hpp" "$dir/../include/mtk/version.hpp"; do
      [ -f "$header" ] || continue
      sed -n 's/^#define MTK_CUDA_AWARE_MPI \([01]\).*/\1/p' "$header"
      return
    done
  done
}

_mtk_gpu_setup() {
  local bind="${MTK_GPU_BIND:-local_rank}" aware="${MTK_CUDA_AWARE_MPI:-auto}" mpi
  case "$bind" in
    local_rank | none) ;;
    *) mtk_fail "MTK_GPU_BIND='$bind': use local_rank or none" ;;
  esac
  [ "$aware" = auto ] && aware="$(_mtk_built_cuda_aware)"
  case "$aware" in
    1 | 0)
      export MPIR_CVAR_ENABLE_GPU="${MPIR_CVAR_ENABLE_GPU:-$aware}"
      export MPICH_GPU_SUPPORT_ENABLED="${MPICH_GPU_SUPPORT_ENABLED:-$aware}"
      mpi="CUDA-aware MPI $([ "$aware" = 1 ] && echo on || echo off) (MPIR_CVAR_ENABLE_GPU=$MPIR_CVAR_ENABLE_GPU, MPICH_GPU_SUPPORT_ENABLED=$MPICH_GPU_SUPPORT_ENABLED)"
      ;;
    "") mpi="CUDA-aware MPI: the MPI's defaults (no include/mtk/version.hpp next to the applications; set MTK_CUDA_AWARE_MPI=1 or 0)" ;;
    *) mtk_fail "MTK_CUDA_AWARE_MPI='$aware': use auto, 1 or 0" ;;
  esac
  mtk_log "GPU job: $_mtk_gpus GPU(s) per node (${CUDA_VISIBLE_DEVICES:+CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES, }${SLURM_NTASKS_PER_NODE:+$SLURM_NTASKS_PER_NODE tasks per node, }${SLURM_CPUS_PER_TASK:-1} core(s) per task); ranks bound by $bind (MTK_GPU_BIND); $mpi"
}
if [ "$_mtk_gpus" -gt 0 ]; then
  _mtk_gpu_setup
fi
