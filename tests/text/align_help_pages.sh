#!/usr/bin/env bash
# scripts/lib/align_help_pages.py on a small synthetic help tree: paragraphs aligned by (file, id)
# with nested markup flattened, identical / short / empty pairs dropped, the split into train and
# newstest-style .sgm test/dev files, and entities escaped so that `mtk-wmt bleu` scores the test
# reference against the plain text as 100.
set -euo pipefail
root="$1"
wmt="$2"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/help/en-US/text/a" "$dir/help/fr/text/a"
en="$dir/help/en-US/text/a/page.html"
fr="$dir/help/fr/text/a/page.html"
{
  echo '<html><body><h1 id="hd_id1">Inserting a <span class="x">chart</span> quickly</h1>'
  for k in $(seq 2 120); do echo "<p id=\"par_id$k\" class=\"paragraph\">Paragraph number $k &amp; more</p>"; done
  echo '<p id="par_id900">Same in both languages</p><p id="par_id901">Too short</p>'
  echo '<p id="par_id902">Has no French side</p><p id="bm_id1">bookmark text is not a paragraph</p>'
  echo '<p id="par_id903">Quotes "here" and <b>bold &lt;tags&gt;</b></p></body></html>'
} >"$en"
{
  echo '<html><body><h1 id="hd_id1">Insérer un <span>diagramme</span> rapidement</h1>'
  for k in $(seq 2 120); do echo "<p id=\"par_id$k\">Paragraphe numéro $k &amp; plus</p>"; done
  echo '<p id="par_id900">Same in both languages</p><p id="par_id901">Trop court</p>'
  echo '<p id="par_id903">Des guillemets "ici" et <b>gras &lt;balises&gt;</b></p></body></html>'
} >"$fr"
python3 "$root/scripts/lib/align_help_pages.py" "$dir/help" "$dir/out" fr | tee "$dir/summary"
grep -q "en-fr: 121 pairs" "$dir/summary" || { echo "FAIL: expected 121 pairs"; exit 1; }
grep -q "dropped 1 identical, 1 under 3 English words, 0 empty, 1 without a translation" "$dir/summary" ||
  { echo "FAIL: drop counts"; exit 1; }
[ "$(wc -l <"$dir/out/lohelp.fr-en.en")" -eq 115 ] || { echo "FAIL: train lines"; exit 1; }
[ "$(wc -l <"$dir/out/lohelp.fr-en.fr")" -eq 115 ] || { echo "FAIL: train lines fr"; exit 1; }
grep -q '<seg id="1">Insérer un diagramme rapidement</seg>' "$dir/out/lohelptest-fren-ref.fr.sgm" ||
  { echo "FAIL: nested markup"; exit 1; }
grep -qx 'Des guillemets "ici" et gras <balises>' "$dir/out/lohelp.fr-en.fr" || { echo "FAIL: entities"; exit 1; }
grep -q '<seg id="2">Paragraph number [0-9]* &amp; more</seg>' "$dir/out/lohelptest-fren-src.en.sgm" ||
  { echo "FAIL: test .sgm escaping/order"; cat "$dir/out/lohelptest-fren-src.en.sgm"; exit 1; }
# The reference .sgm scored against its own plain text: 100.
sed -n 's:^<seg id="[0-9]*">\(.*\)</seg>$:\1:p' "$dir/out/lohelptest-fren-ref.fr.sgm" |
  sed -e 's/&quot;/"/g' -e 's/&lt;/</g' -e 's/&gt;/>/g' -e 's/&amp;/\&/g' >"$dir/plain"
score="$("$wmt" bleu "$dir/plain" "$dir/out/lohelptest-fren-ref.fr.sgm")"
echo "$score"
[[ "$score" == *" = 100.00 "* ]] || { echo "FAIL: escaped reference does not score 100"; exit 1; }
echo "align_help_pages: ok"
