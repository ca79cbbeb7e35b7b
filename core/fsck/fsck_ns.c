/* fsck_ns.c - fsck's namespace passes (see fsck.c for the whole design).
 * Pass 1 reads inodes, links and orphans side by side (names per inode,
 * link counts, orphan marks, the parent of each directory, the blob key
 * inside each inode); the directory tree is then walked from the root to
 * find cycles and directories cut off from it; pass 2 reads dirents and
 * compares the multiset sum of their names with that of the link records,
 * and only when the two differ does fsck_diagnose_names() look each name up on
 * the other side. The (child, type, parent, name) and (blob, ino) facts and
 * their 128-bit sums are here too. */
#include "fsck_int.h"

/* ---- facts and their sums --------------------------------------------- */

static void sum_add(XXH128_hash_t *s, const void *buf, size_t len)
{
	XXH128_hash_t h = XXH3_128bits(buf, len);
	s->low64 += h.low64;
	s->high64 += h.high64;
}

/* The fact "the name of hash `hash` (dirent_hash) in parent is inode child
 * of type type". By the hash rather than the name, since an inode row that
 * holds its one name (ns.h) holds only its hash; a name filed under another
 * hash is found by the dirent pass itself. */
static void name_fact(XXH128_hash_t *s, uint64_t child, uint32_t type, uint64_t parent, uint64_t hash)
{
	uint8_t b[25];
	put_be64(b, child);
	put_be64(b + 8, parent);
	b[16] = (uint8_t)(type >> 12);
	put_be64(b + 17, hash);
	sum_add(s, b, sizeof b);
}

/* The fact "inode ino is on blob key". */
void fsck_blob_fact(XXH128_hash_t *s, const uint8_t key[BLOBKEY_BYTES], uint64_t ino)
{
	uint8_t b[BLOBKEY_BYTES + 8];
	memcpy(b, key, BLOBKEY_BYTES);
	put_be64(b + BLOBKEY_BYTES, ino);
	sum_add(s, b, sizeof b);
}

bool fsck_sums_equal(XXH128_hash_t a, XXH128_hash_t b)
{
	return a.low64 == b.low64 && a.high64 == b.high64;
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
		fsck_say(f, K_LINK, "links: a malformed record (repair: removed)");
		return fsck_add_raw(f, NF_RAW_LINK, k, v);
	}
	uint64_t ino = get_be64(k->mv_data), parent = get_be64(v->mv_data);
	const char *name = (const char *)v->mv_data + 8;
	int len = (int)(v->mv_size - 8);
	fsck_say(f, K_LINK, "link record '%.*s' in %llu names inode %llu, which does not exist (repair: removed)",
	    len, name, (unsigned long long)parent, (unsigned long long)ino);
	return fsck_add_nfix(f, NF_STRAY_LINK, parent, ino, 0, 0, name, (size_t)len, NULL, 0);
}

/* An inode with no name: an orphan, or damage. */
static void check_unnamed(struct fsck *f, uint64_t ino, uint32_t mode, uint32_t nlink, bool orphan)
{
	if (nlink > 0) {
		fsck_say(f, K_NAME, "%s %llu has no name (nlink %u) and is not an orphan (repair: put in /%s)",
		    S_ISDIR(mode) ? "directory" : "inode", (unsigned long long)ino, nlink, FSCK_LOST_FOUND);
		f->fix_any = true;
	} else if (!orphan) {
		fsck_say(f, K_ORPHAN, "inode %llu: nlink 0 and no name, but no orphan mark (repair: marked; deleted at the next open)",
		    (unsigned long long)ino);
		f->fix_any = true;
	} else if (f->clean) {
		fsck_say(f, K_ORPHAN, "inode %llu: an orphan (unlinked while open) left in a cleanly closed store (repair: deleted)",
		    (unsigned long long)ino);
		f->fix_any = true;
	}
}

