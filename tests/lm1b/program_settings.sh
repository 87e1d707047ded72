#!/usr/bin/env bash
# The run config's `program` section and checkpoint.fletcher32 (issue 60): recorded in the run
# directory's config.resolved.yaml and in each checkpoint's metadata; a resume whose settings differ
# says which key changed, old and new value, and whether it can change numerics; an environment
# that still sets a moved MTK_* variable stops the tool naming the key that replaced it.
#   program_settings.sh MTK_LM1B_BINARY CONFIG
set -euo pipefail
lm1b="$1"
config="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mpi_timeout=120
source "$here/harness.sh"
source "$here/corpus.sh"
make_corpus corpus
mpirun -n 2 "$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 || { cat prepare.log; fail "prepare"; }
sets=(--set checkpoint.every=2 --set checkpoint.keep=2)

# Recorded: every key of the section, in the run directory and in the checkpoint.
mpirun -n 2 "$lm1b" train --config "$config" --run-dir run --set train.steps=2 "${sets[@]}" \
  --set program.buffer_reuse=true > first.log 2>&1 || { cat first.log; fail "training 2 steps"; }
for key in overlap_collectives overlap_allgather allreduce_bucket_mib bf16_copies bf16_activations \
           in_place_updates overlap_halo node_allreduce buffer_plan buffer_reuse; do
  grep -q "^  $key: " run/config.resolved.yaml || { cat run/config.resolved.yaml; fail "config.resolved.yaml lacks program.$key"; }
done
grep -q "^  fletcher32: false" run/config.resolved.yaml || fail "config.resolved.yaml lacks checkpoint.fletcher32"
meta="run/checkpoints/step-000000002/metadata.yaml"
grep -q "node_allreduce: true" "$meta" || { cat "$meta"; fail "the checkpoint's metadata does not record program.node_allreduce"; }

# The same settings again: nothing to tell.
mpirun -n 2 "$lm1b" train --config "$config" --run-dir run --set train.steps=4 "${sets[@]}" > same.log 2>&1 || { cat same.log; fail "resuming with the same settings"; }
grep -q "resumed from .*step-000000002 at step 2" same.log || { cat same.log; fail "did not resume at step 2"; }
! grep -q "saved with other program settings" same.log || { cat same.log; fail "a resume with the same settings reported a change"; }

# Two keys changed: each named with both values and its effect on the results.
mpirun -n 2 "$lm1b" train --config "$config" --run-dir run --set train.steps=6 "${sets[@]}" \
  --set program.node_allreduce=false --set program.buffer_reuse=false > changed.log 2>&1 || { cat changed.log; fail "resuming with other settings"; }
grep -q "step-000000004 was saved with other program settings" changed.log || { cat changed.log; fail "the changed settings were not reported"; }
grep -q "program.node_allreduce: true -> false (can change numerics: " changed.log || { cat changed.log; fail "node_allreduce's change not reported as one that can change numerics"; }
grep -q "program.buffer_reuse: true -> false (time and memory only" changed.log || { cat changed.log; fail "buffer_reuse's change not reported as time and memory only"; }
[ "$(grep -c '^    [a-z0-9_.]*: .* -> ' changed.log)" -eq 2 ] || { cat changed.log; fail "other keys reported as changed"; }
grep -q "^  node_allreduce: false" run/config.resolved.yaml || fail "config.resolved.yaml does not record the new setting"
grep -q "node_allreduce: false" run/checkpoints/step-000000006/metadata.yaml || fail "the new checkpoint does not record the new setting"

# A moved variable is refused before anything runs, naming its key.
if MTK_OVERLAP_HALO=1 mpirun -n 2 "$lm1b" train --config "$config" --run-dir moved --set train.steps=2 > moved.log 2>&1; then
  fail "MTK_OVERLAP_HALO=1 was accepted"
fi
grep -q "MTK_OVERLAP_HALO moved to program.overlap_halo in the run config" moved.log || { cat moved.log; fail "the moved variable's error does not name its key"; }
[ ! -e moved ] || fail "a run directory was made despite the refused variable"
echo "program_settings: ok"
