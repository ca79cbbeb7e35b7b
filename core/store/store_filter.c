/* store_filter.c - the page filter (gfilter.h) in the store: its tree
 * record, loading and rebuilding it, and splitting leaves beside normal
 * service.
 *
 * The tree record ("filter_tree" in meta) commits with the records whose
 * positions name the leaves, so after any crash LMDB holds a tree and
 * records that agree; the leaf files are trusted only after a clean close
 * with the store's generation, and otherwise refilled from the stored
 * positions, each on the leaf its record names. A store made with the
 * fixed filter has no tree record: its filter file becomes leaf 0 of a
 * one-leaf tree, and since its records carry no leaf id, which reads as
 * leaf 0, every stored position stays where it was.
 *
 * A split moves the keys of leaf L to its children in MD5 order, one chunk
 * of `split_chunk` records per store_write callback: for each record of
 * L's range past the cursor whose stored leaf is L, its positions leave L
 * and its child's are added, the record is rewritten with them, and the
 * cursor (in the tree record) advances past the chunk, all in the chunk's
 * transaction. A chunk that aborts takes its counter changes and the tree
 * back with it (the filter's journal); a crash leaves the committed cursor,
 * from which the thread resumes. The last variant of an MD5 always goes in
 * the same chunk as the first, since routing looks at the MD5 only. Seals
 * queue behind one chunk at most, a few milliseconds.
 */
#include "store.h"
#include "base/clock.h"
#include "base/thread.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define TREE_KEY "filter_tree"
#define DEFAULT_SPLIT_CHUNK 2048

/* ---- the tree record ---- */

void store_filter_config(const struct store_params *p, struct gf_config *c)
{
	gf_config_default(c, p->filter_fpr, p->filter_lines);
	if (p->filter_fmax > 0)
		c->fmax = p->filter_fmax;
	if (p->filter_leaf_lines)
		c->max_leaf_lines = p->filter_leaf_lines;
}

/* The one-leaf tree of a store without a tree record: the geometry of its
 * filter file, or the one its parameters give when the file is unusable
 * (it is made anew and refilled then). */
static int legacy_tree(const char *dir, const struct store_params *p, struct gf_tree *t)
{
	struct gf_config c;
	struct cbf_geometry g;
	struct cbf *f;
	char path[4096];
	store_filter_config(p, &c);
	snprintf(path, sizeof path, "%s/filter", dir);
	int rc;
	if (cbf_open(path, true, &f) == 0) {
		g = *cbf_geometry(f);
		cbf_close(f);
	} else if ((rc = cbf_geometry_for(p->expected_pages, p->filter_fpr, p->filter_lines, &g))) {
		return rc;
	}
	return gf_tree_single(&c, &g, t);
}

int store_filter_tree_read(MDB_txn *txn, MDB_dbi meta, const char *dir,
			   const struct store_params *p, struct gf_tree *t, bool *legacy)
{
	MDB_val k = { strlen(TREE_KEY), (void *)TREE_KEY }, v;
	int rc = mdb_get(txn, meta, &k, &v);
	*legacy = rc == MDB_NOTFOUND;
	if (*legacy)
		return legacy_tree(dir, p, t);
	if (rc)
		return pd_mdb_err(rc);
	return gf_tree_decode(v.mv_data, v.mv_size, t);
}

int store_filter_tree_put(MDB_txn *txn, MDB_dbi meta, const struct gf_tree *t)
{
	size_t len = gf_tree_size(t);
	MDB_val k = { strlen(TREE_KEY), (void *)TREE_KEY }, v = { len, NULL };
	int rc = pd_mdb_err(mdb_put(txn, meta, &k, &v, MDB_RESERVE));
	if (!rc)
		gf_tree_encode(t, v.mv_data);
	return rc;
}

int store_filter_save(struct wtx *w)
{
	struct gf_tree t;
	int rc = gf_tree_get(w->st->gf, &t);
	if (rc)
		return rc;
	rc = store_filter_tree_put(w->txn, w->st->db_meta, &t);
	gf_tree_free(&t);
	return rc;
}

/* ---- load and rebuild ---- */

