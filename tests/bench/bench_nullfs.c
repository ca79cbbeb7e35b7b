/* bench_nullfs - the floor: the cheapest FUSE filesystem that still lets
 * `cp -r` and `tar x` of the bench corpus succeed, to measure what any FUSE
 * filesystem pays on this machine for the same operations as pagededupfs.
 *
 *   bench_nullfs MOUNTPOINT [-f] [-d] [-o opt,...]     (libfuse's options)
 *
 * The namespace and the attributes live in memory (an array of inodes by
 * number, a hash table of directory entries); writes are accepted and their
 * bytes thrown away (only the size is kept; reads return zeros); every
 * request is answered at once under one mutex. What the kernel sees is set
 * as pagededupfs sets it, where it decides how many round trips a page
 * costs: the multi-threaded loop with a /dev/fuse descriptor per thread
 * (clone_fd), default_permissions, no writeback cache, atomic O_TRUNC,
 * readdirplus, no spliced reads, entry and attribute timeouts of 5 s and
 * negative entries of 1 s (fs/main.c's defaults), and the daemon killing
 * setuid/setgid itself (FUSE_HANDLE_KILLPRIV_V2, which libfuse 3.14 cannot
 * ask for: added to the INIT reply on its way out, as fs/kernel_io.c does;
 * without it the kernel asks for the attributes before every chown, one
 * GETATTR a page more for tar). It serves requests over /dev/fuse
 * (libfuse's loop), or with -o uring over FUSE over io_uring through
 * pagededupfs's own transport (fs/kernel_io.c, fs/uring_io.c, linked in),
 * when the kernel offers it: the floor on each transport.
 *
 * Extended attributes answer ENOSYS: the kernel then stops asking (no
 * GETXATTR of security.capability before a new file's first write or a
 * chown, as pagededupfs pays), which only makes the floor lower. Not
 * implemented (ENOSYS): rename, locks, fallocate.
 *
 * -o writeback turns the kernel's writeback cache on (pagededupfs does not
 * use it): what that setting would change, for a measurement beside the
 * floor, not part of it.
 *
 * Every request is counted by opcode as it is read from /dev/fuse (not
 * with -o uring: most requests then come through the rings); the counts go
 * to stderr on SIGUSR1 and at unmount, one line:
 *   nullfs_ops: total=N LOOKUP=n GETATTR=n ...
 */
#define FUSE_USE_VERSION 314

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stddef.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../../fs/kernel_io.h"
#include "../../fs/uring_io.h"

#define ENTRY_TIMEOUT 5.0
#define ATTR_TIMEOUT 5.0
#define NEGATIVE_TIMEOUT 1.0

static struct nl_opts {
	int writeback, uring;
} opts;

static const struct fuse_opt opt_spec[] = {
	{ "writeback", offsetof(struct nl_opts, writeback), 1 },
	{ "uring", offsetof(struct nl_opts, uring), 1 },
	FUSE_OPT_END
};

struct dentry;

struct inode {
	fuse_ino_t ino;
	mode_t mode;
	nlink_t nlink;
	uid_t uid;
	gid_t gid;
	dev_t rdev;
	off_t size;
	struct timespec atime, mtime, ctime;
	uint64_t nlookup;
	char *link;			/* a symlink's target */
	struct dentry *first, *last;	/* a directory's entries, in creation order */
	uint64_t next_off;		/* readdir offset of its next entry */
};

