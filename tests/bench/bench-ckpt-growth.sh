#!/usr/bin/env bash
# LMDB's file while a copy runs, under the checkpoints' reader
# (core/store/store_ckpt.c): `cp -r` of make bench's corpus (a and b) into a
# fresh mount, for each build and each set of mount options in turn, the
# source read warm (a first pass reads it into the page cache).
#
#   bash tests/bench/bench-ckpt-growth.sh BUILD_DIR[:OPTS] [BUILD_DIR[:OPTS] ...]
#
# e.g. build/release build/release:sync_ms=10000. For each run it prints
# the copy's seconds, LMDB's file (allocated MB) at its peak while the
# copy ran (sampled every 0.5 s), as the copy returns and after the
# unmount (the rewrite at the close), the checkpoints taken while the copy
# ran (meta/ckpt's modification times seen to change: a lower bound when
# two fall within one sample), the commits (LMDB's mdb_txn_commit, counted
# by a perf uprobe when perf can place one; "-" otherwise), and LMDB's
# free pages as the copy returns with the oldest reader then (mdb_stat -ff,
# -r: lmdb-utils).
#
# Environment:
#   PD_CORPUS   the corpus (default /var/tmp/pagededup-corpus)
#   PD_WORKDIR  parent of the scratch directory (default /var/tmp)
#
# Mounts: run it under `flock /tmp/pd-bench.lock` beside other benchmarks.
# Timing is never asserted; the exit status says whether every run worked.
set -uo pipefail
export LC_ALL=C

[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR[:OPTS] ..." >&2; exit 2; }
CORPUS=${PD_CORPUS:-/var/tmp/pagededup-corpus}
[ -d "$CORPUS/corpus/a" ] && [ -d "$CORPUS/corpus/b" ] ||
	{ echo "bench-ckpt-growth: no corpus at $CORPUS (bash tests/bench/corpus.sh)" >&2; exit 2; }
command -v mdb_stat >/dev/null || { echo "bench-ckpt-growth: mdb_stat not found (apt-get install lmdb-utils)" >&2; exit 2; }
WORK=$(mktemp -d "${PD_WORKDIR:-/var/tmp}/pd-ckpt-growth.XXXXXX")
STORE=$WORK/store MNT=$WORK/mnt
LMDB_SO=$(ldconfig -p | awk '/liblmdb\.so\.0 / {print $NF; exit}')
PROBE=""
if command -v perf >/dev/null && [ -n "$LMDB_SO" ] &&
	{ perf probe -l 2>/dev/null | grep -q "probe_liblmdb:mdb_txn_commit" ||
	  perf probe -q -x "$LMDB_SO" -a mdb_txn_commit >/dev/null 2>&1; }; then
	PROBE=probe_liblmdb:mdb_txn_commit
fi
daemon_pid="" sampler="" perf_pid=""
cleanup() {
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null
	[ -n "$perf_pid" ] && kill -INT "$perf_pid" 2>/dev/null
	mountpoint -q "$MNT" 2>/dev/null && { fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"; }
	[ -n "$daemon_pid" ] && wait "$daemon_pid" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
mb() { du -m "$1" 2>/dev/null | cut -f1; }

find "$CORPUS/corpus" -type f -exec cat {} + >/dev/null # the source warm

bad=0
printf '%-34s %-18s %8s %9s %9s %9s %6s %8s %10s %8s\n' build options copy_s peak_MB end_MB exit_MB ckpts commits free_pages pinned
for spec in "$@"; do
	build=${spec%%:*} opts=""
	[ "$spec" != "$build" ] && opts=${spec#*:}
	[ -x "$build/pagededupfs" ] || { echo "bench-ckpt-growth: no pagededupfs in $build" >&2; bad=1; continue; }
	rm -rf "$STORE" && mkdir -p "$MNT"
	"$build/pagededup" mkfs "$STORE" >/dev/null || { bad=1; continue; }
	"$build/pagededupfs" "$STORE" "$MNT" -f ${opts:+-o "$opts"} >"$WORK/daemon.log" 2>&1 &
	daemon_pid=$!
	for _ in $(seq 200); do mountpoint -q "$MNT" && break; sleep 0.05; done
	mountpoint -q "$MNT" || { echo "bench-ckpt-growth: the mount did not come up" >&2; cat "$WORK/daemon.log" >&2; bad=1; continue; }
	( while :; do echo "$(mb "$STORE/meta/data.mdb") $(stat -c %Y.%y "$STORE/meta/ckpt" 2>/dev/null | tr ' ' _)"; sleep 0.5; done ) >"$WORK/samples" &
	sampler=$!
	perf_pid=""
	if [ -n "$PROBE" ]; then
		perf stat -e "$PROBE" -p "$daemon_pid" -x, -o "$WORK/perf" 2>/dev/null &
		perf_pid=$!
		sleep 0.3
	fi
	t0=$(date +%s.%N)
	cp -r "$CORPUS/corpus/a" "$CORPUS/corpus/b" "$MNT/" || bad=1
	t1=$(date +%s.%N)
	end=$(mb "$STORE/meta/data.mdb")
	kill "$sampler"; wait "$sampler" 2>/dev/null; sampler=""
	commits=-
	if [ -n "$perf_pid" ]; then
		kill -INT "$perf_pid"; wait "$perf_pid" 2>/dev/null; perf_pid=""
		commits=$(awk -F, '/mdb_txn_commit/ {print $1}' "$WORK/perf")
	fi
	free=$(mdb_stat -f "$STORE/meta" 2>/dev/null | awk '/Free pages:/ {print $3}')
	oldest=$(mdb_stat -r "$STORE/meta" 2>/dev/null | awk 'NR > 2 && $3 ~ /^[0-9]+$/ {if (!o || $3 < o) o = $3} END {print o + 0}')
	pinned=$(mdb_stat -ff "$STORE/meta" 2>/dev/null |
		awk -v o="$oldest" '/Transaction [0-9]+,/ {gsub(",", "", $2); if (o && $2 + 0 >= o) n += $3} END {print n + 0}')
	fusermount3 -u "$MNT" || bad=1
	wait "$daemon_pid" || bad=1
	daemon_pid=""
	peak=$(awk '{print $1}' "$WORK/samples" | sort -n | tail -1)
	ckpts=$(awk '{print $2}' "$WORK/samples" | uniq | wc -l)
	printf '%-34s %-18s %8.1f %9s %9s %9s %6s %8s %10s %8s\n' "$build" \
		"${opts:--}" "$(echo "$t1 - $t0" | bc)" "$peak" "$end" "$(mb "$STORE/meta/data.mdb")" "$ckpts" "$commits" "${free:--}" "$pinned"
	grep "LMDB's file" "$WORK/daemon.log" | sed 's/^/    /'
done
exit $bad
