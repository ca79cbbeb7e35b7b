/* near.h - the near-duplicate index: every stored page's simhash, found
 * again by any page within Hamming distance K (seed 001; Manku, Jain and
 * Das Sarma's permuted tables).
 *
 * The 64 bits of a simhash are cut into K+1 blocks (near_block: widths
 * differ by at most one bit; four blocks of 16 bits for K=3). Two hashes
 * that differ in at most K bits agree exactly on at least one block
 * (pigeonhole), so a query looks up each of its K+1 blocks in the table of
 * that block and checks the distance of what it finds there: no neighbour
 * within K is missed, and a query reads about N * (K+1) / 2^(64/(K+1))
 * hashes (60 at 1e6 pages and K=3, 1,200 at K=4: 5 us and 11 us).
 *
 * Tables (LMDB, dup-sorted, fixed-size values, so a key's values sit packed
 * on pages and are read with MDB_GET_MULTIPLE):
 *   near0: block 0 (big-endian, ceil(width/8) bytes)
 *          -> rest | blobkey [20]       one row per blob
 *   nearI (I = 1..K): block I -> rest   one row per distinct hash
 * where rest is the hash's 64 - width other bits, big-endian, in
 * ceil((64 - width)/8) bytes (6 for 16-bit blocks): the key holds the
 * block. near0 alone names the blobs; the other tables hold each distinct
 * hash once (pages that differ only in a counter or a date have the same
 * hash), and a hit there is resolved through near0 (its rows for one hash
 * are adjacent: same key, values sorted by rest). Per page that is 26 + 6K
 * bytes of values at K=3 (44) and 27 + 7K at K=4 (55); measured with
 * LMDB's pages, 84 and 100 bytes (bench_nearidx). From near layout 6 each
 * table nearI has two levels, nearI_0 and nearI_1, whose rows have its
 * form and are on their way to it ("Rows staged", below).
 *
 * near0 has a layout of its own (the meta row "near0_layout", 4 bytes
 * little-endian; absent: 1), apart from the sets' (near_layout, below):
 *   1: near0: block 0 -> rest | blobkey [20], as above;
 *   2: near0: block 0 -> rest | MD5 prefix [NEAR0_PREFIX]: a row stands
 *      for the blobs of that MD5 prefix whose fingerprint record has that
 *      simhash (found through `fingerprints`, keyed by MD5: nearly always
 *      one blob; variants of one MD5 share a row), as nearbands' rows
 *      stand for the blobs of their prefix. A row goes with the last blob
 *      it stands for. 16 bytes of value a page less (10 instead of 26).
 *   0: being converted (the first batch emptied near0): a read-only open
 *      answers nothing from it; a writable open converts again.
 * A store of layout 1 is converted at a writable open (near0 emptied,
 * then filled again from the fingerprint records, a batch a transaction,
 * the layout written last; no page is read) and by fsck --repair. A
 * read-only open reads layout 1 as it is (st->near0_keys).
 *
 * Rows are added in the write transaction that gives a blob its signature
 * (after the seal's commit, sigq.h) and removed in the one that frees it
 * (blob_unref), so an answer never names a page that is gone; a query signs
 * the pending pages first (query_near.c), so it never misses one whose
 * close() returned.
 *
 * Errors are negative errno values.
 */
#ifndef PD_NEAR_H
#define PD_NEAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blob/blob.h"
#include "minhash.h"
#include "nearset.h"
#include "store/rec.h"
#include "simhash.h"
#include "store/store.h"

/* near0's layout and its rows' MD5 prefix (the top of this file). */
#define NEAR0_LAYOUT_VERSION 2
#define NEAR0_PREFIX 4

/* K is at most this (17 tables of 3 or 4 bits: a useless index, but a
 * correct one). */
#define NEAR_MAX_DISTANCE (PD_NEAR_MAX_TABLES - 1)

