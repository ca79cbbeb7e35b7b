#!/usr/bin/env python3
"""Randomized model test for a mounted filesystem.

The same seeded sequence of random operations is applied, in lockstep, to a
directory on the filesystem under test (--b) and to a plain reference
directory (--a, on an ordinary local filesystem). After every operation the
outcome must match: the same errno on failure, the same value (bytes read,
stat fields, listings) on success. Every --check-every operations, and at
the end, the two trees are compared whole: names, types, modes, sizes,
contents, link counts, hard-link groups, symlink targets and user.* xattrs.

On a mismatch it prints the seed, the operation index, the operation and
the recent history, and exits 1. Replay with the same --seed (and --ops).

  model.py --a PLAIN --b MOUNTDIR [--seed N] [--ops 20000] [--check-every 1000]
  model.py --a PLAIN --b MOUNTDIR --compare-only

--plant N deliberately makes B differ at operation N (a file that only B
has), to check that the comparison catches a difference.
"""
import argparse
import errno
import os
import random
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fsutil import snapshot, diff_snapshots, ename, renameat2, RENAME_NOREPLACE, RENAME_EXCHANGE  # noqa: E402

NAMES = ["a", "b", "c", "d", "e", "f"]
XATTRS = ["user.x", "user.y", "user.xdg.origin.url"]
MAXSIZE = 65536
MAXFDS = 3


class Mismatch(Exception):
    pass


def make_pool(rnd):
    return [
        b"",
        b"a",
        b"hello\n",
        b"<html><body>page one</body></html>\n",
        b"<html><body>page two</body></html>\n",
        bytes(range(256)) * 16,
        rnd.randbytes(10000),
        b"x" * 65536,
        rnd.randbytes(777),
        b"\0" * 5000,
        b"<html>" + b"boilerplate " * 2000 + b"</html>\n",
    ]


class Side:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.fds = {}

    def p(self, rel):
        return os.path.join(self.root, rel)


def run_op(side, op):
    """Apply op to one side; return ("ok", value) or ("err", errno name)."""
    kind = op[0]
    a = op[1:]
    p = side.p
    try:
        v = None
        if kind == "create":
            path, data, mode, excl = a
            flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if excl else os.O_TRUNC)
            fd = os.open(p(path), flags, mode)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        elif kind == "write":
            path, off, data = a
            fd = os.open(p(path), os.O_WRONLY)
            try:
                v = os.pwrite(fd, data, off)
            finally:
                os.close(fd)
        elif kind == "append":
            path, data = a
            fd = os.open(p(path), os.O_WRONLY | os.O_APPEND)
            try:
                v = os.write(fd, data)
            finally:
                os.close(fd)
        elif kind == "truncate":
            os.truncate(p(a[0]), a[1])
        elif kind == "rename":
            os.rename(p(a[0]), p(a[1]))
        elif kind == "renameat2":
            renameat2(p(a[0]), p(a[1]), a[2])
        elif kind == "link":
            os.link(p(a[0]), p(a[1]))
        elif kind == "unlink":
            os.unlink(p(a[0]))
        elif kind == "mkdir":
            os.mkdir(p(a[0]), a[1])
        elif kind == "rmdir":
            os.rmdir(p(a[0]))
        elif kind == "chmod":
            os.chmod(p(a[0]), a[1])
        elif kind == "setxattr":
            os.setxattr(p(a[0]), a[1], a[2], a[3])
        elif kind == "removexattr":
            os.removexattr(p(a[0]), a[1])
        elif kind == "getxattr":
            v = os.getxattr(p(a[0]), a[1])
        elif kind == "symlink":
            os.symlink(a[0], p(a[1]))
        elif kind == "readlink":
            v = os.readlink(p(a[0]))
        elif kind == "read":
            with open(p(a[0]), "rb") as f:
                v = f.read()
        elif kind == "stat":
            st = os.lstat(p(a[0]))
            fmt = stat.S_IFMT(st.st_mode)
            v = (fmt, stat.S_IMODE(st.st_mode), st.st_nlink,
                 None if fmt == stat.S_IFDIR else st.st_size)
        elif kind == "listdir":
            v = sorted(os.listdir(p(a[0])))
        elif kind == "fdopen":
            k, path, flags = a
            side.fds[k] = os.open(p(path), flags, 0o644)
        elif kind == "fdwrite":
            v = os.pwrite(side.fds[a[0]], a[2], a[1])
        elif kind == "fdread":
            fd = side.fds[a[0]]
            v = os.pread(fd, MAXSIZE * 2, 0)
        elif kind == "fdtrunc":
            os.ftruncate(side.fds[a[0]], a[1])
        elif kind == "fdstat":
            st = os.fstat(side.fds[a[0]])
            fmt = stat.S_IFMT(st.st_mode)
            v = (fmt, None if fmt == stat.S_IFDIR else st.st_size, st.st_nlink, stat.S_IMODE(st.st_mode))
        elif kind == "fdclose":
            os.close(side.fds.pop(a[0]))
        else:
            raise ValueError("unknown op " + kind)
        return ("ok", v)
    except OSError as e:
        return ("err", ename(e.errno))


