#!/usr/bin/env bash
# Bad settings and failed writes: every rank exits with the same status (1 for bad input or a
# failed write, 2 for a bad command line), the message names the key or path, the value and what
# is allowed (or the system's reason), and nothing hangs. Also --dry-run and --print-config.
#   settings.sh MTK_LM1B CONFIG
set -uo pipefail
lm1b="$1"
config="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mpi_timeout=120
source "$here/harness.sh"
source "$here/corpus.sh"
make_corpus corpus
mpirun -n 2 "$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 || { cat prepare.log; fail "prepare"; }

# expect STATUS PATTERN ARGS...: `mtk-lm1b ARGS` on 2 ranks; each rank must exit STATUS and the
# output must contain PATTERN (grep -E).
expect() {
  local want="$1" pattern="$2"; shift 2
  rm -f ranks.txt
  mpirun -n 2 sh -c '"$0" "$@"; echo "$?" >> ranks.txt' "$lm1b" "$@" > err.log 2>&1
  local statuses
  statuses="$(sort ranks.txt 2>/dev/null | tr '\n' ' ')"
  [ "$statuses" = "$want $want " ] || { cat err.log; fail "rank statuses '$statuses', expected $want on both: $*"; }
  grep -Eq -- "$pattern" err.log || { cat err.log; fail "output lacks '$pattern': $*"; }
  echo "ok ($want): $* -> $(grep -E -- "$pattern" err.log | head -1)"
}
train=(train --config "$config" --run-dir run)

# Settings: type and range, naming the key, the value and the allowed range.
expect 1 "train.steps = -5 is not an integer in \[0, " "${train[@]}" --set train.steps=-5
expect 1 "train.steps = abc is not an integer" "${train[@]}" --set train.steps=abc
expect 1 "with --set train.steps" "${train[@]}" --set train.steps=1.5
expect 1 "'train.steps=' gives 'train.steps' no value" "${train[@]}" --set train.steps=
expect 1 "'train=5' would replace the section 'train'" "${train[@]}" --set train=5
expect 1 "checkpoint.every = 0 is not an integer in \[1, " "${train[@]}" --set checkpoint.every=0
expect 1 "checkpoint.every = -3 is not an integer in \[1, " "${train[@]}" --set checkpoint.every=-3
expect 1 "train.log_every = -1 is not an integer in \[1, " "${train[@]}" --set train.log_every=-1
expect 1 "checkpoint.keep = 4294967297 is not an integer in \[1, 1000000\]" "${train[@]}" --set checkpoint.keep=4294967297
expect 1 "model.d_model = 0 is not an integer in \[1, " "${train[@]}" --set model.d_model=0
expect 1 "model.dropout = 2 is not a number in \[0, " "${train[@]}" --set model.dropout=2
expect 1 "model.gelu = maybe is not true or false" "${train[@]}" --set model.gelu=maybe
expect 1 "model.norm = 'batch_norm' is not one of layer_norm, rms_norm" "${train[@]}" --set model.norm=batch_norm
expect 1 "train.optimizer = 'adagrad' is not one of adafactor, adam, sgd" "${train[@]}" --set train.optimizer=adagrad
expect 1 "train.learning_rate.value = -1 is not a number in \[0, " "${train[@]}" --set train.learning_rate.value=-1
expect 1 "train.adafactor.beta1 = 2 is not a number in \[0, 0.999\]" "${train[@]}" --set train.adafactor.beta1=2
expect 1 "train.adam.beta1 is set but train.optimizer is 'adafactor'" "${train[@]}" --set train.adam.beta1=0.5
expect 1 "train.variable_rounding = 'up' is not one of nearest, stochastic" "${train[@]}" --set train.variable_dtype=bfloat16 --set train.variable_rounding=up
expect 1 "train.variable_rounding = 'stochastic' needs train.variable_dtype: bfloat16, not 'float32'" "${train[@]}" --set train.variable_rounding=stochastic
expect 1 "unknown key 'model.d_mdoel'; did you mean 'model.d_model'" "${train[@]}" --set model.d_mdoel=8
expect 1 "eval.max_batches = -2 is not an integer" eval --config "$config" --run-dir run --set eval.max_batches=-2
expect 1 "unknown key 'train.stepz'" "${train[@]}" --set train.stepz=3
printf 'train: 5\ndata: {dir: prepared}\n' > section.yaml
expect 1 "'train' must be a section" train --config section.yaml --run-dir run
mkdir -p config-dir
expect 1 "the config file 'config-dir' is a directory" train --config config-dir --run-dir run
expect 1 "cannot read the config file 'missing.yaml': No such file" train --config missing.yaml --run-dir run
expect 1 "data.dir = '' is not a non-empty string" "${train[@]}" --set 'data.dir=""'
# A batch no node can hold: refused with the figures before anything is allocated.
expect 1 "needs [0-9.]+ TiB per rank at its peak, but rank 0's node has [0-9.]+ [KMGT]?i?B available" "${train[@]}" --set model.batch=100000000
[ ! -e run ] || fail "a refused run created its run directory"
# Command-line values: exit 2.
expect 2 "'abc' is not a number > 0" eval --config "$config" --run-dir run --logit-scale abc
expect 2 "'x' is not an integer in \[1, " sample --config "$config" --run-dir run --tokens x
expect 2 "'0' is not a number > 0" eval --config "$config" --run-dir run --logit-scale=0

