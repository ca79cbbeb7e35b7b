/* fsck_repair_blobs.c - fsck's repair steps of the blobs (see fsck.c
 * for the whole design and for their order, in repair()): blob_inodes
 * entries and the inodes fingerprint rows hold, refcounts, unreferenced
 * records, records rebuilt from their files or the packs, lost pages to
 * lost+found (fsck_lf_adopt, fsck_repair.c), damaged files moved to
 * damaged/. */
#include "fsck_int.h"
#include "near/near.h"

/* ---- repair: blobs -------------------------------------------------------- */

/* Blob key's fingerprint row no longer holds ino (if it did). */
static int row_ino_clear(struct fsck *f, const uint8_t *key, uint64_t ino)
{
	struct blobkey k;
	struct fprec r;
	blobkey_decode(key, &k);
	int rc = blob_get(f->txn, &f->sh, &k, &r);
	if (rc == -ENOENT || rc == -EUCLEAN || (!rc && r.ino != ino))
		return 0;
	r.ino = 0;
	return rc ? rc : blob_put(f->txn, &f->sh, &k, &r);
}

int fsck_repair_blob_index(struct fsck *f)
{
	int rc = 0;
	for (size_t i = 0; i < f->stale.n && !rc; i++) {
		struct bref *b = &AT(f->stale, struct bref, i);
		uint8_t vb[8];
		put_be64(vb, b->ino);
		MDB_val k = { BLOBKEY_BYTES, b->key }, v = { 8, vb };
		rc = mdb_del(f->txn, f->sh.db_blob_inodes, &k, &v);
		if (rc == MDB_NOTFOUND)
			rc = row_ino_clear(f, b->key, b->ino); /* held by the row (format 7) */
		else
			rc = pd_mdb_err(rc);
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
		fsck_say(f, K_REPAIR, "repaired: blob_inodes: %zu entries removed, %zu added", f->stale.n, f->missing.n);
	return rc;
}

static int push_ino(void *ctx, uint64_t ino)
{
	uint64_t *p = fsck_vec_push(ctx);
	if (!p)
		return -ENOMEM;
	*p = ino;
	return 0;
}

/* The inodes on blob key (its row and blob_inodes, as repaired). */
static int inodes_on(struct fsck *f, const uint8_t *key, struct vec *out)
{
	struct blobkey k;
	blobkey_decode(key, &k);
	out->n = 0;
	return store_blob_inodes(f->txn, &f->sh, &k, NULL, push_ino, out);
}

static int drop_record(struct fsck *f, const uint8_t *key)
{
	MDB_val k = { BLOBKEY_BYTES, (void *)key };
	int rc = mdb_del(f->txn, f->sh.db_blob_inodes, &k, NULL);
	if (rc == 0 || rc == MDB_NOTFOUND)
		rc = mdb_del(f->txn, f->sh.db_fp, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
}

/* Move a damaged blob file to damaged/, keeping its bytes. This happens
 * before the commit that drops its record: a crash in between leaves a
 * record without its file (the next fsck reports its pages as lost, as
 * they are), never a damaged file in objects/ that a repair would remove
 * as an orphan. */
int fsck_move_damaged(struct fsck *f, const uint8_t *key, struct moved *m)
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

/* The undecodable fingerprint row of x goes, before its record is made
 * again (a row already gone is no error). */
static int del_bad_record(struct fsck *f, const struct kfix *x)
{
	if (!x->bad_record)
		return 0;
	MDB_val kk = { BLOBKEY_BYTES, (void *)x->key };
	int d = mdb_del(f->txn, f->sh.db_fp, &kk, NULL);
	return d && d != MDB_NOTFOUND ? pd_mdb_err(d) : 0;
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
	struct near_sig sig;
	bool ok = fd >= 0 && fp_of_fd(fd, &fp) == 0 && memcmp(fp.md5, k.md5, 16) == 0 &&
		  near_sig_of_fd(fd, fp.size, &sig) == 0;
	if (fd >= 0)
		close(fd);
	const struct gfilter *g = fsck_geometry_filter(f);
	if (!ok || !g)
		return 1;
	struct fprec r = { .refcount = inos->n, .size = fp.size, .flags = FPREC_IN_FILTER };
	memcpy(r.xxh128, fp.xxh128, 16);
	return fsck_put_rebuilt(f, g, &k, &r, &sig, inos);
}

int fsck_repair_blobs(struct fsck *f, struct vec *moves)
{
	struct vec inos = VEC(uint64_t);
	int rc = 0;
	char hex[48];
	for (size_t i = 0; i < f->kfix.n && !rc; i++) {
		struct kfix *x = &AT(f->kfix, struct kfix, i);
		struct blobkey k;
		struct fprec r;
		blobkey_decode(x->key, &k);
		fsck_blob_name(x->key, hex);
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
			const struct gfilter *g = fsck_geometry_filter(f);
			if (g && !(rc = blob_get(f->txn, &f->sh, &k, &r))) {
				gf_positions(g, k.md5, &r.leaf, &r.pos);
				r.flags |= FPREC_IN_FILTER;
				rc = blob_put(f->txn, &f->sh, &k, &r);
			}
			break;
		}
		case KF_UNREFERENCED:
			if (inos.n)
				break; /* not so after all (cannot happen: blob_inodes was repaired first) */
			/* deltas hang on it: kept for them, as when its last
			 * reference goes (their pages would be lost with it) */
			if (blob_get(f->txn, &f->sh, &k, &r) == 0 &&
			    (rc = blob_delta_keep_unreferenced(f->txn, &f->sh, &k, &r)) != 0) {
				if (rc > 0 && !(rc = drop_record(f, x->key)))
					fsck_say(f, K_REPAIR, "repaired: blob %s, which no inode refers to, kept for the deltas on it", hex);
				break;
			}
			rc = drop_record(f, x->key);
			if (!rc && x->file) {
				char path[BLOBKEY_PATH_MAX];
				blobkey_path(&k, path);
				rc = fsck_add_rm_file(f, path);
			}
			if (!rc)
				fsck_say(f, K_REPAIR, "repaired: blob %s, which no inode refers to, removed", hex);
			break;
		case KF_RECREATE:
			if ((rc = del_bad_record(f, x)))
				break;
			rc = recreate_record(f, x, &inos);
			if (rc == 0) {
				fsck_say(f, K_REPAIR, "repaired: the record of blob %s rebuilt from its file (%zu inodes)", hex,
				    inos.n);
				break;
			}
			if (rc < 0)
				break;
			fsck_say(f, K_LEFT, "blob %s: its file does not hold the bytes of that MD5: damaged", hex);
			x->damaged = true;
			rc = 0;
			__attribute__((fallthrough)); /* its pages are lost */
		case KF_LOST:
			/* no record and no file: perhaps a pack holds the bytes */
			if (!x->file && (x->bad_record || blob_get(f->txn, &f->sh, &k, &r) == -ENOENT)) {
				if ((rc = del_bad_record(f, x)))
					break;
				if ((rc = fsck_recreate_from_packs(f, x->key, &inos)) == 0) {
					fsck_say(f, K_REPAIR, "repaired: the record of blob %s rebuilt from its pack record (%zu inodes)",
						 hex, inos.n);
					break;
				}
				if (rc < 0)
					break;
				rc = 0;
			}
			for (size_t j = 0; j < inos.n && !rc; j++)
				rc = fsck_lf_adopt(f, AT(inos, uint64_t, j), x->key);
			if (!rc)
				rc = drop_record(f, x->key);
			if (!rc && x->damaged) {
				uint8_t *p = fsck_vec_push(moves);
				if (!p)
					rc = -ENOMEM;
				else
					memcpy(p, x->key, BLOBKEY_BYTES);
			}
			if (!rc)
				fsck_say(f, K_REPAIR, "repaired: the %zu page%s on blob %s moved to /%s (empty, with %s)", inos.n,
				    inos.n == 1 ? "" : "s", hex, FSCK_LOST_FOUND, FSCK_XATTR_LOST_MD5);
			break;
		}
	}
	fsck_vec_free(&inos);
	return rc;
}
