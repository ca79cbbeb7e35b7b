/* test_cluster.c - unit tests of the Redis Cluster client (core/cluster/)
 * and of the Redis filter's sizing (core/urlseen/rfilter.c).
 *
 * Hash slots against the values Redis gives (CLUSTER KEYSLOT), hash tags;
 * RESP formatting; bad seed lists and unreachable nodes; and, against a
 * real redis-server started here (plain, on 127.0.0.1:26450), a pipelined
 * batch, and a server that stops answering with a batch sent: every command
 * must come back as "may have run" (-ETIMEDOUT), none resent. The
 * cluster's redirections, failover and resharding are tested end to end in
 * tests/fs/t_urlseen_redis.sh.
 *
 * The filter's split protocol (rfilter.h), on the same server: several
 * hosts (each a struct rfilter on a connection of its own) stepped by hand
 * through the orders that matter around a split: a host that writes into a
 * leaf it does not know frozen, before and after one that knows it; the
 * same URL twice in one batch of such a host; a leaf split a second time
 * by a host whose count crosses the capacity after the first split (its
 * children already hold URLs). In every order a URL is new for one host
 * at most, and nothing recorded is lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster/cluster.h"
#include "urlseen/rfilter.h"

#define PORT "26450"

static void test_slots(void **state)
{
	(void)state;
	/* CRC16/XMODEM("123456789") = 0x31C3 */
	assert_int_equal(cluster_slot("123456789", 9), 0x31C3 & 16383);
	assert_int_equal(cluster_slot("foo", 3), 12182); /* CLUSTER KEYSLOT foo */
	assert_int_equal(cluster_slot("{user1000}.following", 20), cluster_slot("user1000", 8));
	assert_int_equal(cluster_slot("{user1000}.followers", 20), cluster_slot("user1000", 8));
	/* an empty tag: the whole key */
	assert_int_equal(cluster_slot("foo{}{bar}", 10), 8363);
	/* the first '{' and the next '}' */
	assert_int_equal(cluster_slot("foo{{bar}}zap", 13), cluster_slot("{bar", 4));
	assert_int_equal(cluster_slot("foo{bar}{zap}", 13), cluster_slot("bar", 3));
	/* no closing brace: the whole key */
	assert_int_equal(cluster_slot("foo{bar", 7), 15278);
}

static void test_format(void **state)
{
	(void)state;
	struct cluster_buf b = { 0 };
	cluster_buf_cmd(&b, 3);
	cluster_buf_arg_str(&b, "SET");
	cluster_buf_arg(&b, "k\r\n", 3);
	cluster_buf_arg_u64(&b, 1234567890123ull);
	const char want[] = "*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$13\r\n1234567890123\r\n";
	assert_int_equal(b.len, sizeof want - 1);
	assert_memory_equal(b.p, want, b.len);
	cluster_buf_reset(&b);
	assert_int_equal(b.len, 0);
	cluster_buf_free(&b);
}

static void test_bad_seeds(void **state)
{
	(void)state;
	struct cluster *c;
	char err[256];
	assert_int_equal(cluster_connect("localhost", NULL, &c, err, sizeof err), -EINVAL);
	assert_null(c);
	assert_int_equal(cluster_connect("a:1,b:99999", NULL, &c, err, sizeof err), -EINVAL);
	assert_int_equal(cluster_connect("", NULL, &c, err, sizeof err), -EINVAL);
	struct cluster_opts o;
	cluster_opts_default(&o);
	o.connect_ms = 200;
	assert_int_equal(cluster_connect("127.0.0.1:1", &o, &c, err, sizeof err), -EHOSTUNREACH);
	assert_non_null(strstr(err, "127.0.0.1:1"));
}

static pid_t server;

