/* store_fprow.c - fingerprint rows of layout 1 rewritten in layout 2
 * (rec.h), in a store of format 6 (store.h).
 *
 * Both layouts are read everywhere, so the conversion can take its time:
 * a writable open walks the fingerprints in key order, a batch of rows a
 * transaction, and rewrites the rows of layout 1 (each decoded and encoded
 * again: the same record, fewer bytes). The meta row "fp_layout" is
 * written with the last batch, so an interrupted conversion walks again
 * at the next open (the rows it had converted are passed over) and a
 * converted store is not walked again. Rows written meanwhile by anything
 * else are in layout 2 already. `pagededup fsck --repair` runs the same
 * batches inside its own transaction. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "store_int.h"

#define FP_LAYOUT_KEY "fp_layout"

int store_fp_rows_done(MDB_txn *txn, struct store *st, bool *done)
{
	uint32_t layout;
	int rc = store_meta_version_get(txn, st, FP_LAYOUT_KEY, 0, &layout);
	*done = !rc && layout >= STORE_FP_LAYOUT;
	return rc;
}

int store_fp_rows_again(MDB_txn *txn, struct store *st)
{
	return store_meta_version_del(txn, st, FP_LAYOUT_KEY);
}

int store_fp_rows_convert(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch,
			  uint64_t *converted, bool *finished)
{
	*finished = false;
	if (!store_fp_row2(st) || !batch)
		return -EINVAL;
	/* the batch's rows first, then the writes: no cursor over the table
	 * while it is written */
	uint8_t(*keys)[BLOBKEY_BYTES] = calloc(batch, BLOBKEY_BYTES);
	struct fprec *recs = calloc(batch, sizeof *recs);
	MDB_cursor *c = NULL;
	int rc = keys && recs ? pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &c)) : -ENOMEM;
	size_t n = 0, seen = 0;
	bool more = false;
	if (!rc) {
		MDB_val key = { BLOBKEY_BYTES, next }, v;
		int mrc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE);
		for (; mrc == 0 && !(more = seen == batch); mrc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
			seen++;
			/* (a row that does not decode, or a key of another size, is
			 * fsck's to report) */
			if (key.mv_size == BLOBKEY_BYTES && fprec_is_row1(v.mv_data, v.mv_size) &&
			    !fprec_decode(v.mv_data, v.mv_size, &recs[n]))
				memcpy(keys[n++], key.mv_data, BLOBKEY_BYTES);
		}
		rc = store_batch_next(next, more, &key, mrc);
		mdb_cursor_close(c);
	}
	for (size_t i = 0; i < n && !rc; i++) {
		uint8_t vb[FPREC_MAX_BYTES];
		MDB_val key = { BLOBKEY_BYTES, keys[i] }, v = { fprec_encode(&recs[i], true, vb), vb };
		rc = pd_mdb_err(mdb_put(txn, st->db_fp, &key, &v, 0));
	}
	free(keys);
	free(recs);
	if (!rc && converted)
		*converted += n;
	if (!rc && !more && !(rc = store_meta_version_put(txn, st, FP_LAYOUT_KEY, STORE_FP_LAYOUT)))
		*finished = true;
	return rc;
}

static int fp_batch(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], void *ctx, bool *finished)
{
	(void)ctx;
	return store_fp_rows_convert(txn, st, next, STORE_FP_CONVERT_BATCH, NULL, finished);
}

int store_fp_rows_upgrade(struct store *st)
{
	if (st->readonly || !store_fp_row2(st))
		return 0;
	MDB_txn *txn;
	bool done = false;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = store_fp_rows_done(txn, st, &done);
	store_read_end(st, txn);
	return rc || done ? rc : store_write_batches(st, fp_batch, NULL, NULL);
}
