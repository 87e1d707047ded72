#!/usr/bin/env python3
"""kokkos_cuda13_fixes.py KOKKOS_SRC ARCH CUDA_MAJOR: makes a scratch copy of Kokkos 4.6.x compile against
CUDA 13 (docs/building.md#cuda). Three calls in core/src/Cuda/Kokkos_Cuda_Instance.hpp use
signatures CUDA 13 removed, and bin/nvcc_wrapper defaults to sm_70, which CUDA 13 no longer
compiles for. A tree that already has the new forms is left as it is; a tree with neither form
is an error naming the call, so a changed Kokkos is noticed, not half-patched. Before CUDA 13
(CUDA_MAJOR < 13) the old signatures are the right ones: nothing is changed."""
import re
import sys

ARCHES = {"HOPPER90": "sm_90", "AMPERE80": "sm_80", "AMPERE86": "sm_86", "ADA89": "sm_89",
          "BLACKWELL100": "sm_100", "BLACKWELL120": "sm_120"}

src, arch, cuda_major = sys.argv[1], sys.argv[2], int(sys.argv[3])
if cuda_major < 13:
    print(f"kokkos_cuda13_fixes: CUDA {cuda_major}: Kokkos compiles as released, nothing changed")
    sys.exit(0)
path = f"{src}/core/src/Cuda/Kokkos_Cuda_Instance.hpp"
text = open(path).read()
fixes = [
    ("cudaGraphAddDependencies",
     "cudaGraphAddDependencies(graph, from, to, numDependencies)",
     "cudaGraphAddDependencies(graph, from, to, nullptr, numDependencies)"),
    ("cudaMemAdvise",
     "cudaMemAdvise(devPtr, count, advice, device)",
     "cudaMemAdvise(devPtr, count, advice, cudaMemLocation{cudaMemLocationTypeDevice, device})"),
    ("cudaMemPrefetchAsync",
     "cudaMemPrefetchAsync(devPtr, count, dstDevice,\n                                get_input_stream(stream))",
     "cudaMemPrefetchAsync(devPtr, count,\n                                cudaMemLocation{cudaMemLocationTypeDevice, dstDevice},\n"
     "                                0, get_input_stream(stream))"),
]
for name, old, new in fixes:
    if old in text:
        text = text.replace(old, new)
    elif new not in text:
        sys.exit(f"kokkos_cuda13_fixes: {path}: the {name} call has neither the Kokkos 4.6.01 form "
                 f"nor the CUDA 13 one; fix it by hand (docs/building.md#cuda)")
open(path, "w").write(text)

wrapper = f"{src}/bin/nvcc_wrapper"
w = open(wrapper).read()
if arch not in ARCHES:
    sys.exit(f"kokkos_cuda13_fixes: no sm_ value known for Kokkos arch {arch}; "
             f"known: {', '.join(sorted(ARCHES))}")
w = re.sub(r'^default_arch="sm_[0-9]+"', f'default_arch="{ARCHES[arch]}"', w, count=1,
           flags=re.M)
open(wrapper, "w").write(w)
print(f"kokkos_cuda13_fixes: {path} takes CUDA 13's signatures; nvcc_wrapper defaults to "
      f"{ARCHES[arch]}")
