#!/usr/bin/env bash
# Test runner: the layer check of core/, unit tests (cmocka binaries), then
# the mounted-filesystem scripts. Ends with one line "N passed, N failed" and exits non-zero if any
# test failed.
#
#   tests/run.sh BUILD_DIR [unit|fs|stress|all]    (default all = unit + fs)
#
# Each tests/fs/t_*.sh prints "ok NAME" or "not ok NAME" per case; a script
# that exits non-zero without a "not ok" line counts as one failure.
set -u
build=$(cd "${1:?usage: tests/run.sh BUILD_DIR [unit|fs|stress|all]}" && pwd)
what=${2:-all}
top=$(cd "$(dirname "$0")/.." && pwd)
export PD_BUILD=$build PD_TOP=$top
export PD_BIN=$build/pagededup PDFS_BIN=$build/pagededupfs
export PD_DATA=$top/tests/data
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
passed=0 failed=0 failures=() details=()

# python3 looked up once. Where it is a version manager's shim (pyenv's is
# a shell script: 0.35-0.45 s a call against 0.05 s for the interpreter),
# the scripts' thousands of calls would spend minutes of CPU in it; a link
# to the interpreter the shim chooses, first on PATH, runs the same Python.
py_real=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
if [ -x "$py_real" ] && [ "$(command -v python3)" != "$py_real" ]; then
	mkdir -p "$build/tests/bin"
	ln -sfn "$py_real" "$build/tests/bin/python3"
	export PATH=$build/tests/bin:$PATH
fi

# What a failure printed, kept for the end of the run, where a log cut to
# its last lines still shows it: the cases "not ok" and their FAIL lines
# (anywhere in the case's log that follows), the unit tests FAILED with
# their errors, or, for a program that stopped without saying (a crash, a
# timeout), its status, the test it was in and its last lines.
keep_details() { # LABEL OUTPUT RC
	local said
	said=$(printf '%s\n' "$2" | grep -E -A2 '^not ok |^# FAIL: |^\[  FAILED  \] [a-z]|^\[  ERROR   \]' | head -40)
	if [ -z "$said" ]; then
		said="exit status $3; last test started: $(printf '%s\n' "$2" | grep '^\[ RUN' | tail -1)
$(printf '%s\n' "$2" | tail -8)"
	fi
	details+=("== $1
$said")
}

# Tests run PD_TEST_JOBS at a time (default: one per CPU; the scripts spend
# much of their time waiting on a daemon, a kill or a sync, so one at a
# time leaves a core idle): each lane takes the next test of the list when
# it finishes one, and a test's output is printed whole, in the list's
# order, once it and those before it are done. Scripts that change the
# host for others take pd_host_lock (tests/fs/lib.sh); run_alone runs the
# ones that switch the transport under everyone's feet by themselves.
jobs=${PD_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1

# The tests known to take longest, started first so that no lane is left
# with one of them at the end (one at a time on a 2-core machine, debug
# build: t_crash.sh 420 s, t_dedup.sh 201 s, t_compact.sh 118 s, test_fsck
# 105 s, the rest under 100 s each).
slow_first='test_fsck test_near test_cold test_ndelta test_near_layout test_gfilter test_nursery
	t_crash.sh t_dedup.sh t_compact.sh t_package.sh t_delta.sh t_operate.sh t_warc.sh t_model.sh t_posix.sh'

# in_order ITEM...: the items (paths), the slow ones first.
in_order() {
	local name i
	for name in $slow_first; do
		for i in "$@"; do [ "$(basename "$i")" = "$name" ] && echo "$i"; done
	done
	for i in "$@"; do
		[[ " $(echo $slow_first) " == *" $(basename "$i") "* ]] || echo "$i"
	done
}

# run_one KIND ITEM: a unit binary or a script, in the top folder.
run_one() {
	case $1 in
	unit) cd "$top" && "$2" ;;
	script) cd "$top" && timeout 1200 bash "$2" ;;
	esac
}

# tally KIND LABEL ITEM OUTFILE RC SECONDS: print a finished test and count it.
tally() {
	local kind=$1 name out rc=$5 p f
	name=$(basename "$3")$2
	out=$(cat "$4")
	echo "== $name"
	printf '%s\n' "$out"
	echo "# $name: $6 s"
	if [ "$kind" = unit ]; then
		p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
		f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
	else
		p=$(printf '%s\n' "$out" | grep -c '^ok ')
		f=$(printf '%s\n' "$out" | grep -c '^not ok ')
	fi
	p=${p:-0} f=${f:-0}
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	passed=$((passed + p)) failed=$((failed + f))
	if [ "$f" -gt 0 ]; then
		failures+=("$name")
		keep_details "$name" "$out" "$rc"
	fi
}

