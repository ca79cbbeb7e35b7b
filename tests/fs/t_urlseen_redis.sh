#!/usr/bin/env bash
# `pagededup urlseen --redis`: the URL-seen filter on Redis, shared by
# crawlers. Each case starts its own redis-server processes on 127.0.0.1
# (ports 26400-26439, the cluster bus 10000 above) and stops them when it
# ends, failed or not (an EXIT trap in the case's subshell). Cases:
#   plain     one plain server: normal forms, runs that remember, --check,
#             --fpr of another filter, an unreachable server (exit 3);
#   journal   crawlers killed mid-run with --journal: the next run prints
#             what the killed one had recorded and not printed; no URL of
#             the list is left unprinted;
#   race      a cluster of 3 primaries and 3 replicas, three crawler
#             processes on overlapping lists with splits on the way: every
#             distinct URL printed by exactly one of them, less false
#             positives within the rate;
#   failover  the same, with a primary killed mid-run: the run goes on
#             after the replica takes over; URLs printed twice only those
#             reported as printed without an answer, and what the dead
#             primary had not passed to its replica (rfilter.h);
#   reshard   the same, with one leaf's slot migrated by hand (held
#             half-way for a while: ASK) and then `redis-cli --cluster
#             reshard` moving slots mid-run (MOVED): nothing printed twice.
# The crawlers are three processes on this host, all on 127.0.0.1 (the
# cluster's nodes announce 127.0.0.1, and tests talk to 127.0.0.1 only).
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