struct dentry {
	struct dentry *hnext;		/* hash chain */
	struct dentry *prev, *next;	/* siblings */
	fuse_ino_t parent, ino;
	uint64_t off;
	char name[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct inode **inodes;		/* by number; 1 is the root, 0 unused */
static size_t ninodes = 1, inodes_cap;
static struct dentry **buckets;
static size_t nbuckets, nentries;

/* ---- request counts -------------------------------------------------- */

#define NOPS 64
static unsigned long op_count[NOPS + 1]; /* [NOPS]: opcodes past the table */

static const char *const op_name[NOPS] = {
	[FUSE_LOOKUP] = "LOOKUP", [FUSE_FORGET] = "FORGET", [FUSE_GETATTR] = "GETATTR",
	[FUSE_SETATTR] = "SETATTR", [FUSE_READLINK] = "READLINK", [FUSE_SYMLINK] = "SYMLINK",
	[FUSE_MKNOD] = "MKNOD", [FUSE_MKDIR] = "MKDIR", [FUSE_UNLINK] = "UNLINK",
	[FUSE_RMDIR] = "RMDIR", [FUSE_RENAME] = "RENAME", [FUSE_LINK] = "LINK",
	[FUSE_OPEN] = "OPEN", [FUSE_READ] = "READ", [FUSE_WRITE] = "WRITE",
	[FUSE_STATFS] = "STATFS", [FUSE_RELEASE] = "RELEASE", [FUSE_FSYNC] = "FSYNC",
	[FUSE_SETXATTR] = "SETXATTR", [FUSE_GETXATTR] = "GETXATTR", [FUSE_LISTXATTR] = "LISTXATTR",
	[FUSE_REMOVEXATTR] = "REMOVEXATTR", [FUSE_FLUSH] = "FLUSH", [FUSE_INIT] = "INIT",
	[FUSE_OPENDIR] = "OPENDIR", [FUSE_READDIR] = "READDIR", [FUSE_RELEASEDIR] = "RELEASEDIR",
	[FUSE_FSYNCDIR] = "FSYNCDIR", [FUSE_ACCESS] = "ACCESS", [FUSE_CREATE] = "CREATE",
	[FUSE_INTERRUPT] = "INTERRUPT", [FUSE_DESTROY] = "DESTROY", [FUSE_BATCH_FORGET] = "BATCH_FORGET",
	[FUSE_FALLOCATE] = "FALLOCATE", [FUSE_READDIRPLUS] = "READDIRPLUS", [FUSE_RENAME2] = "RENAME2",
	[FUSE_LSEEK] = "LSEEK", [FUSE_COPY_FILE_RANGE] = "COPY_FILE_RANGE",
};

/* The INIT request, when the kernel offered KILLPRIV_V2 (one per session,
 * read and answered by the same thread). */
static uint64_t init_unique;

/* libfuse's own read and writev of /dev/fuse, with a count on the way in
 * and KILLPRIV_V2 added to the INIT reply on the way out. */
static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t n = read(fd, buf, len);
	struct fuse_in_header h;
	if (n < (ssize_t)sizeof h)
		return n;
	memcpy(&h, buf, sizeof h);
	__atomic_fetch_add(&op_count[h.opcode < NOPS ? h.opcode : NOPS], 1, __ATOMIC_RELAXED);
	struct fuse_init_in in;
	if (h.opcode == FUSE_INIT && n >= (ssize_t)(sizeof h + sizeof in)) {
		memcpy(&in, (const char *)buf + sizeof h, sizeof in);
		if (in.major == 7 && in.minor >= 33 && (in.flags & FUSE_HANDLE_KILLPRIV_V2))
			init_unique = h.unique;
	}
	return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	struct fuse_out_header h;
	if (init_unique && count >= 2 && iov[0].iov_len >= sizeof h &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
		memcpy(&h, iov[0].iov_base, sizeof h);
		if (h.unique == init_unique && h.error == 0) {
			struct fuse_init_out *out = iov[1].iov_base;
			out->flags |= FUSE_HANDLE_KILLPRIV_V2;
			out->flags &= ~(uint32_t)FUSE_HANDLE_KILLPRIV;
			init_unique = 0;
		}
	}
	return writev(fd, iov, count);
}

static void print_counts(void)
{
	char line[2048];
	size_t len = 0;
	unsigned long total = 0;
	for (int op = 0; op <= NOPS; op++) {
		unsigned long n = __atomic_load_n(&op_count[op], __ATOMIC_RELAXED);
		if (!n)
			continue;
		total += n;
		if (op < NOPS && op_name[op])
			len += (size_t)snprintf(line + len, sizeof line - len, " %s=%lu", op_name[op], n);
		else
			len += (size_t)snprintf(line + len, sizeof line - len, " op%d=%lu", op, n);
		if (len >= sizeof line)
			len = sizeof line - 1;
	}
	fprintf(stderr, "nullfs_ops: total=%lu%s\n", total, line);
	fflush(stderr);
}

/* SIGUSR1 is blocked in every thread but this one. */
static void *count_dumper(void *arg)
{
	sigset_t *set = arg;
	int sig;
	for (;;)
		if (sigwait(set, &sig) == 0)
			print_counts();
	return NULL;
}

/* ---- the namespace (callers hold the lock) ---------------------------- */

static struct inode *get_inode(fuse_ino_t ino)
{
	return ino && ino < ninodes ? inodes[ino] : NULL;
}

static struct inode *new_inode(mode_t mode, const struct fuse_ctx *ctx)
{
	if (ninodes >= inodes_cap) {
		size_t cap = inodes_cap ? 2 * inodes_cap : 1024;
		struct inode **p = realloc(inodes, cap * sizeof *p);
		if (!p)
			return NULL;
		inodes = p;
		inodes_cap = cap;
	}
	struct inode *in = calloc(1, sizeof *in);
	if (!in)
		return NULL;
	in->ino = ninodes;
	in->mode = mode;
	in->nlink = S_ISDIR(mode) ? 2 : 1;
	in->uid = ctx ? ctx->uid : 0;
	in->gid = ctx ? ctx->gid : 0;
	clock_gettime(CLOCK_REALTIME, &in->mtime);
	in->atime = in->ctime = in->mtime;
	in->next_off = 3; /* 1 and 2: "." and ".." */
	inodes[ninodes++] = in;
	return in;
}

static void maybe_free(struct inode *in)
{
	if (in->nlink || in->nlookup || in->ino == FUSE_ROOT_ID)
		return;
	inodes[in->ino] = NULL;
	free(in->link);
	free(in);
}

static size_t hash(fuse_ino_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return (size_t)(h ^ (h >> 29));
}

static struct dentry **find_slot(fuse_ino_t parent, const char *name)
{
	struct dentry **d = &buckets[hash(parent, name) & (nbuckets - 1)];
	while (*d && ((*d)->parent != parent || strcmp((*d)->name, name)))
		d = &(*d)->hnext;
	return d;
}

static int grow_buckets(void)
{
	size_t n = nbuckets ? 2 * nbuckets : 4096;
	struct dentry **b = calloc(n, sizeof *b);
	if (!b)
		return -1;
	for (size_t i = 0; i < nbuckets; i++)
		for (struct dentry *d = buckets[i], *next; d; d = next) {
			next = d->hnext;
			size_t j = hash(d->parent, d->name) & (n - 1);
			d->hnext = b[j];
			b[j] = d;
		}
	free(buckets);
	buckets = b;
	nbuckets = n;
	return 0;
}

static int add_entry(struct inode *dir, const char *name, struct inode *in)
{
	size_t len = strlen(name);
	if (len > NAME_MAX)
		return ENAMETOOLONG;
	if (nentries >= nbuckets && grow_buckets())
		return ENOMEM;
	struct dentry *d = malloc(sizeof *d + len + 1);
	if (!d)
		return ENOMEM;
	memcpy(d->name, name, len + 1);
	d->parent = dir->ino;
	d->ino = in->ino;
	d->off = dir->next_off++;
	struct dentry **slot = &buckets[hash(dir->ino, name) & (nbuckets - 1)];
	d->hnext = *slot;
	*slot = d;
	d->next = NULL;
	d->prev = dir->last;
	if (dir->last)
		dir->last->next = d;
	else
		dir->first = d;
	dir->last = d;
	nentries++;
	return 0;
}

static void remove_entry(struct inode *dir, struct dentry **slot)
{
	struct dentry *d = *slot;
	*slot = d->hnext;
	if (d->prev)
		d->prev->next = d->next;
	else
		dir->first = d->next;
	if (d->next)
		d->next->prev = d->prev;
	else
		dir->last = d->prev;
	nentries--;
	free(d);
}

static void fill_stat(const struct inode *in, struct stat *st)
{
	memset(st, 0, sizeof *st);
	st->st_ino = in->ino;
	st->st_mode = in->mode;
	st->st_nlink = in->nlink;
	st->st_uid = in->uid;
	st->st_gid = in->gid;
	st->st_rdev = in->rdev;
	st->st_size = in->size;
	st->st_blksize = 4096;
	st->st_blocks = (in->size + 511) / 512;
	st->st_atim = in->atime;
	st->st_mtim = in->mtime;
	st->st_ctim = in->ctime;
}

static void fill_entry(struct inode *in, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	e->ino = in->ino;
	e->entry_timeout = ENTRY_TIMEOUT;
	e->attr_timeout = ATTR_TIMEOUT;
	fill_stat(in, &e->attr);
	in->nlookup++;
}

/* KILLPRIV_V2: a write, truncate or chown clears setuid, and setgid where
 * it means setgid (group execute); simplified: whoever the caller (the
 * kernel's per-request bit for a caller without CAP_FSETID is not read). */
static void kill_suidgid(struct inode *in)
{
	if (S_ISREG(in->mode)) {
		in->mode &= ~(mode_t)S_ISUID;
		if (in->mode & S_IXGRP)
			in->mode &= ~(mode_t)S_ISGID;
	}
}

static void touch(struct inode *in)
{
	clock_gettime(CLOCK_REALTIME, &in->mtime);
	in->ctime = in->mtime;
}

/* ---- operations ------------------------------------------------------- */

static void nl_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	if (opts.writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	conn->want &= ~(unsigned)FUSE_CAP_HANDLE_KILLPRIV; /* KILLPRIV_V2 instead, in io_writev */
	conn->want &= ~(unsigned)FUSE_CAP_SPLICE_READ;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
}

static void nl_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e = { .ino = 0, .entry_timeout = NEGATIVE_TIMEOUT };
	pthread_mutex_lock(&lock);
	struct dentry *d = *find_slot(parent, name);
	if (d)
		fill_entry(get_inode(d->ino), &e);
	pthread_mutex_unlock(&lock);
	fuse_reply_entry(req, &e);
}

