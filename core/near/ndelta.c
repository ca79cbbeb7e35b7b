/* ndelta.c - signed pages re-encoded as deltas against their nearest stored
 * neighbour, and deltas of dead bases stored whole again. The design is
 * in ndelta.h; the records' rules in blob.h (blob_delta.c).
 */
#include "ndelta.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blob/blob.h"
#include "base/clock.h"
#include "base/heap.h"
#include "base/thread.h"
#include "ndelta_int.h"
#include "near.h"

struct ndelta {
	struct store *st;
	unsigned rule;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_cond_t swept_cv; /* a sweep ended */
	bool sweeping;
	uint64_t dropped_swept;  /* counts.dropped when the last sweep began */
	struct blobkey ring[NDELTA_QUEUE];
	size_t head, n;
	struct ndelta_counts counts;
	struct pack_loc carry; /* the last record the thread's moves left dead */
	struct step_window window; /* shared by the thread, a drain, a helping close() */
	/* one helping close() at a time (ndelta_help), with the sets of the
	 * helpers' batches kept from one to the next (may be NULL: none);
	 * taken before mu, never while mu is held */
	pthread_mutex_t help_mu;
	struct near_set_cache *help_cache;
	pthread_t thread;
	bool running, stop;
};

static const char *const rule_names[] = { "resemblance", "off", "simhash", "resemblance", "trial" };

int ndelta_rule_parse(const char *name, unsigned *rule)
{
	for (unsigned i = 1; i < sizeof rule_names / sizeof rule_names[0]; i++)
		if (!strcmp(name, rule_names[i])) {
			*rule = i;
			return 0;
		}
	return -EINVAL;
}

const char *ndelta_rule_name(unsigned rule)
{
	return rule < sizeof rule_names / sizeof rule_names[0] ? rule_names[rule] : "?";
}

/* ---- encoding ---------------------------------------------------------------- */

/* A page ready to be moved to its new record. */
struct job {
	struct blobkey k, base;
	bool has_base;
	struct pack_loc was, loc;
	uint32_t dict;
	uint64_t before, after;
	bool chunked; /* a delta of more than one chunk (pack.h) */
	bool window; /* ... on a page of the window, not a neighbour */
};

/* Page k (record r, bytes page) encoded whole with the store's codec
 * settings (its final record when no delta pays). */
static int encode_whole(struct store *st, const struct blobkey *k, const struct fprec *r, const void *page,
			struct pack_rec *out)
{
	struct fp fp = { .size = r->size };
	memcpy(fp.md5, k->md5, 16);
	memcpy(fp.xxh128, r->xxh128, 16);
	return blob_encode_final(st, &fp, page, -1, out);
}

/* Encode page k against the rule's best base, else against the window's
 * pages (win, may be NULL: ndelta.h); *ready when a record under the gain
 * threshold was appended. A page still in the nursery (pack.h) always
 * gets its final record: the delta when it is under the gain threshold
 * of the page encoded whole, else the page whole. The page then joins
 * the window at the depth its record will have. */
