#!/usr/bin/env bash
# bench/run-reproduction --smoke on generated corpora (a small grammar in the LM1B layout, a
# synthetic En-Fr copy task in the LibreOffice-help layout): jobs lm-s and wmt-fr-s, their
# results.json, a re-run that skips every finished phase, the report and its plots in a scratch
# directory (never docs/), and the Slurm scripts.
# Usage: run_reproduction_smoke.sh MTK_SOURCE_DIR   (MTK_BUILD_DIR: the build tree with the apps)
set -euo pipefail
src="$1"
repro="$src/bench/run-reproduction"
work="$(mktemp -d "${TMPDIR:-/tmp}/mtk-repro-smoke.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$work"

# Corpora where the script looks for them (--data DIR): DIR/demo-corpus, DIR/wmt-corpus.
source "$src/tests/lm1b/corpus.sh"
make_corpus data/demo-corpus
/usr/bin/python3 "$src/tests/wmt/make_corpus.py" synth copy
mkdir -p data/wmt-corpus
cp synth/copy.en data/wmt-corpus/lohelp.fr-en.en
cp synth/copy.fr data/wmt-corpus/lohelp.fr-en.fr
for s in test dev; do
  cp "synth/$s.en.sgm" "data/wmt-corpus/lohelp$s-fren-src.en.sgm"
  cp "synth/$s.fr.sgm" "data/wmt-corpus/lohelp$s-fren-ref.fr.sgm"
done

settings=(--smoke --vocab-lm 300 --vocab-wmt 300 --data "$work/data" --runs "$work/runs" --report-dir "$work/docs")
start=$SECONDS
"$repro" job lm-s wmt-fr-s "${settings[@]}" > first.log 2>&1 || { cat first.log; fail "job lm-s wmt-fr-s"; }
echo "two smoke jobs in $((SECONDS - start)) s"

/usr/bin/python3 - "$work/runs" <<'PY'
import json, math, sys
runs = sys.argv[1]
common = ["params", "training_flops", "flops_per_step", "tokens_seen", "positions_seen", "train_wall_s",
          "eval_wall_s", "final_train_loss", "steps", "commit", "machine"]
lm = json.load(open(f"{runs}/lm-s/results.json"))
tr = json.load(open(f"{runs}/wmt-fr-s/results.json"))
for r in (lm, tr):
    missing = [k for k in common if r.get(k) is None]
    assert not missing, f"{r['job']}: missing {missing}"
    assert r["steps"] == 4 and r["final_step"] == 4, r["final_step"]
    assert r["params"] > 1e4 and r["training_flops"] == r["flops_per_step"] * 4 > 0
    assert r["tokens_seen"] > 0 and math.isfinite(r["final_train_loss"])
    assert r["model"]["d_model"] == 64
ev = lm["eval"]
assert ev["ppl_per_word"] > 1 and ev["log_ppl_per_token"] > 0, ev
assert 0 <= tr["eval"]["bleu"] <= 100 and tr["eval"]["test_sentences"] == 24, tr["eval"]
# The copy task's copy baseline is perfect.
assert tr["copy_baseline"]["bleu"] > 99, tr["copy_baseline"]
print("results.json: lm-s ppl/word %.1f, wmt-fr-s BLEU %.2f (copy %.1f)" %
      (ev["ppl_per_word"], tr["eval"]["bleu"], tr["copy_baseline"]["bleu"]))
PY

# A re-run resumes nothing and redoes nothing: every phase is finished.
"$repro" job lm-s wmt-fr-s "${settings[@]}" > again.log 2>&1 || { cat again.log; fail "re-run"; }
[ "$(grep -c 'training finished already' again.log)" = 2 ] || { cat again.log; fail "re-run trained again"; }
[ "$(grep -c 'evaluation done already' again.log)" = 2 ] || { cat again.log; fail "re-run evaluated again"; }
! grep -q ' train --run-dir' again.log || fail "re-run started training"

"$repro" report "${settings[@]}" > report.log 2>&1 || { cat report.log; fail "report"; }
md=docs/reproduction.md
[ -f "$md" ] || fail "no $md"
grep -q '^| s | 64 / 256 / 2 |' "$md" || { cat "$md"; fail "no table row for size s"; }
grep -q 'BLEU En-Fr' "$md" || fail "no translation table"
grep -q 'eval ppl / word' "$md" || fail "no LM table"
grep -q 'commit: ' "$md" && grep -q 'machine: ' "$md" || fail "no commit or machine"
if /usr/bin/python3 -c "import matplotlib" 2> /dev/null; then
  for p in lm-ppl-vs-params lm-ppl-vs-flops wmt-bleu-vs-params wmt-bleu-vs-flops; do
    [ -s "docs/reproduction/$p.png" ] || fail "no plot $p.png"
    grep -q "(reproduction/$p.png)" "$md" || fail "$p.png not in the report"
  done
fi
# A second report keeps the hand-written text around the generated part.
printf '\n## How to\nhand-written\n' >> "$md"
"$repro" report "${settings[@]}" > report2.log 2>&1 || { cat report2.log; fail "second report"; }
grep -q '^hand-written$' "$md" || fail "the report dropped the hand-written part"
[ "$(grep -c '^## Results' "$md")" = 1 ] || fail "the generated part doubled"

# Slurm: one script per job, the prepare and report jobs, valid shell, dependencies printed.
"$repro" slurm "${settings[@]}" > slurm.log 2>&1 || { cat slurm.log; fail "slurm"; }
n=$(ls runs/slurm/*.sbatch | wc -l)
[ "$n" = 11 ] || fail "slurm: $n scripts, want 9 jobs + prepare + report"
for f in runs/slurm/*.sbatch; do bash -n "$f" || fail "syntax: $f"; done
grep -q 'dependency=afterok' slurm.log || fail "no afterok dependency: $(cat slurm.log)"
grep -q -- '--smoke' runs/slurm/wmt-de-l.sbatch || fail "the job scripts lost the settings"

# A bad job name is a usage error.
set +e
"$repro" job lm-xl "${settings[@]}" > bad.log 2>&1
status=$?
set -e
[ $status = 2 ] || fail "unknown job: exit $status, want 2"
echo "PASS ($((SECONDS - start)) s)"
