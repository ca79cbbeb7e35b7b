/* blob.c - blob files and fingerprint records. See blob.h. */
#include "blob.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>


int blob_listen(struct store *st, const struct blob_listener *l)
{
	if (st->n_blob_listeners == STORE_MAX_PARTS)
		return -E2BIG;
	st->blob_listeners[st->n_blob_listeners++] = l;
	return 0;
}

static int tell_added(struct wtx *w, const struct blobkey *k, const struct fprec *r)
{
	int rc = 0;
	for (unsigned i = 0; !rc && i < w->st->n_blob_listeners; i++)
		if (w->st->blob_listeners[i]->added)
			rc = w->st->blob_listeners[i]->added(w, k, r);
	return rc;
}

static int tell_released(struct wtx *w, const struct blobkey *k, const struct fprec *r)
{
	int rc = 0;
	for (unsigned i = 0; !rc && i < w->st->n_blob_listeners; i++)
		if (w->st->blob_listeners[i]->released)
			rc = w->st->blob_listeners[i]->released(w, k, r);
	return rc;
}

static MDB_val key_val(uint8_t kb[BLOBKEY_BYTES], const struct blobkey *k)
{
	blobkey_encode(k, kb);
	return (MDB_val){ BLOBKEY_BYTES, kb };
}

int blob_get(MDB_txn *txn, struct store *st, const struct blobkey *k, struct fprec *out)
{
	uint8_t kb[BLOBKEY_BYTES];
	MDB_val key = key_val(kb, k), v;
	int rc = pd_mdb_err(mdb_get(txn, st->db_fp, &key, &v));
	return rc ? rc : fprec_decode(v.mv_data, v.mv_size, out);
}

int blob_put(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct fprec *r)
{
	if (r->ino && !store_fp_row2(st))
		return -EINVAL; /* layout 1 has no room for it (store_ino_in_row) */
	uint8_t kb[BLOBKEY_BYTES], vb[FPREC_MAX_BYTES];
	MDB_val key = key_val(kb, k), v = { fprec_encode(r, store_fp_row2(st), vb), vb };
	return pd_mdb_err(mdb_put(txn, st->db_fp, &key, &v, 0));
}

static void hist_move(struct wtx *w, uint64_t from, uint64_t to)
{
	if (from)
		w->delta.hist[pd_hist_bucket(from)]--;
	if (to)
		w->delta.hist[pd_hist_bucket(to)]++;
}

int blob_ref(struct wtx *w, const struct blobkey *k, uint64_t ino)
{
	struct fprec r;
	int rc = blob_get(w->txn, w->st, k, &r);
	if (rc)
		return rc == -ENOENT ? -EUCLEAN : rc;
	if ((rc = store_blob_ino_add(w->txn, w->st, k, &r, ino)))
		return rc;
	hist_move(w, r.refcount, r.refcount + 1);
	r.refcount++;
	return blob_put(w->txn, w->st, k, &r);
}

int blob_unref(struct wtx *w, const struct blobkey *k, uint64_t ino)
{
	struct store *st = w->st;
	struct fprec r;
	int rc = blob_get(w->txn, st, k, &r);
	if (rc)
		return rc == -ENOENT ? -EUCLEAN : rc;
	if ((rc = store_blob_ino_del(w->txn, st, k, &r, ino)))
		return rc == -ENOENT ? -EUCLEAN : rc;
	hist_move(w, r.refcount, r.refcount - 1);
	if (--r.refcount > 0)
		return blob_put(w->txn, st, k, &r);
	uint8_t kb[BLOBKEY_BYTES];
	MDB_val key = key_val(kb, k);
	if ((rc = pd_mdb_err(mdb_del(w->txn, st->db_fp, &key, NULL))))
		return rc;
	if ((r.flags & FPREC_IN_FILTER) &&
	    (rc = gf_remove(st->gf, r.leaf, &r.pos, &store_saturated_ops, w)))
		return rc;
	if ((rc = tell_released(w, k, &r)))
		return rc;
	w->delta.blobs--;
	w->delta.stored_bytes -= (int64_t)r.size;
	if (r.flags & FPREC_PACKED)
		return blob_delta_release(w, k, &r); /* dead bytes, or kept for its deltas */
	char path[BLOBKEY_PATH_MAX];
	blobkey_path(k, path);
	return wtx_unlink_after(w, path);
}

int blob_insert(struct wtx *w, const struct blobkey *k, struct fprec *r, uint64_t ino, bool in_filter)
{
	struct store *st = w->st;
	int rc;
	r->refcount = 0;
	r->ino = 0;
	if ((rc = store_blob_ino_add(w->txn, st, k, r, ino)))
		return rc;
	r->refcount = 1;
	if (in_filter) {
		r->flags |= FPREC_IN_FILTER;
		if ((rc = gf_insert(st->gf, k->md5, &store_saturated_ops, w, &r->leaf, &r->pos)))
			return rc;
	} else {
		memset(&r->pos, 0, sizeof r->pos);
		r->leaf = 0;
		r->flags &= (uint8_t)~FPREC_IN_FILTER;
	}
	if ((rc = blob_put(w->txn, st, k, r)))
		return rc;
	if ((rc = tell_added(w, k, r)))
		return rc;
	if (r->flags & FPREC_PACKED) {
		if ((rc = blob_pack_account(w, r, +1)))
			return rc;
	} else {
		char path[BLOBKEY_PATH_MAX];
		blobkey_path(k, path);
		wtx_keep(w, path); /* freed and stored again in one batch: keep the file */
	}
	w->delta.blobs++;
	w->delta.stored_bytes += (int64_t)r->size;
	hist_move(w, 0, 1);
	return 0;
}

