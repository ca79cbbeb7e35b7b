/* fsck.c - the store checker and repairer. What it checks is listed in
 * fsck.h. It reads the tables in a few sequential passes (LMDB cursor
 * order) and keeps per-inode and per-counter tallies in memory: about 40
 * bytes per inode and 4 bytes per filter counter.
 *
 * Repair fixes what can be fixed without guessing: orphan files are
 * removed, refcounts and blob_inodes are set to the inodes that really
 * refer to each blob, the totals are recomputed, and a filter that
 * disagrees is rebuilt from the stored positions. A blob that inodes refer
 * to is never deleted; a missing or damaged one is reported (the pages on
 * it cannot be recovered from this store).
 */
#include "fsck.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob.h"
#include "fp.h"
#include "ns.h"
#include "rec.h"
#include "store.h"

/* ---- a small u64 -> u64 hash map (key 0 is free) --------------------- */

struct u64map { uint64_t *k, *v; size_t cap, n; };

static int map_grow(struct u64map *m);

static uint64_t *map_slot(struct u64map *m, uint64_t key, bool insert)
{
	if (insert && (m->n + 1) * 4 > m->cap * 3 && map_grow(m))
		return NULL;
	if (!m->cap)
		return NULL;
	size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (m->cap - 1);
	while (m->k[i] && m->k[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->k[i]) {
		if (!insert)
			return NULL;
		m->k[i] = key;
		m->v[i] = 0;
		m->n++;
	}
	return &m->v[i];
}

static int map_grow(struct u64map *m)
{
	struct u64map nm = { 0 };
	nm.cap = m->cap ? m->cap * 2 : 1024;
	nm.k = calloc(nm.cap, 8);
	nm.v = calloc(nm.cap, 8);
	if (!nm.k || !nm.v) {
		free(nm.k);
		free(nm.v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->k[i])
			*map_slot(&nm, m->k[i], true) = m->v[i];
	free(m->k);
	free(m->v);
	*m = nm;
	return 0;
}

static void map_free(struct u64map *m)
{
	free(m->k);
	free(m->v);
}

/* ---- the check state ------------------------------------------------- */

struct bref { uint8_t key[BLOBKEY_BYTES]; uint64_t ino; };

struct fix_ref { struct blobkey k; uint64_t refcount; };

struct fsck {
	const struct fsck_opts *o;
	struct fsck_result *res;
	struct store *st;
	MDB_txn *txn;
	bool clean;
	struct u64map inode_info; /* ino -> mode << 32 | nlink */
	struct u64map names;      /* ino -> number of dirents naming it */
	struct u64map subdirs;    /* dir -> number of child directories */
	struct bref *refs;
	size_t nrefs, caprefs;
	uint32_t *counts;         /* stored positions per filter counter */
	uint64_t ncounters;
	struct pd_counters computed;
	struct fix_ref *fixes;    /* refcounts to correct */
	size_t nfixes;
	bool fix_filter, fix_counters, fix_refs;
};

static void say(struct fsck *f, bool problem, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (problem)
		f->res->problems++;
	else
		f->res->notes++;
	if (f->o->report)
		f->o->report(f->o->ctx, line);
}

static void progress(struct fsck *f, const char *phase, uint64_t done, uint64_t total)
{
	if (f->o->progress && (done % 65536 == 0 || done == total))
		f->o->progress(f->o->ctx, phase, done, total);
}

static int each(struct fsck *f, MDB_dbi db, const char *phase,
		int (*fn)(struct fsck *f, MDB_val *k, MDB_val *v))
{
	MDB_cursor *c;
	MDB_stat ms;
	mdb_stat(f->txn, db, &ms);
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, db, &c));
	if (rc)
		return rc;
	MDB_val k, v;
	uint64_t done = 0;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		rc = fn(f, &k, &v);
		progress(f, phase, ++done, ms.ms_entries);
	}
	mdb_cursor_close(c);
	return rc ? rc : mrc == MDB_NOTFOUND ? 0 : pd_mdb_err(mrc);
}

/* ---- inodes ---------------------------------------------------------- */

