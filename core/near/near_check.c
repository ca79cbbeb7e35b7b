/* near_check.c - fsck of the simhash tables: every row names a blob with
 * its hash, every record with a simhash has its rows, and the shingle sets
 * and their bands (near_lsh.c) are checked after them. See near.h. */
#include "near_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

struct checker {
	MDB_txn *txn;
	struct store *st;
	near_bad_fn bad;
	void *ctx;
	uint64_t nbad;
	struct near_stage_cursors levels[PD_NEAR_MAX_TABLES]; /* each table's, for the records' probes */
};

void near_report(near_bad_fn bad, void *ctx, uint64_t *nbad, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	(*nbad)++;
	bad(ctx, line);
}

#define report(c, ...) near_report((c)->bad, (c)->ctx, &(c)->nbad, __VA_ARGS__)

/* The hash of a row, or false (reported) when its key or value has the
 * wrong size for table i. */
static bool decode_row(struct checker *c, unsigned i, const char *name, const MDB_val *key, const MDB_val *v,
		       uint64_t *h)
{
	unsigned n = c->st->near_tables, start, width;
	uint8_t kb[8];
	near_block_span(i, n, &start, &width);
	size_t ks = near_block_key(kb, 0, i, n).mv_size;
	if (key->mv_size != ks || v->mv_size != near_row_bytes(c->st, i, n)) {
		report(c, "%s: a row with a key of %zu bytes and a value of %zu (want %zu and %zu)", name,
		       key->mv_size, v->mv_size, ks, near_row_bytes(c->st, i, n));
		return false;
	}
	uint64_t block = near_get_be(key->mv_data, ks);
	if (width < 64 && block >> width) {
		report(c, "%s: a key wider than its block", name);
		return false;
	}
	*h = near_row_hash(block, v->mv_data, i, n);
	return true;
}

/* A row of near0: its blob has a record with that simhash. */
static void check_row0(struct checker *c, const char *table, const MDB_val *key, const MDB_val *v)
{
	char name[BLOBKEY_NAME_MAX];
	uint64_t h;
	if (!decode_row(c, 0, table, key, v, &h))
		return;
	const uint8_t *tail = (const uint8_t *)v->mv_data + near_rest_bytes(0, c->st->near_tables);
	if (!c->st->near0_keys) {
		/* layout 2: a blob of its MD5 prefix has that simhash */
		size_t n;
		int rc = near_prefix_blobs(c->txn, c->st, tail, h, NULL, NULL, &n);
		if (!rc && !n)
			report(c, "%s: a row of simhash %016llx and MD5 prefix %02x%02x%02x%02x names no blob with "
			       "that simhash", table, (unsigned long long)h, tail[0], tail[1], tail[2], tail[3]);
		return;
	}
	struct blobkey k;
	blobkey_decode(tail, &k);
	blobkey_name(&k, name);
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(&k, kb);
	MDB_val fk = { BLOBKEY_BYTES, kb }, fv;
	struct fprec r;
	if (mdb_get(c->txn, c->st->db_fp, &fk, &fv) || fprec_decode(fv.mv_data, fv.mv_size, &r))
		report(c, "%s: a row names blob %s, which has no fingerprint record", table, name);
	else if (!(r.flags & FPREC_HAS_SIMHASH) || r.simhash != h)
		report(c, "%s: the row of blob %s has simhash %016llx, its record %s", table, name,
		       (unsigned long long)h, (r.flags & FPREC_HAS_SIMHASH) ? "another" : "none");
}

/* A row of table i >= 1: near0 has a blob of that hash. */
static int check_row(struct checker *c, unsigned i, const char *table, const MDB_val *key, const MDB_val *v)
{
	uint64_t h;
	if (!decode_row(c, i, table, key, v, &h))
		return 0;
	bool yes;
	int rc = near_hash_indexed(c->txn, c->st, h, &yes);
	if (!rc && !yes)
		report(c, "%s: simhash %016llx belongs to no blob in near0", table, (unsigned long long)h);
	return rc;
}

