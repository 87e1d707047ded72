#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `mtk-wmt prepare` on the pair formats of docs/wmt.md: PREFIX, FILE.tsv (one gzip'd) and
# SOURCE|TARGET give the same token shards as each other, on 1, 2 and 3 ranks; TSV dev and test
# sets (their sides written for translate); malformed TSV lines are counted; translate prints its
# phases and a progress line with the rate. Bad items fail naming the file and the forms.
# Usage: prepare_formats.sh MTK_WMT TINY_YAML MAKE_CORPUS_PY
set -euo pipefail
wmt="$1"; tiny="$2"; make_corpus="$3"
mpi_timeout=120
source "$(dirname "$0")/../lm1b/harness.sh"

/usr/bin/python3 "$make_corpus" corpus copy
# The config without the .sgm dev set: the TSV sets replace it below.
grep -v '^  dev:' "$tiny" > tiny.yaml
"$wmt" prepare --config tiny.yaml --set data.dir=prefix > prefix.log 2>&1 || { cat prefix.log; fail "prepare (PREFIX)"; }
grep -q "prepare: \[1/1\] corpus/copy.en + corpus/copy.fr: 3000 pairs of 3000, 0 skipped | .*(100.0%)" prefix.log ||
  { cat prefix.log; fail "no per-item line with the share done"; }
grep -q "prepare: vocabulary sample: 3.00k pairs in" prefix.log || { cat prefix.log; fail "no sample line"; }

paste corpus/copy.en corpus/copy.fr > all.tsv
head -n 1000 all.tsv > a.tsv
tail -n +1001 all.tsv | gzip > b.tsv.gz
cp corpus/copy.en src.txt
cp corpus/copy.fr tgt.txt
paste corpus/dev.en corpus/dev.fr > dev.tsv
paste corpus/test.en corpus/test.fr > test.tsv
mpirun -n 2 "$wmt" prepare --config tiny.yaml --set data.dir=tsv --set "data.train=a.tsv, b.tsv.gz" \
  --set data.dev.tsv=dev.tsv --set data.test.tsv=test.tsv > tsv.log 2>&1 || { cat tsv.log; fail "prepare (TSV) on 2 ranks"; }
grep -q "\[2/2\] b.tsv.gz: 2000 pairs of 2000, 0 skipped (rank 1)" tsv.log || { cat tsv.log; fail "item 2 not on rank 1"; }
# --out DIR is data.dir (docs/configuration.md#command-lines).
mpirun -n 3 "$wmt" prepare --config tiny.yaml --out files --set "data.train=src.txt|tgt.txt" \
  > files.log 2>&1 || { cat files.log; fail "prepare (SOURCE|TARGET) on 3 ranks"; }
for d in tsv files; do
  for f in vocab.model train.src.tokens train.tgt.tokens; do
    cmp -s "prefix/$f" "$d/$f" || fail "$d/$f differs from the PREFIX form's"
  done
done
cmp -s tsv/test.source.txt corpus/test.en && cmp -s tsv/test.reference.txt corpus/test.fr ||
  fail "the test TSV's sides were not written whole"
grep -q '"dev_pairs": 64' tsv/summary.json || fail "dev.tsv not encoded: $(cat tsv/summary.json)"
grep -q -- "--set 'data.train=$work/src.txt|$work/tgt.txt'" files/prepare.command ||
  fail "prepare.command: $(cat files/prepare.command)"

# A test set held out of the training pairs by fraction: the same on 2 and 3 ranks, not trained on.
for n in 2 3; do
  mpirun -n $n "$wmt" prepare --config tiny.yaml --set data.dir=held$n --set "data.train=a.tsv, b.tsv.gz" \
    --set data.test.fraction=0.02 > held$n.log 2>&1 || { cat held$n.log; fail "prepare with data.test.fraction on $n ranks"; }
done
for f in train.src.tokens train.tgt.tokens test.source.txt test.reference.txt; do
  cmp -s "held2/$f" "held3/$f" || fail "$f differs between 2 and 3 ranks with data.test.fraction"
