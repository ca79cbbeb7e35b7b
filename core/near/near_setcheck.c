/* near_setcheck.c - fsck of the shingle sets (nearfeat) and their band
 * rows: every set names a record with a simhash and decodes, every set
 * has its rows, every row stands for a blob whose set has it. See near.h
 * and near_int.h.
 *
 * The sets are read once, in key order (a difference's base resolved as
 * near_each_set does), and the band rows they ask for are sorted
 * (base/extsort.h: in memory when they fit near_check_mem, else in runs
 * in an unnamed file beside the store, merged). One ordered pass over the
 * band tables together then meets them: a row asked for and in no table
 * is lacking; a table's row nobody asked for is checked as before, by the
 * blobs of its MD5 prefix (the slow way, taken only by a damaged store).
 * When a row is lacking, one more pass over the sets probes each for its
 * rows and names those that lack one (the rows keep a blob's MD5 prefix
 * only). So the check is a read of each table in order at any size (the
 * bands were taken in groups past the bound before, the sets decoded
 * again for each: tests/bench/README.md, "fsck's near tables sorted on
 * disk"). Only with no memory at all, or when the sort cannot write its
 * file, is every set's rows probed and every row looked up. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/extsort.h"
#include "blob/blob.h"
#include "near_int.h"

/* A band row as the sort holds it: the band, then the row; in memcmp
 * order as a band table's rows are (key the band, values sorted). */
#define SORT_ROW (1 + BAND_VAL)

struct setcheck {
	MDB_txn *txn;
	struct store *st;
	near_bad_fn bad;
	void *ctx;
	uint64_t nbad;
	size_t ord, nsets; /* the set being read (its place in nearfeat), how many */
	uint8_t *checked;  /* a bit a place: its set asks for its rows */
	uint64_t lacking;  /* rows asked for that no table holds */
	struct extsort *rows; /* every band's rows asked for (NULL: probed) */
	bool sort_failed;
	size_t sort_failed_at; /* the sets before this place asked the sort that failed */
};

#define report(c, ...) near_report((c)->bad, (c)->ctx, &(c)->nbad, __VA_ARGS__)

/* The set at place c->ord asks the sort for its rows of every band. */
static int sort_rows(struct setcheck *c, const struct blobkey *k, const struct nearset *s)
{
	uint32_t keys[NEARSET_BANDS];
	nearset_band_keys(s, keys);
	int rc = 0;
	for (size_t b = 0; b < NEARSET_BANDS && !rc; b++) {
		uint8_t row[SORT_ROW] = { (uint8_t)b };
		band_val(row + 1, keys[b], k->md5);
		rc = extsort_add(c->rows, row);
	}
	return rc;
}

/* A sort that fails (its file on a full disk): this set and the rest
 * probed, and the sets that asked it probed after the walk
 * (check_sorted). */
static void sort_fails(struct setcheck *c)
{
	extsort_free(c->rows);
	c->rows = NULL;
	c->sort_failed = true;
	c->sort_failed_at = c->ord;
}

/* The set's blob has all its rows (asks the sort for them, or probes). */
static int check_bands(struct setcheck *c, const struct blobkey *k, const struct nearset *s, const char *name)
{
	if (c->rows) {
		if (c->ord >= c->nsets)
			return -E2BIG; /* more sets than mdb_stat counted (one read transaction: a guard) */
		near_bit_set(c->checked, c->ord);
		if (sort_rows(c, k, s) == 0)
			return 0;
		sort_fails(c);
	}
	size_t band;
	int rc = near_bands_missing(c->txn, c->st, s, k->md5, &band);
	if (rc > 0)
		report(c, "nearbands: blob %s lacks its row of band %zu", name, band);
	return rc > 0 ? 0 : rc;
}

