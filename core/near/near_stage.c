/* near_stage.c - a dup-sorted table of fixed-size rows kept as an LSM tree
 * keeps its rows (near.h, "Rows staged"): rows put in level 0, moved on to
 * level 1 and to the table itself in key order, looked up and removed in
 * all three. What a row means is the caller's (near_bands.c, near.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "near_int.h"

int near_stage_open(MDB_txn *txn, const char *const names[2], unsigned create, MDB_dbi lv[2], bool *has)
{
	int rc = 0;
	for (size_t i = 0; i < 2 && !rc; i++)
		rc = mdb_dbi_open(txn, names[i], MDB_DUPSORT | MDB_DUPFIXED | create, &lv[i]);
	*has = rc == 0;
	return rc == MDB_NOTFOUND && !create ? 0 : pd_mdb_err(rc);
}

int near_stage_del(MDB_txn *txn, const MDB_dbi *lv, size_t n, MDB_val key, MDB_val val)
{
	for (size_t i = 0; i < n; i++) {
		MDB_val k = key, v = val; /* (mdb_del may not leave them as they were) */
		int mrc = mdb_del(txn, lv[i], &k, &v);
		if (mrc && mrc != MDB_NOTFOUND)
			return pd_mdb_err(mrc);
	}
	return 0;
}

int near_stage_drop(MDB_txn *txn, const MDB_dbi *lv, size_t n)
{
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		rc = pd_mdb_err(mdb_drop(txn, lv[i], 0));
	return rc;
}

void near_stage_cursors_close(struct near_stage_cursors *p)
{
	while (p->n)
		mdb_cursor_close(p->c[--p->n]);
}

int near_stage_cursors_open(MDB_txn *txn, const MDB_dbi *lv, size_t n, struct near_stage_cursors *p)
{
	p->n = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = pd_mdb_err(mdb_cursor_open(txn, lv[i], &p->c[i]));
		if (rc) {
			near_stage_cursors_close(p);
			return rc;
		}
		p->n++;
	}
	return 0;
}

int near_stage_probe(struct near_stage_cursors *p, MDB_val key, MDB_val val)
{
	for (size_t i = 0; i < p->n; i++) {
		MDB_val k = key, v = val;
		int mrc = mdb_cursor_get(p->c[i], &k, &v, MDB_GET_BOTH);
		if (!mrc)
			return 1;
		if (mrc != MDB_NOTFOUND)
			return pd_mdb_err(mrc);
	}
	return 0;
}

int near_stage_has(MDB_txn *txn, const MDB_dbi *lv, size_t n, MDB_val key, MDB_val val)
{
	struct near_stage_cursors p;
	int rc = near_stage_cursors_open(txn, lv, n, &p);
	if (rc)
		return rc;
	rc = near_stage_probe(&p, key, val);
	near_stage_cursors_close(&p);
	return rc;
}

/* ---- the moves ------------------------------------------------------------ */

/* A row as a move carries it. */
struct row {
	uint8_t ks, vs;
	uint8_t key[NEAR_STAGE_KEY_MAX];
	uint8_t val[NEAR_STAGE_VAL_MAX];
};

/* Up to max rows of `from` from the pass's place on (p NULL: from the
 * first), in key order, into rows; *n how many, *end whether they are
 * the last. */
static int read_rows(MDB_txn *txn, MDB_dbi from, const struct near_stage_pass *p, struct row *rows, size_t max,
		     size_t *n, bool *end)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, from, &c));
	if (rc)
		return rc;
	uint8_t kb[NEAR_STAGE_KEY_MAX], vb[NEAR_STAGE_VAL_MAX];
	MDB_val k, v;
	int mrc;
	if (!p || !p->ks) {
		mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	} else {
		/* the first row at or past the place: past its key's last
		 * value, the next key's first */
		memcpy(kb, p->key, p->ks);
		memcpy(vb, p->val, p->vs);
		k = (MDB_val){ p->ks, kb };
		v = (MDB_val){ p->vs, vb };
		mrc = mdb_cursor_get(c, &k, &v, MDB_GET_BOTH_RANGE);
		if (mrc == MDB_NOTFOUND) {
			k = (MDB_val){ p->ks, kb };
			mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
			if (!mrc && k.mv_size == p->ks && !memcmp(k.mv_data, p->key, p->ks))
				mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT_NODUP);
		}
	}
	*n = 0;
	for (; mrc == 0 && *n < max; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (!k.mv_size || k.mv_size > NEAR_STAGE_KEY_MAX || !v.mv_size || v.mv_size > NEAR_STAGE_VAL_MAX)
			continue; /* not a row: fsck's to report, and left where it is */
		rows[*n].ks = (uint8_t)k.mv_size;
		rows[*n].vs = (uint8_t)v.mv_size;
		memcpy(rows[*n].key, k.mv_data, k.mv_size);
		memcpy(rows[*n].val, v.mv_data, v.mv_size);
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
		MDB_val k = { rows[i].ks, (void *)rows[i].key }, v = { rows[i].vs, (void *)rows[i].val };
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

/* Level 0 into level 1, whole. */
static int empty_level0(MDB_txn *txn, const MDB_dbi lv[NEAR_STAGE_LEVELS], size_t rows0)
{
	struct row *rows = malloc((rows0 ? rows0 : 1) * sizeof *rows);
	if (!rows)
		return -ENOMEM;
	size_t n;
	bool end;
	int rc = read_rows(txn, lv[0], NULL, rows, rows0, &n, &end);
	/* (a row past the count, which cannot be, waits for the next time) */
	if (!rc) /* (all at once unless a row of another size was skipped) */
		rc = move_rows(txn, lv[0], lv[1], rows, n, end && n == rows0);
	free(rows);
	return rc;
}

/* The pass's next rows from level 1 into the table. */
static int pass_step(MDB_txn *txn, const MDB_dbi lv[NEAR_STAGE_LEVELS], struct near_stage_pass *p, size_t max)
{
	struct row *rows = malloc(max * sizeof *rows);
	if (!rows)
		return -ENOMEM;
	size_t n;
	bool end;
	int rc = read_rows(txn, lv[1], p, rows, max, &n, &end);
	if (!rc)
		rc = move_rows(txn, lv[1], lv[2], rows, n, false);
	if (!rc) {
		p->active = !end;
		if (n) { /* moved away: the next read starts past it */
			p->ks = rows[n - 1].ks;
			p->vs = rows[n - 1].vs;
			memcpy(p->key, rows[n - 1].key, p->ks);
			memcpy(p->val, rows[n - 1].val, p->vs);
		}
	}
	free(rows);
	return rc;
}

int near_stage_settle(MDB_txn *txn, const MDB_dbi lv[NEAR_STAGE_LEVELS], struct near_stage_pass *p, size_t bound)
{
	size_t rows0, rows1;
	int rc = rows_in(txn, lv[0], &rows0);
	if (!rc && rows0 >= bound)
		rc = empty_level0(txn, lv, rows0);
	if (!rc && !p->active && !(rc = rows_in(txn, lv[1], &rows1)) && rows1 >= (size_t)NEAR_STAGE_FANOUT * bound) {
		p->active = true;
		p->ks = p->vs = 0; /* from the first row */
	}
	/* a quarter of level 0's rows a step: the step's rows land on the
	 * leaves of one 128th of the table's keys (a pass moves 32 times
	 * level 0's rows), some 5 MB of copied pages for nearbands at
	 * 5,000,000 pages, which LMDB keeps for its next transactions */
	if (!rc && p->active)
		rc = pass_step(txn, lv, p, bound / 4 ? bound / 4 : 1);
	return rc;
}
