#!/usr/bin/env bash
# Never lose a page: crashes, power cuts and load.
#
#   sigkill      writers work in the mount (new pages, duplicates, O_TRUNC
#                overwrites, write-temp-then-rename over pages, moves,
#                unlinks, mkdirs, rmdirs) and journal every completed call
#                outside the mount (tests/fs/crashload.py); the daemon is
#                killed with SIGKILL at a random moment, the store remounted,
#                and every completed operation must be there byte for byte
#                (the one in flight: old or new state, nothing else), the
#                refcounts exact, and after a clean unmount fsck clean, with
#                no repair in between. PD_CRASH_CYCLES cycles (default 50)
#                on one store, whose state accumulates.
#   powercut     the same with -o sync_blobs on a store on ext4 on a loop
#                device whose backing file is served by a disk with a
#                volatile write cache (crashload.py vdisk): at a random
#                moment the cache is lost as in a power cut (what the kernel
#                did not flush is gone), then the daemon is killed. Every
#                close(), rename(), unlink() and mkdir() that returned must
#                be on the disk after the cut. PD_POWER_CYCLES (default 10).
#   powercut_default   cuts without sync_blobs: what completed before the
#                store's last checkpoint (core/store/store_ckpt.c) must be
#                there, later operations may be lost as a whole, in order.
#   powercut_right_after_close   the cut comes the moment close() or
#                rename() returned (truncate-only, rewrite, new, rename).
#   load         writer, reader, renamer and getfattr processes at once
#                (PD_LOAD_WRITERS x PD_LOAD_PAGES pages, half duplicates),
#                no errors, then every page exact, every refcount and twins
#                list exact, one blob per distinct content, fsck clean.
#
# The seed comes from PD_SEED (random otherwise) and is printed; replay a
# failure with the same PD_SEED (and PD_ONLY=case). tests/stress/s_crash.sh
# and s_load.sh source this file (PD_CRASH_LIB=1) for longer runs.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
pd_require

CL=$PD_FSDIR/crashload.py
CRASH_SEED=${PD_SEED:-$(( (RANDOM << 15 | RANDOM) ))}
echo "# crash seed $CRASH_SEED (replay with PD_SEED=$CRASH_SEED)"
: >"$PD_TMP/power-rigs"

# ---- helpers -------------------------------------------------------------

# crash_delay: a random kill delay in seconds, between $1 and $2 ms.
crash_delay() {
	local lo=$1 hi=$2 ms
	ms=$(( lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1) ))
	printf '%d.%03d' $((ms / 1000)) $((ms % 1000))
}

# crash_writers_start WORK CYCLE NWRITERS [WRITER ARGS...]: start the writers
# of a cycle in the background (pids in CW_PIDS) and wait until each runs.
crash_writers_start() {
	local work=$1 c=$2 nw=$3 i j
	shift 3
	CW_PIDS=()
	for i in $(seq 0 $((nw - 1))); do
		python3 "$CL" writer --mnt "$MNT" --journal "$work/j.$c.$i" --state "$work/state.json" \
			--ready "$work/ready.$c.$i" --wid "$i" --cycle "$c" --seed $((CRASH_SEED * 7919 + c * 31 + i)) \
			--seed-base "$CRASH_SEED" "$@" >"$work/w.$c.$i.log" 2>&1 &
		CW_PIDS+=($!)
	done
	for i in $(seq 0 $((nw - 1))); do
		for j in $(seq 1 200); do
			[ -e "$work/ready.$c.$i" ] && break
			kill -0 "${CW_PIDS[$i]}" 2>/dev/null || break
			sleep 0.05
		done
		[ -e "$work/ready.$c.$i" ] || { cat "$work/w.$c.$i.log"; fail "cycle $c: writer $i did not start"; }
	done
}

# crash_writers_wait WORK CYCLE: the writers end by themselves once the mount
# is gone (their calls fail); none may hang or crash.
crash_writers_wait() {
	local work=$1 c=$2 i p st
	for i in "${!CW_PIDS[@]}"; do
		p=${CW_PIDS[$i]}
		for st in $(seq 1 300); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$p" 2>/dev/null; then
			note "writer $i (pid $p) still running 30 s after the crash; its kernel stack:"
			cat "/proc/$p/stack" 2>/dev/null
			kill -KILL "$p" 2>/dev/null
			fail "cycle $c: writer $i hung after the crash"
		fi
		st=0; wait "$p" || st=$?
		[ "$st" = 0 ] || { cat "$work/w.$c.$i.log"; fail "cycle $c: writer $i exited with status $st"; }
	done
}

# crash_daemon_gone CYCLE: after kill -9 of the daemon: drop the dead mount
# and check that the daemon died of the signal and printed no sanitizer
# report before.
crash_daemon_gone() {
	local c=$1 rc
	fusermount3 -u -z "$MNT" 2>/dev/null
	pd_wait_rc "$PDFS_RC" 20 || fail "cycle $c: the killed daemon's wrapper did not end"
	rc=$(cat "$PDFS_RC")
	[ "$rc" = 137 ] || { pd_show_log "$PDFS_LOG"; fail "cycle $c: daemon exit status $rc, expected 137 (SIGKILL)"; }
	if pd_sanitizer_report "$PDFS_LOG"; then
		pd_show_log "$PDFS_LOG" 80; fail "cycle $c: sanitizer report before the kill"
	fi
	mountpoint -q "$MNT" && fail "cycle $c: $MNT still mounted after fusermount3 -u -z"
	return 0
}

