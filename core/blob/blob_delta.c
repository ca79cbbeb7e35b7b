/* blob_delta.c - page records stored as deltas against other pages, and
 * bases kept alive for them. The rows and the rules are in blob.h.
 *
 * Who chooses a base and when is not decided here (near/ndelta.c, after
 * a page is signed); this file keeps the records consistent: a delta's
 * link row is written and removed in the transaction that points a blob at
 * it or frees it, and a base whose last reference goes while deltas hang
 * on it is kept (its pack record live, its fingerprint record gone) until
 * the last of them is re-encoded or freed.
 */
#include "blob.h"

#include <errno.h>
#include <string.h>

#define LINK_KEY (4 + 2 * BLOBKEY_BYTES)
#define KEPT_KEY (4 + BLOBKEY_BYTES)
#define KEPT_VAL 48

static MDB_val link_key(uint8_t kb[LINK_KEY], const struct blobkey *base, const struct blobkey *dep)
{
	memcpy(kb, "dlnk", 4);
	blobkey_encode(base, kb + 4);
	if (dep)
		blobkey_encode(dep, kb + 4 + BLOBKEY_BYTES);
	return (MDB_val){ dep ? LINK_KEY : KEPT_KEY, kb };
}

static MDB_val kept_key(uint8_t kb[KEPT_KEY], const struct blobkey *k)
{
	memcpy(kb, "dkep", 4);
	blobkey_encode(k, kb + 4);
	return (MDB_val){ KEPT_KEY, kb };
}

int blob_delta_base(struct store *st, const struct fprec *r, struct blobkey *base)
{
	if (!(r->flags & FPREC_PACKED))
		return 0;
	struct pack_rec_hdr h;
	int rc = blob_rec_hdr(st, r, &h);
	if (rc)
		return rc;
	if (!pack_enc_is_delta(h.encoding))
		return 0;
	memcpy(base->md5, h.base_md5, 16);
	base->variant = h.base_variant;
	return 1;
}

int blob_delta_kept_get(MDB_txn *txn, struct store *st, const struct blobkey *k, struct fprec *out)
{
	uint8_t kb[KEPT_KEY];
	MDB_val key = kept_key(kb, k), v;
	int rc = pd_mdb_err(mdb_get(txn, st->db_meta, &key, &v));
	if (rc)
		return rc;
	if (v.mv_size != KEPT_VAL)
		return -EUCLEAN;
	const uint8_t *p = v.mv_data;
	memset(out, 0, sizeof *out);
	out->flags = FPREC_PACKED;
	out->pack = get_le32(p);
	out->pack_off = get_le64(p + 4);
	out->pack_len = get_le64(p + 12);
	out->size = get_le64(p + 20);
	memcpy(out->xxh128, p + 28, 16);
	return 0;
}

static int kept_put(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct fprec *r)
{
	uint8_t kb[KEPT_KEY], vb[KEPT_VAL] = { 0 };
	MDB_val key = kept_key(kb, k), v = { KEPT_VAL, vb };
	put_le32(vb, r->pack);
	put_le64(vb + 4, r->pack_off);
	put_le64(vb + 12, r->pack_len);
	put_le64(vb + 20, r->size);
	memcpy(vb + 28, r->xxh128, 16);
	return pd_mdb_err(mdb_put(txn, st->db_meta, &key, &v, 0));
}

int blob_delta_kept_set_loc(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct pack_loc *loc)
{
	struct fprec r;
	int rc = blob_delta_kept_get(txn, st, k, &r);
	if (rc)
		return rc;
	r.pack = loc->pack;
	r.pack_off = loc->off;
	r.pack_len = loc->len;
	return kept_put(txn, st, k, &r);
}

int blob_delta_base_rec(MDB_txn *txn, struct store *st, const struct blobkey *k, struct fprec *r)
{
	int rc = blob_get(txn, st, k, r);
	return rc == -ENOENT ? blob_delta_kept_get(txn, st, k, r) : rc;
}

int blob_delta_depth(MDB_txn *txn, struct store *st, const struct fprec *r, unsigned *depth)
{
	struct fprec cur = *r;
	for (unsigned d = 0; d <= BLOB_DELTA_DEPTH; d++) {
		struct blobkey base;
		int rc = blob_delta_base(st, &cur, &base);
		if (rc <= 0) {
			*depth = d;
			return rc;
		}
		if ((rc = blob_delta_base_rec(txn, st, &base, &cur)))
			return rc == -ENOENT ? -EIO : rc;
	}
	return -EIO;
}

