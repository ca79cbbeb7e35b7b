#!/usr/bin/env bash
# The pack store's figures, each beside its baseline measured in the same
# run (make bench runs this after bench-fs.sh):
#   small pages   50,000 pages of 500-2,000 bytes cut from the corpus:
#                 du of the store / du of a plain directory      (goal <= 0.25)
#   recrawl       every page of corpus/a again with a date, a counter, an ad
#                 block or one sentence changed (recrawl.py): the du the
#                 recrawl adds / the per-page gzip -6 sum of its pages
#                                                                (goal <= 0.2)
#   random read   10,000 pages in a seeded random order after dropping the
#                 caches: files/s through the mount / from a plain copy
#                                                                (goal >= 0.8)
#
#   bash tests/bench/bench-packs.sh BUILD_DIR
#
# Environment: PD_CORPUS (tests/bench/corpus.sh), PD_SMALL_PAGES (50000),
# PD_READS (10000), PD_WORKDIR (/var/tmp), PD_KEEP=1, PD_MOUNT_OPTS,
# PD_DELTA_RULES (the recrawl once per -o delta=RULE; "off resemblance"),
# PD_TABLES=1 (each compacted store's LMDB tables, bench_tables),
# PD_SKIP_SMALL=1 (no small-pages run), PD_SKIP_READS=1 (the size figures
# only: no random reads, which need the fuse module's transport; then no
# flock is needed either), PD_READ_BASE (a build dir whose
# daemon also reads the last store, for a before/after in one run).
# Timing is never asserted; the exit status says whether every run worked.
set -uo pipefail
export LC_ALL=C
top=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build/release}" && pwd) || exit 2
PD=$BUILD/pagededup PDFS=$BUILD/pagededupfs
SMALL=${PD_SMALL_PAGES:-50000} READS=${PD_READS:-10000}
bash "$top/tests/bench/corpus.sh" >/dev/null || { echo "bench-packs: no corpus" >&2; exit 2; }
CACHE=$(cd "${PD_CORPUS:-/var/tmp/pagededup-corpus}" && pwd)
CORPUS=$CACHE/corpus/a
. "$top/tests/bench/bench_lib.sh"
bench_work packs
failed=0
met() { awk "BEGIN { exit !($1) }" && echo met || echo "not met"; }
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || echo "bench-packs: cannot drop caches" >&2; }
mount_store() { # STORE
	mkdir -p "$WORK/mnt"
	"$PDFS" "$1" "$WORK/mnt" -f ${PD_MOUNT_OPTS:-} >>"$WORK/daemon.log" 2>&1 &
	DPID=$!
	for _ in $(seq 1 200); do mountpoint -q "$WORK/mnt" && return 0; sleep 0.05; done
	echo "bench-packs: mount of $1 failed" >&2; cat "$WORK/daemon.log" >&2
	return 1
}
# The transport the last pagededupfs mount served on: the fuse module's
# enable_uring is global (tests/run.sh turns it off and on), so it is read
# from the daemon's log, not assumed. LINE: the log's length before the mount.
transport_since() { tail -n +$(($1 + 1)) "$WORK/daemon.log" | grep -q "serving requests over io_uring" && echo io_uring || echo /dev/fuse; }
umount_store() {
	fusermount3 -u "$WORK/mnt" || return 1
	wait "$DPID"; local rc=$?
	DPID=""
	[ "$rc" = 0 ] || { echo "bench-packs: daemon exit $rc" >&2; tail "$WORK/daemon.log" >&2; return 1; }
}
tables() { # LABEL STORE FILES: the LMDB bytes per table (bench_tables) when PD_TABLES=1
	[ "${PD_TABLES:-0}" = 1 ] || return 0
	local pages; pages=$("$PD" stats --json "$2" | python3 -c 'import json, sys; print(json.load(sys.stdin)["pages"])')
	"$BUILD/bench/bench_tables" "$2/meta" "$3" "$pages" | sed "s/^/$1 tables: /"
}
timed() { local t0 t1; t0=$(date +%s.%N); "$@" || return 1; t1=$(date +%s.%N); calc %.3f "$t1 - $t0" >"$WORK/seconds"; }

