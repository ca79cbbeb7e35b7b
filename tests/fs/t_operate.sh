#!/usr/bin/env bash
# Running it: what an operator meets. The next command after an unmount;
# a mountpoint wherever a store is accepted; no store made by accident;
# stats by part on disk, live and by subtree; the daemon's log; versions;
# the command's habits (usage errors, --help, exit statuses, attrs,
# auto_unmount); fallocate and RENAME_WHITEOUT; fsck's verdicts on crash
# leftovers; reserved attribute names.
. "$(dirname "$0")/lib.sh"
pd_require

VERSION=$(cat "$PD_TOP/VERSION")
FORMAT=$(sed -n 's/^#define PD_FORMAT_VERSION \([0-9]*\).*/\1/p' "$PD_TOP/core/store/store.h")
FORMAT_OLDEST=$(sed -n 's/^#define PD_FORMAT_OLDEST \([0-9]*\).*/\1/p' "$PD_TOP/core/store/store.h")

# files below DIR (to prove nothing was made)
nfiles() { find "$1" -mindepth 1 2>/dev/null | wc -l; }

# --- 1. the next command after an unmount --------------------------------

# Pages waiting for their signature make the daemon's close take a while
# (the signer drains at unmount); fsck and a remount run at once after
# fusermount3 -u must not fail with "in use", whichever comes first.
case_unmount_then_use() {
	local i out rc
	pd_mount no_sign_thread,sign_queue=100000 || fail mount
	local store=$STORE mnt=$MNT
	for i in 1 2 3; do
		mkdir -p "$MNT/r$i"
		for j in $(seq 1 300); do printf '<html><body><p>round %d page %d %s</p></body></html>\n' \
			"$i" "$j" "$(seq "$j" $((j + 40)) | tr '\n' ' ')" >"$MNT/r$i/p$j.html"; done
		fusermount3 -u "$MNT" || fail "fusermount3 -u"
		rc=0; out=$("$PD_BIN" fsck "$store" 2>&1) || rc=$?
		grep 'waiting' <<<"$out"
		expect_eq "$rc" 0 "fsck at once after the unmount (round $i): $out"
		grep -q "in use" <<<"$out" && fail "fsck said 'in use': $out"
		pd_wait_rc "$PDFS_RC" 60 || fail "the daemon did not end"
		[ "$(cat "$PDFS_RC")" = 0 ] || { pd_show_log "$PDFS_LOG"; fail "daemon exit $(cat "$PDFS_RC") (round $i)"; }
		pd_mount -n -s "$store" -m "$mnt" no_sign_thread,sign_queue=100000 || fail "remount (round $i)"
		expect_eq "$(ls "$MNT/r$i" | wc -l)" 300 "pages after the remount"
		# a remount straight after the unmount, the old daemon still closing
		fusermount3 -u "$MNT" || fail "fusermount3 -u"
		pd_mount -n -s "$store" -m "$mnt" no_sign_thread,sign_queue=100000 || fail "remount at once (round $i)"
	done
	pd_umount || fail umount
}

# --- 2. the mountpoint is an address too ---------------------------------

case_mountpoint_as_store() {
	local out rc n
	pd_mount || fail mount
	mkdir "$MNT/crawl" && echo '<p>one page of text that is long enough to sign</p>' >"$MNT/crawl/a.html" || fail write
	cp "$MNT/crawl/a.html" "$MNT/b.html" || fail cp
	# stats, near, fsck given the mount point
	out=$("$PD_BIN" stats "$MNT") || fail "stats MOUNTPOINT"
	grep -q '^pages: *2$' <<<"$out" || fail "stats MOUNTPOINT: $out"
	out=$("$PD_BIN" stats --json "$MNT/") || fail "stats --json MOUNTPOINT/"
	expect_eq "$(py "$out" <<<'import json,sys; print(json.loads(sys.argv[1])["pages"])')" 2 "stats --json pages"
	out=$("$PD_BIN" near "$MNT" "$MNT/b.html") || fail "near MOUNTPOINT FILE"
	grep -q '/crawl/a.html' <<<"$out" || fail "near MOUNTPOINT: $out"
	rc=0; out=$("$PD_BIN" fsck "$MNT" 2>&1) || rc=$?
	expect_eq "$rc" 4 "fsck of a mounted store: $out"
	grep -q "mounted on $MNT" <<<"$out" || fail "fsck MOUNTPOINT: $out"
	rc=0; out=$("$PD_BIN" fsck "$STORE" 2>&1) || rc=$?
	expect_eq "$rc" 4 "fsck STORE while mounted: $out"
	# mkfs inside the archive is refused, and nothing is made
	rc=0; out=$("$PD_BIN" mkfs "$MNT/crawl/store" 2>&1) || rc=$?
	expect_eq "$rc" 1 "mkfs inside the mount: $out"
	[ -e "$MNT/crawl/store" ] && fail "mkfs made a store inside the archive"
	n=$(ls -A "$MNT" | wc -l)
	pd_umount || fail umount
	# a directory that is not a store: an error, and nothing written there
	mkdir -p "$PD_TMP/plain" && echo x >"$PD_TMP/plain/f"
	for cmd in "fsck" "fsck --repair" "stats"; do
		rc=0; out=$("$PD_BIN" $cmd "$PD_TMP/plain" 2>&1) || rc=$?
		[ "$rc" != 0 ] || fail "pagededup $cmd on a plain directory exited 0"
		grep -q "not a pagededup store" <<<"$out" || fail "pagededup $cmd: $out"
		grep -q "mkfs $PD_TMP/plain" <<<"$out" && fail "suggests mkfs on a directory with files: $out"
	done
	expect_eq "$(ls -A "$PD_TMP/plain")" f "the plain directory after fsck and stats"
}

