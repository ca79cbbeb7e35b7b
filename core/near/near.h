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
 * LMDB's pages, 84 and 100 bytes (bench_nearidx).
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

#include "minhash.h"
#include "store/rec.h"
#include "simhash.h"
#include "store/store.h"

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
};

/* Signature of a page's bytes (only the first HTML_MAX_INPUT are read). */
int near_sig_of_page(const void *buf, size_t len, struct near_sig *out);
/* The same for the first `size` bytes of an open file (mapped, not read). */
int near_sig_of_fd(int fd, uint64_t size, struct near_sig *out);
/* Copy a signature into a fingerprint record (flags, simhash, sketch) and
 * back. */
void near_sig_to_rec(const struct near_sig *s, struct fprec *r);
void near_sig_of_rec(const struct fprec *r, struct near_sig *s);
/* Is a candidate confirmed? Pages without a sketch (stored before sketches
 * were kept) are taken on the simhash alone. */
bool near_confirm(const struct near_sig *a, const struct near_sig *b);

/* The index and its signer as a part of the store (near_part.c). */
extern const struct store_part near_part;

/* Open (create: make) the K+1 tables of a store whose params give K. */
int near_open_tables(MDB_txn *txn, struct store *st, unsigned create);

/* Index blob k under hash h / take it out (inside a write transaction:
 * the one that signs or frees the blob). */
int near_add(MDB_txn *txn, struct store *st, const struct blobkey *k, uint64_t h);
int near_remove(MDB_txn *txn, struct store *st, const struct blobkey *k, uint64_t h);

/* Every indexed blob within distance maxdist (<= the store's K) of q,
 * each once, in no particular order. cb returning non-zero stops the walk
 * with that value (a positive value is returned as 0). */
typedef int (*near_hit_fn)(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist);
int near_find(MDB_txn *txn, struct store *st, uint64_t q, unsigned maxdist, near_hit_fn cb, void *ctx);

/* Consistency with the fingerprints (fsck): each problem is described to
 * `bad` (one line, no newline) and counted in *nbad. Checks every table
 * row against the fingerprint it names, and every fingerprint that has a
 * simhash against the rows it needs: O(pages * (K+1)) lookups, no memory. */
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
#define NEAR_SIG_VERSION ((uint32_t)SIMHASH_VERSION << 16 | (uint32_t)MINHASH_VERSION)
#define NEAR_SIG_VERSION_FIRST 0x10001u /* simhash 1, sketch 1 */
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
