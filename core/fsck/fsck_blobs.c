/* fsck_blobs.c - fsck's blob pass (see fsck.c for the whole design).
 * Pass 4 reads fingerprints, blob_inodes and the objects/ directories in
 * the same key order, one objects/ subdirectory at a time: refcounts
 * (with the entries pass 3 found stale or missing, fsck_blobindex.c),
 * records without files, files without records, the stored filter
 * positions (tallied per counter for pass 5) and, with --deep, the size
 * and hashes of each blob file, read on several threads. Also the
 * near-duplicate tables (near.h) and the files left in staging/. */
#include "fsck_int.h"
#include "near/near.h"

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
	bool file, in_row; /* in_row: its record holds an inode (format 7) */
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

/* Whether a record's stored positions fit its leaf, and the leaf is the one
 * its MD5 is routed to (a key on another leaf would be a false negative). */
static bool positions_fit(struct fsck *f, const uint8_t *key, const struct fprec *r)
{
	const struct gfilter *gf = fsck_geometry_filter(f);
	const struct cbf *leaf = gf ? gf_leaf(gf, r->leaf) : NULL;
	if (!leaf || r->pos.k == 0)
		return false;
	const struct cbf_geometry *geo = cbf_geometry(leaf);
	if (r->pos.k != geo->k || r->pos.nlines != geo->lines_per_key)
		return false;
	for (unsigned j = 0; j < r->pos.k; j++)
		if (cbf_pos_counter(&r->pos, j) >= geo->nlines * CBF_LINE_COUNTERS)
			return false;
	struct gf_route route;
	gf_route(gf, key, &route);
	return route.leaf == r->leaf;
}

/* Tally the filter positions of a record. */
static int tally_positions(struct fsck *f, const uint8_t *key, const struct fprec *r)
{
	if (!(r->flags & FPREC_IN_FILTER) || !f->tally)
		return 0;
	if (!positions_fit(f, key, r)) {
		char hex[48];
		fsck_blob_name(key, hex);
		fsck_say(f, K_FILTER, "blob %s: its stored filter positions do not fit the filter, or are on a leaf it is not routed to (repair: recomputed)", hex);
		f->fix_filter = true;
		return fsck_add_kfix(f, key, KF_REPOS, false, false, 0);
	}
	for (unsigned j = 0; j < r->pos.k; j++) {
		uint64_t idx = fsck_tally_index(f, r->leaf, cbf_pos_counter(&r->pos, j));
		if (f->tally[idx] < 255) {
			f->tally[idx]++;
			continue;
		}
		struct { uint64_t idx, n; } *o = NULL;
		for (size_t i = 0; i < f->tally_over.n && !o; i++)
			if (((uint64_t *)f->tally_over.v)[2 * i] == idx)
				o = (void *)((uint64_t *)f->tally_over.v + 2 * i);
		if (!o && !(o = fsck_vec_push(&f->tally_over)))
			return -ENOMEM;
		o->idx = idx;
		o->n++;
	}
	return 0;
}

/* Check the pack record of packed blob key (record r): its header names
 * this blob with its size and XXH3-128 (deep: it decodes to bytes with the
 * record's MD5 and XXH3-128). 0, or -EIO with the reason in why. */
static int check_packed(struct fsck *f, const uint8_t *key, const struct fprec *r, char why[160])
{
	struct blobkey bk;
	blobkey_decode(key, &bk);
	struct pack_loc loc;
	blob_rec_loc(r, &loc);
	struct pack_rec_hdr h;
	int rc = pack_read_hdr(f->sh.packs, &loc, &h);
	if (rc) {
		snprintf(why, 160, "no intact record header at pack %u offset %llu (%s)", r->pack,
			 (unsigned long long)r->pack_off, strerror(-rc));
		return -EIO;
	}
	if (h.kind != PACK_KIND_PAGE || memcmp(h.md5, bk.md5, 16) || h.variant != bk.variant || h.size != r->size ||
	    memcmp(h.xxh128, r->xxh128, 16)) {
		snprintf(why, 160, "the record at pack %u offset %llu is another page's", r->pack,
			 (unsigned long long)r->pack_off);
		return -EIO;
	}
	if (pack_enc_is_delta(h.encoding) &&
	    (rc = fsck_check_delta_rec(f, &bk, &h, why)))
		return rc;
	if (!f->o->deep)
		return 0;
	void *buf = NULL;
	rc = blob_read_packed_alloc(&f->sh, &bk, r, &buf);
	struct fp fp;
	if (!rc && !(rc = fp_of_buf(buf, (size_t)r->size, &fp)) && memcmp(fp.md5, bk.md5, 16))
		rc = -EIO;
	free(buf);
	if (rc == -ENOMEM)
		return rc;
	f->res->bytes_hashed += r->size;
	if (rc && pack_enc_is_delta(h.encoding)) {
		/* its base's record may be the damaged one: say which it is */
		char bn[48];
		struct blobkey base = { .variant = h.base_variant };
		memcpy(base.md5, h.base_md5, 16);
		blobkey_name(&base, bn);
		snprintf(why, 160, "the record at pack %u offset %llu (a delta on blob %s) does not decode to its bytes",
			 r->pack, (unsigned long long)r->pack_off, bn);
	} else if (rc) {
		snprintf(why, 160, "the record at pack %u offset %llu does not decode to its bytes", r->pack,
			 (unsigned long long)r->pack_off);
	}
	return rc ? -EIO : 0;
}