/* The rows of meta under prefix pfx from key `from` on (from starts with
 * pfx, flen <= LINK_KEY), each to fn until it returns nonzero (> 0: stop
 * there, no error). */
static int meta_prefix_from(MDB_txn *txn, struct store *st, const uint8_t *pfx, size_t plen, const uint8_t *from,
			    size_t flen, int (*fn)(void *ctx, const MDB_val *k, const MDB_val *v), void *ctx)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_meta, &c));
	if (rc)
		return rc;
	uint8_t kb[LINK_KEY];
	memcpy(kb, from, flen);
	MDB_val k = { flen, kb }, v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); mrc == 0 && !rc; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size < plen || memcmp(k.mv_data, pfx, plen))
			break;
		rc = fn(ctx, &k, &v);
	}
	mdb_cursor_close(c);
	if (rc)
		return rc > 0 ? 0 : rc;
	return mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
}

static int meta_prefix(MDB_txn *txn, struct store *st, const uint8_t *pfx, size_t plen,
		       int (*fn)(void *ctx, const MDB_val *k, const MDB_val *v), void *ctx)
{
	return meta_prefix_from(txn, st, pfx, plen, pfx, plen, fn, ctx);
}

struct kept_walk {
	int (*fn)(void *ctx, const struct blobkey *k, const struct fprec *r);
	void *ctx;
	MDB_txn *txn;
	struct store *st;
};

static int kept_step(void *p, const MDB_val *k, const MDB_val *v)
{
	struct kept_walk *w = p;
	(void)v;
	if (k->mv_size != KEPT_KEY)
		return 0;
	struct blobkey bk;
	struct fprec r;
	blobkey_decode((const uint8_t *)k->mv_data + 4, &bk);
	int rc = blob_delta_kept_get(w->txn, w->st, &bk, &r);
	return rc ? rc : w->fn(w->ctx, &bk, &r);
}

int blob_delta_kept_each(MDB_txn *txn, struct store *st,
			 int (*fn)(void *ctx, const struct blobkey *k, const struct fprec *r), void *ctx)
{
	struct kept_walk w = { fn, ctx, txn, st };
	return meta_prefix(txn, st, (const uint8_t *)"dkep", 4, kept_step, &w);
}

struct dep_walk {
	struct blobkey *v;
	size_t max, n;
	int (*fn)(void *ctx, const struct blobkey *base, const struct blobkey *dep);
	void *ctx;
};

/* The base and the dependent of a link row's key; false for another row
 * under the prefix. */
static bool link_row_keys(const MDB_val *k, struct blobkey *base, struct blobkey *dep)
{
	if (k->mv_size != LINK_KEY)
		return false;
	blobkey_decode((const uint8_t *)k->mv_data + 4, base);
	blobkey_decode((const uint8_t *)k->mv_data + 4 + BLOBKEY_BYTES, dep);
	return true;
}

static int dep_step(void *p, const MDB_val *k, const MDB_val *v)
{
	struct dep_walk *w = p;
	(void)v;
	struct blobkey base, dep;
	if (!link_row_keys(k, &base, &dep))
		return 0;
	if (w->fn)
		return w->fn(w->ctx, &base, &dep);
	if (w->n == w->max)
		return 1;
	if (w->v)
		w->v[w->n] = dep;
	w->n++;
	return 0;
}

int blob_delta_dependents(MDB_txn *txn, struct store *st, const struct blobkey *base, struct blobkey *v,
			  size_t max, size_t *n)
{
	uint8_t kb[LINK_KEY];
	link_key(kb, base, NULL);
	struct dep_walk w = { v, max, 0, NULL, NULL };
	int rc = meta_prefix(txn, st, kb, KEPT_KEY, dep_step, &w);
	*n = w.n;
	return rc;
}

int blob_delta_dependents_each(MDB_txn *txn, struct store *st, const struct blobkey *base,
			       int (*fn)(void *ctx, const struct blobkey *base, const struct blobkey *dep), void *ctx)
{
	uint8_t kb[LINK_KEY];
	link_key(kb, base, NULL);
	struct dep_walk w = { NULL, 0, 0, fn, ctx };
	return meta_prefix(txn, st, kb, KEPT_KEY, dep_step, &w);
}