static int check_inode(struct fsck *f, MDB_val *k, MDB_val *v)
{
	struct inode in;
	if (k->mv_size != 8 || inode_decode(v->mv_data, v->mv_size, &in, NULL, NULL)) {
		say(f, true, "inodes: undecodable record");
		return 0;
	}
	in.ino = get_be64(k->mv_data);
	f->res->inodes++;
	uint64_t *slot = map_slot(&f->inode_info, in.ino, true);
	if (!slot)
		return -ENOMEM;
	*slot = (uint64_t)in.mode << 32 | in.nlink;
	if (!S_ISREG(in.mode))
		return 0;
	f->computed.pages++;
	f->computed.logical_bytes += (int64_t)in.size;
	if (!(in.flags & INODE_HAS_BLOB)) {
		if (in.size)
			say(f, true, "inode %llu: size %llu but no blob", (unsigned long long)in.ino,
			    (unsigned long long)in.size);
		return 0;
	}
	if (f->nrefs == f->caprefs) {
		size_t cap = f->caprefs ? 2 * f->caprefs : 4096;
		struct bref *p = realloc(f->refs, cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		f->refs = p;
		f->caprefs = cap;
	}
	blobkey_encode(&in.blob, f->refs[f->nrefs].key);
	f->refs[f->nrefs++].ino = in.ino;
	return 0;
}

/* ---- names ----------------------------------------------------------- */

static int check_dirent(struct fsck *f, MDB_val *k, MDB_val *v)
{
	const char *name;
	size_t len;
	uint64_t child;
	uint32_t type;
	if (k->mv_size != 16 || dirent_val_decode(v->mv_data, v->mv_size, &name, &len, &child, &type)) {
		say(f, true, "dirents: undecodable entry");
		return 0;
	}
	uint64_t parent = get_be64(k->mv_data);
	uint64_t *pi = map_slot(&f->inode_info, parent, false), *ci = map_slot(&f->inode_info, child, false);
	if (!pi || !S_ISDIR((uint32_t)(*pi >> 32)))
		say(f, true, "dirent '%.*s' in %llu: parent is not a directory", (int)len, name,
		    (unsigned long long)parent);
	if (!ci) {
		say(f, true, "dirent '%.*s' in %llu: inode %llu does not exist", (int)len, name,
		    (unsigned long long)parent, (unsigned long long)child);
		return 0;
	}
	uint32_t mode = (uint32_t)(*ci >> 32);
	if ((mode & S_IFMT) != type)
		say(f, true, "dirent '%.*s': type differs from inode %llu", (int)len, name,
		    (unsigned long long)child);
	if (dirent_hash(name, len) != get_be64((uint8_t *)k->mv_data + 8))
		say(f, true, "dirent '%.*s' in %llu: filed under the wrong hash", (int)len, name,
		    (unsigned long long)parent);
	uint64_t *n = map_slot(&f->names, child, true), *s = map_slot(&f->subdirs, parent, true);
	if (!n || !s)
		return -ENOMEM;
	(*n)++;
	if (S_ISDIR(mode))
		(*s)++;
	/* The mirror entry in links. */
	uint8_t kb[8], vb[LINK_VAL_MAX];
	put_be64(kb, child);
	put_be64(vb, parent);
	memcpy(vb + 8, name, len);
	MDB_val lk = { 8, kb }, lv = { 8 + len, vb };
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->st->db_links, &c));
	if (rc)
		return rc;
	if (mdb_cursor_get(c, &lk, &lv, MDB_GET_BOTH))
		say(f, true, "dirent '%.*s' in %llu has no link record", (int)len, name,
		    (unsigned long long)parent);
	mdb_cursor_close(c);
	return 0;
}

static int count_link(struct fsck *f, MDB_val *k, MDB_val *v)
{
	(void)v;
	uint64_t *n = map_slot(&f->names, get_be64(k->mv_data) ^ (1ull << 63), true);
	if (!n)
		return -ENOMEM;
	(*n)++;
	return 0;
}

/* Does directory `dir` reach the root through its parents? */
static bool reaches_root(struct fsck *f, uint64_t dir)
{
	for (unsigned depth = 0; depth < 1u << 16; depth++) {
		if (dir == PD_ROOT_INO)
			return true;
		uint8_t kb[8];
		put_be64(kb, dir);
		MDB_val k = { 8, kb }, v;
		if (mdb_get(f->txn, f->st->db_links, &k, &v) || v.mv_size < 8)
			return false;
		dir = get_be64(v.mv_data);
	}
	return false;
}

static bool is_orphan(struct fsck *f, uint64_t ino)
{
	uint8_t kb[8];
	put_be64(kb, ino);
	MDB_val k = { 8, kb }, v;
	return mdb_get(f->txn, f->st->db_orphans, &k, &v) == 0;
}

