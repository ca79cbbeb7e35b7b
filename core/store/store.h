/* store.h - the store: a backing directory, its LMDB environment, its
 * counting filter, and the write path every change goes through.
 *
 *   STORE/meta/      LMDB environment (every table but page bytes)
 *   STORE/packs/     page bytes: append-only pack files of records (pack.h)
 *   STORE/objects/   format 1: one immutable file per distinct content
 *                    (read as before; fsck --repair moves them into packs)
 *   STORE/staging/   bytes of files open for writing, not yet sealed
 *   STORE/filter     leaf 0 of the page filter (the whole filter until it
 *                    first splits), rebuildable from LMDB
 *   STORE/filter.d/  the other leaves of the page filter, leaf-<id>
 *   STORE/lock       held (flock) by the one process that writes the store
 *
 * The page filter (gfilter.h) grows with the store: a tree of counting
 * filters routed by MD5 prefix, described by the meta record "filter_tree"
 * (leaves, their geometry, a split in progress and its cursor), which
 * commits with the fingerprint records whose stored positions name their
 * leaf. A background thread (store_filter.c) moves a splitting leaf's keys
 * to its children in chunks of a few thousand records, each chunk one
 * store_write callback, so seals go on between them.
 *
 * Parts: the subsystems above the store that keep tables in its LMDB
 * environment or run threads on it (blob storage, near-duplicates, the
 * live-inode table) join it through the hooks of struct store_part, named
 * by the layer that opens the store (archive_open, core/archive/). The
 * store calls them at mkfs, open and close and knows nothing else of them,
 * so no folder below calls one above.
 *
 * Writes: store_write() runs a callback inside a write transaction. Callers
 * on many threads are grouped: one of them (the leader) runs every queued
 * callback in one LMDB transaction and commits once; one commit, and in
 * durable mode one fsync, serves the whole group (group commit). A callback
 * that fails takes the transaction down with it, and the others run again
 * without it (cheaper than a nested transaction per callback, since
 * failures are rare). A callback may therefore run more than once
 * (also when LMDB's map is full: the batch is aborted, the map doubled and
 * the batch run again): it keeps no state across runs except through its
 * argument, and must not call store_write itself.
 *
 * Errors are negative errno values; messages for people go to the `err`
 * buffers that open and mkfs take.
 */
#ifndef PD_STORE_H
#define PD_STORE_H

#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "filter/cbf.h"
#include "filter/gfilter.h"
#include "pack/pack.h"
#include "rec.h"

/* Format 2: page bytes in packs (pack.h); records say where (FPREC_PACKED).
 * A format 1 store (a file per blob under objects/) opens too: a writable
 * open marks it format 2 (new pages go to packs at once), and
 * `pagededup fsck --repair` moves its remaining files into packs.
 * Format 3: pages may be deltas on other pages, whose bases are kept
 * alive by meta rows (blob.h, "dlnk" and "dkep"). A release of format 2
 * reads deltas but would free a base its deltas need, so a writable open
 * marks a format 1 or 2 store format 3, which such a release refuses.
 * Format 4: inode rows may be in layout 2 (rec.h), which a release of
 * format 3 cannot decode. Older rows stay as they are until the inode is
 * next written; a writable open marks an older store format 4.
 * Format 5: two changes a release of format 4 would misread, made
 * together:
 *   - packs of version 2, whose records may have header layout 2
 *     (pack.h), which a release of format 4 takes for damage (and its fsck
 *     --repair would drop). Packs of version 1 are read as they are;
 *   - the one name of an inode may be held by its own layout 2 row
 *     (INODE_P_NAME, rec.h) instead of a `links` row, which a release of
 *     format 4 would not find. Both forms are read; names written from
 *     then on take the new form, and `pagededup fsck --repair` converts
 *     the rest.
 * Format 6: fingerprint rows may be in layout 2 (varints, rec.h), which
 * a release of format 5 takes for damage. Both layouts are read; every
 * row written from then on takes layout 2, and the rest are converted at
 * the first writable open (store_fp_rows_upgrade: a batch of rows a
 * transaction, the meta row "fp_layout" written last) and by `pagededup
 * fsck --repair`.
 * Format 7: a blob with one inode keeps that inode in its fingerprint row
 * (FPREC_P_INO, rec.h) and has no `blob_inodes` row; a blob with two or
 * more keeps them all in `blob_inodes` (store_blob_inodes below). A
 * release of format 6 would find such a blob listed nowhere. Both forms
 * are read; a writable open converts the blobs of one inode listed in
 * `blob_inodes` (store_blob_inodes_upgrade: a batch a transaction, the
 * meta row "ino_layout" written last), and so does `pagededup fsck
 * --repair`.
 * Format 7 too: a page's shingle set may be kept as the difference from its
 * base's set (nearset.h format 5, near.h "sets kept as differences"),
 * which a release of format 6 takes for a damaged row. No row is
 * converted: differences appear as pages become deltas (the delta step
 * writes them only in a store of format 7).
 * Format 7 too: a page over a chunk may be a chunked delta (pack.h: a frame
 * per chunk against a window of its base), which a release of format 6
 * decodes against the wrong prefix and so answers EIO for (its fsck takes
 * it for damage). Nothing stored before changes, so there is nothing to
 * convert: the writable open that marks the store format 7 is all.
 * A writable open marks an older store format 7 (not under -o blob_files,
 * which keeps a format 1 store's layout: its rows stay in layout 1). */