/* The simhash of a page and its MinHash sketch (minhash.h), as a
 * fingerprint record keeps them. A candidate the index finds within K is
 * answered only when the two sketches estimate a resemblance of at least
 * MINHASH_NEAR_RESEMBLANCE (near_confirm): pages of one template land
 * within a few bits of each other although their text differs. */
struct near_sig {
	uint64_t simhash;
	bool has;            /* false: binary or textless content */
	bool low_confidence; /* too little text to judge (simhash.h) */
	bool has_sketch;
	uint8_t sketch[MINHASH_BYTES];
	bool has_set;        /* the shingle set (nearset.h), kept in `nearfeat` */
	struct nearset set;
};

/* Signature of a page's bytes (only the first HTML_MAX_INPUT are read). */
int near_sig_of_page(const void *buf, size_t len, struct near_sig *out);
/* The same without the sketch when the page has a shingle set: what a
 * fingerprint record keeps (near_sig_to_rec drops such a sketch), for the
 * signer, which stores the signature and compares it with nothing. The
 * simhash and the set are near_sig_of_page's, bit for bit. */
int near_sig_for_record(const void *buf, size_t len, struct near_sig *out);
/* The same for the first `size` bytes of an open file (mapped, not read). */
int near_sig_of_fd(int fd, uint64_t size, struct near_sig *out);
/* Copy a signature into a fingerprint record (flags, simhash, and the
 * sketch unless it has a set: the caller keeps the set, near_add_sig or
 * near_set_put) and back. */
void near_sig_to_rec(const struct near_sig *s, struct fprec *r);
void near_sig_of_rec(const struct fprec *r, struct near_sig *s);
/* Is a candidate confirmed? Two pages with shingle sets: their resemblance
 * (nearset_resemblance, exact for short pages) is NEARSET_NEAR or more;
 * else by the sketches; pages without either (stored before they were
 * kept) are taken on the simhash alone. *r gets the figure the answer
 * shows (the set's resemblance, else the sketch's estimate, else -1: none);
 * r may be NULL. */
bool near_confirm_r(const struct near_sig *a, const struct near_sig *b, double *r);
static inline bool near_confirm(const struct near_sig *a, const struct near_sig *b)
{
	return near_confirm_r(a, b, NULL);
}

/* The index and its signer as a part of the store (near_part.c). */
extern const struct store_part near_part;

/* Open (create: make) the K+1 tables of a store whose params give K. */
int near_open_tables(MDB_txn *txn, struct store *st, unsigned create);

/* Index blob k under hash h / take it out (inside a write transaction:
 * the one that signs or frees the blob). */
int near_add(MDB_txn *txn, struct store *st, const struct blobkey *k, uint64_t h);
int near_remove(MDB_txn *txn, struct store *st, const struct blobkey *k, uint64_t h);
/* near_add, and the shingle set and its LSH rows when sig has one. */
int near_add_sig(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct near_sig *sig);


/* Every indexed blob within distance maxdist (<= the store's K) of q,
 * each once, in no promised order (the rows of each table itself before
 * those of its levels: "Rows staged"). cb returning non-zero stops the
 * walk with that value (a positive value is returned as 0). */
typedef int (*near_hit_fn)(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist);
int near_find(MDB_txn *txn, struct store *st, uint64_t q, unsigned maxdist, near_hit_fn cb, void *ctx);

/* near0's layout (above) into *layout (1 when none is recorded); record
 * layout (inside a write transaction). */
int near0_layout_get(MDB_txn *txn, struct store *st, uint32_t *layout);
int near0_layout_put(MDB_txn *txn, struct store *st, uint32_t layout);
/* A batch of the conversion of near0 to NEAR0_LAYOUT_VERSION: the first
 * (*next all zero) empties near0 (and records layout 0), each adds the
 * near0 rows of up to `batch` fingerprint records from *next on, the
 * last records the layout and sets *finished. */
int near0_layout_convert(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch,
			 bool *finished);
/* Bring near0 of a store opened writable to NEAR0_LAYOUT_VERSION;
 * -EPROTONOSUPPORT for a newer layout, left as it is. */
int near0_layout_upgrade(struct store *st);

