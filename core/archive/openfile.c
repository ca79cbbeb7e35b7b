/* openfile.c - open files: the file state of a pinned inode (its staged
 * bytes, its open blob) and the file operations. The design is in
 * openfile.h; the live-inode table the states hang on is live.c. */
#include "openfile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "base/fdio.h"
#include "base/fp.h"
#include "live_int.h"
#include "ns.h"
#include "ns_later.h"
#include "paths.h"
#include "seal.h"
#include "seal_later.h"
#include "store/store.h"

struct pd_file {
	struct store *st;
	struct live *li;
	int flags;
	bool wrote;            /* it wrote or truncated: its close() seals */
	bool unflushed;        /* since its last close(): counted in li->unflushed */
};

/* ---- file state (entry mutex held) ----------------------------------- */

static int load(struct store *st, struct live *li)
{
	if (li->loaded)
		return 0;
	struct inode in;
	int rc = ns_getattr(st, li->ino, &in);
	if (rc)
		return rc;
	if (!S_ISREG(in.mode))
		return S_ISDIR(in.mode) ? -EISDIR : -EINVAL;
	li->has_blob = in.flags & INODE_HAS_BLOB;
	li->blob = in.blob;
	li->size = in.size;
	li->mtime = in.mtime;
	li->loaded = true;
	return 0;
}

static int first_path(void *ctx, const char *path, size_t len)
{
	snprintf(ctx, 512, "%.*s", (int)len, path);
	return 1; /* one is enough for the log */
}

/* A read found blob k damaged: say so with a path and the blob, and mark
 * the record, so that the next write of these bytes heals it (blob.h). */
static void report_damage(struct store *st, uint64_t ino, const struct blobkey *k, int rc)
{
	char path[512] = "(no name left)", name[BLOBKEY_NAME_MAX];
	MDB_txn *txn;
	if (store_read_begin(st, &txn) == 0) {
		path_names(txn, st, ino, NULL, first_path, path);
		store_read_end(st, txn);
	}
	blobkey_name(k, name);
	fprintf(stderr, "pagededupfs: %s (inode %llu): blob %s cannot be read intact (%s); reads give EIO until the same bytes are written again (unmounted, 'pagededup fsck --deep' names every damaged record)\n",
		path, (unsigned long long)ino, name, strerror(-rc));
	blob_mark_bad(st, k);
}

/* Decode the chunks of a lazily opened page that cover [off, off+len)
 * into its memory file (all of them when len is UINT64_MAX). */
static int lazy_fill(struct store *st, struct live *li, uint64_t off, uint64_t len)
{
	if (!li->lazy_done)
		return 0;
	uint64_t csize = 1ull << li->lazy_shift, size = li->lazy_rec.size;
	if (len == UINT64_MAX || len > size - off)
		len = size - off;
	if (len == 0)
		return 0;
	uint32_t first = (uint32_t)(off >> li->lazy_shift), last = (uint32_t)((off + len - 1) >> li->lazy_shift);
	char *buf = NULL;
	int rc = 0;
	for (uint32_t i = first; i <= last && !rc; i++) {
		if (li->lazy_done[i])
			continue;
		if (!buf && !(buf = malloc((size_t)csize))) {
			rc = -ENOMEM;
			break;
		}
		uint64_t from = (uint64_t)i * csize;
		size_t n = (size_t)(size - from < csize ? size - from : csize);
		if (!(rc = blob_read_range(st, &li->blob, &li->lazy_rec, from, n, buf)) &&
		    !(rc = fd_pwrite_all(li->blob_fd, buf, n, from)))
			li->lazy_done[i] = 1;
	}
	free(buf);
	if (rc == -EIO)
		report_damage(st, li->ino, &li->blob, rc);
	return rc;
}

/* Open li's blob for reading. whole: every byte is wanted (staging a copy);
 * otherwise a large packed page is set up for decoding by chunks as reads
 * reach them (lazy_fill), so that a read at an offset never decodes the
 * whole file. */

/* The largest page decoded into memory rather than into a memory file. */
#define PAGE_MEM_MAX (1u << 20)

/* Decode li's packed page r (one frame) into memory: 0, or 1 when it does
 * not fit in the budget (the caller decodes into a memory file), or the
 * read's error. */