/* A blob whose bytes are a pack record. */
static int handle_packed(struct fsck *f, struct group *g, const char *hex)
{
	const struct fprec *r = &g->rec->r;
	int rc = 0;
	f->res->packed_blobs++;
	if (g->file) {
		/* a format 1 file moved into a pack, the removal lost in a crash */
		char path[BLOBKEY_PATH_MAX];
		struct blobkey bk;
		blobkey_decode(g->key, &bk);
		blobkey_path(&bk, path);
		fsck_say(f, K_FILE, "%s: file of a blob whose bytes are in a pack now (repair: removed)", path);
		if ((rc = fsck_add_rm_file(f, path)))
			return rc;
	}
	char why[160];
	if ((rc = check_packed(f, g->key, r, why)) != -EIO)
		return rc;
	fsck_say(f, K_BLOB, "blob %s: %s; the bytes of %llu page%s are lost (repair: moved to /%s)", hex, why,
		 (unsigned long long)g->refs, g->refs == 1 ? "" : "s", FSCK_LOST_FOUND);
	return fsck_add_kfix(f, g->key, KF_LOST, false, false, g->refs);
}

static int handle_group(struct fsck *f, struct group *g)
{
	char hex[48];
	fsck_blob_name(g->key, hex);
	struct keyrec *kr = g->rec;
	int rc = 0;
	if (g->file)
		f->res->blob_files++;
	if (g->in_row && g->listed) {
		fsck_say(f, K_BLOBREF, "blob %s: an inode in its fingerprint row and %llu in blob_inodes (repair: all put in blob_inodes)",
			 hex, (unsigned long long)g->listed);
		f->fix_bi = f->fix_any = true;
	} else if (!g->in_row && g->listed == 1 && g->refs == 1 && kr && !kr->bad &&
		   f->sh.format >= PD_FORMAT_FP_ROW2) {
		f->bi_lone++; /* not yet in its row: a note below */
	}
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
			fsck_say(f, K_REFCOUNT, "blob %s: no inode refers to it (refcount %llu) (repair: record and file removed)",
			    hex, (unsigned long long)r->refcount);
			return fsck_add_kfix(f, g->key, KF_UNREFERENCED, g->file, false, 0);
		}
		if (r->refcount != g->refs) {
			fsck_say(f, K_REFCOUNT, "blob %s: refcount %llu, but %llu inodes refer to it (repair: set to %llu)",
			    hex, (unsigned long long)r->refcount, (unsigned long long)g->refs,
			    (unsigned long long)g->refs);
			if ((rc = fsck_add_kfix(f, g->key, KF_REFCOUNT, g->file, false, g->refs)))
				return rc;
		}
		if (r->flags & FPREC_PACKED)
			return handle_packed(f, g, hex);
		char path[BLOBKEY_PATH_MAX];
		struct blobkey bk;
		blobkey_decode(g->key, &bk);
		blobkey_path(&bk, path);
		struct vjob *j = g->job;
		if (!g->file || (j && j->res == V_GONE)) {
			fsck_say(f, K_BLOB, "blob %s: file %s is missing; the bytes of %llu page%s are lost (repair: moved to /%s)",
			    hex, path, (unsigned long long)g->refs, g->refs == 1 ? "" : "s", FSCK_LOST_FOUND);
			return fsck_add_kfix(f, g->key, KF_LOST, false, false, g->refs);
		}
		if (j && j->res == V_SIZE) {
			fsck_say(f, K_BLOB, "blob %s: file %s is %llu bytes, its record says %llu: damaged (repair: its %llu page%s moved to /%s)",
			    hex, path, (unsigned long long)j->got, (unsigned long long)r->size,
			    (unsigned long long)g->refs, g->refs == 1 ? "" : "s", FSCK_LOST_FOUND);
			return fsck_add_kfix(f, g->key, KF_LOST, true, true, g->refs);
		}
		if (j && j->res == V_HASH) {
			fsck_say(f, K_BLOB, "blob %s: file %s is damaged: its MD5 or XXH3-128 differs from the record (repair: its %llu page%s moved to /%s)",
			    hex, path, (unsigned long long)g->refs, g->refs == 1 ? "" : "s", FSCK_LOST_FOUND);
			return fsck_add_kfix(f, g->key, KF_LOST, true, true, g->refs);
		}
		if (j && j->res == V_IOERR)
			fsck_say(f, K_BLOB, "blob %s: cannot read %s: %s (cannot be repaired)", hex, path, strerror(j->err));
		return 0;
	}
	if (kr && kr->bad)
		fsck_say(f, K_BLOB, "blob %s: undecodable fingerprint record (repair: %s)", hex,
		    !g->refs ? "removed" : g->file ? "rebuilt from the file" : "its pages moved to /" FSCK_LOST_FOUND);
	if (g->refs && g->file) {
		if (!kr)
			fsck_say(f, K_BLOB, "blob %s: %llu inodes refer to it, but it has no fingerprint record (repair: rebuilt from the file)",
			    hex, (unsigned long long)g->refs);
		rc = fsck_add_kfix(f, g->key, KF_RECREATE, true, false, g->refs);
	} else if (g->refs) {
		if (!kr)
			fsck_say(f, K_BLOB, "blob %s: %llu inodes refer to it, but it has neither record nor file: their bytes are lost (repair: moved to /%s)",
			    hex, (unsigned long long)g->refs, FSCK_LOST_FOUND);
		rc = fsck_add_kfix(f, g->key, KF_LOST, false, false, g->refs);
	} else if (kr) {
		rc = fsck_add_kfix(f, g->key, KF_UNREFERENCED, g->file, false, 0);
	} else if (g->file) {
		char path[BLOBKEY_PATH_MAX];
		struct blobkey bk;
		blobkey_decode(g->key, &bk);
		blobkey_path(&bk, path);
		fsck_say(f, K_LEFTOVER, "leftover: %s: blob file unknown to the store (a crash leaves these; %s removes it)",
			 path, f->clean ? "--repair" : "the next mount or --repair");
		rc = fsck_add_rm_file(f, path);
	}
	if (kr && kr->bad && !rc && f->kfix.n) { /* the fix just added is for this key */
		struct kfix *x = &AT(f->kfix, struct kfix, f->kfix.n - 1);
		x->bad_record = !memcmp(x->key, g->key, BLOBKEY_BYTES);
	}
	return rc;
}

