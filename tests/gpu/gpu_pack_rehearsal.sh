#!/usr/bin/env bash
# gpu_pack_rehearsal.sh ROOT BUILD SCRATCH: the way a GPU check travels, rehearsed on this build:
# scripts/gpu-pack packs two test programs (with the benchmarks, MPICH's launcher and the
# libraries), scripts/gpu-check --pack unpacks it and runs the tests from it, one of them on 2
# ranks through the packed mpiexec, with the pack's libraries resolved first; a limit the archive
# exceeds is refused; bad arguments are usage errors.
set -uo pipefail
root="$1" build="$2" scratch="$3"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
rm -rf "$scratch" && mkdir -p "$scratch"
tests='^test_gpu_blas_arrangement$|^test_layout_invariance_np2$'
bash "$root/scripts/gpu-pack" --build "$build" --tests "$tests" --xz-level 0 \
  --out "$scratch/pack.tar.xz" || fail "gpu-pack exited $?"
bash "$root/scripts/gpu-check" --pack "$scratch/pack.tar.xz" --out "$scratch/check" \
  --skip-bench --skip-peer --budget 240 || fail "gpu-check --pack exited $?"
log="$(cat "$scratch/check/ctest.log")"
grep -qF "test test_gpu_blas_arrangement: passed" <<<"$log" || fail "the packed unit test did not pass"
grep -qF "test test_layout_invariance_np2: passed" <<<"$log" || fail "the packed 2-rank test did not pass"
grep -qF "2 of 2 tests passed" <<<"$log" || fail "not 2 of 2 tests"
pack="$scratch/check/pack/mtk-gpu-pack"
for f in bench/bench_lm_train bench/bench_einsum bin/mpiexec bin/hydra_pmi_proxy env.sh tests.txt; do
  [ -e "$pack/$f" ] || fail "the pack lacks $f"
done
(. "$pack/env.sh" && ldd "$pack/tests/test_layout_invariance" | grep -q "$pack/lib/libmpich") ||
  fail "the packed program does not load the pack's MPICH"
bash "$root/scripts/gpu-pack" --build "$build" --tests "$tests" --xz-level 0 --limit-mib 1 \
  --out "$scratch/big.tar.xz" 2>"$scratch/limit.err" && fail "a pack over --limit-mib was written"
grep -q "over --limit-mib 1" "$scratch/limit.err" || fail "the limit's refusal does not say so"
[ ! -e "$scratch/big.tar.xz" ] || fail "a refused pack was left behind"
for bad in "--build $scratch" "--build $build --limit-mib 0" "--build $build --xz-level 12" \
  "--build $build --tests ^no_such_test$" "--frobnicate"; do
  # shellcheck disable=SC2086
  bash "$root/scripts/gpu-pack" --dry-run $bad >/dev/null 2>&1
  rc=$?
  [ "$rc" = 2 ] || fail "gpu-pack $bad exited $rc, not 2"
done
echo "gpu-pack rehearsal: OK"
