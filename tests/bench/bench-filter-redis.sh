#!/usr/bin/env bash
# make bench-filter, part "redis" (PD_PART=redis; also run by PD_PART=all):
# `pagededup urlseen --redis` on a Redis Cluster of 3 primaries on this
# machine (127.0.0.1, ports PD_REDIS_PORT.. +2, started and stopped here).
#
#   tests/bench/bench-filter-redis.sh BUILD_DIR
#
# Steps (figures on lines "name: value unit", goals at the end):
#   1. race: three clients at once, each on 2/3 of a generated crawl list of
#      PD_REDIS_URLS distinct URLs (every URL goes to two of them, in the
#      same order, so they race on it), filter presized (--expected);
#      URLs/s in total (lines of the three / wall time of the three) and per
#      client; every URL printed by exactly one client (less false
#      positives); Redis memory (MEMORY USAGE of the filter's keys, summed;
#      also used_memory of the primaries, after less before, which counts
#      the servers' own growth: scripts, buffers) against a classic Bloom
#      filter's optimum for the URLs;
#   2. the limit, right after step 1 (the machine may be shared: the two
#      figures are taken as close together as they can be):
#      redis-benchmark --cluster, three clients pipelined (PD_RB_PIPELINE,
#      default 256), sending the per-URL command (BITFIELD GET u8 0 + one
#      SET u1 per bit, the filter's k) to leaf-sized keys of the same
#      cluster; the ratio of step 1's total to it;
#   3. false positives on three inputs of different origin, each inserted
#      then probed with URLs it does not hold: fresh URLs of the generated
#      kind; this machine's file paths as URLs; the URLs quoted in Debian's
#      documentation (/usr/share/doc), split in halves (these two are small,
#      some 10^4 URLs: also at rates 1e-3 and 1e-2, where their counts of
#      false positives say something);
#   4. growing: the race again into a filter first sized for 1/16 of the
#      URLs (its 64 first leaves of the smallest size, 16 KiB, may hold
#      more; it splits on the way): speed, memory, false positives;
#
# In steps 1 and 4 a URL printed by two clients must lie in a batch one of
# them reported as printed without an answer (a node slower than
# --redis-timeout): *_printed_twice beside *_lost_answers, and
# *_unaccounted_twice, the prints no reported batch covers (goal 0).
#
# Environment: PD_REDIS_URLS (default 3e6), PD_FPR (1e-4), PD_REDIS_PORT
# (21600), PD_REDIS_REPLICAS=1 (a replica per primary, 6 servers),
# PD_REDIS_TIMEOUT (the clients' --redis-timeout, ms), PD_WORKDIR
# (/var/tmp), PD_RB_PIPELINE.
set -euo pipefail
build=$(cd "${1:-build/release}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
PD=$build/pagededup
GEN=$build/bench/bench_urlseen
for b in "$PD" "$GEN"; do
	[ -x "$b" ] || { echo "bench-filter: missing $b (make build MODE=release)" >&2; exit 1; }
done
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
	{ echo "bench-filter: redis-server and redis-benchmark missing (make deps)" >&2; exit 1; }
. "$top/tests/redis_lib.sh"

num() { awk -v x="$1" 'BEGIN { printf "%.0f", x }'; }
fig() { printf '%s: %s %s\n' "$1" "$2" "${3:-}"; }
val() { sed -n "s/^$1: \\([^ ]*\\).*/\\1/p" "$2" | tail -1; }
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }
now() { date +%s.%N; }

N=$(num "${PD_REDIS_URLS:-3e6}")
M=$(num "$(awk -v n="$N" 'BEGIN { m = n / 3; if (m > 1e6) m = 1e6; print m }')")
FPR=${PD_FPR:-1e-4}
P0=${PD_REDIS_PORT:-21600}
work=${PD_WORKDIR:-/var/tmp}
run=$(mktemp -d "$work/pd-bench-redis.XXXXXX")
cleanup() { rd_stop_all; rm -rf "$run"; }
trap cleanup EXIT