# --- 3. no store by accident ------------------------------------------------

case_no_store_by_accident() {
	local d=$PD_TMP/acc out rc
	mkdir -p "$d/mnt" "$d/empty"
	# a mistyped store: refused, nothing made
	rc=0; out=$("$PDFS_BIN" "$d/typo" "$d/mnt" -f 2>&1) || rc=$?
	expect_eq "$rc" 1 "mount of a missing store: $out"
	[ -e "$d/typo" ] && fail "a missing store was made"
	grep -q "pagededup mkfs" <<<"$out" || fail "message: $out"
	mountpoint -q "$d/mnt" && fail "mounted"
	# an empty directory is not a store either
	rc=0; out=$("$PDFS_BIN" "$d/empty" "$d/mnt" -f 2>&1) || rc=$?
	expect_eq "$rc" 1 "mount of an empty directory: $out"
	expect_eq "$(nfiles "$d/empty")" 0 "files made in the empty directory"
	# an unknown option: refused before the store is touched
	"$PD_BIN" mkfs "$d/store" >/dev/null || fail mkfs
	find "$d/store" -printf '%P %s %T@\n' | sort >"$d/before"
	rc=0; out=$("$PDFS_BIN" "$d/store" "$d/mnt" -f -o no_such_option 2>&1) || rc=$?
	expect_eq "$rc" 1 "unknown option: $out"
	grep -q "no_such_option" <<<"$out" || fail "the unknown option is not named: $out"
	expect_eq "$(grep -c . <<<"$out")" 2 "lines for an unknown option: $out"
	find "$d/store" -printf '%P %s %T@\n' | sort >"$d/after"
	diff "$d/before" "$d/after" || fail "the store changed after a refused mount"
	# a value out of range: refused with its bound
	rc=0; out=$("$PDFS_BIN" "$d/store" "$d/mnt" -f -o delta_candidates=33 2>&1) || rc=$?
	expect_eq "$rc" 1 "-o delta_candidates=33: $out"
	grep -q "delta_candidates=33: at most 32" <<<"$out" || fail "-o delta_candidates=33: $out"
	mountpoint -q "$d/mnt" && fail "mounted with delta_candidates=33"
	rc=0; out=$("$PDFS_BIN" "$d/store" "$d/mnt" -f -o delta_window=65 2>&1) || rc=$?
	expect_eq "$rc" 1 "-o delta_window=65: $out"
	grep -q "delta_window=65: from 0 (none) to 64" <<<"$out" || fail "-o delta_window=65: $out"
	mountpoint -q "$d/mnt" && fail "mounted with delta_window=65"
	rc=0; out=$("$PDFS_BIN" "$d/store" "$d/mnt" -f -o delta_window=-1 2>&1) || rc=$?
	expect_eq "$rc" 1 "-o delta_window=-1: $out"
	mountpoint -q "$d/mnt" && fail "mounted with delta_window=-1"
	rc=0; "$PDFS_BIN" "$d/missing2" "$d/mnt" -f -o no_such_option >/dev/null 2>&1 || rc=$?
	[ -e "$d/missing2" ] && fail "an unknown option left a store behind"
	# the store as its own mount point, inside it, and around it
	mkdir -p "$d/store/inner"
	"$PD_BIN" mkfs "$d/mnt/s2" >/dev/null || fail "mkfs in the (unmounted) mount point directory"
	for pair in "$d/store $d/store" "$d/store $d/store/inner" "$d/mnt/s2 $d/mnt"; do
		set -- $pair
		rc=0; out=$("$PDFS_BIN" "$1" "$2" -f 2>&1) || rc=$?
		expect_eq "$rc" 1 "pagededupfs $1 $2: $out"
		grep -q "one inside the other" <<<"$out" || fail "message for $1 $2: $out"
		mountpoint -q "$2" && fail "$2 mounted"
	done
	rmdir "$d/store/inner"
	pd_fsck "$d/store" || fail "fsck after the refusals"
}

# --- 4. disk use you can believe --------------------------------------------

