#!/usr/bin/env bash
# mtk-layout with layout rules naming no tensor dimension (issue 64): a typo (`batchh:batch`) is a
# warning naming the rule, --strict-layout makes it an error; rules for dims of other settings of
# the model (`experts` in a dense one) pass silently. --memory of less than a byte and a machine
# file's memory_bytes of .nan are refused.
#   strict_layout.sh MTK_LAYOUT WORK_DIR
set -u
layout_tool=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
model=(--set model.num_layers=1 --set model.d_model=64 --set model.d_ff=128 --set model.vocab_size=256
       --set model.length=16 --set model.batch=4)
small=("${model[@]}" --mesh "batch:2;model:2")
fail() { echo "FAIL: $*"; exit 1; }

"$layout_tool" "${small[@]}" --layout "batch:batch;d_fff:model" >"$work/out" 2>"$work/err" ||
  fail "a typo in a rule is a warning only without --strict-layout: $(cat "$work/err")"
grep -q "warning: the layout rule 'd_fff:model'" "$work/err" || fail "no warning: $(cat "$work/err")"
grep -q "did you mean 'd_ff'" "$work/err" || fail "no suggestion: $(cat "$work/err")"

"$layout_tool" "${small[@]}" --layout "batchh:batch" --strict-layout >"$work/out" 2>"$work/err" &&
  fail "--strict-layout accepted a rule naming no dimension"
grep -q "'batchh:batch'" "$work/err" || fail "the error does not name the rule: $(cat "$work/err")"

"$layout_tool" "${small[@]}" --layout "batch:batch;experts:model;d_ff:model" --strict-layout \
  >"$work/out" 2>"$work/err" || fail "a rule for experts on a dense model was refused: $(cat "$work/err")"
grep -q "warning" "$work/err" && fail "a warning for a known dim: $(cat "$work/err")"

"$layout_tool" search "${model[@]}" --processors 4 --memory 0.5 >"$work/out" 2>"$work/err" &&
  fail "--memory 0.5 was accepted (it meant no limit)"
grep -q -- "--memory '0.5'" "$work/err" || fail "the error does not name --memory: $(cat "$work/err")"

# A machine file's memory_bytes of .nan read as -9223372036854775808.
printf 'matmul_flops: 1e10\nelementwise_bytes: 1e10\nmemory_bytes: .nan\nlinks: {a: {bandwidth: 1e9}}\n' \
  >"$work/machine.yaml"
"$layout_tool" search "${model[@]}" --processors 4 --machine "$work/machine.yaml" >"$work/out" \
  2>"$work/err" && fail "memory_bytes: .nan was accepted"
grep -q "machine.yaml: memory_bytes = .nan is not a whole number" "$work/err" ||
  fail "the error does not name the file, key and value: $(cat "$work/err")"
echo "strict layout checks: ok"
