/* near_int.h - what near.c, near_rows.c, near_check.c, near_lsh.c,
 * near_bands.c, near_stage.c, near_setdiff.c and near_layout.c share (not
 * an interface). */
#ifndef PD_NEAR_INT_H
#define PD_NEAR_INT_H

#include <string.h>

#include "near.h"

/* Blob k's key in the tables keyed by blob (nearfeat, fingerprints). */
static inline MDB_val near_fp_key(uint8_t kb[BLOBKEY_BYTES], const struct blobkey *k)
{
	blobkey_encode(k, kb);
	return (MDB_val){ BLOBKEY_BYTES, kb };
}

/* A list of blob keys (rows to act on after a walk: free v). */
struct near_keys {
	uint8_t (*v)[BLOBKEY_BYTES];
	size_t n, cap;
};
/* Add key (one of another size is skipped: it names no blob, fsck
 * reports it): 0 or -ENOMEM. */
int near_keys_push(struct near_keys *l, const MDB_val *key);

/* Take blob k's shingle set and its LSH rows out (none: nothing to do). */
int near_set_remove(MDB_txn *txn, struct store *st, const struct blobkey *k);

/* ---- staged tables (near_stage.c; near.h, "Rows staged") ----
 *
 * A dup-sorted table of fixed-size rows and its two levels, newest first:
 * level 0, level 1, the table itself (lv[0..3)); a read-only store from
 * before the levels has the table alone (n = 1). Rows of at most
 * NEAR_STAGE_KEY_MAX bytes of key and NEAR_STAGE_VAL_MAX of value. */
/* Open (create: make) the two levels names[0], names[1] into lv; *has
 * whether they are there (a read-only store may have none: no error). */
int near_stage_open(MDB_txn *txn, const char *const names[2], unsigned create, MDB_dbi lv[2], bool *has);
/* Take out the row (key, val) from every level. */
int near_stage_del(MDB_txn *txn, const MDB_dbi *lv, size_t n, MDB_val key, MDB_val val);
/* Empty every level. */
int near_stage_drop(MDB_txn *txn, const MDB_dbi *lv, size_t n);
/* Is the row (key, val) in any level? 1, 0, or an error. */
int near_stage_has(MDB_txn *txn, const MDB_dbi *lv, size_t n, MDB_val key, MDB_val val);
/* A cursor on each level, in lv's order. */
struct near_stage_cursors {
	MDB_cursor *c[NEAR_STAGE_LEVELS];
	size_t n;
};
int near_stage_cursors_open(MDB_txn *txn, const MDB_dbi *lv, size_t n, struct near_stage_cursors *p);
void near_stage_cursors_close(struct near_stage_cursors *p);
/* near_stage_has through open cursors. */
int near_stage_probe(struct near_stage_cursors *p, MDB_val key, MDB_val val);
/* Inside a write transaction, after rows were added to lv[0]: empty it
 * into lv[1] once it holds `bound` rows, and move the next rows of the pass
 * p from lv[1] into lv[2] if a pass is on or lv[1] holds
 * NEAR_STAGE_FANOUT times `bound` (near.h, "Rows staged"). */
int near_stage_settle(MDB_txn *txn, const MDB_dbi lv[NEAR_STAGE_LEVELS], struct near_stage_pass *p, size_t bound);

/* Bit i of a bitmap of bytes. */
static inline bool near_bit_get(const uint8_t *m, size_t i)
{
	return m[i / 8] >> (i % 8) & 1;
}

