#!/usr/bin/env python3
# write-latency.py MOUNT SRC: every file of SRC read into memory, then
# written under MOUNT one after another (as a crawler with its pages in
# memory writes them), each open, write and close timed; prints pages/s and
# the quantiles of those latencies (tests/bench/README.md, "Background
# threads' priority"), then each call's own: open (the create), write
# and close (the seal), mean and quantiles ("What one writer waits for").
import os, sys, time
if len(sys.argv) != 3 or not os.path.isdir(sys.argv[1]) or not os.path.isdir(sys.argv[2]):
    sys.exit("usage: write-latency.py MOUNT SRC (two directories)")
mnt, src = sys.argv[1], sys.argv[2]
files = []
for d, _, fs in os.walk(src):
    for f in sorted(fs):
        p = os.path.join(d, f)
        if os.path.islink(p) or not os.path.isfile(p):
            continue  # a regular file's bytes only (a package's tree has dangling links)
        files.append((os.path.relpath(p, src), open(p, 'rb').read()))
files.sort()
lat = []
calls = {'open': [], 'write': [], 'close': []}
t_all = time.perf_counter()
made = set()
for rel, data in files:
    dst = os.path.join(mnt, rel)
    dd = os.path.dirname(dst)
    if dd not in made:
        os.makedirs(dd, exist_ok=True); made.add(dd)
    t0 = time.perf_counter_ns()
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t1 = time.perf_counter_ns()
    os.write(fd, data)
    t2 = time.perf_counter_ns()
    os.close(fd)
    t3 = time.perf_counter_ns()
    lat.append(t3 - t0)
    calls['open'].append(t1 - t0)
    calls['write'].append(t2 - t1)
    calls['close'].append(t3 - t2)
t_all = time.perf_counter() - t_all
lat.sort()
def q(v, x):
    return v[min(len(v) - 1, int(x * len(v)))] / 1000
print("files %d wall %.2f s pages/s %.0f p50 %.0f p90 %.0f p99 %.0f p99.9 %.0f max %.0f us" %
      (len(lat), t_all, len(lat) / t_all, q(lat, .5), q(lat, .9), q(lat, .99), q(lat, .999), lat[-1] / 1000))
for name, v in calls.items():
    v.sort()
    print("%s mean %.0f p50 %.0f p90 %.0f p99 %.0f us" % (name, sum(v) / len(v) / 1000, q(v, .5), q(v, .9), q(v, .99)))