/* ---- the shingle sets and the second candidate generator ----
 *
 *   nearfeat:  blobkey [20] -> a shingle set (nearset.h's stored form)
 *   nearbands: band index u8 -> band key u32 BE | MD5 prefix [4]
 *              (dup-sorted, fixed size): NEARSET_BANDS rows a page; a
 *              row stands for the blobs of that MD5 prefix whose set has
 *              that key in that band (near_lsh.c)
 *   nearbands0, nearbands1: rows of the same form on their way to
 *              nearbands (layout 5, near_bands.c, "Rows staged")
 * Written and removed with the near rows (near_add_sig, near_remove); a
 * record without a set (signed by fsck's record repair, or a read-only
 * store from before the tables) is confirmed by its sketch.
 *
 * The layout of these two tables (and whether a fingerprint record keeps
 * a sketch) has a version of its own, apart from the signatures' (which
 * say what is computed, not how it is kept): the meta row "near_layout"
 * (4 bytes little-endian; absent: layout 1).
 *   1: nearfeat rows of nearset format 1 (a u32 a hash), and the table
 *      nearlsh: band key u32 LE -> blobkey [20] (a node of 34 bytes a row,
 *      about 800 bytes a page with LMDB's slack);
 *   2: nearfeat rows of format 2 (Rice-coded gaps, then the 16 band keys),
 *      the table nearbands above (8 bytes a row), nearlsh gone;
 *   3: nearfeat rows of format 3 (no band keys: the decoder computes them
 *      from the hashes), and a fingerprint record whose blob has a set
 *      keeps no sketch (FPREC_HAS_SKETCH clear; near_sig_to_rec): the set
 *      confirms; a pair one of whose pages has no set (a damaged row) is
 *      confirmed by the sketches with the missing one computed from the
 *      page read back (near_confirm_sketches). 64 + 64 bytes a page less.
 *   4: nearfeat rows of format 4 (the top NEARSET_BITS bits of each hash,
 *      all 32 for a set of at most NEARSET_FULL_MAX hashes, nearset.h),
 *      and the band rows of the keys computed from the top NEARSET_BITS
 *      bits (not layout 3's keys: the bins see a mix of those bits).
 *      32 - NEARSET_BITS bits a kept hash less.
 *   5: the band rows of new sets go to nearbands0 and move on, in key
 *      order and in batches, to nearbands1 and then nearbands (below);
 *      a row may be in any of the three. A store of layout 4 has all its
 *      rows in nearbands and is brought to 5 by recording it.
 *   6: the simhash rows of new pages go to nearI_0 and move on to nearI_1
 *      and nearI (near0..nearK) the same way, each row in one of the
 *      three. A store of layout 4 or 5 has all its simhash rows in the
 *      tables themselves and is brought to 6 by recording it.
 * A store of layout 1 to 3 is converted when it is opened writable (before
 * the signature upgrade, from near_part's start: the band rows emptied by
 * the first batch, every set truncated and rewritten with its band rows
 * and its record's sketch dropped, a batch of sets a transaction, the
 * layout written last with nearlsh dropped, so that an interrupted
 * conversion starts again at the next open; no page is read) and by
 * `pagededup fsck --repair`. Opened read-only, layouts 2 and 3 are read as
 * they are (st->near_sets_full: sets at 32 bits, and a query's set looked
 * up in the bands at 32 bits: the same answers as before); layout 1 is
 * near_stale (its near answers fail with -ESTALE). */
#define NEAR_LAYOUT_VERSION 6

