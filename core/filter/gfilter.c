/* gfilter.c - the page filter that grows: a tree of counting-filter
 * leaves. The design is in gfilter.h; this file holds the leaves' life
 * cycle, routing, the batch journal and statistics (the steps of a split
 * are gfilter_split.c, the tree record's codec gftree.c; the structures
 * they share are in gfilter_int.h).
 *
 * Memory layout. Every leaf, routed to or not, is in `v` (a few hundred at
 * most in practice) and in `by_id` (indexed by id, for the stored leaf ids
 * of records). The directory `dir` has 2^dir_bits entries, dir_bits the
 * largest depth of a routed leaf; entry e points to the routed leaf whose
 * prefix e extends, so a key's leaf is one shift and one load away, and a
 * splitting leaf adds a comparison with its cursor.
 *
 * The journal. Counter changes are logged per leaf in a struct cbf_undo;
 * key counts change in `batch` until the commit folds them into d.keys;
 * tree changes (a split started, a cursor advanced, a split finished) are
 * entries of `j`, undone in reverse order. Only the writer changes any of
 * it; the mutex orders the tree and the committed counts against
 * gf_stats() and gf_split_wanted() on other threads.
 */
#include "gfilter_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/byteorder.h"


/* ---- MD5 ranges ---- */

/* The leading 64 bits, big-endian (inline: every lookup routes). */
/* `bits` bits of the MD5 starting at bit `from` (from + bits <= 64). */
bool gf_in_range(const uint8_t md5[16], uint8_t depth, uint32_t prefix)
{
	return gf_md5_bits(md5, 0, depth) == prefix;
}

void gf_range_start(uint8_t depth, uint32_t prefix, uint8_t md5[16])
{
	memset(md5, 0, 16);
	if (depth)
		put_be64(md5, (uint64_t)prefix << (64 - depth));
}

/* ---- leaves ---- */

static void path_of(const struct gfilter *gf, uint32_t id, char *out, size_t n)
{
	char rel[GF_LEAF_PATH_MAX];
	gf_leaf_path(id, rel);
	snprintf(out, n, "%s/%s", gf->dir, rel);
}

static int ensure_leaf_dir(const struct gfilter *gf)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/filter.d", gf->dir);
	return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

static bool same_geometry(const struct cbf_geometry *a, const struct cbf_geometry *b)
{
	return a->nlines == b->nlines && a->k == b->k && a->lines_per_key == b->lines_per_key &&
	       a->seed == b->seed;
}

/* Open (or make) the counters of leaf l. */
int gf_leaf_open_counters(struct gfilter *gf, struct gf_leaf *l, bool create, bool *fresh)
{
	if (gf->mode == GF_MEMORY)
		return cbf_create(NULL, &l->d.g, 0, &l->f);
	char path[4096];
	path_of(gf, l->d.id, path, sizeof path);
	if (l->d.id && gf->mode == GF_READWRITE) {
		int rc = ensure_leaf_dir(gf);
		if (rc)
			return rc;
	}
	if (!create) {
		int rc = cbf_open(path, gf->mode == GF_READONLY, &l->f);
		if (rc == 0 && same_geometry(cbf_geometry(l->f), &l->d.g))
			return 0;
		if (rc == 0) {
			cbf_close(l->f);
			l->f = NULL;
			rc = -EINVAL;
		}
		if (gf->mode == GF_READONLY)
			return rc;
	}
	if (fresh)
		*fresh = true;
	return cbf_create(path, &l->d.g, 0, &l->f);
}

void gf_leaf_free(struct gf_leaf *l)
{
	if (!l)
		return;
	cbf_close(l->f);
	cbf_undo_free(&l->undo);
	free(l);
}