static void forget_one(fuse_ino_t ino, uint64_t n)
{
	struct inode *in = get_inode(ino);
	if (!in)
		return;
	in->nlookup -= n < in->nlookup ? n : in->nlookup;
	maybe_free(in);
}

static void nl_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	pthread_mutex_lock(&lock);
	forget_one(ino, nlookup);
	pthread_mutex_unlock(&lock);
	fuse_reply_none(req);
}

static void nl_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < count; i++)
		forget_one(f[i].ino, f[i].nlookup);
	pthread_mutex_unlock(&lock);
	fuse_reply_none(req);
}

static void nl_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	pthread_mutex_lock(&lock);
	struct inode *in = get_inode(ino);
	if (in)
		fill_stat(in, &st);
	pthread_mutex_unlock(&lock);
	if (in)
		fuse_reply_attr(req, &st, ATTR_TIMEOUT);
	else
		fuse_reply_err(req, ENOENT);
}

static void nl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&lock);
	struct inode *in = get_inode(ino);
	if (in) {
		if (!(to_set & FUSE_SET_ATTR_MODE) &&
		    (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE)))
			kill_suidgid(in);
		if (to_set & FUSE_SET_ATTR_MODE)
			in->mode = (in->mode & S_IFMT) | (attr->st_mode & 07777);
		if (to_set & FUSE_SET_ATTR_UID)
			in->uid = attr->st_uid;
		if (to_set & FUSE_SET_ATTR_GID)
			in->gid = attr->st_gid;
		if (to_set & FUSE_SET_ATTR_SIZE) {
			in->size = attr->st_size;
			in->mtime = now;
		}
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			in->atime = now;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			in->atime = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			in->mtime = now;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			in->mtime = attr->st_mtim;
		in->ctime = (to_set & FUSE_SET_ATTR_CTIME) ? attr->st_ctim : now;
		fill_stat(in, &st);
	}
	pthread_mutex_unlock(&lock);
	if (in)
		fuse_reply_attr(req, &st, ATTR_TIMEOUT);
	else
		fuse_reply_err(req, ENOENT);
}