#define PD_FORMAT_VERSION 7
#define PD_FORMAT_INODE_ROW2 4
#define PD_FORMAT_NAME_IN_ROW 5
#define PD_FORMAT_FP_ROW2 6
#define PD_FORMAT_INO_IN_ROW 7
#define PD_FORMAT_SET_DIFF 7
#define PD_FORMAT_CHUNKED_DELTA 7
#define PD_FORMAT_OLDEST 1
/* Near-duplicate tables: K+1 for distance K (near.h). */
#define PD_NEAR_MAX_TABLES 17
/* LMDB's named tables a store may open at once (mdb_env_set_maxdbs): at
 * K = 16, the 17 simhash tables and their two levels each (near.h, "Rows
 * staged") are 51, beside some twenty others. */
#define PD_MAX_DBS 128
#define PD_ERRLEN 512

/* A parameter left to the part that owns it (store_part.create settles it). */
#define STORE_PARAM_UNSET UINT32_MAX

/* The filter's first design load. The filter grows with the store (a leaf
 * past its load is rebuilt larger or split, off the seal path: gfilter.h),
 * so a store starts small: 2^16 pages is 0.7 MB of filter where 10^6 pages
 * took 10.8 MB before the first page, and growing to 10^6 pages keeps the
 * rate bound (tests/bench/README.md, "The filter's first size"). */
#define STORE_DEFAULT_EXPECTED_PAGES 65536

struct store_params {
	uint64_t expected_pages;   /* filter design load (default STORE_DEFAULT_EXPECTED_PAGES) */
	double filter_fpr;         /* target false-positive rate (default 1e-4) */
	uint32_t filter_lines;     /* cache lines per key, 1 or 2 (default 2) */
	uint32_t near_distance;    /* near-duplicate Hamming distance (STORE_PARAM_UNSET: near/'s default, SIMHASH_NEAR_DISTANCE) */
	double filter_fmax;        /* bound on a filter leaf's rate (0: 2 x filter_fpr) */
	uint64_t filter_leaf_lines;/* largest leaf before it splits in two (0: 2^18 lines, 16 MiB) */
};
void store_params_default(struct store_params *p);

struct store;
struct blob_listener;
struct live_table;
struct ns_later;
struct sigq;

/* A part of the store (see the top of this file). Every hook may be NULL;
 * errors are negative errno values, with a message in err where one is
 * taken. */
struct store_part {
	const char *name;
	/* mkfs, in the transaction that makes the store: the part's tables
	 * and records. It may settle its parameters in st->params (a zero
	 * there means the part's default) before they are written. */
	int (*create)(MDB_txn *txn, struct store *st);
	/* Every open, in the open's transaction: the part's tables (a
	 * writable open creates those a store from before them lacks). */
	int (*open)(MDB_txn *txn, struct store *st, char err[PD_ERRLEN]);
	/* A writable open, after the store is marked unclean and its own
	 * threads run; clean: the last close was clean. In part order. */
	int (*start)(struct store *st, bool clean, char err[PD_ERRLEN]);
	/* A clean close of a writable store, in reverse part order, before
	 * LMDB and the filter are synced: 0, 1 to leave the store marked
	 * unclean (the next open repairs what the part left), or -errno. */
	int (*stop)(struct store *st);
	/* Every close, abandon or failed open, in reverse part order: stop
	 * threads without draining them, free the part's memory. */
	void (*release)(struct store *st);
};
#define STORE_MAX_PARTS 5

