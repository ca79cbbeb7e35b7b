# tests/redis_lib.sh - Redis servers and clusters for the tests and the
# benchmark of `pagededup urlseen --redis` (sourced by bash scripts).
#
# Every server is started here, on 127.0.0.1, with its files in a directory
# of the caller's, and stopped by rd_stop_all (call it from an EXIT trap:
# the servers go also when a test fails). Ports are the caller's choice,
# away from Redis's default 6379; a cluster node also uses PORT+10000 (the
# cluster bus).
#
#   rd_start DIR PORT [cluster]   start a server (a cluster node with "cluster")
#   rd_cluster DIR PORT...        six ports: 3 primaries + 3 replicas, made
#                                 with redis-cli --cluster create, waited for
#   rd_kill PORT                  SIGKILL one server (a crash)
#   rd_stop_all                   stop every server started here
#   rd_cli PORT ARGS...           redis-cli on that server
#   rd_role PORT                  master / slave
#   rd_used_memory PORT           INFO memory's used_memory

RD_PIDS=()
RD_PORTS=()
RD_NODE_TIMEOUT=${RD_NODE_TIMEOUT:-1000}

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
	local args=(--port "$port" --bind 127.0.0.1 --dir "$dir/$port" --save "" --appendonly no
		--daemonize no --logfile "$dir/$port/log" --protected-mode no)
	if [ "$mode" = cluster ]; then
		args+=(--cluster-enabled yes --cluster-config-file "$dir/$port/nodes.conf"
			--cluster-node-timeout "$RD_NODE_TIMEOUT")
	fi
	# A cluster node also binds PORT+10000, inside the kernel's ephemeral
	# range: an outgoing connection may hold it for a moment, and the
	# server then exits at once. Start it again a few times before failing.
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

rd_stop_all() {
	local pid
	for pid in "${RD_PIDS[@]}"; do
		kill "$pid" 2>/dev/null
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
		addrs+=("127.0.0.1:$p")
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
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