ports=($P0 $((P0 + 1)) $((P0 + 2)))
echo "## cluster: 3 primaries on 127.0.0.1:${ports[*]}"
if [ "${PD_REDIS_REPLICAS:-0}" = 1 ]; then
	ports+=($((P0 + 3)) $((P0 + 4)) $((P0 + 5)))
	rd_cluster "$run/cl" "${ports[@]}"
else
	addrs=()
	for p in "${ports[@]}"; do rd_start "$run/cl" "$p" cluster; addrs+=("127.0.0.1:$p"); done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$run/create.log"
	rd_wait_ok "${ports[@]}"
fi
seeds=127.0.0.1:$P0
primaries() { rd_primaries "$P0"; }
memory() { local s=0 p; for p in $(primaries); do s=$((s + $(rd_used_memory "$p"))); done; echo $s; }
# keys_memory NAME: MEMORY USAGE of the filter's keys (its leaves and its
# description), summed over the primaries
keys_memory() {
	local p k s=0
	for p in $(primaries); do
		for k in $(rd_cli "$p" --scan --pattern "$1:*"); do
			s=$((s + $(rd_cli "$p" memory usage "$k" samples 0)))
		done
	done
	echo $s
}
theory() { calc "$1 * log(1 / $FPR) / log(2)^2 / 8"; }

echo "## lists: $N distinct URLs (bench_urlseen gen), $M fresh"
"$GEN" gen "$N" 0 >"$run/list"
"$GEN" gen "$M" 0 "$N" >"$run/fresh"
awk -v d="$run" '{ c = NR % 3; if (c != 0) print > (d "/l0"); if (c != 1) print > (d "/l1"); if (c != 2) print > (d "/l2") }' "$run/list"

# race NAME OPTS...: three clients at once; figures prefixed NAME_
race() {
	local name=$1 i pids=() t0 t1 lines=0
	shift
	local m0
	m0=$(memory)
	# make the filter first (as a crawler fleet's first start would)
	"$PD" urlseen --redis "$seeds" --redis-name "$name" --fpr "$FPR" "$@" </dev/null
	t0=$(now)
	for i in 0 1 2; do
		"$PD" urlseen --redis "$seeds" --redis-name "$name" ${PD_REDIS_TIMEOUT:+--redis-timeout "$PD_REDIS_TIMEOUT"} \
			--stats "$run/l$i" \
			>"$run/$name.out$i" 2>"$run/$name.err$i" &
		pids+=($!)
	done
	for i in 0 1 2; do wait "${pids[$i]}" || { cat "$run/$name.err$i" >&2; return 1; }; done
	t1=$(now)
	for i in 0 1 2; do
		lines=$((lines + $(val urls_read "$run/$name.err$i")))
		fig "${name}_client${i}_urls_per_s" "$(val urls_per_s "$run/$name.err$i")" urls/s
		fig "${name}_client${i}_urls_per_cpu_s" "$(val urls_per_cpu_s "$run/$name.err$i")" urls/s
	done
	fig "${name}_total_urls_per_s" "$(calc "$lines / ($t1 - $t0)")" urls/s
	local printed twice
	printed=$(cat "$run/$name".out? | sort -u | wc -l)
	twice=$(( $(cat "$run/$name".out? | wc -l) - printed ))
	fig "${name}_printed_twice" "$twice" urls
	# printed twice is allowed only for URLs whose answer was lost
	# (counted by each client, e.g. a node too slow for --redis-timeout)
	fig "${name}_lost_answers" "$(cat "$run/$name".err? | sed -n 's/^redis_lost: \([0-9]*\).*/\1/p' | awk '{ s += $1 } END { print s + 0 }')" urls
	# of the URLs printed more than once, the prints beyond the first that
	# no batch reported lost covers (rd_unaccounted): 0, or a fault
	local acc
	acc=$(rd_unaccounted "$run/l0:$run/$name.out0:$run/$name.err0" "$run/l1:$run/$name.out1:$run/$name.err1" \
		"$run/l2:$run/$name.out2:$run/$name.err2")
	fig "${name}_printed_twice_covered" "$(echo "$acc" | awk '{ print $6 }')" urls
	fig "${name}_unaccounted_twice" "${acc##* }" urls
	fig "${name}_lost_inserting" "$((N - printed))" urls
	local km
	km=$(keys_memory "$name")
	fig "${name}_keys_memory" "$km" bytes
	fig "${name}_used_memory_delta" "$(( $(memory) - m0 ))" bytes
	fig "${name}_theory" "$(theory "$N")" bytes
	fig "${name}_memory_vs_theory" "$(calc "$km / $(theory "$N")")" x
	fig "${name}_used_memory_delta_vs_theory" "$(calc "($(memory) - $m0) / $(theory "$N")")" x
	"$PD" urlseen --redis "$seeds" --redis-name "$name" --check --stats "$run/fresh" \
		>/dev/null 2>"$run/$name.fresh"
	fig "${name}_fpr" "$(calc "($M - $(val urls_new "$run/$name.fresh")) / $M")"
	grep -h '^filter_\(k\|leaves0\|splits\)' "$run/$name".err? | sed "s/^/${name}_/" | sort -u
}