struct store_opts {
	bool readonly;        /* tools that only read: no lock, no writes */
	bool nodedup;         /* every sealed file gets a blob of its own */
	bool sync_blobs;      /* fsync blobs and commit durably before a seal returns */
	uint64_t mapsize;     /* initial LMDB map size, 0 = automatic */
	unsigned sync_ms;     /* background LMDB sync period when not durable, 0 = 1000 */
	bool create;          /* create a store (default params) if dir is empty or missing */
	unsigned stage_mem_mb; /* memory for pages being written (beyond: staging files) and pages
				* decoded for reading (beyond: memory files), 0 = 32 MiB */
	bool no_split_thread; /* filter splits only through store_filter_step (tests) */
	unsigned split_chunk; /* records moved per split step, 0 = 2048 */
	bool no_sign_thread;  /* signatures only through sigq_drain and over-bound seals (tests) */
	unsigned sign_queue;  /* pages waiting for their signature before a seal signs
			       * the oldest itself, 0 = SIGQ_DEFAULT_MAX (sigq.h) */
	int pack_level;       /* zstd level of new records, 0 = PACK_DEFAULT_LEVEL,
			       * < 0 = stored raw */
	uint64_t pack_max_bytes; /* a pack is closed past this, 0 = PACK_DEFAULT_MAX_BYTES */
	bool blob_files;      /* new blobs as files under objects/, format 1's layout
			       * (tests of format 1 stores); the store stays format 1 */
	/* The compactor of packs (blob.h, blob_compact.c): a pack whose live
	 * share falls below compact_share (0 = BLOB_COMPACT_SHARE, < 0 = no
	 * compactor thread) with at least compact_min_dead bytes to give
	 * back (0 = BLOB_COMPACT_MIN_DEAD) is rewritten; looked at every
	 * compact_period_ms (0 = BLOB_COMPACT_PERIOD_MS). */
	double compact_share;
	uint64_t compact_min_dead;
	unsigned compact_period_ms;
	/* The zstd level the compactor encodes the whole pages it copies
	 * again at, kept when smaller (blob_cold.c): 0 = BLOB_COMPACT_COLD_LEVEL,
	 * < 0 = copied as they are. */
	int compact_level;
	unsigned delta_rule;  /* how near-duplicates choose the base they are stored
			       * as deltas against (near/ndelta.h), 0 = default */
	unsigned stage_rows; /* rows each staged table's level 0 holds before they
			      * move on (near.h, "Rows staged"), 0 = its default */
	unsigned delta_candidates; /* candidates a page's base is chosen among, at
				    * most NDELTA_CANDIDATES, 0 = NDELTA_DEFAULT_CANDIDATES */
	int delta_window;           /* pages before a page it is also tried as a
				    * delta on, at most BLOB_COLD_WINDOW_MAX,
				    * 0 = NDELTA_DEFAULT_WINDOW, < 0 = none */
	/* The nursery (pack.h): a sealed page goes to a nursery pack at
	 * nursery_level (0 = raw while the nursery holds less than
	 * nursery_raw_bytes and the disk has room, else BLOB_NURSERY_LEVEL:
	 * blob.h; < 0 = raw always) and its final
	 * record is written by the delta step; while the nursery holds more
	 * than nursery_max_bytes (0 = BLOB_NURSERY_MAX_BYTES) a seal writes
	 * the final record itself, as without a nursery. */
	bool nursery;
	int nursery_level;
	uint64_t nursery_max_bytes;
	uint64_t nursery_raw_bytes; /* 0 = BLOB_NURSERY_RAW_BYTES */
	bool no_delta_thread; /* the delta step and nursery moves only through
			       * ndelta_drain and ndelta_nursery_sweep (tests) */
	uint64_t background_room; /* bytes background work leaves free past
				   * twice LMDB's reserve (store_room_for_background);
				   * 0 = 8 MiB (tests ask more than a disk has) */
	/* At a clean close, LMDB's file is written again in key order
	 * without its free pages (store_lmdb_compact) when this open grew
	 * its pages by an eighth or more (LMDB_REWRITE_GROWTH), the file is
	 * at most lmdb_rewrite_max bytes and the disk has room for the
	 * rewrite; 0: never (the tools' default; `pagededup compact` does it
	 * on demand). Why: a crawl leaves LMDB's leaves about two thirds
	 * full (store_lmdb.c). */
	uint64_t lmdb_rewrite_max;
	/* The compactor's idle pass (blob.h): a cold pass once the store has
	 * committed nothing for this many seconds; 0: never (the tools'
	 * default; the daemon's is in fs/main.c). */
	unsigned idle_compact_s;
};

/* Running totals, kept in the meta table and updated in the transactions
 * that change them. */
#define PD_HIST_BUCKETS 24 /* refcount histogram: bucket b holds 2^b .. 2^(b+1)-1 */
struct pd_counters {
	int64_t pages;          /* regular files */
	int64_t logical_bytes;  /* sum of regular file sizes */
	int64_t blobs;          /* fingerprint records (distinct stored contents) */
	int64_t stored_bytes;   /* sum of blob sizes */
	int64_t collisions;     /* MD5 matches whose size or XXH3-128 differed */
	int64_t seals;          /* files sealed */
	int64_t dup_seals;      /* seals that found an existing blob */
	int64_t probes;         /* fingerprint-table lookups the filter could not skip */
	int64_t probes_skipped; /* lookups the filter answered "certainly new" */
	int64_t false_positives;/* probes that found no record */
	int64_t hist[PD_HIST_BUCKETS];
};
#define PD_COUNTERS_N (10 + PD_HIST_BUCKETS)

