#!/usr/bin/env bash
# Security through a pagededupfs mount: the daemon run by an ordinary user
# with allow_other (it always mounts with default_permissions), what other
# users may learn through the dedup attributes, names and attribute values
# chosen by clients that must never become paths in the store, hostile
# extended attributes, and MD5-colliding pages written by another user.
#
# The users pd-owner (owns the store and runs the daemon), pd-alice and
# pd-bob are made with useradd when missing and removed at exit; /dev/fuse
# and /etc/fuse.conf are opened to ordinary users for the run and restored
# (see pd_users and pd_user_fuse in lib.sh). Every case mounts a store of
# its own and ends with pd_umount (clean daemon exit, clean fsck).
. "$(dirname "$0")/lib.sh"
pd_require

OWNER=pd-owner ALICE=pd-alice BOB=pd-bob
if ! { pd_users $OWNER $ALICE $BOB && pd_user_fuse; } >"$PD_TMP/host.log" 2>&1; then
	not_ok host_setup
	sed 's/^/# /' "$PD_TMP/host.log"
	pd_finish
fi

# mount_as_owner: a new store owned by pd-owner, its daemon run by pd-owner,
# open to every user.
mount_as_owner() {
	pd_mount -u $OWNER allow_other || fail "mount as $OWNER"
}

# home NAME MODE: a directory /NAME in the mount owned by user NAME.
home() {
	mkdir "$MNT/$1" && chown "$1:" "$MNT/$1" && chmod "$2" "$MNT/$1" || fail "make /$1"
}

# The daemon runs as pd-owner, the store is pd-owner's alone, pages written
# through the mount belong to their writers, and root can still unmount.
case_daemon_as_user() {
	mount_as_owner
	local uid
	uid=$(awk '/^Uid:/ { print $2 "," $3 "," $4 "," $5 }' "/proc/$PDFS_PID/status")
	expect_eq "$uid" "$(id -u $OWNER),$(id -u $OWNER),$(id -u $OWNER),$(id -u $OWNER)" "uids of the daemon"
	expect_eq "$(awk '$2 == "'"$MNT"'" { print $3 }' /proc/self/mounts)" fuse.pagededupfs "type of the mount"
	grep -q " $MNT fuse.pagededupfs .*default_permissions.*allow_other" /proc/self/mounts ||
		grep -q " $MNT fuse.pagededupfs .*allow_other.*default_permissions" /proc/self/mounts ||
		fail "mount options: $(grep " $MNT " /proc/self/mounts)"
	home $ALICE 0755
	run_as $ALICE sh -c "echo '<p>alice</p>' > '$MNT/$ALICE/page.html'" || fail "alice writes a page"
	expect_eq "$(stat -c %U "$MNT/$ALICE/page.html")" $ALICE "owner of alice's page"
	expect_eq "$(run_as $BOB cat "$MNT/$ALICE/page.html")" "<p>alice</p>" "bob reads alice's public page"
	pd_wait_blobs 1 || fail "one blob"
	# The store: pd-owner's, closed to everyone else.
	local p bad
	bad=$(find "$STORE" ! -user $OWNER -printf '%p %u\n')
	[ -z "$bad" ] || fail "files in the store not owned by $OWNER: $bad"
	bad=$(find "$STORE" -perm /077 -printf '%p %m\n')
	[ -z "$bad" ] || fail "files in the store open to group or others: $bad"
	for p in "$STORE" "$STORE/packs" "$STORE/meta/data.mdb" "$(find "$STORE/packs" -type f | head -1)"; do
		expect_fail run_as $ALICE cat "$p" 2>/dev/null
		expect_fail run_as $ALICE ls "$p" >/dev/null 2>&1
	done
	run_as $ALICE "$PD_PY_ANY" - "$STORE" <<'EOF' || fail "alice reaches the store"
import os, sys, errno
from fsutil import *
S = sys.argv[1]
expect_errno(errno.EACCES, os.listdir, S)
expect_errno(errno.EACCES, os.stat, S + "/packs")
expect_errno(errno.EACCES, os.open, S + "/meta/data.mdb", os.O_RDONLY)
EOF
	pd_umount || fail umount
}