echo "## race: three clients, presized (--expected $N)"
race race --expected "$N" >"$run/race.figs"
cat "$run/race.figs"
k=$(sed -n 's/^race_filter_k: \([0-9]*\).*/\1/p' "$run/race.figs" | head -1)
leafbytes=$(sed -n 's/^race_filter_leaves0: [0-9]* leaves of \([0-9]*\) bytes.*/\1/p' "$run/race.figs" | head -1)

echo "## limit: redis-benchmark --cluster -c 3 -P ${PD_RB_PIPELINE:-256}, BITFIELD GET u8 0 + $k x SET u1"
cmd=(BITFIELD "rbench:{tag}:__rand_int__" GET u8 0)
lines=$((leafbytes / 64 - 1))
for i in $(seq 1 "$k"); do
	cmd+=(SET u1 $(( (1 + (i * 7919) % (lines - 1)) * 512 + (i * 131) % 512 )) 1)
done
redis-benchmark -h 127.0.0.1 -p "$P0" --cluster -c 3 -P "${PD_RB_PIPELINE:-256}" -n "$((2 * N))" \
	-r 64 --csv "${cmd[@]}" >"$run/rb.csv" 2>"$run/rb.err" || { cat "$run/rb.err" >&2; exit 1; }
rb=$(grep '^"BITFIELD' "$run/rb.csv" | awk -F'"' '{ print $4 }')
[ -n "$rb" ] || { echo "bench-filter: no figure from redis-benchmark:" >&2; cat "$run/rb.csv" "$run/rb.err" >&2; exit 1; }
fig redis_benchmark_rps "$rb" commands/s
total=$(sed -n 's/^race_total_urls_per_s: \([^ ]*\).*/\1/p' "$run/race.figs")
ratio=$(calc "$total / $rb")
fig race_vs_redis_benchmark "$ratio" x