# crash_fsck_unclean CYCLE STORE WORK: fsck of the store as the crash left
# it, before any remount: nothing but notes and crash leftovers (orphan
# blob files and staged bytes, which the next mount must collect) is allowed; otherwise
# CRASH_UNCLEAN_BAD says so, and the cycle fails after the tree was checked
# (which tells what the damage cost). New orphan blobs
# are shown with the operations of the cycle that wrote their content.
crash_fsck_unclean() {
	local c=$1 s=$2 work=$3 out bad new ms m
	out=$("$PD_BIN" fsck "$s" 2>"$work/fsck.err")
	bad=$(printf '%s\n' "$out" | grep -v -E -e '^note: ' -e '^leftover: ' -e 'file unknown to the store' \
		-e '^\.\.\. and [0-9]+ more (orphan files|notes|crash leftovers) ' -e '^fsck[ :]' -e '^(DAMAGED|clean)' -e '^$')
	if [ -n "$bad" ]; then
		note "cycle $c: fsck of the crashed store:"
		printf '%s\n' "$out" | head -30
		tail -3 "$work/fsck.err"
		CRASH_UNCLEAN_BAD="cycle $c: fsck of the crashed store (before any remount) found damage (seed $CRASH_SEED)"
	fi
	touch "$work/orphans-seen"
	new=$(printf '%s\n' "$out" | grep 'file unknown to the store' | grep -vxF -f "$work/orphans-seen")
	printf '%s\n' "$out" | grep 'file unknown to the store' >>"$work/orphans-seen"
	if [ -n "$new" ]; then
		note "cycle $c: fsck before the remount: orphan file(s) the crash left:"
		printf '%s\n' "$new"
		ms=$(printf '%s\n' "$new" | sed -n 's|^\(leftover: \)\{0,1\}objects/[0-9a-f]*/\([0-9a-f]\{32\}\)[:.].*|\2|p')
		[ -n "$ms" ] && python3 "$CL" whois $(for m in $ms; do printf -- '--md5 %s ' "$m"; done) "$work"/j."$c".*
	fi
	return 0
}

# crash_umount_fsck CYCLE WORK: clean unmount (daemon exit 0, no sanitizer
# report), then fsck must be clean. A failing fsck does not stop the cycles
# (the pages are still checked in the next ones): its new problem lines go
# to WORK/fsck-problems, and crash_fsck_verdict fails the case at the end.
crash_umount_fsck() {
	local c=$1 work=$2 out rc=0
	pd_umount --no-fsck || fail "cycle $c: clean unmount after the crash recovery (seed $CRASH_SEED)"
	out=$("$PD_BIN" fsck "$STORE" 2>"$work/fsck.err") || rc=$?
	if [ "$rc" != 0 ]; then
		touch "$work/fsck-seen"
		printf '%s\n' "$out" | grep -v -E -e '^fsck[ :]' -e '^(DAMAGED|clean)' | grep -vxF -f "$work/fsck-seen" |
			sed "s/^/cycle $c: /" >"$work/fsck-new"
		cat "$work/fsck-new" >>"$work/fsck-problems"
		printf '%s\n' "$out" >>"$work/fsck-seen"
		note "cycle $c: pagededup fsck after the clean unmount: exit $rc; $(grep -c . "$work/fsck-new") new problem line(s):"
		cat "$work/fsck-new"
	fi
	return 0
}

# crash_deep_fsck STORE WORK: fsck --deep (every blob hashed) of the
# unmounted store; problems not seen before go to WORK/fsck-problems.
crash_deep_fsck() {
	local store=$1 work=$2
	if ! "$PD_BIN" fsck --deep "$store" >"$work/deep" 2>/dev/null; then
		touch "$work/fsck-seen"
		grep -v -E -e '^fsck[ :]' -e '^(DAMAGED|clean)' "$work/deep" | grep -vxF -f "$work/fsck-seen" |
			sed "s/^/final fsck --deep: /" >>"$work/fsck-problems"
	fi
	return 0
}

crash_fsck_verdict() {
	local work=$1
	if [ -s "$work/fsck-problems" ]; then
		note "pagededup fsck after a clean unmount was not clean (no repair was run); new problems by cycle:"
		head -50 "$work/fsck-problems"
		fail "fsck after a crash, a remount and a clean unmount found problems (seed $CRASH_SEED)"
	fi
}

# ---- SIGKILL cycles ------------------------------------------------------