done
held=$(wc -l < held2/test.source.txt)
[ "$held" -gt 20 ] && [ "$held" -lt 120 ] || fail "held out $held of 3000 pairs at 0.02"
grep -q "training: $((3000 - held)) pairs of 3000 " held2.log && grep -q "test: $held pairs held out" held2.log ||
  { cat held2.log; fail "held-out pairs not reported"; }
[ "$(wc -l < held2/test.reference.txt)" = "$held" ] || fail "test.reference.txt has another line count"

# Malformed TSV lines (no TAB, two TABs) are skipped and counted; a dev TSV must have none.
{ head -n 50 all.tsv; echo "no tab"; printf 'a\tb\tc\n'; } > mal.tsv
out=$("$wmt" prepare --config tiny.yaml --set data.dir=mal --set data.train=mal.tsv 2>&1) || fail "prepare (malformed): $out"
grep -q "training: 50 pairs of 52 .* not_two_columns 2" <<<"$out" || fail "malformed lines not counted: $out"
set +e
err=$("$wmt" prepare --config tiny.yaml --set data.dir=mal2 --set data.dev.tsv=mal.tsv 2>&1)
status=$?
set -e
[ $status = 1 ] && grep -q "data.dev.tsv: mal.tsv:51: not source<TAB>target" <<<"$err" || fail "dev TSV: $status $err"
for item in nothere.tsv "src.txt|nothere" nothere; do
  set +e
  err=$(mpirun -n 2 "$wmt" prepare --config tiny.yaml --set data.dir=bad --set "data.train=$item" 2>&1)
  status=$?
  set -e
  [ $status = 1 ] && grep -q "data.train: .*nothere.* does not exist.*FILE.tsv" <<<"$err" || fail "item $item: $status $err"
done

# translate prints its phases and, at the end, the sentences, the time and the rate.
mpirun -n 2 "$wmt" train --config tiny.yaml --run-dir run --set data.dir=tsv --set train.steps=10 \
  --set checkpoint.every=10 > train.log 2>&1 || { cat train.log; fail "train on TSV data"; }
mpirun -n 2 "$wmt" translate --config tiny.yaml --run-dir run --set data.dir=tsv \
  --input tsv/test.source.txt --reference tsv/test.reference.txt --out t.fr > translate.log 2>&1 ||
  { cat translate.log; fail "translate"; }
grep -q "mtk-wmt translate: 64 sentences from tsv/test.source.txt; loading the checkpoint" translate.log &&
  grep -q "mtk-wmt translate: 64 sentences in .* sentences/s, 4 batches" translate.log ||
  { cat translate.log; fail "translate printed no progress"; }
[ -s t.fr ] && ! grep -q "deprecated" translate.log || { cat translate.log; fail "translate --out"; }
# The old spelling --output, deprecated: the same file, and one warning naming --out.
mpirun -n 2 "$wmt" translate --config tiny.yaml --run-dir run --set data.dir=tsv \
  --input tsv/test.source.txt --output t0.fr > old.log 2>&1 || { cat old.log; fail "translate --output"; }
cmp -s t.fr t0.fr || fail "translate --output wrote another file than --out"
[ "$(grep -c "mtk-wmt translate: warning: --output is deprecated (accepted until the next release); use --out" old.log)" = 1 ] ||
  { cat old.log; fail "no one warning for --output"; }
set +e
err=$("$wmt" translate --config tiny.yaml --run-dir run --input x --out a --output b 2>&1)
status=$?
set -e
[ $status = 2 ] && grep -q -- "--output: given with --out" <<<"$err" || fail "--out with --output: $status $err"
# On a terminal the line is redrawn in place (script(1) gives the command a terminal).
if command -v script > /dev/null; then
  script -qec "\"$wmt\" translate --config tiny.yaml --run-dir run --set data.dir=tsv --mesh batch:1 \
    --input tsv/test.source.txt --out t1.fr" tty.log > /dev/null || { cat tty.log; fail "translate on a terminal"; }
  grep -qF $'4 batches\033[K' tty.log || { cat -A tty.log; fail "no redrawn line on a terminal"; }
fi
echo "prepare_formats: OK"