# fpr_input NAME FILE RATE: the file's URLs in normal form, each once (spellings
# of one URL are one URL: a local urlseen with its own temporary filter
# prints each normal form once, and the lines that are not URLs are
# dropped); insert the odd ones into a filter sized for them (4 first
# leaves, so that they are full, not 64 of the smallest size), probe with
# the even ones
fpr_input() {
	local name=$1 file=$2 rate=$3 n ins probe new
	"$PD" urlseen "$file" 2>/dev/null | sort -u | shuf --random-source=<(yes) >"$run/$name.norm"
	awk 'NR % 2 == 1' "$run/$name.norm" >"$run/$name.ins"
	awk 'NR % 2 == 0' "$run/$name.norm" >"$run/$name.probe"
	ins=$("$PD" urlseen --redis "$seeds" --redis-name "fpr-$name-$rate" --fpr "$rate" --redis-leaves 4 \
		--expected "$(wc -l <"$run/$name.ins")" "$run/$name.ins" | wc -l)
	probe=$(wc -l <"$run/$name.probe")
	new=$("$PD" urlseen --redis "$seeds" --redis-name "fpr-$name-$rate" --check "$run/$name.probe" | sort -u | wc -l)
	fig "fpr_${name}_${rate}_inserted" "$ins" urls
	fig "fpr_${name}_${rate}_probes" "$probe" urls
	fig "fpr_${name}_${rate}_false_positives" "$((probe - new))" urls
	fig "fpr_${name}_${rate}_rate" "$(calc "($probe - $new) / $probe")"
}
echo "## false positives on three inputs"
fig fpr_generated_probes "$M" urls
fig fpr_generated_rate "$(sed -n 's/^race_fpr: //p' "$run/race.figs")"
find /usr -type f 2>/dev/null | sed 's|^|https://files.example.org|' >"$run/paths"
for rate in "$FPR" 1e-3 1e-2; do fpr_input paths "$run/paths" "$rate"; done | tee "$run/fpr.figs"
grep -rhoaE 'https?://[A-Za-z0-9./?=&%_~+:#-]+' /usr/share/doc /usr/share/common-licenses 2>/dev/null |
	sort -u >"$run/docurls"
for rate in "$FPR" 1e-3 1e-2; do fpr_input docs "$run/docurls" "$rate"; done | tee -a "$run/fpr.figs"

echo "## growing: three clients, first sized for $((N / 16))"
race grow --expected "$((N / 16))" | tee "$run/grow.figs"

mem=$(sed -n 's/^race_memory_vs_theory: \([^ ]*\).*/\1/p' "$run/race.figs")
fpr=$(sed -n 's/^race_fpr: \([^ ]*\).*/\1/p' "$run/race.figs")
echo "## summary (redis: $N distinct URLs, 3 clients, 3 primaries, rate $FPR)"
printf '%-40s %-14s %s\n' figure value goal
printf '%-40s %-14s %s\n' "urls/s total, 3 clients" "$total" ">= 200000"
for i in 0 1 2; do
	printf '%-40s %-14s %s\n' "urls/s client $i" "$(sed -n "s/^race_client${i}_urls_per_s: \([^ ]*\).*/\1/p" "$run/race.figs")" ""
done
printf '%-40s %-14s %s\n' "redis-benchmark, same command" "$rb" ""
printf '%-40s %-14s %s\n' "total / redis-benchmark" "$ratio" ">= 0.7"
printf '%-40s %-14s %s\n' "Redis memory / theory (presized)" "$mem" "<= 1.2"
printf '%-40s %-14s %s\n' "Redis memory / theory (grown x16)" "$(sed -n 's/^grow_memory_vs_theory: \([^ ]*\).*/\1/p' "$run/grow.figs")" ""
printf '%-40s %-14s %s\n' "false-positive rate, generated" "$fpr" "<= $FPR"
for name in paths docs; do
	for rate in "$FPR" 1e-3 1e-2; do
		printf '%-40s %-14s %s\n' "false-positive rate, $name ($(val "fpr_${name}_${rate}_probes" "$run/fpr.figs"))" \
			"$(val "fpr_${name}_${rate}_rate" "$run/fpr.figs")" "<= $rate"
	done
done
printf '%-40s %-14s %s\n' "false-positive rate, grown x16" "$(val grow_fpr "$run/grow.figs")" "<= $FPR"
for name in race grow; do
	printf '%-40s %-14s %s\n' "$name: URLs printed by two clients" "$(val "${name}_printed_twice" "$run/$name.figs")" \
		"0 unless answers were lost"
	printf '%-40s %-14s %s\n' "$name: answers lost (timeouts)" "$(val "${name}_lost_answers" "$run/$name.figs")" ""
	printf '%-40s %-14s %s\n' "$name: printed twice, not lost" "$(val "${name}_unaccounted_twice" "$run/$name.figs")" "0"
done
[ "$(val race_unaccounted_twice "$run/race.figs")" = 0 ] && [ "$(val grow_unaccounted_twice "$run/grow.figs")" = 0 ]