# crash_sigkill CYCLES WRITERS LO_MS HI_MS [MOUNT OPTS]
crash_sigkill() {
	local n=$1 nw=$2 lo=$3 hi=$4 opts=${5:-} work=$PD_TMP/$PD_CASE_NAME c d store mnt out t0 t1 tc tkill
	RANDOM=$CRASH_SEED
	mkdir -p "$work"
	pd_mount $opts || fail mount
	store=$STORE mnt=$MNT
	t0=$SECONDS
	for c in $(seq 1 "$n"); do
		tc=$SECONDS
		crash_writers_start "$work" "$c" "$nw"
		d=$(crash_delay "$lo" "$hi")
		sleep "$d"
		kill -0 "$PDFS_PID" 2>/dev/null || { pd_show_log "$PDFS_LOG"; fail "cycle $c: the daemon died before the kill"; }
		tkill=$(python3 -c 'import time; print("%.6f" % time.monotonic())')
		kill -KILL "$PDFS_PID"
		crash_writers_wait "$work" "$c"
		crash_daemon_gone "$c"
		crash_fsck_unclean "$c" "$store" "$work"
		pd_mount -n -s "$store" -m "$mnt" $opts || fail "cycle $c: remount after the kill"
		if ! out=$(python3 "$CL" verify --mnt "$MNT" --state "$work/state.json" --killed-at "$tkill" \
				"$work"/j."$c".* 2>&1); then
			printf '%s\n' "$out"
			note "journals: $work/j.$c.*; daemon log of the remount: $PDFS_LOG"
			[ -z "${CRASH_UNCLEAN_BAD:-}" ] || note "$CRASH_UNCLEAN_BAD"
			fail "cycle $c (killed after $d s): the tree after the remount is not what the writers completed (seed $CRASH_SEED)"
		fi
		note "cycle $c ($((SECONDS - tc)) s): killed after $d s; $out"
		[ -z "${CRASH_UNCLEAN_BAD:-}" ] || fail "$CRASH_UNCLEAN_BAD"
		# every other cycle: a clean unmount and a strict fsck; in between,
		# the next cycle runs on the store the crash recovery left
		if [ $((c % 2)) = 0 ] || [ "$c" = "$n" ]; then
			crash_umount_fsck "$c" "$work"
			[ "$c" = "$n" ] || pd_mount -n -s "$store" -m "$mnt" $opts || fail "cycle $c: mount"
		fi
	done
	t1=$SECONDS
	crash_deep_fsck "$store" "$work"
	note "$n kill cycles in $((t1 - t0)) s; fsck --deep: $(tail -2 "$work/deep" | tr '\n' ' ')"
	crash_fsck_verdict "$work"
}

case_sigkill() {
	crash_sigkill "${PD_CRASH_CYCLES:-50}" "${PD_CRASH_WRITERS:-2}" 200 1500
}

