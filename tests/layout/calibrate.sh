#!/usr/bin/env bash
# `mtk-layout calibrate` end to end on 2 and 4 ranks: the machine file it writes loads, has every
# measured part (matmul by size, elementwise rates by step kind, allreduce time by size per link
# level, neighbour exchange time by size and whether it goes through shared memory, the halo
# packing rates, the bf16 rate and every matmul backend, skinny products and patch kernels, a
# strided level on 4 ranks, the collectives' wait policy), and `mtk-layout search` ranks layouts
# with it.
#   calibrate.sh MTK_LAYOUT MPIEXEC CONFIG WORKDIR
set -euo pipefail
LAYOUT=$1 MPIEXEC=$2 CONFIG=$3 WORK=$4
rm -rf "$WORK" && mkdir -p "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
for np in 2 4; do
  file=$WORK/machine-$np.yaml
  timeout 300 "$MPIEXEC" -n "$np" "$LAYOUT" calibrate --matmul-size 32 --reps 1 --name "test $np" \
    --out "$file" >"$WORK/calibrate-$np.out" 2>&1 || fail "calibrate on $np ranks: $(tail -5 "$WORK/calibrate-$np.out")"
  for key in 'name: "test '"$np"'"' 'matmul_sizes:' 'elementwise_by_kind:' '  binary: ' '  unary: ' \
      '  reduce: ' "group: 2" 'allreduce_sizes:' 'halo_sizes:' 'size9: {bytes: 8388608' \
      'Collective waits: ' '# Matmul backends on [32, 32]' '#   fastest for float32: ' \
      '#   fastest for bfloat16: ' 'matmul_narrow:' '  outer:' '  inner:' '  extract_patches: ' \
      '  fold_patches: '; do
    grep -qF -- "$key" "$file" || fail "$np ranks: '$key' missing from $file"
  done
  # bf16 einsums run on every CPU (natively or through the fp32 gemm): a rate, never 0.
  grep -qE '^matmul_bf16_flops: [1-9]' "$file" || fail "$np ranks: no bf16 matmul rate in $file"
  [ "$(grep -c 'size9: {bytes: 8388608' "$file")" -ge 2 ] || fail "$np ranks: allreduce and halo sizes up to 8 MiB"
  # Ranks of one node exchange halos through shared slots: the level says so, and the finish
  # kinds' packing rates were measured.
  grep -q "halo_by_copies: true" "$file" || fail "$np ranks: no level with halo_by_copies"
  grep -qE '^  halo_exchange: [1-9]' "$file" || fail "$np ranks: no halo_exchange rate"
  grep -qE '^  halo_reduce: [1-9]' "$file" || fail "$np ranks: no halo_reduce rate"
  if [ "$np" = 4 ]; then
    grep -q "stride: 2" "$file" || fail "4 ranks: no strided level"
    grep -q "group: 4" "$file" || fail "4 ranks: no level measured on groups of 4"
  fi
  timeout 300 "$LAYOUT" search --config "$CONFIG" --processors "$np" --machine "$file" --top 3 \
    >"$WORK/search-$np.out" 2>&1 || fail "search with the $np-rank file: $(tail -5 "$WORK/search-$np.out")"
  grep -q '^best: --mesh' "$WORK/search-$np.out" || fail "search printed no best choice"
  echo "ok: calibrate on $np ranks, search with its file"
done
