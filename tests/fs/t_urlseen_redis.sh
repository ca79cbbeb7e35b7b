#!/usr/bin/env bash
# `pagededup urlseen --redis`: the URL-seen filter on Redis, shared by
# crawlers. Each case starts its own redis-server processes (ports
# 21400-21459, the cluster bus 10000 above: below the kernel's ephemeral
# range, 32768-60999 by default, where an outgoing connection's TIME-WAIT
# would keep a bus port from being bound for a minute) and stops them when
# it ends, failed or not (an EXIT trap in the case's subshell). Cases:
#   plain     one plain server: normal forms, runs that remember, --check,
#             --fpr of another filter, an unreachable server (exit 3);
#   journal   crawlers killed mid-run with --journal: the next run prints
#             what the killed one had recorded and not printed; no URL of
#             the list is left unprinted;
#   race      a cluster of 3 primaries and 3 replicas, three crawler
#             processes on overlapping lists with splits on the way: every
#             distinct URL printed by exactly one of them, less false
#             positives within the rate;
#   netns     the race with each crawler in a network namespace of its own,
#             with its own address (10.213.X.11-13 on veth pairs to a
#             bridge of this host, 10.213.X.1, which the cluster's nodes
#             listen on and announce); CLIENT LIST on the primaries shows
#             the three addresses (skipped, and said so, where namespaces
#             cannot be made: not root, no iproute2);
#   stall     the race into a filter that splits all the way, with a short
#             --redis-timeout while each primary in turn is stopped
#             (SIGSTOP) for a moment: answers are lost, and every URL
#             printed by two crawlers lies in a batch one of them reported
#             as printed without an answer (none unaccounted for);
#   failover  the same, with a primary killed mid-run: the run goes on
#             after the replica takes over; URLs printed twice only those
#             reported as printed without an answer, and what the dead
#             primary had not passed to its replica (rfilter.h);
#   reshard   the same, with one leaf's slot migrated by hand (held
#             half-way for a while: ASK) and then `redis-cli --cluster
#             reshard` moving slots mid-run (MOVED): nothing printed twice.
# Outside netns the crawlers are three processes on this host, on
# 127.0.0.1.
. "$(dirname "$0")/lib.sh"
. "$PD_TOP/tests/redis_lib.sh"

[ -x "$PD_BIN" ] || { not_ok setup; note "# missing executable: $PD_BIN"; pd_finish; }
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
	{ not_ok setup; note "# redis-server/redis-cli missing: make deps installs them"; pd_finish; }

# urls FROM TO [STEP]: URLs number FROM..TO-1
urls() {
	awk -v a="$1" -v b="$2" -v s="${3:-1}" \
		'BEGIN { for (i = a; i < b; i += s) printf "https://h%d.example.org/p/%d/item-%d.html?id=%d\n", i % 13, i % 97, i, i }'
}

# slowly FILE: the file's lines, a few thousand at a time, so that a run
# lasts long enough for a fault to meet it mid-run
SLOW=0.1
slowly() { awk -v s="$SLOW" '{ print } NR % 2000 == 0 { fflush(); system("sleep " s) }' "$1"; }

RACE_OPTS=(--expected 5000 --redis-leaves 4 --leaf-kib 16 --batch 256 --fpr 1e-3)

# RUN_IN[x]: the words crawler x runs in (ip netns exec NS), none by default
declare -A RUN_IN=()

# three crawlers on overlapping lists (about 2/3 of each list is in
# another); their output in $PD_TMP/out.{a,b,c}, stderr in err.*
race3() {
	local seeds=$1 d=$PD_TMP x
	urls 0 40000 >"$d/list.a"
	urls 20000 60000 >"$d/list.b"
	urls 0 60000 3 >"$d/list.c"
	urls 0 60000 | sort -u >"$d/distinct"
	for x in a b c; do
		slowly "$d/list.$x" | ${RUN_IN[$x]:-} "$PD_BIN" urlseen --redis "$seeds" "${RACE_OPTS[@]}" --stats \
			>"$d/out.$x" 2>"$d/err.$x" &
		echo $! >"$d/pid.$x"
	done
}

