#!/usr/bin/env bash
# Installs the built MTK into a scratch prefix, then builds examples/ as a separate CMake project
# that finds it with find_package(MTK REQUIRED) and runs every example on 2 ranks.
#   install_and_examples.sh CMAKE BUILD_DIR EXAMPLES_DIR WORK_DIR MPIEXEC
set -euo pipefail
cmake="$1" build="$2" examples="$3" work="$4" mpiexec="$5"
rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"
# What a user gets: libraries, headers (no impl/), the package files, layouts and configs.
for f in include/mtk/mtk.hpp include/mtk/io.hpp include/mtk/version.hpp \
         include/mtk/graph/graph.hpp lib/cmake/MTK/MTKConfig.cmake \
         lib/cmake/MTK/MTKConfigVersion.cmake lib/cmake/MTK/MTKTargets.cmake \
         share/mtk/layouts/paper-2d.yaml share/mtk/apps/lm1b/configs/demo.yaml; do
  [ -e "$prefix/$f" ] || { echo "install_and_examples: $f was not installed" >&2; exit 1; }
done
if find "$prefix/include" -path '*/impl/*' | grep -q .; then
  echo "install_and_examples: internal impl/ headers were installed" >&2
  exit 1
fi
"$cmake" -S "$examples" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/build" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
status=0
for exe in "$work"/build/mtk-example-*; do
  echo "== mpiexec -n 2 $(basename "$exe")"
  if ! "$mpiexec" -n 2 "$exe" "$work/run-$(basename "$exe")"; then
    echo "install_and_examples: $(basename "$exe") failed" >&2
    status=1
  fi
done
exit $status
