#!/usr/bin/env bash
# make bench-filter: the URL-seen filter (`pagededup urlseen` on a generated
# crawl list of PD_URLS distinct URLs and as many repeats), then the page
# filter (the growing filter against the fixed one as a store overfills;
# see "page filter" below).
#
#   tests/bench/bench-filter.sh BUILD_DIR
#
# PD_PART=urls, PD_PART=pages or PD_PART=redis runs one part only (default
# all three). The redis part (`urlseen --redis` on a 3-primary Redis
# Cluster, three clients, beside redis-benchmark) is
# tests/bench/bench-filter-redis.sh; its header lists its steps and knobs.
#
# Steps (figures on lines "name: value unit", a table of goals at the end):
#   1. lists (bench_urlseen gen; kept in $PD_WORKDIR/pagededup-urls and reused):
#      LIST, PD_URLS distinct URLs with PD_REPEATS repeats spread among them
#      (a fifth of the repeats spelt differently), and FRESH, PD_FRESH URLs
#      of the same kind that LIST never holds;
#   2. insert: `pagededup urlseen --filter F --fpr PD_FPR --stats LIST`, from a
#      new filter of the default first size (it grows all the way); speed,
#      URLs lost to false positives while inserting, memory against a
#      classic Bloom filter's optimum for the same keys and rate;
#   3. false positives: `urlseen --check` on FRESH: the share printed as seen;
#   4. recheck: `urlseen --check` on LIST: no recorded URL may come back as
#      new (at most those lost to false positives while inserting, which
#      were never recorded), and the speed of tests alone;
#   5. presized: the insert again into a filter made for PD_URLS URLs
#      (--expected), to show what growing costs (PD_PRESIZED=0 skips it);
#   6. stages: where a URL's time goes (bench_urlseen stages, first 1e7 lines).
# Speeds are given per second of CPU time (per core: the goal's unit, and
# steady on a machine that runs other work) and per second of wall time.
#
# Environment:
#   PD_URLS      distinct URLs (default 1e8; 1e6 runs in seconds)
#   PD_REPEATS   repeats (default PD_URLS)
#   PD_FRESH     URLs for the false-positive rate (default PD_URLS/10, at most 1e7)
#   PD_FPR       the rate asked for (default 1e-4)
#   PD_WORKDIR   lists and filter (default /var/tmp); 1e8 URLs take 13 GB of
#                lists and 1.1 GB of filter
#   PD_REBUILD=1 generate the lists again; PD_KEEP=1 keep the filter
#
# Page filter (bench_gfilter, in memory): both filters are sized for
# PD_PAGES_EXPECTED pages (default 2e6) at PD_PAGE_FPR (default 1e-4), then
# take pages until 5x that many are stored (1e7), with PD_PAGE_DELETES
# (default 0.2) of the operations deleting a stored page. At 20 points: the
# rate measured on 1e6 fresh keys, LMDB probes per new page (lookups that
# said "maybe" for a new page), counter bytes per page, lookups/s. Written
# to PD_OUTDIR (default PD_WORKDIR): pagefilter.csv and pagefilter.png
# (gnuplot). Goals: the growing filter's measured rate <= fmax (2x the
# target) at every point, its lookups/s >= 0.8x the fixed filter's, its
# bytes <= 1.3x those of a fixed filter sized for the same pages at the
# rate it has.
set -euo pipefail
build=$(cd "${1:-build/release}" && pwd)
PD=$build/pagededup
GEN=$build/bench/bench_urlseen
for b in "$PD" "$GEN"; do
	[ -x "$b" ] || { echo "bench-filter: missing $b (make build MODE=release)" >&2; exit 1; }
done

num() { awk -v x="$1" 'BEGIN { printf "%.0f", x }'; }
part=${PD_PART:-all}

