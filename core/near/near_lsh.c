/* near_lsh.c - the shingle sets (nearfeat) and the LSH bands over them
 * (nearlsh), the second candidate generator. See near.h and nearset.h. */
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

static MDB_val fp_key(uint8_t kb[BLOBKEY_BYTES], const struct blobkey *k)
{
	blobkey_encode(k, kb);
	return (MDB_val){ BLOBKEY_BYTES, kb };
}

static MDB_val band_key(uint8_t b[4], uint32_t band)
{
	put_le32(b, band);
	return (MDB_val){ 4, b };
}

static int put_bands(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct nearset *s)
{
	uint8_t kb[BLOBKEY_BYTES], bb[4];
	blobkey_encode(k, kb);
	for (size_t b = 0; b < NEARSET_BANDS; b++) {
		MDB_val key = band_key(bb, s->band[b]), v = { BLOBKEY_BYTES, kb };
		int rc = mdb_put(txn, st->db_nearlsh, &key, &v, MDB_NODUPDATA);
		if (rc && rc != MDB_KEYEXIST) /* two bands of one page alike */
			return pd_mdb_err(rc);
	}
	return 0;
}

int near_add_sig(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct near_sig *sig)
{
	if (!sig->has)
		return 0;
	int rc = near_add(txn, st, k, sig->simhash);
	if (rc || !sig->has_set || !st->has_nearset)
		return rc;
	uint8_t kb[BLOBKEY_BYTES], vb[NEARSET_MAX_BYTES];
	MDB_val key = fp_key(kb, k), v = { nearset_encode(&sig->set, vb), vb };
	if ((rc = pd_mdb_err(mdb_put(txn, st->db_nearfeat, &key, &v, 0))))
		return rc;
	return put_bands(txn, st, k, &sig->set);
}

static int set_get(MDB_txn *txn, struct store *st, const struct blobkey *k, struct nearset *s)
{
	uint8_t kb[BLOBKEY_BYTES];
	MDB_val key = fp_key(kb, k), v;
	int rc = mdb_get(txn, st->db_nearfeat, &key, &v);
	if (rc)
		return pd_mdb_err(rc);
	return nearset_decode(v.mv_data, v.mv_size, s);
}

int near_set_get(MDB_txn *txn, struct store *st, const struct blobkey *k, struct near_sig *sig)
{
	sig->has_set = false;
	if (!st->has_nearset)
		return 0;
	int rc = set_get(txn, st, k, &sig->set);
	if (rc == -ENOENT || rc == -EINVAL)
		return 0; /* none, or damaged (fsck's to report): the sketch confirms */
	sig->has_set = !rc;
	return rc;
}

int near_set_remove(MDB_txn *txn, struct store *st, const struct blobkey *k)
{
	if (!st->has_nearset)
		return 0;
	struct nearset *s = malloc(sizeof *s);
	if (!s)
		return -ENOMEM;
	int rc = set_get(txn, st, k, s);
	uint8_t kb[BLOBKEY_BYTES], bb[4];
	MDB_val key = fp_key(kb, k);
	if (!rc) {
		for (size_t b = 0; b < NEARSET_BANDS && !rc; b++) {
			MDB_val bk = band_key(bb, s->band[b]), v = { BLOBKEY_BYTES, kb };
			int mrc = mdb_del(txn, st->db_nearlsh, &bk, &v);
			rc = mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
		}
	}
	free(s);
	if (rc == -ENOENT)
		return 0;
	if (rc && rc != -EINVAL)
		return rc;
	int mrc = mdb_del(txn, st->db_nearfeat, &key, NULL);
	return mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
}

static int band_rows(MDB_cursor *c, uint32_t band, near_hit_fn cb, void *ctx)
{
	uint8_t bb[4];
	MDB_val key = band_key(bb, band), v;
	int rc = 0, mrc = mdb_cursor_get(c, &key, &v, MDB_SET);
	if (mrc == 0)
		mrc = mdb_cursor_get(c, &key, &v, MDB_GET_MULTIPLE);
	while (mrc == 0 && !rc) {
		const uint8_t *p = v.mv_data;
		for (size_t off = 0; off + BLOBKEY_BYTES <= v.mv_size && !rc; off += BLOBKEY_BYTES) {
			struct blobkey k;
			blobkey_decode(p + off, &k);
			rc = cb(ctx, &k, 0, 0);
		}
		mrc = mdb_cursor_get(c, &key, &v, MDB_NEXT_MULTIPLE);
	}
	return rc ? rc : (mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0);
}

int near_lsh_find(MDB_txn *txn, struct store *st, const struct nearset *s, near_hit_fn cb, void *ctx)
{
	if (!st->has_nearset || !s->has)
		return 0;
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_nearlsh, &c));
	for (size_t b = 0; b < NEARSET_BANDS && !rc; b++)
		rc = band_rows(c, s->band[b], cb, ctx);
	mdb_cursor_close(c);
	return rc > 0 ? 0 : rc;
}

/* Walk nearfeat: fn(ctx, key, set) for each row (set NULL: it does not
 * decode). No writes to nearfeat meanwhile. */
