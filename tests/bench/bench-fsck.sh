#!/usr/bin/env bash
# fsck's figures: a store of a million pages checked warm, cold and deep.
#   tests/bench/bench-fsck.sh BUILD_DIR
# Environment: PD_FSCK_PAGES (default 1000000), PD_WORKDIR (default /var/tmp;
# the store takes about 2.5 GB there: 500,000 blob files and 500 MB of LMDB).
# The cold figure needs root (it drops the page cache). Goal: a clean check
# of 1,000,000 pages in under 2 minutes on 2 cores.
set -euo pipefail
build=${1:-build/release}
pages=${PD_FSCK_PAGES:-1000000}
work=$(mktemp -d "${PD_WORKDIR:-/var/tmp}/pd-bench-fsck.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "## fsck (bench_fsck: $pages pages of about 200 bytes, every content twice, 1000 directories)"
"$build/bench/bench_fsck" "$work" "$pages" --cold --deep --keep
echo "## the command: pagededup fsck on the same store (progress as plain lines)"
rc=0
"$build/pagededup" fsck "$work/store" || rc=$?
echo "pagededup_fsck_exit: $rc"
[ "$rc" = 0 ]