/* Rows staged (near_stage.c): band rows from layout 5 (near_bands.c),
 * simhash rows from layout 6 (near.c). A page's 16 band rows, and its
 * K+1 simhash rows, have keys spread over the whole of their tables, so
 * once a table is much larger than a commit's rows, each row is a leaf
 * page of its own that the commit copies and writes: 16 + K+1 pages of
 * 4 KiB a page signed, the largest share of what LMDB writes at scale.
 * As an LSM tree does, the rows go first to a small table (level 0:
 * nearbands0 for nearbands, nearI_0 for nearI), where a commit's rows
 * share its few leaves; level 0 is emptied into level 1 (nearbands1,
 * nearI_1: at most NEAR_STAGE_FANOUT times as many rows) in one
 * transaction when full; and once level 1 is full it is moved into the
 * table by a pass in key order, a quarter of level 0's bound a
 * transaction, so that each of the table's leaves is written once per
 * pass rather than once per row. Level 0 holds NEAR_BAND_STAGE_ROWS band
 * rows (2,048 pages), NEAR_HASH_STAGE_ROWS rows of each simhash table
 * (4,096 pages: a simhash table has 8,192 keys, so level 0's rows are
 * nodes of their own, about 20 leaves of them). The moves ride on the
 * signer's commits (near_stage_settle_all). A lookup reads all three levels (the band
 * rows newest first, the simhash rows oldest first: near_find); a row is
 * removed from whichever holds it. A simhash row is put only where no
 * level holds it already, so that each is in one level and near_find
 * names each blob once. */
#define NEAR_STAGE_LEVELS 3
#define NEAR_BAND_TABLES NEAR_STAGE_LEVELS
#define NEAR_BAND_STAGE_ROWS 32768u
#define NEAR_HASH_STAGE_ROWS 4096u
#define NEAR_STAGE_FANOUT 32u
/* The largest row a staged table holds: key and value bytes. */
#define NEAR_STAGE_KEY_MAX 8
#define NEAR_STAGE_VAL_MAX 32
/* Where a pass from level 1 to its table stands (kept in memory: a pass
 * cut short by a restart starts again when level 1 is full). ks = 0:
 * from the first row. */
struct near_stage_pass {
	bool active;
	uint8_t ks, vs;
	uint8_t key[NEAR_STAGE_KEY_MAX], val[NEAR_STAGE_VAL_MAX];
};
/* The passes of every staged table. */
struct near_stage_passes {
	struct near_stage_pass bands, hashes[PD_NEAR_MAX_TABLES];
};
/* Inside a write transaction, after rows were added: empty each level 0
 * into its level 1 if it is full, and move a pass's next rows into its
 * table if a pass is on or level 1 is full. stage_rows: the level 0
 * bound of every table (0: NEAR_BAND_STAGE_ROWS for the band rows,
 * NEAR_HASH_STAGE_ROWS for the simhash rows). */
int near_stage_settle_all(MDB_txn *txn, struct store *st, struct near_stage_passes *p, unsigned stage_rows);
/* The oldest layout a read-only open answers from. */
#define NEAR_LAYOUT_READABLE 2
/* The store's layout into *layout (1 when none is recorded). */
int near_layout_get(MDB_txn *txn, struct store *st, uint32_t *layout);
/* Record NEAR_LAYOUT_VERSION (inside a write transaction). */
int near_layout_put(MDB_txn *txn, struct store *st);
/* Rewrite up to `batch` sets of nearfeat in key order after *next (all-
 * zero: from the first) in the current format with their band rows;
 * after the last, drop layout 1's table, record the layout and set
 * *finished. Opens (makes) the tables when the store has none open. */
int near_layout_convert(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch,
			bool *finished);
/* Bring a store opened writable to NEAR_LAYOUT_VERSION (see above);
 * -EPROTONOSUPPORT for a newer layout, which is left as it is. */
int near_layout_upgrade(struct store *st);
/* s as st's rows hold it (nearset.h): a set computed from a page (32
 * bits) is brought to it before its band keys are compared with the
 * store's (near_lsh_find does so) and before it is compared as a stored
 * set would be: layout 4, nearset_to_stored; a read-only store of layout
 * 2 or 3, the 32-bit hashes and the band keys of those layouts. */
static inline void near_set_for_store(const struct store *st, struct nearset *s)
{
	if (!st->near_sets_full) {
		nearset_to_stored(s);
	} else if (!s->legacy_bands) {
		s->legacy_bands = true;
		s->bands = false;
	}
}