static int each_set(MDB_txn *txn, struct store *st,
		    int (*fn)(void *ctx, const MDB_val *key, const struct nearset *s), void *ctx)
{
	struct nearset *s = malloc(sizeof *s);
	MDB_cursor *cur;
	int rc = s ? pd_mdb_err(mdb_cursor_open(txn, st->db_nearfeat, &cur)) : -ENOMEM;
	if (rc) {
		free(s);
		return rc;
	}
	MDB_val key, v;
	int mrc;
	for (mrc = mdb_cursor_get(cur, &key, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(cur, &key, &v, MDB_NEXT))
		rc = fn(ctx, &key, nearset_decode(v.mv_data, v.mv_size, s) || key.mv_size != BLOBKEY_BYTES ? NULL : s);
	mdb_cursor_close(cur);
	free(s);
	return rc ? rc : (mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0);
}

struct lsh_ctx {
	MDB_txn *txn;
	struct store *st;
	near_bad_fn bad;
	void *ctx;
	uint64_t nbad;
	uint8_t (*drop)[BLOBKEY_BYTES]; /* rebuild: rows to delete after the walk */
	size_t ndrop, capdrop;
};

/* A set whose row is damaged or whose blob has no signature any more. */
static int drop_later(struct lsh_ctx *c, const MDB_val *key)
{
	if (key->mv_size != BLOBKEY_BYTES)
		return 0; /* cannot be named for deletion; fsck reports it */
	if (c->ndrop == c->capdrop) {
		size_t cap = c->capdrop ? 2 * c->capdrop : 16;
		uint8_t(*v)[BLOBKEY_BYTES] = realloc(c->drop, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		c->drop = v;
		c->capdrop = cap;
	}
	memcpy(c->drop[c->ndrop++], key->mv_data, BLOBKEY_BYTES);
	return 0;
}

static int rebuild_one(void *ctx, const MDB_val *key, const struct nearset *s)
{
	struct lsh_ctx *c = ctx;
	if (!s)
		return drop_later(c, key); /* its record is confirmed by the sketch */
	struct blobkey k;
	struct fprec r;
	blobkey_decode(key->mv_data, &k);
	int rc = blob_get(c->txn, c->st, &k, &r);
	if (rc == -ENOENT || (!rc && !(r.flags & FPREC_HAS_SIMHASH)))
		return drop_later(c, key);
	return rc ? rc : put_bands(c->txn, c->st, &k, s);
}

int near_lsh_rebuild(MDB_txn *txn, struct store *st)
{
	if (!st->has_nearset)
		return 0;
	int rc = pd_mdb_err(mdb_drop(txn, st->db_nearlsh, 0));
	struct lsh_ctx c = { txn, st, NULL, NULL, 0, NULL, 0, 0 };
	if (!rc)
		rc = each_set(txn, st, rebuild_one, &c);
	for (size_t i = 0; i < c.ndrop && !rc; i++) {
		MDB_val key = { BLOBKEY_BYTES, c.drop[i] };
		rc = pd_mdb_err(mdb_del(txn, st->db_nearfeat, &key, NULL));
	}
	free(c.drop);
	return rc;
}

static int check_one(void *ctx, const MDB_val *key, const struct nearset *s)
{
	struct lsh_ctx *c = ctx;
	char name[BLOBKEY_NAME_MAX] = "?";
	if (!s) {
		near_report(c->bad, c->ctx, &c->nbad, "nearfeat: a row that does not decode (%zu bytes)", key->mv_size);
		return 0;
	}
	struct blobkey k;
	blobkey_decode(key->mv_data, &k);
	blobkey_name(&k, name);
	struct fprec r;
	int rc = blob_get(c->txn, c->st, &k, &r);
	if (rc == -ENOENT || (!rc && !(r.flags & FPREC_HAS_SIMHASH))) {
		near_report(c->bad, c->ctx, &c->nbad, "nearfeat: blob %s has a shingle set and no signature", name);
		return 0;
	}
	if (rc)
		return rc;
	MDB_cursor *cur;
	if ((rc = pd_mdb_err(mdb_cursor_open(c->txn, c->st->db_nearlsh, &cur))))
		return rc;
	for (size_t b = 0; b < NEARSET_BANDS; b++) {
		uint8_t bb[4];
		MDB_val bk = band_key(bb, s->band[b]), v = *key;
		int mrc = mdb_cursor_get(cur, &bk, &v, MDB_GET_BOTH);
		if (mrc == MDB_NOTFOUND) {
			near_report(c->bad, c->ctx, &c->nbad, "nearlsh: blob %s lacks its row of band %zu", name, b);
			break;
		}
		if (mrc) {
			rc = pd_mdb_err(mrc);
			break;
		}
	}
	mdb_cursor_close(cur);
	return rc;
}

int near_set_check(MDB_txn *txn, struct store *st, near_bad_fn bad, void *ctx, uint64_t *nbad)
{
	if (!st->has_nearset)
		return 0;
	struct lsh_ctx c = { txn, st, bad, ctx, 0, NULL, 0, 0 };
	int rc = each_set(txn, st, check_one, &c);
	*nbad += c.nbad;
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

int near_confirm_pair(struct store *st, const struct blobkey *ka, const struct near_sig *a, const struct blobkey *kb,
		      const struct near_sig *b, bool *yes, double *r)
{
	if (!a->has_set || !b->has_set) {
		*yes = near_confirm_r(a, b, r);
		return 0;
	}
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
