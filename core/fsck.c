/* fsck.c - the store checker and repairer. What it checks and what repair
 * does are listed in fsck.h.
 *
 * Speed. A store of a million pages must check in well under two minutes
 * on two cores, so a clean check never looks a record up at random: it
 * reads every table once, in LMDB key order, and joins the tables that
 * share an order by walking their cursors side by side:
 *   - inodes, links and orphans (all keyed by ino): names per inode, link
 *     counts, orphan marks, the parent of each directory;
 *   - fingerprints and blob_inodes (both keyed by blob key) and the
 *     objects/ directories, read in the same order (objects/abc holds the
 *     keys whose MD5 starts with abc): refcounts, blob files, positions;
 *   - the filter's counters and `saturated` (both by counter index).
 * Two pairs of tables mirror each other without sharing an order: dirents
 * (by parent) and links (by child), and blob_inodes (by blob) and the blob
 * key inside each inode (by ino). For those, each side's facts are summed
 * as 128-bit hashes (a multiset hash of (child, type, parent, name) for a
 * name, of (blob, ino) for a reference); equal sums and counts prove that
 * both sides hold the same facts, but for a 2^-64 chance. Only when they
 * differ does a diagnosis pass look each fact up on the other side to name
 * the ones that differ.
 *
 * Memory: one entry per directory (not per file), the names of one
 * objects/ subdirectory at a time, one byte per filter counter (a counter
 * with 255 or more positions on it, which needs a badly overfilled filter,
 * goes to a small map), and the list of problems found. Measured on a
 * store of 1,000,000 pages (500,000 blobs, tests/bench/bench_fsck.c) on 2
 * cores: 21 MB of heap (the 21.5 million counters of its filter) and about
 * 3 s with the page cache warm, 10 to 13 s cold; the LMDB pages it reads
 * are mapped, so they count in its RSS as page cache, not as heap.
 *
 * --deep hashes the blob files of one objects/ subdirectory at a time on
 * several threads (opts.threads), since reading and hashing is the cost.
 *
 * Repair. The check only reads (a read transaction) and collects what is
 * wrong; repair then runs one write transaction, in this order: names
 * (dirents and links), blob_inodes, per-blob fixes (refcounts, unreferenced
 * records, records rebuilt from files, lost pages to lost+found), nameless
 * inodes to lost+found, the directory tree (extra names, directories cut
 * off from the root), then link counts, orphan marks and totals recounted
 * from the tables as repaired. Damaged blob files move to STORE/damaged/
 * just before the commit (and back if it fails), orphan files are removed
 * after it; finally the store is opened and closed through store_open(),
 * which rebuilds the filter from the stored positions (the transaction
 * marks the store unclean when the filter or a record changed) and deletes
 * orphans. A crash at any point leaves a store that the next fsck --repair
 * takes further, and never deletes bytes a page refers to.
 *
 * The store is opened here directly (LMDB environment, tables, meta,
 * filter) rather than with store_open(): a damaged store may fail the
 * recovery store_open() runs when it opens for writing (dropping orphans
 * and rebuilding the filter both trust the tables), and fsck must be able
 * to open exactly such a store. The functions of ns.c and blob.c that take
 * a transaction are used on a struct store that holds only the environment,
 * the table handles, the directory and the filter.
 */
#include "fsck.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "blob.h"
#include "fp.h"
#include "ns.h"
#include "paths.h"
#include "rec.h"
#include "store.h"

#define REPORT_LINES 50        /* lines per kind of problem, then a count */
#define PROGRESS_EVERY 16384   /* items between progress calls */
#define MAX_THREADS 16

/* ---- growable arrays and a byte arena -------------------------------- */

struct vec {
	char *v;
	size_t n, cap, el;
};

#define VEC(type) { NULL, 0, 0, sizeof(type) }
#define AT(vec, type, i) (((type *)(vec).v)[i])

/* A zeroed new element at the end, NULL if out of memory. */
static void *vec_push(struct vec *a)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 64;
		char *p = realloc(a->v, cap * a->el);
		if (!p)
			return NULL;
		a->v = p;
		a->cap = cap;
	}
	void *e = a->v + a->n++ * a->el;
	memset(e, 0, a->el);
	return e;
}

static void vec_free(struct vec *a)
{
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

/* Append len bytes to an arena (a vec of char); their offset, or
 * SIZE_MAX if out of memory. */
static size_t arena_add(struct vec *a, const void *p, size_t len)
{
	size_t off = a->n;
	if (!len)
		return off;
	while (a->n + len > a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 4096;
		char *q = realloc(a->v, cap);
		if (!q)
			return SIZE_MAX;
		a->v = q;
		a->cap = cap;
	}
	memcpy(a->v + off, p, len);
	a->n += len;
	return off;
}

/* ---- what the check keeps -------------------------------------------- */

/* Kinds of report lines: each kind shows REPORT_LINES lines, then counts. */
enum kind {
	K_NOTE, K_REPAIR, K_INODE, K_NAME, K_LINK, K_NLINK, K_TREE, K_ORPHAN, K_BLOBREF,
	K_REFCOUNT, K_BLOB, K_FILE, K_FILTER, K_TOTAL, K_LEFT, K_N
};
static const char *const kind_name[K_N] = {
	"notes", "repairs", "inode problems", "name problems", "link record problems",
	"link count problems", "directory tree problems", "orphan problems", "blob reference problems",
	"refcount problems", "blob problems", "orphan files", "filter problems", "total problems",
	"problems left"
};

struct dnode {
	uint64_t ino, parent; /* parent: of its first link record, 0 if none */
	uint32_t nlink, names, subdirs;
	uint8_t state;        /* tree walk: 0 unknown, 1 on the path, 2 connected, 3 not */
	bool orphan;
};

/* A (blob, ino) reference. */
struct bref {
	uint8_t key[BLOBKEY_BYTES];
	uint64_t ino;
};

/* Name repairs. */
enum nfix_kind {
	NF_DANGLING,      /* dirent whose inode does not exist: remove */
	NF_STRAY_LINK,    /* link record of an inode that does not exist: remove */
	NF_ADD_LINK,      /* dirent without its link record: add it */
	NF_ADD_DIRENT,    /* link record without its dirent: restore it, or drop the link */
	NF_LINK_MISMATCH, /* link record whose name is another inode: remove */
	NF_TYPE,          /* dirent with the wrong type: rewrite */
	NF_REHASH,        /* dirent under the wrong hash: refile */
	NF_BAD_PARENT,    /* dirent in something that is not a directory: to lost+found */
	NF_BAD_NAME,      /* dirent with an impossible name: to lost+found */
	NF_RAW_DIRENT,    /* undecodable dirent: remove (key, value in the arena) */
	NF_RAW_LINK,      /* malformed link record: remove */
	NF_RAW_BLOBREF,   /* malformed blob_inodes entry: remove */
	NF_RAW_FP,        /* fingerprint record with a malformed key: remove */
};
struct nfix {
	uint8_t kind;
	uint32_t type;          /* S_IFMT of the dirent */
	uint64_t parent, child, hash;
	size_t off;             /* name (or raw key then value) in the arena */
	uint32_t len, vlen;     /* name length (raw: key length, value length) */
};

/* Per-blob repairs. */
enum kfix_kind { KF_REFCOUNT, KF_UNREFERENCED, KF_LOST, KF_RECREATE, KF_REPOS };
struct kfix {
	uint8_t key[BLOBKEY_BYTES];
	uint8_t kind;
	bool file;      /* its file is in objects/ */
	bool damaged;   /* KF_LOST: the file holds other bytes (moved to damaged/) */
	bool bad_record; /* the record is undecodable */
	uint64_t refs;
};

/* A file to remove after the commit (offset of its path in the arena). */
struct pathref {
	size_t off;
	uint32_t len;
};

struct fsck {
	const struct fsck_opts *o;
	struct fsck_result *res;
	const char *dir;
	int lockfd;
	struct store sh;        /* environment, tables, dir fd, filter */
	MDB_txn *txn;
	bool writable, clean, filter_trusted;
	uint64_t generation;
	struct pd_counters stored; /* the totals in meta */
	struct pd_counters computed;
	struct pd_time now;
	uint64_t shown[K_N];
	/* namespace */
	struct vec dirs;        /* struct dnode, by ino */
	XXH128_hash_t s_dirent, s_link, s_iblob, s_bi;
	uint64_t n_dirent, n_link, n_iblob, n_bi;
	uint64_t bad_inodes;
	/* filter */
	uint64_t ncounters;
	uint8_t *tally;         /* stored positions per counter, up to 255 */
	struct vec tally_over;  /* struct { idx, count } for counters at 255 and more */
	struct cbf *anon;       /* geometry for positions when the filter is unusable */
	/* what repair does */
	struct vec nfix, arena, stale, missing, kfix, rm_files;
	bool fix_filter, fix_any;
	uint64_t lf_ino;        /* repair: the lost+found directory */
	unsigned threads;
};

static void say(struct fsck *f, enum kind k, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(struct fsck *f, enum kind k, const char *fmt, ...)
{
	if (k == K_NOTE)
		f->res->notes++;
	else if (k == K_REPAIR)
		f->res->repaired++;
	else if (k != K_LEFT)
		f->res->problems++;
	if (++f->shown[k] > REPORT_LINES || !f->o->report)
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	f->o->report(f->o->ctx, line);
}

static void say_more(struct fsck *f)
{
	for (int k = 0; k < K_N; k++)
		if (f->shown[k] > REPORT_LINES && f->o->report) {
			char line[160];
			snprintf(line, sizeof line, "... and %llu more %s (not shown)",
				 (unsigned long long)(f->shown[k] - REPORT_LINES), kind_name[k]);
			f->o->report(f->o->ctx, line);
		}
	memset(f->shown, 0, sizeof f->shown);
}

static void prog(struct fsck *f, const char *phase, uint64_t done, uint64_t total)
{
	if (f->o->progress)
		f->o->progress(f->o->ctx, phase, done, total);
}

static void tick(struct fsck *f, const char *phase, uint64_t *done, uint64_t total)
{
	if (++*done % PROGRESS_EVERY == 0)
		prog(f, phase, *done, total);
}

static uint64_t entries(struct fsck *f, MDB_dbi db)
{
	MDB_stat ms;
	return mdb_stat(f->txn, db, &ms) ? 0 : ms.ms_entries;
}

static void blob_name(const uint8_t key[BLOBKEY_BYTES], char out[48])
{
	struct blobkey k;
	blobkey_decode(key, &k);
	fp_hex(k.md5, out);
	if (k.variant)
		snprintf(out + 32, 16, ".%u", k.variant);
}

static const char *type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symlink";
	case S_IFCHR: return "character device";
	case S_IFBLK: return "block device";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	default: return "unknown type";
	}
}

static bool name_valid(const char *name, size_t len)
{
	if (len == 0 || len > PD_NAME_MAX || memchr(name, '/', len) || memchr(name, 0, len))
		return false;
	return !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

/* ---- opening the store ------------------------------------------------ */

static int64_t *counter_field(struct pd_counters *c, unsigned i)
{
	/* the layout of "counters" in meta: the ten totals, then the histogram */
	return i < 10 ? &(&c->pages)[i] : &c->hist[i - 10];
}

static int meta_get(struct fsck *f, const char *key, void *out, size_t len)
{
	MDB_val k = { strlen(key), (void *)key }, v;
	int rc = pd_mdb_err(mdb_get(f->txn, f->sh.db_meta, &k, &v));
	if (!rc && v.mv_size != len)
		rc = -EUCLEAN;
	if (!rc)
		memcpy(out, v.mv_data, len);
	return rc;
}

static int meta_put(struct fsck *f, const char *key, const void *val, size_t len)
{
	MDB_val k = { strlen(key), (void *)key }, v = { len, (void *)val };
	return pd_mdb_err(mdb_put(f->txn, f->sh.db_meta, &k, &v, 0));
}

static int counters_read(struct fsck *f, struct pd_counters *c)
{
	uint8_t b[PD_COUNTERS_N * 8];
	int rc = meta_get(f, "counters", b, sizeof b);
	for (unsigned i = 0; !rc && i < PD_COUNTERS_N; i++)
		*counter_field(c, i) = (int64_t)get_le64(b + 8 * i);
	return rc;
}

static int counters_write(struct fsck *f, struct pd_counters *c)
{
	uint8_t b[PD_COUNTERS_N * 8];
	for (unsigned i = 0; i < PD_COUNTERS_N; i++)
		put_le64(b + 8 * i, (uint64_t)*counter_field(c, i));
	return meta_put(f, "counters", b, sizeof b);
}

static int lock_store(struct fsck *f, char err[512])
{
	char path[4096];
	snprintf(path, sizeof path, "%s/lock", f->dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, 512, "cannot open %s: %s", path, strerror(errno));
		return -errno;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		close(fd);
		snprintf(err, 512, "%s is in use (mounted?); unmount it before fsck", f->dir);
		return -EBUSY;
	}
	f->lockfd = fd;
	return 0;
}