/* ---- sets kept as differences (store format 7) ----
 *
 * A page stored as a delta on a base (blob.h) has a shingle set that
 * differs from its base's in a few values (a recrawl's date, counter, ad
 * block or sentence): its nearfeat row may hold the difference from the
 * base's set (nearset.h, format 5: the base's key, the positions of the
 * base's values dropped, the values added), about 30 bytes where a whole
 * row takes about 254. What a row decodes to is exactly the set a whole
 * row would hold, so no answer changes. The rules:
 *   - written by the delta step (near_set_diff, ndelta.c), and for a
 *     delta the compactor's window makes (blob_delta_link_cold, a blob
 *     listener's call), in the transaction that makes the page's record
 *     a delta on that base, when shorter than the whole row, when the
 *     base has a set and at most NEAR_SET_DIFFS_PER_BASE deltas, and when
 *     the chain of differences stays within NEAR_SET_DIFF_DEPTH;
 *   - so a difference from B is only ever the set of a delta on B, and it
 *     is written whole again (materialized) in the transaction where that
 *     stops being so: the record no longer hangs on B (freed, healed,
 *     stored whole again: near_set_unlinked, a blob listener's call), B's
 *     set goes (near_set_remove: B's last reference went, or B is signed
 *     again) or is written again (near_set_put). The differences from B
 *     are found among B's link rows (blob.h, "dlnk"): at most
 *     NEAR_SET_DIFFS_PER_BASE of them are written whole when B's set goes,
 *     however many deltas hang on B (their link rows are walked; each
 *     delta's own record is stored whole again later anyway);
 *   - every reader resolves the chain (at most NEAR_SET_DIFF_DEPTH
 *     differences): a difference whose base set is missing, or a longer
 *     chain, is a damaged row (-EINVAL), which fsck reports and --repair
 *     makes again from the page, as it does any set that does not
 *     decode; fsck also reports a difference from a base its record is
 *     not a delta on, and --repair writes it whole.
 * A store from before format 7 needs no conversion: its rows are whole,
 * and differences appear as pages become deltas. A release of format 6
 * refuses a store of format 7 (it would take a difference for damage). */
#define NEAR_SET_DIFF_DEPTH BLOB_DELTA_DEPTH
/* The bound on a base's differences: what its set's removal writes whole
 * (up to this many sets, in the transaction that removes it) against what
 * the bound leaves whole. On a template site a few old pages become the
 * base of most deltas (the delta step meets the oldest candidates first):
 * in a store of 5.6 million javadoc pages, 7,691 bases held 2.48 million of
 * the 3.82 million deltas and, at 64, a third of the sets were whole. At
 * 512, on three template sites of 400,000 pages (javadoc, rustdoc, Sphinx:
 * about 2,800 versions a page, as there), nearfeat's mean row fell by a
 * third to a half and LMDB's file by 5-17%, with no cost to ingest or to
 * removal measured (tests/bench/README.md, "LMDB at 5.6 million pages,
 * and a base's differences"). */
#define NEAR_SET_DIFFS_PER_BASE 512
/* Page k's record was just made a delta on base (same transaction):
 * keep k's set as the difference from base's when that is shorter (see
 * above; nothing in a store of another layout or format). Both sets are
 * resolved through cache (may be NULL: none; near_set_cache below). */
struct near_set_cache;
int near_set_diff(MDB_txn *txn, struct store *st, struct near_set_cache *cache, const struct blobkey *k,
		  const struct blobkey *base);
/* dep's record no longer hangs on base: its set, if a difference from
 * base's, written whole. */
int near_set_unlinked(MDB_txn *txn, struct store *st, const struct blobkey *base, const struct blobkey *dep);