# Another user's private pages: not readable, not listable, no attribute
# of them reachable, nothing of them changeable.
case_private_pages() {
	mount_as_owner
	home $ALICE 0700
	home $BOB 0755
	local page="<html><body>the private notes of alice</body></html>"
	run_as $ALICE sh -c "echo '$page' > '$MNT/$ALICE/private.html'" || fail "alice writes"
	mkdir "$MNT/pub" && chown $ALICE: "$MNT/pub" || fail "make /pub"
	run_as $ALICE sh -c "echo shared > '$MNT/pub/a.html' && chmod 0644 '$MNT/pub/a.html'" || fail "alice writes pub"
	run_as $BOB "$PD_PY_ANY" - "$MNT" "$ALICE" <<'EOF' || fail "bob reached alice's files"
import os, sys
from errno import *
from fsutil import *
M, alice = sys.argv[1], sys.argv[2]
priv = "%s/%s/private.html" % (M, alice)
expect_errno(EACCES, os.listdir, M + "/" + alice)
expect_errno(EACCES, os.stat, priv)
expect_errno(EACCES, os.open, priv, os.O_RDONLY)
expect_errno(EACCES, os.open, priv, os.O_WRONLY | os.O_TRUNC)
for n in ("md5", "refcount", "twins", "near", "simhash"):
    expect_errno(EACCES, os.getxattr, priv, "user.dedup." + n)
expect_errno(EACCES, os.listxattr, priv)
expect_errno(EACCES, os.open, M + "/" + alice + "/new.html", os.O_WRONLY | os.O_CREAT, 0o644)
expect_errno(EACCES, os.unlink, priv)
expect_errno(EACCES, os.rename, priv, M + "/pd-bob/stolen.html")
expect_errno(EACCES, os.link, priv, M + "/pd-bob/stolen.html")
# a page alice made readable: bob reads it, and changes nothing of it
pub = M + "/pub/a.html"
eq(read(pub), b"shared\n", "alice's public page read by bob")
expect_errno(EACCES, os.open, pub, os.O_WRONLY)
expect_errno(EACCES, os.truncate, pub, 0)
expect_errno(EPERM, os.chmod, pub, 0o666)
expect_errno(EPERM, os.chown, pub, os.getuid(), -1)
expect_errno(EPERM, os.utime, pub, (0, 0))
expect_errno(EACCES, os.setxattr, pub, "user.mine", b"1")
expect_errno(EACCES, os.unlink, pub)
expect_errno(EACCES, os.rename, pub, M + "/pub/b.html")
eq(read(pub), b"shared\n", "alice's public page after bob's attempts")
EOF
	expect_eq "$(cat "$MNT/$ALICE/private.html")" "$page" "alice's private page"
	expect_eq "$(stat -c '%U %a' "$MNT/pub/a.html")" "$ALICE 644" "owner and mode of pub/a.html"
	[ ! -e "$MNT/$BOB/stolen.html" ] || fail "bob got a name for alice's page"
	pd_umount || fail umount
}

# twins_as USER FILE: the twins of FILE as USER sees them, one line, sorted.
twins_as() {
	local t
	t=$(run_as "$1" getfattr --absolute-names --only-values -n user.dedup.twins "$2" 2>/dev/null)
	printf '%s\n' "$t" | grep . | sort | tr '\n' ' '
}

