/* ns_int.h - what ns.c (the namespace's operations), ns_rows.c (its
 * rows) and ns_later.c (creates that commit later) share; nothing else
 * includes it. Each call works inside the
 * caller's transaction. Errors are negative errno values.
 */
#ifndef PD_NS_INT_H
#define PD_NS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "ns.h"

/* The attributes of a new node of mode in dir for cred at now (owner,
 * group, set-group-ID inherited, nlink, times); its number is the
 * caller's. */
void ns_new_inode(const struct inode *dir, uint32_t mode, uint64_t rdev, const struct pd_cred *cred,
		  struct pd_time now, struct inode *in);
/* Attribute changes sa made to inode in at now (ns_setattr's rules). */
void ns_apply_setattr(struct inode *in, const struct ns_setattr *sa, struct pd_time now);
/* Add the new node in (numbered) as name in dir (read by ns_get_dir in
 * this transaction): its rows (a symlink's target given), dir's times and
 * link count. -EEXIST if the name is taken. */
int ns_add_new(struct wtx *w, struct inode *dir, const char *name, struct inode *in, const char *target);
/* Directory ino for a change of its entries (-ENOTDIR, -ENOENT once removed). */
int ns_get_dir(MDB_txn *txn, struct store *st, uint64_t ino, struct inode *dir);

/* Write inode in's row, with a symlink's target (tlen bytes) after its
 * fixed part. */
int ns_put_inode_target(MDB_txn *txn, struct store *st, const struct inode *in, const char *target, size_t tlen);

/* The dirent key of (parent, name hash). */
MDB_val ns_dirent_key(uint8_t kb[16], uint64_t parent, uint64_t hash);

/* A name's dirent: the child, its type and the name's hash. */
struct ns_dirent_hit {
	uint64_t child;
	uint32_t type;
	uint64_t hash;
};

/* The dirent of (parent, name) into *hit; -ENOENT when there is none. */
int ns_dirent_find(MDB_txn *txn, struct store *st, uint64_t parent, const char *name, struct ns_dirent_hit *hit);
/* Add / delete the dirent of (parent, name) for child of mode (type). */
int ns_dirent_put(MDB_txn *txn, struct store *st, uint64_t parent, const char *name, uint64_t child,
		  uint32_t mode);
int ns_dirent_del(MDB_txn *txn, struct store *st, uint64_t parent, const char *name, uint64_t child,
		  uint32_t type);

/* The way back from inode in to its names (its row is the caller's to
 * write): its first name (a new inode), another name (the first moves to
 * `links`), a name dropped, a name moved to (newparent, newname). */
int ns_name_first(MDB_txn *txn, struct store *st, struct inode *in, uint64_t parent, const char *name);
int ns_name_another(MDB_txn *txn, struct store *st, struct inode *in, uint64_t parent, const char *name);
int ns_name_drop(MDB_txn *txn, struct store *st, struct inode *in, uint64_t parent, const char *name);
int ns_name_move(MDB_txn *txn, struct store *st, struct inode *in, uint64_t parent, const char *name,
		 uint64_t newparent, const char *newname);

/* The parent of directory dir (the root is its own); -ENOENT for a
 * removed one. */
int ns_dir_parent(MDB_txn *txn, struct store *st, uint64_t dir, uint64_t *parent);
/* 1 when dir has no entries, 0 when it has, or an error. */
int ns_dir_is_empty(MDB_txn *txn, struct store *st, uint64_t dir);
/* List inode ino in `orphans` (on) or take it off. */
int ns_orphan_mark(MDB_txn *txn, struct store *st, uint64_t ino, bool on);

#endif
