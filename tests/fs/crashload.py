"""Crash, power-loss and load helpers for tests/fs/t_crash.sh and
tests/stress/s_crash.sh, s_load.sh.

Subcommands:

  writer   one writer process working in a subtree of the mount: new pages,
           duplicates, O_TRUNC overwrites, write-temp-then-rename over a
           page, moves, unlinks, mkdirs, rmdirs. Before each operation it
           appends an intent line to its journal (outside the mount), and
           after the call returned a done line; both are fsynced. It runs
           until the mount goes away (the test kills the daemon) or
           --max-seconds pass.
  verify   after the remount: replays the journals over the saved state of
           the tree and compares with the mount. Every completed operation
           must be there byte for byte; the operation each writer had in
           flight may have happened or not, and nothing else is allowed.
           Checks user.dedup.refcount of every file, then saves the tree as
           the state of the next cycle.
  vdisk    a disk with a volatile write cache, served as the file DIR/disk
           of a small FUSE filesystem (raw /dev/fuse protocol): writes stay
           in the cache until the kernel sends FSYNC (a flush of the loop
           device on top); SIGUSR1 cuts the power: the cache is lost (or
           with --keep P each cached block reached the platter with
           probability P, in no particular order), the image file holds
           what a disk would hold, and the server exits so that every
           later I/O fails.
  load     the load test: writer, reader, renamer and xattr-query
           processes at once, then the exact end checks.

Contents are named by a content id (cid) and made from it
deterministically, so journals and plans carry ids, not bytes.
"""
import argparse
import errno
import hashlib
import json
import os
import random
import signal
import stat
import struct
import sys
import time

# --- page contents -------------------------------------------------------

_WORDS = None


def _words():
    global _WORDS
    if _WORDS is None:
        r = random.Random(20240917)
        letters = "abcdefghijklmnopqrstuvwxyz"
        _WORDS = ["".join(r.choice(letters) for _ in range(r.randint(2, 11))) for _ in range(4000)]
    return _WORDS


_CACHE = {}


def content(cid, big=True):
    """The bytes of content id cid: an HTML-like page, empty for "empty"."""
    if cid == "empty":
        return b""
    c = _CACHE.get(cid)
    if c is not None:
        return c
    r = random.Random("pagededup-content:" + cid)
    x = r.random()
    if big and x < 0.02:
        size = r.randint(1 << 20, 3 << 20)
    elif x < 0.10:
        size = r.randint(1, 600)
    else:
        size = int(min(200000, r.lognormvariate(9.3, 0.9)))
    # the id comes first: contents of different ids differ at every size
    head = ("<!-- %s -->\n<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title></head><body>\n"
            % (cid, cid)).encode()
    size = max(size, len(cid) + 9)
    parts = [head]
    n = len(head)
    while n < size:
        if r.random() < 0.3:
            p = r.randbytes(min(4096, size - n + 1)).hex().encode()
        else:
            p = ("<p>" + " ".join(r.choices(_words(), k=r.randint(20, 400))) + "</p>\n").encode()
        parts.append(p)
        n += len(p)
    data = b"".join(parts)[:size]
    if len(_CACHE) > 2000:
        _CACHE.clear()
    _CACHE[cid] = data
    return data


_MD5 = {}


def cmd5(cid, big=True):
    k = (cid, big)
    m = _MD5.get(k)
    if m is None:
        m = _MD5[k] = hashlib.md5(content(cid, big)).hexdigest()
    return m


def file_md5(path):
    h = hashlib.md5()
    n = 0
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
            n += len(b)
    return h.hexdigest(), n


def write_file(path, data, rnd, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    """open, write in chunks of random size, close (errors propagate)."""
    fd = os.open(path, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view[:rnd.choice((4096, 16384, 65536, 131072, 1 << 20))])
            view = view[n:]
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)


# --- the crash writer ----------------------------------------------------


class Journal:
    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def put(self, rec):
        os.write(self.fd, (json.dumps(rec, sort_keys=True) + "\n").encode())
        os.fsync(self.fd)


def load_state(path):
    if path and os.path.exists(path):
        with open(path) as f:
            s = json.load(f)
        return dict(s["files"]), set(s["dirs"])
    return {}, set()


def save_state(path, files, dirs):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"files": files, "dirs": sorted(dirs)}, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def cmd_writer(o):
    rnd = random.Random(o.seed)
    allfiles, alldirs = load_state(o.state)
    top = "w%d" % o.wid
    files = {p: c for p, c in allfiles.items() if p == top or p.startswith(top + "/")}
    dirs = set(d for d in alldirs if d == top or d.startswith(top + "/"))
    J = Journal(o.journal)
    M = o.mnt
    seq = 0
    tmpn = 0
    t_end = time.monotonic() + o.max_seconds
    pool = ["pool%d" % i for i in range(o.pool)]
    with open(o.ready, "w") as f:
        f.write("%d\n" % os.getpid())

    def fresh_cid():
        return "s%d.c%d.w%d.n%d" % (o.seed_base, o.cycle, o.wid, seq)

    def pick_cid():
        # half the writes are duplicates: of the shared pool, or of a page
        # that exists in the tree
        x = rnd.random()
        if x < 0.3:
            return rnd.choice(pool)
        if x < 0.5 and files:
            return files[rnd.choice(sorted(files))]
        if x < 0.52:
            return "empty"
        return fresh_cid()

    def new_name(d):
        return "%s/p%d.%d.html" % (d, o.cycle, seq)

    ops_done = 0
    while time.monotonic() < t_end and (o.max_ops == 0 or ops_done < o.max_ops):
        seq += 1
        if top not in dirs:
            op = {"k": "mkdir", "p": top}
        else:
            names = sorted(files)
            visible = [p for p in names if "/.tmp" not in p]
            x = rnd.random()
            dl = sorted(dirs)
            if len(visible) > o.max_files:
                x = 0.95  # shrink
            if x < 0.05 and len(dirs) < 12:
                op = {"k": "mkdir", "p": "%s/d%d.%d" % (rnd.choice(dl), o.cycle, seq)}
            elif x < 0.40 or not visible:
                op = {"k": "write", "p": new_name(rnd.choice(dl)), "cid": pick_cid(), "old": None}
            elif x < 0.55:
                p = rnd.choice(visible)
                op = {"k": "write", "p": p, "cid": pick_cid(), "old": files[p]}
            elif x < 0.72:
                # write a temporary file, then rename it over a page
                p = rnd.choice(visible)
                tmpn += 1
                t = "%s/.tmp%d.%d" % (os.path.dirname(p), o.cycle, seq)
                op = {"k": "write", "p": t, "cid": pick_cid(), "old": None, "then": p}
            elif x < 0.80:
                p = rnd.choice(visible)
                d = rnd.choice(dl)
                op = {"k": "rename", "s": p, "d": new_name(d), "scid": files[p], "dold": None}
            elif x < 0.82:
                empty = [d for d in dl if d != top and not any(
                    q.startswith(d + "/") for q in list(files) + dl)]
                if not empty:
                    continue
                op = {"k": "rmdir", "p": rnd.choice(empty)}
            else:
                p = rnd.choice(visible)
                op = {"k": "unlink", "p": p, "old": files[p]}
        for step in (op, None):
            if step is None:
                if "then" not in op:
                    break
                seq += 1
                step = {"k": "rename", "s": op["p"], "d": op["then"], "scid": op["cid"],
                        "dold": files.get(op["then"])}
            J.put({"t": "I", "n": seq, "op": step})
            k = step["k"]
            try:
                if k == "mkdir":
                    os.mkdir(os.path.join(M, step["p"]))
                elif k == "rmdir":
                    os.rmdir(os.path.join(M, step["p"]))
                elif k == "write":
                    write_file(os.path.join(M, step["p"]), content(step["cid"]), rnd)
                elif k == "rename":
                    os.rename(os.path.join(M, step["s"]), os.path.join(M, step["d"]))
                elif k == "unlink":
                    os.unlink(os.path.join(M, step["p"]))
            except OSError as e:
                J.put({"t": "E", "n": seq, "errno": e.errno, "ename": errno.errorcode.get(e.errno, "?"),
                       "msg": str(e), "time": time.monotonic()})
                return 0
            J.put({"t": "D", "n": seq, "time": time.monotonic()})
            ops_done += 1
            if k == "mkdir":
                dirs.add(step["p"])
            elif k == "rmdir":
                dirs.discard(step["p"])
            elif k == "write":
                files[step["p"]] = step["cid"]
            elif k == "rename":
                files[step["d"]] = files.pop(step["s"])
            elif k == "unlink":
                del files[step["p"]]
    return 0


