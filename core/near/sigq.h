/* sigq.h - near-duplicate signatures computed after the commit, off the
 * close() path.
 *
 * Extracting a page's text and hashing it (near_sig_of_fd: simhash and
 * MinHash sketch) costs about as much as the rest of a seal together, and
 * nothing in the seal needs it: only the near-duplicate answers do. So a
 * seal stores a new blob with its record marked FPREC_SIG_PENDING (no
 * simhash, no near rows) and a row in the table
 *
 *   sigq: blobkey [20] -> (empty)
 *
 * in the same transaction; a duplicate never needs a signature, its record
 * has one or is pending already. After the commit the key joins an
 * in-memory queue (with the page's bytes when the seal had them in memory
 * and hands them over: sigq_push_page), and a signing thread takes keys
 * from it in batches: reads each blob (immutable; gone if its last
 * reference went: then there is nothing to do; bytes handed over need no
 * read), signs it outside any transaction, and in one
 * store_write per batch sets each record's simhash and sketch, clears the
 * flag, deletes the sigq row and adds the near rows - for a record that
 * still exists, is still pending, and still has the file that was read (the
 * key of a freed blob can be stored again: a new file then).
 *
 * The table makes the pending set survive a crash without a scan of
 * `fingerprints`: a writable open queues its rows again. A clean close
 * drains the queue, so a store that is not mounted has no pending rows
 * unless its daemon was killed.
 *
 * The answers stay as if signing were synchronous:
 *  - a near or simhash query on a writable store first drains the queue
 *    (sigq_drain: everything queued before the query is signed, the caller
 *    signing batches itself beside the thread), so a getfattr right after
 *    close() sees the page and its neighbours;
 *  - what is pending all the same (a read-only open after a crash, a
 *    `pagededup near` while the store is mounted, a page whose signing
 *    failed) is signed in memory for the answer (sigq_sign_blob) and
 *    compared with the query directly; nothing is written.
 *
 * Bound: when more than opts.sign_queue pages (default SIGQ_DEFAULT_MAX)
 * wait, the sealing thread signs the oldest ones itself before its close()
 * returns, so a fast writer cannot run ahead of the signer without limit,
 * and a drain (a query, the close) has at most about that many pages to
 * sign.
 *
 * Errors: a page that cannot be read or signed (memory, I/O) keeps its row
 * and leaves the queue until the next open; its answers are computed in
 * memory meanwhile. Errors are negative errno values.
 */
#ifndef PD_SIGQ_H
#define PD_SIGQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ndelta.h"
#include "near.h"
#include "store/rec.h"
#include "store/store.h"

/* 4,096 rather than 256: a cp -r of make bench's corpus (40,000 pages,
 * 19,999 new) from the page cache into a fresh mount took 13.0-13.5 s in
 * three runs of five with 256, and 18.9 and 21.5 s in the other two: there
 * the signer fell more than the bound behind early in the burst, and each
 * close() past it signed a page on the writer's own path. With 4,096 it took
 * 13.2-13.8 s in five runs of five (tests/bench/bench-ingest-cpu.sh, the
 * issue-15 note). A drain then signs at most some 4,096 x 180 us of CPU,
 * shared by the caller and the thread: under half a second on two cores. */
#define SIGQ_DEFAULT_MAX 4096
/* Pages signed per write transaction. Each page's rows (its fingerprint
 * row, the simhash tables, its set and 16 band rows) land on pages of
 * LMDB's trees spread over the key space; a batch rewrites each such
 * page once however many of its rows it adds, and writes it at its commit.
 * 64 rather than 16: the signer's CPU per page -7% in a cp -r of
 * corpus/a (tests/bench/bench-ingest-cpu.sh), the writers' unchanged. */
#define SIGQ_BATCH 64
#define SIGQ_GATHER_MS 20 /* the thread waits this long for a batch to fill */
#define SIGQ_IDLE_MS 1000 /* no page for this long after some: the heap's free
			   * pages go back to the system (base/heap.h) */
