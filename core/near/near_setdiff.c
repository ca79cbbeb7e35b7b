/* near_setdiff.c - a delta page's shingle set kept as the difference
 * from its base's set (near.h, "sets kept as differences"; nearset.h
 * format 5): every reader's resolve of a row (a chain of differences
 * decoded down from a whole row), the difference written by the delta
 * step (near_set_diff), and the differences from a base written whole
 * again (materialized) before its set goes or changes, or when a
 * dependent's record stops hanging on it. The tables themselves, the
 * bands and the check and rebuild are near_lsh.c's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "near_int.h"

/* Blob k's set, its row (`row`, when read already; else looked up)
 * resolved: a whole row decoded, a difference
 * decoded against its base's set, itself resolved, following at most
 * NEAR_SET_DIFF_DEPTH differences (*depth: how many; may be NULL). A
 * base without a set row, a longer chain or a row that does not decode:
 * -EINVAL, a damaged row (fsck reports it; --repair makes it again from
 * the page). -ENOENT: k has no row. */
int near_set_resolve_row(MDB_txn *txn, struct store *st, const struct blobkey *k, const MDB_val *row,
			 struct nearset *s, unsigned *depth)
{
	MDB_val rows[NEAR_SET_DIFF_DEPTH + 1];
	struct blobkey cur = *k;
	unsigned d = 0;
	for (;;) {
		uint8_t kb[BLOBKEY_BYTES];
		MDB_val key = near_fp_key(kb, &cur);
		int rc = 0;
		if (!d && row)
			rows[0] = *row;
		else
			rc = mdb_get(txn, st->db_nearfeat, &key, &rows[d]);
		if (rc)
			return d && rc == MDB_NOTFOUND ? -EINVAL : pd_mdb_err(rc);
		if (!nearset_is_diff(rows[d].mv_data, rows[d].mv_size))
			break;
		if (d == NEAR_SET_DIFF_DEPTH || nearset_diff_base(rows[d].mv_data, rows[d].mv_size, &cur))
			return -EINVAL;
		d++;
	}
	if (depth)
		*depth = d;
	int rc = nearset_decode(rows[d].mv_data, rows[d].mv_size, s);
	if (rc || !d)
		return rc;
	struct nearset *base = malloc(sizeof *base);
	if (!base)
		return -ENOMEM;
	for (unsigned i = d; i-- > 0 && !rc;) {
		*base = *s;
		rc = nearset_diff_decode(rows[i].mv_data, rows[i].mv_size, base, s);
	}
	free(base);
	return rc;
}

/* ---- the cache of resolved sets (near.h) ---- */

#define CACHE_WAYS 2

struct cached_set {
	bool used;
	struct blobkey k;
	uint64_t id;      /* this fill's, unique in its cache */
	uint64_t used_at; /* its fill's id, or (fixed) that of the last hit */
	uint64_t base_id; /* a difference: the fill of the base set it was resolved against */
	unsigned depth;   /* the differences followed */
	size_t row_len;
	uint8_t *row; /* the row decoded (NEARSET_MAX_BYTES; none in a fixed cache) */
	struct nearset s;
};

struct near_set_cache {
	uint64_t fills;           /* the last fill's id */
	uint64_t decoded, hits;   /* lookups decoded, and answered from the cache */
	bool fixed;               /* no set changes while it is used (near_set_cache_fixed) */
	size_t slots;
	uint8_t *rows;            /* the slots' rows, NEARSET_MAX_BYTES each (not fixed) */
	struct cached_set slot[];
};

static struct near_set_cache *cache_alloc(size_t slots, bool fixed)
{
	/* a slot's pages touched when it is first filled */
	struct near_set_cache *c = calloc(1, sizeof *c + slots * sizeof c->slot[0]);
	if (c && !fixed && !(c->rows = calloc(slots, NEARSET_MAX_BYTES))) {
		free(c);
		return NULL;
	}
	if (c) {
		c->slots = slots;
		c->fixed = fixed;
		for (size_t i = 0; c->rows && i < slots; i++)
			c->slot[i].row = c->rows + i * NEARSET_MAX_BYTES;
	}
	return c;
}

struct near_set_cache *near_set_cache_new(void)
{
	return cache_alloc(NEAR_SET_CACHE_SLOTS, false);
}

struct near_set_cache *near_set_cache_fixed(size_t slots)
{
	slots -= slots % CACHE_WAYS;
	return slots ? cache_alloc(slots, true) : NULL;
}

void near_set_cache_free(struct near_set_cache *c)
{
	if (c)
		free(c->rows);
	free(c);
}

void near_set_cache_counts(const struct near_set_cache *c, uint64_t *hits, uint64_t *decoded)
{
	*hits = c ? c->hits : 0;
	*decoded = c ? c->decoded : 0;
}

