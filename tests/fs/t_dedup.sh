#!/usr/bin/env bash
# Deduplication through a pagededupfs mount: blobs, refcounts, the dedup
# attributes, stats, MD5 collisions, damaged blobs, mount options and the
# ways of mounting a store. Every case mounts a fresh store of its own, so
# that blob counts are exact, and ends with pd_umount (clean daemon exit and
# clean fsck).
. "$(dirname "$0")/lib.sh"
pd_require

U_A=65534

case_identical_share_blob() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from errno import *
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
X = b"<html><body>identical page</body></html>\n" * 50
Y = b"<html><body>another page</body></html>\n" * 20
os.makedirs(M + "/d/sub")
write(M + "/d/a", X)
write(M + "/d/b", X)
wait_blobs(S, 1, "two identical files")
eq(refcount(M + "/d/a"), 2, "refcount of a")
eq(refcount(M + "/d/b"), 2, "refcount of b")
eq(md5x(M + "/d/a"), md5(X), "md5 attribute of a")
eq(md5x(M + "/d/b"), md5(X), "md5 attribute of b")
eq(len(find_blobs(S, md5(X))), 1, "stored blobs keyed by the md5 of the content")
eq(blob_bytes(S, find_blobs(S, md5(X))[0]), X, "content of the stored blob")
eq(twins_str(M + "/d/a"), {"/d/b"}, "twins of a")
eq(twins_str(M + "/d/b"), {"/d/a"}, "twins of b")
write(M + "/d/c", Y)
wait_blobs(S, 2, "plus one distinct file")
eq(refcount(M + "/d/c"), 1, "refcount of c")
eq(twins_str(M + "/d/c"), set(), "twins of c")
eq(md5x(M + "/d/c"), md5(Y), "md5 attribute of c")
write(M + "/d/sub/e", X)
wait_blobs(S, 2, "a third copy")
eq([refcount(M + p) for p in ("/d/a", "/d/b", "/d/sub/e")], [3, 3, 3], "refcounts of three copies")
eq(twins_str(M + "/d/a"), {"/d/b", "/d/sub/e"}, "twins of a with three copies")
eq(twins_str(M + "/d/sub/e"), {"/d/a", "/d/b"}, "twins of sub/e")
for p in ("/d/a", "/d/b", "/d/sub/e"):
    eq(read(M + p), X, "content of " + p)
eq(read(M + "/d/c"), Y, "content of c")
# attributes that clients set belong to the file, not to its content
os.setxattr(M + "/d/a", "user.note", b"1")
expect_errno(ENODATA, os.getxattr, M + "/d/b", "user.note")
os.chmod(M + "/d/b", 0o600)
eq(os.stat(M + "/d/a").st_mode & 0o777, 0o644, "mode of a after chmod of its twin")
check(os.stat(M + "/d/a").st_ino != os.stat(M + "/d/b").st_ino, "twins share an inode number")
EOF
	local m
	m=$(getfattr --absolute-names --only-values -n user.dedup.md5 "$MNT/d/a") || fail "getfattr user.dedup.md5"
	expect_eq "$m" "$(md5sum <"$MNT/d/a" | cut -c1-32)" "getfattr user.dedup.md5 vs md5sum"
	expect_eq "$(pd_xattr "$MNT/d/b" user.dedup.refcount)" 3 "getfattr user.dedup.refcount"
	# The fingerprints survive a remount: a new copy still finds its twins.
	pd_remount || fail remount
	py <<'EOF' || exit 1
import os
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
X = b"<html><body>identical page</body></html>\n" * 50
write(M + "/d/f", X)
wait_blobs(S, 2, "a copy written after remount")
eq(refcount(M + "/d/f"), 4, "refcount after remount")
eq(twins_str(M + "/d/f"), {"/d/a", "/d/b", "/d/sub/e"}, "twins after remount")
EOF
	pd_umount || fail umount
}

case_store_layout() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
for p in ("meta", "packs", "staging"):
    check(os.path.isdir(os.path.join(S, p)), "store has no %s/ directory" % p)
check(os.path.isfile(os.path.join(S, "filter")), "store has no filter file")
check(os.path.isfile(os.path.join(S, "lock")), "store has no lock file")
X, Y = b"layout X\n" * 100, b"layout Y\n" * 100
write(M + "/x", X); write(M + "/x2", X); write(M + "/y", Y)
wait_blobs(S, 2, "x, x2, y")
eq(blob_files(S), sorted([md5(X), md5(Y)]), "stored blobs (keyed by md5)")
eq(blob_bytes(S, md5(X)), X, "content of a stored blob")
# no file per page: the bytes are records in one pack, once the nursery
# (the pack close() appends to) has handed them to the main pack and gone
import subprocess, time
end = time.time() + 60
while "of which nursery" in subprocess.run([os.environ["PD_BIN"], "stats", S],
                                           stdout=subprocess.PIPE).stdout.decode():
    check(time.time() < end, "pages still in the nursery after 60 s")
    time.sleep(0.2)
places = {place.split(":")[0] for key, size, ref, place, bad in stored(S)}
eq(len(places), 1, "packs holding the blobs: %s" % sorted(places))
eq(sorted(os.listdir(os.path.join(S, "packs"))), sorted(places), "files in packs/")
check(not os.path.exists(os.path.join(S, "objects")) or
      not [f for _, _, fs in os.walk(os.path.join(S, "objects")) for f in fs], "files under objects/")
fd = os.open(M + "/open", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"being written")
os.close(fd)
import time
for _ in range(100):
    left = os.listdir(os.path.join(S, "staging"))
    if not left:
        break
    time.sleep(0.05)
eq(left, [], "staging/ 5 s after every file was closed")
EOF
	pd_umount || fail umount
}