static int check_inode(struct fsck *f, const struct inode *in, uint64_t names, uint64_t parent, bool orphan)
{
	uint64_t ino = in->ino;
	if (orphan && names > 0) {
		fsck_say(f, K_ORPHAN, "inode %llu has a name but an orphan mark (repair: mark removed)",
		    (unsigned long long)ino);
		f->fix_any = true;
	}
	if (S_ISDIR(in->mode)) {
		struct dnode *d = fsck_vec_push(&f->dirs);
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
			fsck_blob_fact(&f->s_iblob, key, ino);
			f->n_iblob++;
		} else if (in->size) {
			fsck_say(f, K_BLOBREF, "inode %llu: size %llu but no blob: its bytes are lost (repair: put in /%s, empty)",
			    (unsigned long long)ino, (unsigned long long)in->size, FSCK_LOST_FOUND);
			f->fix_any = true;
		}
	}
	if (names == 0)
		check_unnamed(f, ino, in->mode, in->nlink, orphan);
	else if (names != in->nlink) {
		fsck_say(f, K_NLINK, "inode %llu: nlink %u but %llu names (repair: recounted)", (unsigned long long)ino,
		    in->nlink, (unsigned long long)names);
		f->fix_any = true;
	}
	return 0;
}

/* The name an inode's row holds (ns.h), beside its link records (names of
 * them so far); or, with none, whether its one link record could move into
 * the row (a store of an earlier format, or a file back at one name). */
static int name_in_row(struct fsck *f, const struct inode *in, uint32_t type, uint64_t *names,
		       uint64_t *parent)
{
	if (!in->name_parent) {
		if (*names == 1 && ns_may_hold_name(&f->sh, in) && (S_ISDIR(in->mode) || in->nlink == 1))
			f->names_to_rows++;
		return 0;
	}
	if (*names) {
		fsck_say(f, K_LINK, "inode %llu: its row holds a name and it has %llu link records too (repair: all kept as link records, then recounted)",
		    (unsigned long long)in->ino, (unsigned long long)*names);
		f->fix_any = true;
	}
	if (!(*names)++)
		*parent = in->name_parent;
	name_fact(&f->s_link, in->ino, type, in->name_parent, in->name_hash);
	f->n_link++;
	return 0;
}