int blob_delta_link_each(MDB_txn *txn, struct store *st,
			 int (*fn)(void *ctx, const struct blobkey *base, const struct blobkey *dep), void *ctx)
{
	struct dep_walk w = { NULL, 0, 0, fn, ctx };
	return meta_prefix(txn, st, (const uint8_t *)"dlnk", 4, dep_step, &w);
}

struct usage_walk {
	MDB_txn *txn;
	struct store *st;
	struct blob_delta_usage *u;
	size_t batch, rows;  /* rows a snapshot, and taken under this one */
	uint8_t last[LINK_KEY]; /* the last row taken, where the next snapshot goes on */
	bool resumed;        /* past the first snapshot: skip last when found again */
};

static int usage_row(void *ctx, const MDB_val *k, const MDB_val *v)
{
	(void)v;
	struct usage_walk *w = ctx;
	struct blobkey base, dep;
	if (!link_row_keys(k, &base, &dep))
		return 0;
	if (w->resumed && memcmp(k->mv_data, w->last, LINK_KEY) == 0)
		return 0;
	if (w->rows == w->batch)
		return 1;
	memcpy(w->last, k->mv_data, LINK_KEY);
	w->rows++;
	struct fprec r;
	struct pack_rec_hdr h;
	w->u->deltas++;
	if (blob_delta_base_rec(w->txn, w->st, &dep, &r) || !(r.flags & FPREC_PACKED))
		return 0;
	w->u->delta_bytes += r.pack_len;
	if (r.size > (1ull << PACK_DEFAULT_CHUNK_SHIFT) && blob_rec_hdr(w->st, &r, &h) == 0 && h.nchunks > 1) {
		w->u->chunked++;
		w->u->chunked_bytes += r.pack_len;
	}
	return 0;
}

int blob_delta_usage_batched(struct store *st, size_t batch, struct blob_delta_usage *out)
{
	memset(out, 0, sizeof *out);
	struct usage_walk w = { .st = st, .u = out, .batch = batch ? batch : 1 };
	memcpy(w.last, "dlnk", 4);
	size_t from = 4;
	int rc = store_read_begin(st, &w.txn);
	while (!rc) {
		w.rows = 0;
		rc = meta_prefix_from(w.txn, st, (const uint8_t *)"dlnk", 4, w.last, from, usage_row, &w);
		if (rc || w.rows < w.batch)
			break;
		w.resumed = true;
		from = LINK_KEY;
		rc = store_read_renew(st, &w.txn);
	}
	if (w.txn)
		store_read_end(st, w.txn);
	return rc;
}

int blob_delta_usage(struct store *st, struct blob_delta_usage *out)
{
	return blob_delta_usage_batched(st, BLOB_DELTA_USAGE_BATCH, out);
}

int blob_delta_linked(MDB_txn *txn, struct store *st, const struct blobkey *base, const struct blobkey *dep)
{
	uint8_t kb[LINK_KEY];
	MDB_val key = link_key(kb, base, dep), v;
	int rc = mdb_get(txn, st->db_meta, &key, &v);
	return rc == MDB_NOTFOUND ? 0 : rc ? pd_mdb_err(rc) : 1;
}

static bool has_dependents(MDB_txn *txn, struct store *st, const struct blobkey *k, int *rc)
{
	struct blobkey one;
	size_t n = 0;
	*rc = blob_delta_dependents(txn, st, k, &one, 1, &n);
	return n > 0;
}

/* A kept base's pack record out of its pack's live totals (its dictionary
 * was counted out when it was kept). */
static int pack_live_less(struct wtx *w, const struct fprec *r)
{
	struct blob_pack_live l;
	int rc = blob_pack_live_get(w->txn, w->st, r->pack, &l);
	if (rc)
		return rc;
	l.bytes = l.bytes > r->pack_len ? l.bytes - r->pack_len : 0;
	l.records = l.records ? l.records - 1 : 0;
	return blob_pack_live_put(w->txn, w->st, r->pack, &l);
}

static int let_go_of_base(struct wtx *w, const struct blobkey *k, const struct fprec *r, unsigned depth);

/* The listeners hear that dep's record now hangs on base (linked: the
 * compactor's window made it a delta on base) or no longer does. */
static int tell_link(struct wtx *w, const struct blobkey *base, const struct blobkey *dep, bool linked)
{
	int rc = 0;
	for (unsigned i = 0; !rc && i < w->st->n_blob_listeners; i++) {
		const struct blob_listener *l = w->st->blob_listeners[i];
		int (*heard)(struct wtx *, const struct blobkey *, const struct blobkey *) =
			linked ? l->linked : l->unlinked;
		if (heard)
			rc = heard(w, base, dep);
	}
	return rc;
}

