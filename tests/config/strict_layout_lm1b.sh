#!/usr/bin/env bash
# `mtk-lm1b train --dry-run` and `train` with a layout rule naming no tensor dimension (issue 64):
# a warning naming the rule and the nearest dim (the run goes on); --strict-layout makes it an
# error on every rank, before anything is trained or written. A config repeating a key fails
# naming it and both lines.
#   strict_layout_lm1b.sh MTK_LM1B CONFIG
set -uo pipefail
lm1b="$1"
config="$2"
lm1b_tests="$(cd "$(dirname "${BASH_SOURCE[0]}")/../lm1b" && pwd)"
mpi_timeout=120
source "$lm1b_tests/harness.sh"
source "$lm1b_tests/corpus.sh"
make_corpus corpus
mpirun -n 2 "$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 ||
  { cat prepare.log; fail "prepare"; }
typo=(--config "$config" --run-dir run --layout "batch:batch;d_fff:model")

mpirun -n 2 "$lm1b" train --dry-run "${typo[@]}" > dry.log 2>&1 || { cat dry.log; fail "dry run"; }
grep -q "warning: the layout rule 'd_fff:model'.*did you mean 'd_ff'" dry.log ||
  { cat dry.log; fail "no warning for d_fff:model"; }
[ "$(grep -c "warning: the layout rule" dry.log)" = 1 ] || { cat dry.log; fail "warned more than once"; }

rm -f ranks.txt
mpirun -n 2 sh -c '"$0" "$@"; echo "$?" >> ranks.txt' "$lm1b" train --dry-run --strict-layout \
  "${typo[@]}" > strict.log 2>&1
[ "$(sort ranks.txt | tr '\n' ' ')" = "1 1 " ] ||
  { cat strict.log; fail "--strict-layout: rank statuses $(sort ranks.txt | tr '\n' ' '), expected 1 1"; }
grep -q "'d_fff:model'.*\[--strict-layout\]" strict.log || { cat strict.log; fail "no error naming the rule"; }
mpirun -n 2 "$lm1b" train --strict-layout "${typo[@]}" > train.log 2>&1 &&
  { cat train.log; fail "train --strict-layout ran with a rule naming no dim"; }
[ ! -e run/metrics.jsonl ] || fail "a refused layout still trained"

# Known dims of other settings pass, strict or not: `experts` on a dense model.
mpirun -n 2 "$lm1b" train --dry-run --strict-layout --config "$config" --run-dir run \
  --layout "batch:batch;experts:model;d_ff:model" > known.log 2>&1 || { cat known.log; fail "experts refused"; }
grep -q "warning" known.log && { cat known.log; fail "a warning for a known dim"; }

# A repeated key in the config.
{ cat "$config"; printf 'train:\n  steps: 3\n'; } > dup.yaml
mpirun -n 2 "$lm1b" train --dry-run --config dup.yaml --run-dir run > dup.log 2>&1 &&
  { cat dup.log; fail "a config with two train sections was accepted"; }
grep -q "dup.yaml: key 'train' is given twice" dup.log || { cat dup.log; fail "the error does not name the key"; }
echo "lm1b strict layout and duplicate keys: ok"
