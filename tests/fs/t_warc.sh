#!/usr/bin/env bash
# WARC in and out of a mount (pagededup export / import, core/warc/):
#   roundtrip         a tree with duplicates exported from the mount, every
#                     record checked by warcio (a reader written elsewhere),
#                     imported into another directory: same bytes, URLs,
#                     dates, and the import adds no blob
#   store_export      the same export read from the store, without the mount
#   cdxj              our CDXJ index equals warcio's cdx-index of the files
#   split             --max-size: several files, each opened by warcinfo,
#                     revisits naming records of earlier files
#   wget_import       a WARC written by wget --warc-file of a site served on
#                     127.0.0.1 imported: the tree wget itself saved, with
#                     URLs and HTTP headers
#   warcio_import     a WARC written by warcio (response, resource, revisit)
#   malformed_*       a truncated gzip member, a wrong Content-Length (gzip
#                     and plain), a record without WARC-Type: reported with
#                     the record's offset, skipped, the rest imported
#   chunked           responses in chunked transfer coding: the page without
#                     its framing; broken framing reported, no file
#   file_then_dir     http://h/a then http://h/a/b: nothing lost
#   big_record        a 2 GiB record made on the fly and piped in: imported
#                     whole while the importer's memory stays small
. "$(dirname "$0")/lib.sh"
pd_require

NODE_MODULES=${PD_NODE_MODULES:-$PD_TOP/build/node/node_modules}
WARCIO_CLI=$NODE_MODULES/warcio/dist/cli.js

warcio_check() { node "$PD_FSDIR/warc_check.mjs" "$NODE_MODULES" "$@"; }