/* Refill every leaf from the stored positions, each on the leaf its
 * record names (after an unclean stop, or for a store of the fixed
 * filter). The key counts come out exact. */
static int rebuild_cb(struct wtx *w, void *arg)
{
	(void)arg;
	struct store *st = w->st;
	int rc = pd_mdb_err(mdb_drop(w->txn, st->db_saturated, 0));
	if (rc)
		return rc;
	gf_clear(st->gf);
	MDB_cursor *c;
	if ((rc = pd_mdb_err(mdb_cursor_open(w->txn, st->db_fp, &c))))
		return rc;
	MDB_val k, v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !mrc && !rc;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct fprec r;
		rc = fprec_decode(v.mv_data, v.mv_size, &r);
		if (!rc && (r.flags & FPREC_IN_FILTER))
			rc = gf_add(st->gf, r.leaf, &r.pos, &store_saturated_ops, w);
	}
	mdb_cursor_close(c);
	if (!rc && mrc != MDB_NOTFOUND)
		rc = pd_mdb_err(mrc);
	return rc ? rc : store_filter_save(w);
}

int store_filter_load(struct store *st, bool clean, uint64_t gen)
{
	MDB_txn *txn;
	struct gf_tree t;
	bool legacy, fresh;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = store_filter_tree_read(txn, st->db_meta, st->dir, &st->params, &t, &legacy);
	store_read_end(st, txn);
	if (rc)
		return rc;
	st->params.filter_fmax = t.cfg.fmax;
	st->params.filter_leaf_lines = t.cfg.max_leaf_lines;
	rc = gf_open(st->dir, &t, st->readonly ? GF_READONLY : GF_READWRITE, &st->gf, &fresh);
	gf_tree_free(&t);
	if (rc || st->readonly)
		return rc;
	gf_remove_strays(st->gf);
	if (clean && !fresh && !legacy && gf_generation_is(st->gf, gen))
		return 0;
	return store_write(st, rebuild_cb, NULL);
}

/* ---- splitting ---- */

struct chunk_arg {
	unsigned max;   /* records per chunk */
	bool idle;      /* no split was wanted */
	uint64_t ns;    /* time the callback took (its last run) */
};

/* The first key past the cursor (or the start of the range). */
static void chunk_start(const struct gf_split *s, uint8_t kb[BLOBKEY_BYTES])
{
	if (s->cursor_set) {
		memcpy(kb, s->cursor, 16);
		memset(kb + 16, 0xFF, 4); /* past every variant of the cursor's MD5 */
	} else {
		gf_range_start(s->depth, s->prefix, kb);
		memset(kb + 16, 0, 4);
	}
}

/* Move one record's positions to the child, and rewrite it in place. */
static int move_record(struct wtx *w, const struct gf_split *s, MDB_cursor *c, MDB_val *k,
		       MDB_val *v)
{
	struct fprec r;
	int rc = fprec_decode(v->mv_data, v->mv_size, &r);
	if (rc || !(r.flags & FPREC_IN_FILTER) || r.leaf != s->leaf)
		return rc;
	struct cbf_pos old = r.pos;
	rc = gf_split_move(w->st->gf, s->leaf, k->mv_data, &old, &store_saturated_ops, w, &r.leaf,
			   &r.pos);
	if (rc)
		return rc;
	uint8_t kb[BLOBKEY_BYTES], vb[FPREC_MAX_BYTES];
	memcpy(kb, k->mv_data, BLOBKEY_BYTES);
	MDB_val key = { BLOBKEY_BYTES, kb }, val = { fprec_encode(&r, store_fp_row2(w->st), vb), vb };
	return pd_mdb_err(mdb_cursor_put(c, &key, &val, MDB_CURRENT));
}

