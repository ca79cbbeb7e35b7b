#!/bin/sh
# Install the Debian packages pagededupfs needs, only those that are
# missing. Run as root on Debian 12 (or with sudo).
#
#   tools/install-deps.sh [build|test|bench|package|all]   (default all)
#
#   build    build and run the programs (make install, make mount)
#   test     + what make check uses (cmocka, the tools the tests drive)
#   bench    + what the benchmarks use
#   package  + what builds and checks the Debian package (debian/)
#   all      everything above
set -e
BUILD="build-essential pkg-config libfuse3-dev fuse3 libssl-dev liblmdb-dev libxxhash-dev libhiredis-dev zlib1g-dev libzstd-dev"
TEST="libcmocka-dev zstd attr wget python3 tar coreutils findutils procps lmdb-utils util-linux bash-completion redis-server redis-tools time iproute2"
BENCH="gnuplot-nox"
PACKAGE="debhelper dpkg-dev lintian fakeroot"
case ${1:-all} in
build) PKGS="$BUILD" ;;
test) PKGS="$BUILD $TEST" ;;
bench) PKGS="$BUILD $TEST $BENCH" ;;
package) PKGS="$BUILD $PACKAGE" ;;
all) PKGS="$BUILD $TEST $BENCH $PACKAGE" ;;
*) echo "usage: $0 [build|test|bench|package|all]" >&2; exit 2 ;;
esac
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# node and npm run the WARC reader the tests check exports with (below). A
# node from elsewhere that brings its own npm is kept.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
	echo "installing:$missing"
	if [ "$(id -u)" -ne 0 ]; then
		if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
			echo "error: missing packages:$missing; run 'make deps' as root" >&2; exit 1
		fi
	fi
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends $missing
fi

# warcio (webrecorder's warcio.js, from the npm registry): a WARC reader
# written elsewhere, that tests/fs/t_warc.sh reads our exports with. It goes
# into the build tree (build/node/node_modules), never into the system.
WARCIO_VERSION=2.4.11
top=$(cd "$(dirname "$0")/.." && pwd)
if ! grep -qs "\"version\": \"$WARCIO_VERSION\"" "$top/build/node/node_modules/warcio/package.json"; then
	echo "installing warcio@$WARCIO_VERSION into build/node"
	mkdir -p "$top/build/node"
	npm install --prefix "$top/build/node" --no-audit --no-fund --loglevel=error "warcio@$WARCIO_VERSION"
fi
