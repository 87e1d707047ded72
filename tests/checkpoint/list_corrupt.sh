#!/usr/bin/env bash
# `mtk-ckpt list` goes on past a checkpoint whose files are garbage: it lists every checkpoint,
# the damaged one as CORRUPT with the reason, and exits 1 (0 when all are sound).
#
# usage: list_corrupt.sh MPIEXEC CKPT_WRITER MTK_CKPT WORKDIR
set -u
MPIEXEC=$1 WRITER=$2 CKPT=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
timeout 120 "$MPIEXEC" -n 2 "$WRITER" --run-dir "$WORK/run" --steps 6 --save-every 2 --keep 5 \
  >"$WORK/train.out" 2>&1 || fail "ckpt_writer: $(tail -3 "$WORK/train.out")"
timeout 60 "$CKPT" list "$WORK/run" >"$WORK/sound.out" 2>&1 || fail "list of sound checkpoints: exit $?"
[ "$(grep -c 'step-0' "$WORK/sound.out")" -eq 3 ] || fail "expected 3 checkpoints: $(cat "$WORK/sound.out")"

# Garbage in the middle checkpoint's small files.
middle="$WORK/run/checkpoints/step-000000004"
[ -d "$middle" ] || fail "no $middle"
for f in "$middle"/*; do
  [ -f "$f" ] && [ "$(basename "$f")" != variables.h5 ] && head -c 300 /dev/urandom >"$f"
done
timeout 60 "$CKPT" list "$WORK/run" >"$WORK/list.out" 2>&1
rc=$?
cat "$WORK/list.out"
[ "$rc" -eq 1 ] || fail "exit $rc with a corrupt checkpoint (expected 1)"
grep -q "step-000000002" "$WORK/list.out" || fail "the checkpoint before the damaged one is missing"
grep -q "step-000000006" "$WORK/list.out" || fail "the listing stopped at the damaged checkpoint"
grep -q "step-000000004.*CORRUPT" "$WORK/list.out" || fail "the damaged checkpoint is not marked CORRUPT"
LC_ALL=C grep -q "[^[:print:][:space:]]" "$WORK/list.out" && fail "the listing shows raw bytes of the damaged file"
echo "list_corrupt: ok"
