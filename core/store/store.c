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
 * background thread (store_syncer.c) syncs LMDB every sync_ms, as ext4
 * commits its journal
 * every few seconds; a killed daemon loses nothing (the page cache has every
 * commit), a power loss may lose the last interval. fsync() on a file syncs
 * the store. -o sync_blobs makes every commit durable and fsyncs each blob
 * before the commit that refers to it; group commit keeps that affordable.
 */
#include "store_int.h"
#include "base/version.h"

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
#include "base/clock.h"


static int load_next_ino(struct store *st);

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
	p->expected_pages = STORE_DEFAULT_EXPECTED_PAGES;
	p->filter_fpr = 1e-4;
	p->filter_lines = 2;
	p->near_distance = STORE_PARAM_UNSET;
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

int store_meta_put_u64(MDB_txn *txn, MDB_dbi db, const char *key, uint64_t x)
{
	uint8_t b[8];
	put_le64(b, x);
	return meta_put(txn, db, key, b, 8);
}

int store_meta_get_u64(MDB_txn *txn, MDB_dbi db, const char *key, uint64_t *x)
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

int store_counters_put(MDB_txn *txn, MDB_dbi db, const struct pd_counters *c)
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

bool store_closing(struct store *st)
{
	return __atomic_load_n(&st->closing, __ATOMIC_ACQUIRE);
}

void store_counters_add(struct pd_counters *to, const struct pd_counters *d)
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
	mdb_env_set_maxdbs(st->env, PD_MAX_DBS);
	mdb_env_set_maxreaders(st->env, 510);
	/* No MDB_WRITEMAP: it would save the pwrite()s of a commit (measured:
	 * no visible gain on a cp of 20,000 pages, where FUSE round trips
	 * dominate), but a write through the map into a full disk is a SIGBUS
	 * that kills the daemon, where pwrite() returns ENOSPC.
	 * MDB_NORDAHEAD (MADV_RANDOM on the map): a fault on the map no longer
	 * reads ahead. The store's lookups are random, so what readahead
	 * brings is mostly pages nobody asked for; worse, the kernel brings it
	 * in large folios (up to 2 MiB here), and a commit's 4 KiB pwrite()
	 * into a large folio walks every block of the folio
	 * (ext4_block_write_begin): on an idle machine 15.9 us a write into
	 * 2 MiB folios, 2.9 into 64 KiB ones, 1.6 into pages of their own, and
	 * three to four times that beside a busy daemon (bench_folios;
	 * tests/bench/README.md, "LMDB's map and large folios"). The folios
	 * a commit's own writes would make are kept small by the primed
	 * reserve (store_commit.c). */
	unsigned flags = MDB_NOTLS | MDB_NORDAHEAD | (readonly ? MDB_RDONLY : 0) |
			 (durable || readonly ? 0 : MDB_NOSYNC);
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
	st->dirfd = st->lockfd = st->ckpt_fd = st->ckpt_data_fd = -1;
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
	pthread_mutex_init(&st->reader_mu, NULL);
	pthread_mutex_init(&st->punch_mu, NULL);
	pthread_mutex_init(&st->sync_run_mu, NULL);
	pthread_cond_init(&st->split_cv, NULL);
	if (!st->dir) {
		free(st);
		return NULL;
	}
	return st;
}

static int set_parts(struct store *st, const struct store_part *const *parts)
{
	for (st->n_parts = 0; parts && parts[st->n_parts]; st->n_parts++) {
		if (st->n_parts == STORE_MAX_PARTS)
			return -E2BIG;
		st->parts[st->n_parts] = parts[st->n_parts];
	}
	return 0;
}

