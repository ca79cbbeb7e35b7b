#!/usr/bin/env bash
# Packs: page bytes as records in a few large files. A damaged stretch of a
# pack takes several pages at once: exactly those read EIO (logged with
# their path and blob), fsck names them, and writing the same bytes again
# heals them. A store made by format 1 (a file per blob) opens, and
# `pagededup fsck --repair` moves its files into packs. A store made
# without the nursery (PD_LANDED_BUILD, a build before it, or -o nonursery)
# opens with it: new pages go through the nursery and leave it, the
# nursery pack goes, and fsck finds the store clean (a build of format 3
# refuses it now: t_operate landed_store_rows). A store of pack version 1
# (PD_LANDED_BUILD) reads, and compaction gives its records layout 2.
# A read-only close costs no FLUSH round trip.
. "$(dirname "$0")/lib.sh"

case_damaged_region_heals() {
	pd_mount || fail mount
	py "$PD_TMP/pages" <<'EOF' || exit 1
import os, sys, random, json
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
rnd = random.Random(7)
words = ["page", "archive", "crawl", "<p>", "</p>", "news", "weather", "2026", "link", "<div>"]
pages = {}
for i in range(24):
    body = ("<html><body>%d " % i + " ".join(rnd.choice(words) + str(rnd.randrange(1000))
                                           for _ in range(800)) + "</body></html>\n").encode()
    write("%s/p%02d.html" % (M, i), body)
    pages["p%02d.html" % i] = md5(body)
wait_blobs(S, 24, "24 distinct pages")
json.dump(pages, open(sys.argv[1], "w"))
EOF
	pd_umount || fail umount
	# damage one stretch of the pack covering records 9 to 12 (in the order
	# they were appended)
	py "$PD_TMP/pages" "$PD_TMP/hit" <<'EOF' || exit 1
import os, sys, json
from fsutil import *
S = os.environ["STORE"]
pages = json.load(open(sys.argv[1]))
by_md5 = {m: n for n, m in pages.items()}
rows = sorted(stored(S), key=lambda r: int(r[3].split(":")[1].split("+")[0]))
eq(len(rows), 24, "stored blobs")
places = [blob_place(S, r[0]) for r in rows]
check(len({p[0] for p in places}) == 1, "the pages are not in one pack: %r" % places)
first, last = places[9], places[12]
start = first[1] + first[2] // 2
end = last[1] + last[2] // 2
with open(first[0], "r+b") as f:
    f.seek(start)
    f.write(b"\x00" * (end - start))
hit = sorted(by_md5[r[0]] for r in rows[9:13])
json.dump(hit, open(sys.argv[2], "w"))
print("damaged %d bytes: %s" % (end - start, " ".join(hit)))
EOF
	pd_mount -n -s "$STORE" || fail remount
	py "$PD_TMP/pages" "$PD_TMP/hit" <<'EOF' || exit 1
import os, sys, json, errno
from fsutil import *
M = os.environ["MNT"]
pages, hit = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for name, m in sorted(pages.items()):
    try:
        got = read(M + "/" + name)
        err = None
    except OSError as e:
        got, err = None, e.errno
    if name in hit:
        eq(errno.errorcode.get(err), "EIO", "%s, in the damaged stretch" % name)
    else:
        eq(err, None, "%s, outside the damaged stretch" % name)
        eq(md5(got), m, "content of %s" % name)
EOF
	# every EIO is in the log with its path and blob
	local n
	for n in $(python3 -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))))' "$PD_TMP/hit"); do
		local m
		m=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$PD_TMP/pages" "$n")
		grep -q "/$n (inode [0-9]*): blob $m cannot be read intact" "$PDFS_LOG" ||
			fail "no log line for the EIO of /$n (blob $m)"
	done
	pd_umount --no-fsck || fail umount
	# fsck --deep (which decodes every record) names exactly the damaged ones
	local out rc=0
	out=$("$PD_BIN" fsck --deep "$STORE" 2>/dev/null) || rc=$?
	[ "$rc" = 2 ] || fail "fsck of a store with a damaged pack exited $rc"
	py "$PD_TMP/pages" "$PD_TMP/hit" "$out" <<'EOF' || exit 1
import sys, json, re
from fsutil import *
pages, hit = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
named = set(re.findall(r"^blob ([0-9a-f]{32}): .*lost", sys.argv[3], re.M))
eq(sorted(named), sorted(pages[n] for n in hit), "blobs fsck names as damaged")
EOF
	# the same bytes written again heal the pages (they were deduplicated
	# against the bad records before)
	pd_mount -n -s "$STORE" || fail remount
	py "$PD_TMP/pages" "$PD_TMP/hit" <<'EOF' || exit 1
