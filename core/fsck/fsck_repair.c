/* fsck_repair.c - fsck's repair steps of the namespace (see fsck.c for
 * the whole design and for their order, in repair()). Names: dirents and
 * link records fixed, names that cannot stay moved to lost+found (and
 * the round trip of the names inode rows hold). Then nameless inodes to
 * lost+found, the directory tree (extra names, directories cut off from
 * the root), link counts and orphan marks; and after the commit, the
 * removal of files no record refers to. The blobs' repairs are in
 * fsck_repair_blobs.c. */
#include "fsck_int.h"
#include "near/near.h"

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
	if (fsck_dirent_lookup(c, parent, name, len, &got, &type) == 0 && (!child || got == child))
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
	rc = fsck_dirent_lookup(c, parent, name, len, child, type);
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

/* ---- repair: names held in inode rows (ns.h) ----------------------------- */

static bool holds_name(struct fsck *f, const struct inode *in)
{
	(void)f;
	return in->name_parent != 0;
}

/* An inode of one name whose row does not hold it yet. */
static bool may_take_name(struct fsck *f, const struct inode *in)
{
	return !in->name_parent && ns_may_hold_name(&f->sh, in) && (S_ISDIR(in->mode) || in->nlink == 1);
}

/* The inodes `want` picks, collected first: their rows change below. */
static int inodes_where(struct fsck *f, bool (*want)(struct fsck *f, const struct inode *in), struct vec *out)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_inodes, &c));
	if (rc)
		return rc;
	MDB_val k, v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct inode in;
		if (k.mv_size != 8 || inode_decode(v.mv_data, v.mv_size, &in, NULL, NULL))
			continue;
		in.ino = get_be64(k.mv_data);
		if (!want(f, &in))
			continue;
		uint64_t *p = fsck_vec_push(out);
		if (!p)
			rc = -ENOMEM;
		else
			*p = in.ino;
	}
	mdb_cursor_close(c);
	return rc ? rc : mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
}

static int r_link(struct fsck *f, bool add, uint64_t ino, uint64_t parent, const char *name, size_t len);

/* The name inode row `in` holds, remembered before the round trip: the
 * names that come back into their rows unchanged were not repaired. */
static int remember_held(struct fsck *f, const struct inode *in)
{
	uint64_t *p = fsck_vec_push(&f->names_held);
	if (!p)
		return -ENOMEM;
	p[0] = in->ino, p[1] = in->name_parent, p[2] = in->name_hash;
	return 0;
}

/* Did row `in` hold this very name before the round trip? (names_held
 * ascends by inode: inodes_where walks the rows in key order.) */
