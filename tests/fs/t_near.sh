#!/usr/bin/env bash
# Near-duplicates through a pagededupfs mount: getfattr -n user.dedup.near
# and user.dedup.simhash after cp, mv, ln and rm, the answers filtered by
# the caller's permissions, the attributes read-only, and the same answers
# from `pagededup near` and `pagededup simhash` on the unmounted store;
# answers right after close() and after a daemon killed with pages waiting
# for their signature.
. "$(dirname "$0")/lib.sh"
pd_require

U_A=65534

# make_pages DIR: base.html; near.html (base with two words changed);
# far.html (other text); short.txt (a few words); short2.txt (the same with
# a full stop); page.bin (binary); gbk.html (base's words under a GBK
# Chinese heading, declared GBK). Any seed whose pair is within the
# default K serves (checked below): two changed words keep 97% of such
# pages within 4 bits (SIMHASH_VERSION 2); the pages of seed 7 are one of
# the other 3%, 5 bits apart.
make_pages() {
	py "$1" <<'EOF'
import random, sys
d = sys.argv[1]
random.seed(8)
vocab = ["w%03d" % i for i in range(2000)]
def text(n):
    return [random.choice(vocab) for _ in range(n)]
words = text(700)
base = " ".join(words)
other = " ".join(text(700))
words[100], words[105] = "changed0", "changed1"
changed = " ".join(words)
def html(body):
    return "<html><head><title>t</title></head><body><p>%s</p></body></html>\n" % body
open(d + "/base.html", "w").write(html(base))
open(d + "/near.html", "w").write(html(changed))
open(d + "/far.html", "w").write(html(other))
open(d + "/short.txt", "w").write("a few words of text\n")
open(d + "/short2.txt", "w").write("a few words of text.\n")
open(d + "/page.bin", "wb").write(bytes(range(256)) * 64)
zh = "<html><head><meta charset=gbk></head><body><h1>%s</h1><p>%s</p></body></html>\n" % (
    "\u7f51\u9875\u5f52\u6863\u7cfb\u7edf" * 40, base)
open(d + "/gbk.html", "wb").write(zh.encode("gbk"))
EOF
}

# The answer's lines as "D<TAB>copy|near<TAB>/path", after checking each
# line's resemblance: 1.000 for a copy, 0.800 to 1.000 for a variant.
lines() {
	awk -F'\t' 'NF != 4 || ($3 == "copy" && $2 != "1.000") || ($3 == "near" && ($2 < 0.8 || $2 > 1)) ||
		($3 != "copy" && $3 != "near") { print "bad line: " $0; next } { print $1 "\t" $3 "\t" $4 }'
}
near() { getfattr --absolute-names --only-values -n user.dedup.near "$1" | lines; }
pdnear() { "$PD_BIN" near "$@" | lines; return "${PIPESTATUS[0]}"; }
simhash() { getfattr --absolute-names --only-values -n user.dedup.simhash "$1"; }

# distance A B: the Hamming distance of two files' simhashes, from the tool.
distance() {
	local a b
	a=$("$PD_BIN" simhash "$1" | cut -f1) && b=$("$PD_BIN" simhash "$2" | cut -f1) || return 1
	python3 -c "print(bin(int('$a',16) ^ int('$b',16)).count('1'))"
}

