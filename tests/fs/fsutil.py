"""Helpers for the mounted-filesystem tests (tests/fs/*.sh, model.py).

Kept to the standard library so that the tests run on a bare Debian with
python3.
"""
import ctypes
import ctypes.util
import errno
import hashlib
import os
import stat

ENAMES = errno.errorcode

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
AT_FDCWD = -100
SYS_renameat2 = {"x86_64": 316, "aarch64": 276, "riscv64": 276,
                 "i686": 353, "i386": 353, "armv7l": 382}

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def ename(e):
    return ENAMES.get(e, str(e))


def renameat2(old, new, flags):
    """renameat2(AT_FDCWD, old, AT_FDCWD, new, flags); raises OSError."""
    o, n = os.fsencode(old), os.fsencode(new)
    fn = getattr(_libc, "renameat2", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        r = fn(AT_FDCWD, o, AT_FDCWD, n, flags)
    else:
        sysno = SYS_renameat2[os.uname().machine]
        _libc.syscall.restype = ctypes.c_long
        r = _libc.syscall(ctypes.c_long(sysno), ctypes.c_int(AT_FDCWD), o,
                          ctypes.c_int(AT_FDCWD), n, ctypes.c_uint(flags))
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old)


def expect_errno(err, fn, *args, **kw):
    """fn(*args) must fail with errno err (or one of a tuple of errnos)."""
    errs = err if isinstance(err, tuple) else (err,)
    want = "/".join(ename(e) for e in errs)
    try:
        fn(*args, **kw)
    except OSError as e:
        if e.errno not in errs:
            raise AssertionError("%s%r: expected %s, got %s (%s)" % (
                getattr(fn, "__name__", fn), args, want, ename(e.errno), e))
        return
    raise AssertionError("%s%r: expected %s, but it succeeded" % (
        getattr(fn, "__name__", fn), args, want))


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def eq(got, want, what="value"):
    if got != want:
        g, w = repr(got), repr(want)
        if len(g) > 300:
            g = g[:300] + "..."
        if len(w) > 300:
            w = w[:300] + "..."
        raise AssertionError("%s: expected %s, got %s" % (what, w, g))


