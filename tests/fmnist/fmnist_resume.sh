#!/usr/bin/env bash
# mtk-fmnist resumes bitwise (issue 60 item 4), on RANKS ranks and mesh MESH, 30 steps over 3 epochs
# of 1000 training images (test set evaluated after each epoch):
#  1. SIGTERM to the last rank during training: every rank exits 75 with the step reached saved;
#     the next run resumes from it and its losses, test losses and accuracies equal the
#     uninterrupted run's to the last digit;
#  2. kill -9 of mpiexec while checkpoints are written every 4 steps: status.json stays "running";
#     the next run records "killed", resumes from the last complete checkpoint, and equals the
#     uninterrupted run to the last digit;
#  3. (RANKS > 1) the checkpoint of 1. resumes on one rank (mesh rows:1;cols:1): the losses before
#     it are the run's, those after equal the uninterrupted run's to 1e-4.
# Without Fashion-MNIST it exits 77 (SKIP_RETURN_CODE), a skip, not a pass.
#   fmnist_resume.sh MTK_FMNIST FMNIST_YAML RANKS ROWS COLS     (MESH = rows:ROWS;cols:COLS)
set -uo pipefail
fmnist="$1"; config="$2"; ranks="$3"; mesh="rows:$4;cols:$5"
mpi_timeout=240
source "$(dirname "$0")/../lm1b/harness.sh"
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "dataset-fashion-mnist is not installed: skipping"; exit 77
fi
common=(--config "$config" --set data.train_limit=1000 --set data.test_limit=500
        --set train.epochs=3 --set train.log_every=1)

# launch NAME ARGS...: `mtk-fmnist train ARGS` in the background ($job is mpiexec itself); each
# rank writes its pid to pids/rank-R.pid. A watchdog kills the job after 200 s; finish() (harness.sh)
# waits for it.
launch() {
  local name="$1"; shift
  rm -rf pids && mkdir -p pids
  mpiexec -n "$ranks" sh -c 'echo $$ > pids/rank-$PMI_RANK.pid; exec "$0" "$@"' "$fmnist" train \
    "${common[@]}" --mesh "$mesh" "$@" > "$name.log" 2>&1 &
  job=$!
  ( sleep 200 & s=$!; trap 'kill $s; exit 0' TERM; wait $s; kill -9 "$job" ) >/dev/null 2>&1 &
  watchdog=$!
}
# trained RUN_DIR N: waits (100 s at most) until metrics.jsonl holds N training steps.
trained() {
  local deadline=$((SECONDS + 100))
  until [ "$(grep -c '"kind": "train"' "$1/metrics.jsonl" 2>/dev/null)" -ge "$2" ]; do
    [ $SECONDS -lt $deadline ] || fail "$1: no $2 steps in metrics.jsonl"
    sleep 0.05
  done
}
state() { sed -n 's/.*"state": "\([a-z_]*\)".*/\1/p' "$1/status.json"; }
# same FULL RESUMED WHAT: the result JSONs agree to the last digit; prints the loss lines compared.
same() {
  python3 - "$1" "$2" "$3" <<'PY' || fail "$3: the resumed run differs from the uninterrupted one"
import json, sys
full, resumed = (json.load(open(p)) for p in sys.argv[1:3])
for key in ("losses", "epoch_test_loss", "epoch_test_accuracy"):
    assert full[key] == resumed[key], (key, full[key], resumed[key])
assert len(full["losses"]) == 30 and len(full["epoch_test_loss"]) == 3, full
for step in (1, 15, 30):
    print(f"  {sys.argv[3]}: step {step} loss {full['losses'][step - 1]!r} (uninterrupted) "
          f"== {resumed['losses'][step - 1]!r} (resumed)")
print(f"  {sys.argv[3]}: all 30 losses and 3 test losses and accuracies equal")
PY
}

mpirun -n "$ranks" "$fmnist" train "${common[@]}" --mesh "$mesh" --run-dir full > full.log 2>&1 ||
  { cat full.log; fail "uninterrupted run"; }
[ "$(state full)" = completed ] || fail "uninterrupted run: status $(cat full/status.json)"
for f in config.resolved.yaml metrics.jsonl result.json checkpoints/latest; do
  [ -s "full/$f" ] || fail "the run directory lacks $f"
done

# 1. SIGTERM to the last rank.
launch term --run-dir term --set checkpoint.every=1000
trained term 8
kill -TERM "$(cat pids/rank-$((ranks - 1)).pid)"
finish
[ "$status" -eq 75 ] || { cat term.log; fail "SIGTERM during training: exit $status, expected 75"; }
[ "$(state term)" = stopped ] || fail "status after SIGTERM: $(cat term/status.json)"
saved=$(saved_step term)
[ "$saved" -ge 8 ] && [ "$saved" -lt 30 ] || fail "SIGTERM: saved step $saved, expected 8 .. 29"
cp -r term other
mpirun -n "$ranks" "$fmnist" train "${common[@]}" --mesh "$mesh" --run-dir term --set checkpoint.every=1000 \
  > term2.log 2>&1 || { cat term2.log; fail "resume after SIGTERM"; }
grep -q "resumed from .* at step $saved" term2.log || { cat term2.log; fail "did not resume from step $saved"; }
same full/result.json term/result.json "SIGTERM at step $saved, resumed"
echo "ok: SIGTERM to rank $((ranks - 1)) -> 75 at step $saved; the resumed run equals the uninterrupted one"

# 2. kill -9 of mpiexec.
launch kill --run-dir kill --set checkpoint.every=4
trained kill 14
kill -KILL "$job"
finish
sleep 1
[ "$(state kill)" = running ] || fail "status after kill -9: $(cat kill/status.json)"
last=$(saved_step kill)
mpirun -n "$ranks" "$fmnist" train "${common[@]}" --mesh "$mesh" --run-dir kill --set checkpoint.every=4 \
  > kill2.log 2>&1 || { cat kill2.log; fail "resume after kill -9"; }
grep -q "Recorded as killed" kill2.log || { cat kill2.log; fail "the killed job was not recorded"; }
grep -q "resumed from .* at step $last" kill2.log || { cat kill2.log; fail "did not resume from step $last"; }
same full/result.json kill/result.json "kill -9, resumed at step $last"
echo "ok: kill -9 of mpiexec; resumed from the last complete checkpoint (step $last), equal"

# 3. Another mesh: the SIGTERM checkpoint on one rank.
if [ "$ranks" -gt 1 ]; then
  mpirun -n 1 "$fmnist" train "${common[@]}" --mesh "rows:1;cols:1" --run-dir other \
    > other.log 2>&1 || { cat other.log; fail "resume on one rank"; }
  grep -q "resumed from .* at step $saved" other.log || { cat other.log; fail "one rank: no resume"; }
  python3 - "$saved" <<'PY' || fail "resumed on one rank: the losses differ"
import json, sys
saved = int(sys.argv[1])
full, other = json.load(open("full/result.json")), json.load(open("other/result.json"))
assert full["losses"][:saved] == other["losses"][:saved]
for a, b in zip(full["losses"][saved:], other["losses"][saved:]):
    assert abs(a - b) <= 1e-4 * abs(a), (a, b)
assert len(other["losses"]) == 30 and other["ranks"] == 1, other
print(f"  one rank from step {saved}: step 30 loss {other['losses'][-1]!r} vs {full['losses'][-1]!r}")
PY
  echo "ok: the $mesh checkpoint resumes on one rank, the losses within 1e-4"
fi
echo "fmnist resume ($ranks ranks, $mesh): OK"
