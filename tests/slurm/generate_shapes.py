#!/usr/bin/env python3
"""scripts/slurm/generate for other machines, without Slurm: 32, 48, 64 and 128 tasks per node and
4 and 8 GPUs per node, written to a scratch directory while the tracked scripts stay as they are.
Every script's nodes x ranks per node is its config's mesh, no node holds more ranks than asked,
model-parallel groups share a node or span whole nodes, GPU scripts ask one GPU per rank; meshes
that cannot fill nodes get a note with the nearest shapes that do; a block-style `mesh:` and a
string mesh are read (PyYAML); one bad config is reported and the others are still written.
  generate_shapes.py MTK_SOURCE_DIR"""
import hashlib
import glob
import math
import os
import re
import subprocess
import sys
import tempfile

import yaml

root = sys.argv[1]
gen = os.path.join(root, "scripts/slurm/generate")
failures = []


def check(ok, what, log=""):
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok or not log else "\n" + log))
    if not ok:
        failures.append(what)


def run(*args):
    p = subprocess.run([sys.executable, gen, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def tracked():
    return {f: hashlib.sha256(open(f, "rb").read()).hexdigest()
            for f in sorted(glob.glob(os.path.join(root, "scripts/slurm/*")))}


def mesh_of(config):
    mesh = yaml.safe_load(open(config))["mesh"]
    if isinstance(mesh, str):
        mesh = {k: int(v) for k, v in (p.split(":") for p in mesh.split(";"))}
    return mesh


def sbatch(text, key):
    m = re.search(rf"^#SBATCH --{key}=(\S+)$", text, re.M)
    return m.group(1) if m else None


def check_scripts(out, want, gpus, cpus):
    configs = sorted(glob.glob(os.path.join(root, "apps/lm1b/configs/paper_lm_*.yaml")) +
                     glob.glob(os.path.join(root, "apps/wmt/configs/paper_tr_*.yaml")))
    for config in configs:
        name = os.path.basename(config)[:-5]
        path = os.path.join(out, name + ".sbatch")
        if not os.path.exists(path):
            check(False, f"{path} written")
            continue
        text = open(path).read()
        mesh = mesh_of(config)
        tasks = math.prod(mesh.values())
        nodes, per_node = int(sbatch(text, "nodes")), int(sbatch(text, "ntasks-per-node"))
        model = mesh.get("model", 1)
        app = "mtk_wmt" if "/wmt/" in config else "mtk_lm1b"
        ok = (nodes * per_node == tasks and per_node <= want and
              (per_node % model == 0 or model % per_node == 0) and
              sbatch(text, "cpus-per-task") == str(cpus) and
              sbatch(text, "gpus-per-node") == (str(per_node) if gpus else None) and
              f'mtk_train "${app}" train --config "$mtk_root/' in text and
              f'export MTK_ROOT="${{MTK_ROOT:-{root}}}"' in text and
              subprocess.run(["bash", "-n", path]).returncode == 0)
        check(ok, f"{os.path.basename(out)}/{name}: mesh {mesh} -> {nodes} x {per_node}"
                  f"{' GPUs' if gpus else ''}, {cpus} core(s) per rank")


before = tracked()
with tempfile.TemporaryDirectory() as tmp:
    for n in (32, 48, 64, 128):
        out = os.path.join(tmp, f"cpu{n}")
        rc, log = run("--tasks-per-node", str(n), "--out", out)
        check(rc == 0, f"generate --tasks-per-node {n} --out DIR: exit {rc}", log)
        check_scripts(out, n, False, 1)
        rc, log = run("--tasks-per-node", str(n), "--out", out, "--check")
        check(rc == 0, f"generate --tasks-per-node {n} --check on its own output: exit {rc}")
        if n == 48:  # 128 ranks cannot fill nodes of 48: the nearest shapes that can
            check("paper_lm_3.sbatch: batch:16;model:8 -> 4 x 32\n  note: 128 ranks do not fill "
                  "nodes of 48 tasks: written as 4 nodes x 32 tasks (32 of 48 task slots per node "
                  "used); tasks per node that fill whole nodes: 32 (4 nodes) or 64 (2 nodes)" in log,
                  "48 tasks per node: paper_lm_3 on 4 x 32, a note with the nearest shapes that "
                  "fill nodes", log)
    for g in (4, 8):
        out = os.path.join(tmp, f"gpu{g}")
        rc, log = run("--gpus-per-node", str(g), "--out", out)
        check(rc == 0, f"generate --gpus-per-node {g} --out DIR: exit {rc}", log)
        check_scripts(out, g, True, 4)
    out = os.path.join(tmp, "gpu8c16")
    rc, log = run("--gpus-per-node", "8", "--cpus-per-task", "16", "--out", out)
    check(rc == 0, "generate --gpus-per-node 8 --cpus-per-task 16", log)
    check_scripts(out, 8, True, 16)

    # Other shapes never go to the tracked directory.
    rc, log = run("--tasks-per-node", "48")
    check(rc == 2 and "--out DIR" in log, f"a non-default shape without --out is refused (exit {rc})",
      log)

    # Block-style and string meshes through the YAML parser; a bad mesh does not stop the others.
    cfg = os.path.join(tmp, "cfg")
    os.makedirs(cfg)
    open(os.path.join(cfg, "block.yaml"), "w").write(
        "# block style\nmesh:\n  batch: 4\n  model: 2  # last\nmodel: {d_model: 8}\n")
    open(os.path.join(cfg, "text.yaml"), "w").write('mesh: "batch:3;model:2"\n')
    open(os.path.join(cfg, "bad.yaml"), "w").write("mesh: {batch: two}\n")
    out = os.path.join(tmp, "own")
    rc, log = run("--tasks-per-node", "4", "--out", out, "--app", "mtk-wmt", "--config",
                  *(os.path.join(cfg, f) for f in ("bad.yaml", "block.yaml", "text.yaml")))
    check(rc == 1 and "skipped bad: " in log and "cannot read mesh dimension batch: 'two'" in log,
          "a bad config is reported and makes the exit 1", log)
    block = open(os.path.join(out, "block.sbatch")).read()
    check(sbatch(block, "nodes") == "2" and sbatch(block, "ntasks-per-node") == "4" and
          '"$mtk_wmt" train' in block and os.path.join(cfg, "block.yaml") in block,
          "a block-style mesh: 2 nodes x 4 ranks of mtk-wmt")
    text = open(os.path.join(out, "text.sbatch")).read()
    check(sbatch(text, "nodes") == "3" and sbatch(text, "ntasks-per-node") == "2" and
          "tasks per node that fill whole nodes: 2 (3 nodes) or 6 (1 node)" in log,
          "a string mesh of 6 on nodes of 4: 3 x 2, and the nearest shapes")

check(tracked() == before, "the tracked scripts/slurm/* are unchanged")
rc, log = run("--check")
check(rc == 0, "generate --check on the tracked scripts")
if failures:
    sys.exit(f"generate_shapes: {len(failures)} failure(s)")
print("generate_shapes: all shapes written as expected, tracked scripts untouched")
