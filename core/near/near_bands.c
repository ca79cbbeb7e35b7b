/* near_bands.c - the band rows' tables (near.h, layout 5, "Band rows
 * staged"): rows put in nearbands0, moved on to nearbands1 and nearbands
 * in key order, looked up and removed in all three. The rows themselves
 * and what a row stands for are near_lsh.c's. */
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
	int rc = 0;
	for (size_t i = 0; i < 2 && !rc; i++)
		rc = mdb_dbi_open(txn, band_table_names[i], MDB_DUPSORT | MDB_DUPFIXED | create, &st->db_nearstage[i]);
	st->has_nearstage = rc == 0;
	return rc == MDB_NOTFOUND && !create ? 0 : pd_mdb_err(rc);
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
	for (size_t i = 0; i < n; i++) {
		uint8_t bi, vb[BAND_VAL];
		MDB_val bk = band_idx(&bi, b), v = band_val(vb, key, prefix);
		int mrc = mdb_del(txn, dbi[i], &bk, &v);
		if (mrc && mrc != MDB_NOTFOUND)
			return pd_mdb_err(mrc);
	}
	return 0;
}

void near_band_cursors_close(struct near_band_cursors *p)
{
	while (p->n)
		mdb_cursor_close(p->c[--p->n]);
}

int near_band_cursors_open(MDB_txn *txn, struct store *st, struct near_band_cursors *p)
{
	MDB_dbi dbi[NEAR_BAND_TABLES];
	size_t n = near_band_tables(st, dbi);
	p->n = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = pd_mdb_err(mdb_cursor_open(txn, dbi[i], &p->c[i]));
		if (rc) {
			near_band_cursors_close(p);
			return rc;
		}
		p->n++;
	}
	return 0;
}

static int probe_has(struct near_band_cursors *p, size_t b, uint32_t key, const uint8_t *prefix)
{
	for (size_t i = 0; i < p->n; i++) {
		uint8_t bi, vb[BAND_VAL];
		MDB_val bk = band_idx(&bi, b), v = band_val(vb, key, prefix);
		int mrc = mdb_cursor_get(p->c[i], &bk, &v, MDB_GET_BOTH);
		if (!mrc)
			return 1;
		if (mrc != MDB_NOTFOUND)
			return pd_mdb_err(mrc);
	}
	return 0;
}

int near_band_has(MDB_txn *txn, struct store *st, size_t b, uint32_t key, const uint8_t *prefix)
{
	struct near_band_cursors p;
	int rc = near_band_cursors_open(txn, st, &p);
	if (rc)
		return rc;
	rc = probe_has(&p, b, key, prefix);
	near_band_cursors_close(&p);
	return rc;
}

int near_bands_missing(MDB_txn *txn, struct store *st, const struct nearset *s, const uint8_t *prefix,
		       size_t *band)
{
	struct near_band_cursors p;
	int rc = near_band_cursors_open(txn, st, &p);
	for (size_t b = 0; b < NEARSET_BANDS && !rc; b++) {
		int has = probe_has(&p, b, nearset_band(s, b), prefix);
		if (!has) {
			*band = b;
			rc = 1;
		}
		rc = has < 0 ? has : rc;
	}
	near_band_cursors_close(&p);
	return rc;
}

int near_bands_drop(MDB_txn *txn, struct store *st)
{
	MDB_dbi dbi[NEAR_BAND_TABLES];
	size_t n = near_band_tables(st, dbi);
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		rc = pd_mdb_err(mdb_drop(txn, dbi[i], 0));
	return rc;
}

/* ---- the moves ------------------------------------------------------------ */

/* A row as a move carries it: its band, then its value. */
struct row {
	uint8_t band;
	uint8_t val[BAND_VAL];
};

/* Up to max rows of `from` from (band, val) on, in key order, into rows;
 * *n how many, *end whether they are the last. */
