/* ns.c - the namespace's operations over its tables: inodes, dirents,
 * links, xattrs, orphans. The rows themselves (keys, dirents, the way back
 * from an inode to its names) are ns_rows.c's, through ns_int.h.
 *
 * Each public function is one transaction. The *_cb functions run inside
 * store_write's nested transaction and may run more than once (a map
 * resize retries the batch), so they only read their argument struct and
 * write its result fields.
 *
 * Every name is a dirent (parent, name hash -> name, child). The way back,
 * from an inode to its names (paths, a directory's "..", fsck), is the
 * inode's own row for an inode of one name (format 5 on: the parent and the
 * name hash, about 10 bytes, where a `links` row cost about 50 with LMDB's
 * overhead), else one `links` row per name (ns.h says when which).
 *
 * A name removed from an inode with no other name makes the inode an
 * orphan: it stays (nlink 0, listed in `orphans`) while a process has it
 * open or the kernel still holds a lookup on it, and goes with its blob
 * reference when the last user lets go (openfile.c), or at the next open of
 * the store after a crash.
 */
#include "ns_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "blob/blob.h"
#include "ns_later.h"
#include "openfile.h"
#include "xattr.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#define PD_LINK_MAX 65000

static void touch_mc(struct inode *in, struct pd_time now)
{
	in->mtime = in->ctime = now;
}

/* Load a directory for a change of its entries. */
static int get_dir(MDB_txn *txn, struct store *st, uint64_t ino, struct inode *dir)
{
	int rc = ns_get_inode(txn, st, ino, dir);
	if (rc)
		return rc;
	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	return dir->nlink == 0 ? -ENOENT : 0;
}

/* ---- reads ----------------------------------------------------------- */

int ns_getattr(struct store *st, uint64_t ino, struct inode *out)
{
	/* a waiting create answers for its file, and gives its directory
	 * its times (ns_later.h) */
	enum ns_later_role role = ns_later_find(st, ino, out);
	if (role == NS_LATER_WAITS)
		return 0;
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = ns_get_inode(txn, st, ino, out);
	store_read_end(st, txn);
	if (!rc && role == NS_LATER_PARENT)
		ns_later_dir_times(st, out);
	return rc;
}

int ns_lookup(struct store *st, uint64_t parent, const char *name, struct inode *out)
{
	if (strlen(name) > PD_NAME_MAX)
		return -ENAMETOOLONG;
	if (ns_later_lookup(st, parent, name, out))
		return 0; /* a waiting create's name (ns_later.h) */
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	struct ns_dirent_hit hit;
	struct inode waiting;
	rc = ns_dirent_find(txn, st, parent, name, &hit);
	if (!rc && ns_later_find(st, hit.child, &waiting) == NS_LATER_PARENT) {
		/* a directory with a create waiting in it: its times from it */
		store_read_end(st, txn);
		return ns_getattr(st, hit.child, out);
	}
	if (!rc)
		rc = ns_get_inode(txn, st, hit.child, out);
	store_read_end(st, txn);
	return rc;
}

int ns_readlink(struct store *st, uint64_t ino, char *buf, size_t size, size_t *len)
{
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	uint8_t kb[8];
	MDB_val k = store_ino_key(kb, ino), v;
	struct inode in;
	const char *target;
	rc = pd_mdb_err(mdb_get(txn, st->db_inodes, &k, &v));
	if (!rc)
		rc = inode_decode(v.mv_data, v.mv_size, &in, &target, len);
	if (!rc && !S_ISLNK(in.mode))
		rc = -EINVAL;
	if (!rc)
		memcpy(buf, target, *len < size ? *len : size);
	store_read_end(st, txn);
	return rc;
}

/* ---- mknode ---------------------------------------------------------- */

struct mknode_arg {
	uint64_t parent;
	const char *name;
	uint32_t mode;
	uint64_t rdev;
	const char *target;
	const struct pd_cred *cred;
	struct inode out;
};

