#!/usr/bin/env python3
"""near_rules.py - confirm rules beyond the judge's line, from the pairs that
`bench_near --rules FILE` writes (tests/bench/near_rules.h describes the
columns).

    python3 tests/bench/near_rules.py FILE [--k K]

A rule lists a candidate pair (simhash within K or a shared band) when the
judge's resemblance r5 is 0.8 or more (what the store lists), or when the
pair, under that line, passes the rule's own test on the features of the
word alignment, the word 8-shingles and the lines. Printed, every figure a
line "name: value":
  - texts of fewer than five words have no 5-shingle, and the judge scores
    two of them 1.0 whatever they say; the store makes one shingle of all
    their words (nearset.h), so such a pair counts here only when its
    lines are the same (rust-doc's redirect stubs);
  - per kind: the positives, the share the candidates hold (no confirm can
    list more) and the share at r5 >= 0.8 (the store's recall);
  - rule_*: for each rule of each family, recall per kind (the worst one
    named) and precision per API package (a listed pair under r5 0.8 is
    false there whatever the rule says), listed pairs in brackets;
  - front_*: the rules no other beats on both the worst package precision
    and the worst kind recall (the trade-off curve);
  - readback_*: the pairs a rule with floor F must decide on the pages
    read back (candidates with F <= r5 < 0.8), per query, mean and p99 over
    the pages of each collection.
The labelled set's own precision is printed too; its negatives are
unrelated pages (no template siblings), so it stays about 1.
"""
import collections
import sys

KIND = ['base', 'mirror', 'ad', 'counter', 'edit', 'reformat', 'charset', 'negative']
EN_DOCS = None  # files without the lang column: docs before this are English (--en-docs)


def load(path, k):
    """The judge's listing per collection, and the candidates under 0.8."""
    pos = collections.Counter()
    got = collections.Counter()      # positives listed at r5 >= 0.8, per kind
    cand_pos = collections.Counter()  # positives that are candidates
    listed = collections.Counter()
    right = collections.Counter()
    under = []                        # candidates of 0.2 <= r5 < 0.8 (aligned)
    low = collections.defaultdict(list)  # per collection: (i, j, r5) of candidates under 0.8
    for line in open(path):
        f = line.split()
        coll, i, j = f[0], int(f[1]), int(f[2])
        cand = int(f[3]) <= k or f[4] == '1'
        ki, kj, same, r5 = int(f[5]), int(f[6]), int(f[7]), float(f[12])
        kind = None
        if coll == 'labelled' and same and ki == 0 and kj not in (0, 7):
            lang = f[22] if len(f) > 22 else 'en' if i < EN_DOCS else 'zh'
            kind = lang + '_' + KIND[kj]
            pos[kind] += 1
            cand_pos[kind] += cand
        if not cand:
            continue
        if int(f[10]) < 5 and int(f[11]) < 5 and float(f[15]) < 1:
            continue  # texts under five words: the judge's 1.0, the store's one shingle of all the words
        if r5 >= 0.8:
            listed[coll] += 1
            right[coll] += same if coll == 'labelled' else 1
            if kind:
                got[kind] += 1
            continue
        low[coll].append((i, j, r5))
        if int(f[21]) < -1:
            continue  # under 0.2: not aligned, listed by no rule here
        under.append(dict(coll=coll, kind=kind, same=same, r5=r5, c8=float(f[14]), cline=float(f[16]),
                          hunks=int(f[17]), merged=int(f[18]), distinct=int(f[19]), kept=float(f[20]),
                          D=int(f[21]), words=max(int(f[10]), int(f[11]))))
    return pos, got, cand_pos, listed, right, under, low


def evaluate(rule, base):
    pos, got0, _, listed0, right0, under, _ = base
    got, listed, right = collections.Counter(got0), collections.Counter(listed0), collections.Counter(right0)
    for r in under:
        if rule(r):
            listed[r['coll']] += 1
            right[r['coll']] += r['same'] if r['coll'] == 'labelled' else 0
            if r['kind']:
                got[r['kind']] += 1
    rec = {kd: got[kd] / pos[kd] for kd in pos}
    prec = {c: right[c] / listed[c] for c in listed}
    return rec, prec, listed


def line(name, res, colls):
    rec, prec, listed = res
    worst = min(rec, key=rec.get)
    return ('%s: worst kind %.3f (%s); en edit %.3f, en counter %.3f, zh edit %.3f | %s' %
            (name, rec[worst], worst, rec.get('en_edit', 0), rec.get('en_counter', 0), rec.get('zh_edit', 0),
             ', '.join('%s %.3f (%d)' % (c, prec[c], listed[c]) for c in colls)))


