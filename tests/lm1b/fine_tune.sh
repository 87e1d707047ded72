#!/usr/bin/env bash
# Fine-tuning (docs/lm1b.md "Fine-tuning"): train on corpus A on 2 ranks; `train --init-from` its
# checkpoint on 4 ranks with the model split (batch:2;model:2) and corpus B. The new run's step-0
# weights give the first run's held-out loss on A (to float rounding); its loss falls on B; its run
# directory records the source; a requeued fine-tune resumes; --restore with --init-from, another
# source's run directory, a model of other shapes, a pattern matching nothing and another
# vocabulary are refused naming what is wrong; excluding the vocabulary's variables allows it.
#   fine_tune.sh MTK_LM1B_BINARY CONFIG
set -euo pipefail
lm1b="$1"
config="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mpi_timeout=300
source "$here/harness.sh"
source "$here/corpus.sh"

# One vocabulary for both corpora: prepared once from training shards 1-3 (A: corpus.sh's grammar)
# and 4-6 (B: the same words in reverse order), then a data folder for each: a manifest.txt (the
# format prepare writes) listing the shared vocabulary, that corpus' shards and its held-out shard
# (A: the held-out shard; B: its shard 6, trained on 4 and 5).
train_dir=ab/training-monolingual.tokenized.shuffled
mkdir -p "$train_dir" ab/heldout-monolingual.tokenized.shuffled
for k in 1 2 3; do gen "$k" 300 > "$train_dir/news.en-0000$k-of-00100"; done
for k in 4 5 6; do
  gen "$k" 300 | awk '{ for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : "\n") }' > "$train_dir/news.en-0000$k-of-00100"
done
gen 99 80 > ab/heldout-monolingual.tokenized.shuffled/news.en.heldout-00000-of-00050
mpirun -n 2 "$lm1b" prepare --data ab --out prepared --vocab-size 300 > prepare.log 2>&1 || { cat prepare.log; fail "prepare"; }
shard() { grep "^$1 " prepared/manifest.txt | sed -n "$2p" | sed "s|^$1 |$PWD/prepared/|"; }
data_folder() {  # data_folder NAME FIRST_SHARD LAST_SHARD HELDOUT
  mkdir -p "$1"
  { head -1 prepared/manifest.txt
    echo "vocab $(shard vocab 1)"
    for k in $(seq "$2" "$3"); do echo "train $(shard train "$k")"; done
    echo "heldout $4"
  } > "$1/manifest.txt"
}
data_folder dataA 1 3 "$(shard heldout 1)"
data_folder dataB 4 5 "$(shard train 6)"
A="--config $config --set data.dir=dataA"
B="--config $config --set data.dir=dataB"
eval_loss() { sed -n 's/.*"log_ppl_per_token": \([0-9.e+-]*\).*/\1/p' "$1" | tail -1; }
train_losses() { sed -n 's/.*"step": \([0-9]*\), "loss": \([0-9.e+-]*\).*/\1 \2/p' "$1"; }

# 1. Corpus A on 2 ranks (batch:2), 20 steps; its held-out loss.
mpirun -n 2 "$lm1b" train $A --run-dir runA --set train.steps=20 > trainA.log 2>&1 || { cat trainA.log; fail "train on A"; }
mpirun -n 2 "$lm1b" eval $A --run-dir runA > evalA.log 2>&1 || { cat evalA.log; fail "eval of A"; }
lossA=$(eval_loss evalA.log)
source_ckpt="$PWD/runA/checkpoints/step-000000020"
sha=$(sha256sum "$source_ckpt/manifest.sha256" | cut -d' ' -f1)

# 2. The fine-tune's start on 4 ranks, model split: 0 steps saves its step-0 checkpoint.
ft="--mesh batch:2;model:2 --run-dir ft --init-from runA"
mpirun -n 4 "$lm1b" train $B $ft --set train.steps=0 > ft0.log 2>&1 || { cat ft0.log; fail "fine-tune start"; }
grep -q -- "--init-from $source_ckpt (step 20, saved on 2 rank(s), mesh batch:2): loading 15 trained variables onto mesh batch:2;model:2" ft0.log || { cat ft0.log; fail "no --init-from line"; }
grep -q "starting at step 0: optimizer slots, learning-rate schedule and data position afresh" ft0.log || { cat ft0.log; fail "no step-0 line"; }
# Where the weights came from: config.resolved.yaml (comments), every checkpoint, status.json.
grep -q "^# init_from:" ft/config.resolved.yaml || { cat ft/config.resolved.yaml; fail "config.resolved.yaml lacks init_from"; }
grep -q "^#   manifest_sha256: $sha$" ft/config.resolved.yaml || { cat ft/config.resolved.yaml; fail "config.resolved.yaml: wrong manifest hash"; }
grep -q "^#   checkpoint: \"$source_ckpt\"" ft/config.resolved.yaml || fail "config.resolved.yaml: no source path"
grep -q "^init_from:" ft/checkpoints/step-000000000/metadata.yaml || fail "metadata.yaml lacks init_from"
grep -q "manifest_sha256: $sha" ft/checkpoints/step-000000000/metadata.yaml || fail "metadata.yaml: wrong manifest hash"
grep -q "\"message\": \"weights from $source_ckpt (step 20, manifest sha256 ${sha:0:16}" ft/status.json || { cat ft/status.json; fail "status.json does not say where the weights came from"; }

