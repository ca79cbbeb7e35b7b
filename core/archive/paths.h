/* paths.h - path names of inodes, filtered by the caller's permissions. */
#ifndef PD_PATHS_H
#define PD_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ns.h"

/* Call cb with the path from the root ("/a/b") of every name of ino that
 * cred may reach (search on every directory, read on the file); names it
 * may not reach are left out. cred NULL: every name. */
typedef int (*path_fn)(void *ctx, const char *path, size_t len);
int path_names(MDB_txn *txn, struct store *st, uint64_t ino, const struct pd_cred *cred, path_fn cb,
	       void *ctx);
/* path_names for every inode on blob k but `exclude` (0: none); inodes
 * being deleted (no name left) are skipped. */
int path_names_of_blob(MDB_txn *txn, struct store *st, const struct blobkey *k, uint64_t exclude,
		       const struct pd_cred *cred, path_fn cb, void *ctx);
/* May cred do `mask` (R_OK/W_OK/X_OK) on in, as the kernel checks it? */
bool path_may(const struct inode *in, const struct pd_cred *cred, int mask);

#endif
