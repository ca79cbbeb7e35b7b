#!/usr/bin/env python3
"""recrawl.py - generated inputs for the pack benchmarks (bench-packs.sh).

    recrawl.py recrawl SRC DST [SEED]
        every page under SRC again under DST (same relative path) as a
        second crawl would fetch it: a date, a counter, an ad block or one
        sentence changed, one of the four per page (chosen by the seeded
        generator), the rest of the bytes as they were.
    recrawl.py small SRC DST N [SEED]
        N small pages (500 to 2,000 bytes) cut from the pages under SRC at
        seeded offsets, each distinct, as DST/dNNN/pNNNNNN.html.
"""
import os
import random
import sys


def pages(src):
    for d, _, fs in sorted(os.walk(src)):
        for f in sorted(fs):
            yield os.path.join(d, f)


def change(body, rnd):
    kind = rnd.randrange(4)
    if kind == 0:  # a date, where a page shows when it was generated
        stamp = b"<!-- generated %04d-%02d-%02dT%02d:%02d:%02dZ -->" % (
            rnd.randrange(2020, 2027), rnd.randrange(1, 13), rnd.randrange(1, 29),
            rnd.randrange(24), rnd.randrange(60), rnd.randrange(60))
        i = body.find(b"<body")
        i = body.find(b">", i) + 1 if i >= 0 else 0
        return body[:i] + stamp + body[i:]
    if kind == 1:  # a counter
        c = b"<span class=\"visits\">%d visits</span>" % rnd.randrange(10 ** 7)
        i = body.rfind(b"</body>")
        i = i if i >= 0 else len(body)
        return body[:i] + c + body[i:]
    if kind == 2:  # an ad block: a few hundred bytes of fresh markup
        words = [b"offer", b"today", b"sale", b"click", b"free", b"shipping", b"new", b"deal"]
        ad = b"<div class=\"ad\" data-id=\"%016x\">" % rnd.getrandbits(64) + b" ".join(
            rnd.choice(words) + b"%d" % rnd.randrange(1000) for _ in range(40)) + b"</div>"
        i = rnd.randrange(len(body) + 1)
        j = body.find(b"<", i)
        j = j if j >= 0 else len(body)
        return body[:j] + ad + body[j:]
    # one sentence changed: a run of words in the middle rewritten
    if len(body) < 200:
        return body + b" "
    i = rnd.randrange(len(body) // 4, 3 * len(body) // 4)
    n = min(80, len(body) - i)
    new = bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz    ") for _ in range(n))
    return body[:i] + new + body[i + n:]


def recrawl(src, dst, seed):
    rnd = random.Random(seed)
    n = 0
    for p in pages(src):
        with open(p, "rb") as f:
            body = f.read()
        out = os.path.join(dst, os.path.relpath(p, src))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "wb") as f:
            f.write(change(body, rnd))
        n += 1
    print("recrawl: %d pages under %s" % (n, dst))


def small(src, dst, count, seed):
    rnd = random.Random(seed)
    bodies = []
    for p in pages(src):
        with open(p, "rb") as f:
            b = f.read()
        if len(b) >= 2000:
            bodies.append(b)
    seen = set()
    made = 0
    while made < count:
        b = rnd.choice(bodies)
        n = rnd.randrange(500, 2001)
        i = rnd.randrange(0, len(b) - n + 1)
        piece = b[i:i + n]
        if piece in seen:
            continue
        seen.add(piece)
        d = os.path.join(dst, "d%03d" % (made // 1000))
        if made % 1000 == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "p%06d.html" % made), "wb") as f:
            f.write(piece)
        made += 1
    print("small: %d pages under %s" % (made, dst))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "recrawl":
        recrawl(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    elif len(sys.argv) >= 5 and sys.argv[1] == "small":
        small(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else 1)
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
