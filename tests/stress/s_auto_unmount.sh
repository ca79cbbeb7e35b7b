#!/usr/bin/env bash
# -o auto_unmount under load (make stress): a daemon mounted with it is
# killed (SIGKILL) right after a write, PD_AU_ROUNDS times (default 40),
# while a busy loop a CPU and a writer keep the machine busy; each time its
# mount must be gone within 10 s. fusermount3's watcher unmounts only if
# the FUSE connection is already gone when it looks (fs/auto_unmount.c);
# before the daemon ordered its descriptors for that, 7 kills in 36 left
# the mount behind on a loaded 2-core machine.
. "$(dirname "$0")/../fs/lib.sh"
pd_require

LOAD_PIDS=()
load_start() {
	local i
	for ((i = 0; i < $(nproc); i++)); do
		( while :; do :; done ) &
		LOAD_PIDS+=($!)
	done
	( while :; do dd if=/dev/zero of="$PD_TMP/load" bs=1M count=64 conv=fsync 2>/dev/null; done ) &
	LOAD_PIDS+=($!)
}
load_stop() {
	[ ${#LOAD_PIDS[@]} -gt 0 ] && kill "${LOAD_PIDS[@]}" 2>/dev/null
	wait "${LOAD_PIDS[@]}" 2>/dev/null
	LOAD_PIDS=()
	rm -f "$PD_TMP/load"
}

case_auto_unmount_under_load() {
	local round rounds=${PD_AU_ROUNDS:-40} left=0
	trap load_stop EXIT
	load_start
	for ((round = 1; round <= rounds; round++)); do
		pd_mount auto_unmount || fail "mount (round $round)"
		echo "page $round" >"$MNT/p" || fail "write (round $round)"
		if ! pd_kill_auto_unmounted; then
			left=$((left + 1))
			note "round $round: still mounted 10 s after the kill"
			umount -l "$MNT" 2>/dev/null
		fi
	done
	load_stop
	echo "auto_unmount_kills: $rounds, mounts left behind: $left"
	[ "$left" -eq 0 ] || fail "$left of $rounds killed daemons left their mount behind"
}

pd_case auto_unmount_under_load
pd_finish