/* Walk the records of one MD5 (all its variants). */
static int md5_variants(MDB_txn *txn, struct store *st, const uint8_t md5[16],
			int (*fn)(void *ctx, const struct blobkey *k, const struct fprec *r), void *ctx)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &c));
	if (rc)
		return rc;
	struct blobkey first = { .variant = 0 };
	memcpy(first.md5, md5, 16);
	uint8_t kb[BLOBKEY_BYTES];
	MDB_val key = key_val(kb, &first), v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &key, &v, MDB_SET_RANGE); mrc == 0 && rc == 0;
	     mrc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		if (key.mv_size != BLOBKEY_BYTES || memcmp(key.mv_data, md5, 16))
			break;
		struct blobkey k;
		struct fprec r;
		blobkey_decode(key.mv_data, &k);
		if (!(rc = fprec_decode(v.mv_data, v.mv_size, &r)))
			rc = fn(ctx, &k, &r);
	}
	mdb_cursor_close(c);
	if (mrc && mrc != MDB_NOTFOUND)
		return pd_mdb_err(mrc);
	return rc > 0 ? 0 : rc;
}

struct find_ctx {
	const struct fp *fp;
	struct blobkey *k;
	bool found, seen;
	uint32_t next_variant;
};

static int find_step(void *p, const struct blobkey *k, const struct fprec *r)
{
	struct find_ctx *f = p;
	f->seen = true;
	f->next_variant = k->variant + 1;
	if (r->size == f->fp->size && memcmp(r->xxh128, f->fp->xxh128, 16) == 0) {
		*f->k = *k;
		f->found = true;
		return 1;
	}
	return 0;
}

int blob_find(MDB_txn *txn, struct store *st, const struct fp *fp, struct blobkey *k, bool *found,
	      bool *collision)
{
	struct find_ctx f = { fp, k, false, false, 0 };
	int rc = md5_variants(txn, st, fp->md5, find_step, &f);
	if (rc)
		return rc;
	*found = f.found;
	if (!f.found) {
		memcpy(k->md5, fp->md5, 16);
		k->variant = f.next_variant;
	}
	/* A record of this MD5 that is not this content: a collision. */
	*collision = !f.found && f.seen;
	return 0;
}

static int last_variant_step(void *p, const struct blobkey *k, const struct fprec *r)
{
	(void)r;
	*(uint32_t *)p = k->variant + 1;
	return 0;
}

int blob_next_variant(MDB_txn *txn, struct store *st, const uint8_t md5[16], struct blobkey *k)
{
	uint32_t next = 0;
	int rc = md5_variants(txn, st, md5, last_variant_step, &next);
	memcpy(k->md5, md5, 16);
	k->variant = next;
	return rc;
}

int blob_read(struct store *st, const struct blobkey *k, struct fprec *out)
{
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = blob_get(txn, st, k, out);
	store_read_end(st, txn);
	return rc;
}

int blob_open(struct store *st, const struct blobkey *k)
{
	struct fprec r;
	int rc = blob_read(st, k, &r);
	if (rc)
		return rc == -ENOENT ? -EIO : rc;
	return blob_open_rec(st, k, &r);
}

int blob_verify(int fd, const struct fprec *r)
{
	enum { CHUNK = 1 << 18 };
	struct stat sb;
	if (fstat(fd, &sb))
		return -errno;
	if ((uint64_t)sb.st_size != r->size)
		return -EIO;
	XXH3_state_t *s = XXH3_createState();
	char *buf = malloc(CHUNK);
	int rc = 0;
	if (!s || !buf)
		rc = -ENOMEM;
	if (!rc)
		XXH3_128bits_reset(s);
	for (off_t off = 0; !rc;) {
		ssize_t n = pread(fd, buf, CHUNK, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = -EIO;
		if (n <= 0)
			break;
		XXH3_128bits_update(s, buf, (size_t)n);
		off += n;
	}
	if (!rc) {
		XXH128_canonical_t canon;
		XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(s));
		if (memcmp(canon.digest, r->xxh128, 16))
			rc = -EIO;
	}
	free(buf);
	XXH3_freeState(s);
	return rc;
}

int blob_mkdirs(struct store *st, const struct blobkey *k)
{
	/* Remember which of the 4096 directories exist: a mkdir per new blob
	 * would otherwise be the commonest system call of a crawl. */
	unsigned dir = (unsigned)k->md5[0] << 4 | k->md5[1] >> 4;
	uint64_t bit = 1ull << (dir % 64);
	if (__atomic_load_n(&st->objdirs[dir / 64], __ATOMIC_RELAXED) & bit)
		return 0;
	char path[BLOBKEY_PATH_MAX];
	blobkey_path(k, path);
	*strrchr(path, '/') = 0; /* "objects/abc" */
	if (mkdirat(st->dirfd, "objects", 0700) && errno != EEXIST) /* format 2 stores start without */
		return -errno;
	if (mkdirat(st->dirfd, path, 0700) && errno != EEXIST)
		return -errno;
	__atomic_or_fetch(&st->objdirs[dir / 64], bit, __ATOMIC_RELAXED);
	return 0;
}