static bool held_before(const struct fsck *f, const struct inode *in)
{
	size_t lo = 0, hi = f->names_held.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const uint64_t *p = (const uint64_t *)f->names_held.v + 3 * mid;
		if (p[0] == in->ino)
			return p[1] == in->name_parent && p[2] == in->name_hash;
		if (p[0] < in->ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* Before the name repairs, which work on link records: every name an
 * inode row holds becomes one. A name whose dirent is not found stays in
 * the row for the first call (the dirent may be misfiled under another
 * hash, which the name repairs refile), and is dropped by the second, after
 * them: the inode is then nameless (lost+found) or keeps its other names. */
int fsck_repair_names_to_links(struct fsck *f, bool last)
{
	struct vec inos = VEC(uint64_t);
	int rc = inodes_where(f, holds_name, &inos);
	for (size_t i = 0; i < inos.n && !rc; i++) {
		struct inode in;
		char name[PD_NAME_MAX];
		size_t len;
		if ((rc = ns_get_inode(f->txn, &f->sh, AT(inos, uint64_t, i), &in)))
			break;
		if (!last && (rc = remember_held(f, &in)))
			break;
		int nrc = ns_dirent_name(f->txn, &f->sh, in.name_parent, in.name_hash, in.ino, name, &len);
		if (nrc == 0)
			rc = r_link(f, true, in.ino, in.name_parent, name, len);
		else if (nrc != -ENOENT)
			rc = nrc;
		else if (!last)
			continue;
		in.name_parent = in.name_hash = 0;
		if (!rc)
			rc = ns_put_inode(f->txn, &f->sh, &in);
	}
	fsck_vec_free(&inos);
	return rc;
}

/* After them: every inode of one name takes it back into its row (also
 * converting the link records of a store of an earlier format). */
int fsck_repair_names_to_rows(struct fsck *f)
{
	struct vec inos = VEC(uint64_t);
	uint64_t moved = 0;
	int rc = inodes_where(f, may_take_name, &inos);
	for (size_t i = 0; i < inos.n && !rc; i++) {
		struct inode in;
		if ((rc = ns_get_inode(f->txn, &f->sh, AT(inos, uint64_t, i), &in)))
			break;
		if ((rc = ns_name_from_links(f->txn, &f->sh, &in)) == 1) {
			moved += !held_before(f, &in); /* else only its round trip */
			rc = ns_put_inode(f->txn, &f->sh, &in);
		}
	}
	if (!rc && moved)
		fsck_say(f, K_REPAIR, "repaired: %llu inodes hold their one name in their row, not in a link record",
		    (unsigned long long)moved);
	fsck_vec_free(&inos);
	return rc;
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
		fsck_say(f, K_REPAIR, "repaired: made /%s (inode %llu), mode 0700", name, (unsigned long long)d.ino);
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
			fsck_say(f, K_REPAIR, "repaired: inode %llu is now /%s/%.*s", (unsigned long long)ino, FSCK_LOST_FOUND,
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
		struct linkname *l = fsck_vec_push(out);
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
	if ((a->n && fsck_arena_add(a, "\n", 1) == SIZE_MAX) || fsck_arena_add(a, path, len) == SIZE_MAX)
		return -ENOMEM;
	return 0;
}

/* Move every name of ino into lost+found (give it one if it has none).
 * lost: its bytes are gone; it no longer refers to a blob, and the xattrs
 * of fsck.h say what it held. The caller fixes blob_inodes and the record. */
int fsck_lf_adopt(struct fsck *f, uint64_t ino, const uint8_t *lost)
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
	fsck_vec_free(&links);
	fsck_vec_free(&paths);
	return rc;
}

int fsck_repair_names(struct fsck *f)
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
				fsck_vec_free(&ls);
				break;
			}
			if (S_ISDIR(in.mode) && ls.n) {
				rc = r_dirent_del(f, x->parent, name, len, x->child);
				fsck_say(f, K_REPAIR, "repaired: removed '%.*s' in %llu, a second name of directory %llu",
				    (int)len, name, (unsigned long long)x->parent, (unsigned long long)x->child);
			} else {
				rc = r_link(f, true, x->child, x->parent, name, len);
			}
			fsck_vec_free(&ls);
			break;
		}
		case NF_ADD_DIRENT: {
			struct inode p;
			bool parent_ok = ns_get_inode(f->txn, &f->sh, x->parent, &p) == 0 && S_ISDIR(p.mode) &&
					 p.nlink > 0 && fsck_name_valid(name, len);
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
		fsck_say(f, K_REPAIR, "repaired: %zu dirents, link records and malformed entries fixed", f->nfix.n);
	return rc;
}

/* ---- repair: nameless inodes, the tree, link counts ----------------------- */

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
	uint64_t *p = fsck_vec_push(ctx);
	if (!p)
		return -ENOMEM;
	*p = in->ino;
	return 0;
}

int fsck_repair_nameless(struct fsck *f)
{
	struct vec v = VEC(uint64_t);
	int rc = scan_names(f, find_nameless, &v);
	for (size_t i = 0; i < v.n && !rc; i++)
		rc = fsck_lf_adopt(f, AT(v, uint64_t, i), NULL);
	fsck_vec_free(&v);
	return rc;
}

