#!/usr/bin/env python3
"""scripts/plot-metrics from the outside, as a user runs it.

  check_plot_metrics.py PLOT_METRICS WORK_DIR help      --help prints the usage, exit 0
  check_plot_metrics.py PLOT_METRICS WORK_DIR errors    bad arguments: one message, exit 2,
                                                         no traceback
  check_plot_metrics.py PLOT_METRICS WORK_DIR glyphs    the built-in PNG writer draws every
                                                         printable ASCII character: a panel titled
                                                         with all 95 is decoded and compared with
                                                         the font, pixel by pixel
"""
import importlib.machinery
import importlib.util
import json
import os
import struct
import subprocess
import sys
import zlib

PRINTABLE = "".join(chr(c) for c in range(32, 127))


def run(script, *args):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def write_log(path, key):
    with open(path, "w") as f:
        for step in range(1, 11):
            f.write(json.dumps({"step": step, key: 5.0 - 0.25 * step, "step_time_s": 0.5,
                                "kind": "train", "start": 1}) + "\n")


def check_help(script, work):
    rc, out, err = run(script, "--help")
    if rc != 0 or "usage: plot-metrics" not in out or "--key" not in out:
        fail(f"--help: exit {rc}\n{out}{err}")
    print("help: ok")


def check_errors(script, work):
    log = os.path.join(work, "metrics.jsonl")
    write_log(log, "loss")
    cases = [["--key"], [log, "--key"], [], ["--no-such-option", log],
             [os.path.join(work, "missing.jsonl")], [log, "a.png", "b.png"]]
    for args in cases:
        rc, out, err = run(script, *args)
        if rc != 2 or "Traceback" in err or "plot-metrics: error:" not in err:
            fail(f"plot-metrics {' '.join(args)}: exit {rc} (want 2), stderr:\n{err}")
    rc, out, err = run(script, log, os.path.join(work, "none.png"), "--key", "absent")
    if rc != 1 or "Traceback" in err or "fewer than two 'absent' values" not in err:
        fail(f"a key without values: exit {rc}, stderr:\n{err}")
    print("errors: ok")


def read_png(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB PNG without interlace or filters,
    as plot-metrics writes it."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = 1 + 3 * width
    rows = []
    for y in range(height):
        line = raw[y * stride:(y + 1) * stride]
        if line[0] != 0:
            fail("unexpected PNG filter")
        rows.append([tuple(line[1 + 3 * x:4 + 3 * x]) for x in range(width)])
    return width, height, rows


def check_glyphs(script, work):
    loader = importlib.machinery.SourceFileLoader("plot_metrics", script)
    spec = importlib.util.spec_from_loader("plot_metrics", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    font = module.FONT
    missing = [c for c in PRINTABLE if c not in font]
    if missing:
        fail(f"no glyph for {missing!r}")
    for c in PRINTABLE:
        g = font[c]
        if len(g) != 7 or any(len(r) != 5 or set(r) - {"0", "1"} for r in g):
            fail(f"glyph {c!r} is not 7 rows of 5 bits: {g}")
        if (c == " ") != all(r == "00000" for r in g):
            fail(f"glyph {c!r} is {'not ' if c == ' ' else ''}blank")
    shapes = {}
    for c in PRINTABLE:
        shapes.setdefault(tuple(font[c]), []).append(c)
    alike = [cs for cs in shapes.values() if len(cs) > 1]
    if alike:
        fail(f"characters drawn alike: {alike}")
    # The whole set as the key, drawn by the built-in writer at its label position (4, 4).
    key = PRINTABLE
    log = os.path.join(work, "glyphs.jsonl")
    png = os.path.join(work, "glyphs.png")
    write_log(log, key)
    rc, out, err = run(script, log, png, "--key", key, "--no-matplotlib")
    if rc != 0:
        fail(f"rendering: exit {rc}\n{out}{err}")
    width, height, rows = read_png(png)
    for i, c in enumerate(key):
        for gy, bits in enumerate(font[c]):
            for gx, bit in enumerate(bits):
                x, y = 4 + 6 * i + gx, 4 + gy
                ink = rows[y][x] != (255, 255, 255)
                if x < width and ink != (bit == "1"):
                    fail(f"{c!r} at ({x}, {y}): {'ink' if ink else 'blank'}, font says {bit}")
    print(f"glyphs: ok ({len(key)} characters drawn and read back from {png})")


def main():
    script, work, mode = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    {"help": check_help, "errors": check_errors, "glyphs": check_glyphs}[mode](script, work)


if __name__ == "__main__":
    main()
