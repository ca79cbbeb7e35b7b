/* ns_rows.c - the namespace's rows: the keys of dirents and links, an
 * inode's row, the dirents of a name, and the way back from an inode to
 * its names (in its own row for an inode of one name, else in `links`;
 * ns.h says when which). ns.c builds the operations on them; ns_int.h is
 * what the two share.
 */
#include "ns_int.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* ---- keys and small table helpers ------------------------------------ */

MDB_val ns_dirent_key(uint8_t kb[16], uint64_t parent, uint64_t hash)
{
	put_be64(kb, parent);
	put_be64(kb + 8, hash);
	return (MDB_val){ 16, kb };
}

int ns_check_name(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	return len > PD_NAME_MAX ? -ENAMETOOLONG : 0;
}

int ns_get_inode(MDB_txn *txn, struct store *st, uint64_t ino, struct inode *out)
{
	uint8_t kb[8];
	MDB_val k = store_ino_key(kb, ino), v;
	int rc = pd_mdb_err(mdb_get(txn, st->db_inodes, &k, &v));
	if (rc)
		return rc;
	out->ino = ino;
	return inode_decode(v.mv_data, v.mv_size, out, NULL, NULL);
}

int ns_put_inode_target(MDB_txn *txn, struct store *st, const struct inode *in, const char *target, size_t tlen)
{
	uint8_t kb[8], vb[INODE_FIXED_BYTES + PD_SYMLINK_MAX + 1];
	/* Layout 2 from format 4 on (a format 1 store kept by -o blob_files
	 * must stay readable by the release that made it). */
	size_t n = st->format >= PD_FORMAT_INODE_ROW2 ? inode_encode_row2(in, vb) : 0;
	if (!n && in->name_parent) {
		/* Layout 1 has no room for the name (fields too large for layout
		 * 2 with it): the name goes to `links`. */
		struct inode moved = *in;
		int rc = ns_name_to_links(txn, st, &moved);
		return rc ? rc : ns_put_inode_target(txn, st, &moved, target, tlen);
	}
	MDB_val k = store_ino_key(kb, in->ino), v = { n ? n : inode_encode(in, target, tlen, vb), vb };
	return pd_mdb_err(mdb_put(txn, st->db_inodes, &k, &v, 0));
}

int ns_put_inode(MDB_txn *txn, struct store *st, const struct inode *in)
{
	if (!S_ISLNK(in->mode))
		return ns_put_inode_target(txn, st, in, NULL, 0);
	/* Keep the symlink target stored after the fixed part. */
	uint8_t kb[8];
	char target[PD_SYMLINK_MAX + 1];
	MDB_val k = store_ino_key(kb, in->ino), v;
	int rc = pd_mdb_err(mdb_get(txn, st->db_inodes, &k, &v));
	if (rc)
		return rc;
	size_t tlen = v.mv_size - INODE_FIXED_BYTES;
	if (v.mv_size < INODE_FIXED_BYTES || tlen > PD_SYMLINK_MAX)
		return -EUCLEAN;
	memcpy(target, (char *)v.mv_data + INODE_FIXED_BYTES, tlen);
	return ns_put_inode_target(txn, st, in, target, tlen);
}

/* fn(ctx, value) for each dirent of (parent, hash), in the order stored:
 * 0 goes on, 1 stops with 0 (found), a negative value stops with it;
 * -ENOENT past the last. */
static int dirent_dups(MDB_txn *txn, struct store *st, uint64_t parent, uint64_t hash,
		       int (*fn)(void *ctx, const MDB_val *v), void *ctx)
{
	uint8_t kb[16];
	MDB_val k = ns_dirent_key(kb, parent, hash), v;
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_dirents, &c));
	if (rc)
		return rc;
	int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_KEY);
	while (mrc == 0 && !(rc = fn(ctx, &v)))
		mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP);
	mdb_cursor_close(c);
	if (mrc && mrc != MDB_NOTFOUND)
		return pd_mdb_err(mrc);
	return rc == 1 ? 0 : rc ? rc : -ENOENT;
}

struct name_match {
	const char *name;
	size_t len;
	struct ns_dirent_hit *hit;
};

static int match_name(void *ctx, const MDB_val *v)
{
	struct name_match *m = ctx;
	const char *n;
	size_t nlen;
	if (dirent_val_decode(v->mv_data, v->mv_size, &n, &nlen, &m->hit->child, &m->hit->type))
		return -EUCLEAN;
	return nlen == m->len && memcmp(n, m->name, m->len) == 0;
}

int ns_dirent_find(MDB_txn *txn, struct store *st, uint64_t parent, const char *name,
		   struct ns_dirent_hit *hit)
{
	struct name_match m = { name, strlen(name), hit };
	hit->hash = dirent_hash(name, m.len);
	return dirent_dups(txn, st, parent, hit->hash, match_name, &m);
}

