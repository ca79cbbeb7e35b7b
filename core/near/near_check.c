/* near_check.c - fsck of the simhash tables: every row names a blob with
 * its hash, every record with a simhash has its rows, and the shingle sets
 * and their bands (near_setcheck.c) are checked after them. See near.h. */
#include "near_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/byteorder.h"

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

/* The keys of a table's blocks [lo, hi): from `first` up to `end` in the
 * table's order (from its first key when lo is 0, to its last when hi is
 * past the last block), so that parts of consecutive blocks cover every
 * key, one of a damaged size too. */
struct key_range {
	uint8_t first[8], end[8];
	size_t ks;
	bool from_start, to_end;
};

static void key_range_of(const struct store *st, unsigned i, uint64_t lo, uint64_t hi, struct key_range *r)
{
	unsigned start, width;
	near_block_span(i, st->near_tables, &start, &width);
	uint8_t b8[8];
	r->ks = (width + 7) / 8;
	put_be64(b8, lo);
	memcpy(r->first, b8 + 8 - r->ks, r->ks);
	put_be64(b8, hi);
	memcpy(r->end, b8 + 8 - r->ks, r->ks);
	r->from_start = lo == 0;
	r->to_end = width >= 64 || hi >= UINT64_C(1) << width;
}

/* The cursor's first row of the range (part NULL: of the table). */
static int range_first(MDB_cursor *cur, const struct key_range *part, MDB_val *key, MDB_val *v)
{
	if (!part || part->from_start)
		return mdb_cursor_get(cur, key, v, MDB_FIRST);
	*key = (MDB_val){ part->ks, (void *)part->first };
	return mdb_cursor_get(cur, key, v, MDB_SET_RANGE);
}

/* Is key past the range? */
static bool range_past(MDB_txn *txn, MDB_dbi dbi, const struct key_range *part, const MDB_val *key)
{
	if (!part || part->to_end)
		return false;
	MDB_val end = { part->ks, (void *)part->end };
	return mdb_cmp(txn, dbi, key, &end) >= 0;
}

/* Every row of level l of table i (part: of a range of its keys; NULL:
 * all). want (NULL: none): the rows the records ask for (near_rowset.c),
 * each met marked and taken as checked; any other row is checked by
 * look-ups. */
