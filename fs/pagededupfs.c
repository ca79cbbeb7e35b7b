/* pagededupfs - the FUSE daemon: a page archive that looks like a directory.
 *
 * Low-level (inode-based) libfuse API, multi-threaded; requests arrive
 * through /dev/fuse or, where the kernel offers it, per-CPU io_uring queues
 * (kernel_io.c, uring_io.c). Every operation replies before it returns,
 * which the io_uring path relies on. Node ids are the store's inode
 * numbers (the root is 1), so no translation table is needed;
 * the kernel's lookup counts are kept in core's live-inode table, which
 * frees nothing the kernel still references. Every operation decodes the
 * request, makes one call into core/, and replies: the dedup logic lives in
 * core/, not here.
 *
 * The trade-off that matters: pages are sealed (fingerprinted and
 * de-duplicated) in FLUSH, where close() still waits, so an error reaches
 * the writer and a read after close() sees the sealed state. The kernel's
 * writeback cache is left off: with it the kernel owns size and mtime and
 * writes may trail the last close; without it every write reaches the
 * daemon in order, which is what lets MD5 be streamed as the bytes arrive.
 */
#define FUSE_USE_VERSION 314

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "kernel_io.h"
#include "archive/fallocate.h"
#include "archive/ns.h"
#include "archive/ns_later.h"
#include "archive/openfile.h"
#include "pdfs.h"
#include "archive/query.h"
#include "archive/stats.h"
#include "store/store.h"
#include "archive/xattr.h"

static struct pdfs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct store *st_of(fuse_req_t req)
{
	return fs_of(req)->st;
}

/* ---- conversions ----------------------------------------------------- */

static void to_stat(const struct inode *in, struct stat *sb)
{
	memset(sb, 0, sizeof *sb);
	sb->st_ino = in->ino;
	sb->st_mode = in->mode;
	sb->st_nlink = in->nlink;
	sb->st_uid = in->uid;
	sb->st_gid = in->gid;
	sb->st_rdev = in->rdev;
	sb->st_size = (off_t)in->size;
	sb->st_blksize = 4096;
	sb->st_blocks = (blkcnt_t)((in->size + 511) / 512);
	sb->st_atim = (struct timespec){ in->atime.sec, in->atime.nsec };
	sb->st_mtim = (struct timespec){ in->mtime.sec, in->mtime.nsec };
	sb->st_ctim = (struct timespec){ in->ctime.sec, in->ctime.nsec };
}

static void reply_entry(fuse_req_t req, const struct inode *in)
{
	struct pdfs *fs = fs_of(req);
	struct fuse_entry_param e = { .ino = in->ino, .attr_timeout = fs->attr_timeout,
				      .entry_timeout = fs->entry_timeout };
	to_stat(in, &e.attr);
	live_ref(fs->st, in->ino, 1);
	if (fuse_reply_entry(req, &e) == -ENOENT)
		live_forget(fs->st, in->ino, 1); /* the request was interrupted */
}

static void reply_attr(fuse_req_t req, const struct inode *in)
{
	struct stat sb;
	to_stat(in, &sb);
	fuse_reply_attr(req, &sb, fs_of(req)->attr_timeout);
}

/* The caller's credentials. Its supplementary groups cost a read of
 * /proc/PID/status, so only permission filters ask for them. */
struct cred_buf {
	struct pd_cred cred;
	uint32_t groups[64];
};

static const struct pd_cred *caller(fuse_req_t req, struct cred_buf *b, bool with_groups)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	b->cred.uid = ctx->uid;
	b->cred.gid = ctx->gid;
	b->cred.ngroups = 0;
	b->cred.groups = b->groups;
	if (!with_groups)
		return &b->cred;
	gid_t g[64];
	int n = fuse_req_getgroups(req, 64, g);
	for (int i = 0; i < n && i < 64; i++)
		b->groups[b->cred.ngroups++] = g[i];
	return &b->cred;
}

