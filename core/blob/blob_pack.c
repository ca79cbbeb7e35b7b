/* blob_pack.c - blobs whose bytes are records in packs (format 2).
 *
 * The fingerprint record of a packed blob carries the place of its pack
 * record (FPREC_PACKED: pack, offset, length). Every pack's live bytes and
 * records are counted in the meta table under the 8-byte key
 * "pack" | id u32 big-endian -> live bytes u64 | live records u64
 * (little-endian), changed in the transaction that inserts or frees a
 * blob, so that a pack's dead bytes are its length minus its live bytes
 * at any commit (a record appended by a seal whose commit never happened
 * is dead from the start).
 *
 * A read decodes the whole page once into an anonymous memory file
 * (memfd), which the open file keeps while it is open: the read path
 * stays the one of blob files (pread on a descriptor), and the kernel's
 * page cache of the mounted file serves the reads after the first.
 */
#include "blob.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/fdio.h"

static MDB_val pack_key(uint8_t kb[8], uint32_t id)
{
	return store_meta_id_key(kb, "pack", id);
}

int blob_pack_live_get(MDB_txn *txn, struct store *st, uint32_t id, struct blob_pack_live *out)
{
	uint8_t kb[8];
	MDB_val k = pack_key(kb, id), v;
	memset(out, 0, sizeof *out);
	int rc = mdb_get(txn, st->db_meta, &k, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return pd_mdb_err(rc);
	if (v.mv_size != 16)
		return -EUCLEAN;
	out->bytes = get_le64(v.mv_data);
	out->records = get_le64((const uint8_t *)v.mv_data + 8);
	return 0;
}

int blob_pack_live_put(MDB_txn *txn, struct store *st, uint32_t id, const struct blob_pack_live *l)
{
	uint8_t kb[8], vb[16];
	MDB_val k = pack_key(kb, id), v = { 16, vb };
	if (l->records == 0) {
		int rc = mdb_del(txn, st->db_meta, &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
	}
	put_le64(vb, l->bytes);
	put_le64(vb + 8, l->records);
	return pd_mdb_err(mdb_put(txn, st->db_meta, &k, &v, 0));
}

static int pack_account(MDB_txn *txn, struct store *st, const struct fprec *r, int sign)
{
	struct blob_pack_live l;
	int rc = blob_pack_live_get(txn, st, r->pack, &l);
	if (rc)
		return rc;
	if (sign > 0) {
		l.bytes += r->pack_len;
		l.records++;
	} else {
		l.bytes = l.bytes > r->pack_len ? l.bytes - r->pack_len : 0;
		l.records = l.records ? l.records - 1 : 0;
	}
	return blob_pack_live_put(txn, st, r->pack, &l);
}

int blob_pack_account(struct wtx *w, const struct fprec *r, int sign)
{
	if (sign > 0 && pack_retired(w->st->packs, r->pack))
		return -ESTALE; /* the compactor is removing that pack (blob_compact.c) */
	int rc = pack_account(w->txn, w->st, r, sign);
	return rc ? rc : blob_dict_account(w, r->pack_dict, sign);
}

void blob_rec_loc(const struct fprec *r, struct pack_loc *loc)
{
	*loc = (struct pack_loc){ r->pack, r->pack_off, r->pack_len };
}

void blob_rec_set_loc(struct fprec *r, const struct pack_loc *loc, uint32_t dict)
{
	r->flags |= FPREC_PACKED;
	r->pack = loc->pack;
	r->pack_off = loc->off;
	r->pack_len = loc->len;
	r->pack_dict = dict;
}

/* ---- decoding with dependencies ---------------------------------------- */

struct deps_ctx {
	struct store *st;
	unsigned depth;
};

static void *dep_base(void *ctx, const uint8_t md5[16], uint32_t variant, uint64_t *len);
static int dep_base_range(void *ctx, const uint8_t md5[16], uint32_t variant, uint64_t off, size_t len, void *out,
			  size_t *got, uint64_t *size);

static const struct pack_dict *dep_dict(void *ctx, uint32_t id)
{
	struct deps_ctx *c = ctx;
	return blob_dict_get(c->st, id);
}

static void deps_init(struct pack_deps *d, struct deps_ctx *c)
{
	*d = (struct pack_deps){ .dict = dep_dict, .base = dep_base, .ctx = c, .base_range = dep_base_range };
}

/* A read that failed on record r may have raced with the compactor, which
 * moves records and then removes their old pack (blob_compact.c): if k's
 * record now names another place, *now is it and the read is tried there. */
static bool moved_since(struct store *st, const struct blobkey *k, const struct fprec *r, struct fprec *now)
{
	return blob_read(st, k, now) == 0 && (now->flags & FPREC_PACKED) && !(now->flags & FPREC_BAD) &&
	       (now->pack != r->pack || now->pack_off != r->pack_off || now->pack_len != r->pack_len) &&
	       now->size == r->size && !memcmp(now->xxh128, r->xxh128, 16);
}

static int read_rec(struct store *st, const struct blobkey *k, const struct fprec *r, void *out, unsigned depth)
{
	struct deps_ctx c = { st, depth };
	struct pack_deps d;
	deps_init(&d, &c);
	struct fprec cur = *r, now;
	for (int tries = 0;; tries++) {
		struct pack_loc loc;
		blob_rec_loc(&cur, &loc);
		int rc = pack_read_page(st->packs, &loc, k->md5, k->variant, cur.size, cur.xxh128, &d, out);
		if (!rc || rc == -ENOMEM || tries == 3 || !moved_since(st, k, &cur, &now))
			return rc;
		cur = now;
	}
}

/* The record of the base a delta names (*k, *r): 0, or -EIO when it
 * has none or the chain is too deep (a loop in damaged records: EIO, not
 * a hang). */
static int base_rec(struct deps_ctx *c, const uint8_t md5[16], uint32_t variant, struct blobkey *k, struct fprec *r)
{
	if (c->depth >= 2 * BLOB_DELTA_DEPTH)
		return -EIO;
	*k = (struct blobkey){ .variant = variant };
	memcpy(k->md5, md5, 16);
	MDB_txn *txn;
	int rc = store_read_begin(c->st, &txn);
	if (rc)
		return rc;
	rc = blob_delta_base_rec(txn, c->st, k, r);
	store_read_end(c->st, txn);
	return rc || !(r->flags & FPREC_PACKED) ? -EIO : 0;
}

static int range_rec(struct store *st, const struct blobkey *k, const struct fprec *r, uint64_t off, size_t len,
		     void *out, unsigned depth);

/* Bytes [off, off + len) of the base a chunked delta names, clipped to
 * its size, decoded through the base's own chunks (pack.h). */
static int dep_base_range(void *ctx, const uint8_t md5[16], uint32_t variant, uint64_t off, size_t len, void *out,
			  size_t *got, uint64_t *size)
{
	struct deps_ctx *c = ctx;
	struct blobkey k;
	struct fprec r;
	int rc = base_rec(c, md5, variant, &k, &r);
	if (rc)
		return rc;
	*size = r.size;
	*got = off >= r.size ? 0 : (size_t)(r.size - off < len ? r.size - off : len);
	return *got ? range_rec(c->st, &k, &r, off, *got, out, c->depth + 1) : 0;
}

/* The raw bytes of the base a delta names (a delta of a delta decodes its
 * own base first; the encoder bounds the chain, BLOB_DELTA_DEPTH). */
static void *dep_base(void *ctx, const uint8_t md5[16], uint32_t variant, uint64_t *len)
{
	struct deps_ctx *c = ctx;
	struct blobkey k;
	struct fprec r;
	if (base_rec(c, md5, variant, &k, &r))
		return NULL;
	void *b = malloc(r.size ? (size_t)r.size : 1);
	if (b && read_rec(c->st, &k, &r, b, c->depth + 1)) {
		free(b);
		b = NULL;
	}
	*len = r.size;
	return b;
}

int blob_read_packed_alloc(struct store *st, const struct blobkey *k, const struct fprec *r, void **out)
{
	void *b = malloc(r->size ? (size_t)r->size : 1);
	if (!b)
		return -ENOMEM;
	int rc = blob_read_packed(st, k, r, b);
	if (rc) {
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

int blob_read_packed(struct store *st, const struct blobkey *k, const struct fprec *r, void *out)
{
	return read_rec(st, k, r, out, 0);
}

int blob_read_range(struct store *st, const struct blobkey *k, const struct fprec *r, uint64_t off, size_t len,
		    void *out)
{
	return range_rec(st, k, r, off, len, out, 0);
}

static int range_rec(struct store *st, const struct blobkey *k, const struct fprec *r, uint64_t off, size_t len,
		     void *out, unsigned depth)
{
	struct deps_ctx c = { st, depth };
	struct pack_deps d;
	deps_init(&d, &c);
	struct fprec cur = *r, now;
	for (int tries = 0;; tries++) {
		struct pack_loc loc;
		blob_rec_loc(&cur, &loc);
		int rc = pack_read_range(st->packs, &loc, k->md5, k->variant, &d, off, len, out);
		if (!rc || rc == -ENOMEM || rc == -EINVAL || tries == 3 || !moved_since(st, k, &cur, &now))
			return rc;
		cur = now;
	}
}

int blob_rec_hdr(struct store *st, const struct fprec *r, struct pack_rec_hdr *h)
{
	struct pack_loc loc;
	blob_rec_loc(r, &loc);
	return pack_read_hdr(st->packs, &loc, h);
}

int blob_chunking(struct store *st, const struct fprec *r, uint32_t *nchunks, unsigned *shift)
{
	struct pack_rec_hdr h;
	int rc = blob_rec_hdr(st, r, &h);
	if (rc)
		return rc;
	*nchunks = h.nchunks;
	*shift = h.chunk_shift;
	return 0;
}

int blob_rec_check(struct store *st, const struct pack_rec *rec)
{
	struct deps_ctx c = { st, 0 };
	struct pack_deps d;
	deps_init(&d, &c);
	return pack_rec_check(rec, &d);
}

int blob_rec_decode(struct store *st, const struct pack_rec *rec, void **out)
{
	struct deps_ctx c = { st, 0 };
	struct pack_deps d;
	deps_init(&d, &c);
	return pack_rec_decode(rec, &d, out);
}

int blob_open_rec(struct store *st, const struct blobkey *k, const struct fprec *r)
{
	if (!(r->flags & FPREC_PACKED)) {
		char path[BLOBKEY_PATH_MAX];
		blobkey_path(k, path);
		int fd = openat(st->dirfd, path, O_RDONLY | O_CLOEXEC);
		return fd < 0 ? (errno == ENOENT ? -EIO : -errno) : fd;
	}
	if (r->flags & FPREC_BAD)
		return -EIO;
	int fd = memfd_create("pagededup-page", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = 0;
	if (r->size > 0) {
		void *map = MAP_FAILED;
		if (ftruncate(fd, (off_t)r->size))
			rc = -errno;
		else if ((map = mmap(NULL, (size_t)r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
			rc = -errno;
		else
			rc = blob_read_packed(st, k, r, map);
		if (map != MAP_FAILED)
			munmap(map, (size_t)r->size);
	}
	if (rc) {
		close(fd);
		return rc == -ENOMEM || rc == -ENOSPC ? rc : -EIO;
	}
	return fd;
}

/* ---- writing ------------------------------------------------------------ */

/* sealed: the page is being sealed now (it joins the dictionaries'
 * sample); otherwise it was sampled when it was sealed (its final record
 * counts in their measure of drift only). */
static int encode_at(struct store *st, int level, bool sealed, const struct fp *fp, const void *mem, int fd,
		     struct pack_rec *out)
{
	struct pack_encode_opts o = { .level = level < 0 ? 0 : level };
	if (level > 0)
		o.dict = blob_dict_hold(st);
	int rc = pack_encode_page(fp->md5, 0, fp->xxh128, mem, mem ? -1 : fd, fp->size, &o, out);
	blob_dict_unhold(st, o.dict);
	if (!rc && level > 0 && sealed)
		blob_dict_observe(st, fp, out->len);
	else if (!rc && level > 0)
		blob_dict_drift(st, fp->size, out->len);
	return rc;
}

int blob_encode(struct store *st, const struct fp *fp, const void *mem, int fd, struct pack_rec *out)
{
	return encode_at(st, st->opts.pack_level ? st->opts.pack_level : PACK_DEFAULT_LEVEL, true, fp, mem, fd, out);
}

int blob_encode_final(struct store *st, const struct fp *fp, const void *mem, int fd, struct pack_rec *out)
{
	return encode_at(st, st->opts.pack_level ? st->opts.pack_level : BLOB_FINAL_LEVEL, false, fp, mem, fd, out);
}

/* An append that found the disk full is tried once more if the dead
 * records waiting for their commit's sync gave blocks back (store.h,
 * store_punch_waiting): a page deleted just before must make room. */
static int append_retried(struct store *st, int (*append)(struct pack_set *, const struct pack_rec *, bool, struct pack_loc *),
			  const struct pack_rec *rec, struct pack_loc *loc)
{
	int rc = append(st->packs, rec, st->opts.sync_blobs, loc);
	if (rc == -ENOSPC && store_punch_waiting(st) > 0)
		rc = append(st->packs, rec, st->opts.sync_blobs, loc);
	return rc;
}

int blob_append(struct store *st, struct pack_rec *rec, const struct blobkey *k, struct pack_loc *loc)
{
	int rc = pack_rec_set_id(rec, k->md5, k->variant);
	return rc ? rc : append_retried(st, pack_append, rec, loc);
}

uint64_t blob_nursery_max(const struct store *st)
{
	return st->opts.nursery_max_bytes ? st->opts.nursery_max_bytes : BLOB_NURSERY_MAX_BYTES;
}

/* The level close() writes a nursery record at (blob.h): raw while the
 * nursery is small and the disk has room for the rest of its bound. */
static int nursery_level(struct store *st)
{
	if (st->opts.nursery_level)
		return st->opts.nursery_level;
	uint64_t raw_max = st->opts.nursery_raw_bytes ? st->opts.nursery_raw_bytes : BLOB_NURSERY_RAW_BYTES;
	uint64_t free_bytes;
	if (pack_nursery_bytes(st->packs) < raw_max && !fd_free_bytes(st->dirfd, NULL, &free_bytes) &&
	    free_bytes >= blob_nursery_max(st))
		return -1;
	return BLOB_NURSERY_LEVEL;
}

bool blob_nursery_wanted(struct store *st)
{
	if (!st->opts.nursery)
		return false;
	if (pack_nursery_bytes(st->packs) < blob_nursery_max(st))
		return true;
	__atomic_add_fetch(&st->nursery_bypassed, 1, __ATOMIC_RELAXED);
	return false;
}

bool blob_nursery_behind(struct store *st)
{
	if (!st->opts.nursery)
		return false;
	return pack_nursery_bytes(st->packs) >= blob_nursery_max(st) / 2;
}

int blob_encode_nursery(struct store *st, const struct fp *fp, const void *mem, int fd, struct pack_rec *out)
{
	int level = nursery_level(st);
	struct pack_encode_opts o = { .level = level < 0 ? 0 : level };
	if (level > 0)
		o.dict = blob_dict_hold(st);
	int rc = pack_encode_page(fp->md5, 0, fp->xxh128, mem, mem ? -1 : fd, fp->size, &o, out);
	blob_dict_unhold(st, o.dict);
	if (!rc) /* sampled as it is sealed; its level is not the final records' */
		blob_dict_observe(st, fp, 0);
	return rc;
}

int blob_append_nursery(struct store *st, struct pack_rec *rec, const struct blobkey *k, struct pack_loc *loc)
{
	int rc = pack_rec_set_id(rec, k->md5, k->variant);
	return rc ? rc : append_retried(st, pack_append_nursery, rec, loc);
}

bool blob_in_nursery(struct store *st, const struct fprec *r)
{
	return (r->flags & FPREC_PACKED) && pack_is_nursery(st->packs, r->pack);
}

int blob_heal(struct wtx *w, const struct blobkey *k, const struct pack_loc *loc, uint32_t dict)
{
	struct store *st = w->st;
	struct fprec r;
	int rc = blob_get(w->txn, st, k, &r);
	if (rc)
		return rc;
	if (r.flags & FPREC_PACKED) {
		struct pack_loc old;
		blob_rec_loc(&r, &old);
		if ((rc = blob_delta_forget(w, k, &r)) || (rc = blob_pack_account(w, &r, -1)) ||
		    (rc = wtx_punch_after(w, &old)))
			return rc;
	} else {
		char path[BLOBKEY_PATH_MAX];
		blobkey_path(k, path);
		if ((rc = wtx_unlink_after(w, path)))
			return rc;
	}
	blob_rec_set_loc(&r, loc, dict);
	r.flags &= (uint8_t)~FPREC_BAD;
	if ((rc = blob_pack_account(w, &r, +1)) || (rc = blob_delta_healed(w, k)))
		return rc;
	return blob_put(w->txn, st, k, &r);
}

static int mark_bad_cb(struct wtx *w, void *arg)
{
	const struct blobkey *k = arg;
	struct fprec r;
	int rc = blob_get(w->txn, w->st, k, &r);
	if (rc == -ENOENT)
		return 0; /* gone meanwhile */
	if (rc || (r.flags & FPREC_BAD))
		return rc;
	r.flags |= FPREC_BAD;
	return blob_put(w->txn, w->st, k, &r);
}

int blob_mark_bad(struct store *st, const struct blobkey *k)
{
	if (st->readonly)
		return 0;
	struct blobkey copy = *k;
	return store_write(st, mark_bad_cb, &copy);
}

/* ---- format 1 files into packs ------------------------------------------ */

#define CONVERT_BATCH 256

struct conv_item {
	struct blobkey k;
	uint64_t size;
	uint8_t xxh128[16];
	struct pack_loc loc;
	uint32_t dict;
};

struct conv_batch {
	struct conv_item *v;
	size_t n;
	uint64_t moved;
};

static int convert_cb(struct wtx *w, void *arg)
{
	struct conv_batch *b = arg;
	b->moved = 0;
	for (size_t i = 0; i < b->n; i++) {
		struct conv_item *c = &b->v[i];
		struct fprec r;
		int rc = blob_get(w->txn, w->st, &c->k, &r);
		if (rc == -ENOENT)
			continue; /* freed meanwhile: its new record is dead bytes */
		if (rc)
			return rc;
		if ((r.flags & FPREC_PACKED) || r.size != c->size || memcmp(r.xxh128, c->xxh128, 16))
			continue;
		if ((rc = blob_heal(w, &c->k, &c->loc, c->dict)))
			return rc;
		b->moved++;
	}
	return 0;
}

/* The next keys (after *from) of records that are files. */
static int next_files(struct store *st, uint8_t from[BLOBKEY_BYTES], bool *started, struct conv_item *v, size_t *n,
		      bool *done)
{
	MDB_txn *txn;
	MDB_cursor *c;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	if ((rc = pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &c)))) {
		store_read_end(st, txn);
		return rc;
	}
	MDB_val key = { BLOBKEY_BYTES, from }, val;
	int mrc = *started ? mdb_cursor_get(c, &key, &val, MDB_SET_RANGE) : mdb_cursor_get(c, &key, &val, MDB_FIRST);
	if (mrc == 0 && *started && key.mv_size == BLOBKEY_BYTES && !memcmp(key.mv_data, from, BLOBKEY_BYTES))
		mrc = mdb_cursor_get(c, &key, &val, MDB_NEXT);
	*n = 0;
	for (; mrc == 0 && *n < CONVERT_BATCH; mrc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
		struct fprec r;
		if (key.mv_size != BLOBKEY_BYTES)
			continue;
		memcpy(from, key.mv_data, BLOBKEY_BYTES);
		*started = true;
		if (fprec_decode(val.mv_data, val.mv_size, &r) || (r.flags & (FPREC_PACKED | FPREC_BAD)))
			continue;
		struct conv_item *it = &v[(*n)++];
		blobkey_decode(key.mv_data, &it->k);
		it->size = r.size;
		memcpy(it->xxh128, r.xxh128, 16);
	}
	*done = mrc != 0;
	mdb_cursor_close(c);
	store_read_end(st, txn);
	return mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
}

/* Encode and append the file of item c, checked against its record. */
static int pack_file(struct store *st, struct conv_item *c)
{
	char path[BLOBKEY_PATH_MAX];
	blobkey_path(&c->k, path);
	int fd = openat(st->dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	struct fp fp;
	int rc = fp_of_fd(fd, &fp);
	if (!rc && (fp.size != c->size || memcmp(fp.xxh128, c->xxh128, 16) || memcmp(fp.md5, c->k.md5, 16)))
		rc = 1; /* damaged: fsck reports it, it stays a file */
	struct pack_rec rec = { 0 };
	if (!rc)
		rc = blob_encode(st, &fp, NULL, fd, &rec);
	close(fd);
	if (!rc)
		rc = blob_append(st, &rec, &c->k, &c->loc);
	c->dict = rec.hdr.dict;
	pack_rec_free(&rec);
	return rc;
}

int blob_convert_files(struct store *st, uint64_t *moved, uint64_t *left)
{
	*moved = *left = 0;
	struct conv_item *v = calloc(CONVERT_BATCH, sizeof *v), *ok = calloc(CONVERT_BATCH, sizeof *ok);
	uint8_t from[BLOBKEY_BYTES] = { 0 };
	bool started = false, done = false;
	int rc = v && ok ? 0 : -ENOMEM;
	while (!rc && !done) {
		size_t n, nok = 0;
		if ((rc = next_files(st, from, &started, v, &n, &done)))
			break;
		for (size_t i = 0; i < n && !rc; i++) {
			int prc = pack_file(st, &v[i]);
			if (prc == 0)
				ok[nok++] = v[i];
			else if (prc > 0)
				(*left)++;
			else
				rc = prc;
		}
		/* the records are on disk before the commit that names them */
		if (!rc && nok && !st->opts.sync_blobs)
			rc = pack_sync(st->packs);
		struct conv_batch b = { ok, nok, 0 };
		if (!rc && nok)
			rc = store_write(st, convert_cb, &b);
		*moved += b.moved;
	}
	free(v);
	free(ok);
	return rc;
}

/* ---- what the packs take on disk ------------------------------------------ */

static int usage_kept(void *ctx, const struct blobkey *k, const struct fprec *r)
{
	struct blob_pack_usage *u = ctx;
	(void)k;
	u->kept++;
	u->kept_bytes += r->pack_len;
	return 0;
}

int blob_pack_usage(struct store *st, struct blob_pack_usage *u)
{
	memset(u, 0, sizeof *u);
	uint32_t *ids;
	size_t n;
	int rc = pack_list(st->packs, &ids, &n);
	if (rc)
		return rc;
	MDB_txn *txn;
	if ((rc = store_read_begin(st, &txn))) {
		free(ids);
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		struct pack_space sp;
		struct blob_pack_live l;
		if (pack_space(st->packs, ids[i], &sp) || blob_pack_live_get(txn, st, ids[i], &l))
			continue;
		u->packs++;
		u->length += sp.length;
		u->allocated += sp.allocated;
		u->live += l.bytes;
		u->live_records += l.records;
		if (pack_is_nursery(st->packs, ids[i])) {
			u->nursery_packs++;
			u->nursery_length += sp.length;
			u->nursery_allocated += sp.allocated;
			u->nursery_live += l.bytes;
			u->nursery_live_records += l.records;
		}
	}
	/* the dictionaries: meta rows "dict" | id */
	MDB_cursor *c;
	if (mdb_cursor_open(txn, st->db_meta, &c) == 0) {
		MDB_val k = { 4, "dict" }, v;
		for (int m = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); m == 0; m = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
			if (k.mv_size != 8 || memcmp(k.mv_data, "dict", 4) || v.mv_size != 28)
				break;
			u->dicts++;
			u->dict_bytes += get_le64((const uint8_t *)v.mv_data + 12);
		}
		mdb_cursor_close(c);
	}
	blob_delta_kept_each(txn, st, usage_kept, u);
	store_read_end(st, txn);
	free(ids);
	/* dead: what the files hold beyond the live records, their headers and the dictionaries */
	uint64_t kept = u->live + u->dict_bytes + (uint64_t)u->packs * PACK_HDR_BYTES;
	u->dead = u->length > kept ? u->length - kept : 0;
	return 0;
}