static int start_server(void **state)
{
	(void)state;
	server = fork();
	if (server == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execlp("redis-server", "redis-server", "--port", PORT, "--bind", "127.0.0.1", "--save", "",
		       "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning", (char *)NULL);
		_exit(127);
	}
	if (server < 0)
		return -1;
	for (int i = 0; i < 100; i++) { /* until it answers */
		struct cluster *c;
		struct cluster_opts o;
		cluster_opts_default(&o);
		o.connect_ms = 100;
		if (cluster_connect("127.0.0.1:" PORT, &o, &c, NULL, 0) == 0) {
			cluster_close(c);
			return 0;
		}
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
	return -1;
}

static int stop_server(void **state)
{
	(void)state;
	if (server > 0) {
		kill(server, SIGCONT);
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
	}
	return 0;
}

static void test_plain_batch(void **state)
{
	(void)state;
	struct cluster *c;
	char err[256];
	assert_int_equal(cluster_connect("127.0.0.1:" PORT, NULL, &c, err, sizeof err), 0);
	assert_true(cluster_is_plain(c));
	enum { N = 5000 };
	struct cluster_buf b = { 0 };
	static struct cluster_cmd cmds[N];
	const char *del[] = { "DEL", "t:counter" };
	int status;
	assert_non_null(cluster_command(c, "t:counter", &status, 2, del));
	assert_int_equal(status, 0);
	for (size_t i = 0; i < N; i++) {
		size_t off = b.len;
		cluster_buf_cmd(&b, 2);
		cluster_buf_arg_str(&b, "INCR");
		cluster_buf_arg_str(&b, "t:counter");
		cmds[i] = (struct cluster_cmd){ .off = off, .len = b.len - off,
						.slot = cluster_slot("t:counter", 9) };
	}
	assert_int_equal(cluster_exec(c, b.p, cmds, N), 0);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(cmds[i].status, 0);
		assert_int_equal(cmds[i].reply->type, REDIS_REPLY_INTEGER);
		assert_int_equal(cmds[i].reply->integer, (long long)i + 1); /* in order */
	}
	cluster_cmd_free(cmds, N);
	/* an error reply is a reply */
	const char *bad[] = { "LPUSH", "t:counter", "x" };
	redisReply *r = cluster_command(c, "t:counter", &status, 3, bad);
	assert_int_equal(status, 0);
	assert_int_equal(r->type, REDIS_REPLY_ERROR);
	assert_non_null(strstr(r->str, "WRONGTYPE"));
	cluster_buf_free(&b);
	cluster_close(c);
}

/* The server stops (SIGSTOP) with the batch sent: no reply within the
 * timeout, so every command may have run: -ETIMEDOUT, never sent again
 * (the counter shows each INCR ran once). */
static void test_lost_replies(void **state)
{
	(void)state;
	struct cluster *c;
	struct cluster_opts o;
	cluster_opts_default(&o);
	o.timeout_ms = 300;
	o.retry_ms = 1000;
	char err[256];
	assert_int_equal(cluster_connect("127.0.0.1:" PORT, &o, &c, err, sizeof err), 0);
	assert_string_equal(cluster_lost_error(c), "");
	const char *set[] = { "SET", "t:lost", "0" };
	int status;
	assert_non_null(cluster_command(c, "t:lost", &status, 3, set));
	enum { N = 100 };
	struct cluster_buf b = { 0 };
	struct cluster_cmd cmds[N];
	for (size_t i = 0; i < N; i++) {
		size_t off = b.len;
		cluster_buf_cmd(&b, 2);
		cluster_buf_arg_str(&b, "INCR");
		cluster_buf_arg_str(&b, "t:lost");
		cmds[i] = (struct cluster_cmd){ .off = off, .len = b.len - off,
						.slot = cluster_slot("t:lost", 6) };
	}
	kill(server, SIGSTOP);
	assert_int_equal(cluster_exec(c, b.p, cmds, N), 0);
	for (size_t i = 0; i < N; i++)
		assert_int_equal(cmds[i].status, -ETIMEDOUT);
	struct cluster_stats st;
	cluster_get_stats(c, &st);
	assert_int_equal(st.lost, N);
	assert_non_null(strstr(cluster_lost_error(c), "127.0.0.1:" PORT ": no answer in time"));
	kill(server, SIGCONT);
	/* the next call reconnects; the stopped server ran the batch once */
	const char *get[] = { "GET", "t:lost" };
	redisReply *r = NULL;
	for (int i = 0; i < 50 && !(r && r->type == REDIS_REPLY_STRING); i++)
		r = cluster_command(c, "t:lost", &status, 2, get);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_string_equal(r->str, "100");
	cluster_buf_free(&b);
	cluster_close(c);
}

