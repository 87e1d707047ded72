#!/usr/bin/env bash
# `mtk-wmt bleu` end to end: sacreBLEU's published two-reference case as text and JSON, .sgm
# references, --help, and unequal line counts as an error (exit 1, both counts named).
set -euo pipefail
wmt="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
printf '%s\n' "The dog bit the man." "It wasn't surprising." "The man had just bitten him." > "$dir/hyp"
printf '%s\n' "The dog bit the man." "It was not unexpected." "The man bit him first." > "$dir/ref1"
printf '%s\n' "The dog had bit the man." "No one was surprised." "The man had bitten the dog." > "$dir/ref2"
{
  echo '<refset setid="t" srclang="en" trglang="fr">'; echo '<doc docid="d" sysid="ref">'
  n=1; while IFS= read -r l; do echo "<seg id=\"$n\">$l</seg>"; n=$((n+1)); done < "$dir/ref1"
  echo '</doc>'; echo '</refset>'
} > "$dir/ref1.sgm"

out="$("$wmt" bleu "$dir/hyp" "$dir/ref1" "$dir/ref2")"
echo "$out"
expected="BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.3 = 48.53 "
[[ "$out" == "$expected"* ]] || { echo "FAIL: expected a line starting '$expected'"; exit 1; }
[[ "$out" == *"(BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)" ]] || { echo "FAIL: BP part"; exit 1; }

json="$("$wmt" bleu --json "$dir/hyp" "$dir/ref1" "$dir/ref2")"
echo "$json"
[[ "$json" == *'"score": 48.5308270099'* ]] || { echo "FAIL: JSON score"; exit 1; }

one="$("$wmt" bleu "$dir/hyp" "$dir/ref1")"
sgm="$("$wmt" bleu "$dir/hyp" "$dir/ref1.sgm")"
[ "$one" = "$sgm" ] || { echo "FAIL: .sgm reference scored differently: $sgm vs $one"; exit 1; }

help="$("$wmt" bleu --help)"
[[ "$help" == *"HYP"* ]] || { echo "FAIL: --help"; exit 1; }

for args in "--help" "--version" "bleu --version"; do
  # shellcheck disable=SC2086
  "$wmt" $args >"$dir/out" || { echo "FAIL: mtk-wmt $args exit $?"; exit 1; }
  [ -s "$dir/out" ] || { echo "FAIL: mtk-wmt $args printed nothing on stdout"; exit 1; }
done
set +e
"$wmt" bleu --no-such-option "$dir/hyp" "$dir/ref1" 2>/dev/null
[ $? -eq 2 ] || { echo "FAIL: a bad option must exit 2"; exit 1; }
"$wmt" frobnicate 2>/dev/null
[ $? -eq 2 ] || { echo "FAIL: an unknown command must exit 2"; exit 1; }
set -e

head -n 2 "$dir/ref1" > "$dir/short"
set +e
err="$("$wmt" bleu "$dir/hyp" "$dir/short" 2>&1)"
rc=$?
set -e
echo "$err"
[ "$rc" -eq 1 ] || { echo "FAIL: exit $rc for unequal line counts"; exit 1; }
[[ "$err" == *"2 lines"*"3 hypotheses"* ]] || { echo "FAIL: message"; exit 1; }
echo "bleu_cli: ok"
