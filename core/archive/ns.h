/* ns.h - the namespace: inodes, directory entries, links and extended
 * attributes, over the LMDB tables of store.h. Every function that changes
 * something runs one write transaction through store_write (group commit);
 * every function that only reads runs one read transaction. The filesystem
 * layer translates its requests into these calls and nothing more.
 *
 * Names are byte strings of 1..255 bytes without '/' or NUL; "." and ".."
 * are not stored. Errors are negative errno values, as POSIX gives them for
 * the matching system call (-ENOENT, -EEXIST, -ENOTEMPTY, -ENOTDIR,
 * -EISDIR, -EINVAL, -ENAMETOOLONG, -EXDEV never), -EUCLEAN for a store that
 * contradicts itself.
 */
#ifndef PD_NS_H
#define PD_NS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/store.h"

/* The caller of a request: used for ownership of new nodes and for the
 * permission filter of query answers. */
struct pd_cred {
	uint32_t uid, gid;
	uint32_t ngroups;
	const uint32_t *groups;
};
/* gid is the caller's group or one of its supplementary groups. */
bool cred_in_group(const struct pd_cred *c, uint32_t gid);

/* Inside a write transaction (for core modules). */
int ns_get_inode(MDB_txn *txn, struct store *st, uint64_t ino, struct inode *out);
int ns_put_inode(MDB_txn *txn, struct store *st, const struct inode *in);
/* Names kept in inode rows (format 5 on). An inode with exactly one name
 * (a file of nlink 1, any directory but the root) keeps that name in its
 * own row (name_parent and name_hash, rec.h) instead of a `links` row,
 * when the store's format allows it and the row is of layout 2 (not a
 * symlink). A second name (link) moves the first into `links`; when a
 * file is back at one name, that name goes back into its row. */
bool ns_may_hold_name(const struct store *st, const struct inode *in);
/* Every name of an inode: fn(ctx, parent, name, len) for each, the one in
 * its row or its `links` rows; a non-zero return of fn stops the walk and
 * is returned. -EUCLEAN when the row names a dirent that is not there. */
typedef int (*ns_name_fn)(void *ctx, uint64_t parent, const char *name, size_t len);
int ns_names(MDB_txn *txn, struct store *st, const struct inode *in, ns_name_fn fn, void *ctx);
/* The name of inode ino in dirent (parent, hash), copied to
 * name[PD_NAME_MAX]; -ENOENT when that dirent does not name it. */
int ns_dirent_name(MDB_txn *txn, struct store *st, uint64_t parent, uint64_t hash, uint64_t ino,
		   char *name, size_t *len);
/* The name held by in's row moved to a `links` row; in's name fields are
 * cleared (the caller writes the inode). -ENOENT, fields cleared all the
 * same, when the dirent it named is gone (fsck). 0 for an inode whose row
 * holds no name. */
int ns_name_to_links(MDB_txn *txn, struct store *st, struct inode *in);
/* The reverse: an inode that may hold its name and has exactly one
 * `links` row takes that name into in (the row is deleted; the caller
 * writes the inode). 1 when it did, 0 when it had nothing to do. */
int ns_name_from_links(MDB_txn *txn, struct store *st, struct inode *in);
/* Delete an inode that has no name left: its xattrs, its blob reference,
 * its orphan mark. */
int ns_delete_inode(struct wtx *w, uint64_t ino);

/* A read transaction over the namespace: creates that wait for a commit
 * (ns_later.h) commit first, so that it sees every call that returned. */
int ns_read_begin(struct store *st, MDB_txn **txn);

int ns_getattr(struct store *st, uint64_t ino, struct inode *out);
int ns_lookup(struct store *st, uint64_t parent, const char *name, struct inode *out);

/* Make a node: a regular file, device, fifo or socket (mode's S_IFMT), a
 * directory (S_IFDIR) or a symlink (S_IFLNK, target given). The owner is the
 * caller; the group is the caller's, or the parent's when the parent is
 * setgid (a new directory then inherits S_ISGID). -EEXIST if the name exists. */
int ns_mknode(struct store *st, uint64_t parent, const char *name, uint32_t mode, uint64_t rdev,
	      const char *target, const struct pd_cred *cred, struct inode *out);
int ns_link(struct store *st, uint64_t ino, uint64_t newparent, const char *newname, struct inode *out);
/* Remove a name of a non-directory. *ino_out: the inode; *gone: its last
 * name went (it becomes an orphan until nothing uses it). */
int ns_unlink(struct store *st, uint64_t parent, const char *name, uint64_t *ino_out, bool *gone);
int ns_rmdir(struct store *st, uint64_t parent, const char *name, uint64_t *ino_out);
/* rename(2)/renameat2(2): flags RENAME_NOREPLACE, RENAME_EXCHANGE. When a
 * non-directory is replaced, *replaced gets its inode and *gone whether its
 * last name went; otherwise *replaced is 0. */
int ns_rename(struct store *st, uint64_t parent, const char *name, uint64_t newparent,
	      const char *newname, unsigned flags, uint64_t *replaced, bool *gone);

/* Attribute changes (size is openfile.c's business). */
#define NS_SET_MODE 1u
#define NS_SET_UID 2u
#define NS_SET_GID 4u
#define NS_SET_ATIME 8u
#define NS_SET_MTIME 16u
#define NS_SET_ATIME_NOW 32u
#define NS_SET_MTIME_NOW 64u
#define NS_SET_CTIME 128u
/* The bits of `kill` (S_ISUID, S_ISGID) go: ns_kill_suidgid decides which.
 * A change of owner or group of a non-directory clears set-user-ID, and
 * set-group-ID when group-executable, whoever asks, as chown(2) does on
 * Linux. */
#define NS_SET_KILL_SUIDGID 256u
struct ns_setattr {
	unsigned valid;
	uint32_t mode, uid, gid;
	uint32_t kill;
	struct pd_time atime, mtime, ctime;
};
int ns_setattr(struct store *st, uint64_t ino, const struct ns_setattr *sa, struct inode *out);
/* The same inside the caller's transaction (out may be NULL). */
int ns_setattr_in(struct wtx *w, uint64_t ino, const struct ns_setattr *sa, struct inode *out);
/* A write(2), truncate or open(O_TRUNC) by a caller without CAP_FSETID:
 * set-user-ID goes, and set-group-ID when the file is group-executable or
 * the caller is outside its group (cred is asked only then: finding a
 * caller's groups costs more than the rest). A read alone when there is
 * nothing to clear: it runs on every such write(2). 1: a bit went; 0: none. */
typedef const struct pd_cred *(*ns_cred_fn)(void *ctx);
int ns_kill_suidgid(struct store *st, uint64_t ino, ns_cred_fn cred, void *ctx);

/* Copy the symlink target into buf (not NUL-terminated); *len its length. */
int ns_readlink(struct store *st, uint64_t ino, char *buf, size_t size, size_t *len);

/* Directory listing from offset `off` (0 = start, as readdir gives). cb gets
 * each entry with the offset of the entry after it; it returns non-zero to
 * stop (its buffer is full). with_attr: also read each child's inode. */
typedef int (*ns_dirent_fn)(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t type,
			    uint64_t next_off, const struct inode *attr);
int ns_readdir(struct store *st, uint64_t dir, uint64_t off, bool with_attr, ns_dirent_fn cb, void *ctx);

/* Validate a name: -EINVAL, -ENAMETOOLONG. */
int ns_check_name(const char *name);

#endif