static int check_one(struct setcheck *c, const MDB_val *key, const MDB_val *row, const struct nearset *s)
{
	char name[BLOBKEY_NAME_MAX] = "?", bname[BLOBKEY_NAME_MAX] = "?";
	struct blobkey k, base;
	if (key->mv_size == BLOBKEY_BYTES) {
		blobkey_decode(key->mv_data, &k);
		blobkey_name(&k, name);
	}
	bool diff = nearset_is_diff(row->mv_data, row->mv_size);
	if (diff && !nearset_diff_base(row->mv_data, row->mv_size, &base))
		blobkey_name(&base, bname);
	if (!s && diff) {
		report(c,
		       "nearfeat: the set of blob %s, kept as a difference from blob %s's, does not decode (that set missing or damaged, or a chain of more than %d differences)",
		       name, bname, NEAR_SET_DIFF_DEPTH);
		return 0;
	}
	if (!s) {
		report(c, "nearfeat: a row that does not decode (%zu bytes)", key->mv_size);
		return 0;
	}
	struct fprec r;
	int rc = blob_get(c->txn, c->st, &k, &r);
	if (rc == -ENOENT || (!rc && !(r.flags & FPREC_HAS_SIMHASH))) {
		report(c, "nearfeat: blob %s has a shingle set and no signature", name);
		return 0;
	}
	if (rc == -EUCLEAN)
		return 0; /* an undecodable record: fsck's blob pass reports it, and the check goes on */
	if (rc)
		return rc;
	if ((rc = near_diff_unlinked(c->txn, c->st, row, &k, &base)) > 0)
		report(c,
		       "nearfeat: the set of blob %s is kept as a difference from blob %s's, and its record is not a delta on that blob",
		       name, bname);
	return rc < 0 ? rc : check_bands(c, &k, s, name);
}

static int check_one_cb(void *ctx, const MDB_val *key, const MDB_val *row, const struct nearset *s)
{
	struct setcheck *c = ctx;
	int rc = check_one(c, key, row, s);
	c->ord++;
	return rc;
}

/* fn for the set at place c->ord if the walk checked it (its blob k). */
static int if_checked(struct setcheck *c, const MDB_val *key, const struct nearset *s,
		      int (*fn)(struct setcheck *c, const struct blobkey *k, const struct nearset *s))
{
	int rc = 0;
	if (c->ord < c->nsets && near_bit_get(c->checked, c->ord) && s && key->mv_size == BLOBKEY_BYTES) {
		struct blobkey k;
		blobkey_decode(key->mv_data, &k);
		rc = fn(c, &k, s);
	}
	c->ord++;
	return rc;
}

static int probe_bands(struct setcheck *c, const struct blobkey *k, const struct nearset *s)
{
	char name[BLOBKEY_NAME_MAX];
	blobkey_name(k, name);
	return check_bands(c, k, s, name);
}

/* After the pass over the tables, when a row asked for was not met: each
 * set the walk checked probed for its rows, and named with the first it
 * lacks. */
static int probe_again_cb(void *ctx, const MDB_val *key, const MDB_val *row, const struct nearset *s)
{
	(void)row;
	return if_checked(ctx, key, s, probe_bands);
}

/* Does a blob of the prefix have a set that does not decode (reported as
 * such, so that its rows are not reported again)? */
static bool prefix_damaged(MDB_txn *txn, struct store *st, const uint8_t *prefix)
{
	uint8_t kb[BLOBKEY_BYTES] = { 0 };
	memcpy(kb, prefix, BAND_PREFIX);
	MDB_cursor *c;
	if (mdb_cursor_open(txn, st->db_nearfeat, &c))
		return false;
	MDB_val k = { BLOBKEY_BYTES, kb }, v;
	bool damaged = false;
	struct nearset *s = malloc(sizeof *s);
	for (int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	     s && !damaged && mrc == 0 && k.mv_size >= BAND_PREFIX && !memcmp(k.mv_data, prefix, BAND_PREFIX);
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct blobkey bk;
		if (k.mv_size != BLOBKEY_BYTES) {
			damaged = true;
			break;
		}
		blobkey_decode(k.mv_data, &bk);
		damaged = near_set_resolve_row(txn, st, &bk, &v, s, NULL) != 0;
	}
	free(s);
	mdb_cursor_close(c);
	return damaged;
}

static int owner_found(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	(void)ctx, (void)k, (void)h, (void)dist;
	return 1;
}

/* A row of band b stands for a blob whose set has it (a find takes the
 * one blob of a prefix on the row's word: near_band_owners). */
static int check_row(struct setcheck *c, const char *table, size_t b, const uint8_t *p)
{
	uint32_t key = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
	int rc = near_band_owners(c->txn, c->st, b, key, p + 4, NULL, owner_found, NULL);
	if (rc == 0 && !prefix_damaged(c->txn, c->st, p + 4))
		report(c, "%s: the row of band %zu, key %08x, MD5 prefix %02x%02x%02x%02x stands for no blob", table, b,
		       key, p[4], p[5], p[6], p[7]);
	return rc > 0 ? 0 : rc;
}

