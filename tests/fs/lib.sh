# tests/fs/lib.sh - helpers for the mounted-filesystem tests.
#
# Sourced by tests/fs/t_*.sh. tests/run.sh runs each script with bash from the
# repository top and exports PD_BIN (the pagededup tool), PDFS_BIN (the
# daemon), PD_TOP and PD_DATA. A script defines its cases as shell functions
# and runs each with
#
#   pd_case NAME [FUNCTION [ARGS...]]     (FUNCTION defaults to case_NAME)
#   check NAME COMMAND [ARGS...]          (a one-command case)
#
# Every case runs in its own subshell, with a time limit, and prints one line:
# "ok NAME", "not ok NAME" or "skip NAME: reason" (skips are not counted as
# passes). Whatever a case prints goes to a log that is shown, prefixed with
# "# ", when the case fails or is skipped (always with PD_VERBOSE=1). Inside a
# case, `fail MESSAGE` ends it as failed and `skip REASON` as skipped; any
# non-zero exit fails it. pd_finish prints a summary and exits non-zero if any
# case failed.
#
# Environment knobs:
#   PD_ONLY=REGEX        run only the cases whose names match
#   PD_CASE_TIMEOUT=SEC  per-case time limit (default 300)
#   PD_VERBOSE=1         show every case's output
#   PD_KEEP=1            keep the temporary directory
#
# Mounts: pd_mount starts "$PDFS_BIN STORE MNT -f -o OPTS" in the background
# and sets STORE, MNT, PDFS_PID, PDFS_LOG; pd_umount unmounts with fusermount3,
# waits for the daemon, requires exit status 0 and no sanitizer report, then
# requires `$PD_BIN fsck STORE` to be clean. Both return non-zero (after
# printing why) on failure, so a case writes `pd_mount || fail mount`.

set -u
umask 022
export LC_ALL=C TZ=UTC

