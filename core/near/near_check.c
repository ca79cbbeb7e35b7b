/* near_check.c - fsck of the simhash tables: every row names a blob with
 * its hash, every record with a simhash has its rows, and the shingle sets
 * and their bands (near_setcheck.c) are checked after them. See near.h. */
#include "near_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/byteorder.h"
#include "base/extsort.h"

struct checker {
	MDB_txn *txn;
	struct store *st;
	near_bad_fn bad;
	void *ctx;
	uint64_t nbad;
	struct near_stage_cursors levels[PD_NEAR_MAX_TABLES]; /* each table's, for the records' probes */
	unsigned first, end; /* the tables the records' probes look at */
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

/* A row of table i not asked for (or of a damaged size): checked by
 * look-ups. */
static int check_unasked(struct checker *c, unsigned i, const char *table, const MDB_val *key, const MDB_val *v)
{
	if (i == 0) {
		check_row0(c, table, key, v);
		return 0;
	}
	return check_row(c, i, table, key, v);
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
		rc = check_unasked(c, i, table, &key, &v);
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

/* Blob k, of simhash h, lacks its row of table i. */
static void say_no_row(struct checker *c, const struct blobkey *k, uint64_t h, unsigned i)
{
	char name[BLOBKEY_NAME_MAX];
	blobkey_name(k, name);
	report(c, "blob %s: simhash %016llx has no row in near%u", name, (unsigned long long)h, i);
}

/* Every row a fingerprint with a simhash needs is there. */
static int check_record(struct checker *c, const struct blobkey *k, uint64_t h)
{
	unsigned n = c->st->near_tables;
	uint8_t kb[8], vb[NEAR_ROW_MAX];
	for (unsigned i = c->first; i < c->end; i++) {
		int has = near_stage_probe(&c->levels[i], near_block_key(kb, h, i, n), near_row_val(c->st, vb, h, i, n, k));
		if (has < 0)
			return has;
		if (!has)
			say_no_row(c, k, h, i);
	}
	return 0;
}

static int check_record_cb(void *ctx, const struct blobkey *k, uint64_t h)
{
	return check_record(ctx, k, h);
}

/* Every record's rows are in some level of each table of [first, end). */
static int check_records(struct checker *c, unsigned first, unsigned end)
{
	unsigned opened = first;
	int rc = 0;
	for (; opened < end && !rc; opened++) {
		MDB_dbi lv[NEAR_STAGE_LEVELS];
		rc = near_stage_cursors_open(c->txn, lv, near_hash_levels(c->st, opened, lv), &c->levels[opened]);
	}
	c->first = first;
	c->end = end;
	if (!rc)
		rc = near_each_simhash(c->txn, c->st, check_record_cb, c);
	while (opened > first) /* (one whose open failed has none open) */
		near_stage_cursors_close(&c->levels[--opened]);
	return rc;
}

/* ---- each table in one pass ------------------------------------------
 *
 * The rows of table i are met in the order of their keys, a block of the
 * hash, then their values (LMDB's order for the table's fixed sizes).
 * When every record fits the memory the check may take, the records are
 * read once and each table's rows made from them in memory
 * (near_rowset.c). Past it, each table's rows are sorted with the record
 * that asks for each (base/extsort.h: runs in an unnamed file beside the
 * store), the fingerprints read once a table, and met by one pass over
 * the table's levels together. (The table was taken in parts of its
 * blocks before, the fingerprints read again for each part:
 * tests/bench/README.md, "fsck's near tables sorted on disk".) */

/* A fingerprint record with a simhash. */
struct simrec {
	uint64_t h;
	struct blobkey k;
};

/* Every record, in memory. */
struct simrecs {
	struct simrec *v;
	size_t n, cap;
};

/* What a record takes in memory: itself and its row of a table. */
#define SIMREC_MEM (sizeof(struct simrec) + 8 + NEAR_ROW_MAX + sizeof(uint32_t))

static int collect_cb(void *ctx, const struct blobkey *k, uint64_t h)
{
	struct simrecs *r = ctx;
	if (r->n == r->cap) { /* (presized: grows only past the estimate) */
		size_t cap = r->cap + r->cap / 4 + 1024;
		struct simrec *v = realloc(r->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = (struct simrec){ h, *k };
	return 0;
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
	(void)row;
	say_no_row(m->c, &r->k, r->h, m->table);
	return 0;
}

/* Table i's rows of every record against the table, both directions in
 * one pass over its levels. */
static int check_in_memory(struct checker *c, unsigned i, const struct simrecs *recs)
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

/* A record of the sort: the row, then the simhash and the blob that ask
 * for it (for the report when no level has it). */
struct sorted_rows {
	struct checker *c;
	unsigned table;
	size_t rs; /* the row's bytes */
	struct extsort *sort;
};

static int sort_cb(void *ctx, const struct blobkey *k, uint64_t h)
{
	struct sorted_rows *r = ctx;
	uint8_t rec[8 + NEAR_ROW_MAX + 8 + BLOBKEY_BYTES];
	row_of(r->c, r->table, h, k, rec);
	put_be64(rec + r->rs, h);
	blobkey_encode(k, rec + r->rs + 8);
	return extsort_add(r->sort, rec);
}

/* A row of level l that no record asks for, or of a damaged size. */
static int level_unasked(void *ctx, size_t l, const MDB_val *key, const MDB_val *v)
{
	struct sorted_rows *r = ctx;
	char name[24];
	near_level_name(r->c->st, r->table, l, name, sizeof name);
	return check_unasked(r->c, r->table, name, key, v);
}

/* A record whose row no level has. */
static int row_missing(void *ctx, const uint8_t *rec)
{
	struct sorted_rows *r = ctx;
	struct blobkey k;
	blobkey_decode(rec + r->rs + 8, &k);
	say_no_row(r->c, &k, get_be64(rec + r->rs), r->table);
	return 0;
}

/* Table i past the memory bound: the fingerprints read, every record's
 * row sorted (mem bytes in memory), one pass over the levels. A sort that
 * cannot write its file (a full disk) has reported nothing yet: the table
 * is then probed, row by row and record by record. */
static int check_sorted(struct checker *c, unsigned i, size_t mem)
{
	unsigned n = c->st->near_tables;
	uint8_t kb[8];
	struct near_meet m = { .ks = near_block_key(kb, 0, i, n).mv_size, .vs = near_row_bytes(c->st, i, n),
			       .unasked = level_unasked, .missing = row_missing };
	struct sorted_rows r = { c, i, m.ks + m.vs, NULL };
	m.ctx = &r;
	int rc = extsort_new(r.rs + 8 + BLOBKEY_BYTES, mem, c->st->dirfd, &r.sort);
	if (rc)
		return rc;
	if ((rc = near_each_simhash(c->txn, c->st, sort_cb, &r)) == 0)
		rc = extsort_finish(r.sort);
	if (rc && rc != -ENOMEM) {
		extsort_free(r.sort);
		rc = check_table(c, i);
		return rc ? rc : check_records(c, i, i + 1);
	}
	if (!rc) {
		MDB_dbi lv[NEAR_STAGE_LEVELS];
		size_t nl = near_hash_levels(c->st, i, lv);
		near_check_count_runs(extsort_runs(r.sort));
		rc = near_meet_sorted(c->txn, lv, nl, r.sort, &m);
	}
	extsort_free(r.sort);
	return rc;
}

/* Every table in one pass: 0, 1 (no memory at all: probe), or an error;
 * -ENOSPC and the like when the sort past the bound cannot write its
 * file (near_check then probes). */
static int check_tables_in_order(struct checker *c)
{
	MDB_stat ms;
	size_t mem = near_check_mem_max();
	int rc = pd_mdb_err(mdb_stat(c->txn, c->st->db_fp, &ms));
	if (rc)
		return rc;
	if (!mem)
		return 1;
	if (ms.ms_entries <= mem / SIMREC_MEM) { /* the records read once for every table */
		struct simrecs all = { 0 };
		all.v = malloc((ms.ms_entries ? ms.ms_entries : 1) * sizeof *all.v);
		all.cap = all.v ? (ms.ms_entries ? ms.ms_entries : 1) : 0;
		rc = near_each_simhash(c->txn, c->st, collect_cb, &all);
		for (unsigned i = 0; i < c->st->near_tables && !rc; i++)
			rc = check_in_memory(c, i, &all);
		free(all.v);
		return rc;
	}
	for (unsigned i = 0; i < c->st->near_tables && !rc; i++)
		rc = check_sorted(c, i, mem);
	return rc;
}

int near_check(MDB_txn *txn, struct store *st, near_bad_fn bad, void *ctx, uint64_t *nbad)
{
	struct checker c = { .txn = txn, .st = st, .bad = bad, .ctx = ctx };
	int rc = st->near_tables ? check_tables_in_order(&c) : 0;
	if (rc == 1) { /* no memory for it: a probe a row */
		rc = 0;
		for (unsigned i = 0; i < st->near_tables && !rc; i++)
			rc = check_table(&c, i);
		if (!rc)
			rc = check_records(&c, 0, st->near_tables);
	}
	*nbad = c.nbad;
	return rc ? rc : near_set_check(txn, st, bad, ctx, nbad);
}