static int prepare(struct store *st, struct near_set_cache *cache, struct step_window *win, unsigned rule,
		   const struct blobkey *k, struct job *j, bool *ready, uint64_t *examined)
{
	*ready = false;
	struct fprec r;
	int rc = blob_read(st, k, &r);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	if (!(r.flags & FPREC_PACKED) || (r.flags & (FPREC_BAD | FPREC_SIG_PENDING)))
		return 0;
	bool nursery = blob_in_nursery(st, &r);
	struct blobkey old;
	uint64_t most = st->format >= PD_FORMAT_CHUNKED_DELTA ? NDELTA_BIG_MAX_BYTES : NDELTA_MAX_BYTES;
	bool deltable = rule != NDELTA_RULE_OFF && r.size <= most &&
			(nursery || blob_delta_base(st, &r, &old) == 0);
	if (!deltable && !nursery)
		return 0;
	void *page = NULL;
	struct pack_rec whole = { 0 }, best = { 0 };
	unsigned base_depth = 0; /* of the delta's base, when there is one */
	uint64_t against = r.pack_len;
	if (nursery && (rc = blob_read_packed_alloc(st, k, &r, &page)))
		return rc == -EIO ? 0 : rc; /* a damaged record stays for fsck and healing */
	if (deltable)
		rc = ndelta_best_delta(st, cache, rule, k, &r, &page, &best, &j->base, &base_depth, examined);
	/* A page leaving the nursery is encoded whole too, unless its delta
	 * is under a quarter of its compressed nursery record (then no whole
	 * record at a higher level comes near it): the delta must beat the
	 * record the page would otherwise get. */
	if (!rc && nursery && !(best.buf && best.len * 4 < r.pack_len && r.pack_len < r.size)) {
		if (!(rc = encode_whole(st, k, &r, page, &whole)))
			against = whole.len;
	}
	bool take = best.buf && best.len * NDELTA_GAIN_DEN < against * NDELTA_GAIN_NUM;
	unsigned depth = 0;
	bool on_window = false;
	bool windowed = !take && deltable && ndelta_window_takes(win, r.size);
	if (!rc && windowed && !page)
		rc = blob_read_packed_alloc(st, k, &r, &page);
	uint64_t mark = rc ? 0 : ndelta_window_mark(win, page, r.size);
	if (!rc && windowed) {
		int w = ndelta_window_try(st, win, k, &r, page, mark, against, &best, &j->base, &base_depth);
		rc = w < 0 ? w : 0;
		take = on_window = w == 1;
	}
	*j = (struct job){ .k = *k, .base = j->base, .before = r.pack_len };
	blob_rec_loc(&r, &j->was);
	if (!rc && take) {
		j->has_base = true;
		j->chunked = best.hdr.nchunks > 1;
		j->after = best.len;
		rc = blob_append(st, &best, k, &j->loc);
		*ready = rc == 0;
		depth = base_depth + 1;
	} else if (!rc && nursery) {
		j->dict = whole.hdr.dict;
		j->after = whole.len;
		rc = blob_append(st, &whole, k, &j->loc);
		*ready = rc == 0;
	}
	j->window = on_window;
	ndelta_window_keep(win, k, page, r.size, depth, mark); /* page taken over */
	pack_rec_free(&best);
	pack_rec_free(&whole);
	return rc == -EIO ? 0 : rc; /* a page that cannot be read stays as it is */
}

struct moves {
	struct job *v;
	size_t n;
	bool *moved;
	const struct pack_loc *carry;
	struct near_set_cache *cache; /* the step's sets (may be NULL) */
};

static int move_cb(struct wtx *w, void *arg)
{
	struct moves *m = arg;
	for (size_t i = 0; i < m->n; i++) {
		struct job *j = &m->v[i];
		int rc = blob_delta_move(w, &j->k, &j->was, &j->loc, j->dict, j->has_base ? &j->base : NULL);
		if (rc < 0)
			return rc;
		m->moved[i] = rc == 0;
		/* the page's set, kept as the difference from its base's when
		 * shorter, in the transaction that makes it a delta on it */
		if (rc == 0 && j->has_base && (rc = near_set_diff(w->txn, w->st, m->cache, &j->k, &j->base)))
			return rc;
		/* a refused record is nobody's: its blocks go back at once */
		if (rc == 1 && (rc = wtx_punch_after(w, &j->loc)))
			return rc;
	}
	/* The last batch's last dead record, punched again with this batch's:
	 * records freed one batch after another, side by side, then share
	 * their blocks' punch (store_commit.c merges neighbours). */
	return m->carry && m->carry->len ? wtx_punch_after(w, m->carry) : 0;
}

/* Commit the jobs' moves (their records appended, synced first unless
 * each append was); the sets of the deltas' pages and bases resolved
 * through cache (may be NULL). The moves name records of the main packs
 * only, so the nursery's writes (the seals') are left to the store's sync
 * thread: syncing them here made the step wait on every page written
 * since its last batch. */
static int commit_jobs(struct store *st, struct near_set_cache *cache, struct job *v, size_t n, bool *moved,
		       struct pack_loc *carry)
{
	if (!n)
		return 0;
	int rc = st->opts.sync_blobs ? 0 : pack_sync_main(st->packs);
	struct moves m = { v, n, moved, carry, cache };
	if (rc || (rc = store_write(st, move_cb, &m)))
		return rc;
	for (size_t i = 0; carry && i < n; i++)
		if (moved[i] && (v[i].was.pack > carry->pack ||
				 (v[i].was.pack == carry->pack && v[i].was.off > carry->off)))
			*carry = v[i].was;
	return 0;
}

static void count_moves(struct ndelta_counts *c, const struct job *v, size_t n, const bool *moved)
{
	for (size_t i = 0; c && i < n; i++)
		if (moved[i] && v[i].has_base) {
			c->stored++;
			c->window += v[i].window;
			c->bytes_before += v[i].before;
			c->bytes_after += v[i].after;
			if (v[i].chunked) {
				c->chunked++;
				c->chunked_before += v[i].before;
				c->chunked_after += v[i].after;
			}
		} else if (moved[i]) {
			c->moved_whole++;
			c->whole_before += v[i].before;
			c->whole_after += v[i].after;
		}
}