static void store_free(struct store *st)
{
	store_drop_later(st); /* their arguments belong to the parts */
	/* The parts first: their threads use the environment. */
	for (unsigned i = st->n_parts; i-- > 0;)
		if (st->parts[i]->release)
			st->parts[i]->release(st);
	gf_close(st->gf);
	pack_set_close(st->packs);
	store_ckpt_close(st); /* its read transaction before the environment */
	store_journal_close(st);
	if (st->env)
		mdb_env_close(st->env);
	if (st->dirfd >= 0)
		close(st->dirfd);
	if (st->lockfd >= 0)
		close(st->lockfd);
	pthread_rwlock_destroy(&st->map_lock);
	pthread_mutex_destroy(&st->gc_mu);
	pthread_cond_destroy(&st->gc_cv);
	pthread_mutex_destroy(&st->sync_mu);
	pthread_cond_destroy(&st->sync_cv);
	pthread_mutex_destroy(&st->split_mu);
	pthread_mutex_destroy(&st->reader_mu);
	pthread_mutex_destroy(&st->punch_mu);
	pthread_mutex_destroy(&st->sync_run_mu);
	pthread_cond_destroy(&st->split_cv);
	free(st->punch_wait); /* not punched: dead bytes the compactor finds */
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

static int parts_create(struct store *st, MDB_txn *txn)
{
	int rc = 0;
	for (unsigned i = 0; !rc && i < st->n_parts; i++)
		if (st->parts[i]->create)
			rc = st->parts[i]->create(txn, st);
	return rc;
}

int store_mkfs(const char *dir, const struct store_params *p, const struct store_part *const *parts,
	       char err[PD_ERRLEN])
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
	rc = set_parts(st, parts);
	if (!rc)
		rc = env_open(st, dir, false, true, 0);
	if (!rc)
		rc = pd_mdb_err(mdb_txn_begin(st->env, NULL, 0, &txn));
	if (!rc)
		rc = open_dbis(st, txn, MDB_CREATE);
	if (!rc)
		rc = parts_create(st, txn);
	if (!rc) {
		uint32_t fmt = PD_FORMAT_VERSION;
		uint8_t one = 1, fb[4];
		put_le32(fb, fmt);
		rc = meta_put(txn, st->db_meta, "format", fb, 4);
		if (!rc) rc = params_put(txn, st->db_meta, &st->params);
		if (!rc) rc = store_meta_put_u64(txn, st->db_meta, "generation", 1);
		if (!rc) rc = meta_put(txn, st->db_meta, "clean", &one, 1);
		if (!rc) rc = store_meta_put_u64(txn, st->db_meta, "next_ino", PD_ROOT_INO + 1);
		if (!rc) rc = store_counters_put(txn, st->db_meta, &zero);
		if (!rc) rc = make_root(st, txn);
		if (!rc) rc = meta_put(txn, st->db_meta, STORE_META_MADE_BY, pd_version(), strlen(pd_version()));
	}
	if (!rc)
		rc = mkfs_filter(st, txn, &st->params);
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
		rc = store_meta_put_u64(w->txn, w->st->db_meta, "generation", *(uint64_t *)arg);
	if (!rc)
		rc = meta_put(w->txn, w->st->db_meta, STORE_META_WRITTEN_BY, pd_version(), strlen(pd_version()));
	return rc;
}

/* A version record (made_by, written_by): "" when the store has none (made
 * before versions were recorded). */
static void version_get(MDB_txn *txn, MDB_dbi db, const char *key, char out[STORE_VERSION_LEN])
{
	MDB_val k = { strlen(key), (void *)key }, v;
	*out = 0;
	if (!mdb_get(txn, db, &k, &v) && v.mv_size < STORE_VERSION_LEN) {
		memcpy(out, v.mv_data, v.mv_size);
		out[v.mv_size] = 0;
	}
}