static struct pd_file *file_of(struct fuse_file_info *fi)
{
	return (struct pd_file *)(uintptr_t)fi->fh;
}

/* ---- lifecycle ------------------------------------------------------- */

static void pd_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/* open(O_TRUNC) arrives as one request: no separate truncate that
	 * would seal an empty file first. */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	/* Not the first protocol for killing setuid/setgid: kernel_io.c
	 * negotiates the second (KILLPRIV_V2), which libfuse 3.14 cannot, and
	 * kill_suidgid() and ns_setattr() honour it. */
	conn->want &= ~(unsigned)FUSE_CAP_HANDLE_KILLPRIV;
	/* Requests are read with read(2) through kernel_io.c, which sees the
	 * kill bits; a spliced read would bypass it. */
	conn->want &= ~(unsigned)FUSE_CAP_SPLICE_READ;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
}

/* ---- names ----------------------------------------------------------- */

static void pd_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct inode in;
	uint64_t epoch = file_attr_epoch(st_of(req));
	int rc = ns_lookup(st_of(req), parent, name, &in);
	if (rc == -ENOENT) {
		struct fuse_entry_param e = { .ino = 0, .entry_timeout = fs_of(req)->negative_timeout };
		fuse_reply_entry(req, &e);
		return;
	}
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	file_merge_attr(st_of(req), &in, epoch);
	reply_entry(req, &in);
}

static void pd_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	live_forget(st_of(req), ino, nlookup);
	fuse_reply_none(req);
}

static void pd_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		live_forget(st_of(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		      const char *target)
{
	struct cred_buf cb;
	struct inode in;
	int rc = ns_mknode(st_of(req), parent, name, mode, rdev, target, caller(req, &cb, false), &in);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_entry(req, &in);
}

static void pd_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	make_node(req, parent, name, mode, rdev, NULL);
}

static void pd_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL);
}

static void pd_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make_node(req, parent, name, S_IFLNK | 0777, 0, link);
}

static void pd_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct inode in;
	uint64_t epoch = file_attr_epoch(st_of(req));
	int rc = ns_link(st_of(req), ino, newparent, newname, &in);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	file_merge_attr(st_of(req), &in, epoch);
	reply_entry(req, &in);
}

static void pd_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	uint64_t ino;
	bool gone;
	fuse_reply_err(req, -ns_unlink(st_of(req), parent, name, &ino, &gone));
}

static void pd_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	uint64_t ino;
	fuse_reply_err(req, -ns_rmdir(st_of(req), parent, name, &ino));
}

static void pd_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	uint64_t replaced;
	bool gone;
	fuse_reply_err(req, -ns_rename(st_of(req), parent, name, newparent, newname, flags, &replaced, &gone));
}

static void pd_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PD_SYMLINK_MAX + 1];
	size_t len;
	int rc = ns_readlink(st_of(req), ino, buf, PD_SYMLINK_MAX, &len);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	buf[len] = 0;
	fuse_reply_readlink(req, buf);
}

/* ---- attributes ------------------------------------------------------ */

static void pd_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct inode in;
	int rc = file_getattr(st_of(req), ino, &in);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_attr(req, &in);
}

static struct pd_time from_ts(struct timespec ts)
{
	return (struct pd_time){ ts.tv_sec, (uint32_t)ts.tv_nsec };
}

struct kill_ctx {
	fuse_req_t req;
	struct cred_buf cb;
};

static const struct pd_cred *kill_cred(void *p)
{
	struct kill_ctx *k = p;
	return caller(k->req, &k->cb, true);
}

/* A write or open(O_TRUNC) by a caller without CAP_FSETID (kernel_io.h):
 * setuid/setgid go. The kernel keeps the mode it cached and refreshes only
 * size and times after a write, so its cached attributes are dropped when a
 * bit went. */