static int leaf_index_grow(struct gfilter *gf, uint32_t id)
{
	if (gf->n == gf->cap) {
		size_t cap = gf->cap ? 2 * gf->cap : 16;
		struct gf_leaf **v = realloc(gf->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		gf->v = v;
		gf->cap = cap;
	}
	if (id >= gf->by_id_len) {
		size_t len = gf->by_id_len ? gf->by_id_len : 16;
		while (len <= id)
			len *= 2;
		struct gf_leaf **b = realloc(gf->by_id, len * sizeof *b);
		if (!b)
			return -ENOMEM;
		memset(b + gf->by_id_len, 0, (len - gf->by_id_len) * sizeof *b);
		gf->by_id = b;
		gf->by_id_len = len;
	}
	return 0;
}

/* A leaf struct for d, in the index (its counters not open yet). */
int gf_leaf_add(struct gfilter *gf, const struct gf_leaf_desc *d, struct gf_leaf **out)
{
	if (d->id < gf->by_id_len && gf->by_id[d->id])
		return -EUCLEAN;
	int rc = leaf_index_grow(gf, d->id);
	if (rc)
		return rc;
	struct gf_leaf *l = calloc(1, sizeof *l);
	if (!l)
		return -ENOMEM;
	l->d = *d;
	l->capacity = cbf_capacity(&d->g, gf->cfg.target_fpr);
	gf->v[gf->n++] = l;
	gf->by_id[d->id] = l;
	*out = l;
	return 0;
}

/* Take l out of the index (the caller frees it). */
void gf_leaf_unlink(struct gfilter *gf, struct gf_leaf *l)
{
	for (size_t i = 0; i < gf->n; i++)
		if (gf->v[i] == l) {
			gf->v[i] = gf->v[--gf->n];
			break;
		}
	gf->by_id[l->d.id] = NULL;
}

struct gf_leaf *gf_leaf_by_id(const struct gfilter *gf, uint32_t id)
{
	return id < gf->by_id_len ? gf->by_id[id] : NULL;
}

/* Bring dir_f and shape in line with dir_v and the leaves' states: after
 * every change of either. Keeps the old table without memory for a new
 * one, with every entry sent the long way. */
void gf_lookup_refresh(struct gfilter *gf)
{
	size_t len = (size_t)1 << gf->dir_bits;
	const struct cbf **t = realloc(gf->dir_f, len * sizeof *t);
	if (!t) {
		free(gf->dir_f);
		gf->dir_f = NULL;
		return;
	}
	gf->dir_f = t;
	for (size_t e = 0; e < len; e++) {
		const struct gf_leaf *l = gf->dir_v[e];
		t[e] = l->d.state == GF_SPLITTING ? NULL : l->f;
	}
	gf->shape = gf->n ? gf->v[0]->f : NULL;
	for (size_t i = 0; i < gf->n && gf->shape; i++)
		if (gf->v[i]->f && !cbf_same_shape(gf->v[i]->f, gf->shape))
			gf->shape = NULL;
}

/* Point every directory entry at the routed leaf over it. -EUCLEAN unless
 * the routed leaves cover every MD5 exactly once. */
int gf_dir_rebuild(struct gfilter *gf)
{
	unsigned bits = 0;
	for (size_t i = 0; i < gf->n; i++)
		if (gf_routed(gf->v[i]) && gf->v[i]->d.depth > bits)
			bits = gf->v[i]->d.depth;
	size_t len = (size_t)1 << bits;
	struct gf_leaf **d = calloc(len, sizeof *d);
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < gf->n; i++) {
		struct gf_leaf *l = gf->v[i];
		if (!gf_routed(l))
			continue;
		size_t span = (size_t)1 << (bits - l->d.depth), first = (size_t)l->d.prefix * span;
		for (size_t e = first; e < first + span; e++) {
			if (d[e]) {
				free(d);
				return -EUCLEAN;
			}
			d[e] = l;
		}
	}
	for (size_t e = 0; e < len; e++)
		if (!d[e]) {
			free(d);
			return -EUCLEAN;
		}
	free(gf->dir_v);
	gf->dir_v = d;
	gf->dir_bits = bits;
	return 0;
}

