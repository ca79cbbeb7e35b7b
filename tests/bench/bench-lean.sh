#!/usr/bin/env bash
# What a store costs beside its pages: for each input, a fresh store
# (pagededup mkfs with the defaults) is filled through the mount (cp -r),
# unmounted, and its bytes printed by part: the packs, the filter, LMDB's
# file (du) and each LMDB table's pages (mdb_stat -a: branch, leaf and
# overflow pages of 4 KiB), with the bytes per stored page.
#
#   tests/bench/bench-lean.sh BUILD_DIR NAME=DIR[,DIR...]...
#
# Example (the corpus as make bench copies it, and 50,000 small pages):
#   tests/bench/bench-lean.sh build/release \
#       corpus=/var/tmp/pagededup-corpus/corpus/a,/var/tmp/pagededup-corpus/corpus/b small=/var/tmp/small
#
# Environment: PD_WORKDIR (default /var/tmp), PD_KEEP=1 keeps the stores,
# PD_MKFS_OPTS (extra mkfs options). Lines are "NAME_FIGURE: value unit".
set -uo pipefail
export LC_ALL=C
BUILD=$(cd "${1:?usage: bench-lean.sh BUILD_DIR NAME=DIR[,DIR...]...}" && pwd) || exit 2
shift
PD=$BUILD/pagededup PDFS=$BUILD/pagededupfs
command -v mdb_stat >/dev/null || { echo "bench-lean: mdb_stat not found (apt-get install lmdb-utils)" >&2; exit 2; }
. "$(dirname "$0")/bench_lib.sh"
bench_work lean
# du_b of several paths, 0 for none there
du_b() { local k; k=$(du -sk "$@" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'); echo $((k * 1024)); }
failed=0
for arg in "$@"; do
	name=${arg%%=*} dirs=${arg#*=}
	store=$WORK/store-$name
	"$PD" mkfs "$store" ${PD_MKFS_OPTS:-} >/dev/null || { failed=1; continue; }
	mkdir -p "$WORK/mnt"
	"$PDFS" "$store" "$WORK/mnt" -f >>"$WORK/daemon.log" 2>&1 &
	DPID=$!
	for _ in $(seq 1 200); do mountpoint -q "$WORK/mnt" && break; sleep 0.05; done
	t0=$(date +%s.%N)
	IFS=, read -ra srcs <<<"$dirs"
	for s in "${srcs[@]}"; do cp -r "$s" "$WORK/mnt/" || failed=1; done
	t1=$(date +%s.%N)
	fusermount3 -u "$WORK/mnt" && wait "$DPID" || failed=1
	DPID=""
	pages=$("$PD" stats --json "$store" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pages"])')
	files=$(find "${srcs[@]}" -type f | wc -l)
	echo "${name}_files: $files files ($pages distinct pages), cp -r $(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") s"
	whole=$(du_b "$store") packs=$(du_b "$store/packs" "$store/objects") filt=$(du_b "$store/filter" "$store/filter.d")
	meta=$(du_b "$store/meta")
	echo "${name}_du_store: $whole bytes (packs $packs, LMDB $meta, filter $filt)"
	echo "${name}_lmdb_per_file: $(awk "BEGIN { printf \"%.0f\", $meta / $files }") bytes"
	mdb_stat -a "$store/meta" | awk -v n="$name" -v files="$files" '
		/^Status of / { db = $3; sub(/^Status of /, ""); db = $0; next }
		/Branch pages:/ { b = $3 } /Leaf pages:/ { l = $3 } /Overflow pages:/ { o = $3 }
		/Entries:/ { if (db != "") printf "%s_table %-14s %8d entries %7d pages %11d bytes %7.1f B/file\n", n, db, $2, b + l + o, (b + l + o) * 4096, (b + l + o) * 4096 / files }'
	mdb_stat -ef "$store/meta" | awk -v n="$name" '/Number of pages used:|Free pages:|Max pages:/ { print n "_env " $0 }'
	# mdb_stat counts a dup-sorted table's main tree only: the pages of
	# its sub-databases (a key's values once they outgrow a node: the
	# rows of nearbands, near0..nearK, dirents, links) are what is left
	{ mdb_stat -a "$store/meta"; mdb_stat -ef "$store/meta"; } | awk -v n="$name" -v files="$files" '
		/Branch pages:|Leaf pages:|Overflow pages:/ { t += $3 }
		/Number of pages used:/ { used = $5 } /Free pages:/ { free = $3 }
		END { d = used - t - free; printf "%s_table %-14s %8s         %7d pages %11d bytes %7.1f B/file\n", n, "(dup values)", "", d, d * 4096, d * 4096 / files }'
	[ "${PD_KEEP:-0}" = 1 ] || rm -rf "$store"
done
exit "$failed"