static int collect_dirs(struct fsck *f, const struct inode *in, uint64_t names, uint64_t parent, bool orphan,
			void *ctx)
{
	(void)f;
	if (!S_ISDIR(in->mode))
		return 0;
	struct dnode *d = fsck_vec_push(ctx);
	if (!d)
		return -ENOMEM;
	*d = (struct dnode){ in->ino, parent, in->nlink, (uint32_t)names, 0, 0, orphan };
	return 0;
}

static void adopt_top(void *ctx, struct dnode *top, bool cycle)
{
	(void)cycle;
	struct vec *tops = ctx;
	uint64_t *p = fsck_vec_push(tops);
	if (p)
		*p = top->ino;
}

int fsck_repair_tree(struct fsck *f)
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
				fsck_say(f, K_REPAIR, "repaired: removed '%.*s' in %llu, an extra name of directory %llu",
				    (int)l->len, l->name, (unsigned long long)l->parent, (unsigned long long)d->ino);
			}
			changed = true;
		}
		if (rc || changed)
			continue;
		uint64_t cut_off;
		if ((rc = fsck_tree_walk(&dirs, adopt_top, &tops, &cut_off)) || !tops.n)
			break;
		for (size_t i = 0; i < tops.n && !rc; i++)
			rc = fsck_lf_adopt(f, AT(tops, uint64_t, i), NULL);
	}
	fsck_vec_free(&dirs);
	fsck_vec_free(&tops);
	fsck_vec_free(&links);
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
	struct ncount *c = fsck_vec_push(ctx);
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
int fsck_repair_counts(struct fsck *f)
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
			fsck_say(f, K_LEFT, "inode %llu still has no name: nlink left at %u", (unsigned long long)c[i].ino,
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
			fsck_say(f, K_REPAIR, "repaired: nlink of %s %llu set from %u to %llu", fsck_type_name(c[i].mode),
			    (unsigned long long)c[i].ino, c[i].nlink, (unsigned long long)want);
		}
		if ((want == 0) != c[i].orphan) {
			uint8_t kb[8];
			put_be64(kb, c[i].ino);
			MDB_val k = { 8, kb }, e = { 0, NULL };
			rc = pd_mdb_err(want == 0 ? mdb_put(f->txn, f->sh.db_orphans, &k, &e, 0)
						  : mdb_del(f->txn, f->sh.db_orphans, &k, NULL));
			if (!rc)
				fsck_say(f, K_REPAIR, "repaired: orphan mark of inode %llu %s", (unsigned long long)c[i].ino,
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
			fsck_say(f, K_REPAIR, "repaired: removed the orphan mark of a missing inode");
		}
		mdb_cursor_close(co);
	}
	fsck_vec_free(&v);
	return rc;
}

/* Is rel a blob file that a record or an inode refers to? (The last check
 * before a file in objects/ is removed: no page may lose its bytes.) */
static bool blob_in_use(struct fsck *f, MDB_txn *txn, const char *rel)
{
	const char *base = strrchr(rel, '/');
	struct blobkey k;
	if (strncmp(rel, "objects/", 8) || !base || !blobkey_parse(base + 1, &k))
		return false;
	uint8_t key[BLOBKEY_BYTES];
	blobkey_encode(&k, key);
	MDB_val kk = { BLOBKEY_BYTES, key }, v;
	return f->bad_inodes || mdb_get(txn, f->sh.db_fp, &kk, &v) == 0 ||
	       mdb_get(txn, f->sh.db_blob_inodes, &kk, &v) == 0;
}

void fsck_remove_files(struct fsck *f)
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
			fsck_say(f, K_LEFT, "%s: left in place (a record or an inode refers to its name)", rel);
		else if (unlinkat(f->sh.dirfd, rel, 0) == 0 || errno == ENOENT)
			n++;
		else
			fsck_say(f, K_LEFT, "cannot remove %s: %s", rel, strerror(errno));
	}
	mdb_txn_abort(txn);
	if (n)
		fsck_say(f, K_REPAIR, "repaired: removed %llu file%s that no record refers to", (unsigned long long)n,
		    n == 1 ? "" : "s");
}