/* Hook each child of a split in progress to its parent. */
static int link_children(struct gfilter *gf)
{
	for (size_t i = 0; i < gf->n; i++) {
		struct gf_leaf *c = gf->v[i];
		if (c->d.state != GF_CHILD)
			continue;
		struct gf_leaf *p = gf_leaf_by_id(gf, c->d.parent);
		if (!p || p->d.state != GF_SPLITTING || c->d.depth != p->d.depth + p->d.child_bits ||
		    c->d.prefix >> p->d.child_bits != p->d.prefix)
			return -EUCLEAN;
		unsigned j = c->d.prefix & ((1u << p->d.child_bits) - 1);
		if (p->child[j])
			return -EUCLEAN;
		p->child[j] = c;
	}
	for (size_t i = 0; i < gf->n; i++) {
		struct gf_leaf *p = gf->v[i];
		for (unsigned j = 0; p->d.state == GF_SPLITTING && j < (1u << p->d.child_bits); j++)
			if (!p->child[j])
				return -EUCLEAN;
	}
	return 0;
}

int gf_open(const char *dir, const struct gf_tree *t, enum gf_mode mode, struct gfilter **out,
	    bool *fresh)
{
	if (fresh)
		*fresh = false;
	if (!gf_config_valid(&t->cfg) || (mode != GF_MEMORY && !dir))
		return -EINVAL;
	struct gfilter *gf = calloc(1, sizeof *gf);
	if (!gf)
		return -ENOMEM;
	pthread_mutex_init(&gf->mu, NULL);
	gf->mode = mode;
	gf->cfg = t->cfg;
	gf->next_id = t->next_id;
	int rc = 0;
	if (mode != GF_MEMORY && !(gf->dir = strdup(dir)))
		rc = -ENOMEM;
	for (uint32_t i = 0; i < t->n && !rc; i++) {
		struct gf_leaf *l;
		if (t->leaf[i].state == GF_DROPPED)
			continue;
		if (!(rc = gf_leaf_add(gf, &t->leaf[i], &l)))
			rc = gf_leaf_open_counters(gf, l, false, fresh);
	}
	if (!rc)
		rc = link_children(gf);
	if (!rc)
		rc = gf_dir_rebuild(gf);
	if (!rc)
		gf_lookup_refresh(gf);
	if (rc) {
		gf_close(gf);
		return rc;
	}
	*out = gf;
	return 0;
}

void gf_close(struct gfilter *gf)
{
	if (!gf)
		return;
	for (size_t i = 0; i < gf->n; i++)
		gf_leaf_free(gf->v[i]);
	free(gf->v);
	free(gf->by_id);
	free(gf->dir_v);
	free(gf->dir_f);
	free(gf->j);
	free(gf->dir);
	pthread_mutex_destroy(&gf->mu);
	free(gf);
}

static int tree_get_locked(const struct gfilter *gf, struct gf_tree *out)
{
	memset(out, 0, sizeof *out);
	out->cfg = gf->cfg;
	out->next_id = gf->next_id;
	if (!(out->leaf = calloc(gf->n ? gf->n : 1, sizeof *out->leaf)))
		return -ENOMEM;
	for (size_t i = 0; i < gf->n; i++) {
		const struct gf_leaf *l = gf->v[i];
		if (l->d.state == GF_DROPPED)
			continue;
		struct gf_leaf_desc *d = &out->leaf[out->n++];
		*d = l->d;
		d->keys = (uint64_t)((int64_t)l->d.keys + l->batch);
	}
	return 0;
}

int gf_tree_get(struct gfilter *gf, struct gf_tree *out)
{
	pthread_mutex_lock(&gf->mu);
	int rc = tree_get_locked(gf, out);
	pthread_mutex_unlock(&gf->mu);
	return rc;
}

bool gf_generation_is(const struct gfilter *gf, uint64_t generation)
{
	for (size_t i = 0; i < gf->n; i++)
		if (cbf_generation(gf->v[i]->f) != generation)
			return false;
	return true;
}

int gf_sync(struct gfilter *gf, uint64_t generation)
{
	int rc = 0;
	for (size_t i = 0; i < gf->n && !rc; i++)
		rc = cbf_sync(gf->v[i]->f, generation);
	return rc;
}