/* Kept base k's row removed and its record's bytes dead (*r: the record;
 * 1 when k had no kept row). */
static int drop_kept_row(struct wtx *w, const struct blobkey *k, struct fprec *r)
{
	int rc = blob_delta_kept_get(w->txn, w->st, k, r);
	if (rc)
		return rc == -ENOENT ? 1 : rc;
	uint8_t kb[KEPT_KEY];
	MDB_val key = kept_key(kb, k);
	if ((rc = pd_mdb_err(mdb_del(w->txn, w->st->db_meta, &key, NULL))))
		return rc;
	struct pack_loc loc;
	blob_rec_loc(r, &loc);
	return (rc = pack_live_less(w, r)) ? rc : wtx_punch_after(w, &loc);
}

/* Are records a and b both deltas on one base? */
static bool same_base(struct store *st, const struct fprec *a, const struct fprec *b)
{
	struct blobkey ba, bb;
	return blob_delta_base(st, a, &ba) == 1 && blob_delta_base(st, b, &bb) == 1 && blobkey_equal(&ba, &bb);
}

/* Kept base k has no delta left: its row goes and its record is dead
 * bytes now. live: k's own record when it lives on by its own references
 * (its bytes were stored again after it was kept, so the kept row stood
 * beside it and would otherwise hold its record live with nothing on
 * it), else NULL. The kept record, if a delta, lets go of its own base,
 * unless the live record hangs on that same base: the link row (base, k)
 * is one for both. */
static int free_kept(struct wtx *w, const struct blobkey *k, const struct fprec *live, unsigned depth)
{
	struct fprec r;
	int rc = drop_kept_row(w, k, &r);
	if (rc)
		return rc > 0 ? 0 : rc;
	if (depth > BLOB_DELTA_DEPTH)
		return 0; /* a loop in damaged rows: fsck's to report */
	if (live && same_base(w->st, &r, live))
		return 0;
	/* a kept base that was a delta itself lets go of its own base */
	return let_go_of_base(w, k, &r, depth + 1);
}

/* Record r of k, if a delta, no longer hangs on its base: the link goes,
 * and a kept base left with no delta is freed (depth: how many kept bases
 * were freed on the way here, a bound against loops in damaged rows). */
static int let_go_of_base(struct wtx *w, const struct blobkey *k, const struct fprec *r, unsigned depth)
{
	struct blobkey base;
	int rc = blob_delta_base(w->st, r, &base);
	if (rc <= 0)
		return rc == -EIO ? 0 : rc; /* a damaged header: fsck reports a stray link */
	uint8_t lb[LINK_KEY];
	MDB_val lk = link_key(lb, &base, k);
	rc = mdb_del(w->txn, w->st->db_meta, &lk, NULL);
	if (rc && rc != MDB_NOTFOUND)
		return pd_mdb_err(rc);
	if ((rc = tell_link(w, &base, k, false)))
		return rc;
	bool more = has_dependents(w->txn, w->st, &base, &rc);
	if (rc || more)
		return rc;
	struct fprec live;
	bool lives = blob_get(w->txn, w->st, &base, &live) == 0;
	return free_kept(w, &base, lives ? &live : NULL, depth);
}

int blob_delta_forget(struct wtx *w, const struct blobkey *k, const struct fprec *r)
{
	return let_go_of_base(w, k, r, 1);
}

int blob_delta_release(struct wtx *w, const struct blobkey *k, const struct fprec *r)
{
	int rc;
	bool hung = has_dependents(w->txn, w->st, k, &rc);
	if (rc)
		return rc;
	if (hung) {
		/* Kept for its deltas. If the same bytes were stored and freed
		 * again meanwhile, the older kept record gives way to this
		 * one (the same bytes: the deltas decode against either). */
		struct fprec old;
		if (blob_delta_kept_get(w->txn, w->st, k, &old) == 0) {
			struct pack_loc loc;
			blob_rec_loc(&old, &loc);
			if ((rc = pack_live_less(w, &old)) || (rc = wtx_punch_after(w, &loc)))
				return rc;
		}
		if ((rc = blob_dict_account(w, r->pack_dict, -1)))
			return rc;
		return kept_put(w->txn, w->st, k, r);
	}
	if ((rc = blob_delta_forget(w, k, r)))
		return rc;
	struct pack_loc loc;
	blob_rec_loc(r, &loc);
	if ((rc = blob_pack_account(w, r, -1))) /* dead bytes now */
		return rc;
	return wtx_punch_after(w, &loc);
}