case_stats_disk_and_subtree() {
	local js txt du top
	pd_mount || fail mount
	py <<'EOF' || exit 1
import os
from fsutil import *
M = os.environ["MNT"]
os.makedirs(M + "/crawl1/sub"); os.makedirs(M + "/crawl2")
body = lambda i: b"<html><body>page %d %s</body></html>\n" % (i, b"x" * (1000 + i))
for i in range(10):
    write(M + "/crawl1/p%d.html" % i, body(i))           # 10 distinct
for i in range(5):
    write(M + "/crawl1/sub/copy%d.html" % i, body(i))    # copies inside crawl1
for i in range(3):
    write(M + "/crawl2/q%d.html" % i, body(i))           # copies shared with crawl2
os.link(M + "/crawl1/p9.html", M + "/crawl1/sub/link9.html")  # a hard link counts once
EOF
	js=$(getfattr --absolute-names --only-values -n user.dedup.stats "$MNT/crawl1") || fail "user.dedup.stats of a directory"
	py "$js" <<'EOF' || exit 1
import json, sys
from fsutil import *
t = json.loads(sys.argv[1])
size = lambda i: len(b"<html><body>page %d %s</body></html>\n" % (i, b"x" * (1000 + i)))
eq(t["subtree"], "/crawl1", "subtree")
eq(t["files"], 15, "files (the hard link once)")
eq(t["dirs"], 1, "directories below")
eq(t["logical_bytes"], sum(size(i) for i in range(10)) + sum(size(i) for i in range(5)), "logical bytes")
eq(t["blobs"], 10, "distinct contents")
eq(t["unique_bytes"], sum(size(i) for i in range(10)), "unique bytes")
eq(t["own_blobs"], 7, "contents held only in crawl1 (3 are shared with crawl2)")
eq(t["own_bytes"], sum(size(i) for i in range(3, 10)), "bytes held only in crawl1")
EOF
	txt=$(getfattr --absolute-names --only-values -n user.dedup.stats.text "$MNT/crawl1") || fail "stats.text"
	grep -q '^held only here: ' <<<"$txt" || fail "stats.text: $txt"
	txt=$("$PD_BIN" stats -h "$MNT/crawl2") || fail "stats -h DIR"
	grep -q 'KiB' <<<"$txt" || fail "stats -h in KiB: $txt"
	# a file has no subtree
	getfattr -n user.dedup.stats "$MNT/crawl2/q0.html" >/dev/null 2>&1 && fail "user.dedup.stats on a file"
	# live figures: the daemon's, right after the writes
	js=$("$PD_BIN" stats --json "$STORE") || fail "stats --json STORE while mounted"
	expect_eq "$(py "$js" <<<'import json,sys; print(json.loads(sys.argv[1])["pages"])')" 18 "live pages"
	pd_umount || fail umount
	# on disk, by part, as du counts it
	js=$("$PD_BIN" stats --json "$STORE") || fail "stats --json"
	du=$(du -s --block-size=1 "$STORE" | cut -f1)
	top=$(($(stat -c %b "$STORE") * 512))
	py "$js" "$du" "$top" <<'EOF' || exit 1
import json, sys
from fsutil import *
s = json.loads(sys.argv[1]); d = s["disk"]
eq(d["total"], int(sys.argv[2]) - int(sys.argv[3]), "disk total against du (less the store directory itself)")
eq(d["packs"] + d["blobs"] + d["lmdb"] + d["filter"] + d["staging"] + d["other"], d["total"], "the parts add up")
# the 10 distinct pages are records in one pack (no blob files)
check(d["packs"] > 0 and d["blobs"] == 0 and d["lmdb"] > 0 and d["filter"] > 0, "parts: %r" % d)
check(abs(d["ratio_to_logical"] - d["total"] / s["logical_bytes"]) < 1e-3, "ratio: %r" % d)
EOF
	txt=$("$PD_BIN" stats "$STORE") || fail stats
	grep -q '^on disk: .*blob files .*lmdb .*filter ' <<<"$txt" || fail "stats text: $txt"
	grep -q '^unique bytes: ' <<<"$txt" || fail "stats text: $txt"
}

# --- 5. logs ------------------------------------------------------------------

