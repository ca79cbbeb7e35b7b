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

run_unit() {
	local bin out rc p f
	for bin in "$build"/tests/test_*; do
		[ -x "$bin" ] || continue
		echo "== $(basename "$bin")"
		out=$(cd "$top" && "$bin" 2>&1); rc=$?
		printf '%s\n' "$out"
		p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | tail -1)
		f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | tail -1)
		p=${p:-0} f=${f:-0}
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
		passed=$((passed + p)) failed=$((failed + f))
		if [ "$f" -gt 0 ]; then
			failures+=("$(basename "$bin")")
			keep_details "$(basename "$bin")" "$out" "$rc"
		fi
	done
}

run_scripts() {
	local pattern=$1 label=${2:-} skip=${3:-} t out rc p f
	for t in $pattern; do
		[ -f "$t" ] || continue
		[ -n "$skip" ] && [[ $(basename "$t") =~ $skip ]] && continue
		echo "== $(basename "$t")$label"
		out=$(cd "$top" && timeout 1200 bash "$t" 2>&1); rc=$?
		printf '%s\n' "$out"
		p=$(printf '%s\n' "$out" | grep -c '^ok ')
		f=$(printf '%s\n' "$out" | grep -c '^not ok ')
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
		passed=$((passed + p)) failed=$((failed + f))
		if [ "$f" -gt 0 ]; then
			failures+=("$(basename "$t")$label")
			keep_details "$(basename "$t")$label" "$out" "$rc"
		fi
	done
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
run_fs() {
	modprobe fuse 2>/dev/null # its parameters appear once the module is in
	if [ ! -w "$uring_param" ]; then
		export PD_EXPECT_URING=0
		run_scripts "$top/tests/fs/t_*.sh"
		echo "# FUSE over io_uring: not offered by this kernel; the scripts ran on /dev/fuse only"
		return
	fi
	uring_was=$(cat "$uring_param")
	trap 'echo "$uring_was" >"$uring_param"' EXIT
	echo N >"$uring_param"
	export PD_EXPECT_URING=0
	run_scripts "$top/tests/fs/t_*.sh"
	echo Y >"$uring_param"
	echo "== FUSE over io_uring: the same scripts again"
	export PD_EXPECT_URING=1
	run_scripts "$top/tests/fs/t_*.sh" " (io_uring)" '^(t_urlseen|t_urlseen_redis|t_package)\.sh$' # mount nothing of their own transport
	echo "$uring_was" >"$uring_param"
	trap - EXIT
}

case $what in
unit) run_layers; run_unit ;;
fs) run_fs ;;
stress) run_scripts "$top/tests/stress/s_*.sh" ;;
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
