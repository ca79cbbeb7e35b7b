#!/usr/bin/env bash
# The compactor's figures (issue 15, item 5), each beside its baseline from
# the same run:
#   space back    per package of corpus/a (three inputs of different
#                 origin): the pages written, four in five deleted, then
#                 `pagededup compact` (default threshold and minimum):
#                 bytes given back / bytes the packs held beyond their live
#                 records before; pack files before and after
#   throughput    bytes moved / seconds of that compaction (MB/s)
#   writer        a writer (cp -r of a recrawl of two packages) into a store
#                 whose pack is 40% live: pages/s with the compactor running
#                 (it starts as the writer does) / pages/s with nocompact,
#                 from the same starting store, runs alternated
#
#   bash tests/bench/bench-compact.sh BUILD_DIR
#
# Environment: PD_CORPUS (tests/bench/corpus.sh), PD_WORKDIR (/var/tmp),
# PD_KEEP=1, PD_RUNS (2: writer runs of each kind), PD_SPACE_PKGS (the
# packages of the first part; empty: only the writer runs).
# Timing is never asserted; the exit status says whether every run worked.
set -uo pipefail
export LC_ALL=C
top=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build/release}" && pwd) || exit 2
PD=$BUILD/pagededup PDFS=$BUILD/pagededupfs
RUNS=${PD_RUNS:-2}
bash "$top/tests/bench/corpus.sh" >/dev/null || { echo "bench-compact: no corpus" >&2; exit 2; }
CACHE=$(cd "${PD_CORPUS:-/var/tmp/pagededup-corpus}" && pwd)
CORPUS=$CACHE/corpus/a
. "$top/tests/bench/bench_lib.sh"
bench_work compact
failed=0
now() { date +%s.%N; }
mkdir -p "$WORK/mnt"

mount_store() { # STORE OPTS
	"$PDFS" "$1" "$WORK/mnt" -f -o "$2" 2>>"$WORK/daemon.log" &
	DPID=$!
	local i
	for i in $(seq 1 400); do mountpoint -q "$WORK/mnt" && return 0; sleep 0.05; done
	echo "bench-compact: mount of $1 failed" >&2
	return 1
}
umount_store() {
	local i
	for i in $(seq 1 50); do fusermount3 -u "$WORK/mnt" 2>/dev/null && break; sleep 0.2; done
	mountpoint -q "$WORK/mnt" && { echo "bench-compact: cannot unmount $WORK/mnt" >&2; return 1; }
	wait "$DPID"
	local rc=$?
	DPID=""
	return $rc
}
stat_json() { "$PD" stats --json "$1" | python3 -c "import json,sys; d = json.load(sys.stdin); print($2)"; }

# thin DIR KEEP: delete the files under DIR but for KEEP in 5 (sorted order)
thin() {
	find "$1" -type f | sort | awk -v k="$2" 'NR % 5 >= k' | xargs -d '\n' rm -f
}

echo "load: $(uptime)"
# --- space back and throughput, per package ----------------------------------
for pkg in ${PD_SPACE_PKGS-python3.11-doc openjdk-17-doc rust-doc}; do
	s=$WORK/s-$pkg
	"$PD" mkfs "$s" >/dev/null || { failed=1; continue; }
	mount_store "$s" nocompact || { failed=1; continue; }
	cp -r "$CORPUS/$pkg" "$WORK/mnt/" || failed=1
	thin "$WORK/mnt/$pkg" 1
	umount_store || failed=1
	files_before=$(find "$s/packs" -name 'pack-*' | wc -l)
	alloc=$(stat_json "$s" 'd["packs"]["allocated"]')
	beyond=$(stat_json "$s" 'd["packs"]["allocated"] - d["packs"]["live_bytes"] - d["packs"]["dictionary_bytes"]')
	store_before=$(du_b "$s")
	t0=$(now)
	out=$("$PD" compact "$s") || failed=1
	t1=$(now)
	moved=$(stat_json "$s" 'd["compaction"]["bytes_moved"]')
	alloc_after=$(stat_json "$s" 'd["packs"]["allocated"]')
	store_after=$(du_b "$s")
	files_after=$(find "$s/packs" -name 'pack-*' | wc -l)
	"$PD" fsck "$s" >/dev/null 2>&1 || { echo "bench-compact: fsck of $s not clean" >&2; failed=1; }
	# every page left reads back as the corpus has it
	mount_store "$s" nocompact || failed=1
	(cd "$CORPUS" && find "$pkg" -type f | sort | awk 'NR % 5 < 1') | while read -r f; do
		cmp -s "$CORPUS/$f" "$WORK/mnt/$f" || { echo "bench-compact: $f differs" >&2; exit 1; }
	done || failed=1
	umount_store || failed=1
	secs=$(calc "%.2f" "$t1 - $t0")
	echo "$pkg: packs $alloc bytes allocated in $files_before files, $beyond beyond the live records;" \
		"after: $alloc_after in $files_after files: given back $((alloc - alloc_after)) =" \
		"$(calc "%.4f" "($alloc - $alloc_after) / $beyond") of it; store du $store_before -> $store_after"
	echo "$pkg: pagededup compact took $secs s with the store's open and close; $out"
	rm -rf "$s"