struct store {
	char *dir;
	int dirfd;
	int lockfd;
	bool readonly;
	struct store_opts opts;
	struct store_params params;
	MDB_env *env;
	MDB_dbi db_meta, db_inodes, db_dirents, db_links, db_fp, db_blob_inodes, db_xattrs,
		db_saturated, db_orphans;
	MDB_dbi db_near[PD_NEAR_MAX_TABLES];
	unsigned near_tables; /* K+1; 0 when a read-only store has none */
	bool near_stale;      /* read-only, signatures of another version (near.h) */
	MDB_dbi db_nearfeat, db_nearlsh; /* shingle sets and LSH bands: nearfeat, nearbands (near.h) */
	MDB_dbi db_nearstage[2]; /* band rows staged: nearbands0, nearbands1 (near.h, layout 5) */
	bool has_nearstage;      /* false: a read-only store from before them */
	MDB_dbi db_nearhstage[PD_NEAR_MAX_TABLES][2]; /* simhash rows staged: nearI_0, nearI_1 (layout 6) */
	bool has_nearhstage;     /* false: a read-only store from before them */
	bool has_nearset;     /* false: a read-only store from before them */
	bool near_sets_full;  /* sets and band rows at 32 bits: near layout < 4 (near.h) */
	bool near0_keys;      /* near0 rows hold whole blob keys: near0 layout 1 (near.h) */
	MDB_dbi db_sigq;      /* blobs waiting for their near-duplicate signature */
	bool has_sigq;        /* false when a read-only store from before it has none */
	struct gfilter *gf;   /* the page filter */
	struct pack_set *packs; /* page bytes (pack.h) */
	/* State of the blob layer (its zstd dictionaries: blob_dict.c),
	 * released by its part (blob_part.c). */
	void *blob_priv;
	uint32_t format;      /* as opened: 1 or 2 (PD_FORMAT_VERSION) */
	uint64_t generation;
	uint64_t mapsize;

	/* Readers hold this shared; growing the map takes it exclusively.
	 * LMDB's figures read from its meta pages in the map (mdb_env_info,
	 * mdb_env_stat) are read with it held too: a resize unmaps them.
	 * Outside a transaction store_env_info takes it; inside one, the
	 * transaction's hold covers the read. */
	pthread_rwlock_t map_lock;

	/* Group commit. */
	pthread_mutex_t gc_mu;
	pthread_cond_t gc_cv;
	bool gc_leader;
	pthread_t gc_leader_thread; /* valid while gc_leader */
	struct store_wreq *gc_head, **gc_tail;

	/* Totals as of the last commit (guarded by gc_mu for writers). */
	struct pd_counters counters;

	/* Background sync of LMDB when commits are not durable. */
	pthread_t sync_thread;
	bool sync_running;
	pthread_mutex_t sync_mu;
	pthread_cond_t sync_cv;
	bool sync_stop;
	bool sync_kick; /* a checkpoint wanted now (store_ckpt_watch) */

	/* Dead pack records whose commit is not durable yet: punched once a
	 * sync has made it so (store_commit.c, "Punched once durable"). */
	pthread_mutex_t punch_mu;
	struct pack_loc *punch_wait;
	size_t n_punch_wait, cap_punch_wait;
	uint64_t punched;            /* records punched after their sync (punch_mu) */
	pthread_mutex_t sync_run_mu; /* one sync with its punches at a time */

	/* The last checkpoint (store_ckpt.c): meta/ckpt, data.mdb read-only,
	 * the next slot's sequence, and the read transaction that keeps the
	 * checkpoint's pages from reuse (under sync_run_mu). */
	int ckpt_fd, ckpt_data_fd;
	uint32_t ckpt_psize;
	uint64_t ckpt_seq;
	MDB_txn *ckpt_pin;
	uint64_t ckpt_top; /* LMDB's last page at the capture (atomic) */

	/* The filter's split thread (store_filter.c). */
	pthread_t split_thread;
	bool split_running, split_stop, split_kick;
	pthread_mutex_t split_mu;
	pthread_cond_t split_cv;
	uint64_t split_chunks;       /* split steps committed (under split_mu) */
	uint64_t split_chunk_max_ns; /* the longest chunk callback: what a seal may wait */

	/* The read transaction that lived through the most commits since the
	 * open (store_read_end_in), under reader_mu. */
	pthread_mutex_t reader_mu;
	uint64_t reader_max_commits;
	const char *reader_max_in;

	/* The parts (store_part), in order. */
	const struct store_part *parts[STORE_MAX_PARTS];
	unsigned n_parts;
	/* Kept here for the parts, which own them: the callbacks blob
	 * storage calls on added and released blobs (blob_listen), the
	 * signer's queue and thread (near/sigq.c; NULL when read-only), the
	 * live-inode table (archive/openfile.c; NULL when read-only). */
	const struct blob_listener *blob_listeners[STORE_MAX_PARTS];
	unsigned n_blob_listeners;
	struct sigq *sigq;
	struct live_table *live;
	uint64_t staging_seq;
	uint64_t mem_staged;  /* bytes of pages held in memory: being written, or decoded for open files */
	uint64_t commits;     /* batches committed (leader only) */
	uint64_t later_queued; /* store_write_later requests not yet done (atomic) */
	/* Called by a batch's leader once the batch, which held requests of
	 * store_write_later, is over and no lock of the store's is held: what
	 * their done hooks, which run under the queue's lock, left to do
	 * (archive/seal_later.c: the signer hears of the new blobs). The
	 * sync thread calls it too, every sync_ms, for what a leader could not
	 * finish. Set by a part's start, NULL: none. */
	void (*after_later)(struct store *st);
	/* The next inode number, kept in memory once a writable open read it
	 * (next_ino_ready), so that one may be given before the commit that
	 * records it (wtx_next_ino, ns_later.c); LMDB's "next_ino" row holds
	 * at least every number a commit used, plus one. */
	uint64_t next_ino;
	bool next_ino_ready;
	struct store_journal *journal; /* store_journal.c; NULL when read-only */
	struct seal_later *seal_later; /* seals waiting for a commit (archive/seal_later.c; NULL when read-only) */
	struct ns_later *ns_later; /* creates waiting for a commit (archive/ns_later.c; NULL when read-only) */
	uint64_t lmdb_pages_at_open; /* LMDB's last page when the open had made its writes */
	uint64_t lmdb_primed; /* LMDB's file primed up to here (store_reserve_lmdb_space) */
	bool unlinks_failed;  /* a blob file outlived its record (atomic) */
	bool closing;         /* store_close has begun (atomic): store_closing */
	void *blob_compact;   /* the compactor's thread (blob_compactor.c; blob_part) */
	/* A page's path, the order in which the idle pass's window takes a
	 * pack's pages (blob_compact_cfg.page_key, ctx the store): set at the
	 * open by the archive, which knows the names; NULL: the packs' order. */
	int (*page_key)(void *ctx, const struct blobkey *k, char *buf, size_t size);
	uint64_t nursery_bypassed; /* seals that found the nursery full (atomic) */
	uint64_t objdirs[4096 / 64]; /* objects/ subdirectories known to exist */
};

