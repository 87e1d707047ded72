#!/usr/bin/env python3
"""A skipped test is reported as skipped, never as passed (issue 64 item 12).

    check_test_skips.py CTEST SOURCE_DIR BUILD_DIR

1. No test script under SOURCE_DIR/tests (*.sh, *.py), nor a script elsewhere that a registered
   test runs (scripts/tidy), says it skips and then exits 0: a skip exits 77 (`exit 77`,
   `return 77`, `sys.exit(77)`).
2. Every registered test of the build at BUILD_DIR (`ctest --show-only=json-v1`) whose script, or a
   file that script sources, exits 77 has the property SKIP_RETURN_CODE 77, so ctest counts it as
   skipped (a 77 without it would be a failure; a 0 would be a pass that tested nothing).
"""
import json
import os
import re
import subprocess
import sys

SKIP_EXIT = re.compile(r"\b(exit|return)\s+77\b|sys\.exit\(\s*77\s*\)")
ZERO_EXIT = re.compile(r"\bexit\s+0\b|sys\.exit\(\s*0?\s*\)")
SOURCE = re.compile(r"^\s*(?:source|\.)\s+\"?(?:\$here|\$\(dirname \"\$0\"\)|\$\{here\})/([^\"\s]+)")


def code_lines(path):
    """The lines of `path` without comments (a '#' at the start or after a blank)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            yield number, re.split(r"(?:^|\s)#", line, maxsplit=1)[0]


def skips_that_pass(path):
    """Lines that mention a skip and exit 0 on the same line or the next one."""
    problems = []
    lines = list(code_lines(path))
    for i, (number, line) in enumerate(lines):
        if not re.search(r"skip", line, re.IGNORECASE):
            continue
        if "--skip" in line:
            continue  # an option of a tool under test, not a skip of the test
        window = line + (lines[i + 1][1] if i + 1 < len(lines) else "")
        if ZERO_EXIT.search(window) and not SKIP_EXIT.search(window):
            problems.append(f"{path}:{number}: skips with exit 0 (a pass): {line.strip()}")
    return problems


def sources(path, seen):
    """`path` and the scripts it sources through $here/... or $(dirname "$0")/..., recursively."""
    path = os.path.realpath(path)
    if path in seen or not os.path.isfile(path):
        return
    seen.add(path)
    for _, line in code_lines(path):
        m = SOURCE.match(line)
        if m:
            sources(os.path.join(os.path.dirname(path), m.group(1)), seen)


def is_script(arg):
    """A shell or Python script: *.sh / *.py, or a text file starting with '#!'."""
    if not os.path.isfile(arg):
        return False
    if arg.endswith((".sh", ".py")):
        return True
    try:
        with open(arg, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def exits_77(path):
    seen = set()
    sources(path, seen)
    return any(SKIP_EXIT.search(line) for p in seen for _, line in code_lines(p))


def main():
    ctest, source_dir, build_dir = sys.argv[1:4]
    problems = []
    scripts = 0
    for root, _, files in os.walk(os.path.join(source_dir, "tests")):
        for name in files:
            if name.endswith((".sh", ".py")) and name != os.path.basename(__file__):
                scripts += 1
                problems += skips_that_pass(os.path.join(root, name))

    out = subprocess.run([ctest, "--show-only=json-v1"], cwd=build_dir, check=True,
                         capture_output=True, text=True).stdout
    tests = json.loads(out)["tests"]
    skipping = 0
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        for arg in t.get("command", []):
            if os.path.realpath(arg) == os.path.realpath(__file__):
                continue  # this checker names the codes it looks for
            if not is_script(arg):
                continue
            if not arg.startswith(os.path.join(source_dir, "tests") + os.sep):
                problems += skips_that_pass(arg)  # a script outside tests/ that a test runs
            if exits_77(arg):
                skipping += 1
                if str(props.get("SKIP_RETURN_CODE", "")) != "77":
                    problems.append(f"test {t['name']}: {arg} exits 77 to skip, but the test "
                                    f"lacks SKIP_RETURN_CODE 77 (it would fail instead)")
                break
    if not tests:
        problems.append(f"no tests registered in {build_dir}")
    if problems:
        print("FAIL:\n" + "\n".join(problems))
        sys.exit(1)
    print(f"ok: {scripts} test scripts, none skips with exit 0; {skipping} of {len(tests)} "
          f"registered tests can skip, each with SKIP_RETURN_CODE 77")


if __name__ == "__main__":
    main()