static int prepare_whole(struct store *st, const struct blobkey *k, struct job *j, bool *ready);

/* Page k, if its record is still in the nursery (its delta was refused:
 * it has deltas of its own, or its base changed), moved out whole. */
static int leave_nursery(struct store *st, const struct blobkey *k, struct ndelta_counts *c, struct pack_loc *carry)
{
	struct fprec r;
	if (blob_read(st, k, &r) || !blob_in_nursery(st, &r) || (r.flags & (FPREC_BAD | FPREC_SIG_PENDING)))
		return 0;
	bool ready, moved = false;
	struct job j;
	int rc = prepare_whole(st, k, &j, &ready);
	if (!rc && ready && !(rc = commit_jobs(st, NULL, &j, 1, &moved, carry)))
		count_moves(c, &j, 1, &moved);
	return rc;
}

/* The pages of one batch: prepared, their moves committed in one write
 * transaction. The sets they resolve go through cache (may be NULL), the
 * step's: a set that several pages' candidates share, or that a page's
 * candidates and its move both need, is decoded once while it stays the
 * same (near_set_cache). */
static int delta_batch_sets(struct store *st, struct near_set_cache *cache, struct step_window *win,
			    unsigned rule, const struct blobkey *keys, size_t n, struct ndelta_counts *c,
			    struct pack_loc *carry)
{
	struct job v[NDELTA_BATCH];
	bool moved[NDELTA_BATCH] = { false };
	size_t nj = 0;
	uint64_t examined = 0;
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		bool ready;
		rc = prepare(st, cache, win, rule, &keys[i], &v[nj], &ready, &examined);
		nj += ready;
	}
	if (c) {
		c->tried += n;
		c->candidates += examined;
	}
	int crc = commit_jobs(st, cache, v, nj, moved, carry);
	count_moves(c, v, nj, moved);
	if (rc || crc)
		return rc ? rc : crc;
	/* A move the transaction refused because of another move of the
	 * same batch (its base became a delta in it, or too deep) is tried
	 * once more on its own, against what is committed now. */
	for (size_t i = 0; i < nj && !rc; i++) {
		if (moved[i])
			continue;
		bool ready, again = false;
		struct job j;
		if (n > 1 && !(rc = prepare(st, cache, win, rule, &v[i].k, &j, &ready, &examined)) && ready &&
		    !(rc = commit_jobs(st, cache, &j, 1, &again, carry)))
			count_moves(c, &j, 1, &again);
		if (!rc && !again)
			rc = leave_nursery(st, &v[i].k, c, carry);
	}
	return rc;
}

/* delta_batch_sets, and the cache's work counted in c. */
static int delta_batch(struct store *st, struct near_set_cache *cache, struct step_window *win, unsigned rule,
		       const struct blobkey *keys, size_t n, struct ndelta_counts *c, struct pack_loc *carry)
{
	if (!store_room_for_background(st)) {
		/* the pages stay as they are (in the nursery, found again by
		 * a sweep once there is room; or whole) */
		if (c)
			c->roomless += n;
		return -ENOSPC;
	}
	uint64_t hits0, decoded0, hits, decoded;
	near_set_cache_counts(cache, &hits0, &decoded0);
	int rc = delta_batch_sets(st, cache, win, rule, keys, n, c, carry);
	near_set_cache_counts(cache, &hits, &decoded);
	if (c) {
		c->set_hits += hits - hits0;
		c->set_decoded += decoded - decoded0;
	}
	return rc;
}

int ndelta_page(struct store *st, unsigned rule, const struct blobkey *k, struct ndelta_counts *c)
{
	struct near_set_cache *cache = near_set_cache_new(); /* none without memory: sets decoded each time */
	int rc = delta_batch(st, cache, NULL, rule ? rule : NDELTA_RULE_RESEMBLANCE, k, 1, c, NULL);
	near_set_cache_free(cache);
	return rc;
}

/* ---- deltas of dead bases ------------------------------------------------------ */

struct kept_list {
	struct blobkey v[NDELTA_BATCH];
	size_t n;
};

static int collect_kept(void *ctx, const struct blobkey *k, const struct fprec *r)
{
	struct kept_list *l = ctx;
	(void)r;
	l->v[l->n++] = *k;
	return l->n == NDELTA_BATCH;
}

