#!/usr/bin/env python3
"""Checks the training records of metrics.jsonl files (docs/lm1b.md, "Training and evaluation").

  check_metrics_records.py METRICS.jsonl [METRICS.jsonl ...]

Every record of kind "train" carries step_time_s (> 0), tokens_per_s (> 0), mfu (in (0, 1]), gradient_norm (finite, > 0), peak_memory_bytes (an integer > 0) and lr as the shortest
text of a float32 (0.1, never 0.10000000149011612). With several files (the same run on other
rank counts and layouts), the gradient norms of the steps they share agree within 1e-4 relative.
Exit status 1 with one line per problem.
"""
import json
import math
import struct
import sys


def float32_text_is_shortest(x):
    """Whether `x` is the double of the shortest text of a float32 (what a reader expects)."""
    f = struct.unpack("f", struct.pack("f", x))[0]
    for digits in range(1, 10):
        text = f"{f:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == f:
            return float(text) == x
    return False


def check_file(path, problems):
    norms = {}
    train = 0
    with open(path) as f:
        for n, line in enumerate(f, 1):
            r = json.loads(line)
            if r.get("kind") != "train":
                continue
            train += 1
            where = f"{path}:{n} (step {r.get('step')})"
            for key, ok in [
                ("step_time_s", lambda v: isinstance(v, float) and v > 0),
                ("tokens_per_s", lambda v: isinstance(v, float) and v > 0),
                ("mfu", lambda v: isinstance(v, float) and 0 < v <= 1),
                ("gradient_norm", lambda v: isinstance(v, float) and math.isfinite(v) and v > 0),
                ("peak_memory_bytes", lambda v: isinstance(v, int) and v > 0),
                ("lr", lambda v: isinstance(v, float) and float32_text_is_shortest(v)),
            ]:
                if key not in r:
                    problems.append(f"{where}: no {key}")
                elif not ok(r[key]):
                    problems.append(f"{where}: {key} = {r[key]!r}")
            if isinstance(r.get("gradient_norm"), float):
                norms[r["step"]] = r["gradient_norm"]
    if train == 0:
        problems.append(f"{path}: no training records")
    return norms


def main(paths):
    problems = []
    runs = [(p, check_file(p, problems)) for p in paths]
    base_path, base = runs[0]
    for path, norms in runs[1:]:
        shared = sorted(set(base) & set(norms))
        if not shared:
            problems.append(f"{path}: no step in common with {base_path}")
        for step in shared:
            a, b = base[step], norms[step]
            if abs(a - b) > 1e-4 * abs(a):
                problems.append(f"step {step}: gradient_norm {b} in {path}, {a} in {base_path}")
    for p in problems:
        print(p)
    print(f"check_metrics_records: {len(paths)} file(s), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
