#!/usr/bin/env bash
# The folders of core/ form layers (tests/layers/check-layers.py): the real
# tree passes, and a tree with a cycle, a missing README or an include of
# fs/ is refused (so the check can fail).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
check="$here/check-layers.py"

python3 "$check" "$top/core"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fixture() { # a small core/ of three folders, a < b < c
	rm -rf "$tmp/core"
	mkdir -p "$tmp/core/a" "$tmp/core/b" "$tmp/core/c"
	for d in a b c; do echo "# $d" >"$tmp/core/$d/README.md"; done
	printf '#include "x.h"\n' >"$tmp/core/a/x.c"; : >"$tmp/core/a/x.h"
	printf '#include "a/x.h"\n' >"$tmp/core/b/y.h"
	printf '#include "b/y.h"\n#include "a/x.h"\n' >"$tmp/core/c/z.c"
}
expect() { # NAME WANT(pass|fail) PATTERN: run the check on the fixture
	local out rc
	out=$(python3 "$check" "$tmp/core" 2>&1); rc=$?
	if { [ "$2" = pass ] && [ $rc -eq 0 ]; } || { [ "$2" = fail ] && [ $rc -ne 0 ] && grep -q "$3" <<<"$out"; }; then
		echo "ok $1"
	else
		echo "not ok $1"; printf '%s\n' "$out" | sed 's/^/# /'
	fi
}
fixture; expect layers_fixture_layered pass ''
fixture; printf '#include "c/z.h"\n' >>"$tmp/core/a/x.c"; : >"$tmp/core/c/z.h"
expect layers_cycle_refused fail 'include cycle between folders: a -> c -> b -> a\|include cycle'
fixture; rm "$tmp/core/b/README.md"; expect layers_readme_required fail 'core/b/ has no README.md'
fixture; printf '#include "../../fs/pdfs.h"\n' >>"$tmp/core/c/z.c"; expect layers_fs_refused fail 'reaches outside core/'
fixture; printf '#include "b/nothere.h"\n' >>"$tmp/core/c/z.c"; expect layers_unknown_header fail 'names no header'
