#!/usr/bin/env bash
# Kill -9 during a save, then restart: the previous checkpoint must load, `mtk-ckpt verify` must
# pass, and the continued run must reproduce the uninterrupted run's losses bit for bit.
#
# usage: kill_during_save.sh MPIEXEC NP CKPT_WRITER MTK_CKPT WORKDIR
#
# 1. At every phase of the save and commit protocol a rank SIGKILLs itself
#    (MTK_CKPT_TEST_ABORT_AFTER=<phase>, on rank 0 and on the last rank).
# 2. At an arbitrary moment: saves are slowed down (MTK_CKPT_TEST_DELAY_MS) and the last rank is
#    killed from outside with kill -9 while a temporary checkpoint directory exists.
set -u
MPIEXEC=$1 NP=$2 WRITER=$3 CKPT=$4 WORK=$5
rm -rf "$WORK" && mkdir -p "$WORK"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
LAST=$((NP - 1))

fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.err; do [ -s "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }; done
  exit 1
}
# run NAME [ENV=VALUE...] -- ARGS...: the writer on NP ranks; stdout/stderr in WORK/NAME.out/.err
run() {
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 180 "$MPIEXEC" -n "$NP" "$WRITER" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
}
# The losses of steps >= FROM in a writer's output must equal the reference's, bitwise (hex).
same_losses() {
  local out=$1 from=$2 n=0 step hex want
  while read -r _ step _ hex _; do
    [ "$step" -lt "$from" ] && continue
    want=$(awk -v s="$step" '$1 == "step" && $2 == s {print $4}' "$WORK/reference.out")
    [ -n "$want" ] || fail "$out: no reference loss for step $step"
    [ "$hex" = "$want" ] || fail "$out: step $step loss $hex, uninterrupted run $want"
    n=$((n + 1))
  done < <(grep '^step ' "$out")
  [ "$n" -gt 0 ] || fail "$out: no losses to compare"
}
verify_ok() {
  timeout 120 "$MPIEXEC" -n "$NP" "$CKPT" verify "$1" >"$WORK/verify.out" 2>&1 ||
    fail "mtk-ckpt verify $1: $(cat "$WORK/verify.out")"
}

run reference -- --run-dir "$WORK/reference" --steps 8 || fail "reference run failed"

for phase in created_dir first_dataset wrote_data wrote_manifest before_rename renamed updated_latest; do
  ranks="0"
  case $phase in created_dir | first_dataset | wrote_data | wrote_manifest) [ "$LAST" -gt 0 ] && ranks="0 $LAST" ;; esac
  for r in $ranks; do
    tag=$phase-rank$r dir=$WORK/$phase-rank$r
    run "$tag-a" -- --run-dir "$dir" --steps 2 --save-every 2 || fail "$tag: first run failed"
    run "$tag-b" MTK_CKPT_TEST_ABORT_AFTER="$phase" MTK_CKPT_TEST_ABORT_RANK="$r" -- \
      --run-dir "$dir" --resume --steps 4 --save-every 2 && fail "$tag: the killed run exited 0"
    grep -q "SIGKILL at phase '$phase'" "$WORK/$tag-b.err" || fail "$tag: the kill hook did not fire"
    # The kill leaves the previous checkpoint (step 2) or, once `latest` was replaced, step 4.
    # A rank other than 0 killed after the last agreement races with rank 0's commit: either.
    allowed=2
    [ "$phase" = updated_latest ] && allowed=4
    [ "$phase" = wrote_manifest ] && [ "$r" != 0 ] && allowed="2 4"
    latest=$(cat "$dir/checkpoints/latest")
    want=
    for s in $allowed; do [ "$latest" = "$(printf 'step-%09d' "$s")" ] && want=$s; done
    [ -n "$want" ] || fail "$tag: latest is '$latest', expected step(s) $allowed"
    verify_ok "$dir"
    run "$tag-c" -- --run-dir "$dir" --resume --steps 6 --save-every 2 || fail "$tag: restart failed"
    grep -q "^restored step $want " "$WORK/$tag-c.out" || fail "$tag: restart did not restore step $want: $(head -1 "$WORK/$tag-c.out")"
    same_losses "$WORK/$tag-c.out" "$want"
    verify_ok "$dir"
    ls -d "$dir"/checkpoints/.tmp-* >/dev/null 2>&1 && fail "$tag: a temporary directory survived the next save"
    echo "ok: kill at '$phase' on rank $r: restored step $want, losses bit-exact, verify passes"
  done
done

# A kill -9 from outside at an arbitrary moment inside a slow save.
dir=$WORK/async
run async-a -- --run-dir "$dir" --steps 2 --save-every 1 || fail "async: first run failed"
mkdir -p "$WORK/pids"
MTK_CKPT_TEST_DELAY_MS=150 timeout 180 "$MPIEXEC" -n "$NP" "$WRITER" --run-dir "$dir" --resume \
  --steps 1000 --save-every 1 --pid-dir "$WORK/pids" >"$WORK/async-b.out" 2>"$WORK/async-b.err" &
job=$!
for _ in $(seq 1 1200); do
  ls -d "$dir"/checkpoints/.tmp-* >/dev/null 2>&1 && [ -f "$WORK/pids/rank-$LAST.pid" ] && break
  sleep 0.05
done
ls -d "$dir"/checkpoints/.tmp-* >/dev/null 2>&1 || fail "async: no save started"
sleep 0.4
kill -9 "$(cat "$WORK/pids/rank-$LAST.pid")"
wait $job && fail "async: the killed job exited 0"
ls -d "$dir"/checkpoints/.tmp-* >/dev/null 2>&1 || echo "note: the kill landed after the save had committed"
verify_ok "$dir"
run async-c -- --run-dir "$dir" --resume --steps 8 --save-every 2 || fail "async: restart failed"
restored=$(awk '/^restored step/ {print $3}' "$WORK/async-c.out")
[ -n "$restored" ] || fail "async: restart restored nothing"
same_losses "$WORK/async-c.out" "$restored"
verify_ok "$dir"
echo "ok: kill -9 of rank $LAST inside a save: restored step $restored, losses bit-exact, verify passes"
rm -rf "$WORK"
