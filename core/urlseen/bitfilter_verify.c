/* bitfilter_verify.c - the URL-seen filter's statistics and structure
 * check (see bitfilter.c for the design). */
#include "bitfilter_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- statistics and checks ---- */

int bitfilter_stats(struct bitfilter *f, struct bitfilter_stats *st)
{
	struct scan s;
	int rc = bf_scan_all(f, &s);
	if (rc)
		return rc;
	memset(st, 0, sizeof *st);
	st->keys = s.keys;
	st->leaves = s.leaves;
	st->depth = f->depth;
	st->k = f->k;
	st->lines_per_key = f->lpk;
	st->max_leaf_lines = f->max_leaf_lines;
	st->target_fpr = f->fpr;
	st->model_fpr = s.mean;
	st->bits_bytes = s.lines * BITFILTER_LINE_BYTES;
	st->theoretical_bytes = (double)s.keys * -log(f->fpr) / (M_LN2 * M_LN2) / 8;
	st->log_bytes = s.chunks * CHUNK_BYTES;
	st->file_bytes = f->hdr->frontier;
	for (uint32_t i = 0; i < f->hdr->free_hw && i < FREE_MAX; i++)
		st->free_bytes += f->freel[i].len;
	st->lost_bytes = f->hdr->lost;
	st->grows = f->hdr->grows;
	st->splits = f->hdr->splits;
	return 0;
}

struct verify_ctx {
	struct bf_extent *v; /* every extent in use or free */
	size_t n, cap;
	char *msg;
	size_t msglen;
	int rc;
};

static int vpush(struct verify_ctx *c, uint64_t off, uint64_t len)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 256;
		struct bf_extent *v = realloc(c->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = (struct bf_extent){ off, len };
	return 0;
}

static int vfail(struct verify_ctx *c, const char *what, uint32_t id)
{
	if (c->msg && c->msglen)
		snprintf(c->msg, c->msglen, "leaf %u: %s", id, what);
	return -EUCLEAN;
}

static int verify_leaf(struct bitfilter *f, void *ctx, uint32_t id, uint32_t j)
{
	struct verify_ctx *c = ctx;
	const struct bf_leaf *e = &f->leaves[id];
	int rc;
	(void)j;
	if (!bf_leaf_ok(f, e))
		return vfail(c, "bad geometry or offsets", id);
	uint64_t chunks = tail_chunks(e->tail);
	uint64_t need = (e->count + CHUNK_KEYS - 1) / CHUNK_KEYS;
	/* one more chunk than the count needs: a kill between the two stores
	 * of an append, harmless */
	if (chunks != need && !(chunks == e->count / CHUNK_KEYS + 1))
		return vfail(c, "chunk count does not match key count", id);
	if ((rc = vpush(c, e->bits_off, (bits_len(e->nlines) + UNIT - 1) / UNIT * UNIT)) != 0)
		return rc;
	uint64_t off = e->chunk_first;
	for (uint64_t i = 0; i < chunks; i++) {
		if (!bf_region_ok(f, off, CHUNK_BYTES))
			return vfail(c, "chunk outside the file", id);
		if ((rc = vpush(c, off, CHUNK_BYTES)) != 0)
			return rc;
		uint64_t next;
		if (i + 1 == chunks) {
			if (off != tail_off(e->tail))
				return vfail(c, "last chunk is not the tail", id);
			break;
		}
		if ((rc = bf_pread_all(f->fd, &next, sizeof next, off)) != 0)
			return rc;
		off = next;
	}
	return 0;
}

static int ext_cmp(const void *a, const void *b)
{
	const struct bf_extent *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

int bitfilter_verify(struct bitfilter *f, char *msg, size_t msglen)
{
	struct verify_ctx c = { .msg = msg, .msglen = msglen };
	int rc;

	if (msg && msglen)
		msg[0] = 0;
	if (f->hdr->frontier < DATA_START || f->hdr->frontier % UNIT) {
		if (msg && msglen)
			snprintf(msg, msglen, "bad frontier %llu", (unsigned long long)f->hdr->frontier);
		return -EUCLEAN;
	}
	memset(f->ref, 0, BITFILTER_MAX_LEAVES);
	rc = bf_walk(f, bf_mark_ref, NULL);
	if (rc == 0)
		rc = bf_walk(f, verify_leaf, &c);
	else if (msg && msglen)
		snprintf(msg, msglen, "directory does not describe a tree of leaves");
	for (uint32_t i = 0; rc == 0 && i < f->hdr->free_hw && i < FREE_MAX; i++) {
		const struct bf_extent *e = &f->freel[i];
		if (!e->len)
			continue;
		if (!bf_region_ok(f, e->off, e->len) || e->len % UNIT) {
			if (msg && msglen)
				snprintf(msg, msglen, "free extent %u outside the file", i);
			rc = -EUCLEAN;
		} else {
			rc = vpush(&c, e->off, e->len);
		}
	}
	if (rc == 0) {
		qsort(c.v, c.n, sizeof *c.v, ext_cmp);
		for (size_t i = 1; i < c.n; i++) {
			if (c.v[i - 1].off + c.v[i - 1].len > c.v[i].off) {
				if (msg && msglen)
					snprintf(msg, msglen, "space at %llu used twice",
						 (unsigned long long)c.v[i].off);
				rc = -EUCLEAN;
				break;
			}
		}
	}
	free(c.v);
	return rc;
}