case_twins_permission() {
	pd_mount allow_other || fail mount
	cd "$MNT" || fail cd
	mkdir pub priv && chmod 0700 priv || fail setup
	local x="<p>twins only where the caller may go</p>"
	for f in pub/a pub/b priv/c; do echo "$x" >"$f" || fail "write $f"; done
	expect_eq "$(pd_xattr pub/a user.dedup.twins | grep -c .)" 2 "twins of pub/a for root"
	expect_eq "$(pd_xattr pub/a user.dedup.twins | sort | tr '\n' ' ')" "/priv/c /pub/b " "twins of pub/a for root"
	local t
	t=$(as_user $U_A $U_A getfattr --absolute-names --only-values -n user.dedup.twins "$MNT/pub/a") || fail "getfattr as uid $U_A"
	expect_eq "$(printf '%s\n' "$t" | grep . | sort | tr '\n' ' ')" "/pub/b " "twins of pub/a for uid $U_A (priv is 0700)"
	expect_eq "$(as_user $U_A $U_A cat "$MNT/pub/b")" "$x" "content read by uid $U_A"
	cd "$PD_TMP" || fail cd
	pd_umount || fail umount
}

case_recrawl_same_bytes() {
	pd_mount || fail mount
	local src=$PD_TMP/recrawl_src
	py "$src" <<'EOF' || exit 1
import os, sys, random
from fsutil import *
src = sys.argv[1]
rnd = random.Random(100)
pool = [(b"<html><title>page %d</title><body>" % k) + rnd.randbytes(rnd.randrange(100, 20000)).hex().encode() + b"</body></html>\n"
        for k in range(40)]
for i in range(100):
    p = os.path.join(src, "s%d" % (i % 5), "page%03d.html" % i)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    write(p, pool[(i * 7) % 40])
EOF
	cp -r "$src/." "$MNT/" || fail "copy into the mount"
	py "$src" "$PD_TMP/recrawl.before" <<'EOF' || exit 1
import os, sys, pickle
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
wait_blobs(S, 40, "100 pages with 40 distinct contents")
st = dstats(M)
eq((st["pages"], st["blobs"]), (100, 40), "stats pages, blobs")
per = {}
for d, _, fs in os.walk(M):
    for f in fs:
        p = os.path.join(d, f)
        per[os.path.relpath(p, M)] = (md5x(p), refcount(p))
for rel, (m, rc) in per.items():
    eq(m, md5_file(os.path.join(sys.argv[1], rel)), "md5 attribute of " + rel)
    i = int(rel[-8:-5])
    eq(rc, sum(1 for j in range(100) if (j * 7) % 40 == (i * 7) % 40), "refcount of " + rel)
pickle.dump((st, per), open(sys.argv[2], "wb"))
EOF
	# The recrawl: every page written again with the same bytes (O_TRUNC),
	# then its mtime set as a crawler does.
	local f
	while IFS= read -r f; do
		cat "$src/$f" >"$MNT/$f" || fail "rewrite $f"
		touch -d '2021-06-07 08:09:10.123456789' "$MNT/$f" || fail "touch $f"
	done < <(cd "$src" && find . -type f)
	py "$PD_TMP/recrawl.before" <<'EOF' || exit 1
import os, sys, pickle
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
st0, per0 = pickle.load(open(sys.argv[1], "rb"))
wait_blobs(S, 40, "after rewriting every page with the same bytes")
st = dstats(M)
for k in ("pages", "blobs", "logical_bytes", "stored_bytes"):
    eq(st[k], st0[k], "stats %s after the recrawl" % k)
for rel, v in per0.items():
    p = os.path.join(M, rel)
    eq((md5x(p), refcount(p)), v, "md5 and refcount of %s after the recrawl" % rel)
    eq(os.stat(p).st_mtime_ns, 1623053350123456789, "mtime of %s after touch -d" % rel)
EOF
	diff -r "$src" "$MNT" || fail "content differs from the source"
	pd_umount || fail umount
	local js
	js=$("$PD_BIN" stats "$STORE" --json) || fail "pagededup stats --json"
	py "$PD_TMP/recrawl.before" "$js" <<'EOF' || exit 1
import sys, json, pickle
from fsutil import *
st0, _ = pickle.load(open(sys.argv[1], "rb"))
st = json.loads(sys.argv[2])
for k in ("pages", "blobs", "logical_bytes", "stored_bytes"):
    eq(st[k], st0[k], "pagededup stats --json %s vs the mounted stats" % k)
EOF
}

case_overwrite_moves_refcounts() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
X = b"X-content " * 400
Y = b"Y-content " * 500
Z = b"Z-content " * 600
a, b, c = M + "/a", M + "/b", M + "/c"
write(a, X); write(b, X); write(c, Y)
wait_blobs(S, 2, "X, X, Y")
eq([refcount(p) for p in (a, b, c)], [2, 2, 1], "refcounts of X, X, Y")
write(b, Y)
wait_blobs(S, 2, "X, Y, Y")
eq([refcount(p) for p in (a, b, c)], [1, 2, 2], "refcounts after b := Y")
eq(twins_str(b), {"/c"}, "twins of b")
eq(twins_str(a), set(), "twins of a")
eq(md5x(b), md5(Y), "md5 attribute of b")
write(a, Z)
committed(M)
wait_blobs(S, 2, "Z, Y, Y (X freed)")
check(not find_blobs(S, md5(X)), "blob of X still there with no file on it")
eq([refcount(p) for p in (a, b, c)], [1, 2, 2], "refcounts after a := Z")
# In-place change of one of two files sharing a blob: the other keeps its bytes.
fd = os.open(b, os.O_WRONLY)
os.pwrite(fd, b"!", 5)
os.close(fd)
Y2 = Y[:5] + b"!" + Y[6:]
eq(read(b), Y2, "b after an in-place write")
eq(read(c), Y, "c after its twin was changed in place")
eq([blob_bytes(S, k) for k in find_blobs(S, md5(Y))], [Y], "blob of Y after its twin was changed in place")
eq((refcount(b), refcount(c)), (1, 1), "refcounts after the in-place write")
eq(md5x(b), md5(Y2), "md5 attribute of b after the in-place write")
eq(md5x(c), md5(Y), "md5 attribute of c after the in-place write")
wait_blobs(S, 3, "Z, Y2, Y")
# b made equal to a by writes without O_TRUNC joins a's blob.
fd = os.open(b, os.O_WRONLY)
os.pwrite(fd, Z, 0)
os.ftruncate(fd, len(Z))
os.close(fd)
eq(read(b), Z, "b rewritten in place to Z")
eq((refcount(a), refcount(b)), (2, 2), "refcounts after b became Z")
eq(twins_str(a), {"/b"}, "twins of a after b became Z")
wait_blobs(S, 2, "Z, Y (Y2 freed)")
# append to c: c leaves Y, which has no file left
with open(c, "ab") as f:
    f.write(b"more")
