#!/usr/bin/env bash
# Filesystem benchmark: ingest a corpus of real HTML pages (half of them
# duplicates) with `cp -r` and with `tar x` into
#   plain    a plain directory on the same disk,
#   nodedup  the mount with -o nodedup (fresh store),
#   dedup    the mount, dedup on (fresh store),
#   devfuse  the mount, dedup on, -o no_uring (only when the kernel offers
#            FUSE over io_uring: the same mount on /dev/fuse, to compare),
#   nullfs   the floor: bench_nullfs (tests/bench/bench_nullfs.c), a FUSE
#            filesystem that keeps names and attributes in memory and throws
#            the data away, on libfuse's /dev/fuse loop; what any FUSE
#            filesystem pays here for the same requests,
#   nulluring  bench_nullfs -o uring: the floor over FUSE over io_uring (only
#            when the kernel offers it, as devfuse),
# and report the speed of each run, the ratios between them, the stored bytes
# per unique byte and the daemon's peak RSS (and its anonymous part at its
# highest during the copy) beside the filter size; for the
# nullfs runs, the requests per page by opcode (counted by bench_nullfs).
#
#   bash tests/bench/bench-fs.sh BUILD_DIR        (make bench: build/release)
#
# Environment:
#   PD_CORPUS, PD_PAGES, PD_CORPUS_PKGS   see tests/bench/corpus.sh
#   PD_BENCH_RUNS    runs to do, default "cp_plain cp_nullfs cp_nodedup
#                    cp_dedup tar_plain tar_nullfs tar_nodedup tar_dedup",
#                    plus cp_devfuse, tar_devfuse, cp_nulluring and
#                    tar_nulluring over io_uring
#   PD_URING         auto (default: FUSE over io_uring when the fuse module
#                    has the enable_uring parameter, which is switched on for
#                    the runs and put back), off (/dev/fuse, parameter off)
#   PD_MKFS_OPTS     extra options for `pagededup mkfs`
#   PD_MOUNT_OPTS    extra options for pagededupfs (e.g. "-o clone_fd";
#                    not given to bench_nullfs)
#   PD_NULLFS_OPTS   extra options for bench_nullfs (e.g. "-o writeback": not
#                    the floor of pagededupfs's settings, a what-if beside it)
#   PD_WORKDIR       parent of the scratch directory (default /var/tmp)
#   PD_KEEP=1        keep the scratch directory
#   PD_COPY_TIMEOUT  seconds before a copy or a check counts as hung (3600)
#   PD_REST          seconds the cp_dedup store, mounted again after its
#                    figures, is left at rest for the daemon's idle pass
#                    (-o idle_compact=1) before its du is taken again
#                    (default 600: at most; 0: not done)
#
# Every figure is printed on its own line as "name: value unit", goals beside
# the figures they apply to. Timing is never asserted: the exit status is
# non-zero only when a run failed (a copy, a mount, the daemon) or an
# ingested tree differs from the corpus.
set -uo pipefail
export LC_ALL=C
. "$(dirname "$0")/bench_lib.sh" # calc, sample_rss_anon

top=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build/release}" 2>/dev/null && pwd) || { echo "bench-fs: no build directory ${1:-build/release}" >&2; exit 2; }
PD=$BUILD/pagededup
PDFS=$BUILD/pagededupfs
NULLFS=$BUILD/bench/bench_nullfs
URING_PARAM=/sys/module/fuse/parameters/enable_uring
modprobe fuse 2>/dev/null
uring_was=""
if [ -w "$URING_PARAM" ]; then
	uring_was=$(cat "$URING_PARAM")
	if [ "${PD_URING:-auto}" = off ]; then echo N >"$URING_PARAM"; else echo Y >"$URING_PARAM"; fi
fi
uring_on() { [ -r "$URING_PARAM" ] && [ "$(cat "$URING_PARAM")" = Y ]; }
default_runs="cp_plain cp_nullfs cp_nodedup cp_dedup tar_plain tar_nullfs tar_nodedup tar_dedup"
uring_on && default_runs="$default_runs cp_devfuse tar_devfuse cp_nulluring tar_nulluring"
RUNS=${PD_BENCH_RUNS:-$default_runs}
COPY_TIMEOUT=${PD_COPY_TIMEOUT:-3600}
REST=${PD_REST:-600}
RSS_SLACK_MB=64
STORED_SLACK=1.02

