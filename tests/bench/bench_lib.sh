# tests/bench/bench_lib.sh - the preamble of the benchmarks that fill stores
# through a mount of their own (bench-cold, bench-compact, bench-lean,
# bench-packs; sourced by bash scripts).
#
#   bench_work NAME   WORK: a fresh directory PD_WORKDIR/pd-NAME.XXXXXX
#                     (PD_WORKDIR: /var/tmp); DPID: the caller's daemon, ""
#                     while none runs; an EXIT trap that unmounts WORK/mnt,
#                     waits for the daemon and removes WORK (kept with
#                     PD_KEEP=1)
#   calc FMT EXPR     EXPR evaluated by awk, printed with printf FMT
#   du_b PATH         the disk bytes of PATH (du -sk, times 1024)
#   gzip_sum DIR      the per-page gzip -6 sum of DIR's distinct files (one
#                     member a page, what a WARC.gz holds)
#   sample_rss_anon PID FILE
#                     the highest RssAnon (KiB) of process PID, sampled
#                     every 50 ms, written to FILE once PID is gone or
#                     FILE.stop exists
#   distinct_copy DIR GLOB DEST
#                     DIR's distinct files (by MD5) whose names match GLOB
#                     copied under DEST at the same paths, in path order
#                     (a directory that fits one block lists its names in
#                     the order they were made, and a copy in MD5 order
#                     would give cp -r the pages of a site in random
#                     order, which no crawler writes); prints how many

bench_work() {
	WORK=$(mktemp -d "${PD_WORKDIR:-/var/tmp}/pd-$1.XXXXXX")
	DPID=""
	trap bench_cleanup EXIT
}

bench_cleanup() {
	mountpoint -q "$WORK/mnt" 2>/dev/null && fusermount3 -u "$WORK/mnt"
	[ -n "$DPID" ] && wait "$DPID" 2>/dev/null
	[ "${PD_KEEP:-0}" = 1 ] || rm -rf "$WORK"
}

calc() { awk "BEGIN { printf \"$1\", $2 }"; }
du_b() { echo $(( $(du -sk "$1" | cut -f1) * 1024 )); }
gzip_sum() {
	(cd "$1" && find . -type f -print0 | xargs -0 md5sum | sort -u -k1,1 | cut -c35- |
		while IFS= read -r f; do gzip -6c -- "$f" | wc -c; done | awk '{ s += $1 } END { printf "%d", s }')
}
sample_rss_anon() { # PID FILE
	local max=0 v
	while [ ! -e "$2.stop" ] && v=$(awk '/^RssAnon:/ { print $2 }' "/proc/$1/status" 2>/dev/null) && [ -n "$v" ]; do
		[ "$v" -gt "$max" ] && max=$v
		sleep 0.05
	done
	echo "$max" >"$2"
}
distinct_copy() {
	local list
	list=$(mktemp) || return 1
	(cd "$1" && find -L . -type f -name "$2" -print0 | xargs -0 md5sum | sort -u -k1,1 | cut -c35- | sort) >"$list"
	(cd "$1" && while IFS= read -r f; do mkdir -p "$3/$(dirname "$f")" && cp "$f" "$3/$f"; done) <"$list"
	wc -l <"$list"
	rm -f "$list"
}