eq(read(c), Y + b"more", "c after append")
wait_blobs(S, 2, "Z, Y+more")
check(not find_blobs(S, md5(Y)), "blob of Y still there with no file on it")
EOF
	pd_umount || fail umount
}

case_truncate_moves_refcounts() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os, subprocess
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
X = b"0123456789" * 10
a, b = M + "/a", M + "/b"
write(a, X); write(b, X)
wait_blobs(S, 1, "two copies")
subprocess.check_call(["truncate", "-s", "50", b])
eq(read(b), X[:50], "b after truncate -s 50")
eq(md5x(b), md5(X[:50]), "md5 attribute of b after truncate -s 50")
eq((refcount(a), refcount(b)), (1, 1), "refcounts after truncating b")
wait_blobs(S, 2, "X and X[:50]")
os.truncate(a, 50)          # truncate(2): no open, no close
eq(read(a), X[:50], "a after truncate(2)")
eq(md5x(a), md5(X[:50]), "md5 attribute of a after truncate(2)")
eq((refcount(a), refcount(b)), (2, 2), "refcounts after truncate(2) made a equal to b")
wait_blobs(S, 1, "X freed")
os.truncate(a, 200)
A2 = X[:50] + b"\0" * 150
eq(read(a), A2, "a after growing by truncate(2)")
eq(md5x(a), md5(A2), "md5 attribute of a after growing")
eq((refcount(a), refcount(b)), (1, 1), "refcounts after growing a")
wait_blobs(S, 2, "X[:50] and grown a")
fd = os.open(a, os.O_RDWR)
os.ftruncate(fd, 50)
os.close(fd)
eq((refcount(a), refcount(b)), (2, 2), "refcounts after ftruncate back to 50")
os.truncate(a, 0); os.truncate(b, 0)
for p in (a, b):
    eq(read(p), b"", "empty file")
    eq(md5x(p), "d41d8cd98f00b204e9800998ecf8427e", "md5 attribute of an empty file")
check(not find_blobs(S, md5(X[:50])), "blob of X[:50] still there with no file on it")
EOF
	pd_umount || fail umount
}

case_rename_and_twins() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
X = b"rename X " * 300
Y = b"rename Y " * 200
write(M + "/a", X); write(M + "/b", Y)
wait_blobs(S, 2, "a, b")
os.rename(M + "/a", M + "/b")
wait_blobs(S, 1, "after rename a over b (Y freed)")
eq(refcount(M + "/b"), 1, "refcount after rename over")
eq(md5x(M + "/b"), md5(X), "md5 attribute after rename over")
eq(read(M + "/b"), X, "content after rename over")
write(M + "/c", X)
eq(refcount(M + "/b"), 2, "refcount with a copy")
os.rename(M + "/c", M + "/b")
# the replaced b was read above: until the kernel's asynchronous RELEASE of
# that open reaches the daemon, b is an open orphan that holds its reference
# (as in unlink_frees)
wait_eq(lambda: refcount(M + "/b"), 1, "rename of a copy over its twin")
wait_blobs(S, 1, "after renaming a copy over its twin")
write(M + "/d", X); write(M + "/e", Y)
wait_blobs(S, 2, "b, d, e")
renameat2(M + "/b", M + "/e", RENAME_EXCHANGE)
eq((md5x(M + "/b"), md5x(M + "/e")), (md5(Y), md5(X)), "md5 attributes after RENAME_EXCHANGE")
eq(twins_str(M + "/d"), {"/e"}, "twins after RENAME_EXCHANGE")
os.mkdir(M + "/s")
os.rename(M + "/d", M + "/s/d2")
eq(twins_str(M + "/e"), {"/s/d2"}, "twins after moving a twin to a directory")
os.rename(M + "/s", M + "/t")
eq(twins_str(M + "/e"), {"/t/d2"}, "twins after renaming the directory")
os.makedirs(M + "/u/v")
os.rename(M + "/t", M + "/u/v/t")
eq(twins_str(M + "/e"), {"/u/v/t/d2"}, "twins after moving the directory down")
eq(twins_str(M + "/u/v/t/d2"), {"/e"}, "twins of the moved file")
# write-to-temp-then-rename, as crawlers save pages
write(M + "/.page.html.tmp", X)
os.rename(M + "/.page.html.tmp", M + "/page.html")
eq(refcount(M + "/page.html"), 3, "refcount after write-and-rename")
eq(twins_str(M + "/e"), {"/u/v/t/d2", "/page.html"}, "twins after write-and-rename")
wait_blobs(S, 2, "after write-and-rename")
write(M + "/.page.html.tmp", Y)
os.rename(M + "/.page.html.tmp", M + "/page.html")
eq(refcount(M + "/e"), 2, "refcount after the page was replaced")
eq(twins_str(M + "/b"), {"/page.html"}, "twins after the page was replaced")
EOF
	pd_umount || fail umount
}

