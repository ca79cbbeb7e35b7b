#!/usr/bin/env bash
# make bench-scale: millions of pages through the mount, and how the
# daemon holds up as the archive grows.
#
#   tests/bench/bench-scale.sh BUILD_DIR
#
# Two writer processes (tests/bench/scalegen.py) write PD_SCALE_PAGES
# generated pages (default 5,000,000) into the mount: corpus pages
# (tests/bench/corpus.sh) with a random sentence and a counter inserted,
# 30% exact repeats of earlier pages, the corpus's size mix. Every
# PD_SCALE_STEP pages (default 1,000,000, the last step may be shorter) a
# row goes to scale.csv:
#   pages, seconds, pages/s of the step, RssAnon and RssFile of the daemon
#   (KiB), the store's du (KiB), its files, and from the daemon's stats:
#   the inodes it holds (the kernel's references), the pages its writers
#   signed themselves because the signer's queue was past its bound, and the
#   pages the delta step's full queue dropped (left to the nursery sweep),
#   the daemon's CPU seconds (user + system) of the step per 1,000 pages
#   (a figure of the work, apart from what else the machine runs), the
#   load average at the row, and LMDB's free pages (MiB), those of them the
#   oldest reader keeps from reuse (MiB), that reader's lag and the longest
#   reader's since the mount (in commits; its function in the log line):
#   a reader held open makes LMDB's file grow while its free list waits;
#   the KiB the daemon wrote per page of the step (write_bytes of
#   /proc/PID/io: the page-cache bytes its writes dirtied, LMDB's copied
#   pages and the packs; a dirtied folio counts whole), and the KiB the
#   disk under the store took per page (its sectors written, from
#   /sys/dev/block/MAJ:MIN/stat: what writeback sent, whoever dirtied it;
#   empty where the device's counts cannot be read), then, since the
#   mount, the pages writers gave their delta step themselves while the
#   nursery was behind, and the pages sealed past the nursery's bound
#   (their final records written whole by close(), ndelta.h); last, the
#   pages waiting in the nursery for their final records at the row: work
#   the step's rate has not paid yet, which a later step pays.
# The page cache is dropped before the run when the script may (root), so
# that runs start alike and earlier files do not crowd the cache.
# At the end: the unmount's time, du and files of the store against the
# plain directory and against gzip -6 per page (both priced on every
# PD_SCALE_SAMPLE-th page, default 100, scaled to all pages: writing the
# crawl a second time would need the disk twice), the time of `pagededup
# fsck`, and scale.png (gnuplot): pages/s and RSS against pages stored.
# Goals printed beside the figures: each step's pages/s within 15% of the
# first step's; RssAnon at most filter + 64 MiB + a per-inode amount.
# The per-inode amount is measured at the end: RssAnon and the inodes held
# before and after `echo 2 > /proc/sys/vm/drop_caches` (the kernel forgets
# the inodes it does not use: FORGET requests), their differences' ratio
# the bytes per inode; what stays is the rest (filter, LMDB, queues,
# caches), printed against the filter + 64 MiB. Without root the drop is
# skipped and said so.
#
# Environment: PD_SCALE_DIR (work directory, default /var/tmp/pd-scale; it
# needs the store's size free), PD_SCALE_PAGES, PD_SCALE_STEP,
# PD_SCALE_SAMPLE, PD_SCALE_WRITERS (2), PD_SEED, PD_MOUNT_OPTS,
# PD_SCALE_FSCK (1; 0 leaves the fsck out of a run that looks at ingest),
# PD_SCALE_SOURCE (a directory of .html pages the generator draws from
# instead of the bench corpus's corpus/a: a site of another origin).
set -euo pipefail
export LC_ALL=C
build=$(cd "${1:-build/release}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
PD=$build/pagededup PDFS=$build/pagededupfs
for b in "$PD" "$PDFS"; do
	[ -x "$b" ] || { echo "bench-scale: missing $b (make build MODE=release)" >&2; exit 1; }
done
pages=${PD_SCALE_PAGES:-5000000}
step=${PD_SCALE_STEP:-1000000}
sample=${PD_SCALE_SAMPLE:-100}
writers=${PD_SCALE_WRITERS:-2}
seed=${PD_SEED:-$RANDOM}
work=${PD_SCALE_DIR:-/var/tmp/pd-scale}

if [ -n "${PD_SCALE_SOURCE:-}" ]; then
	corpus=$(cd "$PD_SCALE_SOURCE" && pwd) || exit 1
	echo "source: $corpus ($(find "$corpus" -type f -name '*.html' | wc -l) pages)"
else
	corpus_info=$(bash "$top/tests/bench/corpus.sh")
	corpus=$(sed -n 's/^corpus_dir: //p' <<<"$corpus_info")/a
	echo "$corpus_info"
fi

store=$work/store mnt=$work/mnt csv=$work/scale.csv
daemon_pid="" gen_pids=()
cleanup() {
	for p in "${gen_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	mountpoint -q "$mnt" 2>/dev/null && { fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt"; }
	[ -n "$daemon_pid" ] && wait "$daemon_pid" 2>/dev/null
	return 0
}
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$mnt" "$work/progress"
dev=$(stat -c '%Hd:%Ld' "$work")
work_dev=/sys/dev/block/$dev/stat
[ -r "$work_dev" ] || work_dev=""
if sync && echo 3 2>/dev/null >/proc/sys/vm/drop_caches; then
	echo "scale_page_cache: dropped before the run"