# --- small pages ---------------------------------------------------------------
if [ "${PD_SKIP_SMALL:-0}" != 1 ]; then
python3 "$top/tests/bench/recrawl.py" small "$CORPUS" "$WORK/small" "$SMALL" 1 >&2
timed cp -r "$WORK/small" "$WORK/plain-small" || failed=1
plain_b=$(du_b "$WORK/plain-small")
echo "small_pages: $SMALL pages, $(du -sb "$WORK/small" | cut -f1) bytes"
echo "small_plain_du: $plain_b bytes ($(cat "$WORK/seconds") s for cp -r)"
rm -rf "$WORK/plain-small"
"$PD" mkfs "$WORK/store-small" >/dev/null && mount_store "$WORK/store-small" || failed=1
timed cp -r "$WORK/small" "$WORK/mnt/small" || failed=1
echo "small_store_cp_seconds: $(cat "$WORK/seconds") s"
umount_store || failed=1
store_b=$(du_b "$WORK/store-small")
echo "small_store_du: $store_b bytes (packs $(du_b "$WORK/store-small/packs"), meta $(du_b "$WORK/store-small/meta"))"
echo "small_du_store_per_plain: $(calc %.4f "$store_b / $plain_b") x  (goal <= 0.25: $(met "$store_b <= 0.25 * $plain_b"))"
echo "small_backing_files: $(find "$WORK/store-small" -type f | wc -l) for $SMALL pages"
"$PD" compact "$WORK/store-small" | sed "s/^/small compact: /"
store_b=$(du_b "$WORK/store-small")
echo "small_store_du_compacted: $store_b bytes (packs $(du_b "$WORK/store-small/packs"), meta $(du_b "$WORK/store-small/meta"))"
tables small "$WORK/store-small" "$SMALL"
echo "small_du_store_per_plain_compacted: $(calc %.4f "$store_b / $plain_b") x  (goal <= 0.25: $(met "$store_b <= 0.25 * $plain_b"))"
rm -rf "$WORK/store-small" "$WORK/small"
fi

# --- the recrawl ------------------------------------------------------------------
# Once per delta rule of PD_DELTA_RULES (default "off resemblance": the
# store without deltas is the baseline of the same run), each on a store of
# its own; the random reads use the last one.
deltas_of() { # STORE: "N MEAN": records stored as deltas, their mean bytes
	"$PD" blobs "$1" | awk -F'\t' '$4 ~ /:delta/ { split($4, a, /[:+]/); n++; s += a[3] }
		END { printf "%d %.0f", n, n ? s / n : 0 }'
}
live_of() { # STORE: bytes of the live pack records (dead ones wait for the compactor)
	"$PD" stats --json "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["packs"]["live_bytes"])'
}
python3 "$top/tests/bench/recrawl.py" recrawl "$CORPUS" "$WORK/recrawl" 2 >&2
# the sums take minutes: kept beside the corpus, keyed by the corpus and the generator
gz_key=$(cat "$CACHE/corpus.info" "$top/tests/bench/recrawl.py" | md5sum | cut -c1-12)
gz_cache=${PD_WORKDIR:-/var/tmp}/pd-gzip6-$gz_key
if [ -s "$gz_cache" ]; then
	read -r gz_a gz_b <"$gz_cache"
else
	gz_b=$(gzip_sum "$WORK/recrawl")
	gz_a=$(gzip_sum "$CORPUS")
	echo "$gz_a $gz_b" >"$gz_cache"