# The twins answer lists only paths the caller may reach: search
# permission on every directory of the path and read permission on the
# file, as open() would need. The refcount is a count of every copy,
# reachable or not: it tells a user that some file somewhere holds the bytes
# he wrote (a confirmation-of-file channel, inherent in counting), never
# where or whose.
case_twins_filtered() {
	mount_as_owner
	home $ALICE 0700
	home $BOB 0755
	mkdir -m 1777 "$MNT/pub" || fail "mkdir pub"
	local page="<html><body>the same page, saved twice</body></html>"
	run_as $ALICE sh -c "echo '$page' > '$MNT/$ALICE/page.html'" || fail "alice writes"
	run_as $BOB sh -c "echo '$page' > '$MNT/$BOB/copy.html'" || fail "bob writes"
	pd_wait_blobs 1 || fail "one blob for the two copies"
	local A=/$ALICE/page.html B=/$BOB/copy.html
	expect_eq "$(twins_as $BOB "$MNT$B")" "" "twins of bob's copy for bob (alice's dir is 0700)"
	expect_eq "$(twins_as root "$MNT$B")" "$A " "twins of bob's copy for root"
	expect_eq "$(twins_as $ALICE "$MNT$A")" "$B " "twins of alice's page for alice (bob's dir 0755, file 0644)"
	expect_eq "$(run_as $BOB getfattr --absolute-names --only-values -n user.dedup.md5 "$MNT$B")" \
		"$(printf '%s\n' "$page" | md5sum | cut -c1-32)" "md5 of bob's copy"
	note "refcount of bob's copy, for bob: $(run_as $BOB getfattr --absolute-names --only-values -n user.dedup.refcount "$MNT$B") (counts alice's private copy too)"
	run_as $BOB chmod 0600 "$MNT$B" || fail chmod
	expect_eq "$(twins_as $ALICE "$MNT$A")" "" "twins for alice when bob's copy is 0600"
	run_as $BOB chmod 0644 "$MNT$B" && run_as $BOB chmod 0711 "$MNT/$BOB" || fail chmod
	expect_eq "$(twins_as $ALICE "$MNT$A")" "$B " "twins for alice when bob's dir is 0711 (search only)"
	run_as $BOB chmod 0700 "$MNT/$BOB" || fail chmod
	expect_eq "$(twins_as $ALICE "$MNT$A")" "" "twins for alice when bob's dir is 0700"
	run_as $BOB chmod 0755 "$MNT/$BOB" || fail chmod
	# alice's page: readable by her group only, then by bob's group
	run_as $ALICE chmod 0711 "$MNT/$ALICE" && run_as $ALICE chmod 0640 "$MNT$A" || fail chmod
	expect_eq "$(twins_as $BOB "$MNT$B")" "" "twins for bob: alice's page 0640, group $ALICE"
	chgrp $BOB "$MNT$A" || fail chgrp
	expect_eq "$(twins_as $BOB "$MNT$B")" "$A " "twins for bob: alice's page 0640, group $BOB"
	# ... and by a supplementary group of bob's
	chgrp $ALICE "$MNT$A" || fail chgrp
	local t
	t=$(cd "$PD_TMP" && setpriv --reuid="$(id -u $BOB)" --regid="$(id -g $BOB)" --groups="$(id -g $ALICE)" -- \
		getfattr --absolute-names --only-values -n user.dedup.twins "$MNT$B" 2>/dev/null)
	expect_eq "$t" "$A" "twins for bob in group $ALICE: alice's page 0640, group $ALICE"
	run_as $ALICE chmod 0600 "$MNT$A" || fail chmod
	expect_eq "$(twins_as $BOB "$MNT$B")" "" "twins for bob: alice's page 0600 in a 0711 dir"
	# one inode, two names: only the reachable name is told
	run_as $ALICE ln "$MNT$A" "$MNT/pub/link.html" && run_as $ALICE chmod 0644 "$MNT$A" &&
		run_as $ALICE chmod 0700 "$MNT/$ALICE" || fail "hard link"
	expect_eq "$(twins_as $BOB "$MNT$B")" "/pub/link.html " "twins for bob: alice's page linked into /pub"
	expect_eq "$(twins_as root "$MNT$B")" "$A /pub/link.html " "twins for root with the link"
	run_as $ALICE rm "$MNT/pub/link.html" || fail "rm link"
	expect_eq "$(twins_as $BOB "$MNT$B")" "" "twins for bob after the link went"
	# near-duplicate answers follow the same rule (the comment is not text:
	# the same simhash, distance 0, marked: the page has few words)
	run_as $BOB sh -c "echo '$page <!-- -->' > '$MNT/$BOB/near.html'" || fail "bob writes near"
	local n
	n=$(run_as $BOB getfattr --absolute-names --only-values -n user.dedup.near "$MNT/$BOB/near.html") ||
		fail "getfattr user.dedup.near as bob"
	expect_eq "$n" "$(printf '0?\t1.000\tnear\t%s' "$B")" "near for bob: his variant, not alice's page"
	n=$(getfattr --absolute-names --only-values -n user.dedup.near "$MNT/$BOB/near.html") || fail "near as root"
	expect_eq "$n" "$(printf '0?\t1.000\tnear\t%s\n0?\t1.000\tnear\t%s' "$A" "$B")" "near for root: both"
	pd_umount || fail umount
}

