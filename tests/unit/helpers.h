/* helpers.h - shared set-up for the core unit tests: temporary stores and
 * files written through the same calls the filesystem makes. */
#ifndef PD_TEST_HELPERS_H
#define PD_TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#include "fsck/fsck.h"
#include "archive/ns.h"
#include "archive/openfile.h"
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
/* Refcount of ino's blob (0 if none). */
uint64_t th_refcount(struct store *st, uint64_t ino);
/* Run fsck on a closed store and assert it is clean. */
void th_assert_fsck_clean(const char *dir);
/* Inode ino reads back exactly the bytes of want (a string). */
void th_read_back(struct store *st, uint64_t ino, const char *want);
/* Count files under dir/objects (blobs of format 1's layout). */
size_t th_count_blobs(const char *dir);
/* Count the stored contents of st: its blob files and the live records of
 * its packs (as the packs' totals in meta say). */
size_t th_count_stored(struct store *st);

#endif
