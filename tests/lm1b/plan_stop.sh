#!/usr/bin/env bash
# `mesh: auto` planning under a memory limit that the configured settings exceed (issue 64 item
# 10): the paper's size -1 LM cut to 4 layers of d_model 256, batch 32, on 2 ranks with
# train.memory_per_rank=120MiB, which makes the search try recomputation, loss chunks and
# microbatches:
#  1. the dry run plans and finishes (the bound here is generous for a loaded machine; the
#     planning's seconds are printed; bench/run-startup-bench measures them);
#  2. a SIGTERM to `mpiexec` while it plans (after its first progress line) stops every rank with
#     exit 76 (stopped before the first step) within a few seconds, nothing hanging; SIGINT too
#     (mpiexec itself exits 76, or 0 in hydra's race: see stop_signals.sh).
#   plan_stop.sh MTK_LM1B
set -uo pipefail
lm1b="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mpi_timeout=600
source "$here/harness.sh"
source "$here/corpus.sh"
make_corpus corpus
mpirun -n 2 "$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 || { cat prepare.log; fail "prepare"; }
cat > plan.yaml <<'YAML'
mesh: auto
layout: auto
model:
  preset: "paper_lm:-1"
train:
  steps: 10
  optimizer: adafactor
data:
  dir: prepared
YAML
model=(--set model.num_layers=4 --set model.d_model=256 --set model.batch=32)
limit=(--set train.memory_per_rank=120MiB)

# 1. The forced search finishes: a plan with other memory settings under the limit.
start=$(date +%s.%N)
mpirun -n 2 "$lm1b" train --config plan.yaml --run-dir full "${model[@]}" "${limit[@]}" --dry-run > full.log 2>&1 || { cat full.log; fail "the planned dry run"; }
end=$(date +%s.%N)
grep -E "^  plan" full.log
grep -q "plan (mesh: auto, layout: auto, 2 ranks, " full.log || { cat full.log; fail "no plan"; }
grep -q "of a limit of 120.00 MiB (train.memory_per_rank)" full.log || fail "the limit is not the one given"
grep -q "layouts lowered, [0-9]* left out by a lower bound of their memory" full.log || fail "no search counts"
grep -q "model.recompute norms; model.loss_chunks 1; train.microbatches 1$" full.log && fail "the configured settings cannot fit"
echo "planned dry run: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s"

# 2. SIGTERM (then SIGINT) to mpiexec during the planning.
for sig in TERM INT; do
  rm -f status.*
  # Each rank's status recorded by a wrapper shell that ignores the signal itself (the rank has
  # its own handlers), as stop_signals.sh does: MPICH 4.0.2's mpiexec sometimes exits 0 after it
  # forwarded a signal although every rank exited otherwise (a race in hydra).
  mpiexec -n 2 sh -c 'trap "" TERM INT USR1; "$0" "$@"; s=$?; echo $s > status.$PMI_RANK; exit $s' \
    "$lm1b" train --config plan.yaml --run-dir "stop-$sig" "${model[@]}" "${limit[@]}" --dry-run > "stop-$sig.log" 2>&1 &
  job=$!
  ( sleep 300 & s=$!; trap 'kill $s; exit 0' TERM; wait $s; kill -9 "$job" ) >/dev/null 2>&1 &
  watchdog=$!
  for i in $(seq 1 2400); do grep -q "^  planning (" "stop-$sig.log" && break; sleep 0.05; done
  grep -q "^  planning (" "stop-$sig.log" || { kill -9 "$job"; cat "stop-$sig.log"; fail "no planning progress line"; }
  sent=$(date +%s.%N)
  kill -"$sig" "$job"
  wait "$job"; status=$?
  done_at=$(date +%s.%N)
  kill "$watchdog" 2>/dev/null; wait "$watchdog" 2>/dev/null
  cat "stop-$sig.log"
  ranks="$(cat status.0 status.1 2>/dev/null | tr '\n' ' ')"
  echo "SIG$sig during planning: ranks exit $ranks(mpiexec $status) after $(awk -v a="$sent" -v b="$done_at" 'BEGIN { printf "%.2f", b - a }') s"
  [ "$ranks" = "76 76 " ] || fail "SIG$sig during planning: rank statuses '$ranks', expected 76 on both"
  [ "$status" -eq 76 ] || [ "$status" -eq 0 ] || fail "SIG$sig during planning: mpiexec exited $status"
  grep -q "stop requested (signal [0-9]*) during start-up" "stop-$sig.log" || fail "no stop message"
  # generous: a loaded machine; the latency itself is reported above
  awk -v a="$sent" -v b="$done_at" 'BEGIN { exit !(b - a < 60) }' || fail "SIG$sig took over 60 s to stop the planning"
  grep -q "^  plan (" "stop-$sig.log" && fail "SIG$sig: the planning went on to a plan"
done
echo "plan stop: OK"