static int open_store(struct fsck *f, char err[512])
{
	struct store *s = &f->sh;
	char path[4096];
	struct stat sb;
	snprintf(path, sizeof path, "%s/meta/data.mdb", f->dir);
	if (stat(path, &sb)) {
		snprintf(err, 512, "%s is not a pagededup store (no meta/data.mdb)", f->dir);
		return -EINVAL;
	}
	s->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dirfd < 0)
		return -errno;
	int rc = pd_mdb_err(mdb_env_create(&s->env));
	if (rc)
		return rc;
	mdb_env_set_maxdbs(s->env, 16);
	if (f->writable) /* room for the repair; the map is only reserved */
		mdb_env_set_mapsize(s->env, (size_t)sb.st_size * 2 + (1ull << 30));
	snprintf(path, sizeof path, "%s/meta", f->dir);
	rc = pd_mdb_err(mdb_env_open(s->env, path, MDB_NOTLS | (f->writable ? 0 : MDB_RDONLY), 0600));
	if (rc) {
		snprintf(err, 512, "cannot open the LMDB environment in %s: %s", path, strerror(-rc));
		mdb_env_close(s->env);
		s->env = NULL;
		return rc;
	}
	/* The tables, as store.c makes them. */
	static const struct { const char *name; size_t off; unsigned flags; } t[] = {
		{ "meta", offsetof(struct store, db_meta), 0 },
		{ "inodes", offsetof(struct store, db_inodes), 0 },
		{ "dirents", offsetof(struct store, db_dirents), MDB_DUPSORT },
		{ "links", offsetof(struct store, db_links), MDB_DUPSORT },
		{ "fingerprints", offsetof(struct store, db_fp), 0 },
		{ "blob_inodes", offsetof(struct store, db_blob_inodes), MDB_DUPSORT | MDB_DUPFIXED },
		{ "xattrs", offsetof(struct store, db_xattrs), 0 },
		{ "saturated", offsetof(struct store, db_saturated), 0 },
		{ "orphans", offsetof(struct store, db_orphans), 0 },
	};
	if ((rc = pd_mdb_err(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &f->txn))))
		return rc;
	for (size_t i = 0; i < sizeof t / sizeof t[0] && !rc; i++)
		if ((rc = pd_mdb_err(mdb_dbi_open(f->txn, t[i].name, t[i].flags,
						  (MDB_dbi *)((char *)s + t[i].off)))))
			snprintf(err, 512, "%s is not a pagededup store (no table '%s')", f->dir, t[i].name);
	uint8_t fb[4], cl = 0, pb[24], gb[8];
	if (!rc && (meta_get(f, "format", fb, 4) || get_le32(fb) != PD_FORMAT_VERSION)) {
		snprintf(err, 512, "%s: no format record, or a format this fsck does not know", f->dir);
		rc = -EPROTO;
	}
	if (!rc && (meta_get(f, "params", pb, sizeof pb) || meta_get(f, "generation", gb, 8) ||
		    meta_get(f, "clean", &cl, 1) || counters_read(f, &f->stored))) {
		snprintf(err, 512, "%s: the meta table is damaged (params, generation, clean flag or totals); fsck cannot repair that",
			 f->dir);
		rc = -EUCLEAN;
	}
	if (!rc) {
		uint64_t bits = get_le64(pb + 8);
		s->params.expected_pages = get_le64(pb);
		memcpy(&s->params.filter_fpr, &bits, 8);
		s->params.filter_lines = get_le32(pb + 16);
		s->params.near_distance = get_le32(pb + 20);
		f->generation = get_le64(gb);
		f->clean = cl == 1;
		s->counters = f->stored;
		rc = pd_mdb_err(mdb_txn_commit(f->txn)); /* keeps the table handles */
	} else {
		mdb_txn_abort(f->txn);
	}
	f->txn = NULL;
	if (rc)
		return rc;
	snprintf(path, sizeof path, "%s/filter", f->dir);
	if (cbf_open(path, true, &s->filter))
		s->filter = NULL;
	return 0;
}

static void close_store(struct fsck *f)
{
	if (f->txn)
		mdb_txn_abort(f->txn);
	f->txn = NULL;
	if (f->sh.filter)
		cbf_close(f->sh.filter);
	f->sh.filter = NULL;
	if (f->sh.env)
		mdb_env_close(f->sh.env);
	f->sh.env = NULL;
	if (f->sh.dirfd >= 0)
		close(f->sh.dirfd);
	f->sh.dirfd = -1;
}

/* A filter whose geometry gives the positions of a key (the store's, or
 * one made from the store's parameters when the file is unusable). */
static const struct cbf *geometry_filter(struct fsck *f)
{
	if (f->sh.filter)
		return f->sh.filter;
	if (!f->anon) {
		struct cbf_geometry g;
		struct store_params *p = &f->sh.params;
		if (cbf_geometry_for(p->expected_pages, p->filter_fpr, p->filter_lines, &g) ||
		    cbf_create(NULL, &g, 0, &f->anon))
			return NULL;
	}
	return f->anon;
}

/* ---- facts and their sums --------------------------------------------- */

static void sum_add(XXH128_hash_t *s, const void *buf, size_t len)
{
	XXH128_hash_t h = XXH3_128bits(buf, len);
	s->low64 += h.low64;
	s->high64 += h.high64;
}

/* The fact "name (parent, name) is inode child of type type". */
static void name_fact(XXH128_hash_t *s, uint64_t child, uint32_t type, uint64_t parent, const char *name,
		      size_t len)
{
	uint8_t b[17 + PD_NAME_MAX];
	if (len > PD_NAME_MAX)
		len = PD_NAME_MAX;
	put_be64(b, child);
	put_be64(b + 8, parent);
	b[16] = (uint8_t)(type >> 12);
	memcpy(b + 17, name, len);
	sum_add(s, b, 17 + len);
}

/* The fact "inode ino is on blob key". */
static void blob_fact(XXH128_hash_t *s, const uint8_t key[BLOBKEY_BYTES], uint64_t ino)
{
	uint8_t b[BLOBKEY_BYTES + 8];
	memcpy(b, key, BLOBKEY_BYTES);
	put_be64(b + BLOBKEY_BYTES, ino);
	sum_add(s, b, sizeof b);
}

static bool sums_equal(XXH128_hash_t a, XXH128_hash_t b)
{
	return a.low64 == b.low64 && a.high64 == b.high64;
}

/* ---- recording repairs ------------------------------------------------ */

static int add_nfix(struct fsck *f, enum nfix_kind kind, uint64_t parent, uint64_t child, uint64_t hash,
		    uint32_t type, const void *name, size_t len, const void *val, size_t vlen)
{
	struct nfix *x = vec_push(&f->nfix);
	if (!x)
		return -ENOMEM;
	*x = (struct nfix){ (uint8_t)kind, type, parent, child, hash, 0, (uint32_t)len, (uint32_t)vlen };
	if ((x->off = arena_add(&f->arena, name, len)) == SIZE_MAX ||
	    (vlen && arena_add(&f->arena, val, vlen) == SIZE_MAX))
		return -ENOMEM;
	f->fix_any = true;
	return 0;
}

static int add_raw(struct fsck *f, enum nfix_kind kind, const MDB_val *k, const MDB_val *v)
{
	return add_nfix(f, kind, 0, 0, 0, 0, k->mv_data, k->mv_size, v->mv_data, v->mv_size);
}

static int add_kfix(struct fsck *f, const uint8_t *key, enum kfix_kind kind, bool file, bool damaged,
		    uint64_t refs)
{
	if (kind == KF_UNREFERENCED && f->bad_inodes)
		return 0; /* an undecodable inode may refer to it: keep it */
	struct kfix *x = vec_push(&f->kfix);
	if (!x)
		return -ENOMEM;
	memcpy(x->key, key, BLOBKEY_BYTES);
	x->kind = (uint8_t)kind;
	x->file = file;
	x->damaged = damaged;
	x->refs = refs;
	f->fix_any = true;
	return 0;
}

static int add_rm_file(struct fsck *f, const char *rel)
{
	struct pathref *p = vec_push(&f->rm_files);
	if (!p)
		return -ENOMEM;
	p->len = (uint32_t)strlen(rel);
	if ((p->off = arena_add(&f->arena, rel, p->len)) == SIZE_MAX)
		return -ENOMEM;
	f->fix_any = true;
	return 0;
}

/* ---- pass 1: inodes, links, orphans ------------------------------------ */

static struct dnode *dir_find(struct fsck *f, uint64_t ino)
{
	struct dnode *d = (struct dnode *)f->dirs.v;
	size_t lo = 0, hi = f->dirs.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->dirs.n && d[lo].ino == ino ? &d[lo] : NULL;
}

/* A link record whose inode does not exist. */
static int stray_link(struct fsck *f, MDB_val *k, MDB_val *v)
{
	if (k->mv_size != 8 || v->mv_size < 9 || v->mv_size > LINK_VAL_MAX) {
		say(f, K_LINK, "links: a malformed record (repair: removed)");
		return add_raw(f, NF_RAW_LINK, k, v);
	}
	uint64_t ino = get_be64(k->mv_data), parent = get_be64(v->mv_data);
	const char *name = (const char *)v->mv_data + 8;
	int len = (int)(v->mv_size - 8);
	say(f, K_LINK, "link record '%.*s' in %llu names inode %llu, which does not exist (repair: removed)",
	    len, name, (unsigned long long)parent, (unsigned long long)ino);
	return add_nfix(f, NF_STRAY_LINK, parent, ino, 0, 0, name, (size_t)len, NULL, 0);
}

/* An inode with no name: an orphan, or damage. */
static void check_unnamed(struct fsck *f, uint64_t ino, uint32_t mode, uint32_t nlink, bool orphan)
{
	if (nlink > 0) {
		say(f, K_NAME, "%s %llu has no name (nlink %u) and is not an orphan (repair: put in /%s)",
		    S_ISDIR(mode) ? "directory" : "inode", (unsigned long long)ino, nlink, FSCK_LOST_FOUND);
		f->fix_any = true;
	} else if (!orphan) {
		say(f, K_ORPHAN, "inode %llu: nlink 0 and no name, but no orphan mark (repair: marked; deleted at the next open)",
		    (unsigned long long)ino);
		f->fix_any = true;
	} else if (f->clean) {
		say(f, K_ORPHAN, "inode %llu: an orphan (unlinked while open) left in a cleanly closed store (repair: deleted)",
		    (unsigned long long)ino);
		f->fix_any = true;
	}
}

static int check_inode(struct fsck *f, const struct inode *in, uint64_t names, uint64_t parent, bool orphan)
{
	uint64_t ino = in->ino;
	if (orphan && names > 0) {
		say(f, K_ORPHAN, "inode %llu has a name but an orphan mark (repair: mark removed)",
		    (unsigned long long)ino);
		f->fix_any = true;
	}
	if (S_ISDIR(in->mode)) {
		struct dnode *d = vec_push(&f->dirs);
		if (!d)
			return -ENOMEM;
		*d = (struct dnode){ ino, parent, in->nlink, (uint32_t)names, 0, 0, orphan };
		f->res->dirs++;
		return 0; /* checked once every directory is known */
	}
	if (S_ISREG(in->mode)) {
		f->res->pages++;
		f->computed.pages++;
		f->computed.logical_bytes += (int64_t)in->size;
		if (in->flags & INODE_HAS_BLOB) {
			uint8_t key[BLOBKEY_BYTES];
			blobkey_encode(&in->blob, key);
			blob_fact(&f->s_iblob, key, ino);
			f->n_iblob++;
		} else if (in->size) {
			say(f, K_BLOBREF, "inode %llu: size %llu but no blob: its bytes are lost (repair: put in /%s, empty)",
			    (unsigned long long)ino, (unsigned long long)in->size, FSCK_LOST_FOUND);
			f->fix_any = true;
		}
	}
	if (names == 0)
		check_unnamed(f, ino, in->mode, in->nlink, orphan);
	else if (names != in->nlink) {
		say(f, K_NLINK, "inode %llu: nlink %u but %llu names (repair: recounted)", (unsigned long long)ino,
		    in->nlink, (unsigned long long)names);
		f->fix_any = true;
	}
	return 0;
}

static int pass_inodes(struct fsck *f)
{
	MDB_cursor *ci = NULL, *cl = NULL, *co = NULL;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_inodes, &ci));
	if (!rc)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_links, &cl));
	if (!rc)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_orphans, &co));
	if (rc)
		goto out;
	MDB_val ik, iv, lk, lv, ok, ov;
	int lrc = mdb_cursor_get(cl, &lk, &lv, MDB_FIRST), orc = mdb_cursor_get(co, &ok, &ov, MDB_FIRST);
	uint64_t total = entries(f, f->sh.db_inodes), done = 0;
	bool have_root = false;
	int irc;
	prog(f, "inodes", 0, total);
	for (irc = mdb_cursor_get(ci, &ik, &iv, MDB_FIRST); irc == 0 && !rc;
	     irc = mdb_cursor_get(ci, &ik, &iv, MDB_NEXT)) {
		tick(f, "inodes", &done, total);
		if (ik.mv_size != 8) {
			say(f, K_INODE, "inodes: a key of %zu bytes is not an inode number (cannot be repaired)",
			    ik.mv_size);
			f->bad_inodes++;
			continue;
		}
		struct inode in;
		uint64_t ino = get_be64(ik.mv_data);
		bool decoded = inode_decode(iv.mv_data, iv.mv_size, &in, NULL, NULL) == 0;
		uint32_t type = decoded ? in.mode & S_IFMT : 0;
		in.ino = ino;
		while (lrc == 0 && !rc && (lk.mv_size != 8 || get_be64(lk.mv_data) < ino)) {
			rc = stray_link(f, &lk, &lv);
			lrc = mdb_cursor_get(cl, &lk, &lv, MDB_NEXT);
		}
		uint64_t names = 0, parent = 0;
		for (; lrc == 0 && !rc && lk.mv_size == 8 && get_be64(lk.mv_data) == ino;
	     lrc = mdb_cursor_get(cl, &lk, &lv, MDB_NEXT)) {
			if (lv.mv_size < 9 || lv.mv_size > LINK_VAL_MAX) {
				say(f, K_LINK, "inode %llu: a malformed link record (repair: removed)",
				    (unsigned long long)ino);
				rc = add_raw(f, NF_RAW_LINK, &lk, &lv);
				continue;
			}
			uint64_t p = get_be64(lv.mv_data);
			if (!names++)
				parent = p;
			name_fact(&f->s_link, ino, type, p, (const char *)lv.mv_data + 8, lv.mv_size - 8);
			f->n_link++;
		}
		while (orc == 0 && (ok.mv_size != 8 || get_be64(ok.mv_data) < ino)) {
			say(f, K_ORPHAN, "orphan mark for inode %llu, which does not exist (repair: removed)",
			    ok.mv_size == 8 ? (unsigned long long)get_be64(ok.mv_data) : 0ull);
			f->fix_any = true;
			orc = mdb_cursor_get(co, &ok, &ov, MDB_NEXT);
		}
		bool orphan = orc == 0 && ok.mv_size == 8 && get_be64(ok.mv_data) == ino;
		if (orphan)
			orc = mdb_cursor_get(co, &ok, &ov, MDB_NEXT);
		f->res->inodes++;
		if (!decoded) {
			say(f, K_INODE, "inode %llu: undecodable record (cannot be repaired)", (unsigned long long)ino);
			f->bad_inodes++;
			continue;
		}
		if (ino == PD_ROOT_INO) {
			have_root = S_ISDIR(in.mode);
			if (!have_root)
				say(f, K_TREE, "inode 1, the root, is a %s, not a directory (cannot be repaired)",
				    type_name(in.mode));
		}
		rc = check_inode(f, &in, names, parent, orphan);
	}
	for (; lrc == 0 && !rc; lrc = mdb_cursor_get(cl, &lk, &lv, MDB_NEXT))
		rc = stray_link(f, &lk, &lv);
	for (; orc == 0; orc = mdb_cursor_get(co, &ok, &ov, MDB_NEXT)) {
		say(f, K_ORPHAN, "orphan mark for inode %llu, which does not exist (repair: removed)",
		    ok.mv_size == 8 ? (unsigned long long)get_be64(ok.mv_data) : 0ull);
		f->fix_any = true;
	}
	if (!rc && irc != MDB_NOTFOUND)
		rc = pd_mdb_err(irc);
	if (!rc && !have_root && !dir_find(f, PD_ROOT_INO))
		say(f, K_TREE, "the root directory (inode 1) is missing (cannot be repaired)");
	prog(f, "inodes", done, done);