# A page crafted to collide in MD5 with another user's private page neither
# replaces it nor merges with it, nor tells its writer anything of it.
case_collision_across_users() {
	local ca=$PD_DATA/md5-collision-a.bin cb=$PD_DATA/md5-collision-b.bin
	[ -f "$ca" ] && [ -f "$cb" ] || fail "test data missing: $ca $cb"
	mount_as_owner
	home $ALICE 0700
	home $BOB 0755
	cp "$ca" "$cb" "$PD_TMP/" && chmod 0644 "$PD_TMP"/md5-collision-* || fail "copy test data"
	local prog='
import os, sys
from fsutil import *
src, dst = sys.argv[1], sys.argv[2]
write(dst, read(src) + b"<p>the same suffix after either block</p>\n" * 100)
'
	run_as $ALICE "$PD_PY_ANY" -c "$prog" "$PD_TMP/md5-collision-a.bin" "$MNT/$ALICE/a.html" || fail "alice writes A"
	run_as $BOB "$PD_PY_ANY" -c "$prog" "$PD_TMP/md5-collision-b.bin" "$MNT/$BOB/b.html" || fail "bob writes B"
	run_as $BOB "$PD_PY_ANY" - "$MNT/$BOB/b.html" "$PD_TMP/md5-collision-b.bin" <<'EOF' || fail "bob's view"
import sys
from fsutil import *
f, cb = sys.argv[1], sys.argv[2]
B = read(cb) + b"<p>the same suffix after either block</p>\n" * 100
eq(read(f), B, "bob's page B")
eq(refcount(f), 1, "refcount of B for bob")
eq(twins(f), set(), "twins of B for bob")
EOF
	py "$MNT" "$ALICE" "$BOB" "$ca" "$cb" <<'EOF' || fail "root's view"
import os, sys
from fsutil import *
M, alice, bob, ca, cb = sys.argv[1:6]
S = os.environ["STORE"]
suffix = b"<p>the same suffix after either block</p>\n" * 100
A, B = read(ca) + suffix, read(cb) + suffix
check(A != B and md5(A) == md5(B), "test data: the suffixed pair does not collide")
a, b = "%s/%s/a.html" % (M, alice), "%s/%s/b.html" % (M, bob)
eq(read(a), A, "alice's page A after bob wrote B")
eq(read(b), B, "bob's page B")
eq((md5x(a), md5x(b)), (md5(A), md5(A)), "md5 attributes")
eq((refcount(a), refcount(b)), (1, 1), "refcounts")
eq((twins(a), twins(b)), (set(), set()), "twins for root")
wait_blobs(S, 2, "A and B")
eq(sorted(blob_bytes(S, k) for k in blob_files(S)), sorted([A, B]), "the two stored blobs")
EOF
	pd_umount || fail umount
}

# Nobody sets or removes a dedup attribute, on his own files or others'.
case_dedup_attrs_refused() {
	mount_as_owner
	home $ALICE 0755
	home $BOB 0755
	run_as $ALICE sh -c "echo same > '$MNT/$ALICE/a.html'" || fail "alice writes"
	run_as $BOB sh -c "echo same > '$MNT/$BOB/b.html'" || fail "bob writes"
	if run_as $BOB setfattr -n user.dedup.md5 -v 00000000000000000000000000000000 "$MNT/$BOB/b.html" \
		2>"$PD_TMP/setfattr.err"; then
		fail "bob's setfattr -n user.dedup.md5 succeeded"
	fi
	grep -q 'Operation not permitted' "$PD_TMP/setfattr.err" || fail "setfattr said: $(cat "$PD_TMP/setfattr.err")"
	run_as $BOB "$PD_PY_ANY" - "$MNT" <<'EOF' || fail "bob changed a dedup attribute"
import os, sys
from errno import *
from fsutil import *
M = sys.argv[1]
own, other = M + "/pd-bob/b.html", M + "/pd-alice/a.html"
names = ("md5", "refcount", "twins", "near", "simhash", "stats", "", "x/../../y")
for n in names:
    for flags in (0, os.XATTR_CREATE, os.XATTR_REPLACE):
        expect_errno(EPERM, os.setxattr, own, "user.dedup." + n, b"1", flags)
    expect_errno(EPERM, os.removexattr, own, "user.dedup." + n)
    # on alice's file the kernel refuses first (no write permission)
    expect_errno((EPERM, EACCES), os.setxattr, other, "user.dedup." + n, b"1")
    expect_errno((EPERM, EACCES), os.removexattr, other, "user.dedup." + n)
    expect_errno((EPERM, EACCES), os.setxattr, M, "user.dedup." + n, b"{}")
expect_errno(EPERM, os.setxattr, M + "/pd-bob", "user.dedup.stats", b"{}")
eq(md5x(own), md5(b"same\n"), "md5 of bob's file after the refused changes")
eq(refcount(own), 2, "refcount of bob's file after the refused changes")
check(not [n for n in os.listxattr(own) if n.startswith("user.dedup.")], "dedup attributes stored on bob's file")
# his own attributes are his to set
os.setxattr(own, "user.dedupx", b"mine")
eq(os.getxattr(own, "user.dedupx"), b"mine", "an ordinary attribute")
EOF
	expect_eq "$(pd_xattr "$MNT/$ALICE/a.html" user.dedup.refcount)" 2 "refcount for root"
	pd_umount || fail umount
}

