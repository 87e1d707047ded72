#!/usr/bin/env bash
# mtk-wmt end to end on synthetic corpora (copy, and reverse word order): prepare, train on 2 ranks,
# translate held-out sentences by beam search (BLEU > 90), the same translations on 1 and 2 ranks under other
# layouts, bad input to prepare (exit 1, message), --help of every command.
# Usage: wmt_end_to_end.sh MTK_WMT TINY_YAML MAKE_CORPUS_PY
set -euo pipefail
wmt="$1"; tiny="$2"; make_corpus="$3"
mpi_timeout=300
source "$(dirname "$0")/../lm1b/harness.sh"

# --help on every command: stdout, exit 0.
for c in "" prepare train translate bleu; do
  out=$("$wmt" $c --help) || fail "mtk-wmt $c --help exited $?"
  grep -q "Usage" <<<"$out" || fail "mtk-wmt $c --help printed no usage: $out"
done

/usr/bin/python3 "$make_corpus" corpus copy
cp "$tiny" tiny.yaml

# Bad input: misaligned files name both files and counts; a malformed .sgm names file and line.
mkdir bad
head -n 10 corpus/copy.en > bad/x.en
head -n 12 corpus/copy.fr > bad/x.fr
set +e
err=$("$wmt" prepare --config tiny.yaml --set data.train=bad/x --set data.dir=bad/out 2>&1)
status=$?
set -e
[ $status = 1 ] || fail "misaligned files: exit $status, want 1: $err"
grep -q "bad/x.en' has 10 lines but 'bad/x.fr' has 12" <<<"$err" || fail "misaligned: $err"
cp corpus/dev.en.sgm bad/dev.en.sgm
sed -i '5s|</seg>||' bad/dev.en.sgm
set +e
err=$("$wmt" prepare --config tiny.yaml --set data.dev.source=bad/dev.en.sgm --set data.dir=bad/out 2>&1)
status=$?
set -e
[ $status = 1 ] || fail "malformed .sgm: exit $status, want 1: $err"
grep -q "bad/dev.en.sgm:5:" <<<"$err" || fail "malformed .sgm: $err"