/* Delta k stored again on its own. */
static int prepare_whole(struct store *st, const struct blobkey *k, struct job *j, bool *ready)
{
	*ready = false;
	struct fprec r;
	void *page;
	int rc = ndelta_read_page(st, k, &r, &page);
	if (rc)
		return rc == -ENOENT || rc == -EIO ? 0 : rc; /* a damaged one stays for fsck */
	struct fp fp = { .size = r.size };
	memcpy(fp.md5, k->md5, 16);
	memcpy(fp.xxh128, r.xxh128, 16);
	struct pack_rec rec = { 0 };
	if (!(rc = blob_encode_final(st, &fp, page, -1, &rec))) {
		*j = (struct job){ .k = *k, .dict = rec.hdr.dict, .before = r.pack_len, .after = rec.len };
		blob_rec_loc(&r, &j->was);
		rc = blob_append(st, &rec, k, &j->loc);
		*ready = rc == 0;
	}
	pack_rec_free(&rec);
	free(page);
	return rc;
}

int ndelta_rebase_kept(struct store *st, uint64_t *moved_total)
{
	*moved_total = 0;
	for (;;) {
		if (!store_room_for_background(st))
			return -ENOSPC; /* the kept bases wait for room (store.h) */
		struct kept_list kl = { .n = 0 };
		struct blobkey deps[NDELTA_BATCH];
		size_t nd = 0;
		MDB_txn *txn;
		int rc = store_read_begin(st, &txn);
		if (rc)
			return rc;
		rc = blob_delta_kept_each(txn, st, collect_kept, &kl);
		for (size_t i = 0; i < kl.n && !rc && nd < NDELTA_BATCH; i++) {
			size_t n;
			rc = blob_delta_dependents(txn, st, &kl.v[i], deps + nd, NDELTA_BATCH - nd, &n);
			nd += n;
		}
		store_read_end(st, txn);
		if (rc || !nd)
			return rc;
		struct job v[NDELTA_BATCH];
		bool moved[NDELTA_BATCH] = { false };
		size_t nj = 0;
		for (size_t i = 0; i < nd && !rc; i++) {
			bool ready;
			rc = prepare_whole(st, &deps[i], &v[nj], &ready);
			nj += ready;
		}
		int crc = commit_jobs(st, NULL, v, nj, moved, NULL);
		rc = rc ? rc : crc;
		size_t progress = 0;
		for (size_t i = 0; i < nj; i++)
			progress += moved[i];
		*moved_total += progress;
		if (rc)
			return rc;
		if (!progress)
			return 0; /* what is left cannot be read: fsck names it */
	}
}

/* ---- the nursery's waiting records ---------------------------------------------- */

struct waiting {
	struct store *st;
	MDB_txn *txn;          /* NULL when its renewal failed */
	unsigned since_renew;  /* records looked up under txn */
	struct blobkey *v;
	size_t n, cap;
};

/* A sweep walks every nursery pack (up to the nursery's bound, 1 GiB of
 * records): one that looked them all up under one snapshot would keep
 * every LMDB page the writers free meanwhile from reuse, and LMDB's file
 * would grow. So the snapshot is renewed every this many records. */
#define WAITING_RENEW 1024

static int renew_waiting_txn(struct waiting *w)
{
	w->since_renew = 0;
	return store_read_renew(w->st, &w->txn);
}

/* A record of a nursery pack is waiting when its page's fingerprint
 * record names its place (a page moved, freed or sealed again leaves a
 * dead one) and the page is signed (an unsigned one joins the queue when
 * the signer is done with it). */
static int find_waiting(void *ctx, const struct pack_rec_hdr *h, const struct pack_loc *loc)
{
	struct waiting *w = ctx;
	if (h->kind != PACK_KIND_PAGE)
		return 0;
	if (++w->since_renew > WAITING_RENEW) {
		int rc = renew_waiting_txn(w);
		if (rc)
			return rc;
	}
	struct blobkey k = { .variant = h->variant };
	memcpy(k.md5, h->md5, 16);
	struct fprec r;
	if (blob_get(w->txn, w->st, &k, &r) || !(r.flags & FPREC_PACKED) || r.pack != loc->pack ||
	    r.pack_off != loc->off || (r.flags & (FPREC_BAD | FPREC_SIG_PENDING)))
		return 0;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 256;
		struct blobkey *v = realloc(w->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		w->v = v;
		w->cap = cap;
	}
	w->v[w->n++] = k;
	return 0;
}