# In the background the daemon logs to syslog. A syslog socket is made at
# /dev/log for the test when the host has none (the container case; under
# systemd the journal owns it and the test reads the journal).
case_background_log() {
	local small=$PD_TMP/logfs m=$PD_TMP/log.mnt pid i log=$PD_TMP/syslog.txt srv
	[ -e /dev/log ] && skip "/dev/log exists (a syslog daemon runs); not replacing it"
	python3 - "$log" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
out = open(sys.argv[1], "ab", buffering=0)
while True:
    out.write(s.recv(65536) + b"\n")
EOF
	srv=$!
	echo "$srv" >>"$PD_TMP/pids"
	for i in $(seq 1 50); do [ -S /dev/log ] && break; sleep 0.1; done
	pd_undo_later "rm -f /dev/log"
	mkdir -p "$m"
	pd_small_disk "$small" 24m
	"$PD_BIN" mkfs "$small/store" --expected-pages 1000 >/dev/null || fail mkfs
	"$PDFS_BIN" "$small/store" "$m" || fail "pagededupfs in the background"
	pid=$(pgrep -f -- "$PDFS_BIN $small/store" | head -1)
	pd_register_mount "$m" "$pid"
	mkdir "$m/site" || fail mkdir
	# fill the disk under the store: the page's bytes wait in memory, and
	# the seal at close() cannot write its blob file
	dd if=/dev/zero of="$small/filler" bs=1M count=64 status=none 2>/dev/null
	py "$m/site/page.html" <<'EOF' || exit 1
import errno, os, sys
from fsutil import *
try:
    write(sys.argv[1], os.urandom(200000))
except OSError as e:
    eq(e.errno, errno.ENOSPC, "the error at close()")
else:
    raise AssertionError("the page was sealed on a full disk")
EOF
	for i in $(seq 1 50); do grep -q 'site/page.html' "$log" && break; sleep 0.1; done
	grep -a 'pagededupfs' "$log" | sed 's/^/syslog: /'
	grep -aq "pagededupfs\[$pid\]: .*/site/page.html: close() failed: No space left" "$log" ||
		fail "no syslog record of the failed close() with its path"
	grep -aq '^<27>' <(grep -a 'site/page.html' "$log") || fail "the record is not daemon.err"
	rm -f "$small/filler"
	fusermount3 -u "$m" || fail umount
	for i in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	pd_fsck "$small/store" || fail fsck
	umount "$small" || fail "umount the tmpfs"
}

# --- 6. versions ----------------------------------------------------------------

case_versions() {
	local out js
	out=$("$PD_BIN" --version) || fail "pagededup --version"
	expect_eq "$out" "pagededup $VERSION (store format $FORMAT)" "pagededup --version"
	expect_eq "$("$PD_BIN" -V)" "$out" "pagededup -V"
	expect_eq "$("$PD_BIN" version)" "$out" "pagededup version"
	out=$("$PDFS_BIN" --version) || fail "pagededupfs --version"
	grep -q "^pagededupfs $VERSION (store format $FORMAT)" <<<"$out" || fail "pagededupfs --version: $out"
	out=$("$PDFS_BIN" -V) || fail "pagededupfs -V"
	grep -q "^pagededupfs $VERSION " <<<"$out" || fail "pagededupfs -V: $out"
	pd_mount || fail mount
	pd_umount || fail umount
	js=$("$PD_BIN" stats --json "$STORE") || fail stats
	py "$js" "$VERSION" <<'EOF' || exit 1
import json, sys
from fsutil import *
s = json.loads(sys.argv[1])
eq(s["made_by"], sys.argv[2], "made_by"); eq(s["written_by"], sys.argv[2], "written_by")
EOF
	"$PD_BIN" stats "$STORE" | grep -q "made by pagededup $VERSION, last written by $VERSION" || fail "stats text versions"
	# a store of a format this version does not read is refused, and the message names the
	# versions (the format record rewritten with lmdb-utils)
	command -v mdb_load >/dev/null || skip "mdb_load (lmdb-utils) is not installed"
	printf 'VERSION=3\nformat=bytevalue\ndatabase=meta\ntype=btree\nHEADER=END\n 666f726d6174\n 63000000\nDATA=END\n' |
		mdb_load -s meta "$STORE/meta" || fail "mdb_load"
	local rc=0
	out=$("$PD_BIN" stats "$STORE" 2>&1) || rc=$?
	expect_eq "$rc" 1 "stats of a store of format 99"
	grep -q "has format version 99 (made by pagededup $VERSION, last written by $VERSION), this pagededup $VERSION reads versions $FORMAT_OLDEST to $FORMAT" <<<"$out" ||
		fail "message: $out"
	rc=0; out=$("$PDFS_BIN" "$STORE" "$MNT" -f 2>&1) || rc=$?
	expect_eq "$rc" 1 "mount of a store of format 99: $out"
	mountpoint -q "$MNT" && fail "a store of format 99 was mounted"
	return 0
}

# --- 7. command-line habits ---------------------------------------------------------