# Writes that fail: the path and the system's reason, every rank exits 1.
echo "not a directory" > a-file
expect 1 "cannot create the directory 'a-file/run': Not a directory" train --config "$config" --run-dir a-file/run
expect 1 "cannot create the directory 'a-file'" train --config "$config" --run-dir a-file
mkdir -p blocked/config.resolved.yaml
expect 1 "'blocked/config.resolved.yaml': Is a directory" train --config "$config" --run-dir blocked
if [ "$(id -u)" -ne 0 ]; then  # root writes anywhere
  mkdir -p read-only && chmod 555 read-only
  expect 1 "cannot create the directory 'read-only/run': Permission denied" train --config "$config" --run-dir read-only/run
fi
expect 1 "cannot create the directory 'a-file/out/train'" prepare --data corpus --out a-file/out --vocab-size 300

# --print-config: the resolved YAML, nothing run or written; --dry-run: checks, cost, no run.
mpirun -n 2 "$lm1b" train --config "$config" --run-dir dry --print-config --set train.steps=3 > print.log 2>&1 || { cat print.log; fail "--print-config"; }
grep -q "steps: 3" print.log || { cat print.log; fail "--print-config lacks the override"; }
[ "$(grep -c '^train:' print.log)" -eq 1 ] || fail "--print-config printed more than once"
# The effective config: defaults and derived values written out, model.vocab_size from the
# prepared vocabulary; fed back as the config it prints itself again.
for line in "  vocab_size: 300" "    total_steps: 3" "    epsilon1: 1e-30" "  num_encoder_layers: 0" \
            "  every: 20" "  max_batches: 0"; do
  grep -qx -- "$line" print.log || { cat print.log; fail "--print-config lacks '$line'"; }
