/* gftree.c - the page filter's tree record (gfilter.h): its defaults,
 * the codec of the record the store keeps, and the trees of a new store
 * and of a fixed filter. Nothing here touches a leaf's counters. */
#include "gfilter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/byteorder.h"

#define GF_TREE_VERSION 1
#define GF_INITIAL_MIN_BITS 4      /* gf_tree_initial: up to 16 leaves ... */
#define GF_INITIAL_MIN_LINES 1024  /* ... of at least 64 KiB each */
#define TREE_HEADER_BYTES 48
#define TREE_LEAF_BYTES 72

void gf_config_default(struct gf_config *c, double target_fpr, uint32_t lines_per_key)
{
	c->target_fpr = target_fpr;
	c->fmax = 2 * target_fpr;
	c->lines_per_key = lines_per_key ? lines_per_key : 2;
	c->max_leaf_lines = UINT64_C(1) << 14;
	c->growth = 1.25;
}

static void put_f64(uint8_t *p, double x)
{
	uint64_t b;
	memcpy(&b, &x, 8);
	put_le64(p, b);
}

static double get_f64(const uint8_t *p)
{
	uint64_t b = get_le64(p);
	double x;
	memcpy(&x, &b, 8);
	return x;
}

size_t gf_tree_size(const struct gf_tree *t)
{
	return TREE_HEADER_BYTES + (size_t)t->n * TREE_LEAF_BYTES;
}

void gf_tree_encode(const struct gf_tree *t, uint8_t *out)
{
	put_le32(out, GF_TREE_VERSION);
	put_le32(out + 4, t->next_id);
	put_le32(out + 8, t->n);
	put_le32(out + 12, t->cfg.lines_per_key);
	put_f64(out + 16, t->cfg.target_fpr);
	put_f64(out + 24, t->cfg.fmax);
	put_f64(out + 32, t->cfg.growth);
	put_le64(out + 40, t->cfg.max_leaf_lines);
	uint8_t *p = out + TREE_HEADER_BYTES;
	for (uint32_t i = 0; i < t->n; i++, p += TREE_LEAF_BYTES) {
		const struct gf_leaf_desc *l = &t->leaf[i];
		put_le32(p, l->id);
		put_le32(p + 4, l->parent);
		p[8] = l->depth;
		p[9] = l->state;
		p[10] = l->child_bits;
		p[11] = l->cursor_set;
		put_le32(p + 12, l->prefix);
		put_le64(p + 16, l->g.nlines);
		put_le32(p + 24, l->g.k);
		put_le32(p + 28, l->g.lines_per_key);
		put_le64(p + 32, l->g.seed);
		put_le64(p + 40, l->keys);
		memcpy(p + 48, l->cursor, 16);
		memset(p + 64, 0, 8);
	}
}

bool gf_config_valid(const struct gf_config *c)
{
	return c->target_fpr > 0 && c->target_fpr < 1 && c->fmax >= c->target_fpr &&
	       c->fmax < 1 && (c->lines_per_key == 1 || c->lines_per_key == 2) &&
	       c->max_leaf_lines >= 1 && c->growth > 1 && c->growth <= 16;
}

