#!/usr/bin/env bash
# Installing: `make install` and `make uninstall` into a staging root, and
# the Debian package: built from a copy of the tree with
# `dpkg-buildpackage -us -uc`, free of lintian errors, installed with dpkg,
# mounted with the fstab line, then removed. About a minute and a half
# (two release builds of the programs); the io_uring pass of tests/run.sh
# skips it (it mounts through mount(8) on whatever transport is on).
. "$(dirname "$0")/lib.sh"

VERSION=$(cat "$PD_TOP/VERSION")
FORMAT=$(sed -n 's/^#define PD_FORMAT_VERSION \([0-9]*\).*/\1/p' "$PD_TOP/core/store/store.h")

# a copy of the source tree, without build output
copy_tree() {
	mkdir -p "$1" &&
	tar -C "$PD_TOP" --exclude=./build --exclude=./.git -cf - . | tar -x -C "$1"
}

case_make_install_uninstall() {
	local src=$PD_TMP/inst/pagededup root=$PD_TMP/inst/root f s=$PD_TMP/inst/store m=$PD_TMP/inst/mnt pid i
	copy_tree "$src" || fail "copy the tree"
	nice make -C "$src" install PREFIX="$root" -j2 >"$PD_TMP/install.log" 2>&1 ||
		{ tail -30 "$PD_TMP/install.log"; fail "make install"; }
	for f in bin/pagededup bin/pagededupfs share/man/man1/pagededup.1.gz share/man/man8/pagededupfs.8.gz \
		share/bash-completion/completions/pagededup share/bash-completion/completions/pagededupfs \
		share/doc/pagededup/examples/srv-pages.mount; do
		[ -s "$root/$f" ] || fail "make install did not install $f"
	done
	expect_eq "$("$root/bin/pagededup" --version)" "pagededup $VERSION (store format $FORMAT)" "installed version"
	zcat "$root/share/man/man8/pagededupfs.8.gz" | grep -q "pagededup $VERSION" || fail "man page version"
	# the programs only: neither the unit tests nor the benchmarks were built
	[ -e "$src/build/release/tests" ] && fail "make install built the tests"
	[ -e "$src/build/release/bench" ] && fail "make install built the benchmarks"
	grep -q 'cmocka\|gnuplot' "$PD_TMP/install.log" && fail "make install asked for test or benchmark packages"
	# the README's first command: make mount makes the store and mounts it
	make -C "$src" mount PREFIX="$root" STORE="$s" MOUNTPOINT="$m" >"$PD_TMP/mount.log" 2>&1 ||
		{ cat "$PD_TMP/mount.log"; fail "make mount"; }
	pid=$(pgrep -f -- "pagededupfs $s" | head -1)
	pd_register_mount "$m" "$pid"
	mountpoint -q "$m" || fail "make mount: $m not mounted"
	echo page >"$m/a" && echo page >"$m/b" || fail write
	expect_eq "$(pd_xattr "$m/b" user.dedup.refcount)" 2 "refcount in the archive make mount made"
	fusermount3 -u "$m" || fail umount
	# again: the store is there now, make mount only mounts it
	make -C "$src" mount PREFIX="$root" STORE="$s" MOUNTPOINT="$m" >"$PD_TMP/mount2.log" 2>&1 ||
		{ cat "$PD_TMP/mount2.log"; fail "make mount (the store exists)"; }
	pid=$(pgrep -f -- "pagededupfs $s" | head -1)
	pd_register_mount "$m" "$pid"
	expect_eq "$(cat "$m/a")" page "the page after make mount of the existing store"
	fusermount3 -u "$m" || fail umount
	"$root/bin/pagededup" fsck "$s" >/dev/null 2>&1 || fail "fsck of the store make mount made"
	make -C "$src" uninstall PREFIX="$root" >/dev/null || fail "make uninstall"
	expect_eq "$(find "$root" -type f | wc -l)" 0 "files left after make uninstall"
}

