/* near_bands.c - the band rows' tables (near.h, layout 5, "Rows
 * staged"): nearbands and its levels nearbands0 and nearbands1
 * (near_stage.c). The rows themselves and what a row stands for are
 * near_lsh.c's. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "near_int.h"

size_t near_band_tables(const struct store *st, MDB_dbi dbi[NEAR_BAND_TABLES])
{
	size_t n = 0;
	if (st->has_nearstage) {
		dbi[n++] = st->db_nearstage[0];
		dbi[n++] = st->db_nearstage[1];
	}
	dbi[n++] = st->db_nearlsh;
	return n;
}

/* The tables' names, in near_band_tables' order when staged. */
static const char *const band_table_names[NEAR_BAND_TABLES] = { "nearbands0", "nearbands1", "nearbands" };

int near_bands_open_staged(MDB_txn *txn, struct store *st, unsigned create)
{
	return near_stage_open(txn, band_table_names, create, st->db_nearstage, &st->has_nearstage);
}

const char *near_band_table_name(const struct store *st, size_t i)
{
	return st->has_nearstage && i < NEAR_BAND_TABLES ? band_table_names[i] : "nearbands";
}

static int put_bands_in(MDB_txn *txn, MDB_dbi dbi, const struct blobkey *k, const struct nearset *s)
{
	for (size_t b = 0; b < NEARSET_BANDS; b++) {
		uint8_t bi, vb[BAND_VAL];
		MDB_val key = band_idx(&bi, b), v = band_val(vb, nearset_band(s, b), k->md5);
		int rc = mdb_put(txn, dbi, &key, &v, MDB_NODUPDATA);
		if (rc && rc != MDB_KEYEXIST) /* another blob of the prefix */
			return pd_mdb_err(rc);
	}
	return 0;
}

int near_put_bands(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct nearset *s)
{
	return put_bands_in(txn, st->has_nearstage ? st->db_nearstage[0] : st->db_nearlsh, k, s);
}

int near_put_bands_settled(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct nearset *s)
{
	return put_bands_in(txn, st->db_nearlsh, k, s);
}

int near_band_del(MDB_txn *txn, struct store *st, size_t b, uint32_t key, const uint8_t *prefix)
{
	MDB_dbi dbi[NEAR_BAND_TABLES];
	size_t n = near_band_tables(st, dbi);
	uint8_t bi, vb[BAND_VAL];
	return near_stage_del(txn, dbi, n, band_idx(&bi, b), band_val(vb, key, prefix));
}

int near_band_cursors_open(MDB_txn *txn, struct store *st, struct near_stage_cursors *p)
{
	MDB_dbi dbi[NEAR_BAND_TABLES];
	return near_stage_cursors_open(txn, dbi, near_band_tables(st, dbi), p);
}

static int probe_has(struct near_stage_cursors *p, size_t b, uint32_t key, const uint8_t *prefix)
{
	uint8_t bi, vb[BAND_VAL];
	return near_stage_probe(p, band_idx(&bi, b), band_val(vb, key, prefix));
}

int near_band_has(MDB_txn *txn, struct store *st, size_t b, uint32_t key, const uint8_t *prefix)
{
	MDB_dbi dbi[NEAR_BAND_TABLES];
	uint8_t bi, vb[BAND_VAL];
	return near_stage_has(txn, dbi, near_band_tables(st, dbi), band_idx(&bi, b), band_val(vb, key, prefix));
}

int near_bands_missing(MDB_txn *txn, struct store *st, const struct nearset *s, const uint8_t *prefix,
		       size_t *band)
{
	struct near_stage_cursors p;
	int rc = near_band_cursors_open(txn, st, &p);
	for (size_t b = 0; b < NEARSET_BANDS && !rc; b++) {
		int has = probe_has(&p, b, nearset_band(s, b), prefix);
		if (!has) {
			*band = b;
			rc = 1;
		}
		rc = has < 0 ? has : rc;
	}
	near_stage_cursors_close(&p);
	return rc;
}

int near_bands_drop(MDB_txn *txn, struct store *st)
{
	MDB_dbi dbi[NEAR_BAND_TABLES];
	return near_stage_drop(txn, dbi, near_band_tables(st, dbi));
}
