/* near_layout.c - the layout of the near tables (near.h): its version in
 * meta, and the conversion of layouts 1 (sets as u32 arrays, band rows in
 * nearlsh), 2 (Rice-coded sets with their band keys, a sketch in every
 * fingerprint record) and 3 (32-bit sets without band keys, no sketch
 * beside a set) to layout 6 (sets at NEARSET_BITS, the band rows of
 * their keys in nearbands), a batch of sets a transaction, without reading
 * a page; layouts 4 and 5 are layout 6 with nothing staged (4) or only
 * band rows staged (5). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/byteorder.h"
#include "blob/blob.h"
#include "near_int.h"

#define LAYOUT_KEY "near_layout"

int near_layout_get(MDB_txn *txn, struct store *st, uint32_t *layout)
{
	return store_meta_version_get(txn, st, LAYOUT_KEY, 1, layout); /* absent: layout 1 */
}

int near_layout_put(MDB_txn *txn, struct store *st)
{
	return store_meta_version_put(txn, st, LAYOUT_KEY, NEAR_LAYOUT_VERSION);
}

/* Layout 1's band table, emptied and deleted. */
static int drop_layout1(MDB_txn *txn)
{
	MDB_dbi old;
	int rc = mdb_dbi_open(txn, "nearlsh", 0, &old);
	if (rc == MDB_NOTFOUND)
		return 0;
	return pd_mdb_err(rc ? rc : mdb_drop(txn, old, 1));
}

/* Blob k has a set: its record keeps no sketch (layout 3). */
static int drop_sketch(MDB_txn *txn, struct store *st, const struct blobkey *k)
{
	struct fprec r;
	int rc = blob_get(txn, st, k, &r);
	if (rc == -ENOENT)
		return 0; /* a set without a record: fsck's to report */
	if (rc || !(r.flags & FPREC_HAS_SKETCH))
		return rc;
	r.flags &= (uint8_t)~FPREC_HAS_SKETCH;
	return blob_put(txn, st, k, &r);
}

struct convert {
	uint8_t (*keys)[BLOBKEY_BYTES];
	struct nearset *sets;
	size_t n, cap;
};

int near_layout_convert(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch,
			bool *finished)
{
	*finished = false;
	uint32_t layout;
	int rc = near_layout_get(txn, st, &layout);
	if (rc)
		return rc;
	/* layout 4's sets and rows are layout 6's, its rows all in nearbands
	 * and near0..nearK; layout 5's are too, its band rows maybe staged */
	if ((layout == 4 || layout == 5) && st->has_nearset) {
		if (!(rc = near_layout_put(txn, st)))
			*finished = true;
		return rc;
	}
	if (!st->has_nearset) {
		/* fsck's repair: the tables were opened without creating them */
		if ((rc = pd_mdb_err(mdb_dbi_open(txn, "nearfeat", MDB_CREATE, &st->db_nearfeat))) ||
		    (rc = pd_mdb_err(mdb_dbi_open(txn, "nearbands", MDB_DUPSORT | MDB_DUPFIXED | MDB_CREATE,
						  &st->db_nearlsh))))
			return rc;
		st->has_nearset = true;
	}
	/* The first batch empties the band rows: their keys were computed
	 * from 32-bit hashes, and each set puts its own again. (A conversion
	 * interrupted and started again empties them again: the sets already
	 * in format 4 decode to the same values.) */
	static const uint8_t first[BLOBKEY_BYTES];
	if (!memcmp(next, first, BLOBKEY_BYTES) && (rc = near_bands_drop(txn, st)))
		return rc;
	struct convert c = { calloc(batch, BLOBKEY_BYTES), calloc(batch, sizeof *c.sets), 0, batch };
	if (!c.keys || !c.sets || !batch) {
		free(c.keys);
		free(c.sets);
		return batch ? -ENOMEM : -EINVAL;
	}
	/* the batch's sets first, then the writes: no cursor over nearfeat
	 * while it is written */
	MDB_cursor *cur;
	struct nearset *s = malloc(sizeof *s);
	rc = s ? pd_mdb_err(mdb_cursor_open(txn, st->db_nearfeat, &cur)) : -ENOMEM;
	bool more = false;
	if (!rc) {
		MDB_val key = { BLOBKEY_BYTES, next }, v;
		int mrc = mdb_cursor_get(cur, &key, &v, MDB_SET_RANGE);
		for (; mrc == 0 && !(more = c.n == c.cap); mrc = mdb_cursor_get(cur, &key, &v, MDB_NEXT)) {
			struct blobkey k;
			if (key.mv_size == BLOBKEY_BYTES)
				blobkey_decode(key.mv_data, &k);
			if (key.mv_size == BLOBKEY_BYTES && !near_set_read(txn, st, &k, s)) {
				/* (a row that does not decode is fsck's to report;
				 * a difference, which layouts 1-3 never hold, is
				 * written whole) */
				memcpy(c.keys[c.n], key.mv_data, BLOBKEY_BYTES);
				c.sets[c.n++] = *s;
			}
		}
		rc = store_batch_next(next, more, &key, mrc);
		mdb_cursor_close(cur);
	}
	free(s);
	for (size_t i = 0; i < c.n && !rc; i++) {
		struct blobkey k;
		uint8_t vb[NEARSET_MAX_BYTES];
		blobkey_decode(c.keys[i], &k);
		/* the top bits of the same hashes (no page read), and the
		 * band keys format 4's decoder will compute from them */
		nearset_to_stored(&c.sets[i]);
		nearset_bands(&c.sets[i]);
		MDB_val key = { BLOBKEY_BYTES, c.keys[i] }, v = { nearset_encode(&c.sets[i], vb), vb };
		if (!(rc = pd_mdb_err(mdb_put(txn, st->db_nearfeat, &key, &v, 0))) &&
		    !(rc = near_put_bands_settled(txn, st, &k, &c.sets[i])))
			rc = drop_sketch(txn, st, &k);
	}
	free(c.keys);
	free(c.sets);
	if (!rc && !more && !(rc = drop_layout1(txn)) && !(rc = near_layout_put(txn, st))) {
		*finished = true;
		st->near_sets_full = false;
	}
	return rc;
}

int near_layout_upgrade(struct store *st)
{
	/* a newer layout is not converted back: its rows may not decode here */
	MDB_txn *txn;
	uint32_t layout = 1;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = near_layout_get(txn, st, &layout);
	store_read_end(st, txn);
	if (rc || layout > NEAR_LAYOUT_VERSION)
		return rc ? rc : -EPROTONOSUPPORT;
	/* near_layout_convert sets the layout with its last batch */
	return near_meta_upgrade(st, LAYOUT_KEY, 1, NEAR_LAYOUT_VERSION, near_layout_convert);
}
