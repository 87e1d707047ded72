#!/usr/bin/env bash
# Proof that a run's traffic crosses the emulated network, and as much as MTK's program says:
# the links' byte counters (scripts/testbed counters: eth0 inside each node's namespace) are read
# around mtk-lm1b training runs of 3 and 13 steps; the difference over the 10 extra steps (start-up,
# data checks and the final save cancel out) is set against what `mtk-layout --ranks-per-node`
# predicts a step sends between nodes (mtk/cost/internode.hpp):
#   2 nodes x 1 rank, data parallel: within 10% plus 5% for TCP/IP headers and acknowledgements;
#   2 nodes x 2 ranks, batch:2;model:2: at least 90% of the prediction (the least a node-aware
#   algorithm sends; MPICH's recursive doubling of small allreduces sends more).
# Shared memory between nodes would carry the bytes past the counters and fail the first check.
#   link_bytes.sh SOURCE_DIR MTK_LM1B MTK_LAYOUT CONFIG   (inside scripts/testbed)
set -euo pipefail
root="$1" lm1b="$2" layout="$3" config="$4"
tb="$root/scripts/testbed"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$root/tests/lm1b/corpus.sh"
make_corpus corpus
"$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 ||
  { cat prepare.log; fail "prepare"; }
vocab="$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' prepared/summary.json | head -1)"
[ -n "$vocab" ] || vocab=300

# tx_bytes per node after the runs minus before, one line per node
tx() { "$tb" counters | awk '{print $2}'; }
# measure NAME NP PPN MESH: bytes per step out of each node ("node1 node2"), from 3 and 13 steps
measure() {
  local name=$1 np=$2 ppn=$3 mesh=$4 s before after
  declare -A delta
  for s in 3 13; do
    mapfile -t before < <(tx)
    timeout -k 5 120 "$tb" mpiexec -n "$np" -ppn "$ppn" "$lm1b" train --config "$config" \
      --run-dir "$name-$s" --mesh "$mesh" --set train.steps=$s --set checkpoint.every=1000 \
      > "$name-$s.log" 2>&1 || { tail -20 "$name-$s.log"; fail "$name: training $s steps"; }
    mapfile -t after < <(tx)
    delta[$s,1]=$((after[0] - before[0])) delta[$s,2]=$((after[1] - before[1]))
  done
  echo "$(((delta[13,1] - delta[3,1]) / 10)) $(((delta[13,2] - delta[3,2]) / 10))"
}
# predict NPN MESH: the busiest node's bytes per step
predict() {
  "$layout" --config "$config" --set model.vocab_size="$vocab" --mesh "$2" --ranks-per-node "$1" |
    sed -n 's/.*bytes per step in all, \([0-9]*\) out of the busiest node.*/\1/p'
}

want="$(predict 1 batch:2)"
[ -n "$want" ] && [ "$want" -gt 0 ] || fail "mtk-layout predicted no inter-node bytes for batch:2"
read -r n1 n2 <<< "$(measure dp 2 1 batch:2)"
echo "2 nodes x 1 rank, batch:2: predicted $want bytes per step out of each node; measured $n1 (node1), $n2 (node2)"
for m in $n1 $n2; do
  awk -v m="$m" -v w="$want" 'BEGIN { exit !(m >= 0.9 * w && m <= 1.15 * w) }' ||
    fail "measured $m bytes per step, predicted $want (allowed 0.90-1.15 x)"
done
echo "ok: the link carried $(awk -v m="$n1" -v w="$want" 'BEGIN { printf "%.3f", m / w }') x the predicted bytes"

want="$(predict 2 'batch:2;model:2')"
read -r n1 n2 <<< "$(measure mp 4 2 'batch:2;model:2')"
echo "2 nodes x 2 ranks, batch:2;model:2: at least $want bytes per step out of each node; measured $n1, $n2"
for m in $n1 $n2; do
  awk -v m="$m" -v w="$want" 'BEGIN { exit !(m >= 0.9 * w) }' ||
    fail "measured $m bytes per step, below the least a step sends ($want)"
done
echo "ok: $(awk -v m="$n1" -v w="$want" 'BEGIN { printf "%.2f", m / w }') x the node-aware least"