/* The CACHE_WAYS slots blob k may take (two: a set that collides with
 * another one in use keeps its place, the older one goes: the older fill,
 * or in a fixed cache the one used longer ago). */
static struct cached_set *cache_ways(struct near_set_cache *c, const struct blobkey *k)
{
	uint32_t h = (uint32_t)k->md5[0] | (uint32_t)k->md5[1] << 8 | (uint32_t)k->md5[2] << 16;
	return &c->slot[(h ^ k->variant * 0x9e3779b1u) % (c->slots / CACHE_WAYS) * CACHE_WAYS];
}

/* The entry of blob k, if any. */
static struct cached_set *cache_find(struct near_set_cache *c, const struct blobkey *k)
{
	struct cached_set *w = cache_ways(c, k);
	for (size_t i = 0; i < CACHE_WAYS; i++)
		if (w[i].used && blobkey_equal(&w[i].k, k))
			return &w[i];
	return NULL;
}

/* Is e's set decoded from row (against base fill base_id, when a
 * difference)? (A fixed cache keeps no rows: fixed_hit answers.) */
static bool cache_holds(const struct cached_set *e, const MDB_val *row, bool diff, uint64_t base_id)
{
	return e && e->row && e->row_len == row->mv_size && !memcmp(e->row, row->mv_data, row->mv_size) &&
	       (!diff || e->base_id == base_id);
}

/* Keep blob k's set s, resolved from row (a difference: against base
 * fill base_id, depth differences deep): its fill's id. The entry of k
 * is replaced, else a free slot or the older fill of its ways is taken;
 * a row longer than a whole set's is not kept (k's entry goes). */
static uint64_t cache_keep(struct near_set_cache *c, const struct blobkey *k, const MDB_val *row, uint64_t base_id,
			   unsigned depth, const struct nearset *s)
{
	uint64_t id = ++c->fills;
	struct cached_set *e = cache_find(c, k);
	if (row->mv_size > NEARSET_MAX_BYTES) {
		if (e)
			e->used = false;
		return id;
	}
	if (!e) {
		struct cached_set *w = cache_ways(c, k);
		e = &w[0];
		for (size_t i = 1; i < CACHE_WAYS && e->used; i++)
			if (!w[i].used || w[i].used_at < e->used_at)
				e = &w[i];
	}
	uint8_t *keep = e->row;
	*e = (struct cached_set){ .used = true, .k = *k, .id = id, .used_at = id, .base_id = base_id,
				  .depth = depth, .row_len = row->mv_size, .row = keep, .s = *s };
	if (keep)
		memcpy(keep, row->mv_data, row->mv_size);
	return id;
}

/* A set that a fixed cache answers without its rows read again (no set
 * changes meanwhile): its entry, within the budget, marked used. */
static struct cached_set *fixed_hit(struct near_set_cache *c, const struct blobkey *k, unsigned budget)
{
	struct cached_set *e = cache_find(c, k);
	if (!e || e->depth > budget)
		return NULL;
	e->used_at = ++c->fills;
	return e;
}

/* near_set_resolve_row through cache c: `budget` differences may still be
 * followed; `nested`: k is a base named by a difference (no row: the
 * difference is damaged, -EINVAL). *id: the fill s comes from. A fixed
 * cache answers a set it holds at once, and keeps the bases alone: a
 * walk meets every other set once. */
static int resolve_cached(MDB_txn *txn, struct store *st, struct near_set_cache *c, const struct blobkey *k,
			  const MDB_val *row, unsigned budget, bool nested, struct nearset *s, unsigned *depth,
			  uint64_t *id)
{
	struct cached_set *hit = c->fixed ? fixed_hit(c, k, budget) : NULL;
	if (hit) {
		c->hits++;
		*s = hit->s;
		*depth = hit->depth;
		*id = hit->id;
		return 0;
	}
	MDB_val v;
	if (row) {
		v = *row;
	} else {
		uint8_t kb[BLOBKEY_BYTES];
		MDB_val key = near_fp_key(kb, k);
		int mrc = mdb_get(txn, st->db_nearfeat, &key, &v);
		if (mrc)
			return nested && mrc == MDB_NOTFOUND ? -EINVAL : pd_mdb_err(mrc);
	}
	bool diff = nearset_is_diff(v.mv_data, v.mv_size);
	uint64_t base_id = 0;
	unsigned d = 0;
	int rc = 0;
	if (diff) { /* the base first: s holds its set, base_id its fill */
		struct blobkey base;
		if (!budget || nearset_diff_base(v.mv_data, v.mv_size, &base))
			return -EINVAL;
		if ((rc = resolve_cached(txn, st, c, &base, NULL, budget - 1, true, s, &d, &base_id)))
			return rc;
		d++;
	}
	struct cached_set *e = cache_find(c, k); /* after the base's fill, which may have taken its slot */
	if (cache_holds(e, &v, diff, base_id)) {
		c->hits++;
		*s = e->s;
		*depth = e->depth;
		*id = e->id;
		return 0;
	}
	if (diff) {
		struct nearset *base = malloc(sizeof *base);
		if (!base)
			return -ENOMEM;
		*base = *s;
		rc = nearset_diff_decode(v.mv_data, v.mv_size, base, s);
		free(base);
	} else {
		rc = nearset_decode(v.mv_data, v.mv_size, s);
	}
	if (rc)
		return rc;
	c->decoded++;
	*depth = d;
	*id = !c->fixed || nested ? cache_keep(c, k, &v, base_id, d, s) : ++c->fills;
	return 0;
}

