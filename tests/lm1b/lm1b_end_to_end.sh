#!/usr/bin/env bash
# End to end: a generated corpus in LM1B layout -> prepare -> train on 2 ranks (loss falls) ->
# eval (finite perplexity); the same losses on 1, 2 and 4 ranks under different layouts; resume
# continues the same trajectory; bad input fails clearly on every rank without hanging.
#   lm1b_end_to_end.sh MTK_LM1B_BINARY CONFIG
set -euo pipefail
lm1b="$1"
config="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mpi_timeout=300
source "$here/harness.sh"

source "$here/corpus.sh"
make_corpus corpus

mpirun -n 2 "$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 || { cat prepare.log; fail "prepare"; }
grep -q "0 skipped" prepare.log || { cat prepare.log; fail "prepare did not report skipped lines"; }

# Train on 2 ranks (data parallel); the loss must fall.
mpirun -n 2 "$lm1b" train --config "$config" --run-dir run2 > train2.log 2>&1 || { cat train2.log; fail "train on 2 ranks"; }
cat train2.log
[ -f run2/config.resolved.yaml ] || fail "no config.resolved.yaml"
first=$(head -1 run2/metrics.jsonl | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
last=$(tail -1 run2/metrics.jsonl | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }' || fail "loss did not fall: $first -> $last"
echo "loss $first -> $last"
for key in step loss cross_entropy z_loss aux_loss tokens_per_s lr; do grep -q "\"$key\"" run2/metrics.jsonl || fail "metrics.jsonl lacks $key"; done

# Eval: finite perplexities, JSON line with the two figures.
mpirun -n 2 "$lm1b" eval --config "$config" --run-dir run2 > eval.log 2>&1 || { cat eval.log; fail "eval"; }
cat eval.log
grep -q '"log_ppl_per_token": [0-9]' eval.log || fail "eval printed no log_ppl_per_token"
grep -q '"ppl_per_word": [0-9]' eval.log || fail "eval printed no ppl_per_word"

# The same losses on 1 rank and on 4 ranks with a 2-D layout (first 10 steps).
mpirun -n 1 "$lm1b" train --config "$config" --run-dir run1 --mesh batch:1 --set train.steps=10 > train1.log 2>&1 || { cat train1.log; fail "train on 1 rank"; }
mpirun -n 4 "$lm1b" train --config "$config" --run-dir run4 --mesh "batch:2;model:2" --set train.steps=10 > train4.log 2>&1 || { cat train4.log; fail "train on 4 ranks"; }
losses() { sed -n 's/.*"step": \([0-9]*\), "loss": \([0-9.e+-]*\).*/\1 \2/p' "$1" | head -10; }
paste <(losses run1/metrics.jsonl) <(losses run2/metrics.jsonl) <(losses run4/metrics.jsonl) > compare.txt
cat compare.txt
# Step time, MFU, gradient norm, peak memory and lr on every training record; the gradient norm
# of each step the same on 1, 2 and 4 ranks.
python3 "$here/../metrics/check_metrics_records.py" run1/metrics.jsonl run2/metrics.jsonl \
  run4/metrics.jsonl || fail "metrics.jsonl records (tests/metrics/check_metrics_records.py)"
awk '{ for (k = 4; k <= 6; k += 2) { d = $k - $2; if (d < 0) d = -d; if (d > 1e-4 * ($2 > 1 ? $2 : 1)) { print "step " $1 ": " $2 " vs " $k; bad = 1 } } } END { exit bad }' compare.txt ||
  fail "losses differ between 1, 2 and 4 ranks"
[ "$(wc -l < compare.txt)" -eq 10 ] || fail "expected 10 compared steps"

# Resume: 20 steps, then 20 more from the checkpoint, equals the 40-step run bitwise on the same mesh.
mpirun -n 2 "$lm1b" train --config "$config" --run-dir resume --set train.steps=20 > r1.log 2>&1 || { cat r1.log; fail "resume part 1"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir resume > r2.log 2>&1 || { cat r2.log; fail "resume part 2"; }
grep -q "resumed from" r2.log || { cat r2.log; fail "did not resume"; }
diff <(losses run2/metrics.jsonl; sed -n 's/.*"step": \([0-9]*\), "loss": \([0-9.e+-]*\).*/\1 \2/p' run2/metrics.jsonl | sed -n '11,40p') \
     <(losses resume/metrics.jsonl; sed -n 's/.*"step": \([0-9]*\), "loss": \([0-9.e+-]*\).*/\1 \2/p' resume/metrics.jsonl | sed -n '11,40p') ||
  fail "resumed losses differ from the uninterrupted run"

# Microbatches and recomputation (docs/memory.md): 20 steps as 2 slices, then 20 more as 4 slices
# with every layer recomputed, resumed from the checkpoint (data position and steps count
# batches): the losses of the uninterrupted run within float32 reassociation (1e-4 over the first
# 20 steps; training amplifies the differences after, so 1e-2 for the resumed 20).
mpirun -n 2 "$lm1b" train --config "$config" --run-dir micro --set train.steps=20 --set train.microbatches=2 > m1.log 2>&1 || { cat m1.log; fail "microbatches part 1"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir micro --set train.microbatches=4 --set model.recompute=layer > m2.log 2>&1 || { cat m2.log; fail "microbatches part 2"; }
grep -q "resumed from" m2.log || { cat m2.log; fail "microbatches: did not resume"; }
all_losses() { sed -n 's/.*"step": \([0-9]*\), "loss": \([0-9.e+-]*\).*/\1 \2/p' "$1"; }
paste <(all_losses run2/metrics.jsonl) <(all_losses micro/metrics.jsonl) > micro.txt
[ "$(wc -l < micro.txt)" -eq 40 ] || { cat micro.txt; fail "microbatches: expected 40 steps"; }
awk '{ d = $4 - $2; if (d < 0) d = -d; tol = $1 <= 20 ? 1e-4 : 1e-2; if ($1 != $3 || d > tol * ($2 > 1 ? $2 : 1)) { print "step " $1 ": " $2 " vs " $4; bad = 1 } } END { exit bad }' micro.txt ||
  fail "microbatched losses differ from the whole batch's"

# Sequence parallelism (docs/spatial.md): local attention (window 8) with `length` split over 2
# ranks (and `batch` over 2 more) gives the 1-rank losses; each rank feeds its batch rows whole
# and the program slices the length.
window="--set model.attention_window=8"
mpirun -n 1 "$lm1b" train --config "$config" --run-dir local1 --mesh batch:1 $window --set train.steps=10 > l1.log 2>&1 || { cat l1.log; fail "local attention on 1 rank"; }
mpirun -n 4 "$lm1b" train --config "$config" --run-dir local4 --mesh "batch:2;seq:2" --layout "batch:batch;length:seq" $window --set train.steps=10 > l4.log 2>&1 || { cat l4.log; fail "local attention with a split length"; }
# same_losses RUN_A RUN_B STEPS WHAT: both runs' first STEPS losses, equal to 1e-4 (relative above 1).
same_losses() {
  paste <(losses "$1/metrics.jsonl") <(losses "$2/metrics.jsonl") > "$2.txt"
  cat "$2.txt"
  [ "$(wc -l < "$2.txt")" -eq "$3" ] || { cat "$2.txt"; fail "$4: expected $3 steps"; }
  awk '{ d = $4 - $2; if (d < 0) d = -d; if ($1 != $3 || d > 1e-4 * ($2 > 1 ? $2 : 1)) { print "step " $1 ": " $2 " vs " $4; bad = 1 } } END { exit bad }' "$2.txt" ||
    fail "$4: losses differ from 1 rank's"
}
same_losses local1 local4 10 "local attention with a split length"
# The same with mixture-of-experts layers: their routing scans the split length part by part.
moe="$window --set model.moe_every=2 --set model.moe.num_experts=4"
mpirun -n 1 "$lm1b" train --config "$config" --run-dir moe1 --mesh batch:1 $moe --set train.steps=5 > m1.log 2>&1 || { cat m1.log; fail "MoE with local attention on 1 rank"; }
mpirun -n 4 "$lm1b" train --config "$config" --run-dir moe4 --mesh "batch:2;seq:2" --layout "batch:batch;length:seq;experts:seq" $moe --set train.steps=5 > m4.log 2>&1 || { cat m4.log; fail "MoE with a split length"; }
same_losses moe1 moe4 5 "MoE with a split length"

# Bad input: clear errors, non-zero exit, no hang (each run has a timeout).
expect_error() {  # expect_error PATTERN COMMAND...
  local pattern="$1"; shift
  if "$@" > err.log 2>&1; then cat err.log; fail "expected failure: $*"; fi
  grep -q -- "$pattern" err.log || { cat err.log; fail "error lacks '$pattern': $*"; }
}
# A run directory's model: evaluating it without its attention window is refused (the same
# weights would compute another model); --restore uses them anyway, with a note.
expect_error "was trained with model.attention_window = 8 (this config: 0)" mpirun -n 1 "$lm1b" eval --config "$config" --run-dir local1 --mesh batch:1
mpirun -n 1 "$lm1b" eval --config "$config" --run-dir bad --mesh batch:1 --restore local1/checkpoints/step-000000010 > note.log 2>&1 || { cat note.log; fail "eval with --restore of another model"; }
grep -q "note: --restore .* was trained with model.attention_window = 8" note.log || { cat note.log; fail "no note on --restore of another model"; }
expect_error "unknown key 'train.stepz'" mpirun -n 2 "$lm1b" train --config "$config" --run-dir bad --set train.stepz=3
expect_error "not divisible" mpirun -n 2 "$lm1b" train --config "$config" --run-dir bad --set model.num_heads=3 --mesh model:2 --layout heads:model
expect_error "prepare" mpirun -n 2 "$lm1b" train --config "$config" --run-dir bad --set data.dir=nowhere
expect_error "has 2 ranks" mpirun -n 2 "$lm1b" train --config "$config" --run-dir bad --mesh batch:4
expect_error "no checkpoint" mpirun -n 2 "$lm1b" eval --config "$config" --run-dir empty
mkdir -p broken/training-monolingual.tokenized.shuffled broken/heldout-monolingual.tokenized.shuffled
: > broken/training-monolingual.tokenized.shuffled/news.en-00001-of-00100
cp corpus/heldout-monolingual.tokenized.shuffled/* broken/heldout-monolingual.tokenized.shuffled/
expect_error "news.en-00001-of-00100" mpirun -n 2 "$lm1b" prepare --data broken --out broken-out --vocab-size 300
expect_error "training-monolingual" mpirun -n 2 "$lm1b" prepare --data nowhere --out x
echo "1 passed, 0 failed"