case_cli_habits() {
	local out rc cmd n
	# a usage error: one line, then "Try ... --help", status 2 (4 for fsck)
	for args in "" "stats" "stats --bogus x" "mkfs" "mkfs --fpr 2 x" "simhash" "attrs" "frobnicate" \
		"near onlyone" "fsck" "fsck --bogus x" "fsck --mem 12Q x" "urlseen --bogus" "export" "export --bogus x" "import" "import x.warc"; do
		rc=0; out=$("$PD_BIN" $args 2>&1 >/dev/null) || rc=$?
		n=$(grep -c . <<<"$out")
		expect_eq "$n" 2 "lines of 'pagededup $args': $out"
		grep -q "^Try 'pagededup.*--help' for more information.$" <<<"$out" || fail "no Try line: $out"
		case $args in fsck*) expect_eq "$rc" 4 "exit of 'pagededup $args'" ;;
		*) expect_eq "$rc" 2 "exit of 'pagededup $args'" ;; esac
	done
	# every command answers --help on stdout with status 0
	for cmd in mkfs stats fsck simhash near attrs urlseen export import version; do
		out=$("$PD_BIN" "$cmd" --help) || fail "pagededup $cmd --help exited non-zero"
		grep -q "pagededup $cmd" <<<"$out" || fail "pagededup $cmd --help: $out"
		"$PD_BIN" help "$cmd" >/dev/null || fail "pagededup help $cmd"
	done
	out=$("$PD_BIN" --help) || fail "pagededup --help"
	for cmd in mkfs stats fsck simhash near attrs urlseen; do grep -q "^  $cmd " <<<"$out" || fail "--help lacks $cmd"; done
	# the daemon: a usage error is short too
	rc=0; out=$("$PDFS_BIN" 2>&1) || rc=$?
	expect_eq "$rc" 1 "pagededupfs without arguments"
	expect_eq "$(grep -c . <<<"$out")" 2 "lines of a pagededupfs usage error: $out"
	"$PDFS_BIN" --help >/dev/null || fail "pagededupfs --help"
	# near's statuses are grep's; an error is printed once
	pd_mount || fail mount
	printf '<p>%s</p>\n' "$(seq 1 200 | tr '\n' ' ')" >"$MNT/a.html"
	printf '<p>%s</p>\n' "$(seq 1 199 | tr '\n' ' ')" >"$PD_TMP/like.html"
	printf '<p>%s</p>\n' "$(seq 5000 5300 | sed 's/^/w/' | tr '\n' ' ')" >"$PD_TMP/unlike.html"
	rc=0; "$PD_BIN" near "$MNT" "$PD_TMP/like.html" >/dev/null || rc=$?; expect_eq "$rc" 0 "near: found"
	rc=0; "$PD_BIN" near "$MNT" "$PD_TMP/unlike.html" >/dev/null || rc=$?; expect_eq "$rc" 1 "near: none"
	rc=0; out=$("$PD_BIN" near "$MNT" "$PD_TMP/missing.html" 2>&1) || rc=$?
	expect_eq "$rc" 2 "near: error"; expect_eq "$(grep -c . <<<"$out")" 1 "lines of a near error: $out"
	# attrs: the dedup attributes can be discovered
	cp "$MNT/a.html" "$MNT/b.html"
	out=$("$PD_BIN" attrs "$MNT/b.html") || fail "pagededup attrs"
	grep -q "^user.dedup.md5: $(md5sum <"$MNT/a.html" | cut -d' ' -f1)$" <<<"$out" || fail "attrs md5: $out"
	grep -q '^user.dedup.refcount: 2$' <<<"$out" || fail "attrs refcount: $out"
	grep -q '^user.dedup.twins: /a.html$' <<<"$out" || fail "attrs twins: $out"
	# ...while cp -a and tar --xattrs copy pages out without them
	setfattr -n user.origin -v http://example.org/a "$MNT/a.html" || fail setfattr
	mkdir "$PD_TMP/out" && cp -a "$MNT/a.html" "$PD_TMP/out/" || fail "cp -a out of the mount"
	expect_eq "$(getfattr --absolute-names -d -m - "$PD_TMP/out/a.html" | grep -c '^user\.')" 1 "xattrs after cp -a"
	tar --xattrs -C "$MNT" -cf "$PD_TMP/a.tar" a.html 2>"$PD_TMP/tar.err" || { cat "$PD_TMP/tar.err"; fail "tar --xattrs"; }
	[ -s "$PD_TMP/tar.err" ] && { cat "$PD_TMP/tar.err"; fail "tar --xattrs complained"; }
	mkdir "$PD_TMP/untar" && tar --xattrs --xattrs-include='*' -C "$PD_TMP/untar" -xf "$PD_TMP/a.tar" || fail "untar"
	getfattr --absolute-names -d -m - "$PD_TMP/untar/a.html" | grep -q dedup && fail "tar carried a dedup attribute"
	getfattr --absolute-names -n user.origin "$PD_TMP/untar/a.html" >/dev/null || fail "tar lost user.origin"
	pd_umount || fail umount
}

# -o auto_unmount: a killed daemon's mount goes away by itself.
case_auto_unmount() {
	pd_mount auto_unmount || fail mount
	echo page >"$MNT/p" || fail write
	pd_kill_auto_unmounted || fail "still mounted 10 s after the daemon was killed"
	pd_mount -n -s "$STORE" -m "$MNT" || fail "mount again"
	expect_eq "$(cat "$MNT/p")" page "the page after the kill"
	pd_umount || fail umount
}

# --- 9. system calls tools use ----------------------------------------------------

