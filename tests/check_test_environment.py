#!/usr/bin/env python3
"""Checks the thread environment of registered tests (cmake/MTKTesting.cmake, issue 15 item 7).

    check_test_environment.py CMAKE CTEST SOURCE_DIR BUILD_DIR THREADS CORES SCRATCH

1. Every test of the build at BUILD_DIR (`ctest --show-only=json-v1`): OMP_NUM_THREADS=THREADS and
   OPENBLAS_NUM_THREADS=1 in its environment; PROCESSORS = ranks x THREADS for the `_np<N>` tests
   and a multiple of THREADS for the others; OMP_WAIT_POLICY=passive when PROCESSORS > CORES.
2. A scratch project that includes cmake/MTKTesting.cmake, configured with MTK_TEST_THREADS=3 and
   then with OMP_NUM_THREADS=2 in the environment only: the same rules hold for its tests at
   1, 2, 4 and 8 ranks (so a threaded setting really reaches the tests).
"""
import json
import os
import re
import shutil
import subprocess
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def tests_of(ctest, build_dir):
    out = subprocess.run([ctest, "--show-only=json-v1"], cwd=build_dir, check=True,
                         capture_output=True, text=True).stdout
    result = {}
    for t in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        result[t["name"]] = (int(props.get("PROCESSORS", 1)), props.get("ENVIRONMENT", []))
    return result


def check(tests, threads, cores, where):
    if not tests:
        fail(f"{where}: no tests registered")
    for name, (procs, env) in tests.items():
        env = set(env)
        for want in (f"OMP_NUM_THREADS={threads}", "OPENBLAS_NUM_THREADS=1"):
            if want not in env:
                fail(f"{where}: test {name} lacks {want} (environment {sorted(env)})")
        m = re.search(r"_np(\d+)$", name)
        if m and procs != int(m.group(1)) * threads:
            fail(f"{where}: test {name} has PROCESSORS {procs}, want {m.group(1)} ranks x "
                 f"{threads} threads")
        if procs % threads:
            fail(f"{where}: test {name} has PROCESSORS {procs}, not a multiple of {threads}")
        if procs > cores and "OMP_WAIT_POLICY=passive" not in env:
            fail(f"{where}: test {name} uses {procs} processors on {cores} cores without "
                 f"OMP_WAIT_POLICY=passive (environment {sorted(env)})")
    print(f"ok: {where}: {len(tests)} tests, {threads} thread(s) per rank, {cores} cores")


def scratch_project(cmake, ctest, source_dir, scratch, threads_arg, env_threads, cores):
    shutil.rmtree(scratch, ignore_errors=True)
    src, build = os.path.join(scratch, "src"), os.path.join(scratch, "build")
    os.makedirs(src)
    with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
        f.write(f"""cmake_minimum_required(VERSION 3.16)
project(mtk_test_env_check LANGUAGES CXX)
set(MPIEXEC_EXECUTABLE /bin/true)
set(MPIEXEC_NUMPROC_FLAG -n)
function(mtk_target_warnings t)
endfunction()
add_library(mtk_mpi_test_main INTERFACE)
list(APPEND CMAKE_MODULE_PATH "{source_dir}/cmake")
include(MTKTesting)
enable_testing()
mtk_add_mpi_test(NAME fake SOURCES fake.cpp RANKS 1 2 4 8)
mtk_add_serial_test(NAME fake_serial SOURCES fake.cpp)
""")
    with open(os.path.join(src, "fake.cpp"), "w") as f:
        f.write("int main() { return 0; }\n")
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    if env_threads is not None:
        env["OMP_NUM_THREADS"] = str(env_threads)
    cmd = [cmake, "-S", src, "-B", build]
    if threads_arg is not None:
        cmd.append(f"-DMTK_TEST_THREADS={threads_arg}")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        fail("configuring the scratch project:\n" + r.stdout + r.stderr)
    want = threads_arg if threads_arg is not None else env_threads
    tests = tests_of(ctest, build)
    if sorted(tests) != ["fake_np1", "fake_np2", "fake_np4", "fake_np8", "fake_serial"]:
        fail(f"scratch project registered {sorted(tests)}")
    check(tests, want, cores, f"scratch project (threads {want})")


def main():
    cmake, ctest, source_dir, build_dir, threads, cores, scratch = sys.argv[1:8]
    threads, cores = int(threads), int(cores)
    check(tests_of(ctest, build_dir), threads, cores, "this build")
    scratch_project(cmake, ctest, source_dir, scratch, 3, None, cores)
    scratch_project(cmake, ctest, source_dir, scratch, None, 2, cores)


if __name__ == "__main__":
    main()