# The source tree: pages under two hosts, some with origin URLs, copies of
# the same bytes under other names, a binary, an empty page, odd names, two
# different pages with the same MD5.
make_tree() {
	py "$1" <<'EOF'
import os, sys
from fsutil import write
root = sys.argv[1]
story = b"<html><body>" + b"<p>the same story, syndicated</p>" * 60 + b"</body></html>\n"
logo = bytes(range(256)) * 300
pages = {
    "example.com/index.html": b"<html><body>home</body></html>\n",
    "example.com/news/story.html": story,
    "example.com/news/copy-of-story.html": story,
    "example.org/mirror/story.html": story,
    "example.com/img/logo.png": logo,
    "example.org/logo.png": logo,
    "example.com/empty.html": b"",
    "example.com/a b/page?x=1&y=2": b"<p>query page</p>\n",
    "example.com/caf\u00e9.html": b"<p>unicode name</p>\n",
    "notahost/readme.txt": b"a page outside any host directory\n",
}
urls = {
    "example.com/index.html": "http://example.com/",
    "example.org/mirror/story.html": "https://www.example.org/mirror/story.html",
}
# two different pages with one MD5: never a revisit of each other
for ab in "ab":
    pages["example.com/collide/%s.bin" % ab] = open(os.path.join(os.environ["PD_DATA"], "md5-collision-%s.bin" % ab), "rb").read()
t = 1600000000
for rel, data in sorted(pages.items()):
    p = os.path.join(root, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    write(p, data)
    if rel in urls:
        os.setxattr(p, "user.xdg.origin.url", urls[rel].encode())
    t += 3600
    os.utime(p, ns=(t * 10**9 + 123456000, t * 10**9 + 123456000))
EOF
}

case_roundtrip() {
	pd_cdwd
	make_tree "$W/src" || fail "make the tree"
	pd_wait_blobs "$(find "$W/src" -type f -exec sha1sum {} + | awk '{print $1}' | sort -u | wc -l)" || fail blobs
	local before after
	before=$(pd_nblobs)
	expect "$PD_BIN" export "$W/src" -o "$PD_TMP/rt.warc.gz"
	[ -f "$PD_TMP/rt-00000.warc.gz" ] || fail "no file $PD_TMP/rt-00000.warc.gz"
	counts=$(warcio_check "$PD_TMP"/rt-*.warc.gz) || fail "warcio: $counts"
	echo "$counts"
	# 12 pages; story has 3 copies, logo 2: 3 revisits; the two pages
	# that share an MD5 are two resources
	expect_eq "$counts" '{"files":1,"records":13,"warcinfo":1,"response":0,"resource":9,"revisit":3,"other":0}' "record counts"
	mkdir "$W/back"
	expect "$PD_BIN" import "$PD_TMP/rt-00000.warc.gz" -C "$W/back"
	after=$(pd_nblobs)
	expect_eq "$after" "$before" "blob files after the import (every page was stored already)"
	py "$W/src" "$W/back" <<'EOF'
import os, sys
from fsutil import *
src, back = sys.argv[1], sys.argv[2]
where = {  # the imported names: URL-made names for pages without one
    "example.com/index.html": "example.com/index.html",
    "example.org/mirror/story.html": "www.example.org/mirror/story.html",
    "notahost/readme.txt": "notahost/readme.txt",
}
n = 0
for d, _, fs in os.walk(src):
    for f in fs:
        p = os.path.join(d, f)
        rel = os.path.relpath(p, src)
        q = os.path.join(back, where.get(rel, rel))
        eq(read(q), read(p), "bytes of " + rel)
        st_p, st_q = os.stat(p), os.stat(q)
        eq(st_q.st_mtime_ns // 1000, st_p.st_mtime_ns // 1000, "mtime (us) of " + rel)
        url = user_xattrs(q).get("user.xdg.origin.url")
        check(url is not None, "origin URL of " + rel)
        want = user_xattrs(p).get("user.xdg.origin.url")
        if want is not None:
            eq(url, want, "origin URL of " + rel)
        if st_p.st_size:
            eq(md5x(q), md5x(p), "stored copy of " + rel)
            check(refcount(q) >= 2, "the imported %s shares its blob" % rel)
        n += 1
eq(n, 12, "pages compared")
eq(sum(len(fs) for _, _, fs in os.walk(back)), 12, "files imported")
EOF
}

case_store_export() {
	pd_cdwd
	make_tree "$W/src" || fail "make the tree"
	expect "$PD_BIN" export "$MNT" store_export/src -o "$PD_TMP/viamount.warc.gz"
	sync
	# the store, read without the mount (while it is mounted: read-only)
	expect "$PD_BIN" export "$STORE" store_export/src -o "$PD_TMP/viastore.warc.gz"
	a=$(warcio_check --list "$PD_TMP"/viamount-*.warc.gz) || fail "warcio (mount): $a"
	b=$(warcio_check --list "$PD_TMP"/viastore-*.warc.gz) || fail "warcio (store): $b"
	expect_eq "$b" "$a" "records of the store export"
	printf '%s\n' "$a" | grep -q '^revisit file:///store_export/src/example.com/news/story.html ' || fail "no revisit for the second story: $a"
}

case_cdxj() {
	pd_cdwd
	make_tree "$W/src" || fail "make the tree"
	expect "$PD_BIN" export "$W/src" -o "$PD_TMP/ix.warc.gz" --cdxj
	[ -s "$PD_TMP/ix.cdxj" ] || fail "no index"
	(cd "$PD_TMP" && node "$WARCIO_CLI" cdx-index ix-00000.warc.gz) | LC_ALL=C sort >"$PD_TMP/ix.warcio.cdxj" || fail "warcio cdx-index"
	[ "$(wc -l <"$PD_TMP/ix.cdxj")" = 12 ] || fail "index lines: $(wc -l <"$PD_TMP/ix.cdxj")"
	diff "$PD_TMP/ix.warcio.cdxj" "$PD_TMP/ix.cdxj" || fail "our CDXJ differs from warcio's"
	# an export written into the tree it walks leaves itself out
	for i in 1 2; do
		"$PD_BIN" export "$W/src" -o "$W/src/self.warc.gz" --cdxj 2>"$PD_TMP/self.log" || fail "export into the tree"
		grep -q "^pagededup export: 12 pages" "$PD_TMP/self.log" || fail "run $i: $(cat "$PD_TMP/self.log")"
	done
}

case_split() {
	pd_cdwd
	py "$W/src" <<'EOF'
import os, sys, random
from fsutil import write
r = random.Random(7)
root = sys.argv[1]
blobs = [bytes(r.getrandbits(8) for _ in range(30000)) for _ in range(12)]
for i in range(40):
    p = os.path.join(root, "split.example", "d%d" % (i % 4), "p%02d.bin" % i)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    write(p, blobs[i % 12])
EOF
	expect "$PD_BIN" export "$W/src" -o "$PD_TMP/sp.warc.gz" --max-size 100k
	n=$(ls "$PD_TMP"/sp-*.warc.gz | wc -l)
	[ "$n" -ge 3 ] || fail "expected several files, got $n"
	counts=$(warcio_check "$PD_TMP"/sp-*.warc.gz) || fail "warcio: $counts"
	echo "$counts"
	expect_eq "$counts" "{\"files\":$n,\"records\":$((40 + n)),\"warcinfo\":$n,\"response\":0,\"resource\":12,\"revisit\":28,\"other\":0}" "record counts"
}

SITE=$PD_TMP/site
start_site() {
	mkdir -p "$SITE/docs" "$SITE/img"
	printf '<html><body><a href="docs/">docs</a> <a href="page.html?q=1&amp;r=a/b">q</a> <a href="same.html">s</a> <img src="img/x.png"></body></html>\n' >"$SITE/index.html"
	printf '<html><body>docs <a href="../index.html">up</a> <a href="gone.html">gone</a></body></html>\n' >"$SITE/docs/index.html"
	printf 'query page\n' >"$SITE/page.html"
	cp "$SITE/docs/index.html" "$SITE/same.html"
	head -c 50000 /dev/urandom >"$SITE/img/x.png"
	python3 -u -m http.server --bind 127.0.0.1 --directory "$SITE" 0 >"$PD_TMP/http.log" 2>&1 </dev/null &
	echo $! >>"$PD_TMP/pids"
	for i in $(seq 1 200); do
		PORT=$(sed -n 's/^Serving HTTP on [0-9.]* port \([0-9]*\).*/\1/p' "$PD_TMP/http.log")
		[ -n "$PORT" ] && return 0
		sleep 0.05
	done
	return 1
}

case_wget_import() {
	start_site || fail "http.server did not start"
	mkdir -p "$PD_TMP/wget"
	(cd "$PD_TMP/wget" && wget -q -r -l 3 --warc-file=crawl --no-warc-keep-log "http://127.0.0.1:$PORT/") || true
	[ -s "$PD_TMP/wget/crawl.warc.gz" ] || fail "wget wrote no WARC"
	pd_cdwd
	rc=0
	"$PD_BIN" import "$PD_TMP/wget/crawl.warc.gz" -C "$W" 2>"$PD_TMP/wget-import.log" || rc=$?
	cat "$PD_TMP/wget-import.log"
	expect_eq "$rc" 0 "import exit status"
	# robots.txt and gone.html (404), /docs (301 to /docs/)
	grep -q " 3 of non-2xx status" "$PD_TMP/wget-import.log" || fail "the 404s and the redirect should be counted"
	# what wget saved itself, name for name and byte for byte
	diff -r "$PD_TMP/wget/127.0.0.1:$PORT" "$W/127.0.0.1:$PORT" || fail "the import differs from wget's mirror"
	url=$(pd_xattr "$W/127.0.0.1:$PORT/page.html?q=1&r=a%2Fb" user.xdg.origin.url)
	expect_eq "$url" "http://127.0.0.1:$PORT/page.html?q=1&r=a/b" "origin URL"
	pd_xattr "$W/127.0.0.1:$PORT/img/x.png" user.warc.http | head -1 | grep -q '^HTTP/1.0 200 OK' || fail "HTTP header"
	pd_xattr "$W/127.0.0.1:$PORT/img/x.png" user.warc.http | grep -qi '^Content-type: image/png' || fail "Content-Type kept"
	expect_eq "$(pd_xattr "$W/127.0.0.1:$PORT/same.html" user.dedup.md5)" \
		"$(pd_xattr "$W/127.0.0.1:$PORT/docs/index.html" user.dedup.md5)" "duplicates"
	rc2=$(pd_xattr "$W/127.0.0.1:$PORT/same.html" user.dedup.refcount)
	[ "$rc2" -ge 2 ] || fail "same.html and docs/index.html share one blob (refcount $rc2)"
}

# A WARC written by warcio (response, resource, and a revisit naming the
# response by its record ID) imported: the revisit becomes a copy.
case_warcio_import() {
	pd_cdwd
	len=$(node "$PD_FSDIR/warc_write.mjs" "$NODE_MODULES" "$PD_TMP/byw.warc.gz") || fail "warcio could not write"
	expect "$PD_BIN" import "$PD_TMP/byw.warc.gz" -C "$W"
	expect_eq "$(stat -c %s "$W/w.example/dir/index.html")" "$len" "page size"
	cmp "$W/w.example/dir/index.html" "$W/w.example/dir/again.html" || fail "the revisit's copy"
	expect_eq "$(cat "$W/w.example/notes.txt")" "plain notes" "resource"
	expect_eq "$(pd_xattr "$W/w.example/dir/again.html" user.xdg.origin.url)" "http://w.example/dir/again.html" "URL of the revisit"
	expect_eq "$(stat -c %Y "$W/w.example/dir/index.html")" 1646370367 "mtime from WARC-Date"
	expect_eq "$(pd_xattr "$W/w.example/dir/again.html" user.dedup.refcount)" 2 "the copy shares the page's blob"
	# warcio's sha256 block digest is checked: one byte changed, the
	# response is reported at its offset (0) and not written
	python3 - "$PD_TMP/byw.warc.gz" "$PD_TMP/byw-bad.warc.gz" <<'EOF2'
import sys, zlib
d = open(sys.argv[1], "rb").read()
ms, p = [], 0
while p < len(d):
    o = zlib.decompressobj(31); o.decompress(d[p:]); e = len(d) - len(o.unused_data); ms.append(d[p:e]); p = e
r = zlib.decompress(ms[0], 31).replace(b"warcio</p></body>", b"warciO</p></body>")
c = zlib.compressobj(6, zlib.DEFLATED, 31); ms[0] = c.compress(r) + c.flush()
open(sys.argv[2], "wb").write(b"".join(ms))
EOF2
	mkdir "$W/bad"
	rc=0
	"$PD_BIN" import "$PD_TMP/byw-bad.warc.gz" -C "$W/bad" 2>"$PD_TMP/byw-bad.log" || rc=$?
	cat "$PD_TMP/byw-bad.log"
	expect_eq "$rc" 3 "exit status (done, one record skipped)"
	grep -q "offset 0: WARC-Block-Digest sha256:.* does not match" "$PD_TMP/byw-bad.log" || fail "not reported"
	[ ! -e "$W/bad/w.example/dir/index.html" ] || fail "a page whose digest does not match was kept"
	[ -e "$W/bad/w.example/notes.txt" ] || fail "the next record was not imported"
}

# damage KIND IN OUT: write a damaged copy of the export IN; prints the
# offset of the damaged record and how many pages it held.
damage() {
	python3 - "$@" <<'EOF'
import sys, zlib, json
kind, src, dst = sys.argv[1:4]
data = open(src, "rb").read()
# gzip members: split where each member ends
members, pos = [], 0
while pos < len(data):
    d = zlib.decompressobj(31)
    d.decompress(data[pos:])
    end = len(data) - len(d.unused_data)
    members.append(data[pos:end])
    pos = end
k = 3  # the damaged record: the third after warcinfo
off = sum(len(m) for m in members[:k])
def gz(b):
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(b) + c.flush()
rec = zlib.decompress(members[k], 31)
if kind == "truncated":
    members[k] = members[k][: len(members[k]) // 2]
elif kind == "length":
    head, _, body = rec.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    lines = [l if not l.startswith(b"Content-Length:") else b"Content-Length: %d" % (int(l.split(b":")[1]) + 10) for l in lines]
    members[k] = gz(b"\r\n".join(lines) + b"\r\n\r\n" + body)
elif kind == "notype":
    members[k] = gz(b"\r\n".join(l for l in rec.split(b"\r\n") if not l.startswith(b"WARC-Type:")))
elif kind == "plainlength":
    # uncompressed: the record's length 10 too large, read past its end
    recs = [zlib.decompress(m, 31) for m in members]
    off = sum(len(r) for r in recs[:k])
    head, _, body = recs[k].partition(b"\r\n\r\n")
    lines = [l if not l.startswith(b"Content-Length:") else b"Content-Length: %d" % (int(l.split(b":")[1]) + 10) for l in head.split(b"\r\n")]
    recs[k] = b"\r\n".join(lines) + b"\r\n\r\n" + body
    open(dst, "wb").write(b"".join(recs))
    print(off, len(members) - 1)
    sys.exit(0)
open(dst, "wb").write(b"".join(members))
print(off, len(members) - 1)
EOF
}

# A tree of distinct pages (no revisits: each damaged record loses only
# itself), exported, damaged, imported.
malformed() {
	local kind=$1 off nrec rc=0
	pd_cdwd
	mkdir -p "$W/src/m.example"
	for i in $(seq 1 8); do printf '<p>page %d</p>\n' "$i" >"$W/src/m.example/p$i.html"; done
	expect "$PD_BIN" export "$W/src" -o "$PD_TMP/$kind.warc.gz"
	read -r off nrec < <(damage "$kind" "$PD_TMP/$kind-00000.warc.gz" "$PD_TMP/$kind.bad.warc") || fail "damage"
	mkdir "$W/back"
	"$PD_BIN" import "$PD_TMP/$kind.bad.warc" -C "$W/back" 2>"$PD_TMP/$kind.log" || rc=$?
	cat "$PD_TMP/$kind.log"
	expect_eq "$rc" 3 "exit status (done, malformed records skipped)"
	grep -q "offset $off: " "$PD_TMP/$kind.log" || fail "no report naming offset $off"
	got=$(find "$W/back" -type f | wc -l)
	expect_eq "$got" $((nrec - 1)) "pages imported (all but the damaged one)"
	find "$W/back" -name '.pagededup-import*' | grep -q . && fail "a temporary file was left"
	for f in "$W"/back/m.example/*; do
		cmp -s "$f" "$W/src/m.example/$(basename "$f")" || fail "bytes of $f"
	done
	return 0
}
case_malformed_truncated_gzip() { malformed truncated; }
case_malformed_content_length() { malformed length; }
case_malformed_plain_content_length() { malformed plainlength; }
case_malformed_no_type() { malformed notype; }

# Responses in chunked transfer coding (as Heritrix and warcprox keep
# them): the page is the chunks' data, the kept header has no
# Transfer-Encoding; broken framing is reported and leaves no file.
case_chunked() {
	pd_cdwd
	python3 - "$PD_TMP/chunked.warc" <<'EOF2'
import sys, hashlib, base64
def rec(uri, http, body, rid):
    block = http + body
    d = "sha1:" + base64.b32encode(hashlib.sha1(block).digest()).decode()
    return (("WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:%s>\r\n"
             "WARC-Date: 2021-05-06T07:08:09Z\r\nWARC-Target-URI: %s\r\nWARC-Block-Digest: %s\r\n"
             "Content-Type: application/http;msgtype=response\r\nContent-Length: %d\r\n\r\n")
            % (rid, uri, d, len(block))).encode() + block + b"\r\n\r\n"
h = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
good = b"5;ext=1\r\n<html\r\n1A\r\n><body>chunked page</body>\r\n0\r\nX-Trailer: t\r\n\r\n"
bad = b"5\r\n<html\r\nZZ\r\nnot hex\r\n0\r\n\r\n"
open(sys.argv[1], "wb").write(
    rec("http://c.example/good.html", h, good, "00000000-0000-4000-8000-000000000001") +
    rec("http://c.example/bad.html", h, bad, "00000000-0000-4000-8000-000000000002"))
EOF2
	rc=0
	"$PD_BIN" import "$PD_TMP/chunked.warc" -C "$W" 2>"$PD_TMP/chunked.log" || rc=$?
	cat "$PD_TMP/chunked.log"
	expect_eq "$rc" 3 "exit status (done, one record skipped)"
	expect_eq "$(cat "$W/c.example/good.html")" "<html><body>chunked page</body>" "the page without its framing"
	pd_xattr "$W/c.example/good.html" user.warc.http | grep -qi transfer-encoding && fail "Transfer-Encoding kept"
	pd_xattr "$W/c.example/good.html" user.warc.http | grep -q '^Content-Type: text/html' || fail "header lines lost"
	[ ! -e "$W/c.example/bad.html" ] || fail "a file from broken framing"
	grep -q "bad.html: its chunked transfer coding is broken" "$PD_TMP/chunked.log" || fail "not reported"
	find "$W" -name '.pagededup-import*' | grep -q . && fail "a temporary file was left"
	return 0
}

# http://h/a then http://h/a/b: the first page moves to a/index.html, as a
# mirror of http://h/a/ has it, and a revisit naming it still finds it.
case_file_then_dir() {
	pd_cdwd
	python3 - "$PD_TMP/fd.warc" <<'EOF2'
import sys
def rec(t, uri, body, extra=""):
    return (("WARC/1.1\r\nWARC-Type: %s\r\nWARC-Date: 2021-01-01T00:00:00Z\r\nWARC-Target-URI: %s\r\n%s"
             "Content-Length: %d\r\n\r\n") % (t, uri, extra, len(body))).encode() + body + b"\r\n\r\n"
open(sys.argv[1], "wb").write(
    rec("resource", "http://d.example/a", b"page a\n") +
    rec("resource", "http://d.example/a/b", b"page b\n") +
    rec("revisit", "http://d.example/copy-of-a", b"", "WARC-Refers-To-Target-URI: http://d.example/a\r\n"))
EOF2
	expect "$PD_BIN" import "$PD_TMP/fd.warc" -C "$W"
	expect_eq "$(cat "$W/d.example/a/index.html")" "page a" "the page moved into the directory"
	expect_eq "$(pd_xattr "$W/d.example/a/index.html" user.xdg.origin.url)" "http://d.example/a" "its URL"
	expect_eq "$(cat "$W/d.example/a/b")" "page b" "the page below"
	expect_eq "$(cat "$W/d.example/copy-of-a")" "page a" "the revisit"
}

# A 2 GiB + 12345 byte resource record in one gzip member, made by a
# generator and piped in: the file in the mount must have its size and
# MD5, and the importer must stay far below the record's size in memory
# (its peak RSS is measured by the kernel, ru_maxrss of the child).
case_big_record() {
	pd_cdwd
	avail=$(df -k --output=avail "$STORE" | tail -1)
	[ "$avail" -gt $((5 * 1024 * 1024)) ] || skip "less than 5 GiB free for the 2 GiB page"
	py "$PD_BIN" "$W" <<'EOF'
import hashlib, os, resource, subprocess, sys, zlib
from fsutil import *
pd, w = sys.argv[1], sys.argv[2]
size = 2**31 + 12345
chunk = bytes(range(256)) * 4096  # 1 MiB, not all zeros
def blocks():
    left = size
    while left:
        n = min(left, len(chunk))
        yield chunk[:n]
        left -= n
sha, md5 = hashlib.sha1(), hashlib.md5()
for b in blocks():
    sha.update(b); md5.update(b)
import base64
digest = "sha1:" + base64.b32encode(sha.digest()).decode()
head = ("WARC/1.1\r\nWARC-Type: resource\r\nWARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-000000000001>\r\n"
        "WARC-Date: 2020-01-01T00:00:00Z\r\nWARC-Target-URI: http://big.example/blob.bin\r\n"
        "WARC-Block-Digest: %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % (digest, size)).encode()
p = subprocess.Popen([pd, "import", "-", "-C", w], stdin=subprocess.PIPE)
c = zlib.compressobj(1, zlib.DEFLATED, 31)
p.stdin.write(c.compress(head))
for b in blocks():
    out = c.compress(b)
    if out:
        p.stdin.write(out)
p.stdin.write(c.compress(b"\r\n\r\n") + c.flush())
p.stdin.close()
eq(p.wait(), 0, "import exit status")
rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print("importer peak RSS: %.1f MB for a %.1f MB record" % (rss_mb, size / 2**20))
check(rss_mb < 256, "the importer held %.0f MB: the record was not streamed" % rss_mb)
f = os.path.join(w, "big.example", "blob.bin")
eq(os.stat(f).st_size, size, "size of the imported page")
eq(md5x(f), md5.hexdigest(), "MD5 of the imported page")
os.unlink(f)
EOF
}

pd_mount_shared
pd_case roundtrip
pd_case store_export
pd_case cdxj
pd_case split
pd_case wget_import
pd_case warcio_import
pd_case malformed_truncated_gzip
pd_case malformed_content_length
pd_case malformed_plain_content_length
pd_case malformed_no_type
pd_case chunked
pd_case file_then_dir
pd_case big_record
pd_umount_shared
pd_finish