static void check_link_counts(struct fsck *f)
{
	struct u64map *m = &f->inode_info;
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->k[i])
			continue;
		uint64_t ino = m->k[i];
		uint32_t mode = (uint32_t)(m->v[i] >> 32), nlink = (uint32_t)m->v[i];
		uint64_t *np = map_slot(&f->names, ino, false), *lp = map_slot(&f->names, ino ^ (1ull << 63), false);
		uint64_t names = np ? *np : 0, links = lp ? *lp : 0;
		if (names != links)
			say(f, true, "inode %llu: %llu dirents but %llu link records", (unsigned long long)ino,
			    (unsigned long long)names, (unsigned long long)links);
		if (nlink == 0) {
			if (!is_orphan(f, ino))
				say(f, true, "inode %llu: no link and not an orphan", (unsigned long long)ino);
			else if (f->clean)
				say(f, true, "inode %llu: orphan left in a cleanly closed store",
				    (unsigned long long)ino);
			continue;
		}
		if (S_ISDIR(mode)) {
			uint64_t *sp = map_slot(&f->subdirs, ino, false);
			uint64_t want = 2 + (sp ? *sp : 0);
			if (nlink != want)
				say(f, true, "directory %llu: nlink %u, should be %llu", (unsigned long long)ino,
				    nlink, (unsigned long long)want);
			if (ino != PD_ROOT_INO && names != 1)
				say(f, true, "directory %llu has %llu names", (unsigned long long)ino,
				    (unsigned long long)names);
			if (!reaches_root(f, ino))
				say(f, true, "directory %llu is not connected to the root", (unsigned long long)ino);
		} else if (nlink != names) {
			say(f, true, "inode %llu: nlink %u but %llu names", (unsigned long long)ino, nlink,
			    (unsigned long long)names);
		}
	}
}

/* ---- blobs ----------------------------------------------------------- */

static int bref_cmp(const void *a, const void *b)
{
	const struct bref *x = a, *y = b;
	int c = memcmp(x->key, y->key, BLOBKEY_BYTES);
	return c ? c : (x->ino > y->ino) - (x->ino < y->ino);
}

