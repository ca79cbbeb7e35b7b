/* openfile.h - live inodes and open files.
 *
 * The live-inode table holds what exists only while an inode is in use: the
 * kernel's lookup count (FUSE's nlookup; nothing is freed while the kernel
 * still holds a reference), the handles open on it, and for a file being
 * written its staged bytes: a staging file, its size and mtime, and the
 * MD5/XXH3 stream fed as sequential writes arrive, so sealing a sequentially
 * written page reads nothing back.
 *
 * A sealed file opened for writing without O_TRUNC is copied to staging on
 * its first write (blobs are immutable). The flush of a handle that wrote
 * or truncated seals the file when it is dirty, and so does the release of
 * the last handle; a truncate with no writer open seals at once. A refused
 * seal drops the staged bytes (the file reads as the store holds it)
 * unless another handle has written since its own last close(), whose
 * close will seal or drop them; handles that are merely open do not count.
 *
 * Locking: the table mutex guards the table and each entry's counts; an
 * entry's own mutex guards its file state. Order: table, then entry; an
 * entry's mutex may be held across store_write (a seal), never the table's.
 */
#ifndef PD_OPENFILE_H
#define PD_OPENFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/rec.h"

struct ns_setattr;

struct store;
struct live_table;

struct live_table *live_table_new(void);
void live_table_free(struct live_table *t);

/* The kernel took n more references on ino (a lookup, create, mkdir...). */
void live_ref(struct store *st, uint64_t ino, uint64_t n);
/* The kernel dropped n references (the entry is freed at zero). */
int live_forget(struct store *st, uint64_t ino, uint64_t n);
/* Entries in the table: inodes the kernel references or that are in use
 * (each holds an entry's memory until its FORGET; the README's scale
 * section measures how much); of them, those with a file state (pinned,
 * or holding staged bytes or an open blob); and how often the memory of
 * LIVE_TRIM_EVERY freed entries was given back to the system
 * (malloc_trim). Zeros on a store without the table. */
#define LIVE_TRIM_EVERY 16384
struct live_counts {
	size_t entries, states;
	uint64_t trims;
};
void live_counts(struct store *st, struct live_counts *out);
/* ino lost its last name: delete it (and release its blob) now, or when the
 * last open handle on it closes. */
int live_orphaned(struct store *st, uint64_t ino);
/* An open directory handle (opendir/releasedir): a directory removed while
 * open stays, empty and with no link, until its last handle goes, as on
 * ext4 (fstat and readdir on the descriptor still work). */
int live_pin(struct store *st, uint64_t ino);
int live_unpin(struct store *st, uint64_t ino);
/* Delete every orphan that nothing in this process uses (at open and
 * clean close of a store: after a crash or unmount none is in use). */
int live_drop_orphans(struct store *st);

struct pd_file;

/* Open ino with open(2) flags (O_ACCMODE, O_TRUNC, O_APPEND). keep_cache:
 * the kernel's cached pages of this file are still its content. */
int file_open(struct store *st, uint64_t ino, int flags, struct pd_file **out, bool *keep_cache);
int file_read(struct pd_file *f, void *buf, size_t size, uint64_t off, size_t *got);
int file_write(struct pd_file *f, const void *buf, size_t size, uint64_t off, size_t *done);
/* close(2) of one descriptor: seals a dirty file written through f. */
int file_flush(struct pd_file *f);
/* The last close of the handle: seals if still dirty, frees f. */
int file_release(struct pd_file *f);
int file_fsync(struct pd_file *f, bool datasync);
/* Set the size of ino (truncate/ftruncate; f is the handle if any). */
int file_truncate(struct store *st, uint64_t ino, uint64_t size, struct pd_file *f);
/* The inode's attributes with the staged size and mtime of a file being
 * written. */
int file_getattr(struct store *st, uint64_t ino, struct inode *out);
/* The same for attributes already read from the store: merge the staged
 * size and times into *in. epoch: file_attr_epoch() taken before *in was
 * read. A file's state goes once its last seal has committed; a read of
 * the store begun before that commit, and a look for the state after the
 * state went, would find neither the new size nor the staged one (an
 * lstat right after close() answered the size before the open(O_TRUNC)).
 * The epoch says whether a state went meanwhile; then *in is read again. */
uint64_t file_attr_epoch(struct store *st);
void file_merge_attr(struct store *st, struct inode *in, uint64_t epoch);
/* Set mtime of a file being written, so the seal keeps it (utimens while
 * open for writing, as `wget -N` does). No-op if not staged. */
void file_set_mtime(struct store *st, uint64_t ino, struct pd_time mtime);
/* A utime (sa sets times only: atime, mtime, either as now, ctime) of a
 * file whose seal waits for its batch (seal_later.h), queued behind it
 * instead of committing it: 0; -EAGAIN: no such seal, or sa sets more,
 * set them at once (ns_setattr). */
int file_set_times_later(struct store *st, uint64_t ino, const struct ns_setattr *sa);
/* The seals whose batch committed since the last call (seal_later.h)
 * resolved: their bytes in memory go. wait: with no entry's mutex held
 * (close() does it); else (a batch's leader, which may hold one) only
 * the entries whose mutex is free, the rest left for the next call, and
 * none whose seal failed (its second try writes). */
void file_resolve_sealed(struct store *st, bool wait);
/* The inode of an open file. */
uint64_t file_ino(const struct pd_file *f);

#endif
