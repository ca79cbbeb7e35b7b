/* fsck.c - the store checker and repairer: the driver (fsck_run), the
 * report and progress lines, opening the store, recording repairs, and the
 * order of the check passes and of the repair steps. What it checks and what
 * repair does are listed in fsck.h.
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
 * (dirents and links; names held in inode rows become link records first,
 * and go back into the rows once link counts are recounted), blob_inodes, per-blob fixes (refcounts, unreferenced
 * records, records rebuilt from files, lost pages to lost+found), nameless
 * inodes to lost+found, the directory tree (extra names, directories cut
 * off from the root), then link counts, orphan marks and totals recounted
 * from the tables as repaired. Damaged blob files move to STORE/damaged/
 * just before the commit (and back if it fails), orphan files are removed
 * after it; finally the store is opened and closed through archive_open(),
 * which rebuilds the filter from the stored positions (the transaction
 * marks the store unclean when the filter or a record changed) and deletes
 * orphans. A crash at any point leaves a store that the next fsck --repair
 * takes further, and never deletes bytes a page refers to.
 *
 * The store is opened here directly (LMDB environment, tables, meta,
 * filter) rather than with archive_open(): a damaged store may fail the
 * recovery archive_open() runs when it opens for writing (dropping orphans
 * and rebuilding the filter both trust the tables), and fsck must be able
 * to open exactly such a store. The functions of ns.c and blob.c that take
 * a transaction are used on a struct store that holds only the environment,
 * the table handles, the directory and the filter.
 *
 * The check and repair are split by concern: fsck_ns.c (passes 1 and 2:
 * inodes, links, orphans, the directory tree, dirents against links),
 * fsck_blobindex.c (pass 3: blob_inodes and the inodes rows hold against
 * the inodes), fsck_blobs.c (pass 4: fingerprints, blob files and --deep
 * hashing; the near tables, staging/), fsck_filter.c (pass 5: filter
 * counters and exact counts, the totals), fsck_packs.c (pack totals,
 * dictionaries, deltas), fsck_repair.c (the repair steps of the namespace,
 * lost+found), fsck_repair_blobs.c (those of the blobs, damaged/).
 * fsck_int.h holds what they share.
 */
#include "archive/archive.h"
#include "fsck_int.h"
#include "near/near.h"

/* ---- growable arrays and a byte arena -------------------------------- */

/* A zeroed new element at the end, NULL if out of memory. */
void *fsck_vec_push(struct vec *a)
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

void fsck_vec_free(struct vec *a)
{
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

/* Append len bytes to an arena (a vec of char); their offset, or
 * SIZE_MAX if out of memory. */
size_t fsck_arena_add(struct vec *a, const void *p, size_t len)
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

/* ---- report and progress lines ------------------------------------------ */

static const char *const kind_name[K_N] = {
	"notes", "repairs", "inode problems", "name problems", "link record problems",
	"link count problems", "directory tree problems", "orphan problems", "blob reference problems",
	"refcount problems", "blob problems", "orphan files", "filter problems",
	"near-duplicate table problems", "total problems", "crash leftovers",
	"problems left"
};

void fsck_say(struct fsck *f, enum kind k, const char *fmt, ...)
{
	if (k == K_NOTE)
		f->res->notes++;
	else if (k == K_LEFTOVER)
		f->res->leftovers++;
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

void fsck_prog(struct fsck *f, const char *phase, uint64_t done, uint64_t total)
{
	if (f->o->progress)
		f->o->progress(f->o->ctx, phase, done, total);
}

void fsck_tick(struct fsck *f, const char *phase, uint64_t *done, uint64_t total)
{
	if (++*done % PROGRESS_EVERY == 0)
		fsck_prog(f, phase, *done, total);
}

uint64_t entries(struct fsck *f, MDB_dbi db)
{
	MDB_stat ms;
	return mdb_stat(f->txn, db, &ms) ? 0 : ms.ms_entries;
}

int fsck_fp_rows_each(struct fsck *f, int (*fn)(struct fsck *f, const uint8_t *key, const struct fprec *r, void *ctx),
		      void *ctx)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_fp, &c));
	if (rc)
		return rc;
	MDB_val k, v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct fprec r;
		if (k.mv_size == BLOBKEY_BYTES && !fprec_decode(v.mv_data, v.mv_size, &r))
			rc = fn(f, k.mv_data, &r, ctx);
	}
	mdb_cursor_close(c);
	return rc ? rc : mrc == MDB_NOTFOUND ? 0 : pd_mdb_err(mrc);
}

