#!/usr/bin/env python3
"""MTK's layering rules (docs/architecture.md), checked on every #include <mtk/...> in the tree.

  1. A concept may include only its own layer or lower ones:
       base < kernels < parallel < graph < runtime < lower < ops < autodiff   (MTK::engine)
       < optim < nn < {cost, decode}                                (MTK::models)
       < files < signals, metrics, config, data, text < checkpoint < app   (MTK::io)
     The compiler sits above its runtime: lower/ (lower(), analyze() and the passes over the
     steps) may include runtime/ (Program, its buffers, counters, collectives in flight), never the
     reverse.
  2. impl/ headers are private to their concept: only files of the same concept include them.
  3. Public headers of core/ never include io/ concepts, and no header of core/ or io/ includes a
     third-party I/O library (yaml-cpp, HDF5, SentencePiece, nlohmann-json, OpenSSL): those stay
     inside io's sources.
Usage: check_layers.py [--counts] REPO_ROOT   (exit status 1 and one line per violation when broken;
       --counts also prints each folder-to-folder include arrow with its number of #include lines)
"""
import os
import re
import sys

LAYERS = {
    "base": 0, "kernels": 1, "parallel": 2, "graph": 3, "runtime": 4, "lower": 5, "ops": 6,
    "autodiff": 7, "optim": 8, "nn": 9, "cost": 10, "decode": 10,
    "files": 11, "signals": 12, "metrics": 12, "config": 12, "data": 12, "text": 12, "checkpoint": 13,
    "app": 14, "version.hpp": 0, "mtk.hpp": 14, "io.hpp": 14,
}
THIRD_PARTY = re.compile(r'#\s*include\s*[<"](yaml-cpp/|hdf5|H5|sentencepiece|nlohmann/|openssl/)')
INCLUDE = re.compile(r'#\s*include\s*<mtk/([^>]+)>')


def concept_of(path):
    """('core', 'graph') for core/mtk/graph/graph.cpp; None outside core/mtk and io/mtk."""
    parts = path.split(os.sep)
    for lib in ("core", "io"):
        if len(parts) >= 3 and parts[0] == lib and parts[1] == "mtk":
            return lib, parts[2]
    return None


def main(root, counts=False):
    errors = []
    arrows = {}  # (from concept, to concept) -> #include lines, between different folders
    for lib in ("core", "io"):
        for dirpath, _, files in os.walk(os.path.join(root, lib, "mtk")):
            for name in files:
                if not name.endswith((".hpp", ".cpp")):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, root)
                owner = concept_of(rel)
                if owner is None:
                    continue
                _, concept = owner
                if concept not in LAYERS:
                    errors.append(f"{rel}: concept folder '{concept}' has no layer in {__file__}")
                    continue
                public_header = name.endswith(".hpp") and f"{os.sep}impl{os.sep}" not in rel
                with open(full, encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        if public_header and THIRD_PARTY.search(line):
                            errors.append(f"{rel}:{lineno}: public header includes a third-party "
                                          f"I/O library: {line.strip()}")
                        m = INCLUDE.search(line)
                        if not m:
                            continue
                        target = m.group(1)
                        dep = target.split("/")[0]
                        if dep != concept and not (concept + dep).count(".hpp"):  # folders only
                            arrows[(concept, dep)] = arrows.get((concept, dep), 0) + 1
                        if dep not in LAYERS:
                            errors.append(f"{rel}:{lineno}: includes <mtk/{target}>, an unknown concept")
                            continue
                        if LAYERS[dep] > LAYERS[concept]:
                            errors.append(f"{rel}:{lineno}: '{concept}' (layer {LAYERS[concept]}) "
                                          f"includes <mtk/{target}> of higher layer '{dep}' "
                                          f"({LAYERS[dep]})")
                        if "/impl/" in target and dep != concept:
                            errors.append(f"{rel}:{lineno}: includes <mtk/{target}>, an internal "
                                          f"header of another concept")
                        if public_header and "/impl/" in target:
                            errors.append(f"{rel}:{lineno}: public header includes internal "
                                          f"<mtk/{target}> (it would not be installed)")
    for e in errors:
        print(e)
    if counts:
        for (src, dst), n in sorted(arrows.items(), key=lambda a: (LAYERS.get(a[0][0], 99), a[0])):
            print(f"{src} -> {dst}: {n}")
        folders = {c for arrow in arrows for c in arrow}
        print(f"check_layers: {len(folders)} folders, {len(arrows)} arrows, "
              f"{sum(arrows.values())} #include lines between folders")
    print(f"check_layers: {len(errors)} violation(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--counts"]
    sys.exit(main(args[0] if args else ".", counts="--counts" in sys.argv[1:]))
