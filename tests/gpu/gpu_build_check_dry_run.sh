#!/usr/bin/env bash
# gpu_build_check_dry_run.sh SCRIPT SCRATCH: scripts/gpu-build-check parses, its --dry-run plans
# the Kokkos, Kokkos Kernels and MTK builds for HIP and CUDA (the CUDA 13 fixes on a scratch copy,
# warnings as errors, every target) and builds nothing, and bad arguments are usage errors (exit 2).
set -uo pipefail
script="$1" scratch="$2"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
bash -n "$script" || fail "bash -n $script"
rm -rf "$scratch"
mkdir -p "$scratch/kokkos" "$scratch/kernels"
expect() {
  grep -qF -- "$2" <<<"$1" || fail "the plan lacks: $2"
}
hip="$(bash "$script" --dry-run --backend hip --kokkos "$scratch/kokkos" \
  --kokkos-kernels "$scratch/kernels" --work "$scratch/work-hip" --jobs 3 \
  --rocblas-include "$scratch/rocblas")" || fail "--backend hip --dry-run exited $?"
echo "$hip"
expect "$hip" "cp -a $scratch/kokkos $scratch/work-hip/kokkos-src"
expect "$hip" "-DKokkos_ENABLE_HIP=ON"
expect "$hip" "-DKokkos_ARCH_AMD_GFX90A=ON"
expect "$hip" "-DKokkosKernels_ENABLED_COMPONENTS=BLAS"
expect "$hip" "-DMTK_WARNINGS_AS_ERRORS=ON -DMTK_ENABLE_TESTS=ON -DMTK_ENABLE_BENCHMARKS=ON"
expect "$hip" "cmake --build $scratch/work-hip/mtk -j 3 --target all -- -k"
expect "$hip" "core/mtk/kernels/rocblas_gemm.cpp -DKOKKOSKERNELS_ENABLE_TPL_ROCBLAS -I$scratch/rocblas"
! grep -q cuda13 <<<"$hip" || fail "the HIP plan patches Kokkos for CUDA 13"
[ ! -e "$scratch/work-hip" ] || fail "--dry-run created the work folder"
cuda="$(bash "$script" --dry-run --backend cuda --kokkos "$scratch/kokkos" \
  --kokkos-kernels "$scratch/kernels" --work "$scratch/work-cuda" --arch AMPERE80)" ||
  fail "--backend cuda --dry-run exited $?"
echo "$cuda"
expect "$cuda" "kokkos_cuda13_fixes.py $scratch/work-cuda/kokkos-src AMPERE80 "
expect "$cuda" "-DKokkos_ENABLE_CUDA=ON"
expect "$cuda" "-DKokkos_ARCH_AMPERE80=ON"
expect "$cuda" "-DKokkosKernels_ENABLE_TPL_CUBLAS=ON"
expect "$cuda" "-DCMAKE_CXX_COMPILER=$scratch/work-cuda/kokkos-prefix/bin/nvcc_wrapper"
for pkg in Kokkos KokkosKernels; do  # an installed prefix, as --prefix takes one
  mkdir -p "$scratch/p/lib/cmake/$pkg" && touch "$scratch/p/lib/cmake/$pkg/${pkg}Config.cmake"
done
files="$(bash "$script" --dry-run --backend cuda --prefix "$scratch/p" --work "$scratch/work-f" \
  --files core/mtk/kernels/cublas_gemm.cpp,io/mtk/app/device_report.cpp)" || fail "--files exited $?"
expect "$files" "compile_one.py $scratch/work-f/mtk/compile_commands.json core/mtk/kernels/cublas_gemm.cpp"
expect "$files" "compile_one.py $scratch/work-f/mtk/compile_commands.json io/mtk/app/device_report.cpp"
! grep -q "cmake --build $scratch/work-f/mtk" <<<"$files" || fail "--files still builds every target"
! grep -q "kokkos-configure\|kernels-configure" <<<"$files" || fail "an installed prefix is rebuilt"
root="$(cd "$(dirname "$script")/.." && pwd)"
for bad in "--backend sycl" "--backend hip --arch HOPPER90" "--backend hip" \
  "--backend hip --prefix /p --jobs 0" "--backend cuda --prefix /p --rocblas-include /r" \
  "--backend hip --prefix /p --work $root/core/gpu-inside" "--frobnicate"; do
  # shellcheck disable=SC2086
  bash "$script" --dry-run $bad >/dev/null 2>&1
  rc=$?
  [ "$rc" = 2 ] || fail "gpu-build-check $bad exited $rc, not 2"
done
# The CUDA 13 fixes on a copy of the three calls as Kokkos 4.6.01 has them, and a changed Kokkos.
fixes="$root/scripts/lib/kokkos_cuda13_fixes.py"
mkdir -p "$scratch/k461/core/src/Cuda" "$scratch/k461/bin"
cat >"$scratch/k461/core/src/Cuda/Kokkos_Cuda_Instance.hpp" <<'HPP'
    return cudaGraphAddDependencies(graph, from, to, numDependencies);
    return cudaMemAdvise(devPtr, count, advice, device);
    return cudaMemPrefetchAsync(devPtr, count, dstDevice,
                                get_input_stream(stream));
HPP
printf '#!/bin/bash\ndefault_arch="sm_70"\n#default_arch="sm_80"\n' >"$scratch/k461/bin/nvcc_wrapper"
python3 "$fixes" "$scratch/k461" HOPPER90 12 || fail "the fixes failed before CUDA 13"
grep -q "from, to, numDependencies" "$scratch/k461/core/src/Cuda/Kokkos_Cuda_Instance.hpp" ||
  fail "Kokkos was changed for CUDA 12"
python3 "$fixes" "$scratch/k461" HOPPER90 13 || fail "the fixes failed on the 4.6.01 forms"
h="$(cat "$scratch/k461/core/src/Cuda/Kokkos_Cuda_Instance.hpp")"
expect "$h" "cudaGraphAddDependencies(graph, from, to, nullptr, numDependencies)"
expect "$h" "cudaMemLocation{cudaMemLocationTypeDevice, device}"
expect "$h" "0, get_input_stream(stream)"
grep -q '^default_arch="sm_90"' "$scratch/k461/bin/nvcc_wrapper" || fail "nvcc_wrapper's default_arch not sm_90"
python3 "$fixes" "$scratch/k461" HOPPER90 13 || fail "the fixes are not idempotent"
echo "    return cudaGraphAddDependenciesV2(graph);" >"$scratch/k461/core/src/Cuda/Kokkos_Cuda_Instance.hpp"
python3 "$fixes" "$scratch/k461" HOPPER90 13 2>/dev/null && fail "a Kokkos with neither form was patched"
echo "gpu-build-check dry run: OK"