/* The key and value of the dirent of (parent, name) for child of mode
 * (its type bits are what the value keeps). */
static void dirent_row(uint8_t kb[16], uint8_t vb[DIRENT_VAL_MAX], uint64_t parent, const char *name,
		       uint64_t child, uint32_t mode, MDB_val *k, MDB_val *v)
{
	size_t len = strlen(name);
	*k = ns_dirent_key(kb, parent, dirent_hash(name, len));
	*v = (MDB_val){ dirent_val_encode(name, len, child, mode, vb), vb };
}

int ns_dirent_put(MDB_txn *txn, struct store *st, uint64_t parent, const char *name, uint64_t child,
		  uint32_t mode)
{
	uint8_t kb[16], vb[DIRENT_VAL_MAX];
	MDB_val k, v;
	dirent_row(kb, vb, parent, name, child, mode, &k, &v);
	return pd_mdb_err(mdb_put(txn, st->db_dirents, &k, &v, MDB_NODUPDATA));
}

int ns_dirent_del(MDB_txn *txn, struct store *st, uint64_t parent, const char *name, uint64_t child,
		  uint32_t type)
{
	uint8_t kb[16], vb[DIRENT_VAL_MAX];
	MDB_val k, v;
	dirent_row(kb, vb, parent, name, child, type, &k, &v);
	return pd_mdb_err(mdb_del(txn, st->db_dirents, &k, &v));
}

static MDB_val link_val(uint8_t vb[LINK_VAL_MAX], uint64_t parent, const char *name)
{
	size_t len = strlen(name);
	put_be64(vb, parent);
	memcpy(vb + 8, name, len);
	return (MDB_val){ 8 + len, vb };
}

static int link_put(MDB_txn *txn, struct store *st, uint64_t ino, uint64_t parent, const char *name)
{
	uint8_t kb[8], vb[LINK_VAL_MAX];
	MDB_val k = store_ino_key(kb, ino), v = link_val(vb, parent, name);
	return pd_mdb_err(mdb_put(txn, st->db_links, &k, &v, MDB_NODUPDATA));
}

static int link_del(MDB_txn *txn, struct store *st, uint64_t ino, uint64_t parent, const char *name)
{
	uint8_t kb[8], vb[LINK_VAL_MAX];
	MDB_val k = store_ino_key(kb, ino), v = link_val(vb, parent, name);
	return pd_mdb_err(mdb_del(txn, st->db_links, &k, &v));
}

/* ---- names kept in inode rows (ns.h) ---------------------------------- */

bool ns_may_hold_name(const struct store *st, const struct inode *in)
{
	return st->format >= PD_FORMAT_NAME_IN_ROW && !S_ISLNK(in->mode) && in->ino != PD_ROOT_INO;
}

struct child_match {
	uint64_t ino;
	char *name;
	size_t *len;
};

static int match_child(void *ctx, const MDB_val *v)
{
	struct child_match *m = ctx;
	const char *n;
	uint64_t child;
	uint32_t type;
	if (dirent_val_decode(v->mv_data, v->mv_size, &n, m->len, &child, &type) || child != m->ino ||
	    *m->len > PD_NAME_MAX)
		return 0;
	memcpy(m->name, n, *m->len);
	return 1;
}

int ns_dirent_name(MDB_txn *txn, struct store *st, uint64_t parent, uint64_t hash, uint64_t ino,
		   char *name, size_t *len)
{
	struct child_match m = { ino, name, len };
	return dirent_dups(txn, st, parent, hash, match_child, &m);
}

int ns_names(MDB_txn *txn, struct store *st, const struct inode *in, ns_name_fn fn, void *ctx)
{
	char name[PD_NAME_MAX];
	size_t len;
	if (in->name_parent) {
		int rc = ns_dirent_name(txn, st, in->name_parent, in->name_hash, in->ino, name, &len);
		return rc ? (rc == -ENOENT ? -EUCLEAN : rc) : fn(ctx, in->name_parent, name, len);
	}
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_links, &c));
	if (rc)
		return rc;
	uint8_t kb[8];
	MDB_val k = store_ino_key(kb, in->ino), v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_KEY); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP)) {
		if (v.mv_size < 9 || v.mv_size > LINK_VAL_MAX) {
			rc = -EUCLEAN;
			break;
		}
		len = v.mv_size - 8;
		memcpy(name, (char *)v.mv_data + 8, len);
		rc = fn(ctx, get_be64(v.mv_data), name, len);
	}
	mdb_cursor_close(c);
	return rc ? rc : mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
}

int ns_name_to_links(MDB_txn *txn, struct store *st, struct inode *in)
{
	if (!in->name_parent)
		return 0;
	char name[PD_NAME_MAX + 1];
	size_t len;
	uint64_t parent = in->name_parent;
	int rc = ns_dirent_name(txn, st, parent, in->name_hash, in->ino, name, &len);
	in->name_parent = in->name_hash = 0;
	if (rc)
		return rc;
	name[len] = 0;
	return link_put(txn, st, in->ino, parent, name);
}