void ns_new_inode(const struct inode *dir, uint32_t mode, uint64_t rdev, const struct pd_cred *cred,
		  struct pd_time now, struct inode *in)
{
	memset(in, 0, sizeof *in);
	in->mode = mode;
	in->uid = cred->uid;
	in->gid = cred->gid;
	if (dir->mode & S_ISGID) {
		in->gid = dir->gid;
		if (S_ISDIR(in->mode))
			in->mode |= S_ISGID;
	}
	in->nlink = S_ISDIR(in->mode) ? 2 : 1;
	in->rdev = rdev;
	in->atime = in->mtime = in->ctime = now;
}

int ns_add_new(struct wtx *w, struct inode *dir, const char *name, struct inode *in, const char *target)
{
	struct store *st = w->st;
	uint64_t parent = dir->ino;
	struct ns_dirent_hit hit;
	int rc = ns_dirent_find(w->txn, st, parent, name, &hit);
	if (rc != -ENOENT)
		return rc ? rc : -EEXIST;
	size_t tlen = target ? strlen(target) : 0;
	in->size = S_ISLNK(in->mode) ? tlen : 0;
	if ((rc = ns_dirent_put(w->txn, st, parent, name, in->ino, in->mode)) ||
	    (rc = ns_name_first(w->txn, st, in, parent, name)) ||
	    (rc = ns_put_inode_target(w->txn, st, in, target, tlen)))
		return rc;
	if (S_ISDIR(in->mode))
		dir->nlink++;
	touch_mc(dir, w->now);
	if ((rc = ns_put_inode(w->txn, st, dir)))
		return rc;
	if (S_ISREG(in->mode))
		w->delta.pages++;
	return 0;
}

int ns_get_dir(MDB_txn *txn, struct store *st, uint64_t ino, struct inode *dir)
{
	return get_dir(txn, st, ino, dir);
}

static int mknode_cb(struct wtx *w, void *p)
{
	struct mknode_arg *a = p;
	struct inode dir, in;
	int rc = get_dir(w->txn, w->st, a->parent, &dir);
	if (rc)
		return rc;
	ns_new_inode(&dir, a->mode, a->rdev, a->cred, w->now, &in);
	if ((rc = wtx_next_ino(w, &in.ino)) || (rc = ns_add_new(w, &dir, a->name, &in, a->target)))
		return rc;
	a->out = in;
	return 0;
}

int ns_mknode(struct store *st, uint64_t parent, const char *name, uint32_t mode, uint64_t rdev,
	      const char *target, const struct pd_cred *cred, struct inode *out)
{
	int rc = ns_check_name(name);
	if (rc)
		return rc;
	if (S_ISLNK(mode) && (!target || strlen(target) > PD_SYMLINK_MAX))
		return target ? -ENAMETOOLONG : -EINVAL;
	struct mknode_arg a = { parent, name, mode, rdev, S_ISLNK(mode) ? target : NULL, cred, { 0 } };
	rc = ns_write_name(st, mknode_cb, &a);
	if (!rc)
		*out = a.out;
	return rc;
}

/* ---- link ------------------------------------------------------------ */

struct link_arg {
	uint64_t ino, parent;
	const char *name;
	struct inode out;
};

static int link_cb(struct wtx *w, void *p)
{
	struct link_arg *a = p;
	struct store *st = w->st;
	struct inode dir, in;
	struct ns_dirent_hit hit;
	int rc = get_dir(w->txn, st, a->parent, &dir);
	if (rc || (rc = ns_get_inode(w->txn, st, a->ino, &in)))
		return rc;
	if (S_ISDIR(in.mode))
		return -EPERM;
	if (in.nlink == 0)
		return -ENOENT;
	if (in.nlink >= PD_LINK_MAX)
		return -EMLINK;
	rc = ns_dirent_find(w->txn, st, a->parent, a->name, &hit);
	if (rc != -ENOENT)
		return rc ? rc : -EEXIST;
	in.nlink++;
	in.ctime = w->now;
	touch_mc(&dir, w->now);
	/* the first name is looked up before the new dirent can share its hash */
	if ((rc = ns_name_another(w->txn, st, &in, a->parent, a->name)) ||
	    (rc = ns_dirent_put(w->txn, st, a->parent, a->name, in.ino, in.mode)) ||
	    (rc = ns_put_inode(w->txn, st, &in)) || (rc = ns_put_inode(w->txn, st, &dir)))
		return rc;
	a->out = in;
	return 0;
}

