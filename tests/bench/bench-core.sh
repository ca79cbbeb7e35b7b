#!/usr/bin/env bash
# make bench-core: the filter's and the store engine's figures.
#   tests/bench/bench-core.sh BUILD_DIR
set -euo pipefail
build=${1:-build/release}
work=$(mktemp -d /var/tmp/pd-bench-core.XXXXXX)
mkdir -p "$work/a" "$work/b" "$work/c"
trap 'rm -rf "$work"' EXIT
echo "## filter (bench_cbf)"
"$build/bench/bench_cbf"
echo "## store engine (bench_core: 30 KB pages, half duplicates, 2 threads)"
"$build/bench/bench_core" "$work/a" "${PD_BENCH_PAGES:-100000}" "${PD_BENCH_THREADS:-2}"
echo "## probes of new pages follow the filter's rate (a filter built for 1e-2)"
"$build/bench/bench_core" "$work/b" 40000 2 0.01
echo "## seals while the filter grows (sized for 2% of the distinct pages: it grows 25-fold)"
"$build/bench/bench_core" "$work/c" "${PD_BENCH_PAGES:-100000}" "${PD_BENCH_THREADS:-2}" 1e-4 \
	"$(( ${PD_BENCH_PAGES:-100000} / 100 ))"