static inline void near_bit_set(uint8_t *m, size_t i)
{
	m[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* ---- the rows a table should hold, for fsck (near_rowset.c) ----
 *
 * Rows of rs bytes each (a row's key then its value), each with a tag
 * (which record asked for it) when tagged, sorted in memory; a pass over
 * the table marks those it meets, and the rows never met are the missing
 * ones. */
struct near_rowset {
	uint8_t *v;	/* n entries of es bytes: the row, then its tag (u32) if tagged */
	uint8_t *seen;	/* a bit an entry, after near_rowset_sort */
	size_t n, cap, rs, es;
};
/* The bytes an entry of rows of row_bytes takes. */
static inline size_t near_rowset_entry_bytes(size_t row_bytes, bool tagged)
{
	return row_bytes + (tagged ? sizeof(uint32_t) : 0);
}
/* Room for cap rows first (it grows): 0 or -ENOMEM. */
int near_rowset_init(struct near_rowset *r, size_t row_bytes, bool tagged, size_t cap);
void near_rowset_free(struct near_rowset *r);
/* Add a row (tag: kept when tagged). */
int near_rowset_add(struct near_rowset *r, const void *row, uint32_t tag);
/* Sorts the rows and clears the marks: 0 or -ENOMEM. */
int near_rowset_sort(struct near_rowset *r);
/* Is row there? Marks it (every entry of that row) when it is. */
bool near_rowset_mark(struct near_rowset *r, const void *row);
/* fn for each entry never marked, in row order (tag 0 when untagged),
 * until fn returns nonzero. */
int near_rowset_each_unseen(const struct near_rowset *r, int (*fn)(void *ctx, const uint8_t *row, uint32_t tag),
			    void *ctx);
/* What fsck's checks of the near tables may hold in memory at once
 * (near_check_mem, near.h). */
size_t near_check_mem_max(void);
/* Runs a check's sort wrote to disk (near_check_spilled_runs). */
void near_check_count_runs(uint64_t runs);

/* ---- sorted rows met by one pass over a table's levels (near_rowset.c) ----
 *
 * The rows of n (<= NEAR_STAGE_LEVELS) dup-sorted tables, each read in
 * order and merged (key, then value: memcmp's order, which is LMDB's for
 * rows of fixed sizes), against records sorted by base/extsort.h whose
 * first ks + vs bytes are a row, key then value (what follows is the
 * caller's: who asked for it). A row met takes every record that asks
 * for it; a record whose row no table has goes to missing; a table's row
 * no record asks for, or not of ks and vs bytes, goes to unasked (table
 * t of the n). Either callback may stop the pass with nonzero. */
struct extsort;
struct near_meet {
	size_t ks, vs;
	int (*unasked)(void *ctx, size_t t, const MDB_val *key, const MDB_val *val);
	int (*missing)(void *ctx, const uint8_t *rec);
	void *ctx;
};
int near_meet_sorted(MDB_txn *txn, const MDB_dbi *dbi, size_t n, struct extsort *want, const struct near_meet *m);

/* Simhash table i's levels, newest first, the table itself last (one: a
 * read-only store from before layout 6): their count (near.c). */
size_t near_hash_levels(const struct store *st, unsigned i, MDB_dbi lv[NEAR_STAGE_LEVELS]);
/* The name of level l of simhash table i (near_hash_levels' order), for
 * fsck's reports (near.c). */
void near_level_name(const struct store *st, unsigned i, size_t l, char *buf, size_t len);
/* Is any blob still indexed under hash h (a row of near0, in any level)?
 * (near.c) */
int near_hash_indexed(MDB_txn *txn, struct store *st, uint64_t h, bool *yes);
/* Each fingerprint record with a simhash to fn, in key order, until fn
 * returns nonzero (a record that does not decode is skipped: fsck's blob
 * pass reports it) (near.c). */
int near_each_simhash(MDB_txn *txn, struct store *st, int (*fn)(void *ctx, const struct blobkey *k, uint64_t h),
		      void *ctx);

/* ---- keys and rows of the simhash tables (near_rows.c) ----
 *
 * Table i of K + 1 keys a hash by its block i (near_block), big-endian in
 * as few bytes as the block's width needs; a row's value holds the rest
 * of the hash, and in near0 the blob after it (its key in layout 1, the
 * first NEAR0_PREFIX bytes of its MD5 in layout 2). */
#define NEAR_ROW_MAX (8 + BLOBKEY_BYTES)
_Static_assert(NEAR_ROW_MAX <= NEAR_STAGE_VAL_MAX, "a simhash row fits a staged table's rows");

/* Where block i of K + 1 = ntables starts in a hash, and its width in bits. */
void near_block_span(unsigned i, unsigned ntables, unsigned *start, unsigned *width);
/* A big-endian integer of n <= 8 bytes. */
uint64_t near_get_be(const uint8_t *p, size_t n);
/* The key of block i of h, in kb. */
MDB_val near_block_key(uint8_t kb[8], uint64_t h, unsigned i, unsigned ntables);
/* Bytes of the rest of a hash in a row of table i. */
size_t near_rest_bytes(unsigned i, unsigned ntables);
/* Bytes of near0's tail after the rest. */
size_t near_tail0_bytes(const struct store *st);
/* Bytes of a row's value in table i. */
size_t near_row_bytes(const struct store *st, unsigned i, unsigned ntables);
/* The value of h's row in table i, in vb (k: the blob, near0 only; NULL
 * gives the smallest row of h, for a range lookup). */
MDB_val near_row_val(const struct store *st, uint8_t vb[NEAR_ROW_MAX], uint64_t h, unsigned i, unsigned ntables,
		     const struct blobkey *k);
/* The hash of a row of table i whose key's block is `block`. */
uint64_t near_row_hash(uint64_t block, const uint8_t *val, unsigned i, unsigned ntables);
/* The blobs a near0 row of layout 2 stands for: those of MD5 prefix
 * `prefix` whose record has simhash h, but `skip` (may be NULL), in key
 * order, into *v (malloc'd; v NULL: only counted), *n of them. */
int near_prefix_blobs(MDB_txn *txn, struct store *st, const uint8_t *prefix, uint64_t h, const struct blobkey *skip,
		      struct blobkey **v, size_t *n);

/* ---- band rows (near_bands.c; near.h, layouts 2 and 5) ----
 *
 * A row: band index u8 -> band key u32 BE | md5 prefix [4] (dup-sorted,
 * fixed size), in one of the band tables (nearbands0, nearbands1,
 * nearbands): some blob whose MD5 begins with the prefix has that key in
 * that band. The rows of one band are packed on LMDB's pages 8 bytes
 * apiece (a key's values are not nodes of their own), where layout 1 took
 * a node of 34 bytes for each. The blobs a row stands for are found in
 * `fingerprints` (a range of keys: one blob but for one in 2^32 / pages)
 * and kept only if their set has that key in that band: a find gives the
 * blobs of layout 1's rows of that band, in the same order (layout 1,
 * keyed by the key alone, also met another band's row of the same 32-bit
 * key). Two blobs of one prefix (variants of one MD5) may share a row: it
 * goes with the last of them. */
#define BAND_VAL 8
#define BAND_PREFIX 4

static inline MDB_val band_idx(uint8_t *b, size_t band)
{
	*b = (uint8_t)band;
	return (MDB_val){ 1, b };
}

static inline MDB_val band_val(uint8_t v[BAND_VAL], uint32_t key, const uint8_t *md5)
{
	v[0] = (uint8_t)(key >> 24);
	v[1] = (uint8_t)(key >> 16);
	v[2] = (uint8_t)(key >> 8);
	v[3] = (uint8_t)key;
	memcpy(v + 4, md5, BAND_PREFIX);
	return (MDB_val){ BAND_VAL, v };
}

/* Blob k's band rows for set s, in the newest table (a row another blob
 * of its MD5 prefix has already is kept). */
int near_put_bands(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct nearset *s);
/* The same in nearbands itself (a rebuild or a conversion, which write
 * every row at once). */
int near_put_bands_settled(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct nearset *s);
/* The band tables a store has, newest first (one: a read-only store of a
 * layout before 5), into dbi; their count. */
size_t near_band_tables(const struct store *st, MDB_dbi dbi[NEAR_BAND_TABLES]);
/* Take out the row (band b, key, prefix) wherever it is. */
int near_band_del(MDB_txn *txn, struct store *st, size_t b, uint32_t key, const uint8_t *prefix);
/* Is the row (band b, key, prefix) in any table? 1, 0, or an error. */
int near_band_has(MDB_txn *txn, struct store *st, size_t b, uint32_t key, const uint8_t *prefix);
/* Does a row of set s (blob prefix) lack from every table? 1 (*band the
 * first such band), 0, or an error. */
int near_bands_missing(MDB_txn *txn, struct store *st, const struct nearset *s, const uint8_t *prefix,
		       size_t *band);
/* Empty every band table. */
int near_bands_drop(MDB_txn *txn, struct store *st);
/* The name of band table i of near_band_tables. */
const char *near_band_table_name(const struct store *st, size_t i);
/* Open (create: make) nearbands0 and nearbands1, setting has_nearstage;
 * a read-only store without them has none, and that is no error. */
int near_bands_open_staged(MDB_txn *txn, struct store *st, unsigned create);
/* A cursor on each band table, newest first (near_band_tables' order). */
int near_band_cursors_open(MDB_txn *txn, struct store *st, struct near_stage_cursors *p);
/* The signature of blob k as this version computes it from its page
 * (none when its bytes cannot be read). */
void near_sig_of_blob(struct store *st, const struct blobkey *k, const struct fprec *r, struct near_sig *sig);
/* Blob k's set, a difference resolved against its base's (near.h): 0,
 * -ENOENT (no row), -EINVAL (a row that does not decode, or a difference
 * whose base set is missing or damaged, or too long a chain). */
int near_set_read(MDB_txn *txn, struct store *st, const struct blobkey *k, struct nearset *s);
/* near_set_read of the row `row` of blob k already read (NULL: looked
 * up), *depth (may be NULL) the differences followed. */
int near_set_resolve_row(MDB_txn *txn, struct store *st, const struct blobkey *k, const MDB_val *row,
			 struct nearset *s, unsigned *depth);
/* The same through cache c (NULL: none; near.h). */
int near_set_resolve_row_cached(MDB_txn *txn, struct store *st, struct near_set_cache *c, const struct blobkey *k,
				const MDB_val *row, struct nearset *s);
/* Blob k's set s written whole in place of its row. */
int near_set_put_whole(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct nearset *s);
/* Every set kept as a difference from blob k's written whole: k's set is
 * about to go or change (near_set_put, near_set_remove). */
int near_set_materialize_dependents(MDB_txn *txn, struct store *st, const struct blobkey *k);
/* Drop every LSH row and make them again from the sets in nearfeat (a
 * set that does not decode made again from its page). */
int near_lsh_rebuild(MDB_txn *txn, struct store *st);
/* Every blob but `except` (may be NULL) whose MD5 begins with prefix and
 * whose set has `key` in band b, in key order: fn(ctx, blob); fn returning
 * non-zero stops the walk with that value. */
int near_band_owners(MDB_txn *txn, struct store *st, size_t b, uint32_t key, const uint8_t *prefix,
		     const struct blobkey *except, near_hit_fn fn, void *ctx);
/* Walk nearfeat: fn(ctx, key, row, set) for each row, its set resolved
 * (set NULL: it does not decode, a difference included whose base set is
 * missing or damaged). No writes to nearfeat meanwhile: the bases met are
 * kept resolved in a fixed cache of NEAR_EACH_SET_CACHE_SLOTS (near.h),
 * so that a base's many differences read and decode it once. */
#define NEAR_EACH_SET_CACHE_SLOTS 32768
int near_each_set(MDB_txn *txn, struct store *st,
		  int (*fn)(void *ctx, const MDB_val *key, const MDB_val *row, const struct nearset *s), void *ctx);
/* A row that is a difference from base's set whose page's record is not a
 * delta on base (no link row, blob.h): 1 (*base set), else 0. */
int near_diff_unlinked(MDB_txn *txn, struct store *st, const MDB_val *row, const struct blobkey *k,
		       struct blobkey *base);
/* fsck: every set names a record with a simhash, decodes, and has its
 * band rows; every band row stands for a blob whose set has it
 * (near_setcheck.c). */
int near_set_check(MDB_txn *txn, struct store *st, near_bad_fn bad, void *ctx, uint64_t *nbad);

/* One batch of an upgrade: from key `next` (all zeros: the first), at most
 * `batch` rows; *finished when none is left, `next` moved on otherwise. */
typedef int (*near_upgrade_step)(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch,
				 bool *finished);
/* Unless meta's `key` already says `target` (no row: `absent`), run step
 * in write transactions of NEAR_UPGRADE_BATCH rows until it finishes (the
 * step itself sets the version with its last batch). */
int near_meta_upgrade(struct store *st, const char *key, uint32_t absent, uint32_t target, near_upgrade_step step);

#endif
