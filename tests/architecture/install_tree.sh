#!/usr/bin/env bash
# `cmake --install` into a scratch prefix gives everything the docs use: the applications, the
# version everywhere equal to project(), and share/mtk laid out as an MTK_ROOT (configs of every
# application, layouts, Slurm scripts, plot-metrics), so that the installed scripts run from it.
#   install_tree.sh CMAKE BUILD_DIR SOURCE_DIR WORK_DIR VERSION APPS(ON|OFF)
set -euo pipefail
cmake="$1" build="$2" src="$3" work="$4" version="$5" apps="$6"
fail() { echo "install_tree: $*" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || fail "cmake --install failed ($work/install.log)"
share="$prefix/share/mtk"

# Every file of these source directories is installed under share/mtk at the same path.
for dir in apps/lm1b/configs apps/wmt/configs apps/fmnist/configs layouts scripts/slurm scripts/lib; do
  [ -d "$share/$dir" ] || fail "share/mtk/$dir was not installed (cmake/MTKInstall.cmake)"
  while IFS= read -r f; do
    rel="${f#"$src"/}"
    [ -f "$share/$rel" ] || fail "share/mtk/$rel was not installed (source: $rel)"
    if [ -x "$f" ] && [ ! -x "$share/$rel" ]; then fail "share/mtk/$rel lost its execute bit"; fi
  done < <(find "$src/$dir" -type f)
done
for f in plot-metrics make-demo-corpus make-wmt-demo-corpus; do
  [ -x "$share/scripts/$f" ] || fail "share/mtk/scripts/$f is missing or not executable"
done
python3 "$share/scripts/plot-metrics" --help >/dev/null || fail "installed plot-metrics --help failed"

# The installed generate reads the installed configs and writes where it is told.
python3 "$share/scripts/slurm/generate" --out "$work/generated" --tasks-per-node 64 \
  >"$work/generate.log" 2>&1 || { cat "$work/generate.log"; fail "installed scripts/slurm/generate failed"; }
[ -f "$work/generated/paper_lm_3.sbatch" ] && [ -f "$work/generated/paper_tr_3.sbatch" ] ||
  fail "installed generate wrote no paper_lm_3.sbatch / paper_tr_3.sbatch into $work/generated"

# One version: MTKConfigVersion.cmake and <mtk/version.hpp> say project()'s.
grep -q "PACKAGE_VERSION \"$version\"" "$prefix/lib/cmake/MTK/MTKConfigVersion.cmake" ||
  fail "lib/cmake/MTK/MTKConfigVersion.cmake does not say version $version"
grep -q "MTK_VERSION_STRING \"$version\"" "$prefix/include/mtk/version.hpp" ||
  fail "include/mtk/version.hpp does not say version $version"

if [ "$apps" = ON ]; then
  for exe in mtk-lm1b mtk-wmt mtk-fmnist mtk-ckpt mtk-layout mtk-mesh-demo; do
    [ -x "$prefix/bin/$exe" ] || fail "bin/$exe was not installed"
  done
  out="$("$prefix/bin/mtk-layout" --version 2>&1)" || fail "installed mtk-layout --version failed: $out"
  case "$out" in
    *"(MTK $version)"*) ;;
    *) fail "mtk-layout --version says '$out', not MTK $version" ;;
  esac
fi
echo "install_tree: OK ($prefix)"
