/* ns_later.h - a new regular file whose create commits with its close().
 *
 * A page written through the mount costs a create (open(O_CREAT)) and a
 * seal (close()), and each was a commit of LMDB's: the create's commit was
 * three quarters of its time in the daemon (tests/bench/README.md, "What
 * one writer waits for"). ns_create_file gives the new file its inode
 * number from memory (store_take_ino), keeps its inode here and queues its
 * rows with store_write_later: the next batch commits them, as a rule the
 * one of the file's own close(), so that a page costs one commit.
 *
 * While it waits, the file is answered from here: its attributes
 * (ns_getattr) and its name (ns_lookup), and so are its directory's times
 * (ns_later_dir_times: the create's time, which its commit gives the
 * directory too), so that the getattr of the directory that the kernel
 * sends before the next create in it does not commit. A change of its
 * attributes before its close() (tar and cp -p set owner, mode and times
 * on the open file) joins the waiting create (ns_later_setattr). Every other read of
 * the namespace (ns_read_begin: readdir, xattrs, paths, queries, stats)
 * commits first. Every write commits it, being queued after it. A
 * close() of the file commits it if no seal did (an empty file: touch), an
 * fsync does, and the store's sync thread does within sync_ms. So every
 * call sees every create that returned before it, as before.
 *
 * What changes: a create whose file is still open when the daemon is
 * killed may be gone at the next mount (every close() that returned is
 * there, as before: tests/fs/t_crash.sh), as a create of the last seconds
 * may be gone after a power cut on ext4. A commit that fails after the
 * create returned (a full disk) is logged and fails the file's close().
 * Under -o sync_blobs, where every call is durable when it returns, a
 * create commits at once, as before.
 *
 * Names: a create checks that its name is free and queues its rows with
 * the names lock held alone; every other write that makes a name or
 * removes a directory (mknode, link, rename, rmdir: ns_write_name) holds
 * the lock shared until it committed, so that no name a create found free
 * is made, and no directory it found is removed, before its commit.
 */
#ifndef PD_NS_LATER_H
#define PD_NS_LATER_H

#include <stdbool.h>
#include <stdint.h>

#include "ns.h"

/* The part (store.h) that keeps the waiting creates of a writable store. */
extern const struct store_part ns_later_part;

/* Create regular file name in parent with mode's permission bits, as
 * ns_mknode(S_IFREG | mode) does (-EEXIST if the name exists), its commit
 * left to the next batch. At once where creates cannot wait (see above). */
int ns_create_file(struct store *st, uint64_t parent, const char *name, uint32_t mode,
		   const struct pd_cred *cred, struct inode *out);

/* What ino is to the waiting creates. */
enum ns_later_role {
	NS_LATER_NONE,   /* nothing */
	NS_LATER_WAITS,  /* its own create waits: *out is its inode */
	NS_LATER_PARENT, /* a create waits in it (a directory) */
};
enum ns_later_role ns_later_find(struct store *st, uint64_t ino, struct inode *out);
/* Directory *dir (as committed) with the times its waiting creates give
 * it: the latest create's. */
void ns_later_dir_times(struct store *st, struct inode *dir);
/* (parent, name) is a waiting create's name: true and *out its inode. */
bool ns_later_lookup(struct store *st, uint64_t parent, const char *name, struct inode *out);
/* ino's create waits: true, with its directory, its name (into name, of
 * size bytes) and its inode as the create writes it (seal_later.c keeps
 * them in the journal with the page; from then on the row no longer
 * changes here). */
bool ns_later_create_of(struct store *st, uint64_t ino, uint64_t *parent, char *name, size_t size, struct inode *in);
/* A change of ino's attributes (ns_setattr) made to its waiting create,
 * committed with it: tar and cp -p set a new file's times, owner and mode
 * before its close(), and each was a commit. -EAGAIN when ino's create
 * does not wait, or a batch or the journal (ns_later_create_of) has taken
 * its row already: the caller commits the change. */
int ns_later_setattr(struct store *st, uint64_t ino, const struct ns_setattr *sa, struct inode *out);
/* A create that the journal kept and a crash lost made again: inode in,
 * numbered, as name in parent (nothing when inode in->ino exists). */
int ns_later_create_again(struct store *st, uint64_t parent, const char *name, const struct inode *in);
/* Commit every waiting create, and every seal waiting for a batch
 * (seal_later.h). Not from inside a store_write callback. */
int ns_later_settle(struct store *st);
/* fsync(2) of a file or a directory: the waiting creates commit, then
 * store_sync makes everything durable. */
int ns_sync(struct store *st);
/* store_write for a callback that makes a name (see Names above). */
int ns_write_name(struct store *st, store_write_fn fn, void *arg);

#endif
