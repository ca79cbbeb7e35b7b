/* store_int.h - what store.c (making, opening and closing a store) and
 * store_commit.c (transactions) share. Not for use outside core/store/. */
#ifndef PD_STORE_INT_H
#define PD_STORE_INT_H

#include "store.h"

/* A batch that ran out of LMDB map: grown and run again. */
#define PD_EMAPFULL (-ECHRNG)
#define MIN_MAPSIZE (64ull << 20)
#define DEFAULT_MAPSIZE (1ull << 30)

/* A caller of store_write waiting in the group-commit queue. */
struct store_wreq {
	store_write_fn fn;
	void *arg;
	int rc;
	bool done;
	bool failed; /* its callback failed: left out of the batch's commit */
	/* store_write_later: nobody waits; done(arg, rc) runs once the
	 * request is committed or has failed, and the leader frees it */
	void (*later_done)(void *arg, int rc);
	struct store_wreq *next;
};

/* Requests of store_write_later no batch will run hear -ECANCELED. */
void store_drop_later(struct store *st);

/* Meta-table integers (u64 little-endian) and the running totals. */
int store_meta_put_u64(MDB_txn *txn, MDB_dbi db, const char *key, uint64_t x);
int store_meta_get_u64(MDB_txn *txn, MDB_dbi db, const char *key, uint64_t *x);
int store_counters_put(MDB_txn *txn, MDB_dbi db, const struct pd_counters *c);
void store_counters_add(struct pd_counters *to, const struct pd_counters *d);

/* Keep LMDB_RESERVE bytes allocated past LMDB's last used page, so that
 * commits (deletes first) still go through on a full disk. */
void store_reserve_lmdb_space(struct store *st);
/* The bytes kept allocated past LMDB's last used page, for `used` bytes in
 * use (store_commit.c). */
uint64_t store_lmdb_reserve(uint64_t used);

/* LMDB's file written again at a close (store_opts.lmdb_rewrite_max),
 * the store's lock held by the caller, in_use the bytes of its pages in
 * use as the store saw them: 1 when rewritten (*before and *after its
 * allocated bytes); 0 when left as it is, why in err (in_use over max, or
 * the disk short of three times in_use and LMDB_REWRITE_HEADROOM); or a
 * negative errno with a message in err (the old file untouched). */
#define LMDB_REWRITE_HEADROOM (64ull << 20)
#define LMDB_REWRITE_GROWTH 8 /* a rewrite at a close: the open grew LMDB by 1/8 */
int store_lmdb_rewrite_held(const char *dir, uint64_t max, uint64_t in_use, uint64_t *before, uint64_t *after, char err[PD_ERRLEN]);

/* The copy a rewrite killed before its rename left in meta/ (store dir
 * open as dirfd), removed; the caller holds the store's lock. */
void store_lmdb_drop_leftover(int dirfd);

/* Dead pack records waiting for a sync (store_commit.c, "Punched once
 * durable"): taken before a sync, then settled by it: punched if it
 * succeeded, put back for the next one if not. The sync thread and
 * store_sync take, sync and settle under sync_run_mu, one at a time. */
struct store_punches {
	struct pack_loc *v;
	size_t n;
};
struct store_punches store_punches_take(struct store *st);
void store_punches_settle(struct store *st, struct store_punches *p, bool synced);

/* No commit runs from store_commits_hold until store_commits_release: the
 * caller leads the group commit with nothing to commit. Called by the
 * leader itself (inside a commit's callback) it holds them already: true,
 * and the release does nothing. */
bool store_commits_hold(struct store *st);
void store_commits_release(struct store *st, bool nested);

/* Checkpoints for a power cut (store_ckpt.c, where the why is).
 *   store_ckpt_recover   (store.h) before LMDB opens
 *   store_ckpt_open      a writable open's file and descriptors
 *   store_checkpoint     capture the last commit, sync_files(st), write
 *                        the checkpoint, punch what it made durable dead
 *                        (takes sync_run_mu; a commit's leader may call it)
 *   store_ckpt_mark_closed  a clean close (or durable commits): nothing
 *                        to restore
 *   store_ckpt_close     descriptors and the read transaction let go
 *   store_ckpt_watch     a commit's check of LMDB's growth */
enum { CKPT_OPEN = 1, CKPT_CLOSED = 2 };
/* The store's own files synced (the packs, then LMDB): an fsync's
 * checkpoint, the open's and a full disk's (store_syncer.c). */
int store_sync_files(struct store *st);
int store_ckpt_open(struct store *st);
int store_checkpoint(struct store *st, int (*sync_files)(struct store *st));
int store_ckpt_mark_closed(struct store *st);
void store_ckpt_close(struct store *st);

/* store_journal.c: the journal's files opened (a writable open, once
 * LMDB is), and let go. */
int store_journal_open(struct store *st);
void store_journal_close(struct store *st);
/* At a clean close, once every entry committed and is on disk: the files
 * are emptied, so that a store at rest does not keep a batch's worth of
 * entries (up to 2 x 4 MiB) nobody will read. */
void store_journal_trim(struct store *st);
/* After a commit: a checkpoint now if LMDB's file grew CKPT_EARLY_BYTES
 * past its last page at the last capture (store_ckpt.c, "Early"). */
void store_ckpt_watch(struct store *st);

/* The sync thread (store_syncer.c, where its schedule is).
 *   store_syncer_first_checkpoint  a writable open's, before its commits
 *   store_syncer_start / _stop      the thread, unless commits are durable
 *   store_syncer_kick               a checkpoint now, from a commit
 *   store_syncer_kicked             a kick the thread has not taken yet */
int store_syncer_first_checkpoint(struct store *st, char err[PD_ERRLEN]);
void store_syncer_start(struct store *st);
void store_syncer_stop(struct store *st);
void store_syncer_kick(struct store *st);
bool store_syncer_kicked(struct store *st);

#endif
