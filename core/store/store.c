/* store.c - the store directory, its LMDB environment and filter, and the
 * group-commit write path.
 *
 * Consistency: LMDB holds the whole namespace and every index, so one write
 * transaction moves the store from one consistent state to the next. The
 * only state outside LMDB is (1) blob files, which are renamed into
 * objects/ before the commit that refers to them and removed only after the
 * commit that drops the last reference (a crash leaves at worst an orphan
 * blob, never a dangling reference), and (2) the filter's leaf files, which
 * are changed inside the transaction with an undo journal (gfilter.h) and
 * are trusted at open only if the store was closed cleanly with the same
 * generation; otherwise they are rebuilt from the positions stored in the
 * fingerprint records (store_filter.c).
 *
 * Durability: by default commits are not fsynced (MDB_NOSYNC) and a
 * background thread syncs LMDB every sync_ms, as ext4 commits its journal
 * every few seconds; a killed daemon loses nothing (the page cache has every
 * commit), a power loss may lose the last interval. fsync() on a file syncs
 * the store. -o sync_blobs makes every commit durable and fsyncs each blob
 * before the commit that refers to it; group commit keeps that affordable.
 */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fp.h"
#include "near/near.h"
#include "archive/openfile.h"
#include "near/sigq.h"
#include "near/simhash.h"

#define PD_EMAPFULL (-ECHRNG)

static void reserve_lmdb_space(struct store *st); /* internal: the LMDB map is full, grow and retry */
static void stop_sync_thread(struct store *st);
#define MIN_MAPSIZE (64ull << 20)
#define DEFAULT_MAPSIZE (1ull << 30)

struct store_wreq {
	store_write_fn fn;
	void *arg;
	int rc;
	bool done;
	bool failed; /* its callback failed: left out of the batch's commit */
	struct store_wreq *next;
};

struct pd_time pd_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (struct pd_time){ ts.tv_sec, (uint32_t)ts.tv_nsec };
}

int pd_time_cmp(struct pd_time a, struct pd_time b)
{
	if (a.sec != b.sec)
		return a.sec < b.sec ? -1 : 1;
	return a.nsec < b.nsec ? -1 : a.nsec > b.nsec;
}

int pd_mdb_err(int rc)
{
	switch (rc) {
	case MDB_SUCCESS: return 0;
	case MDB_NOTFOUND: return -ENOENT;
	case MDB_KEYEXIST: return -EEXIST;
	case MDB_MAP_FULL: return PD_EMAPFULL;
	case MDB_TXN_FULL: return -EFBIG;
	case MDB_READERS_FULL: return -EAGAIN;
	default: return rc > 0 ? -rc : -EIO;
	}
}

unsigned pd_hist_bucket(uint64_t refcount)
{
	unsigned b = 63 - (unsigned)__builtin_clzll(refcount | 1);
	return b < PD_HIST_BUCKETS ? b : PD_HIST_BUCKETS - 1;
}

void store_params_default(struct store_params *p)
{
	p->expected_pages = 1000000;
	p->filter_fpr = 1e-4;
	p->filter_lines = 2;
	p->near_distance = SIMHASH_NEAR_DISTANCE;
	p->filter_fmax = 0;
	p->filter_leaf_lines = 0;
}

/* ---- meta table ------------------------------------------------------ */

static int meta_put(MDB_txn *txn, MDB_dbi db, const char *key, const void *val, size_t len)
{
	MDB_val k = { strlen(key), (void *)key }, v = { len, (void *)val };
	return pd_mdb_err(mdb_put(txn, db, &k, &v, 0));
}

static int meta_get(MDB_txn *txn, MDB_dbi db, const char *key, void *val, size_t len)
{
	MDB_val k = { strlen(key), (void *)key }, v;
	int rc = pd_mdb_err(mdb_get(txn, db, &k, &v));
	if (rc)
		return rc;
	if (v.mv_size != len)
		return -EUCLEAN;
	memcpy(val, v.mv_data, len);
	return 0;
}

static int meta_put_u64(MDB_txn *txn, MDB_dbi db, const char *key, uint64_t x)
{
	uint8_t b[8];
	put_le64(b, x);
	return meta_put(txn, db, key, b, 8);
}

static int meta_get_u64(MDB_txn *txn, MDB_dbi db, const char *key, uint64_t *x)
{
	uint8_t b[8];
	int rc = meta_get(txn, db, key, b, 8);
	if (!rc)
		*x = get_le64(b);
	return rc;
}