fi
echo "recrawl_gzip6_per_page: $gz_b bytes; the crawl's: $gz_a bytes"
rules=${PD_DELTA_RULES:-off resemblance}
for rule in $rules; do
	rm -rf "$WORK/store"
	: >"$WORK/daemon.log" # its delta step's line is this rule's
	mopts="-o delta=$rule ${PD_MOUNT_OPTS:-}"
	"$PD" mkfs "$WORK/store" >/dev/null && PD_MOUNT_OPTS=$mopts mount_store "$WORK/store" || failed=1
	timed cp -r "$CORPUS" "$WORK/mnt/a" || failed=1
	echo "[$rule] crawl_cp_seconds: $(cat "$WORK/seconds") s"
	umount_store || failed=1
	echo "[$rule] crawl_du_before_compaction: $(du_b "$WORK/store") bytes (packs $(du_b "$WORK/store/packs"))"
	"$PD" compact "$WORK/store" | sed "s/^/[$rule] compact: /"
	echo "[$rule] crawl_du_compacted_by_default: $(du_b "$WORK/store") bytes"
	"$PD" compact --all "$WORK/store" | sed "s/^/[$rule] compact --all: /"
	first_b=$(du_b "$WORK/store") first_p=$(du_b "$WORK/store/packs")
	read -r nd md <<<"$(deltas_of "$WORK/store")"
	echo "[$rule] crawl_du: $first_b bytes (packs $first_p); $nd pages stored as deltas, mean $md bytes"
	first_live=$(live_of "$WORK/store")
	tables "[$rule] crawl" "$WORK/store" "$(find "$CORPUS" -type f | wc -l)"
	echo "[$rule] crawl_du_per_gzip6: $(calc %.4f "$first_b / $gz_a") x; packs $(calc %.4f "$first_p / $gz_a") x; live records $first_live bytes ($(calc %.4f "$first_live / $gz_a") x)"
	grep "delta step" "$WORK/daemon.log" | tail -1 | sed "s/^/[$rule] /"
	: >"$WORK/daemon.log"
	PD_MOUNT_OPTS=$mopts mount_store "$WORK/store" || failed=1
	timed cp -r "$WORK/recrawl" "$WORK/mnt/r" || failed=1
	echo "[$rule] recrawl_cp_seconds: $(cat "$WORK/seconds") s"
	umount_store || failed=1
	second_b=$(du_b "$WORK/store") second_p=$(du_b "$WORK/store/packs")
	read -r nd2 md2 <<<"$(deltas_of "$WORK/store")"
	added=$((second_b - first_b))
	echo "[$rule] after the recrawl: du $second_b bytes (packs $second_p); $nd2 pages stored as deltas, mean $md2 bytes"
	second_live=$(live_of "$WORK/store")
	grep "delta step" "$WORK/daemon.log" | tail -1 | sed "s/^/[$rule] /"
	echo "[$rule] recrawl_added_packs: $((second_p - first_p)) bytes du; live records $((second_live - first_live)) bytes ($(calc %.4f "($second_live - $first_live) / $gz_b") x of gzip -6)"
	echo "[$rule] recrawl_added_per_gzip6: $(calc %.4f "$added / $gz_b") x  (goal <= 0.2: $(met "$added <= 0.2 * $gz_b"))"
	"$PD" stats "$WORK/store" | grep -E '^(blobs|packs|lmdb)' | sed "s/^/[$rule] recrawl_store_/"
	# what the compactor gives back: with its default threshold (a pack
	# under half live, as the daemon's thread does every 10 s), then all
	# of it (pagededup compact --all), run here at once on the unmounted store
	"$PD" compact "$WORK/store" | sed "s/^/[$rule] compact: /"
	echo "[$rule] recrawl_added_per_gzip6_compacted_by_default: $(calc %.4f "($(du_b "$WORK/store") - $first_b) / $gz_b") x"
	"$PD" compact --all "$WORK/store" | sed "s/^/[$rule] compact --all: /"
	third_b=$(du_b "$WORK/store")
	tables "[$rule] recrawl" "$WORK/store" "$(find "$CORPUS" "$WORK/recrawl" -type f | wc -l)"
	echo "[$rule] compacted: du $third_b bytes (packs $(du_b "$WORK/store/packs")); crawl and recrawl per their gzip -6 sums: $(calc %.4f "$third_b / ($gz_a + $gz_b)") x"
	echo "[$rule] recrawl_added_per_gzip6_compacted: $(calc %.4f "($third_b - $first_b) / $gz_b") x, both crawls compacted  (goal <= 0.2: $(met "$third_b - $first_b <= 0.2 * $gz_b"))"
	mv "$WORK/store" "$WORK/store.$rule"
