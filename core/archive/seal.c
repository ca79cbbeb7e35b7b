/* seal.c - the seal pipeline. The order of its steps and why a crash at
 * any point leaves the store consistent are in seal.h. */
#include "seal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "blob/blob.h"
#include "base/fdio.h"
#include "ns.h"
#include "near/sigq.h"

/* Choose the blob for the content: an existing one, or a new key. */
static int choose_blob(struct wtx *w, const struct fp *fp, struct blobkey *k, bool *found)
{
	struct store *st = w->st;
	*found = false;
	if (st->opts.nodedup)
		return blob_next_variant(w->txn, st, fp->md5, k);
	if (!gf_maybe_contains(st->gf, fp->md5)) {
		w->delta.probes_skipped++;
		memcpy(k->md5, fp->md5, 16);
		k->variant = 0;
		return 0;
	}
	w->delta.probes++;
	bool collision;
	int rc = blob_find(w->txn, st, fp, k, found, &collision);
	if (rc)
		return rc;
	if (collision)
		w->delta.collisions++;
	else if (!*found)
		w->delta.false_positives++;
	return 0;
}

static int sync_dir_of(struct store *st, const char *path)
{
	char dir[BLOBKEY_PATH_MAX];
	memcpy(dir, path, sizeof dir);
	*strrchr(dir, '/') = 0;
	int dfd = openat(st->dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	int rc = fsync(dfd) ? -errno : 0;
	close(dfd);
	return rc;
}

/* Write bytes held in memory straight to the blob's file. A file left there
 * by a crash before its commit is an orphan: overwriting it is safe, no
 * record refers to it (otherwise the probe would have found it). */
static int write_blob(struct store *st, const char *path, const void *buf, size_t len, bool sync)
{
	int fd = openat(st->dirfd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int rc = fd_write_all(fd, buf, len);
	if (!rc && sync && fdatasync(fd))
		rc = -errno;
	close(fd);
	if (rc)
		unlinkat(st->dirfd, path, 0);
	return rc;
}

/* Format 1's layout (-o blob_files, tests): put the staged bytes at the
 * blob's file (once, even if the callback runs
 * again after a map resize). */
static int place_blob(struct wtx *w, struct seal_job *a, const struct blobkey *k)
{
	struct store *st = w->st;
	char path[BLOBKEY_PATH_MAX];
	blobkey_path(k, path);
	if (a->renamed && strcmp(path, a->renamed_to) == 0)
		return 0;
	int rc = blob_mkdirs(st, k);
	if (rc)
		return rc;
	if (a->src->mem) {
		if (a->renamed)
			unlinkat(st->dirfd, a->renamed_to, 0);
		a->renamed = false;
		rc = write_blob(st, path, a->src->mem, a->fp->size, a->sync_dirs);
	} else {
		const char *from = a->renamed ? a->renamed_to : a->src->staging;
		rc = renameat(st->dirfd, from, st->dirfd, path) ? -errno : 0;
	}
	if (rc)
		return rc;
	a->renamed = true;
	memcpy(a->renamed_to, path, sizeof path);
	/* The new name is durable only once its directory is. */
	return a->sync_dirs ? sync_dir_of(st, path) : 0;
}

/* Append the page's record to the current pack as blob k (once, even if
 * the callback runs again: a second run with another key appends again,
 * and the first copy is dead bytes). */
static int pack_blob(struct wtx *w, struct seal_job *a, const struct blobkey *k)
{
	struct store *st = w->st;
	if (a->appended && blobkey_equal(&a->appended_key, k))
		return 0;
	int rc = 0;
	if (!a->rec.buf && (a->nursery = blob_nursery_wanted(st)))
		rc = blob_encode_nursery(st, a->fp, a->src->mem, a->src->fd, &a->rec);
	else if (!a->rec.buf)
		rc = blob_encode(st, a->fp, a->src->mem, a->src->fd, &a->rec);
	if (!rc)
		rc = a->nursery ? blob_append_nursery(st, &a->rec, k, &a->loc) : blob_append(st, &a->rec, k, &a->loc);
	if (rc)
		return rc;
	a->appended = true;
	a->appended_key = *k;
	return 0;
}

/* Is the content already stored (a read snapshot, before the write)? The
 * record is encoded outside the write transaction only for content that
 * is new, so a duplicate costs no compression and a new page's
 * compression runs on the writer's thread, in parallel with others. */
static bool likely_stored(struct store *st, const struct fp *fp, bool *bad)
{
	*bad = false;
	if (st->opts.nodedup)
		return false;
	MDB_txn *txn;
	if (store_read_begin(st, &txn))
		return true;
	struct blobkey k;
	bool found = false, collision;
	int rc = blob_find(txn, st, fp, &k, &found, &collision);
	struct fprec r;
	if (!rc && found && !blob_get(txn, st, &k, &r))
		*bad = r.flags & FPREC_BAD;
	store_read_end(st, txn);
	return rc || found;
}

int seal_sync_blob(struct store *st, const struct blobkey *k)
{
	struct fprec r;
	int rc = blob_read(st, k, &r);
	if (!rc && (r.flags & FPREC_PACKED))
		return pack_sync(st->packs);
	/* a blob file of a format 1 store */
	char path[BLOBKEY_PATH_MAX];
	blobkey_path(k, path);
	int fd = openat(st->dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc ? rc : sync_dir_of(st, path);
}

int seal_job_commit(struct wtx *w, void *p)
{
	struct seal_job *a = p;
	struct store *st = w->st;
	struct inode in;
	struct blobkey k;
	bool found;
	int rc = ns_get_inode(w->txn, st, a->ino, &in);
	if (rc || (rc = choose_blob(w, a->fp, &k, &found)))
		return rc;
	bool had = in.flags & INODE_HAS_BLOB;
	bool same = had && found && blobkey_equal(&in.blob, &k);
	if (found) {
		/* A record known to be damaged: these bytes heal it (blob.h). */
		struct fprec old;
		if (!(rc = blob_get(w->txn, st, &k, &old)) && (old.flags & FPREC_BAD) && !(rc = pack_blob(w, a, &k)))
			rc = blob_heal(w, &k, &a->loc, a->rec.hdr.dict);
	}
	if (found && !same && !rc)
		rc = blob_ref(w, &k, a->ino);
	if (!found && !rc) {
		/* signed after the commit (sigq.h) */
		struct fprec r = { .size = a->fp->size, .flags = FPREC_SIG_PENDING };
		memcpy(r.xxh128, a->fp->xxh128, 16);
		if (st->opts.blob_files) {
			if (!(rc = place_blob(w, a, &k)))
				rc = blob_insert(w, &k, &r, a->ino, !st->opts.nodedup);
		} else if (!(rc = pack_blob(w, a, &k))) {
			blob_rec_set_loc(&r, &a->loc, a->rec.hdr.dict);
			rc = blob_insert(w, &k, &r, a->ino, !st->opts.nodedup);
		}
	}
	if (!rc && had && !same)
		rc = blob_unref(w, &in.blob, a->ino);
	if (rc)
		return rc;
	w->delta.logical_bytes += (int64_t)a->fp->size - (int64_t)in.size;
	w->delta.seals++;
	w->delta.dup_seals += found;
	in.size = a->fp->size;
	in.blob = k;
	in.flags |= INODE_HAS_BLOB;
	in.mtime = a->mtime;
	if (pd_time_cmp(a->ctime, in.ctime) > 0) /* a chmod while staged may be newer */
		in.ctime = a->ctime;
	a->out = (struct seal_result){ .key = k, .dup = found };
	return ns_put_inode(w->txn, st, &in);
}

void seal_job_init(struct seal_job *a, struct store *st, uint64_t ino, const struct seal_src *src, const struct fp *fp,
		   struct pd_time mtime, struct pd_time ctime)
{
	*a = (struct seal_job){ .ino = ino, .src = src, .fp = fp, .mtime = mtime, .ctime = ctime,
				.sync_dirs = st->opts.sync_blobs };
}

int seal_job_prepare(struct store *st, struct seal_job *a)
{
	const struct seal_src *src = a->src;
	const struct fp *fp = a->fp;
	if (st->opts.blob_files) {
		if (!src->mem && st->opts.sync_blobs && fdatasync(src->fd))
			return -errno;
		return 0;
	}
	if (likely_stored(st, fp, &a->heals))
		return 0;
	/* to the nursery (blob.h) while it has room: its final record
	 * is written in the background, which this close() helps
	 * while it is behind (ndelta.h) */
	if (blob_nursery_behind(st))
		sigq_help_deltas(st);
	a->nursery = blob_nursery_wanted(st);
	return a->nursery ? blob_encode_nursery(st, fp, src->mem, src->fd, &a->rec)
			  : blob_encode(st, fp, src->mem, src->fd, &a->rec);
}

void seal_job_failed(struct store *st, struct seal_job *a)
{
	/* The commit failed: the staged bytes stay where the file expects
	 * them (a record appended for them is dead bytes). */
	if (a->renamed && a->src->mem)
		unlinkat(st->dirfd, a->renamed_to, 0);
	else if (a->renamed)
		renameat(st->dirfd, a->renamed_to, st->dirfd, a->src->staging);
}

void seal_job_committed(struct store *st, struct seal_job *a)
{
	const struct seal_src *src = a->src;
	/* The bytes are in a pack (or were a duplicate): the staged copy goes;
	 * an open descriptor of it (openfile.c) still reads them. */
	if (!src->mem && (a->out.dup || !a->renamed))
		unlinkat(st->dirfd, src->staging, 0);
	if (!a->out.dup && src->give && !st->opts.blob_files)
		a->out.given = sigq_push_page(st, &a->out.key, src->give, (size_t)a->fp->size, a->fp->xxh128);
	else if (!a->out.dup)
		sigq_push(st, &a->out.key);
}

void seal_job_free(struct seal_job *a)
{
	pack_rec_free(&a->rec);
}

int seal_staged(struct store *st, uint64_t ino, const struct seal_src *src, const struct fp *fp,
		struct pd_time mtime, struct pd_time ctime, struct seal_result *out)
{
	struct seal_job a;
	seal_job_init(&a, st, ino, src, fp, mtime, ctime);
	int rc = seal_job_prepare(st, &a);
	if (!rc && (rc = store_write(st, seal_job_commit, &a)))
		seal_job_failed(st, &a);
	if (!rc) {
		seal_job_committed(st, &a);
		*out = a.out;
	}
	seal_job_free(&a);
	return rc;
}