PD_TOP=${PD_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PD_BIN=${PD_BIN:-$PD_TOP/build/debug/pagededup}
PDFS_BIN=${PDFS_BIN:-$PD_TOP/build/debug/pagededupfs}
PD_DATA=${PD_DATA:-$PD_TOP/tests/data}
PD_FSDIR=$PD_TOP/tests/fs
export PD_TOP PD_BIN PDFS_BIN PD_DATA PD_FSDIR
export PYTHONPATH=$PD_FSDIR${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
# The interpreter other users can run (pyenv shims may live under /root).
PD_PY_ANY=/usr/bin/python3
[ -x "$PD_PY_ANY" ] || PD_PY_ANY=$(command -v python3)

PD_SCRIPT=$(basename "$0" .sh)
read -r PD_MAIN_PID _ </proc/self/stat # the script's own pid (pd_cleanup)
PD_TMP=$(mktemp -d "/tmp/pdfs-$PD_SCRIPT.XXXXXX") || exit 1
chmod 755 "$PD_TMP"
export PD_TMP
: >"$PD_TMP/mounts"     # one line per mount: MNT RCFILE WRAPPER_PID LOG
: >"$PD_TMP/pids"       # helper processes (servers) to stop at exit
: >"$PD_TMP/undo"       # host changes to undo at exit (pd_undo_later)
PD_PASS=0 PD_FAIL=0 PD_SKIP=0
PD_FAILED_CASES=()
STORE= MNT= PDFS_PID= PDFS_WPID= PDFS_LOG= PDFS_RC=
PD_SHARED=0

# --- small helpers -------------------------------------------------------

note() { printf '%s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
skip() { printf 'SKIP: %s\n' "$*"; exit 77; }

ok() { printf 'ok %s\n' "$1"; PD_PASS=$((PD_PASS + 1)); }
not_ok() {
	printf 'not ok %s\n' "$1"
	PD_FAIL=$((PD_FAIL + 1)); PD_FAILED_CASES+=("$1")
}

# expect CMD...: the command must succeed.
expect() {
	local rc=0
	"$@" || rc=$?
	[ "$rc" -eq 0 ] || fail "command failed (exit $rc): $*"
}
# expect_fail CMD...: the command must fail.
expect_fail() {
	if "$@"; then fail "command succeeded but should have failed: $*"; fi
}
# expect_eq ACTUAL EXPECTED [WHAT]
expect_eq() {
	[ "$1" == "$2" ] || fail "${3:-value}: expected '$2', got '$1'"
}
# py [ARGS...] <<'EOF' ... EOF: run python3 with fsutil on the path.
py() { python3 - "$@"; }

# pd_tree PID: PID and all its descendants, children first.
pd_tree() {
	local c
	case ${1:-} in ''|0|1|*[!0-9]*) return 0 ;; esac
	for c in $(pgrep -P "$1" 2>/dev/null); do pd_tree "$c"; done
	echo "$1"
}

# pd_reap MNT RCFILE PID: after an unmount, wait for a daemon to end (at most
# 10 s), then kill it. RCFILE "-" means a daemon that is not our child (it
# daemonized): PID is the daemon itself.
pd_reap() {
	local i
	if [ "$2" = - ]; then
		case ${3:-} in ''|0|1|*[!0-9]*) return 0 ;; esac
		for i in $(seq 1 100); do kill -0 "$3" 2>/dev/null || return 0; sleep 0.1; done
		kill -KILL "$3" 2>/dev/null
	else
		pd_wait_rc "$2" 10 || kill -KILL $(pd_tree "$3") 2>/dev/null
	fi
	return 0
}

pd_sanitizer_report() { # LOGFILE: true if it holds a sanitizer report
	grep -qE 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|LeakSanitizer|runtime error:|ERROR: [A-Za-z]*Sanitizer' "$1" 2>/dev/null
}

pd_show_log() { # LOGFILE [LINES]
	[ -s "$1" ] || return 0
	note "--- last lines of $1:"
	tail -n "${2:-40}" "$1"
	note "---"
}

# --- mounts --------------------------------------------------------------

# pd_mount [-n] [-s STORE] [-m MNT] [OPTS]
#   -n        do not run "pagededup mkfs" first (the daemon creates the store)
#   -s STORE  use this store directory (default: a new one)
#   -m MNT    use this mount point (default: a new one)
#   -u USER   run mkfs and the daemon as USER (see pd_users, pd_user_fuse);
#             a new store and mount point are made USER's
#   OPTS      comma-separated -o options (allow_other, nodedup, sync_blobs...)
pd_mount() {
	local mkfs=1 store= mnt= opts= d waited=0 user= uid gid runas=()
	while [ $# -gt 0 ]; do
		case $1 in
		-n) mkfs=0 ;;
		-s) store=$2; shift ;;
		-m) mnt=$2; shift ;;
		-u) user=$2; shift ;;
		*) opts=$1 ;;
		esac
		shift
	done
	d=$(mktemp -d "$PD_TMP/m.XXXXXX") && chmod 755 "$d" || return 1
	STORE=${store:-$d/store}
	MNT=${mnt:-$d/mnt}
	mkdir -p "$MNT" || return 1
	PDFS_LOG=$d/daemon.log PDFS_RC=$d/rc
	if [ -n "$user" ]; then
		uid=$(id -u "$user") && gid=$(id -g "$user") || return 1
		runas=(setpriv --reuid="$uid" --regid="$gid" --init-groups --)
		[ -n "$store" ] || chown "$user:" "$d" || return 1
		[ -n "$mnt" ] || chown "$user:" "$MNT" || return 1
	fi
	if [ "$mkfs" = 1 ] && [ ! -e "$STORE/meta" ]; then
		if ! "${runas[@]}" "$PD_BIN" mkfs "$STORE" >"$d/mkfs.log" 2>&1; then
			note "pagededup mkfs $STORE failed:"; cat "$d/mkfs.log"
			return 1
		fi
	fi
	# The wrapper records the daemon's exit status, so that any shell (not
	# only the daemon's parent) can wait for it and read it. The daemon does
	# not inherit the host lock (pd_host_lock).
	( "${runas[@]}" "$PDFS_BIN" "$STORE" "$MNT" -f ${opts:+-o "$opts"} >"$PDFS_LOG" 2>&1 9>&-
	  echo $? >"$PDFS_RC.tmp"; mv "$PDFS_RC.tmp" "$PDFS_RC" ) </dev/null >/dev/null 2>&1 &
	PDFS_WPID=$!
	echo "$MNT $PDFS_RC $PDFS_WPID $PDFS_LOG" >>"$PD_TMP/mounts"
	while ! mountpoint -q "$MNT"; do
		if [ -e "$PDFS_RC" ]; then
			note "pagededupfs $STORE $MNT -f ${opts:+-o $opts} exited with status $(cat "$PDFS_RC") before the mount was ready"
			pd_show_log "$PDFS_LOG"
			return 1
		fi
		if [ "$waited" -ge 400 ]; then
			note "pagededupfs $STORE $MNT: not mounted after 20 s"
			pd_show_log "$PDFS_LOG"
			return 1
		fi
		sleep 0.05; waited=$((waited + 1))
	done
	PDFS_PID=$(pgrep -P "$PDFS_WPID" | head -1)
	export STORE MNT
	pd_check_transport "$opts" || return 1
	return 0
}

