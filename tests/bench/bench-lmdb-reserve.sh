#!/usr/bin/env bash
# What a delete takes of LMDB's fresh pages (the reserve kept for deletes on
# a full disk, core/store/store_commit.c): a store is filled through the
# mount with SRC (a directory of directories, as `recrawl.py small` makes:
# 50 of 1,000 files), then before each step its LMDB is compacted
# (mdb_copy -c: no free page left), the step runs through the mount, and the
# growth of the pages in use (last page + 1) is printed: what the step took
# beyond the pages it freed and LMDB used again.
#
#   tests/bench/bench-lmdb-reserve.sh BUILD_DIR SRC
#
# Steps: mount and unmount alone; one unlink; rm -r of one directory; 8
# rm -r at once; 16 rm -r at once (xargs -P 16) over 20 directories.
# Environment: PD_WORKDIR (default /var/tmp).
set -uo pipefail
B=$(cd "${1:?usage: bench-lmdb-reserve.sh BUILD_DIR SRC}" && pwd) || exit 2
SRC=$(cd "${2:?usage: bench-lmdb-reserve.sh BUILD_DIR SRC}" && pwd) || exit 2
command -v mdb_copy >/dev/null || { echo "bench-lmdb-reserve: mdb_copy not found (apt-get install lmdb-utils)" >&2; exit 2; }
W=$(mktemp -d "${PD_WORKDIR:-/var/tmp}/pd-lmdb-reserve.XXXXXX")
P=""
cleanup() {
	mountpoint -q "$W/mnt" 2>/dev/null && fusermount3 -u "$W/mnt"
	[ -n "$P" ] && wait "$P" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/mnt"
used() { mdb_stat -e "$W/store/meta" | awk '/Number of pages used/ { print $5 }'; }
compact() {
	rm -rf "$W/c" && mkdir "$W/c" && mdb_copy -c "$W/store/meta" "$W/c" &&
		mv "$W/c/data.mdb" "$W/store/meta/data.mdb" && rm -f "$W/store/meta/lock.mdb"
}
mnt() {
	"$B/pagededupfs" "$W/store" "$W/mnt" -f >>"$W/log" 2>&1 &
	P=$!
	for _ in $(seq 200); do mountpoint -q "$W/mnt" && return 0; sleep 0.05; done
	echo "bench-lmdb-reserve: mount failed" >&2; cat "$W/log" >&2; exit 1
}
um() { fusermount3 -u "$W/mnt"; wait "$P"; P=""; }
step() { # NAME CMD...
	local name=$1 u0 u1
	shift
	compact || exit 1
	u0=$(used)
	mnt; "$@"; um
	u1=$(used)
	echo "$name: $((u1 - u0)) pages ($(( (u1 - u0) * 4 )) KiB) past $u0 in use"
}
"$B/pagededup" mkfs "$W/store" >/dev/null || exit 1
mnt; cp -r "$SRC" "$W/mnt/s"; um
dirs=$(ls "$SRC")
step "mount and unmount alone" true
d=$(sed -n 1p <<<"$dirs"); f=$(ls "$SRC/$d" | head -1)
step "one unlink" rm "$W/mnt/s/$d/$f"
d=$(sed -n 2p <<<"$dirs")
step "rm -r of a directory of $(ls "$SRC/$d" | wc -l) files" rm -r "$W/mnt/s/$d"
eight() {
	local pids="" d
	for d in $(sed -n 3,10p <<<"$dirs"); do rm -r "$W/mnt/s/$d" & pids="$pids $!"; done
	wait $pids
}
step "8 rm -r at once" eight
sixteen() { sed -n 11,30p <<<"$dirs" | sed "s|^|$W/mnt/s/|" | xargs -P 16 -n 1 rm -r; }
step "16 rm -r at once over 20 directories" sixteen