# --- verification after a crash ------------------------------------------

DIR = ("dir",)


def scan(M):
    """The tree below M: {rel: ("dir",) | ("file", md5, size)}."""
    out = {}
    for dp, dns, fns in os.walk(M):
        rel = os.path.relpath(dp, M)
        for n in dns:
            out[n if rel == "." else rel + "/" + n] = DIR
        for n in fns:
            r = n if rel == "." else rel + "/" + n
            p = os.path.join(dp, n)
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                out[r] = ("other", oct(st.st_mode))
                continue
            try:
                m, size = file_md5(p)
            except OSError as e:
                out[r] = ("file", "unreadable: " + errno.errorcode.get(e.errno, str(e.errno)), st.st_size)
                continue
            if size != st.st_size:
                out[r] = ("file", m, size, "stat size %d" % st.st_size)
            else:
                out[r] = ("file", m, size)
    return out


def want_of(cid):
    """What a path holding content cid looks like in a scan."""
    if cid is None:
        return None
    if cid == DIR:
        return DIR
    return ("file", cmd5(cid), len(content(cid)))


def show(v):
    if v is None:
        return "absent"
    if v == DIR:
        return "a directory"
    if v[0] == "file":
        return "a file of %d bytes, md5 %s%s" % (v[2], v[1], (" (" + v[3] + ")") if len(v) > 3 else "")
    return repr(v)


def outcomes(op):
    """The states the paths of an operation in flight may be in: a list of
    {path: cid | DIR | None}."""
    k = op["k"]
    if k == "mkdir":
        return [{op["p"]: None}, {op["p"]: DIR}]
    if k == "rmdir":
        return [{op["p"]: DIR}, {op["p"]: None}]
    if k == "write":
        if op["old"] is None:
            # created but not sealed yet: an empty file
            return [{op["p"]: None}, {op["p"]: "empty"}, {op["p"]: op["cid"]}]
        return [{op["p"]: op["old"]}, {op["p"]: op["cid"]}]
    if k == "rename":
        return [{op["s"]: op["scid"], op["d"]: op["dold"]}, {op["s"]: None, op["d"]: op["scid"]}]
    if k == "unlink":
        return [{op["p"]: op["old"]}, {op["p"]: None}]
    raise ValueError(k)


def read_journal(path):
    recs = []
    if not os.path.exists(path):
        return recs
    with open(path) as f:
        for line in f:
            if line.endswith("\n"):
                recs.append(json.loads(line))
    return recs


def refcount_check(M, files, errs):
    groups = {}
    for p, cid in files.items():
        if cid == DIR:
            continue
        groups.setdefault(cmd5(cid), []).append(p)
    nchecked = 0
    for m, paths in sorted(groups.items()):
        if m == hashlib.md5(b"").hexdigest():
            continue  # empty files: no blob to count
        for p in paths:
            try:
                v = os.getxattr(os.path.join(M, p), "user.dedup.refcount")
            except OSError as e:
                errs.append("getfattr -n user.dedup.refcount %s: %s" % (p, e))
                continue
            nchecked += 1
            if v != str(len(paths)).encode():
                errs.append("user.dedup.refcount of %s is %r, but %d files have its content (md5 %s): %s"
                            % (p, v, len(paths), m, sorted(paths)[:8]))
    return nchecked


def apply_op(state, op):
    k = op["k"]
    if k == "mkdir":
        state[op["p"]] = DIR
    elif k == "rmdir":
        state.pop(op["p"], None)
    elif k == "write":
        state[op["p"]] = op["cid"]
    elif k == "rename":
        state[op["d"]] = state.pop(op["s"])
    elif k == "unlink":
        state.pop(op["p"], None)


def compare(exp, act, inflight):
    """Problems of the tree act against the state exp with the operation
    inflight (or None) possibly done; returns (problems, resolved state)."""
    errs = []
    alts = outcomes(inflight) if inflight else [{}]
    touched = alts[0]
    for p in sorted(set(exp) | set(act)):
        if p in touched:
            continue
        w, a = want_of(exp.get(p)), act.get(p)
        if w != a:
            errs.append("%s: expected %s, found %s" % (p, show(w), show(a)))
    resolved = {p: v for p, v in exp.items() if p not in touched}
    got = {p: act.get(p) for p in touched}
    match = None
    for alt in alts:
        if all(want_of(c) == got[p] for p, c in alt.items()):
            match = alt
            break
    if match is None:
        errs.append("operation in flight at the crash %s left %s; allowed: %s" % (
            json.dumps(inflight, sort_keys=True),
            ", ".join("%s %s" % (p, show(v)) for p, v in sorted(got.items())),
            " | ".join(", ".join("%s %s" % (p, show(want_of(c))) for p, c in sorted(alt.items()))
                       for alt in alts)))
    else:
        for p, c in match.items():
            if c is not None:
                resolved[p] = c
    return errs, resolved