/* Every row of level l of table i. want (NULL: none): the rows the
 * records ask for (near_rowset.c), each met marked and taken as checked;
 * any other row is checked by look-ups. */
static int check_level(struct checker *c, unsigned i, size_t l, MDB_dbi dbi, struct near_rowset *want)
{
	char table[24];
	near_level_name(c->st, i, l, table, sizeof table);
	MDB_cursor *cur;
	int rc = pd_mdb_err(mdb_cursor_open(c->txn, dbi, &cur));
	if (rc)
		return rc;
	MDB_val key, v;
	uint8_t row[8 + NEAR_ROW_MAX];
	int mrc;
	for (mrc = mdb_cursor_get(cur, &key, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(cur, &key, &v, MDB_NEXT)) {
		if (want && key.mv_size + v.mv_size == want->rs && key.mv_size <= 8) {
			memcpy(row, key.mv_data, key.mv_size);
			memcpy(row + key.mv_size, v.mv_data, v.mv_size);
			if (near_rowset_mark(want, row))
				continue;
		}
		if (i == 0)
			check_row0(c, table, &key, &v);
		else
			rc = check_row(c, i, table, &key, &v);
	}
	mdb_cursor_close(cur);
	return rc ? rc : (mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0);
}

static int check_table(struct checker *c, unsigned i)
{
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	size_t nl = near_hash_levels(c->st, i, lv);
	int rc = 0;
	for (size_t l = 0; l < nl && !rc; l++)
		rc = check_level(c, i, l, lv[l], NULL);
	return rc;
}

/* Every row a fingerprint with a simhash needs is there. */
static int check_record(struct checker *c, const struct blobkey *k, uint64_t h)
{
	unsigned n = c->st->near_tables;
	uint8_t kb[8], vb[NEAR_ROW_MAX];
	char name[BLOBKEY_NAME_MAX];
	for (unsigned i = 0; i < n; i++) {
		int has = near_stage_probe(&c->levels[i], near_block_key(kb, h, i, n), near_row_val(c->st, vb, h, i, n, k));
		if (has < 0)
			return has;
		if (!has) {
			blobkey_name(k, name);
			report(c, "blob %s: simhash %016llx has no row in near%u", name, (unsigned long long)h, i);
		}
	}
	return 0;
}

static int check_record_cb(void *ctx, const struct blobkey *k, uint64_t h)
{
	return check_record(ctx, k, h);
}

/* Every record's rows are in some level of each table. */
static int check_records(struct checker *c)
{
	unsigned opened = 0;
	int rc = 0;
	for (; opened < c->st->near_tables && !rc; opened++) {
		MDB_dbi lv[NEAR_STAGE_LEVELS];
		rc = near_stage_cursors_open(c->txn, lv, near_hash_levels(c->st, opened, lv), &c->levels[opened]);
	}
	if (!rc)
		rc = near_each_simhash(c->txn, c->st, check_record_cb, c);
	while (opened) /* (one whose open failed has none open) */
		near_stage_cursors_close(&c->levels[--opened]);
	return rc;
}

/* ---- the same in memory: each table in one pass (near_rowset.c) ---- */

/* A fingerprint record with a simhash. */
struct simrec {
	uint64_t h;
	struct blobkey k;
};

struct simrecs {
	struct simrec *v;
	size_t n, cap;
};

static int collect_cb(void *ctx, const struct blobkey *k, uint64_t h)
{
	struct simrecs *r = ctx;
	if (r->n == r->cap)
		return -E2BIG; /* more records than the table counted: probe instead */
	r->v[r->n++] = (struct simrec){ h, *k };
	return 0;
}

/* Every record with a simhash into *r, when they and one table's rows fit
 * the memory the check may take (near_check_mem): 0, 1 (they do not:
 * probe), or an error. */
static int collect_records(struct checker *c, struct simrecs *r)
{
	MDB_stat ms;
	int rc = pd_mdb_err(mdb_stat(c->txn, c->st->db_fp, &ms));
	if (rc)
		return rc;
	size_t per = sizeof(struct simrec) + near_rowset_entry_bytes(8 + NEAR_ROW_MAX, true);
	if (ms.ms_entries > near_check_mem_max() / per)
		return 1;
	*r = (struct simrecs){ .cap = ms.ms_entries };
	r->v = malloc((r->cap ? r->cap : 1) * sizeof *r->v);
	if (!r->v)
		return 1;
	rc = near_each_simhash(c->txn, c->st, collect_cb, r);
	if (rc == -E2BIG) {
		free(r->v);
		r->v = NULL;
		return 1;
	}
	return rc;
}

/* Row bytes of a table: its key, then its value. */
static size_t row_of(struct checker *c, unsigned i, uint64_t h, const struct blobkey *k, uint8_t row[8 + NEAR_ROW_MAX])
{
	unsigned n = c->st->near_tables;
	uint8_t kb[8], vb[NEAR_ROW_MAX];
	MDB_val key = near_block_key(kb, h, i, n), v = near_row_val(c->st, vb, h, i, n, k);
	memcpy(row, key.mv_data, key.mv_size);
	memcpy(row + key.mv_size, v.mv_data, v.mv_size);
	return key.mv_size + v.mv_size;
}

struct missing_ctx {
	struct checker *c;
	const struct simrecs *recs;
	unsigned table;
};

static int report_missing(void *ctx, const uint8_t *row, uint32_t tag)
{
	struct missing_ctx *m = ctx;
	const struct simrec *r = &m->recs->v[tag];
	char name[BLOBKEY_NAME_MAX];
	(void)row;
	blobkey_name(&r->k, name);
	report(m->c, "blob %s: simhash %016llx has no row in near%u", name, (unsigned long long)r->h, m->table);
	return 0;
}

/* Table i against the records' rows: both directions in one pass. */
static int check_table_sorted(struct checker *c, unsigned i, const struct simrecs *recs)
{
	struct near_rowset want;
	uint8_t row[8 + NEAR_ROW_MAX];
	size_t rs = recs->n ? row_of(c, i, recs->v[0].h, &recs->v[0].k, row) : 1;
	int rc = near_rowset_init(&want, rs, true, recs->n);
	for (size_t j = 0; j < recs->n && !rc; j++) {
		row_of(c, i, recs->v[j].h, &recs->v[j].k, row);
		rc = near_rowset_add(&want, row, (uint32_t)j);
	}
	if (!rc)
		rc = near_rowset_sort(&want);
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	size_t nl = rc ? 0 : near_hash_levels(c->st, i, lv);
	for (size_t l = 0; l < nl && !rc; l++)
		rc = check_level(c, i, l, lv[l], &want);
	struct missing_ctx m = { c, recs, i };
	if (!rc)
		rc = near_rowset_each_unseen(&want, report_missing, &m);
	near_rowset_free(&want);
	return rc;
}

int near_check(MDB_txn *txn, struct store *st, near_bad_fn bad, void *ctx, uint64_t *nbad)
{
	struct checker c = { txn, st, bad, ctx, 0, { { { NULL }, 0 } } };
	struct simrecs recs = { 0 };
	int rc = st->near_tables ? collect_records(&c, &recs) : 0;
	if (rc == 1) { /* too many to hold: a probe a row */
		rc = 0;
		for (unsigned i = 0; i < st->near_tables && !rc; i++)
			rc = check_table(&c, i);
		if (!rc)
			rc = check_records(&c);
	} else {
		for (unsigned i = 0; i < st->near_tables && !rc; i++)
			rc = check_table_sorted(&c, i, &recs);
	}
	free(recs.v);
	*nbad = c.nbad;
	return rc ? rc : near_set_check(txn, st, bad, ctx, nbad);
}