static int decode_to_memory(struct store *st, struct live *li, const struct fprec *r)
{
	size_t len = (size_t)r->size, cap = len ? len : 1;
	if (r->size > PAGE_MEM_MAX || !staging_charge(st, cap))
		return 1;
	char *p = malloc(cap);
	int rc = p ? blob_read_packed(st, &li->blob, r, p) : -ENOMEM;
	if (rc) {
		free(p);
		staging_uncharge(st, cap);
		return rc == -ENOMEM || rc == -ENOSPC ? rc : -EIO;
	}
	li->page = p;
	li->page_len = len;
	return 0;
}

static void free_page(struct store *st, struct live *li)
{
	if (!li->page)
		return;
	free(li->page);
	staging_uncharge(st, li->page_len ? li->page_len : 1);
	li->page = NULL;
	li->page_len = 0;
}

static int open_blob(struct store *st, struct live *li, bool whole)
{
	if (li->page)
		return 0; /* one frame, decoded whole */
	if (li->blob_fd >= 0 && li->blob_verified)
		return whole ? lazy_fill(st, li, 0, UINT64_MAX) : 0;
	if (!li->has_blob)
		return -ENODATA;
	/* Never return bytes that are not the stored ones. */
	struct fprec r;
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = blob_get(txn, st, &li->blob, &r);
	store_read_end(st, txn);
	uint32_t nchunks = 0;
	unsigned shift = 0;
	if (!rc && li->blob_fd < 0 && !whole && (r.flags & FPREC_PACKED) && !(r.flags & FPREC_BAD) &&
	    blob_chunking(st, &r, &nchunks, &shift) == 0 && nchunks > 1) {
		int fd = memfd_create("pagededup-page", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)r.size)) {
			rc = -errno;
			if (fd >= 0)
				close(fd);
		} else if (!(li->lazy_done = calloc(nchunks, 1))) {
			close(fd);
			rc = -ENOMEM;
		} else {
			li->blob_fd = fd;
			li->lazy_chunks = nchunks;
			li->lazy_shift = shift;
			li->lazy_rec = r;
			li->blob_verified = true; /* each chunk is checked as it is decoded */
			return 0;
		}
	}
	if (!rc && li->blob_fd < 0 && !whole && (r.flags & FPREC_PACKED) && !(r.flags & FPREC_BAD)) {
		int m = decode_to_memory(st, li, &r);
		if (m <= 0) {
			rc = m;
			goto done;
		}
	}
	if (!rc && li->blob_fd < 0) {
		/* a packed page is decoded (and checked) here, once per open */
		int fd = blob_open_rec(st, &li->blob, &r);
		if (fd < 0)
			rc = fd;
		else
			li->blob_fd = fd;
	}
	if (!rc && !(r.flags & FPREC_PACKED))
		rc = blob_verify(li->blob_fd, &r);
done:
	if (rc == -ENOENT || rc == -EUCLEAN)
		rc = -EIO;
	if (rc == -EIO)
		report_damage(st, li->ino, &li->blob, rc);
	li->blob_verified = rc == 0;
	return rc;
}

static void close_blob(struct store *st, struct live *li)
{
	free_page(st, li);
	if (li->blob_fd >= 0)
		close(li->blob_fd);
	li->blob_fd = -1;
	li->blob_verified = false;
	free(li->lazy_done);
	li->lazy_done = NULL;
}

static int copy_range(int from, int to, uint64_t len)
{
	enum { CHUNK = 1 << 18 };
	loff_t in = 0, out = 0;
	while ((uint64_t)in < len) {
		ssize_t n = copy_file_range(from, &in, to, &out, (size_t)(len - (uint64_t)in), 0);
		if (n > 0)
			continue;
		if (n == 0)
			return -EIO; /* the blob is shorter than its record */
		if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
			return -errno;
		break; /* fall back to plain copies */
	}
	char *buf = (uint64_t)in < len ? malloc(CHUNK) : NULL;
	if ((uint64_t)in < len && !buf)
		return -ENOMEM;
	while ((uint64_t)in < len) {
		ssize_t n = pread(from, buf, CHUNK, in);
		if (n <= 0) {
			free(buf);
			return n < 0 ? -errno : -EIO;
		}
		if (pwrite(to, buf, (size_t)n, in) != n) {
			free(buf);
			return -errno;
		}
		in += n;
	}
	free(buf);
	return 0;
}

