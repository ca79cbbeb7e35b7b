#!/usr/bin/env bash
# Load (make stress: the release build): 8 writer processes x 5,000 pages
# (half of them duplicates from a shared pool of contents) alongside cat
# readers, renamers and getfattr queries (user.dedup.refcount, .twins); no
# process may see an error, and at the end every page is exact, every
# refcount and twins list exact, one blob per distinct content, fsck clean.
# Prints the throughput as "name: value unit" lines. The same with
# -o sync_blobs and 8 x 1,000 pages. Knobs: PD_LOAD_WRITERS, PD_LOAD_PAGES,
# PD_LOAD_POOL, PD_LOAD_SYNC_PAGES; the seed: PD_SEED.
PD_CRASH_LIB=1 . "$(dirname "$0")/../fs/t_crash.sh"

case_load() {
	crash_load load "${PD_LOAD_WRITERS:-8}" "${PD_LOAD_PAGES:-5000}" "${PD_LOAD_POOL:-500}"
}
case_load_sync_blobs() {
	crash_load load_sync_blobs "${PD_LOAD_WRITERS:-8}" "${PD_LOAD_SYNC_PAGES:-1000}" "${PD_LOAD_POOL:-500}" sync_blobs
}

PD_CASE_TIMEOUT=${PD_CASE_TIMEOUT:-900}
pd_case load
pd_case load_sync_blobs
crash_metrics
pd_finish