def writer_of(path):
    return path.split("/", 1)[0]


def cmd_verify(o):
    files, dirs = load_state(o.state)
    base = dict(files)
    for d in dirs:
        base[d] = DIR
    errs = []
    act = scan(o.mnt)
    resolved = {}
    summary = []
    tops = set()
    nref = 0
    for jp in o.journals:
        # the journal of writer wN: its operations, in order, each with its
        # completion time (None for the one in flight)
        recs = read_journal(jp)
        ops = []
        top = None
        for r in recs:
            if r["t"] == "I":
                if ops and ops[-1][1] is None:
                    errs.append("%s: intent %d follows an operation with no result" % (jp, r["n"]))
                ops.append([r["op"], None])
                top = writer_of(r["op"].get("p") or r["op"].get("s"))
            elif r["t"] == "D":
                if not ops or ops[-1][1] is not None:
                    errs.append("%s: done %d without its intent" % (jp, r["n"]))
                    continue
                ops[-1][1] = r["time"]
            elif r["t"] == "E":
                ok_err = set(o.allow_errno.split(",")) if o.allow_errno else set()
                late = o.cut_time is not None and r["time"] >= o.cut_time
                # an errno of a dying daemon counts only from the kill on
                # (when its moment is given): before it, it is a failure
                killed = o.killed_at is None or r["time"] >= o.killed_at
                if not (late or (killed and r["ename"] in ok_err) or "any" in ok_err):
                    errs.append("%s: an operation failed before the crash: %s (%s)"
                                % (jp, r["msg"], json.dumps(ops[-1][0] if ops else None)))
        if top is None:
            continue
        tops.add(top)
        mine = lambda p: writer_of(p) == top
        b = {p: v for p, v in base.items() if mine(p)}
        a = {p: v for p, v in act.items() if mine(p)}
        ndone = sum(1 for _, t in ops if t is not None)
        if o.lossy_before is None:
            need = ndone
        else:
            need = 0
            while need < ndone and ops[need][1] < o.lossy_before:
                need += 1
        # the surviving tree is the one after the first k operations, with
        # operation k+1 possibly half done; k >= need
        exp = dict(b)
        states = []
        for i in range(ndone + 1):
            if i >= need:
                states.append((i, dict(exp)))
            if i < ndone:
                apply_op(exp, ops[i][0])
        found = None
        first = None
        for k, st in reversed(states):
            inflight = ops[k][0] if k < len(ops) else None
            e, res = compare(st, a, inflight)
            if first is None:
                first = e
            if not e:
                found = (k, inflight, res)
                break
        if found is None:
            if o.lossy_before is not None and need < ndone:
                errs.append("%s: the tree matches no state after %d to %d of its %d completed operations "
                            "(those done before the cut less the sync interval must survive); "
                            "against all %d:" % (top, need, ndone, ndone, ndone))
            if o.lossy_before is not None:
                # paths that no operation after the required prefix touched
                # must be as that prefix left them: those are the losses
                later = set()
                for op, _ in ops[need:]:
                    later |= set(outcomes(op)[0])
                e, _ = compare(states[0][1], a, None)
                definite = [x for x in e if x.split(": ", 1)[0] not in later]
                if definite:
                    errs.append("%s: %d path(s) differ from the state after the %d operations that must "
                                "survive, and no later operation touched them:" % (top, len(definite), need))
                    first = definite
            if o.cut_time is not None:
                # how long before the cut each wrong path was last changed
                last = {}
                for i, (op, t) in enumerate(ops[:ndone]):
                    for q in outcomes(op)[0]:
                        last[q] = (i + 1, t)
                aged = []
                for x in first:
                    q = x.split(": ", 1)[0]
                    if q in last:
                        x += " [its last operation, #%d of %d, completed %.2f s before the cut]" % (
                            last[q][0], ndone, o.cut_time - last[q][1])
                    aged.append(x)
                first = aged
            errs += ["%s" % x for x in first]
            continue
        k, inflight, res = found
        resolved.update(res)
        s = "%s: %d/%d completed operations" % (top, k, ndone)
        if inflight:
            s += ", in flight: %s" % inflight["k"]
        summary.append(s)
    for p in sorted(set(act) | set(base)):
        # paths no writer of this cycle works on stay as they were
        if writer_of(p) not in tops:
            if want_of(base.get(p)) != act.get(p):
                errs.append("%s: expected %s, found %s" % (p, show(want_of(base.get(p))), show(act.get(p))))
            elif p in base:
                resolved[p] = base[p]
    if not errs and o.refcounts:
        nref = refcount_check(o.mnt, resolved, errs)
    if errs:
        print("verify: %d problem(s)" % len(errs))
        for e in errs[:40]:
            print("  " + e)
        if len(errs) > 40:
            print("  ... %d more" % (len(errs) - 40))
        return 1
    nfiles = sum(1 for v in resolved.values() if v != DIR)
    ndirs = sum(1 for v in resolved.values() if v == DIR)
    print("verify: %s; tree of %d files and %d directories as expected, %d refcounts exact" % (
        "; ".join(summary), nfiles, ndirs, nref))
    save_state(o.state, {p: v for p, v in resolved.items() if v != DIR},
               set(p for p, v in resolved.items() if v == DIR))
    return 0


# --- a disk with a volatile write cache (raw FUSE protocol) ---------------

FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR, FUSE_SETATTR = 1, 2, 3, 4
FUSE_OPEN, FUSE_READ, FUSE_WRITE, FUSE_STATFS, FUSE_RELEASE = 14, 15, 16, 17, 18
FUSE_FSYNC, FUSE_FLUSH, FUSE_INIT, FUSE_OPENDIR, FUSE_READDIR = 20, 25, 26, 27, 28
FUSE_RELEASEDIR, FUSE_INTERRUPT, FUSE_DESTROY, FUSE_BATCH_FORGET = 29, 36, 38, 42
FUSE_BIG_WRITES = 1 << 5
IN_HDR = struct.Struct("<IIQQIIIHH")
OUT_HDR = struct.Struct("<IiQ")
BLK = 4096


