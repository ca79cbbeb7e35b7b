/* store_lmdb.c - LMDB's file rewritten without its free pages.
 *
 * LMDB never shrinks its file: pages freed by a commit go on the freelist
 * and are reused by later commits, except while a reader still holds the
 * snapshot that needs them (the signer's and the delta step's read
 * transactions beside a crawl's commits). A crawl therefore leaves a third
 * of the file free (34% on make bench's corpus), which du counts.
 *
 * store_lmdb_compact copies the environment with mdb_env_copyfd2 and
 * MDB_CP_COMPACT (every live page renumbered into a dense file, the
 * freelist dropped) into meta/data.mdb.compact, with LMDB's reserve past
 * its pages as a writable open keeps it, syncs it, renames it over
 * meta/data.mdb and syncs the directory. A crash before the rename leaves
 * the old file as it was and a leftover copy, which the next run removes;
 * after it, the new file is whole. The store must be closed: the store's
 * lock is taken for the whole run.
 *
 * A copy keeps each page as it is, and a table whose keys arrive in no
 * order (dirents by name hash, blob_inodes by MD5) has its leaf pages
 * about two thirds full after a crawl: a third of those tables' bytes is
 * LMDB's slack (so with fingerprints and the near tables, by MD5 and by
 * hash). Before the copy, every table is written again in key order with
 * MDB_APPEND, which fills each leaf page:
 * each table into a scratch table, then back, in one write transaction per
 * table, so that a crash leaves every table whole (a scratch table left
 * behind is dropped by the next run). A table too large for one
 * transaction (MDB_TXN_FULL) is left as it is.
 *
 * The daemon does the same at its unmount (store_close, store_opts'
 * lmdb_rewrite_max), the store's lock still held, when the mount grew the
 * file by an eighth and the file is small enough to take seconds: on make
 * bench's corpus 32 MB -> 23 MB in 0.4 s (tests/bench/README.md, "LMDB
 * written again at unmount"). */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "store_int.h"
#include "base/fdio.h"

#define COMPACT_TMP "data.mdb.compact"

static int lock_store(const char *dir, int *lockfd, char err[PD_ERRLEN])
{
	char path[4096];
	snprintf(path, sizeof path, "%s/lock", dir);
	*lockfd = open(path, O_RDWR | O_CLOEXEC);
	if (*lockfd < 0) {
		int e = errno;
		snprintf(err, PD_ERRLEN, "cannot open %s: %s", path, strerror(e));
		return -e;
	}
	if (flock(*lockfd, LOCK_EX | LOCK_NB)) {
		snprintf(err, PD_ERRLEN, "store %s is in use by another process; unmount it first", dir);
		return -EBUSY;
	}
	return 0;
}

static uint64_t file_bytes(const char *path)
{
	struct stat sb;
	return stat(path, &sb) ? 0 : (uint64_t)sb.st_blocks * 512;
}

#define REPACK_SCRATCH "repack.scratch"
#define REPACK_MAX_TABLES 64

/* Every row of `from` appended to the empty table `to`, in key order: a
 * key's first value with MDB_APPEND, its other values with MDB_APPENDDUP. */
static int append_all(MDB_txn *txn, MDB_dbi from, MDB_dbi to, bool dups)
{
	MDB_cursor *c, *w;
	int rc = mdb_cursor_open(txn, from, &c);
	if (rc)
		return rc;
	if ((rc = mdb_cursor_open(txn, to, &w))) {
		mdb_cursor_close(c);
		return rc;
	}
	MDB_val k, v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(c, &k, &v, dups ? MDB_NEXT_NODUP : MDB_NEXT)) {
		rc = mdb_cursor_put(w, &k, &v, MDB_APPEND);
		for (int d = dups && !rc ? mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP) : MDB_NOTFOUND; d == 0 && !rc;
		     d = mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP))
			rc = mdb_cursor_put(w, &k, &v, MDB_APPENDDUP);
	}
	mdb_cursor_close(w);
	mdb_cursor_close(c);
	return rc ? rc : (mrc == MDB_NOTFOUND ? 0 : mrc);
}

