#!/usr/bin/env bash
# Near-duplicate pages stored as deltas against a stored neighbour (the
# near index chooses the base, after the page is signed): the delta reads
# back byte-identical after a remount and after the caches are dropped; a
# base whose last name goes is kept while a delta needs it, its deltas are
# stored whole again and the base is freed; a chain of successive edits
# never grows past BLOB_DELTA_DEPTH (4); a damaged base gives EIO for its
# deltas and a refetch heals them; a recrawl's pages keep their shingle
# sets as differences from their bases', with the same near answers as a
# store without deltas, before and after the bases go; `pagededup stats`
# and user.dedup.stats count the deltas, chunked ones apart.
. "$(dirname "$0")/lib.sh"

# pages.py: page(seed, edits) -> bytes, a ~24 KB HTML page of prose; each
# edit changes one sentence.
cat >"$PD_TMP/pages.py" <<'EOF'
import random
WORDS = ("archive crawler page river mountain weather market council school library museum "
         "garden harbour station theatre bridge forest village castle valley island festival "
         "season winter summer morning evening history science music letter report story").split()
def sentence(rnd):
    return " ".join(rnd.choice(WORDS) for _ in range(rnd.randrange(8, 16))).capitalize() + "."
def page(seed, edits=0, n=160, salt=0, ins=0):
    """edits: successive edits (each page one more than the last); salt:
    a different set of edits (pages that differ from the first by one
    edit each, more from one another); ins: sentences inserted a third of
    the way in (the rest of the page shifts)."""
    rnd = random.Random(seed)
    sents = [sentence(rnd) for _ in range(n)]
    er = random.Random(seed * 1000 + 1 + salt * 31)
    for e in range(edits):
        sents[er.randrange(n)] = sentence(random.Random(seed * 7919 + e + 1 + salt * 104729))
    ir = random.Random(seed * 31 + 7)
    sents[n // 3:n // 3] = [sentence(ir) for _ in range(ins)]
    body = "\n".join("<p>%s</p>" % s for s in sents)
    return ("<html><head><title>page %d</title></head><body>\n%s\n</body></html>\n" % (seed, body)).encode()
EOF

# A page of about 1.3 MB (6 chunks of 256 KiB, pack.h), and its version
# with a sentence inserted.
cat >>"$PD_TMP/pages.py" <<'EOF'
def big(seed, ins=0):
    return page(seed, n=13000, ins=ins)
EOF

# deltas.py helpers on `pagededup blobs`: delta bases and chain depths.
cat >"$PD_TMP/deltas.py" <<'EOF'
import re, time
from fsutil import *
def bases(S):
    """{key: base key} of the records stored as deltas."""
    out = {}
    for r in stored(S):
        m = re.search(r":delta(?:\+dict)?:([0-9a-f]{32}(?:\.\d+)?)", r[3])
        if m:
            out[r[0]] = m.group(1)
    return out
def depth(b, k):
    d = 0
    while k in b:
        k = b[k]; d += 1
        assert d < 100, "a loop of deltas"
    return d
def chunks(S, k):
    """The chunks of blob k's record (1 when it is one frame)."""
    for r in stored(S):
        if r[0] == k:
            m = re.search(r"/(\d+) chunks$", r[3])
            return int(m.group(1)) if m else 1
    raise AssertionError("no blob %s" % k)
def dd(path, off, n):
    """n bytes at off read by dd (a read at an offset, as a client does)."""
    import subprocess
    p = subprocess.run(["dd", "if=" + path, "bs=65536", "skip=%d" % off, "count=%d" % n,
                        "iflag=skip_bytes,count_bytes", "status=none"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode:
        raise OSError(5 if b"Input/output error" in p.stderr else 0, p.stderr.decode())
    return p.stdout
def wait_deltas(S, n, what, timeout=90.0):
    end = time.time() + timeout
    while True:
        b = bases(S)
        if len(b) >= n:
            return b
        if time.time() > end:
            raise AssertionError("%s: %d pages stored as deltas after %d s, expected %d: %r"
                                 % (what, len(b), timeout, n, stored(S)))
        time.sleep(0.2)
EOF
export PYTHONPATH=$PD_TMP${PYTHONPATH:+:$PYTHONPATH}

# The store's files written out, then the clean pages dropped, so that the
# reads after it come from the disk. Not a global sync: that would wait
# for every other test's dirty pages too (tests/run.sh may run t_dedup.sh's
# 2 GB file beside it).
drop_caches() {
	find "$STORE" -type f -exec sync -- {} +
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
}

case_near_dup_is_delta() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import page
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
a, b = page(1), page(1, edits=1)
check(a != b, "the pages differ")
write(M + "/a.html", a)
wait_blobs(S, 1, "the first page")
write(M + "/b.html", b)
d = wait_deltas(S, 1, "the near-duplicate")
eq(d, {md5(b): md5(a)}, "delta records and their base (the newer page on the older)")
rows = {r[0]: r for r in stored(S)}
_, _, alen = blob_place(S, md5(a))
_, _, blen = blob_place(S, md5(b))
check(blen * 4 < alen, "the delta takes %d bytes, the base %d: not a quarter" % (blen, alen))
eq(blob_bytes(S, md5(b)), b, "the delta decoded by pagededup blobs --cat")
eq(read(M + "/b.html"), b, "the delta read through the mount")
EOF
	pd_remount || fail remount
	drop_caches
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import page
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
eq(read(M + "/b.html"), page(1, edits=1), "the delta after a remount and drop_caches")
eq(read(M + "/a.html"), page(1), "the base after a remount and drop_caches")
eq(bases(S), {md5(page(1, edits=1)): md5(page(1))}, "delta records after the remount")
EOF
	pd_umount --no-fsck || fail umount
	"$PD_BIN" fsck --deep "$STORE" || fail "fsck --deep of a store with a delta"
}

case_base_dies() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os, json
from fsutil import *
from pages import page
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
write(M + "/a.html", page(2))
wait_blobs(S, 1, "the base")
for i in range(1, 4):
    write(M + "/b%d.html" % i, page(2, edits=1, salt=i))
d = wait_deltas(S, 3, "three near-duplicates")
base = md5(page(2))
eq(sorted(d.values()), [base] * 3, "the three deltas' base")
os.unlink(M + "/a.html")
# the deltas read at once (their base kept for them) and afterwards
for i in range(1, 4):
    eq(read(M + "/b%d.html" % i), page(2, edits=1, salt=i), "delta b%d right after its base's last name went" % i)
# the deltas are stored whole again, and the base goes
end = time.time() + 60
while (bases(S) or base in blob_files(S)) and time.time() < end:
    time.sleep(0.2)
eq(bases(S), {}, "deltas left on the dead base")
eq(sorted(blob_files(S)), sorted(md5(page(2, edits=1, salt=i)) for i in range(1, 4)), "stored blobs")
for i in range(1, 4):
    eq(read(M + "/b%d.html" % i), page(2, edits=1, salt=i), "b%d stored whole again" % i)
st = dstats(M)
eq(st.get("blobs"), 3, "blobs in stats")
EOF
	pd_umount || fail umount
	local out
	out=$("$PD_BIN" fsck --deep "$STORE") || fail "fsck --deep after the base died: $out"
	printf '%s\n' "$out" | grep -q "kept" && fail "fsck still reports a kept base: $out"
	drop_caches
	pd_mount -n -s "$STORE" || fail remount
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import page
M = os.environ["MNT"]
for i in range(1, 4):
    eq(read(M + "/b%d.html" % i), page(2, edits=1, salt=i), "b%d after a remount" % i)
EOF
	pd_umount || fail umount
}

case_chain_depth() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import page
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
# ten successive edits: each page is the previous one with one sentence more changed
for i in range(10):
    write(M + "/v%d.html" % i, page(3, edits=i))
    wait_blobs(S, i + 1, "version %d" % i)
d = wait_deltas(S, 9, "nine successive edits")
deepest = max(depth(d, k) for k in d)
check(deepest <= 4, "a chain of %d deltas (bound 4): %r" % (deepest, d))
check(deepest >= 2, "no delta on a delta: the chain bound is not exercised (%r)" % d)
EOF
	pd_remount || fail remount
	drop_caches
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import page
M = os.environ["MNT"]
for i in range(10):
    eq(read(M + "/v%d.html" % i), page(3, edits=i), "version %d" % i)
EOF
	pd_umount --no-fsck || fail umount
	"$PD_BIN" fsck --deep "$STORE" || fail "fsck --deep of a chain"
}