int ns_link(struct store *st, uint64_t ino, uint64_t newparent, const char *newname, struct inode *out)
{
	int rc = ns_check_name(newname);
	if (rc)
		return rc;
	struct link_arg a = { ino, newparent, newname, { 0 } };
	rc = ns_write_name(st, link_cb, &a);
	if (!rc)
		*out = a.out;
	return rc;
}

/* ---- unlink, rmdir --------------------------------------------------- */

/* Take the name (parent, name) -> in away from in: its dirent and link,
 * nlink, orphan mark. The parent's times are the caller's business. */
static int drop_name(struct wtx *w, uint64_t parent, const char *name, struct inode *in, bool *gone)
{
	struct store *st = w->st;
	int rc = ns_dirent_del(w->txn, st, parent, name, in->ino, in->mode);
	if (!rc)
		rc = ns_name_drop(w->txn, st, in, parent, name);
	if (rc)
		return rc;
	in->ctime = w->now;
	if (S_ISDIR(in->mode))
		in->nlink = 0;
	else if (in->nlink > 0)
		in->nlink--;
	/* back at one name: it goes back into the row */
	if (in->nlink == 1 && !S_ISDIR(in->mode) && (rc = ns_name_from_links(w->txn, st, in)) < 0)
		return rc;
	*gone = in->nlink == 0;
	if (*gone && (rc = ns_orphan_mark(w->txn, st, in->ino, true)))
		return rc;
	return ns_put_inode(w->txn, st, in);
}

struct unlink_arg {
	uint64_t parent;
	const char *name;
	bool dir;
	uint64_t ino;
	bool gone;
};

static int unlink_cb(struct wtx *w, void *p)
{
	struct unlink_arg *a = p;
	struct store *st = w->st;
	struct inode dir, in;
	struct ns_dirent_hit hit;
	int rc = get_dir(w->txn, st, a->parent, &dir);
	if (rc || (rc = ns_dirent_find(w->txn, st, a->parent, a->name, &hit)) ||
	    (rc = ns_get_inode(w->txn, st, hit.child, &in)))
		return rc;
	if (a->dir && !S_ISDIR(in.mode))
		return -ENOTDIR;
	if (!a->dir && S_ISDIR(in.mode))
		return -EISDIR;
	if (a->dir) {
		if ((rc = ns_dir_is_empty(w->txn, st, in.ino)) <= 0)
			return rc ? rc : -ENOTEMPTY;
		dir.nlink--;
	}
	if ((rc = drop_name(w, a->parent, a->name, &in, &a->gone)))
		return rc;
	touch_mc(&dir, w->now);
	a->ino = in.ino;
	return ns_put_inode(w->txn, st, &dir);
}

int ns_unlink(struct store *st, uint64_t parent, const char *name, uint64_t *ino_out, bool *gone)
{
	if (strlen(name) > PD_NAME_MAX)
		return -ENAMETOOLONG;
	struct unlink_arg a = { parent, name, false, 0, false };
	int rc = store_write(st, unlink_cb, &a);
	if (rc)
		return rc;
	*ino_out = a.ino;
	*gone = a.gone;
	return a.gone ? live_orphaned(st, a.ino) : 0;
}