static void test_plan(void **state)
{
	(void)state;
	struct rfilter_params p;
	rfilter_params_default(&p);
	const uint64_t expected[] = { 1000, 1000000, 3000000, 100000000 };
	for (size_t i = 0; i < sizeof expected / sizeof *expected; i++) {
		p.expected = expected[i];
		uint32_t c0, k0;
		uint64_t bytes;
		assert_int_equal(rfilter_plan(&p, &c0, &bytes, &k0), 0);
		assert_true(c0 >= p.min_leaves);
		uint64_t cls = bytes + 64; /* a jemalloc size class: 2^n (1 + i/4) */
		uint64_t pow = 1;
		while (pow * 2 <= cls)
			pow *= 2;
		assert_int_equal((cls - pow) % (pow / 4), 0);
		assert_true(cls <= (uint64_t)p.max_leaf_kib << 10);
		/* the bits hold the expected keys at half the rate, and not
		 * much more than that unless the smallest leaves are too big */
		double bits_per_key = (double)(c0 * (bytes - 64) * 8) / (double)p.expected;
		assert_true(bits_per_key >= 19.0);
		if (c0 * 16384 < p.expected * 3)
			assert_true(bits_per_key < 26.0);
	}
}

/* ---- the filter's splits, hosts stepped by hand ---- */

struct host {
	struct cluster *c;
	struct rfilter *f;
};

static void host_open(struct host *h, const char *name)
{
	struct rfilter_params p;
	rfilter_params_default(&p);
	p.fpr = 1e-3;
	p.expected = 100;   /* one leaf of 16 KiB: full after some 8,000 URLs */
	p.min_leaves = 1;
	p.max_leaf_kib = 16;
	char err[256];
	assert_int_equal(cluster_connect("127.0.0.1:" PORT, NULL, &h->c, err, sizeof err), 0);
	int rc = rfilter_open(h->c, name, &p, true, true, &h->f, err, sizeof err);
	if (rc)
		fail_msg("rfilter_open: %s", err);
}

static void host_close(struct host *h)
{
	rfilter_close(h->f);
	cluster_close(h->c);
}

static struct rfilter_stats host_stats(const struct host *h)
{
	struct rfilter_stats st;
	rfilter_get_stats(h->f, &st);
	return st;
}

/* n keys of 16 bytes, the set named by seed */
static uint8_t *make_keys(uint64_t seed, size_t n)
{
	uint8_t *k = malloc(16 * n);
	assert_non_null(k);
	for (size_t i = 0; i < 2 * n; i++) {
		uint64_t z = (seed << 40) + i + 0x9E3779B97F4A7C15ull;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
		z ^= z >> 31;
		memcpy(k + 8 * i, &z, 8);
	}
	return k;
}

/* Record (or, without rec, test) n keys at host h; new[i] says whether key
 * i was new there; returns how many were. */
static size_t host_check(struct host *h, const uint8_t *keys, size_t n, bool rec, bool *isnew)
{
	uint8_t *v = malloc(n);
	assert_non_null(v);
	assert_int_equal(rfilter_check(h->f, keys, n, rec, v), 0);
	size_t fresh = 0;
	for (size_t i = 0; i < n; i++) {
		assert_true(v[i] == RFILTER_SEEN || v[i] == RFILTER_NEW); /* nothing lost here */
		if (isnew)
			isnew[i] = v[i] == RFILTER_NEW;
		fresh += v[i] == RFILTER_NEW;
	}
	free(v);
	return fresh;
}

static void flushall(void)
{
	struct cluster *c;
	assert_int_equal(cluster_connect("127.0.0.1:" PORT, NULL, &c, NULL, 0), 0);
	const char *fl[] = { "FLUSHALL" };
	int status;
	assert_non_null(cluster_command(c, "x", &status, 1, fl));
	assert_int_equal(status, 0);
	cluster_close(c);
}

