#!/usr/bin/env bash
# The compactor of packs (core/blob/blob_compact.c) through a real mount:
# pages written, most deleted, the daemon's compactor rewrites the sparse
# pack while readers read every page left; the store's du falls by about
# the dead bytes, the pack count does not grow, every page reads back
# byte-identical, fsck is clean. A SIGKILL of the daemon after each step of
# a compaction (PD_COMPACT_STOP) leaves a store fsck accepts (after the
# commit: the emptied pack as a leftover) and that reads every page. A
# full disk during `pagededup compact`: ENOSPC, nothing lost. A second
# `pagededup compact --all` on an unchanged store leaves the packs as they
# are. A mount at rest encodes its packs again with a window (the idle
# pass), once, and stops when a page is written.
. "$(dirname "$0")/lib.sh"

# write_and_thin LIST [N]: N (default 1,200) pages of 2-12 KB under
# $MNT/site, then all but every fifth deleted; LIST gets {name: md5} of
# those left.
write_and_thin() {
	py "$1" "${2:-1200}" <<'EOF'
import os, sys, json, random
from fsutil import *
M = os.environ["MNT"]
rnd = random.Random(15)
words = ["archive", "crawl", "page", "<p>", "</p>", "news", "2026", "link", "<div>", "weather", "market"]
os.makedirs(M + "/site", exist_ok=True)
left = {}
pages = int(sys.argv[2])
for i in range(pages):
    n = rnd.randrange(300, 1800)
    body = ("<html><body>%d " % i + " ".join(rnd.choice(words) + "%x" % rnd.getrandbits(24)
                                           for _ in range(n)) + "</body></html>\n").encode()
    name = "site/p%04d.html" % i
    write(M + "/" + name, body)
    if i % 5 == 0:
        left[name] = md5(body)
for i in range(pages):
    name = "site/p%04d.html" % i
    if name not in left:
        os.unlink(M + "/" + name)
json.dump(left, open(sys.argv[1], "w"))
EOF
}

# check_pages LIST: every page of LIST reads back byte-identical, and
# site/ holds those pages only.
check_pages() {
	check_all "$1" || return 1
	py "$1" <<'EOF'
import os, sys, json
from fsutil import *
M = os.environ["MNT"]
left = json.load(open(sys.argv[1]))
eq(sorted(os.listdir(M + "/site")), sorted(n.split("/")[1] for n in left), "names left")
EOF
}

packs_du() { du -sk --block-size=1 "$1/packs" | cut -f1; }
packs_n() { find "$1/packs" -name 'pack-*' | wc -l; }
# packs_figures STORE: a line per pack file, in name order: its name, bytes
# allocated, length, its live records' bytes and their number (from
# `pagededup blobs`)
packs_figures() {
	"$PD_BIN" blobs "$1" | python3 -c 'import os, sys
live, recs = {}, {}
for line in sys.stdin:
    pack, _, place = line.split("\t")[3].partition(":")
    live[pack] = live.get(pack, 0) + int(place.split(":")[0].split("+")[1])
    recs[pack] = recs.get(pack, 0) + 1
for name in sorted(os.listdir(sys.argv[1])):
    if name.startswith("pack-"):
        st = os.stat(os.path.join(sys.argv[1], name))
        print(name, st.st_blocks * 512, st.st_size, live.get(name, 0), recs.get(name, 0))' "$1/packs"
}
# packs_table STORE: the same, for a reader (what a failure shows)
packs_table() {
	packs_figures "$1" | awk '{ printf "  %s allocated %d length %d live %d\n", $1, $2, $3, $4 }'
}