static int kill_suidgid(fuse_req_t req, fuse_ino_t ino)
{
	struct kill_ctx k = { .req = req };
	int rc = ns_kill_suidgid(st_of(req), ino, kill_cred, &k);
	if (rc <= 0)
		return rc;
	fuse_lowlevel_notify_inval_inode(fs_of(req)->se, ino, -1, 0);
	return 0;
}

static void pd_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct store *st = st_of(req);
	int rc = 0;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		rc = file_truncate(st, ino, (uint64_t)attr->st_size, fi ? file_of(fi) : NULL);
		if (!rc && kernel_io_kill_suidgid())
			rc = kill_suidgid(req, ino);
	}
	struct ns_setattr sa = { 0 };
	if (to_set & FUSE_SET_ATTR_MODE) {
		sa.valid |= NS_SET_MODE;
		sa.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		sa.valid |= NS_SET_UID;
		sa.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		sa.valid |= NS_SET_GID;
		sa.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		sa.valid |= NS_SET_ATIME_NOW;
	else if (to_set & FUSE_SET_ATTR_ATIME) {
		sa.valid |= NS_SET_ATIME;
		sa.atime = from_ts(attr->st_atim);
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		sa.valid |= NS_SET_MTIME_NOW;
	else if (to_set & FUSE_SET_ATTR_MTIME) {
		sa.valid |= NS_SET_MTIME;
		sa.mtime = from_ts(attr->st_mtim);
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		sa.valid |= NS_SET_CTIME;
		sa.ctime = from_ts(attr->st_ctim);
	}
	struct inode in;
	/* a utime right after a close (wget, cp -p, tar) waits behind the
	 * close's seal instead of committing it (core/archive/seal_later.h) */
	bool waits = !rc && !(to_set & FUSE_SET_ATTR_SIZE) && file_set_times_later(st, ino, &sa) == 0;
	if (!rc && !waits && (sa.valid || !(to_set & FUSE_SET_ATTR_SIZE)))
		rc = ns_setattr(st, ino, &sa, &in);
	if (!rc && !waits && (sa.valid & (NS_SET_MTIME | NS_SET_MTIME_NOW)))
		file_set_mtime(st, ino, in.mtime);
	if (!rc)
		rc = file_getattr(st, ino, &in);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_attr(req, &in);
}

/* ---- files ----------------------------------------------------------- */

static void pd_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pd_file *f;
	bool keep;
	int rc = file_open(st_of(req), ino, fi->flags, &f, &keep);
	if (!rc && (fi->flags & O_TRUNC) && kernel_io_kill_suidgid() && (rc = kill_suidgid(req, ino)))
		file_release(f);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	fi->keep_cache = keep;
	/* A read-only handle has nothing to seal at close(): no FLUSH round
	 * trip for it (FOPEN_NOFLUSH; the kernel still sends RELEASE). */
	fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY;
	if (fuse_reply_open(req, fi) == -ENOENT)
		file_release(f);
}

static void pd_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct store *st = st_of(req);
	struct cred_buf cb;
	struct inode in;
	uint64_t epoch = file_attr_epoch(st);
	int rc = ns_create_file(st, parent, name, mode, caller(req, &cb, false), &in);
	if (rc == -EEXIST && !(fi->flags & O_EXCL))
		rc = ns_lookup(st, parent, name, &in); /* created meanwhile: open it */
	if (!rc && !S_ISREG(in.mode))
		rc = S_ISDIR(in.mode) ? -EISDIR : -EEXIST;
	struct pd_file *f = NULL;
	bool keep;
	if (!rc)
		rc = file_open(st, in.ino, fi->flags, &f, &keep);
	if (!rc && (fi->flags & O_TRUNC) && kernel_io_kill_suidgid() && !(rc = kill_suidgid(req, in.ino)))
		rc = ns_getattr(st, in.ino, &in);
	if (!rc)
		file_merge_attr(st, &in, epoch);
	if (rc) {
		if (f)
			file_release(f);
		fuse_reply_err(req, -rc);
		return;
	}
	struct pdfs *fs = fs_of(req);
	struct fuse_entry_param e = { .ino = in.ino, .attr_timeout = fs->attr_timeout,
				      .entry_timeout = fs->entry_timeout };
	to_stat(&in, &e.attr);
	fi->fh = (uintptr_t)f;
	live_ref(st, in.ino, 1);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		file_release(f);
		live_forget(st, in.ino, 1);
	}
}