/* Table `name` written again in key order: copied into the scratch table,
 * emptied, filled back from it; one transaction. */
static int repack_table(MDB_env *env, const char *name)
{
	MDB_txn *txn;
	MDB_dbi t, scratch;
	unsigned flags;
	int rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc)
		return rc;
	if ((rc = mdb_dbi_open(txn, name, 0, &t)) || (rc = mdb_dbi_flags(txn, t, &flags))) {
		mdb_txn_abort(txn);
		return rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE ? 0 : rc; /* not a table */
	}
	flags &= MDB_REVERSEKEY | MDB_DUPSORT | MDB_INTEGERKEY | MDB_DUPFIXED | MDB_INTEGERDUP | MDB_REVERSEDUP;
	bool dups = flags & MDB_DUPSORT;
	if (!(rc = mdb_dbi_open(txn, REPACK_SCRATCH, MDB_CREATE | flags, &scratch)) &&
	    !(rc = mdb_drop(txn, scratch, 0)) && !(rc = append_all(txn, t, scratch, dups)) &&
	    !(rc = mdb_drop(txn, t, 0)) && !(rc = append_all(txn, scratch, t, dups)))
		rc = mdb_drop(txn, scratch, 1);
	return rc ? (mdb_txn_abort(txn), rc) : mdb_txn_commit(txn);
}

/* A scratch table left by a crash, dropped. */
static int drop_scratch(MDB_env *env)
{
	MDB_txn *txn;
	MDB_dbi d;
	int rc = mdb_txn_begin(env, NULL, 0, &txn);
	if (rc)
		return rc;
	rc = mdb_dbi_open(txn, REPACK_SCRATCH, 0, &d);
	if (rc == MDB_NOTFOUND) {
		mdb_txn_abort(txn);
		return 0;
	}
	if (rc || (rc = mdb_drop(txn, d, 1))) {
		mdb_txn_abort(txn);
		return rc;
	}
	return mdb_txn_commit(txn);
}

/* The names of the environment's tables: the keys of LMDB's main table. */
static int table_names(MDB_env *env, char names[][64], size_t *n)
{
	MDB_txn *txn;
	MDB_dbi main_db;
	MDB_cursor *c;
	int rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
	if (rc)
		return rc;
	if ((rc = mdb_dbi_open(txn, NULL, 0, &main_db)) || (rc = mdb_cursor_open(txn, main_db, &c))) {
		mdb_txn_abort(txn);
		return rc;
	}
	MDB_val k, v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && *n < REPACK_MAX_TABLES;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size == 0 || k.mv_size >= 64 || memchr(k.mv_data, 0, k.mv_size))
			continue;
		memcpy(names[*n], k.mv_data, k.mv_size);
		names[(*n)++][k.mv_size] = 0;
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	return mrc == 0 || mrc == MDB_NOTFOUND ? 0 : mrc;
}

/* The environment in meta/ opened with `flags`, for the compaction alone
 * (the store is locked): an LMDB error, *env to close either way. */
static int open_env(const char *meta, uint64_t mapsize, unsigned flags, MDB_env **env)
{
	int rc = mdb_env_create(env);
	if (rc) {
		*env = NULL;
		return rc;
	}
	rc = mdb_env_set_maxdbs(*env, PD_MAX_DBS);
	if (!rc)
		rc = mdb_env_set_mapsize(*env, mapsize);
	if (!rc)
		rc = mdb_env_open(*env, meta, flags, 0600);
	return rc;
}