out:
	if (ci)
		mdb_cursor_close(ci);
	if (cl)
		mdb_cursor_close(cl);
	if (co)
		mdb_cursor_close(co);
	return rc;
}

/* ---- the directory tree ------------------------------------------------ */

/* Walk every directory's parents up to the root. Directories that do not
 * get there are marked 3; fn is called for the top of each such chain:
 * the directory where a cycle closes, or the one whose parent is missing
 * or not a directory (a directory with no name is not a top: it is
 * reported, and repaired, as nameless). */
static int tree_walk(struct vec *dirs, void (*fn)(void *ctx, struct dnode *top, bool cycle), void *ctx,
		     uint64_t *cut_off)
{
	struct dnode *d = (struct dnode *)dirs->v;
	struct vec path = VEC(size_t);
	*cut_off = 0;
	for (size_t i = 0; i < dirs->n; i++)
		d[i].state = d[i].ino == PD_ROOT_INO ? 2 : 0;
	for (size_t i = 0; i < dirs->n; i++) {
		if (d[i].state)
			continue;
		path.n = 0;
		size_t cur = i;
		uint8_t result;
		struct dnode *top = NULL;
		bool cycle = false;
		for (;;) {
			if (d[cur].state >= 2) {
				result = d[cur].state;
				break;
			}
			if (d[cur].state == 1) {
				result = 3;
				top = &d[cur];
				cycle = true;
				break;
			}
			size_t *p = vec_push(&path);
			if (!p) {
				vec_free(&path);
				return -ENOMEM;
			}
			*p = cur;
			d[cur].state = 1;
			if (!d[cur].names) { /* nameless, or an orphan */
				result = 3;
				break;
			}
			uint64_t pino = d[cur].parent;
			size_t lo = 0, hi = dirs->n;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (d[mid].ino < pino)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo == dirs->n || d[lo].ino != pino || d[lo].nlink == 0) {
				result = 3;
				top = &d[cur];
				break;
			}
			cur = lo;
		}
		for (size_t j = 0; j < path.n; j++) {
			d[AT(path, size_t, j)].state = result;
			if (result == 3 && d[AT(path, size_t, j)].names)
				++*cut_off;
		}
		if (top && fn)
			fn(ctx, top, cycle);
	}
	vec_free(&path);
	return 0;
}

static void report_top(void *ctx, struct dnode *top, bool cycle)
{
	struct fsck *f = ctx;
	if (cycle)
		say(f, K_TREE, "directory %llu is in a cycle of directories, not connected to the root (repair: moved to /%s)",
		    (unsigned long long)top->ino, FSCK_LOST_FOUND);
	else
		say(f, K_TREE, "directory %llu is not connected to the root: its parent %llu is not a live directory (repair: moved to /%s)",
		    (unsigned long long)top->ino, (unsigned long long)top->parent, FSCK_LOST_FOUND);
	f->fix_any = true;
}

static int check_dirs(struct fsck *f)
{
	struct dnode *d = (struct dnode *)f->dirs.v;
	for (size_t i = 0; i < f->dirs.n; i++) {
		if (d[i].ino == PD_ROOT_INO || !d[i].names)
			continue;
		struct dnode *p = dir_find(f, d[i].parent);
		if (p)
			p->subdirs++;
	}
	for (size_t i = 0; i < f->dirs.n; i++) {
		unsigned long long ino = d[i].ino;
		bool root = d[i].ino == PD_ROOT_INO;
		if (root && d[i].names) {
			say(f, K_TREE, "the root directory has %u names (repair: removed)", d[i].names);
			f->fix_any = true;
		} else if (!root && d[i].names > 1) {
			say(f, K_TREE, "directory %llu has %u names (repair: keeps the first)", ino, d[i].names);
			f->fix_any = true;
		}
		if (!root && !d[i].names) {
			check_unnamed(f, ino, S_IFDIR, d[i].nlink, d[i].orphan);
			continue;
		}
		uint64_t want = 2 + (uint64_t)d[i].subdirs;
		if (d[i].nlink != want) {
			say(f, K_NLINK, "directory %llu: nlink %u, should be %llu (2 + %u subdirectories) (repair: recounted)",
			    ino, d[i].nlink, (unsigned long long)want, d[i].subdirs);
			f->fix_any = true;
		}
	}
	uint64_t cut_off;
	int rc = tree_walk(&f->dirs, report_top, f, &cut_off);
	if (!rc && cut_off)
		say(f, K_TREE, "%llu directories in all are not connected to the root",
		    (unsigned long long)cut_off);
	return rc;
}

/* ---- pass 2: dirents against links -------------------------------------- */

static int pass_dirents(struct fsck *f)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_dirents, &c));
	if (rc)
		return rc;
	MDB_val k, v;
	uint64_t total = entries(f, f->sh.db_dirents), done = 0, last_parent = 0;
	bool parent_ok = false, have_parent = false;
	int mrc;
	prog(f, "names", 0, total);
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		tick(f, "names", &done, total);
		const char *name;
		size_t len;
		uint64_t child;
		uint32_t type;
		if (k.mv_size != 16 || dirent_val_decode(v.mv_data, v.mv_size, &name, &len, &child, &type)) {
			say(f, K_NAME, "dirents: an undecodable entry in directory %llu (repair: removed)",
			    k.mv_size >= 8 ? (unsigned long long)get_be64(k.mv_data) : 0ull);
			rc = add_raw(f, NF_RAW_DIRENT, &k, &v);
			continue;
		}
		uint64_t parent = get_be64(k.mv_data), hash = get_be64((uint8_t *)k.mv_data + 8);
		if (parent != last_parent || !have_parent) {
			struct dnode *p = dir_find(f, parent);
			last_parent = parent;
			have_parent = true;
			parent_ok = p && p->nlink > 0;
		}
		if (!parent_ok) {
			say(f, K_NAME, "dirent '%.*s' in %llu: %llu is not a directory (repair: inode %llu moved to /%s)",
			    (int)len, name, (unsigned long long)parent, (unsigned long long)parent,
			    (unsigned long long)child, FSCK_LOST_FOUND);
			rc = add_nfix(f, NF_BAD_PARENT, parent, child, hash, type, name, len, NULL, 0);
		} else if (!name_valid(name, len)) {
			say(f, K_NAME, "dirent '%.*s' in %llu: not a valid name (repair: inode %llu moved to /%s)",
			    (int)len, name, (unsigned long long)parent, (unsigned long long)child, FSCK_LOST_FOUND);
			rc = add_nfix(f, NF_BAD_NAME, parent, child, hash, type, name, len, NULL, 0);
		} else if (dirent_hash(name, len) != hash) {
			say(f, K_NAME, "dirent '%.*s' in %llu: filed under the wrong hash (repair: refiled)", (int)len,
			    name, (unsigned long long)parent);
			rc = add_nfix(f, NF_REHASH, parent, child, hash, type, name, len, NULL, 0);
		}
		name_fact(&f->s_dirent, child, type, parent, name, len);
		f->n_dirent++;
	}
	mdb_cursor_close(c);
	if (!rc && mrc != MDB_NOTFOUND)
		rc = pd_mdb_err(mrc);
	prog(f, "names", done, done);
	return rc;
}

static bool link_exists(MDB_cursor *c, uint64_t ino, uint64_t parent, const char *name, size_t len)
{
	uint8_t kb[8], vb[LINK_VAL_MAX];
	put_be64(kb, ino);
	put_be64(vb, parent);
	memcpy(vb + 8, name, len);
	MDB_val k = { 8, kb }, v = { 8 + len, vb };
	return mdb_cursor_get(c, &k, &v, MDB_GET_BOTH) == 0;
}

/* Find (parent, name) in dirents: 0 with *child and *type, -ENOENT. With
 * keep, the cursor is left on the entry. */
static int dirent_lookup(MDB_cursor *c, uint64_t parent, const char *name, size_t len, uint64_t *child,
			 uint32_t *type)
{
	uint8_t kb[16];
	put_be64(kb, parent);
	put_be64(kb + 8, dirent_hash(name, len));
	MDB_val k = { 16, kb }, v;
	for (int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_KEY); mrc == 0; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP)) {
		const char *n;
		size_t nl;
		if (dirent_val_decode(v.mv_data, v.mv_size, &n, &nl, child, type))
			continue;
		if (nl == len && memcmp(n, name, len) == 0)
			return 0;
	}
	return -ENOENT;
}

/* The sums differ: find the names that differ, one lookup per fact. */
static int diagnose_names(struct fsck *f)
{
	MDB_cursor *cd = NULL, *cl = NULL, *cd2 = NULL;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_dirents, &cd));
	if (!rc)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_links, &cl));
	if (!rc)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_dirents, &cd2));
	uint64_t found = 0, done = 0, total = f->n_dirent + f->n_link;
	MDB_val k, v;
	int mrc = MDB_NOTFOUND;
	prog(f, "names (diagnosis)", 0, total);
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(cd, &k, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(cd, &k, &v, MDB_NEXT)) {
		tick(f, "names (diagnosis)", &done, total);
		const char *name;
		size_t len;
		uint64_t child;
		uint32_t type;
		if (k.mv_size != 16 || dirent_val_decode(v.mv_data, v.mv_size, &name, &len, &child, &type))
			continue;
		uint64_t parent = get_be64(k.mv_data), hash = get_be64((uint8_t *)k.mv_data + 8);
		struct inode ci;
		int grc = ns_get_inode(f->txn, &f->sh, child, &ci);
		if (grc == -ENOENT) {
			say(f, K_NAME, "dirent '%.*s' in %llu: inode %llu does not exist (repair: removed)", (int)len,
			    name, (unsigned long long)parent, (unsigned long long)child);
			rc = add_nfix(f, NF_DANGLING, parent, child, hash, type, name, len, NULL, 0);
			found++;
			continue;
		}
		if (grc == 0 && (ci.mode & S_IFMT) != type) {
			say(f, K_NAME, "dirent '%.*s' in %llu says %s, but inode %llu is a %s (repair: rewritten)",
			    (int)len, name, (unsigned long long)parent, type_name(type), (unsigned long long)child,
			    type_name(ci.mode));
			rc = add_nfix(f, NF_TYPE, parent, child, hash, type, name, len, NULL, 0);
			found++;
		}
		if (!rc && !link_exists(cl, child, parent, name, len)) {
			say(f, K_LINK, "dirent '%.*s' in %llu (inode %llu) has no link record (repair: added)", (int)len,
			    name, (unsigned long long)parent, (unsigned long long)child);
			rc = add_nfix(f, NF_ADD_LINK, parent, child, hash, type, name, len, NULL, 0);
			found++;
		}
	}
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(cl, &k, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(cl, &k, &v, MDB_NEXT)) {
		tick(f, "names (diagnosis)", &done, total);
		if (k.mv_size != 8 || v.mv_size < 9 || v.mv_size > LINK_VAL_MAX)
			continue;
		uint64_t ino = get_be64(k.mv_data), parent = get_be64(v.mv_data), child;
		const char *name = (const char *)v.mv_data + 8;
		size_t len = v.mv_size - 8;
		uint32_t type;
		struct inode in;
		if (ns_get_inode(f->txn, &f->sh, ino, &in) == -ENOENT)
			continue; /* a stray link: reported by the inode pass */
		if (dirent_lookup(cd2, parent, name, len, &child, &type)) {
			say(f, K_LINK, "inode %llu: link record '%.*s' in %llu has no dirent (repair: dirent restored)",
			    (unsigned long long)ino, (int)len, name, (unsigned long long)parent);
			rc = add_nfix(f, NF_ADD_DIRENT, parent, ino, 0, 0, name, len, NULL, 0);
			found++;
		} else if (child != ino) {
			say(f, K_LINK, "inode %llu: link record '%.*s' in %llu, but that name is inode %llu (repair: link record removed)",
			    (unsigned long long)ino, (int)len, name, (unsigned long long)parent,
			    (unsigned long long)child);
			rc = add_nfix(f, NF_LINK_MISMATCH, parent, ino, 0, 0, name, len, NULL, 0);
			found++;
		}
	}
	if (!rc && mrc != MDB_NOTFOUND)
		rc = pd_mdb_err(mrc);
	if (!rc && !found && !f->bad_inodes)
		say(f, K_NAME, "dirents and links disagree, but no single entry could be named (cannot be repaired)");
	prog(f, "names (diagnosis)", done, done);
	if (cd)
		mdb_cursor_close(cd);
	if (cl)
		mdb_cursor_close(cl);
	if (cd2)
		mdb_cursor_close(cd2);
	return rc;
}

/* ---- pass 3: blob_inodes against the inodes ---------------------------- */

static int bref_cmp(const void *a, const void *b)
{
	const struct bref *x = a, *y = b;
	int c = memcmp(x->key, y->key, BLOBKEY_BYTES);
	return c ? c : (x->ino > y->ino) - (x->ino < y->ino);
}

static int push_bref(struct vec *v, const uint8_t *key, uint64_t ino)
{
	struct bref *b = vec_push(v);
	if (!b)
		return -ENOMEM;
	memcpy(b->key, key, BLOBKEY_BYTES);
	b->ino = ino;
	return 0;
}

