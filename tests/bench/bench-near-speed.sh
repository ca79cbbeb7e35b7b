#!/usr/bin/env bash
# make bench-near, the speed half: the near-duplicate index at a million
# pages, in-core and through the mount.
#
#   tests/bench/bench-near-speed.sh BUILD_DIR
#
# 1. bench_nearidx: a store with PD_NEAR_ROWS random simhashes in its index
#    (default 1e6), each with a shingle set and its bands: bytes per page,
#    in-core query latency (both generators, candidates' sets compared);
#    then the same with rows made from the corpus pages' own simhashes
#    (clustered), with a fingerprint record each, and `pagededup clusters`
#    and `dups` timed over them;
# 2. that store mounted: PD_NEAR_PAGES real pages of the benchmark corpus
#    (default 200; tests/bench/corpus.sh) copied in, each with a variant (a
#    changed date and one changed word), then getxattr("user.dedup.near")
#    timed on every page five times (the system call getfattr makes: FUSE
#    round trip, read transaction, index lookup, path names), and the
#    getfattr command itself (process start included) once per page.
# Figures are lines "name: value unit". Environment: PD_WORKDIR (default
# /var/tmp), PD_NEAR_ROWS, PD_NEAR_PAGES.
set -euo pipefail
build=$(cd "${1:-build/release}" && pwd)
rows=${PD_NEAR_ROWS:-1000000}
pages=${PD_NEAR_PAGES:-200}
work=$(mktemp -d "${PD_WORKDIR:-/var/tmp}/pd-bench-near.XXXXXX")
mnt=$work/mnt
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && fusermount3 -u "$mnt"
	sleep 0.5
	rm -rf "$work"
}
trap cleanup EXIT

echo "## near index in-core at K=3 (bench_nearidx: $rows random simhashes; the goal's K)"
"$build/bench/bench_nearidx" "$work/store3" "$rows" 100000 3
rm -rf "$work/store3"
echo "## near index in-core at the default K (bench_nearidx: $rows random simhashes)"
"$build/bench/bench_nearidx" "$work/store" "$rows" 100000

corpus=$(bash "$(dirname "$0")/corpus.sh" | sed -n 's/^corpus_dir: //p')
echo "## near index in-core at the default K, rows made from the corpus's own simhashes"
# Real pages are not uniform: pages of one template share most bits. The
# rows are the corpus pages' simhashes, each repeated with 0..16 bits
# flipped (bench_nearidx SEEDS), so queries meet families of alike rows.
find "$corpus/a" -type f -name '*.html' -print0 | xargs -0 -n 500 "$build/pagededup" simhash 2>/dev/null |
	grep -v none >"$work/seeds" || true
PD_NEARIDX_RECORDS=1 "$build/bench/bench_nearidx" "$work/store.seeded" "$rows" 100000 "" "$work/seeds"
echo "## pagededup clusters and dups over those $rows pages (a fingerprint record and a shingle set each)"
for c in clusters dups; do
	TIMEFORMAT="${c}_seconds: %R s wall, %U s user, %S s system"
	time { "$build/pagededup" "$c" --csv "$work/store.seeded" >/dev/null || true; }
done
rm -rf "$work/store.seeded"
echo "## near queries through the mount ($pages corpus pages and a variant of each, among the $rows rows)"
mkdir -p "$mnt"
"$build/pagededupfs" "$work/store" "$mnt"
python3 - "$corpus/a" "$mnt" "$pages" <<'EOF'
import os, random, re, statistics, subprocess, sys, time
src, mnt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = []
for d, _, names in os.walk(src):
    files += [os.path.join(d, f) for f in names if f.endswith(".html")]
files.sort()
random.seed(1)
files = random.sample(files, min(n, len(files)))
os.makedirs(mnt + "/site", exist_ok=True)
os.makedirs(mnt + "/mirror", exist_ok=True)
paths = []
for i, f in enumerate(files):
    page = open(f, "rb").read()
    a = "%s/site/%05d.html" % (mnt, i)
    b = "%s/mirror/%05d.html" % (mnt, i)
    open(a, "wb").write(page)
    variant = page.replace(b"</body>", b"<p>Last updated 2026-11-22</p></body>", 1)
    variant = re.sub(rb"\bthe\b", b"a", variant, count=1)
    open(b, "wb").write(variant)
    paths += [a, b]
lat, sizes, nonempty = [], [], 0
for _ in range(5):
    for p in paths:
        t = time.perf_counter()
        try:
            v = os.getxattr(p, "user.dedup.near")
        except OSError:
            v = None  # binary or textless page: ENODATA
        lat.append(time.perf_counter() - t)
        if v:
            nonempty += 1
            sizes.append(len(v))
lat.sort()
print("near_getxattr_calls: %d" % len(lat))
print("near_getxattr_median: %.1f us (goal <= 1000)" % (statistics.median(lat) * 1e6))
print("near_getxattr_p90: %.1f us" % (lat[len(lat) * 9 // 10] * 1e6))
print("near_getxattr_p99: %.1f us" % (lat[len(lat) * 99 // 100] * 1e6))
print("near_answers_nonempty: %.1f %%" % (100.0 * nonempty / len(lat)))
cmd = []
for p in paths:
    t = time.perf_counter()
    subprocess.run(["getfattr", "--only-values", "-n", "user.dedup.near", p],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cmd.append(time.perf_counter() - t)
print("near_getfattr_command_median: %.1f us (process start included)" % (statistics.median(cmd) * 1e6))
EOF