static int reset_hash(struct live *li)
{
	int rc = li->hash.md5 ? fp_reset(&li->hash) : fp_init(&li->hash);
	li->hash_ok = rc == 0;
	li->hash_next = 0;
	return rc;
}

/* Give li staged bytes holding its current content (or none, when the
 * caller is about to truncate to zero). */
static int resolve_pending(struct store *st, struct live *li);

static int stage(struct store *st, struct live *li, bool keep_content)
{
	/* bytes a waiting seal reads are not changed under it */
	int rc = resolve_pending(st, li);
	if (rc)
		return rc;
	if (staging_held(li))
		return 0;
	if (!(keep_content && li->has_blob && li->size > 0)) {
		li->in_mem = true;
		li->size = 0;
		return reset_hash(li);
	}
	rc = open_blob(st, li, true);
	if (rc)
		return rc;
	li->hash_ok = false;
	if (li->page && li->page_len != li->size)
		return -EIO;
	if (staging_reserve(st, li, li->size) == 0) {
		li->in_mem = true;
		if (li->page) {
			memcpy(li->mem, li->page, li->page_len);
			return 0;
		}
		size_t got = 0;
		while (got < li->size) {
			ssize_t n = pread(li->blob_fd, li->mem + got, (size_t)li->size - got, (off_t)got);
			if (n <= 0) {
				staging_drop_mem(st, li);
				return n < 0 ? -errno : -EIO;
			}
			got += (size_t)n;
		}
		return 0;
	}
	if ((rc = staging_file_open(st, li)))
		return rc;
	if ((rc = li->page ? fd_pwrite_all(li->staging_fd, li->page, li->page_len, 0)
			   : copy_range(li->blob_fd, li->staging_fd, li->size)))
		staging_file_close(st, li);
	return rc;
}

void file_unstage(struct store *st, struct live *li)
{
	resolve_pending(st, li); /* what waits is the store's before its bytes go */
	if (li->in_mem)
		staging_drop_mem(st, li);
	if (li->staging_fd >= 0)
		staging_file_close(st, li);
	li->dirty = false;
}

static int fingerprint(struct live *li, struct fp *fp)
{
	if (li->hash_ok && li->hash_next == li->size)
		return fp_final(&li->hash, fp);
	if (li->in_mem)
		return fp_of_buf(li->mem, (size_t)li->size, fp);
	return fp_of_fd(li->staging_fd, fp);
}

/* Drop staged bytes that could not be sealed: the file is again what the
 * store holds. Its size, blob and mtime are read anew from the inode (a
 * handle opened meanwhile reads with them; if that read fails, the next
 * open tries again), and the kernel's cached pages, which hold the dropped
 * bytes, are not kept at the next open. */
static void discard_staged(struct store *st, struct live *li)
{
	file_unstage(st, li);
	li->ref->kcache = false;
	li->loaded = false;
	(void)load(st, li);
}

/* The seal committed: the file refers to blob res->key of size bytes. */
static void sealed(struct store *st, struct live *li, const struct seal_result *res, uint64_t size)
{
	close_blob(st, li);
	if (li->in_mem) {
		if (res->given) /* the signer frees it */
			li->mem = NULL;
		staging_drop_mem(st, li);
	} else if (res->dup) {
		close(li->staging_fd);
	} else {
		free(li->lazy_done);
		li->lazy_done = NULL;
		li->blob_fd = li->staging_fd; /* the staged file is the blob now */
		li->blob_verified = true;
	}
	li->staging_fd = -1;
	li->dirty = false;
	li->atime_set = false;
	li->has_blob = true;
	li->blob = res->key;
	li->size = size;
	/* Every byte reached the kernel's page cache through its writes. */
	li->ref->kcache = true;
	li->ref->kcache_key = res->key;
}

static int seal(struct store *st, struct live *li, bool may_wait);

/* The seal of li that waits for its batch (seal_later.h), if any, done
 * with (entry mutex held): committed now if its batch has not run, and
 * the bytes in memory go as after a seal at close(). One that failed in
 * its batch, after its close() returned, is said and tried again. */