static void pd_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	char *buf = malloc(size ? size : 1);
	size_t got;
	int rc = buf ? file_read(file_of(fi), buf, size, (uint64_t)off, &got) : -ENOMEM;
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, got);
	free(buf);
}

static void pd_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	size_t done;
	int rc = file_write(file_of(fi), buf, size, (uint64_t)off, &done);
	if (!rc && done && kernel_io_kill_suidgid())
		rc = kill_suidgid(req, ino);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_write(req, done);
}

/* An error that reaches a writer's close() goes to the log (syslog in the
 * background) with the page's path: a crawler may not report it. */
static void log_close_error(fuse_req_t req, fuse_ino_t ino, int rc)
{
	char path[4096];
	if (query_path(st_of(req), ino, path, sizeof path) || !*path)
		snprintf(path, sizeof path, "(inode %llu, no name left)", (unsigned long long)ino);
	fprintf(stderr, "pagededupfs: %s: close() failed: %s\n", path, strerror(-rc));
}

/* A close() that failed: its bytes were refused (core/ dropped them, or a
 * writer still open will seal or drop them). The kernel's page cache holds
 * them, since every write went through it, and so may its attributes (a
 * size they grew). Both go before the error reaches the caller, so that
 * no read, through a descriptor opened before or after, is served the
 * refused bytes from the kernel's cache; a new open alone would not reach
 * a reader already open. The notification goes through /dev/fuse on both
 * transports and the kernel has dropped the pages when it returns; it is
 * sent with no lock of core/ held, since the kernel waits there for pages
 * that reads in flight hold locked, and those reads are served by other
 * threads. Costs nothing unless close() fails. */
static void close_failed(fuse_req_t req, fuse_ino_t ino, int rc)
{
	log_close_error(req, ino, rc);
	fuse_lowlevel_notify_inval_inode(fs_of(req)->se, ino, 0, 0);
}

static void pd_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int rc = file_flush(file_of(fi));
	if (rc)
		close_failed(req, ino, rc);
	fuse_reply_err(req, -rc);
}

static void pd_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int rc = file_release(file_of(fi));
	if (rc)
		close_failed(req, ino, rc);
	fuse_reply_err(req, -rc);
}

static void pd_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)ino;
	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	fuse_reply_err(req, -file_fallocate(st_of(req), file_of(fi), mode, (uint64_t)off, (uint64_t)len));
}

static void pd_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_err(req, -file_fsync(file_of(fi), datasync));
}

/* ---- directories ----------------------------------------------------- */

/* A directory listing is read in one transaction and sent after it ends:
 * readdirplus entries of files being written get their staged size and
 * times merged in first (the kernel would otherwise cut an open file back
 * to its sealed size), which must not happen inside a read transaction. */
struct dirent_out {
	char name[PD_NAME_MAX + 1];
	uint64_t ino, off;
	uint32_t type;
	struct inode attr;
};

struct dirbuf {
	fuse_req_t req;
	bool plus;
	size_t size, used; /* bytes the reply will take */
	struct dirent_out *v;
	size_t n, cap;
};