/* A write transaction as a callback sees it. */
struct wtx {
	struct store *st;
	MDB_txn *txn;
	struct pd_counters delta; /* this callback's changes to the totals */
	/* Files to remove after the commit succeeds (relative to the store). */
	char **unlink_after;
	size_t n_unlink, cap_unlink;
	/* Pack records to give back to the filesystem after the commit. */
	struct pack_loc *punch_after;
	size_t n_punch, cap_punch;
	struct pd_time now;
};

typedef int (*store_write_fn)(struct wtx *w, void *arg);

/* Make a new store in dir (created 0700 if missing; must be empty) with
 * the given parts (a NULL-terminated list, at most STORE_MAX_PARTS). */
int store_mkfs(const char *dir, const struct store_params *p, const struct store_part *const *parts,
	       char err[PD_ERRLEN]);
/* A store whose last run lost its page cache with commits not yet whole
 * on disk (a power cut) put back at its last checkpoint (store_ckpt.c):
 * 1 when it was (what happened said on stderr); 0 when nothing was to
 * do; or -errno with a message in err. It takes the store's lock for the
 * while, and does nothing when another process holds it. store_open does
 * it; what opens LMDB by itself (fsck, the LMDB rewrite) calls it first,
 * before its own lock. */
int store_ckpt_recover(const char *dir, char err[PD_ERRLEN]);
/* Open a store with its parts. -ENOENT/-EINVAL/-EPROTO/-EBUSY with a
 * message in err. */
int store_open(const char *dir, const struct store_opts *o, const struct store_part *const *parts,
	       struct store **out, char err[PD_ERRLEN]);
/* Which version of pagededup made the store and which last opened it for
 * writing (base/version.h), as the meta keys "made_by" and "written_by"
 * hold them (the version's text, at most 31 bytes; written by mkfs and by
 * every writable open). A store made before they were recorded has
 * neither: "" then. Readers of any version ignore keys they do not know,
 * so the records change nothing for older code. */
#define STORE_META_MADE_BY "made_by"
#define STORE_META_WRITTEN_BY "written_by"
#define STORE_VERSION_LEN 32
int store_versions(struct store *st, char made_by[STORE_VERSION_LEN], char written_by[STORE_VERSION_LEN]);
/* Close: persist the filter, mark the store clean, release the lock. */
int store_close(struct store *st);
/* Mark unclean and close without saving the filter (tests: a simulated crash). */
void store_abandon(struct store *st);

/* Run fn in a write transaction (group commit). Returns fn's result, or the
 * commit's error. */
int store_write(struct store *st, store_write_fn fn, void *arg);
/* Queue fn for the next batch any writer commits, without a commit of its
 * own and without waiting: a change that may wait for the next write, as
 * a new file's create waits for its close() to commit with its page
 * (archive/ns_later.c). fn runs before every request queued after it, and
 * done(arg, rc) (0: committed) runs in the leader before any request of
 * its batch returns, so that a caller whose write committed with it finds
 * it done. A store_settle, the sync thread (every sync_ms) and the close
 * commit what waits. Returns -ENOMEM or -EROFS, else 0 (fn's own failure
 * goes to done). */
int store_write_later(struct store *st, store_write_fn fn, void (*done)(void *arg, int rc), void *arg);
/* The journal (store_journal.c). A request of store_write_later that
 * stands for something a caller was told is done (a close() that
 * returned) is lost if the daemon dies before its batch commits. Its
 * caller appends what is needed to do it again to the journal, and the
 * next writable open gives those entries, in their order, to whoever
 * does them again (store_journal_replay), before anything else writes.
 * store_journal_append appends data (n_data pieces, at most 4) and, with the journal's
 * lock still held, calls then(st, seq, ctx), which queues the request
 * (store_write_later), so that the entries' order is the queue's: a
 * failure of then() takes the entry back, and is returned. The request's
 * callback records its seq in the transaction (wtx_journal_applied) and
 * its done hook tells the journal once committed (store_journal_done);
 * the files start again once every entry in them committed. Entries that
 * a crash left are given to fn(st, seq, data, len, ctx), which commits
 * each with wtx_journal_applied; an entry after a gap (a power cut kept
 * a later entry but not an earlier one) is counted in *dropped. */