static int resolve_pending(struct store *st, struct live *li)
{
	struct seal_later_page *p = li->pending;
	if (!p)
		return 0;
	struct seal_result res;
	int rc = seal_later_wait(st, p, &res);
	li->pending = NULL;
	seal_later_put(p);
	if (!rc) {
		res.given = false; /* the signer was handed a copy: li->mem is the file's */
		sealed(st, li, &res, li->size);
		return 0;
	}
	fprintf(stderr, "pagededupfs: inode %llu: the seal of a page whose close() had returned failed in its batch (%s); sealing it again\n",
		(unsigned long long)li->ino, strerror(-rc));
	li->dirty = true;
	if ((rc = seal(st, li, false)))
		fprintf(stderr, "pagededupfs: inode %llu: the page could not be sealed again (%s); its bytes stay staged for the next close()\n",
			(unsigned long long)li->ino, strerror(-rc));
	return rc;
}

/* Seal the staged bytes: they become a (new or shared) blob. may_wait: a
 * close() of a page in memory may leave the commit to a later batch
 * (seal_later.h). */
static int seal(struct store *st, struct live *li, bool may_wait)
{
	int rc = resolve_pending(st, li);
	if (rc)
		return rc;
	struct fp fp;
	rc = fingerprint(li, &fp);
	li->hash_ok = false;
	/* The hash state (about 1 KB with OpenSSL's) is needed only while the
	 * file is written; live entries of closed files stay for as long as
	 * the kernel caches their inodes. */
	if (li->hash.md5)
		fp_free(&li->hash);
	if (rc)
		return rc;
	if (may_wait && li->in_mem) {
		struct seal_later_page *p;
		rc = seal_later_queue(st, li->ino, li->mem ? li->mem : "", &fp, li->mtime, li->ctime, &p);
		if (!rc) {
			li->pending = p; /* the bytes stay, staged and clean, until it is resolved */
			li->dirty = false;
			li->size = fp.size;
			if (seal_later_full(st))
				store_settle(st); /* past the bound this close() commits the batch */
			return 0;
		}
		if (rc != -EAGAIN)
			return rc;
	}
	struct seal_result res;
	struct seal_src src = { li->in_mem ? (li->mem ? li->mem : "") : NULL, li->in_mem ? li->mem : NULL,
				li->staging, li->staging_fd };
	if ((rc = seal_staged(st, li->ino, &src, &fp, li->mtime, li->ctime, &res)))
		return rc;
	sealed(st, li, &res, fp.size);
	return 0;
}

void file_resolve_sealed(struct store *st, bool wait)
{
	struct seal_later_page *list = seal_later_take_done(st);
	while (list) {
		struct seal_later_page *p = list;
		list = seal_later_next(p);
		struct live_ino *e = live_pin_entry(st, seal_later_ino(p), true);
		bool kept = false;
		if (e) {
			struct live *li = e->state;
			if (wait)
				pthread_mutex_lock(&li->mu);
			if (!wait && (seal_later_failed(p) || pthread_mutex_trylock(&li->mu))) {
				kept = true; /* its owner holds it: the next call */
			} else {
				/* a utime still waiting behind it: the state answers
				 * its times until that commits too */
				if (li->pending == p && !seal_later_failed(p) && !seal_later_settled(p))
					kept = true;
				else if (li->pending == p)
					resolve_pending(st, li);
				pthread_mutex_unlock(&li->mu);
			}
			live_settle(st, e, 1, 0);
		}
		if (kept)
			seal_later_give_back(st, p);
		else
			seal_later_put(p);
	}
}

/* ---- the file operations --------------------------------------------- */

/* Refused bytes and the handles that may still seal them. Staged bytes are
 * the inode's, shared by its handles; a handle's close() (FLUSH) seals
 * them. When that seal fails, close() reports it and the bytes stay only
 * if another handle has written since its own last close(): that close
 * seals them, or drops them when it fails too. Otherwise they go at once.
 * Whether other handles are merely open does not matter: a reader cannot
 * seal, and the release of a handle already closed (which the kernel
 * sends without waiting, so it may still be on its way, or served by
 * another thread, when the next open() arrives) holds nothing to seal.
 * Counting open handles instead left the refused bytes staged whenever a
 * reader's release or a getattr held a pin at the failed flush, and a read
 * right after close() was served them. The marks below are kept under the
 * entry's mutex. */

/* f changed the file: its next close() seals. */
static void mark_written(struct pd_file *f)
{
	f->wrote = true;
	if (!f->unflushed) {
		f->unflushed = true;
		f->li->unflushed++;
	}
}

/* f's close() (or its release) reached the daemon: it no longer holds the
 * staged bytes for a later seal. */