/* A new inode named NAME in PARENT; 0 and *e filled, or an errno. */
static int make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		     const char *link, struct fuse_entry_param *e)
{
	int rc = 0;
	pthread_mutex_lock(&lock);
	struct inode *dir = get_inode(parent), *in = NULL;
	if (!dir || !S_ISDIR(dir->mode))
		rc = ENOENT;
	else if (*find_slot(parent, name))
		rc = EEXIST;
	else if (!(in = new_inode(mode, fuse_req_ctx(req))))
		rc = ENOMEM;
	else if (link && !(in->link = strdup(link)))
		rc = ENOMEM;
	else
		rc = add_entry(dir, name, in);
	if (!rc) {
		in->rdev = rdev;
		if (link)
			in->size = (off_t)strlen(link);
		if (S_ISDIR(mode))
			dir->nlink++;
		touch(dir);
		fill_entry(in, e);
	} else if (in) {
		in->nlink = 0;
		maybe_free(in);
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

static void reply_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		       const char *link)
{
	struct fuse_entry_param e;
	int rc = make_node(req, parent, name, mode, rdev, link, &e);
	if (rc)
		fuse_reply_err(req, rc);
	else
		fuse_reply_entry(req, &e);
}

static void nl_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	reply_node(req, parent, name, mode, rdev, NULL);
}

