#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's CMake snippet (between `<!-- readme-snippet: find-package` and
# `<!-- /readme-snippet -->`) builds against a scratch install of this build tree and the program
# runs: the snippet's find_package(MTK X.Y) must accept project()'s version. Also checks that the
# install carries the licence (share/doc/mtk/LICENSE, NOTICE, CHANGELOG.md).
#   readme_snippet.sh CMAKE BUILD_DIR SOURCE_DIR WORK_DIR VERSION
set -euo pipefail
cmake="$1" build="$2" src="$3" work="$4" version="$5"
fail() { echo "readme_snippet: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/project"
prefix="$work/prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || fail "cmake --install failed ($work/install.log)"
for f in LICENSE NOTICE CHANGELOG.md; do
  cmp -s "$src/$f" "$prefix/share/doc/mtk/$f" || fail "share/doc/mtk/$f is missing or differs from $f"
done
grep -q "^## \[$version\]" "$src/CHANGELOG.md" || fail "CHANGELOG.md has no '## [$version]' section"

# The fenced block after the opening marker, up to the closing one.
awk '/<!-- readme-snippet: find-package/ {on = 1; next} /<!-- \/readme-snippet -->/ {on = 0}
     on && !/^```/ {print}' "$src/README.md" >"$work/project/CMakeLists.txt"
grep -q 'find_package(MTK' "$work/project/CMakeLists.txt" ||
  fail "README.md has no find_package(MTK ...) snippet between the readme-snippet markers"
cat >"$work/project/main.cpp" <<'CPP'
#include <mtk/version.hpp>

#include <cstdio>

int main() {
  std::printf("MTK %s\n", mtk::version());
  return 0;
}
CPP
"$cmake" -S "$work/project" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "the README's snippet does not configure against MTK $version"; }
"$cmake" --build "$work/build" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build failed"; }
out="$("$work/build/my_app")" || fail "my_app failed"
[ "$out" = "MTK $version" ] || fail "my_app printed '$out', not 'MTK $version'"
echo "readme_snippet: OK (the README's snippet built against MTK $version in $prefix)"