static void mark_flushed(struct pd_file *f)
{
	if (f->unflushed) {
		f->unflushed = false;
		f->li->unflushed--;
	}
}

/* After a failed seal through f (its mark cleared): no other handle will
 * seal the staged bytes later. */
static bool no_writer_left(const struct live *li)
{
	return li->unflushed == 0;
}

uint64_t file_ino(const struct pd_file *f)
{
	return f->li->ino;
}

int file_open(struct store *st, uint64_t ino, int flags, struct pd_file **out, bool *keep_cache)
{
	struct pd_file *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	struct live *li = live_pin_state(st, ino);
	if (!li) {
		free(f);
		return -ENOMEM;
	}
	bool writer = (flags & O_ACCMODE) != O_RDONLY;
	f->st = st;
	f->li = li;
	f->flags = flags;
	pthread_mutex_lock(&li->mu);
	int rc = load(st, li);
	if (!rc && writer && (flags & O_TRUNC)) {
		if (!(rc = stage(st, li, false)))
			rc = staging_truncate(st, li, 0);
		if (!rc) {
			li->size = 0;
			reset_hash(li);
			li->dirty = true;
			li->mtime = li->ctime = pd_now();
			/* open(O_TRUNC) changed the file: its close seals (and,
			 * under sync_blobs, makes the empty page durable before
			 * close returns). */
			mark_written(f);
		}
	}
	*keep_cache = li->ref->kcache && !staging_held(li) && li->has_blob && blobkey_equal(&li->ref->kcache_key, &li->blob);
	if (!rc && li->has_blob && !staging_held(li)) {
		li->ref->kcache = true;
		li->ref->kcache_key = li->blob;
	}
	pthread_mutex_unlock(&li->mu);
	if (rc) {
		live_settle(st, li->ref, 1, 0);
		free(f);
		return rc;
	}
	*out = f;
	return 0;
}

