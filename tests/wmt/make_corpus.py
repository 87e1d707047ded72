# Writes a synthetic parallel corpus: random sentences over a small word list; the target is the
# source (copy) or its words reversed (reverse). Usage: make_corpus.py DIR TASK
import os, random, sys

out, task = sys.argv[1], sys.argv[2]
words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
os.makedirs(out, exist_ok=True)


def sentences(rng, n):
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 6))) for _ in range(n)]


def target(s):
    return s if task == "copy" else " ".join(reversed(s.split()))


def write(path, lines):
    with open(path, "w") as f:
        f.write("".join(l + "\n" for l in lines))


def write_sgm(path, lines, lang):
    with open(path, "w") as f:
        f.write('<srcset setid="synthetic" srclang="%s">\n<doc docid="d1">\n' % lang)
        for i, l in enumerate(lines, 1):
            f.write('<seg id="%d">%s</seg>\n' % (i, l))
        f.write("</doc>\n</srcset>\n")


train = sentences(random.Random(1), 3000)
write(os.path.join(out, task + ".en"), train)
write(os.path.join(out, task + ".fr"), [target(s) for s in train])
for name, seed in (("dev", 2), ("test", 3)):
    held = sentences(random.Random(seed), 64)
    write_sgm(os.path.join(out, name + ".en.sgm"), held, "en")
    write_sgm(os.path.join(out, name + ".fr.sgm"), [target(s) for s in held], "fr")
    write(os.path.join(out, name + ".en"), held)
    write(os.path.join(out, name + ".fr"), [target(s) for s in held])