void fsck_blob_name(const uint8_t key[BLOBKEY_BYTES], char out[48])
{
	struct blobkey k;
	blobkey_decode(key, &k);
	blobkey_name(&k, out);
}

const char *fsck_type_name(uint32_t mode)
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

bool fsck_name_valid(const char *name, size_t len)
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

/* Pages closed before the store stopped whose seal waited for a batch
 * (archive/seal_later.h): the journal holds them, the next writable open
 * (a mount, --repair) seals them. */
static int check_journal(struct fsck *f)
{
	uint8_t b[8];
	uint64_t applied = 0, n;
	int rc = meta_get(f, STORE_JOURNAL_META_KEY, b, sizeof b);
	if (!rc)
		applied = get_le64(b);
	else if (rc != -ENOENT)
		return rc;
	if ((rc = store_journal_count(f->sh.dirfd, applied, &n)))
		return rc;
	if (n) {
		fsck_say(f, K_LEFTOVER, "leftover: the journal holds %llu page(s) closed before the store stopped, "
			 "not committed yet (the next mount or --repair seals them)", (unsigned long long)n);
		f->journal_waiting = n;
		f->fix_any = true; /* the repair's writable open seals them */
	}
	return 0;
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

int fsck_counters_write(struct fsck *f, struct pd_counters *c)
{
	uint8_t b[PD_COUNTERS_N * 8];
	for (unsigned i = 0; i < PD_COUNTERS_N; i++)
		put_le64(b + 8 * i, (uint64_t)*counter_field(c, i));
	return meta_put(f, "counters", b, sizeof b);
}

static int lock_store(struct fsck *f, char err[512])
{
	char path[4096];
	struct stat sb;
	/* Nothing is written into a directory that is not a store. */
	snprintf(path, sizeof path, "%s/meta/data.mdb", f->dir);
	if (stat(path, &sb)) {
		snprintf(err, 512, "%s is not a pagededup store (no meta/data.mdb)", f->dir);
		return -EINVAL;
	}
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

/* Lay the leaves' counters end to end in tally, in id order. */
static int leaf_bases(struct fsck *f)
{
	uint32_t n = f->tree.next_id;
	if (!(f->leaf_base = malloc((n ? n : 1) * sizeof *f->leaf_base)))
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		f->leaf_base[i] = UINT64_MAX;
	for (uint32_t i = 0; i < f->tree.n; i++)
		f->leaf_base[f->tree.leaf[i].id] = 0;
	uint64_t base = 0;
	for (uint32_t id = 0; id < n; id++) {
		if (f->leaf_base[id] == UINT64_MAX)
			continue;
		f->leaf_base[id] = base;
		for (uint32_t i = 0; i < f->tree.n; i++)
			if (f->tree.leaf[i].id == id)
				base += f->tree.leaf[i].g.nlines * CBF_LINE_COUNTERS;
	}
	f->ncounters = base;
	return 0;
}

uint64_t fsck_tally_index(const struct fsck *f, uint32_t leaf, uint64_t idx)
{
	if (leaf >= f->tree.next_id || f->leaf_base[leaf] == UINT64_MAX)
		return UINT64_MAX;
	return f->leaf_base[leaf] + idx;
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
	mdb_env_set_maxdbs(s->env, PD_MAX_DBS); /* as store.c */
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
	if (!rc && (meta_get(f, "format", fb, 4) || get_le32(fb) < PD_FORMAT_OLDEST || get_le32(fb) > PD_FORMAT_VERSION)) {
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
		s->format = get_le32(fb); /* the inode rows a repair writes follow it */
		uint64_t bits = get_le64(pb + 8);
		s->params.expected_pages = get_le64(pb);
		memcpy(&s->params.filter_fpr, &bits, 8);
		s->params.filter_lines = get_le32(pb + 16);
		s->params.near_distance = get_le32(pb + 20);
		f->generation = get_le64(gb);
		f->clean = cl == 1;
		s->counters = f->stored;
		bool legacy;
		if ((rc = store_filter_tree_read(f->txn, s->db_meta, f->dir, &s->params, &f->tree, &legacy)))
			snprintf(err, 512, "%s: the filter tree record in meta is damaged (%s); fsck cannot repair that",
				 f->dir, strerror(-rc));
		if (!rc)
			rc = near_open_tables(f->txn, s, 0);
		if (!rc)
			rc = sigq_open_table(f->txn, s, 0);
	}
	if (!rc) {
		rc = pd_mdb_err(mdb_txn_commit(f->txn)); /* keeps the table handles */
	} else {
		mdb_txn_abort(f->txn);
	}
	f->txn = NULL;
	if (rc)
		return rc;
	if (gf_open(f->dir, &f->tree, GF_READONLY, &s->gf, NULL))
		s->gf = NULL;
	if ((rc = pack_set_open(s->dirfd, true, 0, &s->packs))) {
		snprintf(err, 512, "cannot open the packs of %s: %s", f->dir, strerror(-rc));
		return rc;
	}
	return leaf_bases(f);
}

static void close_store(struct fsck *f)
{
	if (f->txn)
		mdb_txn_abort(f->txn);
	f->txn = NULL;
	gf_close(f->sh.gf);
	f->sh.gf = NULL;
	blob_dict_release(&f->sh);
	pack_set_close(f->sh.packs);
	f->sh.packs = NULL;
	if (f->sh.env)
		mdb_env_close(f->sh.env);
	f->sh.env = NULL;
	if (f->sh.dirfd >= 0)
		close(f->sh.dirfd);
	f->sh.dirfd = -1;
}

/* A filter whose tree gives the leaf and positions of a key (the store's,
 * or one in memory of the same tree when a leaf file is unusable). */
const struct gfilter *fsck_geometry_filter(struct fsck *f)
{
	if (f->sh.gf)
		return f->sh.gf;
	if (!f->anon && gf_open(NULL, &f->tree, GF_MEMORY, &f->anon, NULL))
		return NULL;
	return f->anon;
}

/* ---- recording repairs ------------------------------------------------ */

int fsck_add_nfix(struct fsck *f, enum nfix_kind kind, uint64_t parent, uint64_t child, uint64_t hash,
	     uint32_t type, const void *name, size_t len, const void *val, size_t vlen)
{
	struct nfix *x = fsck_vec_push(&f->nfix);
	if (!x)
		return -ENOMEM;
	*x = (struct nfix){ (uint8_t)kind, type, parent, child, hash, 0, (uint32_t)len, (uint32_t)vlen };
	if ((x->off = fsck_arena_add(&f->arena, name, len)) == SIZE_MAX ||
	    (vlen && fsck_arena_add(&f->arena, val, vlen) == SIZE_MAX))
		return -ENOMEM;
	f->fix_any = true;
	return 0;
}

int fsck_add_raw(struct fsck *f, enum nfix_kind kind, const MDB_val *k, const MDB_val *v)
{
	return fsck_add_nfix(f, kind, 0, 0, 0, 0, k->mv_data, k->mv_size, v->mv_data, v->mv_size);
}

int fsck_add_kfix(struct fsck *f, const uint8_t *key, enum kfix_kind kind, bool file, bool damaged,
	     uint64_t refs)
{
	if (kind == KF_UNREFERENCED && f->bad_inodes)
		return 0; /* an undecodable inode may refer to it: keep it */
	struct kfix *x = fsck_vec_push(&f->kfix);
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

int fsck_add_rm_file(struct fsck *f, const char *rel)
{
	struct pathref *p = fsck_vec_push(&f->rm_files);
	if (!p)
		return -ENOMEM;
	p->len = (uint32_t)strlen(rel);
	if ((p->off = fsck_arena_add(&f->arena, rel, p->len)) == SIZE_MAX)
		return -ENOMEM;
	f->fix_any = true;
	return 0;
}

/* ---- the order of the check passes and of the repair steps --------------- */

static int check_all(struct fsck *f)
{
	int rc = pd_mdb_err(mdb_txn_begin(f->sh.env, NULL, MDB_RDONLY, &f->txn));
	if (rc)
		return rc;
	f->filter_trusted = f->sh.gf && f->clean && gf_generation_is(f->sh.gf, f->generation);
	if (!fsck_geometry_filter(f))
		f->ncounters = 0;
	if (f->ncounters && !(f->tally = calloc(f->ncounters, 1)))
		rc = -ENOMEM;
	if (!rc)
		rc = fsck_pass_inodes(f);
	if (!rc)
		rc = fsck_check_dirs(f);
	if (!rc)
		rc = fsck_pass_dirents(f);
	if (!rc && (!fsck_sums_equal(f->s_dirent, f->s_link) || f->n_dirent != f->n_link))
		rc = fsck_diagnose_names(f);
	if (!rc)
		rc = fsck_pass_blob_index(f);
	if (!rc)
		rc = fsck_pass_blobs(f);
	if (!rc)
		rc = fsck_check_near(f);
	if (!rc)
		rc = fsck_check_deltas(f);
	if (!rc)
		rc = fsck_check_packs(f);
	if (!rc)
		rc = fsck_pass_filter(f);
	if (!rc)
		fsck_check_totals(f);
	if (!rc)
		rc = fsck_walk_staging(f);
	if (!rc)
		rc = check_journal(f);
	mdb_txn_abort(f->txn);
	f->txn = NULL;
	return rc;
}

static int repair(struct fsck *f, char err[512])
{
	struct vec moves = VEC(uint8_t[BLOBKEY_BYTES]);
	f->now = pd_now();
	fsck_prog(f, "repair", 0, 0);
	int rc = pd_mdb_err(mdb_txn_begin(f->sh.env, NULL, 0, &f->txn));
	/* The name repairs work on link records: names held in inode rows
	 * become link records first, and go back into the rows at the end. */
	if (!rc)
		rc = fsck_repair_names_to_links(f, false);
	if (!rc)
		rc = fsck_repair_names(f);
	if (!rc)
		rc = fsck_repair_names_to_links(f, true);
	if (!rc)
		rc = fsck_repair_blob_index(f);
	if (!rc)
		rc = fsck_repair_blobs(f, &moves);
	if (!rc)
		rc = fsck_repair_nameless(f);
	if (!rc)
		rc = fsck_repair_tree(f);
	if (!rc)
		rc = fsck_repair_counts(f);
	if (!rc)
		rc = fsck_repair_names_to_rows(f);
	if (!rc)
		rc = fsck_repair_totals(f);
	if (!rc)
		rc = fsck_repair_deltas(f);
	if (!rc)
		rc = fsck_repair_pack_totals(f);
	/* Signatures of another version: all computed again, then indexed
	 * again with the rest below. */
	bool sigs_done = false, layout_done = false;
	uint8_t next[BLOBKEY_BYTES] = { 0 };
	/* Tables of an older layout: converted first, so that the signatures
	 * below are kept in this one. */
	while (!rc && f->fix_layout && !layout_done)
		rc = near_layout_convert(f->txn, &f->sh, next, NEAR_UPGRADE_BATCH, &layout_done);
	if (!rc && f->fix_layout)
		fsck_say(f, K_REPAIR, "repaired: near-duplicate tables converted to layout %u", NEAR_LAYOUT_VERSION);
	memset(next, 0, sizeof next);
	bool near0_done = false;
	while (!rc && f->fix_near0 && f->sh.near_tables && !near0_done)
		rc = near0_layout_convert(f->txn, &f->sh, next, NEAR_UPGRADE_BATCH, &near0_done);
	if (!rc && f->fix_near0 && f->sh.near_tables)
		fsck_say(f, K_REPAIR, "repaired: near0 converted to layout %u", NEAR0_LAYOUT_VERSION);
	memset(next, 0, sizeof next);
	while (!rc && f->fix_sigs && !sigs_done)
		rc = near_resign(f->txn, &f->sh, next, NEAR_UPGRADE_BATCH, &sigs_done);
	if (!rc && f->fix_sigs && !(rc = near_version_put(f->txn, &f->sh))) {
		f->fix_near = true;
		fsck_say(f, K_REPAIR, "repaired: near-duplicate signatures computed again (version %u.%u)",
			 NEAR_SIG_VERSION >> 16, NEAR_SIG_VERSION & 0xFFFF);
	}
	/* Records were rewritten or made again: their rows too. */
	if (!rc && (f->fix_near || f->kfix.n) && !(rc = near_rebuild(f->txn, &f->sh)) && f->fix_near)
		fsck_say(f, K_REPAIR, "repaired: near-duplicate tables rebuilt from the fingerprints");
	if (!rc && (f->fix_sigq || f->kfix.n) && !(rc = sigq_rebuild(f->txn, &f->sh)) && f->fix_sigq)
		fsck_say(f, K_REPAIR, "repaired: the table of pending signatures (sigq) rebuilt from the fingerprints");
	/* A filter that disagreed, or records that changed: rebuilt by the
	 * open below, from the stored positions. */
	/* Fingerprint rows of layout 1: rewritten by the writable open below
	 * (store_fp_rows_upgrade), which must not take "fp_layout" for done. */
	if (!rc && f->fix_fprows)
		rc = store_fp_rows_again(f->txn, &f->sh);
	/* Blobs whose inodes are not in format 7's form, or whose inodes
	 * changed: put in it by the writable open below
	 * (store_blob_inodes_upgrade). */
	bool bi_again = store_ino_in_row(&f->sh) && (f->fix_bi || f->stale.n || f->missing.n || f->kfix.n);
	if (!rc && bi_again)
		rc = store_blob_inodes_again(f->txn, &f->sh);
	bool rebuild = f->fix_filter || f->kfix.n;
	uint8_t zero = 0;
	if (!rc && rebuild)
		rc = meta_put(f, "clean", &zero, 1);
	struct vec moved = VEC(struct moved);
	for (size_t i = 0; i < moves.n && !rc; i++) {
		struct moved *m = fsck_vec_push(&moved);
		if (!m || (rc = fsck_move_damaged(f, (uint8_t *)moves.v + i * BLOBKEY_BYTES, m)))
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
			fsck_say(f, K_REPAIR, "repaired: the damaged bytes of %s are kept as %s/%s", m->from, f->dir, m->to);
	}
	fsck_vec_free(&moved);
	fsck_vec_free(&moves);
	if (rc) {
		snprintf(err, 512, "the repair failed and changed nothing in the tables: %s", strerror(-rc));
		return rc;
	}
	fsck_remove_files(f);
	if (!f->sh.gf)
		rebuild = true; /* an unusable leaf file is made anew at the open */
	/* Open for writing: the filter is rebuilt, orphans are deleted, staging
	 * is emptied; the close marks the store clean. */
	close_store(f);
	close(f->lockfd);
	f->lockfd = -1;
	struct store *st;
	struct store_opts so = { .sync_blobs = true, .compact_share = -1 }; /* no compactor beside the repair */
	if ((rc = archive_open(f->dir, &so, &st, err)))
		return rc;
	if ((rc = store_close(st))) {
		snprintf(err, 512, "closing %s after the repair: %s", f->dir, strerror(-rc));
		return rc;
	}
	if (rebuild)
		fsck_say(f, K_REPAIR, "repaired: filter and exact counts rebuilt from the stored positions");
	if (f->journal_waiting) /* by the writable open above (archive/seal_later.c) */
		fsck_say(f, K_REPAIR, "repaired: %llu page(s) the journal held sealed", (unsigned long long)f->journal_waiting);
	if (f->fix_bi) /* by the writable open above (store_blob_inodes_upgrade) */
		fsck_say(f, K_REPAIR, "repaired: the inodes of blobs put in format %u's form (one in the fingerprint row, "
			 "two or more in blob_inodes)", PD_FORMAT_INO_IN_ROW);
	if (f->fix_fprows) /* by the writable open above (store_fp_rows_upgrade) */
		fsck_say(f, K_REPAIR, "repaired: %llu fingerprint rows rewritten in layout 2",
			 (unsigned long long)f->fp_rows1);
	fsck_prog(f, "repair", 1, 1);
	return 0;
}

/* Format 1 to 2: the blob files move into packs (blob_convert_files),
 * through a store opened for writing, after the check and any repair. */
static int convert_files(struct fsck *f, char err[512])
{
	close_store(f);
	if (f->lockfd >= 0)
		close(f->lockfd);
	f->lockfd = -1;
	struct store *st;
	struct store_opts so = { .sync_blobs = true, .compact_share = -1 }; /* no compactor beside the repair */
	int rc = archive_open(f->dir, &so, &st, err);
	if (rc)
		return rc;
	uint64_t moved = 0, left = 0;
	fsck_prog(f, "blob files into packs", 0, 0);
	rc = blob_convert_files(st, &moved, &left);
	int crc = store_close(st);
	rc = rc ? rc : crc;
	if (moved)
		fsck_say(f, K_REPAIR, "repaired: %llu blob files of format 1 moved into packs", (unsigned long long)moved);
	if (left)
		fsck_say(f, K_LEFT, "%llu blob files could not be moved into packs (missing or damaged: see above)",
			 (unsigned long long)left);
	fsck_prog(f, "blob files into packs", moved, moved);
	if (rc)
		snprintf(err, 512, "moving the blob files of %s into packs: %s", f->dir, strerror(-rc));
	return rc;
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
	f.names_held = (struct vec)VEC(uint64_t[3]);
	f.row_sums = (struct vec)VEC(struct pack_sum);
	f.pack_index = (struct vec)VEC(struct { uint8_t k[BLOBKEY_BYTES]; struct pack_loc l; });
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	f.threads = o->threads ? o->threads : ncpu > 0 ? (unsigned)ncpu : 1;
	if (f.threads > MAX_THREADS)
		f.threads = MAX_THREADS;
	/* As store_open: a store a power cut left goes back to its checkpoint,
	 * before the lock (the recovery takes it for its own while). */
	int rc = store_ckpt_recover(f.dir, err);
	if (rc >= 0)
		rc = lock_store(&f, err);
	if (!rc)
		rc = open_store(&f, err);
	if (!rc)
		rc = check_all(&f);
	say_more(&f);
	bool files = !rc && res->blob_files > 0;
	if (files && !(o->repair && o->convert))
		fsck_say(&f, K_NOTE, "note: %llu pages are blob files of format 1 under objects/; 'pagededup fsck --repair %s' moves them into packs",
			 (unsigned long long)res->blob_files, dir);
	if (!rc && o->repair && f.fix_any && (res->problems || res->leftovers || f.fix_layout || f.fix_names || f.fix_fprows || f.fix_bi || f.fix_near0))
		rc = repair(&f, err);
	if (!rc && o->repair && o->convert && files)
		rc = convert_files(&f, err);
	say_more(&f);
	close_store(&f);
	if (f.lockfd >= 0)
		close(f.lockfd);
	gf_close(f.anon);
	gf_tree_free(&f.tree);
	free(f.leaf_base);
	free(f.tally);
	fsck_vec_free(&f.dirs);
	fsck_vec_free(&f.tally_over);
	fsck_vec_free(&f.nfix);
	fsck_vec_free(&f.arena);
	fsck_vec_free(&f.stale);
	fsck_vec_free(&f.missing);
	fsck_vec_free(&f.kfix);
	fsck_vec_free(&f.rm_files);
	fsck_vec_free(&f.names_held);
	fsck_vec_free(&f.row_sums);
	free(f.row_dicts);
	fsck_vec_free(&f.pack_index);
	if (rc && !*err)
		snprintf(err, 512, "%s: %s", dir, strerror(-rc));
	res->seconds = now_s() - t0;
	return rc;
}