static void nl_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	reply_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

static void nl_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	reply_node(req, parent, name, S_IFLNK | 0777, 0, link);
}

static void nl_readlink(fuse_req_t req, fuse_ino_t ino)
{
	pthread_mutex_lock(&lock);
	struct inode *in = get_inode(ino);
	char *link = in && in->link ? strdup(in->link) : NULL;
	pthread_mutex_unlock(&lock);
	if (link)
		fuse_reply_readlink(req, link);
	else
		fuse_reply_err(req, EINVAL);
	free(link);
}

static void nl_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fuse_entry_param e;
	int rc;
	pthread_mutex_lock(&lock);
	struct inode *in = get_inode(ino), *dir = get_inode(newparent);
	if (!in || !dir)
		rc = ENOENT;
	else if (*find_slot(newparent, newname))
		rc = EEXIST;
	else
		rc = add_entry(dir, newname, in);
	if (!rc) {
		in->nlink++;
		touch(dir);
		in->ctime = dir->mtime;
		fill_entry(in, &e);
	}
	pthread_mutex_unlock(&lock);
	if (rc)
		fuse_reply_err(req, rc);
	else
		fuse_reply_entry(req, &e);
}

static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, bool want_dir)
{
	int rc = 0;
	pthread_mutex_lock(&lock);
	struct inode *dir = get_inode(parent);
	struct dentry **slot = find_slot(parent, name);
	struct inode *in = *slot ? get_inode((*slot)->ino) : NULL;
	if (!dir || !in)
		rc = ENOENT;
	else if (want_dir && !S_ISDIR(in->mode))
		rc = ENOTDIR;
	else if (!want_dir && S_ISDIR(in->mode))
		rc = EISDIR;
	else if (want_dir && in->first)
		rc = ENOTEMPTY;
	if (!rc) {
		remove_entry(dir, slot);
		touch(dir);
		in->ctime = dir->mtime;
		if (want_dir) {
			dir->nlink--;
			in->nlink = 0;
		} else {
			in->nlink--;
		}
		maybe_free(in);
	}
	pthread_mutex_unlock(&lock);
	fuse_reply_err(req, rc);
}

static void nl_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, false);
}

static void nl_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, true);
}

static void truncate_if(struct inode *in, int flags)
{
	if (flags & O_TRUNC) {
		kill_suidgid(in);
		if (in->size) {
			in->size = 0;
			touch(in);
		}
	}
}

static void nl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	pthread_mutex_lock(&lock);
	struct inode *in = get_inode(ino);
	if (in)
		truncate_if(in, fi->flags);
	pthread_mutex_unlock(&lock);
	if (in)
		fuse_reply_open(req, fi);
	else
		fuse_reply_err(req, ENOENT);
}

