#!/usr/bin/env bash
# A damaged `latest` pointer or a damaged newest checkpoint (issue 15, item 0): train resumes from
# the newest good checkpoint by step, with its step, data position and learning-rate schedule,
# and deletes or replaces no good checkpoint at or after the one it restored.
#   latest_damage.sh MTK_LM1B_BINARY CONFIG
# One run trains 20 steps with checkpoints step-16/18/20; each case copies it, damages the copy,
# resumes to step 22 and compares the new metrics lines (step, loss, lr) with an undamaged resume.
set -euo pipefail
lm1b="$1"
config="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mpi_timeout=120
source "$here/harness.sh"
sets=(--set checkpoint.every=2 --set checkpoint.keep=3)
ck() { printf 'step-%09d' "$1"; }
# step, loss and lr of each metrics line after the first $2 lines of $1
new_lines() { tail -n +"$(($2 + 1))" "$1" | sed -n 's/.*"step": \([0-9]*\), "loss": \([0-9.e+-]*\),.*"lr": \([0-9.e+-]*\),.*/\1 \2 \3/p'; }

source "$here/corpus.sh"
make_corpus corpus
mpirun -n 2 "$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 || { cat prepare.log; fail "prepare"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir base --set train.steps=20 "${sets[@]}" > base.log 2>&1 || { cat base.log; fail "training the base run"; }
for s in 16 18 20; do [ -f "base/checkpoints/$(ck $s)/manifest.sha256" ] || { ls base/checkpoints; fail "base run lacks $(ck $s)"; }; done
base_lines=$(wc -l < base/metrics.jsonl)
[ "$base_lines" -eq 20 ] || fail "base run wrote $base_lines metrics lines, expected 20"

# resume CASE: continues a copy of the base run (already damaged by the caller) to step 22.
resume() {
  mpirun -n 2 "$lm1b" train --config "$config" --run-dir "$1" --set train.steps=22 "${sets[@]}" > "$1.log" 2>&1
}

# The undamaged resume: reference lines for steps 21-22 (steps 19-20 come from the base run).
cp -r base intact
resume intact || { cat intact.log; fail "resuming the undamaged run"; }
{ new_lines base/metrics.jsonl 18; new_lines intact/metrics.jsonl "$base_lines"; } > reference.txt
[ "$(wc -l < reference.txt)" -eq 4 ] || { cat reference.txt; fail "expected reference lines for steps 19-22"; }

# same_metrics A B: the same steps and learning rates, losses within float32 summation order (the
# data position matters far more than that).
same_metrics() {
  [ "$(wc -l < "$1")" -eq "$(wc -l < "$2")" ] &&
    paste "$1" "$2" | awk '{ d = $2 - $5; if (d < 0) d = -d; if ($1 != $4 || $3 != $6 || d > 1e-4 * $5) bad = 1 } END { exit bad }'
}

# check CASE RESTORED_STEP: resumed from the right checkpoint at the right step, the same losses
# and learning rates as the undamaged run, no good checkpoint at or after it replaced or deleted.
check() {
  local run="$1" want="$2" s problems=""
  local dir="$run/checkpoints/$(ck "$want")"
  grep -q "resumed from .*/$(ck "$want") at step $want\$" "$run.log" || problems+=" did not report resuming from $(ck "$want") at step $want;"
  # the resume dropped the base run's records after step $want and logged those steps again
  new_lines "$run/metrics.jsonl" 0 | awk -v w="$want" '$1 > w' > "$run.new"
  awk -v w="$want" '$1 > w' reference.txt > "$run.want"
  same_metrics "$run.new" "$run.want" ||
    problems+=" its metrics (step loss lr) differ from the undamaged run's after step $want: $(head -2 "$run.new" | tr '\n' ' ');"
  for s in $(cat "$run.intact"); do  # the checkpoints the damage left whole
    [ "$s" -ge "$want" ] || continue
    cmp -s "base/checkpoints/$(ck "$s")/manifest.sha256" "$run/checkpoints/$(ck "$s")/manifest.sha256" ||
      problems+=" $(ck "$s") was deleted or replaced;"
  done
  [ -f "$dir/manifest.sha256" ] || problems+=" the restored $(ck "$want") was deleted;"
  [ "$(cat "$run/checkpoints/latest" 2> /dev/null)" = "$(ck 22)" ] || problems+=" latest does not name $(ck 22);"
  [ -z "$problems" ] || { echo "--- $run.log"; cat "$run.log"; echo "FAIL: $run:$problems" >&2; return 1; }
  echo "ok: $run resumed from $(ck "$want")"
}

failed=0
damage() {  # damage CASE RESTORED_STEP COMMAND...: copy, damage, resume, check
  local run="$1" want="$2"
  shift 2
  rm -rf "$run"
  cp -r base "$run"
  (cd "$run/checkpoints" && "$@")
  for s in 16 18 20; do
    [ -f "$run/checkpoints/$(ck $s)/variables.h5" ] && echo "$s"
  done > "$run.intact"
  if ! resume "$run"; then
    cat "$run.log"
    echo "FAIL: $run: resume exited non-zero" >&2
    failed=$((failed + 1))
  elif ! check "$run" "$want"; then
    failed=$((failed + 1))
  fi
}
damage latest_removed 20 rm latest
damage latest_names_missing 20 sh -c "echo $(ck 99) > latest"
damage latest_empty 20 sh -c ': > latest'
damage latest_garbage 20 sh -c "printf 'not a checkpoint \\377\\001\\n' > latest"
damage latest_escapes 20 sh -c 'echo ../../../etc > latest'
damage newest_dir_deleted 18 rm -r "$(ck 20)"
damage newest_variables_deleted 18 rm "$(ck 20)/variables.h5"
[ "$failed" -eq 0 ] || fail "$failed of 7 damage cases"
echo "7 passed, 0 failed"
