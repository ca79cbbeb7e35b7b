/* mounts.h - where stores are mounted, read from the kernel's mount table
 * (/proc/self/mountinfo), and the wait for a daemon that is still closing
 * its store after an unmount.
 *
 * A mount of a store is a line of type "fuse.pagededupfs" whose source
 * field is the store's absolute path (the daemon mounts with
 * fsname=STORE). With the table, the tools accept a mountpoint wherever a
 * store is accepted, and tell "mounted" from "being closed".
 *
 * Why the wait: fusermount3 -u (or umount) returns once the kernel has
 * detached the mount, while the daemon is still draining its signer,
 * saving the filter and marking the store clean, holding STORE/lock. A
 * command run at once after the unmount finds the lock held by a store
 * that is mounted nowhere: it waits for the lock, and says so, rather
 * than failing with "in use".
 */
#ifndef PD_MOUNTS_H
#define PD_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>

#define MOUNTS_FSTYPE "fuse.pagededupfs"

/* If path is a pagededupfs mount point or lies below one: the store's path
 * into store, the mount point into mnt (either may be NULL), the path of
 * `path` inside the archive ("/" for the mount point) into inner (may be
 * NULL). Returns 0, -ENOENT when path is in no such mount, or another
 * negative errno (path cannot be resolved). */
int mounts_find_path(const char *path, char *store, size_t store_size, char *mnt, size_t mnt_size,
		     char *inner, size_t inner_size);
/* If the store in dir is mounted: its mount point into mnt (may be NULL)
 * and 0; -ENOENT otherwise. */
int mounts_find_store(const char *dir, char *mnt, size_t mnt_size);

/* Wait until no process holds the lock of the store in dir, while the
 * store is mounted nowhere (a daemon closing after its unmount, or a
 * running fsck). say(ctx, pid) is called once when the wait begins, with
 * the holder's pid ("?" if unknown). Returns 0 when the lock is free (it
 * is not kept: the caller takes it), -EBUSY with the mount point in mnt
 * when the store is (or becomes) mounted, -ETIMEDOUT after timeout_s
 * seconds (0: no limit). A dir with no lock file is free. Nothing is
 * created or written. */
int mounts_wait_closing(const char *dir, unsigned timeout_s, void (*say)(void *ctx, const char *pid), void *ctx,
			char *mnt, size_t mnt_size);

/* Is one of the two paths (made absolute) equal to the other or inside it?
 * (a store inside its mount point, or a mount point inside its store) */
bool mounts_paths_nest(const char *a, const char *b);

#endif
