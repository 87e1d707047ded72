#!/usr/bin/env bash
# Which MPI-IO a checkpoint save uses, as HDF5 reports it (H5Pget_mpio_actual_io_mode, printed
# by MTK_CKPT_TIMING=1): ranks spread over 2 nodes write collectively; ranks of one node
# independently (io/mtk/checkpoint/hdf5.cpp, write_fapl); MTK_CKPT_MPIIO overrides either way.
#   checkpoint_mpiio.sh SOURCE_DIR CKPT_WRITER     (inside scripts/testbed, 2 nodes)
set -euo pipefail
root="$1" writer="$2"
tb="$root/scripts/testbed"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MTK_CKPT_TIMING=1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# mode NAME PPN [ENV...]: the save's "mpiio=..." note from 2 ranks, PPN per node
mode() {
  local name=$1 ppn=$2
  shift 2
  env "$@" timeout 180 "$tb" mpiexec -n 2 -ppn "$ppn" "$writer" --run-dir "$work/$name" --steps 1 \
    --save-every 1 > "$work/$name.log" 2>&1 || { tail -5 "$work/$name.log"; fail "$name: the save failed"; }
  grep -o "mpiio=[^ ]*" "$work/$name.log" | tail -1
}
expect() {  # expect NAME GOT PATTERN
  echo "$1: $2"
  [[ "$2" =~ $3 ]] || fail "$1: expected $3, got '$2'"
}
expect "2 nodes x 1 rank" "$(mode across 1)" '^mpiio=collective\(hdf5:[a-z-]*collective\)$'
expect "1 node x 2 ranks" "$(mode one 2)" '^mpiio=independent\(hdf5:independent\)$'
expect "2 nodes, MTK_CKPT_MPIIO=independent" "$(mode across_ind 1 MTK_CKPT_MPIIO=independent)" \
  '^mpiio=independent\(hdf5:independent\)$'
expect "1 node, MTK_CKPT_MPIIO=collective" "$(mode one_coll 2 MTK_CKPT_MPIIO=collective)" \
  '^mpiio=collective\(hdf5:[a-z-]*collective\)$'
echo "checkpoint MPI-IO modes as expected"