class Cut(Exception):
    pass


class VDisk:
    """The image file is the platter; self.cache holds the blocks written
    since the last flush (latest version of each)."""

    def __init__(self, image, keep, seed):
        self.img = os.open(image, os.O_RDWR)
        self.size = os.fstat(self.img).st_size
        self.cache = {}
        self.keep = keep
        self.rnd = random.Random(seed)
        self.writes = self.flushes = 0

    def read(self, off, size):
        size = max(0, min(size, self.size - off))
        out = bytearray()
        end = off + size
        while off < end:
            b, o = divmod(off, BLK)
            n = min(BLK - o, end - off)
            blk = self.cache.get(b)
            if blk is None:
                out += os.pread(self.img, n, off)
            else:
                out += blk[o:o + n]
            off += n
        return bytes(out)

    def write(self, off, data):
        self.writes += 1
        pos = 0
        while pos < len(data):
            b, o = divmod(off + pos, BLK)
            n = min(BLK - o, len(data) - pos)
            if o == 0 and n == BLK:
                blk = bytes(data[pos:pos + n])
            else:
                cur = self.cache.get(b)
                if cur is None:
                    cur = os.pread(self.img, BLK, b * BLK).ljust(BLK, b"\0")
                blk = cur[:o] + bytes(data[pos:pos + n]) + cur[o + n:]
            self.cache[b] = blk
            pos += n

    def flush(self):
        self.flushes += 1
        for b in sorted(self.cache):
            os.pwrite(self.img, self.cache[b], b * BLK)
        self.cache.clear()

    def cut(self):
        kept = 0
        for b in sorted(self.cache):
            if self.keep > 0 and self.rnd.random() < self.keep:
                os.pwrite(self.img, self.cache[b], b * BLK)
                kept += 1
        lost = len(self.cache) - kept
        self.cache.clear()
        os.fsync(self.img)
        return kept, lost


def _attr(ino, mode, size):
    now = int(time.time())
    return struct.pack("<QQQQQQIIIIIIIIII", ino, size, (size + 511) // 512, now, now, now,
                       0, 0, 0, mode, 1, 0, 0, 0, BLK, 0)