/* params: expected u64 | fpr (as IEEE double bits) u64 | lines u32 | near u32 */
static int params_put(MDB_txn *txn, MDB_dbi db, const struct store_params *p)
{
	uint8_t b[24];
	uint64_t bits;
	memcpy(&bits, &p->filter_fpr, 8);
	put_le64(b, p->expected_pages);
	put_le64(b + 8, bits);
	put_le32(b + 16, p->filter_lines);
	put_le32(b + 20, p->near_distance);
	return meta_put(txn, db, "params", b, sizeof b);
}

static int params_get(MDB_txn *txn, MDB_dbi db, struct store_params *p)
{
	uint8_t b[24];
	int rc = meta_get(txn, db, "params", b, sizeof b);
	if (rc)
		return rc;
	uint64_t bits = get_le64(b + 8);
	p->expected_pages = get_le64(b);
	memcpy(&p->filter_fpr, &bits, 8);
	p->filter_lines = get_le32(b + 16);
	p->near_distance = get_le32(b + 20);
	return 0;
}

static int64_t *counters_field(struct pd_counters *c, unsigned i)
{
	return i < 10 ? &(&c->pages)[i] : &c->hist[i - 10];
}

static int counters_put(MDB_txn *txn, MDB_dbi db, const struct pd_counters *c)
{
	uint8_t b[PD_COUNTERS_N * 8];
	for (unsigned i = 0; i < PD_COUNTERS_N; i++)
		put_le64(b + 8 * i, (uint64_t)*counters_field((struct pd_counters *)c, i));
	return meta_put(txn, db, "counters", b, sizeof b);
}

static int counters_get(MDB_txn *txn, MDB_dbi db, struct pd_counters *c)
{
	uint8_t b[PD_COUNTERS_N * 8];
	int rc = meta_get(txn, db, "counters", b, sizeof b);
	if (rc)
		return rc;
	for (unsigned i = 0; i < PD_COUNTERS_N; i++)
		*counters_field(c, i) = (int64_t)get_le64(b + 8 * i);
	return 0;
}

static void counters_add(struct pd_counters *to, const struct pd_counters *d)
{
	for (unsigned i = 0; i < PD_COUNTERS_N; i++)
		*counters_field(to, i) += *counters_field((struct pd_counters *)d, i);
}

void store_counters(struct store *st, struct pd_counters *out)
{
	pthread_mutex_lock(&st->gc_mu);
	*out = st->counters;
	pthread_mutex_unlock(&st->gc_mu);
}

/* ---- saturated counters (exact counts for the filter) ---------------- */

static int sat_get(void *ctx, uint64_t idx, uint64_t *count)
{
	struct wtx *w = ctx;
	uint8_t kb[8];
	put_be64(kb, idx);
	MDB_val k = { 8, kb }, v;
	int rc = pd_mdb_err(mdb_get(w->txn, w->st->db_saturated, &k, &v));
	if (rc)
		return rc;
	if (v.mv_size != 8)
		return -EUCLEAN;
	*count = get_le64(v.mv_data);
	return 0;
}

static int sat_put(void *ctx, uint64_t idx, uint64_t count)
{
	struct wtx *w = ctx;
	uint8_t kb[8], vb[8];
	put_be64(kb, idx);
	put_le64(vb, count);
	MDB_val k = { 8, kb }, v = { 8, vb };
	return pd_mdb_err(mdb_put(w->txn, w->st->db_saturated, &k, &v, 0));
}

static int sat_del(void *ctx, uint64_t idx)
{
	struct wtx *w = ctx;
	uint8_t kb[8];
	put_be64(kb, idx);
	MDB_val k = { 8, kb };
	return pd_mdb_err(mdb_del(w->txn, w->st->db_saturated, &k, NULL));
}

/* The ctx these callbacks take is the struct wtx of the transaction. */
const struct cbf_exact_ops store_saturated_ops = { sat_get, sat_put, sat_del };

/* ---- environment ----------------------------------------------------- */