# pd_wait_uring: the daemon of the last pd_mount says that every queue is
# served by its io_uring threads; otherwise its log is shown and the call
# fails. The wait is long (60 s): a debug build opening a store after a
# crash on a loaded machine is slow, and this checks the transport, not
# the time.
pd_wait_uring() {
	local i
	for i in $(seq 1 1200); do
		grep -q "serving requests over io_uring" "$PDFS_LOG" && return 0
		kill -0 "$PDFS_PID" 2>/dev/null || [ -z "${PDFS_PID:-}" ] || break
		sleep 0.05
	done
	note "the daemon did not start serving over io_uring"
	pd_show_log "$PDFS_LOG"
	return 1
}

# When the suite runs with FUSE over io_uring (tests/run.sh sets
# PD_EXPECT_URING=1 for its second pass), a mount that fell back to
# /dev/fuse would test the wrong path.
pd_check_transport() {
	[ "${PD_EXPECT_URING:-0}" = 1 ] || return 0
	# no_uring asks for /dev/fuse; auto_unmount keeps to it (fs/main.c)
	case ",$1," in *,no_uring,* | *,auto_unmount,*) return 0 ;; esac
	pd_wait_uring
}

# pd_register_mount MNT PID [LOG]: a mount made by a daemon that is not our
# child (it daemonized), so that cleanup can take it down.
pd_register_mount() {
	echo "$1 - ${2:-0} ${3:-/dev/null}" >>"$PD_TMP/mounts"
}

# pd_small_disk DIR SIZE: a tmpfs of SIZE (as mount's size=, e.g. 24m)
# mounted at DIR, a disk to fill; cleanup takes it down. The case is
# skipped where no tmpfs can be mounted.
pd_small_disk() {
	mkdir -p "$1"
	mount -t tmpfs -o size="$2" tmpfs "$1" || skip "cannot mount a tmpfs here"
	pd_register_mount "$1"
}

# pd_wait_rc RCFILE SECONDS: wait for a daemon's exit status file.
pd_wait_rc() {
	local i=0 n=$(($2 * 20))
	while [ ! -e "$1" ] && [ "$i" -lt "$n" ]; do sleep 0.05; i=$((i + 1)); done
	[ -e "$1" ]
}

# pd_kill_auto_unmounted: SIGKILL the daemon of $MNT (mounted with
# -o auto_unmount), wait for its wrapper, and for the mount to go by itself
# within 10 s. Fails the case if the wrapper does not end; returns 1 if the
# mount is still there.
pd_kill_auto_unmounted() {
	local i
	kill -KILL "$PDFS_PID"
	pd_wait_rc "$PDFS_RC" 20 || fail "the killed daemon's wrapper did not end"
	for i in $(seq 1 100); do
		grep -q " $MNT " /proc/self/mountinfo || return 0
		sleep 0.1
	done
	! grep -q " $MNT " /proc/self/mountinfo
}

# pd_umount [--no-fsck]: unmount $MNT and check the daemon's exit.
pd_umount() {
	local fsck=1 i err rc bad=0
	[ "${1:-}" = --no-fsck ] && fsck=0
	for i in $(seq 1 50); do
		err=$(fusermount3 -u "$MNT" 2>&1) && break
		sleep 0.1
	done
	if mountpoint -q "$MNT"; then
		note "fusermount3 -u $MNT failed: $err"
		return 1
	fi
	if ! pd_wait_rc "$PDFS_RC" 120; then
		note "daemon (pid ${PDFS_PID:-?}) still running 120 s after unmount"
		pd_show_log "$PDFS_LOG"
		return 1
	fi
	rc=$(cat "$PDFS_RC")
	if [ "$rc" != 0 ]; then
		note "daemon exited with status $rc after unmount (expected 0)"
		bad=1
	fi
	if pd_sanitizer_report "$PDFS_LOG"; then
		note "sanitizer report in the daemon's output"
		bad=1
	fi
	[ "$bad" = 0 ] || { pd_show_log "$PDFS_LOG" 80; return 1; }
	if [ "$fsck" = 1 ]; then
		pd_fsck || return 1
	fi
	return 0
}