# Names, symlink targets and attribute values chosen by clients stay names
# and values: blob files are named only by the MD5 of their bytes, staging
# files only by numbers, and nothing appears outside the store.
case_names_stay_inside() {
	pd_mount || fail mount # a root daemon: a path escape would not be stopped by permissions
	local tok=pdescape$$x
	py "$tok" <<'EOF' || exit 1
import os, sys
from errno import *
from fsutil import *
M, S, tok = os.environ["MNT"], os.environ["STORE"], sys.argv[1]
# the names of the store's own entries are taken by directories below
names = ["..%s" % tok, "%s.." % tok, "...", "....", "..\\..\\%s" % tok, "a\\b%s" % tok,
         "\\", ".%s" % tok, " ..", ".. ", "-%s" % tok, "%s\n..\n" % tok, "\t%s" % tok,
         "meta", "filter", "lock", "d41d8cd98f00b204e9800998ecf8427e",
         "%%2e%%2e%%2f%s" % tok, "%s\udcff\udcfe" % tok, "x" * 255, "." + "." * 254]
bodies = {}
for i, n in enumerate(names):
    p = os.path.join(M, n)
    body = b"<p>page %d</p>\n" % (i % 5)
    write(p, body)
    bodies[n] = body
expect_errno(ENAMETOOLONG, write, os.path.join(M, "y" * 256), b"too long")
expect_errno(ENOENT, write, os.path.join(M, "nodir", "..", "x"), b"x")
os.mkdir(os.path.join(M, "..d%s" % tok))
os.makedirs(os.path.join(M, "objects", "d41", "..%s" % tok))
write(os.path.join(M, "objects", "d41", "..%s" % tok, "d41d8cd98f00b204e9800998ecf8427e"), b"in a dir named objects\n")
os.makedirs(os.path.join(M, "staging", "1.1"))
write(os.path.join(M, "staging", "1.1", "x"), b"in a dir named staging\n")
# renames to and from such names
os.rename(os.path.join(M, "..%s" % tok), os.path.join(M, "..d%s" % tok, "..r%s" % tok))
del bodies["..%s" % tok]
bodies[os.path.join("..d%s" % tok, "..r%s" % tok)] = b"<p>page 0</p>\n"
# symlinks with targets that lead out, and a hard link to one
targets = {"up": "../../%s" % tok, "abs": S + "/objects", "etc": "/etc/passwd",
           "deep": "../" * 40 + tok, "self": "self"}
for n, t in targets.items():
    os.symlink(t, os.path.join(M, "l-" + n))
    eq(os.readlink(os.path.join(M, "l-" + n)), t, "target of l-" + n)
os.link(os.path.join(M, "l-up"), os.path.join(M, "..hl%s" % tok), follow_symlinks=False)
# attribute names and values that look like paths
f = os.path.join(M, "x" * 255)
vals = {"user.../../%s" % tok: b"../../etc/passwd", "user./%s" % tok: S.encode() + b"/objects/../../" + tok.encode(),
        "user.a/b": b"/etc/shadow\x00../%s" % tok.encode()}
for k, v in vals.items():
    os.setxattr(f, k, v)
    eq(os.getxattr(f, k), v, "attribute " + k)
for n, body in bodies.items():
    eq(read(os.path.join(M, n)), body, "content of %r" % n)
# a page whose bytes are a path into the store is only bytes
write(os.path.join(M, "path-bytes"), S.encode() + b"/objects/../../" + tok.encode())
EOF
	pd_remount || fail remount
	py "$tok" <<'EOF' || exit 1
import os, sys
from fsutil import *
M, tok = os.environ["MNT"], sys.argv[1]
eq(read(os.path.join(M, "..d%s" % tok, "..r%s" % tok)), b"<p>page 0</p>\n", "renamed page after remount")
eq(os.readlink(os.path.join(M, "..hl%s" % tok)), "../../%s" % tok, "hard-linked symlink after remount")
eq(os.getxattr(os.path.join(M, "x" * 255), "user.../../%s" % tok), b"../../etc/passwd", "attribute after remount")
# large pages go through staging/ (named by numbers only), and leave nothing there
big = os.urandom(3 << 20)
for n in ("..big%s" % tok, "..\\..\\big%s" % tok):
    write(os.path.join(M, n), big)
    eq(md5_file(os.path.join(M, n)), md5(big), "content of %r" % n)
EOF
	pd_umount || fail umount
	check_store_names "$STORE" "$tok"
}