static int diagnose_blobrefs(struct fsck *f)
{
	MDB_cursor *c = NULL, *cb = NULL;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_blob_inodes, &c));
	if (!rc)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_blob_inodes, &cb));
	MDB_val k, v;
	int mrc = MDB_NOTFOUND;
	uint64_t done = 0, total = f->n_bi + f->res->inodes;
	char hex[48];
	prog(f, "blob index (diagnosis)", 0, total);
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		tick(f, "blob index (diagnosis)", &done, total);
		if (k.mv_size != BLOBKEY_BYTES || v.mv_size != 8)
			continue;
		uint64_t ino = get_be64(v.mv_data);
		struct inode in;
		uint8_t key[BLOBKEY_BYTES];
		int grc = ns_get_inode(f->txn, &f->sh, ino, &in);
		if (grc == 0 && S_ISREG(in.mode) && (in.flags & INODE_HAS_BLOB)) {
			blobkey_encode(&in.blob, key);
			if (!memcmp(key, k.mv_data, BLOBKEY_BYTES))
				continue;
		} else if (grc && grc != -ENOENT) {
			continue; /* undecodable: reported */
		}
		blob_name(k.mv_data, hex);
		say(f, K_BLOBREF, "blob %s: blob_inodes lists inode %llu, which %s (repair: entry removed)", hex,
		    (unsigned long long)ino, grc ? "does not exist" : "does not refer to it");
		rc = push_bref(&f->stale, k.mv_data, ino);
	}
	MDB_cursor *ci = NULL;
	if (!rc && mrc == MDB_NOTFOUND)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_inodes, &ci));
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(ci, &k, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(ci, &k, &v, MDB_NEXT)) {
		tick(f, "blob index (diagnosis)", &done, total);
		struct inode in;
		if (k.mv_size != 8 || inode_decode(v.mv_data, v.mv_size, &in, NULL, NULL) || !S_ISREG(in.mode) ||
		    !(in.flags & INODE_HAS_BLOB))
			continue;
		uint8_t key[BLOBKEY_BYTES], vb[8];
		blobkey_encode(&in.blob, key);
		memcpy(vb, k.mv_data, 8);
		MDB_val bk = { BLOBKEY_BYTES, key }, bv = { 8, vb };
		if (mdb_cursor_get(cb, &bk, &bv, MDB_GET_BOTH) == 0)
			continue;
		blob_name(key, hex);
		say(f, K_BLOBREF, "inode %llu refers to blob %s, but blob_inodes does not list it (repair: entry added)",
		    (unsigned long long)get_be64(k.mv_data), hex);
		rc = push_bref(&f->missing, key, get_be64(k.mv_data));
	}
	if (!rc && mrc != MDB_NOTFOUND)
		rc = pd_mdb_err(mrc);
	if (ci)
		mdb_cursor_close(ci);
	if (c)
		mdb_cursor_close(c);
	if (cb)
		mdb_cursor_close(cb);
	if (!rc && !f->stale.n && !f->missing.n && !f->bad_inodes)
		say(f, K_BLOBREF, "blob_inodes and the inodes disagree, but no single entry could be named (cannot be repaired)");
	if (f->stale.n)
		qsort(f->stale.v, f->stale.n, sizeof(struct bref), bref_cmp);
	if (f->missing.n)
		qsort(f->missing.v, f->missing.n, sizeof(struct bref), bref_cmp);
	if (f->stale.n || f->missing.n)
		f->fix_any = true;
	prog(f, "blob index (diagnosis)", done, done);
	return rc;
}

static int pass_blob_index(struct fsck *f)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_blob_inodes, &c));
	if (rc)
		return rc;
	MDB_val k, v;
	uint64_t total = entries(f, f->sh.db_blob_inodes), done = 0;
	int mrc;
	prog(f, "blob index", 0, total);
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		tick(f, "blob index", &done, total);
		if (k.mv_size != BLOBKEY_BYTES || v.mv_size != 8) {
			say(f, K_BLOBREF, "blob_inodes: a malformed entry (repair: removed)");
			rc = add_raw(f, NF_RAW_BLOBREF, &k, &v);
			continue;
		}
		blob_fact(&f->s_bi, k.mv_data, get_be64(v.mv_data));
		f->n_bi++;
	}
	mdb_cursor_close(c);
	if (!rc && mrc != MDB_NOTFOUND)
		rc = pd_mdb_err(mrc);
	prog(f, "blob index", done, done);
	if (!rc && (!sums_equal(f->s_bi, f->s_iblob) || f->n_bi != f->n_iblob))
		rc = diagnose_blobrefs(f);
	return rc;
}

/* ---- pass 4: fingerprints, blob_inodes and objects/, side by side ------- */

/* Checking a blob file (on worker threads with deep). */
enum vres { V_OK, V_SIZE, V_HASH, V_GONE, V_IOERR };
struct vjob {
	int dirfd;
	char name[48];
	uint64_t size;
	const uint8_t *md5, *xxh;
	uint8_t res;
	int err;
	uint64_t got;
};
struct vbatch {
	struct vjob *jobs;
	size_t n, next;
	bool deep;
	uint64_t bytes;
};

/* One hash context and read buffer per thread (fp_of_fd would allocate
 * both for every file: most of the time of a deep check of small pages). */
#define HASH_BUF (64 * 1024)
struct hasher {
	struct fp_ctx c;
	char *buf;
	bool ok;
};

static int hash_fd(struct hasher *h, int fd, struct fp *out)
{
	if (!h->ok || fp_reset(&h->c))
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, h->buf, HASH_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return fp_final(&h->c, out);
		fp_update(&h->c, h->buf, (size_t)n);
	}
}

static void verify_one(struct vjob *j, bool deep, struct hasher *h, uint64_t *bytes)
{
	struct stat sb;
	if (!deep) {
		if (fstatat(j->dirfd, j->name, &sb, AT_SYMLINK_NOFOLLOW)) {
			j->err = errno;
			j->res = errno == ENOENT ? V_GONE : V_IOERR;
		} else {
			j->got = (uint64_t)sb.st_size;
			j->res = S_ISREG(sb.st_mode) && j->got == j->size ? V_OK : V_SIZE;
		}
		return;
	}
	int fd = openat(j->dirfd, j->name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		j->err = errno;
		j->res = errno == ENOENT ? V_GONE : V_IOERR;
		return;
	}
	struct fp fp;
	int rc;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		j->res = V_SIZE;
	} else if ((uint64_t)sb.st_size != j->size) {
		j->got = (uint64_t)sb.st_size;
		j->res = V_SIZE;
	} else if ((rc = hash_fd(h, fd, &fp))) {
		j->err = -rc;
		j->res = V_IOERR;
	} else {
		*bytes += fp.size;
		j->got = fp.size;
		j->res = fp.size != j->size ? V_SIZE :
			 memcmp(fp.md5, j->md5, 16) || memcmp(fp.xxh128, j->xxh, 16) ? V_HASH : V_OK;
	}
	close(fd);
}

static void *verify_worker(void *p)
{
	struct vbatch *b = p;
	struct hasher h = { .ok = false };
	uint64_t bytes = 0;
	if (b->deep) {
		h.buf = malloc(HASH_BUF);
		h.ok = h.buf && fp_init(&h.c) == 0;
	}
	size_t i;
	while ((i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED)) < b->n)
		verify_one(&b->jobs[i], b->deep, &h, &bytes);
	__atomic_fetch_add(&b->bytes, bytes, __ATOMIC_RELAXED);
	if (h.ok)
		fp_free(&h.c);
	free(h.buf);
	return NULL;
}

static void verify_batch(struct fsck *f, struct vjob *jobs, size_t n)
{
	struct vbatch b = { jobs, n, 0, f->o->deep, 0 };
	pthread_t t[MAX_THREADS];
	unsigned nt = 0;
	if (f->o->deep && n >= 4) /* (threads do not speed up stat: the path walk is the cost) */
		for (; nt + 1 < f->threads && nt < n; nt++)
			if (pthread_create(&t[nt], NULL, verify_worker, &b))
				break;
	verify_worker(&b);
	for (unsigned i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	f->res->bytes_hashed += b.bytes;
}

struct keyrec {
	uint8_t key[BLOBKEY_BYTES];
	bool bad;
	struct fprec r;
};
struct keycount {
	uint8_t key[BLOBKEY_BYTES];
	uint64_t n;
};
struct filekey {
	uint8_t key[BLOBKEY_BYTES];
};
struct group {
	const uint8_t *key;
	struct keyrec *rec;
	uint64_t refs, listed;
	bool file;
	struct vjob *job;
};

static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, BLOBKEY_BYTES);
}

static unsigned key_prefix(const uint8_t *key)
{
	return (unsigned)key[0] << 4 | key[1] >> 4;
}

/* Tally the filter positions of a record. */
static int tally_positions(struct fsck *f, const uint8_t *key, const struct fprec *r)
{
	if (!(r->flags & FPREC_IN_FILTER) || !f->tally)
		return 0;
	const struct cbf *g = geometry_filter(f);
	const struct cbf_geometry *geo = g ? cbf_geometry(g) : NULL;
	bool fits = r->pos.k > 0 && (!geo || (r->pos.k == geo->k && r->pos.nlines == geo->lines_per_key));
	for (unsigned j = 0; fits && j < r->pos.k; j++)
		fits = cbf_pos_counter(&r->pos, j) < f->ncounters;
	if (!fits) {
		char hex[48];
		blob_name(key, hex);
		say(f, K_FILTER, "blob %s: its stored filter positions do not fit the filter (repair: recomputed)", hex);
		f->fix_filter = true;
		return add_kfix(f, key, KF_REPOS, false, false, 0);
	}
	for (unsigned j = 0; j < r->pos.k; j++) {
		uint64_t idx = cbf_pos_counter(&r->pos, j);
		if (f->tally[idx] < 255) {
			f->tally[idx]++;
			continue;
		}
		struct { uint64_t idx, n; } *o = NULL;
		for (size_t i = 0; i < f->tally_over.n && !o; i++)
			if (((uint64_t *)f->tally_over.v)[2 * i] == idx)
				o = (void *)((uint64_t *)f->tally_over.v + 2 * i);
		if (!o && !(o = vec_push(&f->tally_over)))
			return -ENOMEM;
		o->idx = idx;
		o->n++;
	}
	return 0;
}

static int handle_group(struct fsck *f, struct group *g)
{
	char hex[48];
	blob_name(g->key, hex);
	struct keyrec *kr = g->rec;
	int rc = 0;
	if (g->file)
		f->res->blob_files++;
	if (kr && !kr->bad) {
		struct fprec *r = &kr->r;
		f->res->blobs++;
		f->computed.blobs++;
		f->computed.stored_bytes += (int64_t)r->size;
		if (r->refcount)
			f->computed.hist[pd_hist_bucket(r->refcount)]++;
		if ((rc = tally_positions(f, g->key, r)))
			return rc;
		if (g->refs == 0) {
			say(f, K_REFCOUNT, "blob %s: no inode refers to it (refcount %llu) (repair: record and file removed)",
			    hex, (unsigned long long)r->refcount);
			return add_kfix(f, g->key, KF_UNREFERENCED, g->file, false, 0);
		}
		if (r->refcount != g->refs) {
			say(f, K_REFCOUNT, "blob %s: refcount %llu, but %llu inodes refer to it (repair: set to %llu)",
			    hex, (unsigned long long)r->refcount, (unsigned long long)g->refs,
			    (unsigned long long)g->refs);
			if ((rc = add_kfix(f, g->key, KF_REFCOUNT, g->file, false, g->refs)))
				return rc;
		}
		char path[BLOBKEY_PATH_MAX];
		struct blobkey bk;
		blobkey_decode(g->key, &bk);
		blobkey_path(&bk, path);
		struct vjob *j = g->job;
		if (!g->file || (j && j->res == V_GONE)) {
			say(f, K_BLOB, "blob %s: file %s is missing; the bytes of %llu page%s are lost (repair: moved to /%s)",
			    hex, path, (unsigned long long)g->refs, g->refs == 1 ? "" : "s", FSCK_LOST_FOUND);
			return add_kfix(f, g->key, KF_LOST, false, false, g->refs);
		}
		if (j && j->res == V_SIZE) {
			say(f, K_BLOB, "blob %s: file %s is %llu bytes, its record says %llu: damaged (repair: its %llu page%s moved to /%s)",
			    hex, path, (unsigned long long)j->got, (unsigned long long)r->size,
			    (unsigned long long)g->refs, g->refs == 1 ? "" : "s", FSCK_LOST_FOUND);
			return add_kfix(f, g->key, KF_LOST, true, true, g->refs);
		}
		if (j && j->res == V_HASH) {
			say(f, K_BLOB, "blob %s: file %s is damaged: its MD5 or XXH3-128 differs from the record (repair: its %llu page%s moved to /%s)",
			    hex, path, (unsigned long long)g->refs, g->refs == 1 ? "" : "s", FSCK_LOST_FOUND);
			return add_kfix(f, g->key, KF_LOST, true, true, g->refs);
		}
		if (j && j->res == V_IOERR)
			say(f, K_BLOB, "blob %s: cannot read %s: %s (cannot be repaired)", hex, path, strerror(j->err));
		return 0;
	}
	if (kr && kr->bad)
		say(f, K_BLOB, "blob %s: undecodable fingerprint record (repair: %s)", hex,
		    !g->refs ? "removed" : g->file ? "rebuilt from the file" : "its pages moved to /" FSCK_LOST_FOUND);
	if (g->refs && g->file) {
		if (!kr)
			say(f, K_BLOB, "blob %s: %llu inodes refer to it, but it has no fingerprint record (repair: rebuilt from the file)",
			    hex, (unsigned long long)g->refs);
		rc = add_kfix(f, g->key, KF_RECREATE, true, false, g->refs);
	} else if (g->refs) {
		if (!kr)
			say(f, K_BLOB, "blob %s: %llu inodes refer to it, but it has neither record nor file: their bytes are lost (repair: moved to /%s)",
			    hex, (unsigned long long)g->refs, FSCK_LOST_FOUND);
		rc = add_kfix(f, g->key, KF_LOST, false, false, g->refs);
	} else if (kr) {
		rc = add_kfix(f, g->key, KF_UNREFERENCED, g->file, false, 0);
	} else if (g->file) {
		char path[BLOBKEY_PATH_MAX];
		struct blobkey bk;
		blobkey_decode(g->key, &bk);
		blobkey_path(&bk, path);
		say(f, K_FILE, "%s: file unknown to the store (an orphan a crash can leave) (repair: removed)", path);
		rc = add_rm_file(f, path);
	}
	if (kr && kr->bad && !rc && f->kfix.n) { /* the fix just added is for this key */
		struct kfix *x = &AT(f->kfix, struct kfix, f->kfix.n - 1);
		x->bad_record = !memcmp(x->key, g->key, BLOBKEY_BYTES);
	}
	return rc;
}

/* Is name the file name of a blob key in objects/<sub>? ("<32 lowercase
 * hex digits>", or that and ".<variant>", variant 1..2^32-1 in decimal
 * without leading zeros, as blobkey_path() writes it.) */