# A kill while closes wait for their batch (core/archive/seal_later.h):
# every close() that returned comes back at the next mount, sealed again
# from the journal in the order of the closes. sync_ms=60000 and no
# signer, delta step or compactor (any commit takes what waits with it),
# so that only the batch's bound (64 pages) and the namespace's writes
# commit: new files whose create waits too, overwrites of committed
# files, a file unlinked after its close (which must stay gone: the
# unlink commits what waits before it), a rename, and more new pages
# after them, half of them given their times after their close (as wget
# does). Before the kill, stat and read answer the waiting pages, and
# their times, from memory.
case_sigkill_waiting_seals() {
	pd_mount sync_ms=60000,no_sign_thread,sign_queue=1000000,delta=off,nocompact || fail mount
	python3 - "$MNT" "$PD_TMP/want.json" <<'PYEOF' || fail "the writes before the kill"
import json, os, sys
M, out = sys.argv[1], sys.argv[2]
want = {}
def put(name, data):
    with open(os.path.join(M, name), "wb") as f:
        f.write(data)
    want[name] = data
os.mkdir(M + "/d")
for i in range(5):
    put("d/old%d" % i, b"old %d\n" % i * 300)
os.listdir(M + "/d")  # a listing commits what waits
for i in range(150):
    put("d/p%03d.html" % i, b"<p>page %d of the journal case</p>\n" % i * (40 + i))
for i in range(5):
    put("d/old%d" % i, b"new %d\n" % i * 200)
put("d/gone", b"unlinked after its close\n")
os.unlink(M + "/d/gone")
del want["d/gone"]
put("d/tmp", b"renamed after its close\n")
os.rename(M + "/d/tmp", M + "/d/renamed")
want["d/renamed"] = want.pop("d/tmp")
times = {}
for i in range(150, 190):
    put("d/p%03d.html" % i, b"<p>page %d of the journal case</p>\n" % i * (40 + i))
    if i % 2:  # as wget gives a page the server's Last-Modified after its close
        times["d/p%03d.html" % i] = (1500000000 + i) * 10**9 + 123456789
        os.utime(os.path.join(M, "d/p%03d.html" % i), ns=(times["d/p%03d.html" % i],) * 2)
attrs = {}
for i in range(190, 220):  # as tar x does: times, owner and mode on the open file
    name = "d/p%03d.html" % i
    data = b"<p>page %d of the journal case</p>\n" % i * (40 + i)
    fd = os.open(os.path.join(M, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data)
    t = (1400000000 + i) * 10**9 + 987654321
    os.utime(fd, ns=(t, t))
    os.fchown(fd, 1000 + i, 2000 + i)
    os.fchmod(fd, 0o644 if i % 2 else 0o751)
    os.close(fd)
    want[name] = data
    times[name] = t
    attrs[name] = (1000 + i, 2000 + i, 0o644 if i % 2 else 0o751)
def attrs_of(p):
    st = os.stat(p)
    return (st.st_uid, st.st_gid, st.st_mode & 0o7777)
for name, data in want.items():
    p = os.path.join(M, name)
    if os.stat(p).st_size != len(data) or open(p, "rb").read() != data:
        sys.exit("%s: not what its close() left, before the kill" % name)
    if name in attrs and attrs_of(p) != attrs[name]:
        sys.exit("%s: owner and mode %s, set to %s, before the kill" % (name, attrs_of(p), attrs[name]))
    if name in times and os.stat(p).st_mtime_ns != times[name]:
        sys.exit("%s: mtime %d, set to %d, before the kill" % (name, os.stat(p).st_mtime_ns, times[name]))
json.dump({"pages": {k: v.decode() for k, v in want.items()}, "times": times, "attrs": attrs},
          open(out, "w"))
PYEOF
	kill -KILL "$PDFS_PID"
	crash_daemon_gone 1
	local out rc=0
	out=$("$PD_BIN" fsck "$STORE" 2>&1) || rc=$?
	[ "$rc" = 3 ] || fail "fsck after the kill: exit $rc, expected 3 (crash leftovers only): $out"
	grep -q "^leftover: the journal holds [1-9][0-9]* page(s) closed before the store stopped" <<<"$out" ||
		fail "fsck does not count the journal's pages: $out"
	pd_mount -n -s "$STORE" -m "$MNT" || fail "mount after the kill"
	grep -q "sealed again from the journal" "$PDFS_LOG" ||
		{ pd_show_log "$PDFS_LOG"; fail "no page was waiting for its batch at the kill: the case tests nothing"; }
	python3 - "$MNT" "$PD_TMP/want.json" <<'PYEOF' || fail "after the kill"
import json, os, sys
M, saved = sys.argv[1], json.load(open(sys.argv[2]))
want, times = saved["pages"], saved["times"]
got = sorted("d/" + n for n in os.listdir(M + "/d"))
if got != sorted(want):
    sys.exit("files after the kill: missing %s, not expected %s" % (
        sorted(set(want) - set(got)), sorted(set(got) - set(want))))
bad = [n for n, data in want.items() if open(os.path.join(M, n), "rb").read() != data.encode()]
if bad:
    sys.exit("%d files not as their close() left them: %s" % (len(bad), bad[:10]))
bad = ["%s: %d" % (n, os.stat(os.path.join(M, n)).st_mtime_ns) for n, t in times.items()
       if os.stat(os.path.join(M, n)).st_mtime_ns != t or os.stat(os.path.join(M, n)).st_atime_ns != t]
if bad:
    sys.exit("%d utimes after a close lost by the kill: %s" % (len(bad), bad[:10]))
bad = []
for n, a in saved["attrs"].items():
    st = os.stat(os.path.join(M, n))
    if [st.st_uid, st.st_gid, st.st_mode & 0o7777] != a:
        bad.append("%s: %s" % (n, (st.st_uid, st.st_gid, oct(st.st_mode & 0o7777))))
if bad:
    sys.exit("%d owners and modes set before a close lost by the kill: %s" % (len(bad), bad[:10]))
PYEOF
	note "$(grep -h "sealed again from the journal" "$PDFS_LOG")"
	pd_umount || fail "umount and fsck"
}

# ---- power cuts ----------------------------------------------------------
#
# The rig: WORK/disk.img is the platter of a disk with a volatile write
# cache, served as WORK/vd/disk by `crashload.py vdisk`; a loop device on
# that file carries ext4 (mounted on WORK/ext), and the store lives in
# WORK/ext/store. The kernel's flushes of the loop device (ext4's journal
# commits, fsync, fdatasync) reach the server as FSYNC and move the cache to
# the platter; a cut drops the cache (with PD_POWER_KEEP=P each cached block
# reached the platter with probability P) and the server exits, so that
# every later I/O of the loop device fails.

# is_mounted DIR: DIR is a mount point, even of a dead FUSE connection
# (where mountpoint(1) fails with ENOTCONN).
is_mounted() { awk -v d="$1" '$2 == d { f = 1 } END { exit !f }' /proc/self/mounts; }

power_rig_up() { # WORK: sets PR_VD_PID PR_LOOP
	local work=$1 i
	mkdir -p "$work/vd" "$work/ext"
	rm -f "$work/vd.ready" "$work/cut"
	python3 "$CL" vdisk --image "$work/disk.img" --mnt "$work/vd" --ready "$work/vd.ready" \
		--cut-file "$work/cut" --keep "${PD_POWER_KEEP:-0}" --seed "$((CRASH_SEED + PR_N))" \
		>>"$work/vd.log" 2>&1 &
	PR_VD_PID=$!
	PR_N=$((PR_N + 1))
	for i in $(seq 1 100); do
		[ -e "$work/vd.ready" ] && break
		kill -0 "$PR_VD_PID" 2>/dev/null || break
		sleep 0.05
	done
	[ -e "$work/vd.ready" ] || { cat "$work/vd.log"; note "the volatile-cache disk server did not start"; return 1; }
	echo "$work $PR_VD_PID" >>"$PD_TMP/power-rigs"
	PR_LOOP=$(losetup -f --show "$work/vd/disk" 2>&1) || { note "losetup: $PR_LOOP"; PR_LOOP=; return 1; }
	echo "$work $PR_VD_PID $PR_LOOP" >>"$PD_TMP/power-rigs"
	mount -t ext4 "$PR_LOOP" "$work/ext" || { note "mount -t ext4 $PR_LOOP failed"; return 1; }
	return 0
}

# power_cut_wait WORK: wait for the disk server to have cut the power (its
# cut file written) after SIGUSR1. The cut drops its cache and fsyncs the
# image, which on a loaded host (the whole suite on two cores) took more
# than the 2 s this once waited; the daemon is frozen meanwhile, so the
# wait changes nothing the case checks.
power_cut_wait() {
	local i
	for i in $(seq 1 600); do [ -s "$1/cut" ] && return 0; sleep 0.1; done
	return 1
}

# power_rig_down WORK: after the cut (or to stop): ext4 off, loop detached,
# server gone, its mount dropped.
power_rig_down() {
	local work=$1 i
	if is_mounted "$work/ext"; then
		for i in 1 2 3 4 5; do umount "$work/ext" 2>/dev/null && break; sleep 0.2; done
		if is_mounted "$work/ext"; then
			note "umount $work/ext: busy; lazy unmount"
			umount -l "$work/ext" || return 1
		fi
	fi
	# (a loop device is bound while sysfs shows its backing file)
	if [ -n "${PR_LOOP:-}" ] && [ -e "/sys/block/${PR_LOOP#/dev/}/loop/backing_file" ]; then
		losetup -d "$PR_LOOP" 2>"$work/losetup.err" ||
			[ ! -e "/sys/block/${PR_LOOP#/dev/}/loop/backing_file" ] ||
			{ cat "$work/losetup.err"; return 1; }
	fi
	PR_LOOP=
	kill -TERM "$PR_VD_PID" 2>/dev/null
	for i in $(seq 1 100); do kill -0 "$PR_VD_PID" 2>/dev/null || break; sleep 0.05; done
	kill -KILL "$PR_VD_PID" 2>/dev/null
	wait "$PR_VD_PID" 2>/dev/null
	is_mounted "$work/vd" && umount -l "$work/vd"
	return 0
}

# At exit: take down whatever rig a failed or timed-out case left, in order
# (pagededupfs above ext4 above the loop device above the server).
power_cleanup_all() {
	local work pid loop m r w l
	[ -s "$PD_TMP/power-rigs" ] || return 0
	while read -r work pid loop; do
		while read -r m r w l; do
			case $m in "$work"/*)
				is_mounted "$m" && fusermount3 -u -z "$m" 2>/dev/null
				kill -KILL $(pd_tree "$w") 2>/dev/null ;;
			esac
		done <"$PD_TMP/mounts"
		is_mounted "$work/ext" && { umount "$work/ext" 2>/dev/null || umount -l "$work/ext"; }
		[ -n "$loop" ] && losetup -d "$loop" 2>/dev/null
		kill -KILL "$pid" 2>/dev/null
		is_mounted "$work/vd" && umount -l "$work/vd"
	done < <(tac "$PD_TMP/power-rigs")
	: >"$PD_TMP/power-rigs"
}
trap 'power_cleanup_all; pd_cleanup' EXIT

# crash_power CYCLES WRITERS LO_MS HI_MS OPTS [LOSSY]: power cuts at random
# moments. Without LOSSY every completed operation must survive (the mount
# options must make every commit durable: sync_blobs); with LOSSY=ckpt
# (commits not durable: the store's checkpoints, core/store/store_ckpt.c),
# operations completed after the store's last checkpoint was taken may be
# lost, as a whole and in order (the tree is the one after some prefix of
# each writer's operations), and nothing else may be; that checkpoint is
# read off the cut disk, and must have been taken at most
# PD_CKPT_AGE_MAX seconds before the cut (5: sync_ms, and the syncs of
# this FUSE-backed disk, measured at 0.03-0.96 s each and longer for the
# first after a mount, when the filter and LMDB's reserve are written).
crash_power() {
	local n=$1 nw=$2 lo=$3 hi=$4 opts=$5 lossy=${6:-} work=$PD_TMP/$PD_CASE_NAME c d out t0 t1 tc tcut cutinfo ckpt ckpt_age age
	local store mnt extra
	RANDOM=$CRASH_SEED
	PR_N=0
	command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null || skip "losetup or mkfs.ext4 missing"
	[ -e /dev/loop-control ] || skip "no /dev/loop-control: this kernel offers no loop devices"
	grep -qw ext4 /proc/filesystems || skip "no ext4 in this kernel"
	mkdir -p "$work"
	truncate -s "${PD_POWER_DISK_MB:-1024}M" "$work/disk.img" &&
		mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$work/disk.img" || fail "mkfs.ext4 of the disk image"
	power_rig_up "$work" || { power_rig_down "$work"; skip "cannot put ext4 on a loop device over a FUSE file here"; }
	store=$work/ext/store mnt=$work/mnt
	pd_mount -s "$store" -m "$mnt" "$opts" || fail mount
	t0=$SECONDS
	for c in $(seq 1 "$n"); do
		tc=$SECONDS
		crash_writers_start "$work" "$c" "$nw"
		d=$(crash_delay "$lo" "$hi")
		sleep "$d"
		kill -0 "$PDFS_PID" 2>/dev/null || { pd_show_log "$PDFS_LOG"; fail "cycle $c: the daemon died before the cut"; }
		# The power goes for the daemon and the disk at once: frozen first,
		# it does not run on against a disk that no longer answers (its
		# mapped LMDB pages would fault with SIGBUS: not a machine's power
		# cut, where nothing runs after it).
		kill -STOP "$PDFS_PID"
		kill -USR1 "$PR_VD_PID"
		power_cut_wait "$work" || fail "cycle $c: the disk server did not cut"
		kill -KILL "$PDFS_PID"
		cutinfo=$(cat "$work/cut")
		tcut=${cutinfo%% *}
		crash_writers_wait "$work" "$c"
		crash_daemon_gone "$c"
		power_rig_down "$work" || fail "cycle $c: cannot take the cut disk down"
		power_rig_up "$work" || fail "cycle $c: ext4 does not mount after the cut"
		extra=()
		if [ -n "$lossy" ]; then
			ckpt=$(python3 "$CL" ckpt-time "$store/meta/ckpt") || fail "cycle $c: no checkpoint on the cut disk"
			ckpt_age=$(awk -v t="$tcut" -v k="${ckpt% *}" 'BEGIN { printf "%.6f", t - k }')
			awk -v a="$ckpt_age" -v m="${PD_CKPT_AGE_MAX:-5}" 'BEGIN { exit !(a <= m) }' ||
				fail "cycle $c: the checkpoint on the cut disk (commit ${ckpt#* }) was taken $ckpt_age s before the cut, over ${PD_CKPT_AGE_MAX:-5} s"
			extra=(--lossy-before "${ckpt% *}")
			age=" (the checkpoint on the disk: commit ${ckpt#* }, taken $ckpt_age s before it)"
		fi
		crash_fsck_unclean "$c" "$store" "$work"
		pd_mount -n -s "$store" -m "$mnt" "$opts" || fail "cycle $c: mount after the power cut"
		if ! out=$(python3 "$CL" verify --mnt "$MNT" --state "$work/state.json" --cut-time "$tcut" "${extra[@]}" \
				"$work"/j."$c".* 2>&1); then
			printf '%s\n' "$out"
			[ -z "${CRASH_UNCLEAN_BAD:-}" ] || note "$CRASH_UNCLEAN_BAD"
			note "journals: $work/j.$c.*; cut: $cutinfo (time, cached blocks kept, lost, writes, flushes)"
			fail "cycle $c (cut after $d s, -o $opts): the tree after the power cut is not what the writers completed (seed $CRASH_SEED)"
		fi
		note "cycle $c ($((SECONDS - tc)) s): cut after $d s${age:-} (blocks kept/lost of the cache, writes, flushes: ${cutinfo#* }); $out"
		[ -z "${CRASH_UNCLEAN_BAD:-}" ] || fail "$CRASH_UNCLEAN_BAD"
		if [ $((c % 2)) = 0 ] || [ "$c" = "$n" ]; then
			crash_umount_fsck "$c" "$work"
			[ "$c" = "$n" ] || pd_mount -n -s "$store" -m "$mnt" "$opts" || fail "cycle $c: mount"
		fi
	done
	t1=$SECONDS
	crash_deep_fsck "$store" "$work"
	note "$n power cuts in $((t1 - t0)) s; fsck --deep: $(tail -2 "$work/deep" | tr '\n' ' ')"
	power_rig_down "$work"
	crash_fsck_verdict "$work"
}

case_powercut_sync_blobs() {
	crash_power "${PD_POWER_CYCLES:-10}" "${PD_CRASH_WRITERS:-2}" 200 1500 sync_blobs
}

# Without sync_blobs: what completed before the store's last checkpoint
# survives, nothing is damaged (LMDB's file came back without its format
# record, and pages read EIO, before checkpoints; make stress runs 15).
case_powercut_default() {
	crash_power "${PD_DEFAULT_CYCLES:-4}" "${PD_CRASH_WRITERS:-2}" 2000 4000 sync_ms=1000 ckpt
}

# A checkpoint's reader keeps the pages freed after it from reuse, so LMDB's
# file grows by what the commits of a sync interval free (some 30 pages a
# page written). With sync_ms at ten minutes, a copy of 1,500 pages (each
# a commit: the copy lists the directory after each page, which commits
# the seal that waits for its batch, core/archive/seal_later.h) grows it
# past CKPT_EARLY_BYTES (8 MiB) over the last capture:
# a commit then wakes the sync thread, and the checkpoint on the disk is
# newer than the mount's own as the writes end, long before the interval
# does.
case_checkpoint_early() {
	local t0 c0 t1 c1 kb
	pd_mount sync_ms=600000 || fail mount
	read -r t0 c0 < <(python3 "$CL" ckpt-time "$STORE/meta/ckpt") || fail "no checkpoint after the mount"
	py <<'PYEOF' || exit 1
import os
from fsutil import *
M = os.environ["MNT"]
for i in range(1500):
    d = "%s/d%02d" % (M, i % 30)
    os.makedirs(d, exist_ok=True)
    write("%s/p%04d.html" % (d, i), ("<html><body>page %d %s</body></html>\n" % (i, "w%d " % i * 40)).encode())
    os.listdir(d)  # commits what waits: a commit a page
PYEOF
	# read at once: the delta step's sweep, once the writes stop, empties
	# the nursery's pack and syncs the store (a checkpoint of its own)
	read -r t1 c1 < <(python3 "$CL" ckpt-time "$STORE/meta/ckpt") || fail "no checkpoint after the writes"
	[ "$c1" -gt "$c0" ] || fail "no checkpoint within sync_ms=600000 after 1,500 commits (commit $c0 at the mount, $c1 now)"
	kb=$(du -k "$STORE/meta/data.mdb" | cut -f1)
	note "checkpoint commit $c0 -> $c1 within sync_ms; LMDB's file ${kb} KiB"
	pd_umount || fail umount
}

# ---- load ----------------------------------------------------------------

# crash_load NAME WRITERS PAGES POOL [MOUNT OPTS]: crashload.py load on a
# fresh store; then a clean unmount and fsck.
crash_load() {
	local name=$1 nw=$2 np=$3 pool=$4 opts=${5:-} out rc=0
	pd_mount $opts || fail mount
	python3 "$CL" load --mnt "$MNT" --store "$STORE" --work "$PD_TMP/$name" --name "$name" \
		--seed "$CRASH_SEED" --writers "$nw" --pages "$np" --pool "$pool" || rc=$?
	[ "$rc" = 0 ] || { pd_show_log "$PDFS_LOG"; fail "load test failed (seed $CRASH_SEED)"; }
	pd_umount || fail "unmount and fsck after the load"
	grep -E "^${name}_[a-z_]+: " "$PD_TMP/case.$PD_CASE_NAME.log" >"$PD_TMP/$name.metrics" 2>/dev/null
}

case_load() {
	crash_load load "${PD_LOAD_WRITERS:-8}" "${PD_LOAD_PAGES:-500}" "${PD_LOAD_POOL:-100}"
}

# The crash verifier itself notices every kind of damage (a broken
# filesystem would fail the crash cases).
case_verify_selfcheck() {
	python3 "$CL" selfcheck --dir "$PD_TMP/selfcheck" --seed "$CRASH_SEED" || fail "crashload.py verify self-check"
}

# print the load metrics lines (name: value unit) outside the case log
crash_metrics() {
	local f
	for f in "$PD_TMP"/*.metrics; do [ -s "$f" ] && cat "$f"; done
	return 0
}

# power_rig_fresh WORK: the rig up on a fresh 512 MiB ext4 (the case is
# skipped where loop devices or a FUSE file under ext4 are not offered).
power_rig_fresh() {
	local work=$1
	PR_N=0
	command -v losetup >/dev/null && [ -e /dev/loop-control ] || skip "no loop devices here"
	mkdir -p "$work"
	truncate -s 512M "$work/disk.img" &&
		mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$work/disk.img" || fail "mkfs.ext4"
	power_rig_up "$work" || { power_rig_down "$work"; skip "cannot put ext4 on a loop device over a FUSE file here"; }
}

# A power cut right after close() returned, under -o sync_blobs: a page
# emptied by open(O_TRUNC) and closed without a write, a page rewritten with
# O_TRUNC, a new page, and a page renamed over another: each must be on the
# disk after the cut, however soon it comes.
case_powercut_right_after_close() {
	local work=$PD_TMP/$PD_CASE_NAME c kind bad=0 got want
	power_rig_fresh "$work"
	pd_mount -s "$work/ext/store" -m "$work/mnt" sync_blobs || fail mount
	c=0
	for kind in truncate-only rewrite new rename truncate-only rewrite new rename; do
		c=$((c + 1))
		want=$(python3 - "$MNT" "$PR_VD_PID" "$c" "$kind" "$PDFS_PID" <<'PYEOF'
import hashlib, os, signal, sys
from crashload import content
M, vd, c, kind, daemon = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
p = "%s/f%s" % (M, c)
old, new = content("old" + c, big=False), content("new" + c, big=False)
if kind != "new":
    with open(p, "wb") as f:
        f.write(old)
if kind == "truncate-only":
    os.close(os.open(p, os.O_WRONLY | os.O_TRUNC))
    new = b""
elif kind == "rename":
    with open(p + ".tmp", "wb") as f:
        f.write(new)
    os.rename(p + ".tmp", p)
else:
    with open(p, "wb") as f:
        f.write(new)
# the call returned: cut the power now (the daemon stops with it, as
# crash_power says why)
os.kill(daemon, signal.SIGSTOP)
os.kill(vd, signal.SIGUSR1)
print("%d bytes, md5 %s" % (len(new), hashlib.md5(new).hexdigest()))
PYEOF
) || fail "round $c ($kind): the operation failed before the cut"
		power_cut_wait "$work" || fail "round $c: the disk server did not cut"
		kill -KILL "$PDFS_PID"
		crash_daemon_gone "$c"
		power_rig_down "$work" || fail "round $c: cannot take the cut disk down"
		power_rig_up "$work" || fail "round $c: ext4 does not mount after the cut"
		pd_mount -n -s "$work/ext/store" -m "$work/mnt" sync_blobs || fail "round $c: mount after the cut"
		got="$(stat -c %s "$MNT/f$c" 2>&1) bytes, md5 $(md5sum <"$MNT/f$c" 2>&1 | cut -d' ' -f1)"
		note "round $c ($kind): the call returned, then the cut: f$c has $got; expected $want"
		if [ "$got" != "$want" ]; then
			bad=$((bad + 1))
			grep -h "sealing" "$PD_TMP"/m.*/daemon.log 2>/dev/null | sort -u
		fi
	done
	pd_umount --no-fsck || fail umount
	power_rig_down "$work"
	[ "$bad" = 0 ] || fail "$bad of $c operations that returned before the power cut were lost (-o sync_blobs)"
}

# A power cut a moment after deletes whose commit is not on disk yet (the
# default mode, LMDB synced every sync_ms: here a minute; no compactor and
# no nursery, whose packs' removal syncs the store). The store comes back
# at the commit before the deletes, with the deleted pages, and their
# records must still be whole: a dead record is punched only once the
# commit that left it dead is durable. Between the deletes and the cut,
# near-duplicates of a kept page make the delta step sync the main pack
# before it commits their deltas; that sync would carry the deleted
# records' punches to the disk, had they run (an earlier build's did: 16
# pages read EIO after the cut).
case_powercut_deleted_pages_come_back_whole() {
	local work=$PD_TMP/$PD_CASE_NAME
	power_rig_fresh "$work"
	pd_mount -s "$work/ext/store" -m "$work/mnt" sync_ms=60000,nocompact,nonursery || fail mount
	python3 - "$MNT" "$work/pages.json" "$PR_VD_PID" "$PDFS_PID" <<'PYEOF' || fail "the writes and deletes before the cut"
import json, os, random, signal, subprocess, sys, time
from fsutil import *
M, out, vd, daemon = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def settled(deltas=0):
    # the signer and the delta step idle, at least `deltas` pages deltas
    end = time.time() + 60
    while True:
        s = json.loads(subprocess.run([os.environ["PD_BIN"], "stats", M, "--json"], check=True,
                                      stdout=subprocess.PIPE).stdout)
        if s["daemon"]["sign_queue"] == 0 and s["daemon"]["delta_queue"] == 0 and s["deltas"]["pages"] >= deltas:
            return
        check(time.time() < end, "the delta step did not settle in 60 s: %r" % s["deltas"])
        time.sleep(0.2)
words = ["archive", "crawl", "page", "news", "weather", "market", "river", "town", "council", "budget"]
def article(extra):
    r = random.Random(1)
    return ("<html><body><h1>Story</h1>" + " ".join(r.choice(words) + str(r.randrange(1000)) for _ in range(3000)) +
            extra + "</body></html>\n").encode()
pages = {}
for i in range(32):
    body = os.urandom(64 << 10)  # a record of 16 blocks and more
    write("%s/old%02d" % (M, i), body)
    pages["old%02d" % i] = md5(body)
write(M + "/base.html", article(""))
settled()
fd = os.open(M + "/old01", os.O_RDONLY)
os.fsync(fd)  # syncs the store: the pages so far are on disk
os.close(fd)
for i in range(0, 32, 2):
    os.unlink("%s/old%02d" % (M, i))
for i in range(4):
    write("%s/near%d.html" % (M, i), article(" updated %d" % i))
settled(deltas=1)
json.dump(pages, open(out, "w"))
os.kill(daemon, signal.SIGSTOP)
os.kill(vd, signal.SIGUSR1)
PYEOF
	power_cut_wait "$work" || fail "the disk server did not cut"
	kill -KILL "$PDFS_PID"
	crash_daemon_gone 1
	power_rig_down "$work" || fail "cannot take the cut disk down"
	power_rig_up "$work" || fail "ext4 does not mount after the cut"
	pd_mount -n -s "$work/ext/store" -m "$work/mnt" || fail "mount after the cut"
	python3 - "$MNT" "$work/pages.json" <<'PYEOF' || { pd_umount --no-fsck; power_rig_down "$work"; fail "the deleted pages the cut brought back are damaged"; }
import json, os, sys
from fsutil import *
M, pages = sys.argv[1], json.load(open(sys.argv[2]))
back = [n for n in sorted(pages) if os.path.exists(M + "/" + n)]
print("after the cut: %d of the %d pages synced before it are there" % (len(back), len(pages)))
bad = []
for n in back:
    try:
        got = md5(read(M + "/" + n))
    except OSError as e:
        got = ename(e.errno)
    if got != pages[n]:
        bad.append("%s: %s" % (n, got))
check(not bad, "pages the cut brought back that do not read whole: %s" % ", ".join(bad))
# the odd ones were never deleted; the even ones come back with the
# commit before their deletes, or are gone if it reached the disk
check(all(n in back for n in pages if int(n[3:]) % 2), "a page never deleted is missing")
PYEOF
	pd_umount || fail "unmount and fsck after the cut"
	power_rig_down "$work"
}

pd_crash_main() {
	pd_case verify_selfcheck
	PD_CASE_TIMEOUT=${PD_CASE_TIMEOUT:-600} pd_case sigkill
	pd_case sigkill_waiting_seals
	PD_CASE_TIMEOUT=${PD_CASE_TIMEOUT:-600} pd_case powercut_sync_blobs
	PD_CASE_TIMEOUT=${PD_CASE_TIMEOUT:-600} pd_case powercut_default
	pd_case checkpoint_early
	pd_case powercut_right_after_close
	pd_case powercut_deleted_pages_come_back_whole
	PD_CASE_TIMEOUT=${PD_CASE_TIMEOUT:-600} pd_case load
	crash_metrics
}

[ "${PD_CRASH_LIB:-0}" = 1 ] && return 0
pd_crash_main
pd_finish