case_damaged_base_heals() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import page
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
write(M + "/a.html", page(4))
wait_blobs(S, 1, "the base")
write(M + "/b.html", page(4, edits=1))
wait_deltas(S, 1, "the near-duplicate")
EOF
	pd_umount || fail umount
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import page
S = os.environ["STORE"]
damage_blob(S, md5(page(4)), at=200, n=16)
EOF
	pd_mount -n -s "$STORE" || fail remount
	drop_caches
	py <<'EOF' || exit 1
import os, errno
from fsutil import *
from pages import page
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
expect_errno(errno.EIO, read, M + "/b.html")
expect_errno(errno.EIO, read, M + "/a.html")
# refetch the base: it heals, and so does its delta
write(M + "/a2.html", page(4))
eq(read(M + "/a.html"), page(4), "the base after the refetch")
eq(read(M + "/b.html"), page(4, edits=1), "the delta after its base's refetch")
EOF
	pd_umount --no-fsck || fail umount
	"$PD_BIN" fsck --deep "$STORE" || fail "fsck --deep after healing"
}

# A store made by a release of format 2 (before deltas; PD_LANDED_BUILD:
# its build directory, else skipped) opens, reads, takes deltas for new
# pages, and is then of the current format (3 or later), which that
# release refuses. (A build of format 3 to 6 as PD_LANDED_BUILD works the
# same; from format 7 the new delta's set is kept as a difference.)
case_landed_store_opens() {
	local old=${PD_LANDED_BUILD:-}
	[ -x "$old/pagededupfs" ] || skip "PD_LANDED_BUILD (a build of format 2) not given"
	local d=$PD_TMP/landed
	mkdir -p "$d/mnt" && "$old/pagededup" mkfs "$d/store" >/dev/null || fail "mkfs of format 2"
	"$old/pagededupfs" "$d/store" "$d/mnt" || fail "mount with the format 2 release"
	py "$d/mnt" <<'EOF2' || { fusermount3 -u "$d/mnt"; exit 1; }
import sys
from fsutil import *
from pages import page
write(sys.argv[1] + "/a.html", page(5))
write(sys.argv[1] + "/b.html", page(5, edits=1))
EOF2
	fusermount3 -u "$d/mnt" || fail "unmount of the format 2 release"
	local i; for i in $(seq 1 100); do pgrep -f "$old/pagededupfs $d/store" >/dev/null || break; sleep 0.1; done
	pd_mount -n -s "$d/store" || fail "mount of a format 2 store"
	py <<'EOF2' || exit 1
import os
from fsutil import *
from pages import page
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
eq(read(M + "/a.html"), page(5), "a page of the format 2 store")
eq(read(M + "/b.html"), page(5, edits=1), "a page of the format 2 store")
n0 = len(bases(S)) # a landed build that made deltas already left some
write(M + "/c.html", page(5, edits=2))
d = wait_deltas(S, n0 + 1, "a near-duplicate written into the format 2 store")
check(md5(page(5, edits=2)) in d, "the new page is the delta: %r" % d)
EOF2
	pd_umount || fail umount
	local format
	format=$(sed -n 's/^#define PD_FORMAT_VERSION \([0-9]*\).*/\1/p' "$PD_TOP/core/store/store.h")
	"$PD_BIN" stats "$d/store" | grep -q "store format $format" || fail "the store is not format $format after a writable open"
	local out
	out=$("$old/pagededup" stats "$d/store" 2>&1) && fail "the format 2 release opened a format $format store: $out"
	printf '%s\n' "$out" | grep -q "format version $format" || fail "the format 2 release's refusal: $out"
	# the new delta's shingle set is kept as a difference (format 7 on)
	if [ "$format" -ge 7 ]; then
		set_forms "$d/store" | grep -q '^05 ' || fail "no set kept as a difference: $(set_forms "$d/store")"
	fi
	"$PD_BIN" fsck --deep "$d/store" >/dev/null || fail "fsck --deep of the landed store"
}

