/* urlseen_redis.c - `pagededup urlseen --redis`: urlseen.c's batches on the
 * filter kept on Redis (core/urlseen/rfilter.h).
 *
 * A batch is tested and recorded in one call (one pipeline per node, every
 * node at once); its new URLs are then printed in input order. The test
 * and the record are one command, so unlike the filter file there is no
 * "print, then record": a urlseen killed between the answer and the write
 * of a batch's output has recorded URLs it never printed (keep --batch
 * small where that matters). A URL whose answer is lost (a node died or
 * timed out with the command sent) is printed as new: it may have been
 * recorded, and another host may print it too; fetching a page twice is
 * the lesser harm. The number is reported per batch and at the end.
 */
#include "urlseen_redis.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "urlseen/rfilter.h"

#define PROG "pagededup urlseen"

struct urlseen_redis {
	struct urlseen_redis_opts o;
	struct cluster *c;
	struct rfilter *f;
	uint8_t *verdict;
	size_t vcap;
	uint64_t lost, batches_lost;
};

int urlseen_redis_open(const struct urlseen_redis_opts *o, struct urlseen_redis **out)
{
	struct urlseen_redis *u = calloc(1, sizeof *u);
	char err[512] = "";
	*out = NULL;
	if (!u) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	u->o = *o;
	struct cluster_opts co;
	cluster_opts_default(&co);
	if (o->wait_ms)
		co.retry_ms = o->wait_ms;
	if (o->timeout_ms)
		co.timeout_ms = o->timeout_ms;
	int rc = cluster_connect(o->seeds, &co, &u->c, err, sizeof err);
	if (rc) {
		if (rc == -EINVAL) {
			fprintf(stderr, PROG ": --redis %s: %s (want HOST:PORT[,HOST:PORT...])\n"
				"Try 'pagededup urlseen --help' for more information.\n", o->seeds, err);
			free(u);
			return 2; /* a usage error, as the other commands' */
		}
		fprintf(stderr,
			PROG ": cannot reach Redis at %s: %s. Start the cluster, or check --redis; nothing "
			"was tested or recorded\n", o->seeds, err);
		free(u);
		return rc == -ENOMEM ? 1 : URLSEEN_EXIT_UNREACHABLE;
	}
	struct rfilter_params p;
	rfilter_params_default(&p);
	if (o->fpr_given)
		p.fpr = o->fpr;
	if (o->expected)
		p.expected = o->expected;
	if (o->lines)
		p.lines_per_key = o->lines;
	if (o->leaf_kib)
		p.max_leaf_kib = o->leaf_kib;
	if (o->min_leaves)
		p.min_leaves = o->min_leaves;
	rc = rfilter_open(u->c, o->name, &p, o->fpr_given, !o->check, &u->f, err, sizeof err);
	if (rc) {
		fprintf(stderr, PROG ": Redis %s: %s\n", o->seeds, err);
		cluster_close(u->c);
		free(u);
		return rc == -EHOSTUNREACH || rc == -ETIMEDOUT || rc == -ECONNRESET
			       ? URLSEEN_EXIT_UNREACHABLE : 1;
	}
	*out = u;
	return 0;
}

