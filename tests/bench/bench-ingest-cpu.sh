#!/usr/bin/env bash
# The daemon's CPU per page written: a cp -r of one corpus directory into a
# fresh mount, then the unmount (which waits for the signer and the delta
# step to catch up), for one or more builds, alternated round by round so
# that each build sees the same load.
#
#   bash tests/bench/bench-ingest-cpu.sh BUILD_DIR [BUILD_DIR ...]
#
# For each run it prints the daemon's user+system CPU seconds per 1,000
# pages (from /usr/bin/time around the daemon: the load-independent figure
# on a busy machine), the part spent after the copy returned (the catch-up
# until the unmount ends), the wall-clock seconds of the copy, and the CPU
# per 1,000 pages of each kind of thread (from /proc/PID/task/*/stat,
# sampled until the daemon exits; threads by name: pd-signer, pd-delta,
# pdfs-ring-N for the request threads over io_uring, pagededupfs for the
# main thread and libfuse's workers), the daemon's minor page faults per
# page (/usr/bin/time: anonymous memory touched for the first time, each
# a trap, a zeroed page and a page-table entry) and the peak of its
# RssAnon (sampled every 50 ms from /proc/PID/status while it runs). Then
# the ratios of every build's median against the first build's.
#
# Environment:
#   PD_CORPUS        the corpus (default /var/tmp/pagededup-corpus)
#   PD_INGEST_SRC    the directory copied (default $PD_CORPUS/corpus/a)
#   PD_INGEST_ROUNDS rounds (default 2); each round runs every build once
#   PD_MOUNT_OPTS    extra options for pagededupfs
#   PD_PERF=DIR      perf record -g each daemon into DIR/perf-B-R.data
#   PD_WORKDIR       parent of the scratch directory (default /var/tmp)
#
# Mounts: run it under `flock /tmp/pd-bench.lock` beside other benchmarks.
# Timing is never asserted; the exit status says whether every run worked.
set -uo pipefail
export LC_ALL=C