# three crawlers on overlapping lists (about 2/3 of each list is in
# another); their output in $PD_TMP/out.{a,b,c}, stderr in err.*
race3() {
	local seeds=$1 d=$PD_TMP x
	urls 0 40000 >"$d/list.a"
	urls 20000 60000 >"$d/list.b"
	urls 0 60000 3 >"$d/list.c"
	urls 0 60000 | sort -u >"$d/distinct"
	for x in a b c; do
		slowly "$d/list.$x" | "$PD_BIN" urlseen --redis "$seeds" "${RACE_OPTS[@]}" --stats \
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

# check_outcome ALLOWED_TWICE: no URL printed twice beyond ALLOWED_TWICE,
# every distinct URL printed but for false positives within the rate
check_outcome() {
	local allowed=$1 d=$PD_TMP n twice missing limit
	cat "$d"/out.? | sort >"$d/all"
	twice=$(uniq -d "$d/all" | wc -l)
	uniq "$d/all" >"$d/printed"
	missing=$(comm -23 "$d/distinct" "$d/printed" | wc -l)
	[ "$(comm -13 "$d/distinct" "$d/printed" | wc -l)" = 0 ] || fail "printed URLs that were never given"
	n=$(wc -l <"$d/distinct")
	# false positives: the rate asked (1e-3) at most, with room for chance
	# (Poisson: mean 60 here; 3x is far out of reach by chance alone)
	limit=$(awk -v n="$n" 'BEGIN { printf "%d", 3 * n * 1e-3 + 5 }')
	echo "distinct $n, printed twice $twice (allowed $allowed), never printed $missing (limit $limit)"
	[ "$twice" -le "$allowed" ] || fail "$twice URLs printed by two crawlers (allowed $allowed)"
	[ "$missing" -le "$limit" ] || fail "$missing URLs never printed (false positives at most $limit)"
}

case_plain() {
	local d=$PD_TMP/plain out rc=0
	trap rd_stop_all EXIT
	rd_start "$d" 26400 || fail "redis-server"
	local R=(--redis 127.0.0.1:26400)
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
	[ -z "$(rd_cli 26400 get none:meta)" ] || fail "--check left a filter behind"
	# unreachable: exit 3, a message that says so, nothing printed
	rd_kill 26400
	rc=0
	out=$(printf 'http://example.com/q\n' | "$PD_BIN" urlseen "${R[@]}" 2>"$d/err") || rc=$?
	expect_eq "$rc" 3 "exit status with the server down"
	expect_eq "$out" "" "output with the server down"
	grep -q "cannot reach Redis at 127.0.0.1:26400" "$d/err" || fail "message: $(cat "$d/err")"
	rc=0
	"$PD_BIN" urlseen --redis localhost 2>"$d/err" </dev/null || rc=$?
	expect_eq "$rc" 2 "a malformed --redis: a usage error"
}

case_journal() {
	local d=$PD_TMP/journal i pid
	trap rd_stop_all EXIT
	rd_start "$d" 26401 || fail "redis-server"
	local R=(--redis 127.0.0.1:26401 --journal "$d/j")
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
	rd_cluster "$PD_TMP/cl" 26410 26411 26412 26413 26414 26415 || fail "cluster"
	race3 127.0.0.1:26410
	wait_race || fail "a crawler failed"
	check_outcome 0
	local splits
	splits=$(sum_stat filter_splits)
	echo "splits: $splits, stray: $(sum_stat filter_stray)"
	[ "$splits" -gt 0 ] || fail "no leaf split: the case does not test growth"
	[ "$(sum_stat redis_lost)" = 0 ] || fail "URLs lost without a fault"
}

case_failover() {
	trap rd_stop_all EXIT
	rd_cluster "$PD_TMP/cl" 26420 26421 26422 26423 26424 26425 || fail "cluster"
	local victim x alive=0
	victim=$(rd_primaries 26420 | tail -1)
	race3 127.0.0.1:26420
	sleep 1.5
	for x in a b c; do kill -0 "$(cat "$PD_TMP/pid.$x")" 2>/dev/null && alive=$((alive + 1)); done
	[ $alive -gt 0 ] || fail "the crawlers were done before the fault"
	echo "killing primary $victim with $alive crawlers running"
	rd_kill "$victim"
	wait_race || fail "a crawler did not survive the failover"
	local lost
	lost=$(sum_stat redis_lost)
	echo "URLs printed without an answer: $lost"
	rd_primaries 26420 | grep -qx "$victim" && fail "no failover happened"
	# printed twice: those reported lost, and what the killed primary had
	# acknowledged but not passed on (at most the batches in flight on it:
	# three crawlers' batches)
	check_outcome $((lost + 3 * 256))
}

case_reshard() {
	trap rd_stop_all EXIT
	rd_cluster "$PD_TMP/cl" 26430 26431 26432 26433 26434 26435 || fail "cluster"
	local from to
	from=$(rd_cli 26430 cluster nodes | awk '$3 ~ /master/ && $9 ~ /^0-/ { print $1 }')
	to=$(rd_cli 26430 cluster nodes | awk '$3 ~ /master/ && $9 !~ /^0-/ { print $1; exit }')
	[ -n "$from" ] && [ -n "$to" ] || fail "cluster nodes: $(rd_cli 26430 cluster nodes)"
	SLOW=0.3
	race3 127.0.0.1:26430
	sleep 1
	# one leaf's slot half-way between two primaries: the key moved, the
	# slot not yet, so its old owner answers ASK
	local key=urlseen:0:0 slot src dst srcid dstid p
	slot=$(rd_cli 26430 cluster keyslot "$key")
	src=$(redis-cli -c -h 127.0.0.1 -p 26430 cluster nodes | awk -v s="$slot" '$3 ~ /master/ {
		for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1]
			if (s >= r[1] && s <= r[2]) { split($2, a, "[:@]"); print a[2] } } }')
	dst=$(rd_primaries 26430 | grep -vx "$src" | head -1)
	srcid=$(rd_cli "$src" cluster myid) dstid=$(rd_cli "$dst" cluster myid)
	rd_cli "$dst" cluster setslot "$slot" importing "$srcid" >/dev/null
	rd_cli "$src" cluster setslot "$slot" migrating "$dstid" >/dev/null
	rd_cli "$src" migrate 127.0.0.1 "$dst" "$key" 0 5000 | grep -q OK || fail "MIGRATE $key"
	sleep 1
	for p in $(rd_primaries 26430); do rd_cli "$p" cluster setslot "$slot" node "$dstid" >/dev/null; done
	redis-cli --cluster reshard 127.0.0.1:26430 --cluster-from "$from" --cluster-to "$to" \
		--cluster-slots 3000 --cluster-yes >"$PD_TMP/reshard.log" 2>&1 ||
		{ tail "$PD_TMP/reshard.log"; fail "reshard"; }
	wait_race || fail "a crawler failed during the reshard"
	echo "MOVED $(sum_stat redis_moved), ASK $(sum_stat redis_ask), lost $(sum_stat redis_lost)"
	[ "$(sum_stat redis_moved)" -gt 0 ] || fail "no MOVED met: the reshard came too late"
	[ "$(sum_stat redis_ask)" -gt 0 ] || fail "no ASK met"
	[ "$(sum_stat redis_lost)" = 0 ] || fail "URLs lost without a fault"
	check_outcome 0
	rd_wait_ok 26430 26431 26432 26433 26434 26435 || fail "cluster not ok after the reshard"
}

pd_case plain
pd_case journal
pd_case race
pd_case failover
pd_case reshard
pd_finish
