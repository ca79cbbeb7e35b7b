/* near_lsh.c - the shingle sets (nearfeat) and the LSH bands over them
 * (nearbands), the second candidate generator, the sets' check and
 * rebuild, pages read back for a pair too close to call. See near.h and
 * nearset.h; the sets kept as differences are near_setdiff.c's, the
 * conversion of layout 1 is near_layout.c, the check near_setcheck.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/byteorder.h"
#include "blob/blob.h"
#include "near_int.h"
#include "text/html.h"

int near_band_owners(MDB_txn *txn, struct store *st, size_t b, uint32_t key, const uint8_t *prefix,
		     const struct blobkey *except, near_hit_fn fn, void *ctx)
{
	uint8_t kb[BLOBKEY_BYTES] = { 0 };
	memcpy(kb, prefix, BAND_PREFIX);
	/* the keys first: fn may read other tables, never with a cursor open */
	struct blobkey keys[8];
	size_t n = 0;
	bool more = true;
	int rc = 0;
	while (more && !rc) {
		MDB_cursor *c;
		if ((rc = pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &c))))
			return rc;
		MDB_val k = { BLOBKEY_BYTES, kb }, v;
		int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		n = 0;
		while (mrc == 0 && k.mv_size == BLOBKEY_BYTES && !memcmp(k.mv_data, prefix, BAND_PREFIX) &&
		       n < sizeof keys / sizeof keys[0]) {
			blobkey_decode(k.mv_data, &keys[n++]);
			mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
		}
		more = mrc == 0 && k.mv_size == BLOBKEY_BYTES && !memcmp(k.mv_data, prefix, BAND_PREFIX);
		if (more)
			memcpy(kb, k.mv_data, BLOBKEY_BYTES); /* the next batch starts there */
		else if (mrc && mrc != MDB_NOTFOUND)
			rc = pd_mdb_err(mrc);
		mdb_cursor_close(c);
		struct nearset *s = n && !rc ? malloc(sizeof *s) : NULL;
		if (n && !rc && !s)
			rc = -ENOMEM;
		for (size_t i = 0; i < n && !rc; i++) {
			if (except && blobkey_equal(&keys[i], except))
				continue;
			int grc = near_set_read(txn, st, &keys[i], s);
			if (grc == -ENOENT || grc == -EINVAL)
				continue; /* no set, or one fsck reports */
			if (grc)
				rc = grc;
			else if (nearset_band(s, b) == key)
				rc = fn(ctx, &keys[i], 0, 0);
		}
		free(s);
	}
	return rc;
}

static int owner_found(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	(void)ctx, (void)k, (void)h, (void)dist;
	return 1;
}

/* Take out blob k's row of band b unless another blob of its prefix has
 * the same key there. */
static int del_band(MDB_txn *txn, struct store *st, const struct blobkey *k, size_t b, uint32_t key)
{
	int rc = near_band_owners(txn, st, b, key, k->md5, k, owner_found, NULL);
	if (rc)
		return rc > 0 ? 0 : rc;
	return near_band_del(txn, st, b, key, k->md5);
}

int near_add_sig(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct near_sig *sig)
{
	if (!sig->has)
		return 0;
	int rc = near_add(txn, st, k, sig->simhash);
	return rc ? rc : near_set_put(txn, st, k, sig);
}

int near_set_put(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct near_sig *sig)
{
	if (!sig->has || !sig->has_set || !st->has_nearset)
		return 0;
	/* the band keys of the values stored (a writable store is of the
	 * current layout) */
	struct nearset *s = malloc(sizeof *s);
	if (!s)
		return -ENOMEM;
	*s = sig->set;
	nearset_to_stored(s);
	uint8_t kb[BLOBKEY_BYTES], vb[NEARSET_MAX_BYTES];
	MDB_val key = near_fp_key(kb, k), v = { nearset_encode(s, vb), vb }, old;
	/* a set written again (signed again, repaired) may differ from the
	 * one other sets are kept as differences from */
	int rc = mdb_get(txn, st->db_nearfeat, &key, &old);
	rc = rc == MDB_NOTFOUND ? 0 : rc ? pd_mdb_err(rc) : near_set_materialize_dependents(txn, st, k);
	if (!rc)
		rc = pd_mdb_err(mdb_put(txn, st->db_nearfeat, &key, &v, 0));
	if (!rc)
		rc = near_put_bands(txn, st, k, s);
	free(s);
	return rc;
}

