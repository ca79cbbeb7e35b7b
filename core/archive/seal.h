/* seal.h - sealing a page: the staged bytes of a file become a reference to
 * a stored blob, new or shared.
 *
 * Order, inside one write transaction (group commit, store.h):
 *   1. the counting filter: any counter of the MD5 at zero -> certainly new,
 *      no probe of `fingerprints` (the I/O IMP-CB saves); else probe, and a
 *      hit counts only if size and XXH3-128 match too (an MD5 collision is a
 *      new blob under a new variant of the key);
 *   2. duplicate: refcount+1, the staged file is dropped after the commit;
 *      new: the staged file is renamed into objects/ (fsynced first under
 *      sync_blobs), its record stored with its filter positions and marked
 *      "signature pending", the filter counters incremented, and a row
 *      added to `sigq`. The near-duplicate signature (simhash and sketch)
 *      is computed after the commit, off the close() path, by the signer
 *      (sigq.h), which then gives the record its signature and the
 *      near-duplicate tables their rows; a duplicate is never signed again;
 *   3. the inode points at the blob, with its new size and mtime;
 *   4. the inode's previous blob is released (refcount-1; at zero its record,
 *      filter counts and, after the commit, its file go).
 * A crash at any point leaves LMDB at the last commit: either the old blob
 * or the new one is referenced, never neither; a blob renamed in without its
 * commit is an orphan that fsck collects; a blob committed but not signed
 * yet keeps its sigq row, and the next open queues it again.
 */
#ifndef PD_SEAL_H
#define PD_SEAL_H

#include <stdbool.h>

#include "base/fp.h"
#include "store/rec.h"
#include "store/store.h"

struct seal_result {
	struct blobkey key; /* the blob the inode now refers to */
	bool dup;           /* an existing blob was shared */
	bool given;         /* the signer took src->give (the caller must not free it) */
};

/* The staged bytes: in memory (mem, fp->size bytes), or in the staging file
 * `staging` (relative to the store) open as fd. */
struct seal_src {
	const void *mem;
	/* mem, malloc'd, when the caller gives it up: a new blob's bytes go
	 * to the signer with its key (sigq_push_page), which then need not
	 * decode its record back. NULL: the caller keeps mem. */
	void *give;
	const char *staging;
	int fd;
};

/* Seal the staged bytes of inode ino, whose fingerprint is fp and which were
 * last modified at mtime (their ctime: ctime; sealing itself changes no
 * attribute a user sees). A new blob is queued for its signature after the
 * commit (sigq_push). On success a staging file is gone from staging/:
 * renamed into objects/ (fd then reads the blob) or, for a duplicate,
 * removed. Bytes in memory are written straight to their blob file when new
 * (a duplicate never touches the disk). */
int seal_staged(struct store *st, uint64_t ino, const struct seal_src *src, const struct fp *fp,
		struct pd_time mtime, struct pd_time ctime, struct seal_result *out);

/* Make blob k durable: fsync its file and its directory. */
int seal_sync_blob(struct store *st, const struct blobkey *k);

#endif
