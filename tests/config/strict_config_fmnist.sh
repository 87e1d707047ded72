#!/usr/bin/env bash
# mtk-fmnist's config (issue 64): a key given twice, a dotted key inside a section and a number
# that is not finite are errors naming the file, the key (and lines or value), before any data is
# read.
#   strict_config_fmnist.sh MTK_FMNIST WORK_DIR
set -u
fmnist=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
# expect CONFIG_TEXT PATTERN [ARGS...]: mtk-fmnist fails with PATTERN in its output.
expect() {
  local text="$1" pattern="$2"; shift 2
  printf '%b' "$text" > "$work/c.yaml"
  timeout 60 "$fmnist" train --config "$work/c.yaml" --data-dir "$work/no-data" "$@" > "$work/log" 2>&1 &&
    fail "accepted: $text $*"
  grep -q -- "$pattern" "$work/log" || fail "output lacks '$pattern': $(cat "$work/log")"
  echo "ok: $(head -1 "$work/log")"
}
expect 'train:\n  steps: 20\n  steps: 3\n' "c.yaml: key 'train.steps' is given twice, at line 2 and at line 3"
expect 'model: {c1: 8}\ntrain: {steps: 2}\nmodel: {c1: 16}\n' "key 'model' is given twice, at line 1 and at line 3"
expect 'train: {"lr.value": 0.5}\n' "key 'lr.value' in 'train' (line 1) has a '.'"
expect 'train: {lr: .nan}\n' "train.lr = .nan is not a number in"
expect 'train: {steps: 2}\n' "train.lr = .inf is not a number in" --set train.lr=.inf
