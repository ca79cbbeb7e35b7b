#!/usr/bin/env bash
# The measurement that chose the simhash features (simhash.h): bench_near
# built once per candidate feature set (the constants of core/near/simhash.c,
# given with -D), each run on the same labelled set and openjdk pages.
#
#   tests/bench/bench-near-features.sh BUILD_DIR [NAME ...]
#
# For each candidate, one line per K of 3..6 at the sketch's threshold
# (MINHASH_NEAR_RESEMBLANCE): labelled precision and recall, openjdk
# precision with the sketch, and the openjdk pairs the index answers before
# the sketch, and over the corpus pages the candidates and index rows a
# query at the default K meets (the cost side). The full
# output of each run is left in BUILD_DIR/bench/near-features-NAME.txt
# (grid_* lines: every K and threshold). About 1.5 minutes a candidate.
set -euo pipefail
build=$(cd "${1:-build/release}" && pwd)
shift || true
top=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${PD_CORPUS:-/var/tmp/pagededup-corpus}
PD_CORPUS=$CACHE bash "$top/tests/bench/corpus.sh" >/dev/null

# name: words (SH_MIN_SHINGLE..SH_SHINGLE) and CJK n-grams (SH_CJK_MIN_GRAM..SH_CJK_GRAM)
declare -A flags=(
	[w3-c2]="-DSH_SHINGLE=3 -DSH_MIN_SHINGLE=3 -DSH_CJK_GRAM=2"
	[w3-c1]="-DSH_SHINGLE=3 -DSH_MIN_SHINGLE=3 -DSH_CJK_GRAM=1"
	[w2-c1]="-DSH_SHINGLE=2 -DSH_MIN_SHINGLE=2 -DSH_CJK_GRAM=1"
	[w2-c2]="-DSH_SHINGLE=2 -DSH_MIN_SHINGLE=2 -DSH_CJK_GRAM=2"
	[w1-c1]="-DSH_SHINGLE=1 -DSH_MIN_SHINGLE=1 -DSH_CJK_GRAM=1"
	[w12-c1]="-DSH_SHINGLE=2 -DSH_MIN_SHINGLE=1 -DSH_CJK_GRAM=1"
	[w123-c1]="-DSH_SHINGLE=3 -DSH_MIN_SHINGLE=1 -DSH_CJK_GRAM=1"
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(w3-c2 w3-c1 w2-c2 w2-c1 w1-c1 w12-c1 w123-c1)
mkdir -p "$build/bench"
for name in "${names[@]}"; do
	[ -n "${flags[$name]+x}" ] || { echo "bench-near-features: unknown candidate $name" >&2; exit 2; }
	bin=$build/bench/bench_near-$name
	# shellcheck disable=SC2086
	${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -I"$top/core" ${flags[$name]} "$top/core/text/html.c" \
		"$top/core/text/html_markup.c" "$top/core/text/html_sniff.c" "$top/core/text/charset.c" \
		"$top/core/near/simhash.c" "$top/core/near/minhash.c" "$top/tests/bench/bench_near.c" -o "$bin" -lxxhash -lm
	out=$build/bench/near-features-$name.txt
	"$bin" --corpus "$CACHE/corpus/a" --speed-mb 0 >"$out"
	t=$(sed -n 's/^sketch: .*threshold \([0-9.]*\)$/\1/p' "$out")
	for k in 3 4 5 6; do
		g=$(grep "^grid_k${k}_t${t}:" "$out")
		j=$(grep "^jdk_simhash_k${k}_precision:" "$out" | sed 's/.*(answered \([0-9]*\),.*/\1/')
		echo "features_${name}_k$k: ${g#*: }; openjdk pairs within K before the sketch $j"
	done
	echo "features_${name}_cost: $(grep '^index_k[0-9]*_neighbours_per_page:' "$out"); $(grep '^index_k[0-9]*_rows_per_query:' "$out")"
done