# pd_fsck [STORE]: pagededup fsck must report a clean store.
pd_fsck() {
	local s=${1:-$STORE} out rc=0
	out=$("$PD_BIN" fsck "$s" 2>&1) || rc=$?
	if [ "$rc" != 0 ]; then
		note "pagededup fsck $s: exit $rc"
		printf '%s\n' "$out" | head -50
		return 1
	fi
	return 0
}

# pd_remount [OPTS]: unmount (with the checks) and mount the same store again
# on the same mount point.
pd_remount() {
	pd_umount || return 1
	pd_mount -n -s "$STORE" -m "$MNT" "$@"
}

# pd_mount_shared [OPTS]: mount a store for the whole script, in the main
# shell; cases then work in subdirectories of $MNT (see pd_cdwd) and a case
# during which the mount disappears fails. A failed mount is reported as the
# case "mount" and ends the script. pd_umount_shared (last) is the case
# "umount_fsck": unmount, daemon exit status, sanitizer output, fsck.
pd_mount_shared() {
	if ! pd_mount "$@" >"$PD_TMP/mount.log" 2>&1; then
		not_ok mount
		sed 's/^/# /' "$PD_TMP/mount.log"
		pd_finish
	fi
	PD_SHARED=1
}
pd_umount_shared() {
	PD_SHARED=0
	check umount_fsck pd_umount
}

# --- cases ---------------------------------------------------------------

# pd_cdwd: make a fresh directory named after the current case inside $MNT,
# set W to it and cd there.
pd_cdwd() {
	W=$MNT/$PD_CASE_NAME
	rm -rf "$W" 2>/dev/null
	mkdir -p "$W" || fail "mkdir $W"
	cd "$W" || fail "cd $W"
}

# pd_nblobs [STORE]: the number of stored blobs (pack records or format 1
# files) as `pagededup blobs` lists them; it reads the store read-only, so
# it works while the store is mounted.
pd_nblobs() { "$PD_BIN" blobs "${1:-$STORE}" 2>/dev/null | wc -l; }

# pd_wait_blobs N [STORE]: the number of stored blobs reaches N within 5 s.
pd_wait_blobs() {
	local i n
	for i in $(seq 1 100); do
		n=$(pd_nblobs "${2:-$STORE}")
		[ "$n" = "$1" ] && return 0
		sleep 0.05
	done
	note "stored blobs in ${2:-$STORE}: expected $1, got $n:"
	"$PD_BIN" blobs "${2:-$STORE}" | head -20
	return 1
}

# pd_xattr FILE NAME: the value of an extended attribute (empty if absent).
pd_xattr() { getfattr --absolute-names --only-values -n "$2" -- "$1" 2>/dev/null; }

# as_user UID GID CMD...: run a command as another user, no supplementary groups.
as_user() {
	local u=$1 g=$2; shift 2
	(cd "$PD_TMP" && setpriv --reuid="$u" --regid="$g" --clear-groups -- "$@")
}

# --- other users and a daemon that is not root ----------------------------
#
# These change the host for the rest of the script; each change is written
# to $PD_TMP/undo as a command that pd_cleanup runs (last first) at exit.
# A host-wide lock (pd_host_lock) keeps two scripts from sharing, changing
# and deleting the same users and files at once.

PD_HOST_LOCK=/tmp/pagededup-tests-host.lock
pd_host_locked=0

# pd_host_lock: take the host-wide lock on fd 9 (held until the script
# ends); waits at most 15 minutes for another script to finish.
pd_host_lock() {
	[ "$pd_host_locked" = 1 ] && return 0
	exec 9>>"$PD_HOST_LOCK" || return 1
	flock -w 900 9 || { note "another test script holds $PD_HOST_LOCK"; return 1; }
	pd_host_locked=1
}

pd_undo_later() { printf '%s\n' "$*" >>"$PD_TMP/undo"; }

# pd_users NAME...: these users exist, each with a group of its own
# (useradd -r -M -U; the ones made here are removed at exit). Run in the
# main shell, not in a case, so that they stay until the script ends.
pd_users() {
	local u
	pd_host_lock || return 1
	for u in "$@"; do
		id -u "$u" >/dev/null 2>&1 && continue
		useradd -r -M -U -d /nonexistent -s /usr/sbin/nologin "$u" || { note "useradd $u failed"; return 1; }
		pd_undo_later "userdel $u"
	done
}