done

# --- a writer beside the compactor ----------------------------------------------
base=$WORK/base
"$PD" mkfs "$base" >/dev/null || exit 1
mount_store "$base" nocompact || exit 1
cp -r "$CORPUS/." "$WORK/mnt/" || failed=1
thin "$WORK/mnt" 2
umount_store || failed=1
echo "writer base: $(stat_json "$base" '"%d pages, packs %d bytes (%d allocated), %d live" % (d["pages"], d["packs"]["bytes"], d["packs"]["allocated"], d["packs"]["live_bytes"])')"
mkdir -p "$WORK/recrawl"
for pkg in python3.11-doc rust-doc; do
	python3 "$top/tests/bench/recrawl.py" recrawl "$CORPUS/$pkg" "$WORK/recrawl/$pkg" 3 >&2
done
npages=$(find "$WORK/recrawl" -type f | wc -l)
for run in $(seq 1 "$RUNS"); do
	for kind in nocompact compact; do
		s=$WORK/run
		rm -rf "$s"
		cp -a "$base" "$s"
		opts=nocompact
		[ "$kind" = compact ] && opts=compact_period_ms=100
		mount_store "$s" "$opts" || { failed=1; continue; }
		sync
		t0=$(now)
		# beside the writer: when the compaction ended, and the pages the
		# writer had written at 0.5, 1, 1.5 and 2 s (the compaction takes
		# about a second of a run of 15-30 s: its effect on the whole run
		# is within the noise, on these windows it is not)
		python3 - "$WORK/mnt" "$WORK/ended" <<'EOF' &
import json, os, sys, time
t0 = time.time()
mnt, out = sys.argv[1], sys.argv[2]
ended, marks, seen = None, [0.5, 1.0, 1.5, 2.0], []
def written():
    return sum(len(fs) for _, _, fs in os.walk(mnt + "/r"))
while time.time() - t0 < 60 and os.path.ismount(mnt) and (ended is None or marks):
    t = time.time() - t0
    if marks and t >= marks[0]:
        seen.append("%.1fs:%d" % (marks.pop(0), written()))
    if ended is None:
        try:
            c = json.loads(os.getxattr(mnt, "user.dedup.stats"))["compaction"]
        except OSError:
            break
        if c["packs_removed"] >= 1:
            ended = "%.2f" % t
    with open(out, "w") as f:
        f.write("compaction ended %s s after the writer started; " % ended if ended else "")
        f.write("pages written by " + " ".join(seen))
    time.sleep(0.05)
EOF
		poller=$!
		cp -r "$WORK/recrawl" "$WORK/mnt/r" || failed=1
		t1=$(now)
		sleep 0.3
		kill "$poller" 2>/dev/null
		wait "$poller" 2>/dev/null
		c=$(python3 -c 'import os, json; print(json.loads(os.getxattr("'"$WORK/mnt"'", "user.dedup.stats"))["compaction"])')
		umount_store || failed=1
		ended=""
		[ -s "$WORK/ended" ] && ended="; $(cat "$WORK/ended")"
		rm -f "$WORK/ended"
		echo "writer run $run $kind: $npages pages in $(calc "%.2f" "$t1 - $t0") s:" \
			"$(calc "%.0f" "$npages / ($t1 - $t0)") pages/s; compaction: $c$ended"
		rm -rf "$s"
	done
done
echo "load: $(uptime)"
exit $failed
