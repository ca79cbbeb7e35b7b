#!/usr/bin/env python3
# write-latency.py MOUNT SRC: every file of SRC read into memory, then
# written under MOUNT one after another (as a crawler with its pages in
# memory writes them), each open, write and close timed; prints pages/s and
# the quantiles of those latencies (tests/bench/README.md, "Background
# threads' priority"), then each call's own: open (the create), write
# and close (the seal), mean and quantiles ("What one writer waits for").
# With --as-tar each file is given its source's times, owner and mode on
# the open file before its close(), as tar x run as root does (utimensat,
# fchown, fchmod), and those three calls are timed together as "attrs".
import os, sys, time
args = [a for a in sys.argv[1:] if a != "--as-tar"]
as_tar = len(args) != len(sys.argv) - 1
if len(args) != 2 or not os.path.isdir(args[0]) or not os.path.isdir(args[1]):
    sys.exit("usage: write-latency.py [--as-tar] MOUNT SRC (two directories)")
mnt, src = args
files = []
for d, _, fs in os.walk(src):
    for f in sorted(fs):
        p = os.path.join(d, f)
        if os.path.islink(p) or not os.path.isfile(p):
            continue  # a regular file's bytes only (a package's tree has dangling links)
        files.append((os.path.relpath(p, src), open(p, 'rb').read(), os.stat(p)))
files.sort()
lat = []
calls = {'open': [], 'write': [], 'close': []}
if as_tar:
    calls['attrs'] = []
t_all = time.perf_counter()
made = set()
for rel, data, st in files:
    dst = os.path.join(mnt, rel)
    dd = os.path.dirname(dst)
    if dd not in made:
        os.makedirs(dd, exist_ok=True); made.add(dd)
    t0 = time.perf_counter_ns()
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t1 = time.perf_counter_ns()
    os.write(fd, data)
    t2 = ta = time.perf_counter_ns()
    if as_tar:
        os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.fchown(fd, st.st_uid, st.st_gid)
        os.fchmod(fd, st.st_mode & 0o7777)
        ta = time.perf_counter_ns()
        calls['attrs'].append(ta - t2)
    os.close(fd)
    t3 = time.perf_counter_ns()
    lat.append(t3 - t0)
    calls['open'].append(t1 - t0)
    calls['write'].append(t2 - t1)
    calls['close'].append(t3 - ta)
t_all = time.perf_counter() - t_all
lat.sort()
def q(v, x):
    return v[min(len(v) - 1, int(x * len(v)))] / 1000
print("files %d wall %.2f s pages/s %.0f p50 %.0f p90 %.0f p99 %.0f p99.9 %.0f max %.0f us" %
      (len(lat), t_all, len(lat) / t_all, q(lat, .5), q(lat, .9), q(lat, .99), q(lat, .999), lat[-1] / 1000))
for name, v in calls.items():
    v.sort()
    print("%s mean %.0f p50 %.0f p90 %.0f p99 %.0f us" % (name, sum(v) / len(v) / 1000, q(v, .5), q(v, .9), q(v, .99)))
