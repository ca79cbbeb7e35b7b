#!/usr/bin/env python3
# write-latency.py MOUNT SRC: every file of SRC read into memory, then
# written under MOUNT one after another (as a crawler with its pages in
# memory writes them), each open, write and close timed; prints pages/s and
# the quantiles of those latencies (tests/bench/README.md, "Background
# threads' priority").
import os, sys, time
if len(sys.argv) != 3 or not os.path.isdir(sys.argv[1]) or not os.path.isdir(sys.argv[2]):
    sys.exit("usage: write-latency.py MOUNT SRC (two directories)")
mnt, src = sys.argv[1], sys.argv[2]
files = []
for d, _, fs in os.walk(src):
    for f in sorted(fs):
        p = os.path.join(d, f)
        files.append((os.path.relpath(p, src), open(p, 'rb').read()))
files.sort()
lat = []
t_all = time.perf_counter()
made = set()
for rel, data in files:
    dst = os.path.join(mnt, rel)
    dd = os.path.dirname(dst)
    if dd not in made:
        os.makedirs(dd, exist_ok=True); made.add(dd)
    t0 = time.perf_counter_ns()
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.close(fd)
    lat.append(time.perf_counter_ns() - t0)
t_all = time.perf_counter() - t_all
lat.sort()
q = lambda x: lat[min(len(lat) - 1, int(x * len(lat)))] / 1000
print("files %d wall %.2f s pages/s %.0f p50 %.0f p90 %.0f p99 %.0f p99.9 %.0f max %.0f us" %
      (len(lat), t_all, len(lat) / t_all, q(.5), q(.9), q(.99), q(.999), lat[-1] / 1000))
