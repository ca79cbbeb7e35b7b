/* blob_compactor.c - the compactor's thread: a pass over the packs every
 * compact_period_ms (blob_compact_run, blob_compact.c), and the idle pass
 * once the store has committed nothing for idle_compact seconds (blob.h,
 * "The idle pass"). It calls the compactor only through blob.h.
 */
#include "blob.h"
#include "base/clock.h"
#include "base/thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct compactor {
	struct store *st;
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	unsigned period_ms;
	struct blob_compact_cfg cfg;
	struct blob_compact_memo memo;
	/* the idle pass (blob.h) */
	struct blob_compact_cfg idle_cfg;
	uint64_t idle_ns;         /* the rest that starts it; 0: never */
	uint64_t quiet_txnid;     /* LMDB's last commit when the store fell quiet */
	uint64_t quiet_since;     /* ... and when (CLOCK_MONOTONIC) */
	uint64_t rested_txnid;    /* the last commit after the last idle pass */
	struct pd_counters at_start; /* the seals and pages when it began */
};

/* The thread's passes stop for blob_compact_stop and as soon as the close
 * begins: the delta step's last sweep at the close waits for the pass to
 * remove the nursery packs it emptied (blob_compact_empty_packs), and
 * the delta step stops before the compactor does. */
static bool compactor_stopping(void *ctx)
{
	struct compactor *k = ctx;
	pthread_mutex_lock(&k->mu);
	bool s = k->stop;
	pthread_mutex_unlock(&k->mu);
	return s || store_closing(k->st);
}

/* An idle pass stops for the close and for a page written or removed. */
static bool idle_pass_stopping(void *ctx)
{
	struct compactor *k = ctx;
	if (compactor_stopping(k))
		return true;
	struct pd_counters now;
	store_counters(k->st, &now);
	return now.seals != k->at_start.seals || now.pages != k->at_start.pages;
}

/* The id of LMDB's last commit: unchanged while nothing commits (0 when
 * LMDB cannot say: never at rest then). */
static uint64_t last_commit(struct store *st)
{
	MDB_envinfo info;
	return store_env_info(st, &info, NULL) ? 0 : info.me_last_txnid;
}

/* The idle pass, once the store has committed nothing for k->idle_ns and
 * something since the last one (blob.h); what it did goes to the log. */
static void idle_pass(struct compactor *k)
{
	uint64_t txnid = last_commit(k->st), now = pd_clock_ns(CLOCK_MONOTONIC);
	if (!txnid)
		return;
	if (txnid != k->quiet_txnid) {
		k->quiet_txnid = txnid;
		k->quiet_since = now;
		return;
	}
	if (now - k->quiet_since < k->idle_ns || txnid == k->rested_txnid)
		return;
	store_counters(k->st, &k->at_start);
	struct blob_pack_usage before, after;
	blob_pack_usage(k->st, &before);
	uint64_t cpu0 = pd_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	struct blob_compact_stats d;
	int rc = blob_compact_run(k->st, &k->idle_cfg, &d);
	k->rested_txnid = k->quiet_txnid = last_commit(k->st);
	k->quiet_since = pd_clock_ns(CLOCK_MONOTONIC);
	if (rc == -ECANCELED && compactor_stopping(k))
		return; /* the close: the next mount's rest finishes it */
	if (rc && rc != -ECANCELED) {
		fprintf(stderr, "pagededup: the idle pass over the packs of %s: %s (nothing is lost; tried again "
			"at the next rest)\n", k->st->dir, strerror(-rc));
		return;
	}
	if (!d.packs_compacted && !rc)
		return; /* nothing to encode again */
	blob_pack_usage(k->st, &after);
	fprintf(stderr,
		"pagededup: idle pass%s: %llu pack%s encoded again at level %d, %llu records (%llu whole pages "
		"made deltas by a window of %u), %llu bytes smaller; packs %llu -> %llu bytes allocated; "
		"%.2f s of CPU\n",
		rc ? " stopped, pages written" : "", (unsigned long long)d.packs_compacted,
		d.packs_compacted == 1 ? "" : "s", k->idle_cfg.cold.level, (unsigned long long)d.records_cold,
		(unsigned long long)d.records_window, k->idle_cfg.cold.window,
		(unsigned long long)d.bytes_cold_saved, (unsigned long long)before.allocated,
		(unsigned long long)after.allocated, (double)(pd_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0) / 1e9);
	fflush(stderr);
}

static void *compactor_main(void *arg)
{
	thread_background("pd-compact", THREAD_BACKGROUND_NICE);
	struct compactor *k = arg;
	int last = 0;
	for (;;) {
		struct timespec until = pd_deadline_ns(CLOCK_MONOTONIC, (uint64_t)k->period_ms * 1000000u);
		pthread_mutex_lock(&k->mu);
		while (!k->stop && pthread_cond_timedwait(&k->cv, &k->mu, &until) != ETIMEDOUT)
			;
		bool stop = k->stop;
		pthread_mutex_unlock(&k->mu);
		if (stop)
			break;
		int rc = blob_compact_run(k->st, &k->cfg, NULL);
		if (rc && rc != -ECANCELED && rc != last)
			fprintf(stderr, "pagededup: compacting the packs of %s: %s (nothing is lost; tried again later)\n",
				k->st->dir, strerror(-rc));
		last = rc;
		if (k->idle_ns)
			idle_pass(k);
	}
	return NULL;
}

int blob_compact_start(struct store *st)
{
	if (st->readonly || st->opts.compact_share < 0 || st->blob_compact)
		return 0;
	struct compactor *k = calloc(1, sizeof *k);
	if (!k)
		return -ENOMEM;
	k->st = st;
	k->period_ms = st->opts.compact_period_ms ? st->opts.compact_period_ms : BLOB_COMPACT_PERIOD_MS;
	blob_compact_cfg_of(st, &k->cfg);
	k->cfg.stop = compactor_stopping;
	k->cfg.ctx = k;
	k->cfg.debug_stops = true;
	k->cfg.memo = &k->memo;
	k->idle_cfg = k->cfg;
	k->idle_cfg.memo = NULL;
	k->idle_cfg.stop = idle_pass_stopping;
	k->idle_cfg.every_pack = k->idle_cfg.skip_marked = true;
	k->idle_cfg.min_cold_bytes = BLOB_IDLE_MIN_BYTES;
	k->idle_cfg.cold.deltas = true;
	k->idle_cfg.cold.window = BLOB_COLD_WINDOW;
	k->idle_cfg.page_key = st->page_key; /* (set by the parts' opens, before their starts) */
	k->idle_cfg.key_ctx = st;
	if (k->idle_cfg.cold.level > 0) /* compact_level -1: records copied as they are, no idle pass */
		k->idle_ns = (uint64_t)st->opts.idle_compact_s * 1000000000u;
	pthread_mutex_init(&k->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cv, &ca);
	pthread_condattr_destroy(&ca);
	int rc = pthread_create(&k->thr, NULL, compactor_main, k);
	if (rc) {
		pthread_cond_destroy(&k->cv);
		pthread_mutex_destroy(&k->mu);
		free(k);
		return -rc;
	}
	st->blob_compact = k;
	return 0;
}

void blob_compact_stop(struct store *st)
{
	struct compactor *k = st->blob_compact;
	if (!k)
		return;
	thread_stop_join(k->thr, &k->mu, &k->cv, &k->stop, NULL);
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->mu);
	st->blob_compact = NULL;
	blob_compact_memo_free(&k->memo);
	free(k);
}