int gf_tree_decode(const void *buf, size_t len, struct gf_tree *t)
{
	const uint8_t *in = buf;
	memset(t, 0, sizeof *t);
	if (len < TREE_HEADER_BYTES || get_le32(in) != GF_TREE_VERSION)
		return -EUCLEAN;
	t->next_id = get_le32(in + 4);
	t->n = get_le32(in + 8);
	t->cfg.lines_per_key = get_le32(in + 12);
	t->cfg.target_fpr = get_f64(in + 16);
	t->cfg.fmax = get_f64(in + 24);
	t->cfg.growth = get_f64(in + 32);
	t->cfg.max_leaf_lines = get_le64(in + 40);
	if (!gf_config_valid(&t->cfg) || t->n == 0 || t->n > GF_MAX_LEAF_ID ||
	    len != TREE_HEADER_BYTES + (size_t)t->n * TREE_LEAF_BYTES)
		return -EUCLEAN;
	if (!(t->leaf = calloc(t->n, sizeof *t->leaf)))
		return -ENOMEM;
	const uint8_t *p = in + TREE_HEADER_BYTES;
	for (uint32_t i = 0; i < t->n; i++, p += TREE_LEAF_BYTES) {
		struct gf_leaf_desc *l = &t->leaf[i];
		l->id = get_le32(p);
		l->parent = get_le32(p + 4);
		l->depth = p[8];
		l->state = p[9];
		l->child_bits = p[10];
		l->cursor_set = p[11];
		l->prefix = get_le32(p + 12);
		l->g.nlines = get_le64(p + 16);
		l->g.k = get_le32(p + 24);
		l->g.lines_per_key = get_le32(p + 28);
		l->g.seed = get_le64(p + 32);
		l->keys = get_le64(p + 40);
		memcpy(l->cursor, p + 48, 16);
		if (l->id >= t->next_id || l->id > GF_MAX_LEAF_ID || l->depth > GF_MAX_DEPTH ||
		    l->state > GF_CHILD || l->child_bits > GF_MAX_CHILD_BITS ||
		    (l->depth < 32 && l->prefix >> l->depth)) {
			gf_tree_free(t);
			return -EUCLEAN;
		}
	}
	return 0;
}

void gf_tree_free(struct gf_tree *t)
{
	free(t->leaf);
	t->leaf = NULL;
	t->n = 0;
}

int gf_tree_single(const struct gf_config *c, const struct cbf_geometry *g, struct gf_tree *t)
{
	memset(t, 0, sizeof *t);
	t->cfg = *c;
	t->next_id = 1;
	t->n = 1;
	if (!(t->leaf = calloc(1, sizeof *t->leaf)))
		return -ENOMEM;
	t->leaf[0].g = *g;
	return 0;
}

int gf_tree_initial(const struct gf_config *c, uint64_t expected, struct gf_tree *t)
{
	struct cbf_geometry g;
	unsigned b = 0;
	int rc = cbf_geometry_for(expected, c->target_fpr, c->lines_per_key, &g);
	while (!rc && g.nlines > c->max_leaf_lines && b < GF_MAX_DEPTH) {
		b++;
		rc = cbf_geometry_for((expected + (UINT64_C(1) << b) - 1) >> b, c->target_fpr,
				      c->lines_per_key, &g);
	}
	/* At least 16 leaves while each keeps 64 KiB: with fewer, the first
	 * splits hold a leaf and its children at once for a large part of
	 * the whole filter. */
	struct cbf_geometry more;
	while (!rc && b < GF_INITIAL_MIN_BITS &&
	       !cbf_geometry_for((expected + (UINT64_C(2) << b) - 1) >> (b + 1), c->target_fpr,
				 c->lines_per_key, &more) &&
	       more.nlines >= GF_INITIAL_MIN_LINES) {
		b++;
		g = more;
	}
	if (rc)
		return rc;
	memset(t, 0, sizeof *t);
	t->cfg = *c;
	t->n = t->next_id = 1u << b;
	if (!(t->leaf = calloc(t->n, sizeof *t->leaf)))
		return -ENOMEM;
	for (uint32_t i = 0; i < t->n; i++)
		t->leaf[i] = (struct gf_leaf_desc){ .id = i, .depth = (uint8_t)b, .prefix = i, .g = g };
	return 0;
}

void gf_leaf_path(uint32_t id, char out[GF_LEAF_PATH_MAX])
{
	if (id == 0)
		snprintf(out, GF_LEAF_PATH_MAX, "filter");
	else
		snprintf(out, GF_LEAF_PATH_MAX, "filter.d/leaf-%u", id);
}
