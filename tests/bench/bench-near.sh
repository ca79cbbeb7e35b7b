#!/usr/bin/env bash
# make bench-near: quality of near-duplicate detection (bench_near) on the
# benchmark corpus (corpus.sh builds or reuses it) and on Chinese pages
# made from the message catalogues in /usr/share/locale.
#
#   tests/bench/bench-near.sh BUILD_DIR [bench_near options]
#
# Figures are lines "name: value"; see tests/bench/README.md. Exits 0 when
# the benchmark ran; quality is reported, never asserted.
#
# PD_NEAR_RULES=FILE: the candidate pairs' features written to FILE
# (bench_near --rules) and the confirm rules beyond the judge's line
# measured on them (near_rules.py) after the run.
set -euo pipefail
build=$(cd "${1:-build/release}" && pwd)
shift || true
BIN=$build/bench/bench_near
[ -x "$BIN" ] || { echo "bench-near: missing $BIN (make build MODE=release)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
CACHE=${PD_CORPUS:-/var/tmp/pagededup-corpus}
PD_CORPUS=$CACHE bash "$here/corpus.sh"
if [ ! -d /usr/share/locale/zh_CN/LC_MESSAGES ]; then
	echo "bench-near: no zh_CN message catalogues; the Chinese subset will be empty" >&2
fi
# API references of four generators, for the per-package precision
# (near_methods.h): Javadoc, Sphinx (the Python manual, and SciPy's
# reference: a page per function), rustdoc (corpus.sh unpacks openjdk,
# python and rust) and Doxygen (libstdc++; these unpacked here, the same
# way). PD_NEAR_PKGS overrides the list.
PKGS=${PD_NEAR_PKGS:-openjdk-17-doc python3.11-doc python-scipy-doc rust-doc libstdc++-12-doc}
pkg_args=()
for p in $PKGS; do
	if [ ! -d "$CACHE/extract/$p" ]; then
		mkdir -p "$CACHE/debs" && (cd "$CACHE/debs" && apt-get download "$p" >/dev/null 2>&1) ||
			{ echo "bench-near: cannot download $p; left out" >&2; continue; }
		mkdir -p "$CACHE/extract/$p.tmp" && dpkg -x "$CACHE"/debs/"$p"_*.deb "$CACHE/extract/$p.tmp" &&
			mv "$CACHE/extract/$p.tmp" "$CACHE/extract/$p" || { echo "bench-near: cannot unpack $p" >&2; continue; }
	fi
	pkg_args+=(--pkg "$CACHE/extract/$p")
done
echo "## bench_near ${pkg_args[*]} $*"
if [ -z "${PD_NEAR_RULES:-}" ]; then
	exec "$BIN" --corpus "$CACHE/corpus/a" "${pkg_args[@]}" "$@"
fi
"$BIN" --corpus "$CACHE/corpus/a" "${pkg_args[@]}" --rules "$PD_NEAR_RULES" "$@"
echo "## near_rules.py $PD_NEAR_RULES"
python3 "$here/near_rules.py" "$PD_NEAR_RULES"