# The page filter part: bench_gfilter, a CSV and its plot.
pages_part() {
	local gbench=$build/bench/bench_gfilter out=${PD_OUTDIR:-${PD_WORKDIR:-/var/tmp}}
	[ -x "$gbench" ] || { echo "bench-filter: missing $gbench" >&2; return 1; }
	mkdir -p "$out"
	local csv=$out/pagefilter.csv png=$out/pagefilter.png log=$out/pagefilter.log
	local expected=${PD_PAGES_EXPECTED:-2e6} fpr=${PD_PAGE_FPR:-1e-4}
	echo "## page filter: bench_gfilter --expected $expected --fpr $fpr --deletes ${PD_PAGE_DELETES:-0.2} $csv"
	"$gbench" --expected "$expected" --fpr "$fpr" --deletes "${PD_PAGE_DELETES:-0.2}" "$csv" | tee "$log"
	if command -v gnuplot >/dev/null; then
		gnuplot <<-EOF
			set terminal pngcairo size 1100,1100 noenhanced font ",10"
			set output "$png"
			set datafile separator ","
			set key top left
			fixed = "< grep '^fixed,' $csv"
			growing = "< grep '^growing,' $csv"
			set multiplot layout 3,1 title "page filter: fixed (sized for $expected pages) and growing, rate $fpr, ${PD_PAGE_DELETES:-0.2} of operations delete"
			set logscale y
			set format y "%.0e"
			set ylabel "false-positive rate (fresh keys)"
			set xlabel "pages stored"
			plot fixed using 2:3 with linespoints title "fixed, measured", \\
			     growing using 2:3 with linespoints title "growing, measured", \\
			     growing using 2:4 with lines dashtype 2 title "growing, model", \\
			     2*$fpr with lines title "fmax"
			set ylabel "LMDB probes per new page"
			plot fixed using 2:5 with linespoints title "fixed", \\
			     growing using 2:5 with linespoints title "growing"
			unset logscale y
			set format y "%g"
			set ylabel "counter bytes per stored page"
			plot fixed using 2:7 with linespoints title "fixed", \\
			     growing using 2:7 with linespoints title "growing"
			unset multiplot
		EOF
		echo "pagefilter_plot: $png"
	else
		echo "bench-filter: gnuplot missing (tools/install-deps.sh installs gnuplot-nox); no plot" >&2
	fi
	echo "pagefilter_csv: $csv"
	# lookups per CPU second at each point, growing against fixed
	echo "## page filter lookups (per CPU second; goal: growing >= 0.8x fixed at every point)"
	awk -F, '$1 == "fixed" { f[$2] = $10 } $1 == "growing" { g[$2] = $10; o[++n] = $2 }
		END { printf "%-12s %-14s %-14s %s\n", "pages", "growing", "fixed", "ratio"
		      for (i = 1; i <= n; i++) printf "%-12s %-14.4g %-14.4g %.3f\n", o[i], g[o[i]], f[o[i]], g[o[i]] / f[o[i]] }' "$csv"
	grep -q '^goal_fpr_le_fmax: met' "$log"
}
if [ "$part" = pages ]; then
	pages_part
	exit $?
fi
if [ "$part" = redis ]; then
	exec bash "$(dirname "$0")/bench-filter-redis.sh" "$build"
fi
N=$(num "${PD_URLS:-1e8}")
R=$(num "${PD_REPEATS:-$N}")
M=$(num "${PD_FRESH:-$(awk -v n="$N" 'BEGIN { m = n / 10; if (m > 1e7) m = 1e7; if (m < 1e5) m = 1e5; printf "%.0f", m }')}")
FPR=${PD_FPR:-1e-4}
work=${PD_WORKDIR:-/var/tmp}
cache=$work/pagededup-urls
mkdir -p "$cache"
list=$cache/urls-$N-$R.txt
fresh=$cache/fresh-$M-after-$N.txt
run=$(mktemp -d "$work/pd-bench-filter.XXXXXX")
filter=$run/urls.filter
cleanup() { [ "${PD_KEEP:-0}" = 1 ] && echo "# kept $run" || rm -rf "$run"; }
trap cleanup EXIT

now() { date +%s.%N; }
fig() { printf '%s: %s %s\n' "$1" "$2" "${3:-}"; }
# val NAME LOG: the value of "NAME: value unit" in a --stats log
val() { sed -n "s/^$1: \\([^ ]*\\).*/\\1/p" "$2" | tail -1; }
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }

echo "## lists: $N distinct URLs + $R repeats; $M fresh URLs"
need=$(( (N + R + M) * 70 / 1000000 + N * 11 / 1000000 ))
avail=$(df -Pm "$work" | awk 'NR == 2 { print $4 }')
if [ ! -s "$list" ] || [ ! -s "$fresh" ] || [ "${PD_REBUILD:-0}" = 1 ]; then
	[ "$avail" -gt "$need" ] || echo "bench-filter: about $need MB needed in $work, $avail MB free" >&2
	t=$(now)
	"$GEN" gen "$N" "$R" >"$list.tmp" && mv "$list.tmp" "$list"
	"$GEN" gen "$M" 0 "$N" >"$fresh.tmp" && mv "$fresh.tmp" "$fresh"
	fig gen_seconds "$(calc "$(now) - $t")" s
fi
lines=$(( N + R ))
fig list_lines "$lines" lines
fig list_bytes "$(stat -c %s "$list")" bytes
fig list_bytes_per_url "$(calc "$(stat -c %s "$list") / $lines")" bytes

