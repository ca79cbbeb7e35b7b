#!/usr/bin/env bash
# A crawl into a pagededupfs mount: a small site served by python3's
# http.server on 127.0.0.1 is mirrored with wget --mirror --xattr into the
# mount; then the saved bytes, the origin URLs, the mtimes and the sharing of
# identical pages are checked; then the site is crawled again unchanged, and
# again after some pages changed.
. "$(dirname "$0")/lib.sh"
pd_require

SITE=$PD_TMP/site
PORT=

make_site() {
	py "$SITE" <<'EOF'
import os, sys
from fsutil import write
site = sys.argv[1]
dup = b"<html><head><title>Syndicated</title></head><body>" + b"<p>the same story on three pages</p>" * 40 + b"</body></html>\n"
logo = bytes(range(256)) * 40 + b"\x89PNG\r\n\x1a\n" * 10
links = ["a/index.html", "a/one.html", "a/dup.html", "a/b/dup2.html", "a/b/deep.html",
         "c/dup.html", "c/two.html", "img/logo.bin", "c/logo-copy.bin"]
pages = {
    "index.html": b"<html><body><h1>Home</h1>" + b"".join(b'<a href="/%s">%s</a>\n' % (l.encode(), l.encode()) for l in links) + b"</body></html>\n",
    "a/index.html": b"<html><body>section a <a href=\"one.html\">one</a></body></html>\n",
    "a/one.html": b"<html><body>" + b"<p>page one</p>" * 100 + b"</body></html>\n",
    "a/dup.html": dup,
    "a/b/dup2.html": dup,
    "a/b/deep.html": b"<html><body>" + b"<p>deep page</p>" * 77 + b"</body></html>\n",
    "c/dup.html": dup,
    "c/two.html": b"<html><body>" + b"<p>page two</p>" * 120 + b"</body></html>\n",
    "img/logo.bin": logo,
    "c/logo-copy.bin": logo,
}
t = 1600000000
for rel, data in sorted(pages.items()):
    p = os.path.join(site, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    write(p, data)
    t += 3600
    os.utime(p, (t, t))
EOF
}

start_server() {
	local i
	python3 -u -m http.server --bind 127.0.0.1 --directory "$SITE" 0 >"$PD_TMP/http.log" 2>&1 </dev/null &
	echo $! >>"$PD_TMP/pids"
	for i in $(seq 1 200); do
		PORT=$(sed -n 's/^Serving HTTP on [0-9.]* port \([0-9]*\).*/\1/p' "$PD_TMP/http.log")
		[ -n "$PORT" ] && return 0
		sleep 0.05
	done
	return 1
}

crawl() {
	(cd "$PD_TMP" && wget --mirror --xattr -nH -q -P "$MNT" "http://127.0.0.1:$PORT/") >"$PD_TMP/wget.log" 2>&1
}

# check_mirror: every source page is in the mount with the same bytes, its
# origin URL and mtime; identical pages share blobs; blob count and stats.
check_mirror() {
	py "$SITE" "$PORT" <<'EOF'
import os, sys, hashlib
from fsutil import *
M, S = os.environ["MNT"], os.environ["STORE"]
site, port = sys.argv[1], sys.argv[2]
src = {}
for d, _, fs in os.walk(site):
    for f in fs:
        p = os.path.join(d, f)
        src[os.path.relpath(p, site)] = p
got = set()
for d, _, fs in os.walk(M):
    for f in fs:
        got.add(os.path.relpath(os.path.join(d, f), M))
eq(sorted(got), sorted(src), "files saved by wget")
by_content = {}
for rel, p in sorted(src.items()):
    data = read(p)
    q = os.path.join(M, rel)
    eq(read(q), data, "bytes of " + rel)
    url = "http://127.0.0.1:%s/%s" % (port, "" if rel == "index.html" else rel)
    eq(os.getxattr(q, "user.xdg.origin.url").decode(), url, "user.xdg.origin.url of " + rel)
    eq(int(os.stat(q).st_mtime), int(os.stat(p).st_mtime), "mtime of %s (Last-Modified)" % rel)
    eq(md5x(q), md5(data), "md5 attribute of " + rel)
    by_content.setdefault(data, []).append(rel)
for data, rels in by_content.items():
    for rel in rels:
        q = os.path.join(M, rel)
        eq(refcount(q), len(rels), "refcount of " + rel)
        eq(twins_str(q), set("/" + r for r in rels if r != rel), "twins of " + rel)
wait_blobs(S, len(by_content), "distinct pages")
st = dstats(M)
eq(st["pages"], len(src), "stats pages")
eq(st["blobs"], len(by_content), "stats blobs")
eq(st["logical_bytes"], sum(len(read(p)) for p in src.values()), "stats logical_bytes")
eq(st["stored_bytes"], sum(len(d) for d in by_content), "stats stored_bytes")
EOF
}

case_crawl_mirror() {
	crawl || { cat "$PD_TMP/wget.log"; fail "wget --mirror exited with status $?"; }
	check_mirror || fail "mirror differs from the site"
}

case_recrawl_unchanged() {
	local before after
	before=$(pd_xattr "$MNT" user.dedup.stats)
	crawl || { cat "$PD_TMP/wget.log"; fail "second wget --mirror failed"; }
	after=$(pd_xattr "$MNT" user.dedup.stats)
	check_mirror || fail "mirror differs after an unchanged recrawl"
	py "$before" "$after" <<'EOF'
import sys, json
from fsutil import *
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for k in ("pages", "blobs", "logical_bytes", "stored_bytes"):
    eq(b[k], a[k], "stats %s after an unchanged recrawl" % k)
EOF
}

case_recrawl_changed() {
	# c/two.html becomes a copy of a/one.html; a/b/deep.html gets new bytes;
	# index.html keeps its bytes but is newer (wget follows the links of a
	# page only when it fetches it).
	cp "$SITE/a/one.html" "$SITE/c/two.html" || fail setup
	echo "<html><body>deep page, second version</body></html>" >"$SITE/a/b/deep.html" || fail setup
	touch -d '2030-01-01 00:00:00' "$SITE/c/two.html" "$SITE/a/b/deep.html" "$SITE/index.html" || fail setup
	crawl || { cat "$PD_TMP/wget.log"; fail "wget --mirror after changes failed"; }
	check_mirror || fail "mirror differs after pages changed"
}

# Removing the mirror (every file carries wget's xattrs) frees every blob.
case_remove_mirror() {
	rm -rf "${MNT:?}"/* || fail "rm -rf of the mirror"
	expect_eq "$(ls -A "$MNT" | wc -l)" 0 "entries left in the mount"
	pd_wait_blobs 0 || fail "blobs left after removing the mirror"
	py <<'EOF'
import os
from fsutil import *
st = dstats(os.environ["MNT"])
eq((st["pages"], st["blobs"], st["logical_bytes"], st["stored_bytes"]), (0, 0, 0, 0), "stats after removing the mirror")
EOF
}

make_site || { not_ok setup; pd_finish; }
start_server || { not_ok setup; echo "# http.server did not start:"; sed 's/^/# /' "$PD_TMP/http.log"; pd_finish; }
echo "# serving $SITE on 127.0.0.1:$PORT"
pd_mount_shared
pd_case crawl_mirror
pd_case recrawl_unchanged
pd_case recrawl_changed
pd_case remove_mirror
pd_umount_shared
pd_finish
