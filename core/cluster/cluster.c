/* cluster.c - the Redis Cluster client (cluster.h).
 *
 * A call (cluster_exec) works in rounds. In each round every command that
 * still wants an outcome is appended to the output buffer of the node that
 * owns its slot (or the node an ASK named, with ASKING before it), then one
 * poll() loop writes all those buffers and reads all the replies, every
 * node at once. Replies come back in order on a connection, so the i-th
 * reply read from a node answers the i-th command queued on it. A refusal
 * (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN) sends the
 * command to the next round; so does a node that cannot be reached, for the
 * commands whose bytes never left this process (a round's bytes for a node
 * are written from a buffer of its own, so how far the writes got is
 * known exactly; hiredis is used to connect and to parse replies). Between rounds the map is
 * asked for again when a redirection or a dead node said it changed, and
 * the call waits (doubling backoff) when the cluster asked it to. A command
 * that may have run and has no reply gets -ETIMEDOUT or -ECONNRESET and is
 * never sent again: for BITFIELD SET, a second send would answer "seen"
 * for what the first recorded.
 */
#include "cluster.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>


#define NO_NODE 0xFFFF
#define MAX_NODES 1024

struct qent {
	size_t cmd;       /* index in the call's commands */
	size_t end;       /* bytes queued on the node up to the end of this command */
	bool asking;      /* the ASKING before it */
};

struct node {
	char host[48];
	int port;
	redisContext *ctx;
	/* this round */
	struct qent *q;
	size_t nq, qcap, got;
	/* this round's bytes for the node, written from woff on (written
	 * here, not through hiredis's output buffer, which moves what is left
	 * to its front after every write: quadratic in a large pipeline) */
	char *w;
	size_t wlen, wcap, woff;
	double last;      /* time of the last progress */
};

/* Replies of a call are parsed into this arena (hiredis's own functions
 * make an allocation per element: a BITFIELD answer of 15 integers was a
 * quarter of a client's time) and live until the next call. */
struct ablock {
	struct ablock *next;
	size_t used, cap;
	char data[];
};

struct cluster {
	struct cluster_opts o;
	struct ablock *arena;
	redisReplyObjectFunctions arena_fn;
	struct node *nodes;
	size_t nnodes;
	size_t nseeds;    /* the first nseeds nodes are the seeds */
	uint16_t slot_node[CLUSTER_SLOTS];
	bool plain;
	char err[256];
	char lost_err[256]; /* why the last command that may have run had no reply */
	struct cluster_stats st;
};

void cluster_opts_default(struct cluster_opts *o)
{
	o->connect_ms = 1000;
	o->timeout_ms = 5000;
	o->retry_ms = 30000;
	o->backoff_min_ms = 10;
	o->backoff_max_ms = 500;
	o->max_redirects = 16;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void set_err(struct cluster *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->err, sizeof c->err, fmt, ap);
	va_end(ap);
}

const char *cluster_error(const struct cluster *c)
{
	return c->err;
}

const char *cluster_lost_error(const struct cluster *c)
{
	return c->lost_err;
}

bool cluster_is_plain(const struct cluster *c)
{
	return c->plain;
}

void cluster_get_stats(const struct cluster *c, struct cluster_stats *st)
{
	*st = c->st;
}

/* CRC16-CCITT (XMODEM), the cluster's key hash, a byte at a time through
 * a table made on first use (every command of a batch hashes its key). */
static uint16_t crc_table[256];

static void crc_table_init(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint16_t crc = (uint16_t)(i << 8);
		for (int b = 0; b < 8; b++)
			crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
		crc_table[i] = crc;
	}
}

static uint16_t crc16(const char *s, size_t len)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, crc_table_init);
	uint16_t crc = 0;
	for (size_t i = 0; i < len; i++)
		crc = (uint16_t)((crc << 8) ^ crc_table[((crc >> 8) ^ (unsigned char)s[i]) & 0xFF]);
	return crc;
}

uint16_t cluster_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);
	if (open) {
		size_t from = (size_t)(open - key) + 1;
		const char *close = memchr(key + from, '}', len - from);
		if (close && close > key + from)
			return crc16(key + from, (size_t)(close - key - from)) & (CLUSTER_SLOTS - 1);
	}
	return crc16(key, len) & (CLUSTER_SLOTS - 1);
}

