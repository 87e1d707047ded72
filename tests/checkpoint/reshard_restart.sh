#!/usr/bin/env bash
# Restart on another rank count, mesh and layout: a job saved on SAVE_NP ranks (2x2 mesh, layout A)
# is continued on 1, 2, 4 and 8 ranks with other meshes and layouts. The continued losses must
# equal the uninterrupted run's within float32 tolerance, and every restarted job must verify.
#
# usage: reshard_restart.sh MPIEXEC CKPT_WRITER MTK_CKPT WORKDIR
set -u
MPIEXEC=$1 WRITER=$2 CKPT=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.err; do [ -s "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }; done
  exit 1
}
run() {  # run NAME NP ARGS...
  local name=$1 np=$2; shift 2
  timeout 180 "$MPIEXEC" -n "$np" "$WRITER" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
}

run reference 4 --run-dir "$WORK/reference" --steps 6 || fail "reference run failed"
run saved 4 --run-dir "$WORK/saved" --steps 3 --save-every 3 || fail "saving run failed"

# np mesh layout
for case in "1 x:1 none" "2 x:2 c" "2 a:2;b:1 b" "4 x:4 c" "4 a:4;b:1 b" "8 a:2;b:4 a" "8 x:8 d_model:x"; do
  set -- $case
  np=$1 mesh=$2 layout=$3
  dir="$WORK/np$np-${mesh//[:;]/_}"
  mkdir -p "$dir" && cp -r "$WORK/saved/checkpoints" "$dir/"
  tag="np$np mesh $mesh layout '$layout'"
  run "np$np-${mesh//[:;]/_}" "$np" --run-dir "$dir" --resume --steps 6 --mesh "$mesh" \
    --layout "$layout" || fail "$tag: restart failed"
  out="$WORK/np$np-${mesh//[:;]/_}.out"
  grep -q "^restored step 3 " "$out" || fail "$tag: did not restore step 3"
  n=0
  while read -r _ step _ _ dec; do
    want=$(awk -v s="$step" '$1 == "step" && $2 == s {print $5}' "$WORK/reference.out")
    awk -v a="$dec" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b;
      exit !(d <= 1e-5 * (s > 1 ? s : 1)) }' ||
      fail "$tag: step $step loss $dec, uninterrupted run $want"
    n=$((n + 1))
  done < <(grep '^step ' "$out")
  [ "$n" -eq 3 ] || fail "$tag: $n losses after the restart, expected 3"
  timeout 120 "$MPIEXEC" -n "$np" "$CKPT" verify "$dir" >"$WORK/verify.out" 2>&1 ||
    fail "$tag: verify: $(cat "$WORK/verify.out")"
  echo "ok: saved on 4 ranks (a:2;b:2), continued on $tag: losses within 1e-5, verify passes"
done
rm -rf "$WORK"