int near_set_remove(MDB_txn *txn, struct store *st, const struct blobkey *k)
{
	if (!st->has_nearset)
		return 0;
	struct nearset *s = malloc(sizeof *s);
	if (!s)
		return -ENOMEM;
	/* the sets kept as differences from this one, whole first */
	int rc = near_set_materialize_dependents(txn, st, k);
	if (!rc)
		rc = near_set_read(txn, st, k, s);
	uint8_t kb[BLOBKEY_BYTES];
	MDB_val key = near_fp_key(kb, k);
	if (!rc) {
		/* the set goes first: del_band asks the other blobs of the
		 * prefix, and this one has no set any more */
		int mrc = mdb_del(txn, st->db_nearfeat, &key, NULL);
		rc = mrc ? pd_mdb_err(mrc) : 0;
		for (size_t b = 0; b < NEARSET_BANDS && !rc; b++)
			rc = del_band(txn, st, k, b, nearset_band(s, b));
		free(s);
		return rc;
	}
	free(s);
	if (rc == -ENOENT)
		return 0;
	if (rc && rc != -EINVAL)
		return rc;
	int mrc = mdb_del(txn, st->db_nearfeat, &key, NULL);
	return mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
}

/* The one blob whose MD5 begins with prefix: 1 and *k, or 0 (none, or
 * several), or a negative errno. */
static int prefix_lone(MDB_txn *txn, struct store *st, const uint8_t *prefix, struct blobkey *k)
{
	uint8_t kb[BLOBKEY_BYTES] = { 0 };
	memcpy(kb, prefix, BAND_PREFIX);
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &c));
	if (rc)
		return rc;
	MDB_val key = { BLOBKEY_BYTES, kb }, v;
	int mrc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE), found = 0;
	if (!mrc && key.mv_size == BLOBKEY_BYTES && !memcmp(key.mv_data, prefix, BAND_PREFIX)) {
		blobkey_decode(key.mv_data, k);
		mrc = mdb_cursor_get(c, &key, &v, MDB_NEXT);
		found = !(mrc == 0 && key.mv_size == BLOBKEY_BYTES && !memcmp(key.mv_data, prefix, BAND_PREFIX));
	}
	mdb_cursor_close(c);
	return mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : found;
}

/* The prefixes of one find whose one blob is known: a page and its near
 * neighbours share several bands, and each is looked up once (a find's
 * callback adds and removes no blob). */
#define LONE_CACHE 32
struct lone_cache {
	uint8_t prefix[LONE_CACHE][BAND_PREFIX];
	struct blobkey k[LONE_CACHE];
	size_t n;
};

static const struct blobkey *lone_known(const struct lone_cache *lc, const uint8_t *prefix)
{
	for (size_t i = 0; i < lc->n; i++)
		if (!memcmp(lc->prefix[i], prefix, BAND_PREFIX))
			return &lc->k[i];
	return NULL;
}

/* The blobs a row stands for. A prefix with one blob is that blob's, its
 * set unread: a row goes with the last blob of its prefix whose set has it
 * (del_band), and fsck checks that every row has one (near_set_check). A
 * prefix of several blobs: those whose set has the row. */
static int row_owners(MDB_txn *txn, struct store *st, struct lone_cache *lc, size_t b, uint32_t key,
		      const uint8_t *prefix, near_hit_fn cb, void *ctx)
{
	const struct blobkey *known = lone_known(lc, prefix);
	if (known)
		return cb(ctx, known, 0, 0);
	struct blobkey k;
	int lone = prefix_lone(txn, st, prefix, &k);
	if (lone < 0)
		return lone;
	if (!lone)
		return near_band_owners(txn, st, b, key, prefix, NULL, cb, ctx);
	if (lc->n < LONE_CACHE) {
		memcpy(lc->prefix[lc->n], prefix, BAND_PREFIX);
		lc->k[lc->n++] = k;
	}
	return cb(ctx, &k, 0, 0);
}