case_unlink_frees() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os, shutil
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
X = b"unlink me " * 300
Y = b"open while unlinked " * 300
write(M + "/a", X); write(M + "/b", X)
wait_blobs(S, 1, "a, b")
os.unlink(M + "/a")
# close() returns before the kernel's RELEASE of a reaches the daemon (it is
# asynchronous, and over io_uring often later than the unlink): until then a
# is an open, unlinked inode that still holds its reference.
wait_eq(lambda: refcount(M + "/b"), 1, "refcount after unlinking a twin")
wait_eq(lambda: twins_str(M + "/b"), set(), "twins after unlinking a twin")
wait_blobs(S, 1, "after unlinking one of two")
os.unlink(M + "/b")
wait_blobs(S, 0, "after unlinking the last reference")
st = dstats(M)
eq((st["pages"], st["blobs"]), (0, 0), "stats pages, blobs of an empty store")
write(M + "/c", Y)
wait_blobs(S, 1, "c")
fd = os.open(M + "/c", os.O_RDONLY)
os.unlink(M + "/c")
eq(os.pread(fd, len(Y) + 1, 0), Y, "unlinked file read through an open fd")
os.close(fd)
wait_blobs(S, 0, "after the last fd of an unlinked file was closed")
pool = [b"tree content %d\n" % k * 100 for k in range(5)]
for i in range(50):
    os.makedirs(M + "/tree/d%d" % (i % 7), exist_ok=True)
    write(M + "/tree/d%d/f%d" % (i % 7, i), pool[i % 5])
wait_blobs(S, 5, "a tree of 50 files with 5 contents")
shutil.rmtree(M + "/tree")
wait_blobs(S, 0, "after rm -rf of the tree")
EOF
	pd_umount || fail umount
}

case_hardlink() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
X = b"hard link " * 300
write(M + "/a", X)
os.link(M + "/a", M + "/b")
eq(os.stat(M + "/a").st_nlink, 2, "nlink")
eq(os.stat(M + "/a").st_ino, os.stat(M + "/b").st_ino, "one inode")
eq((refcount(M + "/a"), refcount(M + "/b")), (1, 1), "refcount of one inode with two links")
eq((twins_str(M + "/a"), twins_str(M + "/b")), (set(), set()), "twins of hard links")
wait_blobs(S, 1, "one file, two links")
write(M + "/c", X)
eq([refcount(M + p) for p in ("/a", "/b", "/c")], [2, 2, 2], "refcounts with a copy")
eq(twins_str(M + "/a"), {"/c"}, "twins of a")
t = twins_str(M + "/c")
check(t and t <= {"/a", "/b"}, "twins of c: %r" % t)
os.unlink(M + "/a")
eq(os.stat(M + "/b").st_nlink, 1, "nlink after unlinking a")
eq(refcount(M + "/b"), 2, "refcount after unlinking one link")
eq(twins_str(M + "/c"), {"/b"}, "twins of c after unlinking a")
wait_blobs(S, 1, "after unlinking one link")
EOF
	pd_umount || fail umount
}

case_md5_collision() {
	local ca=$PD_DATA/md5-collision-a.bin cb=$PD_DATA/md5-collision-b.bin
	[ -f "$ca" ] && [ -f "$cb" ] || fail "test data missing: $ca $cb"
	pd_mount || fail mount
	py "$ca" "$cb" <<'EOF' || exit 1
import os, sys
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
ca, cb = read(sys.argv[1]), read(sys.argv[2])
check(len(ca) == 128 and ca != cb and md5(ca) == md5(cb), "test data: not a 128-byte MD5 collision pair")
suffix = b"<p>the same suffix after either block</p>\n" * 200
A, B = ca + suffix, cb + suffix
check(A != B and md5(A) == md5(B), "test data: suffixed pair does not collide")
m = md5(A)
write(M + "/a.html", A)
write(M + "/b.html", B)
eq(read(M + "/a.html"), A, "a.html read back")
eq(read(M + "/b.html"), B, "b.html read back")
eq((md5x(M + "/a.html"), md5x(M + "/b.html")), (m, m), "md5 attributes of the colliding pair")
eq((refcount(M + "/a.html"), refcount(M + "/b.html")), (1, 1), "refcounts of the colliding pair")
eq((twins_str(M + "/a.html"), twins_str(M + "/b.html")), (set(), set()), "twins of the colliding pair")
wait_blobs(S, 2, "two colliding contents")
eq(sorted(os.path.basename(p) for p in blob_files(S)), [m, m + ".1"], "blob file names")
write(M + "/c.html", B)
write(M + "/d.html", A)
eq(read(M + "/c.html"), B, "c.html (a copy of b.html)")
eq(read(M + "/d.html"), A, "d.html (a copy of a.html)")
eq([refcount(M + p) for p in ("/a.html", "/b.html", "/c.html", "/d.html")], [2, 2, 2, 2], "refcounts with copies")
eq(twins_str(M + "/c.html"), {"/b.html"}, "twins of c.html")
eq(twins_str(M + "/d.html"), {"/a.html"}, "twins of d.html")
wait_blobs(S, 2, "copies of the colliding pair")
st = dstats(M)
check(st.get("collisions", 0) >= 1, "stats collisions: %r" % st.get("collisions"))
write(M + "/ca.bin", ca)
write(M + "/cb.bin", cb)
eq((read(M + "/ca.bin"), read(M + "/cb.bin")), (ca, cb), "the raw colliding blocks")
wait_blobs(S, 4, "and the raw pair")
os.unlink(M + "/a.html"); os.unlink(M + "/d.html")
wait_blobs(S, 3, "after unlinking the A copies")
eq((read(M + "/b.html"), read(M + "/c.html")), (B, B), "B copies after the A copies went")
write(M + "/a.html", A)
eq((read(M + "/a.html"), read(M + "/b.html")), (A, B), "A written again")
eq(refcount(M + "/a.html"), 1, "refcount of A written again")
wait_blobs(S, 4, "A written again")
EOF
	pd_umount || fail umount
	local js
	js=$("$PD_BIN" stats "$STORE" --json) || fail "pagededup stats --json"
	py "$js" <<'EOF' || exit 1
import sys, json
from fsutil import *
st = json.loads(sys.argv[1])
check(st.get("collisions", 0) >= 1, "pagededup stats --json collisions: %r" % st.get("collisions"))
EOF
	pd_mount -n -s "$STORE" || fail remount
	py "$ca" "$cb" <<'EOF' || exit 1
import os, sys
from fsutil import *
M = os.environ["MNT"]
ca, cb = read(sys.argv[1]), read(sys.argv[2])
suffix = b"<p>the same suffix after either block</p>\n" * 200
for p, want in (("a.html", ca + suffix), ("b.html", cb + suffix), ("c.html", cb + suffix),
                ("ca.bin", ca), ("cb.bin", cb)):
    eq(read(M + "/" + p), want, p + " after remount")
EOF
	pd_umount || fail umount
}

