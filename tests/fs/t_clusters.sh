#!/usr/bin/env bash
# `pagededup dups` and `pagededup clusters` on a pagededupfs mountpoint and
# on its store: copies and near-duplicates grouped as user.dedup.near joins
# them, in text, CSV and JSON, --min-size, only the caller's reachable
# paths, absolute paths under a mountpoint, grep-like exit status.
. "$(dirname "$0")/lib.sh"
pd_require

U_A=65534

# make_pages DIR: a.html; a2.html (a with two words changed); a3.html (a2
# with two more changed: a chain); b.html (other text); c.html (other
# text again).
make_pages() {
	py "$1" <<'EOF'
import random, sys
d = sys.argv[1]
random.seed(16)
vocab = ["w%03d" % i for i in range(2000)]
def text(n):
    return [random.choice(vocab) for _ in range(n)]
def html(words):
    return "<html><head><title>t</title></head><body><p>%s</p></body></html>\n" % " ".join(words)
a = text(600)
open(d + "/a.html", "w").write(html(a))
a[100], a[300] = "changed0", "changed1"
open(d + "/a2.html", "w").write(html(a))
a[200], a[400] = "changed2", "changed3"
open(d + "/a3.html", "w").write(html(a))
open(d + "/b.html", "w").write(html(text(600)))
open(d + "/c.html", "w").write(html(text(600)))
EOF
}

case_clusters() {
	local src=$PD_TMP/cl-src out rc
	mkdir -p "$src" && make_pages "$src" || fail "make pages"
	pd_mount allow_other || fail mount
	mkdir -m 755 "$MNT/pub" && mkdir -m 700 "$MNT/priv" || fail mkdir
	cp "$src/a.html" "$src/a2.html" "$src/b.html" "$src/c.html" "$MNT/pub/" || fail cp
	cp "$src/a3.html" "$MNT/priv/a3.html" && cp "$src/a.html" "$MNT/priv/a-copy.html" || fail cp
	cp "$src/b.html" "$MNT/pub/b-copy.html" || fail cp
	chmod 644 "$MNT"/pub/*.html || fail chmod
	# near clusters: a, its copy, a2 and a3 (a chain); b is a group only of copies
	out=$("$PD_BIN" clusters "$MNT" 2>&1)
	# the page order follows the store's keys: compare as sets, page by page
	expect_eq "$(printf '%s\n' "$out" | head -1)" "group 1: 4 files, 3 pages" "one cluster of 4 files"
	expect_eq "$(printf '%s\n' "$out" | tail -n +2 | cut -f2 | sort | tr '\n' ' ')" \
		"$MNT/priv/a-copy.html $MNT/priv/a3.html $MNT/pub/a.html $MNT/pub/a2.html " "its files, absolute"
	expect_eq "$(printf '%s\n' "$out" | awk -F'\t' 'NR > 1 { p[$1] = p[$1] " " $2 } END { for (k in p) print p[k] }' |
		grep -c "a-copy.html.*a.html\|a.html.*a-copy.html")" 1 "a and its copy share a page number"
	# dups: the copies only
	out=$("$PD_BIN" dups "$MNT" | grep -v '^group\|^$' | cut -f2 | sort | tr '\n' ' ')
	expect_eq "$out" "$MNT/priv/a-copy.html $MNT/pub/a.html $MNT/pub/b-copy.html $MNT/pub/b.html " "dups of the mountpoint"
	# CSV and JSON say the same
	"$PD_BIN" clusters --csv "$MNT" >"$PD_TMP/c.csv" || fail "clusters --csv"
	"$PD_BIN" clusters --json "$MNT" >"$PD_TMP/c.json" || fail "clusters --json"
	out=$(py "$PD_TMP/c.csv" "$PD_TMP/c.json" <<'EOF'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
doc = json.load(open(sys.argv[2]))
a = sorted((int(r["group"]), int(r["page"]), r["path"]) for r in rows)
b = sorted((g["group"], f["page"], f["path"]) for g in doc for f in g["files"])
print("same" if a == b and len(a) == 4 and doc[0]["pages"] == 3 else "differ: %r %r" % (a, b))
EOF
)
	expect_eq "$out" "same" "CSV and JSON"
	# --min-size: a cluster of 4 files is not one of 5
	"$PD_BIN" clusters --min-size 5 "$MNT" >/dev/null; rc=$?
	expect_eq "$rc" 1 "clusters --min-size 5: none, exit 1"
	"$PD_BIN" clusters --min-size x "$MNT" >/dev/null 2>&1; rc=$?
	expect_eq "$rc" 2 "clusters --min-size x: a usage error"
	# another user who may read the store (the commands read its tables):
	# nothing under priv, which that user may not search
	chmod -R a+rX "$STORE" && chmod a+rw "$STORE/meta/lock.mdb" || fail "chmod store"
	out=$(cd / && as_user $U_A $U_A "$PD_BIN" clusters --csv "$MNT" | tail -n +2 | cut -d, -f3 | sort | tr '\n' ' ')
	expect_eq "$out" "\"$MNT/pub/a.html\" \"$MNT/pub/a2.html\" " "clusters as uid $U_A: reachable paths only"
	pd_umount || fail umount
	# the store itself: paths from its root
	out=$("$PD_BIN" clusters "$STORE" | tail -n +2 | cut -f2 | sort | tr '\n' ' ')
	expect_eq "$out" "/priv/a-copy.html /priv/a3.html /pub/a.html /pub/a2.html " "clusters of the store"
	"$PD_BIN" dups "$PD_TMP/nowhere" >/dev/null 2>&1; rc=$?
	expect_eq "$rc" 2 "dups of no store: exit 2"
}

pd_case clusters
pd_finish
