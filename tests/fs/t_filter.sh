#!/usr/bin/env bash
# The page filter grows through a mount: a store made for a few hundred
# pages takes thousands; its filter splits in the background while pages
# are written, duplicates are still found, stats shows the leaves, and the
# store stays fsck-clean across an unmount and a remount.
. "$(dirname "$0")/lib.sh"
pd_require

case_filter_grows_through_mount() {
	local store=$PD_TMP/grow/store
	mkdir -p "$PD_TMP/grow"
	"$PD_BIN" mkfs "$store" --expected-pages 300 --fpr 0.01 --max-leaf-kib 4 || fail "mkfs"
	pd_mount -s "$store" || fail mount
	py <<'EOF' || exit 1
import os, time
from fsutil import *
M = os.environ["MNT"]
os.makedirs(M + "/p")
page = lambda i: b"<html><body>page %d</body></html>\n" % i * 3
for i in range(4000):
    write(M + "/p/%d.html" % i, page(i))
# copies of earlier pages, written while the filter splits
for i in range(0, 4000, 8):
    write(M + "/p/copy-%d.html" % i, page(i))
    eq(refcount(M + "/p/copy-%d.html" % i), 2, "refcount of a copy of page %d" % i)
for i in range(1, 4000, 4):
    os.unlink(M + "/p/%d.html" % i)
# the split thread finishes its work
deadline = time.time() + 60
while True:
    s = dstats(M)["filter"]
    if not s["splitting"] and s["leaves"] > 1 and s["fpr_worst_leaf"] <= s["fpr_target"]:
        break
    check(time.time() < deadline, "filter did not settle: %r" % s)
    time.sleep(0.2)
check(s["keys"] == 3000, "filter keys %d, stored pages 3000" % s["keys"])
check(s["fpr_design"] <= s["fmax"], "filter rate %g above fmax %g" % (s["fpr_design"], s["fmax"]))
EOF
	pd_umount || fail umount
	local json
	json=$("$PD_BIN" stats "$store" --json) || fail "stats"
	PD_JSON=$json py <<'EOF' || exit 1
import json, os
from fsutil import *
s = json.loads(os.environ["PD_JSON"])
f = s["filter"]
check(f["leaves"] > 1 and f["depth"] >= 1, "leaves %d depth %d" % (f["leaves"], f["depth"]))
eq(s["blobs"], 3000, "blobs")
check(s["dup_seals"] >= 500, "duplicate seals %d" % s["dup_seals"])
EOF
	# after a remount the grown filter still finds every stored page
	pd_mount -s "$store" || fail "remount"
	py <<'EOF' || exit 1
import os
from fsutil import *
M = os.environ["MNT"]
page = lambda i: b"<html><body>page %d</body></html>\n" % i * 3
for i in range(0, 4000, 10):
    if i % 4 == 1:
        continue
    write(M + "/again-%d.html" % i, page(i))
    check(refcount(M + "/again-%d.html" % i) >= 2, "page %d not found after the remount" % i)
EOF
	pd_umount || fail umount
}

# The filter's first size: a default store starts with a filter for 2^16
# pages (under 1 MiB), and --expected-pages still sizes it for what it is
# told (10^6 pages at the default rate: over 8 MB).
case_filter_first_size() {
	local s json
	for n in default 1000 1000000; do
		s=$PD_TMP/first-$n
		if [ "$n" = default ]; then
			"$PD_BIN" mkfs "$s" >/dev/null || fail "mkfs"
		else
			"$PD_BIN" mkfs "$s" --expected-pages "$n" >/dev/null || fail "mkfs --expected-pages $n"
		fi
		json=$("$PD_BIN" stats "$s" --json) || fail "stats of $s"
		PD_JSON=$json PD_N=$n py <<'EOF' || exit 1
import json, os
from fsutil import *
f = json.loads(os.environ["PD_JSON"])["filter"]
n = os.environ["PD_N"]
if n == "default":
    check(f["bytes"] < 1 << 20, "a default filter of %d bytes" % f["bytes"])
elif n == "1000":
    check(f["bytes"] < 64 << 10, "a filter for 1000 pages of %d bytes" % f["bytes"])
else:
    check(f["bytes"] > 8 << 20, "a filter for 10^6 pages of %d bytes" % f["bytes"])
EOF
		pd_fsck "$s" || fail "fsck of $s"
	done
}

pd_case filter_grows_through_mount
pd_case filter_first_size
pd_finish
