#!/usr/bin/env python3
"""read-random.py MOUNT N PID: N files of a mounted store, a fixed random
sample, each read whole after `drop_caches`; prints files/s and the
daemon's CPU (process PID, from /proc) per file read: what a read costs a
store as its records are laid out (a page and the chain of bases it is a
delta on). Run as root, the mount idle. Timing is never asserted."""
import os
import random
import sys
import time


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    mnt, n, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(mnt) for f in fs)
    random.Random(5).shuffle(files)
    files = files[:n]
    os.system("sync; echo 3 > /proc/sys/vm/drop_caches")
    c0, t0, total = cpu_seconds(pid), time.time(), 0
    for p in files:
        with open(p, "rb") as fh:
            total += len(fh.read())
    t1, c1 = time.time(), cpu_seconds(pid)
    print("%d files %d bytes: %.0f files/s, daemon CPU %.1f us a file"
          % (len(files), total, len(files) / (t1 - t0), (c1 - c0) / len(files) * 1e6))


if __name__ == "__main__":
    main()