case_debian_package() {
	local src=$PD_TMP/deb/pagededup-$VERSION deb s m i pid out
	command -v dpkg-buildpackage >/dev/null && command -v lintian >/dev/null && [ -e /usr/share/debhelper ] ||
		skip "dpkg-dev, debhelper or lintian is not installed (make deps installs them)"
	dpkg-query -W -f='${Status}' pagededup 2>/dev/null | grep -q "ok installed" &&
		skip "a pagededup package is installed already; not replacing it"
	copy_tree "$src" || fail "copy the tree"
	(cd "$src" && nice dpkg-buildpackage -us -uc -j2) >"$PD_TMP/dpkg-build.log" 2>&1 ||
		{ tail -40 "$PD_TMP/dpkg-build.log"; fail "dpkg-buildpackage -us -uc"; }
	grep -q 'tests/unit\|tests/bench' "$PD_TMP/dpkg-build.log" && fail "the package build compiled tests or benchmarks"
	deb=$PD_TMP/deb/pagededup_${VERSION}_$(dpkg --print-architecture).deb
	[ -s "$deb" ] || fail "no $deb"
	out=$(lintian --tag-display-limit 0 "$PD_TMP/deb/pagededup_${VERSION}_$(dpkg --print-architecture).changes" 2>&1 |
		grep -v 'running with root privileges')
	[ -n "$out" ] && printf 'lintian: %s\n' "$out"
	grep -q '^E: ' <<<"$out" && fail "lintian reports errors"
	# install it: the host's /usr/bin and PATH are shared with other
	# scripts (t_dedup.sh links /usr/local/bin/pagededupfs for a moment)
	pd_host_lock || fail "the host-wide lock"
	pd_undo_later "dpkg --purge pagededup"
	dpkg -i "$deb" >"$PD_TMP/dpkg-i.log" 2>&1 || { cat "$PD_TMP/dpkg-i.log"; fail "dpkg -i"; }
	expect_eq "$(/usr/bin/pagededup --version)" "pagededup $VERSION (store format $FORMAT)" "installed pagededup"
	man -w pagededupfs >/dev/null 2>&1 || [ -e /usr/share/man/man8/pagededupfs.8.gz ] || fail "no man page"
	# the completion answers
	if [ -r /usr/share/bash-completion/bash_completion ]; then
		out=$(bash -c '. /usr/share/bash-completion/bash_completion; . /usr/share/bash-completion/completions/pagededup
			COMP_WORDS=(pagededup fs); COMP_CWORD=1; COMP_LINE="pagededup fs"; COMP_POINT=12
			_pagededup; echo "${COMPREPLY[*]}"') || fail "completion"
		expect_eq "$out" fsck "completion of 'pagededup fs'"
	fi
	# the fstab line mounts it (mount.fuse3 finds /usr/bin/pagededupfs on
	# its PATH; a private fstab leaves /etc/fstab alone)
	s=$PD_TMP/deb/store m=$PD_TMP/deb/mnt
	mkdir -p "$m"
	/usr/bin/pagededup mkfs "$s" >/dev/null || fail mkfs
	printf '%s %s fuse.pagededupfs defaults,allow_other 0 0\n' "$s" "$m" >"$PD_TMP/fstab"
	if [ -e /usr/local/bin/pagededupfs ]; then
		skip "/usr/local/bin/pagededupfs comes first on mount.fuse's PATH"
	fi
	mount --fstab "$PD_TMP/fstab" "$m" 9>&- || fail "mount with the fstab line"
	pid=$(pgrep -f -- "pagededupfs $s" | head -1)
	pd_register_mount "$m" "$pid"
	expect_eq "$(findmnt -n -o FSTYPE "$m")" fuse.pagededupfs "file system type"
	expect_eq "$(readlink "/proc/$pid/exe")" /usr/bin/pagededupfs "the daemon's program"
	echo page >"$m/a" && echo page >"$m/b" || fail write
	expect_eq "$(pd_xattr "$m/b" user.dedup.refcount)" 2 "refcount through the packaged daemon"
	umount "$m" || fail umount
	/usr/bin/pagededup fsck "$s" >/dev/null 2>&1 || fail "fsck after the unmount (it waits for the daemon)"
	dpkg --purge pagededup >/dev/null || fail "dpkg --purge"
	[ -e /usr/bin/pagededupfs ] && fail "/usr/bin/pagededupfs left after the purge"
	return 0
}

pd_case make_install_uninstall
PD_CASE_TIMEOUT=600 pd_case debian_package
pd_finish