case_dedup_attrs_readonly() {
	pd_mount || fail mount
	echo "page" >"$MNT/f" || fail write
	local m
	m=$(pd_xattr "$MNT/f" user.dedup.md5)
	if setfattr -n user.dedup.md5 -v 00000000000000000000000000000000 "$MNT/f" 2>"$PD_TMP/setfattr.err"; then
		fail "setfattr -n user.dedup.md5 succeeded"
	fi
	note "setfattr said: $(cat "$PD_TMP/setfattr.err")"
	py <<'EOF' || exit 1
import os
from errno import *
from fsutil import *
M = os.environ["MNT"]
f = M + "/f"
for n in ("md5", "refcount", "twins", "simhash", "near", "foo"):
    expect_errno(EPERM, os.setxattr, f, "user.dedup." + n, b"1")
for n in ("md5", "refcount", "twins"):
    expect_errno(EPERM, os.removexattr, f, "user.dedup." + n)
expect_errno(EPERM, os.setxattr, M, "user.dedup.stats", b"{}")
expect_errno(EPERM, os.removexattr, M, "user.dedup.stats")
eq(md5x(f), md5(b"page\n"), "md5 attribute after the refused changes")
eq(refcount(f), 1, "refcount after the refused changes")
os.setxattr(f, "user.dedupx", b"not ours")
eq(os.getxattr(f, "user.dedupx"), b"not ours", "user.dedupx is an ordinary attribute")
# computed attributes are not listed, so copies out of the mount carry none
names = os.listxattr(f)
check(not [n for n in names if n.startswith("user.dedup.")], "listxattr lists dedup attributes: %r" % names)
check("user.dedupx" in names, "listxattr: %r" % names)
EOF
	cp -a "$MNT/f" "$PD_TMP/f.copy" || fail "cp -a out of the mount"
	expect_eq "$(getfattr --absolute-names -d -m - "$PD_TMP/f.copy" 2>/dev/null | grep -c '^user\.dedup\.')" 0 "dedup attributes on a cp -a copy"
	expect_eq "$(getfattr --absolute-names --only-values -n user.dedupx "$PD_TMP/f.copy")" "not ours" "client attribute on a cp -a copy"
	expect_eq "$(pd_xattr "$MNT/f" user.dedup.md5)" "$m" "md5 attribute after setfattr"
	pd_umount || fail umount
}

case_sealed_after_close() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os, random, mmap, subprocess
from fsutil import *
M = os.environ["MNT"]
rnd = random.Random(77)
pool = [rnd.randbytes(n) for n in (1, 100, 4096, 70000)]
have = {}
for i in range(60):
    p = "/p%d" % rnd.randrange(8)
    data = rnd.choice(pool) if rnd.random() < 0.5 else rnd.randbytes(rnd.randrange(1, 200000))
    write(M + p, data)
    have[p] = data
    eq(md5x(M + p), md5(data), "md5 attribute right after close (step %d)" % i)
    eq(refcount(M + p), sum(1 for v in have.values() if v == data), "refcount right after close (step %d)" % i)
    eq(twins_str(M + p), set(q for q, v in have.items() if v == data and q != p), "twins right after close (step %d)" % i)
# written through a shared mapping
write(M + "/m", b"\0" * 8192)
with open(M + "/m", "r+b") as f:
    mm = mmap.mmap(f.fileno(), 8192)
    mm[100:105] = b"mmap!"
    mm.flush()
    mm.close()
eq(md5x(M + "/m"), md5(b"\0" * 100 + b"mmap!" + b"\0" * 8087), "md5 attribute after an mmap write")
# two writers; sealed when the last one closes
f1 = os.open(M + "/two", os.O_WRONLY | os.O_CREAT, 0o644)
f2 = os.open(M + "/two", os.O_WRONLY)
os.pwrite(f1, b"first", 0)
os.close(f1)
os.pwrite(f2, b"SECOND", 5)
os.close(f2)
eq(md5x(M + "/two"), md5(b"firstSECOND"), "md5 attribute after two writers")
subprocess.check_call("echo hello > %s/sh" % M, shell=True)
eq(md5x(M + "/sh"), md5(b"hello\n"), "md5 attribute after a shell redirect")
subprocess.check_call(["dd", "if=/dev/zero", "of=%s/sh" % M, "bs=1", "count=2", "seek=1", "conv=notrunc", "status=none"])
eq(md5x(M + "/sh"), md5(b"h\0\0lo\n"), "md5 attribute after dd conv=notrunc")
subprocess.check_call(["cp", M + "/two", M + "/two.cp"])
eq((md5x(M + "/two.cp"), refcount(M + "/two.cp")), (md5(b"firstSECOND"), 2), "md5 and refcount after cp")
EOF
	pd_umount || fail umount
}

