#!/usr/bin/env bash
# Faults: the backing disk fills up; the LMDB map fills up.
. "$(dirname "$0")/lib.sh"

# A store on a small tmpfs: writers get ENOSPC, everything stored stays
# readable, the daemon keeps running, and once pages are deleted the store
# takes new ones again.
case_disk_full() {
	local small=$PD_TMP/small
	mkdir -p "$small"
	mount -t tmpfs -o size=48m tmpfs "$small" || skip "cannot mount a tmpfs here"
	echo "$small - 0 /dev/null" >>"$PD_TMP/mounts"
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
# a failed page does not leave a broken file: it reads as what was stored
# before (nothing) or is absent
# free space through the mount, then store new pages again
victims = sorted(stored)[: len(stored) // 2]
for path in victims:
    os.unlink(path)
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

pd_case disk_full
pd_case map_full
pd_finish