# check_store_names STORE TOKEN: packs/ holds only pack-NNNNNNNN files,
# there are no blob files (objects/), every stored blob's bytes have the MD5
# its key says, staging/ is empty, no name in the store carries TOKEN, and
# no file named after TOKEN exists outside it.
check_store_names() {
	py "$1" "$2" <<'EOF' || exit 1
import os, re, sys
from fsutil import *
S, tok = sys.argv[1], sys.argv[2]
packs = os.path.join(S, "packs")
for f in os.listdir(packs):
    p = os.path.join(packs, f)
    check(re.fullmatch(r"pack-[0-9]{8}", f), "packs/%r is not a pack name" % f)
    check(os.path.isfile(p) and not os.path.islink(p), "packs/%s is not a plain file" % f)
check(not os.path.exists(os.path.join(S, "objects")), "blob files (objects/) in a store of packs")
rows = stored(S)
check(rows, "no stored blobs")
for key, size, ref, place, bad in rows:
    check(re.fullmatch(r"[0-9a-f]{32}(\.[0-9]+)?", key), "%r is not a blob key" % key)
    check(place.startswith("pack-"), "blob %s is not in a pack: %s" % (key, place))
    eq(md5(blob_bytes(S, key)), key[:32], "MD5 of the stored bytes of blob %s" % key)
eq(os.listdir(os.path.join(S, "staging")), [], "staging/ after unmount")
for d, dirs, files in os.walk(S):
    for n in dirs + files:
        check(tok not in n and not n.startswith(".."), "a client's name in the store: %r" % os.path.join(d, n))
for d in os.listdir(os.path.join(S, "meta")):
    # LMDB's files, the checkpoint (core/store/store_ckpt.c) and the
    # journal (core/store/store_journal.c)
    check(d.endswith(".mdb") or d in ("ckpt", "journal-0", "journal-1"),
          "meta/%r is neither an LMDB file nor the checkpoint nor the journal" % d)
EOF
	local out
	out=$(find / /tmp /etc "$PD_TMP" -xdev -maxdepth 4 -name "*$2*" 2>/dev/null | head)
	[ -z "$out" ] || fail "files named after a client's name outside the mount: $out"
}

