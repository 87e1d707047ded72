#!/usr/bin/env bash
# Runs one test command as MTK would run on another CPU class: the matmul libraries' kernels and
# MTK's own choice of backend emulate an older CPU (ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE) or force
# the path this CPU does not take by default (MTK_FP32_GEMM, MTK_BF16_GEMM). Exits 77 (ctest: skipped)
# where this CPU cannot run the class.
#   run_as.sh CLASS COMMAND [ARGS...]
# Classes:
#   avx2          Zen 3 / Haswell: oneDNN limited to AVX2 (no brgemm, no native bf16: MTK's `auto`
#                 takes OpenBLAS for float32 and emulates bf16), OpenBLAS's Haswell kernels (its Zen
#                 kernels are the same).
#   avx2-onednn   the same CPU with float32 products through oneDNN's AVX2 jit gemm.
#   avx512-blas   an AVX-512 CPU with float32 through OpenBLAS's SkylakeX kernels and bf16 emulated
#                 (the paths `auto` does not take there).
set -euo pipefail
class="${1:?run_as.sh: a CPU class}"
shift
has() { grep -qw "$1" /proc/cpuinfo; }
skip() { echo "run_as.sh: $class skipped: $1"; exit 77; }
case "$class" in
  avx2)
    has avx2 && has fma || skip "this CPU has no AVX2 + FMA"
    export ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell MTK_FP32_GEMM=auto MTK_BF16_GEMM=auto ;;
  avx2-onednn)
    has avx2 && has fma || skip "this CPU has no AVX2 + FMA"
    export ONEDNN_MAX_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell MTK_FP32_GEMM=onednn MTK_BF16_GEMM=auto ;;
  avx512-blas)
    has avx512f && has avx512bw && has avx512vl || skip "this CPU has no AVX-512 (F, BW, VL)"
    export OPENBLAS_CORETYPE=SkylakeX MTK_FP32_GEMM=blas MTK_BF16_GEMM=emulate
    unset ONEDNN_MAX_CPU_ISA ;;
  *)
    echo "run_as.sh: unknown CPU class '$class' (avx2, avx2-onednn, avx512-blas)" >&2
    exit 2 ;;
esac
echo "run_as.sh: $class: ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-} OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE MTK_FP32_GEMM=$MTK_FP32_GEMM MTK_BF16_GEMM=$MTK_BF16_GEMM"
exec "$@"