int fsck_pass_inodes(struct fsck *f)
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
	fsck_prog(f, "inodes", 0, total);
	for (irc = mdb_cursor_get(ci, &ik, &iv, MDB_FIRST); irc == 0 && !rc;
	     irc = mdb_cursor_get(ci, &ik, &iv, MDB_NEXT)) {
		fsck_tick(f, "inodes", &done, total);
		if (ik.mv_size != 8) {
			fsck_say(f, K_INODE, "inodes: a key of %zu bytes is not an inode number (cannot be repaired)",
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
				fsck_say(f, K_LINK, "inode %llu: a malformed link record (repair: removed)",
				    (unsigned long long)ino);
				rc = fsck_add_raw(f, NF_RAW_LINK, &lk, &lv);
				continue;
			}
			uint64_t p = get_be64(lv.mv_data);
			if (!names++)
				parent = p;
			name_fact(&f->s_link, ino, type, p, dirent_hash((const char *)lv.mv_data + 8, lv.mv_size - 8));
			f->n_link++;
		}
		if (decoded && !rc)
			rc = name_in_row(f, &in, type, &names, &parent);
		while (orc == 0 && (ok.mv_size != 8 || get_be64(ok.mv_data) < ino)) {
			fsck_say(f, K_ORPHAN, "orphan mark for inode %llu, which does not exist (repair: removed)",
			    ok.mv_size == 8 ? (unsigned long long)get_be64(ok.mv_data) : 0ull);
			f->fix_any = true;
			orc = mdb_cursor_get(co, &ok, &ov, MDB_NEXT);
		}
		bool orphan = orc == 0 && ok.mv_size == 8 && get_be64(ok.mv_data) == ino;
		if (orphan)
			orc = mdb_cursor_get(co, &ok, &ov, MDB_NEXT);
		f->res->inodes++;
		if (!decoded) {
			fsck_say(f, K_INODE, "inode %llu: undecodable record (cannot be repaired)", (unsigned long long)ino);
			f->bad_inodes++;
			continue;
		}
		if (ino == PD_ROOT_INO) {
			have_root = S_ISDIR(in.mode);
			if (!have_root)
				fsck_say(f, K_TREE, "inode 1, the root, is a %s, not a directory (cannot be repaired)",
				    fsck_type_name(in.mode));
		}
		rc = check_inode(f, &in, names, parent, orphan);
	}
	for (; lrc == 0 && !rc; lrc = mdb_cursor_get(cl, &lk, &lv, MDB_NEXT))
		rc = stray_link(f, &lk, &lv);
	for (; orc == 0; orc = mdb_cursor_get(co, &ok, &ov, MDB_NEXT)) {
		fsck_say(f, K_ORPHAN, "orphan mark for inode %llu, which does not exist (repair: removed)",
		    ok.mv_size == 8 ? (unsigned long long)get_be64(ok.mv_data) : 0ull);
		f->fix_any = true;
	}
	if (!rc && irc != MDB_NOTFOUND)
		rc = pd_mdb_err(irc);
	if (!rc && !have_root && !dir_find(f, PD_ROOT_INO))
		fsck_say(f, K_TREE, "the root directory (inode 1) is missing (cannot be repaired)");
	if (!rc && f->names_to_rows) {
		/* an earlier form is no damage: a note, and repair converts it */
		fsck_say(f, K_NOTE, "note: %llu inodes of one name keep it in a link record, this pagededup keeps it in the inode's row (--repair moves them)",
		    (unsigned long long)f->names_to_rows);
		f->fix_names = f->fix_any = true;
	}
	fsck_prog(f, "inodes", done, done);
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
int fsck_tree_walk(struct vec *dirs, void (*fn)(void *ctx, struct dnode *top, bool cycle), void *ctx,
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
			size_t *p = fsck_vec_push(&path);
			if (!p) {
				fsck_vec_free(&path);
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
	fsck_vec_free(&path);
	return 0;
}

static void report_top(void *ctx, struct dnode *top, bool cycle)
{
	struct fsck *f = ctx;
	if (cycle)
		fsck_say(f, K_TREE, "directory %llu is in a cycle of directories, not connected to the root (repair: moved to /%s)",
		    (unsigned long long)top->ino, FSCK_LOST_FOUND);
	else
		fsck_say(f, K_TREE, "directory %llu is not connected to the root: its parent %llu is not a live directory (repair: moved to /%s)",
		    (unsigned long long)top->ino, (unsigned long long)top->parent, FSCK_LOST_FOUND);
	f->fix_any = true;
}

int fsck_check_dirs(struct fsck *f)
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
			fsck_say(f, K_TREE, "the root directory has %u names (repair: removed)", d[i].names);
			f->fix_any = true;
		} else if (!root && d[i].names > 1) {
			fsck_say(f, K_TREE, "directory %llu has %u names (repair: keeps the first)", ino, d[i].names);
			f->fix_any = true;
		}
		if (!root && !d[i].names) {
			check_unnamed(f, ino, S_IFDIR, d[i].nlink, d[i].orphan);
			continue;
		}
		uint64_t want = 2 + (uint64_t)d[i].subdirs;
		if (d[i].nlink != want) {
			fsck_say(f, K_NLINK, "directory %llu: nlink %u, should be %llu (2 + %u subdirectories) (repair: recounted)",
			    ino, d[i].nlink, (unsigned long long)want, d[i].subdirs);
			f->fix_any = true;
		}
	}
	uint64_t cut_off;
	int rc = fsck_tree_walk(&f->dirs, report_top, f, &cut_off);
	if (!rc && cut_off)
		fsck_say(f, K_TREE, "%llu directories in all are not connected to the root",
		    (unsigned long long)cut_off);
	return rc;
}

/* ---- pass 2: dirents against links -------------------------------------- */