log() { echo "bench-fs: $*" >&2; }

# --- the corpus ---------------------------------------------------------------
bash "$top/tests/bench/corpus.sh" >/dev/null || { log "the corpus could not be built"; exit 2; }
CACHE=$(cd "${PD_CORPUS:-/var/tmp/pagededup-corpus}" && pwd)
# shellcheck disable=SC1091
. "$CACHE/corpus.info"
CORPUS=$CACHE/corpus
TARBALL=$CACHE/corpus.tar
REFMD5=$CACHE/corpus.md5

# The reference for the store's size, measured here: every distinct page
# compressed alone with gzip -6, as a WARC.gz holds it (one member a
# record), summed.
GZIP6_B=$(cd "$CORPUS/a" && find . -type f -print0 | sort -z | xargs -0 md5sum | sort -u -k1,1 | cut -c35- |
	while IFS= read -r f; do gzip -6c -- "$f" | wc -c; done | awk '{ s += $1 } END { printf "%d", s }')
echo "reference_gzip6_per_page_bytes: $GZIP6_B bytes (the distinct pages of corpus/a, each gzip -6 alone)"

need_fs=0 need_nullfs=0
case " $RUNS " in *_nodedup*|*_dedup*|*_devfuse*) need_fs=1;; esac
case " $RUNS " in *_nullfs*|*_nulluring*) need_nullfs=1;; esac
if [ "$need_fs" -eq 1 ]; then
	for b in "$PD" "$PDFS"; do
		[ -x "$b" ] || { log "missing $b (build it: make build MODE=release)"; exit 2; }
	done
fi
if [ "$need_nullfs" -eq 1 ] && [ ! -x "$NULLFS" ]; then
	log "missing $NULLFS (build it: make build MODE=release)"; exit 2
fi
if [ "$need_fs" -eq 1 ] || [ "$need_nullfs" -eq 1 ]; then
	command -v fusermount3 >/dev/null || { log "fusermount3 not found (apt-get install fuse3)"; exit 2; }
fi

WORK=$(mktemp -d "${PD_WORKDIR:-/var/tmp}/pagededup-bench.XXXXXX")
MNT=$WORK/mnt
daemon_pid=""

