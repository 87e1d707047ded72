#!/usr/bin/env bash
# The run directory's guards (issue 29): one job per run directory (a second is refused naming the
# holder; a dead holder's lock is taken over), status.json for completed, stopped and failed runs,
# no silent fresh start over history (--fresh-start keeps the old metrics), ranks stop when their
# launcher is killed, and dims whose sizes overflow fail clearly on 1 and 2 ranks before any
# allocation.
#   run_dir_guard.sh MTK_LM1B_BINARY CONFIG
set -euo pipefail
lm1b="$1"
config="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mpi_timeout=180
source "$here/harness.sh"
source "$here/corpus.sh"
make_corpus corpus
mpirun -n 2 "$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 || { cat prepare.log; fail "prepare"; }
# 0. A damaged token shard: --dry-run finds it (it checks every token checksum) and the command
#    its error advises, `prepare` with the folder's own settings spelled out, rebuilds it (no
#    --force needed); other settings are refused without --force (issue 64 item 7).
shard=$(ls prepared/train/* | head -1)
printf '\xff\xff\xff\x7f' | dd of="$shard" bs=1 seek=200 conv=notrunc status=none
set +e
err=$(mpirun -n 2 "$lm1b" train --config "$config" --run-dir dry --dry-run 2>&1)
status=$?
set -e
[ $status = 1 ] || fail "dry run on a damaged shard: exit $status: $err"
grep -q "damaged; run \`mtk-lm1b prepare .*--vocab-size 300 .*\` again" <<<"$err" || fail "damaged shard: $err"
# The advice names the exact command, every setting spelled out (issue 64 item 7) ...
advised=$(sed -n 's/.*damaged; run `\(mtk-lm1b prepare [^`]*\)` again.*/\1/p' <<<"$err" | head -1)
[ "$advised" = "$(cat prepared/prepare.command)" ] || fail "advice '$advised' is not prepared/prepare.command"
for want in "--data $work/corpus" "--out $work/prepared" "--vocab-size 300" "--model-type unigram" \
            "--max-line-bytes 4096" "--training-shards 3" "--seed 1"; do
  grep -q -- "$want" <<<"$advised" || fail "the advised command lacks '$want': $advised"
done
# ... and a prepare with other settings is refused without --force, naming each one, there and
# now: the vocabulary (and every checkpoint trained on it) stays.
vocab_sum=$(md5sum < prepared/vocab.model)
set +e
err=$(mpirun -n 2 "$lm1b" prepare --data corpus --out prepared --vocab-size 280 --seed 2 2>&1)
status=$?
set -e
[ $status = 1 ] || fail "prepare with other settings: exit $status, want 1: $err"
grep -q "'prepared' was prepared with other settings: --vocab-size 300 there, 280 now; --seed 1 there, 2 now" <<<"$err" ||
  fail "prepare with other settings: $err"
grep -q -- "--force" <<<"$err" && grep -qF "run \`$advised\`" <<<"$err" || fail "prepare with other settings: no way out named: $err"
[ "$(md5sum < prepared/vocab.model)" = "$vocab_sum" ] || fail "a refused prepare replaced vocab.model"
[ -f prepared/manifest.txt ] || fail "a refused prepare removed the manifest"
eval "mpirun -n 2 \"\$lm1b\" ${advised#mtk-lm1b }" > prepare2.log 2>&1 || { cat prepare2.log; fail "prepare again"; }
[ "$(md5sum < prepared/vocab.model)" = "$vocab_sum" ] || fail "the advised prepare replaced vocab.model"
grep -q "is current (same settings): reused" prepare2.log || { cat prepare2.log; fail "the advised prepare did not reuse the vocabulary"; }
mpirun -n 2 "$lm1b" train --config "$config" --run-dir dry --dry-run > dry.log 2>&1 || { cat prepare2.log dry.log; fail "prepare did not repair the damaged shard"; }

state() { sed -n 's/.*"state": "\([a-z_]*\)".*/\1/p' "$1/status.json"; }
step_of() { sed -n 's/.*"step": \([0-9]*\),.*/\1/p' "$1/status.json"; }
alive() { pgrep -f -- "--run-dir $1 " > /dev/null; }
# Waits (up to 60 s) until run dir $1 has logged a step.
wait_for_steps() { for _ in $(seq 600); do [ -s "$1/metrics.jsonl" ] && return 0; sleep 0.1; done; fail "$1 logged no step"; }

# 1. A second job on a run directory in use is refused, naming the holder; the first completes.
# (mpiexec itself in the background, so that $! is mpiexec; a watchdog ends it after 150 s.)
watchdogs=()
watch() { ( sleep 150 & s=$!; trap 'kill $s; exit 0' TERM; wait $s; kill -9 "$1" ) >/dev/null 2>&1 & watchdogs+=($!); }
trap 'kill "${watchdogs[@]}" 2>/dev/null; rm -rf "$work"' EXIT
mpiexec -n 2 "$lm1b" train --config "$config" --run-dir one --set train.steps=100000 --set checkpoint.every=50 > one.log 2>&1 &
first=$!
watch $first
wait_for_steps one
[ "$(state one)" = running ] || fail "status while training: $(cat one/status.json)"
set +e
err=$(mpirun -n 2 "$lm1b" train --config "$config" --run-dir one --set train.steps=10 2>&1)
status=$?
set -e
[ $status = 1 ] || fail "second job: exit $status, want 1: $err"
grep -q "is in use by another job (host .*, pid [0-9]*, job " <<<"$err" || fail "second job: $err"
# 2. Stopped by a signal to mpiexec: status "stopped" at the step saved, whatever mpiexec returns
#    (MPICH 4.0's hydra sometimes exits 0 after forwarding the signal; the ranks exit 75).
kill -TERM $first
set +e
wait $first
status=$?
set -e
[ $status = 75 ] || [ $status = 0 ] || { cat one.log; fail "stopped run: mpiexec exited $status"; }
[ "$(state one)" = stopped ] || fail "status after a stop: $(cat one/status.json)"
[ -d "one/checkpoints/$(printf 'step-%09d' "$(step_of one)")" ] || fail "status names step $(step_of one), not saved"
[ ! -s one/lock ] || fail "the lock file still names a holder after a clean exit: $(cat one/lock)"

# 3. Completed: status "completed" with the last step.
mpirun -n 2 "$lm1b" train --config "$config" --run-dir two --set train.steps=6 > two.log 2>&1 || { cat two.log; fail "train two"; }
[ "$(state two)" = completed ] && [ "$(step_of two)" = 6 ] || fail "completed status: $(cat two/status.json)"

# 4. Failed: status "failed" with the message.
set +e
mpirun -n 2 "$lm1b" train --config "$config" --run-dir three --restore no/such/checkpoint > three.log 2>&1
status=$?
set -e
[ $status = 1 ] || fail "failing run: exit $status"
[ "$(state three)" = failed ] || fail "failed status: $(cat three/status.json)"
grep -q 'no/such/checkpoint' three/status.json || fail "failed status lacks the message: $(cat three/status.json)"

# 5. History but no usable checkpoint: refused, metrics kept; --fresh-start keeps them renamed.
lines=$(wc -l < two/metrics.jsonl)
rm -rf two/checkpoints
set +e
err=$(mpirun -n 2 "$lm1b" train --config "$config" --run-dir two --set train.steps=6 2>&1)
status=$?
set -e
[ $status = 1 ] || fail "history without checkpoints: exit $status, want 1: $err"
grep -q "has a history (metrics.jsonl" <<<"$err" && grep -q -- "--fresh-start" <<<"$err" || fail "history: $err"
[ "$(wc -l < two/metrics.jsonl)" = "$lines" ] || fail "the refused run changed metrics.jsonl"
echo garbage > two/checkpoints.latest-test  # unrelated files do not matter
mpirun -n 2 "$lm1b" train --config "$config" --run-dir two --set train.steps=4 --fresh-start > fresh.log 2>&1 || { cat fresh.log; fail "--fresh-start"; }
kept=$(ls two/metrics.jsonl.before-fresh-start-* | head -1)
[ "$(wc -l < "$kept")" = "$lines" ] || fail "--fresh-start did not keep the old metrics"
[ "$(state two)" = completed ] && [ "$(step_of two)" = 4 ] || fail "fresh start status: $(cat two/status.json)"

# 5b. A checkpoint and data of another vocabulary (same size, other pieces): train, eval and
#     sample refuse, naming both fingerprints.
mkdir -p other
cp -r corpus other/corpus
find other/corpus -type f -exec sed -i 's/king/monarch/g; s/river/stream/g; s/garden/orchard/g' {} +
mpirun -n 2 "$lm1b" prepare --data other/corpus --out other/prepared --vocab-size 300 > prepare3.log 2>&1 || { cat prepare3.log; fail "prepare other"; }
for cmd in train eval sample; do
  set +e
  err=$(mpirun -n 2 "$lm1b" $cmd --config "$config" --run-dir two --set data.dir=other/prepared --set train.steps=8 2>&1)
  status=$?
  set -e
  [ $status = 1 ] || fail "$cmd with another vocabulary: exit $status: $err"
  grep -q "was trained with the vocabulary of fingerprint [0-9a-f]*, but the data .* has vocabulary [0-9a-f]*" <<<"$err" ||
    fail "$cmd with another vocabulary: $err"
done

# 6. Killed launcher: no rank left after a few seconds; then a dead holder's lock is taken over.
mpiexec -n 2 "$lm1b" train --config "$config" --run-dir four --set train.steps=100000 --set checkpoint.every=1000 > four.log 2>&1 &
launcher=$!
watch $launcher
wait_for_steps four
kill -KILL $launcher
wait $launcher || true
for _ in $(seq 100); do alive four || break; sleep 0.1; done
if alive four; then pkill -KILL -f -- "--run-dir four " || true; fail "ranks kept running after mpiexec was killed"; fi
[ -s four/lock ] || fail "a killed job left no holder in its lock file"
# kill -9 of mpiexec: hydra's proxy SIGKILLs the ranks, nothing can record the end, status.json
# stays "running" (with rank 0's host and pid); the next command that looks, here eval, finds that
# job gone and records "killed" (issue 64 item 8).
[ "$(state four)" = running ] || fail "status after kill -9 of mpiexec: $(cat four/status.json)"
grep -q "\"host\": \"$(hostname)\"" four/status.json || fail "status.json names no host: $(cat four/status.json)"
killed_pid=$(sed -n 's/.*"pid": \([0-9]*\),.*/\1/p' four/status.json)
set +e
out=$(mpirun -n 2 "$lm1b" eval --config "$config" --run-dir four 2>&1)
set -e
grep -q "status.json said running, but the job (host $(hostname), pid $killed_pid.*) ended while training without recording how: killed with SIGKILL" <<<"$out" ||
  fail "eval after a killed job did not report it: $out"
[ "$(state four)" = killed ] || fail "status after eval of a killed job: $(cat four/status.json)"
grep -q "\"pid\": $killed_pid," four/status.json || fail "the killed record lost the pid: $(cat four/status.json)"
# A live job's "running" is left alone (its lock is held): see section 1, where the second job
# was refused while status.json said running.
out=$(mpirun -n 2 "$lm1b" train --config "$config" --run-dir four --set train.steps=2 --fresh-start 2>&1) || fail "after a killed job: $out"
grep -q "lock taken over from a job that is no longer running" <<<"$out" || fail "no take-over message: $out"

# 7. Sizes that overflow 64 bits: a clear error on every rank count, before any allocation.
for n in 1 2; do
  set +e
  err=$(mpirun -n $n "$lm1b" train --config "$config" --run-dir huge --mesh "batch:$n" \
    --set model.batch=2000000 --set model.length=2000000 --set model.d_model=2000000000 2>&1)
  status=$?
  set -e
  [ $status = 1 ] || fail "huge dims on $n ranks: exit $status: $err"
  grep -q "overflow the 64-bit" <<<"$err" || fail "huge dims on $n ranks: $err"
  ! grep -q "Abort\|Kokkos" <<<"$err" || fail "huge dims on $n ranks aborted: $err"
done
echo "run_dir_guard: all checks passed"
