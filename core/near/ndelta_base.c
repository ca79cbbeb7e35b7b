/* ndelta_base.c - a page's base chosen among its near-duplicates, and its
 * delta against the best of them. The rules (which candidates, in what
 * order, which may be a base) are in ndelta.h. */
#include "ndelta_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "near.h"

/* ---- choosing a base ------------------------------------------------------ */

struct cand {
	struct blobkey k;
	unsigned dist; /* simhash distance; UINT32_MAX: found by LSH only */
	double res;    /* estimated resemblance of the shingle sets */
	unsigned depth; /* of its record, as fit_base read it */
};

struct cands {
	const struct blobkey *self;
	struct cand v[NDELTA_CANDIDATES];
	size_t n, max;
};

static int add_cand(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	struct cands *c = ctx;
	(void)h;
	if (blobkey_equal(k, c->self))
		return 0;
	for (size_t i = 0; i < c->n; i++)
		if (blobkey_equal(&c->v[i].k, k)) {
			if (dist < c->v[i].dist)
				c->v[i].dist = dist;
			return 0;
		}
	if (c->n == c->max)
		return 1;
	c->v[c->n++] = (struct cand){ .k = *k, .dist = dist };
	return 0;
}

static int add_lsh_cand(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	(void)dist;
	return add_cand(ctx, k, h, UINT32_MAX);
}

/* Can record b of a candidate be the base of a page of page_size bytes
 * (its depth aside)? A page of one chunk is one frame against its whole
 * base, so its base is of one chunk too (a read of it would otherwise
 * decode a large base whole); a larger page is a chunked delta, whose
 * chunks each take a window of the base (pack.h), so any base will do. */
static bool usable_base(const struct fprec *b, uint64_t page_size)
{
	return (b->flags & FPREC_PACKED) && !(b->flags & (FPREC_BAD | FPREC_SIG_PENDING)) &&
	       (b->size <= NDELTA_MAX_BYTES || page_size > NDELTA_MAX_BYTES) && b->size <= NDELTA_BIG_MAX_BYTES;
}

/* Did record b come before record r? A record outside the nursery has had
 * its step already, so it comes before one still in the nursery (pack.h);
 * otherwise records come in the order they were appended (pack ids
 * ascend, main and nursery alike). */
static bool older(struct store *st, const struct fprec *b, const struct fprec *r)
{
	bool bn = blob_in_nursery(st, b), rn = blob_in_nursery(st, r);
	if (bn != rn)
		return rn;
	return b->pack < r->pack || (b->pack == r->pack && b->pack_off < r->pack_off);
}

/* May candidate k be the base of page record r (*depth: its record's)? Less than
 * BLOB_DELTA_DEPTH deep, and, when it is a whole record, appended before
 * r: two pages signed together would otherwise each choose the other, and
 * only one of them could become a delta (a page with a delta on it stays
 * whole); so deltas go from the newer page to the older. A candidate that
 * is a delta already had its own step (its place is that of its delta,
 * not of its page). Its records' headers are read in a read transaction
 * of its own, kept short: a reader holds back the reuse of the pages that
 * commits free meanwhile, and LMDB's file grows. */
static bool fit_base(struct store *st, const struct blobkey *k, const struct fprec *r, unsigned *depth)
{
	MDB_txn *txn;
	struct fprec b;
	if (store_read_begin(st, &txn))
		return false;
	bool ok = blob_get(txn, st, k, &b) == 0 && blob_delta_depth(txn, st, &b, depth) == 0 &&
		  *depth < BLOB_DELTA_DEPTH && (*depth > 0 || older(st, &b, r));
	store_read_end(st, txn);
	return ok;
}

/* How many candidates a page's base is chosen among (-o delta_candidates). */
static size_t candidates_bound(const struct store *st)
{
	unsigned n = st->opts.delta_candidates ? st->opts.delta_candidates : NDELTA_DEFAULT_CANDIDATES;
	return n < NDELTA_CANDIDATES ? n : NDELTA_CANDIDATES;
}

/* The candidates of page k (signature sig), usable ones only, with their
 * resemblance to it. */