/* The waiting records of nursery pack id, added to *w. */
static int waiting_in(struct store *st, uint32_t id, struct waiting *w)
{
	int rc = store_read_begin(st, &w->txn);
	if (rc)
		return rc;
	w->since_renew = 0;
	uint64_t damaged;
	rc = pack_scan(st->packs, id, find_waiting, w, &damaged);
	if (w->txn)
		store_read_end(st, w->txn);
	w->txn = NULL;
	return rc == -EIO ? 0 : rc; /* removed meanwhile */
}

uint64_t ndelta_yield_ns(size_t pages, uint64_t batch_ns, uint64_t nursery_before, uint64_t nursery_now,
			 uint64_t nursery_max)
{
	if (pages < NDELTA_BATCH || nursery_now <= nursery_before || nursery_now >= nursery_max / 2)
		return 0;
	uint64_t cap = (uint64_t)NDELTA_YIELD_MAX_MS * 1000000u;
	return batch_ns < cap / NDELTA_YIELD ? batch_ns * NDELTA_YIELD : cap;
}

/* Rest ns (d->mu held), unless the store stops meanwhile: pushes signal
 * d->cv, so the wait goes on until the time is up. */
static void rest(struct ndelta *d, uint64_t ns)
{
	struct timespec until = pd_deadline_ns(CLOCK_REALTIME, ns);
	while (!d->stop && pthread_cond_timedwait(&d->cv, &d->mu, &until) != ETIMEDOUT)
		;
	d->counts.rests++;
}

/* After a batch of pages that took took_ns (d->mu held): a rest when
 * writers are busy (ndelta.h); *nursery_seen: the nursery's bytes after
 * the batch before. */
static void yield_to_writers(struct ndelta *d, size_t pages, uint64_t took_ns, uint64_t *nursery_seen)
{
	struct store *st = d->st;
	uint64_t nursery = pack_nursery_bytes(st->packs);
	uint64_t ns = st->opts.nursery ? ndelta_yield_ns(pages, took_ns, *nursery_seen, nursery, blob_nursery_max(st))
				       : 0;
	*nursery_seen = nursery;
	if (ns)
		rest(d, ns);
}

/* ndelta_nursery_sweep, its sets through cache (may be NULL: the sweep's
 * own). The sweep of d's thread (d NULL: none) rests between its batches
 * as the queue's batches do (yield_to_writers, d->mu taken for it). */
static int nursery_sweep(struct store *st, struct near_set_cache *cache, struct step_window *win, unsigned rule,
			 struct ndelta *d, struct ndelta_counts *c)
{
	if (st->readonly)
		return 0;
	if (!store_room_for_background(st))
		return -ENOSPC; /* before the records are looked up: this is polled */
	uint32_t *ids;
	size_t n;
	int rc = pack_nursery_list(st->packs, &ids, &n);
	if (rc || !n) {
		if (!rc)
			free(ids);
		return rc;
	}
	struct waiting w = { .st = st };
	for (size_t i = 0; i < n && !rc; i++)
		rc = waiting_in(st, ids[i], &w);
	free(ids);
	if (c)
		c->swept += w.n;
	struct near_set_cache *own = !cache && w.n ? near_set_cache_new() : NULL;
	uint64_t nursery_seen = pack_nursery_bytes(st->packs);
	for (size_t i = 0; i < w.n && !rc; i += NDELTA_BATCH) {
		size_t m = w.n - i < NDELTA_BATCH ? w.n - i : NDELTA_BATCH;
		uint64_t t0 = pd_clock_ns(CLOCK_MONOTONIC);
		rc = delta_batch(st, cache ? cache : own, win, rule ? rule : NDELTA_RULE_RESEMBLANCE, w.v + i, m, c, NULL);
		if (!rc && d && i + m < w.n) {
			pthread_mutex_lock(&d->mu);
			yield_to_writers(d, m, pd_clock_ns(CLOCK_MONOTONIC) - t0, &nursery_seen);
			pthread_mutex_unlock(&d->mu);
		}
	}
	near_set_cache_free(own);
	free(w.v);
	/* the nursery packs left with nothing live go whole */
	return rc ? rc : blob_compact_empty_packs(st, true);
}

int ndelta_nursery_sweep(struct store *st, unsigned rule, struct ndelta_counts *c)
{
	return nursery_sweep(st, NULL, NULL, rule, NULL, c);
}

