# tests/redis_lib.sh - Redis servers and clusters for the tests and the
# benchmark of `pagededup urlseen --redis` (sourced by bash scripts).
#
# Every server is started here, on 127.0.0.1, with its files in a directory
# of the caller's, and stopped by rd_stop_all (call it from an EXIT trap:
# the servers go also when a test fails). Ports are the caller's choice,
# away from Redis's default 6379; a cluster node also uses PORT+10000 (the
# cluster bus: take ports below 22768, so that it lies below the kernel's
# ephemeral range, net.ipv4.ip_local_port_range, 32768-60999 by default;
# a port of that range may be held in TIME-WAIT by an earlier outgoing
# connection, and Redis cannot bind it then for a minute). With RD_HOST set to another address of this host (one that
# crawlers in network namespaces reach), servers listen on it as well, and
# cluster nodes announce it and meet each other there.
#
#   rd_start DIR PORT [cluster]   start a server (a cluster node with "cluster")
#   rd_cluster DIR PORT...        six ports: 3 primaries + 3 replicas, made
#                                 with redis-cli --cluster create, waited for
#                                 (RD_REPLICAS=0: three ports, primaries only)
#   rd_kill PORT                  SIGKILL one server (a crash)
#   rd_signal PORT SIGNAL         send a signal to one server (STOP, CONT)
#   rd_stop_all                   stop every server started here
#   rd_cli PORT ARGS...           redis-cli on that server
#   rd_role PORT                  master / slave
#   rd_used_memory PORT           INFO memory's used_memory
#   rd_unaccounted LIST:OUT:ERR...  URLs printed by several crawlers beyond
#                                 what their reported lost answers cover

RD_PIDS=()
RD_PORTS=()
RD_NODE_TIMEOUT=${RD_NODE_TIMEOUT:-1000}
RD_HOST=${RD_HOST:-127.0.0.1}

rd_cli() { local p=$1; shift; redis-cli -h 127.0.0.1 -p "$p" "$@"; }

rd_wait_ping() {
	local p=$1 i
	for i in $(seq 1 600); do
		[ "$(rd_cli "$p" ping 2>/dev/null)" = PONG ] && return 0
		sleep 0.05
	done
	echo "redis on port $p does not answer" >&2
	return 1
}

rd_start() {
	local dir=$1 port=$2 mode=${3:-plain} pid
	mkdir -p "$dir/$port"
	local bind=127.0.0.1
	[ "$RD_HOST" = 127.0.0.1 ] || bind="$RD_HOST 127.0.0.1"
	local args=(--port "$port" --bind $bind --dir "$dir/$port" --save "" --appendonly no
		--daemonize no --logfile "$dir/$port/log" --protected-mode no)
	if [ "$mode" = cluster ]; then
		args+=(--cluster-enabled yes --cluster-config-file "$dir/$port/nodes.conf"
			--cluster-node-timeout "$RD_NODE_TIMEOUT")
		[ "$RD_HOST" = 127.0.0.1 ] || args+=(--cluster-announce-ip "$RD_HOST")
	fi
	# A cluster node also binds PORT+10000; should that port be held (by
	# an outgoing connection, where it lies in the ephemeral range), the
	# server exits at once. Start it again a few times before failing.
	local try i
	for try in 1 2 3 4 5; do
		redis-server "${args[@]}" >/dev/null 2>&1 &
		pid=$!
		for i in $(seq 1 200); do
			[ "$(rd_cli "$port" ping 2>/dev/null)" = PONG ] && break
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -0 "$pid" 2>/dev/null && break
		wait "$pid" 2>/dev/null
		sleep 1
	done
	RD_PIDS+=("$pid")
	RD_PORTS+=("$port")
	rd_wait_ping "$port"
}

rd_kill() {
	local port=$1 i
	for i in "${!RD_PORTS[@]}"; do
		if [ "${RD_PORTS[$i]}" = "$port" ]; then
			kill -9 "${RD_PIDS[$i]}" 2>/dev/null
			wait "${RD_PIDS[$i]}" 2>/dev/null
		fi
	done
	return 0
}

rd_signal() {
	local port=$1 sig=$2 i
	for i in "${!RD_PORTS[@]}"; do
		[ "${RD_PORTS[$i]}" = "$port" ] && kill -"$sig" "${RD_PIDS[$i]}" 2>/dev/null
	done
	return 0
}