int ns_rmdir(struct store *st, uint64_t parent, const char *name, uint64_t *ino_out)
{
	if (strlen(name) > PD_NAME_MAX)
		return -ENAMETOOLONG;
	if (!strcmp(name, "."))
		return -EINVAL;
	if (!strcmp(name, ".."))
		return -ENOTEMPTY;
	struct unlink_arg a = { parent, name, true, 0, false };
	/* a create that found the directory there must not find it gone at
	 * its commit (ns_later.h, Names) */
	int rc = ns_write_name(st, unlink_cb, &a);
	if (rc)
		return rc;
	*ino_out = a.ino;
	return live_orphaned(st, a.ino);
}

/* ---- rename ---------------------------------------------------------- */

struct rename_arg {
	uint64_t parent, newparent;
	const char *name, *newname;
	unsigned flags;
	uint64_t replaced;
	bool gone;
};

/* -EINVAL if dir is `anc` or lies below it (a directory moved into itself). */
static int check_not_below(MDB_txn *txn, struct store *st, uint64_t anc, uint64_t dir)
{
	for (unsigned depth = 0; depth < 100000; depth++) {
		if (dir == anc)
			return -EINVAL;
		if (dir == PD_ROOT_INO)
			return 0;
		int rc = ns_dir_parent(txn, st, dir, &dir);
		if (rc)
			return rc;
	}
	return -ELOOP;
}

/* Move entry (parent,name)->in to (newparent,newname), which is free. */
static int move_entry(struct wtx *w, uint64_t parent, const char *name, uint64_t newparent,
		      const char *newname, struct inode *in)
{
	struct store *st = w->st;
	int rc;
	if ((rc = ns_dirent_del(w->txn, st, parent, name, in->ino, in->mode)) ||
	    (rc = ns_dirent_put(w->txn, st, newparent, newname, in->ino, in->mode)) ||
	    (rc = ns_name_move(w->txn, st, in, parent, name, newparent, newname)))
		return rc;
	in->ctime = w->now;
	return ns_put_inode(w->txn, st, in);
}

/* Update both parents' times and link counts: a directory that changes
 * parent moves its ".." (dparent, dnewparent: the change of each parent's
 * nlink; one directory when both are the same). */
static int touch_parents(struct wtx *w, uint64_t parent, uint64_t newparent, int dparent, int dnewparent)
{
	struct inode a, b;
	int rc = ns_get_inode(w->txn, w->st, parent, &a);
	if (rc)
		return rc;
	touch_mc(&a, w->now);
	if (parent == newparent) {
		a.nlink = (uint32_t)((int64_t)a.nlink + dparent + dnewparent);
		return ns_put_inode(w->txn, w->st, &a);
	}
	if ((rc = ns_get_inode(w->txn, w->st, newparent, &b)))
		return rc;
	touch_mc(&b, w->now);
	a.nlink = (uint32_t)((int64_t)a.nlink + dparent);
	b.nlink = (uint32_t)((int64_t)b.nlink + dnewparent);
	if ((rc = ns_put_inode(w->txn, w->st, &a)))
		return rc;
	return ns_put_inode(w->txn, w->st, &b);
}

static int rename_exchange(struct wtx *w, struct rename_arg *a, struct inode *src, struct inode *dst)
{
	struct store *st = w->st;
	int rc;
	if (a->parent != a->newparent) {
		if ((S_ISDIR(src->mode) && (rc = check_not_below(w->txn, st, src->ino, a->newparent))) ||
		    (S_ISDIR(dst->mode) && (rc = check_not_below(w->txn, st, dst->ino, a->parent))))
			return rc;
	}
	if ((rc = ns_dirent_del(w->txn, st, a->parent, a->name, src->ino, src->mode)) ||
	    (rc = ns_dirent_del(w->txn, st, a->newparent, a->newname, dst->ino, dst->mode)) ||
	    (rc = ns_dirent_put(w->txn, st, a->newparent, a->newname, src->ino, src->mode)) ||
	    (rc = ns_dirent_put(w->txn, st, a->parent, a->name, dst->ino, dst->mode)) ||
	    (rc = ns_name_move(w->txn, st, src, a->parent, a->name, a->newparent, a->newname)) ||
	    (rc = ns_name_move(w->txn, st, dst, a->newparent, a->newname, a->parent, a->name)))
		return rc;
	src->ctime = dst->ctime = w->now;
	if ((rc = ns_put_inode(w->txn, st, src)) || (rc = ns_put_inode(w->txn, st, dst)))
		return rc;
	int moved = (S_ISDIR(src->mode) ? 1 : 0) - (S_ISDIR(dst->mode) ? 1 : 0);
	return touch_parents(w, a->parent, a->newparent, -moved, moved);
}