int fsck_pass_dirents(struct fsck *f)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_dirents, &c));
	if (rc)
		return rc;
	MDB_val k, v;
	uint64_t total = entries(f, f->sh.db_dirents), done = 0, last_parent = 0;
	bool parent_ok = false, have_parent = false;
	int mrc;
	fsck_prog(f, "names", 0, total);
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		fsck_tick(f, "names", &done, total);
		const char *name;
		size_t len;
		uint64_t child;
		uint32_t type;
		if (k.mv_size != 16 || dirent_val_decode(v.mv_data, v.mv_size, &name, &len, &child, &type)) {
			fsck_say(f, K_NAME, "dirents: an undecodable entry in directory %llu (repair: removed)",
			    k.mv_size >= 8 ? (unsigned long long)get_be64(k.mv_data) : 0ull);
			rc = fsck_add_raw(f, NF_RAW_DIRENT, &k, &v);
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
			fsck_say(f, K_NAME, "dirent '%.*s' in %llu: %llu is not a directory (repair: inode %llu moved to /%s)",
			    (int)len, name, (unsigned long long)parent, (unsigned long long)parent,
			    (unsigned long long)child, FSCK_LOST_FOUND);
			rc = fsck_add_nfix(f, NF_BAD_PARENT, parent, child, hash, type, name, len, NULL, 0);
		} else if (!fsck_name_valid(name, len)) {
			fsck_say(f, K_NAME, "dirent '%.*s' in %llu: not a valid name (repair: inode %llu moved to /%s)",
			    (int)len, name, (unsigned long long)parent, (unsigned long long)child, FSCK_LOST_FOUND);
			rc = fsck_add_nfix(f, NF_BAD_NAME, parent, child, hash, type, name, len, NULL, 0);
		} else if (dirent_hash(name, len) != hash) {
			fsck_say(f, K_NAME, "dirent '%.*s' in %llu: filed under the wrong hash (repair: refiled)", (int)len,
			    name, (unsigned long long)parent);
			rc = fsck_add_nfix(f, NF_REHASH, parent, child, hash, type, name, len, NULL, 0);
		}
		name_fact(&f->s_dirent, child, type, parent, dirent_hash(name, len));
		f->n_dirent++;
	}
	mdb_cursor_close(c);
	if (!rc && mrc != MDB_NOTFOUND)
		rc = pd_mdb_err(mrc);
	fsck_prog(f, "names", done, done);
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
int fsck_dirent_lookup(MDB_cursor *c, uint64_t parent, const char *name, size_t len, uint64_t *child,
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

/* The names inode rows hold whose dirent is gone. */
static int diagnose_names_in_rows(struct fsck *f, uint64_t *found, uint64_t *done, uint64_t total)
{
	MDB_cursor *ci;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_inodes, &ci));
	if (rc)
		return rc;
	MDB_val k, v;
	int mrc;
	for (mrc = mdb_cursor_get(ci, &k, &v, MDB_FIRST); mrc == 0 && !rc; mrc = mdb_cursor_get(ci, &k, &v, MDB_NEXT)) {
		struct inode in;
		char name[PD_NAME_MAX];
		size_t len;
		if (k.mv_size != 8 || inode_decode(v.mv_data, v.mv_size, &in, NULL, NULL) || !in.name_parent)
			continue;
		fsck_tick(f, "names (diagnosis)", done, total);
		in.ino = get_be64(k.mv_data);
		int nrc = ns_dirent_name(f->txn, &f->sh, in.name_parent, in.name_hash, in.ino, name, &len);
		if (nrc == -ENOENT) {
			fsck_say(f, K_LINK, "inode %llu: its row names a dirent in %llu that is not there (repair: the name is lost; the inode goes to /%s unless it has another)",
			    (unsigned long long)in.ino, (unsigned long long)in.name_parent, FSCK_LOST_FOUND);
			f->fix_any = true;
			++*found;
		} else if (nrc) {
			rc = nrc;
		}
	}
	mdb_cursor_close(ci);
	return rc ? rc : mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
}