case_stats_exact() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
st = dstats(M)
for k in ("pages", "blobs", "logical_bytes", "stored_bytes", "collisions"):
    eq(st.get(k), 0, "stats %s of a new store" % k)
X, Y, Z, W = b"x" * 1000, b"y" * 2000, b"z" * 3000, b"wwwww"
files = {"/a/x1": X, "/a/x2": X, "/b/x3": X, "/b/c/x4": X,
         "/a/y1": Y, "/b/y2": Y, "/y3": Y, "/z1": Z, "/b/c/z2": Z, "/w": W}
os.makedirs(M + "/a"); os.makedirs(M + "/b/c"); os.makedirs(M + "/emptydir")
for p, d in files.items():
    write(M + p, d)
wait_blobs(S, 4, "10 files with 4 contents")
st = dstats(M)
want = {"pages": 10, "blobs": 4, "logical_bytes": 16005, "stored_bytes": 6005, "collisions": 0}
for k, v in want.items():
    eq(st.get(k), v, "stats " + k)
open(os.environ["PD_TMP"] + "/stats.want", "w").write(repr(want))
EOF
	local getf
	getf=$(getfattr --absolute-names --only-values -n user.dedup.stats "$MNT") || fail "getfattr user.dedup.stats"
	pd_umount || fail umount
	local js
	js=$("$PD_BIN" stats "$STORE" --json) || fail "pagededup stats --json"
	py "$js" "$getf" <<'EOF' || exit 1
import os, sys, json
from fsutil import *
want = eval(open(os.environ["PD_TMP"] + "/stats.want").read())
st = json.loads(sys.argv[1])
check(isinstance(st, dict), "stats --json is not one JSON object")
for k, v in want.items():
    eq(st.get(k), v, "pagededup stats --json: " + k)
g = json.loads(sys.argv[2])
for k, v in want.items():
    eq(g.get(k), v, "getfattr user.dedup.stats: " + k)
EOF
	local txt
	txt=$("$PD_BIN" stats "$STORE") || fail "pagededup stats"
	printf '%s\n' "$txt" | grep -qi pages || fail "pagededup stats prints no pages line: $txt"
}

heap_give_backs() { # -> the mount's daemon.heap_give_backs
	"$PD_BIN" stats "$MNT" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["daemon"]["heap_give_backs"])'
}

# The daemon's section of a mount's stats: the inodes the kernel holds
# keep an entry each, and no file state once their files are closed (the
# memory a crawl costs per file: README, bench-scale). An unmounted store
# has no daemon section.
case_stats_daemon() {
	pd_mount || fail mount
	mkdir "$MNT/d" || fail mkdir
	local i before now
	# the count before the burst: on a loaded machine the idle second after
	# it may pass before the checks below are done
	before=$(heap_give_backs) || fail "heap_give_backs"
	for ((i = 0; i < 200; i++)); do
		printf '<html><body><p>page %d of the daemon case</p></body></html>\n' "$i" >"$MNT/d/p$i.html" || fail "write p$i"
	done
	exec 7<"$MNT/d/p0.html" || fail "open p0"
	local js states
	# The kernel sends a file's RELEASE without waiting for it, and over
	# io_uring the stats request may be served before the last page's
	# release, which pins that file's state while it runs: the count is
	# asked again until that release is done (a state that stays is a leak)
	for ((i = 0; i < 30; i++)); do
		js=$("$PD_BIN" stats "$MNT" --json) || fail "pagededup stats --json of the mount"
		states=$(py "$js" <<<'import sys, json; print(json.loads(sys.argv[1])["daemon"]["file_states"])') || fail "stats json"
		[ "$states" = 1 ] && break
		sleep 0.1
	done
	exec 7<&-
	py "$js" <<'EOF' || exit 1
import sys, json
from fsutil import *
d = json.loads(sys.argv[1]).get("daemon")
check(isinstance(d, dict), "the mount's stats have no daemon section")
check(d["inodes_held"] >= 201, "inodes held %d, want the 200 files and their directory" % d["inodes_held"])
eq(d["file_states"], 1, "file states with one file open")
for k in ("staged_bytes", "sign_queue", "signed_by_thread", "signed_by_writers", "signed_by_drain", "delta_queue", "delta_dropped"):
    check(isinstance(d.get(k), int) and d[k] >= 0, "daemon %s: %r" % (k, d.get(k)))
check(d["signed_by_thread"] + d["signed_by_writers"] + d["signed_by_drain"] + d["sign_queue"] >= 200,
      "pages signed or queued: %r" % d)
check(isinstance(d.get("heap_give_backs"), int), "daemon heap_give_backs: %r" % d.get("heap_give_backs"))
EOF
	# Once the burst of pages is over and the daemon has had nothing to do
	# for a second, its heap's free pages go back to the system.
	for ((i = 0; i < 100; i++)); do
		now=$(heap_give_backs) || fail "heap_give_backs"
		[ "$now" -gt "$before" ] && break
		sleep 0.2
	done
	[ "$now" -gt "$before" ] || fail "the heap was not given back after the burst: $before, then $now after 20 s idle"
	"$PD_BIN" stats "$MNT" | grep -q '^daemon: .* inodes held (0 with a file state)' ||
		fail "the text stats' daemon line: $("$PD_BIN" stats "$MNT" | grep daemon)"
	pd_umount || fail umount
	js=$("$PD_BIN" stats "$STORE" --json) || fail "pagededup stats --json"
	py "$js" <<'EOF' || exit 1
import sys, json
from fsutil import *
check("daemon" not in json.loads(sys.argv[1]), "an unmounted store's stats have a daemon section")
EOF
}

