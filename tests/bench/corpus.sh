#!/usr/bin/env bash
# Build (or reuse) the benchmark corpus: real HTML pages from Debian
# documentation packages, laid out twice so that half the pages are
# duplicates.
#
#   bash tests/bench/corpus.sh            build or reuse, print the summary
#
# Environment:
#   PD_CORPUS       cache directory (default /var/tmp/pagededup-corpus)
#   PD_CORPUS_PKGS  Debian packages to take pages from, in order
#                   (default "python3.11-doc openjdk-17-doc rust-doc")
#   PD_PAGES        pages in one copy (corpus/a); 0 = every page of the
#                   packages (default 20000, the minimum is 20000 unless
#                   PD_PAGES_MIN says otherwise)
#   PD_PAGES_MIN    fail if fewer pages than this are found (default 20000)
#   PD_REBUILD=1    throw the built corpus away and build it again
#                   (the downloaded packages are kept)
#
# The cache:
#   debs/           the .deb files (apt-get download)
#   extract/PKG/    each package unpacked with dpkg -x
#   corpus/a/PKG/   the .html files of PKG (paths below usr/share/doc/)
#   corpus/b/       a second, byte-identical copy of corpus/a (real copies,
#                   not hard links, so that tar and cp see distinct files)
#   corpus.tar      tar of corpus/ (a and b), made once for the tar runs
#   corpus.md5      md5sum of every file under corpus/, paths "./a/...",
#                   sorted: the reference an ingested tree is checked against
#   corpus.info     shell-sourceable summary: pages, bytes, unique bytes, ...
#
# The corpus is reused when corpus.info matches the requested packages and
# page count. Only Debian's package archive is contacted.
set -euo pipefail
export LC_ALL=C

CACHE=${PD_CORPUS:-/var/tmp/pagededup-corpus}
PKGS=${PD_CORPUS_PKGS:-python3.11-doc openjdk-17-doc rust-doc}
PAGES=${PD_PAGES:-20000}
PAGES_MIN=${PD_PAGES_MIN:-20000}

log() { echo "corpus: $*" >&2; }
die() { echo "corpus: error: $*" >&2; exit 1; }

case $PAGES in ''|*[!0-9]*) die "PD_PAGES must be a number (0 = all)";; esac
[ "$PAGES" -eq 0 ] || [ "$PAGES" -ge "$PAGES_MIN" ] ||
	die "PD_PAGES=$PAGES is below the minimum $PAGES_MIN (set PD_PAGES_MIN to lower it)"

mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

# One builder at a time per cache directory.
exec 9>"$CACHE/.lock"
flock 9

want_key="pkgs=$PKGS pages=$PAGES"

summary() {
	# shellcheck disable=SC1091
	. "$CACHE/corpus.info"
	echo "corpus_dir: $CACHE/corpus"
	echo "corpus_packages: $packages"
	echo "corpus_pages: $pages pages ($pages_a in a/, the same again in b/)"
	echo "corpus_bytes: $bytes bytes"
	echo "corpus_unique_bytes: $unique_bytes bytes ($unique_pages distinct pages)"
}

if [ "${PD_REBUILD:-0}" != 1 ] && [ -f "$CACHE/corpus.info" ] &&
	[ -f "$CACHE/corpus.tar" ] && [ -f "$CACHE/corpus.md5" ] && [ -d "$CACHE/corpus/a" ] &&
	grep -qxF "key='$want_key'" "$CACHE/corpus.info"; then
	log "reusing $CACHE"
	summary
	exit 0
fi