int ns_name_from_links(MDB_txn *txn, struct store *st, struct inode *in)
{
	if (in->name_parent || !ns_may_hold_name(st, in))
		return 0;
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_links, &c));
	if (rc)
		return rc;
	uint8_t kb[8];
	MDB_val k = store_ino_key(kb, in->ino), v;
	size_t count = 0;
	int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_KEY);
	if (mrc == 0)
		mrc = mdb_cursor_count(c, &count);
	if (mrc == 0 && count == 1 && v.mv_size >= 9 && v.mv_size <= LINK_VAL_MAX) {
		uint64_t parent = get_be64(v.mv_data), hash = dirent_hash((char *)v.mv_data + 8, v.mv_size - 8);
		if ((rc = pd_mdb_err(mdb_cursor_del(c, 0))) == 0) {
			in->name_parent = parent;
			in->name_hash = hash;
			rc = 1;
		}
	} else if (mrc && mrc != MDB_NOTFOUND) {
		rc = pd_mdb_err(mrc);
	}
	mdb_cursor_close(c);
	return rc;
}

/* The first name of an inode that has none yet (a new inode): in its row
 * when it may hold one, else in `links`. */
int ns_name_first(MDB_txn *txn, struct store *st, struct inode *in, uint64_t parent, const char *name)
{
	if (!ns_may_hold_name(st, in))
		return link_put(txn, st, in->ino, parent, name);
	in->name_parent = parent;
	in->name_hash = dirent_hash(name, strlen(name));
	return 0;
}

/* A second name for in: the first leaves its row for `links`. */
int ns_name_another(MDB_txn *txn, struct store *st, struct inode *in, uint64_t parent, const char *name)
{
	int rc = ns_name_to_links(txn, st, in);
	return rc ? rc : link_put(txn, st, in->ino, parent, name);
}

/* (parent, name) is no longer a name of in (its dirent is the caller's). */
int ns_name_drop(MDB_txn *txn, struct store *st, struct inode *in, uint64_t parent, const char *name)
{
	if (!in->name_parent)
		return link_del(txn, st, in->ino, parent, name);
	if (in->name_parent != parent || in->name_hash != dirent_hash(name, strlen(name)))
		return -EUCLEAN; /* a row that holds a name has no other */
	in->name_parent = in->name_hash = 0;
	return 0;
}

/* The name (parent, name) of in becomes (newparent, newname). */
int ns_name_move(MDB_txn *txn, struct store *st, struct inode *in, uint64_t parent, const char *name,
		 uint64_t newparent, const char *newname)
{
	int rc;
	if (!in->name_parent)
		return (rc = link_del(txn, st, in->ino, parent, name)) ? rc
								  : link_put(txn, st, in->ino, newparent, newname);
	if ((rc = ns_name_drop(txn, st, in, parent, name)))
		return rc;
	in->name_parent = newparent;
	in->name_hash = dirent_hash(newname, strlen(newname));
	return 0;
}

/* The parent of a directory (its one name); the root is its own parent. */
int ns_dir_parent(MDB_txn *txn, struct store *st, uint64_t dir, uint64_t *parent)
{
	if (dir == PD_ROOT_INO) {
		*parent = PD_ROOT_INO;
		return 0;
	}
	struct inode d;
	int rc = ns_get_inode(txn, st, dir, &d);
	if (rc)
		return rc;
	if (d.name_parent) {
		*parent = d.name_parent;
		return 0;
	}
	uint8_t kb[8];
	MDB_val k = store_ino_key(kb, dir), v;
	rc = pd_mdb_err(mdb_get(txn, st->db_links, &k, &v));
	if (rc == -ENOENT)
		return -ENOENT; /* removed directory */
	if (rc)
		return rc;
	if (v.mv_size < 8)
		return -EUCLEAN;
	*parent = get_be64(v.mv_data);
	return 0;
}

int ns_dir_is_empty(MDB_txn *txn, struct store *st, uint64_t dir)
{
	uint8_t kb[16];
	MDB_val k = ns_dirent_key(kb, dir, 0), v;
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_dirents, &c));
	if (rc)
		return rc;
	int mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
	rc = mrc == MDB_NOTFOUND ? 1 : mrc ? pd_mdb_err(mrc) : get_be64(k.mv_data) != dir;
	mdb_cursor_close(c);
	return rc;
}

int ns_orphan_mark(MDB_txn *txn, struct store *st, uint64_t ino, bool on)
{
	uint8_t kb[8];
	MDB_val k = store_ino_key(kb, ino), v = { 0, NULL };
	int rc = on ? mdb_put(txn, st->db_orphans, &k, &v, 0) : mdb_del(txn, st->db_orphans, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
}
