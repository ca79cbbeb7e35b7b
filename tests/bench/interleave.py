#!/usr/bin/env python3
"""Copy the files under SRC into DEST as a crawl of many hosts writes them:
each top-level directory of SRC is a host, its files taken in path order,
and the hosts take turns, one file each (a host whose files run out drops
out), where cp -r writes one host's files after another.

    interleave.py SRC DEST

Prints how many files were copied. Used by bench-written.sh
(PD_WRITTEN_ORDER=interleaved).
"""
import os
import shutil
import sys


def files_of(top):
    out = []
    for d, dirs, names in os.walk(top, followlinks=True):
        dirs.sort()
        out.extend(os.path.join(d, n) for n in sorted(names))
    return out


def main():
    src, dest = sys.argv[1], sys.argv[2]
    hosts = [os.path.join(src, h) for h in sorted(os.listdir(src))]
    queues = [files_of(h) if os.path.isdir(h) else [h] for h in hosts]
    made, n, i = set(), 0, 0
    while any(queues):
        for q in queues:
            if i < len(q):
                rel = os.path.relpath(q[i], src)
                to = os.path.join(dest, rel)
                parent = os.path.dirname(to)
                if parent not in made:
                    os.makedirs(parent, exist_ok=True)
                    made.add(parent)
                shutil.copyfile(q[i], to)
                n += 1
        i += 1
        queues = [q for q in queues if i < len(q)]
    print(n)


if __name__ == "__main__":
    main()