static bool parse_blob_name(const char *name, const char *sub, uint8_t key[BLOBKEY_BYTES])
{
	struct blobkey k = { .variant = 0 };
	size_t len = strlen(name);
	if (len < 32 || memcmp(name, sub, 3))
		return false;
	for (int i = 0; i < 32; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	if (len > 32) {
		if (name[32] != '.' || len > 43 || name[33] < '1' || name[33] > '9')
			return false;
		uint64_t v = 0;
		for (size_t i = 33; i < len; i++) {
			if (name[i] < '0' || name[i] > '9')
				return false;
			v = v * 10 + (uint64_t)(name[i] - '0');
		}
		if (v > UINT32_MAX)
			return false;
		k.variant = (uint32_t)v;
	}
	if (fp_unhex(name, k.md5))
		return false;
	blobkey_encode(&k, key);
	return true;
}

/* The files of objects/<sub>: blob names to keys (sorted), the rest orphans. */
static int read_blob_dir(struct fsck *f, int dfd, const char *sub, struct vec *files)
{
	files->n = 0;
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	struct dirent *e;
	int rc = 0;
	char rel[BLOBKEY_PATH_MAX + 300];
	while (!rc && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat sb;
		bool is_dir = e->d_type == DT_DIR ||
			      (e->d_type == DT_UNKNOWN && !fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) &&
			       S_ISDIR(sb.st_mode));
		uint8_t key[BLOBKEY_BYTES];
		if (!is_dir && parse_blob_name(e->d_name, sub, key)) {
			struct filekey *fk = vec_push(files);
			if (!fk) {
				rc = -ENOMEM;
				break;
			}
			memcpy(fk->key, key, BLOBKEY_BYTES);
			continue;
		}
		snprintf(rel, sizeof rel, "objects/%s/%s", sub, e->d_name);
		if (is_dir) {
			say(f, K_FILE, "%s: a directory where only blob files belong (left as it is)", rel);
		} else {
			say(f, K_FILE, "%s: file unknown to the store (repair: removed)", rel);
			rc = add_rm_file(f, rel);
		}
	}
	closedir(d);
	if (files->n)
		qsort(files->v, files->n, sizeof(struct filekey), key_cmp);
	return rc;
}

/* objects/: which of the 4096 subdirectories exist; anything else is
 * reported (files removed by repair, directories left). */
static int read_objects_top(struct fsck *f, uint8_t present[4096])
{
	memset(present, 0, 4096);
	int fd = openat(f->sh.dirfd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		say(f, K_FILE, "objects/: cannot read the directory: %s (cannot be repaired)", strerror(errno));
		return 0;
	}
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(d))) {
		const char *n = e->d_name;
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		struct stat sb;
		bool is_dir = e->d_type == DT_DIR ||
			      (e->d_type == DT_UNKNOWN && !fstatat(fd, n, &sb, AT_SYMLINK_NOFOLLOW) && S_ISDIR(sb.st_mode));
		unsigned p = 0;
		bool hex3 = strlen(n) == 3;
		for (int i = 0; hex3 && i < 3; i++) {
			char c = n[i];
			hex3 = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
			p = p << 4 | (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
		}
		char rel[300];
		snprintf(rel, sizeof rel, "objects/%s", n);
		if (is_dir && hex3) {
			present[p] = 1;
		} else if (is_dir) {
			say(f, K_FILE, "%s: a directory unknown to the store (left as it is)", rel);
		} else {
			say(f, K_FILE, "%s: file unknown to the store (repair: removed)", rel);
			rc = add_rm_file(f, rel);
		}
	}
	closedir(d);
	return rc;
}

static int pass_blobs(struct fsck *f)
{
	MDB_cursor *cf = NULL, *cb = NULL;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_fp, &cf));
	if (!rc)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_blob_inodes, &cb));
	struct vec recs = VEC(struct keyrec), counts = VEC(struct keycount), files = VEC(struct filekey);
	struct vec groups = VEC(struct group), jobs = VEC(struct vjob);
	uint8_t *present = malloc(4096);
	if (!present)
		rc = -ENOMEM;
	if (!rc)
		rc = read_objects_top(f, present);
	int objfd = openat(f->sh.dirfd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	MDB_val fk, fv, bk, bv;
	int frc = rc ? MDB_NOTFOUND : mdb_cursor_get(cf, &fk, &fv, MDB_FIRST);
	int brc = rc ? MDB_NOTFOUND : mdb_cursor_get(cb, &bk, &bv, MDB_FIRST);
	size_t si = 0, mi = 0;
	const struct bref *stale = (struct bref *)f->stale.v, *miss = (struct bref *)f->missing.v;
	uint64_t total = entries(f, f->sh.db_fp), done = 0;
	prog(f, "blobs", 0, total);
	for (unsigned p = 0; p < 4096 && !rc; p++) {
		recs.n = counts.n = files.n = groups.n = jobs.n = 0;
		/* this prefix's records */
		for (; frc == 0 && !rc; frc = mdb_cursor_get(cf, &fk, &fv, MDB_NEXT)) {
			if (fk.mv_size != BLOBKEY_BYTES) {
				say(f, K_BLOB, "fingerprints: a key of %zu bytes (repair: removed)", fk.mv_size);
				rc = add_raw(f, NF_RAW_FP, &fk, &fv);
				continue;
			}
			if (key_prefix(fk.mv_data) != p)
				break;
			struct keyrec *kr = vec_push(&recs);
			if (!kr) {
				rc = -ENOMEM;
				break;
			}
			memcpy(kr->key, fk.mv_data, BLOBKEY_BYTES);
			kr->bad = fprec_decode(fv.mv_data, fv.mv_size, &kr->r) != 0;
			tick(f, "blobs", &done, total);
		}
		/* its blob_inodes entries, counted per key */
		for (; brc == 0 && !rc; brc = mdb_cursor_get(cb, &bk, &bv, MDB_NEXT)) {
			if (bk.mv_size != BLOBKEY_BYTES || bv.mv_size != 8)
				continue;
			if (key_prefix(bk.mv_data) != p)
				break;
			struct keycount *kc = counts.n ? &AT(counts, struct keycount, counts.n - 1) : NULL;
			if (!kc || memcmp(kc->key, bk.mv_data, BLOBKEY_BYTES)) {
				if (!(kc = vec_push(&counts))) {
					rc = -ENOMEM;
					break;
				}
				memcpy(kc->key, bk.mv_data, BLOBKEY_BYTES);
			}
			kc->n++;
		}
		/* its files */
		int dfd = -1;
		if (!rc && present[p] && objfd >= 0) {
			char sub[4];
			snprintf(sub, sizeof sub, "%03x", p);
			dfd = openat(objfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dfd < 0)
				say(f, K_FILE, "objects/%s: cannot read the directory: %s", sub, strerror(errno));
			else
				rc = read_blob_dir(f, dfd, sub, &files);
		}
		/* merge by key */
		size_t i = 0, j = 0, m = 0;
		while (!rc) {
			const uint8_t *k = NULL;
#define CAND(ptr) do { const uint8_t *c_ = (ptr); if (c_ && (!k || memcmp(c_, k, BLOBKEY_BYTES) < 0)) k = c_; } while (0)
			CAND(i < recs.n ? AT(recs, struct keyrec, i).key : NULL);
			CAND(j < counts.n ? AT(counts, struct keycount, j).key : NULL);
			CAND(m < files.n ? AT(files, struct filekey, m).key : NULL);
			CAND(si < f->stale.n && key_prefix(stale[si].key) == p ? stale[si].key : NULL);
			CAND(mi < f->missing.n && key_prefix(miss[mi].key) == p ? miss[mi].key : NULL);
#undef CAND
			if (!k)
				break;
			struct group *g = vec_push(&groups);
			if (!g) {
				rc = -ENOMEM;
				break;
			}
			g->key = k;
			if (i < recs.n && !memcmp(AT(recs, struct keyrec, i).key, k, BLOBKEY_BYTES))
				g->rec = &AT(recs, struct keyrec, i++);
			if (j < counts.n && !memcmp(AT(counts, struct keycount, j).key, k, BLOBKEY_BYTES))
				g->listed = AT(counts, struct keycount, j++).n;
			if (m < files.n && !memcmp(AT(files, struct filekey, m).key, k, BLOBKEY_BYTES)) {
				g->file = true;
				m++;
			}
			uint64_t refs = g->listed;
			for (; si < f->stale.n && !memcmp(stale[si].key, k, BLOBKEY_BYTES); si++)
				refs--;
			for (; mi < f->missing.n && !memcmp(miss[mi].key, k, BLOBKEY_BYTES); mi++)
				refs++;
			g->refs = refs;
		}
		/* check the files of the records in use */
		for (size_t gi = 0; gi < groups.n && !rc; gi++) {
			struct group *g = &AT(groups, struct group, gi);
			if (!g->rec || g->rec->bad || !g->file || !g->refs)
				continue;
			struct vjob *jb = vec_push(&jobs);
			if (!jb) {
				rc = -ENOMEM;
				break;
			}
			struct blobkey k;
			blobkey_decode(g->key, &k);
			fp_hex(k.md5, jb->name);
			if (k.variant)
				snprintf(jb->name + 32, 16, ".%u", k.variant);
			jb->dirfd = dfd;
			jb->size = g->rec->r.size;
			jb->md5 = g->key;
			jb->xxh = g->rec->r.xxh128;
		}
		if (!rc && jobs.n)
			verify_batch(f, (struct vjob *)jobs.v, jobs.n);
		for (size_t gi = 0, ji = 0; gi < groups.n && !rc; gi++) {
			struct group *g = &AT(groups, struct group, gi);
			if (g->rec && !g->rec->bad && g->file && g->refs)
				g->job = &AT(jobs, struct vjob, ji++);
			rc = handle_group(f, g);
		}
		if (dfd >= 0)
			close(dfd);
	}
	if (!rc && frc != MDB_NOTFOUND && frc != 0)
		rc = pd_mdb_err(frc);
	/* records past the last prefix (keys that did not fit) */
	for (; !rc && frc == 0; frc = mdb_cursor_get(cf, &fk, &fv, MDB_NEXT)) {
		say(f, K_BLOB, "fingerprints: a key of %zu bytes (repair: removed)", fk.mv_size);
		rc = add_raw(f, NF_RAW_FP, &fk, &fv);
	}
	prog(f, "blobs", done, done);
	if (objfd >= 0)
		close(objfd);
	free(present);
	vec_free(&recs);
	vec_free(&counts);
	vec_free(&files);
	vec_free(&groups);
	vec_free(&jobs);
	if (cf)
		mdb_cursor_close(cf);
	if (cb)
		mdb_cursor_close(cb);
	return rc;
}

/* ---- the near-duplicate tables ------------------------------------------ */

/* PLACE FOR THE NEAR-DUPLICATE CHECK. The permuted simhash tables of
 * DESIGN.md ("Near-duplicates") are not in the store yet. When they are,
 * check here that every fingerprint with FPREC_HAS_SIMHASH has exactly one
 * row in each table (its permuted leading bits -> (simhash, blob key)),
 * that no row names a fingerprint that is gone or has another simhash, and
 * that no fingerprint without a simhash has rows; walk each table in key
 * order and compare a multiset hash of its rows with one of the expected
 * rows summed in pass_blobs, as for dirents and links. Repair: rebuild the
 * tables from the fingerprints (the simhash is in each record). */
static int check_near(struct fsck *f)
{
	(void)f;
	return 0;
}

/* ---- pass 5: the filter and the exact counts ---------------------------- */

static uint64_t tally_of(struct fsck *f, uint64_t idx)
{
	uint64_t n = f->tally[idx];
	if (n == 255)
		for (size_t i = 0; i < f->tally_over.n; i++)
			if (((uint64_t *)f->tally_over.v)[2 * i] == idx)
				n += ((uint64_t *)f->tally_over.v)[2 * i + 1];
	return n;
}

static int pass_filter(struct fsck *f)
{
	if (!f->sh.filter) {
		say(f, K_FILTER, "filter: the file is missing or is not a filter (repair: rebuilt)");
		f->fix_filter = f->fix_any = true;
		return 0;
	}
	if (!f->clean) {
		say(f, K_NOTE, "note: the store was not closed cleanly; its filter is rebuilt from the stored positions at the next open, so it is not checked");
		return 0;
	}
	if (!f->filter_trusted) {
		say(f, K_NOTE, "note: the filter file is of another generation than the store; it is rebuilt at the next open, so it is not checked");
		return 0;
	}
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_saturated, &c));
	if (rc)
		return rc;
	MDB_val k, v;
	int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	uint64_t bad = 0, n = f->ncounters;
	prog(f, "filter", 0, n);
	for (uint64_t idx = 0; idx < n; idx++) {
		if ((idx & 0xfffff) == 0 && idx)
			prog(f, "filter", idx, n);
		while (mrc == 0 && (k.mv_size != 8 || get_be64(k.mv_data) < idx)) {
			say(f, K_FILTER, "saturated: a malformed entry (repair: filter rebuilt)");
			f->fix_filter = true;
			mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
		}
		bool has_exact = mrc == 0 && get_be64(k.mv_data) == idx;
		uint64_t exact = has_exact && v.mv_size == 8 ? get_le64(v.mv_data) : 0;
		if (has_exact)
			mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
		unsigned got = cbf_get(f->sh.filter, idx);
		uint64_t want = f->tally[idx];
		if (want < CBF_COUNTER_MAX && got == want && !has_exact)
			continue;
		if (want == 255)
			want = tally_of(f, idx);
		unsigned want_ctr = want < CBF_COUNTER_MAX ? (unsigned)want : CBF_COUNTER_MAX;
		if (got != want_ctr) {
			bad++;
			say(f, K_FILTER, "filter counter %llu is %u, but %llu stored positions are on it (repair: filter rebuilt)",
			    (unsigned long long)idx, got, (unsigned long long)want);
		} else if (want >= CBF_COUNTER_MAX && !has_exact) {
			bad++;
			say(f, K_FILTER, "filter counter %llu is saturated (%llu positions) but has no exact count in saturated (repair: filter rebuilt)",
			    (unsigned long long)idx, (unsigned long long)want);
		} else if (want >= CBF_COUNTER_MAX && exact != want) {
			bad++;
			say(f, K_FILTER, "saturated exact count of filter counter %llu is %llu, but %llu stored positions are on it (repair: filter rebuilt)",
			    (unsigned long long)idx, (unsigned long long)exact, (unsigned long long)want);
		} else if (want < CBF_COUNTER_MAX && has_exact) {
			bad++;
			say(f, K_FILTER, "saturated holds an exact count (%llu) for filter counter %llu, which is not saturated (%llu positions) (repair: filter rebuilt)",
			    (unsigned long long)exact, (unsigned long long)idx, (unsigned long long)want);
		}
	}
	for (; mrc == 0; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		bad++;
		say(f, K_FILTER, "saturated: an entry for counter %llu, outside the filter (repair: filter rebuilt)",
		    k.mv_size == 8 ? (unsigned long long)get_be64(k.mv_data) : 0ull);
	}
	mdb_cursor_close(c);
	prog(f, "filter", n, n);
	if (bad)
		f->fix_filter = f->fix_any = true;
	return 0;
}