int store_versions(struct store *st, char made_by[STORE_VERSION_LEN], char written_by[STORE_VERSION_LEN])
{
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	version_get(txn, st->db_meta, STORE_META_MADE_BY, made_by);
	version_get(txn, st->db_meta, STORE_META_WRITTEN_BY, written_by);
	store_read_end(st, txn);
	return 0;
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

static void version_get(MDB_txn *txn, MDB_dbi db, const char *key, char out[STORE_VERSION_LEN]);

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
		char made[STORE_VERSION_LEN], written[STORE_VERSION_LEN];
		version_get(txn, st->db_meta, STORE_META_MADE_BY, made);
		version_get(txn, st->db_meta, STORE_META_WRITTEN_BY, written);
		snprintf(err, PD_ERRLEN, "store %s has format version %u (made by pagededup %s, last written by %s), "
			 "this pagededup %s reads versions %u to %u; use a pagededup release of that format",
			 st->dir, fmt, *made ? made : "before 0.9.0", *written ? written : "it", pd_version(),
			 PD_FORMAT_OLDEST, PD_FORMAT_VERSION);
		return -EPROTO;
	}
	st->format = fmt;
	rc = params_get(txn, st->db_meta, &st->params);
	if (!rc) rc = store_meta_get_u64(txn, st->db_meta, "generation", gen);
	if (!rc) rc = meta_get(txn, st->db_meta, "clean", &cl, 1);
	if (!rc) rc = counters_get(txn, st->db_meta, &st->counters);
	if (rc)
		snprintf(err, PD_ERRLEN, "store %s: meta table damaged (%s); run 'pagededup fsck %s'",
			 st->dir, strerror(-rc), st->dir);
	*clean = cl == 1;
	return rc;
}

static int parts_open(struct store *st, MDB_txn *txn, char err[PD_ERRLEN])
{
	int rc = 0;
	for (unsigned i = 0; !rc && i < st->n_parts; i++)
		if (st->parts[i]->open && (rc = st->parts[i]->open(txn, st, err)) && !*err)
			snprintf(err, PD_ERRLEN, "cannot open the tables of the %s of %s: %s", st->parts[i]->name,
				 st->dir, strerror(-rc));
	return rc;
}

static int parts_start(struct store *st, bool clean, char err[PD_ERRLEN])
{
	int rc = 0;
	for (unsigned i = 0; !rc && i < st->n_parts; i++)
		if (st->parts[i]->start && (rc = st->parts[i]->start(st, clean, err)) && !*err)
			snprintf(err, PD_ERRLEN, "cannot start the %s of %s: %s", st->parts[i]->name, st->dir,
				 strerror(-rc));
	return rc;
}

/* 0, 1 when a part asks that the store stay unclean, or the first error. */
static int parts_stop(struct store *st)
{
	int rc = 0;
	for (unsigned i = st->n_parts; i-- > 0;) {
		int r = st->parts[i]->stop ? st->parts[i]->stop(st) : 0;
		if (r < 0 && rc >= 0)
			rc = r;
		else if (r > 0 && rc == 0)
			rc = 1;
	}
	return rc;
}

/* LMDB's last page in use: the file's high-water mark. */
static uint64_t lmdb_last_page(struct store *st)
{
	MDB_envinfo info;
	return store_env_info(st, &info, NULL) ? 0 : (uint64_t)info.me_last_pgno;
}