static int path_join(char *out, size_t n, const char *dir, const char *name)
{
	int len = snprintf(out, n, "%s/%s", dir, name);
	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

static int env_open(struct store *st, const char *dir, bool readonly, bool durable, uint64_t mapsize)
{
	char path[4096];
	int rc = path_join(path, sizeof path, dir, "meta");
	if (rc)
		return rc;
	if ((rc = mdb_env_create(&st->env)))
		return pd_mdb_err(rc);
	mdb_env_set_maxdbs(st->env, 64);
	mdb_env_set_maxreaders(st->env, 510);
	/* No MDB_WRITEMAP: it would save the pwrite()s of a commit (measured:
	 * no visible gain on a cp of 20,000 pages, where FUSE round trips
	 * dominate), but a write through the map into a full disk is a SIGBUS
	 * that kills the daemon, where pwrite() returns ENOSPC. */
	unsigned flags = MDB_NOTLS | (readonly ? MDB_RDONLY : 0) | (durable || readonly ? 0 : MDB_NOSYNC);
	if (!readonly) {
		struct stat sb;
		char data[4200];
		snprintf(data, sizeof data, "%s/data.mdb", path);
		uint64_t want = mapsize ? mapsize : DEFAULT_MAPSIZE;
		if (!mapsize && stat(data, &sb) == 0 && (uint64_t)sb.st_size * 2 > want)
			want = (uint64_t)sb.st_size * 2;
		if (want < MIN_MAPSIZE && !mapsize)
			want = MIN_MAPSIZE;
		mdb_env_set_mapsize(st->env, want);
	}
	rc = mdb_env_open(st->env, path, flags, 0600);
	if (rc) {
		mdb_env_close(st->env);
		st->env = NULL;
		return pd_mdb_err(rc);
	}
	MDB_envinfo info;
	mdb_env_info(st->env, &info);
	st->mapsize = info.me_mapsize;
	return 0;
}

static int open_dbis(struct store *st, MDB_txn *txn, unsigned create)
{
	struct { const char *name; MDB_dbi *dbi; unsigned flags; } t[] = {
		{ "meta", &st->db_meta, 0 },
		{ "inodes", &st->db_inodes, 0 },
		{ "dirents", &st->db_dirents, MDB_DUPSORT },
		{ "links", &st->db_links, MDB_DUPSORT },
		{ "fingerprints", &st->db_fp, 0 },
		{ "blob_inodes", &st->db_blob_inodes, MDB_DUPSORT | MDB_DUPFIXED },
		{ "xattrs", &st->db_xattrs, 0 },
		{ "saturated", &st->db_saturated, 0 },
		{ "orphans", &st->db_orphans, 0 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		int rc = mdb_dbi_open(txn, t[i].name, t[i].flags | create, t[i].dbi);
		if (rc)
			return pd_mdb_err(rc);
	}
	return 0;
}

static struct store *store_alloc(const char *dir)
{
	struct store *st = calloc(1, sizeof *st);
	if (!st)
		return NULL;
	st->dir = strdup(dir);
	st->dirfd = st->lockfd = -1;
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	/* Writer preference: a map resize must not starve behind readers. */
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&st->map_lock, &ra);
	pthread_rwlockattr_destroy(&ra);
	pthread_mutex_init(&st->gc_mu, NULL);
	pthread_cond_init(&st->gc_cv, NULL);
	st->gc_tail = &st->gc_head;
	pthread_mutex_init(&st->sync_mu, NULL);
	pthread_cond_init(&st->sync_cv, NULL);
	pthread_mutex_init(&st->split_mu, NULL);
	pthread_cond_init(&st->split_cv, NULL);
	if (!st->dir) {
		free(st);
		return NULL;
	}
	return st;
}

static void store_free(struct store *st)
{
	if (st->blob_priv_stop)
		st->blob_priv_stop(st);
	if (st->blob_priv_free)
		st->blob_priv_free(st->blob_priv);
	gf_close(st->gf);
	pack_set_close(st->packs);
	if (st->env)
		mdb_env_close(st->env);
	if (st->dirfd >= 0)
		close(st->dirfd);
	if (st->lockfd >= 0)
		close(st->lockfd);
	live_table_free(st->live);
	pthread_rwlock_destroy(&st->map_lock);
	pthread_mutex_destroy(&st->gc_mu);
	pthread_cond_destroy(&st->gc_cv);
	pthread_mutex_destroy(&st->sync_mu);
	pthread_cond_destroy(&st->sync_cv);
	pthread_mutex_destroy(&st->split_mu);
	pthread_cond_destroy(&st->split_cv);
	free(st->dir);
	free(st);
}

/* ---- mkfs ------------------------------------------------------------ */

static bool dir_is_empty(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return false;
	struct dirent *e;
	bool empty = true;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			empty = false;
			break;
		}
	closedir(d);
	return empty;
}