static int rename_cb(struct wtx *w, void *p)
{
	struct rename_arg *a = p;
	struct store *st = w->st;
	struct inode pdir, ndir, src, dst;
	struct ns_dirent_hit sh, dh;
	a->replaced = 0;
	a->gone = false;
	int rc = get_dir(w->txn, st, a->parent, &pdir);
	if (rc || (rc = get_dir(w->txn, st, a->newparent, &ndir)) ||
	    (rc = ns_dirent_find(w->txn, st, a->parent, a->name, &sh)) ||
	    (rc = ns_get_inode(w->txn, st, sh.child, &src)))
		return rc;
	rc = ns_dirent_find(w->txn, st, a->newparent, a->newname, &dh);
	if (rc && rc != -ENOENT)
		return rc;
	bool exists = rc == 0;
	if (a->flags & RENAME_EXCHANGE) {
		if (!exists)
			return -ENOENT;
		if (dh.child == src.ino)
			return 0;
		if ((rc = ns_get_inode(w->txn, st, dh.child, &dst)))
			return rc;
		return rename_exchange(w, a, &src, &dst);
	}
	if (exists && (a->flags & RENAME_NOREPLACE))
		return -EEXIST;
	if (exists && dh.child == src.ino)
		return 0; /* two names of one inode: POSIX says do nothing */
	if (S_ISDIR(src.mode) && (rc = check_not_below(w->txn, st, src.ino, a->newparent)))
		return rc;
	int moved = S_ISDIR(src.mode) ? 1 : 0, replaced_dir = 0;
	if (exists) {
		if ((rc = ns_get_inode(w->txn, st, dh.child, &dst)))
			return rc;
		if (S_ISDIR(src.mode) && !S_ISDIR(dst.mode))
			return -ENOTDIR;
		if (!S_ISDIR(src.mode) && S_ISDIR(dst.mode))
			return -EISDIR;
		if (S_ISDIR(dst.mode)) {
			if ((rc = ns_dir_is_empty(w->txn, st, dst.ino)) <= 0)
				return rc ? rc : -ENOTEMPTY;
			replaced_dir = 1; /* the new parent loses its ".." */
		}
		if ((rc = drop_name(w, a->newparent, a->newname, &dst, &a->gone)))
			return rc;
		a->replaced = dst.ino;
	}
	if ((rc = move_entry(w, a->parent, a->name, a->newparent, a->newname, &src)))
		return rc;
	return touch_parents(w, a->parent, a->newparent, -moved, moved - replaced_dir);
}

int ns_rename(struct store *st, uint64_t parent, const char *name, uint64_t newparent,
	      const char *newname, unsigned flags, uint64_t *replaced, bool *gone)
{
	int rc = ns_check_name(newname);
	if (rc)
		return rc;
	if (strlen(name) > PD_NAME_MAX)
		return -ENAMETOOLONG;
	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    (flags & RENAME_NOREPLACE && flags & RENAME_EXCHANGE))
		return -EINVAL;
	struct rename_arg a = { parent, newparent, name, newname, flags, 0, false };
	rc = ns_write_name(st, rename_cb, &a);
	if (rc)
		return rc;
	*replaced = a.replaced;
	*gone = a.gone;
	return a.gone ? live_orphaned(st, a.replaced) : 0;
}

/* ---- setattr --------------------------------------------------------- */