void gf_clear(struct gfilter *gf)
{
	pthread_mutex_lock(&gf->mu);
	for (size_t i = 0; i < gf->n; i++) {
		cbf_clear(gf->v[i]->f);
		gf->v[i]->d.keys = 0;
		gf->v[i]->batch = 0;
		cbf_undo_clear(&gf->v[i]->undo);
	}
	pthread_mutex_unlock(&gf->mu);
}

/* ---- routing ---- */

static inline struct gf_leaf *route(const struct gfilter *gf, const uint8_t md5[16])
{
	uint64_t top = gf_md5_top(md5);
	struct gf_leaf *l = gf->dir_v[gf->dir_bits ? top >> (64 - gf->dir_bits) : 0];
	if (l->d.state == GF_SPLITTING && l->d.cursor_set && memcmp(md5, l->d.cursor, 16) <= 0)
		l = l->child[gf_md5_bits(md5, l->d.depth, l->d.child_bits)];
	return l;
}

void gf_route(const struct gfilter *gf, const uint8_t md5[16], struct gf_route *r)
{
	const struct gf_leaf *l = route(gf, md5);
	r->leaf = l->d.id;
	r->f = l->f;
}

void gf_positions(const struct gfilter *gf, const uint8_t md5[16], uint32_t *leaf,
		  struct cbf_pos *pos)
{
	const struct gf_leaf *l = route(gf, md5);
	*leaf = l->d.id;
	cbf_positions(l->f, md5, pos);
}

const struct cbf *gf_leaf(const struct gfilter *gf, uint32_t id)
{
	const struct gf_leaf *l = gf_leaf_by_id(gf, id);
	return l && l->d.state != GF_DROPPED ? l->f : NULL;
}

bool gf_maybe_contains(const struct gfilter *gf, const uint8_t md5[16])
{
	const struct gf_leaf *l = route(gf, md5);
	struct cbf_pos pos;
	cbf_positions(l->f, md5, &pos);
	return cbf_maybe_contains(l->f, &pos);
}

static const struct cbf *route_long_way(const void *gf, const uint8_t *key)
{
	return route(gf, key)->f;
}

/* With leaves all of one shape, keys are routed inside the lookup pipeline
 * through dir_f (cbf_maybe_contains_routed); otherwise a slice of keys is
 * routed first, then looked up with the lines of many keys in flight at
 * once. */
size_t gf_maybe_contains_batch(const struct gfilter *gf, const uint8_t *keys, size_t n,
			       bool *results)
{
	if (gf->shape && gf->dir_f)
		return cbf_maybe_contains_routed(gf->shape, gf->dir_f, gf->dir_bits, route_long_way,
						 gf, keys, n, results);
	enum { SLICE = 4096 }; /* the prefetch pipeline restarts once a slice */
	const struct cbf *fs[SLICE];
	size_t hits = 0;
	for (size_t at = 0; at < n; at += SLICE) {
		size_t m = n - at < SLICE ? n - at : SLICE;
		for (size_t i = 0; i < m; i++)
			fs[i] = route(gf, keys + 16 * (at + i))->f;
		hits += cbf_maybe_contains_each(fs, keys + 16 * at, m, results + at);
	}
	return hits;
}

/* ---- changes ---- */

/* The caller's exact-count table, with the leaf's index range. */
struct xctx {
	const struct cbf_exact_ops *ops;
	void *ctx;
	uint64_t base;
};

static int x_get(void *c, uint64_t idx, uint64_t *count)
{
	struct xctx *x = c;
	return x->ops->get(x->ctx, x->base | idx, count);
}

static int x_put(void *c, uint64_t idx, uint64_t count)
{
	struct xctx *x = c;
	return x->ops->put(x->ctx, x->base | idx, count);
}

static int x_del(void *c, uint64_t idx)
{
	struct xctx *x = c;
	return x->ops->del(x->ctx, x->base | idx);
}

static const struct cbf_exact_ops x_ops = { x_get, x_put, x_del };