else
	echo "scale_page_cache: not dropped (/proc/sys/vm/drop_caches not writable: run as root)"
fi
"$PD" mkfs "$store" --expected-pages "$pages" >/dev/null

# shellcheck disable=SC2086
"$PDFS" "$store" "$mnt" -f ${PD_MOUNT_OPTS:-} >"$work/daemon.log" 2>&1 &
daemon_pid=$!
for ((i = 0; i < 300; i++)); do mountpoint -q "$mnt" && break; sleep 0.1; done
mountpoint -q "$mnt" || { echo "bench-scale: the mount did not come up" >&2; cat "$work/daemon.log" >&2; exit 1; }

# The transport the kernel serves the mount on: the daemon logs io_uring's
# queues once it has set them up (fs/uring_io.c), shortly after the mount;
# /dev/fuse otherwise (the fuse module's enable_uring N, or -o no_uring).
# The two differ by about a third in pages/s on one machine (tests/bench/
# README.md, "make bench-scale"), so every run says which it measured.
transport=/dev/fuse
for ((i = 0; i < 30; i++)); do
	grep -q 'serving requests over io_uring' "$work/daemon.log" && { transport=io_uring; break; }
	sleep 0.1
done
echo "scale_transport: $transport (fuse module enable_uring: $(cat /sys/module/fuse/parameters/enable_uring 2>/dev/null || echo unknown))"

rss() { # KEY -> KiB of the daemon's KEY line in /proc/PID/status
	awk -v k="$1:" '$1 == k { print $2 }' "/proc/$daemon_pid/status"
}
stats_fields() { # KEY.PATH... -> their values in the mount's stats, -1 for each one missing
	"$PD" stats "$mnt" --json 2>/dev/null | python3 -c 'import json, sys
d = json.load(sys.stdin)
def get(path):
    v = d
    for k in path.split("."):
        v = v.get(k) if isinstance(v, dict) else None
    return -1 if v is None else v
print(*(get(p) for p in sys.argv[1:]))' "$@" 2>/dev/null ||
		{ printf -- '-1 %.0s' "$@"; echo; }
}
daemon_stats() { # -> "inodes_held signed_by_writers delta_dropped" from the mount's stats
	stats_fields daemon.inodes_held daemon.signed_by_writers daemon.delta_dropped
}
# Idle: nothing queued for the signer or the delta step and no page waiting
# in the nursery, for 5 s or until the heap is given back (each thread gives
# it back a second or two after its last page). The state in idle_state;
# fails while busy.
quiet_since=-1 quiet_give_backs=-1 idle_state=""
idle_daemon() {
	local sq dq nurs gb
	read -r sq dq nurs gb < <(stats_fields daemon.sign_queue daemon.delta_queue packs.nursery.live_records \
		daemon.heap_give_backs)
	idle_state="sign queue $sq, delta queue $dq, nursery $nurs pages, heap given back $gb times"
	if [ "$sq" != 0 ] || [ "$dq" != 0 ] || [ "$nurs" != 0 ]; then
		quiet_since=-1
		return 1
	fi
	if [ "$quiet_since" -lt 0 ]; then
		quiet_since=$SECONDS quiet_give_backs=$gb
		return 1
	fi
	[ "$gb" -gt "$quiet_give_backs" ] || [ $((SECONDS - quiet_since)) -ge 5 ]
}
cpu_ticks() { # -> the daemon's user + system clock ticks so far
	awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$daemon_pid/stat"
}
disk_bytes() { # -> the bytes the daemon's writes have dirtied so far (write_bytes)
	awk '/^write_bytes:/ { print $2 }' "/proc/$daemon_pid/io"
}
# The device under the work directory and the sectors written to it so
# far (field 7 of its stat), or nothing where it cannot be read.
dev_sectors() {
	[ -n "$work_dev" ] && [ -r "$work_dev" ] && awk '{ print $7 }' "$work_dev"
}
store_files() { find "$store" -xdev \( -type f -o -type d \) | wc -l; }
store_du() { du -sk "$store" | cut -f1; }
progress() { # -> the sum over writers of field N of their progress lines
	# w0, w1, ...: not the w0.tmp a writer renames over its line (scalegen.py)
	{ cat "$work"/progress/w*[0-9] 2>/dev/null || true; } | awk -v n="$1" '{ s += $n } END { printf "%.0f", s }'
}
now() { date +%s.%N; }

