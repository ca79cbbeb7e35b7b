/* fsck_blobindex.c - fsck's pass 3 (see fsck.c for the whole design):
 * the blob index (blob_inodes, and from format 7 on the inode a
 * fingerprint row holds: store_blob_inodes, store.h) against the blob
 * keys held by the inodes, by their multiset sums, then a diagnosis when
 * they differ (the entries stale or missing, which pass 4 and the repair
 * take). Its walk of the fingerprint rows also tallies the packs' live
 * sums and the dictionaries' counts for the pack checks (fsck_packs.c). */
#include "fsck_int.h"

/* ---- pass 3: blob_inodes against the inodes ---------------------------- */

static int bref_cmp(const void *a, const void *b)
{
	const struct bref *x = a, *y = b;
	int c = memcmp(x->key, y->key, BLOBKEY_BYTES);
	return c ? c : (x->ino > y->ino) - (x->ino < y->ino);
}

static int push_bref(struct vec *v, const uint8_t *key, uint64_t ino)
{
	struct bref *b = fsck_vec_push(v);
	if (!b)
		return -ENOMEM;
	memcpy(b->key, key, BLOBKEY_BYTES);
	b->ino = ino;
	return 0;
}

/* fn(f, key, ino) for every fingerprint row holding an inode (format 7);
 * an undecodable row is pass 4's to report. */
typedef int (*row_ino_fn)(struct fsck *f, const uint8_t *key, uint64_t ino);
static int row_ino_of(struct fsck *f, const uint8_t *key, const struct fprec *r, void *ctx)
{
	row_ino_fn *fn = ctx;
	return r->ino ? (*fn)(f, key, r->ino) : 0;
}

static int row_inodes_each(struct fsck *f, row_ino_fn fn)
{
	return fsck_fp_rows_each(f, row_ino_of, &fn);
}

/* Pass 3's walk of the rows: the inode a row holds into the blob index's
 * sums, and the row into the pack checks' tallies (fsck_packs.c), which
 * so need no walk of their own. (Pass 4 reads the same rows, but it needs
 * this pass's verdict first: the entries found stale or missing here
 * change the references it counts per blob.) */
static int row_fact_and_tally(struct fsck *f, const uint8_t *key, const struct fprec *r, void *ctx)
{
	(void)ctx;
	if (r->ino) {
		fsck_blob_fact(&f->s_bi, key, r->ino);
		f->n_bi++;
		f->bi_rows++;
	}
	return fsck_rows_tally(f, r);
}

/* Does inode ino refer to blob key? 1 yes, 0 no (*gone: it does not
 * exist), -1 undecodable (reported elsewhere). */
static int inode_names_blob(struct fsck *f, uint64_t ino, const uint8_t *key, bool *gone)
{
	struct inode in;
	int grc = ns_get_inode(f->txn, &f->sh, ino, &in);
	*gone = grc == -ENOENT;
	if (grc && grc != -ENOENT)
		return -1;
	if (grc || !S_ISREG(in.mode) || !(in.flags & INODE_HAS_BLOB))
		return 0;
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(&in.blob, kb);
	return !memcmp(kb, key, BLOBKEY_BYTES);
}

/* A row's inode that does not refer to its blob, or that the table lists
 * too: stale. */