# Extended attributes: hostile names and values get a clear error and store
# nothing; the limits (255-byte names, 64 KiB values) work exactly.
case_hostile_xattrs() {
	mount_as_owner
	home $BOB 0755
	run_as $BOB sh -c "echo page > '$MNT/$BOB/f'" || fail "bob writes"
	local prog='
import os, sys, ctypes, ctypes.util
from errno import *
from fsutil import *
f, who = sys.argv[1], sys.argv[2]
root = who == "root"
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
# names: the kernel allows 1..255 bytes; "user." alone names nothing (ext4: EINVAL)
expect_errno(ERANGE, os.setxattr, f, "user." + "n" * 251, b"v")
expect_errno(ERANGE, os.getxattr, f, "user." + "n" * 251)
expect_errno(ERANGE, os.setxattr, f, "", b"v")
for op in (lambda: os.setxattr(f, "user.", b"v"), lambda: os.getxattr(f, "user."),
           lambda: os.removexattr(f, "user.")):
    expect_errno(EINVAL, op)
n255 = "user." + "\x01\udcff/.." * 50
os.setxattr(f, n255, b"at the limit")
eq(os.getxattr(f, n255), b"at the limit", "255-byte name")
# other namespaces are not stored
others = ["trusted.x", "security.x", "system.x", "foo.x", "x", "userx", "USER.x", "user"]
for n in others:
    expect_errno((EPERM, EOPNOTSUPP), os.setxattr, f, n, b"v")
    expect_errno((ENODATA, EOPNOTSUPP, EPERM), os.getxattr, f, n)
    expect_errno((ENODATA, EOPNOTSUPP, EPERM), os.removexattr, f, n)
if not root:
    expect_errno(EPERM, os.setxattr, f, "trusted.x", b"v")
# values: empty, binary with NULs, 64 KiB exactly; one byte more is E2BIG
os.setxattr(f, "user.empty", b"")
eq(os.getxattr(f, "user.empty"), b"", "empty value")
binv = bytes(range(256)) * 3 + b"\x00" * 100 + b"../../etc/passwd\x00"
os.setxattr(f, "user.bin", binv)
eq(os.getxattr(f, "user.bin"), binv, "binary value")
big = os.urandom(65536)
os.setxattr(f, "user.big", big)
eq(os.getxattr(f, "user.big"), big, "64 KiB value")
expect_errno(E2BIG, os.setxattr, f, "user.big", big + b"x")
expect_errno(E2BIG, os.setxattr, f, "user.big2", b"\x00" * (1 << 20))
eq(os.getxattr(f, "user.big"), big, "64 KiB value after a larger one was refused")
# a buffer too small for the value: ERANGE, as getxattr(2) says
buf = ctypes.create_string_buffer(16)
r = libc.getxattr(os.fsencode(f), b"user.big", buf, ctypes.c_size_t(16))
eq((r, ctypes.get_errno()), (-1, ERANGE), "getxattr into a 16-byte buffer")
eq(libc.getxattr(os.fsencode(f), b"user.big", None, ctypes.c_size_t(0)), 65536, "getxattr size query")
want = {n255, "user.empty", "user.bin", "user.big"}
eq(set(os.listxattr(f)), want, "attributes stored")
for n in want:
    os.removexattr(f, n)
eq(os.listxattr(f), [], "attributes after removing them all")
eq(read(f), b"page\n", "content of the file")
'
	run_as $BOB "$PD_PY_ANY" -c "$prog" "$MNT/$BOB/f" $BOB || fail "as bob"
	python3 -c "$prog" "$MNT/$BOB/f" root || fail "as root"
	# Many attributes on one file: all kept; a list longer than the kernel's
	# 64 KiB limit for listxattr is E2BIG, each attribute still readable.
	run_as $BOB "$PD_PY_ANY" - "$MNT/$BOB/f" <<'EOF' || fail "many attributes"
import os, sys
from errno import *
from fsutil import *
f = sys.argv[1]
name = lambda i: "user.%04d-%s" % (i, "n" * 50)
for i in range(1000):
    os.setxattr(f, name(i), b"%d" % i * 8)
eq(sorted(os.listxattr(f)), sorted(name(i) for i in range(1000)), "1000 attributes")
for i in range(1000, 1200):
    os.setxattr(f, name(i), b"%d" % i)
expect_errno(E2BIG, os.listxattr, f)
for i in (0, 999, 1000, 1199):
    eq(os.getxattr(f, name(i)), b"%d" % i * (8 if i < 1000 else 1), name(i))
for i in range(1200):
    os.removexattr(f, name(i))
eq(os.listxattr(f), [], "after removing 1200 attributes")
EOF
	pd_umount || fail umount
}

pd_case daemon_as_user
pd_case private_pages
pd_case twins_filtered
pd_case collision_across_users
pd_case dedup_attrs_refused
pd_case names_stay_inside
pd_case hostile_xattrs
pd_finish