/* ---- a cache of resolved sets ----
 *
 * The delta step resolves the same sets again and again: a page's own, its
 * candidates' (a candidate kept as a difference resolved through its
 * base's, which is often a candidate too), and, when the page becomes a
 * delta, its own and its base's again to write the difference. A cache
 * keeps each set resolved with the very row it was decoded from, and a
 * difference with the fill of the base set it was resolved against (each
 * fill has an id of its own). A lookup reads the rows of the chain again
 * in the caller's transaction and answers from the cache only when each
 * row is byte for byte the one decoded and each difference's base is the
 * fill it was resolved against: a set that changed or went, in this
 * transaction or in another, is decoded again, never answered stale. What
 * a hit saves is the decoding; the rows are looked up as without it.
 * Any transaction may use a cache; one thread at a time. Bounded:
 * NEAR_SET_CACHE_SLOTS entries of about 2.3 KiB (a row and its set: 2.3
 * MiB in all), two slots to a blob by its MD5 (a fill takes a free one or
 * the older fill's); a row longer than a whole set's (damage) is never
 * kept. The difference near_set_diff writes is kept with its set (the
 * page is the next pages' candidate). */
#define NEAR_SET_CACHE_SLOTS 1024
/* An empty cache (NULL: no memory). */
struct near_set_cache *near_set_cache_new(void);
/* An empty cache of `slots` entries for a walk in which no set changes
 * (NULL: no memory, or no slot): a base it holds is answered without its
 * rows read again, and it keeps bases only (the sets a difference names),
 * the one used longer ago giving way. */
struct near_set_cache *near_set_cache_fixed(size_t slots);
void near_set_cache_free(struct near_set_cache *c);
/* Lookups answered from the cache and decoded (for measurement). */
void near_set_cache_counts(const struct near_set_cache *c, uint64_t *hits, uint64_t *decoded);

/* Keep sig's set (if any) in nearfeat with its band rows (nothing when
 * the store has no such tables: then the caller keeps the sketch, by
 * clearing has_set before near_sig_to_rec). */
int near_set_put(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct near_sig *sig);
/* The set of blob k into sig (has_set false when it has none). */
int near_set_get(MDB_txn *txn, struct store *st, const struct blobkey *k, struct near_sig *sig);
/* The same through cache (may be NULL: none; near_set_cache above). */
int near_set_get_cached(MDB_txn *txn, struct store *st, struct near_set_cache *cache, const struct blobkey *k,
			struct near_sig *sig);
/* Every blob that shares a band with s; a blob sharing several bands is
 * given once per band (the caller keeps the first). cb as near_find's
 * (h and dist are 0); it may read any table, and adds and removes no blob
 * and no band row meanwhile. */
int near_lsh_find(MDB_txn *txn, struct store *st, const struct nearset *s, near_hit_fn cb, void *ctx);
/* Every shingle hash of a page read back (nearset_full_of_text), for the
 * exact resemblance of a pair too close to call (nearset_borderline):
 * from the first `size` bytes of an open file, or from blob k's file. */
int near_full_of_fd(int fd, uint64_t size, uint32_t **h, size_t *n);
int near_full_of_blob(struct store *st, const struct blobkey *k, uint32_t **h, size_t *n);
/* The confirm of a pair that is not two sets (near_confirm_r): a record
 * with a set keeps no sketch (layout 3), so a sketch either lacks is
 * computed from its page read back (blob ka or kb; with a NULL key or a
 * page that cannot be read it stays without, and the simhash alone
 * decides, as for records from before the sketches). Only a pair with a
 * page whose set row is missing or damaged reads pages back here. */
int near_confirm_sketches(struct store *st, const struct blobkey *ka, const struct near_sig *a,
			  const struct blobkey *kb, const struct near_sig *b, bool *yes, double *r);
/* The answers' confirm for two stored pages: near_confirm_r, a pair of
 * sets too close to call decided on both blobs read back (a blob that
 * cannot be read keeps the estimate). */
int near_confirm_pair(struct store *st, const struct blobkey *ka, const struct near_sig *a, const struct blobkey *kb,
		      const struct near_sig *b, bool *yes, double *r);