static int make_root(struct store *st, MDB_txn *txn)
{
	struct inode root = { .ino = PD_ROOT_INO, .mode = S_IFDIR | 0755, .uid = getuid(),
			      .gid = getgid(), .nlink = 2 };
	root.atime = root.mtime = root.ctime = pd_now();
	uint8_t kb[8], vb[INODE_FIXED_BYTES];
	put_be64(kb, PD_ROOT_INO);
	MDB_val k = { 8, kb }, v = { inode_encode(&root, NULL, 0, vb), vb };
	return pd_mdb_err(mdb_put(txn, st->db_inodes, &k, &v, 0));
}

/* The filter's first leaves (gf_tree_initial) and their files, all of
 * generation 1, and the tree record. */
static int mkfs_filter(struct store *st, MDB_txn *txn, const struct store_params *p)
{
	struct gf_config c;
	struct gf_tree t;
	store_filter_config(p, &c);
	if (c.fmax < c.target_fpr || c.fmax >= 1)
		return -EINVAL;
	int rc = gf_tree_initial(&c, p->expected_pages, &t);
	if (rc)
		return rc;
	rc = store_filter_tree_put(txn, st->db_meta, &t);
	if (!rc)
		rc = gf_open(st->dir, &t, GF_READWRITE, &st->gf, NULL);
	if (!rc)
		rc = gf_sync(st->gf, 1);
	gf_tree_free(&t);
	return rc;
}

int store_mkfs(const char *dir, const struct store_params *p, char err[PD_ERRLEN])
{
	struct store_params def;
	if (!p) {
		store_params_default(&def);
		p = &def;
	}
	if (mkdir(dir, 0700) && errno != EEXIST) {
		snprintf(err, PD_ERRLEN, "cannot create %s: %s", dir, strerror(errno));
		return -errno;
	}
	if (!dir_is_empty(dir)) {
		snprintf(err, PD_ERRLEN, "%s is not an empty directory; mkfs makes a store only in an empty or new directory", dir);
		return -ENOTEMPTY;
	}
	chmod(dir, 0700);
	char path[4096];
	const char *subdirs[] = { "meta", PACK_DIR, "staging" };
	for (int i = 0; i < 3; i++) {
		if (path_join(path, sizeof path, dir, subdirs[i]) || mkdir(path, 0700)) {
			snprintf(err, PD_ERRLEN, "cannot create %s/%s: %s", dir, subdirs[i], strerror(errno));
			return -errno;
		}
	}
	struct cbf_geometry g;
	int rc = cbf_geometry_for(p->expected_pages, p->filter_fpr, p->filter_lines, &g);
	if (rc) {
		snprintf(err, PD_ERRLEN, "no filter geometry for %llu pages at rate %g",
			 (unsigned long long)p->expected_pages, p->filter_fpr);
		return rc;
	}
	struct store *st = store_alloc(dir);
	if (!st)
		return -ENOMEM;
	st->params = *p;
	MDB_txn *txn = NULL;
	struct pd_counters zero = { 0 };
	rc = env_open(st, dir, false, true, 0);
	if (!rc)
		rc = pd_mdb_err(mdb_txn_begin(st->env, NULL, 0, &txn));
	if (!rc)
		rc = open_dbis(st, txn, MDB_CREATE);
	if (!rc)
		rc = near_open_tables(txn, st, MDB_CREATE);
	if (!rc) {
		uint32_t fmt = PD_FORMAT_VERSION;
		uint8_t one = 1, fb[4];
		put_le32(fb, fmt);
		rc = meta_put(txn, st->db_meta, "format", fb, 4);
		if (!rc) rc = params_put(txn, st->db_meta, p);
		if (!rc) rc = meta_put_u64(txn, st->db_meta, "generation", 1);
		if (!rc) rc = meta_put(txn, st->db_meta, "clean", &one, 1);
		if (!rc) rc = meta_put_u64(txn, st->db_meta, "next_ino", PD_ROOT_INO + 1);
		if (!rc) rc = counters_put(txn, st->db_meta, &zero);
		if (!rc) rc = near_version_put(txn, st);
		if (!rc) rc = make_root(st, txn);
	}
	if (!rc)
		rc = mkfs_filter(st, txn, p);
	if (txn)
		rc = rc ? (mdb_txn_abort(txn), rc) : pd_mdb_err(mdb_txn_commit(txn));
	if (rc)
		snprintf(err, PD_ERRLEN, "cannot make a store in %s: %s", dir, strerror(-rc));
	store_free(st);
	return rc;
}

/* ---- open ------------------------------------------------------------ */