/* The blobs of band b's rows for `key`. */
static int band_rows(MDB_txn *txn, struct store *st, MDB_cursor *c, struct lone_cache *lc, size_t b, uint32_t key,
		     near_hit_fn cb, void *ctx)
{
	uint8_t bi, vb[BAND_VAL], zero[BAND_PREFIX] = { 0 };
	MDB_val bk = band_idx(&bi, b), v = band_val(vb, key, zero);
	int rc = 0, mrc = mdb_cursor_get(c, &bk, &v, MDB_GET_BOTH_RANGE);
	while (mrc == 0 && !rc && v.mv_size == BAND_VAL && !memcmp(v.mv_data, vb, 4)) {
		uint8_t prefix[BAND_PREFIX];
		memcpy(prefix, (const uint8_t *)v.mv_data + 4, BAND_PREFIX);
		/* (cb writes nothing in the band table: the cursor holds) */
		if (!(rc = row_owners(txn, st, lc, b, key, prefix, cb, ctx)))
			mrc = mdb_cursor_get(c, &bk, &v, MDB_NEXT_DUP);
	}
	return rc ? rc : (mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0);
}

int near_lsh_find(MDB_txn *txn, struct store *st, const struct nearset *s, near_hit_fn cb, void *ctx)
{
	if (!st->has_nearset || !s->has)
		return 0;
	struct lone_cache *lc = malloc(sizeof *lc);
	/* the band keys of the store's rows, all computed in one pass over
	 * the hashes (a band at a time mixes each hash once per band: the
	 * delta step's sets come from nearfeat without their keys) */
	bool as_is = s->legacy_bands == st->near_sets_full, keyed = as_is && s->bands;
	struct nearset *at = keyed ? NULL : malloc(sizeof *at);
	int rc = lc && (at || keyed) ? 0 : -ENOMEM;
	if (rc) {
		free(lc);
		free(at);
		return rc;
	}
	if (at) {
		*at = *s;
		if (!as_is)
			near_set_for_store(st, at);
		if (!at->bands)
			nearset_bands(at);
		s = at;
	}
	lc->n = 0;
	/* band by band, and in a band the newest rows first */
	struct near_stage_cursors c;
	rc = near_band_cursors_open(txn, st, &c);
	for (size_t b = 0; b < NEARSET_BANDS && !rc; b++)
		for (size_t i = 0; i < c.n && !rc; i++)
			rc = band_rows(txn, st, c.c[i], lc, b, nearset_band(s, b), cb, ctx);
	near_stage_cursors_close(&c); /* (none open when the open failed) */
	free(lc);
	free(at);
	return rc > 0 ? 0 : rc;
}