int store_open(const char *dir, const struct store_opts *o, const struct store_part *const *parts,
	       struct store **out, char err[PD_ERRLEN])
{
	struct store_opts defaults = { 0 };
	if (!o)
		o = &defaults;
	*err = 0;
	struct stat sb;
	if (o->create && !o->readonly && (stat(dir, &sb) || (S_ISDIR(sb.st_mode) && dir_is_empty(dir)))) {
		int rc = store_mkfs(dir, NULL, parts, err);
		if (rc)
			return rc;
	}
	if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) {
		snprintf(err, PD_ERRLEN, "%s: %s", dir, errno ? strerror(errno) : "not a directory");
		return -ENOENT;
	}
	if (!is_store(dir)) {
		snprintf(err, PD_ERRLEN, "%s is not a pagededup store (no meta/data.mdb); 'pagededup mkfs' makes one in an empty or new directory",
			 dir);
		return -EINVAL;
	}
	struct store *st = store_alloc(dir);
	if (!st)
		return -ENOMEM;
	st->opts = *o;
	st->readonly = o->readonly;
	int rc = set_parts(st, parts);
	/* A store whose last run lost its page cache goes back to its last
	 * checkpoint before LMDB opens; before the lock, which the recovery
	 * takes for its own while. */
	if (!rc && (rc = store_ckpt_recover(dir, err)) > 0)
		rc = 0;
	if (!rc && !st->readonly)
		rc = take_lock(st, err);
	st->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!rc && st->dirfd < 0)
		rc = -errno;
	if (!rc && (rc = env_open(st, dir, st->readonly, o->sync_blobs, o->mapsize)))
		snprintf(err, PD_ERRLEN, "cannot open the LMDB environment in %s/meta: %s", dir,
			 rc == PD_EMAPFULL ? "map full" : strerror(-rc));
	if (!rc && !st->readonly)
		rc = store_syncer_first_checkpoint(st, err);
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
		if (!rc)
			rc = parts_open(st, txn, err);
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
		/* A format 1 or 2 store opened for writing takes new pages in
		 * packs, and deltas, from now on: it is format 3, which the
		 * release that made it cannot read safely. */
		if (!rc && st->format < PD_FORMAT_VERSION && !o->blob_files)
			rc = store_write(st, format_up_cb, NULL);
		/* format 6: the fingerprint rows written before, in layout 2 */
		if (!rc)
			rc = store_fp_rows_upgrade(st);
		/* format 7: blobs of one inode keep it in their row */
		if (!rc)
			rc = store_blob_inodes_upgrade(st, NULL);
		if (!rc)
			rc = store_checkpoint(st, store_sync_files);
		if (!rc)
			rc = load_next_ino(st);
		if (!rc)
			rc = store_journal_open(st);
		remove_staging(st);
		store_lmdb_drop_leftover(st->dirfd); /* a rewrite killed at a close */
		if (rc && !*err)
			snprintf(err, PD_ERRLEN, "cannot open %s for writing: %s", dir, strerror(-rc));
	}
	if (!rc && !st->readonly)
		store_reserve_lmdb_space(st);
	st->lmdb_pages_at_open = rc ? 0 : lmdb_last_page(st);
	if (!rc && !st->readonly)
		store_syncer_start(st);
	if (!rc && !st->readonly && !o->no_split_thread)
		store_filter_thread_start(st);
	if (!rc && !st->readonly)
		rc = parts_start(st, clean, err);
	if (rc) {
		store_filter_thread_stop(st);
		store_syncer_stop(st);
		store_free(st);
		return rc;
	}
	st->generation = st->readonly ? gen : st->generation;
	*out = st;
	return 0;
}

/* The next inode number into memory (store.h, next_ino), where numbers
 * are given from then on. */
static int load_next_ino(struct store *st)
{
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = store_meta_get_u64(txn, st->db_meta, "next_ino", &st->next_ino);
	store_read_end(st, txn);
	st->next_ino_ready = rc == 0;
	return rc;
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

/* Did this open grow LMDB by LMDB_REWRITE_GROWTH or more? A mount that
 * wrote a few pages, or none (its own marks and the parts' housekeeping
 * commit too), is not worth a rewrite of the whole file. */
static bool lmdb_grew(struct store *st)
{
	uint64_t was = st->lmdb_pages_at_open, now = lmdb_last_page(st);
	return was && now >= was + was / LMDB_REWRITE_GROWTH;
}

/* The bytes of LMDB's pages in use: its last page less its free ones,
 * what a rewrite copies, and so what its time and its room follow. The
 * file itself may be many times that: the checkpoints' readers keep a
 * sync interval of freed pages from reuse (store_ckpt.c). 0: LMDB cannot
 * say. */
static uint64_t lmdb_bytes_in_use(struct store *st)
{
	MDB_envinfo info;
	MDB_stat ms;
	MDB_txn *txn;
	uint64_t free_pages = 0;
	if (store_env_info(st, &info, &ms) || mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn))
		return 0;
	int rc = store_lmdb_free_pages(txn, 0, &free_pages, NULL);
	mdb_txn_abort(txn);
	uint64_t pages = (uint64_t)info.me_last_pgno + 1;
	return rc || free_pages > pages ? 0 : (pages - free_pages) * ms.ms_psize;
}