static int take_lock(struct store *st, char err[PD_ERRLEN])
{
	char path[4096];
	path_join(path, sizeof path, st->dir, "lock");
	st->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (st->lockfd < 0) {
		snprintf(err, PD_ERRLEN, "cannot open %s: %s", path, strerror(errno));
		return -errno;
	}
	if (flock(st->lockfd, LOCK_EX | LOCK_NB)) {
		char pid[32] = "";
		ssize_t n = pread(st->lockfd, pid, sizeof pid - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		snprintf(err, PD_ERRLEN,
			 "store %s is in use by another process (pid %s); unmount it first or use another store",
			 st->dir, *pid ? pid : "?");
		return -EBUSY;
	}
	char pid[32];
	int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	if (ftruncate(st->lockfd, 0) == 0 && pwrite(st->lockfd, pid, (size_t)len, 0) < 0)
		return 0; /* the pid is only for messages */
	return 0;
}

static bool is_store(const char *dir)
{
	char path[4096];
	struct stat sb;
	return !path_join(path, sizeof path, dir, "meta/data.mdb") && stat(path, &sb) == 0;
}

static int mark_open_cb(struct wtx *w, void *arg)
{
	uint8_t zero = 0;
	int rc = meta_put(w->txn, w->st->db_meta, "clean", &zero, 1);
	if (!rc)
		rc = meta_put_u64(w->txn, w->st->db_meta, "generation", *(uint64_t *)arg);
	return rc;
}

static void remove_staging(struct store *st)
{
	char path[4096];
	path_join(path, sizeof path, st->dir, "staging");
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

/* After an unclean stop, remove the blob files no record names: a page
 * whose blob was put in place but whose commit never happened, or a blob
 * whose removal after its last reference was lost with a power cut. Safe
 * because nothing writes the store yet, and a referenced blob always has
 * its record. One pass over objects/, in the order of the 4096 directories. */
static unsigned sweep_orphan_blobs(struct store *st)
{
	MDB_txn *txn;
	unsigned failed = 0;
	if (store_read_begin(st, &txn))
		return 1;
	for (unsigned d = 0; d < 4096; d++) {
		char dir[32];
		snprintf(dir, sizeof dir, "objects/%03x", d);
		int fd = openat(st->dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
		if (!dp) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		struct dirent *e;
		while ((e = readdir(dp))) {
			struct blobkey k;
			if (!blobkey_parse(e->d_name, &k))
				continue;
			uint8_t kb[BLOBKEY_BYTES];
			blobkey_encode(&k, kb);
			MDB_val key = { BLOBKEY_BYTES, kb }, v;
			if (mdb_get(txn, st->db_fp, &key, &v) == MDB_NOTFOUND &&
			    unlinkat(dirfd(dp), e->d_name, 0) && errno != ENOENT)
				failed++;
		}
		closedir(dp);
	}
	store_read_end(st, txn);
	return failed;
}

static void *sync_main(void *arg)
{
	struct store *st = arg;
	unsigned ms = st->opts.sync_ms ? st->opts.sync_ms : 1000;
	pthread_mutex_lock(&st->sync_mu);
	while (!st->sync_stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += ms / 1000;
		ts.tv_nsec += (long)(ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&st->sync_cv, &st->sync_mu, &ts);
		if (st->sync_stop)
			break;
		pthread_mutex_unlock(&st->sync_mu);
		/* Blob files first, then the records that name them. */
		syncfs(st->dirfd);
		mdb_env_sync(st->env, 1);
		pthread_mutex_lock(&st->sync_mu);
	}
	pthread_mutex_unlock(&st->sync_mu);
	return NULL;
}

static int format_up_cb(struct wtx *w, void *arg)
{
	(void)arg;
	uint8_t fb[4];
	put_le32(fb, PD_FORMAT_VERSION);
	int rc = meta_put(w->txn, w->st->db_meta, "format", fb, 4);
	if (!rc)
		w->st->format = PD_FORMAT_VERSION;
	return rc;
}

static int read_meta(struct store *st, MDB_txn *txn, bool *clean, uint64_t *gen, char err[PD_ERRLEN])
{
	uint8_t fb[4], cl = 0;
	int rc = meta_get(txn, st->db_meta, "format", fb, 4);
	if (rc) {
		snprintf(err, PD_ERRLEN, "%s is not a pagededup store (no format record); run 'pagededup mkfs %s' on an empty directory to make one",
			 st->dir, st->dir);
		return -EINVAL;
	}
	uint32_t fmt = get_le32(fb);
	if (fmt < PD_FORMAT_OLDEST || fmt > PD_FORMAT_VERSION) {
		snprintf(err, PD_ERRLEN, "store %s has format version %u, this pagededup reads versions %u to %u; use the pagededup release that made it",
			 st->dir, fmt, PD_FORMAT_OLDEST, PD_FORMAT_VERSION);
		return -EPROTO;
	}
	st->format = fmt;
	rc = params_get(txn, st->db_meta, &st->params);
	if (!rc) rc = meta_get_u64(txn, st->db_meta, "generation", gen);
	if (!rc) rc = meta_get(txn, st->db_meta, "clean", &cl, 1);
	if (!rc) rc = counters_get(txn, st->db_meta, &st->counters);
	if (rc)
		snprintf(err, PD_ERRLEN, "store %s: meta table damaged (%s); run 'pagededup fsck %s'",
			 st->dir, strerror(-rc), st->dir);
	*clean = cl == 1;
	return rc;
}

int store_open(const char *dir, const struct store_opts *o, struct store **out, char err[PD_ERRLEN])
{
	struct store_opts defaults = { 0 };
	if (!o)
		o = &defaults;
	*err = 0;
	struct stat sb;
	if (o->create && !o->readonly && (stat(dir, &sb) || (S_ISDIR(sb.st_mode) && dir_is_empty(dir)))) {
		int rc = store_mkfs(dir, NULL, err);
		if (rc)
			return rc;
	}
	if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
		snprintf(err, PD_ERRLEN, "%s: %s", dir, errno ? strerror(errno) : "not a directory");
		return -ENOENT;
	}
	if (!is_store(dir)) {
		snprintf(err, PD_ERRLEN, "%s is not a pagededup store (no meta/data.mdb); run 'pagededup mkfs %s' to make one, or mount an empty directory",
			 dir, dir);
		return -EINVAL;
	}
	struct store *st = store_alloc(dir);
	if (!st)
		return -ENOMEM;
	st->opts = *o;
	st->readonly = o->readonly;
	int rc = 0;
	if (!st->readonly)
		rc = take_lock(st, err);
	st->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!rc && st->dirfd < 0)
		rc = -errno;
	if (!rc && !st->readonly && !(st->live = live_table_new()))
		rc = -ENOMEM;
	if (!rc && (rc = env_open(st, dir, st->readonly, o->sync_blobs, o->mapsize)))
		snprintf(err, PD_ERRLEN, "cannot open the LMDB environment in %s/meta: %s", dir,
			 rc == PD_EMAPFULL ? "map full" : strerror(-rc));
	bool clean = false;
	uint64_t gen = 0;
	if (!rc) {
		MDB_txn *txn;
		rc = pd_mdb_err(mdb_txn_begin(st->env, NULL, st->readonly ? MDB_RDONLY : 0, &txn));
		if (!rc && (rc = open_dbis(st, txn, 0)))
			snprintf(err, PD_ERRLEN, "%s is not a pagededup store (its LMDB has no pagededup tables); run 'pagededup mkfs' on an empty directory",
				 dir);
		if (!rc)
			rc = read_meta(st, txn, &clean, &gen, err);
		/* A writable open makes the near-duplicate tables a store from
		 * before them lacks; its pages join the index as they are sealed
		 * again (or at once with fsck --repair). */
		if (!rc)
			rc = near_open_tables(txn, st, st->readonly ? 0 : MDB_CREATE);
		uint32_t sigv = NEAR_SIG_VERSION;
		if (!rc && (rc = near_version_get(txn, st, &sigv)))
			snprintf(err, PD_ERRLEN, "store %s: cannot read the signature version: %s", dir, strerror(-rc));
		/* read-only: no answers from hashes of another version; writable:
		 * upgraded below */
		st->near_stale = st->readonly && sigv != NEAR_SIG_VERSION;
		if (!rc)
			rc = sigq_open_table(txn, st, st->readonly ? 0 : MDB_CREATE);
		rc = rc ? (mdb_txn_abort(txn), rc) : pd_mdb_err(mdb_txn_commit(txn));
	}
	if (!rc && (rc = pack_set_open(st->dirfd, st->readonly, o->pack_max_bytes, &st->packs)) && !*err)
		snprintf(err, PD_ERRLEN, "cannot open the packs of %s (%s/packs): %s", dir, dir, strerror(-rc));
	if (!rc && (rc = store_filter_load(st, clean, gen)) && !*err)
		snprintf(err, PD_ERRLEN, "cannot load the filter of %s: %s", dir, strerror(-rc));
	if (!rc && !st->readonly) {
		/* From here until a clean close, the filter file may hold counts
		 * LMDB never committed: mark the store unclean, durably. */
		st->generation = gen + 1;
		rc = store_write(st, mark_open_cb, &st->generation);
		/* A format 1 store opened for writing takes new pages in packs
		 * from now on: it is format 2, which the release that made it
		 * cannot read. */
		if (!rc && st->format < PD_FORMAT_VERSION && !o->blob_files)
			rc = store_write(st, format_up_cb, NULL);
		if (!rc)
			rc = pd_mdb_err(mdb_env_sync(st->env, 1));
		if (!rc)
			rc = live_drop_orphans(st);
		remove_staging(st);
		if (!rc && !clean)
			sweep_orphan_blobs(st);
		if (!rc && (rc = near_upgrade(st)) && !*err)
			snprintf(err, PD_ERRLEN, "cannot compute the near-duplicate signatures of %s again for this version: %s; run 'pagededup fsck --repair %s'",
				 dir, strerror(-rc), dir);
		if (rc && !*err)
			snprintf(err, PD_ERRLEN, "cannot open %s for writing: %s", dir, strerror(-rc));
	}
	if (!rc && !st->readonly)
		reserve_lmdb_space(st);
	if (!rc && !st->readonly && !o->sync_blobs) {
		st->sync_running = pthread_create(&st->sync_thread, NULL, sync_main, st) == 0;
	}
	if (!rc && !st->readonly && !o->no_split_thread)
		store_filter_thread_start(st);
	/* Pages a crash left without their signature are signed first. */
	if (!rc && !st->readonly && (rc = sigq_start(st)))
		snprintf(err, PD_ERRLEN, "cannot start the signer of %s: %s", dir, strerror(-rc));
	if (rc) {
		store_filter_thread_stop(st);
		stop_sync_thread(st);
		store_free(st);
		return rc;
	}
	st->generation = st->readonly ? gen : st->generation;
	*out = st;
	return 0;
}

static void stop_sync_thread(struct store *st)
{
	if (!st->sync_running)
		return;
	pthread_mutex_lock(&st->sync_mu);
	st->sync_stop = true;
	pthread_cond_signal(&st->sync_cv);
	pthread_mutex_unlock(&st->sync_mu);
	pthread_join(st->sync_thread, NULL);
	st->sync_running = false;
}

/* The tree with its final key counts, and the flag that vouches for the
 * leaf files. */
static int mark_clean_cb(struct wtx *w, void *arg)
{
	(void)arg;
	uint8_t one = 1;
	int rc = store_filter_save(w);
	return rc ? rc : meta_put(w->txn, w->st->db_meta, "clean", &one, 1);
}

int store_close(struct store *st)
{
	int rc = 0;
	if (!st)
		return 0;
	if (!st->readonly) {
		/* Every page signed, so that the store answers near queries
		 * fully once unmounted; what fails keeps its row for the next
		 * open. */
		sigq_drain(st);
		sigq_stop(st);
		if (st->blob_priv_stop)
			st->blob_priv_stop(st);
		store_filter_thread_stop(st);
		stop_sync_thread(st);
		rc = live_drop_orphans(st);
		if (!rc)
			rc = pd_mdb_err(mdb_env_sync(st->env, 1));
		/* The filter must be on disk before the flag that vouches for it. */
		if (!rc)
			rc = gf_sync(st->gf, st->generation);
		/* A blob whose file could not be removed after its last reference
		 * went (objects/ read-only for a while): try again now; if it still
		 * cannot go, the store stays unclean and the next open sweeps. */
		bool orphans_left = __atomic_load_n(&st->unlinks_failed, __ATOMIC_RELAXED) &&
				    sweep_orphan_blobs(st) > 0;
		if (!rc && !orphans_left)
			rc = store_write(st, mark_clean_cb, NULL);
		if (!rc)
			rc = pd_mdb_err(mdb_env_sync(st->env, 1));
	}
	store_free(st);
	return rc;
}

void store_abandon(struct store *st)
{
	if (!st)
		return;
	sigq_stop(st);
	if (st->blob_priv_stop)
		st->blob_priv_stop(st);
	store_filter_thread_stop(st);
	stop_sync_thread(st);
	store_free(st);
}

int store_sync(struct store *st)
{
	/* the records first, then the commits that name them */
	int rc = st->packs ? pack_sync(st->packs) : 0;
	return rc ? rc : pd_mdb_err(mdb_env_sync(st->env, 1));
}

/* ---- space for LMDB on a full disk -------------------------------------
 *
 * A commit needs fresh pages even to delete (copy-on-write), so on a full
 * disk a user could not free space by removing pages. The data file is
 * kept allocated RESERVE bytes past its last used page; when the disk
 * fills, those pages still let commits, deletes first, go through. */

#define LMDB_RESERVE (16ull << 20)

static void reserve_lmdb_space(struct store *st)
{
	int fd;
	MDB_envinfo info;
	MDB_stat ms;
	struct stat sb;
	if (st->readonly || mdb_env_get_fd(st->env, &fd) || fstat(fd, &sb))
		return;
	mdb_env_info(st->env, &info);
	mdb_env_stat(st->env, &ms);
	uint64_t used = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
	uint64_t want = used + LMDB_RESERVE;
	if (want > info.me_mapsize)
		want = info.me_mapsize;
	if ((uint64_t)sb.st_size >= used + LMDB_RESERVE / 2 || (uint64_t)sb.st_size >= want)
		return;
	/* Best effort: on a disk already full there is nothing more to take. */
	posix_fallocate(fd, 0, (off_t)want);
}

/* ---- transactions ---------------------------------------------------- */

static int grow_map(struct store *st)
{
	pthread_rwlock_wrlock(&st->map_lock);
	uint64_t want = st->mapsize * 2;
	int rc = pd_mdb_err(mdb_env_set_mapsize(st->env, want));
	if (!rc)
		st->mapsize = want;
	reserve_lmdb_space(st);
	pthread_rwlock_unlock(&st->map_lock);
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

void store_read_end(struct store *st, MDB_txn *txn)
{
	mdb_txn_abort(txn);
	pthread_rwlock_unlock(&st->map_lock);
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
	int rc = meta_get_u64(w->txn, w->st->db_meta, "next_ino", ino);
	if (!rc)
		rc = meta_put_u64(w->txn, w->st->db_meta, "next_ino", *ino + 1);
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
 * without it, since its partial changes went with the aborted transaction. */
static int batch_pass(struct store *st, struct store_wreq *head, struct wtx *w, struct pd_counters *total)
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
			counters_add(&batch, &w->delta);
		}
	}
	if (rc) {
		mdb_txn_abort(txn);
		return rc;
	}
	*total = st->counters; /* only the leader changes it */
	counters_add(total, &batch);
	rc = counters_put(txn, st->db_meta, total);
	return rc ? (mdb_txn_abort(txn), rc) : pd_mdb_err(mdb_txn_commit(txn));
}

