#!/usr/bin/env bash
# Fuzz html_extract and the simhash (fuzz_html.c) with libFuzzer.
#
#   tests/fuzz/run.sh [SECONDS [JOBS]]      (default 60 seconds, 1 job)
#
# Builds build/fuzz/fuzz_html with clang (-fsanitize=fuzzer,address,undefined)
# from core/text/html*.c, core/text/charset.c and core/near/simhash.c, then runs it for SECONDS on the
# committed seeds (tests/fuzz/corpus, read only) plus a scratch corpus that
# it grows (build/fuzz/corpus), with the markup dictionary html.dict. Inputs
# are at most 64 KiB (enough to show anything worse than linear time within
# the 5 s per-input timeout). A crash, a sanitizer report, a broken
# invariant, a timeout or a leak stops the run and leaves the input in
# build/fuzz/ (crash-*, timeout-*, leak-*, slow-unit-*); the script then
# exits non-zero. With JOBS > 1, that many fuzzers run in parallel.
#
# To keep what the run found as seeds (the unit test replays every seed):
#   build/fuzz/fuzz_html -merge=1 tests/fuzz/corpus build/fuzz/corpus
# clang comes from `apt-get install -y clang` on Debian.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
jobs=${2:-1}
out=$top/build/fuzz
CC_FUZZ=${CC_FUZZ:-clang}

if ! command -v "$CC_FUZZ" >/dev/null; then
	echo "run.sh: $CC_FUZZ not found; install it with: apt-get install -y clang" >&2
	exit 2
fi
mkdir -p "$out/corpus"
"$CC_FUZZ" -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -fno-omit-frame-pointer -Wall -Wextra -Werror \
	-I"$top/core" "$top/tests/fuzz/fuzz_html.c" "$top/core/text/html.c" "$top/core/text/html_markup.c" "$top/core/text/html_sniff.c" "$top/core/text/charset.c" "$top/core/near/simhash.c" \
	-lxxhash -lm -o "$out/fuzz_html"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
args=(-max_total_time="$secs" -max_len=65536 -len_control=20 -timeout=5 -rss_limit_mb=2048
	-dict="$top/tests/fuzz/html.dict" -artifact_prefix="$out/" -print_final_stats=1)
if [ "$jobs" -gt 1 ]; then
	args+=(-jobs="$jobs" -workers="$jobs")
fi
cd "$out"
echo "fuzzing for ${secs}s with $jobs job(s); seeds: $(ls "$top/tests/fuzz/corpus" | wc -l)"
"$out/fuzz_html" "${args[@]}" "$out/corpus" "$top/tests/fuzz/corpus"