case_space_comes_back() {
	# packs of 2 MiB: the pages fill several, and the compaction merges
	# them. 2,000 pages: the deletes' holes are punched once their commit
	# is durable, many commits' neighbours together, so most dead records
	# give their blocks back; what stays (blocks shared with live records)
	# must still be worth a compaction in every pack but the newest.
	# The delta step's window off: the pages share one template, so with
	# it most would become deltas on pages deleted next, kept as bases
	# (blob.h) until their deltas are stored again on their own; the case
	# is about the compactor and records stored whole (test_ndelta has the
	# kept bases). No nursery either: a page deleted while it waits there
	# leaves no dead bytes (its nursery pack goes whole), and the delta
	# step, at a lower priority than the writers (base/thread.h), moves
	# the pages out after the deletes or before them as the machine's load
	# has it; close() writes each page's final record itself
	pd_mount nocompact,pack_mb=2,delta_window=0,nonursery || fail mount
	write_and_thin "$PD_TMP/left" 2000 || exit 1
	pd_umount || fail umount
	local before n_before dead
	before=$(packs_du "$STORE")
	n_before=$(packs_n "$STORE")
	# dead: what the packs hold on disk beyond the live records and the
	# dictionaries (what hole punching did not give back already)
	local dicts
	read -r dead dicts < <("$PD_BIN" stats --json "$STORE" | python3 -c 'import json,sys; p = json.load(sys.stdin)["packs"]
print(p["allocated"] - p["live_bytes"] - p["dictionary_bytes"], p["dictionary_bytes"])')
	note "before: packs $before bytes allocated in $n_before files, $dead allocated beyond the live records"
	packs_table "$STORE"
	[ "$dead" -gt 1000000 ] || fail "only $dead dead bytes after deleting four fifths of the pages"
	# dead bytes that may stay by design: those of the newest pack, which
	# takes the appends after the remount (the compactor's copies too) and
	# is never compacted, and those of a pack the compactor's rule leaves
	# (compact=0.5, compact_min_kb=64 below: live share, dictionaries
	# counted as live, at 0.5 or more, or less than 64 KiB to give back).
	# Which pack holds the dictionaries is not listed, so each pack is
	# judged as if it held all of them. The store's dead bytes ($dead) do
	# not count the dictionaries, the packs' below do: what the packs the
	# rule compacts give back is at least dead - kept.
	local newest newest_dead
	newest=$(find "$STORE/packs" -name 'pack-*' | sort | tail -1)
	newest_dead=$(packs_figures "$STORE" | python3 -c 'import os, sys
newest, dicts = os.path.basename(sys.argv[1]), int(sys.argv[2])
header = 64
kept, movable = 0, 0
for line in sys.stdin:
    name, allocated, length, held, recs = line.split()
    allocated, length, held = int(allocated), int(length), int(held)
    dead = max(0, allocated - held)
    share = (held + dicts) / max(1, length - header)
    if name == newest or share >= 0.5 or dead - dicts - header < 64 * 1024:
        kept += dead
    else:
        movable += int(recs)
print(kept, movable)' "$newest" "$dicts")
	local movable=${newest_dead#* }
	newest_dead=${newest_dead% *}
	[ "$movable" -gt 0 ] || fail "no pack the compactor must compact: the case tests nothing"
	export PD_MOVABLE=$movable
	note "of which in $(basename "$newest") (the pack that will take appends), and in packs the rule may leave (dictionaries $dicts): $newest_dead"
	pd_mount -n -s "$STORE" pack_mb=2,compact_period_ms=1500,compact_min_kb=64 || fail remount
	# readers during the compaction: every page, again and again, its
	# cached pages dropped after each read so that each open reads the store
	py "$PD_TMP/left" <<'EOF' || exit 1
import os, sys, json, time
from fsutil import *
M = os.environ["MNT"]
left = json.load(open(sys.argv[1]))
rounds, t0, last, changed = 0, time.time(), None, time.time()
while True:
    for name, m in left.items():
        fd = os.open(M + "/" + name, os.O_RDONLY)
        try:
            data = b""
            while True:
                b = os.read(fd, 1 << 16)
                if not b:
                    break
                data += b
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        eq(md5(data), m, "content of %s during the compaction (round %d)" % (name, rounds))
    rounds += 1
    c = dstats(M)["compaction"]
    if c != last:
        last, changed = c, time.time()
    # done: packs removed, and ten seconds with nothing new. The stats
    # change only when a pass ends, and a pass that encodes records again
    # (slower under the sanitizers, beside these readers) can outlast two
    # of the compactor's periods: an unmount in the middle of it leaves its
    # copies as dead bytes and most pages unmoved.
    if c["packs_removed"] >= 1 and time.time() - changed > 10:
        break
    check(time.time() - t0 < 120, "the compaction did not settle within 120 s: %r" % c)
print("readers: %d rounds of %d pages during the compaction: %r" % (rounds, len(left), c))
# most records of the packs it may compact moved (those in the pack taking
# appends or in a pack under compact_min_kb stay), none more than a few times
movable = int(os.environ["PD_MOVABLE"])
check(movable // 2 <= c["records_moved"] <= 3 * len(left), "records moved %d, records in packs to compact %d, pages left %d" % (c["records_moved"], movable, len(left)))
EOF
	check_pages "$PD_TMP/left" || exit 1
	pd_umount || fail umount
	local after n_after
	after=$(packs_du "$STORE")
	n_after=$(packs_n "$STORE")
	note "after: packs $after bytes allocated in $n_after files; given back $((before - after)) of $dead dead bytes; $("$PD_BIN" stats --json "$STORE" | python3 -c 'import json,sys; p = json.load(sys.stdin)["packs"]
print("now %d live, %d in dictionaries, %d beyond" % (p["live_bytes"], p["dictionary_bytes"], p["allocated"] - p["live_bytes"] - p["dictionary_bytes"]))')"
	packs_table "$STORE"
	[ "$n_after" -lt "$n_before" ] || fail "pack files: $n_before before, $n_after after"
	# about the dead bytes of the packs it may compact come back (within
	# 5% of them, and a few blocks)
	[ $((before - after)) -ge $(((dead - newest_dead) * 95 / 100 - 16384)) ] ||
		fail "given back $((before - after)) bytes of $dead dead ($newest_dead of them in the pack taking appends, packs the rule may leave and dictionaries)"
	"$PD_BIN" stats "$STORE" | grep '^compaction:' || fail "no compaction line in pagededup stats"
	pd_mount -n -s "$STORE" || fail "mount after the compaction"
	check_pages "$PD_TMP/left" || exit 1
	pd_umount || fail umount
}

# wait_log PATTERN SECONDS [N]: until the daemon's log has N (default 1)
# lines matching PATTERN (grep -E), at most SECONDS.
wait_log() {
	local i
	for i in $(seq 1 $(($2 * 10))); do
		[ "$(grep -cE "$1" "$PDFS_LOG")" -ge "${3:-1}" ] && return 0
		sleep 0.1
	done
	[ "$(grep -cE "$1" "$PDFS_LOG")" -ge "${3:-1}" ]
}

# crash_at STEP: the daemon's compactor stops after STEP; SIGKILL there.
# The pages are written with no nursery, so that each one's record is in
# the main pack at its close: with a nursery, a page deleted before the
# delta step moved it never reaches the main pack, and on a loaded machine
# the thinned pack could stay over half live, which the compactor leaves.
crash_at() {
	local step=$1 rc
	pd_mount nocompact,nonursery || fail mount
	write_and_thin "$PD_TMP/left" || exit 1
	pd_umount || fail umount
	export PD_COMPACT_STOP=$step
	pd_mount -n -s "$STORE" compact_period_ms=200,compact_min_kb=64 || fail remount
	unset PD_COMPACT_STOP
	wait_log "compactor stopped after the step \"$step\"" 60 || { pd_show_log "$PDFS_LOG"; fail "the compactor never reached $step"; }
	kill -KILL "$PDFS_PID"
	fusermount3 -u -z "$MNT" 2>/dev/null
	pd_wait_rc "$PDFS_RC" 20 || fail "the killed daemon's wrapper did not end"
	[ "$(cat "$PDFS_RC")" = 137 ] || fail "daemon exit status $(cat "$PDFS_RC"), expected 137"
	pd_sanitizer_report "$PDFS_LOG" && { pd_show_log "$PDFS_LOG" 80; fail "sanitizer report before the kill"; }
	rc=0
	"$PD_BIN" fsck "$STORE" >"$PD_TMP/fsck.out" 2>&1 || rc=$?
	cat "$PD_TMP/fsck.out"
	case $step in
	committed) [ "$rc" = 3 ] && grep -q "a pack with nothing live in it" "$PD_TMP/fsck.out" ||
			fail "fsck after a kill past the commit: exit $rc, expected 3 (the emptied pack, a leftover)" ;;
	*) [ "$rc" = 0 ] || [ "$rc" = 3 ] || fail "fsck after a kill after $step: exit $rc, expected clean or leftovers" ;;
	esac
	pd_mount -n -s "$STORE" nocompact || fail "mount after the kill"
	check_pages "$PD_TMP/left" || exit 1
	pd_umount || fail "umount (fsck clean) after the kill"
	[ "$step" != committed ] || [ "$(packs_n "$STORE")" = 1 ] || fail "the emptied pack was not removed by the next mount"
}

case_full_disk() {
	local small=$PD_TMP/small
	pd_small_disk "$small" 40m
	"$PD_BIN" mkfs "$small/store" --expected-pages 2000 >/dev/null || fail mkfs
	pd_mount -n -s "$small/store" nocompact || fail mount
	write_and_thin "$PD_TMP/left" || exit 1
	pd_umount || fail umount
	# fill the disk, then leave 64 KiB: less than the live records
	local i=0
	while dd if=/dev/zero of="$small/filler$i" bs=64k count=16 status=none 2>/dev/null; do i=$((i + 1)); done
	rm -f "$small/filler0"
	dd if=/dev/zero of="$small/filler0" bs=64k count=14 status=none 2>/dev/null
	local rc=0
	"$PD_BIN" compact "$small/store" --all >"$PD_TMP/compact.out" 2>&1 || rc=$?
	cat "$PD_TMP/compact.out"
	[ "$rc" = 1 ] || fail "pagededup compact on a full disk: exit $rc, expected 1"
	grep -q "No space left on device" "$PD_TMP/compact.out" || fail "no ENOSPC in the message"
	pd_fsck "$small/store" || fail "fsck after ENOSPC"
	pd_mount -n -s "$small/store" nocompact || fail "mount after ENOSPC"
	check_pages "$PD_TMP/left" || exit 1
	pd_umount || fail umount
	# space again: the compaction goes through
	rm -f "$small"/filler*
	"$PD_BIN" compact "$small/store" --all || fail "pagededup compact with space"
	pd_fsck "$small/store" || fail "fsck after the compaction"
	pd_mount -n -s "$small/store" nocompact || fail "mount after the compaction"
	check_pages "$PD_TMP/left" || exit 1
	pd_umount || fail umount
	umount "$small" || fail "umount tmpfs"
}

# `pagededup compact --all` run again on a store that did not change leaves
# the packs the first run wrote as they are (their headers carry the cold
# mark, pack.h): no pack compacted, no record moved, the same pack files
# with the same bytes. After a page is deleted, the pack that held it is
# written again. With PD_LANDED_BUILD (an earlier build of store format 7)
# the older build reads the marked packs (fsck --deep clean, every page
# read back), and a later run writes again the pack it appended to.
case_all_twice() {
	pd_mount || fail mount
	write_and_thin "$PD_TMP/left" || exit 1
	pd_umount || fail umount
	local out sums
	out=$("$PD_BIN" compact --all "$STORE") || fail "compact --all: $out"
	grep -q "^left as they were: 0 packs" <<<"$out" || fail "the first compact --all left packs as they were: $out"
	sums=$(cd "$STORE/packs" && md5sum pack-* | sort)
	out=$("$PD_BIN" compact --all "$STORE") || fail "compact --all again: $out"
	grep -q "^compacted 0 packs (0 removed): 0 records, 0 bytes moved" <<<"$out" || fail "the second compact --all moved records: $out"
	grep -q "^encoded again at level 19: 0 records" <<<"$out" || fail "the second compact --all encoded records: $out"
	grep -q "^left as they were: [1-9][0-9]* packs\? " <<<"$out" || fail "the second compact --all left no pack as it was: $out"
	[ "$(cd "$STORE/packs" && md5sum pack-* | sort)" = "$sums" ] || fail "the packs changed in the second compact --all"
	"$PD_BIN" fsck --deep "$STORE" >/dev/null || fail "fsck --deep after two compact --all"
	local old=${PD_LANDED_BUILD:-}
	if [ -x "$old/pagededup" ] && "$old/pagededup" --version | grep -q "store format 7)"; then
		"$old/pagededup" fsck --deep "$STORE" >/dev/null || fail "the older build's fsck --deep of packs with the cold mark"
		local PDFS_BIN_SAVED=$PDFS_BIN
		PDFS_BIN=$old/pagededupfs
		pd_mount -n -s "$STORE" || fail "mount with the older build"
		PDFS_BIN=$PDFS_BIN_SAVED
		check_pages "$PD_TMP/left" || fail "pages read by the older build"
		printf 'a page the older build wrote\n' >"$MNT/older.html" || fail "write with the older build"
		pd_umount || fail "unmount of the older build"
		out=$("$PD_BIN" compact --all "$STORE") || fail "compact --all after the older build: $out"
		grep -q "^compacted [1-9]" <<<"$out" || fail "compact --all after the older build's appends compacted nothing: $out"
		note "PD_LANDED_BUILD read the marked packs, and its appends were compacted"
	else
		note "PD_LANDED_BUILD (a build of store format 7) not given: the older build's part not run"
	fi
	pd_mount -n -s "$STORE" || fail remount
	check_pages "$PD_TMP/left" || exit 1
	local gone
	gone=$(python3 -c 'import json,sys; print(sorted(json.load(open(sys.argv[1])))[0])' "$PD_TMP/left")
	rm "$MNT/$gone" || fail "rm $gone"
	pd_umount || fail umount
	out=$("$PD_BIN" compact --all "$STORE") || fail "compact --all after a page went: $out"
	grep -q "^compacted [1-9]" <<<"$out" || fail "compact --all after a page went compacted nothing: $out"
	"$PD_BIN" fsck --deep "$STORE" >/dev/null || fail "fsck --deep after a page went"
}

# The window of compact --all (blob_cold.c): pages of a site that share a
# template with the pages written before them, stored whole (-o
# delta=off: no delta step at close), become deltas on those pages; the
# packs shrink against a pass without a window on a copy of the same store;
# every page reads back through the mount and with tar; fsck --deep is
# clean; the window's bound is a usage error past BLOB_COLD_WINDOW_MAX.
# tar_round_trip LIST DIR: the mount written out with tar and unpacked
# into $PD_TMP/DIR, where every page of LIST (name -> MD5) is the same.
tar_round_trip() {
	tar -C "$MNT" -cf "$PD_TMP/$2.tar" . || fail "tar of the mount"
	mkdir "$PD_TMP/$2" && tar -C "$PD_TMP/$2" -xf "$PD_TMP/$2.tar" || fail "untar"
	py "$1" "$PD_TMP/$2" <<'EOF'
import os, sys, json
from fsutil import *
for name, m in sorted(json.load(open(sys.argv[1])).items()):
    eq(md5(open(sys.argv[2] + "/" + name, "rb").read()), m, "content of " + name + " by tar")
EOF
}

case_window() {
	pd_mount delta=off || fail mount
	py "$PD_TMP/sites" <<'EOF'
import os, sys, json, random
from fsutil import *
M = os.environ["MNT"]
rnd = random.Random(27)
def text(n):
    return " ".join("w%x" % rnd.getrandbits(20) for _ in range(n))
pages = {}
for g in range(10):
    os.makedirs(M + "/site%d" % g)
    template = "<html><head><title>site %d</title></head><body><nav>%s</nav>" % (g, text(700))
    for j in range(5):
        body = (template + "<main>%s</main></body></html>\n" % text(120)).encode()
        name = "site%d/page%d.html" % (g, j)
        write(M + "/" + name, body)
        pages[name] = md5(body)
json.dump(pages, open(sys.argv[1], "w"))
EOF
	[ $? = 0 ] || exit 1
	pd_umount || fail umount
	local out plain windowed made
	out=$("$PD_BIN" compact --all --window 65 "$STORE" 2>&1); [ $? = 2 ] || fail "--window 65 was not a usage error: $out"
	grep -q -- "--window takes a number of pages from 0 to 64" <<<"$out" || fail "the usage error does not say the bound: $out"
	cp -a "$STORE" "$PD_TMP/plain" || fail "copy of the store"
	out=$("$PD_BIN" compact --all --window 0 "$PD_TMP/plain") || fail "compact --all --window 0: $out"
	grep -q "(0 of them whole pages made deltas by a window of 0)" <<<"$out" || fail "a window of 0 made deltas: $out"
	out=$("$PD_BIN" compact --all "$STORE") || fail "compact --all: $out"
	grep -q "of them whole pages made deltas by a window of 8)" <<<"$out" || fail "the default window is not 8: $out"
	made=$(sed -n 's/.*records (\([0-9]*\) of them whole pages made deltas.*/\1/p' <<<"$out")
	[ "${made:-0}" -ge 40 ] || fail "the window made ${made:-0} deltas of the 40 pages that follow a page of their site: $out"
	plain=$("$PD_BIN" stats --json "$PD_TMP/plain" | python3 -c 'import json,sys; print(json.load(sys.stdin)["packs"]["live_bytes"])')
	windowed=$("$PD_BIN" stats --json "$STORE" | python3 -c 'import json,sys; print(json.load(sys.stdin)["packs"]["live_bytes"])')
	note "packs' live bytes: $plain without a window, $windowed with"
	[ $((windowed * 2)) -lt "$plain" ] || fail "the window did not halve the live bytes: $windowed against $plain"
	"$PD_BIN" stats "$STORE" | grep -q "^deltas: *$made pages stored as deltas" || fail "stats does not count the window's deltas"
	"$PD_BIN" fsck --deep "$STORE" >/dev/null || fail "fsck --deep after the window"
	pd_mount -n -s "$STORE" || fail remount
	py "$PD_TMP/sites" <<'EOF' || exit 1
import os, sys, json
from fsutil import *
M = os.environ["MNT"]
for name, m in sorted(json.load(open(sys.argv[1])).items()):
    eq(md5(read(M + "/" + name)), m, "content of " + name)
EOF
	tar_round_trip "$PD_TMP/sites" untar || exit 1
	pd_umount || fail umount
}

# LMDB's file written again at unmount (store_opts.lmdb_rewrite_max,
# -o lmdb_rewrite_mb, default 256, when the mount grew LMDB by an eighth):
# pages under names in no order leave LMDB's leaves partly full. Left as
# it was: by a mount with the rewrite off, by one that only reads, by one
# that writes a page, by one whose bound is under the file. Rewritten by
# the default after a batch of pages: smaller, said in the log, every page
# read back, fsck --deep clean. A copy left by a rewrite killed before its
# rename is removed by the next mount. Before each mount that must grow
# the file by an eighth, `pagededup compact` (no pack has a GiB dead)
# gives LMDB's free pages back: a mount fills the free pages it opens
# with before it grows the file, and how many the last mount left hangs on
# how long the background threads' readers held their snapshots under load.
case_lmdb_rewrite() {
	pd_mount lmdb_rewrite_mb=0 || fail mount
	add_pages "$PD_TMP/pages" 0 || exit 1
	pd_umount || fail umount
	! grep -q "LMDB's file written again" "$PDFS_LOG" || fail "rewritten with lmdb_rewrite_mb=0: $(grep LMDB "$PDFS_LOG")"
	local full size after
	full=$(stat -c %s "$STORE/meta/data.mdb")
	# what a rewrite killed before its rename leaves: gone at the next mount
	head -c 1048576 /dev/zero >"$STORE/meta/data.mdb.compact"
	pd_mount -n -s "$STORE" || fail "mount to read"
	[ ! -e "$STORE/meta/data.mdb.compact" ] || fail "a rewrite's leftover copy kept by the mount"
	check_all "$PD_TMP/pages" || exit 1
	pd_umount || fail "umount after reading"
	pd_mount -n -s "$STORE" || fail "mount to write a page"
	printf 'one page more\n' >"$MNT/site/more.html" || fail "write of one page"
	pd_umount || fail "umount after one page"
	! grep -q "LMDB's file written again" "$PDFS_LOG" || fail "a mount that wrote one page rewrote LMDB's file"
	"$PD_BIN" compact --min-dead 1G "$STORE" >/dev/null || fail "compact before the mount under the bound"
	pd_mount -n -s "$STORE" lmdb_rewrite_mb=1 || fail "mount with a bound under the file"
	add_pages "$PD_TMP/pages" 1 || exit 1
	pd_umount || fail "umount under the bound"
	! grep -q "LMDB's file written again" "$PDFS_LOG" || fail "a file of $full bytes rewritten under a bound of 1 MiB"
	grep -q "LMDB's file left as it was at the close: [0-9]* bytes in use, over lmdb_rewrite_mb" "$PDFS_LOG" ||
		fail "the bound not said: $(grep -i lmdb "$PDFS_LOG")"
	"$PD_BIN" compact --min-dead 1G "$STORE" >/dev/null || fail "compact before the mount with the default bound"
	pd_mount -n -s "$STORE" || fail "mount with the default bound"
	add_pages "$PD_TMP/pages" 2 || exit 1
	# rows written and removed again: pages free in the file however the
	# commits were grouped (a loaded machine groups more writes a commit,
	# and copies fewer pages, so the slack of the writes alone varies)
	PD_PAGES_ROOT=scratch add_pages "$PD_TMP/scratch" 3 || exit 1
	rm -r "$MNT/scratch" || fail "rm -r of the pages written to be removed"
	pd_umount || fail "umount with the default bound"
	grep -q "LMDB's file written again at the close: [0-9]* -> [0-9]* bytes" "$PDFS_LOG" ||
		fail "no rewrite said at the default bound: $(grep -i lmdb "$PDFS_LOG")"
	full=$(sed -n "s/.*LMDB's file written again at the close: \([0-9]*\) -> \([0-9]*\) bytes.*/\1/p" "$PDFS_LOG")
	after=$(stat -c %b "$STORE/meta/data.mdb")
	after=$((after * 512))
	[ "$after" -lt $((full * 9 / 10)) ] || fail "LMDB's file $full -> $after bytes allocated: not a tenth smaller"
	[ ! -e "$STORE/meta/data.mdb.compact" ] || fail "the rewrite's copy left behind"
	"$PD_BIN" fsck --deep "$STORE" >/dev/null || fail "fsck --deep after the rewrite"
	pd_mount -n -s "$STORE" || fail "mount after the rewrite"
	check_all "$PD_TMP/pages" || exit 1
	[ "$(cat "$MNT/site/more.html")" = "one page more" ] || fail "the one page after the rewrite"
	pd_umount || fail "umount after the rewrite"
	note "LMDB's file: $full -> $after bytes allocated at the default bound"
}

# write_sites LIST [PREFIX [N]]: 48 sites of N pages (default 25) that
# share their site's template (17 KB of markup and words), under
# $MNT/PREFIXNN/ (default site), written as a crawl of many hosts writes
# them: a page of each site in turn; LIST gets {name: md5} (added to).
write_sites() {
	py "$1" "${2:-site}" "${3:-25}" <<'EOF'
import os, sys, json, random
from fsutil import *
M = os.environ["MNT"]
P = sys.argv[2]
rnd = random.Random(P)
def text(n):
    return " ".join("w%x" % rnd.getrandbits(20) for _ in range(n))
pages = json.load(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else {}
templates = []
for g in range(48):
    os.makedirs(M + "/%s%02d" % (P, g))
    templates.append("<html><head><title>site %d</title></head><body><nav>%s</nav>" % (g, text(2400)))
for j in range(int(sys.argv[3])):
    for g in range(48):
        body = (templates[g] + "<main>%s</main></body></html>\n" % text(120)).encode()
        name = "%s%02d/page%02d.html" % (P, g, j)
        write(M + "/" + name, body)
        pages[name] = md5(body)
json.dump(pages, open(sys.argv[1], "w"))
EOF
}

# The idle pass (blob.h): a mount whose store rests encodes its packs
# again, colder, with a window, as `pagededup compact --all` does. Pages
# written without deltas (delta=off, no window on the write path), of 48
# sites sharing their templates, the sites in turn: after a second at
# rest the log says the pass ran, most pages became deltas on their
# site's pages (the window takes them in path order: in the order written
# it holds only other sites' pages), the packs' bytes fell by half;
# another rest does nothing again; one page more (far under
# BLOB_IDLE_MIN_BYTES) makes no pass and no pack beyond its own; a second
# batch of sites makes a second pass, which takes the first's small pack
# again with them (a slow crawl's rests leave one small pack); every page
# reads back through a fresh mount and with tar; fsck --deep is clean.
case_idle_pass() {
	pd_mount delta=off,delta_window=0,idle_compact=1,compact_period_ms=200 || fail mount
	write_sites "$PD_TMP/idle_sites" || exit 1
	local re="idle pass: ([0-9]+) packs? encoded again at level 9, [0-9]+ records \(([0-9]+) whole pages made deltas by a window of 8\), [0-9]+ bytes smaller; packs ([0-9]+) -> ([0-9]+) bytes allocated"
	wait_log "$re" 180 || { pd_show_log "$PDFS_LOG"; fail "no idle pass in 180 s"; }
	local line made before after npacks
	line=$(grep -E "$re" "$PDFS_LOG")
	note "$line"
	made=$(sed -E "s/.*$re.*/\2/" <<<"$line")
	before=$(sed -E "s/.*$re.*/\3/" <<<"$line")
	after=$(sed -E "s/.*$re.*/\4/" <<<"$line")
	[ "$made" -ge 900 ] || fail "the idle pass made $made of the 1,152 pages that follow a page of their site deltas"
	[ $((after * 2)) -lt "$before" ] || fail "the idle pass did not halve the packs: $before -> $after bytes"
	npacks=$(packs_n "$STORE")
	sleep 3
	[ "$(grep -c "idle pass" "$PDFS_LOG")" = 1 ] || fail "a second idle pass on a store at rest: $(grep "idle pass" "$PDFS_LOG")"
	printf '<html>one page more</html>\n' >"$MNT/more.html" || fail "write of one page"
	sleep 4
	[ "$(grep -c "idle pass" "$PDFS_LOG")" = 1 ] || fail "an idle pass for one page: $(grep "idle pass" "$PDFS_LOG")"
	[ "$(packs_n "$STORE")" -le $((npacks + 2)) ] || fail "one page took $(packs_n "$STORE") - $npacks pack files"
	write_sites "$PD_TMP/idle_sites" more 4 || exit 1
	wait_log "$re" 180 2 ||
		{ pd_show_log "$PDFS_LOG"; fail "no second idle pass in 180 s"; }
	line=$(grep -E "$re" "$PDFS_LOG" | tail -1)
	note "$line"
	[ "$(sed -E "s/.*$re.*/\1/" <<<"$line")" -ge 2 ] || fail "the second pass did not take the first one's pack again"
	[ "$(packs_n "$STORE")" -le $((npacks + 1)) ] || fail "two rests left $(packs_n "$STORE") pack files, one left $npacks"
	pd_umount || fail umount
	"$PD_BIN" fsck --deep "$STORE" >/dev/null || fail "fsck --deep after the idle pass"
	pd_mount -n -s "$STORE" idle_compact=0 || fail remount
	check_all "$PD_TMP/idle_sites" || exit 1
	[ "$(cat "$MNT/more.html")" = "<html>one page more</html>" ] || fail "the page written after the pass"
	tar_round_trip "$PD_TMP/idle_sites" idle_untar || exit 1
	pd_umount || fail umount
}

# An idle pass stops when a page is written: held after its first batch's
# copies (PD_COMPACT_STOP=copied) until a write comes, it says it stopped;
# the page written and every other reads back. The next rest's pass, held
# there too, stops for the unmount. fsck --deep is clean.
case_idle_pass_stops() {
	pd_mount delta=off,delta_window=0,idle_compact=0 || fail mount
	write_sites "$PD_TMP/sites_stop" site 4 || exit 1
	pd_umount || fail umount
	export PD_COMPACT_STOP=copied
	pd_mount -n -s "$STORE" idle_compact=1,compact_period_ms=200 || fail remount
	unset PD_COMPACT_STOP
	wait_log 'compactor stopped after the step "copied"' 120 || { pd_show_log "$PDFS_LOG"; fail "the idle pass never copied"; }
	printf '<html>written during the pass</html>\n' >"$MNT/during.html" || fail "write during the pass"
	wait_log "idle pass stopped, pages written" 60 || { pd_show_log "$PDFS_LOG"; fail "the idle pass did not stop for the write"; }
	check_all "$PD_TMP/sites_stop" || exit 1
	[ "$(cat "$MNT/during.html")" = "<html>written during the pass</html>" ] || fail "the page written during the pass"
	wait_log 'compactor stopped after the step "copied"' 120 2 || { pd_show_log "$PDFS_LOG"; fail "no second idle pass"; }
	pd_umount || fail umount
	"$PD_BIN" fsck --deep "$STORE" >/dev/null || fail "fsck --deep after the stopped pass"
}

# add_pages LIST BATCH: 1,500 pages under random names in 40 directories
# of site/ (of $PD_PAGES_ROOT when set; seeded by BATCH), their MD5s added
# to LIST (name -> MD5).
add_pages() {
	py "$1" "$2" <<'EOF'
import os, sys, json, random
from fsutil import *
M = os.environ["MNT"]
rnd = random.Random(31 + int(sys.argv[2]))
words = ["archive", "crawl", "page", "<p>", "news", "link", "<div>", "weather", "market", "2026"]
pages = json.load(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else {}
for i in range(1500):
    d = "%s/d%02d" % (os.environ.get("PD_PAGES_ROOT", "site"), i % 40)
    os.makedirs(M + "/" + d, exist_ok=True)
    name = "%s/%08x.html" % (d, rnd.getrandbits(32))
    body = ("<html><body>%s %d " % (sys.argv[2], i) + " ".join(rnd.choice(words) + "%x" % rnd.getrandbits(20)
                                                          for _ in range(rnd.randrange(40, 400))) + "</body></html>\n").encode()
    write(M + "/" + name, body)
    pages[name] = md5(body)
json.dump(pages, open(sys.argv[1], "w"))
EOF
}

# check_all LIST: every page of LIST (name -> MD5) reads back the same.
check_all() {
	py "$1" <<'EOF'
import os, sys, json
from fsutil import *
M = os.environ["MNT"]
for name, m in sorted(json.load(open(sys.argv[1])).items()):
    eq(md5(read(M + "/" + name)), m, "content of " + name)
EOF
}

pd_case space_comes_back
pd_case crash_after_copies crash_at copied
pd_case crash_after_commit crash_at committed
pd_case crash_after_removal crash_at removed
pd_case full_disk
pd_case all_twice
pd_case window
pd_case lmdb_rewrite
pd_case idle_pass
pd_case idle_pass_stops
pd_finish