/* Run a batch of requests in one transaction: one commit for all. A map
 * that fills is grown and the batch run again. */
static void run_batch(struct store *st, struct store_wreq *head)
{
	struct wtx w = { .st = st };
	struct pd_counters total;
	int rc;
	for (;;) {
		w.now = pd_now();
		pthread_rwlock_rdlock(&st->map_lock);
		rc = batch_pass(st, head, &w, &total);
		if (rc) {
			if (st->gf)
				gf_rollback(st->gf);
			unlinks_truncate(&w, 0);
		}
		pthread_rwlock_unlock(&st->map_lock);
		if (rc == 1)
			continue;
		if (rc == PD_EMAPFULL && (rc = grow_map(st)) == 0)
			continue;
		break;
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
		/* dead records give their blocks back (a failure leaves dead
		 * bytes, which the compactor reclaims) */
		for (size_t i = 0; i < w.n_punch; i++)
			pack_punch(st->packs, &w.punch_after[i]);
		if (++st->commits % 64 == 0)
			reserve_lmdb_space(st);
	}
	unlinks_truncate(&w, 0);
	free(w.unlink_after);
	free(w.punch_after);
}

int store_write(struct store *st, store_write_fn fn, void *arg)
{
	if (st->readonly)
		return -EROFS;
	struct store_wreq req = { .fn = fn, .arg = arg };
	pthread_mutex_lock(&st->gc_mu);
	*st->gc_tail = &req;
	st->gc_tail = &req.next;
	while (!req.done) {
		if (st->gc_leader) {
			pthread_cond_wait(&st->gc_cv, &st->gc_mu);
			continue;
		}
		/* Lead: take every queued request and commit them together. */
		st->gc_leader = true;
		struct store_wreq *batch = st->gc_head;
		st->gc_head = NULL;
		st->gc_tail = &st->gc_head;
		pthread_mutex_unlock(&st->gc_mu);
		run_batch(st, batch);
		pthread_mutex_lock(&st->gc_mu);
		for (struct store_wreq *r = batch; r; r = r->next)
			r->done = true;
		st->gc_leader = false;
		pthread_cond_broadcast(&st->gc_cv);
	}
	pthread_mutex_unlock(&st->gc_mu);
	return req.rc;
}
