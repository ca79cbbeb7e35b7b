/* gfilter_split.c - the steps of a leaf's split: which leaf splits, its
 * children's geometry, moving keys to the children in chunks behind a
 * cursor, and the finish that routes to them (design in gfilter.h). */
#include "gfilter_int.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- splitting ---- */

static struct gf_leaf *splitting_leaf(const struct gfilter *gf)
{
	for (size_t i = 0; i < gf->n; i++)
		if (gf->v[i]->d.state == GF_SPLITTING)
			return gf->v[i];
	return NULL;
}

/* The routed leaf most over its capacity, NULL if none is. Other threads
 * than the writer see the committed counts only. */
static struct gf_leaf *fullest_leaf(const struct gfilter *gf, bool writer)
{
	struct gf_leaf *best = NULL;
	double worst = 1;
	for (size_t i = 0; i < gf->n; i++) {
		struct gf_leaf *l = gf->v[i];
		uint64_t keys = writer ? gf_leaf_keys(l) : l->d.keys;
		double load = (double)keys / (double)(l->capacity ? l->capacity : 1);
		if (l->d.state == GF_ACTIVE && load > worst) {
			worst = load;
			best = l;
		}
	}
	return best;
}

bool gf_split_wanted(const struct gfilter *gf)
{
	struct gfilter *m = (struct gfilter *)gf;
	pthread_mutex_lock(&m->mu);
	bool want = splitting_leaf(gf) || fullest_leaf(gf, false);
	pthread_mutex_unlock(&m->mu);
	return want;
}

/* The children's geometry: one leaf `growth` times the keys, or, past
 * max_leaf_lines, 2^b leaves that share that capacity. */
static int children_geometry(const struct gfilter *gf, const struct gf_leaf *l, unsigned *bits,
			     struct cbf_geometry *g)
{
	double want = gf->cfg.growth * (double)(gf_leaf_keys(l) > l->capacity ? gf_leaf_keys(l) : l->capacity);
	unsigned b = 0;
	int rc = cbf_geometry_for((uint64_t)ceil(want), gf->cfg.target_fpr, gf->cfg.lines_per_key, g);
	while (!rc && g->nlines > gf->cfg.max_leaf_lines && b < GF_MAX_CHILD_BITS &&
	       l->d.depth + b + 1 <= GF_MAX_DEPTH) {
		b++;
		rc = cbf_geometry_for((uint64_t)ceil(want / (double)(1u << b)), gf->cfg.target_fpr,
				      gf->cfg.lines_per_key, g);
	}
	g->seed = l->d.g.seed;
	*bits = b;
	return rc;
}

static int split_start(struct gfilter *gf, struct gf_leaf *p)
{
	unsigned b;
	struct cbf_geometry g;
	int rc = children_geometry(gf, p, &b, &g);
	if (rc)
		return rc;
	if ((uint64_t)gf->next_id + (1u << b) - 1 > GF_MAX_LEAF_ID)
		return -ENOSPC;
	if ((rc = gf_journal_push(gf, J_START, p)))
		return rc;
	pthread_mutex_lock(&gf->mu);
	p->d.state = GF_SPLITTING;
	p->d.child_bits = (uint8_t)b;
	p->d.cursor_set = 0;
	for (unsigned j = 0; j < (1u << b) && !rc; j++) {
		struct gf_leaf_desc d = { .id = gf->next_id++, .parent = p->d.id,
					  .depth = (uint8_t)(p->d.depth + b),
					  .state = GF_CHILD, .prefix = p->d.prefix << b | j, .g = g };
		struct gf_leaf *c;
		if (!(rc = gf_leaf_add(gf, &d, &c)) && (rc = gf_leaf_open_counters(gf, c, true, NULL))) {
			gf_leaf_unlink(gf, c);
			gf_leaf_free(c);
		} else if (!rc) {
			p->child[j] = c;
		}
	}
	gf_lookup_refresh(gf); /* p is routed the long way now */
	pthread_mutex_unlock(&gf->mu);
	/* A failure is undone with the batch (undo_start). */
	return rc;
}

int gf_split_next(struct gfilter *gf, struct gf_split *s)
{
	struct gf_leaf *l = splitting_leaf(gf);
	if (!l) {
		pthread_mutex_lock(&gf->mu);
		l = fullest_leaf(gf, true);
		pthread_mutex_unlock(&gf->mu);
		if (!l)
			return -ENOENT;
		int rc = split_start(gf, l);
		if (rc)
			return rc;
	}
	s->leaf = l->d.id;
	s->depth = l->d.depth;
	s->prefix = l->d.prefix;
	s->cursor_set = l->d.cursor_set;
	memcpy(s->cursor, l->d.cursor, 16);
	return 0;
}

static struct gf_leaf *splitting_by_id(const struct gfilter *gf, uint32_t id)
{
	struct gf_leaf *l = gf_leaf_by_id(gf, id);
	return l && l->d.state == GF_SPLITTING ? l : NULL;
}

int gf_split_move(struct gfilter *gf, uint32_t from, const uint8_t md5[16],
		  const struct cbf_pos *old, const struct cbf_exact_ops *ops, void *ctx,
		  uint32_t *leaf, struct cbf_pos *pos)
{
	struct gf_leaf *p = splitting_by_id(gf, from);
	if (!p || !gf_in_range(md5, p->d.depth, p->d.prefix))
		return -EINVAL;
	struct gf_leaf *c = p->child[gf_md5_bits(md5, p->d.depth, p->d.child_bits)];
	cbf_positions(c->f, md5, pos);
	int rc = gf_leaf_update(p, old, false, ops, ctx);
	if (!rc)
		rc = gf_leaf_update(c, pos, true, ops, ctx);
	*leaf = c->d.id;
	return rc;
}

void gf_split_advance(struct gfilter *gf, uint32_t leaf, const uint8_t md5[16])
{
	struct gf_leaf *p = splitting_by_id(gf, leaf);
	if (!p || gf_journal_push(gf, J_CURSOR, p))
		return;
	pthread_mutex_lock(&gf->mu);
	p->d.cursor_set = 1;
	memcpy(p->d.cursor, md5, 16);
	pthread_mutex_unlock(&gf->mu);
}

int gf_split_finish(struct gfilter *gf, uint32_t leaf)
{
	struct gf_leaf *p = splitting_by_id(gf, leaf);
	if (!p)
		return -EINVAL;
	if (gf_leaf_keys(p) != 0)
		return -EUCLEAN;
	int rc = gf_journal_push(gf, J_FINISH, p);
	if (rc)
		return rc;
	pthread_mutex_lock(&gf->mu);
	p->d.state = GF_DROPPED;
	for (unsigned j = 0; j < (1u << p->d.child_bits); j++) {
		p->child[j]->d.state = GF_ACTIVE;
		p->child[j]->d.parent = 0;
	}
	rc = gf_dir_rebuild(gf);
	gf_lookup_refresh(gf);
	pthread_mutex_unlock(&gf->mu);
	return rc;
}