# A 256 MiB <seg> in the dev set (issue 64 item 6): streamed, refused naming the file, the line
# and the training pairs' limit (data.max_line_bytes), in bounded memory (it peaked at 2.69 GB when
# the set was read whole). translate --input gets the same check below.
/usr/bin/python3 - bad/huge.en.sgm <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write('<srcset>\n<doc docid="1">\n<seg id="1">fine</seg>\n<seg id="2">')
    chunk = "word " * (1 << 18)
    for _ in range(256 * 1024 * 1024 // len(chunk)):
        f.write(chunk)
    f.write('</seg>\n</doc>\n</srcset>\n')
PY
# peak_kib LOG: the "Maximum resident set size (kbytes)" of /usr/bin/time -v.
peak_kib() { sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\).*/\1/p' "$1"; }
set +e
/usr/bin/time -v "$wmt" prepare --config tiny.yaml --set data.dev.source=bad/huge.en.sgm \
  --set data.dir=bad/hugeout > huge.log 2>&1
status=$?
set -e
[ $status = 1 ] || { cat huge.log; fail "a 256 MiB dev segment: exit $status, want 1"; }
grep -q "bad/huge.en.sgm:4: a line longer than the limit of 1024 bytes (data.max_line_bytes)" huge.log ||
  { cat huge.log; fail "a 256 MiB dev segment: no clear error"; }
[ "$(peak_kib huge.log)" -lt 200000 ] || { cat huge.log; fail "a 256 MiB dev segment: peak RSS $(peak_kib huge.log) KiB"; }
[ ! -e bad/hugeout/vocab.model ] || fail "prepare went on after a bad dev set"

# A NUL byte in source line 5 and in target line 9 skips those two pairs only (counted as invalid
# UTF-8): the lines stay whole, so no pair is formed from two different line numbers
# (tests/text/test_line_pairs.cpp checks every pair).
/usr/bin/python3 - corpus/copy bad/nul <<'PY'
import sys
src, dst = sys.argv[1], sys.argv[2]
for lang, line in (("en", 5), ("fr", 9)):
    rows = open(f"{src}.{lang}", "rb").read().split(b"\n")
    rows[line - 1] = rows[line - 1][:3] + b"\0" + rows[line - 1][3:]
    open(f"{dst}.{lang}", "wb").write(b"\n".join(rows))
PY
lines=$(wc -l < corpus/copy.en)
out=$("$wmt" prepare --config tiny.yaml --set data.train=bad/nul --set data.dir=bad/nulout 2>&1) ||
  fail "prepare with NUL bytes failed: $out"
grep -q "training: $((lines - 2)) pairs of $lines " <<<"$out" || fail "NUL pairs: $out"
grep -q "invalid_utf8 2," <<<"$out" || fail "NUL pairs not counted: $out"

# Skipped pairs are counted by reason.
{ cat corpus/copy.en; echo; echo "alpha bravo"; } > bad/skip.en
{ cat corpus/copy.fr; echo "alpha"; echo; } > bad/skip.fr

# Prepare and train.
out=$("$wmt" prepare --config tiny.yaml --set data.train="corpus/copy, bad/skip") ||
  fail "prepare failed: $out"
echo "$out"
grep -q "skipped 2: empty_source 1, empty_target 1" <<<"$out" || fail "skip counts: $out"
# Prepared again with other settings (issue 64 item 7): refused without --force, naming each
# setting there and now and the command that keeps the folder's own (prepare.command, every
# setting spelled out); the vocabulary stays. That command reuses it.
vocab_sum=$(md5sum < prepared/vocab.model)
recorded=$(cat prepared/prepare.command)
grep -q -- "--set data.vocab_size=271 .*--set data.model_type=word" <<<"$recorded" || fail "prepare.command: $recorded"
set +e
err=$("$wmt" prepare --config tiny.yaml --set data.train="corpus/copy, bad/skip" --set data.vocab_size=260 2>&1)
status=$?
set -e
[ $status = 1 ] || fail "prepare with another vocab_size: exit $status, want 1: $err"
grep -q "'prepared' was prepared with other settings: data.vocab_size 271 there, 260 now" <<<"$err" &&
  grep -qF "run \`$recorded\`; to replace it, give --force" <<<"$err" || fail "prepare with another vocab_size: $err"
[ "$(md5sum < prepared/vocab.model)" = "$vocab_sum" ] || fail "a refused prepare replaced vocab.model"
(cd / && eval "\"\$wmt\" ${recorded#mtk-wmt }") > reprepare.log 2>&1 || { cat reprepare.log; fail "the recorded prepare command"; }
grep -q "is current (same settings): reused" reprepare.log || { cat reprepare.log; fail "the recorded command did not reuse the vocabulary"; }
[ "$(md5sum < prepared/vocab.model)" = "$vocab_sum" ] || fail "the recorded command replaced vocab.model"
mpirun -n 2 "$wmt" train --config tiny.yaml --run-dir run || fail "train failed"
[ -s run/metrics.jsonl ] || fail "no metrics.jsonl"
# translate --input with the 256 MiB segment: the same error, in bounded memory, before decoding.
set +e
/usr/bin/time -v "$wmt" translate --config tiny.yaml --run-dir run --mesh batch:1 \
  --input bad/huge.en.sgm --out huge.fr > huge-translate.log 2>&1
status=$?
set -e
[ $status = 1 ] || { cat huge-translate.log; fail "translate of a 256 MiB segment: exit $status, want 1"; }
grep -q "bad/huge.en.sgm:4: a line longer than the limit of 1024 bytes (data.max_line_bytes)" huge-translate.log ||
  { cat huge-translate.log; fail "translate of a 256 MiB segment: no clear error"; }
[ "$(peak_kib huge-translate.log)" -lt 200000 ] ||
  { cat huge-translate.log; fail "translate of a 256 MiB segment: peak RSS $(peak_kib huge-translate.log) KiB"; }
rm -f bad/huge.en.sgm

# Translate on 2 ranks: BLEU > 90 against the held-out references.
mpirun -n 2 "$wmt" translate --config tiny.yaml --run-dir run --input corpus/test.en.sgm \
  --reference corpus/test.fr.sgm --out test2.fr > report.txt || fail "translate failed"
cat report.txt
bleu=$(sed -n 's/^BLEU.* = \([0-9.]*\) .*/\1/p' report.txt)
[ "$(wc -l < test2.fr)" = 64 ] || fail "want 64 translations, got $(wc -l < test2.fr)"
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$bleu') > 90 else 1)" ||
  fail "copy task BLEU $bleu <= 90"
# The same translations on 1 rank and on 2 ranks under a model-parallel layout.
mpirun -n 1 "$wmt" translate --config tiny.yaml --run-dir run --mesh "batch:1" \
  --input corpus/test.en --out test1.fr > /dev/null || fail "translate on 1 rank failed"
cmp test1.fr test2.fr || fail "1-rank and 2-rank translations differ"
mpirun -n 2 "$wmt" translate --config tiny.yaml --run-dir run --mesh "model:2" \
  --layout "d_ff:model;heads:model" --input corpus/test.en --out test3.fr \
  > /dev/null || fail "model-parallel translate failed"
cmp test1.fr test3.fr || fail "model-parallel translations differ"
# Lines longer than model.length: translated in pieces (translate.split: long, the default; here
# at word boundaries, the copy task having no sentence ends) and joined, not cut at 7 tokens.
paste -d' ' - - - < corpus/test.en > long.en
paste -d' ' - - - < corpus/test.fr > long.fr
mpirun -n 2 "$wmt" translate --config tiny.yaml --run-dir run --input long.en --reference long.fr \
  --out long.out > long-report.txt || { cat long-report.txt; fail "translate of long lines"; }
grep -q "22 lines translated as [0-9]* pieces (translate.split)" long-report.txt ||
  { cat long-report.txt; fail "long lines: no pieces"; }
long_bleu=$(sed -n 's/^BLEU.* = \([0-9.]*\) .*/\1/p' long-report.txt)
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$long_bleu') > 80 else 1)" ||
  { cat long-report.txt; fail "long lines in pieces: BLEU $long_bleu <= 80"; }
mpirun -n 2 "$wmt" translate --config tiny.yaml --run-dir run --input long.en \
  --set translate.split=none --out long-cut.out > long-cut.txt || fail "translate, split none"
grep -q "pieces cut at model.length - 1 = 7 tokens" long-cut.txt || { cat long-cut.txt; fail "no cut count"; }
awk 'NF > 8 { exit 1 }' long-cut.out || fail "split none: a translation longer than the model's length"
# A mixture of experts in every layer: translate re-runs the model on each whole prefix (MoE
# routes by the sequence; no step-wise caches); BLEU > 90, the same translations on 1 rank and
# with the experts split over 2.
moe="--set model.moe_every=1 --set model.moe.num_experts=4"
mpirun -n 2 "$wmt" train --config tiny.yaml --run-dir mrun $moe > /dev/null || fail "train (MoE)"
mpirun -n 2 "$wmt" translate --config tiny.yaml --run-dir mrun $moe --input corpus/test.en.sgm \
  --reference corpus/test.fr.sgm --out mtest2.fr > mreport.txt || fail "translate (MoE)"
cat mreport.txt
grep -q "re-runs the model on the whole prefix" mreport.txt || fail "MoE translate: no note"
mbleu=$(sed -n 's/^BLEU.* = \([0-9.]*\) .*/\1/p' mreport.txt)
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$mbleu') > 90 else 1)" ||
  fail "MoE copy task BLEU $mbleu <= 90"
mpirun -n 1 "$wmt" translate --config tiny.yaml --run-dir mrun $moe --mesh "batch:1" \
  --input corpus/test.en --out mtest1.fr > /dev/null || fail "MoE translate on 1 rank failed"
cmp mtest1.fr mtest2.fr || fail "MoE: 1-rank and 2-rank translations differ"
mpirun -n 2 "$wmt" translate --config tiny.yaml --run-dir mrun $moe --mesh "model:2" \
  --layout "experts:model" --input corpus/test.en --out mtest3.fr > /dev/null ||
  fail "MoE translate with the experts split failed"
cmp mtest1.fr mtest3.fr || fail "MoE: translations with the experts split differ"
# Resume: from the newest checkpoint and its data position, logging on in metrics.jsonl.
out=$(mpirun -n 2 "$wmt" train --config tiny.yaml --run-dir run --set train.steps=320) ||
  fail "resumed train failed: $out"
grep -q "resumed from .*step-000000300 at step 300" <<<"$out" || fail "did not resume: $out"
grep -q '"step": 320,' run/metrics.jsonl || fail "no step 320 in metrics.jsonl"

# Reverse word order: the target is the source's words reversed.
/usr/bin/python3 "$make_corpus" rcorpus reverse
sed 's|corpus/|rcorpus/|; s|copy|reverse|; s|dir: prepared|dir: rprepared|' tiny.yaml > reverse.yaml
"$wmt" prepare --config reverse.yaml > /dev/null || fail "prepare (reverse) failed"
mpirun -n 2 "$wmt" train --config reverse.yaml --run-dir rrun > /dev/null || fail "train (reverse)"
mpirun -n 2 "$wmt" translate --config reverse.yaml --run-dir rrun --input rcorpus/test.en.sgm \
  --reference rcorpus/test.fr.sgm --out rtest.fr > rreport.txt || fail "translate (reverse)"
cat rreport.txt
rbleu=$(sed -n 's/^BLEU.* = \([0-9.]*\) .*/\1/p' rreport.txt)
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$rbleu') > 90 else 1)" ||
  fail "reverse task BLEU $rbleu <= 90"
# Pairing a checkpoint with other data is refused: another train.seed (the epoch order differs),
# and translate / train with the other corpus's vocabulary (the fingerprints name both).
set +e
err=$(mpirun -n 2 "$wmt" train --config tiny.yaml --run-dir run --set train.steps=340 --set train.seed=7 2>&1)
status=$?
set -e
[ $status = 1 ] || fail "resume with another seed: exit $status: $err"
grep -q "trained with train.seed = 1, now 7" <<<"$err" || fail "resume with another seed: $err"
set +e
err=$(mpirun -n 2 "$wmt" train --config tiny.yaml --run-dir rrun --set train.steps=400 2>&1)
status=$?
set -e
[ $status = 1 ] || fail "train on another vocabulary's data: exit $status: $err"
grep -q "was trained with the vocabulary of fingerprint" <<<"$err" || fail "train with another vocabulary: $err"
err=$(mpirun -n 2 "$wmt" translate --config tiny.yaml --run-dir rrun --input corpus/test.en.sgm --out x.fr 2>&1) &&
  fail "translate with another vocabulary's data: exit 0"
grep -q "was trained with the vocabulary of fingerprint" <<<"$err" || fail "translate with another vocabulary: $err"
echo "PASS: BLEU copy $bleu, reverse $rbleu"