echo "scale_seed: $seed (replay with PD_SEED=$seed)"
echo "scale_pages: $pages in $writers writer processes, a row every $step pages"
t0=$(now)
for ((w = 0; w < writers; w++)); do
	python3 "$top/tests/bench/scalegen.py" "$corpus" "$mnt/crawl" "$w" "$writers" "$pages" "$seed" \
		"$work/progress/w$w" 0.3 "$sample" &
	gen_pids+=($!)
done

echo "pages,seconds,step_pages_per_s,rss_anon_kib,rss_file_kib,store_du_kib,store_files,inodes_held,signed_by_writers,delta_dropped,daemon_cpu_s_per_1000,load1,lmdb_free_mib,lmdb_pinned_mib,lmdb_reader_lag,lmdb_longest_reader,disk_kib_per_page,device_kib_per_page,delta_by_writers,nursery_bypassed,nursery_waiting" >"$csv"
hz=$(getconf CLK_TCK)
next=$step last_t=$t0 last_n=0 first_rate="" last_ticks=$(cpu_ticks) last_disk=$(disk_bytes) last_sectors=$(dev_sectors || true)
running() { local p; for p in "${gen_pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
row() { # pages now -> a CSV row and a line
	local n=$1 t rate
	t=$(now)
	rate=$(awk -v a="$n" -v b="$last_n" -v x="$t" -v y="$last_t" 'BEGIN { printf "%.0f", (a - b) / (x - y) }')
	local anon file du files held helped dropped ticks cpu load lfree lpinned llag llong llong_in disk dpp sectors devpp=""
	local by_writers bypassed waiting
	anon=$(rss RssAnon) file=$(rss RssFile) du=$(store_du) files=$(store_files)
	# LMDB's free pages, those the oldest reader keeps from reuse, its
	# lag, and the longest reader so far (in commits) with its function
	read -r held helped dropped lfree lpinned llag llong llong_in by_writers bypassed waiting < <(stats_fields daemon.inodes_held \
		daemon.signed_by_writers daemon.delta_dropped lmdb_free_bytes lmdb_pinned_bytes lmdb_reader_lag \
		lmdb_longest_reader lmdb_longest_reader_in daemon.delta_by_writers daemon.nursery_bypassed \
		packs.nursery.live_records)
	lfree=$((lfree / 1048576)) lpinned=$((lpinned / 1048576))
	ticks=$(cpu_ticks) load=$(cut -d' ' -f1 /proc/loadavg)
	cpu=$(awk -v a="$ticks" -v b="$last_ticks" -v h="$hz" -v n="$n" -v m="$last_n" 'BEGIN { printf "%.3f", (a - b) / h / (n - m) * 1000 }')
	disk=$(disk_bytes) sectors=$(dev_sectors || true)
	dpp=$(awk -v a="$disk" -v b="$last_disk" -v n="$n" -v m="$last_n" 'BEGIN { printf "%.1f", (a - b) / 1024 / (n - m) }')
	[ -n "$sectors" ] && [ -n "$last_sectors" ] &&
		devpp=$(awk -v a="$sectors" -v b="$last_sectors" -v n="$n" -v m="$last_n" 'BEGIN { printf "%.1f", (a - b) / 2 / (n - m) }')
	echo "$n,$(awk -v x="$t" -v y="$t0" 'BEGIN { printf "%.1f", x - y }'),$rate,$anon,$file,$du,$files,$held,$helped,$dropped,$cpu,$load,$lfree,$lpinned,$llag,$llong,$dpp,$devpp,$by_writers,$bypassed,$waiting" >>"$csv"
	echo "scale_step: $n pages, $rate pages/s, RssAnon $anon KiB, RssFile $file KiB, du $du KiB, $files files, $held inodes held, $helped pages signed by writers, $dropped dropped by the delta queue, $by_writers given their delta step by writers, $bypassed sealed past the nursery's bound, $waiting waiting in the nursery, daemon CPU $cpu s per 1,000 pages, $dpp KiB written per page (the disk ${devpp:-?}), load $load"
	echo "scale_lmdb: $lfree MiB free in LMDB's file, $lpinned MiB of it kept by the oldest reader ($llag commits behind); the longest reader so far $llong commits (in ${llong_in:-none})"
	last_ticks=$ticks last_disk=$disk last_sectors=$sectors
	[ -n "$first_rate" ] || first_rate=$rate
	last_t=$t last_n=$n
}
while running; do
	sleep 2
	n=$(progress 1)
	if [ "$n" -ge "$next" ]; then row "$n"; next=$((next + step)); fi
done
status=0
for p in "${gen_pids[@]}"; do wait "$p" || status=1; done
gen_pids=()
[ "$status" -eq 0 ] || { echo "bench-scale: a writer failed" >&2; exit 1; }
n=$(progress 1)
[ "$n" -eq "$pages" ] || { echo "bench-scale: $n pages written of $pages" >&2; exit 1; }
[ "$n" -gt "$last_n" ] && row "$n"
t_end=$(now)
echo "scale_total_pages_per_s: $(awk -v a="$n" -v x="$t_end" -v y="$t0" 'BEGIN { printf "%.0f", a / (x - y) }') pages/s"

# The daemon's background work the writers left (pages waiting for their
# signature, their delta step, the nursery's sweep) is done before the
# memory is read: the figure is that of the daemon at rest, which gives its
# heap's free pages back once idle (core/base/heap.h).
t_idle=$(now)
for ((i = 0; i < 3600; i++)); do
	idle_daemon && break
	sleep 1
done
echo "scale_catch_up_seconds: $(awk -v x="$(now)" -v y="$t_idle" 'BEGIN { printf "%.1f", x - y }') s after the writers ($idle_state)"
filter_kib=$(du -sk "$store/filter" "$store/filter.d" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
anon_end=$(rss RssAnon)
read -r held_end _ _ < <(daemon_stats)
echo "scale_filter: $filter_kib KiB"
echo "scale_rss_end: RssAnon $anon_end KiB, RssFile $(rss RssFile) KiB, $held_end inodes held"
echo "scale_rss_anon_over_filter: $(( (anon_end - filter_kib) / 1024 )) MiB (goal: <= 64 MiB plus the per-inode amount)"
# The per-inode part: the kernel forgets the inodes it does not use.
if sync && echo 2 2>/dev/null >/proc/sys/vm/drop_caches; then
	held_drop=$held_end
	for ((i = 0; i < 60; i++)); do # FORGETs arrive in batches: wait until they stop
		sleep 1
		read -r h _ _ < <(daemon_stats)
		[ "$h" -ge "$held_drop" ] && [ "$i" -ge 2 ] && break
		held_drop=$h
	done
	anon_drop=$(rss RssAnon)
	echo "scale_rss_after_drop_caches: RssAnon $anon_drop KiB, RssFile $(rss RssFile) KiB, $held_drop inodes held"
	awk -v a="$anon_end" -v b="$anon_drop" -v x="$held_end" -v y="$held_drop" -v f="$filter_kib" 'BEGIN {
		if (x > y) printf "scale_bytes_per_inode: %.0f (%.0f KiB given back for %d inodes forgotten)\n", (a - b) * 1024 / (x - y), a - b, x - y
		else print "scale_bytes_per_inode: unknown (no inode was forgotten)"
		printf "scale_rss_anon_rest_over_filter: %.1f MiB (goal: <= 64 MiB; RssAnon after the drop, minus the filter)\n", (b - f) / 1024
	}'
else
	echo "scale_rss_after_drop_caches: skipped (/proc/sys/vm/drop_caches not writable: run as root)"
fi

t1=$(now)
fusermount3 -u "$mnt"
wait "$daemon_pid" || { echo "bench-scale: the daemon exited non-zero" >&2; exit 1; }
daemon_pid=""
echo "scale_umount_seconds: $(awk -v x="$(now)" -v y="$t1" 'BEGIN { printf "%.1f", x - y }') s"

logical=$(progress 2) z6=$(progress 3) plain=$(progress 4) sampled=$(progress 5)
du_end=$(store_du) files_end=$(store_files)
scale() { awk -v s="$1" -v k="$sampled" -v n="$pages" 'BEGIN { printf "%.0f", s / k * n }'; }
z6_all=$(scale "$z6") plain_all=$(scale "$plain")
echo "scale_logical_bytes: $logical bytes"
echo "scale_store_du: $((du_end * 1024)) bytes, $files_end files and directories ($(awk -v f="$files_end" -v n="$pages" 'BEGIN { printf "%.2f", f / n * 1000 }') per 1,000 pages)"
echo "scale_plain_dir_estimate: $plain_all bytes (4 KiB blocks of $sampled sampled pages, scaled)"
echo "scale_gzip6_per_page_estimate: $z6_all bytes ($sampled sampled pages, scaled)"
echo "scale_du_over_plain_dir: $(awk -v a="$du_end" -v b="$plain_all" 'BEGIN { printf "%.3f", a * 1024 / b }')"
echo "scale_du_over_gzip6_per_page: $(awk -v a="$du_end" -v b="$z6_all" 'BEGIN { printf "%.3f", a * 1024 / b }')"

if [ "${PD_SCALE_FSCK:-1}" != 0 ]; then
	t1=$(now)
	"$PD" fsck "$store" >"$work/fsck.log" 2>&1 || { echo "bench-scale: fsck did not find the store clean" >&2; tail "$work/fsck.log" >&2; exit 1; }
	echo "scale_fsck_seconds: $(awk -v x="$(now)" -v y="$t1" 'BEGIN { printf "%.1f", x - y }') s"
else
	echo "scale_fsck_seconds: not measured (PD_SCALE_FSCK=0)"
fi

awk -F, -v f="$first_rate" 'NR > 1 && f > 0 {
	r = $3 / f; printf "scale_step_over_first: %s pages %.3f%s\n", $1, r, (r < 0.85 || r > 1.15) ? " (outside 15%)" : ""
}' "$csv"
awk -F, 'NR == 2 { f = $11 } NR > 1 && f > 0 {
	printf "scale_step_cpu_over_first: %s pages %.3f (daemon CPU %s s per 1,000 pages, load %s)\n", $1, $11 / f, $11, $12
}' "$csv"
if command -v gnuplot >/dev/null; then
	gnuplot <<-EOF
		set terminal pngcairo size 1000,800 noenhanced font ",10"
		set output "$work/scale.png"
		set datafile separator ","
		set multiplot layout 2,1 title "pagededupfs at scale: $pages pages, $writers writers"
		set xlabel "pages stored"
		set ylabel "pages/s (each step)"
		plot "$csv" every ::1 using 1:3 with linespoints title "pages/s"
		set ylabel "MiB"
		plot "$csv" every ::1 using 1:(\$4/1024) with linespoints title "RssAnon", \\
		     "$csv" every ::1 using 1:(\$5/1024) with linespoints title "RssFile"
		unset multiplot
	EOF
	echo "scale_plot: $work/scale.png"
fi
echo "scale_csv: $csv"