static int collect_entry(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t type,
			 uint64_t next_off, const struct inode *attr)
{
	struct dirbuf *d = ctx;
	struct dirent_out e = { .ino = ino, .off = next_off, .type = type };
	memcpy(e.name, name, len);
	e.name[len] = 0;
	size_t need = d->plus ? fuse_add_direntry_plus(d->req, NULL, 0, e.name, NULL, 0)
			      : fuse_add_direntry(d->req, NULL, 0, e.name, NULL, 0);
	if (d->used + need > d->size)
		return 1; /* full: this entry comes in the next call */
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 32;
		struct dirent_out *p = realloc(d->v, cap * sizeof *p);
		if (!p)
			return 1;
		d->v = p;
		d->cap = cap;
	}
	if (attr)
		e.attr = *attr;
	d->v[d->n++] = e;
	d->used += need;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct pdfs *fs = fs_of(req);
	struct dirbuf d = { req, plus, size, 0, NULL, 0, 0 };
	uint64_t epoch = file_attr_epoch(fs->st);
	char *buf = malloc(size);
	int rc = buf ? ns_readdir(fs->st, ino, (uint64_t)off, plus, collect_entry, &d) : -ENOMEM;
	if (rc) {
		fuse_reply_err(req, -rc);
		goto out;
	}
	size_t len = 0;
	for (size_t i = 0; i < d.n; i++) {
		struct dirent_out *e = &d.v[i];
		bool dot = !strcmp(e->name, ".") || !strcmp(e->name, "..");
		if (plus) {
			struct fuse_entry_param ep = { .ino = e->ino, .attr_timeout = fs->attr_timeout,
						       .entry_timeout = fs->entry_timeout };
			file_merge_attr(fs->st, &e->attr, epoch);
			to_stat(&e->attr, &ep.attr);
			len += fuse_add_direntry_plus(req, buf + len, size - len, e->name, &ep, (off_t)e->off);
			if (!dot)
				live_ref(fs->st, e->ino, 1); /* the kernel counts a lookup */
		} else {
			struct stat sb = { .st_ino = e->ino, .st_mode = e->type };
			len += fuse_add_direntry(req, buf + len, size - len, e->name, &sb, (off_t)e->off);
		}
	}
	fuse_reply_buf(req, buf, len);
out:
	free(d.v);
	free(buf);
}

static void pd_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int rc = live_pin(st_of(req), ino);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_open(req, fi);
}

static void pd_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	fuse_reply_err(req, -live_unpin(st_of(req), ino));
}

static void pd_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

static void pd_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

static void pd_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	fuse_reply_err(req, -ns_sync(st_of(req)));
}

static void pd_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	struct store *st = st_of(req);
	if (fstatvfs(st->dirfd, &sv)) {
		fuse_reply_err(req, errno);
		return;
	}
	sv.f_namemax = PD_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* ---- extended attributes --------------------------------------------- */

