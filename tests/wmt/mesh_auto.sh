#!/usr/bin/env bash
# mtk-wmt with `mesh: auto` / `layout: auto` (docs/memory.md#mesh-auto): the plan is printed and
# recorded and is what trains; a run started on 4 ranks, checkpointed as it stops, resumes planned
# again on 2 ranks (the same command line for any allocation), its losses continuing those of the
# uninterrupted run on 2 ranks. Also the start-up line of the training state's dtypes.
#   mesh_auto.sh MTK_WMT TINY_YAML MAKE_CORPUS_PY
set -euo pipefail
wmt="$1"; tiny="$2"; make_corpus="$3"
mpi_timeout=120
source "$(dirname "$0")/../lm1b/harness.sh"

/usr/bin/python3 "$make_corpus" corpus copy
cp "$tiny" tiny.yaml
"$wmt" prepare --config tiny.yaml > prepare.log 2>&1 || { cat prepare.log; fail "prepare"; }

auto=(--mesh auto --layout auto --set train.log_every=1 --set checkpoint.every=100)
# Uninterrupted: 12 steps on 2 ranks.
mpirun -n 2 "$wmt" train --config tiny.yaml --run-dir full "${auto[@]}" --set train.steps=12 > full.log 2>&1 || { cat full.log; fail "uninterrupted run"; }
grep "plan" full.log
check_auto_plan full.log full 2

# One run through two allocations: steps 1-6 on 4 ranks, saved as it stops; 7-12 on 2 ranks.
mpirun -n 4 "$wmt" train --config tiny.yaml --run-dir part "${auto[@]}" --set train.steps=6 --set train.memory_per_rank=1GiB > p4.log 2>&1 || { cat p4.log; fail "steps 1-6 on 4 ranks"; }
mpirun -n 2 "$wmt" train --config tiny.yaml --run-dir part "${auto[@]}" --set train.steps=12 > p2.log 2>&1 || { cat p2.log; fail "steps 7-12 on 2 ranks"; }
grep -q "plan (mesh: auto, layout: auto, 4 ranks" p4.log || { cat p4.log; fail "no plan on 4 ranks"; }
grep -q "of a limit of 1.00 GiB (train.memory_per_rank)" p4.log || { cat p4.log; fail "4-rank plan: memory limit not printed"; }
grep -q "plan (mesh: auto, layout: auto, 2 ranks" p2.log || { cat p2.log; fail "no plan on 2 ranks"; }
grep -q "resumed from .* at step 6" p2.log || { cat p2.log; fail "did not resume at step 6 on 2 ranks"; }
grep "plan (" p4.log p2.log

# The losses: the uninterrupted run's within float32 reassociation (another mesh: 1e-4) up to the
# first resumed step; training amplifies the differences after, so 1e-2 for the later steps.
all_losses() { sed -n 's/.*"step": \([0-9]*\), "loss": \([0-9.e+-]*\).*/\1 \2/p' "$1"; }
paste <(all_losses full/metrics.jsonl) <(all_losses part/metrics.jsonl) > part.txt
cat part.txt
[ "$(wc -l < part.txt)" -eq 12 ] || fail "expected 12 steps"
awk '{ d = $4 - $2; if (d < 0) d = -d; tol = $1 <= 7 ? 1e-4 : 1e-2; if ($1 != $3 || d > tol * ($2 > 1 ? $2 : 1)) { print "step " $1 ": " $2 " vs " $4; bad = 1 } } END { exit bad }' part.txt ||
  fail "the losses across 4 and 2 ranks differ from the uninterrupted run"

# The training state's dtypes, announced at start-up when not all float32.
mpirun -n 2 "$wmt" train --config tiny.yaml --run-dir dry --dry-run --set train.optimizer_slot_dtype=bfloat16 > dry.log 2>&1 || { cat dry.log; fail "--dry-run with bf16 slots"; }
grep -qx "  precision: compute float32, variables float32, optimizer slots bfloat16" dry.log || { cat dry.log; fail "no precision line for bf16 slots"; }
echo "wmt mesh auto: OK"
