#!/usr/bin/env python3
"""Kernels must not add floats with atomics (issue 15 item 6): the order threads reach an atomic
decides the rounding, so results would change from run to run on a threaded backend.

    check_kernel_atomics.py KERNELS_DIR

Every Kokkos atomic in KERNELS_DIR must be marked, on its line or the line before, with the
comment "integer: order-independent" (integer counts and slots give the same result in any order).
"""
import pathlib
import re
import sys

MARK = "integer: order-independent"


def main():
    root = pathlib.Path(sys.argv[1])
    bad = []
    files = sorted(p for p in root.rglob("*") if p.suffix in (".cpp", ".hpp"))
    for path in files:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.search(r"\batomic_\w+\s*\(", line) and MARK not in line and (
                    i == 0 or MARK not in lines[i - 1]):
                bad.append(f"{path}:{i + 1}: {line.strip()}")
    if bad:
        print("unmarked atomics (a float atomic makes sums depend on thread order; use a fixed-"
              "order sum, or mark an integer atomic with '// " + MARK + "'):")
        print("\n".join(bad))
        return 1
    print(f"ok: {len(files)} files, every atomic is an integer one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
