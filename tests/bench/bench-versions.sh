#!/usr/bin/env bash
# Two versions of a set of pages through the mount, the older then the
# newer (a recrawl of real origin: two releases of one documentation, or
# recrawl.py's changes to any pages): what the newer adds on disk against
# its own per-page gzip -6 sum (the baseline, computed in the same run),
# each crawl followed by `pagededup compact --all`, and the delta step's
# line for it.
#
#   bash tests/bench/bench-versions.sh BUILD_DIR OLD_DIR NEW_DIR [LABEL]
#
# Environment: PD_WORKDIR (/var/tmp), PD_KEEP=1, PD_MOUNT_OPTS. It mounts:
# run it under flock /tmp/pd-bench.lock beside other benchmarks.
# Timing is never asserted; the exit status says whether every step worked.
set -uo pipefail
export LC_ALL=C
top=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:?BUILD_DIR}" && pwd) || exit 2
OLD=$(cd "${2:?OLD_DIR}" && pwd) || exit 2
NEW=$(cd "${3:?NEW_DIR}" && pwd) || exit 2
LABEL=${4:-versions}
PD=$BUILD/pagededup PDFS=$BUILD/pagededupfs
. "$top/tests/bench/bench_lib.sh"
bench_work versions
du_b() { du -sB1 "$1" | cut -f1; }
copy_in() { # DIR NAME: cp -r DIR into the mounted store as NAME, then unmount and compact --all
	mkdir -p "$WORK/mnt"
	"$PDFS" "$WORK/store" "$WORK/mnt" -f ${PD_MOUNT_OPTS:-} >"$WORK/daemon.log" 2>&1 &
	DPID=$!
	for _ in $(seq 1 200); do mountpoint -q "$WORK/mnt" && break; sleep 0.05; done
	mountpoint -q "$WORK/mnt" || { echo "bench-versions: mount failed" >&2; cat "$WORK/daemon.log" >&2; return 1; }
	cp -r "$1" "$WORK/mnt/$2" || return 1
	fusermount3 -u "$WORK/mnt" || return 1
	wait "$DPID" || return 1
	DPID=""
	grep "delta step" "$WORK/daemon.log" | sed "s/^/[$LABEL] $2: /"
	"$PD" compact --all "$WORK/store" >/dev/null || return 1
}
failed=0
gz_new=$(gzip_sum "$NEW")
echo "[$LABEL] pages: old $(find "$OLD" -type f | wc -l) ($(du -sb "$OLD" | cut -f1) bytes), new $(find "$NEW" -type f | wc -l) ($(du -sb "$NEW" | cut -f1) bytes); new per-page gzip -6 sum $gz_new bytes"
"$PD" mkfs "$WORK/store" >/dev/null || failed=1
copy_in "$OLD" old || failed=1
first=$(du_b "$WORK/store") first_p=$(du_b "$WORK/store/packs")
copy_in "$NEW" new || failed=1
second=$(du_b "$WORK/store") second_p=$(du_b "$WORK/store/packs")
echo "[$LABEL] old: du $first bytes (packs $first_p); with new: du $second bytes (packs $second_p)"
echo "[$LABEL] new_added_per_gzip6: $(calc %.4f "($second - $first) / $gz_new") x; packs added $(calc %.4f "($second_p - $first_p) / $gz_new") x"
"$PD" blobs "$WORK/store" | awk -F'\t' -v l="$LABEL" '$4 ~ /:delta/ { n++; split($4, a, /[:+]/); s += a[3] }
	END { printf "[%s] records stored as deltas: %d, %d bytes\n", l, n, s }'
"$PD" fsck --deep "$WORK/store" >/dev/null || { echo "bench-versions: fsck --deep failed" >&2; failed=1; }
[ "$failed" = 0 ] && echo "bench-versions: all steps succeeded" || { echo "bench-versions: a step failed"; exit 1; }