int gf_leaf_update(struct gf_leaf *l, const struct cbf_pos *pos, bool add,
		       const struct cbf_exact_ops *ops, void *ctx)
{
	struct xctx x = { ops, ctx, GF_EXACT_INDEX(l->d.id, 0) };
	const struct cbf_exact_ops *o = ops ? &x_ops : NULL;
	int rc = add ? cbf_add(l->f, pos, o, &x, &l->undo) : cbf_remove(l->f, pos, o, &x, &l->undo);
	if (!rc)
		l->batch += add ? 1 : -1;
	return rc;
}

int gf_insert(struct gfilter *gf, const uint8_t md5[16], const struct cbf_exact_ops *ops,
	      void *ctx, uint32_t *leaf, struct cbf_pos *pos)
{
	struct gf_leaf *l = route(gf, md5);
	cbf_positions(l->f, md5, pos);
	*leaf = l->d.id;
	return gf_leaf_update(l, pos, true, ops, ctx);
}

static struct gf_leaf *live_leaf(const struct gfilter *gf, uint32_t id)
{
	struct gf_leaf *l = gf_leaf_by_id(gf, id);
	return l && l->d.state != GF_DROPPED ? l : NULL;
}

int gf_add(struct gfilter *gf, uint32_t leaf, const struct cbf_pos *pos,
	   const struct cbf_exact_ops *ops, void *ctx)
{
	struct gf_leaf *l = live_leaf(gf, leaf);
	return l ? gf_leaf_update(l, pos, true, ops, ctx) : -EINVAL;
}

int gf_remove(struct gfilter *gf, uint32_t leaf, const struct cbf_pos *pos,
	      const struct cbf_exact_ops *ops, void *ctx)
{
	struct gf_leaf *l = live_leaf(gf, leaf);
	return l ? gf_leaf_update(l, pos, false, ops, ctx) : -EINVAL;
}

int gf_journal_push(struct gfilter *gf, enum jkind kind, struct gf_leaf *l)
{
	if (gf->jn == gf->jcap) {
		size_t cap = gf->jcap ? 2 * gf->jcap : 8;
		struct jentry *j = realloc(gf->j, cap * sizeof *j);
		if (!j)
			return -ENOMEM;
		gf->j = j;
		gf->jcap = cap;
	}
	struct jentry *e = &gf->j[gf->jn++];
	e->kind = kind;
	e->leaf = l;
	e->old_next_id = gf->next_id;
	e->old_cursor_set = l->d.cursor_set;
	memcpy(e->old_cursor, l->d.cursor, 16);
	return 0;
}

bool gf_commit(struct gfilter *gf)
{
	bool due = false;
	pthread_mutex_lock(&gf->mu);
	for (size_t i = 0; i < gf->n; i++) {
		struct gf_leaf *l = gf->v[i];
		l->d.keys = (uint64_t)((int64_t)l->d.keys + l->batch);
		due |= l->batch > 0 && l->d.state == GF_ACTIVE && l->d.keys > l->capacity;
		l->batch = 0;
		cbf_undo_clear(&l->undo);
	}
	bool freed = false;
	for (size_t i = 0; i < gf->jn; i++) {
		struct gf_leaf *l = gf->j[i].leaf;
		if (gf->j[i].kind == J_FINISH && l->d.state == GF_DROPPED) {
			gf_leaf_unlink(gf, l);
			gf_leaf_free(l);
			gf->splits++;
			freed = true;
		}
	}
	if (freed) /* the shape may have been a dropped leaf's */
		gf_lookup_refresh(gf);
	gf->jn = 0;
	pthread_mutex_unlock(&gf->mu);
	return due;
}

static void undo_start(struct gfilter *gf, struct jentry *e)
{
	struct gf_leaf *p = e->leaf;
	for (unsigned j = 0; j < (1u << p->d.child_bits); j++) {
		struct gf_leaf *c = p->child[j];
		p->child[j] = NULL;
		if (!c)
			continue;
		gf_leaf_unlink(gf, c);
		if (gf->mode == GF_READWRITE) {
			char path[4096];
			path_of(gf, c->d.id, path, sizeof path);
			unlink(path);
		}
		gf_leaf_free(c);
	}
	p->d.state = GF_ACTIVE;
	p->d.child_bits = 0;
	gf->next_id = e->old_next_id;
}