# run_lanes KIND LABEL ITEM...: the items, $jobs at a time.
run_lanes() {
	local kind=$1 label=$2 dir lane i rc secs lanes=()
	shift 2
	[ $# -gt 0 ] || return 0
	local items=("$@")
	dir=$(mktemp -d /tmp/pd-run.XXXXXX)
	echo 0 >"$dir/next"
	for lane in $(seq 1 "$jobs"); do
		(
			while :; do
				i=$(flock "$dir/next" bash -c 'read -r i <"$1"; echo $((i + 1)) >"$1"; echo "$i"' _ "$dir/next")
				[ "$i" -lt ${#items[@]} ] || break
				SECONDS=0
				run_one "$kind" "${items[$i]}" >"$dir/$i.out" 2>&1
				echo "$? $SECONDS" >"$dir/$i.rc.tmp"
				mv "$dir/$i.rc.tmp" "$dir/$i.rc"
			done
		) &
		lanes+=($!)
	done
	for i in "${!items[@]}"; do
		while [ ! -e "$dir/$i.rc" ]; do
			if ! kill -0 "${lanes[@]}" 2>/dev/null && [ ! -e "$dir/$i.rc" ]; then
				# every lane ended without finishing it (killed from
				# outside): a failure, not a wait without end
				echo "its lane ended before the test did" >>"$dir/$i.out"
				echo "1 0" >"$dir/$i.rc"
			fi
			sleep 1
		done
		read -r rc secs <"$dir/$i.rc"
		tally "$kind" "$label" "${items[$i]}" "$dir/$i.out" "$rc" "$secs"
	done
	wait
	rm -rf "$dir"
}

# run_alone KIND LABEL ITEM...: the items one after the other, nothing beside them.
run_alone() {
	local kind=$1 label=$2 saved=$jobs
	shift 2
	jobs=1
	run_lanes "$kind" "$label" "$@"
	jobs=$saved
}

run_unit() {
	local bins=() bin
	for bin in "$build"/tests/test_*; do
		[ -x "$bin" ] && bins+=("$bin")
	done
	mapfile -t bins < <(in_order "${bins[@]}")
	run_lanes unit "" "${bins[@]}"
}

# run_scripts PATTERN [LABEL] [SKIP]: the scripts matching PATTERN, but
# those whose name matches the regex SKIP; t_uring.sh, which switches the
# kernel's transport for its cases, alone before the others.
run_scripts() {
	local pattern=$1 label=${2:-} skip=${3:-} t alone=() rest=()
	for t in $pattern; do
		[ -f "$t" ] || continue
		[ -n "$skip" ] && [[ $(basename "$t") =~ $skip ]] && continue
		if [ "$(basename "$t")" = t_uring.sh ]; then alone+=("$t"); else rest+=("$t"); fi
	done
	run_alone script "$label" "${alone[@]}"
	mapfile -t rest < <(in_order "${rest[@]}")
	run_lanes script "$label" "${rest[@]}"
}

# The folders of core/ form layers without a cycle (tests/layers/).
run_layers() {
	run_scripts "$top/tests/layers/t_*.sh"
}

# The mounted-filesystem scripts run on each transport the kernel offers:
# /dev/fuse, then FUSE over io_uring (fs/uring_io.c) when the fuse module
# has the enable_uring parameter (Linux 6.14 and later). The parameter is
# set for each pass and put back as it was.
uring_param=/sys/module/fuse/parameters/enable_uring

# Scripts make check runs on /dev/fuse only and make stress runs over
# io_uring: those that mount nothing of their own transport, and those
# whose subject is the store's own work behind the calls (compaction, the
# delta step, the operator's commands, WARC in and out), whose requests
# over the ring are the reads and writes the other scripts make there.
uring_none='t_urlseen|t_urlseen_redis|t_package'
uring_in_stress='t_compact|t_delta|t_operate|t_warc'

# uring_set Y|N: the kernel's transport for the next mounts; the value
# found first is put back at exit.
uring_set() {
	if [ -z "${uring_was:-}" ]; then
		uring_was=$(cat "$uring_param")
		trap 'echo "$uring_was" >"$uring_param"' EXIT
	fi
	echo "$1" >"$uring_param"
}

# uring_pass PATTERN SKIP: the scripts matching PATTERN but those whose
# name matches the regex SKIP, over io_uring.
uring_pass() {
	uring_set Y
	echo "== FUSE over io_uring: the scripts again"
	export PD_EXPECT_URING=1
	run_scripts "$1" " (io_uring)" "$2"
}

run_fs() {
	modprobe fuse 2>/dev/null # its parameters appear once the module is in
	if [ ! -w "$uring_param" ]; then
		export PD_EXPECT_URING=0
		run_scripts "$top/tests/fs/t_*.sh"
		echo "# FUSE over io_uring: not offered by this kernel; the scripts ran on /dev/fuse only"
		return
	fi
	uring_set N
	export PD_EXPECT_URING=0
	run_scripts "$top/tests/fs/t_*.sh"
	# the crash script's series shorter on the second transport, and the
	# 2 GB file not written again (3.5 minutes under the sanitizers; the
	# ring's largest requests are t_uring.sh's): the first pass ran the 50
	# kills, the 10 power cuts and the 2 GB file (make stress runs longer
	# series)
	export PD_CRASH_CYCLES=${PD_CRASH_CYCLES:-15} PD_POWER_CYCLES=${PD_POWER_CYCLES:-3}
	export PD_SKIP_HUGE=${PD_SKIP_HUGE:-1}
	uring_pass "$top/tests/fs/t_*.sh" "^($uring_none|$uring_in_stress)\\.sh\$"
}

# make stress: the long runs, one at a time (each loads the machine on its
# own), then over io_uring the scripts make check runs on /dev/fuse only.
run_stress() {
	jobs=1
	run_scripts "$top/tests/stress/s_*.sh"
	modprobe fuse 2>/dev/null
	if [ -w "$uring_param" ]; then
		local t list=()
		for t in ${uring_in_stress//|/ }; do list+=("$top/tests/fs/$t.sh"); done
		uring_pass "${list[*]}" ""
	fi
}

case $what in
unit) run_layers; run_unit ;;
fs) run_fs ;;
stress) run_stress ;;
all) run_layers; run_unit; run_fs ;;
*) echo "unknown test set: $what" >&2; exit 2 ;;
esac

if [ ${#failures[@]} -gt 0 ]; then
	echo "== what the failures printed"
	printf '%s\n' "${details[@]}"
	echo "failed: ${failures[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
