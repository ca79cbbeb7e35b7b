#!/usr/bin/env bash
# What a store takes on disk against a plain copy, as `pagededup stats`
# reports it: each input directory is copied (cp -a) into a fresh mount,
# unmounted, and its figures printed beside `du` of the input (a plain
# copy on the same filesystem as the store).
#
#   tests/bench/bench-diskuse.sh BUILD_DIR DIR...
#
# One line per input: files, logical bytes, unique bytes, the store on disk
# by part (pages: packs and format 1 blob files; LMDB and the filter), du
# of the plain copy, and the store's size as a share of it. PD_COMPACT=1
# adds a line for the same store after `pagededup compact` (its packs'
# dead records and LMDB's free pages given back).
set -eu
build=$(cd "${1:?usage: bench-diskuse.sh BUILD_DIR DIR...}" && pwd)
shift
work=$(mktemp -d "${PD_WORKDIR:-/var/tmp}/pd-bench-disk.XXXXXX")
trap 'mountpoint -q "$work/mnt" && fusermount3 -u "$work/mnt"; sleep 1; rm -rf "$work"' EXIT
printf '%-40s %8s %12s %12s %12s %12s %12s %12s %7s\n' input files logical unique "store:pages" lmdb+filter \
	store plain_copy store/plain
for src in "$@"; do
	rm -rf "$work/store" "$work/copy"; mkdir -p "$work/mnt"
	"$build/pagededup" mkfs "$work/store" >/dev/null
	"$build/pagededupfs" "$work/store" "$work/mnt"
	cp -a "$src/." "$work/mnt/"
	fusermount3 -u "$work/mnt"
	cp -a "$src/." "$work/copy/" 2>/dev/null || { mkdir -p "$work/copy"; cp -a "$src/." "$work/copy/"; }
	plain=$(du -s --block-size=1 "$work/copy" | cut -f1)
	row() { # LABEL
	"$build/pagededup" stats --json "$work/store" | python3 -c '
import json, sys
s = json.load(sys.stdin); d = s["disk"]; plain = int(sys.argv[2])
print("%-40s %8d %12d %12d %12d %12d %12d %12d %6.1f%%" % (sys.argv[1][-40:], s["pages"], s["logical_bytes"],
      s["stored_bytes"], d.get("packs", 0) + d["blobs"], d["lmdb"] + d["filter"], d["total"], plain, 100.0 * d["total"] / plain))
' "$1" "$plain"
	}
	row "$src"
	if [ "${PD_COMPACT:-0}" = 1 ]; then
		"$build/pagededup" compact "$work/store" >/dev/null
		row "(compacted) $src"
	fi
	rm -rf "$work/copy"
done
