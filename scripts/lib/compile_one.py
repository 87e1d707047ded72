#!/usr/bin/env python3
"""compile_one.py COMPILE_COMMANDS SOURCE [FLAG ...]: compiles one source of a configured build
with the flags CMake gave it (compile_commands.json) plus FLAGs, into a scratch object; exits with
the compiler's status. scripts/gpu-build-check uses it to compile a body whose library is not
installed (rocBLAS) against its headers alone."""
import json
import os
import shlex
import subprocess
import sys
import tempfile

commands, source, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
entries = [e for e in json.load(open(commands)) if e["file"].endswith("/" + source)]
if not entries:
    sys.exit(f"compile_one: {source} is not in {commands}")
entry = entries[0]
args = entry.get("arguments") or shlex.split(entry["command"])
with tempfile.TemporaryDirectory() as scratch:
    out = os.path.join(scratch, "object.o")
    cleaned, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        cleaned.append(a)
    # The extra flags go before the source: the last -I wins nothing, the first found header does.
    cmd = cleaned[:1] + extra + cleaned[1:] + ["-o", out]
    print(" ".join(shlex.quote(c) for c in cmd), flush=True)
    sys.exit(subprocess.run(cmd, cwd=entry["directory"]).returncode)
