#!/usr/bin/env bash
# `mtk-wmt train --dry-run` with a layout rule naming no tensor dimension (issue 64): a warning
# naming the rule and the nearest dim; --strict-layout makes it an error on every rank. Rules for
# dims of other settings (`experts`, the decoder's `beam`) pass.
#   strict_layout_wmt.sh MTK_WMT TINY_YAML MAKE_CORPUS_PY
set -uo pipefail
wmt="$1"; tiny="$2"; make_corpus="$3"
mpi_timeout=120
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../lm1b" && pwd)/harness.sh"
/usr/bin/python3 "$make_corpus" corpus copy > corpus.log 2>&1 || { cat corpus.log; fail "corpus"; }
cp "$tiny" tiny.yaml
"$wmt" prepare --config tiny.yaml > prepare.log 2>&1 || { cat prepare.log; fail "prepare"; }
dry=(train --config tiny.yaml --run-dir run --dry-run)

mpirun -n 2 "$wmt" "${dry[@]}" --layout "batch:batch;d_fff:model" > warn.log 2>&1 || { cat warn.log; fail "dry run"; }
grep -q "warning: the layout rule 'd_fff:model'.*did you mean 'd_ff'" warn.log || { cat warn.log; fail "no warning"; }
rm -f ranks.txt
mpirun -n 2 sh -c '"$0" "$@"; echo "$?" >> ranks.txt' "$wmt" "${dry[@]}" --strict-layout \
  --layout "batchh:batch" > strict.log 2>&1
[ "$(sort ranks.txt | tr '\n' ' ')" = "1 1 " ] || { cat strict.log; fail "--strict-layout: statuses $(sort ranks.txt | tr '\n' ' ')"; }
grep -q "'batchh:batch'.*did you mean 'batch'.*\[--strict-layout\]" strict.log || { cat strict.log; fail "no error naming the rule"; }
mpirun -n 2 "$wmt" "${dry[@]}" --strict-layout --layout "batch:batch;experts:model;beam:model;d_ff:model" \
  > known.log 2>&1 || { cat known.log; fail "known dims refused"; }
grep -q "warning" known.log && { cat known.log; fail "a warning for known dims"; }
echo "wmt strict layout: ok"