import os, sys, json, random
from fsutil import *
M = os.environ["MNT"]
pages, hit = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
# regenerate the bytes as the first script made them
rnd = random.Random(7)
words = ["page", "archive", "crawl", "<p>", "</p>", "news", "weather", "2026", "link", "<div>"]
bodies = {}
for i in range(24):
    body = ("<html><body>%d " % i + " ".join(rnd.choice(words) + str(rnd.randrange(1000))
                                           for _ in range(800)) + "</body></html>\n").encode()
    bodies["p%02d.html" % i] = body
for name in hit:
    write(M + "/refetch-" + name, bodies[name])
for name in hit:
    eq(read(M + "/refetch-" + name), bodies[name], "the refetched copy of " + name)
    eq(read(M + "/" + name), bodies[name], name + " healed by the refetch")
EOF
	pd_umount || fail "umount (fsck must be clean after the heal)"
}

# A store made by the format 1 code (a file per blob under objects/): it
# opens, reads, takes new pages (in packs), and fsck --repair moves the
# files into packs, losing nothing. The store is made by the landed
# version when PD_FORMAT1_BIN names its daemon (tests/fs/README.md), else
# by this daemon with -o blob_files (format 1's layout).
case_format1_converted() {
	local s=$PD_TMP/f1.store opts=""
	if [ -n "${PD_FORMAT1_BIN:-}" ]; then
		note "format 1 store made by $PD_FORMAT1_BIN"
		mkdir -p "$s"
		local PDFS_BIN_SAVED=$PDFS_BIN
		PDFS_BIN=$PD_FORMAT1_BIN
		pd_mount -n -s "$s" || fail "mount with the format 1 daemon"
		PDFS_BIN=$PDFS_BIN_SAVED
	else
		pd_mount -s "$s" blob_files || fail "mount with blob_files"
	fi
	py "$PD_TMP/f1.json" <<'EOF' || exit 1
import os, sys, json, random
from fsutil import *
M = os.environ["MNT"]
pages = {}
os.mkdir(M + "/site")
for i in range(40):  # 30 distinct pages, 10 of them twice
    rnd = random.Random(i % 30)
    body = ("<html>%d %s</html>" % (i % 30, "x" * rnd.randrange(100, 30000))).encode()
    write("%s/site/%d.html" % (M, i), body)
    pages["site/%d.html" % i] = md5(body)
json.dump(pages, open(sys.argv[1], "w"))
EOF
	pd_umount --no-fsck || fail "unmount of the format 1 store"
	local files
	files=$(find "$s/objects" -type f | wc -l)
	[ "$files" = 30 ] || fail "format 1 store has $files blob files, expected 30"
	# this version opens it and reads every page
	pd_mount -n -s "$s" || fail "mount of the format 1 store"
	py "$PD_TMP/f1.json" <<'EOF' || exit 1
import os, sys, json
from fsutil import *
M = os.environ["MNT"]
for name, m in json.load(open(sys.argv[1])).items():
    eq(md5(read(M + "/" + name)), m, "content of " + name)
write(M + "/site/new.html", b"<html>a new page, into a pack</html>")
EOF
	pd_umount --no-fsck || fail umount
	"$PD_BIN" fsck --repair "$STORE" >"$PD_TMP/repair.out" 2>&1
	cat "$PD_TMP/repair.out"
	grep -q "moved into packs" "$PD_TMP/repair.out" || fail "fsck --repair did not convert the blob files"
	files=$(find "$s/objects" -type f 2>/dev/null | wc -l)
	[ "$files" = 0 ] || fail "$files blob files left after the conversion"
	pd_fsck "$s" || fail "fsck after the conversion"
	pd_mount -n -s "$s" || fail "mount after the conversion"
	py "$PD_TMP/f1.json" <<'EOF' || exit 1
import os, sys, json
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
for name, m in json.load(open(sys.argv[1])).items():
    eq(md5(read(M + "/" + name)), m, "content of %s after the conversion" % name)
eq(read(M + "/site/new.html"), b"<html>a new page, into a pack</html>", "the page written before the conversion")
rows = stored(S)
eq(len(rows), 31, "stored blobs")
for r in rows:
    check(r[3].startswith("pack-"), "blob %s not in a pack: %s" % (r[0], r[3]))
EOF
	pd_umount || fail umount
}

