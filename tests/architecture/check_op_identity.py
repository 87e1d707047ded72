#!/usr/bin/env python3
"""Op identity is typed (docs/architecture.md "Adding an op"): checked on core/, io/, apps/, bench/.

  1. No step kind is parsed from a step's label: Program::Step carries its StepKind.
  2. No op kind is recognised by its name string outside the file that defines it (make_op_kind):
     code compares OpDef pointers (OpKind::is) or reads OpTraits, never `kind() == "softmax"`.
Usage: check_op_identity.py REPO_ROOT   (exit status 1 and one line per violation when broken)
"""
import os
import re
import sys

DEFINE = re.compile(r'make_op_kind<[^>]*>\(\s*"([^"]+)"')
LABEL_PARSE = [
    re.compile(r'\.what\s*\.\s*(r?find|substr|compare)\s*\('),
    re.compile(r'(what|label|step)\w*(\(\))?\s*(\.|->)\s*substr\(\s*0\s*,'),
]
# A literal compared with, or used to look up, an op kind or a counter keyed by kind.
NAME_USE = re.compile(
    r'(kind\(\)|def->name|\.name\(\))\)?\s*[!=]=\s*"([^"]+)"'
    r'|"([^"]+)"\s*[!=]=\s*[\w.>()-]*(kind\(\)|def->name|\.name\(\))'
    r'|strcmp\([^;]*(kind\(\)|def->name)[^;]*"([^"]+)"'
    r'|(op_calls|op_bytes|time_by_kind\(\))\s*(\.at|\.count|\.find)?\s*[\[(]\s*"([^"]+)"')


def sources(root):
    for top in ("core", "io", "apps", "bench"):
        for base, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".cpp", ".hpp")):
                    yield os.path.join(base, f)


def main(root):
    defined = {}  # kind name -> defining file
    texts = {}
    for path in sources(root):
        with open(path, encoding="utf-8") as f:
            texts[path] = f.read()
        for name in DEFINE.findall(texts[path]):
            defined[name] = path
    problems = []
    for path, text in texts.items():
        rel = os.path.relpath(path, root)
        for n, line in enumerate(text.splitlines(), 1):
            code = line.split("//", 1)[0]
            for rx in LABEL_PARSE:
                if rx.search(code):
                    problems.append(f"{rel}:{n}: step kind parsed from a label: {line.strip()}")
            for m in NAME_USE.finditer(code):
                name = next((g for g in m.groups() if g and g in defined), None)
                if name and defined[name] != path:
                    problems.append(f"{rel}:{n}: op kind '{name}' recognised by its name "
                                    f"(defined in {os.path.relpath(defined[name], root)}): "
                                    f"{line.strip()}")
    if not defined:
        problems.append("no make_op_kind found: the check looks in the wrong place")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
