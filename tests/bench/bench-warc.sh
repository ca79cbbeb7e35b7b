#!/usr/bin/env bash
# WARC speed: `pagededup export` and `pagededup import` on the bench corpus
# (tests/bench/corpus.sh: real HTML pages, half of them duplicates) in a
# mount, against the tools a user would otherwise reach for, in the same run
# on the same tree:
#   tar_c        tar c of the mounted tree into a file
#   gzip         gzip -6 of that tar file (the same bytes)
#   export_mnt   pagededup export of the mounted tree (through the mount)
#   export_store pagededup export of the same tree from the store (no mount)
#   tar_x        tar x of the tar file into the mount
#   gunzip       gzip -d of the tar.gz
#   import       pagededup import of the export into the mount
# Speeds are MB/s of page bytes (the corpus's logical size, duplicates
# counted), so every line divides the same number; beside each, MB per CPU
# second (user + system of the command, not of the daemon), the figure a
# loaded machine disturbs least. The ratios are of wall-clock times. The page cache is left
# warm (the machine is shared: no cache drop); every run reads a tree or a
# file that the previous steps have just read or written.
#
#   bash tests/bench/bench-warc.sh BUILD_DIR       (make bench-warc)
#
# Environment: PD_CORPUS, PD_PAGES, PD_CORPUS_PKGS (tests/bench/corpus.sh),
# PD_WORKDIR (default /var/tmp), PD_KEEP=1, PD_WARC_LEVEL (deflate level of
# the export, default 6, as gzip's).
# Timing is never asserted; the exit status is non-zero when a step failed
# or the imported tree differs from the corpus.
set -uo pipefail
export LC_ALL=C
top=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-build/release}" 2>/dev/null && pwd) || { echo "bench-warc: no build directory" >&2; exit 2; }
PD=$BUILD/pagededup
PDFS=$BUILD/pagededupfs
LEVEL=${PD_WARC_LEVEL:-6}
log() { echo "bench-warc: $*" >&2; }

bash "$top/tests/bench/corpus.sh" >/dev/null || { log "the corpus could not be built"; exit 2; }
CACHE=$(cd "${PD_CORPUS:-/var/tmp/pagededup-corpus}" && pwd)
# shellcheck disable=SC1091
. "$CACHE/corpus.info"
WORK=$(mktemp -d "${PD_WORKDIR:-/var/tmp}/pagededup-bench-warc.XXXXXX")
MNT=$WORK/mnt STORE=$WORK/store
daemon_pid=
cleanup() {
	mountpoint -q "$MNT" 2>/dev/null && { fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"; }
	[ -n "$daemon_pid" ] && wait "$daemon_pid" 2>/dev/null
	if [ "${PD_KEEP:-0}" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
declare -A T
failed=0
declare -A C
step() { # name command...: its wall-clock and CPU (user + system) seconds
	local name=$1
	shift
	if ! /usr/bin/time -f "%e %U %S" -o "$WORK/time.$name" "$@"; then log "FAIL: $name: $*"; failed=1; fi
	read -r wall user sys <"$WORK/time.$name"
	T[$name]=$wall
	C[$name]=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
}
mbs() { awk -v b="$bytes" -v t="${T[$1]}" 'BEGIN { printf "%.1f", b / 1e6 / t }'; }
mbs_cpu() { awk -v b="$bytes" -v t="${C[$1]}" 'BEGIN { printf "%.1f", b / 1e6 / t }'; }
size_mb() { du -cb "$@" | tail -1 | awk '{ printf "%.1f", $1 / 1e6 }'; }

"$PD" mkfs "$STORE" >/dev/null || exit 2
mkdir -p "$MNT"
"$PDFS" "$STORE" "$MNT" -f >"$WORK/daemon.log" 2>&1 &
daemon_pid=$!
for i in $(seq 1 300); do mountpoint -q "$MNT" && break; sleep 0.1; done
mountpoint -q "$MNT" || { log "the mount did not come up"; cat "$WORK/daemon.log" >&2; exit 2; }

log "ingesting the corpus ($pages pages, $((bytes / 1000000)) MB) into the mount"
mkdir "$MNT/c"
tar xf "$CACHE/corpus.tar" -C "$MNT/c" || { log "tar x of the corpus failed"; exit 2; }

cd "$WORK" || exit 2
step tar_c tar cf "$WORK/tree.tar" -C "$MNT/c" .
step gzip sh -c "gzip -$LEVEL -c '$WORK/tree.tar' >'$WORK/tree.tar.gz'"
step export_mnt "$PD" export "$MNT/c" -o "$WORK/m.warc.gz" --level "$LEVEL"
step export_store "$PD" export "$STORE" c -o "$WORK/s.warc.gz" --level "$LEVEL"
mkdir "$MNT/untar" "$MNT/imp"
step tar_x tar xf "$WORK/tree.tar" -C "$MNT/untar"
step gunzip sh -c "gzip -dc '$WORK/tree.tar.gz' >/dev/null"
step import "$PD" import "$WORK"/m-*.warc.gz -C "$MNT/imp"

# The import laid the pages out under the names export gave them
# (file:///a/..., file:///b/...): the corpus's tree, byte for byte.
(cd "$MNT/imp" && find . -type f -print0 | sort -z | xargs -0 -r -n 2000 md5sum --) >"$WORK/imp.md5"
if ! cmp -s "$WORK/imp.md5" "$CACHE/corpus.md5"; then
	log "FAIL: the imported tree differs from the corpus"; failed=1
fi

echo "corpus: $pages pages, $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB ($unique_pages distinct, $(awk -v b="$unique_bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB)"
for s in tar_c gzip export_mnt export_store tar_x gunzip import; do
	echo "$s: $(mbs "$s") MB/s (${T[$s]} s), $(mbs_cpu "$s") MB per CPU second (${C[$s]} s of CPU)"
done
echo "export_mnt / tar_c: $(awk -v a="${T[tar_c]}" -v b="${T[export_mnt]}" 'BEGIN { printf "%.2f", a / b }')"
echo "export_mnt / gzip: $(awk -v a="${T[gzip]}" -v b="${T[export_mnt]}" 'BEGIN { printf "%.2f", a / b }')"
echo "export_store / gzip: $(awk -v a="${T[gzip]}" -v b="${T[export_store]}" 'BEGIN { printf "%.2f", a / b }')"
echo "import / tar_x: $(awk -v a="${T[tar_x]}" -v b="${T[import]}" 'BEGIN { printf "%.2f", a / b }')"
echo "import / gunzip: $(awk -v a="${T[gunzip]}" -v b="${T[import]}" 'BEGIN { printf "%.2f", a / b }')"
echo "size: tar.gz $(size_mb "$WORK/tree.tar.gz") MB, export $(size_mb "$WORK"/m-*.warc.gz) MB in $(ls "$WORK"/m-*.warc.gz | wc -l) files"
exit "$failed"
