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

/* seal_staged's steps apart, for a seal whose commit waits for a later
 * batch (seal_later.h): init; prepare (before the commit: the filter's
 * and the fingerprints' read, the record's encoding); seal_job_commit as
 * the store_write callback (it may run more than once); then committed
 * (the signer hears of a new blob; a staging file goes) or failed (what
 * a failed commit leaves put back); free. src and fp must outlive the
 * job. */
struct seal_job {
	uint64_t ino;
	const struct seal_src *src;
	const struct fp *fp;
	struct pd_time mtime, ctime;
	bool sync_dirs;
	bool renamed;            /* blob_files: the bytes sit at `renamed_to` */
	char renamed_to[BLOBKEY_PATH_MAX];
	struct pack_rec rec;     /* the encoded record (rec.buf NULL: not yet) */
	bool nursery;            /* rec goes to the nursery (blob.h) */
	bool heals;              /* prepare found the content's record damaged: this seal heals it */
	bool appended;           /* rec is in a pack at `loc` as `appended_key` */
	struct blobkey appended_key;
	struct pack_loc loc;
	struct seal_result out;
};
void seal_job_init(struct seal_job *j, struct store *st, uint64_t ino, const struct seal_src *src, const struct fp *fp,
		   struct pd_time mtime, struct pd_time ctime);
int seal_job_prepare(struct store *st, struct seal_job *j);
int seal_job_commit(struct wtx *w, void *job);
void seal_job_committed(struct store *st, struct seal_job *j);
void seal_job_failed(struct store *st, struct seal_job *j);
void seal_job_free(struct seal_job *j);

/* Make blob k durable: fsync its file and its directory. */
int seal_sync_blob(struct store *st, const struct blobkey *k);

#endif