/* Blob k's set resolved (near_set_resolve_row), through c when not NULL
 * (*id, may be NULL: the fill it comes from; 0 without c). */
static int set_resolve(MDB_txn *txn, struct store *st, struct near_set_cache *c, const struct blobkey *k,
		       const MDB_val *row, struct nearset *s, unsigned *depth, uint64_t *id)
{
	uint64_t fill = 0;
	unsigned d;
	int rc = c ? resolve_cached(txn, st, c, k, row, NEAR_SET_DIFF_DEPTH, false, s, &d, &fill)
		   : near_set_resolve_row(txn, st, k, row, s, &d);
	if (!rc && depth)
		*depth = d;
	if (id)
		*id = fill;
	return rc;
}

int near_set_resolve_row_cached(MDB_txn *txn, struct store *st, struct near_set_cache *c, const struct blobkey *k,
				const MDB_val *row, struct nearset *s)
{
	return set_resolve(txn, st, c, k, row, s, NULL, NULL);
}

/* Are a and b the same set as decoded (what a row of either form gives)? */
static bool same_set(const struct nearset *a, const struct nearset *b)
{
	return a->has == b->has && a->complete == b->complete && a->shingles == b->shingles && a->n == b->n &&
	       a->bits == b->bits && a->legacy_bands == b->legacy_bands &&
	       !memcmp(a->h, b->h, a->n * sizeof a->h[0]);
}

/* Blob k's set s written whole in place of its row. */
int near_set_put_whole(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct nearset *s)
{
	uint8_t kb[BLOBKEY_BYTES], vb[NEARSET_MAX_BYTES];
	MDB_val key = near_fp_key(kb, k), v = { nearset_encode(s, vb), vb };
	return v.mv_size ? pd_mdb_err(mdb_put(txn, st->db_nearfeat, &key, &v, 0)) : -EINVAL;
}

/* The base blob dep's row names when it is a difference (1), else 0. */
static int row_diff_base(MDB_txn *txn, struct store *st, const struct blobkey *dep, struct blobkey *base)
{
	uint8_t kb[BLOBKEY_BYTES];
	MDB_val key = near_fp_key(kb, dep), v;
	int rc = mdb_get(txn, st->db_nearfeat, &key, &v);
	if (rc)
		return rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
	return nearset_is_diff(v.mv_data, v.mv_size) && !nearset_diff_base(v.mv_data, v.mv_size, base);
}

/* Blob dep's set, if kept as a difference from base's, written whole
 * (the same set): base's set is about to go or change. A row that does
 * not decode stays as it is (fsck's to report and make again). */
static int materialize_on(MDB_txn *txn, struct store *st, const struct blobkey *dep, const struct blobkey *base)
{
	struct blobkey named;
	int rc = row_diff_base(txn, st, dep, &named);
	if (rc <= 0 || !blobkey_equal(&named, base))
		return rc < 0 ? rc : 0; /* not a difference from base: nothing to do
					 * (a positive value would read as "refused"
					 * to the caller that is letting go of base) */
	struct nearset *s = malloc(sizeof *s);
	if (!s)
		return -ENOMEM;
	rc = near_set_read(txn, st, dep, s);
	if (!rc)
		rc = near_set_put_whole(txn, st, dep, s);
	free(s);
	return rc == -EINVAL ? 0 : rc;
}

int near_keys_push(struct near_keys *l, const MDB_val *key)
{
	if (key->mv_size != BLOBKEY_BYTES)
		return 0; /* cannot be named; fsck reports it */
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		uint8_t(*v)[BLOBKEY_BYTES] = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	memcpy(l->v[l->n++], key->mv_data, BLOBKEY_BYTES);
	return 0;
}

struct dependents {
	MDB_txn *txn;
	struct store *st;
	struct near_keys deps;
};

/* A delta on base whose set is a difference from base's: kept for later
 * (the link rows are walked with a cursor of meta open: no writes). */