case_nursery_on_older_store() {
	local s=$PD_TMP/older.store old=${PD_LANDED_BUILD:-}
	if [ -x "$old/pagededupfs" ]; then
		note "store made by $old"
		mkdir -p "$s" && "$old/pagededup" mkfs "$s" >/dev/null || fail "mkfs of the older build"
		local PDFS_BIN_SAVED=$PDFS_BIN
		PDFS_BIN=$old/pagededupfs
		pd_mount -n -s "$s" || fail "mount with the older build"
		PDFS_BIN=$PDFS_BIN_SAVED
	else
		pd_mount -s "$s" nonursery || fail "mount with nonursery"
	fi
	py "$PD_TMP/older.json" <<'EOF' || exit 1
import os, sys, json, random
from fsutil import *
M = os.environ["MNT"]
pages = {}
for i in range(30):
    rnd = random.Random(i)
    body = ("<html><body>%d %s</body></html>" % (i, " ".join("w%d" % rnd.randrange(5000) for _ in range(2000)))).encode()
    write("%s/old%d.html" % (M, i), body)
    pages["old%d.html" % i] = md5(body)
json.dump(pages, open(sys.argv[1], "w"))
EOF
	pd_umount || fail "unmount of the older store"
	"$PD_BIN" stats "$s" | grep -q "of which nursery" && fail "a nursery before this build"
	pd_mount -n -s "$s" || fail "mount of the older store"
	py "$PD_TMP/older.json" <<'EOF' || exit 1
import os, sys, json, random, time, subprocess
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
pages = json.load(open(sys.argv[1]))
for i in range(30):
    rnd = random.Random(100 + i)
    body = ("<html><body>new %d %s</body></html>" % (i, " ".join("v%d" % rnd.randrange(5000) for _ in range(2000)))).encode()
    write("%s/new%d.html" % (M, i), body)
    pages["new%d.html" % i] = md5(body)
json.dump(pages, open(sys.argv[1], "w"))
stats = subprocess.run([os.environ["PD_BIN"], "stats", S], stdout=subprocess.PIPE).stdout.decode()
check("of which nursery" in stats, "no nursery after the writes: %s" % stats)
for name, m in pages.items():  # read from the nursery or from their final records
    eq(md5(read(M + "/" + name)), m, "content of " + name)
end = time.time() + 60  # the background step empties the nursery, whose pack goes
while True:
    stats = subprocess.run([os.environ["PD_BIN"], "stats", S], stdout=subprocess.PIPE).stdout.decode()
    if "of which nursery" not in stats:
        break
    check(time.time() < end, "the nursery is still there after 60 s: %s" % stats)
    time.sleep(0.5)
for name, m in pages.items():
    eq(md5(read(M + "/" + name)), m, "content of " + name)
eq(len(stored(S)), 60, "stored blobs")
EOF
	pd_umount || fail umount
	pd_fsck "$s" || fail "fsck after the nursery"
}

