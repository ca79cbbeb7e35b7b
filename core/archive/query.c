/* query.c - computed dedup attributes. See query.h. */
#include "query.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "blob/blob.h"
#include "base/fp.h"
#include "paths.h"
#include "stats.h"

int query_is_dedup_attr(const char *name)
{
	return strncmp(name, "user.dedup.", 11) == 0;
}

int query_sealed_blob(MDB_txn *txn, struct store *st, uint64_t ino, struct blobkey *k)
{
	struct inode in;
	int rc = ns_get_inode(txn, st, ino, &in);
	if (rc)
		return rc;
	if (!S_ISREG(in.mode) || !(in.flags & INODE_HAS_BLOB))
		return -ENODATA;
	*k = in.blob;
	return 0;
}

int query_md5(struct store *st, uint64_t ino, char *buf, size_t *len)
{
	MDB_txn *txn;
	struct blobkey k;
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = query_sealed_blob(txn, st, ino, &k);
	store_read_end(st, txn);
	if (rc)
		return rc;
	fp_hex(k.md5, buf);
	*len = 32;
	return 0;
}

int query_refcount(struct store *st, uint64_t ino, char *buf, size_t *len)
{
	MDB_txn *txn;
	struct blobkey k;
	struct fprec r;
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = query_sealed_blob(txn, st, ino, &k);
	if (!rc)
		rc = blob_get(txn, st, &k, &r);
	store_read_end(st, txn);
	if (rc)
		return rc == -ENOENT ? -EUCLEAN : rc;
	*len = (size_t)snprintf(buf, QUERY_MAX, "%" PRIu64, r.refcount);
	return 0;
}

struct lines {
	char *buf;
	size_t len, more;
	bool full;
};

static int add_line(void *ctx, const char *path, size_t plen)
{
	struct lines *l = ctx;
	/* Keep room for the "... N more" line. */
	if (l->full || l->len + plen + 1 > QUERY_MAX - 32) {
		l->full = true;
		l->more++;
		return 0;
	}
	memcpy(l->buf + l->len, path, plen);
	l->len += plen;
	l->buf[l->len++] = '\n';
	return 0;
}

int query_twins(struct store *st, uint64_t ino, const struct pd_cred *cred, char *buf, size_t *len)
{
	MDB_txn *txn;
	struct blobkey k;
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	struct lines l = { buf, 0, 0, false };
	if (!(rc = query_sealed_blob(txn, st, ino, &k)))
		rc = path_names_of_blob(txn, st, &k, ino, cred, add_line, &l);
	store_read_end(st, txn);
	if (rc)
		return rc;
	if (l.more)
		l.len += (size_t)snprintf(buf + l.len, 32, "... %zu more\n", l.more);
	*len = l.len;
	return 0;
}

const char *const query_attr_names[] = {
	"user.dedup.md5", "user.dedup.refcount", "user.dedup.simhash", "user.dedup.twins", "user.dedup.near",
	QUERY_ATTR_STATS_TEXT, NULL
};

static int first_path(void *ctx, const char *path, size_t len)
{
	char *out = ctx;
	if (!*out)
		snprintf(out, PATH_MAX, "%.*s", (int)len, path);
	return 0;
}

int query_path(struct store *st, uint64_t ino, char *buf, size_t size)
{
	char path[PATH_MAX] = "";
	MDB_txn *txn;
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = path_names(txn, st, ino, NULL, first_path, path);
	store_read_end(st, txn);
	snprintf(buf, size, "%s", path);
	return rc;
}

int query_blob_path(struct store *st, const struct blobkey *k, char *buf, size_t size)
{
	char path[PATH_MAX] = "";
	MDB_txn *txn;
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = path_names_of_blob(txn, st, k, 0, NULL, first_path, path);
	store_read_end(st, txn);
	snprintf(buf, size, "%s", path);
	return rc;
}

static int subtree_stats(struct store *st, uint64_t ino, enum stats_format f, char *buf, size_t *len)
{
	MDB_txn *txn;
	struct inode in;
	char path[PATH_MAX] = "";
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = ns_get_inode(txn, st, ino, &in);
	if (!rc && !S_ISDIR(in.mode))
		rc = -ENODATA;
	if (!rc)
		rc = path_names(txn, st, ino, NULL, first_path, path);
	store_read_end(st, txn);
	struct stats_tree t;
	if (!rc)
		rc = stats_tree(st, ino, &t);
	if (rc)
		return rc;
	size_t n = stats_tree_format(*path ? path : "?", &t, f, buf, QUERY_MAX);
	if (n >= QUERY_MAX)
		return -E2BIG;
	*len = n;
	return 0;
}

int query_stats(struct store *st, uint64_t ino, enum stats_format f, char *buf, size_t *len)
{
	if (ino != PD_ROOT_INO)
		return subtree_stats(st, ino, f, buf, len);
	struct pd_stats s;
	int rc = stats_collect(st, &s);
	if (rc)
		return rc;
	size_t n = stats_format(&s, f, buf, QUERY_MAX);
	if (n + 1 >= QUERY_MAX)
		return -E2BIG;
	if (f == STATS_JSON)
		buf[n++] = '\n';
	*len = n;
	return 0;
}