def cmd_vdisk(o):
    import ctypes
    import ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    disk = VDisk(o.image, o.keep, o.seed)
    fd = os.open("/dev/fuse", os.O_RDWR)
    opts = "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other" % fd
    if libc.mount(b"vdisk", os.fsencode(o.mnt), b"fuse", 2 | 4, opts.encode()) != 0:
        e = ctypes.get_errno()
        print("vdisk: mount %s: %s" % (o.mnt, os.strerror(e)), file=sys.stderr)
        return 1

    def on_cut(signum, frame):
        raise Cut()

    signal.signal(signal.SIGUSR1, on_cut)
    signal.signal(signal.SIGTERM, on_cut)
    with open(o.ready, "w") as f:
        f.write("%d\n" % os.getpid())
    root = _attr(1, stat.S_IFDIR | 0o755, 0)
    file_attr = _attr(2, stat.S_IFREG | 0o644, disk.size)

    def reply(unique, err=0, body=b""):
        try:
            os.write(fd, OUT_HDR.pack(OUT_HDR.size + len(body), -err, unique) + body)
        except OSError as e:
            if e.errno != errno.ENOENT:  # the request was interrupted
                raise

    try:
        while True:
            try:
                req = os.read(fd, 1 << 20)
            except OSError as e:
                if e.errno == errno.ENODEV:  # unmounted
                    break
                if e.errno in (errno.EINTR, errno.EAGAIN, errno.ENOENT):
                    continue
                raise
            ln, op, unique, nodeid, _, _, _, _, _ = IN_HDR.unpack_from(req)
            body = memoryview(req)[IN_HDR.size:ln]
            if op == FUSE_INIT:
                major, minor, ra, flags = struct.unpack_from("<IIII", body)
                out = struct.pack("<IIIIHHIIHHII", 7, min(minor, 31), ra, flags & FUSE_BIG_WRITES,
                                  16, 12, 131072, 1, 0, 0, 0, 0) + b"\0" * 24
                reply(unique, 0, out)
            elif op == FUSE_LOOKUP:
                name = bytes(body).rstrip(b"\0")
                if nodeid == 1 and name == b"disk":
                    reply(unique, 0, struct.pack("<QQQQII", 2, 0, 3600, 3600, 0, 0) + file_attr)
                else:
                    reply(unique, errno.ENOENT)
            elif op in (FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT):
                pass
            elif op in (FUSE_GETATTR, FUSE_SETATTR):
                a = root if nodeid == 1 else file_attr
                reply(unique, 0, struct.pack("<QII", 3600, 0, 0) + a)
            elif op in (FUSE_OPEN, FUSE_OPENDIR):
                reply(unique, 0, struct.pack("<QII", 1, 0, 0))
            elif op == FUSE_READ:
                fh, off, size = struct.unpack_from("<QQI", body)
                reply(unique, 0, disk.read(off, size) if nodeid == 2 else b"")
            elif op == FUSE_WRITE:
                fh, off, size = struct.unpack_from("<QQI", body)
                if off + size > disk.size:
                    reply(unique, errno.ENOSPC)
                else:
                    disk.write(off, body[40:40 + size])
                    reply(unique, 0, struct.pack("<II", size, 0))
            elif op == FUSE_FSYNC:
                disk.flush()
                reply(unique)
            elif op in (FUSE_FLUSH, FUSE_RELEASE, FUSE_RELEASEDIR):
                reply(unique)
            elif op == FUSE_READDIR:
                reply(unique, 0, b"")
            elif op == FUSE_STATFS:
                reply(unique, 0, struct.pack("<QQQQQIIII", disk.size // BLK, 0, 0, 2, 0, BLK, 255, BLK, 0)
                      + b"\0" * 24)
            elif op == FUSE_DESTROY:
                reply(unique)
                break
            else:
                reply(unique, errno.ENOSYS)
    except Cut:
        t = time.monotonic()
        kept, lost = disk.cut()
        with open(o.cut_file, "w") as f:
            f.write("%.6f %d %d %d %d\n" % (t, kept, lost, disk.writes, disk.flushes))
        # exiting closes /dev/fuse: the connection is aborted and every
        # later I/O of the loop device fails
        os._exit(0)
    disk.flush()
    return 0

# --- the load test -------------------------------------------------------


def load_plans(o):
    pool = ["lpool%d.%d" % (o.seed, i) for i in range(o.pool)]
    plans = []
    for w in range(o.writers):
        r = random.Random("plan-w:%d:%d" % (o.seed, w))
        plans.append([("w%d/d%02d/p%05d.html" % (w, i % 20, i),
                       r.choice(pool) if r.random() < 0.5 else "lu%d.%d.%d" % (o.seed, w, i))
                      for i in range(o.pages)])
    rplans = []
    for k in range(o.renamers):
        r = random.Random("plan-r:%d:%d" % (o.seed, k))
        rplans.append([("r%d/a/m%d_%d.html" % (k, k, i),
                        r.choice(pool) if r.random() < 0.5 else "lr%d.%d.%d" % (o.seed, k, i))
                       for i in range(o.renamer_pages)])
    return plans, rplans


class Failure(Exception):
    pass


def _published(work, nw, cache):
    """Pages the writers closed so far: appends to cache (a list of
    (path, cid)) from the writers' logs; returns it."""
    for w in range(nw):
        p = os.path.join(work, "pub.%d" % w)
        off = cache.setdefault(("off", w), 0)
        try:
            with open(p, "rb") as f:
                f.seek(off)
                data = f.read()
        except FileNotFoundError:
            continue
        end = data.rfind(b"\n") + 1
        for line in data[:end].decode().splitlines():
            path, cid = line.split(" ")
            cache.setdefault("list", []).append((path, cid))
            cache.setdefault("count", {})
            cache["count"][cid] = cache["count"].get(cid, 0) + 1
        cache[("off", w)] = off + end
    return cache.get("list", [])


def _child(fn, *args):
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        fn(*args)
    except BaseException as e:
        import traceback
        code = 1
        with open(os.path.join(args[0].work, "error.%d" % os.getpid()), "w") as f:
            f.write("%s: %s\n" % (fn.__name__, e))
            traceback.print_exc(file=f)
    finally:
        os._exit(code)


def _stopped(o):
    return os.path.exists(os.path.join(o.work, "stop"))


def load_writer(o, w, plan):
    rnd = random.Random("wr:%d:%d" % (o.seed, w))
    nbytes = 0
    t0 = time.monotonic()
    with open(os.path.join(o.work, "pub.%d" % w), "w", buffering=1) as pub:
        for path, cid in plan:
            data = content(cid, big=False)
            write_file(os.path.join(o.mnt, path), data, rnd)
            nbytes += len(data)
            pub.write("%s %s\n" % (path, cid))
    t1 = time.monotonic()
    with open(os.path.join(o.work, "res.w%d" % w), "w") as f:
        json.dump({"pages": len(plan), "bytes": nbytes, "t0": t0, "t1": t1}, f)


def load_reader(o, k):
    rnd = random.Random("rd:%d:%d" % (o.seed, k))
    cache = {}
    n = nbytes = 0
    while not _stopped(o):
        pubs = _published(o.work, o.writers, cache)
        if not pubs:
            time.sleep(0.01)
            continue
        for _ in range(20):
            path, cid = rnd.choice(pubs)
            with open(os.path.join(o.mnt, path), "rb") as f:
                data = f.read()
            if hashlib.md5(data).hexdigest() != cmd5(cid, False):
                raise Failure("cat %s: %d bytes, md5 %s; expected %d bytes, md5 %s" % (
                    path, len(data), hashlib.md5(data).hexdigest(), len(content(cid, False)), cmd5(cid, False)))
            n += 1
            nbytes += len(data)
    with open(os.path.join(o.work, "res.r%d" % k), "w") as f:
        json.dump({"reads": n, "bytes": nbytes}, f)


def load_renamer(o, k, plan):
    rnd = random.Random("rn:%d:%d" % (o.seed, k))
    files = dict(plan)
    n = 0
    while not _stopped(o):
        src = rnd.choice(sorted(files))
        d = "b" if src.split("/")[1] == "a" else "a"
        dst = "r%d/%s/m%d_%d.html" % (k, d, k, len(plan) + n)
        os.rename(os.path.join(o.mnt, src), os.path.join(o.mnt, dst))
        files[dst] = files.pop(src)
        n += 1
        if n % 8 == 0:
            m, size = file_md5(os.path.join(o.mnt, dst))
            if m != cmd5(files[dst], False):
                raise Failure("%s after rename from %s: md5 %s, expected %s" % (dst, src, m, cmd5(files[dst], False)))
        if n % 64 == 0:
            listing = set("r%d/%s/%s" % (k, d2, x) for d2 in "ab"
                          for x in os.listdir(os.path.join(o.mnt, "r%d" % k, d2)))
            if listing != set(files):
                raise Failure("r%d: the directories list %d pages, %d expected; missing %s, extra %s" % (
                    k, len(listing), len(files), sorted(set(files) - listing)[:5], sorted(listing - set(files))[:5]))
    with open(os.path.join(o.work, "res.n%d" % k), "w") as f:
        json.dump({"renames": n, "files": files}, f)


def load_querier(o, k, planned, rinit):
    rnd = random.Random("q:%d:%d" % (o.seed, k))
    cache = {}
    n = 0
    while not _stopped(o):
        pubs = _published(o.work, o.writers, cache)
        if not pubs:
            time.sleep(0.01)
            continue
        path, cid = rnd.choice(pubs)
        lower = cache["count"][cid] + rinit.get(cid, 0)
        upper = planned[cid]
        p = os.path.join(o.mnt, path)
        v = os.getxattr(p, "user.dedup.refcount")
        if not v.isdigit() or not lower <= int(v) <= upper:
            raise Failure("user.dedup.refcount of %s is %r: %d files with its content were closed before the "
                          "query, %d are planned in all" % (path, v, lower, upper))
        tw = [t for t in os.getxattr(p, "user.dedup.twins").decode().split("\n") if t]
        if "/" + path in tw:
            raise Failure("user.dedup.twins of %s lists the file itself" % path)
        if len(tw) + 1 < min(lower, 50) and not tw[-1:][0].startswith("..."):
            raise Failure("user.dedup.twins of %s lists %d paths, but %d files had its content before the query"
                          % (path, len(tw), lower))
        for t in tw[:2]:
            if t.startswith("/w"):  # writers' pages are never moved
                m, _ = file_md5(os.path.join(o.mnt, t[1:]))
                if m != cmd5(cid, False):
                    raise Failure("user.dedup.twins of %s lists %s, whose md5 is %s, not %s" % (path, t, m, cmd5(cid, False)))
        n += 1
    with open(os.path.join(o.work, "res.q%d" % k), "w") as f:
        json.dump({"queries": n}, f)


def cmd_load(o):
    M = o.mnt
    os.makedirs(o.work, exist_ok=True)
    plans, rplans = load_plans(o)
    planned = {}
    for plan in plans + rplans:
        for _, cid in plan:
            planned[cid] = planned.get(cid, 0) + 1
    rinit = {}
    for plan in rplans:
        for _, cid in plan:
            rinit[cid] = rinit.get(cid, 0) + 1
    for w in range(o.writers):
        for d in range(20):
            os.makedirs(os.path.join(M, "w%d/d%02d" % (w, d)))
    rnd = random.Random(o.seed)
    for k, plan in enumerate(rplans):
        os.makedirs(os.path.join(M, "r%d/a" % k))
        os.makedirs(os.path.join(M, "r%d/b" % k))
        for path, cid in plan:
            write_file(os.path.join(M, path), content(cid, False), rnd)
    print("load: %d writers x %d pages (%d distinct contents planned, pool of %d), %d readers, "
          "%d renamers (%d pages each), %d getfattr processes" % (
              o.writers, o.pages, len(planned), o.pool, o.readers, o.renamers, o.renamer_pages, o.queriers))
    sys.stdout.flush()
    t0 = time.monotonic()
    wp = [_child(load_writer, o, w, plans[w]) for w in range(o.writers)]
    others = [_child(load_reader, o, k) for k in range(o.readers)]
    others += [_child(load_renamer, o, k, rplans[k]) for k in range(o.renamers)]
    others += [_child(load_querier, o, k, planned, rinit) for k in range(o.queriers)]
    bad = []
    for p in wp:
        _, st = os.waitpid(p, 0)
        if st:
            bad.append(p)
            break
    t1 = time.monotonic()
    open(os.path.join(o.work, "stop"), "w").close()
    for p in wp + others:
        try:
            _, st = os.waitpid(p, 0)
        except ChildProcessError:
            continue
        if st:
            bad.append(p)
    errs = []
    for p in bad:
        ef = os.path.join(o.work, "error.%d" % p)
        errs.append(open(ef).read() if os.path.exists(ef) else "process %d failed" % p)
    if errs:
        print("load: %d process(es) failed:" % len(errs))
        for e in errs:
            print(e)
        return 1
    res = {}
    for f in os.listdir(o.work):
        if f.startswith("res."):
            with open(os.path.join(o.work, f)) as fh:
                res[f[4:]] = json.load(fh)
    pages = sum(res["w%d" % w]["pages"] for w in range(o.writers))
    nbytes = sum(res["w%d" % w]["bytes"] for w in range(o.writers))
    reads = sum(res["r%d" % k]["reads"] for k in range(o.readers))
    renames = sum(res["n%d" % k]["renames"] for k in range(o.renamers))
    queries = sum(res["q%d" % k]["queries"] for k in range(o.queriers))
    dt = t1 - t0
    # the end state: every page, every refcount, every twins list, blobs
    expect = {}
    for plan in plans:
        expect.update(plan)
    for k in range(o.renamers):
        expect.update(res["n%d" % k]["files"])
    tv = time.monotonic()
    act = scan(M)
    problems = []
    afiles = {p: v for p, v in act.items() if v != DIR}
    for p in sorted(set(expect) | set(afiles)):
        w, a = want_of_small(expect.get(p)), afiles.get(p)
        if w != a:
            problems.append("%s: expected %s, found %s" % (p, show(w), show(a)))
    groups = {}
    for p, cid in expect.items():
        groups.setdefault(cmd5(cid, False), []).append(p)
    if not problems:
        for m, paths in sorted(groups.items()):
            for p in paths:
                v = os.getxattr(os.path.join(M, p), "user.dedup.refcount")
                if v != str(len(paths)).encode():
                    problems.append("user.dedup.refcount of %s is %r; %d files have its content" % (p, v, len(paths)))
            p = paths[0]
            tw = set(t for t in os.getxattr(os.path.join(M, p), "user.dedup.twins").decode().split("\n") if t)
            want = set("/" + q for q in paths[1:])
            if tw != want:
                problems.append("user.dedup.twins of %s: %d paths, expected %d; missing %s, extra %s" % (
                    p, len(tw), len(want), sorted(want - tw)[:3], sorted(tw - want)[:3]))
        if o.store:
            # the stored blobs (pack records, or files of a format 1 store)
            import subprocess
            listed = subprocess.run([os.environ["PD_BIN"], "blobs", o.store], check=True,
                                    stdout=subprocess.PIPE).stdout.decode().splitlines()
            nb = len(listed)
            if nb != len(groups):
                problems.append("%d stored blobs in %s, %d distinct contents" % (nb, o.store, len(groups)))
        stats = json.loads(os.getxattr(M, "user.dedup.stats"))
        if stats.get("pages") != len(expect) or stats.get("blobs") != len(groups):
            problems.append("user.dedup.stats: pages %s, blobs %s; expected %d and %d" % (
                stats.get("pages"), stats.get("blobs"), len(expect), len(groups)))
    if problems:
        print("load: %d problem(s) at the end:" % len(problems))
        for e in problems[:40]:
            print("  " + e)
        return 1
    print("load: %d files, %d distinct contents: every page, refcount and twins list exact; "
          "end checks took %.1f s" % (len(expect), len(groups), time.monotonic() - tv))
    print("%s_pages: %d pages" % (o.name, pages))
    print("%s_write_pages_per_s: %.1f pages/s" % (o.name, pages / dt))
    print("%s_write_mb_per_s: %.2f MB/s" % (o.name, nbytes / dt / 1e6))
    print("%s_write_seconds: %.2f s" % (o.name, dt))
    print("%s_reads_per_s: %.1f reads/s" % (o.name, reads / dt))
    print("%s_renames: %d renames" % (o.name, renames))
    print("%s_xattr_queries: %d queries" % (o.name, queries))
    return 0


def want_of_small(cid):
    if cid is None:
        return None
    return ("file", cmd5(cid, False), len(content(cid, False)))


# --- self-check of the crash verifier ------------------------------------


def cmd_selfcheck(o):
    """verify must pass on what a writer did to a plain directory, and fail
    on every kind of damage planted in it."""
    import shutil
    import subprocess
    base = o.dir
    me = os.path.abspath(__file__)

    def run(*args):
        p = subprocess.run([sys.executable, me] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return p.returncode, p.stdout.decode()

    src = os.path.join(base, "src")
    os.makedirs(src)
    rc, out = run("writer", "--mnt", src, "--journal", base + "/j", "--state", base + "/none.json",
                  "--ready", base + "/ready", "--wid", "0", "--cycle", "1", "--seed", str(o.seed), "--max-ops", "1000")
    check_(rc == 0, "writer on a plain directory: %s" % out)
    files = {}
    for dp, _, fs in os.walk(src):
        for f in fs:
            if "/.tmp" not in os.path.join(dp, f):
                files[os.path.relpath(os.path.join(dp, f), src)] = 1
    names = sorted(files)
    check_(len(names) > 20, "the writer made only %d files" % len(names))
    recs = read_journal(base + "/j")
    last = {}
    for i, r in enumerate(recs):
        if r["t"] == "I" and i + 1 < len(recs) and recs[i + 1]["t"] == "D":
            apply_op(last, r["op"])
    victim = sorted(p for p in names if last.get(p, DIR) != DIR and len(content(last[p])) > 10)[0]
    vcid = last[victim]
    other = "pool%d" % 999

    def trial(label, mutate, journal_extra=None, want_ok=False):
        d = os.path.join(base, label)
        shutil.copytree(src, d)
        shutil.copy(base + "/j", d + ".j")
        if journal_extra:
            with open(d + ".j", "a") as f:
                f.write(json.dumps(journal_extra) + "\n")
        mutate(d)
        rc, out = run("verify", "--mnt", d, "--state", d + ".state", "--no-refcounts", d + ".j")
        if want_ok:
            check_(rc == 0, "%s: verify should pass, but: %s" % (label, out))
        else:
            check_(rc != 0, "%s: verify did not notice the damage:\n%s" % (label, out))
        print("selfcheck %s: verify %s" % (label, "passed" if rc == 0 else "failed, as it must: " +
                                               out.splitlines()[1].strip()[:150]))

    def overwrite(path, data):
        with open(path, "wb") as f:
            f.write(data)

    trial("intact", lambda d: None, want_ok=True)
    trial("flipped-byte", lambda d: overwrite(os.path.join(d, victim), content(vcid)[:-1] + b"#"))
    trial("truncated", lambda d: overwrite(os.path.join(d, victim), content(vcid)[:len(content(vcid)) // 2]))
    trial("lost-file", lambda d: os.unlink(os.path.join(d, victim)))
    trial("stray-file", lambda d: overwrite(os.path.join(d, "w0/stray.html"), b"x"))
    trial("lost-dir", lambda d: shutil.rmtree(os.path.join(d, "w0", sorted(
        x for x in os.listdir(os.path.join(d, "w0")) if os.path.isdir(os.path.join(d, "w0", x)))[0])))
    trial("old-content", lambda d: overwrite(os.path.join(d, victim), content(other)))
    inflight = {"t": "I", "n": 99999, "op": {"k": "write", "p": victim, "cid": other, "old": vcid}}
    trial("overwrite-in-flight-old", lambda d: None, inflight, want_ok=True)
    trial("overwrite-in-flight-new", lambda d: overwrite(os.path.join(d, victim), content(other)), inflight, want_ok=True)
    trial("overwrite-in-flight-empty", lambda d: overwrite(os.path.join(d, victim), b""), inflight)
    trial("overwrite-in-flight-partial", lambda d: overwrite(os.path.join(d, victim), content(other)[:7]), inflight)
    newp = os.path.dirname(victim) + "/fresh.html"
    create = {"t": "I", "n": 99999, "op": {"k": "write", "p": newp, "cid": other, "old": None}}
    trial("create-in-flight-empty", lambda d: overwrite(os.path.join(d, newp), b""), create, want_ok=True)
    trial("create-in-flight-partial", lambda d: overwrite(os.path.join(d, newp), content(other)[:7]), create)
    mv = {"t": "I", "n": 99999, "op": {"k": "rename", "s": victim, "d": newp, "scid": vcid, "dold": None}}
    trial("rename-in-flight-done", lambda d: os.rename(os.path.join(d, victim), os.path.join(d, newp)), mv, want_ok=True)
    trial("rename-in-flight-both", lambda d: shutil.copy(os.path.join(d, victim), os.path.join(d, newp)), mv)
    trial("rename-in-flight-neither", lambda d: os.unlink(os.path.join(d, victim)), mv)

    # lossy mode (power cut without durable commits): a prefix of the
    # operations survives; operations done before the bound must be there
    done = [(r["op"], recs[i + 1]["time"]) for i, r in enumerate(recs)
            if r["t"] == "I" and i + 1 < len(recs) and recs[i + 1]["t"] == "D"]

    def materialize(label, ops):
        d = os.path.join(base, label)
        st = {}
        for op in ops:
            apply_op(st, op)
        os.makedirs(d)
        for p in sorted(st):
            if st[p] == DIR:
                os.makedirs(os.path.join(d, p), exist_ok=True)
        for p in sorted(st):
            if st[p] != DIR:
                overwrite(os.path.join(d, p), content(st[p]))
        return d

    def lossy(label, ops, bound, want_ok):
        d = materialize(label, ops)
        rc, out = run("verify", "--mnt", d, "--state", d + ".state", "--no-refcounts",
                      "--lossy-before", "%.6f" % bound, base + "/j")
        check_((rc == 0) == want_ok, "%s: verify %s:\n%s" % (label, "failed" if rc else "passed", out))
        print("selfcheck %s: verify %s" % (label, "passed" if rc == 0 else "failed, as it must: " +
                                               out.splitlines()[1].strip()[:150]))

    n = len(done)
    bound = done[n - 6][1]  # the last 6 operations may be lost
    lossy("lossy-all", [op for op, _ in done], bound, True)
    lossy("lossy-prefix", [op for op, _ in done[:n - 4]], bound, True)
    lossy("lossy-too-short", [op for op, _ in done[:n - 8]], bound, False)
    # A hole shows only where the tree without the create is no state the
    # verifier may accept: no prefix of the operations, give or take the
    # one after it in flight. A later write or unlink of the path, or a
    # page created and unlinked after it, leaves such a tree.
    def state_of(ops):
        st = {}
        for op in ops:
            apply_op(st, op)
        return st

    def op_paths(op):
        return {op.get(f) for f in ("p", "s", "d")} - {None}

    def hidden(i):
        holed = state_of(op for j, (op, _) in enumerate(done) if j != i)
        for p in range(n - 8, n + 1):
            pre = state_of(op for op, _ in done[:p])
            diff = {q for q in set(pre) | set(holed) if pre.get(q) != holed.get(q)}
            if diff <= (op_paths(done[p][0]) if p < n else set()):
                return True
        return False

    ks = [i for i in range(n - 6, n - 1) if done[i][0]["k"] == "write" and done[i][0]["old"] is None
          and all(done[j][0].get("s") != done[i][0]["p"] for j in range(i + 1, n)) and not hidden(i)]
    if ks:
        lossy("lossy-hole", [op for i, (op, _) in enumerate(done) if i != ks[-1]], bound, False)
    return 0


def check_(cond, msg):
    if not cond:
        print("selfcheck: " + msg)
        sys.exit(1)



def cmd_whois(o):
    """Which operations of the journals wrote or dropped content of MD5 m."""
    for m in o.md5:
        print("content %s:" % m)
        for jp in o.journals:
            recs = read_journal(jp)
            for i, r in enumerate(recs):
                if r["t"] != "I":
                    continue
                op = r["op"]
                if any(op.get(k) and op[k] != DIR and cmd5(op[k]) == m for k in ("cid", "old", "scid", "dold")):
                    res = "in flight at the crash"
                    if i + 1 < len(recs):
                        res = "done" if recs[i + 1]["t"] == "D" else "failed: " + recs[i + 1].get("ename", "?")
                    print("  %s #%d %s: %s" % (os.path.basename(jp), r["n"], res, json.dumps(op, sort_keys=True)))
    return 0


def cmd_ckpt_time(o):
    """When the store's checkpoint (core/store/store_ckpt.c) was taken, in
    seconds of CLOCK_MONOTONIC, as the writers' journals count time: the
    newest valid slot of meta/ckpt, which must be an open one (a mount
    without sync_blobs keeps it). Read from the file as the disk holds it,
    with a parser of its own: the layout the header of store_ckpt.c gives."""
    import struct
    data = open(o.file, "rb").read()
    psize = os.sysconf("SC_PAGE_SIZE")
    stride = (96 + 2 * psize + 8 + psize - 1) // psize * psize
    best = None
    for i in range(2):
        b = data[i * stride:(i + 1) * stride]
        end = 96 + 2 * psize
        if len(b) < end + 8 or b[:8] != b"PDCKPT\0\1":
            continue
        state, ps, seq, txn = struct.unpack_from("<IIQQ", b, 8)
        taken = struct.unpack_from("<Q", b, 88)[0]
        if ps != psize:
            continue
        if best is None or seq > best[0]:
            best = (seq, state, txn, taken)
    if best is None:
        print("no valid checkpoint slot in %s" % o.file, file=sys.stderr)
        return 1
    seq, state, txn, taken = best
    if state != 1:
        print("the checkpoint of %s is not an open one (state %d)" % (o.file, state), file=sys.stderr)
        return 1
    print("%.6f %d" % (taken / 1e9, txn))
    return 0


def main(argv):
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("writer")
    w.add_argument("--mnt", required=True)
    w.add_argument("--journal", required=True)
    w.add_argument("--state", required=True)
    w.add_argument("--ready", required=True)
    w.add_argument("--wid", type=int, required=True)
    w.add_argument("--cycle", type=int, required=True)
    w.add_argument("--seed", type=int, required=True)
    w.add_argument("--seed-base", type=int, default=0)
    w.add_argument("--pool", type=int, default=30)
    w.add_argument("--max-files", type=int, default=150)
    w.add_argument("--max-ops", type=int, default=0)
    w.add_argument("--max-seconds", type=float, default=60)
    v = sub.add_parser("verify")
    v.add_argument("--mnt", required=True)
    v.add_argument("--state", required=True)
    # How an operation in flight ends when the daemon dies: ENOTCONN or
    # ECONNABORTED through /dev/fuse; ECANCELED too through io_uring (a
    # request handed to a ring thread whose task is exiting), and EINTR
    # (an unlink in flight at the kill, seen once through io_uring at load
    # 15-20). With --killed-at, only from that moment on.
    v.add_argument("--allow-errno", default="ENOTCONN,ECONNABORTED,ECANCELED,EINTR")
    v.add_argument("--killed-at", type=float, default=None,
                   help="the moment (monotonic) the daemon was killed: the errnos above before it are failures")
    v.add_argument("--cut-time", type=float, default=None)
    v.add_argument("--lossy-before", type=float, default=None,
                   help="operations completed at or after this time (monotonic) may be lost")
    v.add_argument("--no-refcounts", dest="refcounts", action="store_false")
    v.add_argument("journals", nargs="*")
    ld = sub.add_parser("load")
    ld.add_argument("--mnt", required=True)
    ld.add_argument("--work", required=True)
    ld.add_argument("--store", default=None)
    ld.add_argument("--name", default="load")
    ld.add_argument("--seed", type=int, default=1)
    ld.add_argument("--writers", type=int, default=8)
    ld.add_argument("--pages", type=int, default=500)
    ld.add_argument("--pool", type=int, default=100)
    ld.add_argument("--readers", type=int, default=2)
    ld.add_argument("--renamers", type=int, default=2)
    ld.add_argument("--renamer-pages", type=int, default=100)
    ld.add_argument("--queriers", type=int, default=2)
    sc = sub.add_parser("selfcheck")
    sc.add_argument("--dir", required=True)
    sc.add_argument("--seed", type=int, default=1)
    wh = sub.add_parser("whois")
    wh.add_argument("--md5", action="append", required=True)
    wh.add_argument("journals", nargs="*")
    d = sub.add_parser("vdisk")
    d.add_argument("--image", required=True)
    d.add_argument("--mnt", required=True)
    d.add_argument("--ready", required=True)
    d.add_argument("--cut-file", required=True)
    d.add_argument("--keep", type=float, default=0.0)
    d.add_argument("--seed", type=int, default=0)
    ck = sub.add_parser("ckpt-time")
    ck.add_argument("file")
    o = ap.parse_args(argv)
    return {"writer": cmd_writer, "verify": cmd_verify, "vdisk": cmd_vdisk, "whois": cmd_whois,
            "load": cmd_load, "selfcheck": cmd_selfcheck, "ckpt-time": cmd_ckpt_time}[o.cmd](o)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