/* Is name the file name of a blob key in objects/<sub>? */
static bool parse_blob_name(const char *name, const char *sub, uint8_t key[BLOBKEY_BYTES])
{
	struct blobkey k;
	if (!blobkey_parse(name, &k) || memcmp(name, sub, 3))
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
			struct filekey *fk = fsck_vec_push(files);
			if (!fk) {
				rc = -ENOMEM;
				break;
			}
			memcpy(fk->key, key, BLOBKEY_BYTES);
			continue;
		}
		snprintf(rel, sizeof rel, "objects/%s/%s", sub, e->d_name);
		if (is_dir) {
			fsck_say(f, K_FILE, "%s: a directory where only blob files belong (left as it is)", rel);
		} else {
			fsck_say(f, K_FILE, "%s: file unknown to the store (repair: removed)", rel);
			rc = fsck_add_rm_file(f, rel);
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
		else if (errno == ENOENT)
			return 0; /* a format 2 store: no blob files */
		fsck_say(f, K_FILE, "objects/: cannot read the directory: %s (cannot be repaired)", strerror(errno));
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
			fsck_say(f, K_FILE, "%s: a directory unknown to the store (left as it is)", rel);
		} else {
			fsck_say(f, K_FILE, "%s: file unknown to the store (repair: removed)", rel);
			rc = fsck_add_rm_file(f, rel);
		}
	}
	closedir(d);
	return rc;
}