# A crawl and its recrawl (every page again with one sentence edited, and
# again with another): the recrawl's pages become deltas on the crawl's, and their shingle sets are
# kept as differences from their bases' (nearset format 5). The near
# answers of every page are those of a store of the same pages without
# deltas (-o delta=off), before and after the crawl's pages (the bases)
# are unlinked, which writes the recrawl's sets whole again; fsck --deep
# clean after each step.
set_forms() { # STORE: "FORMAT COUNT" lines of its nearfeat rows
	mdb_dump -s nearfeat "$1/meta" |
		awk '/^HEADER=END/ { d = 1; next } /^DATA=END/ { d = 0 } d && ++n % 2 == 0 { print substr($1, 1, 2) }' |
		sort | uniq -c | awk '{ print $2, $1 }'
}
crawl_answers() { # MNT: every page's user.dedup.near, by name
	local f
	for f in $(cd "$1" && ls | sort); do
		printf '== %s\n' "$f"
		getfattr --absolute-names --only-values -n user.dedup.near "$1/$f" | sed "s|$1||"
		echo
	done
}
crawl_and_recrawl() { # MOUNT_OPTS: answers after the recrawl, then after the bases go (files A1, A2)
	local tag=$1 opts=$2
	pd_mount $opts || fail "mount ($tag)"
	py <<'EOF2' || exit 1
import os
from fsutil import *
from pages import page
M = os.environ["MNT"]
for i in range(8):
    write(M + "/c%d.html" % i, page(40 + i))
EOF2
	py <<'EOF2' || exit 1
import os
from fsutil import *
from pages import page
S = os.environ["STORE"]
wait_blobs(S, 8, "the crawl")
EOF2
	py <<'EOF2' || exit 1
import os
from fsutil import *
from pages import page
M = os.environ["MNT"]
for i in range(8):
    write(M + "/r%d.html" % i, page(40 + i, edits=1))
    write(M + "/s%d.html" % i, page(40 + i, edits=1, salt=1))
EOF2
	if [ "$tag" = deltas ]; then
		py <<'EOF2' || exit 1
import os
from fsutil import *
from pages import page
from deltas import *
S = os.environ["STORE"]
d = wait_deltas(S, 16, "the recrawl and its variant")
for i in range(8):
    eq(d.get(md5(page(40 + i, edits=1))), md5(page(40 + i)), "r%d's base" % i)
EOF2
	fi
	crawl_answers "$MNT" >"$PD_TMP/$tag.A1" || fail "answers ($tag)"
	pd_umount || fail "umount ($tag)"
	"$PD_BIN" fsck --deep "$STORE" >/dev/null || fail "fsck --deep after the recrawl ($tag)"
	set_forms "$STORE" >"$PD_TMP/$tag.forms1"
	pd_mount -n -s "$STORE" $opts || fail "remount ($tag)"
	rm "$MNT"/c*.html || fail "unlink of the crawl ($tag)"
	crawl_answers "$MNT" >"$PD_TMP/$tag.A2" || fail "answers after the unlinks ($tag)"
	pd_umount || fail "umount after the unlinks ($tag)"
	"$PD_BIN" fsck --deep "$STORE" >/dev/null || fail "fsck --deep after the unlinks ($tag)"
	set_forms "$STORE" >"$PD_TMP/$tag.forms2"
}
case_set_diffs() {
	crawl_and_recrawl deltas ""
	crawl_and_recrawl whole delta=off
	grep -q '^05 16$' "$PD_TMP/deltas.forms1" || fail "the recrawl's sets are not differences: $(cat "$PD_TMP/deltas.forms1")"
	expect_eq "$(cat "$PD_TMP/deltas.forms2")" "04 16" "set rows once the bases are gone"
	expect_eq "$(cat "$PD_TMP/whole.forms1")" "04 24" "set rows without deltas"
	grep -q "/r3.html" "$PD_TMP/deltas.A1" || fail "no answer names a recrawl page: $(cat "$PD_TMP/deltas.A1")"
	grep -q "/s3.html" "$PD_TMP/deltas.A2" || fail "no answer once the bases are gone: $(cat "$PD_TMP/deltas.A2")"
	expect_eq "$(cat "$PD_TMP/deltas.A1")" "$(cat "$PD_TMP/whole.A1")" "answers of a crawl and its recrawl, deltas against none"
	expect_eq "$(cat "$PD_TMP/deltas.A2")" "$(cat "$PD_TMP/whole.A2")" "answers once the bases are gone"
}

