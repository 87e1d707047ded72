#!/usr/bin/env bash
# mtk-ckpt export and import (docs/checkpoint-format.md#safetensors) on a tiny LM and a tiny
# encoder-decoder, each trained a few steps: the file's layout read with Python's standard library
# alone; export -> import (on another rank count and mesh) -> export is byte-identical, in float32
# and in bfloat16; the imported checkpoint evaluates as the original and a run starts from it;
# mismatching shapes and a used run directory are refused on every rank. Leaves WORK_DIR for the
# PyTorch comparison (export_pytorch_logits.sh).
#   export_round_trip.sh WORK_DIR MTK_LM1B MTK_WMT MTK_CKPT LM_TINY_YAML WMT_TINY_YAML WMT_MAKE_CORPUS_PY
set -euo pipefail
work="$1"; lm1b="$2"; wmt="$3"; ckpt="$4"; lm_tiny="$5"; wmt_tiny="$6"; wmt_corpus="$7"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rm -rf "$work"
mkdir -p "$work/lm" "$work/wmt"
export OPENBLAS_NUM_THREADS=1
mpirun() { timeout 120 mpiexec "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$here/../lm1b/corpus.sh"

# check_file FILE: the safetensors layout, read without MTK: header length, JSON, names sorted,
# data covered exactly in name order, data 8-byte aligned, MTK's metadata.
check_file() {
  /usr/bin/python3 - "$1" <<'PY'
import json, os, struct, sys
path = sys.argv[1]
data = open(path, "rb").read()
(n,) = struct.unpack("<Q", data[:8])
assert (8 + n) % 8 == 0, "data not 8-byte aligned"
header = json.loads(data[8:8 + n])
meta = header.pop("__metadata__")
assert meta["format"] == "pt" and meta["mtk_format"] == "mtk-safetensors-1", meta
model, dims = json.loads(meta["mtk_model"]), json.loads(meta["mtk_dims"])
names = list(header)
assert names == sorted(names), "names not sorted"
at = 0
for name in names:
    e = header[name]
    b, end = e["data_offsets"]
    assert b == at, f"{name} starts at {b}, not {at}"
    count = 1
    for s in e["shape"]:
        count *= s
    assert end - b == count * {"F32": 4, "BF16": 2}[e["dtype"]], name
    assert len(dims[name]) == len(e["shape"]), name
    at = end
assert 8 + n + at == len(data), "data not covered exactly"
assert header["decoder/softmax"]["shape"] == [model["vocab_size"], model["d_model"]]
print(f"{os.path.basename(path)}: {len(names)} tensors, {at} bytes of data, layout OK")
PY
}

# --- the language model ---
cd "$work/lm"
for command in export import logits; do
  "$ckpt" "$command" --help > help.txt || fail "mtk-ckpt $command --help"
  grep -q "^Usage: mtk-ckpt $command" help.txt || { cat help.txt; fail "mtk-ckpt $command --help"; }
done
make_corpus corpus
"$lm1b" prepare --data corpus --out prepared --vocab-size 300 > prepare.log 2>&1 || { cat prepare.log; fail "lm prepare"; }
cp "$lm_tiny" tiny.yaml
mpirun -n 2 "$lm1b" train --config tiny.yaml --run-dir run --set train.steps=4 > train.log 2>&1 || { cat train.log; fail "lm train"; }
"$ckpt" export run --format safetensors --out lm.safetensors || fail "lm export"
mpirun -n 2 "$ckpt" export run --format safetensors --out lm-bf16.safetensors --dtype bf16 || fail "lm export bf16 on 2 ranks"
check_file lm.safetensors
check_file lm-bf16.safetensors
# float32: 4 ranks on another mesh and layout; bfloat16: 1 rank.
mpirun -n 4 "$ckpt" import lm.safetensors --config tiny.yaml --run-dir imp4 --mesh "batch:2;model:2" || fail "lm import on 4 ranks"
"$ckpt" import lm-bf16.safetensors --config tiny.yaml --run-dir imp1 --mesh batch:1 || fail "lm import bf16 on 1 rank"
mpirun -n 2 "$ckpt" verify imp4 > verify.log || { cat verify.log; fail "verify of the import"; }
"$ckpt" export imp4 --format safetensors --out again.safetensors
cmp lm.safetensors again.safetensors || fail "lm: export -> import -> export is not byte-identical"
"$ckpt" export imp1 --format safetensors --dtype bf16 --out again-bf16.safetensors
cmp lm-bf16.safetensors again-bf16.safetensors || fail "lm bf16: export -> import -> export is not byte-identical"
echo "lm: export -> import (4 ranks, batch:2;model:2; bf16 on 1 rank) -> export byte-identical"

# The imported weights evaluate as the original's (another mesh: float32 reassociation), and a run
# starts from them at step 0.
ppl() { sed -n 's/.*"log_ppl_per_token": \([0-9.e+-]*\).*/\1/p' "$1"; }
mpirun -n 2 "$lm1b" eval --config tiny.yaml --run-dir run > eval-run.log 2>&1 || { cat eval-run.log; fail "eval"; }
mpirun -n 2 "$lm1b" eval --config tiny.yaml --run-dir imp4 > eval-imp.log 2>&1 || { cat eval-imp.log; fail "eval of the import"; }
a=$(ppl eval-run.log); b=$(ppl eval-imp.log)
awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * a) }' ||
  fail "the import evaluates to $b, the original to $a"