def short(op):
    parts = []
    for x in op:
        if isinstance(x, bytes):
            parts.append("<%d bytes %s>" % (len(x), x[:12]))
        elif isinstance(x, int) and x > 7 and op[0] in ("create", "mkdir", "chmod"):
            parts.append(oct(x))
        else:
            parts.append(repr(x))
    return "(" + ", ".join(parts) + ")"


def short_result(r):
    if r[0] == "ok" and isinstance(r[1], bytes):
        return ("ok", "<%d bytes %s...>" % (len(r[1]), r[1][:16]))
    return r


class Model:
    def __init__(self, a, b, seed, verbose=False, maxfds=MAXFDS):
        self.maxfds = maxfds
        self.A, self.B = Side(a), Side(b)
        self.rnd = random.Random(seed)
        self.pool = make_pool(random.Random(seed ^ 0x5EED))
        self.history = []
        self.verbose = verbose
        self.scan()

    # --- the reference tree, to choose plausible paths ---

    def scan(self):
        self.dirs, self.files, self.links = [""], [], []
        for d, ds, fs in os.walk(self.A.root):
            rel = os.path.relpath(d, self.A.root)
            rel = "" if rel == "." else rel
            for n in ds + fs:
                q = os.path.join(rel, n)
                st = os.lstat(self.A.p(q))
                if stat.S_ISDIR(st.st_mode):
                    self.dirs.append(q)
                elif stat.S_ISLNK(st.st_mode):
                    self.links.append(q)
                else:
                    self.files.append(q)

    def size_in_a(self, path):
        try:
            return os.stat(self.A.p(path)).st_size
        except OSError:
            return 0

    def any_path(self):
        r = self.rnd.random()
        if r < 0.35 and self.files:
            return self.rnd.choice(self.files)
        if r < 0.55:
            return self.rnd.choice(self.dirs[1:] or [""]) or self.rnd.choice(NAMES)
        if r < 0.6 and self.links:
            return self.rnd.choice(self.links)
        if r < 0.63:
            return "zz/" + self.rnd.choice(NAMES)         # missing parent
        if r < 0.66 and self.files:
            return self.rnd.choice(self.files) + "/" + self.rnd.choice(NAMES)   # through a file
        return self.new_path()

    def new_path(self):
        parent = self.rnd.choice(self.dirs)
        if parent.count("/") >= 3:
            parent = ""
        return os.path.join(parent, self.rnd.choice(NAMES))

    def file_path(self):
        if self.files and self.rnd.random() < 0.8:
            return self.rnd.choice(self.files)
        return self.any_path()

    def data(self, limit=MAXSIZE):
        if self.rnd.random() < 0.75:
            d = self.rnd.choice(self.pool)
        else:
            d = self.rnd.randbytes(self.rnd.choice([1, 3, 100, 4096, 5000]))
        return d[:max(0, limit)]

    # --- operations ---

    def gen(self):
        r = self.rnd
        kinds = [("create", 16), ("write", 10), ("append", 3), ("truncate", 5),
                 ("rename", 10), ("renameat2", 2), ("link", 5), ("unlink", 6), ("mkdir", 4),
                 ("rmdir", 4), ("chmod", 3), ("setxattr", 4), ("removexattr", 1),
                 ("getxattr", 2), ("symlink", 1), ("readlink", 1), ("read", 8),
                 ("stat", 4), ("listdir", 2), ("fdopen", 3), ("fdwrite", 4),
                 ("fdread", 2), ("fdtrunc", 1), ("fdstat", 1), ("fdclose", 3)]
        total = sum(w for _, w in kinds)
        x = r.randrange(total)
        for kind, w in kinds:
            if x < w:
                break
            x -= w
        if kind == "create":
            path = self.file_path() if r.random() < 0.5 else self.new_path()
            return ("create", path, self.data(), r.choice([0o644, 0o600, 0o755]), r.random() < 0.15)
        if kind == "write":
            path = self.file_path()
            off = r.choice([0, 1, 4095, 4096, r.randrange(0, self.size_in_a(path) + 2), r.randrange(0, 60000)])
            return ("write", path, off, self.data(min(4096, MAXSIZE - off)))
        if kind == "append":
            path = self.file_path()
            return ("append", path, self.data(min(4096, MAXSIZE - self.size_in_a(path))))
        if kind == "truncate":
            path = self.file_path()
            return ("truncate", path, r.choice([0, 1, 100, 4096, r.randrange(MAXSIZE + 1)]))
        if kind in ("rename", "link"):
            src = self.any_path()
            dst = self.any_path() if r.random() < 0.4 else self.new_path()
            return (kind, src, dst)
        if kind == "renameat2":
            return ("renameat2", self.any_path(), self.any_path(), r.choice([RENAME_NOREPLACE, RENAME_EXCHANGE]))
        if kind == "unlink":
            return ("unlink", self.any_path())
        if kind == "mkdir" and len(self.dirs) > 30:
            kind = "rmdir"
        if kind == "mkdir":
            return ("mkdir", self.new_path() if r.random() < 0.8 else self.any_path(), r.choice([0o755, 0o700, 0o777]))
        if kind == "rmdir":
            return ("rmdir", self.rnd.choice(self.dirs[1:]) if len(self.dirs) > 1 and r.random() < 0.5 else self.any_path())
        if kind == "chmod":
            return ("chmod", self.any_path(), r.choice([0o644, 0o600, 0o755, 0o444, 0o000, 0o777, 0o1777, 0o2755]))
        if kind == "setxattr":
            v = r.choice([b"", b"1", b"http://127.0.0.1/page.html", self.pool[3], r.randbytes(50)])
            return ("setxattr", self.any_path(), r.choice(XATTRS), v,
                    r.choice([0, 0, os.XATTR_CREATE, os.XATTR_REPLACE]))
        if kind in ("removexattr", "getxattr"):
            return (kind, self.any_path(), r.choice(XATTRS))
        if kind == "symlink":
            return ("symlink", r.choice(NAMES + ["missing"]), self.new_path())
        if kind in ("readlink", "read", "stat", "listdir"):
            return (kind, self.any_path())
        if self.maxfds == 0:
            return ("stat", self.any_path())
        k = r.randrange(self.maxfds)
        if kind == "fdopen":
            if k in self.A.fds:
                return ("fdclose", k)
            return ("fdopen", k, self.file_path(),
                    r.choice([os.O_RDWR, os.O_RDWR | os.O_CREAT, os.O_RDONLY, os.O_WRONLY | os.O_APPEND]))
        if k not in self.A.fds:
            return ("stat", self.any_path())
        if kind == "fdwrite":
            off = r.choice([0, r.randrange(0, 60000)])
            return ("fdwrite", k, off, self.data(min(4096, MAXSIZE - off)))
        if kind == "fdtrunc":
            return ("fdtrunc", k, r.choice([0, 10, r.randrange(MAXSIZE + 1)]))
        return (kind, k)

    def step(self, i, op):
        ra = run_op(self.A, op)
        rb = run_op(self.B, op)
        self.history.append((i, op, ra))
        del self.history[:-20]
        if self.verbose:
            print(i, short(op), short_result(ra))
        if ra != rb:
            raise Mismatch("operation %d %s:\n  reference: %r\n  mount:     %r" % (
                i, short(op), short_result(ra), short_result(rb)))
        if ra[0] == "ok" and op[0] not in ("read", "stat", "listdir", "readlink", "getxattr",
                                           "fdread", "fdstat", "fdwrite"):
            self.scan()

    def compare(self, label):
        d = diff_snapshots(snapshot(self.A.root), snapshot(self.B.root), "reference", "mount")
        if d:
            raise Mismatch("trees differ %s:\n  " % label + "\n  ".join(d))

    def close_all(self):
        for s in (self.A, self.B):
            for fd in s.fds.values():
                os.close(fd)
            s.fds.clear()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="plain reference directory")
    ap.add_argument("--b", required=True, help="directory on the filesystem under test")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--check-every", type=int, default=1000)
    ap.add_argument("--plant", type=int, default=None)
    ap.add_argument("--compare-only", action="store_true")
    ap.add_argument("--fds", type=int, default=MAXFDS,
                    help="files kept open across operations (0: every operation opens and closes)")
    ap.add_argument("--verbose", action="store_true")
    o = ap.parse_args()
    os.umask(0o022)
    if o.compare_only:
        try:
            Model(o.a, o.b, 0).compare("(compare only)")
        except Mismatch as e:
            print("MISMATCH", e)
            return 1
        print("trees equal")
        return 0
    seed = o.seed if o.seed is not None else random.SystemRandom().randrange(1 << 32)
    print("seed %d, %d operations" % (seed, o.ops))
    sys.stdout.flush()
    for d in (o.a, o.b):
        os.makedirs(d, exist_ok=True)
        if os.listdir(d):
            print("%s is not empty" % d)
            return 2
    m = Model(o.a, o.b, seed, o.verbose, o.fds)
    t0 = time.time()
    i = -1
    counts = {}
    try:
        for i in range(o.ops):
            if o.plant is not None and i == o.plant:
                with open(m.B.p("planted"), "wb") as f:
                    f.write(b"only in B")
            op = m.gen()
            counts[op[0]] = counts.get(op[0], 0) + 1
            m.step(i, op)
            if (i + 1) % o.check_every == 0:
                m.compare("after operation %d" % i)
                print("%d operations, trees equal (%d files, %d dirs, %d symlinks), %.0f s" % (
                    i + 1, len(m.files), len(m.dirs) - 1, len(m.links), time.time() - t0))
                sys.stdout.flush()
        m.close_all()
        m.compare("at the end, all files closed")
    except Mismatch as e:
        print("MISMATCH (seed %d, operation %d of %d)" % (seed, i, o.ops))
        print(str(e))
        print("last operations (index, op, reference result):")
        for j, op, r in m.history:
            print("  %d %s -> %r" % (j, short(op), short_result(r)))
        print("replay: PD_SEED=%d PD_MODEL_OPS=%d" % (seed, o.ops))
        return 1
    print("done: seed %d, %d operations in %.0f s; mix: %s" % (
        seed, o.ops, time.time() - t0, ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