def write(path, data, mode=0o644, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    if isinstance(data, str):
        data = data.encode()
    fd = os.open(path, flags, mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    finally:
        os.close(fd)


def committed(mnt):
    """Every close() that returned is committed, so that a reader of the
    store's own files (stored(), `pagededup blobs STORE`) sees it: a seal
    may wait up to sync_ms for its batch (core/archive/seal_later.h), and
    a listing of the mount commits what waits (core/archive/ns_later.h)."""
    os.listdir(mnt)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def md5(data):
    return hashlib.md5(data).hexdigest()


def md5_file(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def user_xattrs(path, follow=False):
    """user.* attributes a client set (user.dedup.* excluded), as a dict."""
    out = {}
    try:
        names = os.listxattr(path, follow_symlinks=follow)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EPERM):
            return out
        raise
    for n in names:
        if n.startswith("user.") and not n.startswith("user.dedup."):
            out[n] = os.getxattr(path, n, follow_symlinks=follow)
    return out


def snapshot(root, content=True, times=False, owners=True, dir_nlink=True, xattrs=True):
    """A comparable picture of the tree below root.

    Returns (entries, groups): entries maps a relative path (bytes) to a
    tuple of its properties; groups is the set of hard-link groups (sorted
    tuples of paths sharing an inode) of regular files.
    """
    root = os.fsencode(root)
    entries = {}
    inodes = {}

    def visit(rel):
        p = os.path.join(root, rel) if rel else root
        st = os.lstat(p)
        fmt = stat.S_IFMT(st.st_mode)
        rec = {"type": fmt, "mode": stat.S_IMODE(st.st_mode)}
        if owners:
            rec["owner"] = (st.st_uid, st.st_gid)
        if times and fmt != stat.S_IFLNK:
            rec["mtime_ns"] = st.st_mtime_ns
        if fmt == stat.S_IFREG:
            rec["size"] = st.st_size
            rec["nlink"] = st.st_nlink
            if content:
                rec["md5"] = md5_file(p)
            inodes.setdefault(st.st_ino, []).append(rel)
        elif fmt == stat.S_IFLNK:
            rec["target"] = os.readlink(p)
            rec["size"] = st.st_size
        elif fmt == stat.S_IFDIR:
            if dir_nlink:
                rec["nlink"] = st.st_nlink
        if xattrs and fmt in (stat.S_IFREG, stat.S_IFDIR):
            rec["xattrs"] = tuple(sorted(user_xattrs(p).items()))
        entries[rel or b"."] = tuple(sorted(rec.items()))
        if fmt == stat.S_IFDIR:
            for name in sorted(os.listdir(p)):
                visit(os.path.join(rel, name) if rel else name)

    visit(b"")
    groups = set(tuple(sorted(v)) for v in inodes.values() if len(v) > 1)
    return entries, groups


def diff_snapshots(a, b, la="A", lb="B", limit=30):
    """Differences between two snapshots, as readable lines."""
    (ea, ga), (eb, gb) = a, b
    out = []
    for k in sorted(set(ea) | set(eb)):
        if k not in eb:
            out.append("%r: only in %s %r" % (k, la, dict(ea[k])))
        elif k not in ea:
            out.append("%r: only in %s %r" % (k, lb, dict(eb[k])))
        elif ea[k] != eb[k]:
            da, db = dict(ea[k]), dict(eb[k])
            keys = sorted(set(da) | set(db))
            out.append("%r: %s" % (k, ", ".join(
                "%s %s=%r %s=%r" % (f, la, da.get(f), lb, db.get(f))
                for f in keys if da.get(f) != db.get(f))))
    if ga != gb:
        out.append("hard-link groups differ: only %s %r; only %s %r" % (
            la, sorted(ga - gb), lb, sorted(gb - ga)))
    if len(out) > limit:
        out = out[:limit] + ["... %d more" % (len(out) - limit)]
    return out


DUP_PAGE = b"<html><head><title>dup</title></head><body>" + b"same words " * 300 + b"</body></html>\n"


def build_tree(root, seed=11):
    """A small tree with most kinds of entries and metadata, below root
    (which must not exist): files of edge sizes, duplicates, empty files and
    directories, modes, hard links, symlinks (one dangling), user xattrs and
    nanosecond mtimes."""
    import random
    rnd = random.Random(seed)
    j = lambda *p: os.path.join(root, *p)
    for d in ("", "sub", "sub/deeper", "emptydir", "privdir"):
        os.makedirs(j(d), exist_ok=True)
    files = {
        "a.txt": b"a",
        "empty": b"",
        "f4095": rnd.randbytes(4095),
        "f4096": rnd.randbytes(4096),
        "f4097": rnd.randbytes(4097),
        "big.bin": rnd.randbytes(1500000),
        "dup1.html": DUP_PAGE,
        "dup2.html": DUP_PAGE,
        "sub/dup3.html": DUP_PAGE,
        "sub/deeper/x.html": b"<html>x</html>\n",
        "sp ace": b"space\n",
        "mode0600": b"secret\n",
        "exec.sh": b"#!/bin/sh\necho hi\n",
        "ro": b"read only\n",
        "privdir/file": b"p\n",
        "xattr.txt": b"with attributes\n",
        "hard1": b"hard link content\n",
    }
    for name, data in files.items():
        write(j(name), data)
    os.link(j("hard1"), j("sub", "hard2"))
    os.symlink("nowhere", j("ldangling"))
    os.symlink("sub/deeper/x.html", j("lrel"))
    os.symlink("sub", j("ldir"))
    os.setxattr(j("xattr.txt"), "user.a", b"1")
    os.setxattr(j("xattr.txt"), "user.b", bytes(range(256)))
    os.setxattr(j("sub"), "user.dir", b"d")
    for name, mode in (("mode0600", 0o600), ("exec.sh", 0o755), ("ro", 0o444),
                       ("privdir", 0o700), ("emptydir", 0o750)):
        os.chmod(j(name), mode)
    t = 1500000000123456789
    for dirpath, dirs, fnames in os.walk(root, topdown=False):
        for n in fnames + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, n)
            t += 1000000007
            os.utime(p, ns=(t, t + 1), follow_symlinks=False)
        t += 3
        os.utime(dirpath, ns=(t, t + 2))


# --- pagededupfs specifics -----------------------------------------------

import json as _json
import re as _re
import time as _time


def dattr(path, name):
    """user.dedup.NAME of path, as bytes."""
    return os.getxattr(path, "user.dedup." + name)


def md5x(path):
    v = dattr(path, "md5")
    check(_re.fullmatch(rb"[0-9a-f]{32}", v) is not None,
          "user.dedup.md5 of %s is not 32 lowercase hex chars: %r" % (path, v))
    return v.decode()


def refcount(path):
    v = dattr(path, "refcount")
    check(_re.fullmatch(rb"[0-9]+", v) is not None,
          "user.dedup.refcount of %s is not a decimal number: %r" % (path, v))
    return int(v)


def twins(path):
    """The set of paths in user.dedup.twins (an absent attribute is no twins)."""
    try:
        v = dattr(path, "twins")
    except OSError as e:
        if e.errno == errno.ENODATA:
            return set()
        raise
    return set(l for l in v.split(b"\n") if l) if isinstance(v, bytes) else set()


def twins_str(path):
    return set(os.fsdecode(t) for t in twins(path))


def dstats(mnt):
    return _json.loads(os.getxattr(mnt, "user.dedup.stats"))


def stored(store):
    """The stored blobs as `pagededup blobs` lists them (read-only, works
    while the store is mounted): [(key, size, refcount, place, damaged)],
    key "<md5>" or "<md5>.N", place a pack record or a format 1 file."""
    import subprocess
    out = subprocess.run([os.environ["PD_BIN"], "blobs", store], check=True,
                         stdout=subprocess.PIPE).stdout.decode()
    rows = []
    for line in out.splitlines():
        f = line.split("\t")
        rows.append((f[0], int(f[1]), int(f[2]), f[3], len(f) > 4 and f[4] == "!"))
    return rows


def blob_files(store):
    """The keys of the stored blobs (sorted); each is a pack record (or a
    file under objects/ in a format 1 store)."""
    return sorted(r[0] for r in stored(store))


def nblobs(store):
    return len(blob_files(store))


def wait_eq(fn, want, what="value", timeout=30.0):
    """fn() equals want within timeout seconds (an answer that follows
    an event the kernel sends asynchronously, such as RELEASE)."""
    end = _time.time() + timeout
    while True:
        got = fn()
        if got == want:
            return
        if _time.time() > end:
            eq(got, want, what)
        _time.sleep(0.05)


def wait_blobs(store, n, what="", timeout=30.0):
    """The number of stored blobs reaches n within timeout seconds."""
    end = _time.time() + timeout
    while True:
        b = blob_files(store)
        if len(b) == n:
            return
        if _time.time() > end:
            raise AssertionError("%sstored blobs: expected %d, got %d: %r" % (
                what + ": " if what else "", n, len(b), b[:20]))
        _time.sleep(0.05)


def blob_bytes(store, key):
    """The stored bytes of blob key, decoded and checked by
    `pagededup blobs --cat` (None when they cannot be read intact)."""
    import subprocess
    p = subprocess.run([os.environ["PD_BIN"], "blobs", store, "--cat", key],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return p.stdout if p.returncode == 0 else None


def blob_place(store, key):
    """(pack file path, offset, length) of blob key's pack record."""
    for r in stored(store):
        if r[0] == key:
            m = _re.match(r"(pack-\d+):(\d+)\+(\d+):", r[3])
            assert m, "blob %s is not in a pack: %s" % (key, r[3])
            return os.path.join(store, "packs", m.group(1)), int(m.group(2)), int(m.group(3))
    raise AssertionError("no blob %s" % key)


def damage_blob(store, key, at=-64, n=8):
    """Overwrite n bytes of blob key's pack record (at bytes from its start,
    or from its end when negative), as a bad disk sector would."""
    path, off, length = blob_place(store, key)
    pos = off + (at if at >= 0 else length + at)
    with open(path, "r+b") as f:
        f.seek(pos)
        old = f.read(n)
        f.seek(pos)
        f.write(bytes(b ^ 0x5A for b in old))
        f.flush()
        os.fsync(f.fileno())


def find_blobs(store, m):
    """Stored blobs of MD5 m (keys <md5> or <md5>.N)."""
    return [k for k in blob_files(store) if k == m or k.startswith(m + ".")]
