#!/bin/sh
# Install the Debian packages pagededupfs needs to build, test and benchmark,
# only those that are missing. Run as root on Debian 12 (or with sudo).
set -e
PKGS="build-essential pkg-config libfuse3-dev fuse3 libssl-dev liblmdb-dev libxxhash-dev
libcmocka-dev libzstd-dev zstd attr wget python3 tar coreutils findutils procps gnuplot-nox lmdb-utils"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
		echo "error: missing packages:$missing; run 'make deps' as root" >&2; exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