cleanup() {
	if mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
	fi
	if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
		sleep 1
		kill "$daemon_pid" 2>/dev/null
	fi
	if [ "${PD_KEEP:-0}" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
	[ -z "$uring_was" ] || echo "$uring_was" >"$URING_PARAM"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

drop_caches() {
	sync
	{ echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null || true
}

# Figures, in order, also kept for the table: F[name]="value unit".
declare -A F
figure() { # name value unit [goal text]
	F[$1]="$2 $3"
	if [ -n "${4:-}" ]; then
		echo "$1: $2 $3  ($4)"
	else
		echo "$1: $2 $3"
	fi
}
val() { echo "${F[$1]%% *}"; }
met() { # awk condition -> "met" / "not met"
	if awk "BEGIN { exit !($1) }"; then echo met; else echo "not met"; fi
}

failed=0
failures=()
fail() { log "FAIL: $*"; failed=$((failed + 1)); failures+=("$1"); }

start_daemon() { # store mode (nullfs, nulluring: bench_nullfs, no store)
	local store=$1 mode=$2 opts=() i
	[ "$mode" = nodedup ] && opts=(-o nodedup)
	[ "$mode" = devfuse ] && opts=(-o no_uring)
	# shellcheck disable=SC2206
	[ -n "${PD_MOUNT_OPTS:-}" ] && opts+=($PD_MOUNT_OPTS)
	mkdir -p "$MNT"
	if [ "$mode" = nullfs ] || [ "$mode" = nulluring ]; then
		opts=()
		[ "$mode" = nulluring ] && opts=(-o uring)
		# shellcheck disable=SC2206
		[ -n "${PD_NULLFS_OPTS:-}" ] && opts+=($PD_NULLFS_OPTS)
		"$NULLFS" "$MNT" -f "${opts[@]}" >"$WORK/daemon.log" 2>&1 &
	else
		"$PDFS" "$store" "$MNT" -f "${opts[@]}" >"$WORK/daemon.log" 2>&1 &
	fi
	daemon_pid=$!
	for ((i = 0; i < 300; i++)); do
		mountpoint -q "$MNT" && return 0
		kill -0 "$daemon_pid" 2>/dev/null || break
		sleep 0.1
	done
	log "the mount did not come up; daemon log:"
	sed 's/^/  /' "$WORK/daemon.log" >&2
	stop_daemon
	return 1
}

stop_daemon() { # -> daemon exit status
	local i rc
	[ -n "$daemon_pid" ] || return 0
	for ((i = 0; i < 50; i++)); do
		mountpoint -q "$MNT" || break
		fusermount3 -u "$MNT" 2>/dev/null && break
		sleep 0.2
	done
	for ((i = 0; i < 600; i++)); do
		kill -0 "$daemon_pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$daemon_pid" 2>/dev/null; then
		log "the daemon did not exit 60 s after unmount; killing it"
		kill "$daemon_pid" 2>/dev/null
	fi
	wait "$daemon_pid"; rc=$?
	daemon_pid=""
	return "$rc"
}

# Compare an ingested tree with the corpus: every file's md5 and name, and
# nothing but files and directories. Reads go cold, so a mounted tree is read
# through the daemon rather than from the page cache.
verify_tree() { # dir
	local dir=$1 out=$WORK/verify.md5 extra
	drop_caches
	(cd "$dir" && find . -type f -print0 | sort -z |
		timeout "$COPY_TIMEOUT" xargs -0 -r -n 2000 md5sum --) >"$out" || return 1
	extra=$(cd "$dir" && find . ! -type f ! -type d | head -5)
	if [ -n "$extra" ]; then
		log "unexpected entries in $dir:"; echo "$extra" >&2; return 1
	fi
	if ! cmp -s "$out" "$REFMD5"; then
		log "the tree in $dir differs from the corpus:"
		diff "$REFMD5" "$out" | head -10 >&2
		return 1
	fi
}

# bench_nullfs keeps no data: check the names and sizes it kept instead,
# the number of files and their total size against the corpus's.
verify_count() { # dir
	local dir=$1 n b extra
	read -r n b < <(cd "$dir" && find . -type f -printf '%s\n' |
		awk '{ n++; s += $1 } END { printf "%d %d\n", n, s }')
	extra=$(cd "$dir" && find . ! -type f ! -type d | head -5)
	if [ -n "$extra" ]; then
		log "unexpected entries in $dir:"; echo "$extra" >&2; return 1
	fi
	if [ "$n" != "$pages" ] || [ "$b" != "$bytes" ]; then
		log "$dir holds $n files of $b bytes, the corpus $pages of $bytes"; return 1
	fi
}

# bench_nullfs's request counts so far (it prints them on SIGUSR1), as
# "OP=n" words on one line; empty if it did not answer within 5 s.
nullfs_counts() {
	local before i line
	before=$(grep -c '^nullfs_ops:' "$WORK/daemon.log")
	kill -USR1 "$daemon_pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		line=$(grep '^nullfs_ops:' "$WORK/daemon.log" | sed -n "$((before + 1))p")
		[ -n "$line" ] && { echo "${line#nullfs_ops: }"; return 0; }
		sleep 0.1
	done
}

# Requests per page by opcode, and the synchronous ones (all but FORGET,
# BATCH_FORGET, RELEASE, RELEASEDIR and INTERRUPT, which the kernel sends
# without waiting for their reply; INIT and the like round to 0.00).
ops_figures() { # name counts
	local name=$1 counts=$2
	echo "${name}_requests: $counts"
	figure "${name}_requests_per_page" "$(echo "$counts" | tr ' ' '\n' |
		awk -F= -v p="$pages" '$1 == "total" { printf "%.2f", $2 / p }')" requests/page
	echo "${name}_requests_per_page_by_op: $(echo "$counts" | tr ' ' '\n' |
		awk -F= -v p="$pages" '$1 != "total" && $2 / p >= 0.005 { printf "%s%s %.2f", sep, $1, $2 / p; sep = ", " }')"
	figure "${name}_sync_requests_per_page" "$(echo "$counts" | tr ' ' '\n' |
		awk -F= -v p="$pages" '$1 != "total" && $1 !~ /^(FORGET|BATCH_FORGET|RELEASE|RELEASEDIR|INTERRUPT)$/ { s += $2 }
			END { printf "%.2f", s / p }')" "round trips/page" "the caller waits for each"
}

# Unmount, timed; a daemon that exits non-zero fails the run.
stop_timed() { # name
	local t0 t1 rc
	t0=$(now)
	stop_daemon; rc=$?
	t1=$(now)
	figure "$1_umount_seconds" "$(elapsed "$t0" "$t1")" s
	[ "$rc" -eq 0 ] || { fail "$1 (daemon exited $rc)"; sed 's/^/  /' "$WORK/daemon.log" | tail -20 >&2; }
}

json_num() { # key file
	sed -n "s/.*\"$1\"[[:space:]]*:[[:space:]]*\([0-9][0-9]*\).*/\1/p" "$2" | head -1
}

# The daemon's anonymous memory at its highest while the copy runs (KiB):
# VmHWM counts the file pages mapped in too (LMDB's map, the filter
# image), which the kernel takes back under pressure; the goal of the
# issue is on RssAnon. Sampled every 50 ms into FILE until the process
# goes or FILE.stop appears.
# The store of a run mounted again and left at rest until the daemon's
# idle pass (core/blob/blob.h) has said what it did, at most REST seconds;
# then its du again: the archive as a crawl that paused leaves it.
at_rest() { # name store
	local name=$1 store=$2 i said whole_b waited
	PD_MOUNT_OPTS="${PD_MOUNT_OPTS:-} -o idle_compact=1,compact_period_ms=500" start_daemon "$store" dedup ||
		{ fail "${name}_at_rest (mount)"; return; }
	for ((i = 0; i < REST * 10; i++)); do
		grep -q "idle pass" "$WORK/daemon.log" && break
		kill -0 "$daemon_pid" 2>/dev/null || break
		sleep 0.1
	done
	waited=$i
	verify_tree "$MNT" || fail "${name}_at_rest (tree differs after the idle pass)"
	stop_daemon || { fail "${name}_at_rest"; return; }
	said=$(grep -o "idle pass.*" "$WORK/daemon.log" | head -1)
	whole_b=$(( $(du -sk "$store" | cut -f1) * 1024 ))
	echo "${name}_at_rest: ${said:-no idle pass in $REST s}"
	figure "${name}_du_store_at_rest" "$whole_b" bytes \
		"packs $(( $(du -sk "$store/packs" | cut -f1) * 1024 )), meta (LMDB) $(( $(du -sk "$store/meta" | cut -f1) * 1024 ))"
	figure "${name}_du_per_gzip6_at_rest" "$(calc %.4f "$whole_b / $GZIP6_B")" x \
		"goal <= 0.5: $(met "$whole_b <= 0.5 * $GZIP6_B"); after $(calc %.0f "$waited / 10") s at rest; the tree read back the same"
}

run() { # name = METHOD_TARGET
	local name=$1 method=${1%%_*} target=${1#*_} dest store t0 t1 t2 secs rc=0
	local hwm stats rss_parts anon_peak= sampler=
	echo
	echo "== $name"
	store=$WORK/store
	rm -rf "$WORK/plain" "$store" "$MNT"
	case $target in
	plain)
		dest=$WORK/plain
		mkdir -p "$dest"
		;;
	nodedup|dedup|devfuse)
		# shellcheck disable=SC2086
		if ! "$PD" mkfs "$store" ${PD_MKFS_OPTS:-} >"$WORK/mkfs.log" 2>&1; then
			cat "$WORK/mkfs.log" >&2; fail "$name (mkfs)"; return
		fi
		start_daemon "$store" "$target" || { fail "$name (mount)"; return; }
		dest=$MNT
		;;
	nullfs|nulluring)
		start_daemon "" "$target" || { fail "$name (mount)"; return; }
		dest=$MNT
		;;
	*) log "unknown run $name"; fail "$name"; return ;;
	esac

	drop_caches
	rm -f "$WORK/anon_peak" "$WORK/anon_peak.stop"
	case $target in
	nodedup|dedup|devfuse) sample_rss_anon "$daemon_pid" "$WORK/anon_peak" & sampler=$! ;;
	esac
	t0=$(now)
	case $method in
	cp) timeout "$COPY_TIMEOUT" cp -r "$CORPUS/a" "$CORPUS/b" "$dest/" ;;
	tar) timeout "$COPY_TIMEOUT" tar -xf "$TARBALL" -C "$dest" ;;
	*) log "unknown method $method"; false ;;
	esac
	rc=$?
	t1=$(now)
	if [ -n "$sampler" ]; then
		touch "$WORK/anon_peak.stop"
		wait "$sampler"
		anon_peak=$(cat "$WORK/anon_peak" 2>/dev/null)
	fi
	sync
	t2=$(now)
	secs=$(elapsed "$t0" "$t1")
	if [ "$rc" -ne 0 ]; then
		fail "$name ($method exited $rc)"
	else
		figure "${name}_seconds" "$secs" s
		figure "${name}_pages_per_s" "$(calc %.1f "$pages / $secs")" pages/s
		figure "${name}_mb_per_s" "$(calc %.1f "$bytes / 1000000 / $secs")" MB/s
		figure "${name}_sync_seconds" "$(elapsed "$t1" "$t2")" s
		if [ "$target" = nullfs ] || [ "$target" = nulluring ]; then
			# the requests of the copy alone, before the check's (bench_nullfs
			# counts them on /dev/fuse only)
			[ "$target" = nullfs ] && ops_figures "$name" "$(nullfs_counts)"
			if verify_count "$dest"; then
				echo "${name}_verified: $pages pages, $bytes bytes (names and sizes; the data was discarded)"
				F[${name}_check]="ok (count)"
			else
				F[${name}_check]=DIFFERS
				fail "$name (tree differs)"
			fi
		elif verify_tree "$dest"; then
			echo "${name}_verified: $pages pages"
			F[${name}_check]=ok
		else
			F[${name}_check]=DIFFERS
			fail "$name (tree differs)"
		fi
	fi

	if [ "$target" = plain ]; then
		F[${name}_transport]="-"
	elif grep -q "serving requests over io_uring" "$WORK/daemon.log"; then
		F[${name}_transport]=io_uring
	else
		F[${name}_transport]="/dev/fuse"
	fi
	if [ "$target" = nullfs ] || [ "$target" = nulluring ]; then
		case ${F[${name}_transport]} in
		io_uring) echo "${name}_transport: io_uring (pagededupfs's transport, fs/uring_io.c)" ;;
		*) echo "${name}_transport: /dev/fuse (libfuse's loop)" ;;
		esac
		[ -n "${PD_NULLFS_OPTS:-}" ] && echo "${name}_options: $PD_NULLFS_OPTS (not pagededupfs's settings)"
		stop_timed "$name"
	elif [ "$target" != plain ]; then
		echo "${name}_transport: ${F[${name}_transport]}"
		hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$daemon_pid/status" 2>/dev/null)
		# what the resident set is made of at that moment: anonymous memory,
		# and file pages mapped in (the filter image, LMDB's map)
		rss_parts=$(awk '/^(RssAnon|RssFile|RssShmem):/ { printf "%s %.2f MiB, ", $1, $2 / 1024 }' \
			"/proc/$daemon_pid/status" 2>/dev/null)
		stop_timed "$name"
		local filter_b du_b files_b st_b
		# the filter: the root file and the leaves of the grown tree
		filter_b=$(du -scb "$store/filter" "$store/filter.d" 2>/dev/null | tail -1 | cut -f1)
		filter_b=${filter_b:-0}
		# page bytes: pack files (format 2) and blob files (format 1, nodedup
		# stores made with blob_files)
		du_b=$(du -scb "$store/packs" "$store/objects" 2>/dev/null | tail -1 | cut -f1)
		files_b=$(find "$store/packs" "$store/objects" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { printf "%d", s }')
		# the whole store as the disk sees it (allocated blocks), its parts,
		# and the files it takes
		local whole_b packs_b meta_b nfiles
		whole_b=$(( $(du -sk "$store" | cut -f1) * 1024 ))
		packs_b=$(( $(du -sk "$store/packs" 2>/dev/null | cut -f1) * 1024 ))
		meta_b=$(( $(du -sk "$store/meta" | cut -f1) * 1024 ))
		nfiles=$(find "$store" -type f | wc -l)
		figure "${name}_du_store" "$whole_b" bytes "packs $packs_b, meta (LMDB) $meta_b, filter $filter_b"
		figure "${name}_du_per_gzip6" "$(calc %.4f "$whole_b / $GZIP6_B")" x \
			"goal <= 0.5: $(met "$whole_b <= 0.5 * $GZIP6_B"); the per-page gzip -6 sum of the distinct pages is $GZIP6_B bytes"
		figure "${name}_backing_files_per_1000_pages" "$(calc %.3f "$nfiles * 1000 / $pages")" files \
			"goal <= 1 (plus a bounded number of fixed files): $(met "$nfiles * 1000 / $pages <= 1")"
		[ "$name" = cp_dedup ] && [ "$REST" != 0 ] && at_rest "$name" "$store"
		stats=$WORK/stats.json
		if "$PD" stats "$store" --json >"$stats" 2>"$WORK/stats.err"; then
			st_b=$(json_num stored_bytes "$stats")
			echo "${name}_stats: $(tr -d '\n' <"$stats")"
		else
			log "pagededup stats failed: $(cat "$WORK/stats.err")"
			st_b=""
		fi
		figure "${name}_filter_mb" "$(calc %.2f "$filter_b / 1048576")" MiB
		if [ -n "$hwm" ]; then
			local rss_goal
			rss_goal=$(calc %.2f "$filter_b / 1048576 + $RSS_SLACK_MB")
			figure "${name}_peak_rss_mb" "$(calc %.2f "$hwm / 1024")" MiB \
				"goal <= filter + $RSS_SLACK_MB MiB = $rss_goal MiB: $(met "$hwm / 1024 <= $rss_goal")"
			[ -n "$rss_parts" ] && echo "${name}_rss_at_unmount: ${rss_parts%, }"
			[ -n "$anon_peak" ] && figure "${name}_peak_rss_anon_mb" "$(calc %.2f "$anon_peak / 1024")" MiB \
				"the highest RssAnon sampled every 50 ms during the copy; goal <= $rss_goal MiB: $(met "$anon_peak / 1024 <= $rss_goal")"
		fi
		local g="goal <= $STORED_SLACK x"
		[ "$target" = nodedup ] && g=""
		figure "${name}_stored_bytes_du" "${du_b:-0}" bytes
		figure "${name}_stored_per_unique_du" "$(calc %.4f "${du_b:-0} / $unique_bytes")" x \
			"${g:+$g: $(met "${du_b:-0} <= $unique_bytes * $STORED_SLACK"); }du -sb counts the objects/ directories too"
		figure "${name}_stored_bytes_files" "${files_b:-0}" bytes
		figure "${name}_stored_per_unique_files" "$(calc %.4f "${files_b:-0} / $unique_bytes")" x \
			"${g:+$g: $(met "${files_b:-0} <= $unique_bytes * $STORED_SLACK")}"
		if [ -n "$st_b" ]; then
			figure "${name}_stored_bytes_stats" "$st_b" bytes
			figure "${name}_stored_per_unique_stats" "$(calc %.4f "$st_b / $unique_bytes")" x \
				"${g:+$g: $(met "$st_b <= $unique_bytes * $STORED_SLACK")}"
		fi
	else
		# the plain directory as the disk sees it: the reference of the
		# small-pages figure (a block a file at least)
		figure "${name}_du_plain" "$(( $(du -sk "$WORK/plain" | cut -f1) * 1024 ))" bytes
	fi
	set_aside "$name"
}