static void nl_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	int rc = make_node(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, &e);
	if (rc == EEXIST && !(fi->flags & O_EXCL)) { /* created meanwhile: open it */
		pthread_mutex_lock(&lock);
		struct dentry *d = *find_slot(parent, name);
		struct inode *in = d ? get_inode(d->ino) : NULL;
		if (!in)
			rc = ENOENT;
		else if (!S_ISREG(in->mode))
			rc = S_ISDIR(in->mode) ? EISDIR : EEXIST;
		else {
			truncate_if(in, fi->flags);
			fill_entry(in, &e);
			rc = 0;
		}
		pthread_mutex_unlock(&lock);
	}
	if (rc)
		fuse_reply_err(req, rc);
	else
		fuse_reply_create(req, &e, fi);
}

static void nl_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	pthread_mutex_lock(&lock);
	struct inode *in = get_inode(ino);
	off_t isize = in ? in->size : 0;
	pthread_mutex_unlock(&lock);
	size_t n = off < isize ? (size_t)(isize - off) : 0;
	if (n > size)
		n = size;
	char *zeros = calloc(1, n ? n : 1); /* the bytes were thrown away */
	if (!zeros)
		fuse_reply_err(req, ENOMEM);
	else
		fuse_reply_buf(req, zeros, n);
	free(zeros);
}

static void nl_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	(void)buf;
	(void)fi;
	pthread_mutex_lock(&lock);
	struct inode *in = get_inode(ino);
	if (in) {
		if (off + (off_t)size > in->size)
			in->size = off + (off_t)size;
		kill_suidgid(in);
		touch(in);
	}
	pthread_mutex_unlock(&lock);
	if (in)
		fuse_reply_write(req, size);
	else
		fuse_reply_err(req, ENOENT);
}

static void nl_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void nl_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	nl_ok(req, ino, fi);
}

static void nl_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	pthread_mutex_lock(&lock);
	struct inode *in = get_inode(ino);
	int rc = !in ? ENOENT : !S_ISDIR(in->mode) ? ENOTDIR : 0;
	pthread_mutex_unlock(&lock);
	if (rc)
		fuse_reply_err(req, rc);
	else
		fuse_reply_open(req, fi);
}

struct dirfill {
	fuse_req_t req;
	char *buf;
	size_t size, len;
	bool plus, full;
};

static void put_entry(struct dirfill *f, const char *name, struct inode *in, uint64_t off)
{
	size_t room = f->size - f->len, need;
	if (f->full)
		return;
	if (f->plus) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof e);
		e.ino = in->ino;
		e.entry_timeout = ENTRY_TIMEOUT;
		e.attr_timeout = ATTR_TIMEOUT;
		fill_stat(in, &e.attr);
		need = fuse_add_direntry_plus(f->req, f->buf + f->len, room, name, &e, (off_t)off);
		if (need <= room && strcmp(name, ".") && strcmp(name, ".."))
			in->nlookup++; /* the kernel counts a lookup (not for the dots) */
	} else {
		struct stat st = { .st_ino = in->ino, .st_mode = in->mode };
		need = fuse_add_direntry(f->req, f->buf + f->len, room, name, &st, (off_t)off);
	}
	if (need > room)
		f->full = true;
	else
		f->len += need;
}

/* The entries after offset OFF: "." is 1, ".." 2, then each entry's own
 * (".." is given the directory itself; the kernel does not use it). */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct dirfill f = { req, malloc(size), size, 0, plus, false };
	if (!f.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&lock);
	struct inode *dir = get_inode(ino);
	int rc = !dir ? ENOENT : !S_ISDIR(dir->mode) ? ENOTDIR : 0;
	if (!rc) {
		if (off < 1)
			put_entry(&f, ".", dir, 1);
		if (off < 2)
			put_entry(&f, "..", dir, 2);
		for (struct dentry *d = dir->first; d && !f.full; d = d->next)
			if (d->off > (uint64_t)off)
				put_entry(&f, d->name, get_inode(d->ino), d->off);
	}
	pthread_mutex_unlock(&lock);
	if (rc)
		fuse_reply_err(req, rc);
	else
		fuse_reply_buf(req, f.buf, f.len);
	free(f.buf);
}

