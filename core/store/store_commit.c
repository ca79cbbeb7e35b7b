/* store_commit.c - transactions: group commit (store_write), read
 * transactions beside a growing map, the removals that follow a commit, and
 * the space kept for LMDB on a full disk. See store.h for the contract. */
#include "store_int.h"
#include "base/fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- space for LMDB on a full disk -------------------------------------
 *
 * A commit needs fresh pages even to delete (copy-on-write), so on a full
 * disk a user could not free space by removing pages. The data file is
 * kept allocated a reserve past its last used page; when the disk fills,
 * those pages still let commits, deletes first, go through.
 *
 * What a delete takes (tests/bench/bench-lmdb-reserve.sh; tests/bench/
 * README.md, "LMDB's reserve"): in a store of 50,000 small pages compacted
 * by mdb_copy -c, so that no page is free, one unlink took 85 pages
 * (340 KiB) past the pages it frees, since a commit copies the path to
 * every row it changes (inode, dirent, link, fingerprint, blob_inodes, the
 * simhash tables, the set and its 16 band rows); a directory of 1,000 files removed one by one
 * 90 pages (freed pages are used again two commits later); 8 rm -r at
 * once, whose unlinks share commits and whose lookups hold back freed
 * pages, 385 to 3,653 pages (1.5 to 14.6 MiB) in two runs; 16 at once
 * 2,585 (10 MiB). So a commit that finds the disk full is not retried whole:
 * its requests run one by one (run_each), and a delete asks the reserve
 * for its own pages only. The paths grow with the log of the store: the
 * reserve is LMDB_RESERVE_MIN (12 single deletes), or LMDB_RESERVE_SHARE
 * of the pages in use when that is more, up to LMDB_RESERVE_MAX (what a
 * store of about 10^6 pages gets, and what every store kept before). */
#define LMDB_RESERVE_MIN (4ull << 20)
#define LMDB_RESERVE_SHARE 64
#define LMDB_RESERVE_MAX (16ull << 20)

uint64_t store_lmdb_reserve(uint64_t used)
{
	uint64_t r = used / LMDB_RESERVE_SHARE;
	return r < LMDB_RESERVE_MIN ? LMDB_RESERVE_MIN : r > LMDB_RESERVE_MAX ? LMDB_RESERVE_MAX : r;
}

/* The reserve's pages read into the page cache a page at a time, through a
 * descriptor of their own advised random (its reads bring no more than
 * they ask, in folios of one page). A commit then writes its new pages
 * into pages of their own: a 4 KiB pwrite() into a large folio walks every
 * block of the folio (ext4_block_write_begin), and a commit writing a run
 * of new pages would otherwise have the kernel make one (with the map
 * advised random, 94% of the cached pages of a store of 10^5 pages still
 * sat in folios of 2 to 64 pages; tests/bench/README.md, "LMDB's map and
 * large folios"). Best effort: a
 * read that fails leaves the rest to the writes. */
static void prime_pages(int lmdb_fd, uint64_t from, uint64_t to, size_t psize)
{
	char self[64];
	char page[65536];
	if (psize > sizeof page)
		return;
	snprintf(self, sizeof self, "/proc/self/fd/%d", lmdb_fd);
	int fd = open(self, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (!posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM))
		for (uint64_t off = from / psize * psize; off < to; off += psize)
			if (pread(fd, page, psize, (off_t)off) <= 0)
				break;
	close(fd);
}

/* mdb_env_info, and mdb_env_stat when ms is given, read with map_lock
 * held shared: LMDB reads these from its meta pages in the map, which a
 * resize unmaps (grow_map; a delta step's thread that read them unlocked
 * while the leader grew the map faulted at 3.4 million pages of a scale
 * run). Never called with map_lock held: the lock prefers writers, so a
 * second shared hold would wait behind a waiting resize (run_batch reads
 * the figures for a failed commit after letting it go). */
int store_env_info(struct store *st, MDB_envinfo *info, MDB_stat *ms)
{
	pthread_rwlock_rdlock(&st->map_lock);
	int rc = mdb_env_info(st->env, info);
	if (!rc && ms)
		rc = mdb_env_stat(st->env, ms);
	pthread_rwlock_unlock(&st->map_lock);
	return rc ? pd_mdb_err(rc) : 0;
}

/* The bytes of LMDB's file up to its last used page, its page size and
 * map size; false if LMDB cannot say. */
