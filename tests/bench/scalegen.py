#!/usr/bin/env python3
"""scalegen.py - the page generator of make bench-scale.

Writes pages the way a crawler does (open, write, close; one file per
page, a directory per 1,000 pages) into OUT, as writer W of WRITERS: page i
(0 <= i < PAGES) is this writer's when i % WRITERS == W.

Page i is defined by (SEED, i) alone, so any process can make it again:
  - with probability REPEAT (and i > 0) it is an exact repeat of an
    earlier page j < i, chosen at random: the same bytes under a new name;
  - otherwise it is a corpus page chosen at random (so the corpus's size
    mix), with a random sentence and the counter i inserted at a random
    line boundary: a recrawl in which a counter and a sentence changed.

Every 1,000 pages it rewrites PROGRESS (one line: pages written, bytes
written, zlib-6 bytes and plain-directory bytes of the sampled pages,
pages sampled). Every SAMPLE-th page is also compressed alone with zlib at
level 6 (gzip -6's deflate: what a WARC.gz holds per record) and sized as a
plain directory stores it (whole 4 KiB blocks), so the bench can price the
same crawl as WARC.gz and as a plain directory without writing it twice.

    scalegen.py CORPUS_DIR OUT W WRITERS PAGES SEED PROGRESS [REPEAT] [SAMPLE]
"""
import os
import random
import sys
import zlib

WORDS = ("archive crawl page server index market weather report city council "
         "update price share river station school music film garden science "
         "history travel health policy energy water season league match").split()


def load_corpus(root):
    paths = []
    for d, _, files in os.walk(root):
        paths += [os.path.join(d, f) for f in files if f.endswith(".html")]
    paths.sort()
    if not paths:
        sys.exit(f"scalegen: no .html pages under {root}")
    pages = []
    for p in paths:
        with open(p, "rb") as f:
            pages.append(f.read())
    return pages


class Generator:
    def __init__(self, corpus, seed, repeat):
        self.corpus, self.seed, self.repeat = corpus, seed, repeat

    def source(self, i):
        """The index of the fresh page whose bytes page i has."""
        while i > 0:
            r = random.Random(self.seed * 1_000_003 + i)
            if r.random() >= self.repeat:
                return i
            i = r.randrange(i)
        return i

    def page(self, i):
        fresh = self.source(i)
        r = random.Random((self.seed * 1_000_003 + fresh) ^ 0x5CA1E)
        base = self.corpus[r.randrange(len(self.corpus))]
        sentence = " ".join(r.choice(WORDS) for _ in range(r.randint(6, 14)))
        insert = f"<p>{sentence.capitalize()}. Visit {fresh}.</p>\n".encode()
        at = base.find(b"\n", r.randrange(len(base))) + 1 if base else 0
        return base[:at] + insert + base[at:], fresh == i


def main(argv):
    if len(argv) < 8:
        sys.exit(__doc__)
    corpus_dir, out, w, writers, pages, seed, progress = argv[1:8]
    repeat = float(argv[8]) if len(argv) > 8 else 0.3
    sample = int(argv[9]) if len(argv) > 9 else 100
    w, writers, pages, seed = int(w), int(writers), int(pages), int(seed)
    gen = Generator(load_corpus(corpus_dir), seed, repeat)
    written = nbytes = z6 = plain = sampled = 0
    last_dir = None
    for i in range(w, pages, writers):
        d = os.path.join(out, f"d{i // 1000:06d}")
        if d != last_dir:
            os.makedirs(d, exist_ok=True)
            last_dir = d
        data, _ = gen.page(i)
        with open(os.path.join(d, f"p{i:09d}.html"), "wb") as f:
            f.write(data)
        written += 1
        nbytes += len(data)
        if i % sample == 0:
            z6 += len(zlib.compress(data, 6)) + 18  # + gzip header and trailer
            plain += (len(data) + 4095) // 4096 * 4096
            sampled += 1
        if written % 1000 == 0:
            report(progress, written, nbytes, z6, plain, sampled)
    report(progress, written, nbytes, z6, plain, sampled)


def report(path, written, nbytes, z6, plain, sampled):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{written} {nbytes} {z6} {plain} {sampled}\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    main(sys.argv)
