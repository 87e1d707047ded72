#!/usr/bin/env bash
# A checkpoint written before SHA-256 moved to OpenSSL (MTK's hand-written SHA-256, main 334e655:
# `ckpt_writer --steps 3 --save-every 3` on 2 ranks, committed in data/pre-openssl/) still
# verifies and restores: `mtk-ckpt verify` on 1 and 2 ranks, `sha256sum -c` of its manifest, and a
# run resumed from it continues with the losses of an uninterrupted run (within 1e-5: the
# checkpoint's weights were computed on another machine).
#
# usage: pre_openssl_checkpoint.sh MPIEXEC CKPT_WRITER MTK_CKPT WORKDIR
set -u
MPIEXEC=$1 WRITER=$2 CKPT=$3 WORK=$4
DATA="$(cd "$(dirname "$0")" && pwd)/data/pre-openssl"
rm -rf "$WORK" && mkdir -p "$WORK"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.err "$WORK"/*.out; do [ -s "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }; done
  exit 1
}

cp -r "$DATA" "$WORK/old"
step_dir=$(ls -d "$WORK"/old/checkpoints/step-* | head -1)
[ -d "$step_dir" ] || fail "no checkpoint in $DATA"
(cd "$step_dir" && sha256sum -c manifest.sha256 >"$WORK/sha256sum.out" 2>&1) ||
  fail "sha256sum -c: $(cat "$WORK/sha256sum.out")"
for np in 1 2; do
  timeout 120 "$MPIEXEC" -n "$np" "$CKPT" verify "$WORK/old" >"$WORK/verify$np.out" 2>&1 ||
    fail "mtk-ckpt verify on $np rank(s): $(cat "$WORK/verify$np.out")"
done

timeout 180 "$MPIEXEC" -n 2 "$WRITER" --run-dir "$WORK/reference" --steps 6 \
  >"$WORK/reference.out" 2>"$WORK/reference.err" || fail "the uninterrupted run failed"
timeout 180 "$MPIEXEC" -n 2 "$WRITER" --run-dir "$WORK/old" --resume --steps 6 \
  >"$WORK/resumed.out" 2>"$WORK/resumed.err" || fail "the resumed run failed"
grep -q "^restored step 3 " "$WORK/resumed.out" || fail "did not restore step 3"
n=0
while read -r _ step _ _ dec; do
  want=$(awk -v s="$step" '$1 == "step" && $2 == s {print $5}' "$WORK/reference.out")
  awk -v a="$dec" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b;
    exit !(d <= 1e-5 * (s > 1 ? s : 1)) }' || fail "step $step loss $dec, uninterrupted run $want"
  n=$((n + 1))
done < <(grep '^step ' "$WORK/resumed.out")
[ "$n" -eq 3 ] || fail "$n losses after the restore, expected 3"
timeout 120 "$MPIEXEC" -n 2 "$CKPT" verify "$WORK/old" >"$WORK/verify-after.out" 2>&1 ||
  fail "verify after the resumed run saved: $(cat "$WORK/verify-after.out")"
echo "ok: the pre-OpenSSL checkpoint verifies (sha256sum, mtk-ckpt on 1 and 2 ranks), restores and continues"
rm -rf "$WORK"