[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [BUILD_DIR ...]" >&2; exit 2; }
BUILDS=()
for b in "$@"; do
	d=$(cd "$b" 2>/dev/null && pwd) && [ -x "$d/pagededupfs" ] ||
		{ echo "bench-ingest-cpu: no build directory $b (with pagededupfs)" >&2; exit 2; }
	BUILDS+=("$d")
done
CORPUS=${PD_CORPUS:-/var/tmp/pagededup-corpus}
SRC=${PD_INGEST_SRC:-$CORPUS/corpus/a}
ROUNDS=${PD_INGEST_ROUNDS:-2}
[ -d "$SRC" ] || { echo "bench-ingest-cpu: no source directory $SRC" >&2; exit 2; }
pages=$(find "$SRC" -type f | wc -l)
WORK=$(mktemp -d "${PD_WORKDIR:-/var/tmp}/pd-ingest-cpu.XXXXXX")
MNT=$WORK/mnt
HZ=$(getconf CLK_TCK)
daemon_pid=""
time_pid=""
failed=0

cleanup() {
	if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null
		sleep 1
		kill "$daemon_pid" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

. "$(dirname "$0")/bench_lib.sh" # sample_rss_anon
calc() { awk "BEGIN { printf \"$1\n\", $2 }"; }
now() { date +%s.%N; }

# Per thread name, the CPU ticks of the daemon's threads as last sampled
# (a thread's line is kept after it exits): file of "tid name ticks".
sample_threads() { # pid file
	local t name ticks
	for t in /proc/"$1"/task/*; do
		name=$(cat "$t/comm" 2>/dev/null) || continue
		# fields 14 and 15 (utime, stime) after the ")" that ends comm
		ticks=$(sed 's/.*) //' "$t/stat" 2>/dev/null | awk '{ print $12 + $13 }') || continue
		[ -n "$ticks" ] && echo "${t##*/} ${name%%[0-9]*} $ticks"
	done >"$2.new"
	# merge: the newest value of each tid
	cat "$2" "$2.new" 2>/dev/null | awk '{ v[$1] = $2 " " $3 } END { for (t in v) print t, v[t] }' >"$2.m"
	mv "$2.m" "$2"
}

run_one() { # build-index round
	local b=$1 r=$2 B=${BUILDS[$1]} store=$WORK/store threads=$WORK/threads i t0 t1 cpu_at_copy total
	rm -rf "$store" "$MNT" "$threads" "$WORK/time" "$WORK/peak"
	mkdir -p "$MNT"
	"$B/pagededup" mkfs "$store" >/dev/null 2>&1 || { echo "run $b/$r: mkfs failed" >&2; return 1; }
	# shellcheck disable=SC2086
	/usr/bin/time -f "%U %S %R" -o "$WORK/time" "$B/pagededupfs" "$store" "$MNT" -f ${PD_MOUNT_OPTS:-} \
		>"$WORK/daemon.log" 2>&1 &
	time_pid=$!
	for ((i = 0; i < 300; i++)); do
		mountpoint -q "$MNT" && break
		sleep 0.1
	done
	daemon_pid=$(pgrep -P "$time_pid" -x pagededupfs | head -1)
	if ! mountpoint -q "$MNT" || [ -z "$daemon_pid" ]; then
		echo "run $b/$r: the mount did not come up" >&2
		sed 's/^/  /' "$WORK/daemon.log" >&2
		return 1
	fi
	sample_rss_anon "$daemon_pid" "$WORK/peak" & # until the daemon exits
	local peak_pid=$!
	local perf_pid=""
	if [ -n "${PD_PERF:-}" ]; then
		mkdir -p "$PD_PERF"
		perf record -g -q -p "$daemon_pid" -o "$PD_PERF/perf-$b-$r.data" 2>/dev/null &
		perf_pid=$!
	fi
	sync
	t0=$(now)
	cp -r "$SRC" "$MNT/" || { echo "run $b/$r: cp failed" >&2; failed=1; }
	t1=$(now)
	sample_threads "$daemon_pid" "$threads"
	cpu_at_copy=$(awk '{ s += $3 } END { print s }' "$threads")
	local copied
	copied=$(find "$MNT" -type f | wc -l)
	[ "$copied" -eq "$pages" ] || { echo "run $b/$r: $copied files in the mount, want $pages" >&2; failed=1; }
	sample_threads "$daemon_pid" "$threads"
	fusermount3 -u "$MNT" || { echo "run $b/$r: unmount failed" >&2; failed=1; }
	while kill -0 "$daemon_pid" 2>/dev/null; do
		sample_threads "$daemon_pid" "$threads"
		sleep 0.2
	done
	wait "$time_pid"
	[ -n "$perf_pid" ] && wait "$perf_pid"
	wait "$peak_pid"
	daemon_pid=""
	total=$(awk '{ print $1 + $2 }' "$WORK/time")
	echo "build$b round$r: cpu_s_per_1000_pages $(calc %.3f "$total * 1000 / $pages")" \
		"after_copy_s_per_1000 $(calc %.3f "($total - $cpu_at_copy / $HZ) * 1000 / $pages")" \
		"copy_wall_s $(calc %.2f "$t1 - $t0")" \
		"minor_faults_per_page $(calc %.1f "$(awk '{ print $3 }' "$WORK/time") / $pages")" \
		"peak_rss_anon_mib $(calc %.1f "$(cat "$WORK/peak" 2>/dev/null || echo 0) / 1024")"
	awk -v hz="$HZ" -v p="$pages" -v b="$b" -v r="$r" '{ s[$2] += $3 }
		END { for (n in s) printf "build%s round%s thread %s: %.3f s per 1000 pages\n", b, r, n, s[n] / hz * 1000 / p }' \
		"$threads" | sort
	echo "$b $total" >>"$WORK/totals"
}

echo "source: $SRC ($pages files); builds: ${BUILDS[*]}; rounds: $ROUNDS"
echo "fuse enable_uring: $(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null || echo -)"
echo "load before: $(uptime)"
for ((r = 1; r <= ROUNDS; r++)); do
	for ((b = 0; b < ${#BUILDS[@]}; b++)); do
		run_one "$b" "$r" || failed=1
	done
done
echo "load after: $(uptime)"
if [ -s "$WORK/totals" ]; then
	sort -k1,1n -k2,2g "$WORK/totals" | awk -v p="$pages" '
		{ v[$1, ++n[$1]] = $2; if (!($1 in seen)) { seen[$1] = 1; order[++nb] = $1 } }
		END {
			for (i = 1; i <= nb; i++) {
				b = order[i]; k = n[b]
				med = k % 2 ? v[b, (k + 1) / 2] : (v[b, k / 2] + v[b, k / 2 + 1]) / 2
				m[b] = med
				printf "build%s: median cpu_s_per_1000_pages %.3f over %d runs", b, med * 1000 / p, k
				if (b != order[1]) printf " (%.3f of build%s)", med / m[order[1]], order[1]
				printf "\n"
			}
		}'
fi
exit $failed