case_fallocate() {
	pd_mount || fail mount
	cd "$MNT" || fail cd
	fallocate -l 100000 f1 || fail "fallocate -l (mode 0)"
	expect_eq "$(stat -c %s f1)" 100000 "size after fallocate -l"
	expect_eq "$(md5sum <f1 | cut -d' ' -f1)" "$(head -c 100000 /dev/zero | md5sum | cut -d' ' -f1)" "zeros"
	head -c 50000 /dev/urandom >"$PD_TMP/r" && cp "$PD_TMP/r" f2 || fail cp
	fallocate -n -o 0 -l 1000000 f2 || fail "fallocate --keep-size"
	expect_eq "$(stat -c %s f2)" 50000 "size after --keep-size"
	fallocate -p -o 100 -l 1000 f2 || fail "fallocate --punch-hole"
	fallocate -z -o 60000 -l 40000 f2 || fail "fallocate --zero-range past the end"
	py "$PD_TMP/r" "$MNT/f2" <<'EOF' || exit 1
import sys
from fsutil import *
r = bytearray(read(sys.argv[1]))
r[100:1100] = bytes(1000)
r += bytes(100000 - len(r))
eq(read(sys.argv[2]) == bytes(r), True, "f2 after the punch and the zeroed range")
EOF
	expect_eq "$(pd_xattr "$MNT/f2" user.dedup.md5)" "$(md5sum <f2 | cut -d' ' -f1)" "the page sealed after fallocate"
	rc=0; fallocate -c -o 0 -l 4096 f2 2>/dev/null || rc=$?
	[ "$rc" != 0 ] || fail "collapse-range succeeded"
	# RENAME_WHITEOUT is refused (EINVAL), as documented
	echo a >w1
	py "$MNT/w1" "$MNT/w2" <<'EOF' || exit 1
import errno, sys
from fsutil import *
expect_errno(errno.EINVAL, renameat2, sys.argv[1], sys.argv[2], 4)  # RENAME_WHITEOUT
EOF
	cd / && pd_umount || fail umount
}

# --- 10. fsck's verdicts ------------------------------------------------------------

case_fsck_leftovers() {
	local out rc
	pd_mount || fail mount
	echo one >"$MNT/a" && echo two >"$MNT/b" || fail write
	pd_wait_blobs 2 || fail blobs
	pd_umount || fail umount
	# a blob file no record names (a crash of a format 1 store leaves
	# these) in a clean store
	mkdir -p "$STORE/objects/fff"
	local stray1=fff$(printf 'a%.0s' $(seq 29)) stray2=fff$(printf 'b%.0s' $(seq 29))
	echo stray >"$STORE/objects/fff/$stray1" || fail "make a stray blob file"
	rc=0; out=$("$PD_BIN" fsck "$STORE" 2>/dev/null) || rc=$?
	expect_eq "$rc" 3 "fsck with a crash leftover: $out"
	grep -q '^leftover: objects/fff/fffa.*: blob file unknown to the store' <<<"$out" || fail "fsck: $out"
	grep -q DAMAGED <<<"$out" && fail "a leftover called damage: $out"
	rc=0; out=$("$PD_BIN" fsck --repair "$STORE" 2>/dev/null) || rc=$?
	expect_eq "$rc" 1 "fsck --repair of a leftover: $out"
	[ -e "$STORE/objects/fff/$stray1" ] && fail "the leftover is still there"
	pd_fsck || fail "fsck after the repair"
	# after a killed daemon: staged bytes and a stray blob file, which the
	# next mount removes
	pd_mount -n -s "$STORE" || fail mount
	kill -KILL "$PDFS_PID"
	pd_wait_rc "$PDFS_RC" 20 || fail "wrapper"
	# the mount is still in the table, its daemon gone: stats reads the store
	out=$("$PD_BIN" stats "$MNT" 2>"$PD_TMP/stats.err") || fail "stats of a mount whose daemon was killed"
	grep -q '^pages: *2$' <<<"$out" || fail "stats: $out"
	grep -q 'did not answer' "$PD_TMP/stats.err" || fail "stats did not say the daemon was gone: $(cat "$PD_TMP/stats.err")"
	fusermount3 -u -z "$MNT" 2>/dev/null
	pd_wait_rc "$PDFS_RC" 20 || fail "wrapper"
	echo partial >"$STORE/staging/s77"
	mkdir -p "$STORE/objects/fff" && echo stray >"$STORE/objects/fff/$stray2" || fail "make a stray blob file"
	rc=0; out=$("$PD_BIN" fsck "$STORE" 2>/dev/null) || rc=$?
	expect_eq "$rc" 3 "fsck after a kill with leftovers: $out"
	grep -q '^leftover: staging/s77' <<<"$out" || fail "staging leftover: $out"
	pd_mount -n -s "$STORE" || fail remount
	expect_eq "$(cat "$MNT/a" "$MNT/b")" $'one\ntwo' "pages after the kill"
	pd_umount || fail "umount (fsck must be clean: the mount removed the leftovers)"
	# damage is still damage: the bytes pages need are gone
	find "$STORE/packs" "$STORE/objects" -type f -delete 2>/dev/null
	rc=0; out=$("$PD_BIN" fsck "$STORE" 2>/dev/null) || rc=$?
	expect_eq "$rc" 2 "fsck with a lost page: $out"
}

# --- 10b. a store made by the landed release -----------------------------------