static bool lmdb_used(struct store *st, uint64_t *used, size_t *psize, uint64_t *mapsize)
{
	MDB_envinfo info;
	MDB_stat ms;
	if (store_env_info(st, &info, &ms))
		return false;
	*used = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
	*psize = ms.ms_psize;
	*mapsize = info.me_mapsize;
	return true;
}

void store_reserve_lmdb_space(struct store *st)
{
	int fd;
	struct stat sb;
	uint64_t used, mapsize;
	size_t psize;
	if (st->readonly || !lmdb_used(st, &used, &psize, &mapsize) || mdb_env_get_fd(st->env, &fd) || fstat(fd, &sb))
		return;
	uint64_t reserve = store_lmdb_reserve(used);
	uint64_t want = used + reserve;
	if (want > mapsize)
		want = mapsize;
	uint64_t size = (uint64_t)sb.st_size;
	/* Best effort: on a disk already full there is nothing more to take. */
	if (size < used + reserve / 2 && size < want && !posix_fallocate(fd, 0, (off_t)want))
		size = want;
	if (st->lmdb_primed < used)
		st->lmdb_primed = used;
	if (st->lmdb_primed < size) {
		prime_pages(fd, st->lmdb_primed, size, psize);
		st->lmdb_primed = size;
	}
}

/* Past the room LMDB's reserve is kept for, what background writers leave
 * free for the requests of users: a batch of the delta step's records. */
#define BACKGROUND_ROOM (8ull << 20)

/* The reserve LMDB's file is given now (store_lmdb_reserve of its pages
 * in use), and the bytes free on the store's file system; false if either
 * is unknown. */
static bool reserve_and_free(struct store *st, uint64_t *reserve, uint64_t *free_bytes)
{
	uint64_t used, mapsize;
	size_t psize;
	if (fd_free_bytes(st->dirfd, NULL, free_bytes) || !lmdb_used(st, &used, &psize, &mapsize))
		return false;
	*reserve = store_lmdb_reserve(used);
	return true;
}

bool store_room_for_background(struct store *st)
{
	uint64_t reserve, free_bytes;
	if (st->readonly)
		return true;
	if (!reserve_and_free(st, &reserve, &free_bytes))
		return true; /* unknown: as before; a write that finds the disk full fails as any other */
	uint64_t room = st->opts.background_room ? st->opts.background_room : BACKGROUND_ROOM;
	return free_bytes >= 2 * reserve + room;
}

/* A commit that failed with EIO: is the disk full? LMDB reports a short
 * write of its pages as EIO (mdb_page_flush: "short write, filesystem
 * full?"); with less than the reserve free on the disk, that is the disk
 * full, and a full disk is ENOSPC wherever it shows (run_batch then runs
 * the requests one by one, each on the reserve). map_lock not held. */
static bool commit_found_disk_full(struct store *st)
{
	uint64_t reserve, free_bytes;
	return reserve_and_free(st, &reserve, &free_bytes) && free_bytes < reserve;
}

/* ---- transactions ---------------------------------------------------- */

static int grow_map(struct store *st)
{
	pthread_rwlock_wrlock(&st->map_lock);
	uint64_t want = st->mapsize * 2;
	int rc = pd_mdb_err(mdb_env_set_mapsize(st->env, want));
	if (!rc)
		st->mapsize = want;
	pthread_rwlock_unlock(&st->map_lock);
	store_reserve_lmdb_space(st); /* takes map_lock to read */
	return rc;
}

int store_read_begin(struct store *st, MDB_txn **txn)
{
	for (;;) {
		pthread_rwlock_rdlock(&st->map_lock);
		int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn);
		if (rc == 0)
			return 0;
		pthread_rwlock_unlock(&st->map_lock);
		if (rc != MDB_MAP_RESIZED)
			return pd_mdb_err(rc);
		/* Another process grew the map: adopt its size. */
		pthread_rwlock_wrlock(&st->map_lock);
		rc = mdb_env_set_mapsize(st->env, 0);
		pthread_rwlock_unlock(&st->map_lock);
		if (rc)
			return pd_mdb_err(rc);
	}
}