def families():
    """(name, rule) of each family, one entry per parameter choice."""
    out = []
    for t in (0.75, 0.7, 0.65, 0.6, 0.55, 0.5):
        out.append(('r5>=%.2f' % t, lambda r, t=t: r['r5'] >= t))
    for t in (0.95, 0.9, 0.85, 0.8, 0.75, 0.7):
        out.append(('c8>=%.2f' % t, lambda r, t=t: r['c8'] >= t))
        out.append(('cline>=%.2f' % t, lambda r, t=t: r['cline'] >= t))
    for h in (1, 2, 3, 4, 5, 6, 8):
        for f in (0.6, 0.7, 0.8, 0.85, 0.9):
            for t in (0.4, 0.5, 0.6, 0.7):
                for dist in (False, True):
                    out.append(('r5>=%.1f,merged<=%d,kept>=%.2f%s' % (t, h, f, ',distinct' if dist else ''),
                                lambda r, h=h, f=f, t=t, dist=dist: r['r5'] >= t and 0 <= r['merged'] <= h and
                                r['kept'] >= f and (not dist or r['distinct'] == r['hunks'])))
    for t in (0.5, 0.6, 0.7):
        for c in (0.8, 0.85, 0.9):
            for h in (3, 5, 8):
                out.append(('r5>=%.1f,c8>=%.2f,merged<=%d,distinct' % (t, c, h),
                            lambda r, t=t, c=c, h=h: r['r5'] >= t and r['c8'] >= c and 0 <= r['merged'] <= h and
                            r['distinct'] == r['hunks']))
    for t in (0.5, 0.6, 0.7):
        for c in (0.7, 0.8, 0.9):
            out.append(('r5>=%.1f,cline>=%.2f' % (t, c), lambda r, t=t, c=c: r['r5'] >= t and r['cline'] >= c))
    return out


def readbacks(low, floor):
    """Per collection: candidates of floor <= r5 < 0.8 a query meets."""
    out = {}
    for coll, v in low.items():
        per = collections.Counter()
        for i, j, r5 in v:
            if r5 >= floor:
                per[i] += 1
                per[j] += 1
        pages = max([max(i, j) for i, j, _ in v] or [0]) + 1
        counts = sorted([per[p] for p in range(pages)])
        out[coll] = (sum(counts) / pages, counts[min(len(counts) - 1, pages * 99 // 100)])
    return out


def main():
    global EN_DOCS
    args = sys.argv[1:]
    k, EN_DOCS = 4, 14000
    if '--k' in args:
        k = int(args[args.index('--k') + 1])
    if '--en-docs' in args:
        EN_DOCS = int(args[args.index('--en-docs') + 1])
    base = load(args[0], k)
    pos, got, cand_pos, listed, right, under, low = base
    colls = sorted(c for c in listed if c != 'labelled') + ['labelled']
    for kd in sorted(pos):
        print('kind_%s: %d positives, candidates %.3f, r5 >= 0.8 (the store) %.3f' %
              (kd, pos[kd], cand_pos[kd] / pos[kd], got[kd] / pos[kd]))
    results = []
    for name, rule in [('store', lambda r: False)] + families():
        res = evaluate(rule, base)
        print(line('rule_' + name, res, colls))
        pkg = [res[1][c] for c in colls if c != 'labelled']
        results.append((min(pkg), min(res[0].values()), name, res))
    results.sort(key=lambda x: (-x[0], -x[1]))
    best = -1.0
    for mp, mr, name, res in results:
        if mr > best:
            best = mr
            print(line('front_' + name, res, colls))
    ok = [x for x in results if x[0] >= 0.95 and x[2] != 'store']
    top = max(ok, key=lambda x: x[1]) if ok else None
    print('best_at_precision_0.95: %s' % ('%s, worst kind recall %.3f (the store: %.3f)' % (
        top[2], top[1], results[[x[2] for x in results].index('store')][1]) if top else
        'no rule but the store keeps every package at 0.95'))
    for floor in (0.5, 0.6, 0.7):
        rb = readbacks(low, floor)
        print('readback_floor_%.1f: %s' % (floor, ', '.join('%s mean %.1f p99 %d' % (c, m, p)
                                                             for c, (m, p) in sorted(rb.items()))))


if __name__ == '__main__':
    main()