int store_journal_append(struct store *st, const struct iovec *data, int n_data,
			 int (*then)(struct store *st, uint64_t seq, void *ctx), void *ctx);
int wtx_journal_applied(struct wtx *w, uint64_t seq);
void store_journal_done(struct store *st, uint64_t seq);
int store_journal_replay(struct store *st, int (*fn)(struct store *st, uint64_t seq, const void *data, size_t len, void *ctx),
			 void *ctx, uint64_t *replayed, uint64_t *dropped);
/* The meta row that holds the last entry committed (u64), and the
 * entries after seq `applied` the journal of the store in dirfd holds
 * (fsck, which opens LMDB by itself: the next writable open seals them). */
#define STORE_JOURNAL_META_KEY "journal_seq"
int store_journal_count(int dirfd, uint64_t applied, uint64_t *n);
/* An inode number given by a store before a crash, used again by what
 * the journal does again: the next number given is past it. */
void store_ino_used(struct store *st, uint64_t ino);
/* Commit every request store_write_later queued before this call (none:
 * returns at once). Being a store_write, never from inside a callback. */
int store_settle(struct store *st);
/* A conversion of rows in batches keyed by a blob key, one write
 * transaction a batch: step converts the batch that starts at `next`,
 * moves `next` to where the following one starts, and sets *finished with
 * the last. A batch run again (the map grown: its writes were rolled back)
 * starts where it started, so a step must count into ctx only from its
 * own start; committed (may be NULL) hears of each batch committed. */
typedef int (*store_batch_step)(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], void *ctx,
				bool *finished);
int store_write_batches(struct store *st, store_batch_step step, void (*committed)(void *ctx), void *ctx);
/* The end of a batch's walk of a table keyed by blob keys (`more`: rows
 * are left, the cursor at the first of them, its key in *key): `next` that
 * key (a key of another size cannot be gone on from: -EUCLEAN); none left:
 * the walk's last result mrc (MDB_NOTFOUND: 0). */
int store_batch_next(uint8_t next[BLOBKEY_BYTES], bool more, const MDB_val *key, int mrc);

/* A version kept in meta under `key` (4 bytes, little-endian): what a
 * conversion or a layout has reached. Absent: `absent`; a damaged value
 * reads as 0 (no version this build knows). */
int store_meta_version_get(MDB_txn *txn, struct store *st, const char *key, uint32_t absent, uint32_t *version);
int store_meta_version_put(MDB_txn *txn, struct store *st, const char *key, uint32_t version);
/* The version row gone (absent again; none there is no error). */
int store_meta_version_del(MDB_txn *txn, struct store *st, const char *key);

/* LMDB's environment figures (mdb_env_info, and mdb_env_stat when ms is
 * given) for a caller outside any transaction: LMDB reads them from its
 * meta pages in the map, which a resize unmaps, so they are read under
 * map_lock. Not for a caller inside a transaction (map_lock is held then,
 * and a second read lock waits behind a waiting resize). */
int store_env_info(struct store *st, MDB_envinfo *info, MDB_stat *ms);

/* Read transactions. A reader keeps every LMDB page freed after its
 * snapshot from reuse, so the end of each one counts the commits that
 * happened under it, and the longest such reader since the open is kept
 * with the function that ended it (stats shows both). */
int store_read_begin(struct store *st, MDB_txn **txn);
void store_read_end_in(struct store *st, MDB_txn *txn, const char *where);
#define store_read_end(st, txn) store_read_end_in((st), (txn), __func__)
/* A long walk's fresh snapshot: *txn, begun by store_read_begin, is ended
 * as by store_read_end and the same handle renewed (mdb_txn_reset and
 * mdb_txn_renew: its reader slot and memory kept), with the map lock let
 * go in between so that a growth of the map can proceed. 0 with *txn
 * reading the newest commit; an error with *txn NULL, nothing held. */
int store_read_renew_in(struct store *st, MDB_txn **txn, const char *where);
#define store_read_renew(st, txn) store_read_renew_in((st), (txn), __func__)

/* Make everything committed so far durable (fsync of LMDB), then give
 * back the blocks of the records those commits left dead. */
int store_sync(struct store *st);
/* The dead records that wait for their commit to be durable, punched now
 * (a sync first): a write that found the disk full tries again if this
 * gave anything back. Returns how many records were punched, or a
 * negative errno (the sync failed: they wait on). */
int store_punch_waiting(struct store *st);