static int find_cands(struct store *st, struct near_set_cache *cache, const struct blobkey *k, const struct fprec *r,
		      struct cands *c)
{
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	struct near_sig sig;
	near_sig_of_rec(r, &sig);
	unsigned maxd = st->near_tables ? st->near_tables - 1 : 0;
	c->self = k;
	c->n = 0;
	c->max = candidates_bound(st);
	if (st->near_tables && (r->flags & FPREC_HAS_SIMHASH))
		rc = near_find(txn, st, r->simhash, maxd, add_cand, c);
	if (!rc && !(rc = near_set_get_cached(txn, st, cache, k, &sig)) && sig.has_set)
		rc = near_lsh_find(txn, st, &sig.set, add_lsh_cand, c);
	size_t kept = 0;
	for (size_t i = 0; i < c->n && !rc; i++) {
		struct fprec b;
		struct near_sig bs;
		if (blob_get(txn, st, &c->v[i].k, &b) || !usable_base(&b, r->size))
			continue;
		c->v[i].res = 0;
		if (sig.has_set && near_set_get_cached(txn, st, cache, &c->v[i].k, &bs) == 0 && bs.has_set) {
			bool exact;
			c->v[i].res = nearset_resemblance(&sig.set, &bs.set, &exact);
		}
		c->v[kept++] = c->v[i];
	}
	c->n = kept;
	store_read_end(st, txn);
	return rc;
}

static int by_resemblance(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->res != y->res)
		return x->res > y->res ? -1 : 1;
	return x->dist < y->dist ? -1 : x->dist > y->dist;
}

static int by_distance(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->dist != y->dist)
		return x->dist < y->dist ? -1 : 1;
	return x->res > y->res ? -1 : x->res < y->res;
}

/* Rank the candidates and keep, in order, the first that fit page
 * record r (one, or NDELTA_TRIALS for the trial rule); how many. */
static size_t rank(struct store *st, struct cands *c, const struct fprec *r, unsigned rule)
{
	if (!c->n)
		return 0;
	qsort(c->v, c->n, sizeof c->v[0], rule == NDELTA_RULE_SIMHASH ? by_distance : by_resemblance);
	size_t want = rule == NDELTA_RULE_TRIAL ? NDELTA_TRIALS : 1, kept = 0;
	for (size_t i = 0; i < c->n && kept < want; i++)
		if (fit_base(st, &c->v[i].k, r, &c->v[i].depth))
			c->v[kept++] = c->v[i];
	return kept;
}

/* ---- encoding ---------------------------------------------------------------- */

int ndelta_level(const struct store *st)
{
	return st->opts.pack_level > 0 ? st->opts.pack_level : PACK_DEFAULT_LEVEL;
}

int ndelta_read_page(struct store *st, const struct blobkey *k, struct fprec *r, void **out)
{
	int rc = blob_read(st, k, r);
	return rc ? rc : blob_read_packed_alloc(st, k, r, out);
}

static int encode_delta(struct store *st, const struct blobkey *k, const struct fprec *r, const void *page,
			const struct blobkey *bk, struct pack_rec *out)
{
	struct fprec br;
	void *base;
	int rc = ndelta_read_page(st, bk, &br, &base);
	if (rc)
		return rc;
	struct pack_encode_opts o = { .level = ndelta_level(st), .chunk_shift = PACK_DEFAULT_CHUNK_SHIFT, .base = base,
				      .base_len = (size_t)br.size, .base_variant = bk->variant };
	memcpy(o.base_md5, bk->md5, 16);
	rc = pack_encode_page(k->md5, k->variant, r->xxh128, page, -1, r->size, &o, out);
	free(base);
	return rc;
}

int ndelta_best_delta(struct store *st, struct near_set_cache *cache, unsigned rule, const struct blobkey *k,
		      const struct fprec *r, void **page, struct pack_rec *best, struct blobkey *base, unsigned *base_depth,
		      uint64_t *examined)
{
	struct cands *c = malloc(sizeof *c);
	if (!c)
		return -ENOMEM;
	int rc = find_cands(st, cache, k, r, c);
	*examined += c->n;
	size_t tries = rc ? 0 : rank(st, c, r, rule);
	if (tries && !*page && (rc = blob_read_packed_alloc(st, k, r, page)))
		tries = 0;
	for (size_t i = 0; i < tries; i++) {
		struct pack_rec rec = { 0 };
		if (encode_delta(st, k, r, *page, &c->v[i].k, &rec))
			continue; /* a base that cannot be read: try the next */
		if (!best->buf || rec.len < best->len) {
			pack_rec_free(best);
			*best = rec;
			*base = c->v[i].k;
			*base_depth = c->v[i].depth;
		} else {
			pack_rec_free(&rec);
		}
	}
	free(c);
	return rc;
}