/* The sums differ: find the names that differ, one lookup per fact. */
int fsck_diagnose_names(struct fsck *f)
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
	fsck_prog(f, "names (diagnosis)", 0, total);
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(cd, &k, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(cd, &k, &v, MDB_NEXT)) {
		fsck_tick(f, "names (diagnosis)", &done, total);
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
			fsck_say(f, K_NAME, "dirent '%.*s' in %llu: inode %llu does not exist (repair: removed)", (int)len,
			    name, (unsigned long long)parent, (unsigned long long)child);
			rc = fsck_add_nfix(f, NF_DANGLING, parent, child, hash, type, name, len, NULL, 0);
			found++;
			continue;
		}
		if (grc == 0 && (ci.mode & S_IFMT) != type) {
			fsck_say(f, K_NAME, "dirent '%.*s' in %llu says %s, but inode %llu is a %s (repair: rewritten)",
			    (int)len, name, (unsigned long long)parent, fsck_type_name(type), (unsigned long long)child,
			    fsck_type_name(ci.mode));
			rc = fsck_add_nfix(f, NF_TYPE, parent, child, hash, type, name, len, NULL, 0);
			found++;
		}
		bool in_row = grc == 0 && ci.name_parent == parent && ci.name_hash == dirent_hash(name, len);
		if (!rc && !in_row && !link_exists(cl, child, parent, name, len)) {
			fsck_say(f, K_LINK, "dirent '%.*s' in %llu (inode %llu) has no link record (repair: added)", (int)len,
			    name, (unsigned long long)parent, (unsigned long long)child);
			rc = fsck_add_nfix(f, NF_ADD_LINK, parent, child, hash, type, name, len, NULL, 0);
			found++;
		}
	}
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(cl, &k, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(cl, &k, &v, MDB_NEXT)) {
		fsck_tick(f, "names (diagnosis)", &done, total);
		if (k.mv_size != 8 || v.mv_size < 9 || v.mv_size > LINK_VAL_MAX)
			continue;
		uint64_t ino = get_be64(k.mv_data), parent = get_be64(v.mv_data), child;
		const char *name = (const char *)v.mv_data + 8;
		size_t len = v.mv_size - 8;
		uint32_t type;
		struct inode in;
		if (ns_get_inode(f->txn, &f->sh, ino, &in) == -ENOENT)
			continue; /* a stray link: reported by the inode pass */
		if (in.name_parent) {
			found++; /* a name in its row and link records: reported by the inode pass */
			continue;
		}
		if (fsck_dirent_lookup(cd2, parent, name, len, &child, &type)) {
			fsck_say(f, K_LINK, "inode %llu: link record '%.*s' in %llu has no dirent (repair: dirent restored)",
			    (unsigned long long)ino, (int)len, name, (unsigned long long)parent);
			rc = fsck_add_nfix(f, NF_ADD_DIRENT, parent, ino, 0, 0, name, len, NULL, 0);
			found++;
		} else if (child != ino) {
			fsck_say(f, K_LINK, "inode %llu: link record '%.*s' in %llu, but that name is inode %llu (repair: link record removed)",
			    (unsigned long long)ino, (int)len, name, (unsigned long long)parent,
			    (unsigned long long)child);
			rc = fsck_add_nfix(f, NF_LINK_MISMATCH, parent, ino, 0, 0, name, len, NULL, 0);
			found++;
		}
	}
	if (!rc && mrc != MDB_NOTFOUND)
		rc = pd_mdb_err(mrc);
	if (!rc)
		rc = diagnose_names_in_rows(f, &found, &done, total);
	if (!rc && !found && !f->bad_inodes)
		fsck_say(f, K_NAME, "dirents and links disagree, but no single entry could be named (cannot be repaired)");
	fsck_prog(f, "names (diagnosis)", done, done);
	if (cd)
		mdb_cursor_close(cd);
	if (cl)
		mdb_cursor_close(cl);
	if (cd2)
		mdb_cursor_close(cd2);
	return rc;
}
