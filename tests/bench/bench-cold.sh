#!/usr/bin/env bash
# What encoding the records again at compaction gives (blob_cold.c), on any
# input: for each NAME=DIR, the distinct files of DIR (only those matching
# PD_COLD_GLOB, default *.html) are copied into a fresh store through the
# mount (cp -r), the store is unmounted and compacted with every record
# copied as it is (`pagededup compact --all --level 0`: the baseline, the
# store as the write path left it, without its dead bytes), then a copy of
# it is compacted with `pagededup compact --all --level L` for each level
# of PD_COLD_LEVELS (default "9 19") and each window of PD_COLD_WINDOWS
# (default "0 8": `--window W`, the whole pages tried as deltas on the W
# pages copied before them), and then once more on the store that
# left (a second `compact --all`: its wall and CPU seconds and the bytes
# the process wrote beside the first's). Printed per input and level: du of
# the store and of its packs over the per-page gzip -6 sum of the distinct
# files, the records encoded again and the bytes that saved, the CPU
# seconds of the compaction (user + system, /usr/bin/time: its cost
# whatever else the machine runs) and raw MB per CPU second; and whether
# `pagededup fsck --deep` is clean after it.
#
#   bash tests/bench/bench-cold.sh BUILD_DIR NAME=DIR...
#
# Environment: PD_WORKDIR (/var/tmp), PD_KEEP=1, PD_COLD_GLOB, PD_COLD_LEVELS,
# PD_COLD_WINDOWS, PD_MOUNT_OPTS. The mount is taken under flock /tmp/pd-bench.lock, so that
# two benchmarks do not overlap. Timing is never asserted.
set -uo pipefail
export LC_ALL=C
BUILD=$(cd "${1:?usage: bench-cold.sh BUILD_DIR NAME=DIR...}" && pwd) || exit 2
shift
PD=$BUILD/pagededup PDFS=$BUILD/pagededupfs
GLOB=${PD_COLD_GLOB:-*.html} LEVELS=${PD_COLD_LEVELS:-9 19} WINDOWS=${PD_COLD_WINDOWS:-0 8}
. "$(dirname "$0")/bench_lib.sh"
bench_work cold
failed=0
fill() { # STORE SRC: mkfs, mount, cp -r, unmount
	"$PD" mkfs "$1" >/dev/null || return 1
	mkdir -p "$WORK/mnt"
	"$PDFS" "$1" "$WORK/mnt" -f ${PD_MOUNT_OPTS:-} >>"$WORK/daemon.log" 2>&1 &
	DPID=$!
	for _ in $(seq 1 200); do mountpoint -q "$WORK/mnt" && break; sleep 0.05; done
	mountpoint -q "$WORK/mnt" || { echo "bench-cold: mount failed" >&2; return 1; }
	cp -r "$2" "$WORK/mnt/in" || return 1
	fusermount3 -u "$WORK/mnt" || return 1
	wait "$DPID" || return 1
	DPID=""
}
compact_timed() { # STORE LEVEL [WINDOW]: prints the compaction's lines, "cpu SECONDS", "wall SECONDS", "written BYTES"
	/usr/bin/time -f "cpu %U %S %e %O" -o "$WORK/time" "$PD" compact --all --level "$2" --window "${3:-0}" "$1" \
		>"$WORK/compact.out" || return 1
	awk '{ printf "cpu %.2f\nwall %.2f\nwritten %d\n", $2 + $3, $4, $5 * 512 }' "$WORK/time"
	cat "$WORK/compact.out"
}
field() { echo "$1" | awk -v k="$2" '$1 == k { print $2 }'; }
for arg in "$@"; do
	name=${arg%%=*} dir=${arg#*=}
	src=$WORK/src-$name
	mkdir -p "$src"
	# the distinct files only (the figure is about their encodings)
	n=$(distinct_copy "$dir" "$GLOB" "$src")
	raw=$(du -sb --apparent-size "$src" | cut -f1)
	gz=$(gzip_sum "$src")
	echo "${name}_input: $n distinct files, $raw bytes, per-page gzip -6 sum $gz bytes"
	flock /tmp/pd-bench.lock bash -c "$(declare -f fill); $(declare -p PD PDFS WORK); fill '$WORK/store-$name' '$src'" ||
		{ echo "bench-cold: filling $name failed" >&2; failed=1; continue; }
	compact_timed "$WORK/store-$name" 0 >/dev/null || failed=1
	base_b=$(du_b "$WORK/store-$name") base_p=$(du_b "$WORK/store-$name/packs")
	echo "${name}_as_written: du $base_b bytes ($(calc %.4f "$base_b / $gz") x gzip), packs $base_p ($(calc %.4f "$base_p / $gz") x)"
	for l in $LEVELS; do for w in $WINDOWS; do
		tag=${name}_level_$l; [ "$w" = 0 ] || tag=${tag}_window_$w
		rm -rf "$WORK/cold"
		cp -a "$WORK/store-$name" "$WORK/cold"
		out=$(compact_timed "$WORK/cold" "$l" "$w") || failed=1
		cpu=$(echo "$out" | awk '/^cpu/ { print $2 }')
		again=$(echo "$out" | sed -n 's/^encoded again at level [0-9]*: //p')
		b=$(du_b "$WORK/cold") p=$(du_b "$WORK/cold/packs")
		echo "$tag: du $b bytes ($(calc %.4f "$b / $gz") x gzip, $(calc %.4f "$b / $base_b") x as written), packs $p ($(calc %.4f "$p / $gz") x gzip, $(calc %.4f "$p / $base_p") x as written); $again; $cpu s CPU, $(calc %.1f "$raw / 1e6 / ($cpu > 0 ? $cpu : 1)") raw MB per CPU second"
		# the same pass again on the store it left: what a second run costs
		out2=$(compact_timed "$WORK/cold" "$l" "$w") || failed=1
		cpu2=$(field "$out2" cpu)
		echo "${tag}_again: $(field "$out2" wall) s wall (first $(field "$out" wall) s), $cpu2 s CPU (first $cpu s: $(calc %.4f "$cpu2 / ($cpu > 0 ? $cpu : 1)") x), $(field "$out2" written) bytes written by the process (first $(field "$out" written)); $(echo "$out2" | sed -n 's/^compacted \([0-9]*\) packs\{0,1\} ([0-9]* removed): \([0-9]*\) records, \([0-9]*\) bytes moved.*/\1 packs compacted, \2 records and \3 bytes moved/p')"
		"$PD" fsck --deep "$WORK/cold" >"$WORK/fsck.out" 2>&1 && echo "${tag}_fsck_deep: clean" ||
			{ echo "${tag}_fsck_deep: NOT clean"; tail -5 "$WORK/fsck.out"; failed=1; }
	done; done
	rm -rf "$WORK/cold" "$WORK/store-$name" "$src"
done
[ "$failed" = 0 ] && echo "bench-cold: all runs succeeded" || { echo "bench-cold: a run failed"; exit 1; }
