/* store_blobino.c - the inodes of a blob: in its fingerprint row when it
 * has one (format 7, store.h), else in `blob_inodes`.
 *
 * Nearly every blob has one file: a `blob_inodes` row for it cost 39 bytes
 * of LMDB a page (a 20-byte key, an 8-byte value and LMDB's node and page
 * overhead), where the inode in the fingerprint row costs a varint of 2 to
 * 4 bytes. The table stays for blobs of two or more files (twins), where
 * a dup-sorted list is what a twins query and an unlink want.
 *
 * Which place holds the inodes of a blob follows from its count of
 * inodes alone, so no flag says it: a new blob puts its inode in its row;
 * the second inode moves the first into the table; when an unlink leaves
 * one, it moves back into the row. A store converted from format 6 has
 * every inode in the table until the conversion below has passed over it;
 * both forms read the same through store_blob_inodes.
 *
 * The conversion walks `blob_inodes` in key order, a batch of blobs a
 * transaction, collecting first and writing after (no cursor over a table
 * being written). The meta row "ino_layout" is written with the last
 * batch; an interrupted conversion walks again at the next open, passing
 * over the blobs it did (they have no table row any more). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_int.h"

#define INO_LAYOUT_KEY "ino_layout"

static MDB_val blob_key(uint8_t kb[BLOBKEY_BYTES], const struct blobkey *k)
{
	blobkey_encode(k, kb);
	return (MDB_val){ BLOBKEY_BYTES, kb };
}

static int table_put(MDB_txn *txn, struct store *st, const uint8_t kb[BLOBKEY_BYTES], uint64_t ino)
{
	uint8_t vb[8];
	put_be64(vb, ino);
	MDB_val key = { BLOBKEY_BYTES, (void *)kb }, v = { 8, vb };
	int rc = mdb_put(txn, st->db_blob_inodes, &key, &v, MDB_NODUPDATA);
	return rc == MDB_KEYEXIST ? 0 : pd_mdb_err(rc);
}

static int table_del(MDB_txn *txn, struct store *st, const uint8_t kb[BLOBKEY_BYTES], uint64_t ino)
{
	uint8_t vb[8];
	put_be64(vb, ino);
	MDB_val key = { BLOBKEY_BYTES, (void *)kb }, v = { 8, vb };
	return pd_mdb_err(mdb_del(txn, st->db_blob_inodes, &key, &v));
}

/* The table rows of key kb: how many, and the first (0 when none). */
static int table_count(MDB_txn *txn, struct store *st, const uint8_t kb[BLOBKEY_BYTES], size_t *n, uint64_t *first)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_blob_inodes, &c));
	if (rc)
		return rc;
	MDB_val key = { BLOBKEY_BYTES, (void *)kb }, v;
	*n = 0;
	*first = 0;
	int mrc = mdb_cursor_get(c, &key, &v, MDB_SET_KEY);
	if (mrc == 0 && v.mv_size == 8) {
		*first = get_be64(v.mv_data);
		mrc = mdb_cursor_count(c, n);
	}
	mdb_cursor_close(c);
	return mrc == 0 || mrc == MDB_NOTFOUND ? 0 : pd_mdb_err(mrc);
}

int store_blob_inodes(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct fprec *r,
		      store_ino_fn fn, void *ctx)
{
	uint8_t kb[BLOBKEY_BYTES];
	MDB_val key = blob_key(kb, k), v;
	struct fprec own;
	if (!r) {
		int grc = mdb_get(txn, st->db_fp, &key, &v);
		if (grc == 0 && fprec_decode(v.mv_data, v.mv_size, &own) == 0)
			r = &own;
		else if (grc && grc != MDB_NOTFOUND)
			return pd_mdb_err(grc);
	}
	int rc = r && r->ino ? fn(ctx, r->ino) : 0;
	if (rc)
		return rc;
	MDB_cursor *c;
	if ((rc = pd_mdb_err(mdb_cursor_open(txn, st->db_blob_inodes, &c))))
		return rc;
	int mrc;
	for (mrc = mdb_cursor_get(c, &key, &v, MDB_SET_KEY); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(c, &key, &v, MDB_NEXT_DUP))
		if (v.mv_size == 8) /* (another size: fsck's to report) */
			rc = fn(ctx, get_be64(v.mv_data));
	mdb_cursor_close(c);
	return rc ? rc : mrc == MDB_NOTFOUND ? 0 : pd_mdb_err(mrc);
}

int store_blob_ino_add(MDB_txn *txn, struct store *st, const struct blobkey *k, struct fprec *r, uint64_t ino)
{
	if (!ino)
		return -EINVAL;
	if (r->refcount == 0 && store_ino_in_row(st)) {
		r->ino = ino;
		return 0;
	}
	uint8_t kb[BLOBKEY_BYTES];
	blob_key(kb, k);
	int rc = 0;
	if (r->ino && !(rc = table_put(txn, st, kb, r->ino))) /* the second inode: both in the table */
		r->ino = 0;
	return rc ? rc : table_put(txn, st, kb, ino);
}