static int check_level(struct checker *c, unsigned i, size_t l, MDB_dbi dbi, struct near_rowset *want,
		       const struct key_range *part)
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
	for (mrc = range_first(cur, part, &key, &v); mrc == 0 && !rc && !range_past(c->txn, dbi, part, &key);
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
		rc = check_level(c, i, l, lv[l], NULL, NULL);
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
	for (unsigned i = 0; i < n; i++) {
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

/* ---- the same in memory: each table in one pass (near_rowset.c) ----
 *
 * The rows of table i are met in the order of their keys, a block of the
 * hash; when the records' rows do not all fit the memory the check may
 * take, the table is taken in parts, each a range of blocks: the records
 * whose block falls in it (the fingerprints read once a part), then the
 * table's rows from the range's first key to its last. */

/* A fingerprint record with a simhash. */
struct simrec {
	uint64_t h;
	struct blobkey k;
};

/* The records of one part: those whose block of table i is in [lo, hi)
 * (every record when all). */
struct simrecs {
	struct simrec *v;
	size_t n, cap;
	unsigned table, ntables;
	uint64_t lo, hi;
	bool all;
};

/* What a record takes in memory: itself and its row of a table. */
#define SIMREC_MEM (sizeof(struct simrec) + 8 + NEAR_ROW_MAX + sizeof(uint32_t))

static int collect_cb(void *ctx, const struct blobkey *k, uint64_t h)
{
	struct simrecs *r = ctx;
	if (!r->all) {
		uint64_t block = near_block(h, r->table, r->ntables);
		if (block < r->lo || block >= r->hi)
			return 0;
	}
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

/* Table i's rows of the records recs (a part, or all) against the table:
 * both directions in one pass over the part's keys. */
static int check_part(struct checker *c, unsigned i, const struct simrecs *recs)
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
	struct key_range range = { 0 }, *part = NULL;
	if (!recs->all) {
		part = &range;
		key_range_of(c->st, i, recs->lo, recs->hi, part);
	}
	for (size_t l = 0; l < nl && !rc; l++)
		rc = check_level(c, i, l, lv[l], &want, part);
	struct missing_ctx m = { c, recs, i };
	if (!rc)
		rc = near_rowset_each_unseen(&want, report_missing, &m);
	near_rowset_free(&want);
	return rc;
}

/* The parts a table takes to fit the memory the check may take (0: not
 * even a part a block: probe). */
static uint64_t parts_for(struct checker *c, unsigned i, size_t records)
{
	size_t mem = near_check_mem_max();
	if (!records)
		return 1;
	if (mem < SIMREC_MEM)
		return 0;
	uint64_t parts = (records + mem / SIMREC_MEM - 1) / (mem / SIMREC_MEM);
	unsigned start, width;
	near_block_span(i, c->st->near_tables, &start, &width);
	return width < 64 && parts > UINT64_C(1) << width ? 0 : parts;
}

/* Room for about n records in r (none: r grows as it goes), so that the
 * records are not copied as they come: in a heap, the copies left behind
 * were as large again as what the check holds. */
static void presize(struct simrecs *r, size_t n)
{
	r->v = malloc((n ? n : 1) * sizeof *r->v);
	r->cap = r->v ? (n ? n : 1) : 0;
}

/* Table i in `parts` parts of its blocks, the fingerprints read once a
 * part (each part about records / parts of them). */
static int check_table_in_parts(struct checker *c, unsigned i, uint64_t parts, size_t records)
{
	unsigned start, width;
	near_block_span(i, c->st->near_tables, &start, &width);
	/* (a 64-bit block, which a table of K+1 >= 2 never has, would be one part) */
	uint64_t blocks = width < 64 ? UINT64_C(1) << width : 0, step = blocks / parts;
	int rc = 0;
	for (uint64_t p = 0; p < parts && !rc; p++) {
		struct simrecs r = { .table = i, .ntables = c->st->near_tables, .lo = p * step,
				     .hi = p + 1 == parts ? blocks : (p + 1) * step };
		presize(&r, records / parts + records / parts / 16);
		rc = near_each_simhash(c->txn, c->st, collect_cb, &r);
		if (!rc)
			rc = check_part(c, i, &r);
		free(r.v);
	}
	return rc;
}

/* Every table in memory: 0, 1 (not even a part of one block fits:
 * probe), or an error. */
static int check_tables_in_memory(struct checker *c)
{
	MDB_stat ms;
	int rc = pd_mdb_err(mdb_stat(c->txn, c->st->db_fp, &ms));
	if (rc)
		return rc;
	uint64_t parts[PD_NEAR_MAX_TABLES];
	bool one_part = true;
	for (unsigned i = 0; i < c->st->near_tables; i++) {
		if (!(parts[i] = parts_for(c, i, ms.ms_entries)))
			return 1;
		one_part = one_part && parts[i] == 1;
	}
	if (one_part) { /* the records read once for every table */
		struct simrecs all = { .all = true };
		presize(&all, ms.ms_entries);
		rc = near_each_simhash(c->txn, c->st, collect_cb, &all);
		for (unsigned i = 0; i < c->st->near_tables && !rc; i++)
			rc = check_part(c, i, &all);
		free(all.v);
		return rc;
	}
	for (unsigned i = 0; i < c->st->near_tables && !rc; i++)
		rc = check_table_in_parts(c, i, parts[i], ms.ms_entries);
	return rc;
}

int near_check(MDB_txn *txn, struct store *st, near_bad_fn bad, void *ctx, uint64_t *nbad)
{
	struct checker c = { txn, st, bad, ctx, 0, { { { NULL }, 0 } } };
	int rc = st->near_tables ? check_tables_in_memory(&c) : 0;
	if (rc == 1) { /* no memory for it: a probe a row */
		rc = 0;
		for (unsigned i = 0; i < st->near_tables && !rc; i++)
			rc = check_table(&c, i);
		if (!rc)
			rc = check_records(&c);
	}
	*nbad = c.nbad;
	return rc ? rc : near_set_check(txn, st, bad, ctx, nbad);
}