/* ---- totals and staging ------------------------------------------------ */

static void check_totals(struct fsck *f)
{
	struct pd_counters *c = &f->stored, *w = &f->computed;
	struct { const char *name; int64_t have, want; } t[] = {
		{ "pages", c->pages, w->pages },
		{ "logical_bytes", c->logical_bytes, w->logical_bytes },
		{ "blobs", c->blobs, w->blobs },
		{ "stored_bytes", c->stored_bytes, w->stored_bytes },
	};
	bool bad = false;
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (t[i].have != t[i].want) {
			say(f, K_TOTAL, "total %s is %lld, the tables hold %lld (repair: recounted)", t[i].name,
			    (long long)t[i].have, (long long)t[i].want);
			bad = true;
		}
	for (unsigned b = 0; b < PD_HIST_BUCKETS; b++)
		if (c->hist[b] != w->hist[b]) {
			say(f, K_TOTAL, "total of blobs with refcount %llu..%llu is %lld, the tables hold %lld (repair: recounted)",
			    1ull << b, (2ull << b) - 1, (long long)c->hist[b], (long long)w->hist[b]);
			bad = true;
		}
	f->fix_any |= bad;
}

static int walk_staging(struct fsck *f)
{
	int fd = openat(f->sh.dirfd, "staging", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		say(f, K_FILE, "staging/: cannot read the directory: %s", strerror(errno));
		return 0;
	}
	struct dirent *e;
	int rc = 0;
	char rel[300];
	uint64_t n = 0;
	prog(f, "staging", 0, 0);
	while (!rc && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		n++;
		snprintf(rel, sizeof rel, "staging/%s", e->d_name);
		if (e->d_type == DT_DIR)
			say(f, K_FILE, "%s: a directory where only staged files belong (left as it is)", rel);
		else if (!f->clean)
			say(f, K_NOTE, "note: %s: bytes of a file being written when the store stopped (removed at the next open)",
			    rel);
		else {
			say(f, K_FILE, "%s: file unknown to the store (an orphan a crash can leave) (repair: removed)", rel);
			rc = add_rm_file(f, rel);
		}
	}
	closedir(d);
	prog(f, "staging", n, n);
	return rc;
}

static int check_all(struct fsck *f)
{
	int rc = pd_mdb_err(mdb_txn_begin(f->sh.env, NULL, MDB_RDONLY, &f->txn));
	if (rc)
		return rc;
	f->filter_trusted = f->sh.filter && f->clean && cbf_generation(f->sh.filter) == f->generation;
	const struct cbf *g = geometry_filter(f);
	f->ncounters = g ? cbf_geometry(g)->nlines * CBF_LINE_COUNTERS : 0;
	if (f->ncounters && !(f->tally = calloc(f->ncounters, 1)))
		rc = -ENOMEM;
	if (!rc)
		rc = pass_inodes(f);
	if (!rc)
		rc = check_dirs(f);
	if (!rc)
		rc = pass_dirents(f);
	if (!rc && (!sums_equal(f->s_dirent, f->s_link) || f->n_dirent != f->n_link))
		rc = diagnose_names(f);
	if (!rc)
		rc = pass_blob_index(f);
	if (!rc)
		rc = pass_blobs(f);
	if (!rc)
		rc = check_near(f);
	if (!rc)
		rc = pass_filter(f);
	if (!rc)
		check_totals(f);
	if (!rc)
		rc = walk_staging(f);
	mdb_txn_abort(f->txn);
	f->txn = NULL;
	return rc;
}

/* ---- repair: names -------------------------------------------------------- */

static int r_dirent_add(struct fsck *f, uint64_t parent, const char *name, size_t len, uint64_t child,
			uint32_t mode)
{
	uint8_t kb[16], vb[DIRENT_VAL_MAX];
	put_be64(kb, parent);
	put_be64(kb + 8, dirent_hash(name, len));
	MDB_val k = { 16, kb }, v = { dirent_val_encode(name, len, child, mode, vb), vb };
	int rc = mdb_put(f->txn, f->sh.db_dirents, &k, &v, MDB_NODUPDATA);
	return rc == MDB_KEYEXIST ? 0 : pd_mdb_err(rc);
}

/* Remove the dirent (parent, name) if it names child (any child if 0). */
static int r_dirent_del(struct fsck *f, uint64_t parent, const char *name, size_t len, uint64_t child)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_dirents, &c));
	if (rc)
		return rc;
	uint64_t got;
	uint32_t type;
	if (dirent_lookup(c, parent, name, len, &got, &type) == 0 && (!child || got == child))
		rc = pd_mdb_err(mdb_cursor_del(c, 0));
	mdb_cursor_close(c);
	return rc;
}

static int r_lookup(struct fsck *f, uint64_t parent, const char *name, size_t len, uint64_t *child,
		    uint32_t *type)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_dirents, &c));
	if (rc)
		return rc;
	rc = dirent_lookup(c, parent, name, len, child, type);
	mdb_cursor_close(c);
	return rc;
}

static int r_link(struct fsck *f, bool add, uint64_t ino, uint64_t parent, const char *name, size_t len)
{
	uint8_t kb[8], vb[LINK_VAL_MAX];
	put_be64(kb, ino);
	put_be64(vb, parent);
	memcpy(vb + 8, name, len);
	MDB_val k = { 8, kb }, v = { 8 + len, vb };
	int rc = add ? mdb_put(f->txn, f->sh.db_links, &k, &v, MDB_NODUPDATA) : mdb_del(f->txn, f->sh.db_links, &k, &v);
	return rc == MDB_KEYEXIST || rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
}

static int r_raw_del(struct fsck *f, MDB_dbi db, const struct nfix *x)
{
	MDB_val k = { x->len, f->arena.v + x->off }, v = { x->vlen, f->arena.v + x->off + x->len };
	int rc = mdb_del(f->txn, db, &k, x->vlen ? &v : NULL);
	return rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
}

static int r_xattr(struct fsck *f, uint64_t ino, const char *name, const void *val, size_t len)
{
	uint8_t kb[8 + PD_XATTR_NAME_MAX];
	size_t nl = strlen(name);
	put_be64(kb, ino);
	memcpy(kb + 8, name, nl);
	MDB_val k = { 8 + nl, kb }, v = { len, (void *)val };
	return pd_mdb_err(mdb_put(f->txn, f->sh.db_xattrs, &k, &v, 0));
}

/* The lost+found directory, made at the root when first needed. */
static int lf_dir(struct fsck *f, uint64_t *out)
{
	if (f->lf_ino) {
		*out = f->lf_ino;
		return 0;
	}
	char name[32];
	for (unsigned n = 0; n < 1000; n++) {
		if (n)
			snprintf(name, sizeof name, "%s.%u", FSCK_LOST_FOUND, n);
		else
			snprintf(name, sizeof name, "%s", FSCK_LOST_FOUND);
		size_t len = strlen(name);
		uint64_t child;
		uint32_t type;
		struct inode in;
		int rc = r_lookup(f, PD_ROOT_INO, name, len, &child, &type);
		if (rc == 0) {
			if (S_ISDIR(type) && ns_get_inode(f->txn, &f->sh, child, &in) == 0 && S_ISDIR(in.mode)) {
				*out = f->lf_ino = child;
				return 0;
			}
			continue;
		}
		if (rc != -ENOENT)
			return rc;
		struct wtx w = { .st = &f->sh, .txn = f->txn, .now = f->now };
		struct inode d = { .mode = S_IFDIR | 0700, .uid = getuid(), .gid = getgid(), .nlink = 2 };
		d.atime = d.mtime = d.ctime = f->now;
		if ((rc = wtx_next_ino(&w, &d.ino)) || (rc = ns_put_inode(f->txn, &f->sh, &d)) ||
		    (rc = r_dirent_add(f, PD_ROOT_INO, name, len, d.ino, d.mode)) ||
		    (rc = r_link(f, true, d.ino, PD_ROOT_INO, name, len)))
			return rc;
		struct inode root;
		if (ns_get_inode(f->txn, &f->sh, PD_ROOT_INO, &root) == 0) {
			root.nlink++;
			root.mtime = root.ctime = f->now;
			if ((rc = ns_put_inode(f->txn, &f->sh, &root)))
				return rc;
		}
		say(f, K_REPAIR, "repaired: made /%s (inode %llu), mode 0700", name, (unsigned long long)d.ino);
		*out = f->lf_ino = d.ino;
		return 0;
	}
	return -EEXIST;
}

/* Give ino a name in lost+found: "<ino>-<name>", or "<ino>" with no name. */
static int lf_link(struct fsck *f, uint64_t ino, uint32_t mode, const char *name, size_t len)
{
	uint64_t lf;
	int rc = lf_dir(f, &lf);
	if (rc)
		return rc;
	char buf[PD_NAME_MAX + 1];
	for (unsigned n = 1; n < 100000; n++) {
		int l = n == 1 ? snprintf(buf, sizeof buf, "%llu%s", (unsigned long long)ino, len ? "-" : "")
			       : snprintf(buf, sizeof buf, "%llu.%u%s", (unsigned long long)ino, n, len ? "-" : "");
		size_t take = len < (size_t)(PD_NAME_MAX - l) ? len : (size_t)(PD_NAME_MAX - l);
		for (size_t i = 0; i < take; i++)
			buf[l + i] = name[i] == '/' || name[i] == 0 ? '_' : name[i];
		size_t total = (size_t)l + take;
		uint64_t child;
		uint32_t type;
		if ((rc = r_lookup(f, lf, buf, total, &child, &type)) == -ENOENT) {
			if ((rc = r_dirent_add(f, lf, buf, total, ino, mode)) ||
			    (rc = r_link(f, true, ino, lf, buf, total)))
				return rc;
			say(f, K_REPAIR, "repaired: inode %llu is now /%s/%.*s", (unsigned long long)ino, FSCK_LOST_FOUND,
			    (int)total, buf);
			return 0;
		}
		if (rc)
			return rc;
	}
	return -EEXIST;
}

struct linkname {
	uint64_t parent;
	uint32_t len;
	char name[PD_NAME_MAX];
};

static int links_of(struct fsck *f, uint64_t ino, struct vec *out)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_links, &c));
	if (rc)
		return rc;
	uint8_t kb[8];
	put_be64(kb, ino);
	MDB_val k = { 8, kb }, v;
	out->n = 0;
	for (int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_KEY); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP)) {
		if (v.mv_size < 9 || v.mv_size > LINK_VAL_MAX)
			continue;
		struct linkname *l = vec_push(out);
		if (!l) {
			rc = -ENOMEM;
			break;
		}
		l->parent = get_be64(v.mv_data);
		l->len = (uint32_t)(v.mv_size - 8);
		memcpy(l->name, (char *)v.mv_data + 8, l->len);
	}
	mdb_cursor_close(c);
	return rc;
}

static int add_path(void *ctx, const char *path, size_t len)
{
	struct vec *a = ctx;
	if (a->n + len + 1 > 65536)
		return 1;
	if ((a->n && arena_add(a, "\n", 1) == SIZE_MAX) || arena_add(a, path, len) == SIZE_MAX)
		return -ENOMEM;
	return 0;
}

/* Move every name of ino into lost+found (give it one if it has none).
 * lost: its bytes are gone; it no longer refers to a blob, and the xattrs
 * of fsck.h say what it held. The caller fixes blob_inodes and the record. */
static int lf_adopt(struct fsck *f, uint64_t ino, const uint8_t *lost)
{
	struct inode in;
	int rc = ns_get_inode(f->txn, &f->sh, ino, &in);
	if (rc)
		return rc;
	struct vec links = VEC(struct linkname), paths = VEC(char);
	uint64_t lf = 0;
	if ((rc = links_of(f, ino, &links)))
		goto out;
	if (lost) {
		char hex[33], size[24];
		struct blobkey k;
		blobkey_decode(lost, &k);
		fp_hex(k.md5, hex);
		snprintf(size, sizeof size, "%llu", (unsigned long long)in.size);
		if ((rc = path_names(f->txn, &f->sh, ino, NULL, add_path, &paths)) < 0 && rc != -ENOMEM)
			rc = 0; /* a path through damage: the xattr holds what was found */
		if (rc < 0)
			goto out;
		rc = 0;
		if ((rc = r_xattr(f, ino, FSCK_XATTR_LOST_MD5, hex, 32)) ||
		    (rc = r_xattr(f, ino, FSCK_XATTR_LOST_SIZE, size, strlen(size))) ||
		    (paths.n && (rc = r_xattr(f, ino, FSCK_XATTR_LOST_PATH, paths.v, paths.n))))
			goto out;
		f->computed.logical_bytes -= (int64_t)in.size;
		in.flags &= ~INODE_HAS_BLOB;
		in.size = 0;
		memset(&in.blob, 0, sizeof in.blob);
		f->res->lost++;
	} else {
		f->res->adopted++;
	}
	in.ctime = f->now;
	if ((rc = ns_put_inode(f->txn, &f->sh, &in)))
		goto out;
	if (!links.n && in.nlink == 0)
		goto out; /* an orphan: deleted at the next open */
	if ((rc = lf_dir(f, &lf)))
		goto out;
	for (size_t i = 0; i < links.n && !rc; i++) {
		struct linkname *l = &AT(links, struct linkname, i);
		if (l->parent == lf)
			continue;
		if (!(rc = r_dirent_del(f, l->parent, l->name, l->len, ino)) &&
		    !(rc = r_link(f, false, ino, l->parent, l->name, l->len)))
			rc = lf_link(f, ino, in.mode, l->name, l->len);
	}
	if (!rc && !links.n)
		rc = lf_link(f, ino, in.mode, "", 0);
out:
	vec_free(&links);
	vec_free(&paths);
	return rc;
}

