#!/usr/bin/python3
"""Checks that the PyTorch module (mtk_transformer.py) computes MTK's logits.

  compare_logits.py tokens WEIGHTS TOKENS [--batch 4] [--seed 1]
      writes TOKENS: random packed rows (several sequences a row, padding) for the model of
      WEIGHTS (an `mtk-ckpt export` file), as `mtk-ckpt logits --tokens` reads them
  compare_logits.py compare WEIGHTS TOKENS MTK_LOGITS [--tolerance 1e-5]
      runs the module on TOKENS (in float64) and compares with MTK_LOGITS (`mtk-ckpt logits
      --out`) at every position that is not padding: max |MTK - PyTorch| / max |PyTorch| must
      be <= the tolerance; prints the figures as JSON; exit status 0 when within, else 1

Run with Debian's Python: /usr/bin/python3 (package python3-torch).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mtk_transformer as mt  # noqa: E402


def packed_rows(batch, length, vocab, gen):
    """ids, segments, positions [batch, length] int32: rows of 1-3 sequences, some padding."""
    ids = torch.randint(1, vocab, (batch, length), generator=gen, dtype=torch.int32)
    seg = torch.zeros(batch, length, dtype=torch.int32)
    pos = torch.zeros(batch, length, dtype=torch.int32)
    for b in range(batch):
        used = length if b % 2 == 0 else int(torch.randint(length // 2, length, (1,), generator=gen))
        cuts = sorted(int(c) for c in torch.randint(1, used, (b % 3,), generator=gen))
        bounds = [0] + cuts + [used]
        for s in range(len(bounds) - 1):
            lo, hi = bounds[s], bounds[s + 1]
            seg[b, lo:hi] = s + 1
            pos[b, lo:hi] = torch.arange(hi - lo, dtype=torch.int32)
        ids[b, used:] = 0
    return ids, seg, pos


def make_tokens(args):
    _, meta = mt.read_safetensors(args.weights)
    c = json.loads(meta["mtk_model"])
    gen = torch.Generator().manual_seed(args.seed)
    ids, seg, pos = packed_rows(args.batch, c["length"], c["vocab_size"], gen)
    tensors = {"inputs": ids, "segments": seg, "positions": pos}
    if c["num_encoder_layers"] > 0:
        e_ids, e_seg, e_pos = packed_rows(args.batch, c["length"], c["vocab_size"], gen)
        # The decoder's rows hold as many sequences as the encoder's (pairs).
        seg = torch.where(seg > 0, torch.minimum(seg, e_seg.max(dim=1, keepdim=True).values), seg)
        tensors.update({"segments": seg, "encoder_inputs": e_ids, "encoder_segments": e_seg,
                        "encoder_positions": e_pos})
    mt.write_safetensors(args.tokens, tensors)


def compare(args):
    model = mt.load(args.weights, torch.float64)
    tokens, _ = mt.read_safetensors(args.tokens)
    mtk, _ = mt.read_safetensors(args.mtk_logits)
    with torch.no_grad():
        feeds = {k: tokens[k] for k in ("inputs", "segments", "positions")}
        if model.config["num_encoder_layers"] > 0:
            feeds.update({k: tokens[k] for k in
                          ("encoder_inputs", "encoder_segments", "encoder_positions")})
        ref = model(**feeds)
    got = mtk["logits"].to(torch.float64)
    if got.shape != ref.shape:
        print(f"FAIL: MTK's logits are {tuple(got.shape)}, PyTorch's {tuple(ref.shape)}")
        return 1
    keep = tokens["segments"] > 0  # padding positions compute nothing anyone reads
    diff = (got - ref).abs()[keep]
    scale = ref.abs()[keep].max().item()
    rel = diff.max().item() / scale
    result = {"positions": int(keep.sum()), "max_abs_logit": scale,
              "max_abs_difference": diff.max().item(), "max_relative_difference": rel,
              "tolerance": args.tolerance, "ok": rel <= args.tolerance}
    print(json.dumps(result))
    return 0 if result["ok"] else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tokens")
    t.add_argument("weights")
    t.add_argument("tokens")
    t.add_argument("--batch", type=int, default=4)
    t.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("compare")
    c.add_argument("weights")
    c.add_argument("tokens")
    c.add_argument("mtk_logits")
    c.add_argument("--tolerance", type=float, default=1e-5)
    args = p.parse_args()
    if args.command == "tokens":
        make_tokens(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