struct setattr_arg {
	uint64_t ino;
	const struct ns_setattr *sa;
	struct inode out;
};

/* The bits a write, truncate or chown by an unprivileged caller clears. */
static uint32_t suidgid_bits(uint32_t mode)
{
	if (S_ISDIR(mode))
		return 0;
	return (mode & S_ISUID) | ((mode & S_IXGRP) ? (mode & S_ISGID) : 0);
}

static int setattr_cb(struct wtx *w, void *p)
{
	struct setattr_arg *a = p;
	return ns_setattr_in(w, a->ino, a->sa, &a->out);
}

void ns_apply_setattr(struct inode *in, const struct ns_setattr *sa, struct pd_time now)
{
	if (sa->valid & NS_SET_MODE)
		in->mode = (in->mode & S_IFMT) | (sa->mode & 07777);
	if (sa->valid & NS_SET_UID)
		in->uid = sa->uid;
	if (sa->valid & NS_SET_GID)
		in->gid = sa->gid;
	if (sa->valid & (NS_SET_UID | NS_SET_GID))
		in->mode &= ~suidgid_bits(in->mode);
	if (sa->valid & NS_SET_KILL_SUIDGID)
		in->mode &= ~(sa->kill & (uint32_t)(S_ISUID | S_ISGID));
	if (sa->valid & NS_SET_ATIME)
		in->atime = sa->atime;
	if (sa->valid & NS_SET_ATIME_NOW)
		in->atime = now;
	if (sa->valid & NS_SET_MTIME)
		in->mtime = sa->mtime;
	if (sa->valid & NS_SET_MTIME_NOW)
		in->mtime = now;
	in->ctime = sa->valid & NS_SET_CTIME ? sa->ctime : now;
}

int ns_setattr_in(struct wtx *w, uint64_t ino, const struct ns_setattr *sa, struct inode *out)
{
	struct inode in;
	int rc = ns_get_inode(w->txn, w->st, ino, &in);
	if (rc)
		return rc;
	ns_apply_setattr(&in, sa, w->now);
	if (out)
		*out = in;
	return ns_put_inode(w->txn, w->st, &in);
}

int ns_setattr(struct store *st, uint64_t ino, const struct ns_setattr *sa, struct inode *out)
{
	/* tar and cp -p set a new file's owner, mode and times before its
	 * close(): while its create waits, they join it (ns_later.h) */
	struct setattr_arg a = { ino, sa, { 0 } };
	if (ns_later_setattr(st, ino, sa, &a.out) == 0) {
		if (out)
			*out = a.out;
		return 0;
	}
	int rc = store_write(st, setattr_cb, &a);
	if (!rc && out)
		*out = a.out;
	return rc;
}

