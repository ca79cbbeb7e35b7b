#!/usr/bin/env bash
# Faults: the backing disk fills up; the LMDB map fills up; objects/ becomes
# unwritable.
. "$(dirname "$0")/lib.sh"

OWNER=pd-owner

# A store on a small tmpfs: writers get ENOSPC, everything stored stays
# readable, the daemon keeps running, and once pages are deleted the store
# takes new ones again.
case_disk_full() {
	local small=$PD_TMP/small
	pd_small_disk "$small" 48m
	"$PD_BIN" mkfs "$small/store" --expected-pages 2000 >/dev/null || fail mkfs
	pd_mount -n -s "$small/store" || fail mount
	py <<'PYEOF' || exit 1
import errno, hashlib, os
from fsutil import *
M = os.environ["MNT"]
os.mkdir(M + "/p")
stored = {}
err = None
for i in range(2000):
    body = os.urandom(64 * 1024)
    path = "%s/p/page%04d.html" % (M, i)
    try:
        with open(path, "wb") as f:
            f.write(body)
    except OSError as e:
        err = e
        break
    stored[path] = hashlib.md5(body).hexdigest()
check(err is not None, "the disk never filled (%d pages written)" % len(stored))
eq(err.errno, errno.ENOSPC, "error of the write that did not fit")
check(len(stored) > 100, "only %d pages fit before ENOSPC" % len(stored))
check(os.path.ismount(M), "the mount went away when the disk filled")
# every page whose close() returned is there, byte for byte
for path, digest in stored.items():
    with open(path, "rb") as f:
        eq(hashlib.md5(f.read()).hexdigest(), digest, "content of %s after ENOSPC" % path)
# the bytes a failed page left free are taken too: the deletes below have
# only the pages LMDB keeps in reserve past its last one (and its free list)
with open(os.path.dirname(os.environ["STORE"]) + "/filler", "wb", buffering=0) as f:
    try:
        while True:
            f.write(b"\1" * 4096)
    except OSError as e:
        eq(e.errno, errno.ENOSPC, "error of the filler")
# a failed page does not leave a broken file: it reads as what was stored
# before (nothing) or is absent
# free space through the mount, then store new pages again; sixteen
# unlinks at a time, so that their commits are shared and larger than
# the pages LMDB's free list has: a commit of deletes on a full disk
# takes its fresh pages from the reserve
import concurrent.futures
victims = sorted(stored)[: len(stored) // 2]
with concurrent.futures.ThreadPoolExecutor(16) as pool:
    list(pool.map(os.unlink, victims))
for path in victims:
    del stored[path]
for i in range(20):
    body = os.urandom(64 * 1024)
    path = "%s/p/again%02d.html" % (M, i)
    with open(path, "wb") as f:
        f.write(body)
    stored[path] = hashlib.md5(body).hexdigest()
for path, digest in stored.items():
    with open(path, "rb") as f:
        eq(hashlib.md5(f.read()).hexdigest(), digest, "content of %s after freeing space" % path)
PYEOF
	pd_umount || fail umount
	# LMDB's rewrite at unmount (store_opts.lmdb_rewrite_max) needs three
	# times the file and 64 MiB free: on this disk it is left undone, and
	# said, rather than take the room a delete needs
	grep -q "LMDB's file left as it was at the close: the disk has [0-9]* bytes free" "$PDFS_LOG" ||
		fail "no word of the LMDB rewrite left undone: $(grep -i lmdb "$PDFS_LOG")"
	! grep -q "LMDB's file written again" "$PDFS_LOG" || fail "LMDB's file written again on a full disk"
	umount "$small" || fail "umount tmpfs"
}

# The LMDB map starts at 1 MiB: it grows by itself, and nothing is lost.
case_map_full() {
	pd_mount mapsize_mb=1 || fail mount
	py <<'PYEOF' || exit 1
import os
from fsutil import *
M = os.environ["MNT"]
for d in range(20):
    os.mkdir("%s/d%02d" % (M, d))
    for i in range(250):
        write("%s/d%02d/a-long-enough-page-name-%04d.html" % (M, d, i), b"page %d %d" % (d, i % 100))
for d in range(20):
    eq(len(os.listdir("%s/d%02d" % (M, d))), 250, "entries in d%02d" % d)
eq(read("%s/d07/a-long-enough-page-name-0123.html" % M), b"page 7 23", "content")
PYEOF
	local size
	size=$(stat -c %s "$STORE/meta/data.mdb")
	[ "$size" -gt $((1024 * 1024)) ] || fail "data.mdb is $size bytes: the map never grew past 1 MiB"
	pd_umount || fail umount
}


# objects/ becomes unwritable, in a store of format 1's layout (-o
# blob_files: a store made before packs; pack write failures are the disk
# full case above) (chmod 0500 of it and its directories; the
# daemon runs as the store's owner, since root would ignore the mode): a
# page that needs a new blob fails at close() and keeps its previous
# content, a duplicate needs no new blob, every stored page stays readable
# byte for byte, nothing is left in staging/, and once objects/ is writable
# again new pages are stored and the store checks clean.
case_objects_unwritable() {
	[ "$host_ok" = 1 ] || { cat "$PD_TMP/host.log"; fail "cannot run the daemon as $OWNER"; }
	pd_mount -u $OWNER allow_other,blob_files || fail mount
	local state=$PD_TMP/objects_unwritable.json
	py "$state" <<'PYEOF' || exit 1
import json, os, sys
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
os.mkdir(M + "/p")
pages = {}
for i in range(30):
    body = b"<html><body>page %d</body></html>\n" % i * (1 + 37 * i)
    pages["p/page%02d.html" % i] = body
pages["p/big.bin"] = os.urandom(3 << 20)     # staged in a file, not in memory
pages["p/dup.html"] = pages["p/page05.html"]
for n, b in pages.items():
    write(os.path.join(M, n), b)
wait_blobs(S, 31, "31 distinct pages")
json.dump({n: md5(b) for n, b in pages.items()}, open(sys.argv[1], "w"))
PYEOF
	find "$STORE/objects" -type d -exec chmod 0500 {} + || fail "chmod objects"
	py "$state" <<'PYEOF' || exit 1
import errno, json, os, sys, time
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
pages = json.load(open(sys.argv[1]))
blobs_before = blob_files(S)
def refused(path, body, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    """Writing body must fail (at write or at close) with an error, and the
    file, read at once, must hold what it held before (nothing if new)."""
    rel = os.path.relpath(path, M)
    try:
        write(path, body, flags=flags)
    except OSError as e:
        note("%s: %s" % (rel, ename(e.errno)))
        check(e.errno in (errno.EACCES, errno.EPERM, errno.EIO, errno.EROFS),
              "error for %s: %s" % (rel, ename(e.errno)))
        eq(md5_file(path), pages.get(rel, md5(b"")), "content of %s after its refused write" % rel)
        return
    raise AssertionError("%s: writing a new page succeeded with objects/ unwritable" % rel)
def note(s):
    print(s, flush=True)
# new bytes in place over a stored page (its size stays); a stat first, as
# wget -N does, leaves the kernel with valid attributes, which would keep
# the pages cached from the refused write if the daemon let it
os.stat(M + "/p/page13.html")
refused(M + "/p/page13.html", b"N" * 8192, flags=os.O_WRONLY)
# a new page (its objects/ subdirectory would have to be made)
refused(M + "/p/new.html", b"<p>a page never seen before</p>\n")
# a new page whose objects/abc/ exists
prefix = blobs_before[0][:3]  # the key of a stored blob: its objects/abc/ exists
i = 0
while md5(b"same prefix %d\n" % i)[:3] != prefix:
    i += 1
refused(M + "/p/same-prefix.html", b"same prefix %d\n" % i)
# a large page, staged in a file
refused(M + "/p/new-big.bin", os.urandom(2 << 20))
# new bytes over a stored page, rewritten or appended to: the old bytes stay
refused(M + "/p/page03.html", b"<p>new bytes for page 3</p>\n")
refused(M + "/p/page04.html", b"<p>appended</p>\n", flags=os.O_WRONLY | os.O_APPEND)
# (a byte other than the one there: "x" over an "x" would change nothing,
# one run in 256 of the random page)
with open(M + "/p/big.bin", "rb") as f:
    first = f.read(1)
refused(M + "/p/big.bin", bytes([first[0] ^ 0xFF]), flags=os.O_WRONLY)
refused(M + "/p/page12.html", b"<p>whole pages the kernel may cache</p>\n" * 400)
# a duplicate of a stored page needs no new blob
dup = read(M + "/p/page07.html")
try:
    write(M + "/p/dup2.html", dup)
    eq(read(M + "/p/dup2.html"), dup, "a duplicate written while objects/ is unwritable")
    eq(refcount(M + "/p/dup2.html"), 2, "refcount of the duplicate")
    note("a duplicate was stored")
except OSError as e:
    note("a duplicate failed too: %s" % ename(e.errno))
    eq(read(M + "/p/dup2.html"), b"", "a duplicate whose seal failed")
# names are in LMDB, not in objects/: they still work
os.mkdir(M + "/p/dir")
os.rename(M + "/p/page06.html", M + "/p/dir/page06.html")
pages["p/dir/page06.html"] = pages.pop("p/page06.html")
# every stored page, byte for byte
for n, m in pages.items():
    eq(md5_file(os.path.join(M, n)), m, "content of %s with objects/ unwritable" % n)
check(os.path.ismount(M), "the mount went away")
for _ in range(100):  # release (and the removal of staged bytes) follows close()
    left = os.listdir(S + "/staging")
    if not left:
        break
    time.sleep(0.05)
eq(left, [], "staging/ after the refused writes")
json.dump(pages, open(sys.argv[1], "w"))
PYEOF
	find "$STORE/objects" -type d -exec chmod 0700 {} + || fail "chmod objects back"
	py "$state" <<'PYEOF' || exit 1
import json, os, sys
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
pages = json.load(open(sys.argv[1]))
for n, b in (("p/new.html", b"<p>a page never seen before</p>\n"), ("p/page03.html", b"<p>new bytes for page 3</p>\n")):
    write(os.path.join(M, n), b)
    eq(read(os.path.join(M, n)), b, n + " once objects/ is writable again")
    pages[n] = md5(b)
for n, m in pages.items():
    eq(md5_file(os.path.join(M, n)), m, "content of " + n)
json.dump(pages, open(sys.argv[1], "w"))
PYEOF
	pd_umount || fail umount
	pd_mount -n -s "$STORE" -u $OWNER allow_other,blob_files || fail remount
	py "$state" <<'PYEOF' || exit 1
import json, os, sys
from fsutil import *
M = os.environ["MNT"]
for n, m in json.load(open(sys.argv[1])).items():
    eq(md5_file(os.path.join(M, n)), m, "content of %s after remount" % n)
PYEOF
	pd_umount || fail umount
}

# appended_reads_back FILE LINE: LINE appended to FILE is stored (the
# fault is over): the file reads back ending with it.
appended_reads_back() {
	py "$1" "$2" <<'PYEOF'
import os, sys
from fsutil import *
path, line = sys.argv[1], sys.argv[2].encode() + b"\n"
write(path, line, flags=os.O_WRONLY | os.O_APPEND)
check(read(path).endswith(line), "a change to %s once the fault is over" % os.path.basename(path))
PYEOF
}

# refused_rewrites N ERRNOS PATH...: N refused changes of each stored page
# PATH (a byte changed in place, or bytes appended, in turn), each refused
# at write or close() with one of ERRNOS (names, comma-separated); after
# each, the page reads as stored, at once:
# - through a descriptor opened before the write, which had read the first
#   page into the kernel's cache: the write went through that cache, and a
#   new open alone would not drop it;
# - by a new open, right after a reader that opened and closed just before
#   the write (its release, which the kernel sends without waiting, may
#   still be on its way, or be served by another thread, when the write's
#   close() is refused): with any handle but the writer's counted, the
#   refused bytes were kept for a later seal and served to that open.
# Its size, seen through either, is the stored size.
refused_rewrites() {
	py "$@" <<'PYEOF'
import errno, os, sys
from fsutil import *
n, allowed = int(sys.argv[1]), {getattr(errno, e) for e in sys.argv[2].split(",")}
def read_at(fd, size):
    got = b""
    while True:
        b = os.pread(fd, size - len(got) + 4096, len(got))
        if not b:
            return got
        got += b
for path in sys.argv[3:]:
    good = read(path)
    for i in range(n):
        what = "%s, refused change %d" % (os.path.basename(path), i)
        held = os.open(path, os.O_RDONLY)
        try:
            eq(os.pread(held, 4096, 0), good[:4096], what + ": the first page before it")
            with open(path, "rb") as f:
                first = f.read(1)
            if i % 2 == 0:   # a byte other than the one there, in place
                change, flags = bytes([first[0] ^ 0xFF]), os.O_WRONLY
            else:
                change, flags = b"<p>appended</p>\n" * 64, os.O_WRONLY | os.O_APPEND
            try:
                write(path, change, flags=flags)
            except OSError as e:
                check(e.errno in allowed, "%s: error %s" % (what, ename(e.errno)))
            else:
                raise AssertionError("%s: the change was stored" % what)
            eq(md5(read_at(held, len(good))), md5(good), what + ": content through a descriptor open across it")
            eq(os.fstat(held).st_size, len(good), what + ": size through that descriptor")
            eq(md5(read(path)), md5(good), what + ": content read by a new open")
            eq(os.stat(path).st_size, len(good), what + ": size")
        finally:
            os.close(held)
PYEOF
}

# A page whose change is refused reads as stored at once, every time, in
# every way (refused_rewrites), on a store of format 1's layout with
# objects/ unwritable (as in objects_unwritable): a large page staged in a
# file and a small one staged in memory.
case_objects_unwritable_reread() {
	[ "$host_ok" = 1 ] || { cat "$PD_TMP/host.log"; fail "cannot run the daemon as $OWNER"; }
	pd_mount -u $OWNER allow_other,blob_files || fail mount
	py <<'PYEOF' || exit 1
import os
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
write(M + "/big.bin", os.urandom(3 << 20))
write(M + "/small.html", b"<html><body>a small page</body></html>\n" * 200)
wait_blobs(S, 2, "two pages")
PYEOF
	find "$STORE/objects" -type d -exec chmod 0500 {} + || fail "chmod objects"
	refused_rewrites 12 EACCES,EPERM,EIO,EROFS "$MNT/big.bin" "$MNT/small.html" || exit 1
	find "$STORE/objects" -type d -exec chmod 0700 {} + || fail "chmod objects back"
	appended_reads_back "$MNT/small.html" "<p>stored once objects/ is writable again</p>" || exit 1
	pd_umount || fail umount
}

# The same on a store of packs whose disk is full: every change is refused
# with ENOSPC and the page reads as stored.
case_disk_full_reread() {
	local small=$PD_TMP/small-reread
	pd_small_disk "$small" 24m
	"$PD_BIN" mkfs "$small/store" --expected-pages 1000 >/dev/null || fail mkfs
	pd_mount -n -s "$small/store" || fail mount
	py <<'PYEOF' || exit 1
import errno, os
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
write(M + "/big.bin", os.urandom(3 << 20))
write(M + "/small.bin", os.urandom(96 << 10))
eq(read(M + "/small.bin")[:0], b"", "small.bin readable")
with open(os.path.dirname(S) + "/filler", "wb", buffering=0) as f:
    try:
        while True:
            f.write(b"\1" * 4096)
    except OSError as e:
        eq(e.errno, errno.ENOSPC, "error of the filler")
PYEOF
	refused_rewrites 12 ENOSPC "$MNT/big.bin" "$MNT/small.bin" || exit 1
	rm -f "$small/filler"
	appended_reads_back "$MNT/small.bin" "<p>stored once there is room again</p>" || exit 1
	pd_umount || fail umount
	umount "$small" || fail "umount tmpfs"
}

# objects/ unwritable (format 1's layout, as above) while the last name of
# a page goes: its blob file
# cannot be removed after the commit. The unlink must either fail or leave a
# store that checks clean after a clean unmount (the leftover file removed
# later, or the store left for the next mount's sweep).
case_objects_unwritable_unlink() {
	[ "$host_ok" = 1 ] || { cat "$PD_TMP/host.log"; fail "cannot run the daemon as $OWNER"; }
	pd_mount -u $OWNER allow_other,blob_files || fail mount
	py <<'PYEOF' || exit 1
import os
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
write(M + "/gone.html", b"<p>a page whose last name goes</p>\n")
write(M + "/kept.html", b"<p>a page that stays</p>\n")
wait_blobs(S, 2, "two pages")
PYEOF
	find "$STORE/objects" -type d -exec chmod 0500 {} + || fail "chmod objects"
	py <<'PYEOF' || exit 1
import os
from fsutil import *
M = os.environ["MNT"]
try:
    os.unlink(M + "/gone.html")
    print("unlink succeeded")
    check(not os.path.exists(M + "/gone.html"), "gone.html still there after its unlink")
except OSError as e:
    print("unlink failed: %s" % ename(e.errno))
    eq(read(M + "/gone.html"), b"<p>a page whose last name goes</p>\n", "gone.html after a failed unlink")
eq(read(M + "/kept.html"), b"<p>a page that stays</p>\n", "kept.html")
PYEOF
	find "$STORE/objects" -type d -exec chmod 0700 {} + || fail "chmod objects back"
	pd_umount || fail umount
}

# The host changes for a daemon run by an ordinary user (lib.sh), made here
# in the main shell so that they last until the script ends.
host_ok=0
if { pd_users $OWNER && pd_user_fuse; } >"$PD_TMP/host.log" 2>&1; then
	host_ok=1
fi

pd_case disk_full
pd_case map_full
pd_case objects_unwritable
pd_case objects_unwritable_reread
pd_case disk_full_reread
pd_case objects_unwritable_unlink
pd_finish
