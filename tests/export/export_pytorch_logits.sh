#!/usr/bin/env bash
# The PyTorch module of examples/pytorch/ reproduces MTK's logits to 1e-5 (relative to the largest
# logit) on the tiny LM and encoder-decoder export_round_trip.sh trained and exported (WORK_DIR),
# on the LM's bfloat16 export imported back, and on random weights of other architectures (mixture
# of experts with routing groups, RMS norm, gelu, local attention, shared embeddings) imported into
# MTK. Skipped (77) where Debian's python3-torch is missing.
#   export_pytorch_logits.sh WORK_DIR MTK_CKPT EXAMPLES_PYTORCH_DIR
set -euo pipefail
work="$1"; ckpt="$2"; examples="$3"
fail() { echo "FAIL: $*" >&2; exit 1; }
if ! /usr/bin/python3 -c "import torch" 2> /dev/null; then
  echo "SKIP: /usr/bin/python3 has no torch (Debian package python3-torch)"
  exit 77
fi
export OPENBLAS_NUM_THREADS=1
export PYTHONDONTWRITEBYTECODE=1  # nothing written into the source tree
compare="$examples/compare_logits.py"
cd "$work"
# Architectures the trained models lack: random weights written by PyTorch, imported into MTK (one
# rank: the import's slicing is export_round_trip.sh's).
lm_moe='{"vocab_size": 300, "d_model": 32, "d_ff": 64, "num_heads": 4, "d_kv": 8, "num_layers": 2,
  "num_encoder_layers": 0, "shared_embedding": false, "length": 32, "gelu": true,
  "norm": "rms_norm", "norm_epsilon": 1e-6, "attention_window": 8, "moe_every": 2,
  "moe": {"num_experts": 4, "capacity_factor_eval": 2.0, "second_policy_eval": "threshold",
  "second_threshold_eval": 0.2, "group_size": 64}, "activation_dtype": "float32"}'
wmt_shared='{"vocab_size": 271, "d_model": 64, "d_ff": 128, "num_heads": 4, "d_kv": 16,
  "num_layers": 2, "num_encoder_layers": 2, "shared_embedding": true, "length": 8, "gelu": false,
  "norm": "layer_norm", "norm_epsilon": 1e-6, "attention_window": 0, "moe_every": 1,
  "moe": {"num_experts": 2, "capacity_factor_eval": 2.0, "second_policy_eval": "all",
  "second_threshold_eval": 0.2, "group_size": 0}, "activation_dtype": "float32"}'
/usr/bin/python3 "$compare" random-weights "$lm_moe" lm-moe.safetensors "$wmt_shared" wmt-shared.safetensors
import_weights() {
  local name="$1" yaml="$2"
  shift 2
  "$ckpt" import "$name.safetensors" --config "$yaml" --run-dir "$name" --mesh batch:1 "$@" > "$name-import.log" 2>&1 ||
    { cat "$name-import.log"; fail "$name: import"; }
}
import_weights lm-moe lm/tiny.yaml --set model.num_layers=2 --set model.norm=rms_norm --set model.gelu=true \
  --set model.attention_window=8 --set model.moe_every=2 --set model.moe.num_experts=4 \
  --set model.moe.group_size=64 --set model.moe.second_policy_eval=threshold
import_weights wmt-shared wmt/tiny.yaml --set model.shared_embedding=true --set model.moe_every=1 --set model.moe.num_experts=2

# NAME WEIGHTS CHECKPOINT BATCH: MTK's logits of CHECKPOINT on random packed rows, then PyTorch's
# of WEIGHTS on the same rows, all compared in one Python process.
cases=("lm lm/lm.safetensors lm/run 4" "lm-bf16 lm/lm-bf16.safetensors lm/imp1 4"
  "wmt wmt/wmt.safetensors wmt/run 6" "lm-moe lm-moe.safetensors lm-moe 4"
  "wmt-shared wmt-shared.safetensors wmt-shared 6")
triples=()
for c in "${cases[@]}"; do
  set -- $c
  /usr/bin/python3 "$compare" tokens "$2" "$1-tokens.safetensors" --batch "$4"
  "$ckpt" logits "$3" --tokens "$1-tokens.safetensors" --out "$1-logits.safetensors" > /dev/null ||
    fail "$1: mtk-ckpt logits"
  triples+=("$2" "$1-tokens.safetensors" "$1-logits.safetensors")
done
/usr/bin/python3 "$compare" compare "${triples[@]}" || fail "PyTorch's logits differ from MTK's"
# Weights loaded into PyTorch and saved unchanged are the exported file, byte for byte.
/usr/bin/python3 -c "import sys; sys.path.insert(0, sys.argv[1]); import mtk_transformer as mt; mt.save(mt.load(sys.argv[2]), sys.argv[3])" \
  "$examples" wmt/wmt.safetensors resaved.safetensors
cmp wmt/wmt.safetensors resaved.safetensors || fail "mtk_transformer.save of an unchanged load differs from the file"
echo "PyTorch logits: OK"