/* Counts of one pass added to the thread's. */
static void add_counts(struct ndelta_counts *to, const struct ndelta_counts *c)
{
	to->tried += c->tried;
	to->stored += c->stored;
	to->window += c->window;
	to->bytes_before += c->bytes_before;
	to->bytes_after += c->bytes_after;
	to->chunked += c->chunked;
	to->chunked_before += c->chunked_before;
	to->chunked_after += c->chunked_after;
	to->moved_whole += c->moved_whole;
	to->whole_before += c->whole_before;
	to->whole_after += c->whole_after;
	to->swept += c->swept;
	to->roomless += c->roomless;
	to->candidates += c->candidates;
	to->set_hits += c->set_hits;
	to->set_decoded += c->set_decoded;
	to->cpu_ns += c->cpu_ns;
}

/* The calling thread's CPU time (ns): what the step costs, apart from the
 * load of the machine around it. */
static uint64_t thread_cpu_ns(void)
{
	return pd_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static struct step_window *window_of(struct ndelta *d)
{
	return d->window.win && d->rule != NDELTA_RULE_OFF ? &d->window : NULL;
}

/* A sweep (d->mu held on entry and on return), one at a time: two at
 * once find the same waiting records and encode each twice, the second
 * copy left dead. The thread skips its sweep while another runs (wait
 * false); a drain waits for it, then sweeps what is left (wait true).
 * cache: the caller's (the thread's, or the drain's). */
static void sweep(struct ndelta *d, bool wait, struct near_set_cache *cache, struct step_window *win)
{
	while (d->sweeping) {
		if (!wait)
			return;
		pthread_cond_wait(&d->swept_cv, &d->mu);
	}
	d->sweeping = true;
	d->dropped_swept = d->counts.dropped;
	struct ndelta_counts c = { 0 };
	pthread_mutex_unlock(&d->mu);
	uint64_t t0 = thread_cpu_ns();
	/* the thread's sweep yields to writers as its queue's batches do (a
	 * cp -r overflows the queue, and most of its pages come this way);
	 * a drain's does not: a clean close waits for it */
	nursery_sweep(d->st, cache, win, d->rule, wait ? NULL : d, &c); /* what fails waits for the next */
	c.cpu_ns = thread_cpu_ns() - t0;
	pthread_mutex_lock(&d->mu);
	add_counts(&d->counts, &c);
	d->sweeping = false;
	pthread_cond_broadcast(&d->swept_cv);
}

/* ---- the queue and its thread ---------------------------------------------------- */

/* Take up to NDELTA_BATCH keys from the head (under d->mu). */
static size_t take(struct ndelta *d, struct blobkey *keys)
{
	size_t n = 0;
	while (n < NDELTA_BATCH && d->n) {
		keys[n++] = d->ring[d->head];
		d->head = (d->head + 1) % NDELTA_QUEUE;
		d->n--;
	}
	return n;
}

/* Do one batch (d->mu held on entry and on return); carry: the thread's
 * own (a drain or a helping close() beside it has none); cache: the
 * caller's (the thread's, the drain's, none for a helping close()). */
static void work(struct ndelta *d, const struct blobkey *keys, size_t n, struct pack_loc *carry,
		 struct near_set_cache *cache, struct step_window *win)
{
	struct ndelta_counts c = { 0 };
	pthread_mutex_unlock(&d->mu);
	uint64_t t0 = thread_cpu_ns();
	delta_batch(d->st, cache, win, d->rule, keys, n, &c, carry); /* a page that fails stays whole */
	c.cpu_ns = thread_cpu_ns() - t0;
	pthread_mutex_lock(&d->mu);
	add_counts(&d->counts, &c);
}

void ndelta_drain(struct ndelta *d)
{
	if (!d)
		return;
	struct blobkey keys[NDELTA_BATCH];
	struct near_set_cache *cache = near_set_cache_new(); /* the drain's (the thread may run beside it) */
	pthread_mutex_lock(&d->mu);
	for (size_t n; (n = take(d, keys));)
		work(d, keys, n, NULL, cache, window_of(d));
	sweep(d, true, cache, window_of(d)); /* the nursery emptied, so that a clean stop leaves none */
	pthread_mutex_unlock(&d->mu);
	near_set_cache_free(cache);
}

/* One batch of the thread, then its rest when writers are busy (ndelta.h). */
static void batch_then_yield(struct ndelta *d, struct near_set_cache *cache, struct step_window *win,
			     struct blobkey *keys,
			     uint64_t *nursery_seen)
{
	uint64_t t0 = pd_clock_ns(CLOCK_MONOTONIC);
	size_t n = take(d, keys);
	work(d, keys, n, &d->carry, cache, win);
	yield_to_writers(d, n, pd_clock_ns(CLOCK_MONOTONIC) - t0, nursery_seen);
}

/* The pages the thread has had to do (queued, swept, rebased; under
 * d->mu): a change since its last give-back means a burst happened. */
static uint64_t work_seen(const struct ndelta *d)
{
	return d->counts.queued + d->counts.swept + d->counts.kept_rebased;
}

/* Idle after a burst: the sets cached for the burst's pages (2.3 MiB,
 * touched again only as the next burst fills them) and the heap's free
 * pages go back to the system (base/heap.h). */
static void give_back(struct ndelta *d, struct near_set_cache **cache)
{
	pthread_mutex_unlock(&d->mu);
	near_set_cache_free(*cache);
	*cache = near_set_cache_new(); /* NULL: sets decoded each time */
	pthread_mutex_lock(&d->help_mu);
	near_set_cache_free(d->help_cache);
	d->help_cache = near_set_cache_new();
	pthread_mutex_unlock(&d->help_mu);
	heap_give_back();
	pthread_mutex_lock(&d->mu);
}

static void *ndelta_main(void *arg)
{
	thread_background("pd-delta", THREAD_BACKGROUND_NICE);
	struct ndelta *d = arg;
	struct blobkey keys[NDELTA_BATCH];
	uint64_t nursery_seen = pack_nursery_bytes(d->st->packs);
	/* the thread's sets, kept from batch to batch: the next pages' candidates
	 * are mostly the last ones' (none without memory: decoded each time) */
	struct near_set_cache *cache = near_set_cache_new();
	struct step_window *win = window_of(d);
	uint64_t seen_at_give_back = 0;
	pthread_mutex_lock(&d->mu);
	while (!d->stop) {
		if (!d->n && d->counts.dropped != d->dropped_swept) {
			/* keys were dropped while the queue was full: their
			 * pages wait in the nursery, found by a sweep now
			 * rather than after a pause writers may never make
			 * (or the one running, when a drain sweeps now) */
			if (d->sweeping)
				pthread_cond_wait(&d->swept_cv, &d->mu);
			else
				sweep(d, false, cache, win);
			continue;
		}
		if (!d->n) {
			struct timespec ts = pd_deadline_ns(CLOCK_REALTIME, (uint64_t)NDELTA_KEPT_POLL_MS * 1000000u);
			int w = pthread_cond_timedwait(&d->cv, &d->mu, &ts);
			if (w == ETIMEDOUT && !d->stop) {
				pthread_mutex_unlock(&d->mu);
				uint64_t moved = 0;
				ndelta_rebase_kept(d->st, &moved);
				pthread_mutex_lock(&d->mu);
				d->counts.kept_rebased += moved;
				if (!d->n && !d->stop)
					sweep(d, false, cache, win);
				if (!d->n && !d->stop && work_seen(d) != seen_at_give_back) {
					seen_at_give_back = work_seen(d);
					give_back(d, &cache);
				}
			}
			continue;
		}
		batch_then_yield(d, cache, win, keys, &nursery_seen);
	}
	pthread_mutex_unlock(&d->mu);
	near_set_cache_free(cache);
	return NULL;
}

static void free_ndelta(struct ndelta *d)
{
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	pthread_cond_destroy(&d->swept_cv);
	pthread_mutex_destroy(&d->help_mu);
	near_set_cache_free(d->help_cache);
	ndelta_window_free(&d->window);
	free(d);
}

int ndelta_start(struct store *st, struct ndelta **out)
{
	*out = NULL;
	unsigned rule = st->opts.delta_rule ? st->opts.delta_rule : NDELTA_RULE_RESEMBLANCE;
	if (st->readonly)
		return 0;
	uint32_t *ids;
	size_t nn = 0;
	if (!st->opts.nursery && pack_nursery_list(st->packs, &ids, &nn) == 0)
		free(ids);
	/* with deltas off, the thread still moves the nursery's pages */
	if (rule == NDELTA_RULE_OFF && !st->opts.nursery && !nn)
		return 0;
	struct ndelta *d = calloc(1, sizeof *d);
	if (!d)
		return -ENOMEM;
	d->st = st;
	d->rule = rule;
	ndelta_window_init(&d->window, st);
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	pthread_cond_init(&d->swept_cv, NULL);
	pthread_mutex_init(&d->help_mu, NULL);
	d->help_cache = near_set_cache_new(); /* NULL: helpers decode sets each time */
	if (!st->opts.no_delta_thread && pthread_create(&d->thread, NULL, ndelta_main, d)) {
		free_ndelta(d);
		return -EAGAIN;
	}
	d->running = !st->opts.no_delta_thread;
	*out = d;
	return 0;
}

void ndelta_stop(struct ndelta *d)
{
	if (!d)
		return;
	if (d->running) {
		thread_stop_join(d->thread, &d->mu, &d->cv, &d->stop, NULL);
	} else {
		pthread_mutex_lock(&d->mu);
		d->stop = true;
		pthread_mutex_unlock(&d->mu);
	}
	const struct ndelta_counts *c = &d->counts;
	if (c->queued || c->kept_rebased || c->moved_whole)
		fprintf(stderr, "pagededupfs: delta step (%s): %llu pages queued, %llu left whole (queue full), %llu stored as deltas (their records %llu -> %llu bytes), %llu stored whole again off dead bases, %llu moved whole out of the nursery (%llu -> %llu bytes), %llu found waiting by sweeps, %llu rests yielded to writers, %llu pages done by close() while the nursery was behind\n",
			ndelta_rule_name(d->rule), (unsigned long long)c->queued, (unsigned long long)c->dropped,
			(unsigned long long)c->stored, (unsigned long long)c->bytes_before,
			(unsigned long long)c->bytes_after, (unsigned long long)c->kept_rebased,
			(unsigned long long)c->moved_whole, (unsigned long long)c->whole_before,
			(unsigned long long)c->whole_after, (unsigned long long)c->swept,
			(unsigned long long)c->rests, (unsigned long long)c->helped);
	if (c->roomless)
		fprintf(stderr, "pagededupfs: delta step: %llu pages left as they were for a while: the disk had too little room free for background work\n",
			(unsigned long long)c->roomless);
	if (c->window)
		fprintf(stderr, "pagededupfs: delta step: %llu of the deltas on a page of the window, not a near neighbour\n",
			(unsigned long long)c->window);
	uint64_t done = c->stored + c->moved_whole;
	if (c->chunked)
		fprintf(stderr, "pagededupfs: delta step: %llu of the deltas over a chunk (chunked deltas), their records %llu -> %llu bytes\n",
			(unsigned long long)c->chunked, (unsigned long long)c->chunked_before,
			(unsigned long long)c->chunked_after);
	if (c->set_hits || c->set_decoded)
		fprintf(stderr, "pagededupfs: delta step: shingle sets decoded %llu times, %llu more answered from the step's caches\n",
			(unsigned long long)c->set_decoded, (unsigned long long)c->set_hits);
	if (done && c->cpu_ns)
		fprintf(stderr, "pagededupfs: delta step CPU: %.2f s for %llu final records, %.0f pages/s of one core\n",
			(double)c->cpu_ns / 1e9, (unsigned long long)done, (double)done * 1e9 / (double)c->cpu_ns);
	uint64_t past = __atomic_load_n(&d->st->nursery_bypassed, __ATOMIC_RELAXED);
	if (past)
		fprintf(stderr, "pagededupfs: %llu pages sealed while the nursery was full: their final records written by close()\n",
			(unsigned long long)past);
	free_ndelta(d);
}

void ndelta_push(struct ndelta *d, const struct blobkey *k)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	if (d->n == NDELTA_QUEUE) {
		d->counts.dropped++;
	} else {
		d->ring[(d->head + d->n) % NDELTA_QUEUE] = *k;
		d->n++;
		d->counts.queued++;
		if (d->n == 1 || d->n == NDELTA_BATCH)
			pthread_cond_signal(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
}

size_t ndelta_help(struct ndelta *d)
{
	if (!d)
		return 0;
	/* a close() already helping: this one writes on (the step's write
	 * transactions are one at a time anyway, and the nursery's bound
	 * holds without it: blob_nursery_wanted) */
	if (pthread_mutex_trylock(&d->help_mu))
		return 0;
	struct blobkey keys[NDELTA_BATCH];
	pthread_mutex_lock(&d->mu);
	size_t n = take(d, keys);
	if (n) {
		/* the helpers' own cache: the thread's is not shared, and a
		 * helper's next pages' candidates are mostly the last ones' */
		work(d, keys, n, NULL, d->help_cache, window_of(d));
		d->counts.helped += n;
	}
	pthread_mutex_unlock(&d->mu);
	pthread_mutex_unlock(&d->help_mu);
	if (n)
		blob_compact_empty_packs(d->st, false); /* what fails waits for the compactor */
	return n;
}

void ndelta_counts(struct ndelta *d, struct ndelta_counts *out)
{
	memset(out, 0, sizeof *out);
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	*out = d->counts;
	out->waiting = d->n;
	pthread_mutex_unlock(&d->mu);
}