# A store made by a build of the previous format (PD_LANDED_BUILD: its build
# directory, else skipped) keeps every file as it was: its inode rows are
# in layout 1 (rec.h), this build reads them, writes layout 2 for the
# inodes it changes, and marks the store format FORMAT, which the landed
# build refuses. `pagededup compact` then rewrites LMDB's file smaller and
# loses nothing, and `pagededup fsck --repair` moves the names of one-name
# inodes from `links` into their rows (format 5, from a landed build of
# format 4), with the same files. Its fingerprint rows (layout 1 before
# format 6, rec.h) are rewritten in layout 2 by the writable mount, and,
# on a copy of the landed store, by `pagededup fsck --repair`.
landed_snapshot() {
	(cd "$1" && find . -printf '%p %y %m %n %s %T@ %C@ %U %G %l\n' | sort &&
		find . -type f -exec md5sum {} + | sort && getfattr -d -m 'user\.x' dir/p4.html)
}

case_landed_store_rows() {
	local old=${PD_LANDED_BUILD:-} out i
	[ -x "$old/pagededupfs" ] || skip "PD_LANDED_BUILD (a build of format $((FORMAT - 1))) not given"
	local d=$PD_TMP/landed
	mkdir -p "$d/mnt" && "$old/pagededup" mkfs "$d/store" >/dev/null || fail "mkfs with the landed build"
	"$old/pagededupfs" "$d/store" "$d/mnt" || fail "mount with the landed build"
	(
		set -e
		cd "$d/mnt"
		mkdir -p dir/sub
		for i in $(seq 1 60); do printf '<html><body><p>page %d %s</p></body></html>\n' "$i" "$(seq "$i" $((i + 30)) | tr '\n' ' ')" >"dir/p$i.html"; done
		cp dir/p9.html dir/sub/same-as-p9.html
		ln dir/p1.html dir/hard.html
		ln -s p2.html dir/sym
		mkfifo dir/fifo
		touch -m -d '1999-01-02 03:04:05.123456789' dir/p3.html
		touch -m -d '1931-05-06 07:08:09.5' dir/p8.html
		setfattr -n user.x -v y dir/p4.html
		chmod 0600 dir/p5.html
	) || { fusermount3 -u "$d/mnt"; fail "files written with the landed build"; }
	landed_snapshot "$d/mnt" >"$d/before" || fail "snapshot with the landed build"
	fusermount3 -u "$d/mnt" || fail "unmount of the landed build"
	for i in $(seq 1 100); do pgrep -f "$old/pagededupfs $d/store" >/dev/null || break; sleep 0.1; done
	if "$old/pagededup" --version | grep -q "store format [1-5])"; then
		# fingerprint rows of layout 1: a note, and --repair converts them
		cp -a "$d/store" "$d/store.fp" || fail "copy of the landed store"
		out=$("$PD_BIN" fsck "$d/store.fp" 2>&1) || fail "fsck of the landed store: $out"
		grep -q "fingerprint rows of layout 1" <<<"$out" || fail "fsck's note of layout 1 rows: $out"
		out=$("$PD_BIN" fsck --repair "$d/store.fp" 2>&1) || fail "fsck --repair of the landed store: $out"
		grep -q "fingerprint rows rewritten in layout 2" <<<"$out" || fail "the rows were not converted: $out"
		out=$("$PD_BIN" fsck --deep "$d/store.fp" 2>&1) || fail "fsck after the conversion: $out"
		grep -q "layout 1" <<<"$out" && fail "layout 1 rows left after --repair: $out"
		rm -rf "$d/store.fp"
	fi
	pd_mount -n -s "$d/store" || fail "mount of the landed store"
	landed_snapshot "$MNT" >"$d/after" || fail "snapshot with this build"
	diff "$d/before" "$d/after" || fail "the landed store's files changed"
	echo changed >>"$MNT/dir/p6.html" && rm "$MNT/dir/p7.html" && touch "$MNT/dir/p10.html" &&
		printf 'new\n' >"$MNT/dir/new.html" && ln "$MNT/dir/p11.html" "$MNT/dir/p11b.html" || fail "changes"
	expect_eq "$(tail -1 "$MNT/dir/p6.html")" changed "an appended page"
	expect_eq "$(stat -c %h "$MNT/dir/p11.html")" 2 "nlink after ln"
	pd_umount || fail "umount (fsck must be clean)"
	out=$("$PD_BIN" fsck "$d/store" 2>&1) || fail "fsck after the mount: $out"
	grep -q "fingerprint rows of layout 1" <<<"$out" && fail "the mount left fingerprint rows of layout 1: $out"
	out=$("$old/pagededup" stats "$d/store" 2>&1) && fail "the landed build opened a format $FORMAT store: $out"
	grep -q "format version $FORMAT" <<<"$out" || fail "the landed build's refusal: $out"
	local lmdb='import json, sys; d = json.load(sys.stdin); print(d["lmdb_bytes"], d["lmdb_free_bytes"])'
	local used0 free0 used1 free1
	read -r used0 free0 <<<"$("$PD_BIN" stats --json "$d/store" | python3 -c "$lmdb")" || fail "stats"
	out=$("$PD_BIN" compact "$d/store" 2>&1) || fail "pagededup compact: $out"
	grep -q "^LMDB's file rewritten without its free pages" <<<"$out" || fail "compact's LMDB line: $out"
	read -r used1 free1 <<<"$("$PD_BIN" stats --json "$d/store" | python3 -c "$lmdb")" || fail "stats"
	expect_eq "$free1" 0 "LMDB's free bytes after compact (were $free0)"
	[ "$used1" -le "$used0" ] || fail "LMDB's pages in use grew: $used0 -> $used1 bytes"
	"$PD_BIN" fsck "$d/store" >/dev/null || fail "fsck after compact"
	out=$("$PD_BIN" fsck --repair "$d/store" 2>&1) || fail "fsck --repair: $out"
	if "$old/pagededup" --version | grep -q "store format [1-4])"; then
		grep -q "inodes hold their one name in their row" <<<"$out" || fail "the names were not moved into the rows: $out"
	fi
	"$PD_BIN" fsck "$d/store" >/dev/null || fail "fsck after the names moved"
	pd_mount -n -s "$d/store" || fail "mount after compact"
	landed_snapshot "$MNT" | grep -v -e 'dir/p6.html' -e 'dir/p7.html' -e 'dir/p10.html' -e 'dir/p11' -e 'dir/new.html' \
		-e '^\./dir [dy]' -e '^\. d' >"$d/after2"
	grep -v -e 'dir/p6.html' -e 'dir/p7.html' -e 'dir/p10.html' -e 'dir/p11' -e '^\./dir [dy]' -e '^\. d' "$d/before" >"$d/before2"
	diff "$d/before2" "$d/after2" || fail "files after compact"
	expect_eq "$(cat "$MNT/dir/new.html")" new "a page written after the conversion"
	pd_umount || fail "umount after compact"
}