static void reply_value(fuse_req_t req, const char *val, size_t len, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

/* A name in the user namespace, the only one stored: "user." and at least
 * one byte more ("user." alone names nothing: EINVAL, as on ext4). */
static int user_xattr_name(const char *name)
{
	if (strncmp(name, "user.", 5) != 0)
		return -EOPNOTSUPP;
	return name[5] ? 0 : -EINVAL;
}

static int dedup_attr(fuse_req_t req, fuse_ino_t ino, const char *name, char *buf, size_t *len)
{
	struct store *st = st_of(req);
	struct cred_buf cb;
	if (!strcmp(name, "user.dedup.md5"))
		return query_md5(st, ino, buf, len);
	if (!strcmp(name, "user.dedup.refcount"))
		return query_refcount(st, ino, buf, len);
	if (!strcmp(name, "user.dedup.twins"))
		return query_twins(st, ino, caller(req, &cb, true), buf, len);
	if (!strcmp(name, "user.dedup.near"))
		return query_near(st, ino, caller(req, &cb, true), buf, len);
	if (!strcmp(name, "user.dedup.near.abs")) /* the mountpoint before each path */
		return query_near_prefixed(st, ino, caller(req, &cb, true),
					   strcmp(fs_of(req)->mountpoint, "/") ? fs_of(req)->mountpoint : "", buf, len);
	if (!strcmp(name, "user.dedup.simhash"))
		return query_simhash(st, ino, buf, len);
	if (!strcmp(name, QUERY_ATTR_STATS))
		return query_stats(st, ino, STATS_JSON, buf, len);
	if (!strcmp(name, QUERY_ATTR_STATS_TEXT))
		return query_stats(st, ino, STATS_TEXT, buf, len);
	if (!strcmp(name, QUERY_ATTR_STATS_HUMAN))
		return query_stats(st, ino, STATS_HUMAN, buf, len);
	return -ENODATA;
}

static void pd_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	size_t len = 0;
	int rc;
	if (query_is_dedup_attr(name)) {
		char *buf = malloc(QUERY_MAX);
		rc = buf ? dedup_attr(req, ino, name, buf, &len) : -ENOMEM;
		if (rc)
			fuse_reply_err(req, -rc);
		else
			reply_value(req, buf, len, size);
		free(buf);
		return;
	}
	if ((rc = user_xattr_name(name))) {
		/* Only user.* is stored; the kernel asks for security.capability
		 * before every write, so answer without a transaction. */
		fuse_reply_err(req, rc == -EOPNOTSUPP ? ENODATA : -rc);
		return;
	}
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = xattr_get(st_of(req), ino, name, buf, size, &len);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_value(req, buf, len, size);
	free(buf);
}

static int xattr_name_allowed(const char *name)
{
	/* Only the user namespace is stored; the dedup attributes are computed. */
	if (query_is_dedup_attr(name))
		return -EPERM;
	return user_xattr_name(name);
}

/* Names the store itself writes (fsck's marks on recovered pages,
 * user.pagededup.lost_*): a client may read them and, as the file's
 * owner, remove them once the page is fetched again, but never set them,
 * so that no one can make a page look recovered. */
static int xattr_name_settable(const char *name)
{
	if (!strncmp(name, XATTR_RESERVED_PREFIX, strlen(XATTR_RESERVED_PREFIX)))
		return -EPERM;
	return xattr_name_allowed(name);
}

static void pd_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
			int flags)
{
	int rc = xattr_name_settable(name);
	if (!rc)
		rc = xattr_set(st_of(req), ino, name, value, size, flags);
	fuse_reply_err(req, -rc);
}

static void pd_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	size_t len = 0;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int rc = xattr_list(st_of(req), ino, buf, size, &len);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_value(req, buf, len, size);
	free(buf);
}

static void pd_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	int rc = xattr_name_allowed(name);
	if (!rc)
		rc = xattr_remove(st_of(req), ino, name);
	fuse_reply_err(req, -rc);
}

const struct fuse_lowlevel_ops pd_ops = {
	.init = pd_init,
	.lookup = pd_lookup,
	.forget = pd_forget,
	.forget_multi = pd_forget_multi,
	.getattr = pd_getattr,
	.setattr = pd_setattr,
	.readlink = pd_readlink,
	.mknod = pd_mknod,
	.mkdir = pd_mkdir,
	.symlink = pd_symlink,
	.link = pd_link,
	.unlink = pd_unlink,
	.rmdir = pd_rmdir,
	.rename = pd_rename,
	.open = pd_open,
	.create = pd_create,
	.read = pd_read,
	.write = pd_write,
	.flush = pd_flush,
	.release = pd_release,
	.fsync = pd_fsync,
	.fallocate = pd_fallocate,
	.opendir = pd_opendir,
	.releasedir = pd_releasedir,
	.readdir = pd_readdir,
	.readdirplus = pd_readdirplus,
	.fsyncdir = pd_fsyncdir,
	.statfs = pd_statfs,
	.getxattr = pd_getxattr,
	.setxattr = pd_setxattr,
	.listxattr = pd_listxattr,
	.removexattr = pd_removexattr,
};
