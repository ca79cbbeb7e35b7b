/* xattr.c - extended attributes that clients set, stored as given in the
 * `xattrs` table: key ino (u64 BE) | name, value the bytes. Only the user.
 * namespace reaches here (fs/ refuses the others); the dedup attributes are
 * computed by query.c and never stored. Setting or removing one changes the
 * inode's ctime, as on ext4. */
#include "xattr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "ns.h"

static int xattr_key(uint8_t *kb, uint64_t ino, const char *name, MDB_val *k)
{
	size_t len = strlen(name);
	if (len == 0)
		return -EINVAL;
	if (len > PD_XATTR_NAME_MAX)
		return -ERANGE;
	put_be64(kb, ino);
	memcpy(kb + 8, name, len);
	*k = (MDB_val){ 8 + len, kb };
	return 0;
}

struct setxattr_arg {
	uint64_t ino;
	const char *name;
	const void *value;
	size_t size;
	int flags;
};

static int setxattr_cb(struct wtx *w, void *p)
{
	struct setxattr_arg *a = p;
	uint8_t kb[8 + PD_XATTR_NAME_MAX];
	MDB_val k, v;
	struct inode in;
	int rc = xattr_key(kb, a->ino, a->name, &k);
	if (rc || (rc = ns_get_inode(w->txn, w->st, a->ino, &in)))
		return rc;
	rc = pd_mdb_err(mdb_get(w->txn, w->st->db_xattrs, &k, &v));
	if (rc && rc != -ENOENT)
		return rc;
	if (!rc && (a->flags & XATTR_CREATE))
		return -EEXIST;
	if (rc && (a->flags & XATTR_REPLACE))
		return -ENODATA;
	v = (MDB_val){ a->size, (void *)a->value };
	if ((rc = pd_mdb_err(mdb_put(w->txn, w->st->db_xattrs, &k, &v, 0))))
		return rc;
	in.ctime = w->now;
	return ns_put_inode(w->txn, w->st, &in);
}

int xattr_set(struct store *st, uint64_t ino, const char *name, const void *value, size_t size, int flags)
{
	if (size > PD_XATTR_VALUE_MAX)
		return -E2BIG;
	struct setxattr_arg a = { ino, name, value, size, flags };
	return store_write(st, setxattr_cb, &a);
}

int xattr_get(struct store *st, uint64_t ino, const char *name, void *buf, size_t size, size_t *len)
{
	uint8_t kb[8 + PD_XATTR_NAME_MAX];
	MDB_val k, v;
	int rc = xattr_key(kb, ino, name, &k);
	if (rc)
		return rc == -ERANGE ? -ENODATA : rc;
	MDB_txn *txn;
	if ((rc = ns_read_begin(st, &txn)))
		return rc;
	rc = pd_mdb_err(mdb_get(txn, st->db_xattrs, &k, &v));
	if (rc == -ENOENT)
		rc = -ENODATA;
	if (!rc) {
		*len = v.mv_size;
		if (size && size < v.mv_size)
			rc = -ERANGE;
		else if (size)
			memcpy(buf, v.mv_data, v.mv_size);
	}
	store_read_end(st, txn);
	return rc;
}

int xattr_list(struct store *st, uint64_t ino, char *buf, size_t size, size_t *len)
{
	MDB_txn *txn;
	MDB_cursor *c;
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	if ((rc = pd_mdb_err(mdb_cursor_open(txn, st->db_xattrs, &c)))) {
		store_read_end(st, txn);
		return rc;
	}
	uint8_t kb[8];
	MDB_val k = store_ino_key(kb, ino), v;
	size_t total = 0;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); mrc == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size < 8 || get_be64(k.mv_data) != ino)
			break;
		size_t nlen = k.mv_size - 8;
		if (size && total + nlen + 1 <= size) {
			memcpy(buf + total, (char *)k.mv_data + 8, nlen);
			buf[total + nlen] = 0;
		}
		total += nlen + 1;
	}
	mdb_cursor_close(c);
	store_read_end(st, txn);
	if (mrc && mrc != MDB_NOTFOUND)
		return pd_mdb_err(mrc);
	*len = total;
	return size && total > size ? -ERANGE : 0;
}

struct rmxattr_arg { uint64_t ino; const char *name; };

static int removexattr_cb(struct wtx *w, void *p)
{
	struct rmxattr_arg *a = p;
	uint8_t kb[8 + PD_XATTR_NAME_MAX];
	MDB_val k;
	struct inode in;
	int rc = xattr_key(kb, a->ino, a->name, &k);
	if (rc || (rc = ns_get_inode(w->txn, w->st, a->ino, &in)))
		return rc == -ERANGE ? -ENODATA : rc;
	rc = pd_mdb_err(mdb_del(w->txn, w->st->db_xattrs, &k, NULL));
	if (rc)
		return rc == -ENOENT ? -ENODATA : rc;
	in.ctime = w->now;
	return ns_put_inode(w->txn, w->st, &in);
}

int xattr_remove(struct store *st, uint64_t ino, const char *name)
{
	struct rmxattr_arg a = { ino, name };
	return store_write(st, removexattr_cb, &a);
}

int xattr_delete_all(MDB_txn *txn, struct store *st, uint64_t ino)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_xattrs, &c));
	if (rc)
		return rc;
	uint8_t kb[8];
	int mrc;
	for (;;) {
		/* Seek afresh after each delete: a cursor left past the last key
		 * answers EINVAL, not "not found". */
		MDB_val k = store_ino_key(kb, ino), v;
		mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		if (mrc || k.mv_size < 8 || get_be64(k.mv_data) != ino)
			break;
		if ((mrc = mdb_cursor_del(c, 0)))
			break;
	}
	mdb_cursor_close(c);
	return mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
}