case_nodedup() {
	pd_mount nodedup || fail "mount -o nodedup"
	py <<'EOF' || exit 1
import os
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
X = b"no dedup please " * 100
write(M + "/a", X); write(M + "/b", X)
wait_blobs(S, 2, "two identical files with -o nodedup")
eq((read(M + "/a"), read(M + "/b")), (X, X), "contents")
eq((md5x(M + "/a"), md5x(M + "/b")), (md5(X), md5(X)), "md5 attributes with nodedup")
eq((refcount(M + "/a"), refcount(M + "/b")), (1, 1), "refcounts with separate blobs")
os.unlink(M + "/a")
wait_blobs(S, 1, "after unlinking one")
eq(read(M + "/b"), X, "the other after unlinking one")
EOF
	pd_umount || fail umount
}

case_sync_blobs() {
	pd_mount sync_blobs || fail "mount -o sync_blobs"
	py <<'EOF' || exit 1
import os
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
X, Y = b"durable " * 1000, b"other " * 10
write(M + "/a", X); write(M + "/b", X); write(M + "/c", Y)
wait_blobs(S, 2, "with -o sync_blobs")
eq((refcount(M + "/a"), refcount(M + "/c")), (2, 1), "refcounts with sync_blobs")
eq((read(M + "/a"), read(M + "/b"), read(M + "/c")), (X, X, Y), "contents")
EOF
	pd_umount || fail umount
}

case_huge_2g() {
	[ "${PD_SKIP_HUGE:-0}" = 1 ] && skip "PD_SKIP_HUGE=1"
	local avail
	avail=$(df -B1 --output=avail "$PD_TMP" | tail -1 | tr -d ' ')
	[ "$avail" -gt $((6 * 1024 * 1024 * 1024)) ] || skip "less than 6 GB free in $PD_TMP"
	pd_mount || fail mount
	local pat="<html>2 GB of a repeated pattern: 0123456789abcdefghijklmnopqrstuvwxyz</html>"
	local want got
	want=$(yes "$pat" | head -c $((2048 * 1024 * 1024)) | md5sum | cut -c1-32)
	yes "$pat" | dd of="$MNT/big" bs=1M count=2048 iflag=fullblock status=none || fail "dd of 2 GB into the mount"
	expect_eq "$(stat -c %s "$MNT/big")" 2147483648 "size of the 2 GB file"
	got=$(md5sum <"$MNT/big" | cut -c1-32)
	expect_eq "$got" "$want" "md5sum of the 2 GB file read through the mount"
	expect_eq "$(pd_xattr "$MNT/big" user.dedup.md5)" "$want" "md5 attribute of the 2 GB file"
	pd_wait_blobs 1 || fail "blob count"
	rm "$MNT/big" || fail rm
	pd_wait_blobs 0 || fail "blob count after rm"
	pd_umount || fail umount
}

case_damaged_blob() {
	pd_mount || fail mount
	py "$PD_TMP/damaged.x" <<'EOF' || exit 1
import os, sys, random
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
X = random.Random(13).randbytes(300000)
write(M + "/a", X); write(M + "/b", X)
wait_blobs(S, 1, "two copies")
write(sys.argv[1], X)
EOF
	pd_umount || fail umount
	py "$PD_TMP/damaged.x" <<'EOF' || exit 1
import os, sys
from fsutil import *
S = os.environ["STORE"]
X = read(sys.argv[1])
b = find_blobs(S, md5(X))
check(len(b) == 1, "stored blob of the content not found: %r" % blob_files(S))
damage_blob(S, b[0], at=150000, n=1)
EOF
	pd_mount -n -s "$STORE" || fail remount
	py "$PD_TMP/damaged.x" <<'EOF' || exit 1
import os, sys, errno
from fsutil import *
M = os.environ["MNT"]
X = read(sys.argv[1])
for name in ("a", "b"):
    got = b""
    err = None
    try:
        with open(M + "/" + name, "rb", buffering=0) as f:
            while True:
                chunk = f.read(65536)
                if not chunk:
                    break
                got += chunk
    except OSError as e:
        err = e.errno
    check(got == X[:len(got)], "%s: the bytes read before the error are wrong (%d bytes)" % (name, len(got)))
    check(err is not None, "%s: a damaged blob was read to the end without an error (%d bytes, %s)" % (
        name, len(got), "the original bytes?!" if got == X else "damaged bytes"))
    eq(errno.errorcode.get(err), "EIO", "%s: error reading a damaged blob" % name)
EOF
	if cat "$MNT/a" >/dev/null 2>&1; then fail "cat of a file on a damaged blob succeeded"; fi
	pd_umount --no-fsck || fail umount
	note "fsck of the store with a damaged blob (not judged):"
	"$PD_BIN" fsck "$STORE" 2>&1 | head -10
}

case_second_daemon_refused() {
	pd_mount || fail mount
	local m2=$PD_TMP/second.mnt rc=0
	mkdir -p "$m2"
	echo "$m2 - 0 /dev/null" >>"$PD_TMP/mounts"
	timeout 30 "$PDFS_BIN" "$STORE" "$m2" -f >"$PD_TMP/second.out" 2>"$PD_TMP/second.err" || rc=$?
	if mountpoint -q "$m2"; then fusermount3 -u "$m2"; fail "a second daemon mounted the same store"; fi
	[ "$rc" != 0 ] || fail "a second daemon (-f) on the same store exited 0"
	[ "$rc" != 124 ] || fail "a second daemon (-f) on the same store was still running after 30 s"
	[ -s "$PD_TMP/second.err" ] || fail "a second daemon said nothing on stderr"
	note "second daemon (exit $rc): $(head -3 "$PD_TMP/second.err")"
	rc=0
	timeout 30 "$PDFS_BIN" "$STORE" "$m2" >"$PD_TMP/second.out" 2>"$PD_TMP/second.err" || rc=$?
	if mountpoint -q "$m2"; then fusermount3 -u "$m2"; fail "a second (daemonizing) daemon mounted the same store"; fi
	[ "$rc" != 0 ] || fail "a second daemon (daemonizing) on the same store exited 0"
	echo still >"$MNT/f" && [ "$(cat "$MNT/f")" = still ] || fail "the first mount stopped working"
	pd_umount || fail umount
}