/* The range of refs on key, refs sorted. */
static size_t refs_of(struct fsck *f, const uint8_t *key, size_t *first)
{
	size_t lo = 0, hi = f->nrefs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (memcmp(f->refs[mid].key, key, BLOBKEY_BYTES) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t n = 0;
	while (lo + n < f->nrefs && !memcmp(f->refs[lo + n].key, key, BLOBKEY_BYTES))
		n++;
	*first = lo;
	return n;
}

static void check_blob_inodes(struct fsck *f, const struct blobkey *k, const uint8_t *key, size_t first,
			      size_t n, char *hex)
{
	MDB_cursor *c;
	if (mdb_cursor_open(f->txn, f->st->db_blob_inodes, &c))
		return;
	MDB_val bk = { BLOBKEY_BYTES, (void *)key }, bv;
	size_t listed = 0;
	bool match = true;
	for (int mrc = mdb_cursor_get(c, &bk, &bv, MDB_SET_KEY); mrc == 0;
	     mrc = mdb_cursor_get(c, &bk, &bv, MDB_NEXT_DUP)) {
		uint64_t ino = get_be64(bv.mv_data);
		if (listed >= n || f->refs[first + listed].ino != ino)
			match = false;
		listed++;
	}
	mdb_cursor_close(c);
	if (!match || listed != n) {
		say(f, true, "blob %s.%u: blob_inodes lists %zu inodes, %zu refer to it", hex, k->variant,
		    listed, n);
		f->fix_refs = true;
	}
}

static void check_blob_file(struct fsck *f, const struct blobkey *k, const struct fprec *r, const char *hex)
{
	char path[BLOBKEY_PATH_MAX];
	blobkey_path(k, path);
	struct stat sb;
	if (fstatat(f->st->dirfd, path, &sb, 0)) {
		say(f, true, "blob %s.%u: file %s is missing (%llu inodes refer to it)", hex, k->variant, path,
		    (unsigned long long)r->refcount);
		return;
	}
	if ((uint64_t)sb.st_size != r->size) {
		say(f, true, "blob %s.%u: file is %lld bytes, record says %llu", hex, k->variant,
		    (long long)sb.st_size, (unsigned long long)r->size);
		return;
	}
	if (!f->o->deep)
		return;
	int fd = openat(f->st->dirfd, path, O_RDONLY | O_CLOEXEC);
	struct fp fp;
	if (fd < 0 || fp_of_fd(fd, &fp)) {
		say(f, true, "blob %s.%u: cannot read %s", hex, k->variant, path);
	} else if (memcmp(fp.md5, k->md5, 16) || memcmp(fp.xxh128, r->xxh128, 16)) {
		say(f, true, "blob %s.%u: content damaged (MD5 or XXH3-128 differs)", hex, k->variant);
	}
	if (fd >= 0)
		close(fd);
}

static void tally_positions(struct fsck *f, const struct fprec *r, const char *hex)
{
	if (!(r->flags & FPREC_IN_FILTER))
		return;
	for (unsigned j = 0; j < r->pos.k; j++) {
		uint64_t idx = cbf_pos_counter(&r->pos, j);
		if (idx >= f->ncounters) {
			say(f, true, "blob %s: stored position %llu outside the filter", hex,
			    (unsigned long long)idx);
			continue;
		}
		f->counts[idx]++;
	}
}

static int check_fprec(struct fsck *f, MDB_val *k, MDB_val *v)
{
	struct blobkey key;
	struct fprec r;
	char hex[33];
	if (k->mv_size != BLOBKEY_BYTES || fprec_decode(v->mv_data, v->mv_size, &r)) {
		say(f, true, "fingerprints: undecodable record");
		return 0;
	}
	blobkey_decode(k->mv_data, &key);
	fp_hex(key.md5, hex);
	f->res->blobs++;
	size_t first, n = refs_of(f, k->mv_data, &first);
	f->computed.blobs++;
	f->computed.stored_bytes += (int64_t)r.size;
	if (n)
		f->computed.hist[pd_hist_bucket(n)]++;
	if (r.refcount != n) {
		say(f, true, "blob %s.%u: refcount %llu, but %zu inodes refer to it", hex, key.variant,
		    (unsigned long long)r.refcount, n);
		struct fix_ref *p = realloc(f->fixes, (f->nfixes + 1) * sizeof *p);
		if (!p)
			return -ENOMEM;
		f->fixes = p;
		f->fixes[f->nfixes++] = (struct fix_ref){ key, n };
		f->fix_refs = true;
	}
	check_blob_inodes(f, &key, k->mv_data, first, n, hex);
	check_blob_file(f, &key, &r, hex);
	tally_positions(f, &r, hex);
	/* Mark the refs as matched to a record. */
	for (size_t i = 0; i < n; i++)
		f->refs[first + i].ino |= 1ull << 63;
	return 0;
}

static void check_unmatched_refs(struct fsck *f)
{
	for (size_t i = 0; i < f->nrefs; i++) {
		if (f->refs[i].ino >> 63) {
			f->refs[i].ino &= ~(1ull << 63);
			continue;
		}
		char hex[33];
		fp_hex(f->refs[i].key, hex);
		say(f, true, "inode %llu refers to blob %s which has no record",
		    (unsigned long long)f->refs[i].ino, hex);
	}
}

/* ---- filter ---------------------------------------------------------- */

static void check_filter(struct fsck *f)
{
	if (!f->clean) {
		say(f, false, "note: the store was not closed cleanly; its filter will be rebuilt from the stored positions at the next mount");
		return;
	}
	uint64_t bad = 0;
	for (uint64_t idx = 0; idx < f->ncounters; idx++) {
		uint64_t want = f->counts[idx];
		unsigned got = cbf_get(f->st->filter, idx);
		uint8_t kb[8];
		put_be64(kb, idx);
		MDB_val k = { 8, kb }, v;
		bool has_exact = mdb_get(f->txn, f->st->db_saturated, &k, &v) == 0 && v.mv_size == 8;
		uint64_t exact = has_exact ? get_le64(v.mv_data) : 0;
		bool ok = got == (want < CBF_COUNTER_MAX ? want : CBF_COUNTER_MAX) &&
			  (want >= CBF_COUNTER_MAX ? has_exact && exact == want : !has_exact);
		if (!ok && bad++ < 20)
			say(f, true, "filter counter %llu is %u (exact %llu), %llu stored positions are on it",
			    (unsigned long long)idx, got, (unsigned long long)exact, (unsigned long long)want);
		else if (!ok)
			f->res->problems++;
		if (idx % (1u << 20) == 0)
			progress(f, "filter", idx, f->ncounters);
	}
	if (bad)
		f->fix_filter = true;
}

/* ---- totals ---------------------------------------------------------- */

static void check_totals(struct fsck *f)
{
	struct pd_counters *c = &f->st->counters, *w = &f->computed;
	struct { const char *name; int64_t have, want; } t[] = {
		{ "pages", c->pages, w->pages },
		{ "logical_bytes", c->logical_bytes, w->logical_bytes },
		{ "blobs", c->blobs, w->blobs },
		{ "stored_bytes", c->stored_bytes, w->stored_bytes },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (t[i].have != t[i].want) {
			say(f, true, "total %s is %lld, the tables hold %lld", t[i].name, (long long)t[i].have,
			    (long long)t[i].want);
			f->fix_counters = true;
		}
	for (unsigned b = 0; b < PD_HIST_BUCKETS; b++)
		if (c->hist[b] != w->hist[b]) {
			say(f, true, "refcount histogram bucket %u is %lld, should be %lld", b,
			    (long long)c->hist[b], (long long)w->hist[b]);
			f->fix_counters = true;
		}
}

/* ---- files nobody refers to ------------------------------------------- */

static bool known_blob(struct fsck *f, const char *name)
{
	struct blobkey k = { .variant = 0 };
	if (strlen(name) < 32 || fp_unhex(name, k.md5))
		return false;
	if (name[32] == '.')
		k.variant = (uint32_t)strtoul(name + 33, NULL, 10);
	else if (name[32])
		return false;
	struct fprec r;
	return blob_get(f->txn, f->st, &k, &r) == 0;
}

static void orphan_file(struct fsck *f, const char *rel, bool in_staging)
{
	if (in_staging && !f->clean) {
		say(f, false, "note: %s: bytes of a file being written when the store stopped (removed at the next mount)", rel);
		return;
	}
	say(f, true, "%s: file unknown to the store (an orphan a crash can leave)", rel);
	if (f->o->repair && unlinkat(f->st->dirfd, rel, 0) == 0) {
		f->res->repaired++;
		say(f, false, "repaired: removed %s", rel);
	}
}

static void walk_dir(struct fsck *f, const char *rel, int level)
{
	int fd = openat(f->st->dirfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		say(f, true, "%s: cannot read the directory", rel);
		return;
	}
	struct dirent *e;
	char path[512];
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%s/%s", rel, e->d_name);
		bool is_dir = e->d_type == DT_DIR;
		if (level == 0 && is_dir) {
			walk_dir(f, path, level + 1);
		} else if (level == 1 && !is_dir) {
			f->res->blob_files++;
			if (!known_blob(f, e->d_name))
				orphan_file(f, path, false);
		} else if (level < 0) {
			orphan_file(f, path, true);
		} else {
			say(f, true, "%s: unexpected entry in objects/", path);
		}
	}
	closedir(d);
}

/* ---- repair ---------------------------------------------------------- */

struct repair_arg { struct fsck *f; };

static int repair_refs_cb(struct wtx *w, void *p)
{
	struct fsck *f = ((struct repair_arg *)p)->f;
	for (size_t i = 0; i < f->nfixes; i++) {
		struct fprec r;
		int rc = blob_get(w->txn, w->st, &f->fixes[i].k, &r);
		if (rc)
			continue;
		if (f->fixes[i].refcount == 0)
			continue; /* an unreferenced record: keep the bytes, count it at 1 */
		r.refcount = f->fixes[i].refcount;
		if ((rc = blob_put(w->txn, w->st, &f->fixes[i].k, &r)))
			return rc;
	}
	/* blob_inodes: rewrite from the inodes. */
	int rc = pd_mdb_err(mdb_drop(w->txn, w->st->db_blob_inodes, 0));
	for (size_t i = 0; i < f->nrefs && !rc; i++) {
		uint8_t vb[8];
		put_be64(vb, f->refs[i].ino);
		MDB_val k = { BLOBKEY_BYTES, f->refs[i].key }, v = { 8, vb };
		rc = pd_mdb_err(mdb_put(w->txn, w->st->db_blob_inodes, &k, &v, MDB_NODUPDATA));
	}
	return rc;
}

static int repair_totals_cb(struct wtx *w, void *p)
{
	struct fsck *f = ((struct repair_arg *)p)->f;
	struct pd_counters *c = &w->st->counters, *want = &f->computed;
	w->delta.pages = want->pages - c->pages;
	w->delta.logical_bytes = want->logical_bytes - c->logical_bytes;
	w->delta.blobs = want->blobs - c->blobs;
	w->delta.stored_bytes = want->stored_bytes - c->stored_bytes;
	for (unsigned b = 0; b < PD_HIST_BUCKETS; b++)
		w->delta.hist[b] = want->hist[b] - c->hist[b];
	return 0;
}

static int mark_unclean_cb(struct wtx *w, void *p)
{
	(void)p;
	uint8_t zero = 0;
	MDB_val k = { 5, "clean" }, v = { 1, &zero };
	return pd_mdb_err(mdb_put(w->txn, w->st->db_meta, &k, &v, 0));
}

static int repair(struct fsck *f, const char *dir, char err[512])
{
	struct store *st;
	/* Opening for writing after marking the store unclean rebuilds the
	 * filter and the saturated table from the stored positions. */
	struct store_opts o = { .sync_blobs = true };
	int rc = store_open(dir, &o, &st, err);
	if (rc)
		return rc;
	struct repair_arg a = { f };
	if (f->fix_refs && !(rc = store_write(st, repair_refs_cb, &a))) {
		f->res->repaired++;
		say(f, false, "repaired: refcounts and blob_inodes set from the inodes");
	}
	if (!rc && (f->fix_counters || f->fix_refs) && !(rc = store_write(st, repair_totals_cb, &a))) {
		f->res->repaired++;
		say(f, false, "repaired: totals recomputed");
	}
	if (!rc && f->fix_filter && !(rc = store_write(st, mark_unclean_cb, NULL))) {
		store_abandon(st);
		if ((rc = store_open(dir, &o, &st, err)))
			return rc;
		f->res->repaired++;
		say(f, false, "repaired: filter rebuilt from the stored positions");
	}
	int crc = store_close(st);
	return rc ? rc : crc;
}

/* ---- driver ---------------------------------------------------------- */

static int check_all(struct fsck *f)
{
	int rc = each(f, f->st->db_inodes, "inodes", check_inode);
	if (!rc)
		rc = each(f, f->st->db_dirents, "names", check_dirent);
	if (!rc)
		rc = each(f, f->st->db_links, "links", count_link);
	if (rc)
		return rc;
	check_link_counts(f);
	if (f->nrefs)
		qsort(f->refs, f->nrefs, sizeof *f->refs, bref_cmp);
	const struct cbf_geometry *g = cbf_geometry(f->st->filter);
	f->ncounters = g->nlines * CBF_LINE_COUNTERS;
	if (!(f->counts = calloc(f->ncounters, sizeof *f->counts)))
		return -ENOMEM;
	if ((rc = each(f, f->st->db_fp, "blobs", check_fprec)))
		return rc;
	check_unmatched_refs(f);
	check_filter(f);
	check_totals(f);
	walk_dir(f, "objects", 0);
	walk_dir(f, "staging", -1);
	return 0;
}

static int lock_store(const char *dir, char err[512])
{
	char path[4096];
	snprintf(path, sizeof path, "%s/lock", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		close(fd);
		snprintf(err, 512, "%s is in use (mounted?); unmount it before fsck", dir);
		return -EBUSY;
	}
	return fd;
}

int fsck_run(const char *dir, const struct fsck_opts *o, struct fsck_result *res, char err[512])
{
	memset(res, 0, sizeof *res);
	*err = 0;
	int lockfd = lock_store(dir, err);
	if (lockfd < 0)
		return lockfd;
	struct fsck f = { .o = o, .res = res };
	struct store_opts so = { .readonly = true };
	int rc = store_open(dir, &so, &f.st, err);
	if (!rc)
		rc = store_read_begin(f.st, &f.txn);
	if (!rc) {
		uint8_t cl = 0;
		MDB_val k = { 5, "clean" }, v;
		if (mdb_get(f.txn, f.st->db_meta, &k, &v) == 0 && v.mv_size == 1)
			cl = *(uint8_t *)v.mv_data;
		f.clean = cl == 1;
		rc = check_all(&f);
		store_read_end(f.st, f.txn);
	}
	if (f.st)
		store_close(f.st);
	close(lockfd);
	if (!rc && o->repair && (f.fix_refs || f.fix_counters || f.fix_filter))
		rc = repair(&f, dir, err);
	map_free(&f.inode_info);
	map_free(&f.names);
	map_free(&f.subdirs);
	free(f.refs);
	free(f.counts);
	free(f.fixes);
	return rc;
}