rd_stop_all() {
	local pid
	for pid in "${RD_PIDS[@]}"; do
		kill "$pid" 2>/dev/null
		kill -CONT "$pid" 2>/dev/null # one left stopped would never end
	done
	for pid in "${RD_PIDS[@]}"; do
		wait "$pid" 2>/dev/null
	done
	RD_PIDS=()
	RD_PORTS=()
}

rd_role() { rd_cli "$1" role 2>/dev/null | head -1; }

rd_used_memory() { rd_cli "$1" info memory | tr -d '\r' | sed -n 's/^used_memory://p'; }

# rd_wait_ok PORT...: every node says cluster_state:ok and agrees on the slots
rd_wait_ok() {
	local i p ok
	for i in $(seq 1 200); do
		ok=1
		for p in "$@"; do
			rd_cli "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || { ok=0; break; }
		done
		if [ $ok = 1 ] && redis-cli --cluster check "127.0.0.1:$1" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	echo "cluster on $* is not ok" >&2
	return 1
}

rd_cluster() {
	local dir=$1 p addrs=()
	shift
	for p in "$@"; do
		rd_start "$dir" "$p" cluster || return 1
		addrs+=("$RD_HOST:$p")
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas "${RD_REPLICAS:-1}" --cluster-yes \
		>"$dir/create.log" 2>&1 || { cat "$dir/create.log" >&2; return 1; }
	rd_wait_ok "$@" && rd_wait_replicas "$@"
}

# rd_wait_replicas PORT...: every replica among them has its link to its
# primary up (a replica that never synced cannot be promoted)
rd_wait_replicas() {
	local i p ok
	for i in $(seq 1 200); do
		ok=1
		for p in "$@"; do
			if rd_cli "$p" info replication | grep -q '^role:slave'; then
				rd_cli "$p" info replication | grep -q '^master_link_status:up' || { ok=0; break; }
			fi
		done
		[ $ok = 1 ] && return 0
		sleep 0.1
	done
	echo "replicas of $* not in sync" >&2
	return 1
}

# rd_primaries PORT: the ports of the cluster's primaries, as PORT sees them
rd_primaries() {
	rd_cli "$1" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/ { split($2, a, "[:@]"); print a[2] }' | sort -n
}

# rd_unaccounted LIST:OUT:ERR...: for crawlers that were each given LIST
# (URLs in normal form, one a line), printed OUT and wrote their --stats and
# reports to ERR, prints "twice T extra E covered C unaccounted U": T URLs
# were printed by more than one crawler, E prints beyond the first of each;
# C of those E lie in a batch the crawler that printed it reported as
# printed without an answer ("... lines A-B printed as new without an
# answer ..." on ERR); U = E - C is what no lost answer accounts for (only
# the first print of a URL can be an answer "new"). Reports name batches,
# not lines, so a batch reported lost covers all its lines: C is an upper
# bound and U a lower one, exact when nothing was lost (C = 0).
rd_unaccounted() {
	local t spec outs=()
	t=$(mktemp) || return 1
	for spec in "$@"; do outs+=("$(echo "$spec" | cut -d: -f2)"); done
	cat "${outs[@]}" | sort | uniq -d >"$t"
	awk -v dups="$t" 'BEGIN {
		while ((getline l < dups) > 0) D[l] = 1
		for (c = 1; c < ARGC; c++) {
			split(ARGV[c], f, ":")
			nr = 0
			while ((getline l < f[3]) > 0)
				if (match(l, / lines [0-9]+-[0-9]+ printed as new without an answer/)) {
					r = substr(l, RSTART + 7, RLENGTH - 7)
					split(r, ab, /[- ]/)
					nr++; lo[nr] = ab[1] + 0; hi[nr] = ab[2] + 0
				}
			i = 1; n = 0
			while ((getline l < f[1]) > 0) {
				n++
				while (i <= nr && hi[i] < n) i++
				if (i <= nr && lo[i] <= n && (l in D)) lost[c, l] = 1
			}
			while ((getline l < f[2]) > 0)
				if (l in D) { m[l]++; if ((c, l) in lost) cov[l]++ }
		}
		for (u in m) {
			t++; e += m[u] - 1
			cv += (cov[u] < m[u] - 1 ? cov[u] : m[u] - 1)
		}
		printf "twice %d extra %d covered %d unaccounted %d\n", t, e, cv, e - cv
		exit
	}' "$@"
	rm -f "$t"
}