# A page over a chunk (256 KiB) and its version with one sentence
# inserted: the version is a chunked delta (pack.h), read whole and at
# offsets; a damaged chunk of the base gives EIO for the delta's chunks
# whose window needs it only, fsck names both pages; the base healed by a
# refetch, then unlinked: the delta is stored whole again, in chunks.
case_big_page_chunked_delta() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import big
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
a, b = big(6), big(6, ins=1)
check(len(a) > 1 << 20 and len(b) > len(a), "pages of %d and %d bytes" % (len(a), len(b)))
write(M + "/a.html", a)
wait_blobs(S, 1, "the large page")
write(M + "/b.html", b)
d = wait_deltas(S, 1, "the large page with a sentence inserted")
eq(d, {md5(b): md5(a)}, "delta records and their base")
eq(chunks(S, md5(b)), (len(b) + 262143) // 262144, "chunks of the delta")
_, _, alen = blob_place(S, md5(a))
_, _, blen = blob_place(S, md5(b))
check(blen * 20 < alen, "the delta takes %d bytes, the base %d: not a twentieth" % (blen, alen))
eq(read(M + "/b.html"), b, "the delta read whole")
eq(blob_bytes(S, md5(b)), b, "the delta decoded by pagededup blobs --cat")
EOF
	pd_remount || fail remount
	drop_caches
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import big
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
a, b = big(6), big(6, ins=1)
C = 262144
for name, data in (("b.html", b), ("a.html", a)):
    for off, n in ((0, 100), (C - 50, 100), (3 * C + 1000, 5000), (len(data) - 70, 70), (2 * C, C)):
        eq(md5(dd(M + "/" + name, off, n)), md5(data[off:off + n]), "%s: %d bytes at %d after drop_caches" % (name, n, off))
eq(md5(read(M + "/b.html")), md5(b), "the delta whole after the reads at offsets")
EOF
	pd_umount || fail umount
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import big
S = os.environ["STORE"]
# bytes of the base's first chunk (past its header and chunk table)
damage_blob(S, md5(big(6)), at=104 + 6 * 24 + 300, n=16)
EOF
	pd_mount -n -s "$STORE" || fail remount
	drop_caches
	py <<'EOF' || exit 1
import os, errno
from fsutil import *
from pages import big
from deltas import *
M = os.environ["MNT"]
a, b = big(6), big(6, ins=1)
C = 262144
# the delta's chunk 3 needs the base's chunks 2..4 only; its chunks 0 and 1
# need the base's chunk 0 (chunk 1's window starts 32 KiB before it)
fd = os.open(M + "/b.html", os.O_RDONLY)
eq(md5(os.pread(fd, C, 3 * C)), md5(b[3 * C:4 * C]), "the delta's chunk 3 beside a damaged base chunk 0")
expect_errno(errno.EIO, os.pread, fd, 100, 10)
expect_errno(errno.EIO, os.pread, fd, 100, C + 10)
eq(md5(os.pread(fd, C, 4 * C)), md5(b[4 * C:5 * C]), "the delta's chunk 4 in the same open")
os.close(fd)
fd = os.open(M + "/a.html", os.O_RDONLY)
eq(md5(os.pread(fd, 100, 2 * C)), md5(a[2 * C:2 * C + 100]), "the base's chunk 2")
expect_errno(errno.EIO, os.pread, fd, 100, 0)
os.close(fd)
EOF
	pd_umount --no-fsck || fail umount
	local out ka kb
	out=$("$PD_BIN" fsck --deep "$STORE" 2>&1) && fail "fsck --deep passed a damaged base: $out"
	ka=$(python3 -c 'from fsutil import md5; from pages import big; print(md5(big(6)))')
	kb=$(python3 -c 'from fsutil import md5; from pages import big; print(md5(big(6, ins=1)))')
	grep -q "^blob $ka: .*does not decode" <<<"$out" || fail "fsck does not name the damaged base $ka: $out"
	grep -q "^blob $kb: .*(a delta on blob $ka) does not decode" <<<"$out" || fail "fsck does not name the delta $kb on it: $out"
	pd_mount -n -s "$STORE" || fail remount
	py <<'EOF' || exit 1
import os, time
from fsutil import *
from pages import big
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
a, b = big(6), big(6, ins=1)
# the refetch of the base heals it and its delta
write(M + "/a2.html", a)
eq(md5(read(M + "/a.html")), md5(a), "the base after the refetch")
eq(md5(read(M + "/b.html")), md5(b), "the delta after its base's refetch")
# the base's last names go: its delta is stored whole again (in chunks)
os.unlink(M + "/a.html")
os.unlink(M + "/a2.html")
eq(md5(read(M + "/b.html")), md5(b), "the delta right after its base's last name went")
end = time.time() + 60
while (bases(S) or md5(a) in blob_files(S)) and time.time() < end:
    time.sleep(0.2)
eq(bases(S), {}, "deltas left on the dead base")
eq(blob_files(S), [md5(b)], "stored blobs")
eq(chunks(S, md5(b)), (len(b) + 262143) // 262144, "chunks of the page stored whole")
EOF
	pd_remount || fail remount
	drop_caches
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import big
from deltas import dd
M = os.environ["MNT"]
b = big(6, ins=1)
eq(md5(dd(M + "/b.html", 3 * 262144 + 7, 9000)), md5(b[3 * 262144 + 7:3 * 262144 + 9007]), "the page stored whole, at an offset")
eq(md5(read(M + "/b.html")), md5(b), "the page stored whole")
EOF
	pd_umount --no-fsck || fail umount
	"$PD_BIN" fsck --deep "$STORE" || fail "fsck --deep after the base died"
}

# `pagededup stats` counts the pages stored as deltas, the chunked ones
# apart, and their records' bytes (a walk of the link rows): 0 in a store
# that has none, then a one-frame delta and a chunked one, counted to the
# byte from `pagededup blobs`; the daemon's user.dedup.stats says the same.
case_stats_counts_deltas() {
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import page
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
write(M + "/a.html", page(1))
write(M + "/c.html", page(2))
wait_blobs(S, 2, "two pages unlike each other")
eq(dstats(M)["deltas"], {"pages": 0, "bytes": 0, "chunked": 0, "chunked_bytes": 0}, "deltas in a store of none")
EOF
	pd_umount || fail umount
	local out
	out=$("$PD_BIN" stats "$STORE") || fail "stats"
	grep -q "^deltas: *0 pages stored as deltas" <<<"$out" || fail "stats of a store without deltas: $out"
	pd_mount -n -s "$STORE" || fail remount
	py <<'EOF' || exit 1
import os
from fsutil import *
from pages import page, big
from deltas import *
M, S = os.environ["MNT"], os.environ["STORE"]
write(M + "/b.html", page(1, edits=1))
write(M + "/big-a.html", big(6))
wait_blobs(S, 4, "the large page")
write(M + "/big-b.html", big(6, ins=1))
d = wait_deltas(S, 2, "a near-duplicate and a large one")
eq(sorted(d), sorted([md5(page(1, edits=1)), md5(big(6, ins=1))]), "the deltas")
small, large = blob_place(S, md5(page(1, edits=1)))[2], blob_place(S, md5(big(6, ins=1)))[2]
want = {"pages": 2, "bytes": small + large, "chunked": 1, "chunked_bytes": large}
eq(dstats(M)["deltas"], want, "deltas in user.dedup.stats")
EOF
	pd_umount || fail umount
	py <<'EOF' || exit 1
import os, json, subprocess
from fsutil import *
from pages import page, big
S = os.environ["STORE"]
small, large = blob_place(S, md5(page(1, edits=1)))[2], blob_place(S, md5(big(6, ins=1)))[2]
st = json.loads(subprocess.run([os.environ["PD_BIN"], "stats", "--json", S], stdout=subprocess.PIPE, check=True).stdout)
eq(st["deltas"], {"pages": 2, "bytes": small + large, "chunked": 1, "chunked_bytes": large}, "deltas in pagededup stats --json")
EOF
	out=$("$PD_BIN" stats "$STORE") || fail "stats"
	grep -q "^deltas: *2 pages stored as deltas .*; of them 1 chunked" <<<"$out" || fail "stats with two deltas: $out"
}

pd_case near_dup_is_delta
pd_case base_dies
pd_case chain_depth
pd_case damaged_base_heals
pd_case big_page_chunked_delta
pd_case landed_store_opens
pd_case set_diffs
pd_case stats_counts_deltas
pd_finish