done

# --- random reads -----------------------------------------------------------------
if [ "${PD_SKIP_READS:-0}" = 1 ]; then
	[ "$failed" = 0 ] && echo "bench-packs: all runs succeeded" || { echo "bench-packs: a run failed"; exit 1; }
	exit 0
fi
cp -r "$CORPUS" "$WORK/plain-a"
(cd "$CORPUS" && find . -type f | sort) | python3 -c '
import random, sys
p = [l.strip() for l in sys.stdin]
random.Random(3).shuffle(p)
print("\n".join(p[:int(sys.argv[1])]))' "$READS" >"$WORK/reads"
read_all() { # DIR: read every listed file
	(cd "$1" && python3 -c '
import sys
for l in open(sys.argv[1]):
    with open(l.strip(), "rb") as f:
        f.read()' "$WORK/reads")
}
drop_caches
timed read_all "$WORK/plain-a" || failed=1
plain_s=$(cat "$WORK/seconds")
echo "read_plain: $(calc %.0f "$READS / $plain_s") files/s"
for rule in $rules; do # each rule's store, with its deltas in place
	log0=$(wc -l <"$WORK/daemon.log")
	mount_store "$WORK/store.$rule" || failed=1
	drop_caches
	timed read_all "$WORK/mnt/a" || failed=1
	mnt_s=$(cat "$WORK/seconds")
	umount_store || failed=1
	echo "[$rule] read_mount: $(calc %.0f "$READS / $mnt_s") files/s over $(transport_since "$log0")"
	echo "[$rule] read_mount_per_plain: $(calc %.3f "$plain_s / $mnt_s") x  (goal >= 0.8: $(met "$plain_s / $mnt_s >= 0.8"))"
done
# The last rule's store read the same way over /dev/fuse (the reads above
# use FUSE over io_uring when the kernel offers it), and by the daemon of
# PD_READ_BASE (another build, e.g. main's) on both transports; then the
# floor (bench_nullfs holding the corpus's names, no disk behind them) on
# both; then the plain copy again, since its rate moves with the load.
read_through() { # LABEL: read the listed files under $WORK/mnt/a, print files/s and the ratio
	drop_caches
	timed read_all "$WORK/mnt/a" || failed=1
	local s; s=$(cat "$WORK/seconds")
	echo "$1: $(calc %.0f "$READS / $s") files/s, per plain $(calc %.3f "$plain_s / $s") x"
}
last=${rules##* }
for base in "$BUILD" ${PD_READ_BASE:+"$(cd "$PD_READ_BASE" && pwd)"}; do
	tag=""; [ "$base" = "$BUILD" ] || tag="base_"
	for t in devfuse uring; do
		[ "$base" = "$BUILD" ] && [ $t = uring ] && continue # measured above
		o=""; [ $t = devfuse ] && o="-o no_uring"
		log0=$(wc -l <"$WORK/daemon.log")
		PDFS=$base/pagededupfs PD_MOUNT_OPTS="$o ${PD_MOUNT_OPTS:-}" mount_store "$WORK/store.$last" || failed=1
		read_through "[$last] read_${tag}mount_$t"
		umount_store || failed=1
		echo "[$last] read_${tag}mount_$t served over $(transport_since "$log0")"
	done
done
for t in devfuse uring; do
	o=""; [ $t = uring ] && o="-o uring"
	"$BUILD/bench/bench_nullfs" "$WORK/mnt" -f $o >>"$WORK/daemon.log" 2>&1 &
	DPID=$!
	for _ in $(seq 1 200); do mountpoint -q "$WORK/mnt" && break; sleep 0.05; done
	cp -r "$CORPUS" "$WORK/mnt/a" || failed=1
	read_through "read_floor_nullfs_$t"
	umount_store || failed=1
done
drop_caches
timed read_all "$WORK/plain-a" || failed=1
echo "read_plain_again: $(calc %.0f "$READS / $(cat "$WORK/seconds")") files/s"
[ "$failed" = 0 ] && echo "bench-packs: all runs succeeded" || { echo "bench-packs: a run failed"; exit 1; }