static int repair_names(struct fsck *f)
{
	int rc = 0;
	for (size_t i = 0; i < f->nfix.n && !rc; i++) {
		struct nfix *x = &AT(f->nfix, struct nfix, i);
		const char *name = f->arena.v + x->off;
		size_t len = x->len;
		struct inode in;
		uint64_t got;
		uint32_t type;
		switch (x->kind) {
		case NF_DANGLING:
			if (!(rc = r_dirent_del(f, x->parent, name, len, x->child)))
				rc = r_link(f, false, x->child, x->parent, name, len);
			break;
		case NF_STRAY_LINK:
		case NF_LINK_MISMATCH:
			rc = r_link(f, false, x->child, x->parent, name, len);
			break;
		case NF_ADD_LINK: {
			struct vec ls = VEC(struct linkname);
			if ((rc = ns_get_inode(f->txn, &f->sh, x->child, &in)) || (rc = links_of(f, x->child, &ls))) {
				vec_free(&ls);
				break;
			}
			if (S_ISDIR(in.mode) && ls.n) {
				rc = r_dirent_del(f, x->parent, name, len, x->child);
				say(f, K_REPAIR, "repaired: removed '%.*s' in %llu, a second name of directory %llu",
				    (int)len, name, (unsigned long long)x->parent, (unsigned long long)x->child);
			} else {
				rc = r_link(f, true, x->child, x->parent, name, len);
			}
			vec_free(&ls);
			break;
		}
		case NF_ADD_DIRENT: {
			struct inode p;
			bool parent_ok = ns_get_inode(f->txn, &f->sh, x->parent, &p) == 0 && S_ISDIR(p.mode) &&
					 p.nlink > 0 && name_valid(name, len);
			if ((rc = ns_get_inode(f->txn, &f->sh, x->child, &in)))
				break;
			int lrc = parent_ok ? r_lookup(f, x->parent, name, len, &got, &type) : -ENOENT;
			if (parent_ok && lrc == -ENOENT)
				rc = r_dirent_add(f, x->parent, name, len, x->child, in.mode);
			else if (parent_ok && lrc == 0 && got == x->child)
				rc = 0; /* back already (a misfiled dirent, refiled above) */
			else /* its name is taken or its parent gone: the inode may go to lost+found */
				rc = r_link(f, false, x->child, x->parent, name, len);
			break;
		}
		case NF_TYPE:
			if ((rc = ns_get_inode(f->txn, &f->sh, x->child, &in)))
				break;
			if (!(rc = r_dirent_del(f, x->parent, name, len, x->child)))
				rc = r_dirent_add(f, x->parent, name, len, x->child, in.mode);
			break;
		case NF_REHASH: {
			uint8_t kb[16], vb[DIRENT_VAL_MAX];
			put_be64(kb, x->parent);
			put_be64(kb + 8, x->hash);
			MDB_val k = { 16, kb }, v = { dirent_val_encode(name, len, x->child, x->type, vb), vb };
			rc = mdb_del(f->txn, f->sh.db_dirents, &k, &v);
			rc = rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
			if (!rc && r_lookup(f, x->parent, name, len, &got, &type) == -ENOENT)
				rc = r_dirent_add(f, x->parent, name, len, x->child, x->type);
			else if (!rc)
				rc = r_link(f, false, x->child, x->parent, name, len);
			break;
		}
		case NF_BAD_PARENT:
		case NF_BAD_NAME: {
			uint8_t kb[16], vb[DIRENT_VAL_MAX];
			put_be64(kb, x->parent);
			put_be64(kb + 8, x->hash);
			MDB_val k = { 16, kb }, v = { dirent_val_encode(name, len, x->child, x->type, vb), vb };
			rc = mdb_del(f->txn, f->sh.db_dirents, &k, &v);
			rc = rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
			if (!rc)
				rc = r_link(f, false, x->child, x->parent, name, len);
			if (!rc && ns_get_inode(f->txn, &f->sh, x->child, &in) == 0)
				rc = lf_link(f, x->child, in.mode, name, len);
			break;
		}
		case NF_RAW_DIRENT:
			rc = r_raw_del(f, f->sh.db_dirents, x);
			break;
		case NF_RAW_LINK:
			rc = r_raw_del(f, f->sh.db_links, x);
			break;
		case NF_RAW_BLOBREF:
			rc = r_raw_del(f, f->sh.db_blob_inodes, x);
			break;
		case NF_RAW_FP:
			rc = r_raw_del(f, f->sh.db_fp, x);
			break;
		}
	}
	if (!rc && f->nfix.n)
		say(f, K_REPAIR, "repaired: %zu dirents, link records and malformed entries fixed", f->nfix.n);
	return rc;
}

/* ---- repair: blobs -------------------------------------------------------- */

static int repair_blob_index(struct fsck *f)
{
	int rc = 0;
	for (size_t i = 0; i < f->stale.n && !rc; i++) {
		struct bref *b = &AT(f->stale, struct bref, i);
		uint8_t vb[8];
		put_be64(vb, b->ino);
		MDB_val k = { BLOBKEY_BYTES, b->key }, v = { 8, vb };
		rc = mdb_del(f->txn, f->sh.db_blob_inodes, &k, &v);
		rc = rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
	}
	for (size_t i = 0; i < f->missing.n && !rc; i++) {
		struct bref *b = &AT(f->missing, struct bref, i);
		uint8_t vb[8];
		put_be64(vb, b->ino);
		MDB_val k = { BLOBKEY_BYTES, b->key }, v = { 8, vb };
		rc = mdb_put(f->txn, f->sh.db_blob_inodes, &k, &v, MDB_NODUPDATA);
		rc = rc == MDB_KEYEXIST ? 0 : pd_mdb_err(rc);
	}
	if (!rc && (f->stale.n || f->missing.n))
		say(f, K_REPAIR, "repaired: blob_inodes: %zu entries removed, %zu added", f->stale.n, f->missing.n);
	return rc;
}

/* The inodes on blob key (blob_inodes, as repaired). */
static int inodes_on(struct fsck *f, const uint8_t *key, struct vec *out)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_blob_inodes, &c));
	if (rc)
		return rc;
	MDB_val k = { BLOBKEY_BYTES, (void *)key }, v;
	out->n = 0;
	for (int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_KEY); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP)) {
		uint64_t *p = vec_push(out);
		if (!p)
			rc = -ENOMEM;
		else
			*p = get_be64(v.mv_data);
	}
	mdb_cursor_close(c);
	return rc;
}

static int drop_record(struct fsck *f, const uint8_t *key)
{
	MDB_val k = { BLOBKEY_BYTES, (void *)key };
	int rc = mdb_del(f->txn, f->sh.db_blob_inodes, &k, NULL);
	if (rc == 0 || rc == MDB_NOTFOUND)
		rc = mdb_del(f->txn, f->sh.db_fp, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
}

/* A damaged blob file moved out of objects/ (from) to damaged/ (to). */
struct moved {
	char from[BLOBKEY_PATH_MAX], to[128];
};

/* Move a damaged blob file to damaged/, keeping its bytes. This happens
 * before the commit that drops its record: a crash in between leaves a
 * record without its file (the next fsck reports its pages as lost, as
 * they are), never a damaged file in objects/ that a repair would remove
 * as an orphan. */
static int move_damaged(struct fsck *f, const uint8_t *key, struct moved *m)
{
	struct blobkey k;
	blobkey_decode(key, &k);
	blobkey_path(&k, m->from);
	if (mkdirat(f->sh.dirfd, FSCK_DAMAGED_DIR, 0700) && errno != EEXIST)
		return -errno;
	const char *base = strrchr(m->from, '/') + 1;
	for (unsigned n = 0; n < 1000; n++) {
		if (n)
			snprintf(m->to, sizeof m->to, "%s/%s~%u", FSCK_DAMAGED_DIR, base, n);
		else
			snprintf(m->to, sizeof m->to, "%s/%s", FSCK_DAMAGED_DIR, base);
		if (faccessat(f->sh.dirfd, m->to, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			continue;
		return renameat(f->sh.dirfd, m->from, f->sh.dirfd, m->to) ? -errno : 0;
	}
	return -EEXIST;
}

/* Rebuild a record from its file: 0 done, 1 the file is not that blob. */
static int recreate_record(struct fsck *f, const struct kfix *x, struct vec *inos)
{
	struct blobkey k;
	char path[BLOBKEY_PATH_MAX];
	blobkey_decode(x->key, &k);
	blobkey_path(&k, path);
	int fd = openat(f->sh.dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct fp fp;
	bool ok = fd >= 0 && fp_of_fd(fd, &fp) == 0 && memcmp(fp.md5, k.md5, 16) == 0;
	if (fd >= 0)
		close(fd);
	const struct cbf *g = geometry_filter(f);
	if (!ok || !g)
		return 1;
	struct fprec r = { .refcount = inos->n, .size = fp.size, .flags = FPREC_IN_FILTER };
	memcpy(r.xxh128, fp.xxh128, 16);
	cbf_positions(g, k.md5, &r.pos);
	int rc = blob_put(f->txn, &f->sh, &k, &r);
	for (size_t i = 0; i < inos->n && !rc; i++) {
		struct inode in;
		if ((rc = ns_get_inode(f->txn, &f->sh, AT(*inos, uint64_t, i), &in)))
			break;
		if (in.size != fp.size) {
			in.size = fp.size;
			rc = ns_put_inode(f->txn, &f->sh, &in);
		}
	}
	return rc;
}

static int repair_blobs(struct fsck *f, struct vec *moves)
{
	struct vec inos = VEC(uint64_t);
	int rc = 0;
	char hex[48];
	for (size_t i = 0; i < f->kfix.n && !rc; i++) {
		struct kfix *x = &AT(f->kfix, struct kfix, i);
		struct blobkey k;
		struct fprec r;
		blobkey_decode(x->key, &k);
		blob_name(x->key, hex);
		if ((rc = inodes_on(f, x->key, &inos)))
			break;
		switch (x->kind) {
		case KF_REFCOUNT:
			if (!(rc = blob_get(f->txn, &f->sh, &k, &r))) {
				r.refcount = inos.n;
				rc = blob_put(f->txn, &f->sh, &k, &r);
			}
			break;
		case KF_REPOS: {
			const struct cbf *g = geometry_filter(f);
			if (g && !(rc = blob_get(f->txn, &f->sh, &k, &r))) {
				cbf_positions(g, k.md5, &r.pos);
				r.flags |= FPREC_IN_FILTER;
				rc = blob_put(f->txn, &f->sh, &k, &r);
			}
			break;
		}
		case KF_UNREFERENCED:
			if (inos.n)
				break; /* not so after all (cannot happen: blob_inodes was repaired first) */
			rc = drop_record(f, x->key);
			if (!rc && x->file) {
				char path[BLOBKEY_PATH_MAX];
				blobkey_path(&k, path);
				rc = add_rm_file(f, path);
			}
			if (!rc)
				say(f, K_REPAIR, "repaired: blob %s, which no inode refers to, removed", hex);
			break;
		case KF_RECREATE:
			if (x->bad_record) {
				MDB_val kk = { BLOBKEY_BYTES, x->key };
				int d = mdb_del(f->txn, f->sh.db_fp, &kk, NULL);
				if (d && d != MDB_NOTFOUND) {
					rc = pd_mdb_err(d);
					break;
				}
			}
			rc = recreate_record(f, x, &inos);
			if (rc == 0) {
				say(f, K_REPAIR, "repaired: the record of blob %s rebuilt from its file (%zu inodes)", hex,
				    inos.n);
				break;
			}
			if (rc < 0)
				break;
			say(f, K_LEFT, "blob %s: its file does not hold the bytes of that MD5: damaged", hex);
			x->damaged = true;
			rc = 0;
			__attribute__((fallthrough)); /* its pages are lost */
		case KF_LOST:
			for (size_t j = 0; j < inos.n && !rc; j++)
				rc = lf_adopt(f, AT(inos, uint64_t, j), x->key);
			if (!rc)
				rc = drop_record(f, x->key);
			if (!rc && x->damaged) {
				uint8_t *p = vec_push(moves);
				if (!p)
					rc = -ENOMEM;
				else
					memcpy(p, x->key, BLOBKEY_BYTES);
			}
			if (!rc)
				say(f, K_REPAIR, "repaired: the %zu page%s on blob %s moved to /%s (empty, with %s)", inos.n,
				    inos.n == 1 ? "" : "s", hex, FSCK_LOST_FOUND, FSCK_XATTR_LOST_MD5);
			break;
		}
	}
	vec_free(&inos);
	return rc;
}

/* ---- repair: nameless inodes, the tree, link counts, totals --------------- */

/* One pass over inodes, links and orphans as they are now: for each inode,
 * its names; fn gets each inode (its decoded record), names and the parent
 * of its first name. */
static int scan_names(struct fsck *f, int (*fn)(struct fsck *f, const struct inode *in, uint64_t names,
						 uint64_t parent, bool orphan, void *ctx),
		      void *ctx)
{
	MDB_cursor *ci = NULL, *cl = NULL, *co = NULL;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_inodes, &ci));
	if (!rc)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_links, &cl));
	if (!rc)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_orphans, &co));
	MDB_val ik, iv, lk, lv, ok, ov;
	int lrc = rc ? MDB_NOTFOUND : mdb_cursor_get(cl, &lk, &lv, MDB_FIRST);
	int orc = rc ? MDB_NOTFOUND : mdb_cursor_get(co, &ok, &ov, MDB_FIRST);
	int irc;
	for (irc = rc ? MDB_NOTFOUND : mdb_cursor_get(ci, &ik, &iv, MDB_FIRST); irc == 0 && !rc;
	     irc = mdb_cursor_get(ci, &ik, &iv, MDB_NEXT)) {
		struct inode in;
		if (ik.mv_size != 8 || inode_decode(iv.mv_data, iv.mv_size, &in, NULL, NULL))
			continue;
		in.ino = get_be64(ik.mv_data);
		while (lrc == 0 && (lk.mv_size != 8 || get_be64(lk.mv_data) < in.ino))
			lrc = mdb_cursor_get(cl, &lk, &lv, MDB_NEXT);
		uint64_t names = 0, parent = 0;
		for (; lrc == 0 && lk.mv_size == 8 && get_be64(lk.mv_data) == in.ino;
		     lrc = mdb_cursor_get(cl, &lk, &lv, MDB_NEXT))
			if (lv.mv_size >= 9 && !names++)
				parent = get_be64(lv.mv_data);
		while (orc == 0 && (ok.mv_size != 8 || get_be64(ok.mv_data) < in.ino))
			orc = mdb_cursor_get(co, &ok, &ov, MDB_NEXT);
		bool orphan = orc == 0 && ok.mv_size == 8 && get_be64(ok.mv_data) == in.ino;
		rc = fn(f, &in, names, parent, orphan, ctx);
	}
	if (ci)
		mdb_cursor_close(ci);
	if (cl)
		mdb_cursor_close(cl);
	if (co)
		mdb_cursor_close(co);
	return rc;
}

static int find_nameless(struct fsck *f, const struct inode *in, uint64_t names, uint64_t parent, bool orphan,
			 void *ctx)
{
	(void)f;
	(void)parent;
	(void)orphan;
	if (names || in->nlink == 0 || in->ino == PD_ROOT_INO)
		return 0;
	uint64_t *p = vec_push(ctx);
	if (!p)
		return -ENOMEM;
	*p = in->ino;
	return 0;
}