# A store whose packs are of version 1 (record headers of layout 1: made
# by PD_LANDED_BUILD, a build of store format 4 or older) reads as it
# was, deltas and chunked pages included, and fsck --deep finds it clean;
# new pages go to a new pack of version 2; `pagededup compact --all` gives
# every record the lean header (layout 2) and the store stays clean.
case_pack_version1_store() {
	local s=$PD_TMP/v1.store old=${PD_LANDED_BUILD:-}
	[ -x "$old/pagededupfs" ] || skip "PD_LANDED_BUILD (a build of pack version 1) not given"
	"$old/pagededup" --version | grep -q "store format [1-4])" || skip "PD_LANDED_BUILD writes packs of version 2"
	mkdir -p "$s" && "$old/pagededup" mkfs "$s" >/dev/null || fail "mkfs of the older build"
	local PDFS_BIN_SAVED=$PDFS_BIN
	PDFS_BIN=$old/pagededupfs
	pd_mount -n -s "$s" || fail "mount with the older build"
	PDFS_BIN=$PDFS_BIN_SAVED
	py "$PD_TMP/v1.json" <<'EOF' || exit 1
import os, sys, json, random
from fsutil import *
M = os.environ["MNT"]
pages = {}
r1 = random.Random(1)
base = " ".join("w%d" % r1.randrange(5000) for _ in range(3000))
for i in range(40):  # near copies of one page (deltas), and pages of their own
    rnd = random.Random(i)
    body = base if i % 2 == 0 else " ".join("u%d" % rnd.randrange(9000) for _ in range(3000))
    body = ("<html><body>%d %s</body></html>" % (i, body)).encode()
    write("%s/p%d.html" % (M, i), body)
    pages["p%d.html" % i] = md5(body)
big = "".join("<p>line %d of a long page %d</p>\n" % (j, r1.randrange(10**6)) for j in range(20000)).encode()
write(M + "/big.html", big)  # over 256 KiB: stored in chunks
pages["big.html"] = md5(big)
json.dump(pages, open(sys.argv[1], "w"))
EOF
	pd_umount || fail "unmount of the older build"
	"$PD_BIN" fsck --deep "$s" >/dev/null || fail "fsck --deep of the version 1 store"
	pd_mount -n -s "$s" || fail "mount of the version 1 store"
	py "$PD_TMP/v1.json" <<'EOF' || exit 1
import os, sys, json, random
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
pages = json.load(open(sys.argv[1]))
for name, m in pages.items():
    eq(md5(read(M + "/" + name)), m, "content of " + name)
check(any(":delta:" in r[3] for r in stored(S)), "no delta among the older build's records")
for i in range(5):
    rnd = random.Random(50 + i)
    body = ("<html><body>new %d %s</body></html>" % (i, " ".join("v%d" % rnd.randrange(5000) for _ in range(2000)))).encode()
    write("%s/new%d.html" % (M, i), body)
    pages["new%d.html" % i] = md5(body)
json.dump(pages, open(sys.argv[1], "w"))
EOF
	pd_umount || fail umount
	py "$PD_TMP/v1.json" <<'EOF' || exit 1
import os, struct
from fsutil import *
S = os.environ["STORE"]
v = {}
for r in stored(S):
    path, off, n = blob_place(S, r[0])
    with open(path, "rb") as f:
        v[path] = struct.unpack_from("<I", f.read(12), 8)[0]
check(1 in v.values(), "no pack of version 1 left: %s" % v)
check(2 in v.values(), "the new pages are not in a pack of version 2: %s" % v)
EOF
	"$PD_BIN" compact --all "$s" >/dev/null || fail "compact --all"
	"$PD_BIN" fsck --deep "$s" >/dev/null || fail "fsck --deep after compact --all"
	py "$PD_TMP/v1.json" <<'EOF' || exit 1
import os, sys, json
from fsutil import *
S = os.environ["STORE"]
pages = json.load(open(sys.argv[1]))
for r in stored(S):
    path, off, n = blob_place(S, r[0])
    with open(path, "rb") as f:
        f.seek(off)
        eq(f.read(4), b"PDR2", "the header of %s's record after compact --all" % r[0])
eq(sorted(md5(blob_bytes(S, r[0])) for r in stored(S)), sorted(set(pages.values())), "the stored pages")
EOF
}

# A read-only open costs no FLUSH at close (FOPEN_NOFLUSH): a reader's
# round trips are lookup, open, read and release. A writer's close still
# flushes, and its bytes are read back at once.
case_read_round_trips() {
	pd_mount debug || fail mount
	local i before after
	for i in 1 2 3; do printf 'page %d\n' "$i" >"$MNT/p$i" || fail "write p$i"; done
	# a new daemon and kernel cache: the pages are read from the packs
	pd_remount debug || fail remount
	before=$(grep -a -c "opcode: FLUSH" "$PDFS_LOG")
	reads=$(grep -a -c "opcode: READ " "$PDFS_LOG")
	for i in 1 2 3 1 2 3; do expect_eq "$(cat "$MNT/p$i")" "page $i" "content of p$i"; done
	after=$(grep -a -c "opcode: FLUSH" "$PDFS_LOG")
	[ "$after" = "$before" ] || fail "$((after - before)) FLUSH requests for six read-only closes"
	[ "$(grep -a -c "opcode: READ " "$PDFS_LOG")" -ge $((reads + 3)) ] || fail "the pages were not read through the daemon"
	echo more >>"$MNT/p1" || fail append
	[ "$(grep -a -c "opcode: FLUSH" "$PDFS_LOG")" -gt "$after" ] || fail "no FLUSH at a writer's close"
	expect_eq "$(cat "$MNT/p1")" $'page 1\nmore' "p1 after the append"
	pd_umount || fail umount
}

pd_case damaged_region_heals
pd_case format1_converted
pd_case nursery_on_older_store
pd_case pack_version1_store
pd_case read_round_trips
pd_finish