static void test_split_orders(void **state)
{
	(void)state;
	enum { B = 256, NX = 64 };
	flushall();
	struct host a, b, d;
	host_open(&a, "splits");
	host_open(&b, "splits");
	host_open(&d, "splits");
	/* b and d record a few URLs into the one leaf and keep their counts
	 * (less than a bunch): d's will cross the capacity after a's split */
	uint8_t *kb = make_keys(1, 8), *kd = make_keys(2, 8);
	assert_int_equal(host_check(&b, kb, 8, true, NULL), 8);
	assert_int_equal(host_check(&d, kd, 8, true, NULL), 8);
	/* a fills the leaf until its count splits it */
	size_t filled = 0;
	uint8_t *ka = NULL;
	for (uint64_t batch = 0; host_stats(&a).splits == 0; batch++) {
		assert_true(batch < 200);
		free(ka);
		ka = make_keys(100 + batch, B);
		host_check(&a, ka, B, true, NULL);
		filled += B;
	}
	assert_int_equal(host_stats(&a).splits, 1);
	assert_int_equal(host_stats(&a).frozen_known, 1);
	assert_true(filled >= host_stats(&a).cap0);

	/* 1. b, not knowing the leaf frozen, writes URLs into it first (the
	 * stray writes), then goes on to the children; a, knowing it frozen,
	 * reads the leaf and finds b's writes there */
	uint8_t *kx = make_keys(3, NX);
	bool bnew[NX], anew[NX];
	size_t nb = host_check(&b, kx, NX, true, bnew);
	assert_int_equal(host_stats(&b).frozen_known, 1);
	assert_true(host_stats(&b).stray >= NX - 2);
	assert_true(nb >= NX - 2); /* false positives of the full leaf, at 7.5e-4 */
	assert_int_equal(host_check(&a, kx, NX, true, anew), 0);
	/* 2. the other way round: a records first (a read of the frozen leaf,
	 * a write into a child); c, a new host, writes into the frozen leaf,
	 * goes to the child and finds a's writes there */
	struct host c;
	host_open(&c, "splits");
	uint8_t *ky = make_keys(4, NX);
	bool cnew[NX];
	size_t na = host_check(&a, ky, NX, true, anew);
	assert_true(na >= NX - 2);
	assert_int_equal(host_check(&c, ky, NX, true, cnew), 0);
	assert_true(host_stats(&c).stray >= na);
	assert_int_equal(host_stats(&a).stray, 0);
	/* 3. one URL twice in a batch of a host that does not know the leaf
	 * frozen: new once (the second copy finds the first's stray write) */
	struct host e;
	host_open(&e, "splits");
	uint8_t *kz = make_keys(5, 1), twice[32];
	memcpy(twice, kz, 16);
	memcpy(twice + 16, kz, 16);
	bool enew[2];
	assert_int_equal(host_check(&e, twice, 2, true, enew), 1);
	assert_true(enew[0] && !enew[1]);
	assert_int_equal(host_check(&a, kz, 1, true, NULL), 0);
	/* 4. d's count crosses the capacity now: d splits the leaf again. Its
	 * children exist and hold URLs; making them again must not touch them,
	 * and every URL recorded so far is still there */
	assert_int_equal(rfilter_flush(d.f), 0);
	assert_int_equal(host_stats(&d).splits, 1);
	struct host g;
	host_open(&g, "splits");
	assert_int_equal(host_check(&g, kx, NX, false, NULL), 0);
	assert_int_equal(host_check(&g, ky, NX, false, NULL), 0);
	assert_int_equal(host_check(&g, kz, 1, false, NULL), 0);
	assert_int_equal(host_check(&g, kb, 8, false, NULL), 0);
	assert_int_equal(host_check(&g, kd, 8, false, NULL), 0);
	assert_int_equal(host_check(&g, ka, B, false, NULL), 0);
	/* hosts that know the leaf frozen find what it got before the split */
	assert_int_equal(host_check(&a, ka, B, true, NULL), 0);
	assert_int_equal(host_check(&b, kd, 8, true, NULL), 0);
	/* and the URLs of 1 and 2 are new for nobody else */
	assert_int_equal(host_check(&d, kx, NX, true, NULL), 0);
	assert_int_equal(host_check(&d, ky, NX, true, NULL), 0);
	host_close(&a);
	host_close(&b);
	host_close(&c);
	host_close(&d);
	host_close(&e);
	host_close(&g);
	free(ka);
	free(kb);
	free(kd);
	free(kx);
	free(ky);
	free(kz);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slots),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_bad_seeds),
		cmocka_unit_test(test_plan),
		cmocka_unit_test_setup_teardown(test_plain_batch, start_server, stop_server),
		cmocka_unit_test_setup_teardown(test_lost_replies, start_server, stop_server),
		cmocka_unit_test_setup_teardown(test_split_orders, start_server, stop_server),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
