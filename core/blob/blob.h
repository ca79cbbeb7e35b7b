/* blob.h - blobs and their fingerprint records.
 *
 * A blob is an immutable file under objects/, named by its blobkey, holding
 * one distinct content. Its record in `fingerprints` carries the reference
 * count (the number of inodes on it), size, XXH3-128, the filter positions
 * and the simhash slot; `blob_inodes` lists the inodes on it. The blob file
 * is written in staging/ and renamed in before the commit that first refers
 * to it, and removed after the commit that drops its last reference.
 *
 * The functions taking a struct wtx run inside a write transaction.
 *
 * Blob storage knows nothing of what is built on blobs (the near-duplicate
 * index, the signer): those register a blob_listener and hear, inside the
 * transaction, of every blob added and every blob whose last reference went.
 */
#ifndef PD_BLOB_H
#define PD_BLOB_H

#include <stdbool.h>
#include <stdint.h>

#include "base/fp.h"
#include "store/rec.h"
#include "store/store.h"

/* Called in the write transaction that adds or releases a blob; an error
 * takes the transaction down. */
struct blob_listener {
	/* A new record r (refcount 1) was stored under k. */
	int (*added)(struct wtx *w, const struct blobkey *k, const struct fprec *r);
	/* The last reference to k went; r is its record, now deleted. */
	int (*released)(struct wtx *w, const struct blobkey *k, const struct fprec *r);
};

/* Register l on st (at open, before any write): -E2BIG past
 * STORE_MAX_PARTS listeners. */
int blob_listen(struct store *st, const struct blob_listener *l);

/* Blob storage as a part of the store (store.h): after an unclean stop, and
 * at a close where a removal failed, the blob files no record names are
 * removed (blob_part.c). */
extern const struct store_part blob_part;

int blob_get(MDB_txn *txn, struct store *st, const struct blobkey *k, struct fprec *out);
int blob_put(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct fprec *r);

/* One more inode (ino) on an existing blob. */
int blob_ref(struct wtx *w, const struct blobkey *k, uint64_t ino);
/* One inode fewer; the last reference removes the record, its filter
 * counts, its near rows or its sigq row, and (after the commit) the file. */
int blob_unref(struct wtx *w, const struct blobkey *k, uint64_t ino);
/* Record a new blob whose file is already in place, referenced by ino;
 * in_filter: add its positions to the filter. Its near rows (a record with
 * a simhash) or its sigq row (FPREC_SIG_PENDING) are added too. */
int blob_insert(struct wtx *w, const struct blobkey *k, struct fprec *r, uint64_t ino, bool in_filter);

/* Probe `fingerprints` for content fp. found: *k is the matching blob.
 * Otherwise *k is the key a new blob of that content gets (variant 0, or one
 * past the highest variant of that MD5), and *collision tells whether a
 * record with the same MD5 but another size or XXH3-128 was seen. */
int blob_find(MDB_txn *txn, struct store *st, const struct fp *fp, struct blobkey *k, bool *found,
	      bool *collision);
/* The key a new, never-shared copy of fp gets (-o nodedup). */
int blob_next_variant(MDB_txn *txn, struct store *st, const uint8_t md5[16], struct blobkey *k);

/* Open a blob file read-only. */
int blob_open(struct store *st, const struct blobkey *k);
/* Check an open blob against its record (size and XXH3-128): -EIO if the
 * bytes on disk are not the bytes stored. */
int blob_verify(int fd, const struct fprec *r);
/* Make the objects/ subdirectory of k. */
int blob_mkdirs(struct store *st, const struct blobkey *k);

#endif