done
grep -q "adam:" print.log && { cat print.log; fail "--print-config wrote another optimizer's settings"; }
mpirun -n 2 "$lm1b" train --config print.log --run-dir dry --print-config > print2.log 2>&1 || { cat print2.log; fail "--print-config of the effective config"; }
cmp print.log print2.log || { diff print.log print2.log; fail "the effective config does not print itself"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir dry --dry-run > dry.log 2>&1 || { cat dry.log; fail "--dry-run"; }
grep -Eq "per rank: variables and slots [0-9.]+ MiB, peak [0-9.]+ MiB, .* FLOPs and .* collectives" dry.log || { cat dry.log; fail "--dry-run printed no cost"; }
grep -q "parameters" dry.log || fail "--dry-run printed no parameter count"
grep -q "dry-run: config, data (every token checksum), 2 rank(s) and memory check out" dry.log || { cat dry.log; fail "--dry-run verdict"; }
grep -q "^step " dry.log && fail "--dry-run trained"
[ ! -e dry ] || fail "--dry-run wrote the run directory"
# The training state's dtypes: one start-up line when any is not float32, none when all are.
grep -q "precision:" dry.log && { cat dry.log; fail "--dry-run announced a precision for an all-float32 run"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir dry --dry-run --set train.variable_dtype=bfloat16 > dry-bf16.log 2>&1 || { cat dry-bf16.log; fail "--dry-run with bf16 variables"; }
grep -qx "  precision: compute float32, variables bfloat16, optimizer slots float32" dry-bf16.log || { cat dry-bf16.log; fail "no precision line for bf16 variables"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir dry --dry-run --set train.variable_dtype=bfloat16 --set train.variable_rounding=stochastic > dry-sr.log 2>&1 || { cat dry-sr.log; fail "--dry-run with stochastically rounded bf16 variables"; }
grep -qx "  precision: compute float32, variables bfloat16 (stochastic rounding), optimizer slots float32" dry-sr.log || { cat dry-sr.log; fail "no precision line for stochastic rounding"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir dry --dry-run --set model.activation_dtype=bfloat16 --set train.optimizer_slot_dtype=bfloat16 > dry-bf16c.log 2>&1 || { cat dry-bf16c.log; fail "--dry-run with bf16 compute and slots"; }
grep -Eqx "  precision: compute bfloat16 \((oneDNN|emulated).*\), variables float32, optimizer slots bfloat16" dry-bf16c.log || { cat dry-bf16c.log; fail "no precision line for bf16 compute and slots"; }
# --print-config with mesh: auto / layout: auto: the plan these ranks would run, as comments under
# the config as given (which still reads back); without a readable vocabulary, a note instead.
mpirun -n 2 "$lm1b" train --config "$config" --run-dir dry --print-config --mesh auto --layout auto > print-auto.log 2>&1 || { cat print-auto.log; fail "--print-config with mesh: auto"; }
cat print-auto.log
grep -qx "mesh: auto" print-auto.log || { cat print-auto.log; fail "--print-config with mesh: auto does not keep mesh: auto"; }
grep -q "^# --print-config: on these 2 ranks start-up would plan" print-auto.log || fail "--print-config shows no plan"
grep -Eq '^#   mesh: "[a-z]+:[0-9]' print-auto.log || fail "--print-config's plan has no mesh"
grep -Eq "^#   predicted_peak_bytes: [0-9]+" print-auto.log || fail "--print-config's plan has no peak"
[ ! -e dry ] || fail "--print-config wrote the run directory"
mpirun -n 2 "$lm1b" train --config print-auto.log --run-dir dry --print-config > print-auto2.log 2>&1 || { cat print-auto2.log; fail "--print-config of the printed mesh: auto config"; }
# (Not byte-equal: the plan records its planning time and the node's available memory.)
[ "$(grep '^#   mesh:' print-auto.log)" = "$(grep '^#   mesh:' print-auto2.log)" ] || { diff print-auto.log print-auto2.log; fail "the printed mesh: auto config plans another mesh"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir dry --print-config --mesh auto --layout auto --set train.memory_per_rank=64K > print-auto4.log 2>&1 || { cat print-auto4.log; fail "--print-config with mesh: auto and an impossible limit"; }
grep -q "^# --print-config: no plan on these ranks:" print-auto4.log && grep -q "^#   .*found no plan for the model.*smallest peak" print-auto4.log || { cat print-auto4.log; fail "--print-config with an impossible limit does not show the planning's error"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir dry --print-config --mesh auto --set data.dir=nowhere > print-auto3.log 2>&1 || { cat print-auto3.log; fail "--print-config with mesh: auto and no data"; }
grep -q "^# --print-config: the plan (mesh: auto) is chosen at start-up for the ranks given" print-auto3.log || { cat print-auto3.log; fail "--print-config with mesh: auto and no data: no note"; }
expect 1 "has 2 ranks" train --config "$config" --run-dir dry --dry-run --mesh batch:4
expect 1 "prepare" train --config "$config" --run-dir dry --dry-run --set data.dir=nowhere
mpirun -n 2 "$lm1b" eval --config "$config" --run-dir dry --dry-run > dry-eval.log 2>&1 || { cat dry-eval.log; fail "eval --dry-run"; }
grep -q "eval --dry-run" dry-eval.log || { cat dry-eval.log; fail "eval --dry-run verdict"; }
# train.steps 0: the initial weights saved as step 0, nothing trained; training on from that
# checkpoint gives the losses of a run trained from the start.
mpirun -n 2 "$lm1b" train --config "$config" --run-dir zero --set train.steps=0 > zero.log 2>&1 || { cat zero.log; fail "train.steps=0"; }
[ -d zero/checkpoints/step-000000000 ] || { cat zero.log; fail "train.steps=0 saved no step 0"; }
grep -q '"state": "completed", "step": 0' zero/status.json || { cat zero/status.json; fail "train.steps=0 status"; }
grep -q "^step " zero.log && { cat zero.log; fail "train.steps=0 trained"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir zero --set train.steps=2 --set train.log_every=1 > zero2.log 2>&1 || { cat zero2.log; fail "training on from step 0"; }
grep -q "resumed from .*step-000000000 at step 0" zero2.log || { cat zero2.log; fail "did not resume from step 0"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir fresh --set train.steps=2 --set train.log_every=1 > fresh.log 2>&1 || { cat fresh.log; fail "a fresh 2-step run"; }
losses() { grep -o '"loss": [^,]*' "$1"; }
[ -n "$(losses zero/metrics.jsonl)" ] && [ "$(losses zero/metrics.jsonl)" = "$(losses fresh/metrics.jsonl)" ] ||
  { losses zero/metrics.jsonl; losses fresh/metrics.jsonl; fail "losses after step 0 differ from a fresh run's"; }
echo "1 passed, 0 failed"