int fsck_pass_blobs(struct fsck *f)
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
	fsck_prog(f, "blobs", 0, total);
	for (unsigned p = 0; p < 4096 && !rc; p++) {
		recs.n = counts.n = files.n = groups.n = jobs.n = 0;
		/* this prefix's records */
		for (; frc == 0 && !rc; frc = mdb_cursor_get(cf, &fk, &fv, MDB_NEXT)) {
			if (fk.mv_size != BLOBKEY_BYTES) {
				fsck_say(f, K_BLOB, "fingerprints: a key of %zu bytes (repair: removed)", fk.mv_size);
				rc = fsck_add_raw(f, NF_RAW_FP, &fk, &fv);
				continue;
			}
			if (key_prefix(fk.mv_data) != p)
				break;
			struct keyrec *kr = fsck_vec_push(&recs);
			if (!kr) {
				rc = -ENOMEM;
				break;
			}
			memcpy(kr->key, fk.mv_data, BLOBKEY_BYTES);
			kr->bad = fprec_decode(fv.mv_data, fv.mv_size, &kr->r) != 0;
			f->fp_rows1 += !kr->bad && fprec_is_row1(fv.mv_data, fv.mv_size);
			fsck_tick(f, "blobs", &done, total);
		}
		/* its blob_inodes entries, counted per key */
		for (; brc == 0 && !rc; brc = mdb_cursor_get(cb, &bk, &bv, MDB_NEXT)) {
			if (bk.mv_size != BLOBKEY_BYTES || bv.mv_size != 8)
				continue;
			if (key_prefix(bk.mv_data) != p)
				break;
			struct keycount *kc = counts.n ? &AT(counts, struct keycount, counts.n - 1) : NULL;
			if (!kc || memcmp(kc->key, bk.mv_data, BLOBKEY_BYTES)) {
				if (!(kc = fsck_vec_push(&counts))) {
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
				fsck_say(f, K_FILE, "objects/%s: cannot read the directory: %s", sub, strerror(errno));
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
			struct group *g = fsck_vec_push(&groups);
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
			g->in_row = g->rec && !g->rec->bad && g->rec->r.ino;
			uint64_t refs = g->listed + g->in_row;
			for (; si < f->stale.n && !memcmp(stale[si].key, k, BLOBKEY_BYTES); si++)
				refs--;
			for (; mi < f->missing.n && !memcmp(miss[mi].key, k, BLOBKEY_BYTES); mi++)
				refs++;
			g->refs = refs;
		}
		/* check the files of the records in use */
		for (size_t gi = 0; gi < groups.n && !rc; gi++) {
			struct group *g = &AT(groups, struct group, gi);
			if (!g->rec || g->rec->bad || !g->file || !g->refs || (g->rec->r.flags & FPREC_PACKED))
				continue;
			struct vjob *jb = fsck_vec_push(&jobs);
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
			if (g->rec && !g->rec->bad && g->file && g->refs && !(g->rec->r.flags & FPREC_PACKED))
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
		fsck_say(f, K_BLOB, "fingerprints: a key of %zu bytes (repair: removed)", fk.mv_size);
		rc = fsck_add_raw(f, NF_RAW_FP, &fk, &fv);
	}
	fsck_prog(f, "blobs", done, done);
	if (!rc && f->fp_rows1) {
		/* an older layout is no damage: a note, and repair's writable
		 * open rewrites them (store_fp_rows_upgrade) */
		fsck_say(f, K_NOTE, "note: %llu fingerprint rows of layout 1, this pagededup writes layout 2 "
			 "(the next writable mount or --repair converts them)", (unsigned long long)f->fp_rows1);
		f->fix_fprows = f->fix_any = true;
	}
	if (!rc && f->bi_lone) {
		/* a format 6 store not converted yet: no damage */
		fsck_say(f, K_NOTE, "note: %llu blobs of one file list it in blob_inodes, this pagededup keeps it in the "
			 "fingerprint row (the next writable mount or --repair moves them)", (unsigned long long)f->bi_lone);
		f->fix_bi = f->fix_any = true;
	}
	if (objfd >= 0)
		close(objfd);
	free(present);
	fsck_vec_free(&recs);
	fsck_vec_free(&counts);
	fsck_vec_free(&files);
	fsck_vec_free(&groups);
	fsck_vec_free(&jobs);
	if (cf)
		mdb_cursor_close(cf);
	if (cb)
		mdb_cursor_close(cb);
	return rc;
}

/* ---- the near-duplicate tables ------------------------------------------ */

static void near_bad(void *ctx, const char *what)
{
	fsck_say(ctx, K_NEAR, "%s (repair: the near-duplicate tables are rebuilt)", what);
}

static void sigq_bad(void *ctx, const char *what)
{
	fsck_say(ctx, K_NEAR, "%s (repair: the table of pending signatures is rebuilt)", what);
}

/* The permuted simhash tables against the fingerprints (near.h), and the
 * pending signatures against the records (sigq.h). */
int fsck_check_near(struct fsck *f)
{
	if (!f->sh.near_tables) {
		fsck_say(f, K_NOTE, "note: no near-duplicate tables (a store from before them): the next mount makes them");
		return 0;
	}
	uint32_t version;
	int vrc = near_version_get(f->txn, &f->sh, &version);
	if (vrc)
		return vrc;
	if (version != NEAR_SIG_VERSION) {
		fsck_say(f, K_NEAR, "near-duplicate signatures of version %u.%u, this pagededup computes %u.%u "
			 "(repair: every signature computed again from its blob file)",
			 version >> 16, version & 0xFFFF, NEAR_SIG_VERSION >> 16, NEAR_SIG_VERSION & 0xFFFF);
		f->fix_sigs = f->fix_any = true;
	}
	uint32_t layout;
	if ((vrc = near_layout_get(f->txn, &f->sh, &layout)))
		return vrc;
	if (layout > NEAR_LAYOUT_VERSION) {
		fsck_say(f, K_NEAR, "near-duplicate tables of layout %u, newer than this pagededup's %u: not checked "
			 "(use the pagededup that wrote them)", layout, NEAR_LAYOUT_VERSION);
		return 0;
	}
	if (layout != NEAR_LAYOUT_VERSION) {
		/* an older layout is no damage: a note, and repair converts it */
		fsck_say(f, K_NOTE, "note: near-duplicate tables of layout %u, this pagededup keeps layout %u "
			 "(the next writable mount or --repair converts them; no page is read)", layout, NEAR_LAYOUT_VERSION);
		f->fix_layout = f->fix_any = true;
	}
	uint32_t layout0;
	if ((vrc = near0_layout_get(f->txn, &f->sh, &layout0)))
		return vrc;
	if (layout0 > NEAR0_LAYOUT_VERSION) {
		fsck_say(f, K_NEAR, "near0 of layout %u, newer than this pagededup's %u: not checked "
			 "(use the pagededup that wrote it)", layout0, NEAR0_LAYOUT_VERSION);
		return 0;
	}
	f->sh.near0_keys = layout0 == 1; /* how its rows read */
	if (layout0 != NEAR0_LAYOUT_VERSION) {
		/* an older layout (or a conversion interrupted) is no damage */
		fsck_say(f, K_NOTE, "note: near0 of layout %u, this pagededup keeps layout %u "
			 "(the next writable mount or --repair converts it; no page is read)", layout0, NEAR0_LAYOUT_VERSION);
		f->fix_near0 = f->fix_any = true;
	}
	uint64_t nbad = 0, npending = 0;
	fsck_prog(f, "near-duplicate tables", 0, 0);
	int rc = near_check(f->txn, &f->sh, near_bad, f, &nbad);
	if (nbad)
		f->fix_near = f->fix_any = true;
	if (!rc && !(rc = sigq_check(f->txn, &f->sh, sigq_bad, f, &nbad, &npending)) && nbad)
		f->fix_sigq = f->fix_any = true;
	if (npending)
		fsck_say(f, K_NOTE, "note: %llu pages wait for their near-duplicate signature (signed at the next mount; queries sign them meanwhile)",
			 (unsigned long long)npending);
	fsck_prog(f, "near-duplicate tables", 1, 1);
	return rc;
}

/* ---- staging ------------------------------------------------------------ */

int fsck_walk_staging(struct fsck *f)
{
	int fd = openat(f->sh.dirfd, "staging", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		fsck_say(f, K_FILE, "staging/: cannot read the directory: %s", strerror(errno));
		return 0;
	}
	struct dirent *e;
	int rc = 0;
	char rel[300];
	uint64_t n = 0;
	fsck_prog(f, "staging", 0, 0);
	while (!rc && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		n++;
		snprintf(rel, sizeof rel, "staging/%s", e->d_name);
		if (e->d_type == DT_DIR)
			fsck_say(f, K_FILE, "%s: a directory where only staged files belong (left as it is)", rel);
		else if (!f->clean) {
			fsck_say(f, K_LEFTOVER, "leftover: %s: bytes of a file being written when the store stopped "
			    "(the next mount or --repair removes them)", rel);
			rc = fsck_add_rm_file(f, rel);
		} else {
			fsck_say(f, K_FILE, "%s: file unknown to the store (an orphan a crash can leave) (repair: removed)", rel);
			rc = fsck_add_rm_file(f, rel);
		}
	}
	closedir(d);
	fsck_prog(f, "staging", n, n);
	return rc;
}
