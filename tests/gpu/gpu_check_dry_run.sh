#!/usr/bin/env bash
# gpu_check_dry_run.sh SCRIPT BUILD OUT: scripts/gpu-check parses, its --dry-run plans the whole
# GPU check (tests, both benchmarks, MTK and the PyTorch peer on both models, fp32 and bf16, the
# profiled MTK runs) and runs nothing, and bad arguments are usage errors (exit 2).
set -uo pipefail
script="$1" build="$2" out="$3"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
bash -n "$script" || fail "bash -n $script"
rm -rf "$out"
plan="$(bash "$script" --dry-run --build "$build" --out "$out" --rounds 1 --steps 3 -- -L unit)" ||
  fail "--dry-run exited $?"
echo "$plan"
[ ! -e "$out" ] || fail "--dry-run created $out"
expect() {
  grep -qF -- "$1" <<<"$plan" || fail "the plan lacks: $1"
}
expect "ctest --test-dir $build --output-on-failure --timeout 1800 -L unit > $out/ctest.log"
expect "$build/bench/bench_einsum --reps 5 > $out/bench_einsum.jsonl"
for prec in "" " --bf16"; do
  expect "$build/bench/bench_lm_train --steps 3 --mesh batch:1 --layout batch:batch --d_model 512 --d_ff 2048 --heads 8 --d_kv 64 --layers 6 --vocab 32000 --seq 256 --batch 8$prec >"
  expect "$build/bench/bench_lm_train --steps 3 --mesh batch:1 --layout batch:batch --d_model 1024 --d_ff 4096 --heads 4 --d_kv 256 --layers 6 --vocab 32000 --seq 256 --batch 128$prec >"
  expect "torch_lm_bench.py --device cuda --steps 3 --d_model 512 --d_ff 2048 --heads 8 --d_kv 64 --layers 6 --vocab 32000 --seq 256 --batch 8$prec >"
  expect "torch_lm_bench.py --device cuda --steps 3 --d_model 1024 --d_ff 4096 --heads 4 --d_kv 256 --layers 6 --vocab 32000 --seq 256 --batch 128$prec >"
  expect "env MTK_BENCH_DETAIL=1 MTK_PROFILE_STEPS=1 "
  expect "$build/bench/bench_lm_train --steps 3 --mesh batch:1 --layout batch:batch --d_model 1024 --d_ff 4096 --heads 4 --d_kv 256 --layers 6 --vocab 32000 --seq 256 --batch 128$prec > $out/profile-size_m1-"
done
expect "[summary] $out/summary.md"
plan_np="$(bash "$script" --dry-run --build "$build" --out "$out" --skip-profile)" || fail "--skip-profile exited $?"
! grep -q "MTK_PROFILE_STEPS" <<<"$plan_np" || fail "--skip-profile still profiles"
plan_b="$(bash "$script" --dry-run --build "$build" --out "$out" --budget 420 --rounds 1)" ||
  fail "--budget exited $?"
grep -qF "[ctest] timeout --signal=TERM --kill-after=10 168 ctest --test-dir $build" <<<"$plan_b" ||
  fail "--budget 420 does not hold the tests to 168 s"
grep -qF "[bench_einsum] timeout --signal=TERM --kill-after=10 4" <<<"$plan_b" ||
  fail "--budget does not limit the benchmarks"
for bad in "--budget -1" "--budget soon" "--steps 0" "--rounds x" "--peak-tflops fast" "--frobnicate" "--out"; do
  # shellcheck disable=SC2086
  bash "$script" --dry-run $bad >/dev/null 2>&1
  rc=$?
  [ "$rc" = 2 ] || fail "gpu-check $bad exited $rc, not 2"
done
echo "gpu-check dry run: OK"