static int chunk_work(struct wtx *w, struct chunk_arg *a)
{
	struct store *st = w->st;
	struct gf_split s;
	int rc = gf_split_next(st->gf, &s);
	a->idle = rc == -ENOENT;
	if (rc)
		return a->idle ? 0 : rc;
	MDB_cursor *c;
	if ((rc = pd_mdb_err(mdb_cursor_open(w->txn, st->db_fp, &c))))
		return rc;
	uint8_t kb[BLOBKEY_BYTES], last[16];
	chunk_start(&s, kb);
	MDB_val k = { BLOBKEY_BYTES, kb }, v;
	unsigned n = 0;
	bool end = true;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); !mrc && !rc;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != BLOBKEY_BYTES || !gf_in_range(k.mv_data, s.depth, s.prefix))
			break;
		if (n >= a->max && memcmp(k.mv_data, last, 16) != 0) {
			end = false;
			break;
		}
		memcpy(last, k.mv_data, 16);
		rc = move_record(w, &s, c, &k, &v);
		n++;
	}
	mdb_cursor_close(c);
	if (!rc && mrc && mrc != MDB_NOTFOUND)
		rc = pd_mdb_err(mrc);
	if (rc)
		return rc;
	if (end) {
		char path[GF_LEAF_PATH_MAX];
		gf_leaf_path(s.leaf, path);
		if ((rc = gf_split_finish(st->gf, s.leaf)) || (rc = wtx_unlink_after(w, path)))
			return rc;
	} else {
		gf_split_advance(st->gf, s.leaf, last);
	}
	return store_filter_save(w);
}

static int chunk_cb(struct wtx *w, void *arg)
{
	struct chunk_arg *a = arg;
	uint64_t t0 = pd_clock_ns(CLOCK_MONOTONIC);
	int rc = chunk_work(w, a);
	a->ns = pd_clock_ns(CLOCK_MONOTONIC) - t0;
	return rc;
}

int store_filter_step(struct store *st, bool *idle)
{
	struct chunk_arg a = { .max = st->opts.split_chunk ? st->opts.split_chunk : DEFAULT_SPLIT_CHUNK };
	int rc = store_write(st, chunk_cb, &a);
	*idle = a.idle;
	if (!rc && !a.idle) {
		/* the step's own figures, read by benchmarks */
		pthread_mutex_lock(&st->split_mu);
		st->split_chunks++;
		if (a.ns > st->split_chunk_max_ns)
			st->split_chunk_max_ns = a.ns;
		pthread_mutex_unlock(&st->split_mu);
	}
	return rc;
}

int store_filter_settle(struct store *st)
{
	bool idle = false;
	int rc = 0;
	while (!rc && !idle)
		rc = store_filter_step(st, &idle);
	return rc;
}

static bool split_stopping(struct store *st)
{
	pthread_mutex_lock(&st->split_mu);
	bool stop = st->split_stop;
	pthread_mutex_unlock(&st->split_mu);
	return stop;
}

/* Wait for a kick (a leaf passed its capacity) or a second, then split
 * while splits are wanted. A failed step (a full disk, say) is tried again
 * at the next wake-up; the filter only loses speed meanwhile. */
static void *split_main(void *arg)
{
	pthread_setname_np(pthread_self(), "pd-split"); /* its CPU apart in /proc/PID/task */
	struct store *st = arg;
	pthread_mutex_lock(&st->split_mu);
	while (!st->split_stop) {
		if (!st->split_kick) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&st->split_cv, &st->split_mu, &ts);
		}
		st->split_kick = false;
		if (st->split_stop)
			break;
		pthread_mutex_unlock(&st->split_mu);
		bool idle = !gf_split_wanted(st->gf);
		while (!idle && !split_stopping(st))
			if (store_filter_step(st, &idle))
				break;
		pthread_mutex_lock(&st->split_mu);
	}
	pthread_mutex_unlock(&st->split_mu);
	return NULL;
}

void store_filter_thread_start(struct store *st)
{
	st->split_stop = st->split_kick = false;
	st->split_running = pthread_create(&st->split_thread, NULL, split_main, st) == 0;
}

void store_filter_thread_stop(struct store *st)
{
	thread_stop_join(st->split_thread, &st->split_mu, &st->split_cv, &st->split_stop, &st->split_running);
}

void store_filter_kick(struct store *st)
{
	if (!st->split_running)
		return;
	pthread_mutex_lock(&st->split_mu);
	st->split_kick = true;
	pthread_cond_signal(&st->split_cv);
	pthread_mutex_unlock(&st->split_mu);
}
