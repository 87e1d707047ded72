#!/usr/bin/env python3
"""Aligns LibreOffice help pages across languages into a WMT-layout parallel corpus.

  align_help_pages.py HELP_ROOT OUTDIR LANG [LANG...]

HELP_ROOT holds <lang>/text/**/*.html (en-US and each LANG, e.g. fr, de). Paragraphs carrying
id="par_id..." or id="hd_id..." in the same file are translations of each other. Pairs are kept
when both sides are non-empty, the English side has at least 3 words and the two sides differ
(identical ones are untranslated). Every 50th pair (by file path and id) goes to the test set,
the next one to the dev set, written like newstest: <prefix>-src.en.sgm and <prefix>-ref.<lang>.sgm.
Standard library only.
"""
import os
import re
import sys
from html.parser import HTMLParser

ID = re.compile(r"^(par_id|hd_id)")
VOID = {"br", "img", "hr", "meta", "link", "input", "col", "area", "base", "wbr", "embed", "source"}


class Paragraphs(HTMLParser):
    """Text of every element whose id starts with par_id / hd_id, nested markup flattened."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found = {}
        self.stack = []  # [id, tag, depth, text parts] of the element being captured

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            return
        if self.stack:
            if tag == self.stack[0][1]:
                self.stack[0][2] += 1
            return
        ident = dict(attrs).get("id") or ""
        if ID.match(ident):
            self.stack.append([ident, tag, 1, []])

    def handle_endtag(self, tag):
        if not self.stack or tag != self.stack[0][1]:
            return
        self.stack[0][2] -= 1
        if self.stack[0][2] == 0:
            ident, _, _, parts = self.stack.pop()
            text = " ".join("".join(parts).split())
            self.found.setdefault(ident, text)  # an id repeated in a file: the first one

    def handle_data(self, data):
        if self.stack:
            self.stack[0][3].append(data)


def paragraphs(path):
    parser = Paragraphs()
    with open(path, encoding="utf-8", errors="replace") as f:
        parser.feed(f.read())
    parser.close()
    return parser.found


def escape(text):
    """&, <, > and " as newstest files write them (sacreBLEU's tokenizer decodes these four)."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def sgm(path, setname, lang, kind, segments):
    tag = "srcset" if kind == "src" else "refset"
    with open(path, "w", encoding="utf-8") as f:
        f.write(f'<{tag} setid="{setname}" srclang="en" trglang="{lang}">\n')
        f.write(f'<doc sysid="{kind}" docid="libreoffice-help" genre="help" origlang="en">\n<p>\n')
        for k, text in enumerate(segments, 1):
            f.write(f'<seg id="{k}">{escape(text)}</seg>\n')
        f.write(f"</p>\n</doc>\n</{tag}>\n")


def main(root, out, langs):
    english = os.path.join(root, "en-US")
    files = sorted(
        os.path.relpath(os.path.join(d, n), english)
        for d, _, names in os.walk(english) for n in names if n.endswith(".html"))
    if not files:
        sys.exit(f"align_help_pages: no .html files under {english}")
    os.makedirs(out, exist_ok=True)
    for lang in langs:
        counts = {"ids": 0, "missing": 0, "empty": 0, "short": 0, "identical": 0}
        pairs = []
        for rel in files:
            other = os.path.join(root, lang, rel)
            if not os.path.exists(other):
                continue
            en, xx = paragraphs(os.path.join(english, rel)), paragraphs(other)
            for ident in sorted(en):
                counts["ids"] += 1
                if ident not in xx:
                    counts["missing"] += 1
                elif not en[ident] or not xx[ident]:
                    counts["empty"] += 1
                elif len(en[ident].split()) < 3:
                    counts["short"] += 1
                elif en[ident] == xx[ident]:
                    counts["identical"] += 1
                else:
                    pairs.append((en[ident], xx[ident]))
        split = {"train": [], "test": [], "dev": []}
        for k, pair in enumerate(pairs):
            split["test" if k % 50 == 0 else "dev" if k % 50 == 1 else "train"].append(pair)
        base = os.path.join(out, f"lohelp.{lang}-en")
        for side, idx in (("en", 0), (lang, 1)):
            with open(f"{base}.{side}", "w", encoding="utf-8") as f:
                f.writelines(p[idx] + "\n" for p in split["train"])
        for part in ("test", "dev"):
            prefix = os.path.join(out, f"lohelp{part}-{lang}en")
            sgm(f"{prefix}-src.en.sgm", f"lohelp{part}", lang, "src", [p[0] for p in split[part]])
            sgm(f"{prefix}-ref.{lang}.sgm", f"lohelp{part}", lang, "ref", [p[1] for p in split[part]])
        words = sum(len(p[0].split()) for p in pairs)
        print(f"  en-{lang}: {len(pairs)} pairs ({words} English words): {len(split['train'])} train, "
              f"{len(split['dev'])} dev, {len(split['test'])} test; dropped {counts['identical']} "
              f"identical, {counts['short']} under 3 English words, {counts['empty']} empty, "
              f"{counts['missing']} without a translation (of {counts['ids']} English paragraphs)")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