case_store_creation() {
	local s rc
	# the daemon makes no store: an empty or missing directory is refused
	# and stays as it was (tests/fs/t_operate.sh: no_store_by_accident)
	s=$PD_TMP/empty.store
	mkdir "$s" || fail mkdir
	rc=0; pd_mount -n -s "$s" >/dev/null 2>&1 || rc=$?
	[ "$rc" != 0 ] || fail "an empty directory was mounted as a store"
	expect_eq "$(ls -A "$s")" "" "the empty directory after the refused mount"
	s=$PD_TMP/missing.store
	rc=0; pd_mount -n -s "$s" >/dev/null 2>&1 || rc=$?
	[ "$rc" != 0 ] || fail "a missing directory was mounted as a store"
	[ -e "$s" ] && fail "a store was made in a missing directory"
	# mkfs with a size hint
	s=$PD_TMP/mkfs.store
	"$PD_BIN" mkfs "$s" --expected-pages 1000 || fail "pagededup mkfs --expected-pages 1000"
	for p in meta packs staging filter; do
		[ -e "$s/$p" ] || fail "store made by mkfs lacks $p"
	done
	pd_fsck "$s" || fail "fsck of a new store"
	pd_mount -n -s "$s" || fail "mount after mkfs"
	echo y >"$MNT/y" || fail write
	pd_umount || fail umount
}

case_daemonize() {
	local s=$PD_TMP/daemon.store m=$PD_TMP/daemon.mnt pid i
	"$PD_BIN" mkfs "$s" >/dev/null || fail mkfs
	mkdir -p "$m"
	"$PDFS_BIN" "$s" "$m" >"$PD_TMP/daemon.out" 2>&1 </dev/null || fail "pagededupfs (daemonizing) exited non-zero: $(cat "$PD_TMP/daemon.out")"
	pid=$(pgrep -f -- "$PDFS_BIN $s" | head -1)
	pd_register_mount "$m" "$pid" "$PD_TMP/daemon.out"
	mountpoint -q "$m" || fail "not mounted when pagededupfs returned"
	[ -n "$pid" ] || fail "no daemon process found with pgrep -f '$PDFS_BIN $s'"
	echo hello >"$m/f" && [ "$(cat "$m/f")" = hello ] || fail "write/read through the daemonized mount"
	fusermount3 -u "$m" || fail "fusermount3 -u"
	for i in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$pid" 2>/dev/null && fail "daemon $pid still running 60 s after unmount"
	if pd_sanitizer_report "$PD_TMP/daemon.out"; then cat "$PD_TMP/daemon.out"; fail "sanitizer report"; fi
	pd_fsck "$s" || fail fsck
}

case_fstab_mount() {
	# An fstab line "STORE MNT fuse.pagededupfs defaults 0 0" and `mount MNT`:
	# mount(8) runs mount.fuse, which runs `pagededupfs STORE MNT -o ...`
	# with PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:... (where
	# `make install` puts it). The binary under test is linked there for the
	# moment of the mount; a private fstab (mount --fstab) leaves /etc/fstab
	# alone.
	local link=/usr/local/bin/pagededupfs
	[ -x /sbin/mount.fuse ] || [ -x /usr/sbin/mount.fuse ] || skip "mount.fuse (package fuse3) is not installed"
	pd_host_lock || fail "the host-wide lock" # the link is on every script's PATH
	[ -e "$link" ] && skip "$link is installed; not replacing it to test the fstab mount"
	local s=$PD_TMP/fstab.store m=$PD_TMP/fstab.mnt pid i rc
	"$PD_BIN" mkfs "$s" >/dev/null || fail mkfs
	mkdir -p "$m"
	printf '%s %s fuse.pagededupfs defaults 0 0\n' "$s" "$m" >"$PD_TMP/fstab"
	ln -s "$PDFS_BIN" "$link" || fail "cannot link $link"
	mount --fstab "$PD_TMP/fstab" "$m" 9>&- # the daemon does not keep the lock
	rc=$?
	rm -f "$link"
	[ $rc -eq 0 ] || fail "mount MNT with an fstab line"
	pid=$(pgrep -f -- "$s" | head -1)
	pd_register_mount "$m" "$pid"
	mountpoint -q "$m" || fail "not mounted after mount MNT"
	expect_eq "$(findmnt -n -o FSTYPE "$m")" fuse.pagededupfs "file system type"
	echo a >"$m/a" && echo a >"$m/b" || fail write
	expect_eq "$(pd_xattr "$m/b" user.dedup.refcount)" 2 "refcount through the fstab mount"
	umount "$m" || fail umount
	for i in $(seq 1 600); do [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && fail "daemon still running 60 s after umount"
	pd_fsck "$s" || fail fsck
}

pd_case identical_share_blob
pd_case store_layout
pd_case twins_permission
pd_case recrawl_same_bytes
pd_case overwrite_moves_refcounts
pd_case truncate_moves_refcounts
pd_case rename_and_twins
pd_case unlink_frees
pd_case hardlink
pd_case md5_collision
pd_case dedup_attrs_readonly
pd_case sealed_after_close
pd_case stats_exact
pd_case stats_daemon
pd_case nodedup
pd_case sync_blobs
PD_CASE_TIMEOUT=600 pd_case huge_2g
pd_case damaged_blob
pd_case second_daemon_refused
pd_case store_creation
pd_case daemonize
pd_case fstab_mount
pd_finish