# --- 11. reserved names ---------------------------------------------------------------

case_reserved_names() {
	pd_mount allow_other || fail mount
	echo page >"$MNT/p" && chmod 666 "$MNT/p" || fail write
	py "$MNT/p" <<'EOF' || exit 1
import errno, os, sys
from fsutil import *
p = sys.argv[1]
for n in ("user.pagededup.lost_md5", "user.pagededup.lost_path", "user.pagededup.anything"):
    expect_errno(errno.EPERM, os.setxattr, p, n, b"0" * 32)
expect_errno(errno.EPERM, os.setxattr, p, "user.dedup.md5", b"0" * 32)
os.setxattr(p, "user.pagededupe", b"not reserved")   # only the prefix with its dot
EOF
	run_as pd-stranger setfattr -n user.pagededup.lost_md5 -v x "$MNT/p" 2>/dev/null &&
		fail "another user set a reserved name"
	# store-wide figures any user may read
	run_as pd-stranger getfattr --only-values -n user.dedup.stats "$MNT" >/dev/null || fail "stats as another user"
	run_as pd-stranger getfattr --only-values -n user.dedup.refcount "$MNT/p" >/dev/null || fail "refcount as another user"
	pd_umount || fail umount
}

# --- 12. background threads leave the CPU to the kernel's requests ----------------

# The threads whose work can wait run at nice 10 (core/base/thread.h); the
# threads that serve the kernel's requests, and the signer (a close() past
# its bound signs itself), at the process's own.
case_background_priority() {
	pd_mount || fail mount
	echo "<p>a page</p>" >"$MNT/p.html" || fail write
	local t name nice seen=
	for t in /proc/"$PDFS_PID"/task/*; do
		name=$(cat "$t/comm" 2>/dev/null) || continue
		nice=$(awk '{ print $19 }' "$t/stat" 2>/dev/null) || continue
		case $name in
		pd-delta | pd-compact | pd-dict) [ "$nice" = 10 ] || fail "$name runs at nice $nice, expected 10" ;;
		pagededupfs | pdfs-ring-* | pd-signer) [ "$nice" = 0 ] || fail "$name runs at nice $nice, expected 0" ;;
		esac
		seen="$seen $name"
	done
	for name in pd-delta pd-compact pd-signer pagededupfs; do
		grep -qw -- "$name" <<<"$seen" || fail "no thread $name among:$seen"
	done
	pd_umount || fail umount
}

pd_case unmount_then_use
pd_case mountpoint_as_store
pd_case no_store_by_accident
pd_case stats_disk_and_subtree
pd_case background_log
pd_case versions
pd_case cli_habits
pd_case auto_unmount
pd_case fallocate
pd_case fsck_leftovers
pd_case landed_store_rows
pd_users pd-stranger >"$PD_TMP/users.log" 2>&1 || { not_ok users; sed 's/^/# /' "$PD_TMP/users.log"; pd_finish; }
pd_case reserved_names
pd_case background_priority
pd_finish