case_near_answers() {
	local src=$PD_TMP/near-src d g
	mkdir -p "$src" && make_pages "$src" || fail "make pages"
	d=$(distance "$src/base.html" "$src/near.html") || fail distance
	[ "$d" -ge 1 ] && [ "$d" -le 4 ] || fail "fixture: base and near are $d bits apart"
	[ "$(distance "$src/base.html" "$src/far.html")" -gt 4 ] || fail "fixture: far is near"
	# the GBK page holds base's text under a title of six characters said
	# forty times (a few shingles more): beyond K by its simhash, found by
	# the shingle sets' bands
	g=$(distance "$src/base.html" "$src/gbk.html") || fail distance
	[ "$g" -gt 4 ] || fail "fixture: gbk is $g bits from base, within K"
	pd_mount || fail mount
	mkdir "$MNT/site" "$MNT/mirror" || fail mkdir
	cp "$src"/* "$MNT/site/" || fail cp
	cp "$src/base.html" "$MNT/mirror/copy.html" || fail cp
	expect_eq "$(near "$MNT/site/base.html")" "$(printf '0\tcopy\t/mirror/copy.html\n%s\tnear\t/site/near.html\n%s\tnear\t/site/gbk.html' "$d" "$g")" "near of base"
	# absolute paths on request: the mountpoint before each path, the rest the same
	expect_eq "$(getfattr --absolute-names --only-values -n user.dedup.near.abs "$MNT/site/base.html")" \
		"$(getfattr --absolute-names --only-values -n user.dedup.near "$MNT/site/base.html" |
			awk -F'\t' -v m="$MNT" '{ print $1 "\t" $2 "\t" $3 "\t" m $4 }')" "near.abs of base"
	expect_eq "$(near "$MNT/site/far.html")" "" "near of far"
	expect_eq "$(simhash "$MNT/site/base.html")" "$("$PD_BIN" simhash "$src/base.html" | cut -f1)" "simhash attribute = pagededup simhash"
	# a hard link and a rename: every name, at its new place
	ln "$MNT/site/near.html" "$MNT/mirror/near-link.html" || fail ln
	mv "$MNT/mirror/copy.html" "$MNT/mirror/moved.html" || fail mv
	expect_eq "$(near "$MNT/site/base.html")" \
		"$(printf '0\tcopy\t/mirror/moved.html\n%s\tnear\t/mirror/near-link.html\n%s\tnear\t/site/near.html\n%s\tnear\t/site/gbk.html' "$d" "$d" "$g")" "near after ln and mv"
	# rm and an overwrite leave the answer at once
	rm "$MNT/mirror/moved.html" || fail rm
	cp "$src/far.html" "$MNT/site/near.html" || fail "overwrite"
	expect_eq "$(near "$MNT/site/base.html")" "$(printf '%s\tnear\t/site/gbk.html' "$g")" "near after rm and overwrite (the link shares the inode)"
	expect_eq "$(near "$MNT/site/far.html")" "$(printf '0\tcopy\t/mirror/near-link.html\n0\tcopy\t/site/near.html')" "far's new twins"
	# too little text: the distance is marked; binary: no simhash
	expect_eq "$(simhash "$MNT/site/short.txt" | cut -d' ' -f2)" "low-confidence" "short page"
	# short texts are compared exactly: one word of five changed is no neighbour
	expect_eq "$(near "$MNT/site/short.txt")" "" "short page: no neighbour on a changed word"
	cp "$MNT/site/short.txt" "$MNT/site/short3.txt" || fail cp
	expect_eq "$(near "$MNT/site/short.txt")" "$(printf '0?\tcopy\t/site/short3.txt')" "short page's copy, marked"
	expect_eq "$(simhash "$MNT/site/page.bin")" "none" "binary simhash"
	expect_fail getfattr -n user.dedup.near "$MNT/site/page.bin"
	getfattr -n user.dedup.near "$MNT/site/page.bin" 2>&1 | grep -q "No such attribute" || fail "binary: ENODATA"
	# a GBK page has a simhash of its text (not "none", not low-confidence)
	simhash "$MNT/site/gbk.html" | grep -Eq '^[0-9a-f]{16}$' || fail "gbk page: $(simhash "$MNT/site/gbk.html")"
	# computed attributes are read-only and not listed
	expect_fail setfattr -n user.dedup.near -v x "$MNT/site/base.html"
	setfattr -n user.dedup.simhash -v x "$MNT/site/base.html" 2>&1 | grep -q "Operation not permitted" ||
		fail "setfattr user.dedup.simhash: EPERM"
	expect_fail setfattr -x user.dedup.near "$MNT/site/base.html"
	getfattr -d "$MNT/site/base.html" | grep -q dedup && fail "dedup attributes listed"
	# the same answers from the unmounted store
	local want_base want_far
	want_base=$(near "$MNT/site/base.html")
	want_far=$(near "$MNT/site/far.html")
	pd_umount || fail umount
	expect_eq "$(pdnear "$STORE" "$src/far.html")" \
		"$(printf '0\tcopy\t/mirror/near-link.html\n0\tcopy\t/site/far.html\n0\tcopy\t/site/near.html')" "pagededup near of far (itself stored)"
	# base is stored once: pagededup near names it, getfattr did not (itself)
	expect_eq "$(pdnear "$STORE" "$src/base.html")" "$(printf '0\tcopy\t/site/base.html\n%s' "$want_base")" "pagededup near of base"
	[ -z "$want_far" ] && fail "far had twins"
	"$PD_BIN" near "$STORE" "$src/page.bin" >/dev/null 2>&1
	expect_eq $? 2 "pagededup near of a binary file: exit 2"
	# fsck with the near check's memory bounded: the band rows sorted in
	# an unnamed file beside the store (1 byte), in memory (64K), probed
	# (0): clean each way, and no file left in the store
	local listing out m
	listing=$(ls -AR "$STORE")
	for m in 1 64K 0; do
		out=$("$PD_BIN" fsck --mem "$m" "$STORE" 2>&1) || fail "fsck --mem $m: $out"
	done
	expect_eq "$(ls -AR "$STORE")" "$listing" "the store's files after fsck --mem"
	printf '<p>%s</p>\n' "nothing like any stored page at all, not one bit of it" >"$PD_TMP/new.html"
	"$PD_BIN" near "$STORE" "$PD_TMP/new.html" >/dev/null
	expect_eq $? 1 "pagededup near with no neighbour: exit 1"
}

case_near_permissions() {
	local src=$PD_TMP/perm-src
	mkdir -p "$src" && make_pages "$src" || fail "make pages"
	pd_mount allow_other || fail mount
	mkdir -m 755 "$MNT/pub" && mkdir -m 700 "$MNT/priv" || fail mkdir
	cp "$src/base.html" "$MNT/pub/a.html" && cp "$src/near.html" "$MNT/priv/secret.html" &&
		cp "$src/near.html" "$MNT/pub/b.html" && cp "$src/near.html" "$MNT/pub/closed.html" || fail cp
	chmod 644 "$MNT/pub/a.html" "$MNT/pub/b.html" && chmod 600 "$MNT/pub/closed.html" || fail chmod
	local d t
	d=$(distance "$src/base.html" "$src/near.html")
	expect_eq "$(near "$MNT/pub/a.html")" \
		"$(printf '%s\tnear\t/priv/secret.html\n%s\tnear\t/pub/b.html\n%s\tnear\t/pub/closed.html' "$d" "$d" "$d")" "root sees all"
	t=$(as_user $U_A $U_A getfattr --absolute-names --only-values -n user.dedup.near "$MNT/pub/a.html" | lines) ||
		fail "getfattr as uid $U_A"
	expect_eq "$t" "$(printf '%s\tnear\t/pub/b.html' "$d")" "uid $U_A: no private directory, no unreadable file"
	as_user $U_A $U_A setfattr -n user.dedup.near -v x "$MNT/pub/a.html" 2>/dev/null && fail "uid $U_A set a dedup attribute"
	pd_umount || fail umount
}

# Signatures are computed after close() returns (core/near/sigq.h). Without the
# background signer nothing signs a page until it is asked for, so these
# answers hold only because a query signs what is pending first.
case_near_right_after_close() {
	local src=$PD_TMP/close-src d
	mkdir -p "$src" && make_pages "$src" || fail "make pages"
	d=$(distance "$src/base.html" "$src/near.html") || fail distance
	pd_mount no_sign_thread,sign_queue=1000 || fail mount
	cp "$src/base.html" "$MNT/a.html" && cp "$src/near.html" "$MNT/b.html" || fail cp
	expect_eq "$(near "$MNT/b.html")" "$(printf '%s\tnear\t/a.html' "$d")" "near, no sleep after close"
	cp "$src/far.html" "$MNT/c.html" || fail cp
	expect_eq "$(simhash "$MNT/c.html")" "$("$PD_BIN" simhash "$src/far.html" | cut -f1)" "simhash, no sleep after close"
	# with the signer running, as mounted by default
	pd_remount || fail remount
	cp "$src/near.html" "$MNT/b2.html" || fail cp
	expect_eq "$(near "$MNT/a.html")" "$(printf '%s\tnear\t/b.html\n%s\tnear\t/b2.html' "$d" "$d")" "near with the signer running"
	pd_umount || fail umount
}

# A daemon killed with pages waiting for their signature: the store is
# consistent as it is (fsck: a note), `pagededup near` signs them in memory,
# and the remount signs them for good.
case_near_pending_kill() {
	local src=$PD_TMP/kill-src d out rc
	mkdir -p "$src" && make_pages "$src" || fail "make pages"
	d=$(distance "$src/base.html" "$src/near.html") || fail distance
	pd_mount no_sign_thread,sign_queue=1000 || fail mount
	mkdir "$MNT/site" || fail mkdir
	cp "$src/base.html" "$src/near.html" "$src/far.html" "$MNT/site/" || fail cp
	# the listing commits the seals that wait for their batch
	# (core/archive/seal_later.h): killed with the pages committed, unsigned
	ls "$MNT/site" >/dev/null || fail ls
	kill -KILL "$PDFS_PID"
	fusermount3 -u -z "$MNT" 2>/dev/null
	pd_wait_rc "$PDFS_RC" 20 || fail "the killed daemon's wrapper did not end"
	expect_eq "$(cat "$PDFS_RC")" 137 "daemon killed"
	out=$("$PD_BIN" fsck "$STORE" 2>&1); rc=$?
	expect_eq "$rc" 0 "fsck of the killed store: $out"
	printf '%s\n' "$out" | grep -q '^note: 3 pages wait for their near-duplicate signature' ||
		fail "fsck does not count 3 pending pages: $out"
	expect_eq "$(pdnear "$STORE" "$src/base.html")" \
		"$(printf '0\tcopy\t/site/base.html\n%s\tnear\t/site/near.html' "$d")" "pagededup near of the killed store"
	pd_mount -n -s "$STORE" -m "$MNT" || fail remount
	expect_eq "$(near "$MNT/site/base.html")" "$(printf '%s\tnear\t/site/near.html' "$d")" "near after the remount"
	pd_umount || fail umount
	out=$("$PD_BIN" fsck "$STORE" 2>&1)
	printf '%s\n' "$out" | grep -q 'wait for their near-duplicate signature' && fail "pending after a clean unmount: $out"
	expect_eq "$(pdnear "$STORE" "$src/far.html")" "$(printf '0\tcopy\t/site/far.html')" "pagededup near after the unmount"
}

# A store of the landed layout (3: 32-bit sets without band keys; or 2:
# sets with their band keys, a sketch in every record), made by the landed
# build, converted by the first writable mount of this one (sets cut to
# NEARSET_BITS, band rows made again, no page read): byte-identical
# answers for every file, every set row of format 4, fsck clean.
case_near_landed_store_converted() {
	local old=${PD_LANDED_BUILD:-}
	[ -x "$old/pagededupfs" ] || skip "PD_LANDED_BUILD (a build of near layout 2 or 3) not given"
	"$old/pagededup" --version | grep -q "store format [1-4])" || skip "PD_LANDED_BUILD keeps near layout 4 (store format 5 on)"
	local d=$PD_TMP/landed f before after out
	mkdir -p "$d/mnt" "$d/src" && "$old/pagededup" mkfs "$d/store" >/dev/null || fail "mkfs of the landed build"
	make_pages "$d/src"
	"$old/pagededupfs" "$d/store" "$d/mnt" || fail "mount with the landed build"
	mkdir "$d/mnt/site" && cp "$d"/src/* "$d/mnt/site/" && cp "$d/src/base.html" "$d/mnt/site/copy.html" ||
		{ fusermount3 -u "$d/mnt"; fail "cp into the landed build's mount"; }
	answers() { for f in "$1"/site/*; do printf '== %s\n' "${f#$1}"; getfattr --absolute-names --only-values -n user.dedup.near "$f"; done; }
	before=$(answers "$d/mnt")
	fusermount3 -u "$d/mnt" || fail "unmount of the landed build"
	local i; for i in $(seq 1 100); do pgrep -f "$old/pagededupfs $d/store" >/dev/null || break; sleep 0.1; done
	printf '%s\n' "$before" | grep -q "near	/site/near.html" || fail "the landed build's answers lack the near pair: $before"
	out=$("$PD_BIN" fsck "$d/store" 2>&1) || fail "fsck of the landed store: $out"
	printf '%s\n' "$out" | grep -Eq "layout [23], this pagededup keeps layout 4" || fail "no note of layout 2 or 3: $out"
	pd_mount -n -s "$d/store" || fail "mount of the landed store"
	after=$(answers "$MNT")
	pd_umount || fail umount
	expect_eq "$after" "$before" "answers after the conversion"
	out=$("$PD_BIN" fsck "$d/store" 2>&1) || fail "fsck after the conversion: $out"
	printf '%s\n' "$out" | grep -q "layout" && fail "not converted: $out"
	# the first byte of every set row: its format
	local formats
	formats=$(mdb_dump -s nearfeat "$d/store/meta" |
		awk '/^HEADER=END/ { d = 1; next } /^DATA=END/ { d = 0 } d && ++n % 2 == 0 { print substr($1, 1, 2) }' | sort | uniq -c)
	printf '%s\n' "$formats" | grep -Eq '^ *[0-9]+ 04$' && [ "$(printf '%s\n' "$formats" | wc -l)" = 1 ] ||
		fail "set rows not all of format 4: $formats"
	return 0
}

pd_case near_answers
pd_case near_permissions
pd_case near_right_after_close
pd_case near_pending_kill
pd_case near_landed_store_converted
pd_finish