int urlseen_redis_batch(struct urlseen_redis *u, const uint8_t *keys, size_t n, bool *seen,
			const char *input, uint64_t first_line, uint64_t last_line)
{
	if (n > u->vcap) {
		uint8_t *v = realloc(u->verdict, n);
		if (!v) {
			fprintf(stderr, PROG ": out of memory\n");
			return 1;
		}
		u->verdict = v;
		u->vcap = n;
	}
	uint64_t lost0 = u->lost;
	struct cluster_stats cs0, cs;
	cluster_get_stats(u->c, &cs0);
	int rc = rfilter_check(u->f, keys, n, !u->o.check, u->verdict);
	if (rc && rc != -EHOSTUNREACH) {
		fprintf(stderr, PROG ": %s\n", strerror(-rc));
		return 1;
	}
	size_t notrun = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t v = u->verdict[i];
		seen[i] = !(v == RFILTER_NEW || v == RFILTER_LOST);
		u->lost += v == RFILTER_LOST;
		notrun += v == RFILTER_NOT_RUN;
	}
	if (u->lost > lost0) {
		/* why: the connection that lost them (not whatever came after,
		 * such as CLUSTERDOWN while a stalled node is failed), else
		 * replies that were errors */
		cluster_get_stats(u->c, &cs);
		u->batches_lost++;
		fprintf(stderr,
			PROG ": %" PRIu64 " URLs of %s lines %" PRIu64 "-%" PRIu64
			" printed as new without an answer from Redis (%s); they may be printed by "
			"another crawler too\n",
			u->lost - lost0, input, first_line, last_line,
			cs.lost > cs0.lost ? cluster_lost_error(u->c) : "error replies");
	}
	if (rc == -EHOSTUNREACH) {
		fprintf(stderr,
			PROG ": Redis cannot be reached (%s): %zu URLs of %s lines %" PRIu64 "-%" PRIu64
			" were not tested nor recorded, nor any after them; the new ones of those lines "
			"that were tested are printed. Give those lines and the rest again once the "
			"cluster is back\n",
			cluster_error(u->c), notrun, input, first_line, last_line);
		return URLSEEN_EXIT_UNREACHABLE;
	}
	return 0;
}

int urlseen_redis_finish(struct urlseen_redis *u)
{
	if (u->o.check)
		return 0;
	int rc = rfilter_flush(u->f);
	if (rc) {
		fprintf(stderr, PROG ": adding the last counts to the filter: %s (%s); its leaves split "
			"a little later\n", strerror(-rc), cluster_error(u->c));
		return rc == -EHOSTUNREACH ? URLSEEN_EXIT_UNREACHABLE : 1;
	}
	return 0;
}

uint64_t urlseen_redis_lost(const struct urlseen_redis *u)
{
	return u->lost;
}

void urlseen_redis_stats(struct urlseen_redis *u)
{
	struct rfilter_stats st;
	struct cluster_stats cs;
	rfilter_get_stats(u->f, &st);
	cluster_get_stats(u->c, &cs);
	fprintf(stderr, "redis_plain: %d\n", cluster_is_plain(u->c));
	fprintf(stderr, "redis_lost: %" PRIu64 " urls\n", u->lost);
	fprintf(stderr, "redis_batches_lost: %" PRIu64 "\n", u->batches_lost);
	fprintf(stderr, "redis_moved: %" PRIu64 "\n", cs.moved);
	fprintf(stderr, "redis_ask: %" PRIu64 "\n", cs.ask);
	fprintf(stderr, "redis_tryagain: %" PRIu64 "\n", cs.tryagain);
	fprintf(stderr, "redis_clusterdown: %" PRIu64 "\n", cs.clusterdown);
	fprintf(stderr, "redis_map_refreshes: %" PRIu64 "\n", cs.refreshes);
	fprintf(stderr, "redis_connects: %" PRIu64 "\n", cs.reconnects);
	fprintf(stderr, "filter_target_fpr: %g\n", st.fpr);
	fprintf(stderr, "filter_k: %u bits/key in %u line(s) at level 0\n", st.k0, st.lines_per_key);
	fprintf(stderr, "filter_leaves0: %u leaves of %" PRIu64 " bytes, %" PRIu64 " keys each\n", st.c0,
		st.leaf_bytes, st.cap0);
	fprintf(stderr, "filter_expected: %" PRIu64 "\n", st.expected);
	fprintf(stderr, "filter_splits: %" PRIu64 " (by this process)\n", st.splits);
	fprintf(stderr, "filter_frozen_known: %" PRIu64 " leaves\n", st.frozen_known);
	fprintf(stderr, "filter_stray: %" PRIu64 " urls written into leaves already frozen\n", st.stray);
	fprintf(stderr, "filter_levels_full: %" PRIu64 "\n", st.levels_full);
}

void urlseen_redis_close(struct urlseen_redis *u)
{
	if (!u)
		return;
	rfilter_close(u->f);
	cluster_close(u->c);
	free(u->verdict);
	free(u);
}