# pd_user_fuse: ordinary users may mount with allow_other, as on a standard
# Debian: /dev/fuse open to all (udev makes it 0666; bare containers leave
# it 0600) and user_allow_other in /etc/fuse.conf. Mounting as a user goes
# through the setuid fusermount3. Both are restored at exit.
pd_user_fuse() {
	local mode
	pd_host_lock || return 1
	mode=$(stat -c %a /dev/fuse) || return 1
	if [ "$mode" != 666 ]; then
		chmod 0666 /dev/fuse || return 1
		pd_undo_later "chmod $mode /dev/fuse"
	fi
	if ! grep -qx 'user_allow_other' /etc/fuse.conf 2>/dev/null; then
		if [ -e /etc/fuse.conf ]; then
			cp -p /etc/fuse.conf "$PD_TMP/fuse.conf.orig" || return 1
			pd_undo_later "cp -p $PD_TMP/fuse.conf.orig /etc/fuse.conf"
		else
			pd_undo_later "rm -f /etc/fuse.conf"
		fi
		echo user_allow_other >>/etc/fuse.conf || return 1
	fi
	[ -u "$(command -v fusermount3)" ] || { note "fusermount3 is not setuid root"; return 1; }
}

# run_as NAME CMD...: run a command as user NAME (its own group only).
run_as() {
	local u=$1; shift
	as_user "$(id -u "$u")" "$(id -g "$u")" "$@"
}

pd_undo() {
	local cmd
	[ -s "$PD_TMP/undo" ] || return 0
	tac "$PD_TMP/undo" | while read -r cmd; do
		$cmd || echo "# could not undo: $cmd"
	done
	: >"$PD_TMP/undo"
}

# pd_watchdog SECONDS PID LOG: after SECONDS, the case PID, if it is still
# there, has timed out: said in LOG, marked (LOG.timedout), its processes
# killed, and if it is still there (stuck in the filesystem), the daemons
# of the script too. (The watchdog is killed once the case ends; a kill
# that comes as it starts may end only its sleep, hence the check.)
pd_watchdog() {
	local i
	sleep "$1"
	kill -0 "$2" 2>/dev/null || return 0
	echo "FAIL: case timed out after $1 s" >>"$3"
	: >"$3.timedout"
	kill -KILL $(pd_tree "$2") 2>/dev/null
	for i in $(seq 1 30); do kill -0 "$2" 2>/dev/null || return 0; sleep 0.1; done
	while read -r _ _ w _; do kill -KILL $(pd_tree "$w") 2>/dev/null; done <"$PD_TMP/mounts"
}

pd_case() {
	local name=$1 fn=${2:-case_$1} rc log t=${PD_CASE_TIMEOUT:-300} nm
	shift; [ $# -gt 0 ] && shift
	if [ -n "${PD_ONLY:-}" ] && ! [[ $name =~ $PD_ONLY ]]; then return 0; fi
	log=$PD_TMP/case.$name.log
	nm=$(wc -l <"$PD_TMP/mounts")
	local started=$SECONDS
	PD_CASE_NAME=$name
	if [ "$PD_SHARED" = 1 ] && ! mountpoint -q "$MNT"; then
		not_ok "$name"
		note "# the shared mount $MNT is not mounted"
		return 0
	fi
	( cd "$PD_TOP" && "$fn" "$@" ) >"$log" 2>&1 </dev/null &
	local cpid=$! wpid
	# The time limit is a watchdog beside the case, and the script waits for
	# the case alone: `wait -n` on the case and a timer missed, now and then,
	# a case that ended at once (bash had reaped it before the wait began)
	# and waited out the whole limit (about one skipped case in seven).
	rm -f "$log.timedout"
	pd_watchdog "$t" "$cpid" "$log" </dev/null >/dev/null 2>&1 &
	wpid=$!
	wait "$cpid" 2>/dev/null; rc=$?
	kill $(pd_tree "$wpid") 2>/dev/null; wait "$wpid" 2>/dev/null
	[ -e "$log.timedout" ] && rc=1
	if [ "$PD_SHARED" = 1 ] && [ "$rc" != 77 ] && ! mountpoint -q "$MNT"; then
		echo "FAIL: the shared mount $MNT disappeared during the case (daemon died?)" >>"$log"
		pd_show_log "$PDFS_LOG" >>"$log"
		rc=1
	fi
	if [ ! -d "$PD_TMP" ]; then
		# Nothing in the scripts removes it before pd_cleanup: say so, with
		# what ran then, and end the script (its later cases need it).
		not_ok "$name"
		note "# the script's temporary directory $PD_TMP disappeared during case $name; processes then:"
		ps -eo pid,ppid,etimes,args | sed 's/^/# /'
		pd_finish
	fi
	# Mounts the case left behind (it failed midway): take them down.
	tail -n +"$((nm + 1))" "$PD_TMP/mounts" | while read -r m r w l; do
		if mountpoint -q "$m"; then
			{ echo "(left mounted by the case: $m; daemon log follows)"; pd_show_log "$l"; } >>"$log"
			fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null
			pd_reap "$m" "$r" "$w"
		fi
	done
	case $rc in
	0) ok "$name"; echo "# $name: $((SECONDS - started)) s" ;;
	77) printf 'skip %s: %s\n' "$name" "$(sed -n 's/^SKIP: //p' "$log" | tail -1)"
	    PD_SKIP=$((PD_SKIP + 1)) ;;
	*) not_ok "$name" ;;
	esac
	if [ "$rc" != 0 ] || [ "${PD_VERBOSE:-0}" = 1 ]; then
		sed 's/^/# /' "$log" | head -n 400
	fi
	return 0
}

