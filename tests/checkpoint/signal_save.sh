#!/usr/bin/env bash
# Signal-triggered save: SIGUSR1 to one rank makes the whole job finish the step, save and exit 0;
# SIGTERM does the same; each restart resumes from that save and continues bit-exactly.
#
# usage: signal_save.sh MPIEXEC NP CKPT_WRITER MTK_CKPT WORKDIR
set -u
MPIEXEC=$1 NP=$2 WRITER=$3 CKPT=$4 WORK=$5
rm -rf "$WORK" && mkdir -p "$WORK"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
LAST=$((NP - 1))
dir=$WORK/run

fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.err; do [ -s "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }; done
  exit 1
}
# signal_run NAME SIGNAL RANK [--resume]: starts a long run, signals one rank after a few steps,
# expects exit 0 after a save; prints the step the save holds.
signal_run() {
  local name=$1 sig=$2 rank=$3; shift 3
  rm -rf "$WORK/pids" && mkdir -p "$WORK/pids"
  timeout 180 "$MPIEXEC" -n "$NP" "$WRITER" --run-dir "$dir" --steps 100000 --sleep-ms 20 \
    --pid-dir "$WORK/pids" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local job=$! i
  for i in $(seq 1 1200); do
    [ "$(grep -c '^step ' "$WORK/$name.out" 2>/dev/null)" -ge 3 ] && [ -f "$WORK/pids/rank-$rank.pid" ] && break
    sleep 0.05
  done
  kill -s "$sig" "$(cat "$WORK/pids/rank-$rank.pid")" || fail "$name: cannot signal rank $rank"
  wait $job || fail "$name: the job exited $? after SIG$sig"
  grep -q '^stopped by signal after step ' "$WORK/$name.out" || fail "$name: no clean stop"
  local saved
  saved=$(awk '/^saved / {print $2}' "$WORK/$name.out" | tail -1)
  [ -n "$saved" ] || fail "$name: nothing saved"
  [ "$dir/checkpoints/$(cat "$dir/checkpoints/latest")" = "$saved" ] || fail "$name: latest is not $saved"
  timeout 120 "$MPIEXEC" -n "$NP" "$CKPT" verify "$dir" >"$WORK/verify.out" 2>&1 ||
    fail "$name: verify: $(cat "$WORK/verify.out")"
  echo "ok: SIG$sig to rank $rank: saved $(basename "$saved"), exit 0, verify passes" >&2
  basename "$saved" | sed 's/^step-0*//; s/^$/0/'
}

first=$(signal_run first USR1 "$LAST") || exit 1
second=$(signal_run second TERM 0 --resume) || exit 1
grep -q "^restored step $first " "$WORK/second.out" || fail "the second run did not restore step $first"
[ "$second" -gt "$first" ] || fail "the second run saved step $second <= $first"
# Bit-exact: an uninterrupted run of the same number of steps gives the same losses.
timeout 180 "$MPIEXEC" -n "$NP" "$WRITER" --run-dir "$WORK/reference" --steps "$second" \
  >"$WORK/reference.out" 2>"$WORK/reference.err" || fail "reference run failed"
got=$( (grep '^step ' "$WORK/first.out"; grep '^step ' "$WORK/second.out") | awk '{print $2, $4}')
want=$(grep '^step ' "$WORK/reference.out" | awk '{print $2, $4}')
[ "$got" = "$want" ] || fail "losses across the signal-triggered restart differ from the uninterrupted run"
echo "ok: SIGUSR1 then SIGTERM: saved steps $first and $second, restarts bit-exact"
rm -rf "$WORK"