/* Bytes of pages the queue holds at most (sigq_push_page, counted by the
 * pages' sizes; a staging buffer grown by doubling may take up to twice
 * that), and the largest page it takes. Every held byte is on top of the
 * daemon's peak memory in a burst: at 16 MiB the peak RssAnon of a cp -r
 * of make bench's corpus rose from 46 to 51-56 MiB, at 4 MiB it stayed
 * at 45 MiB, and the daemon's CPU per page was the same (0.992 of the
 * 16 MiB build's: the pages past the bytes held are read back as
 * before). */
#define SIGQ_HELD_MAX ((size_t)4 << 20)
#define SIGQ_HELD_PAGE_MAX ((size_t)1 << 20)

/* ---- the table ---------------------------------------------------------- */

/* Open (create: make) the table; a read-only store from before it has
 * none (st->has_sigq false: nothing is pending). */
int sigq_open_table(MDB_txn *txn, struct store *st, unsigned create);
/* Add / delete blob k's row (inside the write transaction that stores /
 * frees the blob or signs it). A row already missing is not an error. */
int sigq_row_put(MDB_txn *txn, struct store *st, const struct blobkey *k);
int sigq_row_del(MDB_txn *txn, struct store *st, const struct blobkey *k);
/* Every row's key; fn returning non-zero stops the walk with that value
 * (a positive value is returned as 0). */
int sigq_each(MDB_txn *txn, struct store *st, int (*fn)(void *ctx, const struct blobkey *k), void *ctx);

/* ---- the queue and its thread (writable stores) -------------------------- */

/* Queue the table's rows and start the thread (unless opts.no_sign_thread). */
int sigq_start(struct store *st);
/* Stop the thread and free the queue; what is left pending keeps its rows. */
void sigq_stop(struct store *st);
/* Blob k was committed pending: queue it. Beyond the bound, the caller
 * signs the oldest pages until the queue is back under it. */
void sigq_push(struct store *st, const struct blobkey *k);
/* The same, handing over the page's bytes (page[0..len), malloc'd, all of
 * the blob's bytes, xxh128 their XXH3-128 in canonical form) when the seal had them in memory: whoever signs it
 * then signs them instead of decoding the record back from its pack (a
 * read of the nursery and a zstd decode a page). True: the queue took
 * the page (it frees it); false: it did not (more than SIGQ_HELD_MAX
 * bytes held, a page over SIGQ_HELD_PAGE_MAX, no queue, no memory), the
 * caller keeps it, and the key is queued alone as by sigq_push. */
bool sigq_push_page(struct store *st, const struct blobkey *k, void *page, size_t len, const uint8_t xxh128[16]);
/* Sign every page queued before the call (the caller helps). 0, or the
 * first error of a batch the caller signed. No-op on read-only stores. */
int sigq_drain(struct store *st);
/* Finish the delta step of the pages signed so far (ndelta.h; a clean
 * close, after sigq_drain). */
void sigq_drain_deltas(struct store *st);
/* Do one batch of the delta step in the caller's thread (ndelta_help: a
 * close() while the nursery is behind). */
void sigq_help_deltas(struct store *st);
/* Pages in the queue and being signed (tests, benchmarks). */
size_t sigq_queued(struct store *st);
/* The queue now and who signed its pages since the open: the thread,
 * writers past the bound (their close() waited for it), drains (queries,
 * the clean close). A signer falling behind shows as by_writers growing. */
struct sigq_counts {
	uint64_t queued, by_thread, by_writers, by_drain;
	uint64_t handed; /* of those, signed from bytes the seal handed over */
	struct ndelta_counts delta; /* the delta step after it (ndelta.h) */
};
void sigq_counts(struct store *st, struct sigq_counts *out);

/* ---- answers ------------------------------------------------------------- */

/* The signature of blob k computed from its file, in memory. -ENOENT when
 * the file is gone. */
int sigq_sign_blob(struct store *st, const struct blobkey *k, struct near_sig *sig);

/* ---- fsck ------------------------------------------------------------------ */

/* Every row names an existing record that is pending; every pending record
 * has its row and no simhash. Problems go to bad, counted in *nbad;
 * *npending: the pending records. */
int sigq_check(MDB_txn *txn, struct store *st, near_bad_fn bad, void *ctx, uint64_t *nbad, uint64_t *npending);
/* Make the table again from the records: one row per pending record (a
 * record both pending and signed keeps its signature and is not pending). */
int sigq_rebuild(MDB_txn *txn, struct store *st);

#endif