/* Consistency with the fingerprints (fsck): each problem is described to
 * `bad` (one line, no newline) and counted in *nbad. Checks every table
 * row against the fingerprint it names, and every fingerprint that has a
 * simhash against the rows it needs. Each table is read once in order and
 * met by the rows the records ask for, sorted: up to
 * NEAR_CHECK_MEM_DEFAULT bytes of rows, about 72 a record for the simhash
 * tables (near_rowset.c, whose sort of a table's rows takes as much
 * again; past the bound about 40 a record and table, a table at a time)
 * and 9 a set and band for the band rows (near_setcheck.c); past the
 * bound the rows are sorted in runs in an unnamed file beside the store
 * (base/extsort.h, which sorts in place).
 * With no memory (0), or no file, the check probes LMDB as before,
 * O(pages * (K+1 + bands)) look-ups. */
#define NEAR_CHECK_MEM_DEFAULT ((size_t)512 << 20)
/* The memory those checks may take from now on, for the whole process
 * (0: probe every row); set it before a check, not during one. */
void near_check_mem(size_t bytes);
/* Runs the checks of the near tables have written to disk in this
 * process, when their rows did not fit that memory. */
uint64_t near_check_spilled_runs(void);
typedef void (*near_bad_fn)(void *ctx, const char *what);
/* One problem a check found: formatted, counted in *nbad, given to bad
 * (the checks of near.c and sigq.c). */
void near_report(near_bad_fn bad, void *ctx, uint64_t *nbad, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int near_check(MDB_txn *txn, struct store *st, near_bad_fn bad, void *ctx, uint64_t *nbad);
/* Drop every row and index again every fingerprint that has a simhash. */
int near_rebuild(MDB_txn *txn, struct store *st);

/* ---- the version of the signatures ----
 *
 * Stored signatures are those of one version of the features (simhash.h)
 * and of the text they are computed from (html.h, minhash.h): hashes of
 * two versions are not comparable. The store's meta table records the
 * version ("near_version", 4 bytes little-endian, NEAR_SIG_VERSION) at
 * mkfs and after every upgrade; a store made before it was recorded holds
 * version NEAR_SIG_VERSION_FIRST. A store of another version is upgraded
 * when it is opened writable (near_upgrade, from near_part's start: every
 * signature computed again from its blob file, a batch of records per
 * transaction, the version written last, so an interrupted upgrade starts
 * again at the next open), and by `pagededup fsck --repair`. Opened
 * read-only, it is marked near_stale and its near answers fail with
 * -ESTALE instead of mixing two kinds of hashes. */
#define NEAR_SIG_VERSION \
	((uint32_t)NEARSET_VERSION << 24 | (uint32_t)SIMHASH_VERSION << 16 | (uint32_t)MINHASH_VERSION)
#define NEAR_SIG_VERSION_FIRST 0x10001u /* simhash 1, sketch 1 */
/* Version 0x1020002 (shingle sets 1, simhash 2, sketch 2) added the tables
 * nearfeat and nearlsh: the upgrade from 0x20002 computes every page's set
 * from its blob file as it computes the other signatures. */
/* Records whose signatures one upgrade transaction computes. */
#define NEAR_UPGRADE_BATCH 1000

/* The store's signature version (NEAR_SIG_VERSION_FIRST when none is
 * recorded) into *version. */
int near_version_get(MDB_txn *txn, struct store *st, uint32_t *version);
/* Record NEAR_SIG_VERSION (inside a write transaction). */
int near_version_put(MDB_txn *txn, struct store *st);
/* Compute again the signature of up to `batch` fingerprint records that
 * have one, in key order after *next (all-zero: from the first), from
 * their blob files, and index them under the new hash; *next gets where
 * to go on, *finished is set after the last. A record whose blob file
 * cannot be read loses its signature (fsck reports the file). */
int near_resign(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch, bool *finished);
/* Bring a store opened writable to NEAR_SIG_VERSION (see above). */
int near_upgrade(struct store *st);

/* Block i of K+1 of hash h, and its key bytes. */
uint64_t near_block(uint64_t h, unsigned i, unsigned ntables);

#endif