mpirun -n 2 "$lm1b" train --config tiny.yaml --run-dir imp4 --set train.steps=2 > train-imp.log 2>&1 || { cat train-imp.log; fail "train from the import"; }
grep -q "resumed from imp4/checkpoints/step-000000000 at step 0" train-imp.log || { cat train-imp.log; fail "train did not start from the import"; }
echo "lm: the import evaluates as the original ($a, $b) and trains"

# Refusals, the same on every rank: shapes that differ (each variable, both shapes), a used run
# directory; nothing is written.
if mpirun -n 2 "$ckpt" import lm.safetensors --config tiny.yaml --run-dir bad --set model.d_ff=48 > bad.log 2>&1; then
  cat bad.log; fail "an import with another d_ff succeeded"
fi
grep -q "variable 'decoder/layer_0/ffn/wi': the file has \[32, 64\], the model \[d_model=32, d_ff=48\]" bad.log || { cat bad.log; fail "the error does not name the variable and both shapes"; }
grep -q "variable 'decoder/layer_0/ffn/wo'" bad.log || { cat bad.log; fail "the error does not name every variable"; }
[ ! -e bad ] || fail "a refused import wrote its run directory"
if mpirun -n 2 "$ckpt" import lm.safetensors --config tiny.yaml --run-dir imp4 > used.log 2>&1; then
  cat used.log; fail "an import into a run directory with checkpoints succeeded"
fi
grep -q "already has checkpoints" used.log || { cat used.log; fail "no clear error for a used run directory"; }
head -c 5000 lm.safetensors > cut.safetensors
if "$ckpt" import cut.safetensors --config tiny.yaml --run-dir cut > cut.log 2>&1; then
  fail "a truncated file was imported"
fi
grep -q "truncated" cut.log || { cat cut.log; fail "no clear error for a truncated file"; }

# --- the encoder-decoder ---
cd "$work/wmt"
/usr/bin/python3 "$wmt_corpus" corpus copy
cp "$wmt_tiny" tiny.yaml
"$wmt" prepare --config tiny.yaml > prepare.log 2>&1 || { cat prepare.log; fail "wmt prepare"; }
mpirun -n 2 "$wmt" train --config tiny.yaml --run-dir run --set train.steps=3 > train.log 2>&1 || { cat train.log; fail "wmt train"; }
"$ckpt" export run --format safetensors --out wmt.safetensors || fail "wmt export"
check_file wmt.safetensors
"$ckpt" import wmt.safetensors --config tiny.yaml --run-dir imp1 --mesh batch:1 || fail "wmt import on 1 rank"
"$ckpt" export imp1 --format safetensors --out again.safetensors
cmp wmt.safetensors again.safetensors || fail "wmt: export -> import -> export is not byte-identical"
echo "wmt: export -> import (1 rank) -> export byte-identical"
echo "export round trip: OK"