bool cred_in_group(const struct pd_cred *c, uint32_t gid)
{
	if (c->gid == gid)
		return true;
	for (uint32_t i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

int ns_kill_suidgid(struct store *st, uint64_t ino, ns_cred_fn cred, void *ctx)
{
	struct inode in;
	int rc = ns_getattr(st, ino, &in);
	if (rc)
		return rc;
	uint32_t kill = suidgid_bits(in.mode);
	/* Without group execute, set-group-ID is the mandatory-locking mark: it
	 * goes only for a writer outside the file's group (as the VFS does). */
	if (S_ISREG(in.mode) && (in.mode & S_ISGID) && !(kill & S_ISGID)) {
		const struct pd_cred *c = cred(ctx);
		if (c && !cred_in_group(c, in.gid))
			kill |= S_ISGID;
	}
	if (!kill)
		return 0;
	struct ns_setattr sa = { .valid = NS_SET_KILL_SUIDGID, .kill = kill };
	return (rc = ns_setattr(st, ino, &sa, NULL)) ? rc : 1;
}

/* ---- readdir --------------------------------------------------------- */

static int readdir_dots(MDB_txn *txn, struct store *st, uint64_t dir, uint64_t off, bool with_attr,
			ns_dirent_fn cb, void *ctx)
{
	struct inode self, up;
	uint64_t parent;
	int rc = ns_get_inode(txn, st, dir, &self);
	if (rc)
		return rc;
	if (!S_ISDIR(self.mode))
		return -ENOTDIR;
	if (off < 1 && cb(ctx, ".", 1, dir, S_IFDIR, 1, with_attr ? &self : NULL))
		return 1;
	if (off < 2) {
		if ((rc = ns_dir_parent(txn, st, dir, &parent)) == -ENOENT)
			parent = dir; /* a removed directory still being listed */
		else if (rc)
			return rc;
		if (with_attr && (rc = ns_get_inode(txn, st, parent, &up)))
			return rc;
		if (cb(ctx, "..", 2, parent, S_IFDIR, 2, with_attr ? &up : NULL))
			return 1;
	}
	return 0;
}

int ns_readdir(struct store *st, uint64_t dir, uint64_t off, bool with_attr, ns_dirent_fn cb, void *ctx)
{
	MDB_txn *txn;
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = readdir_dots(txn, st, dir, off, with_attr, cb, ctx);
	if (rc) {
		store_read_end(st, txn);
		return rc > 0 ? 0 : rc;
	}
	uint64_t start_hash = off > 2 ? off >> 8 : 0;
	unsigned skip = off > 2 ? (unsigned)(off & 0xff) : 0; /* entries of start_hash already given */
	uint8_t kb[16];
	MDB_val k = ns_dirent_key(kb, dir, start_hash), v;
	MDB_cursor *c;
	if ((rc = pd_mdb_err(mdb_cursor_open(txn, st->db_dirents, &c)))) {
		store_read_end(st, txn);
		return rc;
	}
	uint64_t cur_hash = 0;
	unsigned idx = 0;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); mrc == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 16 || get_be64(k.mv_data) != dir)
			break;
		uint64_t hash = get_be64((uint8_t *)k.mv_data + 8);
		idx = hash == cur_hash ? idx + 1 : 0;
		cur_hash = hash;
		if (hash == start_hash && idx < skip)
			continue;
		const char *name;
		size_t len;
		uint64_t child;
		uint32_t type;
		if ((rc = dirent_val_decode(v.mv_data, v.mv_size, &name, &len, &child, &type)))
			break;
		struct inode ci;
		if (with_attr && (rc = ns_get_inode(txn, st, child, &ci)))
			break;
		if (cb(ctx, name, len, child, type, dirent_off(hash, idx < 254 ? idx : 254),
		       with_attr ? &ci : NULL))
			break;
	}
	if (!rc && mrc && mrc != MDB_NOTFOUND)
		rc = pd_mdb_err(mrc);
	mdb_cursor_close(c);
	store_read_end(st, txn);
	return rc;
}

/* ---- deleting an inode ------------------------------------------------ */

int ns_delete_inode(struct wtx *w, uint64_t ino)
{
	struct store *st = w->st;
	struct inode in;
	int rc = ns_get_inode(w->txn, st, ino, &in);
	if (rc == -ENOENT)
		return ns_orphan_mark(w->txn, st, ino, false);
	if (rc)
		return rc;
	if (in.nlink != 0)
		return ns_orphan_mark(w->txn, st, ino, false); /* linked again */
	if (S_ISREG(in.mode)) {
		w->delta.pages--;
		w->delta.logical_bytes -= (int64_t)in.size;
		if ((in.flags & INODE_HAS_BLOB) && (rc = blob_unref(w, &in.blob, ino)))
			return rc;
	}
	uint8_t kb[8];
	MDB_val k = store_ino_key(kb, ino);
	if ((rc = xattr_delete_all(w->txn, st, ino)) ||
	    (rc = pd_mdb_err(mdb_del(w->txn, st->db_inodes, &k, NULL))))
		return rc;
	return ns_orphan_mark(w->txn, st, ino, false);
}