# --- 1. download the packages (only those not already in debs/) -----------
mkdir -p "$CACHE/debs" "$CACHE/extract"
updated=0
deb_of() { ls "$CACHE/debs/$1"_*.deb 2>/dev/null | sort | tail -1; true; }
for p in $PKGS; do
	[ -n "$(deb_of "$p")" ] && continue
	if ! apt-cache show "$p" >/dev/null 2>&1 && [ "$updated" -eq 0 ]; then
		log "apt-cache does not know $p; running apt-get update"
		apt-get update -qq >&2 || log "apt-get update failed"
		updated=1
	fi
	if ! apt-cache show "$p" >/dev/null 2>&1; then
		log "warning: package $p not found in the archive, skipped"
		continue
	fi
	log "downloading $p"
	# _apt cannot write into root's directories; download into a world-
	# writable scratch directory to keep apt's sandbox (and its warning) happy.
	tmpd=$(mktemp -d "$CACHE/debs/.dl.XXXXXX")
	chmod 777 "$tmpd"
	(cd "$tmpd" && apt-get download -q "$p" >&2) || { rm -rf "$tmpd"; die "apt-get download $p failed"; }
	mv "$tmpd"/*.deb "$CACHE/debs/"
	rm -rf "$tmpd"
done

# --- 2. unpack ---------------------------------------------------------------
used=""
for p in $PKGS; do
	deb=$(deb_of "$p")
	[ -n "$deb" ] || continue
	ver=$(dpkg-deb -f "$deb" Version)
	if [ "$(cat "$CACHE/extract/$p.version" 2>/dev/null)" != "$ver" ]; then
		log "unpacking $(basename "$deb")"
		rm -rf "$CACHE/extract/$p" "$CACHE/extract/$p.version"
		mkdir -p "$CACHE/extract/$p"
		dpkg -x "$deb" "$CACHE/extract/$p"
		echo "$ver" >"$CACHE/extract/$p.version"
	fi
	used="$used${used:+ }$p=$ver"
done
[ -n "$used" ] || die "none of the packages ($PKGS) could be had"

# --- 3. pick the pages: packages in order, paths sorted, up to PAGES ------
log "collecting pages"
rm -rf "$CACHE/corpus.new" "$CACHE/corpus" "$CACHE/corpus.tar" "$CACHE/corpus.md5" "$CACHE/corpus.info"
mkdir -p "$CACHE/corpus.new/a"
list=$(mktemp "$CACHE/.list.XXXXXX")
trap 'rm -f "$list" "$list".*' EXIT
left=$PAGES
for p in $PKGS; do
	src="$CACHE/extract/$p/usr/share/doc"
	[ -d "$src" ] || continue
	if [ "$PAGES" -ne 0 ] && [ "$left" -le 0 ]; then break; fi
	(cd "$src" && find . -type f -name '*.html' -print0 | sort -z) >"$list"
	if [ "$PAGES" -ne 0 ]; then
		head -z -n "$left" "$list" >"$list.take"
	else
		cp "$list" "$list.take"
	fi
	n=$(tr -cd '\0' <"$list.take" | wc -c)
	[ "$n" -gt 0 ] || continue
	mkdir -p "$CACHE/corpus.new/a/$p"
	(cd "$src" && xargs -0 cp --parents -t "$CACHE/corpus.new/a/$p" <"$list.take")
	log "  $p: $n pages"
	left=$((left - n))
done
pages_a=$(find "$CACHE/corpus.new/a" -type f | wc -l)
[ "$pages_a" -ge "$PAGES_MIN" ] ||
	die "only $pages_a pages found in $PKGS (need $PAGES_MIN); add packages with PD_CORPUS_PKGS"

# The second copy: real copies, never hard links.
cp -r "$CACHE/corpus.new/a" "$CACHE/corpus.new/b"

# --- 4. fingerprints and sizes ----------------------------------------------
log "computing md5sums"
(cd "$CACHE/corpus.new" && find . -type f -print0 | sort -z | xargs -0 -n 2000 md5sum --) >"$CACHE/corpus.md5.new"
(cd "$CACHE/corpus.new" && find ./a -type f -printf '%s %p\n') >"$list.sizes"
pages=$(wc -l <"$CACHE/corpus.md5.new")
bytes=$(cd "$CACHE/corpus.new" && find . -type f -printf '%s\n' | awk '{s += $1} END {printf "%d", s}')
# unique bytes: the sum of the sizes of the distinct contents (a/ and b/
# hold the same contents, so a/ alone decides it).
read -r unique_pages unique_bytes < <(awk '
	FNR == NR { sp = index($0, " "); size[substr($0, sp + 1)] = substr($0, 1, sp - 1); next }
	{
		h = substr($0, 1, 32); path = substr($0, 35)
		if (substr(path, 1, 4) != "./a/") next
		if (!(h in seen)) { seen[h] = 1; n++; s += size[path] }
	}
	END { printf "%d %d\n", n, s }' "$list.sizes" "$CACHE/corpus.md5.new")

# --- 5. the tar, made once ---------------------------------------------------
log "writing corpus.tar"
tar -cf "$CACHE/corpus.tar.new" -C "$CACHE/corpus.new" a b

mv "$CACHE/corpus.new" "$CACHE/corpus"
mv "$CACHE/corpus.md5.new" "$CACHE/corpus.md5"
mv "$CACHE/corpus.tar.new" "$CACHE/corpus.tar"
cat >"$CACHE/corpus.info.new" <<EOF
key='$want_key'
packages='$used'
pages=$pages
pages_a=$pages_a
bytes=$bytes
unique_pages=$unique_pages
unique_bytes=$unique_bytes
EOF
mv "$CACHE/corpus.info.new" "$CACHE/corpus.info"
summary
