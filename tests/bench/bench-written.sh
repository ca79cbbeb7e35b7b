#!/usr/bin/env bash
# The store as the mount leaves it, under settings compared in one run:
# by default with and without LMDB's rewrite at unmount (-o
# lmdb_rewrite_mb, store_lmdb.c). For each NAME=DIR, the distinct files of
# DIR (only those matching PD_WRITTEN_GLOB, default *.html) are copied with
# cp -r into a fresh store through the mount, the store is unmounted, and
# the daemon's end is awaited; once with each setting of
# PD_WRITTEN_SETTINGS (mount options, one word each; default
# "lmdb_rewrite_mb=0 lmdb_rewrite_mb=256"), PD_WRITTEN_ROUNDS times
# (default 2), alternated. Printed per run: du of the store and of its
# parts (LMDB, packs, filter) over the per-page gzip -6 sum of the
# distinct files, the seconds of the copy and from the unmount to the
# daemon's exit, the daemon's CPU seconds (user + system, its whole life)
# and the delta step's (its log), what the daemon's log said of LMDB at
# the close and of the window's deltas (-o delta_window), and whether
# `pagededup fsck` is clean. With PD_WRITTEN_REST=SECONDS, a setting
# that turns the idle pass on (idle_compact=N, N > 0) is left at rest
# after the copy until the daemon's log says what its idle pass did (at
# most SECONDS), and the rest's seconds and that line are printed too.
#
#   bash tests/bench/bench-written.sh BUILD_DIR NAME=DIR...
#
# Environment: PD_WORKDIR (/var/tmp), PD_KEEP=1, PD_WRITTEN_GLOB,
# PD_WRITTEN_ROUNDS, PD_WRITTEN_SETTINGS, PD_MOUNT_OPTS (added to every
# setting), PD_WRITTEN_ORDER (cp, the default: cp -r; interleaved: each
# top-level directory of DIR a host, the hosts' files written in turn, as
# a crawl of many hosts writes them: interleave.py). The mounts are
# taken under flock /tmp/pd-bench.lock, so that two benchmarks do not
# overlap. Timing is never asserted.
set -uo pipefail
export LC_ALL=C
BUILD=$(cd "${1:?usage: bench-written.sh BUILD_DIR NAME=DIR...}" && pwd) || exit 2
shift
PD=$BUILD/pagededup PDFS=$BUILD/pagededupfs
GLOB=${PD_WRITTEN_GLOB:-*.html} ROUNDS=${PD_WRITTEN_ROUNDS:-2}
SETTINGS=${PD_WRITTEN_SETTINGS:-lmdb_rewrite_mb=0 lmdb_rewrite_mb=256}
ORDER=${PD_WRITTEN_ORDER:-cp}
REST=${PD_WRITTEN_REST:-}
case $ORDER in cp | interleaved) ;; *) echo "bench-written: PD_WRITTEN_ORDER: cp or interleaved" >&2; exit 2 ;; esac
INTERLEAVE=$(cd "$(dirname "$0")" && pwd)/interleave.py
. "$(dirname "$0")/bench_lib.sh"
bench_work written
failed=0
# fill STORE SRC OPTS: mkfs, mount, cp -r, unmount; prints the seconds of
# the copy and from the unmount to the daemon's exit, the daemon's CPU
# seconds, and the seconds it was left at rest for its idle pass
fill() {
	"$PD" mkfs "$1" >/dev/null || return 1
	mkdir -p "$WORK/mnt"
	: >"$WORK/daemon.log"
	/usr/bin/time -f "%U %S" -o "$WORK/daemon.time" "$PDFS" "$1" "$WORK/mnt" -f -o "$3" ${PD_MOUNT_OPTS:-} >>"$WORK/daemon.log" 2>&1 &
	DPID=$!
	for _ in $(seq 1 200); do mountpoint -q "$WORK/mnt" && break; sleep 0.05; done
	mountpoint -q "$WORK/mnt" || { echo "bench-written: mount failed" >&2; return 1; }
	local c s e
	c=$(date +%s.%N)
	if [ "$ORDER" = interleaved ]; then
		python3 "$INTERLEAVE" "$2" "$WORK/mnt/in" >/dev/null || return 1
	else
		cp -r "$2" "$WORK/mnt/in" || return 1
	fi
	s=$(date +%s.%N)
	local r=$s
	if [ -n "$REST" ] && grep -qE 'idle_compact=[1-9]' <<<"$3 ${PD_MOUNT_OPTS:-}"; then
		for _ in $(seq 1 $((REST * 10))); do
			grep -q "idle pass" "$WORK/daemon.log" && break
			sleep 0.1
		done
		r=$(date +%s.%N)
	fi
	fusermount3 -u "$WORK/mnt" || return 1
	wait "$DPID" || return 1
	e=$(date +%s.%N)
	DPID=""
	awk "BEGIN { printf \"%.2f %.2f\", $s - $c, $e - $r }"
	awk '{ printf " %.2f", $1 + $2 }' "$WORK/daemon.time"
	awk "BEGIN { printf \" %.2f\", $r - $s }"
}
for arg in "$@"; do
	name=${arg%%=*} dir=${arg#*=}
	src=$WORK/src-$name
	mkdir -p "$src"
	# the distinct files only (the figure is about the store's bytes a page)
	n=$(distinct_copy "$dir" "$GLOB" "$src")
	gz=$(gzip_sum "$src")
	echo "${name}_input: $n distinct files, $(du -sb --apparent-size "$src" | cut -f1) bytes, per-page gzip -6 sum $gz bytes"
	for r in $(seq 1 "$ROUNDS"); do
		for setting in $SETTINGS; do
			store=$WORK/store
			rm -rf "$store"
			times=$(flock /tmp/pd-bench.lock bash -c "$(declare -f fill); $(declare -p PD PDFS WORK ORDER INTERLEAVE REST); fill '$store' '$src' '$setting'") ||
				{ echo "bench-written: filling $name failed" >&2; failed=1; continue; }
			b=$(du_b "$store") m=$(du_b "$store/meta") p=$(du_b "$store/packs")
			f=$(( $(du -sck "$store/filter" "$store/filter.d" 2>/dev/null | tail -1 | cut -f1) * 1024 ))
			said=$(grep -o "LMDB's file .*" "$WORK/daemon.log" | head -1)
			step=$(grep -o "delta step CPU: [0-9.]* s" "$WORK/daemon.log" | head -1 | awk '{ print $4 }')
			win=$(grep -o "[0-9]* of the deltas on a page of the window" "$WORK/daemon.log" | awk '{ print $1 }')
			read -r copy_s exit_s cpu_s rest_s <<<"$times"
			idle=$(grep -o "idle pass.*" "$WORK/daemon.log" | head -1)
			echo "${name}_round${r}_${setting%%=*}_${setting#*=}: du $b bytes ($(calc %.4f "$b / $gz") x gzip): LMDB $m, packs $p, filter $f; copy $copy_s s, unmount to exit $exit_s s; daemon CPU $cpu_s s, delta step ${step:-0} s, window deltas ${win:-0}; ${said:-LMDB: nothing said}${idle:+; at rest $rest_s s: $idle}"
			"$PD" fsck "$store" >"$WORK/fsck.out" 2>&1 && echo "${name}_round${r}_${setting%%=*}_${setting#*=}_fsck: clean" ||
				{ echo "${name}_round${r}_fsck: NOT clean"; tail -5 "$WORK/fsck.out"; failed=1; }
		done
	done
	rm -rf "$WORK/store" "$src"
done
[ "$failed" = 0 ] && echo "bench-written: all runs succeeded" || { echo "bench-written: a run failed"; exit 1; }
