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
