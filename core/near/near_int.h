/* near_int.h - what near.c and near_lsh.c share (not an interface). */
#ifndef PD_NEAR_INT_H
#define PD_NEAR_INT_H

#include "near.h"

/* Take blob k's shingle set and its LSH rows out (none: nothing to do). */
int near_set_remove(MDB_txn *txn, struct store *st, const struct blobkey *k);
/* Blob k's band rows for set s (a row another blob of its MD5 prefix has
 * already is kept). */
int near_put_bands(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct nearset *s);
/* The signature of blob k as this version computes it from its page
 * (none when its bytes cannot be read). */
void near_sig_of_blob(struct store *st, const struct blobkey *k, const struct fprec *r, struct near_sig *sig);
/* Blob k's set, a difference resolved against its base's (near.h): 0,
 * -ENOENT (no row), -EINVAL (a row that does not decode, or a difference
 * whose base set is missing or damaged, or too long a chain). */
int near_set_read(MDB_txn *txn, struct store *st, const struct blobkey *k, struct nearset *s);
/* Drop every LSH row and make them again from the sets in nearfeat (a
 * set that does not decode made again from its page). */
int near_lsh_rebuild(MDB_txn *txn, struct store *st);
/* fsck: every set names a record with a simhash, decodes, and has its
 * band rows; every band row stands for a blob whose set has it. */
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