echo "## insert: pagededup urlseen --filter F --fpr $FPR --stats LIST >/dev/null"
"$PD" urlseen --filter "$filter" --fpr "$FPR" --stats "$list" >/dev/null 2>"$run/insert.log"
sed 's/^/insert_/' "$run/insert.log" | grep -v '^insert_pagededup'
new=$(val urls_new "$run/insert.log")
lost=$(( N - new ))
fig insert_fp "$lost" urls
fig insert_fp_rate "$(calc "$lost / $N")"
bits=$(val filter_bits_bytes "$run/insert.log")
theory=$(val filter_theoretical_bytes "$run/insert.log")
rss=$(val peak_rss "$run/insert.log")
fig filter_bits_mib "$(calc "$bits / 1048576")" MiB
fig filter_theoretical_mib "$(calc "$theory / 1048576")" MiB
fig filter_file_mib "$(calc "$(stat -c %s "$filter") / 1048576")" MiB
fig filter_disk_mib "$(calc "$(du -k "$filter" | cut -f1) / 1024")" MiB

echo "## false positives: pagededup urlseen --check --filter F FRESH"
"$PD" urlseen --check --filter "$filter" --stats "$fresh" >/dev/null 2>"$run/fresh.log"
shown=$(val urls_new "$run/fresh.log")
fp=$(( M - shown ))
fig fresh_urls "$M" urls
fig fresh_fp "$fp" urls
fpr=$(calc "$fp / $M")
fig fpr_measured "$fpr"
fig fpr_model "$(val filter_model_fpr "$run/fresh.log")"
fig fpr_target "$FPR"

echo "## recheck: pagededup urlseen --check --filter F LIST"
# --check records nothing: an unseen URL is shown once per batch it is in
"$PD" urlseen --check --filter "$filter" --stats "$list" >"$run/back.txt" 2>"$run/recheck.log"
back=$(sort -u "$run/back.txt" | wc -l)
fig recheck_new "$back" urls
fig check_urls_per_cpu_s "$(val urls_per_cpu_s "$run/recheck.log")" urls/s
fig check_urls_per_s "$(val urls_per_s "$run/recheck.log")" urls/s
status=0
if [ "$back" -gt "$lost" ]; then
	echo "bench-filter: $back URLs shown as new again, but only $lost were lost to false positives: false negatives" >&2
	status=1
fi

if [ "${PD_PRESIZED:-1}" = 1 ]; then
	echo "## presized: pagededup urlseen --filter F2 --fpr $FPR --expected $N --stats LIST >/dev/null"
	"$PD" urlseen --filter "$run/presized.filter" --fpr "$FPR" --expected "$N" --stats "$list" \
		>/dev/null 2>"$run/presized.log"
	fig presized_urls_per_cpu_s "$(val urls_per_cpu_s "$run/presized.log")" urls/s
	fig presized_urls_per_s "$(val urls_per_s "$run/presized.log")" urls/s
	fig presized_filter_bits_vs_theory "$(val filter_bits_vs_theory "$run/presized.log")" x
	fig presized_peak_rss_vs_theory "$(val peak_rss_vs_theory "$run/presized.log")" x
	fig presized_filter_grows "$(val filter_grows "$run/presized.log")"
	rm -f "$run/presized.filter"
fi

echo "## stages: bench_urlseen stages LIST 1e7"
"$GEN" stages "$list" 1e7

rate=$(val urls_per_cpu_s "$run/insert.log")
wall=$(val urls_per_s "$run/insert.log")
bvt=$(val filter_bits_vs_theory "$run/insert.log")
rvt=$(calc "$rss * 1048576 / $theory")
echo "## summary ($N distinct + $R repeats, rate $FPR)"
printf '%-34s %-16s %s\n' figure value goal
printf '%-34s %-16s %s\n' "urls/s per core (insert, CPU)" "$rate" ">= 5000000"
printf '%-34s %-16s %s\n' "urls/s wall (insert)" "$wall" ""
if [ "${PD_PRESIZED:-1}" = 1 ]; then
	printf '%-34s %-16s %s\n' "urls/s per core (presized, CPU)" "$(val urls_per_cpu_s "$run/presized.log")" ""
fi
printf '%-34s %-16s %s\n' "urls/s per core (--check, CPU)" "$(val urls_per_cpu_s "$run/recheck.log")" ""
printf '%-34s %-16s %s\n' "false-positive rate (fresh)" "$fpr" "<= $FPR"
printf '%-34s %-16s %s\n' "lost while inserting" "$(calc "$lost / $N")" "<= $FPR"
printf '%-34s %-16s %s\n' "filter bits / theory" "$bvt" "<= 1.2"
printf '%-34s %-16s %s\n' "peak RSS / theory" "$rvt" "<= 1.2"
printf '%-34s %-16s %s\n' "recorded URLs back as new" "$back" "<= $lost (no false negatives)"
if [ "$part" = all ]; then
	pages_part || status=1
	bash "$(dirname "$0")/bench-filter-redis.sh" "$build" || status=1
fi
exit $status
