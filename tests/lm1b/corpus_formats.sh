#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `mtk-lm1b prepare --text` on corpora of one's own (docs/lm1b.md, "Your own corpus"): plain-text
# files by a glob (one gzip'd), held out by fraction, the same shards on 1 and 2 ranks, reused on
# a re-run; JSON Lines with a named field and a held-out file; train and eval read the result;
# bad input gets an error naming the file, line or option, with exit 1 on every rank.
# Usage: corpus_formats.sh MTK_LM1B TINY_YAML
set -euo pipefail
lm1b="$1" tiny="$2"
mpi_timeout=120
source "$(dirname "$0")/harness.sh"
source "$(dirname "$0")/corpus.sh"

mkdir -p text
gen 11 300 > text/part-1.txt
gen 12 300 > text/part-2.txt
gen 13 300 | gzip > text/part-3.txt.gz
gen 14 100 > other.txt

# Plain text by a glob, 5% held out, on 2 ranks; then again on 1 rank: the same bytes.
mpirun -n 2 "$lm1b" prepare --text 'text/*' --heldout-fraction 0.05 --out p2 --vocab-size 300 \
  > p2.log 2>&1 || { cat p2.log; fail "prepare --text on 2 ranks"; }
grep -q "3 training files (text, " p2.log || { cat p2.log; fail "no input line"; }
grep -q "\[3/3\] 00003-part-3.txt.gz: 300 sentences ([0-9]* held out).*(rank 0) | .*(100.0%)" p2.log ||
  { cat p2.log; fail "no per-file line with the share done"; }
grep -q "training:   3 shards (0 reused), .* 0 skipped of 900 lines" p2.log || { cat p2.log; fail "training counts"; }
"$lm1b" prepare --text text/part-1.txt text/part-2.txt text/part-3.txt.gz --heldout-fraction 0.05 \
  --out p1 --vocab-size 300 > p1.log 2>&1 || { cat p1.log; fail "prepare --text on 1 rank"; }
for f in vocab.model train/00001-part-1.txt.tok train/00003-part-3.txt.gz.tok heldout/heldout.tok; do
  cmp -s "p1/$f" "p2/$f" || fail "$f differs between 1 and 2 ranks"
done
held=$(sed -n 's/.*"heldout_sentences": *\([0-9]*\).*/\1/p' p2/summary.json)
[ "$held" -gt 20 ] && [ "$held" -lt 75 ] || fail "held out $held of 900 lines at 0.05"
# A re-run reuses everything; the recorded command does too, from anywhere.
mpirun -n 2 "$lm1b" prepare --text 'text/*' --heldout-fraction 0.05 --out p2 --vocab-size 300 > again.log 2>&1 ||
  { cat again.log; fail "re-run"; }
grep -q "training:   3 shards (3 reused)" again.log || { cat again.log; fail "re-run did not reuse the shards"; }
(cd / && eval "\"\$lm1b\" $(sed 's/^mtk-lm1b //' "$work/p2/prepare.command")") > recorded.log 2>&1 ||
  { cat recorded.log; fail "the recorded command"; }
grep -q "is current (same settings): reused" recorded.log || { cat recorded.log; fail "recorded command retrained"; }
# Another fraction is other settings: refused without --force.
set +e
err=$("$lm1b" prepare --text 'text/*' --heldout-fraction 0.1 --out p2 --vocab-size 300 2>&1)
status=$?
set -e
[ $status = 1 ] && grep -q -- "--heldout-fraction 0.05 there, 0.1 now" <<<"$err" || fail "other fraction: $status $err"

# JSON Lines: the field "body" of each object (a record may hold several lines), a held-out file.
python3 - <<'PY'
import json
for src, dst in (("text/part-1.txt", "a.jsonl"), ("other.txt", "held.jsonl")):
    with open(src) as f, open(dst, "w") as o:
        for i, line in enumerate(f):
            o.write(json.dumps({"id": i, "body": line.rstrip("\n") + ("\nand more ." if i % 7 == 0 else "")}) + "\n")
PY
mpirun -n 2 "$lm1b" prepare --text a.jsonl --format jsonl --text-field body --heldout held.jsonl \
  --out pj --vocab-size 300 > pj.log 2>&1 || { cat pj.log; fail "prepare --format jsonl"; }
grep -q 'held-out:   100 sentences' pj.log || { cat pj.log; fail "held-out file not used whole"; }
grep -q -- "--text-field body" pj/prepare.command || fail "prepare.command: $(cat pj/prepare.command)"

# train and eval read what --text prepared.
mpirun -n 2 "$lm1b" train --config "$tiny" --run-dir run --set data.dir=p2 --set train.steps=4 \
  --set checkpoint.every=4 > train.log 2>&1 || { cat train.log; fail "train on --text data"; }
mpirun -n 2 "$lm1b" eval --config "$tiny" --run-dir run --set data.dir=p2 > eval.log 2>&1 ||
  { cat eval.log; fail "eval on --text data"; }
grep -qi "perplexity" eval.log || { cat eval.log; fail "eval printed no perplexity"; }

# Bad input: every rank exits 1, rank 0 names the file, line or option.
echo '{"text": "a b"}' > wrong.jsonl
expect() {  # expect TEXT ARGS...: exit 1 and TEXT in the output
  local want="$1"; shift
  set +e
  out=$(mpirun -n 2 "$lm1b" prepare "$@" --vocab-size 300 2>&1)
  status=$?
  set -e
  [ $status = 1 ] || fail "prepare $*: exit $status, want 1: $out"
  grep -qF -- "$want" <<<"$out" || fail "prepare $*: no '$want' in: $out"
}
expect "wrong.jsonl:1: no field \"body\" (the object has text)" --text wrong.jsonl --format jsonl --text-field body --out x1
expect "'text/*.json' matches no file" --text 'text/*.json' --out x2
expect "'text' is a folder: give its files" --text text --out x3
expect "is given by both --text and --heldout" --text 'text/*' --heldout text/part-1.txt --out x4
expect "no line was held out" --text other.txt --heldout-fraction 0.000001 --out x5
set +e
out=$("$lm1b" prepare --text other.txt --data . --out x6 2>&1)
status=$?
set -e
[ $status = 2 ] || fail "--text with --data: exit $status, want 2: $out"
echo "corpus_formats: OK"