/* ---- RESP formatting ---- */

bool cluster_buf_room(struct cluster_buf *b, size_t len)
{
	if (b->oom)
		return false;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + len)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return false;
		}
		b->p = p;
		b->cap = cap;
	}
	return true;
}

static void buf_put(struct cluster_buf *b, const void *s, size_t len)
{
	if (!cluster_buf_room(b, len))
		return;
	memcpy(b->p + b->len, s, len);
	b->len += len;
}

/* "<c><digits>\r\n" */
static void buf_head(struct cluster_buf *b, char c, uint64_t v)
{
	char t[24];
	int i = (int)sizeof t;
	t[--i] = '\n';
	t[--i] = '\r';
	do {
		t[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	t[--i] = c;
	buf_put(b, t + i, sizeof t - (size_t)i);
}

void cluster_buf_reset(struct cluster_buf *b)
{
	b->len = 0;
	b->oom = false;
}

void cluster_buf_free(struct cluster_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

void cluster_buf_cmd(struct cluster_buf *b, unsigned argc)
{
	buf_head(b, '*', argc);
}

void cluster_buf_arg(struct cluster_buf *b, const void *s, size_t len)
{
	buf_head(b, '$', len);
	buf_put(b, s, len);
	buf_put(b, "\r\n", 2);
}

void cluster_buf_arg_str(struct cluster_buf *b, const char *s)
{
	cluster_buf_arg(b, s, strlen(s));
}

void cluster_buf_arg_u64(struct cluster_buf *b, uint64_t v)
{
	char t[24];
	int i = (int)sizeof t;
	do {
		t[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	cluster_buf_arg(b, t + i, sizeof t - (size_t)i);
}

/* ---- the reply arena ---- */

static void *arena_alloc(struct cluster *c, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	struct ablock *b = c->arena;
	if (!b || b->used + n > b->cap) {
		size_t cap = n > (256u << 10) ? n : (256u << 10);
		struct ablock *nb = malloc(sizeof *nb + cap);
		if (!nb)
			return NULL;
		nb->next = b;
		nb->used = 0;
		nb->cap = cap;
		c->arena = b = nb;
	}
	void *p = b->data + b->used;
	b->used += n;
	return p;
}

/* Keep one block (the newest), empty. */
static void arena_reset(struct cluster *c)
{
	struct ablock *b = c->arena;
	if (!b)
		return;
	struct ablock *rest = b->next;
	while (rest) {
		struct ablock *n = rest->next;
		free(rest);
		rest = n;
	}
	b->next = NULL;
	b->used = 0;
}

static redisReply *arena_reply(const redisReadTask *t, int type)
{
	struct cluster *c = t->privdata;
	redisReply *r = arena_alloc(c, sizeof *r);
	if (!r)
		return NULL;
	memset(r, 0, sizeof *r);
	r->type = type;
	if (t->parent) {
		redisReply *parent = t->parent->obj;
		parent->element[t->idx] = r;
	}
	return r;
}

static void *arena_string(const redisReadTask *t, char *str, size_t len)
{
	redisReply *r = arena_reply(t, t->type);
	if (!r)
		return NULL;
	char *s = arena_alloc(t->privdata, len + 1);
	if (!s)
		return NULL;
	memcpy(s, str, len);
	s[len] = 0;
	r->str = s;
	r->len = len;
	return r;
}

static void *arena_array(const redisReadTask *t, int elements)
{
	redisReply *r = arena_reply(t, REDIS_REPLY_ARRAY);
	if (!r)
		return NULL;
	if (elements > 0) {
		r->element = arena_alloc(t->privdata, (size_t)elements * sizeof *r->element);
		if (!r->element)
			return NULL;
		memset(r->element, 0, (size_t)elements * sizeof *r->element);
	}
	r->elements = (size_t)(elements > 0 ? elements : 0);
	return r;
}

static void *arena_integer(const redisReadTask *t, long long v)
{
	redisReply *r = arena_reply(t, REDIS_REPLY_INTEGER);
	if (r)
		r->integer = v;
	return r;
}

static void *arena_nil(const redisReadTask *t)
{
	return arena_reply(t, REDIS_REPLY_NIL);
}

static void arena_free_object(void *r)
{
	(void)r; /* the arena goes as a whole */
}

/* ---- nodes ---- */

static int parse_addr(const char *s, size_t len, char *host, size_t hostlen, int *port)
{
	const char *colon = NULL;
	for (size_t i = 0; i < len; i++)
		if (s[i] == ':')
			colon = s + i;
	if (!colon || colon == s || (size_t)(colon - s) >= hostlen)
		return -EINVAL;
	size_t hl = (size_t)(colon - s);
	char *end;
	char pbuf[8];
	size_t pl = len - hl - 1;
	if (pl == 0 || pl >= sizeof pbuf)
		return -EINVAL;
	memcpy(pbuf, colon + 1, pl);
	pbuf[pl] = 0;
	long p = strtol(pbuf, &end, 10);
	if (*end || p <= 0 || p > 65535)
		return -EINVAL;
	memcpy(host, s, hl);
	host[hl] = 0;
	*port = (int)p;
	return 0;
}

/* The node at host:port, added if new; NO_NODE when the table is full. */
static uint16_t node_get(struct cluster *c, const char *host, int port)
{
	for (size_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].port == port && !strcmp(c->nodes[i].host, host))
			return (uint16_t)i;
	if (c->nnodes >= MAX_NODES || strlen(host) >= sizeof c->nodes[0].host)
		return NO_NODE;
	if (c->nnodes % 16 == 0) {
		struct node *n = realloc(c->nodes, (c->nnodes + 16) * sizeof *n);
		if (!n)
			return NO_NODE;
		c->nodes = n;
	}
	struct node *nd = &c->nodes[c->nnodes];
	memset(nd, 0, sizeof *nd);
	snprintf(nd->host, sizeof nd->host, "%s", host);
	nd->port = port;
	return (uint16_t)c->nnodes++;
}

static void node_drop(struct cluster *c, struct node *nd, const char *why)
{
	if (!nd->ctx)
		return;
	set_err(c, "%s:%d: %s", nd->host, nd->port, why);
	redisFree(nd->ctx);
	nd->ctx = NULL;
}

/* Connect (non-blocking, within connect_ms). */
static int node_connect(struct cluster *c, struct node *nd)
{
	if (nd->ctx)
		return 0;
	redisContext *ctx = redisConnectNonBlock(nd->host, nd->port);
	if (!ctx)
		return -ENOMEM;
	if (ctx->err) {
		set_err(c, "%s:%d: %s", nd->host, nd->port, ctx->errstr);
		redisFree(ctx);
		return -EHOSTUNREACH;
	}
	struct pollfd p = { .fd = ctx->fd, .events = POLLOUT };
	int r;
	do
		r = poll(&p, 1, c->o.connect_ms);
	while (r < 0 && errno == EINTR);
	int soerr = 0;
	socklen_t sl = sizeof soerr;
	if (r <= 0 || getsockopt(ctx->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr) {
		set_err(c, "%s:%d: %s", nd->host, nd->port,
			r == 0 ? "connection timed out" : strerror(soerr ? soerr : errno));
		redisFree(ctx);
		return -EHOSTUNREACH;
	}
	ctx->flags |= REDIS_CONNECTED;
	ctx->reader->fn = &c->arena_fn;
	ctx->reader->privdata = c;
	nd->ctx = ctx;
	c->st.reconnects++;
	return 0;
}

/* Queue n bytes on a node's connection. */
static int node_append(struct node *nd, const char *s, size_t len, size_t cmd, bool asking)
{
	if (nd->wlen + len > nd->wcap) {
		size_t cap = nd->wcap ? nd->wcap : 65536;
		while (cap < nd->wlen + len)
			cap *= 2;
		char *w = realloc(nd->w, cap);
		if (!w)
			return -ENOMEM;
		nd->w = w;
		nd->wcap = cap;
	}
	if (nd->nq == nd->qcap) {
		size_t cap = nd->qcap ? 2 * nd->qcap : 256;
		struct qent *q = realloc(nd->q, cap * sizeof *q);
		if (!q)
			return -ENOMEM;
		nd->q = q;
		nd->qcap = cap;
	}
	memcpy(nd->w + nd->wlen, s, len);
	nd->wlen += len;
	nd->q[nd->nq++] = (struct qent){ .cmd = cmd, .end = nd->wlen, .asking = asking };
	return 0;
}

/* Write what the socket takes of the node's bytes: 0, or -errno. */
static int node_write(struct node *nd)
{
	while (nd->woff < nd->wlen) {
		ssize_t w = write(nd->ctx->fd, nd->w + nd->woff, nd->wlen - nd->woff);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		nd->woff += (size_t)w;
	}
	return 0;
}

/* ---- the slot map ---- */

static bool is_err(const redisReply *r, const char *prefix)
{
	return r->type == REDIS_REPLY_ERROR && !strncmp(r->str, prefix, strlen(prefix));
}

/* One command on one node, waited for (setup and the map). */
static redisReply *node_roundtrip(struct cluster *c, struct node *nd, const char *cmd, size_t len)
{
	if (node_connect(c, nd) != 0)
		return NULL;
	if (redisAppendFormattedCommand(nd->ctx, cmd, len) != REDIS_OK)
		return NULL;
	double deadline = now_s() + c->o.timeout_ms / 1000.0;
	int done = 0;
	void *reply = NULL;
	for (;;) {
		if (!done && redisBufferWrite(nd->ctx, &done) != REDIS_OK)
			break;
		if (redisGetReplyFromReader(nd->ctx, &reply) != REDIS_OK)
			break;
		if (reply)
			return reply;
		double left = deadline - now_s();
		if (left <= 0) {
			node_drop(c, nd, "no answer in time");
			return NULL;
		}
		struct pollfd p = { .fd = nd->ctx->fd, .events = (short)(POLLIN | (done ? 0 : POLLOUT)) };
		if (poll(&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			break;
		if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && redisBufferRead(nd->ctx) != REDIS_OK)
			break;
	}
	node_drop(c, nd, nd->ctx->errstr[0] ? nd->ctx->errstr : "connection failed");
	return NULL;
}

/* Fill the map from a CLUSTER SLOTS reply; false if it is not one. */
static bool map_from_reply(struct cluster *c, const struct node *asked, const redisReply *r)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements == 0)
		return false;
	uint16_t map[CLUSTER_SLOTS];
	for (size_t s = 0; s < CLUSTER_SLOTS; s++)
		map[s] = NO_NODE;
	char host[48];
	snprintf(host, sizeof host, "%s", asked->host);
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];
		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->type != REDIS_REPLY_INTEGER ||
		    e->element[1]->type != REDIS_REPLY_INTEGER ||
		    e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
			return false;
		const redisReply *m = e->element[2];
		long long from = e->element[0]->integer, to = e->element[1]->integer;
		if (from < 0 || to >= CLUSTER_SLOTS || from > to || m->element[0]->type != REDIS_REPLY_STRING ||
		    m->element[1]->type != REDIS_REPLY_INTEGER)
			return false;
		/* an empty host means "the address you asked" */
		const char *h = m->element[0]->len ? m->element[0]->str : host;
		uint16_t nd = node_get(c, h, (int)m->element[1]->integer);
		if (nd == NO_NODE)
			return false;
		for (long long s = from; s <= to; s++)
			map[s] = nd;
	}
	memcpy(c->slot_node, map, sizeof map);
	return true;
}

/* Ask the nodes, seeds first, for the map; the first good answer wins. */
static int map_refresh(struct cluster *c)
{
	static const char cmd[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";
	c->st.refreshes++;
	if (c->plain)
		return 0;
	for (size_t i = 0; i < c->nnodes; i++) {
		redisReply *r = node_roundtrip(c, &c->nodes[i], cmd, sizeof cmd - 1);
		if (!r)
			continue;
		if (is_err(r, "ERR This instance has cluster support disabled")) {
			c->plain = true;
			for (size_t s = 0; s < CLUSTER_SLOTS; s++)
				c->slot_node[s] = (uint16_t)i;
			return 0;
		}
		bool ok = map_from_reply(c, &c->nodes[i], r);
		if (!ok)
			set_err(c, "%s:%d: CLUSTER SLOTS: %s", c->nodes[i].host, c->nodes[i].port,
				r->type == REDIS_REPLY_ERROR ? r->str : "an answer that is not a slot map");
		if (ok)
			return 0;
	}
	return -EHOSTUNREACH;
}

int cluster_connect(const char *seeds, const struct cluster_opts *o, struct cluster **out,
		    char *err, size_t errlen)
{
	struct cluster *c = calloc(1, sizeof *c);
	int rc = 0;
	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->arena_fn = (redisReplyObjectFunctions){ arena_string, arena_array, arena_integer, arena_nil,
						   arena_free_object };
	if (o)
		c->o = *o;
	else
		cluster_opts_default(&c->o);
	for (const char *s = seeds; *s;) {
		const char *e = strchr(s, ',');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		char host[48];
		int port;
		if (parse_addr(s, len, host, sizeof host, &port) != 0) {
			set_err(c, "'%.*s' is not HOST:PORT", (int)len, s);
			rc = -EINVAL;
			goto out;
		}
		if (node_get(c, host, port) == NO_NODE) {
			rc = -ENOMEM;
			goto out;
		}
		s += len + (e != NULL);
	}
	c->nseeds = c->nnodes;
	if (c->nseeds == 0) {
		set_err(c, "no HOST:PORT given");
		rc = -EINVAL;
		goto out;
	}
	for (size_t s = 0; s < CLUSTER_SLOTS; s++)
		c->slot_node[s] = NO_NODE;
	if ((rc = map_refresh(c)) != 0) {
		char first[256];
		snprintf(first, sizeof first, "%s", c->err);
		set_err(c, "no Redis node answered (%s)", first);
		goto out;
	}
	for (size_t s = 0; s < CLUSTER_SLOTS; s++)
		if (c->slot_node[s] == NO_NODE) {
			/* a cluster not fully covered still serves the slots it has
			 * (cluster-require-full-coverage no); say so, go on */
			set_err(c, "slot %zu has no node", s);
			break;
		}
out:
	if (rc) {
		if (err)
			snprintf(err, errlen, "%s", c->err);
		cluster_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

void cluster_close(struct cluster *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nnodes; i++) {
		if (c->nodes[i].ctx)
			redisFree(c->nodes[i].ctx);
		free(c->nodes[i].q);
		free(c->nodes[i].w);
	}
	arena_reset(c);
	free(c->arena);
	free(c->nodes);
	free(c);
}

size_t cluster_primaries(struct cluster *c, char (*addrs)[64], size_t n)
{
	bool seen[MAX_NODES] = { false };
	size_t k = 0;
	for (size_t s = 0; s < CLUSTER_SLOTS; s++) {
		uint16_t nd = c->slot_node[s];
		if (nd == NO_NODE || seen[nd])
			continue;
		seen[nd] = true;
		if (k < n)
			snprintf(addrs[k], 64, "%s:%d", c->nodes[nd].host, c->nodes[nd].port);
		k++;
	}
	return k;
}

/* ---- a call ---- */

struct round {
	bool refresh;   /* the map changed: ask for it before the next round */
	bool backoff;   /* the cluster asked us to wait */
	size_t retry;   /* commands for the next round */
};

/* A command's outcome is final. */
static void cmd_final(struct cluster *c, struct cluster_cmd *cmd, int status, redisReply *r)
{
	cmd->done = true;
	cmd->status = status;
	cmd->reply = r;
	if (status == -ETIMEDOUT || status == -ECONNRESET)
		c->st.lost++;
	else if (status == -EHOSTUNREACH)
		c->st.unreached++;
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK ...": the node named. */
static uint16_t redirect_node(struct cluster *c, const char *msg)
{
	const char *sp = strchr(msg, ' ');
	sp = sp ? strchr(sp + 1, ' ') : NULL;
	if (!sp)
		return NO_NODE;
	char host[48];
	int port;
	if (parse_addr(sp + 1, strlen(sp + 1), host, sizeof host, &port) != 0)
		return NO_NODE;
	return node_get(c, host, port);
}

/* What the reply to cmd says. */
static void handle_reply(struct cluster *c, struct cluster_cmd *cmd, redisReply *r, struct round *rd)
{
	if (r->type == REDIS_REPLY_ERROR) {
		bool moved = is_err(r, "MOVED "), ask = is_err(r, "ASK ");
		if (moved || ask) {
			uint16_t nd = redirect_node(c, r->str);
			if (moved) {
				c->st.moved++;
				if (nd != NO_NODE)
					c->slot_node[cmd->slot] = nd;
				rd->refresh = true;
			} else {
				c->st.ask++;
				cmd->ask_node = nd == NO_NODE ? -1 : nd;
			}
			if (++cmd->redirects > c->o.max_redirects) {
				set_err(c, "slot %u: redirected more than %d times (%s)", cmd->slot,
					c->o.max_redirects, r->str);
				cmd_final(c, cmd, -EHOSTUNREACH, NULL);
				return;
			}
			rd->retry++;
			return;
		}
		bool tryagain = is_err(r, "TRYAGAIN"), down = is_err(r, "CLUSTERDOWN");
		if (tryagain || down || is_err(r, "LOADING") || is_err(r, "MASTERDOWN")) {
			if (tryagain)
				c->st.tryagain++;
			if (down) {
				c->st.clusterdown++;
				rd->refresh = true;
			}
			set_err(c, "slot %u: %s", cmd->slot, r->str);
			rd->backoff = true;
			rd->retry++;
			return;
		}
	}
	cmd_final(c, cmd, 0, r);
}

/* A node's connection failed with its queue partly answered: the commands
 * whose bytes were all still here go to the next round, the others may
 * have run. */
static void node_fail(struct cluster *c, struct node *nd, struct cluster_cmd *cmds, int status,
		      struct round *rd, const char *why)
{
	size_t written = nd->woff;
	size_t start = nd->got ? nd->q[nd->got - 1].end : 0;
	bool lost = false;
	for (size_t i = nd->got; i < nd->nq; i++) {
		const struct qent *e = &nd->q[i];
		if (!e->asking) {
			if (start >= written) {
				rd->retry++;
			} else {
				cmd_final(c, &cmds[e->cmd], status, NULL);
				lost = true;
			}
		}
		start = e->end;
	}
	if (lost)
		snprintf(c->lost_err, sizeof c->lost_err, "%s:%d: %s", nd->host, nd->port, why);
	nd->got = nd->nq;
	node_drop(c, nd, why);
	rd->refresh = true;
	rd->backoff = true;
}

/* Read what a node has for us. */
static void node_read(struct cluster *c, struct node *nd, struct cluster_cmd *cmds, struct round *rd)
{
	nd->last = now_s();
	if (redisBufferRead(nd->ctx) != REDIS_OK) {
		node_fail(c, nd, cmds, -ECONNRESET, rd, nd->ctx->errstr);
		return;
	}
	for (;;) {
		void *reply = NULL;
		if (redisGetReplyFromReader(nd->ctx, &reply) != REDIS_OK) {
			node_fail(c, nd, cmds, -ECONNRESET, rd, nd->ctx->errstr);
			return;
		}
		if (!reply)
			return;
		if (nd->got >= nd->nq) { /* more replies than commands: out of step */
			node_fail(c, nd, cmds, -ECONNRESET, rd, "a reply nothing asked for");
			return;
		}
		const struct qent *e = &nd->q[nd->got++];
		if (!e->asking) /* ASKING's +OK: a refusal shows in the command's own reply */
			handle_reply(c, &cmds[e->cmd], reply, rd);
	}
}

/* Write and read every node's pipeline, all at once, until each is
 * answered or has failed. */
static int flush_nodes(struct cluster *c, struct cluster_cmd *cmds, struct round *rd)
{
	struct pollfd *pf = malloc(c->nnodes * sizeof *pf);
	size_t *which = malloc(c->nnodes * sizeof *which);
	if (!pf || !which) {
		free(pf);
		free(which);
		return -ENOMEM;
	}
	double t = now_s();
	for (size_t i = 0; i < c->nnodes; i++)
		c->nodes[i].last = t;
	for (;;) {
		size_t np = 0;
		double t0 = now_s(), wait = -1;
		for (size_t i = 0; i < c->nnodes; i++) {
			struct node *nd = &c->nodes[i];
			if (!nd->ctx || nd->got >= nd->nq)
				continue;
			double left = nd->last + c->o.timeout_ms / 1000.0 - t0;
			if (left <= 0) {
				node_fail(c, nd, cmds, -ETIMEDOUT, rd, "no answer in time");
				continue;
			}
			if (wait < 0 || left < wait)
				wait = left;
			int wrc = node_write(nd);
			if (wrc) {
				node_fail(c, nd, cmds, -ECONNRESET, rd, strerror(-wrc));
				continue;
			}
			bool done = nd->woff == nd->wlen;
			pf[np] = (struct pollfd){ .fd = nd->ctx->fd,
						  .events = (short)(POLLIN | (done ? 0 : POLLOUT)) };
			which[np++] = i;
		}
		if (np == 0)
			break;
		int r = poll(pf, np, (int)(wait * 1000) + 1);
		if (r < 0 && errno != EINTR) {
			free(pf);
			free(which);
			return -errno;
		}
		for (size_t j = 0; r > 0 && j < np; j++) {
			struct node *nd = &c->nodes[which[j]];
			if (pf[j].revents & POLLOUT)
				nd->last = now_s();
			if (nd->ctx && (pf[j].revents & (POLLIN | POLLHUP | POLLERR)))
				node_read(c, nd, cmds, rd);
		}
	}
	free(pf);
	free(which);
	return 0;
}

int cluster_exec(struct cluster *c, const char *buf, struct cluster_cmd *cmds, size_t n)
{
	double deadline = now_s() + c->o.retry_ms / 1000.0;
	arena_reset(c);
	int backoff = c->o.backoff_min_ms;
	for (size_t i = 0; i < n; i++) {
		cmds[i].done = false;
		cmds[i].status = -EHOSTUNREACH;
		cmds[i].reply = NULL;
		cmds[i].ask_node = -1;
		cmds[i].redirects = 0;
	}
	for (;;) {
		struct round rd = { false, false, 0 };
		for (size_t i = 0; i < c->nnodes; i++) {
			c->nodes[i].nq = c->nodes[i].got = 0;
			c->nodes[i].wlen = c->nodes[i].woff = 0;
		}
		/* queue every open command on its node */
		for (size_t i = 0; i < n; i++) {
			struct cluster_cmd *cmd = &cmds[i];
			if (cmd->done)
				continue;
			uint16_t ndi = cmd->ask_node >= 0 ? (uint16_t)cmd->ask_node : c->slot_node[cmd->slot];
			bool asking = cmd->ask_node >= 0;
			cmd->ask_node = -1;
			if (ndi == NO_NODE) {
				set_err(c, "slot %u has no node", cmd->slot);
				rd.refresh = rd.backoff = true;
				rd.retry++;
				continue;
			}
			struct node *nd = &c->nodes[ndi];
			if (!nd->ctx) {
				if (node_connect(c, nd) != 0) {
					rd.refresh = rd.backoff = true;
					rd.retry++;
					continue;
				}
			}
			static const char ask[] = "*1\r\n$6\r\nASKING\r\n";
			if ((asking && node_append(nd, ask, sizeof ask - 1, i, true) != 0) ||
			    node_append(nd, buf + cmd->off, cmd->len, i, false) != 0) {
				/* nothing of this round was written yet: drop what is
				 * queued (with its connections) and fail the call */
				for (size_t j = 0; j < c->nnodes; j++)
					if (c->nodes[j].nq)
						node_drop(c, &c->nodes[j], "out of memory");
				return -ENOMEM;
			}
		}
		int rc = flush_nodes(c, cmds, &rd);
		if (rc)
			return rc;
		if (rd.retry == 0)
			return 0;
		if (now_s() >= deadline) {
			for (size_t i = 0; i < n; i++)
				if (!cmds[i].done)
					cmd_final(c, &cmds[i], -EHOSTUNREACH, NULL);
			return 0;
		}
		if (rd.backoff) {
			sleep_ms(backoff);
			backoff = backoff * 2 > c->o.backoff_max_ms ? c->o.backoff_max_ms : backoff * 2;
		}
		if (rd.refresh)
			(void)map_refresh(c);
	}
}

void cluster_cmd_free(struct cluster_cmd *cmds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cmds[i].reply = NULL; /* the arena goes at the next call */
}

redisReply *cluster_command(struct cluster *c, const char *key, int *status, unsigned argc,
			    const char *const *argv)
{
	struct cluster_buf b = { 0 };
	cluster_buf_cmd(&b, argc);
	for (unsigned i = 0; i < argc; i++)
		cluster_buf_arg_str(&b, argv[i]);
	if (b.oom) {
		cluster_buf_free(&b);
		*status = -ENOMEM;
		return NULL;
	}
	struct cluster_cmd cmd = { .off = 0, .len = b.len, .slot = cluster_slot(key, strlen(key)) };
	int rc = cluster_exec(c, b.p, &cmd, 1);
	cluster_buf_free(&b);
	*status = rc ? rc : cmd.status;
	return rc ? NULL : cmd.reply;
}