check() { local name=$1; shift; pd_case "$name" "$@"; }

pd_finish() {
	printf '# %s: %d ok, %d not ok, %d skipped\n' "$PD_SCRIPT" "$PD_PASS" "$PD_FAIL" "$PD_SKIP"
	[ "$PD_FAIL" -eq 0 ] || { printf '# failed: %s\n' "${PD_FAILED_CASES[*]}"; exit 1; }
	exit 0
}

pd_cleanup() {
	local m r w l p i me
	# Only the script itself cleans up. A child forked for an asynchronous
	# command (a case's timer) that is killed before it has reset the
	# script's traps runs them: its TERM trap exits, and its EXIT trap came
	# here and removed the temporary directory under the running script
	# (the cases that skip at once were the ones hit: their timer is killed
	# a moment after its fork).
	# ($BASHPID, read there, was seen to give the script's pid; the pid
	# /proc/self names to the shell reading it is the child's.)
	read -r me _ </proc/self/stat
	[ "$me" = "$PD_MAIN_PID" ] || return 0
	cd / || true
	while read -r p; do
		[ -n "$p" ] && kill $(pd_tree "$p") 2>/dev/null
	done <"$PD_TMP/pids"
	while read -r m r w l; do
		if mountpoint -q "$m" 2>/dev/null; then
			fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null
		fi
	done <"$PD_TMP/mounts"
	# Anything else still mounted below the temporary directory.
	for m in $(awk -v t="$PD_TMP/" 'index($2, t) == 1 { print $2 }' /proc/self/mounts | sort -r); do
		fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
	done
	while read -r m r w l; do
		pd_reap "$m" "$r" "$w"
	done <"$PD_TMP/mounts"
	pd_undo
	if [ "${PD_KEEP:-0}" = 1 ]; then
		echo "# kept $PD_TMP"
	elif awk -v t="$PD_TMP/" 'index($2, t) == 1 { f = 1 } END { exit !f }' /proc/self/mounts; then
		echo "# not removing $PD_TMP: something is still mounted below it"
	else
		rm -rf --one-file-system "$PD_TMP"
	fi
}
trap pd_cleanup EXIT
trap 'exit 130' INT TERM

# pd_require: the binaries exist; otherwise one failed case and exit. They
# are copied into the temporary directory, so that a rebuild while the tests
# run does not pull them away.
pd_require() {
	local b
	for b in "$PD_BIN" "$PDFS_BIN"; do
		if [ ! -x "$b" ]; then
			not_ok "setup"
			note "# missing executable: $b"
			pd_finish
		fi
	done
	mkdir -p "$PD_TMP/bin" &&
	cp "$PD_BIN" "$PD_TMP/bin/pagededup" && cp "$PDFS_BIN" "$PD_TMP/bin/pagededupfs" || {
		not_ok "setup"; note "# cannot copy the binaries to $PD_TMP/bin"; pd_finish; }
	PD_BIN=$PD_TMP/bin/pagededup PDFS_BIN=$PD_TMP/bin/pagededupfs
	export PD_BIN PDFS_BIN
}