static int read_rows(MDB_txn *txn, MDB_dbi from, uint8_t band, const uint8_t val[BAND_VAL], struct row *rows,
		     size_t max, size_t *n, bool *end)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, from, &c));
	if (rc)
		return rc;
	uint8_t vb[BAND_VAL];
	memcpy(vb, val, BAND_VAL);
	MDB_val k = { 1, &band }, v = { BAND_VAL, vb };
	/* the first row at or past (band, val): past the band's last, the
	 * next band's first */
	int mrc = mdb_cursor_get(c, &k, &v, MDB_GET_BOTH_RANGE);
	if (mrc == MDB_NOTFOUND) {
		k = (MDB_val){ 1, &band };
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (!mrc && k.mv_size == 1 && *(const uint8_t *)k.mv_data == band)
			mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT_NODUP);
	}
	*n = 0;
	for (; mrc == 0 && *n < max; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 1 || v.mv_size != BAND_VAL)
			continue; /* not a row: fsck's to report, and left where it is */
		rows[*n].band = *(const uint8_t *)k.mv_data;
		memcpy(rows[*n].val, v.mv_data, BAND_VAL);
		(*n)++;
	}
	*end = mrc == MDB_NOTFOUND;
	mdb_cursor_close(c);
	return mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
}

/* rows[0..n) put in `to` (one it holds already stays one) and taken out
 * of `from` (all of it at once when `all`). */
static int move_rows(MDB_txn *txn, MDB_dbi from, MDB_dbi to, const struct row *rows, size_t n, bool all)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t band = rows[i].band;
		MDB_val k = { 1, &band }, v = { BAND_VAL, (void *)rows[i].val };
		int rc = mdb_put(txn, to, &k, &v, MDB_NODUPDATA);
		if (rc && rc != MDB_KEYEXIST)
			return pd_mdb_err(rc);
		if (!all && (rc = mdb_del(txn, from, &k, &v)) && rc != MDB_NOTFOUND)
			return pd_mdb_err(rc);
	}
	return all ? pd_mdb_err(mdb_drop(txn, from, 0)) : 0;
}

static int rows_in(MDB_txn *txn, MDB_dbi dbi, size_t *n)
{
	MDB_stat ms;
	int rc = pd_mdb_err(mdb_stat(txn, dbi, &ms));
	*n = rc ? 0 : ms.ms_entries;
	return rc;
}

/* nearbands0 into nearbands1, whole. */
static int empty_stage0(MDB_txn *txn, struct store *st, size_t rows0)
{
	struct row *rows = malloc((rows0 ? rows0 : 1) * sizeof *rows);
	if (!rows)
		return -ENOMEM;
	static const uint8_t zero[BAND_VAL];
	size_t n;
	bool end;
	int rc = read_rows(txn, st->db_nearstage[0], 0, zero, rows, rows0, &n, &end);
	/* (a row past the count, which cannot be, waits for the next time) */
	if (!rc) /* (all at once unless a row of another size was skipped) */
		rc = move_rows(txn, st->db_nearstage[0], st->db_nearstage[1], rows, n, end && n == rows0);
	free(rows);
	return rc;
}

/* The pass's next rows from nearbands1 into nearbands. */
static int pass_step(MDB_txn *txn, struct store *st, struct near_band_pass *p, size_t max)
{
	struct row *rows = malloc(max * sizeof *rows);
	if (!rows)
		return -ENOMEM;
	size_t n;
	bool end;
	int rc = read_rows(txn, st->db_nearstage[1], p->band, p->val, rows, max, &n, &end);
	if (!rc)
		rc = move_rows(txn, st->db_nearstage[1], st->db_nearlsh, rows, n, false);
	if (!rc) {
		p->active = !end;
		if (n) { /* moved away: the next read starts past it */
			p->band = rows[n - 1].band;
			memcpy(p->val, rows[n - 1].val, BAND_VAL);
		}
	}
	free(rows);
	return rc;
}

int near_bands_settle(MDB_txn *txn, struct store *st, struct near_band_pass *p, unsigned stage_rows)
{
	if (!st->has_nearstage)
		return 0;
	size_t bound = stage_rows ? stage_rows : NEAR_BAND_STAGE_ROWS, rows0, rows1;
	int rc = rows_in(txn, st->db_nearstage[0], &rows0);
	if (!rc && rows0 >= bound)
		rc = empty_stage0(txn, st, rows0);
	if (!rc && !p->active && !(rc = rows_in(txn, st->db_nearstage[1], &rows1)) &&
	    rows1 >= (size_t)NEAR_BAND_FANOUT * bound) {
		p->active = true;
		p->band = 0;
		memset(p->val, 0, BAND_VAL);
	}
	/* a quarter of nearbands0's rows a step: the step's rows land on
	 * the leaves of one 128th of nearbands' keys (a pass moves 32 times
	 * nearbands0's rows), some 5 MB of copied pages at 5,000,000 pages,
	 * which LMDB keeps for its next transactions */
	if (!rc && p->active)
		rc = pass_step(txn, st, p, bound / 4 ? bound / 4 : 1);
	return rc;
}