int blob_delta_keep_unreferenced(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct fprec *r)
{
	int rc;
	if (!(r->flags & FPREC_PACKED))
		return 0;
	bool hung = has_dependents(txn, st, k, &rc);
	if (rc || !hung)
		return rc;
	struct fprec old;
	if (blob_delta_kept_get(txn, st, k, &old) == 0)
		return 0; /* kept already: its deltas decode against that record */
	return (rc = kept_put(txn, st, k, r)) ? rc : 1;
}

static int link_put(struct wtx *w, const struct blobkey *base, const struct blobkey *dep)
{
	uint8_t lb[LINK_KEY];
	MDB_val lk = link_key(lb, base, dep), v = { 0, lb };
	return pd_mdb_err(mdb_put(w->txn, w->st->db_meta, &lk, &v, 0));
}

/* May k's record become a delta on base? */
static int delta_allowed(struct wtx *w, const struct blobkey *k, const struct blobkey *base, bool *ok)
{
	*ok = false;
	if (blobkey_equal(k, base))
		return 0;
	int rc;
	if (has_dependents(w->txn, w->st, k, &rc) || rc)
		return rc;
	struct fprec b;
	if ((rc = blob_get(w->txn, w->st, base, &b)))
		return rc == -ENOENT ? 0 : rc;
	if (!(b.flags & FPREC_PACKED) || (b.flags & FPREC_BAD))
		return 0;
	unsigned depth;
	if ((rc = blob_delta_depth(w->txn, w->st, &b, &depth)))
		return rc == -EIO ? 0 : rc;
	*ok = depth < BLOB_DELTA_DEPTH;
	return 0;
}

int blob_delta_move(struct wtx *w, const struct blobkey *k, const struct pack_loc *was, const struct pack_loc *loc,
		    uint32_t dict, const struct blobkey *base)
{
	struct fprec r;
	int rc = blob_get(w->txn, w->st, k, &r);
	if (rc == -ENOENT)
		return 1; /* freed meanwhile: the new record is dead bytes */
	if (rc)
		return rc;
	if (!(r.flags & FPREC_PACKED) || (r.flags & FPREC_BAD) || r.pack != was->pack || r.pack_off != was->off)
		return 1;
	if (base) {
		bool ok;
		if ((rc = delta_allowed(w, k, base, &ok)))
			return rc;
		if (!ok)
			return 1;
	}
	struct pack_loc old;
	blob_rec_loc(&r, &old);
	if ((rc = blob_delta_forget(w, k, &r)) || (rc = blob_pack_account(w, &r, -1)) ||
	    (rc = wtx_punch_after(w, &old)))
		return rc;
	blob_rec_set_loc(&r, loc, dict);
	if ((rc = blob_pack_account(w, &r, +1)) || (rc = blob_put(w->txn, w->st, k, &r)))
		return rc;
	if (!base)
		return 0;
	return link_put(w, base, k);
}

int blob_delta_link_cold(struct wtx *w, const struct blobkey *k, const struct blobkey *base)
{
	bool ok;
	int rc = delta_allowed(w, k, base, &ok);
	if (rc || !ok)
		return rc ? rc : 1;
	return (rc = link_put(w, base, k)) ? rc : tell_link(w, base, k, true);
}

struct heal_walk {
	struct wtx *w;
};

static int heal_step(void *p, const MDB_val *k, const MDB_val *v)
{
	struct wtx *w = ((struct heal_walk *)p)->w;
	(void)v;
	if (k->mv_size != LINK_KEY)
		return 0;
	struct blobkey dep;
	struct fprec r;
	blobkey_decode((const uint8_t *)k->mv_data + 4 + BLOBKEY_BYTES, &dep);
	if (blob_get(w->txn, w->st, &dep, &r) || !(r.flags & FPREC_BAD))
		return 0;
	r.flags &= (uint8_t)~FPREC_BAD;
	return blob_put(w->txn, w->st, &dep, &r);
}

int blob_delta_healed(struct wtx *w, const struct blobkey *k)
{
	uint8_t kb[LINK_KEY];
	link_key(kb, k, NULL);
	struct heal_walk hw = { w };
	return meta_prefix(w->txn, w->st, kb, KEPT_KEY, heal_step, &hw);
}