static void nl_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

static void nl_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

static void nl_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	nl_fsync(req, ino, datasync, fi);
}

/* ENOSYS: the kernel remembers it per mount and asks no more. */
static void nl_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	(void)ino;
	(void)name;
	(void)size;
	fuse_reply_err(req, ENOSYS);
}

static void nl_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
			int flags)
{
	(void)ino;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fuse_reply_err(req, ENOSYS);
}

static const struct fuse_lowlevel_ops nl_ops = {
	.init = nl_init,
	.lookup = nl_lookup,
	.forget = nl_forget,
	.forget_multi = nl_forget_multi,
	.getattr = nl_getattr,
	.setattr = nl_setattr,
	.readlink = nl_readlink,
	.mknod = nl_mknod,
	.mkdir = nl_mkdir,
	.symlink = nl_symlink,
	.link = nl_link,
	.unlink = nl_unlink,
	.rmdir = nl_rmdir,
	.open = nl_open,
	.create = nl_create,
	.read = nl_read,
	.write = nl_write,
	.flush = nl_ok,
	.release = nl_ok,
	.fsync = nl_fsync,
	.opendir = nl_opendir,
	.releasedir = nl_ok,
	.readdir = nl_readdir,
	.readdirplus = nl_readdirplus,
	.fsyncdir = nl_fsyncdir,
	.getxattr = nl_getxattr,
	.setxattr = nl_setxattr,
	/* listxattr, removexattr: unset, so libfuse answers ENOSYS too */
};

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts cl;
	struct fuse_session *se = NULL;
	int ret = 1;

	if (fuse_opt_parse(&args, &opts, opt_spec, NULL) == -1 || fuse_parse_cmdline(&args, &cl) != 0)
		return 1;
	if (cl.show_help || !cl.mountpoint) {
		printf("usage: %s MOUNTPOINT [options]\n\n"
		       "    -o writeback           the kernel's writeback cache on\n"
		       "    -o uring               FUSE over io_uring when the kernel offers it\n\n", argv[0]);
		fuse_cmdline_help();
		fuse_lowlevel_help();
		ret = !cl.show_help;
		goto out_args;
	}
	fuse_opt_add_arg(&args, "-ofsname=bench_nullfs,subtype=bench_nullfs,default_permissions");

	struct inode *root = new_inode(S_IFDIR | 0755, NULL);
	if (!root || root->ino != FUSE_ROOT_ID || grow_buckets())
		goto out_args;

	static const struct fuse_custom_io io = { .read = io_read, .writev = io_writev };
	se = fuse_session_new(&args, &nl_ops, sizeof nl_ops, NULL);
	if (!se)
		goto out_args;
	if (fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, cl.mountpoint) != 0)
		goto out_session;
	/* -o uring: pagededupfs's /dev/fuse hooks, which also ask for
	 * KILLPRIV_V2 and start the rings once the kernel took the INIT reply */
	if (opts.uring ? kernel_io_install(se) != 0 : fuse_session_custom_io(se, &io, fuse_session_fd(se)) != 0)
		goto out_unmount;
	uring_io_configure(opts.uring, 0);
	if (fuse_daemonize(cl.foreground) != 0)
		goto out_unmount;
	/* SIGUSR1 prints the counts: blocked in every thread (the loop's
	 * workers inherit the mask) but the dumper, which waits for it. */
	static sigset_t usr1;
	pthread_t dumper;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	if (pthread_create(&dumper, NULL, count_dumper, &usr1))
		goto out_unmount;
	pthread_detach(dumper);
	ret = kernel_io_serve(se, &cl); /* the loop pagededupfs runs */
	if (!opts.uring)
		print_counts();
out_unmount:
	fuse_session_unmount(se);
	uring_io_stop();
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_args:
	free(cl.mountpoint);
	fuse_opt_free_args(&args);
	return ret ? 1 : 0;
}
