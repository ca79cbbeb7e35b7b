#!/usr/bin/env bash
# The format 1 conversion on a store made by the landed format 1 code:
# builds pagededupfs at FORMAT1_COMMIT (default: the last commit of main
# before packs) in a temporary clone, then runs t_packs.sh's
# format1_converted case with it (PD_FORMAT1_BIN).
#
#   bash tests/fs/run-format1.sh BUILD_DIR [COMMIT]      (make test-format1)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: run-format1.sh BUILD_DIR [COMMIT]}" && pwd)
commit=${2:-${FORMAT1_COMMIT:-650ba2e}}
tmp=$(mktemp -d /var/tmp/pd-format1.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
git clone -q "$top" "$tmp/src"
git -C "$tmp/src" checkout -q "$commit"
grep -q '^#define PD_FORMAT_VERSION 1$' "$tmp/src/core/store/store.h" ||
	{ echo "run-format1: $commit does not make format 1 stores" >&2; exit 2; }
make -C "$tmp/src" build MODE=release -j2 >"$tmp/build.log" 2>&1 || { tail -20 "$tmp/build.log"; exit 2; }
export PD_BUILD=$build PD_TOP=$top PD_BIN=$build/pagededup PDFS_BIN=$build/pagededupfs PD_DATA=$top/tests/data
export PD_FORMAT1_BIN=$tmp/src/build/release/pagededupfs PD_ONLY=format1
bash "$top/tests/fs/t_packs.sh"