/* Whether background work (the delta step) may write now: the store's
 * file system has twice LMDB's reserve free (store_commit.c: the pages a
 * delete's commit takes on a full disk) and a batch of records more
 * (store_opts.background_room).
 * Below that, the room is left to what users ask: the step's appends and
 * commits would otherwise take the pages a delete needs, and the deletes
 * that make room on a full disk would fail with ENOSPC. */
bool store_room_for_background(struct store *st);

/* After commit, remove the file at path (relative to the store dir). */
int wtx_unlink_after(struct wtx *w, const char *relpath);
/* Forget a pending removal of relpath (it was re-created in this batch). */
void wtx_keep(struct wtx *w, const char *relpath);
/* After commit, free the disk blocks of the pack record at loc (its last
 * reference went): pack_punch, once the commit is durable. */
int wtx_punch_after(struct wtx *w, const struct pack_loc *loc);
/* The same for a record a commit already made has left dead. */
void store_punch_when_durable(struct store *st, const struct pack_loc *loc);

/* Allocate the next inode number. */
int wtx_next_ino(struct wtx *w, uint64_t *ino);
/* An inode number given before the transaction that records it
 * (store->next_ino_ready; -EROFS otherwise), and the record of one so
 * given, in the transaction that writes its inode. */
int store_take_ino(struct store *st, uint64_t *ino);
int wtx_note_ino(struct wtx *w, uint64_t ino);

/* Exact-count callbacks for the filter over the `saturated` table of txn
 * (ctx: the struct wtx). Keys are GF_EXACT_INDEX(leaf, counter). */
extern const struct cbf_exact_ops store_saturated_ops;

/* store_filter.c: the page filter's life in the store. */
/* The filter parameters a store's parameters ask for. */
void store_filter_config(const struct store_params *p, struct gf_config *c);
/* The tree record of the store (or, for a store of the fixed filter that
 * has none, a tree of its one filter file; *legacy then). */
int store_filter_tree_read(MDB_txn *txn, MDB_dbi meta, const char *dir,
			   const struct store_params *p, struct gf_tree *t, bool *legacy);
int store_filter_tree_put(MDB_txn *txn, MDB_dbi meta, const struct gf_tree *t);
/* Open the filter (rebuilt from the stored positions unless the store was
 * closed cleanly with every leaf of its generation). */
int store_filter_load(struct store *st, bool clean, uint64_t gen);
/* Write the tree record (with the leaves' key counts) in w's transaction. */
int store_filter_save(struct wtx *w);
/* One chunk of split work as one write: *idle when none was wanted. */
int store_filter_step(struct store *st, bool *idle);
/* Run split steps until no split is wanted. */
int store_filter_settle(struct store *st);
void store_filter_thread_start(struct store *st);
void store_filter_thread_stop(struct store *st);
void store_filter_kick(struct store *st);

/* LMDB result to a negative errno. */
int pd_mdb_err(int rc);

/* Counters: a snapshot of the committed totals. */
void store_counters(struct store *st, struct pd_counters *out);
/* Whether store_close has begun: background work that can stop anywhere
 * (the compactor's passes) stops, rather than hold up the parts' stops. */
bool store_closing(struct store *st);
/* Histogram bucket of a refcount (>= 1). */
unsigned pd_hist_bucket(uint64_t refcount);

/* Key of an inode-keyed table (u64 big-endian). */
static inline MDB_val store_ino_key(uint8_t kb[8], uint64_t ino)
{
	put_be64(kb, ino);
	return (MDB_val){ 8, kb };
}

/* Key of a meta row named by a 4-byte tag and a u32 id (big-endian, so
 * that a tag's rows sort by id): "pack", "dict", "cold". */
static inline MDB_val store_meta_id_key(uint8_t kb[8], const char tag[4], uint32_t id)
{
	memcpy(kb, tag, 4);
	kb[4] = (uint8_t)(id >> 24);
	kb[5] = (uint8_t)(id >> 16);
	kb[6] = (uint8_t)(id >> 8);
	kb[7] = (uint8_t)id;
	return (MDB_val){ 8, kb };
}

/* Does st write fingerprint rows in layout 2 (rec.h)? From format 6 on. */
static inline bool store_fp_row2(const struct store *st)
{
	return st->format >= PD_FORMAT_FP_ROW2;
}

/* ---- fingerprint rows of layout 1 converted (store_fprow.c) ----
 * In a store of format 6, rows of layout 1 (written before) are rewritten
 * in layout 2; the meta row "fp_layout" (4 bytes little-endian, 2) says
 * that none is left. */
#define STORE_FP_LAYOUT 2
/* Rewrite in layout 2 up to `batch` rows of layout 1 from the key *next
 * on (all zero: the first), inside a write transaction; *next gets the
 * key to go on from, and after the last row "fp_layout" is recorded and
 * *finished set. *converted (may be NULL) counts the rows rewritten. A
 * row that does not decode is left for fsck. -EINVAL on a store that
 * does not write layout 2 (store_fp_row2). */
int store_fp_rows_convert(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch,
			  uint64_t *converted, bool *finished);
/* Forget "fp_layout", so that the next writable open walks every row
 * again (fsck's repair, which found rows of layout 1). */
