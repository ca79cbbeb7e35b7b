#!/usr/bin/env bash
# What keeping a delta page's shingle set as the difference from its base's
# set (near.h, "sets kept as differences") saves, on any input, beside a
# baseline build in the same run: for each NAME=DIR, the distinct files of
# DIR (PD_SETDIFF_GLOB, default *.html) are a crawl, and recrawl.py makes
# its recrawl (every page again with a date, a counter, an ad block or one
# sentence changed). For each build (BASE, then NEW), a fresh store takes
# the crawl through the mount (cp -r), is unmounted, then takes the
# recrawl the same way. Printed per input and build: `nearfeat`'s bytes
# per page with LMDB's share (bench_tables: the table written alone) after
# the crawl and what the recrawl added per recrawl page, the whole LMDB
# bytes the recrawl added per recrawl page, the pages stored as deltas,
# the rows by stored form, and the delta step's CPU during the recrawl (the
# daemon's line at unmount). Then the user.dedup.near answers of every
# tenth file (sorted paths) of the two stores, each read through its own
# build's mount: identical or not.
#
#   bash tests/bench/bench-setdiff.sh BASE_BUILD NEW_BUILD NAME=DIR...
#
# Environment: PD_WORKDIR (/var/tmp), PD_KEEP=1, PD_SETDIFF_GLOB,
# PD_MOUNT_OPTS. Each mount is taken under flock /tmp/pd-bench.lock
# (PD_BENCH_LOCK: another lock file, for a trial run on a few pages).
# Timing is never asserted; the exit status says whether every run worked
# and the answers were identical.
set -uo pipefail
export LC_ALL=C
top=$(cd "$(dirname "$0")/../.." && pwd)
BASE=$(cd "${1:?usage: bench-setdiff.sh BASE_BUILD NEW_BUILD NAME=DIR...}" && pwd) || exit 2
NEW=$(cd "${2:?usage: bench-setdiff.sh BASE_BUILD NEW_BUILD NAME=DIR...}" && pwd) || exit 2
shift 2
GLOB=${PD_SETDIFF_GLOB:-*.html}
. "$top/tests/bench/bench_lib.sh"
bench_work setdiff
failed=0
copy_in() { # BUILD STORE SRC DEST LOG: mount, cp -r SRC to DEST in it, unmount
	mkdir -p "$WORK/mnt"
	"$1/pagededupfs" "$2" "$WORK/mnt" -f ${PD_MOUNT_OPTS:-} >"$5" 2>&1 &
	DPID=$!
	for _ in $(seq 1 200); do mountpoint -q "$WORK/mnt" && break; sleep 0.05; done
	mountpoint -q "$WORK/mnt" || { echo "bench-setdiff: mount failed" >&2; return 1; }
	cp -r "$3" "$WORK/mnt/$4" || return 1
	fusermount3 -u "$WORK/mnt" || return 1
	wait "$DPID" || return 1
	DPID=""
}
answers() { # BUILD STORE LIST: user.dedup.near of the listed paths, read through BUILD's mount
	mkdir -p "$WORK/mnt"
	"$1/pagededupfs" "$2" "$WORK/mnt" -f ${PD_MOUNT_OPTS:-} >>"$WORK/answers.log" 2>&1 &
	DPID=$!
	for _ in $(seq 1 200); do mountpoint -q "$WORK/mnt" && break; sleep 0.05; done
	mountpoint -q "$WORK/mnt" || { echo "bench-setdiff: mount failed" >&2; return 1; }
	(cd "$WORK/mnt" && while IFS= read -r f; do
		printf '== %s\n' "$f"
		getfattr --absolute-names --only-values -n user.dedup.near "$f" 2>&1
		echo
	done) <"$3"
	fusermount3 -u "$WORK/mnt" || return 1
	wait "$DPID" || return 1
	DPID=""
}
locked() { flock "${PD_BENCH_LOCK:-/tmp/pd-bench.lock}" bash -c "$(declare -f copy_in answers); $(declare -p WORK GLOB); DPID=; $*"; }
nearfeat_bytes() { # STORE: nearfeat's bytes with LMDB's pages (bench_tables)
	"$NEW/bench/bench_tables" "$1/meta" | awk '$1 == "nearfeat" && $2 != "forms:" { print $6 }'
}
lmdb_bytes() { "$NEW/bench/bench_tables" "$1/meta" | awk '/^total:/ { print $4 }'; }
deltas_of() { "$NEW/pagededup" blobs "$1" | awk -F'\t' '$4 ~ /:delta/ { n++ } END { print n + 0 }'; }
for arg in "$@"; do
	name=${arg%%=*} dir=${arg#*=}
	src=$WORK/crawl-$name rec=$WORK/recrawl-$name
	mkdir -p "$src"
	(cd "$dir" && find -L . -type f -name "$GLOB" -print0 | xargs -0 md5sum | sort -u -k1,1 | cut -c35-) >"$WORK/list"
	(cd "$dir" && while IFS= read -r f; do mkdir -p "$src/$(dirname "$f")" && cp "$f" "$src/$f"; done) <"$WORK/list"
	python3 "$top/tests/bench/recrawl.py" recrawl "$src" "$rec" 2 >&2
	n=$(find "$src" -type f | wc -l) nr=$(find "$rec" -type f | wc -l)
	echo "${name}_input: $n distinct files ($(du -sb --apparent-size "$src" | cut -f1) bytes), recrawl $nr files"
	for b in base new; do
		build=$BASE; [ $b = new ] && build=$NEW
		store=$WORK/store-$name-$b
		"$build/pagededup" mkfs "$store" >/dev/null || { failed=1; continue; }
		locked "copy_in '$build' '$store' '$src' c '$WORK/crawl.log'" || { echo "bench-setdiff: $name crawl ($b) failed" >&2; failed=1; continue; }
		f1=$(nearfeat_bytes "$store") l1=$(lmdb_bytes "$store")
		locked "copy_in '$build' '$store' '$rec' r '$WORK/recrawl.log'" || { echo "bench-setdiff: $name recrawl ($b) failed" >&2; failed=1; continue; }
		f2=$(nearfeat_bytes "$store") l2=$(lmdb_bytes "$store")
		echo "${name}_$b: nearfeat $(calc %.1f "$f1 / $n") B/page after the crawl, $(calc %.1f "($f2 - $f1) / $nr") B/page added by the recrawl; LMDB added by the recrawl $(calc %.1f "($l2 - $l1) / $nr") B/page; $(deltas_of "$store") pages stored as deltas"
		"$NEW/bench/bench_tables" "$store/meta" | grep '^nearfeat forms' | sed "s/^/${name}_$b: /"
		grep "delta step CPU" "$WORK/recrawl.log" | tail -1 | sed "s/^/${name}_$b recrawl: /"
		"$build/pagededup" fsck --deep "$store" >"$WORK/fsck.out" 2>&1 && echo "${name}_${b}_fsck_deep: clean" ||
			{ echo "${name}_${b}_fsck_deep: NOT clean"; tail -5 "$WORK/fsck.out"; failed=1; }
	done
	# every tenth file of the two crawls, by sorted path
	( (cd "$src" && find . -type f | sed 's|^\./|c/|'); (cd "$rec" && find . -type f | sed 's|^\./|r/|') ) |
		sort | awk 'NR % 10 == 1' >"$WORK/tenth"
	locked "answers '$BASE' '$WORK/store-$name-base' '$WORK/tenth'" >"$WORK/answers-$name-base" || failed=1
	locked "answers '$NEW' '$WORK/store-$name-new' '$WORK/tenth'" >"$WORK/answers-$name-new" || failed=1
	lines=$(grep -vc '^==' "$WORK/answers-$name-new")
	if cmp -s "$WORK/answers-$name-base" "$WORK/answers-$name-new"; then
		echo "${name}_answers: identical ($(wc -l <"$WORK/tenth") files, $(grep -c $'\t' "$WORK/answers-$name-new") answer lines)"
	else
		echo "${name}_answers: DIFFER ($lines lines); diff head:"
		diff "$WORK/answers-$name-base" "$WORK/answers-$name-new" | head -10
		failed=1
	fi
	[ "${PD_KEEP:-0}" = 1 ] || rm -rf "$WORK/store-$name-base" "$WORK/store-$name-new" "$src" "$rec"
done
[ "$failed" = 0 ] && echo "bench-setdiff: all runs succeeded" || { echo "bench-setdiff: a run failed"; exit 1; }