/* LMDB's file written again once the store is closed, its lock still
 * held so that no other process opens it meanwhile (store_opts'
 * lmdb_rewrite_max, compared with the bytes in use). A rewrite that fails
 * leaves the old file, which is whole and clean: it is said, and the
 * close still succeeds. */
static void rewrite_lmdb(struct store *st)
{
	uint64_t in_use = lmdb_bytes_in_use(st);
	char *dir = strdup(st->dir);
	uint64_t max = st->opts.lmdb_rewrite_max;
	int lockfd = st->lockfd;
	st->lockfd = -1;
	store_free(st);
	if (!dir) {
		close(lockfd);
		return;
	}
	char err[PD_ERRLEN] = "";
	uint64_t before = 0, after = 0;
	uint64_t t0 = pd_clock_ns(CLOCK_MONOTONIC);
	int rc = 0;
	if (in_use)
		rc = store_lmdb_rewrite_held(dir, max, in_use, &before, &after, err);
	else
		snprintf(err, sizeof err, "LMDB did not say how many of its pages are in use");
	if (rc > 0)
		fprintf(stderr, "pagededupfs: LMDB's file written again at the close: %llu -> %llu bytes allocated in %.2f s\n",
			(unsigned long long)before, (unsigned long long)after,
			(double)(pd_clock_ns(CLOCK_MONOTONIC) - t0) / 1e9);
	else
		fprintf(stderr, "pagededupfs: LMDB's file left as it was at the close: %s\n", err);
	close(lockfd);
	free(dir);
}

int store_close(struct store *st)
{
	int rc = 0;
	if (!st)
		return 0;
	__atomic_store_n(&st->closing, true, __ATOMIC_RELEASE);
	if (!st->readonly) {
		/* What waits for a commit commits; then the parts finish their
		 * work (the signer drains, open but unlinked inodes go); one
		 * that leaves something for the next open keeps the store
		 * unclean. */
		int settle_rc = store_settle(st);
		int parts_rc = parts_stop(st);
		if (settle_rc && !parts_rc)
			parts_rc = settle_rc;
		rc = parts_rc < 0 ? parts_rc : 0;
		store_filter_thread_stop(st);
		store_syncer_stop(st);
		if (!rc)
			rc = pd_mdb_err(mdb_env_sync(st->env, 1));
		/* The filter must be on disk before the flag that vouches for it. */
		if (!rc)
			rc = gf_sync(st->gf, st->generation);
		if (!rc && parts_rc == 0)
			rc = store_write(st, mark_clean_cb, NULL);
		if (!rc)
			rc = pd_mdb_err(mdb_env_sync(st->env, 1));
		/* all of it on disk: a later open has nothing to restore */
		if (!rc && parts_rc == 0) {
			rc = store_ckpt_mark_closed(st);
			if (!rc)
				store_journal_trim(st);
		}
		if (!rc) {
			struct store_punches dead = store_punches_take(st);
			store_punches_settle(st, &dead, true);
		}
	}
	if (!rc && !st->readonly && st->opts.lmdb_rewrite_max && lmdb_grew(st))
		rewrite_lmdb(st);
	else
		store_free(st);
	return rc;
}

void store_abandon(struct store *st)
{
	if (!st)
		return;
	store_filter_thread_stop(st);
	store_syncer_stop(st);
	store_free(st); /* the parts' release hooks stop their threads */
}

int store_sync(struct store *st)
{
	/* the records first, then the commits that name them */
	return store_checkpoint(st, store_sync_files);
}

static uint64_t punched_so_far(struct store *st)
{
	pthread_mutex_lock(&st->punch_mu);
	uint64_t n = st->punched;
	pthread_mutex_unlock(&st->punch_mu);
	return n;
}

int store_punch_waiting(struct store *st)
{
	if (st->readonly)
		return 0;
	/* Counted from before: a sync the thread has running when this
	 * waits for it gives its records back too. */
	uint64_t before = punched_so_far(st);
	int rc = store_sync(st);
	if (rc)
		return rc;
	uint64_t n = punched_so_far(st) - before;
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

