/* helpers.h - shared set-up for the core unit tests: temporary stores and
 * files written through the same calls the filesystem makes. */
#ifndef PD_TEST_HELPERS_H
#define PD_TEST_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsck/fsck.h"
#include "archive/ns.h"
#include "archive/openfile.h"
#include "blob/blob.h"
#include "store/store.h"

extern const struct pd_cred test_root;

/* A fresh temporary directory (freed by th_rmdir). */
char *th_tmpdir(void);
void th_rmdir(char *dir);
/* The store directory th_store makes under dir: "DIR/store" (a static
 * buffer, overwritten by the next call). */
const char *th_store_dir(const char *dir);
/* mkfs + open with the given params (NULL: defaults) and options. */
struct store *th_store(const char *dir, const struct store_params *p, const struct store_opts *o);
/* Open again the store th_store made under dir, with options o. */
struct store *th_reopen(const char *dir, const struct store_opts *o);
/* Create (or truncate) parent/name and write content through open/write/
 * flush/release; returns the inode. Asserts success. */
uint64_t th_put(struct store *st, uint64_t parent, const char *name, const void *buf, size_t len);
/* A page of `words` seeded pseudo-random words (1,024 of them) and `extra`
 * (free it); put it at parent/name; the simhash distance of two pages. */
char *th_page(uint64_t seed, unsigned words, const char *extra);
uint64_t th_put_page(struct store *st, uint64_t parent, const char *name, const char *page);
unsigned th_page_distance(const char *a, const char *b);
/* The resemblance user.dedup.near shows for two pages ("%.3f", one of four
 * rotating static buffers). */
const char *th_page_res(const char *a, const char *b);
/* The blob of inode ino (asserted to have one), and its fingerprint
 * record. */
struct blobkey th_blob_of(struct store *st, uint64_t ino);
struct fprec th_fprec_of(struct store *st, uint64_t ino);
/* 1 and *base when blob k's record is a delta, 0 when whole; and how
 * many deltas deep it is (0: whole). */
int th_delta_of(struct store *st, const struct blobkey *k, struct blobkey *base);
unsigned th_depth_of(struct store *st, const struct blobkey *k);
/* Refcount of ino's blob (0 if none). */
uint64_t th_refcount(struct store *st, uint64_t ino);
/* Run fsck on a closed store and assert it is clean. */
void th_assert_fsck_clean(const char *dir);
/* Run fsck (options o, without a report) on a closed store, assert that it
 * ran, and return what it found. */
struct fsck_result th_fsck(const char *dir, struct fsck_opts o);
/* Damage r's record in its pack file: n (at most 64) bytes of 0xff
 * written `at` bytes after its header. */
void th_damage_record(struct store *st, const struct fprec *r, size_t at, size_t n);
/* A compaction of pack c stopped at step (PD_COMPACT_STOP, c.debug_stops)
 * and the store abandoned there, as by a kill. */
void th_compact_crash(struct store *st, uint32_t pack, struct blob_compact_cfg c, const char *step);
/* A file read whole, NUL-terminated (free it); a page of tests/data/near
 * (found from $PD_DATA, set by tests/run.sh, or the current directory). */
char *th_read_file(const char *path, size_t *len);
char *th_data_page(const char *name, size_t *len);
/* Inode ino reads back exactly the bytes of want (a string). */
void th_read_back(struct store *st, uint64_t ino, const char *want);
/* Count files under dir/objects (blobs of format 1's layout). */
size_t th_count_blobs(const char *dir);
/* Count the stored contents of st: its blob files and the live records of
 * its packs (as the packs' totals in meta say). */
size_t th_count_stored(struct store *st);
/* The rows (LMDB entries) of table dbi, in a read transaction of its own. */
size_t th_table_rows(struct store *st, MDB_dbi dbi);
/* Blob k's nearfeat row: its format byte (0: none) and length (len may
 * be NULL). */
int th_set_row_format(struct store *st, const struct blobkey *k, size_t *len);
/* The set blob k's row gives is the one a whole row of page holds. */
void th_assert_set_of_page(struct store *st, const struct blobkey *k, const char *page);
/* user.dedup.near of ino as cred asks it (a static buffer, overwritten by
 * the next call), or "ENODATA" / "error" when the query fails so. */
const char *th_near_of(struct store *st, uint64_t ino, const struct pd_cred *cred);
/* Does ino's blob have its MinHash sketch (FPREC_HAS_SKETCH)? */
bool th_has_sketch(struct store *st, uint64_t ino);
/* A blob key made from i (its MD5 i's bytes, little-endian, the rest 0;
 * variant i % 3): distinct keys for distinct i. */
struct blobkey th_key_of(size_t i);
/* The user.dedup.near answer of ino, as root (malloc'd). */
char *th_near_answer(struct store *st, uint64_t ino);

#endif
