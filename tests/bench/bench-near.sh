#!/usr/bin/env bash
# make bench-near: quality of near-duplicate detection (bench_near) on the
# benchmark corpus (corpus.sh builds or reuses it) and on Chinese pages
# made from the message catalogues in /usr/share/locale.
#
#   tests/bench/bench-near.sh BUILD_DIR [bench_near options]
#
# Figures are lines "name: value"; see tests/bench/README.md. Exits 0 when
# the benchmark ran; quality is reported, never asserted.
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
echo "## bench_near $*"
exec "$BIN" --corpus "$CACHE/corpus/a" "$@"
