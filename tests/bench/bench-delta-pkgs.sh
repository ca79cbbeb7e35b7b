#!/usr/bin/env bash
# Deltas per input of different origin: for each package of the bench
# corpus (python3.11-doc, openjdk-17-doc, rust-doc), the first N pages
# (sorted paths) copied into a fresh store once with -o delta=off and once
# with -o delta=RULE; prints the distinct pages, those stored as deltas,
# the live pack bytes and LMDB's pages (used, free) of each.
#
#   bash tests/bench/bench-delta-pkgs.sh [BUILD_DIR]
#
# Environment: PD_CORPUS (tests/bench/corpus.sh), N (3000), RULE
# (resemblance), PD_WORKDIR (/var/tmp). Sizes only: nothing is timed.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:-build/release}" && pwd) || exit 2
bash "$top/tests/bench/corpus.sh" >/dev/null || { echo "bench-delta-pkgs: no corpus" >&2; exit 2; }
CORPUS=$(cd "${PD_CORPUS:-/var/tmp/pagededup-corpus}" && pwd)/corpus/a
W=$(mktemp -d "${PD_WORKDIR:-/var/tmp}/pd-dpkg.XXXXXX")
trap 'mountpoint -q "$W/m" && fusermount3 -u "$W/m"; rm -rf "$W"' EXIT
mkdir -p "$W/m"
failed=0
for pkg in python3.11-doc openjdk-17-doc rust-doc; do
	mkdir -p "$W/src-$pkg"
	(cd "$CORPUS" && find "$pkg" -type f | sort | head -"${N:-3000}" | tar cf - -T - | tar xf - -C "$W/src-$pkg")
	for rule in off "${RULE:-resemblance}"; do
		s=$W/s-$pkg-$rule
		"$B/pagededup" mkfs "$s" >/dev/null && "$B/pagededupfs" "$s" "$W/m" -o "delta=$rule" || { failed=1; continue; }
		cp -r "$W/src-$pkg" "$W/m/a" || failed=1
		fusermount3 -u "$W/m" || failed=1
		while pgrep -f "pagededupfs $s " >/dev/null; do sleep 0.3; done
		live=$("$B/pagededup" stats --json "$s" | python3 -c 'import json, sys; print(json.load(sys.stdin)["packs"]["live_bytes"])')
		nb=$("$B/pagededup" blobs "$s" | wc -l)
		nd=$("$B/pagededup" blobs "$s" | awk -F'\t' '$4 ~ /:delta/ { n++ } END { print n + 0 }')
		used=$(mdb_stat -e "$s/meta" 2>/dev/null | awk '/Number of pages used/ { print $5 }')
		echo "$pkg [$rule]: $nb distinct pages, $nd stored as deltas, live pack bytes $live, lmdb pages used $used"
	done
done
[ "$failed" = 0 ] || { echo "bench-delta-pkgs: a run failed"; exit 1; }
