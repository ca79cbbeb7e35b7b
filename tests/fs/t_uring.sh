#!/usr/bin/env bash
# FUSE over io_uring (fs/uring_io.c): with the fuse module's enable_uring
# on, every request a process makes is served by a ring thread pinned to
# the CPU that process runs on, none by the /dev/fuse workers; -o no_uring
# keeps to /dev/fuse; requests and replies as large as the protocol allows
# (1 MiB writes and reads, 64 KiB attribute values, long directory
# listings, 4095-byte symlinks) cross the ring's buffers intact.
#
# The parameter is switched on for these cases and put back at exit. The
# whole suite also runs over io_uring in tests/run.sh's second pass.
. "$(dirname "$0")/lib.sh"
pd_require

uring_param=/sys/module/fuse/parameters/enable_uring
modprobe fuse 2>/dev/null
restore_uring_param() { echo "$uring_was" >"$uring_param"; }
if [ -w "$uring_param" ]; then
	uring_was=$(cat "$uring_param")
	pd_undo_later restore_uring_param
	echo Y >"$uring_param"
fi

need_uring() {
	[ -w "$uring_param" ] || skip "this kernel has no FUSE over io_uring ($uring_param)"
}

# switches NAME: voluntary context switches of the daemon's threads called
# NAME, summed (a thread that waits for requests switches once per request
# it serves).
switches() {
	local t sum=0 n
	for t in /proc/"$PDFS_PID"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = "$1" ] || continue
		n=$(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status" 2>/dev/null)
		sum=$((sum + ${n:-0}))
	done
	echo "$sum"
}

# work CPU DIR: 150 pages written, reopened and read, by one process held on CPU.
work() {
	taskset -c "$1" python3 - "$MNT/$2" <<'EOF'
import os, sys
d = sys.argv[1]
os.makedirs(d)
for i in range(150):
    with open("%s/p%d.html" % (d, i), "wb") as f:
        f.write(b"<p>page %d</p>\n" % i * 20)
for i in range(150):
    with open("%s/p%d.html" % (d, i), "rb") as f:
        assert f.read() == b"<p>page %d</p>\n" % i * 20
EOF
}

# Each ring thread may run only on the CPU of its queue.
pinned_to_their_cpus() {
	local t name cpus n=0
	for t in /proc/"$PDFS_PID"/task/*; do
		name=$(cat "$t/comm")
		case $name in pdfs-ring-*) ;; *) continue ;; esac
		cpus=$(awk '/^Cpus_allowed_list/ { print $2 }' "$t/status")
		[ "$cpus" = "${name#pdfs-ring-}" ] || fail "$name may run on CPUs $cpus"
		n=$((n + 1))
	done
	[ "$n" -ge "$(nproc)" ] || fail "$n ring threads for $(nproc) CPUs"
}

case_served_on_the_callers_cpu() {
	need_uring
	local ncpu cpu other r0 o0 d0 r1 o1 d1
	ncpu=$(nproc)
	pd_mount || fail mount
	pd_wait_uring || fail "no io_uring"
	pinned_to_their_cpus
	for cpu in $(seq 0 $((ncpu > 2 ? 1 : ncpu - 1))); do
		other=$(( (cpu + 1) % ncpu ))
		r0=$(switches "pdfs-ring-$cpu") o0=$(switches "pdfs-ring-$other") d0=$(switches pagededupfs)
		work "$cpu" "cpu$cpu" || fail "pages written and read on CPU $cpu"
		r1=$(switches "pdfs-ring-$cpu") o1=$(switches "pdfs-ring-$other") d1=$(switches pagededupfs)
		note "CPU $cpu: its ring threads switched $((r1 - r0)) times, CPU $other's $((o1 - o0)), the /dev/fuse workers $((d1 - d0))"
		# 150 creates, writes, flushes, opens, flushes: at least 750 requests
		[ $((r1 - r0)) -ge 500 ] || fail "CPU $cpu's ring threads served too little: $((r1 - r0)) switches"
		[ "$ncpu" = 1 ] || [ $(( (o1 - o0) * 10 )) -lt $((r1 - r0)) ] ||
			fail "CPU $other's ring threads served a process held on CPU $cpu"
		[ $(( (d1 - d0) * 10 )) -lt $((r1 - r0)) ] || fail "the /dev/fuse workers served ring requests"
	done
	pd_umount || fail umount
}

case_no_uring_option() {
	need_uring
	pd_mount no_uring || fail mount
	work 0 p || fail "pages written and read"
	! grep -q "serving requests over io_uring" "$PDFS_LOG" || fail "-o no_uring still served over io_uring"
	[ "$(switches pdfs-ring-0)" = 0 ] || fail "ring threads exist under -o no_uring"
	pd_umount || fail umount
}

case_largest_requests() {
	need_uring
	pd_mount || fail mount
	pd_wait_uring || fail "no io_uring"
	head -c $((9 << 20)) /dev/urandom >"$PD_TMP/big"
	dd if="$PD_TMP/big" of="$MNT/big" bs=4M status=none || fail "dd in 4 MiB writes"
	cmp "$PD_TMP/big" "$MNT/big" || fail "a 9 MiB file read back differs"
	dd if="$MNT/big" bs=1M iflag=direct status=none | cmp - "$PD_TMP/big" || fail "1 MiB direct reads differ"
	py <<'EOF' || exit 1
import os
from fsutil import *
M = os.environ["MNT"]
value = bytes((i * 7 + 3) % 256 for i in range(65536))
write(M + "/x", b"x")
os.setxattr(M + "/x", "user.big", value)
eq(os.getxattr(M + "/x", "user.big"), value, "a 64 KiB attribute value")
target = "t" * 4095
os.symlink(target, M + "/link")
eq(os.readlink(M + "/link"), target, "a 4095-byte symlink target")
os.mkdir(M + "/many")
names = {("%04d-" % i) + "n" * 240 for i in range(2000)}
for n in names:
    write(os.path.join(M, "many", n), b"")
eq(set(os.listdir(M + "/many")), names, "2000 long names listed")
EOF
	pd_umount || fail umount
}

pd_case served_on_the_callers_cpu
pd_case no_uring_option
pd_case largest_requests
pd_finish