static int repack_tables(const char *meta, uint64_t mapsize, char err[PD_ERRLEN])
{
	MDB_env *env;
	int rc = open_env(meta, mapsize, 0, &env);
	if (!rc)
		rc = drop_scratch(env);
	char names[REPACK_MAX_TABLES][64];
	size_t n = 0;
	if (!rc)
		rc = table_names(env, names, &n);
	for (size_t i = 0; i < n && !rc; i++)
		if ((rc = repack_table(env, names[i])) == MDB_TXN_FULL || rc == MDB_MAP_FULL)
			rc = 0; /* too large for one transaction: left as it is */
	if (rc)
		snprintf(err, PD_ERRLEN, "cannot write the tables of %s/data.mdb again: %s", meta, mdb_strerror(rc));
	mdb_env_close(env);
	return rc > 0 ? -rc : (rc ? -EIO : 0);
}

/* The compact copy of the environment in meta/ into `fd`, synced. */
static int copy_compact(const char *meta, uint64_t mapsize, int fd, char err[PD_ERRLEN])
{
	MDB_env *env;
	int rc = open_env(meta, mapsize, MDB_RDONLY, &env);
	if (!rc)
		rc = mdb_env_copyfd2(env, fd, MDB_CP_COMPACT);
	if (rc)
		snprintf(err, PD_ERRLEN, "cannot copy LMDB's file %s/data.mdb: %s", meta, mdb_strerror(rc));
	mdb_env_close(env);
	/* LMDB's reserve (store_commit.c), as a writable open would take it
	 * again: a store compacted on a nearly full disk keeps the room a
	 * delete needs, and du does not move at the next mount. */
	struct stat sb;
	if (!rc && fstat(fd, &sb) == 0)
		posix_fallocate(fd, 0, (off_t)((uint64_t)sb.st_size + store_lmdb_reserve((uint64_t)sb.st_size)));
	if (!rc && fsync(fd)) {
		rc = errno;
		snprintf(err, PD_ERRLEN, "cannot sync %s/%s: %s", meta, COMPACT_TMP, strerror(rc));
	}
	return rc > 0 ? -rc : (rc ? -EIO : 0);
}

/* The rewrite itself, the store's lock held by the caller. */
static int compact_held(const char *dir, uint64_t *before, uint64_t *after, char err[PD_ERRLEN])
{
	char meta[4096], data[4200], tmp[4200];
	snprintf(meta, sizeof meta, "%s/meta", dir);
	snprintf(data, sizeof data, "%s/data.mdb", meta);
	snprintf(tmp, sizeof tmp, "%s/%s", meta, COMPACT_TMP);
	*before = *after = file_bytes(data);
	struct stat sb;
	unlink(tmp); /* a copy left by a crash before its rename */
	int fd = stat(data, &sb) ? -1 : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;
		snprintf(err, PD_ERRLEN, "cannot create %s: %s", tmp, strerror(e));
		return -e;
	}
	/* The map must cover the file; twice it leaves LMDB nothing to grow,
	 * three times leaves room for the scratch copies of the repack. */
	int rc = repack_tables(meta, (uint64_t)sb.st_size * 3 + (64u << 20), err);
	if (!rc)
		rc = copy_compact(meta, (uint64_t)sb.st_size * 3 + (64u << 20), fd, err);
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, data)) {
		rc = -errno;
		snprintf(err, PD_ERRLEN, "cannot rename %s to %s: %s", tmp, data, strerror(errno));
	}
	if (rc) {
		unlink(tmp);
		return rc;
	}
	int dfd = open(meta, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd)) {
		rc = -errno;
		snprintf(err, PD_ERRLEN, "cannot sync %s: %s", meta, strerror(errno));
	}
	if (dfd >= 0)
		close(dfd);
	*after = file_bytes(data);
	return rc;
}

void store_lmdb_drop_leftover(int dirfd)
{
	(void)unlinkat(dirfd, "meta/" COMPACT_TMP, 0);
}