int store_blob_ino_del(MDB_txn *txn, struct store *st, const struct blobkey *k, struct fprec *r, uint64_t ino)
{
	uint8_t kb[BLOBKEY_BYTES];
	blob_key(kb, k);
	int rc;
	if (r->ino) {
		if (r->ino != ino)
			return -ENOENT;
		r->ino = 0;
		return 0;
	}
	if ((rc = table_del(txn, st, kb, ino)))
		return rc;
	if (r->refcount != 2 || !store_ino_in_row(st))
		return 0;
	/* one left: back into the row (when the table holds just that one) */
	size_t n;
	uint64_t last;
	if ((rc = table_count(txn, st, kb, &n, &last)) || n != 1 || !last)
		return rc;
	if (!(rc = table_del(txn, st, kb, last)))
		r->ino = last;
	return rc;
}

/* ---- the conversion ------------------------------------------------------ */

int store_blob_inodes_done(MDB_txn *txn, struct store *st, bool *done)
{
	uint32_t layout;
	int rc = store_meta_version_get(txn, st, INO_LAYOUT_KEY, 0, &layout);
	*done = !rc && layout >= STORE_INO_LAYOUT;
	return rc;
}

int store_blob_inodes_again(MDB_txn *txn, struct store *st)
{
	return store_meta_version_del(txn, st, INO_LAYOUT_KEY);
}

/* A blob of the batch: its key, its table rows (how many, the first). */
struct bi_blob {
	uint8_t key[BLOBKEY_BYTES];
	size_t n;
	uint64_t first;
};

/* Put blob b in its form; *changed when it was not. */
static int convert_one(MDB_txn *txn, struct store *st, const struct bi_blob *b, bool *changed)
{
	MDB_val key = { BLOBKEY_BYTES, (void *)b->key }, v;
	struct fprec r;
	*changed = false;
	int rc = mdb_get(txn, st->db_fp, &key, &v);
	if (rc == MDB_NOTFOUND || (!rc && fprec_decode(v.mv_data, v.mv_size, &r)))
		return 0; /* no record to hold it: fsck's to report */
	if (rc)
		return pd_mdb_err(rc);
	if (b->n == 1 && b->first && (!r.ino || r.ino == b->first)) {
		/* one inode: into the row */
		if ((rc = table_del(txn, st, b->key, b->first)))
			return rc;
		r.ino = b->first;
	} else if (r.ino) {
		/* an inode in the row beside table rows: all in the table */
		if ((rc = table_put(txn, st, b->key, r.ino)))
			return rc;
		r.ino = 0;
	} else {
		return 0; /* two or more, in the table: as it should be */
	}
	uint8_t vb[FPREC_MAX_BYTES];
	MDB_val nv = { fprec_encode(&r, true, vb), vb };
	*changed = true;
	return pd_mdb_err(mdb_put(txn, st->db_fp, &key, &nv, 0));
}

int store_blob_inodes_convert(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch,
			      uint64_t *converted, bool *finished)
{
	*finished = false;
	if (!store_ino_in_row(st) || !store_fp_row2(st) || !batch)
		return -EINVAL;
	struct bi_blob *v = calloc(batch, sizeof *v);
	MDB_cursor *c = NULL;
	int rc = v ? pd_mdb_err(mdb_cursor_open(txn, st->db_blob_inodes, &c)) : -ENOMEM;
	size_t n = 0;
	bool more = false;
	if (!rc) {
		MDB_val key = { BLOBKEY_BYTES, next }, val;
		int mrc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE);
		for (; mrc == 0 && !(more = n == batch); mrc = mdb_cursor_get(c, &key, &val, MDB_NEXT_NODUP)) {
			/* (a key or value of another size is fsck's to report) */
			if (key.mv_size != BLOBKEY_BYTES || val.mv_size != 8)
				continue;
			struct bi_blob *b = &v[n++];
			memcpy(b->key, key.mv_data, BLOBKEY_BYTES);
			b->first = get_be64(val.mv_data);
			if ((mrc = mdb_cursor_count(c, &b->n)))
				break;
		}
		rc = store_batch_next(next, more, &key, mrc);
		mdb_cursor_close(c);
	}
	for (size_t i = 0; i < n && !rc; i++) {
		bool changed;
		if (!(rc = convert_one(txn, st, &v[i], &changed)) && changed && converted)
			(*converted)++;
	}
	free(v);
	if (!rc && !more && !(rc = store_meta_version_put(txn, st, INO_LAYOUT_KEY, STORE_INO_LAYOUT)))
		*finished = true;
	return rc;
}

struct bi_counts {
	uint64_t converted, batch;
};

static int bi_batch(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], void *ctx, bool *finished)
{
	struct bi_counts *c = ctx;
	c->batch = 0;
	return store_blob_inodes_convert(txn, st, next, STORE_INO_CONVERT_BATCH, &c->batch, finished);
}

static void bi_committed(void *ctx)
{
	struct bi_counts *c = ctx;
	c->converted += c->batch;
}

int store_blob_inodes_upgrade(struct store *st, uint64_t *converted)
{
	if (st->readonly || !store_ino_in_row(st))
		return 0;
	MDB_txn *txn;
	bool done = false;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = store_blob_inodes_done(txn, st, &done);
	store_read_end(st, txn);
	struct bi_counts c = { 0, 0 };
	if (!rc && !done)
		rc = store_write_batches(st, bi_batch, bi_committed, &c);
	if (converted)
		*converted = c.converted;
	return rc;
}