int near_each_set(MDB_txn *txn, struct store *st,
		  int (*fn)(void *ctx, const MDB_val *key, const MDB_val *row, const struct nearset *s), void *ctx)
{
	struct nearset *s = malloc(sizeof *s);
	struct near_set_cache *cache = near_set_cache_fixed(NEAR_EACH_SET_CACHE_SLOTS); /* none without memory */
	MDB_cursor *cur;
	int rc = s ? pd_mdb_err(mdb_cursor_open(txn, st->db_nearfeat, &cur)) : -ENOMEM;
	if (rc) {
		near_set_cache_free(cache);
		free(s);
		return rc;
	}
	MDB_val key, v;
	int mrc;
	for (mrc = mdb_cursor_get(cur, &key, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(cur, &key, &v, MDB_NEXT)) {
		int drc = -EINVAL;
		if (key.mv_size == BLOBKEY_BYTES) {
			struct blobkey k;
			blobkey_decode(key.mv_data, &k);
			drc = near_set_resolve_row_cached(txn, st, cache, &k, &v, s);
		}
		if (drc && drc != -EINVAL)
			rc = drc;
		else
			rc = fn(ctx, &key, &v, drc ? NULL : s);
	}
	mdb_cursor_close(cur);
	near_set_cache_free(cache);
	free(s);
	return rc ? rc : (mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0);
}

struct lsh_ctx {
	MDB_txn *txn;
	struct store *st;
	/* rebuild: rows to delete (their blob has no signature), to make
	 * again from the page (they do not decode), to write whole (a
	 * difference from a base its record does not hang on) */
	struct near_keys drop, redo, whole;
};

int near_diff_unlinked(MDB_txn *txn, struct store *st, const MDB_val *row, const struct blobkey *k,
		       struct blobkey *base)
{
	if (!nearset_is_diff(row->mv_data, row->mv_size) || nearset_diff_base(row->mv_data, row->mv_size, base))
		return 0;
	int rc = blob_delta_linked(txn, st, base, k);
	return rc < 0 ? rc : !rc;
}

/* Is row a difference from a base whose own set the rebuild drops (the
 * base has no record, or one with no signature)? Then it is written whole
 * before the drop, or it would name a set that is gone. */
static bool diff_base_goes(MDB_txn *txn, struct store *st, const MDB_val *row)
{
	struct blobkey base;
	struct fprec r;
	if (!nearset_is_diff(row->mv_data, row->mv_size) || nearset_diff_base(row->mv_data, row->mv_size, &base))
		return false;
	int rc = blob_get(txn, st, &base, &r);
	return rc == -ENOENT || (!rc && !(r.flags & FPREC_HAS_SIMHASH));
}

static int rebuild_one(void *ctx, const MDB_val *key, const MDB_val *row, const struct nearset *s)
{
	struct lsh_ctx *c = ctx;
	if (key->mv_size != BLOBKEY_BYTES)
		return 0;
	struct blobkey k, base;
	struct fprec r;
	blobkey_decode(key->mv_data, &k);
	int rc = blob_get(c->txn, c->st, &k, &r);
	if (rc == -ENOENT || (!rc && !(r.flags & FPREC_HAS_SIMHASH)))
		return near_keys_push(&c->drop, key);
	if (!s) /* made again from the page, if its record can say which */
		return near_keys_push(rc ? &c->drop : &c->redo, key);
	if (rc)
		return rc;
	if ((rc = near_diff_unlinked(c->txn, c->st, row, &k, &base)) > 0 || (!rc && diff_base_goes(c->txn, c->st, row)))
		rc = near_keys_push(&c->whole, key);
	return rc ? rc : near_put_bands_settled(c->txn, c->st, &k, s);
}

/* The set of blob k (a row that does not decode) made again from its
 * page; none when the page gives none (its record is then confirmed by
 * the sketch computed from the page). */
static int redo_from_page(MDB_txn *txn, struct store *st, const uint8_t kb[BLOBKEY_BYTES])
{
	struct blobkey k;
	struct fprec r;
	blobkey_decode(kb, &k);
	int rc = blob_get(txn, st, &k, &r);
	struct near_sig *sig = malloc(sizeof *sig);
	if (!sig)
		return -ENOMEM;
	if (!rc)
		near_sig_of_blob(st, &k, &r, sig);
	if (!rc && sig->has && sig->has_set && sig->simhash == r.simhash) {
		rc = near_set_put(txn, st, &k, sig);
	} else {
		MDB_val key = { BLOBKEY_BYTES, (void *)kb };
		int mrc = mdb_del(txn, st->db_nearfeat, &key, NULL);
		rc = mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
	}
	free(sig);
	return rc;
}

int near_lsh_rebuild(MDB_txn *txn, struct store *st)
{
	if (!st->has_nearset)
		return 0;
	int rc = near_bands_drop(txn, st);
	struct lsh_ctx c = { .txn = txn, .st = st };
	if (!rc)
		rc = near_each_set(txn, st, rebuild_one, &c);
	/* the differences that must stand alone first, while every set they
	 * may name is still there */
	struct nearset *s = c.whole.n ? malloc(sizeof *s) : NULL;
	if (c.whole.n && !s)
		rc = rc ? rc : -ENOMEM;
	for (size_t i = 0; i < c.whole.n && !rc; i++) {
		struct blobkey k;
		blobkey_decode(c.whole.v[i], &k);
		if (!(rc = near_set_read(txn, st, &k, s)))
			rc = near_set_put_whole(txn, st, &k, s);
	}
	free(s);
	for (size_t i = 0; i < c.drop.n && !rc; i++) {
		MDB_val key = { BLOBKEY_BYTES, c.drop.v[i] };
		rc = pd_mdb_err(mdb_del(txn, st->db_nearfeat, &key, NULL));
	}
	for (size_t i = 0; i < c.redo.n && !rc; i++)
		rc = redo_from_page(txn, st, c.redo.v[i]);
	free(c.drop.v);
	free(c.whole.v);
	free(c.redo.v);
	return rc;
}

/* ---- the exact resemblance, pages read back ---- */

int near_full_of_fd(int fd, uint64_t size, uint32_t **h, size_t *n)
{
	*h = NULL;
	*n = 0;
	size_t len = size < HTML_MAX_INPUT ? (size_t)size : HTML_MAX_INPUT;
	void *p = len ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) : NULL;
	if (p == MAP_FAILED)
		return -errno;
	struct html_text t;
	int rc = html_extract(len ? p : "", len, 0, &t);
	if (p)
		munmap(p, len);
	if (rc)
		return rc;
	if (!t.binary)
		rc = nearset_full_of_text(t.text, t.len, h, n);
	html_text_free(&t);
	return rc;
}