static int collect_diff_dep(void *ctx, const struct blobkey *base, const struct blobkey *dep)
{
	struct dependents *d = ctx;
	struct blobkey named;
	int rc = row_diff_base(d->txn, d->st, dep, &named);
	if (rc <= 0 || !blobkey_equal(&named, base))
		return rc < 0 ? rc : 0; /* the walk goes on past another base's */
	uint8_t kb[BLOBKEY_BYTES];
	MDB_val key = near_fp_key(kb, dep);
	return near_keys_push(&d->deps, &key);
}

/* Every set kept as a difference from blob k's, written whole: k's set is
 * about to go or change. A difference is only ever written against the
 * base of its page's delta record, and written whole again when that
 * record stops hanging on it (near_set_unlinked), so the differences from
 * k are among the deltas on k (blob.h's link rows), and there are at most
 * NEAR_SET_DIFFS_PER_BASE of them (near_set_diff). */
int near_set_materialize_dependents(MDB_txn *txn, struct store *st, const struct blobkey *k)
{
	struct dependents d = { .txn = txn, .st = st };
	int rc = blob_delta_dependents_each(txn, st, k, collect_diff_dep, &d);
	for (size_t i = 0; i < d.deps.n && !rc; i++) {
		struct blobkey dep;
		blobkey_decode(d.deps.v[i], &dep);
		rc = materialize_on(txn, st, &dep, k);
	}
	free(d.deps.v);
	return rc;
}

int near_set_unlinked(MDB_txn *txn, struct store *st, const struct blobkey *base, const struct blobkey *dep)
{
	return st->has_nearset ? materialize_on(txn, st, dep, base) : 0;
}

int near_set_diff(MDB_txn *txn, struct store *st, struct near_set_cache *cache, const struct blobkey *k,
		  const struct blobkey *base)
{
	if (!st->has_nearset || st->near_sets_full || st->format < PD_FORMAT_SET_DIFF)
		return 0;
	/* a bound on the sets written whole when base's goes */
	size_t ndeps;
	int rc = blob_delta_dependents(txn, st, base, NULL, NEAR_SET_DIFFS_PER_BASE + 1, &ndeps);
	if (rc || ndeps > NEAR_SET_DIFFS_PER_BASE)
		return rc;
	uint8_t kb[BLOBKEY_BYTES];
	MDB_val key = near_fp_key(kb, k), row;
	if ((rc = mdb_get(txn, st->db_nearfeat, &key, &row)))
		return rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
	if (nearset_is_diff(row.mv_data, row.mv_size))
		return 0;
	size_t whole = row.mv_size;
	struct nearset *s = malloc(3 * sizeof *s);
	uint8_t *vb = malloc(NEARSET_DIFF_MAX_BYTES);
	if (!s || !vb) {
		free(s);
		free(vb);
		return -ENOMEM;
	}
	struct nearset *bs = s + 1, *back = s + 2;
	unsigned depth = 0;
	size_t len = 0;
	/* k's set as its whole row holds it, base's resolved; a chain no
	 * longer than the records' (a base at most BLOB_DELTA_DEPTH - 1
	 * deep), checked all the same */
	uint64_t base_fill = 0;
	if (!set_resolve(txn, st, cache, k, &row, s, NULL, NULL) &&
	    !set_resolve(txn, st, cache, base, NULL, bs, &depth, &base_fill) && depth < NEAR_SET_DIFF_DEPTH)
		len = nearset_diff_encode(s, bs, base, vb);
	/* kept only when shorter, and only when it decodes to the very set */
	if (len && len < whole && !nearset_diff_decode(vb, len, bs, back) && same_set(back, s)) {
		MDB_val v = { len, vb };
		rc = pd_mdb_err(mdb_put(txn, st->db_nearfeat, &key, &v, 0));
		/* the set as its new row resolves (the same): k is the next
		 * pages' candidate */
		if (!rc && cache)
			cache_keep(cache, k, &v, base_fill, depth + 1, back);
	}
	free(s);
	free(vb);
	return rc;
}

int near_set_get_cached(MDB_txn *txn, struct store *st, struct near_set_cache *cache, const struct blobkey *k,
			struct near_sig *sig)
{
	sig->has_set = false;
	if (!st->has_nearset)
		return 0;
	int rc = set_resolve(txn, st, cache, k, NULL, &sig->set, NULL, NULL);
	if (rc == -ENOENT || rc == -EINVAL)
		return 0; /* none, or damaged (fsck's to report): the sketch confirms */
	sig->has_set = !rc;
	return rc;
}

int near_set_get(MDB_txn *txn, struct store *st, const struct blobkey *k, struct near_sig *sig)
{
	return near_set_get_cached(txn, st, NULL, k, sig);
}

int near_set_read(MDB_txn *txn, struct store *st, const struct blobkey *k, struct nearset *s)
{
	return near_set_resolve_row(txn, st, k, NULL, s, NULL);
}