static int repair_nameless(struct fsck *f)
{
	struct vec v = VEC(uint64_t);
	int rc = scan_names(f, find_nameless, &v);
	for (size_t i = 0; i < v.n && !rc; i++)
		rc = lf_adopt(f, AT(v, uint64_t, i), NULL);
	vec_free(&v);
	return rc;
}

static int collect_dirs(struct fsck *f, const struct inode *in, uint64_t names, uint64_t parent, bool orphan,
			void *ctx)
{
	(void)f;
	if (!S_ISDIR(in->mode))
		return 0;
	struct dnode *d = vec_push(ctx);
	if (!d)
		return -ENOMEM;
	*d = (struct dnode){ in->ino, parent, in->nlink, (uint32_t)names, 0, 0, orphan };
	return 0;
}

static void adopt_top(void *ctx, struct dnode *top, bool cycle)
{
	(void)cycle;
	struct vec *tops = ctx;
	uint64_t *p = vec_push(tops);
	if (p)
		*p = top->ino;
}

static int repair_tree(struct fsck *f)
{
	struct vec dirs = VEC(struct dnode), tops = VEC(uint64_t), links = VEC(struct linkname);
	int rc = 0;
	for (int round = 0; round < 8 && !rc; round++) {
		dirs.n = tops.n = 0;
		if ((rc = scan_names(f, collect_dirs, &dirs)))
			break;
		/* extra names: a directory keeps its first, the root has none */
		bool changed = false;
		for (size_t i = 0; i < dirs.n && !rc; i++) {
			struct dnode *d = &AT(dirs, struct dnode, i);
			if (d->names <= (d->ino == PD_ROOT_INO ? 0u : 1u))
				continue;
			if ((rc = links_of(f, d->ino, &links)))
				break;
			for (size_t j = d->ino == PD_ROOT_INO ? 0 : 1; j < links.n && !rc; j++) {
				struct linkname *l = &AT(links, struct linkname, j);
				if (!(rc = r_dirent_del(f, l->parent, l->name, l->len, d->ino)))
					rc = r_link(f, false, d->ino, l->parent, l->name, l->len);
				say(f, K_REPAIR, "repaired: removed '%.*s' in %llu, an extra name of directory %llu",
				    (int)l->len, l->name, (unsigned long long)l->parent, (unsigned long long)d->ino);
			}
			changed = true;
		}
		if (rc || changed)
			continue;
		uint64_t cut_off;
		if ((rc = tree_walk(&dirs, adopt_top, &tops, &cut_off)) || !tops.n)
			break;
		for (size_t i = 0; i < tops.n && !rc; i++)
			rc = lf_adopt(f, AT(tops, uint64_t, i), NULL);
	}
	vec_free(&dirs);
	vec_free(&tops);
	vec_free(&links);
	return rc;
}

struct ncount {
	uint64_t ino, parent;
	uint32_t nlink, names, subdirs, mode;
	bool orphan;
};

static int count_links(struct fsck *f, const struct inode *in, uint64_t names, uint64_t parent, bool orphan,
		       void *ctx)
{
	(void)f;
	struct ncount *c = vec_push(ctx);
	if (!c)
		return -ENOMEM;
	*c = (struct ncount){ in->ino, parent, in->nlink, (uint32_t)names, 0, in->mode, orphan };
	return 0;
}

static struct ncount *ncount_find(struct vec *v, uint64_t ino)
{
	struct ncount *c = (struct ncount *)v->v;
	size_t lo = 0, hi = v->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < v->n && c[lo].ino == ino ? &c[lo] : NULL;
}

/* Set every nlink from the names, and the orphan marks from nlink. */
static int repair_counts(struct fsck *f)
{
	struct vec v = VEC(struct ncount);
	int rc = scan_names(f, count_links, &v);
	struct ncount *c = (struct ncount *)v.v;
	for (size_t i = 0; i < v.n && !rc; i++) {
		if (!S_ISDIR(c[i].mode) || !c[i].names || c[i].ino == PD_ROOT_INO)
			continue;
		struct ncount *p = ncount_find(&v, c[i].parent);
		if (p && S_ISDIR(p->mode))
			p->subdirs++;
	}
	for (size_t i = 0; i < v.n && !rc; i++) {
		bool named = c[i].names || c[i].ino == PD_ROOT_INO;
		uint64_t want = !named ? 0 : S_ISDIR(c[i].mode) ? 2 + (uint64_t)c[i].subdirs : c[i].names;
		if (!named && c[i].nlink) {
			say(f, K_LEFT, "inode %llu still has no name: nlink left at %u", (unsigned long long)c[i].ino,
			    c[i].nlink);
			continue;
		}
		if (want != c[i].nlink) {
			struct inode in;
			if ((rc = ns_get_inode(f->txn, &f->sh, c[i].ino, &in)))
				break;
			in.nlink = (uint32_t)want;
			if ((rc = ns_put_inode(f->txn, &f->sh, &in)))
				break;
			say(f, K_REPAIR, "repaired: nlink of %s %llu set from %u to %llu", type_name(c[i].mode),
			    (unsigned long long)c[i].ino, c[i].nlink, (unsigned long long)want);
		}
		if ((want == 0) != c[i].orphan) {
			uint8_t kb[8];
			put_be64(kb, c[i].ino);
			MDB_val k = { 8, kb }, e = { 0, NULL };
			rc = pd_mdb_err(want == 0 ? mdb_put(f->txn, f->sh.db_orphans, &k, &e, 0)
						  : mdb_del(f->txn, f->sh.db_orphans, &k, NULL));
			if (!rc)
				say(f, K_REPAIR, "repaired: orphan mark of inode %llu %s", (unsigned long long)c[i].ino,
				    want ? "removed" : "set");
		}
	}
	/* orphan marks of inodes that do not exist */
	MDB_cursor *co;
	if (!rc && !(rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_orphans, &co)))) {
		MDB_val k, e;
		for (int mrc = mdb_cursor_get(co, &k, &e, MDB_FIRST); mrc == 0 && !rc;
		     mrc = mdb_cursor_get(co, &k, &e, MDB_NEXT)) {
			if (k.mv_size == 8 && ncount_find(&v, get_be64(k.mv_data)))
				continue;
			rc = pd_mdb_err(mdb_cursor_del(co, 0));
			say(f, K_REPAIR, "repaired: removed the orphan mark of a missing inode");
		}
		mdb_cursor_close(co);
	}
	vec_free(&v);
	return rc;
}

static int repair_totals(struct fsck *f)
{
	struct pd_counters now = f->stored, want = f->stored;
	want.pages = want.logical_bytes = want.blobs = want.stored_bytes = 0;
	memset(want.hist, 0, sizeof want.hist);
	MDB_cursor *c;
	MDB_val k, v;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_inodes, &c));
	int mrc;
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct inode in;
		if (inode_decode(v.mv_data, v.mv_size, &in, NULL, NULL) || !S_ISREG(in.mode))
			continue;
		want.pages++;
		want.logical_bytes += (int64_t)in.size;
	}
	if (!rc)
		mdb_cursor_close(c);
	if (!rc)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_fp, &c));
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct fprec r;
		if (fprec_decode(v.mv_data, v.mv_size, &r))
			continue;
		want.blobs++;
		want.stored_bytes += (int64_t)r.size;
		if (r.refcount)
			want.hist[pd_hist_bucket(r.refcount)]++;
	}
	if (!rc)
		mdb_cursor_close(c);
	if (!rc && memcmp(&now, &want, sizeof now)) {
		rc = counters_write(f, &want);
		if (!rc)
			say(f, K_REPAIR, "repaired: totals recounted (%lld pages, %lld blobs)", (long long)want.pages,
			    (long long)want.blobs);
	}
	return rc;
}

/* Is rel a blob file that a record or an inode refers to? (The last check
 * before a file in objects/ is removed: no page may lose its bytes.) */
static bool blob_in_use(struct fsck *f, MDB_txn *txn, const char *rel)
{
	const char *base = strrchr(rel, '/');
	struct blobkey k = { .variant = 0 };
	if (strncmp(rel, "objects/", 8) || !base || strlen(base + 1) < 32 || fp_unhex(base + 1, k.md5))
		return false;
	if (base[33] == '.')
		k.variant = (uint32_t)strtoul(base + 34, NULL, 10);
	uint8_t key[BLOBKEY_BYTES];
	blobkey_encode(&k, key);
	MDB_val kk = { BLOBKEY_BYTES, key }, v;
	return f->bad_inodes || mdb_get(txn, f->sh.db_fp, &kk, &v) == 0 ||
	       mdb_get(txn, f->sh.db_blob_inodes, &kk, &v) == 0;
}

static void remove_files(struct fsck *f)
{
	uint64_t n = 0;
	char rel[512];
	MDB_txn *txn;
	if (mdb_txn_begin(f->sh.env, NULL, MDB_RDONLY, &txn))
		return;
	for (size_t i = 0; i < f->rm_files.n; i++) {
		struct pathref *p = &AT(f->rm_files, struct pathref, i);
		snprintf(rel, sizeof rel, "%.*s", (int)p->len, f->arena.v + p->off);
		if (blob_in_use(f, txn, rel))
			say(f, K_LEFT, "%s: left in place (a record or an inode refers to its name)", rel);
		else if (unlinkat(f->sh.dirfd, rel, 0) == 0 || errno == ENOENT)
			n++;
		else
			say(f, K_LEFT, "cannot remove %s: %s", rel, strerror(errno));
	}
	mdb_txn_abort(txn);
	if (n)
		say(f, K_REPAIR, "repaired: removed %llu file%s that no record refers to", (unsigned long long)n,
		    n == 1 ? "" : "s");
}

static int repair(struct fsck *f, char err[512])
{
	struct vec moves = VEC(uint8_t[BLOBKEY_BYTES]);
	f->now = pd_now();
	prog(f, "repair", 0, 0);
	int rc = pd_mdb_err(mdb_txn_begin(f->sh.env, NULL, 0, &f->txn));
	if (!rc)
		rc = repair_names(f);
	if (!rc)
		rc = repair_blob_index(f);
	if (!rc)
		rc = repair_blobs(f, &moves);
	if (!rc)
		rc = repair_nameless(f);
	if (!rc)
		rc = repair_tree(f);
	if (!rc)
		rc = repair_counts(f);
	if (!rc)
		rc = repair_totals(f);
	/* A filter that disagreed, or records that changed: rebuilt by the
	 * open below, from the stored positions. */
	bool rebuild = f->fix_filter || f->kfix.n;
	uint8_t zero = 0;
	if (!rc && rebuild)
		rc = meta_put(f, "clean", &zero, 1);
	struct vec moved = VEC(struct moved);
	for (size_t i = 0; i < moves.n && !rc; i++) {
		struct moved *m = vec_push(&moved);
		if (!m || (rc = move_damaged(f, (uint8_t *)moves.v + i * BLOBKEY_BYTES, m)))
			rc = rc ? rc : -ENOMEM;
	}
	if (!rc) {
		rc = pd_mdb_err(mdb_txn_commit(f->txn));
	} else {
		mdb_txn_abort(f->txn);
	}
	f->txn = NULL;
	for (size_t i = 0; i < moved.n; i++) {
		struct moved *m = &AT(moved, struct moved, i);
		if (rc) /* the records still refer to them: back in place */
			renameat(f->sh.dirfd, m->to, f->sh.dirfd, m->from);
		else
			say(f, K_REPAIR, "repaired: the damaged bytes of %s are kept as %s/%s", m->from, f->dir, m->to);
	}
	vec_free(&moved);
	vec_free(&moves);
	if (rc) {
		snprintf(err, 512, "the repair failed and changed nothing in the tables: %s", strerror(-rc));
		return rc;
	}
	remove_files(f);
	if (!f->sh.filter) {
		unlinkat(f->sh.dirfd, "filter", 0); /* not a filter: made anew at the open */
		rebuild = true;
	}
	/* Open for writing: the filter is rebuilt, orphans are deleted, staging
	 * is emptied; the close marks the store clean. */
	close_store(f);
	close(f->lockfd);
	f->lockfd = -1;
	struct store *st;
	struct store_opts so = { .sync_blobs = true };
	if ((rc = store_open(f->dir, &so, &st, err)))
		return rc;
	if ((rc = store_close(st))) {
		snprintf(err, 512, "closing %s after the repair: %s", f->dir, strerror(-rc));
		return rc;
	}
	if (rebuild)
		say(f, K_REPAIR, "repaired: filter and exact counts rebuilt from the stored positions");
	prog(f, "repair", 1, 1);
	return 0;
}

/* ---- driver ---------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int fsck_run(const char *dir, const struct fsck_opts *o, struct fsck_result *res, char err[512])
{
	double t0 = now_s();
	memset(res, 0, sizeof *res);
	*err = 0;
	struct fsck f = { .o = o, .res = res, .dir = dir, .lockfd = -1, .writable = o->repair };
	f.sh.dirfd = -1;
	f.dirs = (struct vec)VEC(struct dnode);
	f.tally_over = (struct vec)VEC(uint64_t[2]);
	f.nfix = (struct vec)VEC(struct nfix);
	f.arena = (struct vec)VEC(char);
	f.stale = (struct vec)VEC(struct bref);
	f.missing = (struct vec)VEC(struct bref);
	f.kfix = (struct vec)VEC(struct kfix);
	f.rm_files = (struct vec)VEC(struct pathref);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	f.threads = o->threads ? o->threads : ncpu > 0 ? (unsigned)ncpu : 1;
	if (f.threads > MAX_THREADS)
		f.threads = MAX_THREADS;
	int rc = lock_store(&f, err);
	if (!rc)
		rc = open_store(&f, err);
	if (!rc)
		rc = check_all(&f);
	say_more(&f);
	if (!rc && o->repair && f.fix_any && res->problems)
		rc = repair(&f, err);
	say_more(&f);
	close_store(&f);
	if (f.lockfd >= 0)
		close(f.lockfd);
	if (f.anon)
		cbf_close(f.anon);
	free(f.tally);
	vec_free(&f.dirs);
	vec_free(&f.tally_over);
	vec_free(&f.nfix);
	vec_free(&f.arena);
	vec_free(&f.stale);
	vec_free(&f.missing);
	vec_free(&f.kfix);
	vec_free(&f.rm_files);
	if (rc && !*err)
		snprintf(err, 512, "%s: %s", dir, strerror(-rc));
	res->seconds = now_s() - t0;
	return rc;
}