# A run's target is set aside, not deleted, until the script ends. On an
# ext4 without a journal (as on the machine these figures come from) the
# inode allocator skips every inode freed in the last 60 s (360 s while its
# table block is dirty: recently_deleted() in fs/ext4/ialloc.c), so a run
# made just after deleting the previous run's 40,000-80,000 files paid for
# them on every file it created: a plain cp of 5,000 pages took 0.6 s on a
# quiet disk and 3.0 s right after such a deletion. The first run never
# paid, the others did.
set_aside() { # name
	local f
	for f in plain store mnt; do
		[ -e "$WORK/$f" ] && mv "$WORK/$f" "$WORK/done.$1.$f"
	done
	return 0
}

echo "== corpus"
figure corpus_pages "$pages" pages
figure corpus_bytes "$bytes" bytes
figure corpus_unique_bytes "$unique_bytes" bytes
echo "corpus_packages: $packages"
echo "corpus_dir: $CORPUS"
echo "workdir: $WORK ($(stat -f -c %T "$WORK"))"
if uring_on; then
	echo "transport: FUSE over io_uring (devfuse and nullfs runs: /dev/fuse)"
else
	echo "transport: /dev/fuse"
fi

for r in $RUNS; do run "$r"; done

# --- round trips -------------------------------------------------------------
# What one request costs a program, on each transport, with the program
# pinned to CPU 0 and left to the scheduler (bench_roundtrip: open + close
# of one file, 20,000 times; the best of 3); nullfs and nulluring:
# bench_nullfs on each, the floor of a round trip.
roundtrip() { # transport label: uring, devfuse, nullfs, nulluring
	local store=$WORK/rt.$1 opts=() best="" v i cpu
	[ "$1" = devfuse ] && opts=(-o no_uring)
	if [ "$1" = nullfs ] || [ "$1" = nulluring ]; then
		start_daemon "" "$1" || { fail "roundtrip $1 (mount)"; return; }
	else
		"$PD" mkfs "$store" >/dev/null 2>&1 || { fail "roundtrip $1 (mkfs)"; return; }
		PD_MOUNT_OPTS="${opts[*]}" start_daemon "$store" dedup || { fail "roundtrip $1 (mount)"; return; }
	fi
	echo x >"$MNT/f"
	for cpu in pinned free; do
		best=""
		for i in 1 2 3; do
			if [ "$cpu" = pinned ]; then
				v=$(taskset -c 0 "$BUILD/bench/bench_roundtrip" "$MNT/f" | awk '{ print $2 }')
			else
				v=$("$BUILD/bench/bench_roundtrip" "$MNT/f" | awk '{ print $2 }')
			fi
			[ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN { exit !(a < b) }' && best=$v
		done
		figure "roundtrip_${1}_${cpu}_us" "$best" "us per open+close"
	done
	stop_daemon || fail "roundtrip $1 (daemon exit)"
	rm -rf "$store"
}
if [ -x "$BUILD/bench/bench_roundtrip" ] && { [ "$need_fs" -eq 1 ] || [ "$need_nullfs" -eq 1 ]; }; then
	echo
	echo "== round trips"
	if [ "$need_fs" -eq 1 ]; then
		if uring_on; then roundtrip uring; fi
		roundtrip devfuse
	fi
	if [ "$need_nullfs" -eq 1 ]; then
		if uring_on; then roundtrip nulluring; fi
		roundtrip nullfs
	fi
fi

# --- ratios ----------------------------------------------------------------
echo
echo "== ratios (pages/s of dedup over the other target)"
for m in cp tar; do
	for other in nodedup plain devfuse; do
		[ -n "${F[${m}_dedup_pages_per_s]:-}" ] && [ -n "${F[${m}_${other}_pages_per_s]:-}" ] || continue
		r=$(calc %.3f "$(val "${m}_dedup_pages_per_s") / $(val "${m}_${other}_pages_per_s")")
		if [ "$other" = devfuse ]; then
			figure "ratio_${m}_dedup_vs_${other}" "$r" x "io_uring over /dev/fuse"
			continue
		fi
		goal=0.9; [ "$other" = plain ] && goal=0.5
		figure "ratio_${m}_dedup_vs_${other}" "$r" x "goal >= $goal x: $(met "$r >= $goal")"
	done
done

# The floor: bench_nullfs over the plain directory is the most any FUSE
# filesystem with pagededupfs's kernel settings could reach here, on each
# transport; pagededupfs over bench_nullfs is how close it comes, on the
# same transport.
ratio_pair() { # method run other note
	[ -n "${F[${1}_${2}_pages_per_s]:-}" ] && [ -n "${F[${1}_${3}_pages_per_s]:-}" ] || return 0
	figure "ratio_${1}_${2}_vs_${3}" \
		"$(calc %.3f "$(val "${1}_${2}_pages_per_s") / $(val "${1}_${3}_pages_per_s")")" x "$4"
}
have_nullfs=0
for m in cp tar; do
	[ -n "${F[${m}_nullfs_pages_per_s]:-}${F[${m}_nulluring_pages_per_s]:-}" ] && have_nullfs=1
done
if [ "$have_nullfs" -eq 1 ]; then
	echo
	echo "== the floor (bench_nullfs)"
	for m in cp tar; do
		ratio_pair "$m" nullfs plain "the floor on ${F[${m}_nullfs_transport]:-?}: any FUSE filesystem with these kernel settings"
		ratio_pair "$m" nulluring plain "the floor on ${F[${m}_nulluring_transport]:-?}: any FUSE filesystem with these kernel settings"
		ratio_pair "$m" devfuse nullfs "pagededupfs on ${F[${m}_devfuse_transport]:-?} over the floor on ${F[${m}_nullfs_transport]:-?}"
		ratio_pair "$m" dedup nulluring "pagededupfs on ${F[${m}_dedup_transport]:-?} over the floor on ${F[${m}_nulluring_transport]:-?}"
		ratio_pair "$m" dedup nullfs "pagededupfs on ${F[${m}_dedup_transport]:-?} over the floor on ${F[${m}_nullfs_transport]:-?}"
		ratio_pair "$m" nodedup nullfs "pagededupfs -o nodedup on ${F[${m}_nodedup_transport]:-?} over the floor on ${F[${m}_nullfs_transport]:-?}"
	done
fi

# --- the table ---------------------------------------------------------------
echo
echo "== summary ($pages pages, $(calc %.1f "$bytes / 1000000") MB, unique $(calc %.1f "$unique_bytes / 1000000") MB)"
printf '%-14s %9s %10s %8s %8s %9s %12s %11s %10s  %s\n' run seconds pages/s MB/s sync_s umount_s stored/uniq peakRSS_MiB transport check
for r in $RUNS; do
	[ -n "${F[${r}_seconds]:-}" ] || { printf '%-14s %9s\n' "$r" failed; continue; }
	printf '%-14s %9s %10s %8s %8s %9s %12s %11s %10s  %s\n' "$r" "$(val "${r}_seconds")" \
		"$(val "${r}_pages_per_s")" "$(val "${r}_mb_per_s")" "$(val "${r}_sync_seconds")" \
		"${F[${r}_umount_seconds]:+$(val "${r}_umount_seconds")}" \
		"${F[${r}_stored_per_unique_files]:+$(val "${r}_stored_per_unique_files")}" \
		"${F[${r}_peak_rss_mb]:+$(val "${r}_peak_rss_mb")}" "${F[${r}_transport]:-}" "${F[${r}_check]:-}"
done
echo
printf '%-36s %10s  %-26s %s\n' goal figure target status
for m in cp tar; do
	r=${F[ratio_${m}_dedup_vs_nodedup]:-}
	[ -n "$r" ] && printf '%-36s %10s  %-26s %s\n' "$m: dedup vs nodedup" "${r% *}" ">= 0.9 x" "$(met "${r% *} >= 0.9")"
	r=${F[ratio_${m}_dedup_vs_plain]:-}
	[ -n "$r" ] && printf '%-36s %10s  %-26s %s\n' "$m: dedup vs plain directory" "${r% *}" ">= 0.5 x" "$(met "${r% *} >= 0.5")"
	for t in nullfs nulluring; do
		r=${F[ratio_${m}_${t}_vs_plain]:-}
		[ -n "$r" ] || continue
		tr=${F[${m}_${t}_transport]:-?}
		reach="0.5 x out of reach on $tr"
		awk "BEGIN { exit !(${r% *} >= 0.5) }" && reach="0.5 x reachable on $tr"
		printf '%-36s %10s  %-26s %s\n' "$m: the floor ($t) vs plain" "${r% *}" "(FUSE floor, $tr)" "$reach"
	done
	r=${F[${m}_dedup_stored_per_unique_files]:-}
	[ -n "$r" ] && printf '%-36s %10s  %-26s %s\n' "$m: stored/unique bytes (files)" "${r% *}" "<= $STORED_SLACK x" "$(met "${r% *} <= $STORED_SLACK")"
	r=${F[${m}_dedup_stored_per_unique_stats]:-}
	[ -n "$r" ] && printf '%-36s %10s  %-26s %s\n' "$m: stored/unique bytes (stats)" "${r% *}" "<= $STORED_SLACK x" "$(met "${r% *} <= $STORED_SLACK")"
	for mem in "peak_rss_mb:peak RSS MiB" "peak_rss_anon_mb:peak RssAnon MiB"; do
		r=${F[${m}_dedup_${mem%%:*}]:-}
		[ -n "$r" ] || continue
		lim=$(calc %.2f "$(val "${m}_dedup_filter_mb") + $RSS_SLACK_MB")
		printf '%-36s %10s  %-26s %s\n' "$m: ${mem#*:}" "${r% *}" "<= filter + $RSS_SLACK_MB = $lim" "$(met "${r% *} <= $lim")"
	done
done

echo
if [ "$failed" -gt 0 ]; then
	echo "bench-fs: $failed failure(s): ${failures[*]}"
	exit 1
fi
echo "bench-fs: all runs succeeded"