# wait_race: the three exit statuses must be 0
wait_race() {
	local x rc=0
	for x in a b c; do
		wait "$(cat "$PD_TMP/pid.$x")" || { echo "crawler $x: exit $?"; sed 's/^/  /' "$PD_TMP/err.$x"; rc=1; }
	done
	return $rc
}

sum_stat() { cat "$PD_TMP"/err.? | sed -n "s/^$1: \([0-9]*\).*/\1/p" | awk '{ s += $1 } END { print s + 0 }'; }

# check_outcome ALLOWED_TWICE [ALLOWED_UNACCOUNTED]: no URL printed twice
# beyond ALLOWED_TWICE, no print of a URL after its first outside a batch
# its crawler reported as printed without an answer beyond
# ALLOWED_UNACCOUNTED (default 0; rd_unaccounted), every distinct URL
# printed but for false positives within the rate
check_outcome() {
	local allowed=$1 allowed_unacc=${2:-0} d=$PD_TMP n twice missing limit acc unacc
	cat "$d"/out.? | sort >"$d/all"
	twice=$(uniq -d "$d/all" | wc -l)
	uniq "$d/all" >"$d/printed"
	missing=$(comm -23 "$d/distinct" "$d/printed" | wc -l)
	[ "$(comm -13 "$d/distinct" "$d/printed" | wc -l)" = 0 ] || fail "printed URLs that were never given"
	n=$(wc -l <"$d/distinct")
	# false positives: the rate asked (1e-3) at most, with room for chance
	# (Poisson: mean 60 here; 3x is far out of reach by chance alone)
	limit=$(awk -v n="$n" 'BEGIN { printf "%d", 3 * n * 1e-3 + 5 }')
	acc=$(rd_unaccounted "$d/list.a:$d/out.a:$d/err.a" "$d/list.b:$d/out.b:$d/err.b" \
		"$d/list.c:$d/out.c:$d/err.c")
	unacc=${acc##* }
	echo "distinct $n, printed twice $twice (allowed $allowed), never printed $missing (limit $limit)"
	echo "lost answers: $(sum_stat redis_lost); printed more than once: $acc (allowed $allowed_unacc)"
	[ "$twice" -le "$allowed" ] || fail "$twice URLs printed by two crawlers (allowed $allowed)"
	[ "$unacc" -le "$allowed_unacc" ] ||
		fail "$unacc prints of URLs printed before, outside every batch reported lost"
	[ "$missing" -le "$limit" ] || fail "$missing URLs never printed (false positives at most $limit)"
}

case_plain() {
	local d=$PD_TMP/plain out rc=0
	trap rd_stop_all EXIT
	rd_start "$d" 21400 || fail "redis-server"
	local R=(--redis 127.0.0.1:21400)
	out=$(printf 'http://Example.COM/a\nhttp://example.com/b\nhttp://example.com/a#x\n' |
		"$PD_BIN" urlseen "${R[@]}") || fail "exit $?"
	expect_eq "$out" $'http://example.com/a\nhttp://example.com/b' "first run"
	out=$(printf 'http://example.com/b\nhttp://example.com/c\nhttp://EXAMPLE.com/a\n' |
		"$PD_BIN" urlseen "${R[@]}") || fail "exit $?"
	expect_eq "$out" "http://example.com/c" "second run (the filter persists on the server)"
	out=$(printf 'http://example.com/c\nhttp://example.com/d\n' | "$PD_BIN" urlseen "${R[@]}" --check)
	expect_eq "$out" "http://example.com/d" "--check"
	out=$(printf 'http://example.com/d\n' | "$PD_BIN" urlseen "${R[@]}")
	expect_eq "$out" "http://example.com/d" "--check recorded nothing"
	# another filter on the same server is another set
	out=$(printf 'http://example.com/a\n' | "$PD_BIN" urlseen "${R[@]}" --redis-name other)
	expect_eq "$out" "http://example.com/a" "--redis-name"
	# a larger list, twice: all new, then none
	urls 0 20000 >"$d/list"
	out=$("$PD_BIN" urlseen "${R[@]}" "$d/list" | wc -l)
	[ "$out" -ge 19990 ] || fail "only $out of 20000 new"
	out=$("$PD_BIN" urlseen "${R[@]}" "$d/list" | wc -l)
	expect_eq "$out" 0 "a list given again"
	# another rate for an existing filter: refused, clearly
	printf 'http://example.com/z\n' | "$PD_BIN" urlseen "${R[@]}" --fpr 1e-3 >/dev/null 2>"$d/err" && rc=0 || rc=$?
	expect_eq "$rc" 1 "--fpr of another filter: exit 1"
	grep -q "made for a false-positive rate of 0.0001" "$d/err" || fail "no clear message: $(cat "$d/err")"
	"$PD_BIN" urlseen "${R[@]}" --filter "$d/f" </dev/null 2>"$d/err" && fail "--filter with --redis accepted"
	grep -q "leave out --filter" "$d/err" || fail "message: $(cat "$d/err")"
	# --check of a filter that does not exist makes nothing
	printf 'http://example.com/a\n' | "$PD_BIN" urlseen "${R[@]}" --redis-name none --check 2>"$d/err" && fail "--check made a filter"
	[ -z "$(rd_cli 21400 get none:meta)" ] || fail "--check left a filter behind"
	# unreachable: exit 3, a message that says so, nothing printed
	rd_kill 21400
	rc=0
	out=$(printf 'http://example.com/q\n' | "$PD_BIN" urlseen "${R[@]}" 2>"$d/err") || rc=$?
	expect_eq "$rc" 3 "exit status with the server down"
	expect_eq "$out" "" "output with the server down"
	grep -q "cannot reach Redis at 127.0.0.1:21400" "$d/err" || fail "message: $(cat "$d/err")"
	rc=0
	"$PD_BIN" urlseen --redis localhost 2>"$d/err" </dev/null || rc=$?
	expect_eq "$rc" 2 "a malformed --redis: a usage error"
}

case_journal() {
	local d=$PD_TMP/journal i pid
	trap rd_stop_all EXIT
	rd_start "$d" 21401 || fail "redis-server"
	local R=(--redis 127.0.0.1:21401 --journal "$d/j")
	# a journal left by a killed run is printed first
	printf 'http://example.com/left/1\nhttp://example.com/left/2\n' >"$d/j"
	out=$(printf 'http://example.com/new\n' | "$PD_BIN" urlseen "${R[@]}" 2>"$d/err") || fail "exit $?"
	expect_eq "$out" $'http://example.com/left/1\nhttp://example.com/left/2\nhttp://example.com/new' "journal printed first"
	grep -q "held 2 URLs" "$d/err" || fail "no report: $(cat "$d/err")"
	[ ! -s "$d/j" ] || fail "journal not emptied"
	# killed at three moments of a run, each time started again on the
	# whole list: every URL of the list is printed at least once
	urls 0 30000 >"$d/list"
	: >"$d/printed"
	for i in 1 2 3; do
		slowly "$d/list" | "$PD_BIN" urlseen "${R[@]}" --batch 500 >>"$d/printed" 2>>"$d/err" &
		pid=$!
		sleep "0.$((i * 2))"
		kill -9 $(pd_tree "$pid") 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	"$PD_BIN" urlseen "${R[@]}" "$d/list" >>"$d/printed" || fail "last run: exit $?"
	local missing
	missing=$(sort -u "$d/printed" | comm -23 <(sort -u "$d/list") - | wc -l)
	echo "printed $(wc -l <"$d/printed") lines, $(sort -u "$d/printed" | wc -l) distinct; never printed: $missing"
	# the filter's false positives (1e-4) may leave a few out, no more
	[ "$missing" -le 5 ] || fail "$missing URLs of the list never printed"
}

case_race() {
	trap rd_stop_all EXIT
	rd_cluster "$PD_TMP/cl" 21410 21411 21412 21413 21414 21415 || fail "cluster"
	race3 127.0.0.1:21410
	wait_race || fail "a crawler failed"
	check_outcome 0
	local splits
	splits=$(sum_stat filter_splits)
	echo "splits: $splits, stray: $(sum_stat filter_stray)"
	[ "$splits" -gt 0 ] || fail "no leaf split: the case does not test growth"
	[ "$(sum_stat redis_lost)" = 0 ] || fail "URLs lost without a fault"
}

# Network namespaces: pdu<ID>a..c, each with one end of a veth pair whose
# other end is on the bridge pdu<ID>br (10.213.X.1/24); crawler x gets
# 10.213.X.1[1-3]. ns_cleanup ID takes all of it down (absent parts are no
# error): the case's EXIT trap calls it, and so does the script's end,
# should the case be killed (time limit) before its trap could run.
ns_cleanup() {
	local id=$1 x
	for x in a b c; do ip netns del "pdu${id}$x" 2>/dev/null; done
	ip link del "pdu${id}br" 2>/dev/null
	for x in a b c; do ip link del "pdu${id}$x" 2>/dev/null; done
	return 0
}

# ns_setup ID: the namespaces, links and addresses; sets NS_NET (10.213.X)
ns_setup() {
	local id=$1 x i=11 o
	NS_NET=
	for o in $(seq $((id % 200 + 20)) 250) $(seq 20 250); do
		ip -o -4 addr show | grep -q " 10\.213\.$o\." || { NS_NET=10.213.$o; break; }
	done
	[ -n "$NS_NET" ] || { echo "no free 10.213.X.0/24 on this host"; return 1; }
	ip link add "pdu${id}br" type bridge &&
		ip addr add "$NS_NET.1/24" dev "pdu${id}br" &&
		ip link set "pdu${id}br" up || return 1
	for x in a b c; do
		ip netns add "pdu${id}$x" &&
			ip link add "pdu${id}$x" type veth peer name "pdu${id}${x}n" &&
			ip link set "pdu${id}${x}n" netns "pdu${id}$x" &&
			ip link set "pdu${id}$x" master "pdu${id}br" &&
			ip link set "pdu${id}$x" up &&
			ip -n "pdu${id}$x" addr add "$NS_NET.$i/24" dev "pdu${id}${x}n" &&
			ip -n "pdu${id}$x" link set "pdu${id}${x}n" up &&
			ip -n "pdu${id}$x" link set lo up || return 1
		i=$((i + 1))
	done
}

case_netns() {
	local id=$BASHPID x p ports=(21440 21441 21442 21443 21444 21445)
	[ "$(id -u)" = 0 ] || skip "network namespaces need root (ip netns add); the crawlers would share 127.0.0.1"
	command -v ip >/dev/null || skip "no ip command (iproute2: make deps installs it)"
	id=$((id % 100000))
	pd_undo_later "ns_cleanup $id"
	trap 'rd_stop_all; ns_cleanup '"$id" EXIT
	if ! ip netns add "pdu${id}probe" 2>"$PD_TMP/netns.err"; then
		skip "cannot make a network namespace here: $(cat "$PD_TMP/netns.err")"
	fi
	ip netns del "pdu${id}probe"
	ns_setup "$id" || fail "setting up the namespaces and the bridge"
	RUN_IN=([a]="ip netns exec pdu${id}a" [b]="ip netns exec pdu${id}b" [c]="ip netns exec pdu${id}c")
	RD_HOST=$NS_NET.1 rd_cluster "$PD_TMP/cl" "${ports[@]}" || fail "cluster on $NS_NET.1"
	rd_cli 21440 cluster slots | grep -qx "$NS_NET.1" || fail "the nodes do not announce $NS_NET.1"
	# each namespace has its own loopback: the nodes' 127.0.0.1 is not
	# reachable from there, their $NS_NET.1 is
	ip netns exec "pdu${id}a" bash -c 'exec 3<>/dev/tcp/127.0.0.1/21440' 2>/dev/null &&
		fail "namespace a reaches this host's 127.0.0.1"
	ip netns exec "pdu${id}a" bash -c "exec 3<>/dev/tcp/$NS_NET.1/21440" ||
		fail "namespace a does not reach $NS_NET.1:21440"
	race3 "$NS_NET.1:21440"
	# who is connected, while the crawlers run (each holds a connection to
	# every primary it has work for)
	: >"$PD_TMP/clients"
	while kill -0 "$(cat "$PD_TMP/pid.a")" 2>/dev/null || kill -0 "$(cat "$PD_TMP/pid.b")" 2>/dev/null ||
		kill -0 "$(cat "$PD_TMP/pid.c")" 2>/dev/null; do
		for p in $(rd_primaries 21440); do
			rd_cli "$p" client list | sed -n "s/.* addr=\([0-9.]*\):[0-9]* .*/$p \1/p" >>"$PD_TMP/clients"
		done
		sleep 0.2
	done
	wait_race || fail "a crawler failed"
	check_outcome 0
	local splits seen
	splits=$(sum_stat filter_splits)
	echo "splits: $splits, stray: $(sum_stat filter_stray)"
	[ "$splits" -gt 0 ] || fail "no leaf split: the case does not test growth"
	[ "$(sum_stat redis_lost)" = 0 ] || fail "URLs lost without a fault"
	# the primaries' clients: the three crawlers' addresses, each on every
	# primary; besides them only this host (redis-cli on 127.0.0.1, the
	# replicas on $NS_NET.1)
	sort -u "$PD_TMP/clients" >"$PD_TMP/clients.u"
	echo "clients seen (primary address):"; sed 's/^/  /' "$PD_TMP/clients.u"
	seen=$(awk '{ print $2 }' "$PD_TMP/clients.u" | grep -vx "127.0.0.1" | grep -vxF "$NS_NET.1" | sort -u | tr '\n' ' ')
	expect_eq "$seen" "$NS_NET.11 $NS_NET.12 $NS_NET.13 " "crawler addresses on the primaries"
	for p in $(rd_primaries 21440); do
		for x in 11 12 13; do
			grep -qx "$p $NS_NET.$x" "$PD_TMP/clients.u" || fail "no connection from $NS_NET.$x on primary $p"
		done
	done
}

case_stall() {
	trap rd_stop_all EXIT
	# primaries only: a node stopped for a moment cannot be failed over
	# (a failover may lose writes, which the failover case covers)
	RD_REPLICAS=0 rd_cluster "$PD_TMP/cl" 21450 21451 21452 || fail "cluster"
	# two leaves of 16 KiB (some 9,000 URLs each) for 60,000 URLs: ten
	# splits or so, down to level 2 or 3
	RACE_OPTS=(--expected 500 --redis-leaves 2 --leaf-kib 16 --batch 256 --fpr 1e-3 --redis-timeout 150)
	SLOW=0.05
	race3 127.0.0.1:21450
	local p i
	# not before every crawler has its filter open (a crawler that cannot
	# start ends with exit 3, as it should)
	for i in $(seq 1 300); do
		[ -s "$PD_TMP/out.a" ] && [ -s "$PD_TMP/out.b" ] && [ -s "$PD_TMP/out.c" ] && break
		sleep 0.1
	done
	for i in 1 2 3; do
		for p in 21450 21451 21452; do
			rd_signal "$p" STOP
			sleep 0.4
			rd_signal "$p" CONT
			sleep 0.2
		done
	done
	wait_race || fail "a crawler failed"
	local splits lost
	splits=$(sum_stat filter_splits)
	lost=$(sum_stat redis_lost)
	echo "splits: $splits, stray: $(sum_stat filter_stray), lost answers: $lost"
	[ "$splits" -ge 6 ] || fail "only $splits splits: the case does not test growth"
	[ "$lost" -gt 0 ] || fail "no answer lost: the stops came too late to test anything"
	# each report names what lost the answers (a node stopped: no answer in
	# time), not what came after it
	grep -hE ' lines [0-9]+-[0-9]+ printed as new without an answer' "$PD_TMP"/err.? | grep -v ': no answer in time); ' &&
		fail "lost answers reported with another reason"
	check_outcome "$lost" 0
}

case_failover() {
	trap rd_stop_all EXIT
	rd_cluster "$PD_TMP/cl" 21420 21421 21422 21423 21424 21425 || fail "cluster"
	local victim x alive=0
	victim=$(rd_primaries 21420 | tail -1)
	race3 127.0.0.1:21420
	sleep 1.5
	for x in a b c; do kill -0 "$(cat "$PD_TMP/pid.$x")" 2>/dev/null && alive=$((alive + 1)); done
	[ $alive -gt 0 ] || fail "the crawlers were done before the fault"
	echo "killing primary $victim with $alive crawlers running"
	rd_kill "$victim"
	wait_race || fail "a crawler did not survive the failover"
	local lost
	lost=$(sum_stat redis_lost)
	echo "URLs printed without an answer: $lost"
	rd_primaries 21420 | grep -qx "$victim" && fail "no failover happened"
	# printed twice: those reported lost, and what the killed primary had
	# acknowledged but not passed on (at most the batches in flight on it:
	# three crawlers' batches)
	check_outcome $((lost + 3 * 256)) $((3 * 256))
}

case_reshard() {
	trap rd_stop_all EXIT
	rd_cluster "$PD_TMP/cl" 21430 21431 21432 21433 21434 21435 || fail "cluster"
	local from to
	from=$(rd_cli 21430 cluster nodes | awk '$3 ~ /master/ && $9 ~ /^0-/ { print $1 }')
	to=$(rd_cli 21430 cluster nodes | awk '$3 ~ /master/ && $9 !~ /^0-/ { print $1; exit }')
	[ -n "$from" ] && [ -n "$to" ] || fail "cluster nodes: $(rd_cli 21430 cluster nodes)"
	SLOW=0.3
	race3 127.0.0.1:21430
	sleep 1
	# one leaf's slot half-way between two primaries: the key moved, the
	# slot not yet, so its old owner answers ASK
	local key=urlseen:0:0 slot src dst srcid dstid p
	slot=$(rd_cli 21430 cluster keyslot "$key")
	src=$(redis-cli -c -h 127.0.0.1 -p 21430 cluster nodes | awk -v s="$slot" '$3 ~ /master/ {
		for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]
			if (s >= r[1] && s <= r[2]) { split($2, a, "[:@]"); print a[2] } } }')
	dst=$(rd_primaries 21430 | grep -vx "$src" | head -1)
	srcid=$(rd_cli "$src" cluster myid) dstid=$(rd_cli "$dst" cluster myid)
	rd_cli "$dst" cluster setslot "$slot" importing "$srcid" >/dev/null
	rd_cli "$src" cluster setslot "$slot" migrating "$dstid" >/dev/null
	rd_cli "$src" migrate 127.0.0.1 "$dst" "$key" 0 5000 | grep -q OK || fail "MIGRATE $key"
	sleep 1
	for p in $(rd_primaries 21430); do rd_cli "$p" cluster setslot "$slot" node "$dstid" >/dev/null; done
	redis-cli --cluster reshard 127.0.0.1:21430 --cluster-from "$from" --cluster-to "$to" \
		--cluster-slots 3000 --cluster-yes >"$PD_TMP/reshard.log" 2>&1 ||
		{ tail "$PD_TMP/reshard.log"; fail "reshard"; }
	wait_race || fail "a crawler failed during the reshard"
	echo "MOVED $(sum_stat redis_moved), ASK $(sum_stat redis_ask), lost $(sum_stat redis_lost)"
	[ "$(sum_stat redis_moved)" -gt 0 ] || fail "no MOVED met: the reshard came too late"
	[ "$(sum_stat redis_ask)" -gt 0 ] || fail "no ASK met"
	[ "$(sum_stat redis_lost)" = 0 ] || fail "URLs lost without a fault"
	check_outcome 0
	rd_wait_ok 21430 21431 21432 21433 21434 21435 || fail "cluster not ok after the reshard"
}

pd_case plain
pd_case journal
pd_case race
pd_case netns
pd_case stall
pd_case failover
pd_case reshard
pd_finish
