#!/usr/bin/python3
"""Checks that the PyTorch module (mtk_transformer.py) computes MTK's logits.

  compare_logits.py tokens WEIGHTS TOKENS [--batch 4] [--seed 1]
      writes TOKENS: random packed rows (several sequences a row, padding) for the model of
      WEIGHTS (an `mtk-ckpt export` file), as `mtk-ckpt logits --tokens` reads them
  compare_logits.py random-weights CONFIG_JSON WEIGHTS [CONFIG_JSON WEIGHTS ...] [--seed 1]
      writes WEIGHTS: random weights of the model of CONFIG_JSON (an mtk_model, see
      mtk_transformer.py) under MTK's names, for `mtk-ckpt import`
  compare_logits.py compare WEIGHTS TOKENS MTK_LOGITS [WEIGHTS TOKENS MTK_LOGITS ...]
                           [--tolerance 1e-5]
      runs the module on TOKENS (in float64) and compares with MTK_LOGITS (`mtk-ckpt logits
      --out`) at every position that is not padding: max |MTK - PyTorch| / max |PyTorch| must
      be <= the tolerance; prints the figures as JSON, a line per triple; exit status 0 when
      all are within, else 1 ("tokens" needs only Python's standard library)

Run with Debian's Python: /usr/bin/python3 (package python3-torch).
"""
import argparse
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ beside the sources


def torch_module():
    """mtk_transformer (and torch), imported only by the commands that compute."""
    import mtk_transformer  # noqa: E402
    return mtk_transformer


def model_config(weights):
    """The mtk_model of a safetensors file, read with the standard library alone."""
    with open(weights, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(json.loads(f.read(n))["__metadata__"]["mtk_model"])


def packed_rows(batch, length, vocab, rng):
    """ids, segments, positions (lists of rows): 1-3 sequences a row, some rows padded."""
    ids, seg, pos = [], [], []
    for b in range(batch):
        used = length if b % 2 == 0 else rng.randrange(length // 2, length)
        # Distinct cuts: no segment is empty (an encoder-decoder pairs segments by id).
        cuts = sorted(set(rng.randrange(1, used) for _ in range(b % 3)))
        bounds = [0] + cuts + [used]
        s_row, p_row = [0] * length, [0] * length
        for s in range(len(bounds) - 1):
            for i in range(bounds[s], bounds[s + 1]):
                s_row[i], p_row[i] = s + 1, i - bounds[s]
        ids.append([rng.randrange(1, vocab) if i < used else 0 for i in range(length)])
        seg.append(s_row)
        pos.append(p_row)
    return ids, seg, pos


def write_int32(path, tensors):
    """Writes {name: rows of ints} as I32 [batch, length] safetensors, names sorted."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        rows = tensors[name]
        raw = b"".join(struct.pack(f"<{len(r)}i", *r) for r in rows)
        header[name] = {"dtype": "I32", "shape": [len(rows), len(rows[0])],
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def make_tokens(args):
    c = model_config(args.weights)
    rng = random.Random(args.seed)
    ids, seg, pos = packed_rows(args.batch, c["length"], c["vocab_size"], rng)
    tensors = {"inputs": ids, "segments": seg, "positions": pos}
    if c["num_encoder_layers"] > 0:
        e_ids, e_seg, e_pos = packed_rows(args.batch, c["length"], c["vocab_size"], rng)
        # Each decoder segment has its encoder segment (the pairs of a packed row).
        seg = [[min(s, max(e)) for s in row] for row, e in zip(seg, e_seg)]
        tensors.update({"segments": seg, "encoder_inputs": e_ids, "encoder_segments": e_seg,
                        "encoder_positions": e_pos})
    write_int32(args.tokens, tensors)


def random_weights(args):
    if len(args.pairs) % 2:
        sys.exit("random-weights takes CONFIG_JSON WEIGHTS pairs")
    for config, weights in zip(args.pairs[::2], args.pairs[1::2]):
        random_model(config, weights, args.seed)


def random_model(config, weights, seed):
    mt = torch_module()
    torch = mt.torch
    model = mt.MtkTransformer(json.loads(config))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            last = name.split(".")[-1]
            if last == "scale":
                p.copy_(1 + 0.1 * noise)
            elif last in ("bias", "positions"):
                p.copy_(0.1 * noise)
            elif last == "embedding":
                p.copy_(noise)
            else:  # projections: variance scaling over the fan-in, as MTK initialises them
                if last == "softmax":
                    fan_in = p.shape[1]
                elif last == "o":
                    fan_in = p.shape[0] * p.shape[1]
                elif ".moe." in name and last in ("wi", "wo"):
                    fan_in = p.shape[1]
                else:
                    fan_in = p.shape[0]
                p.copy_(noise / fan_in ** 0.5)
    mt.save(model, weights)


def compare(args):
    if len(args.files) % 3:
        sys.exit("compare takes WEIGHTS TOKENS MTK_LOGITS triples")
    bad = 0
    for weights, tokens, logits in zip(args.files[::3], args.files[1::3], args.files[2::3]):
        result = compare_one(weights, tokens, logits, args.tolerance)
        print(json.dumps(result))
        bad += not result["ok"]
    return 1 if bad else 0


def compare_one(weights, tokens_path, logits_path, tolerance):
    mt = torch_module()
    torch = mt.torch
    model = mt.load(weights, torch.float64)
    tokens, _ = mt.read_safetensors(tokens_path)
    mtk, _ = mt.read_safetensors(logits_path)
    with torch.no_grad():
        names = ["inputs", "segments", "positions"]
        if model.config["num_encoder_layers"] > 0:
            names += ["encoder_inputs", "encoder_segments", "encoder_positions"]
        ref = model(**{k: tokens[k] for k in names})
    got = mtk["logits"].to(torch.float64)
    result = {"weights": weights, "logits": logits_path, "tolerance": tolerance}
    if got.shape != ref.shape:
        result.update({"ok": False, "error": f"MTK {tuple(got.shape)}, PyTorch {tuple(ref.shape)}"})
        return result
    keep = tokens["segments"] > 0  # padding positions compute nothing anyone reads
    diff = (got - ref).abs()[keep]
    scale = ref.abs()[keep].max().item()
    rel = diff.max().item() / scale
    result.update({"positions": int(keep.sum()), "max_abs_logit": scale,
                   "max_abs_difference": diff.max().item(), "max_relative_difference": rel,
                   "ok": rel <= tolerance})
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tokens")
    t.add_argument("weights")
    t.add_argument("tokens")
    t.add_argument("--batch", type=int, default=4)
    t.add_argument("--seed", type=int, default=1)
    r = sub.add_parser("random-weights")
    r.add_argument("pairs", nargs="+", metavar="CONFIG_JSON WEIGHTS")
    r.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("compare")
    c.add_argument("files", nargs="+", metavar="WEIGHTS TOKENS MTK_LOGITS")
    c.add_argument("--tolerance", type=float, default=1e-5)
    args = p.parse_args()
    if args.command == "tokens":
        make_tokens(args)
        return 0
    if args.command == "random-weights":
        random_weights(args)
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