int store_lmdb_compact(const char *dir, uint64_t *before, uint64_t *after, char err[PD_ERRLEN])
{
	/* a store a power cut left: its checkpoint first, as store_open
	 * (before the lock, which the recovery takes for its own while) */
	int crc = store_ckpt_recover(dir, err);
	if (crc < 0)
		return crc;
	int lockfd, rc = lock_store(dir, &lockfd, err);
	if (!rc)
		rc = compact_held(dir, before, after, err);
	if (lockfd >= 0)
		close(lockfd);
	return rc;
}

int store_lmdb_rewrite_held(const char *dir, uint64_t max, uint64_t in_use, uint64_t *before, uint64_t *after, char err[PD_ERRLEN])
{
	char data[4200];
	snprintf(data, sizeof data, "%s/meta/data.mdb", dir);
	/* The bound is on the pages in use, which the rewrite reads and
	 * copies, not on the file: the free pages a sync interval of commits
	 * left (store_ckpt.c) cost the rewrite nothing. */
	if (in_use > max) {
		snprintf(err, PD_ERRLEN, "%llu bytes in use, over lmdb_rewrite_mb; 'pagededup compact' writes it again unmounted",
			 (unsigned long long)in_use);
		return 0;
	}
	/* The repack may grow the file by what is in use (each table copied
	 * once beside itself, into the free pages first), and the copy takes
	 * as much again: a rewrite that could fill the disk would eat the
	 * reserve a delete needs. */
	uint64_t room = 0, need = 3 * in_use + LMDB_REWRITE_HEADROOM;
	if (fd_free_bytes(-1, data, &room) || room < need) {
		snprintf(err, PD_ERRLEN, "the disk has %llu bytes free, the rewrite of %llu bytes in use needs %llu",
			 (unsigned long long)room, (unsigned long long)in_use, (unsigned long long)need);
		return 0;
	}
	int rc = compact_held(dir, before, after, err);
	return rc ? rc : 1;
}

int store_lmdb_free_pages(MDB_txn *txn, uint64_t pinned_from, uint64_t *pages, uint64_t *pinned)
{
	/* LMDB's freelist is table 0: txnid -> a list of page numbers whose
	 * first word is its length (what mdb_stat -f counts). A commit takes
	 * pages only from lists freed before the oldest live reader began. */
	MDB_cursor *c;
	MDB_val k, v;
	*pages = 0;
	if (pinned)
		*pinned = 0;
	int rc = mdb_cursor_open(txn, 0, &c);
	if (rc)
		return rc > 0 ? -rc : -EIO;
	while ((rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) == 0) {
		if (v.mv_size < sizeof(size_t))
			continue;
		size_t n = *(const size_t *)v.mv_data;
		*pages += n;
		size_t id = 0;
		if (k.mv_size == sizeof id)
			memcpy(&id, k.mv_data, sizeof id);
		if (pinned && id >= pinned_from)
			*pinned += n;
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : (rc > 0 ? -rc : -EIO);
}

/* One line of mdb_reader_list's table: "pid thread txnid", the txnid "-"
 * for a slot between transactions (the header line has no number). */
static int reader_line(const char *msg, void *ctx)
{
	struct store_lmdb_readers *r = ctx;
	int pid;
	unsigned long long tid, txnid;
	if (sscanf(msg, "%d %llx %llu", &pid, &tid, &txnid) != 3)
		return 0;
	r->active++;
	if (!r->oldest_txnid || txnid < r->oldest_txnid)
		r->oldest_txnid = txnid;
	return 0;
}

int store_lmdb_readers(MDB_env *env, struct store_lmdb_readers *r)
{
	MDB_envinfo info;
	*r = (struct store_lmdb_readers){ 0 };
	int rc = mdb_env_info(env, &info);
	if (rc)
		return rc > 0 ? -rc : -EIO;
	r->last_txnid = info.me_last_txnid;
	rc = mdb_reader_list(env, reader_line, r);
	return rc < 0 ? -EIO : 0;
}