void gf_rollback(struct gfilter *gf)
{
	pthread_mutex_lock(&gf->mu);
	for (size_t i = 0; i < gf->n; i++) {
		struct gf_leaf *l = gf->v[i];
		cbf_undo_rollback(l->f, &l->undo, 0);
		l->batch = 0;
	}
	while (gf->jn) {
		struct jentry *e = &gf->j[--gf->jn];
		struct gf_leaf *l = e->leaf;
		if (e->kind == J_START) {
			undo_start(gf, e);
		} else if (e->kind == J_FINISH) {
			l->d.state = GF_SPLITTING;
			for (unsigned j = 0; j < (1u << l->d.child_bits); j++) {
				l->child[j]->d.state = GF_CHILD;
				l->child[j]->d.parent = l->d.id;
			}
		}
		l->d.cursor_set = e->old_cursor_set;
		memcpy(l->d.cursor, e->old_cursor, 16);
	}
	/* The tree is as it was at the last commit, which was whole. */
	(void)gf_dir_rebuild(gf);
	gf_lookup_refresh(gf);
	pthread_mutex_unlock(&gf->mu);
}

/* ---- statistics ---- */

/* Share of a splitting leaf's range that lies at or below its cursor. */
static double moved_share(const struct gf_leaf *l)
{
	if (!l->d.cursor_set)
		return 0;
	uint64_t top = gf_md5_top(l->d.cursor) << l->d.depth;
	return ((double)top + 1) / 18446744073709551616.0;
}

void gf_stats(struct gfilter *gf, bool fill, struct gf_stats *s)
{
	memset(s, 0, sizeof *s);
	pthread_mutex_lock(&gf->mu);
	for (size_t i = 0; i < gf->n; i++) {
		const struct gf_leaf *l = gf->v[i];
		if (l->d.state == GF_DROPPED)
			continue;
		double rate = cbf_theoretical_fpr(&l->d.g, l->d.keys);
		double share = ldexp(1.0, -(int)l->d.depth);
		if (l->d.state == GF_SPLITTING) {
			share *= 1 - moved_share(l);
			s->splitting = true;
		} else if (l->d.state == GF_CHILD) {
			/* the part of the child's range the cursor has passed */
			const struct gf_leaf *p = gf_leaf_by_id(gf, l->d.parent);
			double done = p ? moved_share(p) * (1u << p->d.child_bits) : 0;
			double j = (double)(l->d.prefix & ((1u << (p ? p->d.child_bits : 0)) - 1));
			done = done - j < 0 ? 0 : done - j > 1 ? 1 : done - j;
			share *= done;
			s->children++;
		}
		if (gf_routed(l))
			s->leaves++;
		if (gf_routed(l) && l->d.depth > s->max_depth)
			s->max_depth = l->d.depth;
		s->fpr_model += share * rate;
		if (rate > s->worst_leaf_fpr)
			s->worst_leaf_fpr = rate;
		s->bytes += cbf_bytes(l->f);
		s->keys += l->d.keys;
		s->counters += l->d.g.nlines * CBF_LINE_COUNTERS;
		if (fill) {
			uint64_t nz, sat;
			cbf_fill(l->f, &nz, &sat);
			s->nonzero += nz;
			s->saturated += sat;
			s->fpr_estimate += share * cbf_estimated_fpr(l->f);
		}
	}
	s->splits = gf->splits;
	pthread_mutex_unlock(&gf->mu);
}

/* ---- stray files ---- */

void gf_remove_strays(const struct gfilter *gf)
{
	if (gf->mode != GF_READWRITE)
		return;
	char path[4096];
	snprintf(path, sizeof path, "%s/filter.d", gf->dir);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		unsigned id;
		char tail;
		if (sscanf(e->d_name, "leaf-%u%c", &id, &tail) != 1 || live_leaf(gf, id))
			continue;
		unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}