int store_fp_rows_again(MDB_txn *txn, struct store *st);
/* Has the store no row of layout 1 left ("fp_layout" recorded)? */
int store_fp_rows_done(MDB_txn *txn, struct store *st, bool *done);
/* A store opened writable, of format 6, brought to no layout 1 row: a
 * batch of STORE_FP_CONVERT_BATCH rows a transaction (an interrupted
 * conversion goes on at the next open); nothing when "fp_layout" says so. */
#define STORE_FP_CONVERT_BATCH 2000
int store_fp_rows_upgrade(struct store *st);

/* ---- the inodes of a blob (store_blobino.c) ----------------------------
 * From format 7 on (store_ino_in_row) a blob of one inode keeps it in its
 * fingerprint row (fprec.ino), a blob of two or more in `blob_inodes`
 * (blobkey -> ino u64 BE, dup-sorted), and none in both places: the
 * second inode moves the first into the table, and when one is left it
 * moves back into the row (so a blob of one file costs no table row
 * however it got there). Before format 7, and in a store of layout 1
 * rows, every inode is in the table. */
static inline bool store_ino_in_row(const struct store *st)
{
	return st->format >= PD_FORMAT_INO_IN_ROW;
}
/* Every inode on blob k: fn(ctx, ino) for its row's inode, then for its
 * table rows. r: k's record when the caller has it (NULL: read here; a
 * blob with no decodable record has only its table rows). fn returning
 * non-zero stops the walk, which returns that value. */
typedef int (*store_ino_fn)(void *ctx, uint64_t ino);
int store_blob_inodes(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct fprec *r,
		      store_ino_fn fn, void *ctx);
/* ino joins blob k, whose record r (refcount not yet raised) the caller
 * writes after: into r itself for a new blob (refcount 0) of a store of
 * format 7, else into the table, with the inode r held, if any. */
int store_blob_ino_add(MDB_txn *txn, struct store *st, const struct blobkey *k, struct fprec *r, uint64_t ino);
/* ino leaves blob k (record r, refcount not yet lowered; the caller
 * writes r after, or deletes it): -ENOENT when k does not list it. The
 * one inode left, if one is, moves into r (format 7). */
int store_blob_ino_del(MDB_txn *txn, struct store *st, const struct blobkey *k, struct fprec *r, uint64_t ino);
/* The conversion to format 7's form, as store_fp_rows_* do for layout 2:
 * up to `batch` blobs of `blob_inodes` from key *next on (all zero: the
 * first), each put in its form (one inode: in its row, its table row
 * removed; more: all in the table, none in its row); *next gets the key
 * to go on from; after the last the meta row "ino_layout" (4 bytes LE,
 * STORE_INO_LAYOUT) is recorded and *finished set. *converted (may be
 * NULL) counts the blobs changed. A blob without a decodable record is
 * left for fsck. -EINVAL on a store before format 7. */
#define STORE_INO_LAYOUT 1
#define STORE_INO_CONVERT_BATCH 2000
int store_blob_inodes_convert(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch,
			      uint64_t *converted, bool *finished);
/* Forget "ino_layout" (fsck's repair: the next writable open walks again). */
int store_blob_inodes_again(MDB_txn *txn, struct store *st);
/* Is "ino_layout" recorded (no blob of one inode left in the table)? */
int store_blob_inodes_done(MDB_txn *txn, struct store *st, bool *done);
/* A writable open of a store of format 7: the conversion run to its end,
 * a batch a transaction, unless "ino_layout" says it is done. *converted
 * (may be NULL): blobs changed. */
int store_blob_inodes_upgrade(struct store *st, uint64_t *converted);

/* Current time; comparison (<0, 0, >0). */
struct pd_time pd_now(void);
int pd_time_cmp(struct pd_time a, struct pd_time b);

/* Rewrites LMDB's file without its free pages, crash-safely, on a store
 * no process has open (store_lmdb.c says how). *before / *after: the
 * file's allocated bytes. -EBUSY when the store is open elsewhere, else a
 * negative errno with a message in err; the old file is then untouched. */
int store_lmdb_compact(const char *dir, uint64_t *before, uint64_t *after, char err[PD_ERRLEN]);
/* The pages on LMDB's freelist as txn sees it: in the file, reusable by
 * later commits, given back to the disk only by store_lmdb_compact.
 * *pinned (may be NULL): those freed by transaction pinned_from or later,
 * which no commit may take while a reader of pinned_from lives. */
int store_lmdb_free_pages(MDB_txn *txn, uint64_t pinned_from, uint64_t *pages, uint64_t *pinned);
/* LMDB's reader table, of every process that has the store open: the
 * transactions running and the oldest one's snapshot, against the last
 * commit. A reader that stays open keeps every page freed after its
 * snapshot from reuse, so LMDB's file grows (mdb_stat -r shows the same). */
struct store_lmdb_readers {
	unsigned active;       /* read transactions running */
	uint64_t oldest_txnid; /* the oldest one's snapshot, 0 with none */
	uint64_t last_txnid;   /* the last commit */
};
int store_lmdb_readers(MDB_env *env, struct store_lmdb_readers *r);

#endif
