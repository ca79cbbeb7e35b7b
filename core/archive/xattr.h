/* xattr.h - extended attributes clients set (user.*), per inode. Each
 * function that changes one is one write transaction (store_write). */
#ifndef PD_XATTR_H
#define PD_XATTR_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* Attribute names the store itself writes (fsck.h: user.pagededup.lost_*
 * on recovered pages). Clients may read and remove them, not set them
 * (fs/ answers EPERM); the computed user.dedup.* (query.h) are read-only. */
#define XATTR_RESERVED_PREFIX "user.pagededup."

/* Extended attributes clients set (stored as given). flags: XATTR_CREATE,
 * XATTR_REPLACE. get/list: size 0 asks for the length. */
int xattr_set(struct store *st, uint64_t ino, const char *name, const void *value, size_t size, int flags);
int xattr_get(struct store *st, uint64_t ino, const char *name, void *buf, size_t size, size_t *len);
int xattr_list(struct store *st, uint64_t ino, char *buf, size_t size, size_t *len);
int xattr_remove(struct store *st, uint64_t ino, const char *name);

/* Inside a write transaction: drop every attribute of ino (inode deletion). */
int xattr_delete_all(MDB_txn *txn, struct store *st, uint64_t ino);

#endif