static int row_stale(struct fsck *f, const uint8_t *key, uint64_t ino)
{
	bool gone;
	int named = inode_names_blob(f, ino, key, &gone);
	char hex[48];
	fsck_blob_name(key, hex);
	if (named == 1) {
		uint8_t vb[8];
		put_be64(vb, ino);
		MDB_val bk = { BLOBKEY_BYTES, (void *)key }, bv = { 8, vb };
		MDB_cursor *c;
		int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_blob_inodes, &c));
		if (rc)
			return rc;
		bool twice = mdb_cursor_get(c, &bk, &bv, MDB_GET_BOTH) == 0;
		mdb_cursor_close(c);
		if (!twice)
			return 0;
		fsck_say(f, K_BLOBREF, "blob %s: inode %llu is in its fingerprint row and in blob_inodes both (repair: one removed)",
			 hex, (unsigned long long)ino);
		return push_bref(&f->stale, key, ino);
	}
	if (named < 0)
		return 0;
	fsck_say(f, K_BLOBREF, "blob %s: its fingerprint row holds inode %llu, which %s (repair: removed from the row)", hex,
		 (unsigned long long)ino, gone ? "does not exist" : "does not refer to it");
	return push_bref(&f->stale, key, ino);
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
	fsck_prog(f, "blob index (diagnosis)", 0, total);
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		fsck_tick(f, "blob index (diagnosis)", &done, total);
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
		fsck_blob_name(k.mv_data, hex);
		fsck_say(f, K_BLOBREF, "blob %s: blob_inodes lists inode %llu, which %s (repair: entry removed)", hex,
		    (unsigned long long)ino, grc ? "does not exist" : "does not refer to it");
		rc = push_bref(&f->stale, k.mv_data, ino);
	}
	MDB_cursor *ci = NULL;
	if (!rc && mrc == MDB_NOTFOUND)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_inodes, &ci));
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(ci, &k, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(ci, &k, &v, MDB_NEXT)) {
		fsck_tick(f, "blob index (diagnosis)", &done, total);
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
		struct fprec r; /* or in its row */
		MDB_val fv;
		if (mdb_get(f->txn, f->sh.db_fp, &bk, &fv) == 0 && !fprec_decode(fv.mv_data, fv.mv_size, &r) &&
		    r.ino == get_be64(k.mv_data))
			continue;
		fsck_blob_name(key, hex);
		fsck_say(f, K_BLOBREF, "inode %llu refers to blob %s, but blob_inodes does not list it (repair: entry added)",
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
	if (!rc && mrc == MDB_NOTFOUND)
		rc = row_inodes_each(f, row_stale);
	if (!rc && !f->stale.n && !f->missing.n && !f->bad_inodes)
		fsck_say(f, K_BLOBREF, "blob_inodes and the inodes disagree, but no single entry could be named (cannot be repaired)");
	if (f->stale.n)
		qsort(f->stale.v, f->stale.n, sizeof(struct bref), bref_cmp);
	if (f->missing.n)
		qsort(f->missing.v, f->missing.n, sizeof(struct bref), bref_cmp);
	if (f->stale.n || f->missing.n)
		f->fix_any = true;
	fsck_prog(f, "blob index (diagnosis)", done, done);
	return rc;
}

int fsck_pass_blob_index(struct fsck *f)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_blob_inodes, &c));
	if (rc)
		return rc;
	MDB_val k, v;
	uint64_t total = entries(f, f->sh.db_blob_inodes), done = 0;
	int mrc;
	fsck_prog(f, "blob index", 0, total);
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		fsck_tick(f, "blob index", &done, total);
		if (k.mv_size != BLOBKEY_BYTES || v.mv_size != 8) {
			fsck_say(f, K_BLOBREF, "blob_inodes: a malformed entry (repair: removed)");
			rc = fsck_add_raw(f, NF_RAW_BLOBREF, &k, &v);
			continue;
		}
		fsck_blob_fact(&f->s_bi, k.mv_data, get_be64(v.mv_data));
		f->n_bi++;
	}
	mdb_cursor_close(c);
	if (!rc && mrc != MDB_NOTFOUND)
		rc = pd_mdb_err(mrc);
	if (!rc) /* the inodes the rows hold (format 7; none before) */
		rc = fsck_fp_rows_each(f, row_fact_and_tally, NULL);
	fsck_prog(f, "blob index", done, done);
	if (!rc && (!fsck_sums_equal(f->s_bi, f->s_iblob) || f->n_bi != f->n_iblob))
		rc = diagnose_blobrefs(f);
	return rc;
}