int near_full_of_blob(struct store *st, const struct blobkey *k, uint32_t **h, size_t *n)
{
	*h = NULL;
	*n = 0;
	int fd = blob_open(st, k);
	if (fd < 0)
		return fd;
	struct stat sb;
	int rc = fstat(fd, &sb) ? -errno : near_full_of_fd(fd, (uint64_t)sb.st_size, h, n);
	close(fd);
	return rc;
}

/* The sketch of blob k's page read back into sig (left without one when
 * the page cannot be read or gives none). */
static void sketch_read_back(struct store *st, const struct blobkey *k, struct near_sig *sig)
{
	struct near_sig *x = malloc(sizeof *x);
	int fd = x ? blob_open(st, k) : -ENOMEM;
	struct stat sb;
	if (fd >= 0 && !fstat(fd, &sb) && !near_sig_of_fd(fd, (uint64_t)sb.st_size, x) && x->has_sketch) {
		sig->has_sketch = true;
		memcpy(sig->sketch, x->sketch, MINHASH_BYTES);
	}
	if (fd >= 0)
		close(fd);
	free(x);
}

int near_confirm_sketches(struct store *st, const struct blobkey *ka, const struct near_sig *a,
			  const struct blobkey *kb, const struct near_sig *b, bool *yes, double *r)
{
	if ((a->has_sketch && b->has_sketch) || !a->has || !b->has) {
		*yes = near_confirm_r(a, b, r);
		return 0;
	}
	struct near_sig *x = malloc(2 * sizeof *x);
	if (!x)
		return -ENOMEM;
	x[0] = *a;
	x[1] = *b;
	const struct blobkey *k[2] = { ka, kb };
	for (size_t i = 0; i < 2; i++)
		if (!x[i].has_sketch && k[i])
			sketch_read_back(st, k[i], &x[i]);
	*yes = near_confirm_r(&x[0], &x[1], r);
	free(x);
	return 0;
}

int near_confirm_pair(struct store *st, const struct blobkey *ka, const struct near_sig *a, const struct blobkey *kb,
		      const struct near_sig *b, bool *yes, double *r)
{
	if (!a->has_set || !b->has_set)
		return near_confirm_sketches(st, ka, a, kb, b, yes, r);
	bool exact;
	*r = nearset_resemblance(&a->set, &b->set, &exact);
	if (nearset_borderline(exact, *r)) {
		uint32_t *ha = NULL, *hb = NULL;
		size_t na, nb;
		int rc = near_full_of_blob(st, ka, &ha, &na);
		if (!rc)
			rc = near_full_of_blob(st, kb, &hb, &nb);
		if (!rc)
			*r = nearset_full_resemblance(ha, na, hb, nb);
		free(ha);
		free(hb);
		if (rc && rc != -ENOENT && rc != -EIO && rc != -ENOMEM)
			return rc; /* those keep the estimate */
	}
	*yes = *r >= NEARSET_NEAR;
	return 0;
}