/* A band table's row no set asks for, or of a damaged shape. */
static int band_unasked(void *ctx, size_t t, const MDB_val *k, const MDB_val *v)
{
	struct setcheck *c = ctx;
	const char *table = near_band_table_name(c->st, t);
	if (k->mv_size != 1 || v->mv_size != BAND_VAL || *(const uint8_t *)k->mv_data >= NEARSET_BANDS) {
		report(c, "%s: a row of %zu and %zu bytes", table, k->mv_size, v->mv_size);
		return 0;
	}
	return check_row(c, table, *(const uint8_t *)k->mv_data, v->mv_data);
}

/* Every row of band table t checked by look-ups (band_unasked). */
static int check_table_rows(struct setcheck *c, MDB_dbi dbi, size_t t)
{
	MDB_cursor *cur;
	int rc = pd_mdb_err(mdb_cursor_open(c->txn, dbi, &cur));
	if (rc)
		return rc;
	MDB_val k, v;
	int mrc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
		rc = band_unasked(c, t, &k, &v);
	mdb_cursor_close(cur);
	return rc ? rc : (mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0);
}

/* Every band row of every table. */
static int check_rows(struct setcheck *c)
{
	MDB_dbi dbi[NEAR_BAND_TABLES];
	size_t n = near_band_tables(c->st, dbi);
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		rc = check_table_rows(c, dbi[i], i);
	return rc;
}

/* ---- the band rows sorted ------------------------------------------------- */

static int band_lacking(void *ctx, const uint8_t *rec)
{
	(void)rec;
	((struct setcheck *)ctx)->lacking++;
	return 0;
}

/* The band tables together against the sorted rows the sets asked for. */
static int check_rows_sorted(struct setcheck *c)
{
	MDB_dbi dbi[NEAR_BAND_TABLES];
	size_t n = near_band_tables(c->st, dbi);
	struct near_meet m = { .ks = 1, .vs = BAND_VAL, .unasked = band_unasked, .missing = band_lacking, .ctx = c };
	return near_meet_sorted(c->txn, dbi, n, c->rows, &m);
}

/* After the sort failed: the sets that had asked it probed. */
static int probe_asked_cb(void *ctx, const MDB_val *key, const MDB_val *row, const struct nearset *s)
{
	struct setcheck *c = ctx;
	if (c->ord < c->sort_failed_at)
		return probe_again_cb(ctx, key, row, s);
	c->ord++;
	return 0;
}

/* The sets read once, every band's rows sorted, one pass over the tables.
 * mem: what the sort may hold in memory. */
static int check_sorted(struct setcheck *c, size_t mem)
{
	c->checked = calloc(c->nsets / 8 + 1, 1);
	int rc = c->checked ? extsort_new(SORT_ROW, mem, c->st->dirfd, &c->rows) : -ENOMEM;
	if (!rc)
		rc = near_each_set(c->txn, c->st, check_one_cb, c);
	if (!rc && c->rows && extsort_finish(c->rows)) {
		c->ord = c->nsets;
		sort_fails(c);
	}
	if (!rc && c->rows) {
		near_check_count_runs(extsort_runs(c->rows));
		rc = check_rows_sorted(c);
	}
	extsort_free(c->rows);
	c->rows = NULL;
	if (!rc && c->sort_failed) {
		/* probed as the check without memory: the sets that asked
		 * the sort, then every row */
		c->ord = 0;
		rc = near_each_set(c->txn, c->st, probe_asked_cb, c);
		if (!rc)
			rc = check_rows(c);
	} else if (!rc && c->lacking) {
		c->ord = 0;
		rc = near_each_set(c->txn, c->st, probe_again_cb, c);
	}
	free(c->checked);
	return rc;
}

int near_set_check(MDB_txn *txn, struct store *st, near_bad_fn bad, void *ctx, uint64_t *nbad)
{
	if (!st->has_nearset)
		return 0;
	struct setcheck c = { .txn = txn, .st = st, .bad = bad, .ctx = ctx };
	MDB_stat ms;
	int rc = pd_mdb_err(mdb_stat(txn, st->db_nearfeat, &ms));
	c.nsets = rc ? 0 : ms.ms_entries;
	size_t fixed = c.nsets / 8 + 1, mem = near_check_mem_max();
	if (!rc && mem) /* the sort takes what is left (it sorts in place) */
		rc = check_sorted(&c, mem > fixed ? mem - fixed : 0);
	else if (!rc) { /* no memory for it: a probe a set, a look-up a row */
		rc = near_each_set(txn, st, check_one_cb, &c);
		if (!rc)
			rc = check_rows(&c);
	}
	*nbad += c.nbad;
	return rc;
}