# 3. Its weights on A's held-out shard, on 1 rank: the first run's final loss to float rounding.
mpirun -n 1 "$lm1b" eval $A --run-dir ft --mesh batch:1 > eval0.log 2>&1 || { cat eval0.log; fail "eval of the fine-tune's start"; }
loss0=$(eval_loss eval0.log)
echo "held-out loss on A: first run $lossA, fine-tune at step 0 $loss0"
awk -v a="$lossA" -v b="$loss0" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 1e-5 * a) }' ||
  fail "the fine-tune starts at held-out loss $loss0, the first run ended at $lossA"

# 4. The same command with 20 steps (a requeued job): resumes its own step 0, and learns B: its
# held-out loss on B falls from the step-0 weights'.
mpirun -n 1 "$lm1b" eval $B --run-dir ft --mesh batch:1 > evalB0.log 2>&1 || { cat evalB0.log; fail "eval of the fine-tune's start on B"; }
mpirun -n 4 "$lm1b" train $B $ft --set train.steps=20 > ft.log 2>&1 || { cat ft.log; fail "fine-tune"; }
grep -q "started from this checkpoint already; resuming it" ft.log || { cat ft.log; fail "the requeued fine-tune did not resume"; }
[ "$(train_losses ft/metrics.jsonl | wc -l)" -eq 20 ] || { cat ft/metrics.jsonl; fail "expected 20 training steps"; }
mpirun -n 1 "$lm1b" eval $B --run-dir ft --mesh batch:1 > evalB.log 2>&1 || { cat evalB.log; fail "eval of the fine-tune on B"; }
echo "held-out loss on B: at step 0 $(eval_loss evalB0.log), at step 20 $(eval_loss evalB.log)"
awk -v a="$(eval_loss evalB0.log)" -v b="$(eval_loss evalB.log)" 'BEGIN { exit !(b < a - 0.1) }' ||
  { train_losses ft/metrics.jsonl; fail "the loss did not fall on B"; }
grep -q "manifest_sha256: $sha" ft/checkpoints/step-000000020/metadata.yaml || fail "the resumed run's checkpoint lost its origin"

# 5. Refusals (exit 2: usage; 1: the command's own error, the same on every rank).
expect() {  # expect STATUS TEXT ARGS...: the command fails with STATUS and says TEXT
  local want="$1" text="$2" status=0
  shift 2
  mpirun -n 1 "$lm1b" "$@" --mesh batch:1 > err.log 2>&1 || status=$?
  [ "$status" -eq "$want" ] || { cat err.log; fail "$* exited $status, not $want"; }
  grep -qF -- "$text" err.log || { cat err.log; fail "$*: no '$text'"; }
}
expect 2 "--restore excludes --init-from" train $B --run-dir x1 --init-from runA --restore runA
expect 1 "has checkpoints of a run that did not start from it" train $A --run-dir runA --init-from ft
expect 1 "--init-exclude 'embeding' matches none of the model's trained variables" train $B --run-dir x2 --init-from runA --init-exclude embeding
expect 1 "2 variables do not match: variable 'decoder/layer_0/ffn/wi': checkpoint $source_ckpt stores shape [d_model=32, d_ff=64], the program expects [d_model=32, d_ff=48]; variable 'decoder/layer_0/ffn/wo'" \
  train $B --run-dir x3 --init-from runA --set model.d_ff=48
[ ! -e x3/checkpoints ] || fail "a refused --init-from saved a checkpoint"

# 6. A new vocabulary: refused naming its variables, then allowed with them initialised afresh.
mpirun -n 1 "$lm1b" prepare --data ab --out preparedC --vocab-size 320 > prepareC.log 2>&1 || { cat prepareC.log; fail "prepare C"; }
C="--config $config --set data.dir=preparedC"
expect 1 "token ids mean other pieces in decoder/embedding, decoder/softmax; initialise them afresh with --init-exclude 'decoder/embedding' --init-exclude 'decoder/softmax'" \
  train $C --run-dir x4 --init-from runA
mpirun -n 1 "$lm1b" train $C --mesh batch:1 --run-dir newvocab --init-from runA --init-exclude embedding --init-exclude softmax --set train.steps=0 > nv.log 2>&1 || { cat nv.log; fail "new vocabulary"; }
grep -q "initialised afresh (--init-exclude): decoder/embedding, decoder/softmax" nv.log || { cat nv.log; fail "no line on the excluded variables"; }
grep -q "^#   excluded: \[decoder/embedding, decoder/softmax\]" newvocab/config.resolved.yaml || { cat newvocab/config.resolved.yaml; fail "exclusions not recorded"; }
echo "fine-tuning: OK"
