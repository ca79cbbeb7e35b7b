/* seal_later.h - a close() whose seal commits with a later batch.
 *
 * A page sealed at its close() cost a commit of LMDB's of its own: with
 * two writers about one commit a page, each copying some 24 of LMDB's
 * pages (the tables' paths from root to leaf), and since the power-cut
 * checkpoints each of those copies is a page the disk takes
 * (tests/bench/README.md, "What a checkpoint costs at scale"). Here the
 * close() of a page held in memory queues its seal (store_write_later)
 * behind the file's waiting create, and replies: the next batch, which
 * the sync thread runs within sync_ms or a close() runs once
 * SEAL_LATER_MAX pages or SEAL_LATER_MAX_BYTES wait (seal_later_full),
 * commits many pages
 * in one transaction.
 *
 * What makes that safe is the journal (store.h): before it replies, the
 * close() appends the page, its fingerprint and times, and the create
 * when that waits too, to the journal, so that a daemon killed before the
 * batch committed leaves what the next open needs to seal the page again
 * (seal_later_replay, in the order of the closes): every close() that
 * returned is there, as before.
 *
 * While it waits the file is answered from its state (openfile.c): its
 * bytes stay in memory, as staged and not dirty, so that a read or a
 * getattr answers them; anything that would change them (a write, a
 * truncate, a utime, an fsync, a new seal) first commits what waits.
 * Once the batch committed, the next close() of any file resolves the
 * waiting seals done (file_resolve_sealed), as does the leader of their batch
 * where their file is free: the bytes in memory go, as after
 * a seal at close.
 *
 * Not deferred, sealed at close() as before: -o sync_blobs (every call is
 * durable when it returns), a format 1 store (blob files), a page in a
 * staging file (larger than the memory for pages being written), bytes
 * whose record is known damaged (the seal heals it: the record's other
 * files read whole right after the close), and a disk with less free than
 * the nursery's bound (blob.h), so that a full disk is reported by the
 * close() that meets it. A seal that fails in
 * its batch after its close() returned (which the free-space check makes
 * rare: an LMDB error) is logged and tried again at once in the thread
 * that resolves it; a second failure is logged with the page's inode,
 * and its bytes stay for a later close().
 */
#ifndef PD_SEAL_LATER_H
#define PD_SEAL_LATER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/fp.h"
#include "ns.h"
#include "seal.h"
#include "store/store.h"

#define SEAL_LATER_MAX 64
#define SEAL_LATER_MAX_BYTES (8u << 20)

/* A seal waiting for its batch. */
struct seal_later_page;

/* The part (store.h) that replays the journal at a writable open (after
 * the other parts started, so that a replayed seal finds the signer and
 * the nursery as a close() does) and resolves what waits at the close. */
extern const struct store_part seal_later_part;

/* Queue the seal of inode ino's bytes mem (fp->size of them, which must
 * not change until the seal is resolved: openfile.c), last modified at
 * mtime/ctime: 0 and *out (the caller's reference) when queued; -EAGAIN
 * when this seal cannot wait (above): seal at once. Other errors: the
 * journal's, or -ENOMEM (nothing queued). */
int seal_later_queue(struct store *st, uint64_t ino, const void *mem, const struct fp *fp, struct pd_time mtime,
		     struct pd_time ctime, struct seal_later_page **out);
/* A utime of p's inode right after its close (wget, cp -p and tar set a
 * file's times once it is written): sa sets atime and/or mtime and the
 * ctime (NS_SET_CTIME, the call's time), nothing else. Journaled and
 * queued behind the seal as the seal is, so that it does not commit the
 * batch: 0; -EAGAIN when it cannot wait (set them at once); -ENOMEM. The
 * caller (openfile.c) defers only a utime of a file whose seal waits. */
int seal_later_times(struct store *st, struct seal_later_page *p, const struct ns_setattr *sa);
/* p's batch ran and so did every utime queued behind it: the file's
 * rows say all of it, and its state may let go. */
bool seal_later_settled(const struct seal_later_page *p);
/* As many seals wait as a batch takes (SEAL_LATER_MAX, _BYTES): the
 * close() that queued the last commits them (store_settle), once its file
 * state points at its own (so that the batch's leader leaves it to the
 * state's owner). */
bool seal_later_full(struct store *st);
/* Wait for p's batch (committing what waits if need be): 0 and *res, or
 * the seal's error. */
int seal_later_wait(struct store *st, struct seal_later_page *p, struct seal_result *res);
/* p's inode; whether its batch ran and failed it. */
uint64_t seal_later_ino(const struct seal_later_page *p);
bool seal_later_failed(const struct seal_later_page *p);
/* Let go of a reference. */
void seal_later_put(struct seal_later_page *p);
/* Take the seals whose batch ran since the last call (a list through
 * seal_later_next), each a reference of the caller's; the signer has
 * heard of each new blob. */
struct seal_later_page *seal_later_take_done(struct store *st);
/* Put p (taken above, not resolved) back for a later take. */
void seal_later_give_back(struct store *st, struct seal_later_page *p);
struct seal_later_page *seal_later_next(const struct seal_later_page *p);

#endif