int file_read(struct pd_file *f, void *buf, size_t size, uint64_t off, size_t *got)
{
	struct live *li = f->li;
	int rc = 0;
	*got = 0;
	pthread_mutex_lock(&li->mu);
	if (off >= li->size || size == 0)
		goto out;
	if (size > li->size - off)
		size = (size_t)(li->size - off);
	if (li->in_mem) {
		memcpy(buf, li->mem + off, size);
		*got = size;
		goto out;
	}
	int fd = li->staging_fd;
	if (fd < 0) {
		if ((rc = open_blob(f->st, li, false)) || (rc = lazy_fill(f->st, li, off, size)))
			goto out;
		if (li->page) {
			if (off + size > li->page_len) {
				rc = -EIO;
				goto out;
			}
			memcpy(buf, li->page + off, size);
			*got = size;
			goto out;
		}
		fd = li->blob_fd;
	}
	while (*got < size) {
		ssize_t n = pread(fd, (char *)buf + *got, size - *got, (off_t)(off + *got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0) {
			/* A file shorter than its size: sparse tail of a staged file
			 * reads as zeros; a short blob is damage. */
			if (fd == li->blob_fd) {
				rc = -EIO;
				break;
			}
			memset((char *)buf + *got, 0, size - *got);
			*got = size;
			break;
		}
		*got += (size_t)n;
	}
out:
	pthread_mutex_unlock(&li->mu);
	return rc;
}

static void hash_written(struct live *li, const void *buf, size_t n, uint64_t off)
{
	if (!li->hash_ok)
		return;
	if (off == li->hash_next) {
		fp_update(&li->hash, buf, n);
		li->hash_next += n;
	} else {
		li->hash_ok = false; /* not sequential: hash the file at seal */
	}
}

int file_write(struct pd_file *f, const void *buf, size_t size, uint64_t off, size_t *done)
{
	struct live *li = f->li;
	int rc;
	*done = 0;
	pthread_mutex_lock(&li->mu);
	if ((rc = stage(f->st, li, true)) || (rc = staging_write(f->st, li, buf, size, off)))
		goto out;
	hash_written(li, buf, size, off);
	*done = size;
	if (*done) {
		if (off + *done > li->size)
			li->size = off + *done;
		li->dirty = true;
		li->mtime = li->ctime = pd_now();
		mark_written(f);
	}
out:
	pthread_mutex_unlock(&li->mu);
	return rc;
}

/* Bytes that failed to seal and that no handle can seal later: the file is
 * again what the store holds, and the log says which page lost them. */
static void give_up_staged(struct store *st, struct live *li, const char *when, int rc)
{
	fprintf(stderr, "pagededupfs: inode %llu: sealing at %s failed: %s; its previous content stays\n",
		(unsigned long long)li->ino, when, strerror(-rc));
	discard_staged(st, li);
}

/* A close() of a file whose create still waits (ns_later.h: nothing was
 * written, so no seal committed it) commits it, so that what a close()
 * returned is there after a crash. */
static int settle_create(struct store *st, uint64_t ino)
{
	struct inode in;
	return ns_later_find(st, ino, &in) == NS_LATER_WAITS ? ns_later_settle(st) : 0;
}

int file_flush(struct pd_file *f)
{
	struct live *li = f->li;
	file_resolve_sealed(f->st, true); /* no entry's mutex held */
	pthread_mutex_lock(&li->mu);
	/* Only a handle that changed the file seals at close(): a shell's
	 * `>` opens, dup2()s and closes the first descriptor before writing. */
	int rc = 0;
	if (f->wrote) {
		mark_flushed(f);
		rc = li->dirty ? seal(f->st, li, true) : 0;
		/* close() reports the failure, and the bytes go now unless
		 * another writer's close is to come (above mark_written): an
		 * open() right after close() must read what the store holds,
		 * not the refused bytes. */
		if (rc && no_writer_left(li))
			give_up_staged(f->st, li, "close", rc);
	}
	/* a seal that waits for its batch has the create in the journal */
	bool journaled = li->pending != NULL;
	pthread_mutex_unlock(&li->mu);
	return rc || journaled ? rc : settle_create(f->st, li->ino);
}

int file_release(struct pd_file *f)
{
	struct store *st = f->st;
	struct live *li = f->li;
	bool writer = (f->flags & O_ACCMODE) != O_RDONLY;
	bool orphan;
	bool last = live_only_pin(st, li->ref, &orphan);
	int rc = 0;
	pthread_mutex_lock(&li->mu);
	mark_flushed(f);
	if (last && orphan)
		file_unstage(st, li); /* no name left: nobody can read these bytes again */
	if (li->dirty && (last || writer))
		rc = seal(st, li, false);
	if (rc && no_writer_left(li))
		give_up_staged(st, li, "close", rc); /* nothing will seal it later */
	if (last)
		close_blob(st, li);
	uint64_t ino = li->ino;
	bool journaled = li->pending != NULL;
	pthread_mutex_unlock(&li->mu);
	free(f);
	int src = live_settle(st, li->ref, 1, 0);
	if (!rc && !journaled)
		rc = settle_create(st, ino);
	file_resolve_sealed(st, true);
	return rc ? rc : src;
}

int file_fsync(struct pd_file *f, bool datasync)
{
	(void)datasync; /* sealed bytes are immutable: data and metadata go together */
	struct live *li = f->li;
	int rc = 0;
	pthread_mutex_lock(&li->mu);
	/* Staged bytes do not survive a restart: make them a blob first. */
	rc = resolve_pending(f->st, li);
	if (!rc && li->dirty)
		rc = seal(f->st, li, false);
	if (!rc && li->has_blob)
		rc = seal_sync_blob(f->st, &li->blob);
	pthread_mutex_unlock(&li->mu);
	return rc ? rc : ns_sync(f->st);
}

int file_truncate(struct store *st, uint64_t ino, uint64_t size, struct pd_file *f)
{
	struct live *li = f ? f->li : live_pin_state(st, ino);
	if (!li)
		return -ENOMEM;
	pthread_mutex_lock(&li->mu);
	int rc = load(st, li);
	if (!rc && !(size == li->size && !staging_held(li))) {
		rc = stage(st, li, size > 0);
		if (!rc)
			rc = staging_truncate(st, li, size);
		if (!rc) {
			if (size == 0)
				reset_hash(li);
			else if (size < li->hash_next || size > li->size)
				li->hash_ok = false;
			li->size = size;
			li->dirty = true;
			li->mtime = li->ctime = pd_now();
		}
	}
	if (!rc && f)
		mark_written(f);
	/* truncate(2) has no close to seal it: seal now, even if a writer
	 * has the file open (its next write stages the file again). A refused
	 * seal leaves the file as the store holds it, unless a writer's close
	 * is still to come. */
	if (!rc && !f && li->dirty && (rc = seal(st, li, false)) && no_writer_left(li))
		give_up_staged(st, li, "truncate", rc);
	pthread_mutex_unlock(&li->mu);
	if (!f)
		live_settle(st, li->ref, 1, 0);
	return rc;
}

uint64_t file_attr_epoch(struct store *st)
{
	return live_state_drops(st);
}

void file_merge_attr(struct store *st, struct inode *in, uint64_t epoch)
{
	if (!S_ISREG(in->mode))
		return;
	struct live_ino *e = live_pin_entry(st, in->ino, true);
	if (!e) {
		/* nothing staged; but a state that went after *in was read
		 * took a commit *in may not have seen */
		struct inode fresh;
		if (file_attr_epoch(st) != epoch && ns_getattr(st, in->ino, &fresh) == 0)
			*in = fresh;
		return;
	}
	struct live *li = e->state;
	/* Read again under the entry's lock: a seal may have committed since
	 * *in was read, and a seal runs under this lock, so what is read now
	 * and the staged state agree. */
	pthread_mutex_lock(&li->mu);
	struct inode fresh;
	if (ns_getattr(st, in->ino, &fresh) == 0)
		*in = fresh;
	if (staging_held(li)) {
		in->size = li->size;
		in->mtime = li->mtime;
		if (pd_time_cmp(li->ctime, in->ctime) > 0)
			in->ctime = li->ctime;
		if (li->atime_set)
			in->atime = li->atime;
	}
	pthread_mutex_unlock(&li->mu);
	live_settle(st, e, 1, 0);
}

int file_getattr(struct store *st, uint64_t ino, struct inode *out)
{
	uint64_t epoch = file_attr_epoch(st);
	int rc = ns_getattr(st, ino, out);
	if (!rc)
		file_merge_attr(st, out, epoch);
	return rc;
}

int file_set_times_later(struct store *st, uint64_t ino, const struct ns_setattr *set)
{
	const unsigned times = NS_SET_ATIME | NS_SET_MTIME | NS_SET_ATIME_NOW | NS_SET_MTIME_NOW | NS_SET_CTIME;
	if (!set->valid || (set->valid & ~times))
		return -EAGAIN;
	/* "now" is the call's time, as the kernel's own utime takes it */
	struct pd_time now = pd_now();
	struct ns_setattr t = { .valid = NS_SET_CTIME, .atime = set->atime, .mtime = set->mtime,
				.ctime = set->valid & NS_SET_CTIME ? set->ctime : now };
	if (set->valid & (NS_SET_ATIME | NS_SET_ATIME_NOW))
		t.valid |= NS_SET_ATIME;
	if (set->valid & NS_SET_ATIME_NOW)
		t.atime = now;
	if (set->valid & (NS_SET_MTIME | NS_SET_MTIME_NOW))
		t.valid |= NS_SET_MTIME;
	if (set->valid & NS_SET_MTIME_NOW)
		t.mtime = now;
	struct live_ino *e = live_pin_entry(st, ino, true);
	if (!e)
		return -EAGAIN;
	struct live *li = e->state;
	int rc = -EAGAIN;
	pthread_mutex_lock(&li->mu);
	if (li->pending && !seal_later_failed(li->pending) && !(rc = seal_later_times(st, li->pending, &t))) {
		/* answered from the state until it commits (file_merge_attr) */
		if (t.valid & NS_SET_MTIME)
			li->mtime = t.mtime;
		if (t.valid & NS_SET_ATIME) {
			li->atime = t.atime;
			li->atime_set = true;
		}
		li->ctime = t.ctime;
	}
	pthread_mutex_unlock(&li->mu);
	live_settle(st, e, 1, 0);
	return rc;
}

void file_set_mtime(struct store *st, uint64_t ino, struct pd_time mtime)
{
	struct live_ino *e = live_pin_entry(st, ino, true);
	if (!e)
		return; /* no file state: nothing staged */
	struct live *li = e->state;
	pthread_mutex_lock(&li->mu);
	resolve_pending(st, li); /* its seal carries the mtime it had */
	if (staging_held(li)) {
		li->mtime = mtime;
		li->ctime = pd_now();
	}
	pthread_mutex_unlock(&li->mu);
	live_settle(st, e, 1, 0);
}