/* The commits made while txn read: a new longest is kept with where. */
static void note_reader(struct store *st, MDB_txn *txn, const char *where)
{
	MDB_envinfo info;
	if (mdb_env_info(st->env, &info))
		return;
	uint64_t commits = info.me_last_txnid - mdb_txn_id(txn);
	if (commits <= __atomic_load_n(&st->reader_max_commits, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&st->reader_mu);
	if (commits > st->reader_max_commits) {
		__atomic_store_n(&st->reader_max_commits, commits, __ATOMIC_RELAXED);
		st->reader_max_in = where;
	}
	pthread_mutex_unlock(&st->reader_mu);
}

void store_read_end_in(struct store *st, MDB_txn *txn, const char *where)
{
	note_reader(st, txn, where);
	mdb_txn_abort(txn);
	pthread_rwlock_unlock(&st->map_lock);
}

int store_read_renew_in(struct store *st, MDB_txn **txn, const char *where)
{
	note_reader(st, *txn, where);
	mdb_txn_reset(*txn);
	pthread_rwlock_unlock(&st->map_lock);
	pthread_rwlock_rdlock(&st->map_lock);
	if (mdb_txn_renew(*txn) == 0)
		return 0;
	/* The map was grown by another process (MDB_MAP_RESIZED), or the
	 * renewal failed: a new transaction, as a first begin takes it. */
	mdb_txn_abort(*txn);
	pthread_rwlock_unlock(&st->map_lock);
	int rc = store_read_begin(st, txn);
	if (rc)
		*txn = NULL;
	return rc;
}

int wtx_unlink_after(struct wtx *w, const char *relpath)
{
	if (w->n_unlink == w->cap_unlink) {
		size_t cap = w->cap_unlink ? 2 * w->cap_unlink : 16;
		char **v = realloc(w->unlink_after, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		w->unlink_after = v;
		w->cap_unlink = cap;
	}
	if (!(w->unlink_after[w->n_unlink] = strdup(relpath)))
		return -ENOMEM;
	w->n_unlink++;
	return 0;
}

void wtx_keep(struct wtx *w, const char *relpath)
{
	for (size_t i = 0; i < w->n_unlink; i++)
		if (w->unlink_after[i] && strcmp(w->unlink_after[i], relpath) == 0) {
			free(w->unlink_after[i]);
			w->unlink_after[i] = NULL;
		}
}

static void unlinks_truncate(struct wtx *w, size_t n)
{
	while (w->n_unlink > n)
		free(w->unlink_after[--w->n_unlink]);
	w->n_punch = 0;
}

static int loc_cmp(const void *a, const void *b)
{
	const struct pack_loc *x = a, *y = b;
	if (x->pack != y->pack)
		return x->pack < y->pack ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Punch the dead records v[0..n), those side by side (apart by alignment
 * padding at most) as one extent: a block two small records share is
 * given back only by a punch that covers both. */
static void punch_dead(struct store *st, struct pack_loc *v, size_t n)
{
	if (n > 1)
		qsort(v, n, sizeof *v, loc_cmp);
	for (size_t i = 0; i < n;) {
		struct pack_loc run = v[i++];
		while (i < n && v[i].pack == run.pack && v[i].off < run.off + run.len + PACK_ALIGN) {
			if (v[i].off + v[i].len > run.off + run.len)
				run.len = v[i].off + v[i].len - run.off;
			i++;
		}
		pack_punch(st->packs, &run);
	}
}

/* ---- Punched once durable ---------------------------------------------
 *
 * A record left dead by a commit (a delta step's move out of the nursery,
 * a page's last reference gone) is punched only once that commit is on
 * disk. Commits are not synced by default (MDB_NOSYNC, store.c): after a
 * power cut LMDB may come back at an older commit, which still names the
 * record. Punched at once, its blocks would be free on disk, and another
 * file's data (the next pack records, synced before their own commit)
 * could land on them: the old commit would then read other bytes, and a
 * page written long before the cut would read EIO. So the punches wait
 * for the sync thread's next sync (at most sync_ms), for store_sync, or
 * for the close; with -o sync_blobs every commit is durable and they run
 * at once. As ext4 does with blocks its journal has not freed yet, a write
 * that finds the disk full has the waiting punches run (store_punch_waiting)
 * and tries again. At most PUNCH_WAIT_MAX wait; past it a dead record's
 * bytes are left to the compactor, as after a failed punch. */
#define PUNCH_WAIT_MAX ((size_t)1 << 20)

static bool commits_durable(const struct store *st)
{
	return st->opts.sync_blobs;
}

static void punches_add(struct store *st, const struct pack_loc *v, size_t n)
{
	pthread_mutex_lock(&st->punch_mu);
	size_t want = st->n_punch_wait + n;
	if (want > PUNCH_WAIT_MAX)
		want = PUNCH_WAIT_MAX;
	if (want > st->cap_punch_wait) {
		size_t cap = st->cap_punch_wait ? st->cap_punch_wait : 64;
		while (cap < want)
			cap *= 2;
		struct pack_loc *nv = realloc(st->punch_wait, cap * sizeof *nv);
		if (nv) {
			st->punch_wait = nv;
			st->cap_punch_wait = cap;
		}
	}
	size_t room = st->cap_punch_wait - st->n_punch_wait;
	size_t take = n < room ? n : room; /* the rest: dead bytes for the compactor */
	if (take) {
		memcpy(st->punch_wait + st->n_punch_wait, v, take * sizeof *v);
		st->n_punch_wait += take;
	}
	pthread_mutex_unlock(&st->punch_mu);
}

/* The dead records v[0..n) punched now if their commit is durable, else
 * put on the list for the next sync. */
static void punch_or_wait(struct store *st, struct pack_loc *v, size_t n)
{
	if (commits_durable(st))
		punch_dead(st, v, n);
	else if (n)
		punches_add(st, v, n);
}

void store_punch_when_durable(struct store *st, const struct pack_loc *loc)
{
	struct pack_loc one = *loc;
	punch_or_wait(st, &one, 1);
}

struct store_punches store_punches_take(struct store *st)
{
	pthread_mutex_lock(&st->punch_mu);
	struct store_punches p = { st->punch_wait, st->n_punch_wait };
	st->punch_wait = NULL;
	st->n_punch_wait = st->cap_punch_wait = 0;
	pthread_mutex_unlock(&st->punch_mu);
	return p;
}

void store_punches_settle(struct store *st, struct store_punches *p, bool synced)
{
	if (synced) {
		punch_dead(st, p->v, p->n);
		pthread_mutex_lock(&st->punch_mu);
		st->punched += p->n;
		pthread_mutex_unlock(&st->punch_mu);
	} else if (p->n) {
		punches_add(st, p->v, p->n); /* they wait for the next sync */
	}
	free(p->v);
	*p = (struct store_punches){ 0 };
}

int wtx_punch_after(struct wtx *w, const struct pack_loc *loc)
{
	if (w->n_punch == w->cap_punch) {
		size_t cap = w->cap_punch ? 2 * w->cap_punch : 16;
		struct pack_loc *v = realloc(w->punch_after, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		w->punch_after = v;
		w->cap_punch = cap;
	}
	w->punch_after[w->n_punch++] = *loc;
	return 0;
}

int wtx_next_ino(struct wtx *w, uint64_t *ino)
{
	if (w->st->next_ino_ready) {
		int rc = store_take_ino(w->st, ino);
		return rc ? rc : wtx_note_ino(w, *ino);
	}
	int rc = store_meta_get_u64(w->txn, w->st->db_meta, "next_ino", ino);
	if (!rc)
		rc = store_meta_put_u64(w->txn, w->st->db_meta, "next_ino", *ino + 1);
	return rc;
}

int store_take_ino(struct store *st, uint64_t *ino)
{
	if (!st->next_ino_ready)
		return -EROFS;
	*ino = __atomic_fetch_add(&st->next_ino, 1, __ATOMIC_RELAXED);
	return 0;
}

void store_ino_used(struct store *st, uint64_t ino)
{
	uint64_t cur = __atomic_load_n(&st->next_ino, __ATOMIC_RELAXED);
	while (cur <= ino && !__atomic_compare_exchange_n(&st->next_ino, &cur, ino + 1, false, __ATOMIC_RELAXED,
							  __ATOMIC_RELAXED))
		;
}

/* Numbers are taken in memory in one order and committed in another (a
 * create waiting for its close, a mkdir meanwhile): the row keeps the
 * highest. A number taken by a batch that was run again, or by a create
 * that never committed, is simply not used. */
int wtx_note_ino(struct wtx *w, uint64_t ino)
{
	uint64_t next;
	int rc = store_meta_get_u64(w->txn, w->st->db_meta, "next_ino", &next);
	if (!rc && next <= ino)
		rc = store_meta_put_u64(w->txn, w->st->db_meta, "next_ino", ino + 1);
	return rc;
}

static void run_unlinks(struct store *st, struct wtx *w)
{
	for (size_t i = 0; i < w->n_unlink; i++)
		if (w->unlink_after[i] && unlinkat(st->dirfd, w->unlink_after[i], 0) && errno != ENOENT)
			__atomic_store_n(&st->unlinks_failed, true, __ATOMIC_RELAXED);
}

/* One pass over the batch in one transaction. Returns 0 (committed), a
 * negative errno for the whole batch, PD_EMAPFULL, or 1: a request failed
 * (its rc is set and it is marked failed) and the rest must run again
 * without it, since its partial changes went with the aborted transaction.
 * *commit_eio: the commit itself failed with EIO (a short write). */
static int batch_pass(struct store *st, struct store_wreq *head, struct wtx *w, struct pd_counters *total,
		      bool *commit_eio)
{
	struct pd_counters batch = { 0 };
	MDB_txn *txn;
	int rc = pd_mdb_err(mdb_txn_begin(st->env, NULL, 0, &txn));
	if (rc)
		return rc;
	w->txn = txn;
	for (struct store_wreq *r = head; r && !rc; r = r->next) {
		if (r->failed)
			continue;
		memset(&w->delta, 0, sizeof w->delta);
		rc = r->fn(w, r->arg);
		if (rc && rc != PD_EMAPFULL) {
			r->rc = rc;
			r->failed = true;
			rc = 1;
		} else if (!rc) {
			store_counters_add(&batch, &w->delta);
		}
	}
	if (rc) {
		mdb_txn_abort(txn);
		return rc;
	}
	*total = st->counters; /* only the leader changes it */
	store_counters_add(total, &batch);
	rc = store_counters_put(txn, st->db_meta, total);
	if (rc) {
		mdb_txn_abort(txn);
		return rc;
	}
	int crc = mdb_txn_commit(txn);
	*commit_eio = crc == EIO;
	return crc ? pd_mdb_err(crc) : 0;
}

static void run_batch(struct store *st, struct store_wreq *head);

/* A batch whose commit found the disk full: each request in a transaction
 * of its own, so that what one request needs (a delete: 85 pages, the
 * reserve's measure above) is all a commit asks of the reserve, and a
 * request that fits is not failed by the others. */
static void run_each(struct store *st, struct store_wreq *head)
{
	for (struct store_wreq *r = head, *next; r; r = next) {
		next = r->next;
		if (r->failed)
			continue;
		r->next = NULL;
		run_batch(st, r);
		r->next = next;
	}
}

static bool several(const struct store_wreq *head)
{
	unsigned n = 0;
	for (const struct store_wreq *r = head; r && n < 2; r = r->next)
		n += !r->failed;
	return n > 1;
}

/* Run a batch of requests in one transaction: one commit for all. A map
 * that fills is grown and the batch run again; a full disk runs the
 * requests one by one. */
static void run_batch(struct store *st, struct store_wreq *head)
{
	struct wtx w = { .st = st };
	struct pd_counters total;
	int rc;
	bool checkpointed = false;
	for (;;) {
		bool commit_eio = false;
		w.now = pd_now();
		pthread_rwlock_rdlock(&st->map_lock);
		rc = batch_pass(st, head, &w, &total, &commit_eio);
		if (rc) {
			if (st->gf)
				gf_rollback(st->gf);
			unlinks_truncate(&w, 0);
		}
		pthread_rwlock_unlock(&st->map_lock);
		if (commit_eio && commit_found_disk_full(st))
			rc = -ENOSPC;
		if (rc == 1)
			continue;
		if (rc == PD_EMAPFULL && (rc = grow_map(st)) == 0)
			continue;
		/* A full disk: the last checkpoint's reader keeps the pages
		 * freed since it from reuse (store_ckpt.c), and the dead records
		 * wait for a sync. A checkpoint now gives both back, and the
		 * batch is tried once more. */
		if (rc == -ENOSPC && !checkpointed && st->ckpt_pin) {
			checkpointed = true;
			pthread_rwlock_rdlock(&st->map_lock); /* held, as inside a commit */
			int crc = store_checkpoint(st, store_sync_files);
			pthread_rwlock_unlock(&st->map_lock);
			if (!crc)
				continue;
		}
		break;
	}
	if (!rc)
		store_ckpt_watch(st);
	if (rc == -ENOSPC && several(head)) {
		free(w.unlink_after);
		free(w.punch_after);
		run_each(st, head);
		return;
	}
	for (struct store_wreq *r = head; r; r = r->next)
		if (!r->failed)
			r->rc = rc;
	if (!rc) {
		pthread_mutex_lock(&st->gc_mu);
		st->counters = total;
		pthread_mutex_unlock(&st->gc_mu);
		if (st->gf && gf_commit(st->gf))
			store_filter_kick(st);
		run_unlinks(st, &w);
		/* dead records give their blocks back once the commit is
		 * durable ("Punched once durable"; a failure leaves dead bytes,
		 * which the compactor reclaims) */
		punch_or_wait(st, w.punch_after, w.n_punch);
		if (++st->commits % 64 == 0)
			store_reserve_lmdb_space(st);
	}
	unlinks_truncate(&w, 0);
	free(w.unlink_after);
	free(w.punch_after);
}

/* Append r to the group-commit queue (gc_mu held). */
static void queue_push(struct store *st, struct store_wreq *r)
{
	*st->gc_tail = r;
	st->gc_tail = &r->next;
}

/* A request of store_write_later is over (rc: its outcome): its owner
 * hears it, and it is freed (gc_mu held). */
static void later_finish(struct store *st, struct store_wreq *r, int rc)
{
	r->later_done(r->arg, rc);
	free(r);
	__atomic_sub_fetch(&st->later_queued, 1, __ATOMIC_RELEASE);
}

/* A batch has run: each request of store_write_later hears how it went and
 * is freed, then every waiter's request is marked done (gc_mu held, so
 * that no waiter returns before the requests committed with it are
 * done). True when the batch held a request of store_write_later. */
static bool batch_done(struct store *st, struct store_wreq *batch)
{
	bool later = false;
	for (struct store_wreq *r = batch, *next; r; r = next) {
		next = r->next;
		if (r->later_done) {
			later = true;
			later_finish(st, r, r->rc);
		} else {
			r->done = true;
		}
	}
	return later;
}

int store_write(struct store *st, store_write_fn fn, void *arg)
{
	if (st->readonly)
		return -EROFS;
	struct store_wreq req = { .fn = fn, .arg = arg };
	pthread_mutex_lock(&st->gc_mu);
	queue_push(st, &req);
	while (!req.done) {
		if (st->gc_leader) {
			pthread_cond_wait(&st->gc_cv, &st->gc_mu);
			continue;
		}
		/* Lead: take every queued request and commit them together. */
		st->gc_leader = true;
		st->gc_leader_thread = pthread_self();
		struct store_wreq *batch = st->gc_head;
		st->gc_head = NULL;
		st->gc_tail = &st->gc_head;
		pthread_mutex_unlock(&st->gc_mu);
		run_batch(st, batch);
		pthread_mutex_lock(&st->gc_mu);
		bool later = batch_done(st, batch);
		st->gc_leader = false;
		pthread_cond_broadcast(&st->gc_cv);
		void (*after)(struct store *) = later ? __atomic_load_n(&st->after_later, __ATOMIC_ACQUIRE) : NULL;
		if (after) {
			/* no lock held: the hook may write */
			pthread_mutex_unlock(&st->gc_mu);
			after(st);
			pthread_mutex_lock(&st->gc_mu);
		}
	}
	pthread_mutex_unlock(&st->gc_mu);
	return req.rc;
}

bool store_commits_hold(struct store *st)
{
	pthread_mutex_lock(&st->gc_mu);
	bool nested = st->gc_leader && pthread_equal(st->gc_leader_thread, pthread_self());
	while (!nested && st->gc_leader)
		pthread_cond_wait(&st->gc_cv, &st->gc_mu);
	if (!nested) {
		st->gc_leader = true;
		st->gc_leader_thread = pthread_self();
	}
	pthread_mutex_unlock(&st->gc_mu);
	return nested;
}

void store_commits_release(struct store *st, bool nested)
{
	if (nested)
		return;
	pthread_mutex_lock(&st->gc_mu);
	st->gc_leader = false;
	pthread_cond_broadcast(&st->gc_cv);
	pthread_mutex_unlock(&st->gc_mu);
}

int store_write_later(struct store *st, store_write_fn fn, void (*done)(void *arg, int rc), void *arg)
{
	if (st->readonly)
		return -EROFS;
	struct store_wreq *req = calloc(1, sizeof *req);
	if (!req)
		return -ENOMEM;
	req->fn = fn;
	req->arg = arg;
	req->later_done = done;
	pthread_mutex_lock(&st->gc_mu);
	__atomic_add_fetch(&st->later_queued, 1, __ATOMIC_RELAXED);
	queue_push(st, req);
	pthread_mutex_unlock(&st->gc_mu);
	return 0;
}

static int nothing_cb(struct wtx *w, void *arg)
{
	(void)w;
	(void)arg;
	return 0;
}

int store_settle(struct store *st)
{
	if (st->readonly || !__atomic_load_n(&st->later_queued, __ATOMIC_ACQUIRE))
		return 0;
	/* Queued after them, so committed with them or after them. */
	return store_write(st, nothing_cb, NULL);
}

/* Requests of store_write_later that no batch will run (a close that
 * gives up, an abandon): each hears -ECANCELED. */
void store_drop_later(struct store *st)
{
	pthread_mutex_lock(&st->gc_mu);
	struct store_wreq **pp = &st->gc_head;
	while (*pp) {
		struct store_wreq *r = *pp;
		if (r->later_done) {
			*pp = r->next;
			later_finish(st, r, -ECANCELED);
		} else {
			pp = &r->next;
		}
	}
	st->gc_tail = pp; /* the last request's next, or gc_head itself */
	pthread_mutex_unlock(&st->gc_mu);
}

/* ---- conversions in batches ------------------------------------------ */

struct batches {
	store_batch_step step;
	void *ctx;
	uint8_t from[BLOBKEY_BYTES]; /* where the batch starts */
	uint8_t next[BLOBKEY_BYTES]; /* where the one after it starts, once committed */
	bool finished;
};

static int batch_cb(struct wtx *w, void *arg)
{
	struct batches *b = arg;
	/* run again after the map grew: from where it started (the cursor it
	 * moved was not rolled back with its writes) */
	memcpy(b->next, b->from, BLOBKEY_BYTES);
	b->finished = false;
	return b->step(w->txn, w->st, b->next, b->ctx, &b->finished);
}

int store_write_batches(struct store *st, store_batch_step step, void (*committed)(void *ctx), void *ctx)
{
	struct batches *b = calloc(1, sizeof *b);
	if (!b)
		return -ENOMEM;
	b->step = step;
	b->ctx = ctx;
	int rc = 0;
	while (!rc && !b->finished)
		if (!(rc = store_write(st, batch_cb, b))) {
			memcpy(b->from, b->next, BLOBKEY_BYTES);
			if (committed)
				committed(ctx);
		}
	free(b);
	return rc;
}

int store_batch_next(uint8_t next[BLOBKEY_BYTES], bool more, const MDB_val *key, int mrc)
{
	if (more && key->mv_size == BLOBKEY_BYTES) {
		memcpy(next, key->mv_data, BLOBKEY_BYTES); /* the first one left */
		return 0;
	}
	if (more)
		return -EUCLEAN;
	return mrc == MDB_NOTFOUND ? 0 : pd_mdb_err(mrc);
}

/* ---- versions kept in meta ------------------------------------------- */

int store_meta_version_get(MDB_txn *txn, struct store *st, const char *key, uint32_t absent, uint32_t *version)
{
	MDB_val k = { strlen(key), (void *)key }, v;
	int rc = mdb_get(txn, st->db_meta, &k, &v);
	if (rc == MDB_NOTFOUND) {
		*version = absent;
		return 0;
	}
	if (rc)
		return pd_mdb_err(rc);
	*version = v.mv_size == 4 ? get_le32(v.mv_data) : 0;
	return 0;
}

int store_meta_version_put(MDB_txn *txn, struct store *st, const char *key, uint32_t version)
{
	uint8_t b[4];
	put_le32(b, version);
	MDB_val k = { strlen(key), (void *)key }, v = { 4, b };
	return pd_mdb_err(mdb_put(txn, st->db_meta, &k, &v, 0));
}

int store_meta_version_del(MDB_txn *txn, struct store *st, const char *key)
{
	MDB_val k = { strlen(key), (void *)key };
	int rc = mdb_del(txn, st->db_meta, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
}
