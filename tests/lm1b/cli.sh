#!/usr/bin/env bash
# Every tool and subcommand answers --help and --version on stdout with exit 0 (once, from rank 0,
# under mpiexec), accepts `--opt=value` as well as `--opt value`, and exits 2 with a message on
# stderr for a bad option, a bad value or a missing argument.
#   cli.sh MTK_LM1B MTK_CKPT MTK_LAYOUT MTK_MESH_DEMO CONFIG
set -uo pipefail
lm1b="$1" ckpt="$2" layout="$3" demo="$4" config="$5"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mpi_timeout=120
source "$here/harness.sh"

# run EXPECTED_STATUS COMMAND...: runs it (1 process, with a timeout), checks the status; leaves
# its output in out.txt and err.txt.
run() {
  local want="$1"; shift
  timeout 60 "$@" > out.txt 2> err.txt
  local got=$?
  [ "$got" -eq "$want" ] || { cat out.txt err.txt; fail "exit $got, expected $want: $*"; }
}
commands=("$lm1b" "$lm1b prepare" "$lm1b train" "$lm1b eval" "$lm1b sample" "$ckpt" "$ckpt info"
          "$ckpt verify" "$ckpt list" "$layout" "$layout search" "$layout calibrate" "$demo")
for c in "${commands[@]}"; do
  # shellcheck disable=SC2086
  run 0 $c --help
  grep -q "^Usage: " out.txt || { cat out.txt; fail "$c --help printed no usage on stdout"; }
  [ ! -s err.txt ] || { cat err.txt; fail "$c --help wrote to stderr"; }
  # shellcheck disable=SC2086
  run 0 $c -h
  grep -q "^Usage: " out.txt || fail "$c -h printed no usage"
  # shellcheck disable=SC2086
  run 0 $c --version
  grep -q "(MTK [0-9][0-9.]*)" out.txt || { cat out.txt; fail "$c --version printed no MTK version"; }
  grep -q "^Kokkos [0-9.]* (" out.txt || { cat out.txt; fail "$c --version printed no Kokkos backend"; }
  grep -q "^MPI: ." out.txt || { cat out.txt; fail "$c --version printed no MPI library"; }
  grep -Eq "^  MTK_BF16_GEMM=[a-z]+ \((set|default)\)$" out.txt || { cat out.txt; fail "$c --version printed no run-time options"; }
  [ ! -s err.txt ] || { cat err.txt; fail "$c --version wrote to stderr"; }
  # shellcheck disable=SC2086
  run 2 $c --no-such-option
  [ -s err.txt ] || fail "$c --no-such-option: no message on stderr"
  [ ! -s out.txt ] || { cat out.txt; fail "$c --no-such-option wrote to stdout"; }
  echo "ok: $c --help, -h, --version, bad option"
done
grep -q "prepare" <("$lm1b" --help) || fail "mtk-lm1b --help does not list its commands"
grep -q "verify" <("$ckpt" --help) || fail "mtk-ckpt --help does not list its commands"

# Several ranks: one copy of the help, exit 0 everywhere.
mpirun -n 2 "$lm1b" train --help > out.txt 2> err.txt || fail "mpiexec -n 2 mtk-lm1b train --help"
[ "$(grep -c '^Usage: ' out.txt)" -eq 1 ] || { cat out.txt; fail "help printed $(grep -c '^Usage: ' out.txt) times on 2 ranks"; }
mpirun -n 2 "$ckpt" --version > out.txt 2> err.txt || fail "mpiexec -n 2 mtk-ckpt --version"
[ "$(grep -c '(MTK ' out.txt)" -eq 1 ] || fail "--version printed more than once on 2 ranks"
mpirun -n 2 "$lm1b" train --config "$config" --bogus > out.txt 2> err.txt
[ $? -eq 2 ] || fail "mpiexec -n 2 ... --bogus: not exit 2"

# --opt=value and --opt value alike; repeated --set.
run 0 "$lm1b" train --config="$config" --print-config --set=train.steps=7 --set train.seed=9 --mesh=batch:1
grep -q "steps: 7" out.txt || { cat out.txt; fail "--set=train.steps=7 not in --print-config"; }
grep -q "seed: 9" out.txt || { cat out.txt; fail "--set train.seed=9 not in --print-config"; }
grep -q "mesh: batch:1" out.txt || { cat out.txt; fail "--mesh=batch:1 not in --print-config"; }
run 0 "$lm1b" eval --config "$config" --print-config
grep -q "^model:" out.txt || fail "eval --print-config printed no model section"
run 0 "$layout" --set=model.vocab_size=64 --set model.d_model=16 --mesh=all:1 --optimizer=sgd
grep -q "^parameters: " out.txt || { cat out.txt; fail "mtk-layout --opt=value"; }
run 0 "$demo" --mesh=all:1
grep -q "mesh demo: OK" out.txt || fail "mtk-mesh-demo --mesh=all:1"

# Usage errors: exit 2 and a message naming the problem.
expect_usage() {  # expect_usage PATTERN COMMAND...
  local pattern="$1"; shift
  run 2 "$@"
  grep -q -- "$pattern" err.txt || { cat err.txt; fail "message lacks '$pattern': $*"; }
}
expect_usage "command is required" "$lm1b"
expect_usage "bogus" "$lm1b" bogus
expect_usage "config is required" "$lm1b" train
expect_usage "'abc' is not a number > 0" "$lm1b" eval --config "$config" --logit-scale abc
expect_usage "'-1' is not a number > 0" "$lm1b" eval --config "$config" --logit-scale=-1
expect_usage "'x' is not an integer" "$lm1b" sample --config "$config" --tokens x
expect_usage "'0' is not an integer" "$lm1b" sample --config "$config" --tokens=0
expect_usage "'many' is not an integer" "$lm1b" prepare --data d --out o --vocab-size=many
expect_usage "out is required" "$lm1b" prepare --data d
expect_usage "--config: 1 required FILE missing" "$lm1b" train --config
expect_usage "PATH is required" "$ckpt" info
expect_usage "subcommand" "$ckpt"
expect_usage "adagrad" "$layout" --optimizer adagrad
echo "1 passed, 0 failed"
