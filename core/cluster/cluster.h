/* cluster.h - a small Redis Cluster client over hiredis 0.14 (which has no
 * cluster support of its own), for what pagededup keeps on Redis: the
 * URL-seen filter shared by crawlers on many hosts (urlseen/rfilter.h),
 * later the page index. A plain Redis server (cluster support disabled)
 * works too: every slot is then that server's.
 *
 * What it does:
 *   - the slot map, from CLUSTER SLOTS asked of the seed nodes (then of any
 *     node it knows), primaries only; a key's slot is CRC16 (XMODEM) of the
 *     key, or of its hash tag (the part between the first '{' and the next
 *     '}', when not empty), mod 16384 (cluster_slot);
 *   - batches: the caller formats its commands (cluster_buf_*, RESP), each
 *     on one key's slot; cluster_exec groups them by node, writes each
 *     node's commands as one pipeline on that node's connection, and has
 *     every node in flight at once (one poll() loop over all connections);
 *   - redirections and refusals: MOVED (the slot's new owner is used at
 *     once and the map is asked for again before the next round), ASK
 *     (ASKING then the command, on the node named, once), TRYAGAIN,
 *     CLUSTERDOWN, LOADING and MASTERDOWN (the command again after a
 *     backoff that doubles from backoff_min_ms to backoff_max_ms), a node
 *     refusing connections (the map is asked for again: after a failover it
 *     names the promoted replica). All of this within retry_ms of the call;
 *   - timeouts: connect_ms to connect, timeout_ms without progress on a
 *     connection that owes replies.
 *
 * What a command's outcome can be (cluster_cmd.status) is what a caller of
 * a non-idempotent command must know, so the client never hides it:
 *    0             replied (reply holds the answer, an error reply too);
 *   -ETIMEDOUT     sent, then no reply within timeout_ms: it may have run;
 *   -ECONNRESET    sent, then the connection broke: it may have run;
 *   -EHOSTUNREACH  not run: no node took it within retry_ms (the cluster is
 *                  unreachable or down), or it was redirected more than
 *                  max_redirects times.
 * A command is resent only when it is known not to have run: it was
 * refused (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, ...) or never left this
 * process (its bytes were still in the output buffer when the connection
 * failed). A command that may have run is never sent twice.
 *
 * One struct cluster is for one thread at a time. Errors of the calls
 * themselves are negative errno values, with a sentence for people in
 * cluster_error().
 */
#ifndef PD_CLUSTER_H
#define PD_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#define CLUSTER_SLOTS 16384

struct cluster_opts {
	int connect_ms;     /* connecting to a node; default 1000 */
	int timeout_ms;     /* a connection owing replies makes no progress; default 5000 */
	int retry_ms;       /* the most a call waits for the cluster (failover, resharding,
			     * restarts) before giving up on a command; default 30000 */
	int backoff_min_ms; /* first wait after TRYAGAIN, CLUSTERDOWN, a dead node; default 10 */
	int backoff_max_ms; /* longest wait; default 500 */
	int max_redirects;  /* MOVED/ASK per command and call; default 16 */
};
void cluster_opts_default(struct cluster_opts *o);

struct cluster;

/* Connect to the cluster (or plain server) named by seeds, a list of
 * HOST:PORT separated by commas, and read its slot map. -EINVAL for a
 * malformed list, -EHOSTUNREACH when no seed answers, -EPROTO when the
 * answer makes no sense, -ENOMEM; *out is NULL then, and err (errlen
 * bytes, may be NULL) says what happened. */
int cluster_connect(const char *seeds, const struct cluster_opts *o, struct cluster **out,
		    char *err, size_t errlen);
void cluster_close(struct cluster *c);
/* Whether the server is a plain one (no cluster). */
bool cluster_is_plain(const struct cluster *c);
/* The last problem in words (a node failing, the map being refreshed). */
const char *cluster_error(const struct cluster *c);
/* Why the last command that may have run got no reply (-ETIMEDOUT,
 * -ECONNRESET), in words: the node and what happened to its connection;
 * "" while there was none. Later problems (cluster_error) do not
 * overwrite it. */
const char *cluster_lost_error(const struct cluster *c);

/* A key's hash slot. */
uint16_t cluster_slot(const char *key, size_t len);

/* Commands in RESP, appended to one growing buffer. */
struct cluster_buf {
	char *p;
	size_t len, cap;
	bool oom; /* an append failed: the buffer must not be sent */
};
void cluster_buf_reset(struct cluster_buf *b);
void cluster_buf_free(struct cluster_buf *b);
/* Start a command of argc arguments (then exactly argc cluster_buf_arg*). */
void cluster_buf_cmd(struct cluster_buf *b, unsigned argc);
void cluster_buf_arg(struct cluster_buf *b, const void *s, size_t len);
void cluster_buf_arg_str(struct cluster_buf *b, const char *s);
void cluster_buf_arg_u64(struct cluster_buf *b, uint64_t v);
/* Make room for n more bytes at b->p + b->len (for callers that write
 * their arguments themselves, then advance b->len); false when out of
 * memory (b->oom is set). */
bool cluster_buf_room(struct cluster_buf *b, size_t n);

struct cluster_cmd {
	size_t off, len;    /* its bytes in the buffer passed to cluster_exec */
	uint16_t slot;      /* the slot of its key */
	int status;         /* out: see the top of this file */
	redisReply *reply;  /* out: the reply when status is 0; it belongs to the cluster
			     * and stays valid until the next cluster_exec or
			     * cluster_command on it (never freeReplyObject it) */
	/* private */
	int ask_node;
	uint8_t redirects;
	bool done;
};

/* Run n commands whose bytes are in buf (cmds[i].off, .len), every node's
 * share as one pipeline, all nodes at once, following the cluster's
 * redirections until each command has an outcome (its status). Returns 0,
 * or -ENOMEM (no command was sent then). Commands on one node run in the
 * order given; across nodes nothing is ordered. */
int cluster_exec(struct cluster *c, const char *buf, struct cluster_cmd *cmds, size_t n);
/* Forget the replies of n commands (set them NULL; their memory goes with
 * the next call). */
void cluster_cmd_free(struct cluster_cmd *cmds, size_t n);

/* One command (argc arguments, as strings) on the slot of key: status as
 * above in *status, the reply returned (NULL unless status is 0; valid
 * until the next call, as for cluster_exec). */
redisReply *cluster_command(struct cluster *c, const char *key, int *status, unsigned argc,
			    const char *const *argv);

/* Every primary's address ("host:port", up to n of them into addrs, each
 * of addrlen bytes); returns how many there are. */
size_t cluster_primaries(struct cluster *c, char (*addrs)[64], size_t n);

struct cluster_stats {
	uint64_t moved, ask, tryagain, clusterdown, refreshes, reconnects;
	uint64_t lost;      /* commands sent whose replies never came */
	uint64_t unreached; /* commands given up as not run */
};
void cluster_get_stats(const struct cluster *c, struct cluster_stats *st);

#endif
