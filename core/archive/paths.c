/* paths.c - path names of inodes for query answers, filtered by what the
 * caller may reach: search permission on every directory from the root and
 * read permission on the file, as the kernel would check them. Paths are
 * built backwards through each inode's names (ns_names: the one held in
 * its row, or its `links` rows; a directory has one name, under its
 * parent), so no absolute host path is ever formed. */
#include "paths.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <limits.h>


bool path_may(const struct inode *in, const struct pd_cred *cred, int mask)
{
	if (cred->uid == 0) /* root: all but execute of a file with no x bit */
		return !(mask & 1) || S_ISDIR(in->mode) || (in->mode & 0111);
	unsigned bits;
	if (cred->uid == in->uid)
		bits = (in->mode >> 6) & 7;
	else if (cred_in_group(cred, in->gid))
		bits = (in->mode >> 3) & 7;
	else
		bits = in->mode & 7;
	return ((unsigned)mask & bits) == (unsigned)mask;
}

/* Prepend "/name" to the path being built backwards in buf[0..end). */
static int prepend(char *buf, size_t *start, const char *name, size_t len)
{
	if (*start < len + 1)
		return -ENAMETOOLONG;
	*start -= len;
	memcpy(buf + *start, name, len);
	buf[--*start] = '/';
	return 0;
}

struct one_name {
	uint64_t parent;
	char name[PD_NAME_MAX];
	size_t len;
};

static int take_first_name(void *ctx, uint64_t parent, const char *name, size_t len)
{
	struct one_name *o = ctx;
	o->parent = parent;
	memcpy(o->name, name, len);
	o->len = len;
	return 1;
}

/* Build the path of (parent, name) and check search permission on every
 * directory above it. */
static int path_of_link(MDB_txn *txn, struct store *st, uint64_t parent, const char *name, size_t nlen,
			const struct pd_cred *cred, char *buf, size_t bufsize, size_t *start)
{
	*start = bufsize;
	int rc = prepend(buf, start, name, nlen);
	for (unsigned depth = 0; !rc; depth++) {
		struct inode d;
		if (depth > 4096)
			return -ELOOP;
		if ((rc = ns_get_inode(txn, st, parent, &d)))
			return rc;
		if (cred && !path_may(&d, cred, 1))
			return -EACCES;
		if (parent == PD_ROOT_INO)
			return 0;
		struct one_name up;
		if ((rc = ns_names(txn, st, &d, take_first_name, &up)) != 1)
			return rc ? rc : -ENOENT;
		parent = up.parent;
		rc = prepend(buf, start, up.name, up.len);
	}
	return rc;
}

struct path_walk {
	MDB_txn *txn;
	struct store *st;
	const struct pd_cred *cred;
	char *buf;
	size_t bufsize;
	path_fn cb;
	void *ctx;
};

static int path_of_name(void *ctx, uint64_t parent, const char *name, size_t len)
{
	struct path_walk *p = ctx;
	size_t start;
	int rc = path_of_link(p->txn, p->st, parent, name, len, p->cred, p->buf, p->bufsize, &start);
	if (rc == 0)
		return p->cb(p->ctx, p->buf + start, p->bufsize - start);
	return rc == -EACCES || rc == -ENAMETOOLONG ? 0 : rc;
}

int path_names(MDB_txn *txn, struct store *st, uint64_t ino, const struct pd_cred *cred, path_fn cb,
	       void *ctx)
{
	struct inode in;
	int rc = ns_get_inode(txn, st, ino, &in);
	if (rc)
		return rc;
	if (cred && !path_may(&in, cred, 4))
		return 0;
	enum { BUF = 3 * PATH_MAX };
	char *buf = malloc(BUF);
	if (!buf)
		return -ENOMEM;
	struct path_walk p = { txn, st, cred, buf, BUF, cb, ctx };
	rc = ns_names(txn, st, &in, path_of_name, &p);
	free(buf);
	return rc;
}

struct blob_paths {
	MDB_txn *txn;
	struct store *st;
	uint64_t exclude;
	const struct pd_cred *cred;
	path_fn cb;
	void *ctx;
};

static int paths_of_ino(void *ctx, uint64_t ino)
{
	struct blob_paths *b = ctx;
	int rc = ino == b->exclude ? 0 : path_names(b->txn, b->st, ino, b->cred, b->cb, b->ctx);
	return rc == -ENOENT ? 0 : rc; /* an orphan being deleted has no names */
}

int path_names_of_blob(MDB_txn *txn, struct store *st, const struct blobkey *k, uint64_t exclude,
		       const struct pd_cred *cred, path_fn cb, void *ctx)
{
	struct blob_paths b = { txn, st, exclude, cred, cb, ctx };
	return store_blob_inodes(txn, st, k, NULL, paths_of_ino, &b);
}
