/* seal_later.c - seals that commit with a later batch. See seal_later.h.
 *
 * A journal entry's payload (integers little-endian):
 *    0  version u8          1
 *    1  flags u8            bit 0: the create waited too (row and name follow)
 *    2  name bytes u16
 *    4  reserved u32        0
 *    8  ino u64
 *   16  size u64            the page's bytes
 *   24  md5 [16], xxh128 [16]
 *   56  mtime sec i64, nsec u32; ctime nsec u32, sec i64
 *   80  parent u64          with bit 0 of flags, else 0
 *   88  the create's inode row (layout 1, INODE_FIXED_BYTES), with bit 0
 *       its name
 *       the page's bytes
 * A utime after such a close (seal_later_times: bit 1 of flags, no bit 0,
 * no page): 8 ino, 16 which times u32 (NS_SET_ATIME, NS_SET_MTIME),
 * 24 atime sec i64, 32 atime nsec u32, 56.. mtime and ctime as above.
 */
#include "seal_later.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/byteorder.h"
#include "base/fdio.h"
#include "blob/blob.h"
#include "ns.h"
#include "ns_later.h"
#include "openfile.h"

#define ENTRY_VERSION 1
#define ENTRY_CREATE 1u
#define ENTRY_TIMES 2u
#define ENTRY_FIXED 88

struct seal_later_page {
	int refs;              /* atomic */
	struct store *st;
	uint64_t seq;          /* its journal entry */
	uint64_t bytes;
	struct fp fp;
	struct seal_src src;
	struct seal_job job;
	void *give;            /* a copy of a new blob's bytes for the signer */
	int times_waiting;     /* utimes queued behind it, not committed (atomic) */
	int rc;                /* the batch's outcome, once done */
	bool done;             /* atomic */
	struct seal_later_page *next; /* on the done list */
};

struct seal_later {
	pthread_mutex_t mu;            /* guards the two lists */
	struct seal_later_page *done;  /* batches ran: for after_batch */
	struct seal_later_page *heard; /* the signer heard of them: for seal_later_take_done */
	uint64_t waiting, waiting_bytes; /* queued, batch not run (atomic) */
};

static void page_free(struct seal_later_page *p)
{
	seal_job_free(&p->job);
	free(p->give);
	free(p);
}

void seal_later_put(struct seal_later_page *p)
{
	if (p && __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0)
		page_free(p);
}

uint64_t seal_later_ino(const struct seal_later_page *p)
{
	return p->job.ino;
}

bool seal_later_failed(const struct seal_later_page *p)
{
	return __atomic_load_n(&p->done, __ATOMIC_ACQUIRE) && p->rc;
}

struct seal_later_page *seal_later_next(const struct seal_later_page *p)
{
	return p->next;
}

/* ---- the batch ------------------------------------------------------- */

static int later_cb(struct wtx *w, void *arg)
{
	struct seal_later_page *p = arg;
	int rc = seal_job_commit(w, &p->job);
	if (!rc)
		rc = wtx_journal_applied(w, p->seq);
	/* A new blob's bytes go to the signer as a close() hands them over
	 * (seal.h: give), which then need not decode its record: a copy, made
	 * here, where the file's bytes cannot go yet (they may once the
	 * batch is done) */
	if (!rc && !p->job.out.dup && !p->give && !w->st->opts.blob_files && (p->give = malloc(p->bytes ? p->bytes : 1)))
		memcpy(p->give, p->src.mem, p->bytes);
	return rc;
}

/* In the leader, gc_mu held: record the outcome, nothing that locks. */
static void later_done(void *arg, int rc)
{
	struct seal_later_page *p = arg;
	struct store *st = p->st;
	struct seal_later *sl = st->seal_later;
	p->rc = rc;
	if (!rc)
		store_journal_done(st, p->seq);
	__atomic_store_n(&p->done, true, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&sl->waiting, 1, __ATOMIC_RELAXED);
	__atomic_sub_fetch(&sl->waiting_bytes, p->bytes, __ATOMIC_RELAXED);
	pthread_mutex_lock(&sl->mu); /* taken with gc_mu held, never the other way */
	p->next = sl->done;
	sl->done = p; /* the queue's reference, now the list's */
	pthread_mutex_unlock(&sl->mu);
}

/* The leader of a batch that held waiting seals, no lock held: the
 * signer hears of the new blobs now (sigq_push may sign past its bound,
 * which writes), not at the next close(). */
static void after_batch(struct store *st)
{
	struct seal_later *sl = st->seal_later;
	pthread_mutex_lock(&sl->mu);
	struct seal_later_page *list = sl->done;
	sl->done = NULL;
	pthread_mutex_unlock(&sl->mu);
	if (!list)
		return;
	struct seal_later_page *last = list;
	for (struct seal_later_page *p = list; p; p = p->next) {
		if (!p->rc) {
			p->src.give = p->job.out.dup ? NULL : p->give;
			seal_job_committed(st, &p->job);
			if (p->job.out.given)
				p->give = NULL; /* the signer's now */
		}
		free(p->give);
		p->give = NULL;
		last = p;
	}
	pthread_mutex_lock(&sl->mu);
	last->next = sl->heard;
	sl->heard = list;
	pthread_mutex_unlock(&sl->mu);
	/* the bytes in memory go now where no one holds their file */
	file_resolve_sealed(st, false);
}

void seal_later_give_back(struct store *st, struct seal_later_page *p)
{
	struct seal_later *sl = st->seal_later;
	pthread_mutex_lock(&sl->mu);
	p->next = sl->heard;
	sl->heard = p;
	pthread_mutex_unlock(&sl->mu);
}

struct seal_later_page *seal_later_take_done(struct store *st)
{
	struct seal_later *sl = st->seal_later;
	if (!sl || !__atomic_load_n(&sl->heard, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&sl->mu);
	struct seal_later_page *list = sl->heard;
	sl->heard = NULL;
	pthread_mutex_unlock(&sl->mu);
	return list;
}

int seal_later_wait(struct store *st, struct seal_later_page *p, struct seal_result *res)
{
	int rc = 0;
	if (!seal_later_settled(p))
		rc = store_settle(st); /* queued before this call (a utime behind it too): committed with it */
	if (!rc && !__atomic_load_n(&p->done, __ATOMIC_ACQUIRE))
		rc = -EIO; /* cannot be: what settle commits is done before it returns */
	if (!rc)
		rc = p->rc;
	if (!rc)
		*res = p->job.out;
	return rc;
}

/* ---- the close ------------------------------------------------------- */

static bool may_wait(struct store *st, const void *mem)
{
	struct seal_later *sl = st->seal_later;
	if (!sl || !mem || st->opts.sync_blobs || st->opts.blob_files || !st->journal)
		return false;
	uint64_t free_bytes;
	return !fd_free_bytes(st->dirfd, NULL, &free_bytes) && free_bytes >= blob_nursery_max(st);
}

struct entry {
	uint8_t fixed[ENTRY_FIXED];
	uint8_t row[INODE_FIXED_BYTES];
	char name[NAME_MAX + 1];
	size_t name_len;
	bool create;
};

static void entry_make(struct store *st, struct entry *e, uint64_t ino, const struct fp *fp, struct pd_time mtime,
		       struct pd_time ctime)
{
	uint64_t parent = 0;
	struct inode in;
	memset(e->fixed, 0, sizeof e->fixed);
	e->create = ns_later_create_of(st, ino, &parent, e->name, sizeof e->name, &in);
	e->name_len = e->create ? strlen(e->name) : 0;
	if (e->create)
		inode_encode(&in, NULL, 0, e->row);
	e->fixed[0] = ENTRY_VERSION;
	e->fixed[1] = e->create ? ENTRY_CREATE : 0;
	e->fixed[2] = (uint8_t)e->name_len;
	e->fixed[3] = (uint8_t)(e->name_len >> 8);
	put_le64(e->fixed + 8, ino);
	put_le64(e->fixed + 16, fp->size);
	memcpy(e->fixed + 24, fp->md5, 16);
	memcpy(e->fixed + 40, fp->xxh128, 16);
	put_le64(e->fixed + 56, (uint64_t)mtime.sec);
	put_le32(e->fixed + 64, mtime.nsec);
	put_le32(e->fixed + 68, ctime.nsec);
	put_le64(e->fixed + 72, (uint64_t)ctime.sec);
	put_le64(e->fixed + 80, parent);
}

/* With the journal's lock held: queued in the entries' order. */
static int queue_cb(struct store *st, uint64_t seq, void *ctx)
{
	struct seal_later_page *p = ctx;
	p->seq = seq;
	return store_write_later(st, later_cb, later_done, p);
}

int seal_later_queue(struct store *st, uint64_t ino, const void *mem, const struct fp *fp, struct pd_time mtime,
		     struct pd_time ctime, struct seal_later_page **out)
{
	if (!may_wait(st, mem))
		return -EAGAIN;
	struct seal_later *sl = st->seal_later;
	struct seal_later_page *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	p->st = st;
	p->refs = 2; /* the caller's; the queue's (then the done list's) */
	p->fp = *fp;
	p->bytes = fp->size;
	p->src = (struct seal_src){ .mem = mem, .fd = -1 };
	seal_job_init(&p->job, st, ino, &p->src, &p->fp, mtime, ctime);
	/* the record encoded here, not in the batch's transaction; a seal
	 * that heals a damaged record does it at once, so that a read of the
	 * record's other files right after this close() finds it whole */
	int rc = seal_job_prepare(st, &p->job);
	if (!rc && p->job.heals)
		rc = -EAGAIN;
	struct entry e;
	if (!rc) {
		entry_make(st, &e, ino, fp, mtime, ctime);
		struct iovec iov[4] = { { e.fixed, ENTRY_FIXED } };
		int n = 1;
		if (e.create) {
			iov[n++] = (struct iovec){ e.row, INODE_FIXED_BYTES };
			iov[n++] = (struct iovec){ e.name, e.name_len };
		}
		iov[n++] = (struct iovec){ (void *)mem, (size_t)fp->size };
		__atomic_add_fetch(&sl->waiting, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&sl->waiting_bytes, p->bytes, __ATOMIC_RELAXED);
		if ((rc = store_journal_append(st, iov, n, queue_cb, p))) {
			__atomic_sub_fetch(&sl->waiting, 1, __ATOMIC_RELAXED);
			__atomic_sub_fetch(&sl->waiting_bytes, p->bytes, __ATOMIC_RELAXED);
		}
	}
	if (rc) {
		page_free(p);
		return rc == -ENOMEM ? rc : -EAGAIN; /* the journal refused: seal at once */
	}
	*out = p;
	return 0;
}

bool seal_later_full(struct store *st)
{
	struct seal_later *sl = st->seal_later;
	return sl && (__atomic_load_n(&sl->waiting, __ATOMIC_RELAXED) >= SEAL_LATER_MAX ||
		      __atomic_load_n(&sl->waiting_bytes, __ATOMIC_RELAXED) >= SEAL_LATER_MAX_BYTES);
}

/* ---- a utime after the close ----------------------------------------- */

struct later_times {
	struct store *st;
	struct seal_later_page *p; /* the seal it follows (a reference) */
	uint64_t ino, seq;
	struct ns_setattr sa;
};

static int times_cb(struct wtx *w, void *arg)
{
	struct later_times *t = arg;
	int rc = ns_setattr_in(w, t->ino, &t->sa, NULL);
	return rc ? rc : wtx_journal_applied(w, t->seq);
}

/* In the leader, gc_mu held. */
static void times_done(void *arg, int rc)
{
	struct later_times *t = arg;
	if (!rc)
		store_journal_done(t->st, t->seq);
	else if (rc != -ECANCELED)
		fprintf(stderr, "pagededupfs: inode %llu: its times, set after its close(), could not be committed: %s\n",
			(unsigned long long)t->ino, strerror(-rc));
	__atomic_sub_fetch(&t->p->times_waiting, 1, __ATOMIC_RELEASE);
	seal_later_put(t->p);
	free(t);
}

static int queue_times_cb(struct store *st, uint64_t seq, void *ctx)
{
	struct later_times *t = ctx;
	t->seq = seq;
	return store_write_later(st, times_cb, times_done, t);
}

static void entry_times(uint8_t b[ENTRY_FIXED], uint64_t ino, const struct ns_setattr *sa)
{
	memset(b, 0, ENTRY_FIXED);
	b[0] = ENTRY_VERSION;
	b[1] = ENTRY_TIMES;
	put_le64(b + 8, ino);
	put_le32(b + 16, sa->valid & (NS_SET_ATIME | NS_SET_MTIME));
	put_le64(b + 24, (uint64_t)sa->atime.sec);
	put_le32(b + 32, sa->atime.nsec);
	put_le64(b + 56, (uint64_t)sa->mtime.sec);
	put_le32(b + 64, sa->mtime.nsec);
	put_le32(b + 68, sa->ctime.nsec);
	put_le64(b + 72, (uint64_t)sa->ctime.sec);
}

int seal_later_times(struct store *st, struct seal_later_page *p, const struct ns_setattr *sa)
{
	if (!st->seal_later || !st->journal || (sa->valid & ~(NS_SET_ATIME | NS_SET_MTIME | NS_SET_CTIME)) ||
	    !(sa->valid & NS_SET_CTIME))
		return -EAGAIN;
	struct later_times *t = calloc(1, sizeof *t);
	if (!t)
		return -ENOMEM;
	*t = (struct later_times){ .st = st, .p = p, .ino = p->job.ino, .sa = *sa };
	uint8_t b[ENTRY_FIXED];
	entry_times(b, t->ino, sa);
	struct iovec iov = { b, sizeof b };
	__atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&p->times_waiting, 1, __ATOMIC_RELAXED);
	int rc = store_journal_append(st, &iov, 1, queue_times_cb, t);
	if (rc) {
		__atomic_sub_fetch(&p->times_waiting, 1, __ATOMIC_RELAXED);
		__atomic_sub_fetch(&p->refs, 1, __ATOMIC_RELAXED); /* the caller's stays */
		free(t);
		return rc == -ENOMEM ? rc : -EAGAIN;
	}
	return 0;
}

bool seal_later_settled(const struct seal_later_page *p)
{
	return __atomic_load_n(&p->done, __ATOMIC_ACQUIRE) && !__atomic_load_n(&p->times_waiting, __ATOMIC_ACQUIRE);
}

static int replay_times(struct store *st, const uint8_t *b)
{
	uint64_t ino = get_le64(b + 8);
	struct ns_setattr sa = { .valid = (get_le32(b + 16) & (NS_SET_ATIME | NS_SET_MTIME)) | NS_SET_CTIME };
	sa.atime = (struct pd_time){ (int64_t)get_le64(b + 24), get_le32(b + 32) };
	sa.mtime = (struct pd_time){ (int64_t)get_le64(b + 56), get_le32(b + 64) };
	sa.ctime = (struct pd_time){ (int64_t)get_le64(b + 72), get_le32(b + 68) };
	int rc = ns_setattr(st, ino, &sa, NULL);
	if (rc)
		fprintf(stderr, "pagededupfs: journal: the times of inode %llu could not be set again: %s\n",
			(unsigned long long)ino, strerror(-rc));
	return 0; /* said; the rest go on */
}

/* ---- the replay ------------------------------------------------------ */

static int applied_cb(struct wtx *w, void *arg)
{
	return wtx_journal_applied(w, *(const uint64_t *)arg);
}

static int replay_one(struct store *st, uint64_t seq, const void *data, size_t len, void *ctx)
{
	(void)ctx;
	const uint8_t *b = data;
	if (len < ENTRY_FIXED || b[0] != ENTRY_VERSION)
		return -EUCLEAN;
	if (b[1] & ENTRY_TIMES) {
		replay_times(st, b);
		return store_write(st, applied_cb, &seq);
	}
	bool create = b[1] & ENTRY_CREATE;
	size_t name_len = (size_t)b[2] | (size_t)b[3] << 8;
	size_t head = ENTRY_FIXED + (create ? INODE_FIXED_BYTES + name_len : 0);
	uint64_t ino = get_le64(b + 8);
	struct fp fp = { .size = get_le64(b + 16) };
	if (len < head || len - head != fp.size || name_len > NAME_MAX)
		return -EUCLEAN;
	memcpy(fp.md5, b + 24, 16);
	memcpy(fp.xxh128, b + 40, 16);
	struct pd_time mtime = { (int64_t)get_le64(b + 56), get_le32(b + 64) };
	struct pd_time ctime = { (int64_t)get_le64(b + 72), get_le32(b + 68) };
	int rc = 0;
	if (create) {
		struct inode in;
		char name[NAME_MAX + 1];
		memcpy(name, b + ENTRY_FIXED + INODE_FIXED_BYTES, name_len);
		name[name_len] = 0;
		if (!(rc = inode_decode(b + ENTRY_FIXED, INODE_FIXED_BYTES, &in, NULL, NULL))) {
			in.ino = ino;
			rc = ns_later_create_again(st, get_le64(b + 80), name, &in);
		}
		if (rc)
			fprintf(stderr, "pagededupfs: journal: the create of '%s' (inode %llu) could not be made again: %s\n",
				name, (unsigned long long)ino, strerror(-rc));
	}
	struct seal_src src = { .mem = b + head, .fd = -1 };
	struct seal_result res;
	if (!rc && (rc = seal_staged(st, ino, &src, &fp, mtime, ctime, &res)))
		fprintf(stderr, "pagededupfs: journal: the page of inode %llu (%llu bytes) could not be sealed again: %s\n",
			(unsigned long long)ino, (unsigned long long)fp.size, strerror(-rc));
	/* a page that cannot be sealed again is said, and the rest go on */
	return store_write(st, applied_cb, &seq);
}

static int later_start(struct store *st, bool clean, char err[PD_ERRLEN])
{
	(void)clean;
	struct seal_later *sl = calloc(1, sizeof *sl);
	if (!sl)
		return -ENOMEM;
	pthread_mutex_init(&sl->mu, NULL);
	uint64_t replayed, dropped;
	int rc = store_journal_replay(st, replay_one, NULL, &replayed, &dropped);
	if (rc)
		snprintf(err, PD_ERRLEN, "cannot seal again the pages the journal of %s kept: %s", st->dir,
			 strerror(-rc));
	else if (replayed || dropped)
		fprintf(stderr, "pagededupfs: %s: %llu page(s) closed before the last stop sealed again from the journal%s\n",
			st->dir, (unsigned long long)replayed, dropped ? " (some entries after a gap left: a power cut)" : "");
	st->seal_later = sl;
	__atomic_store_n(&st->after_later, after_batch, __ATOMIC_RELEASE); /* the sync thread runs already */
	return rc;
}

/* Every batch ran (store_close settled what waited; store_free dropped
 * what none will run): the done list's references go. The file states
 * that still point at them (openfile.c) are freed after this part's
 * release and never read them. */
static void later_release(struct store *st)
{
	struct seal_later *sl = st->seal_later;
	if (!sl)
		return;
	__atomic_store_n(&st->after_later, NULL, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		for (struct seal_later_page *p = i ? sl->heard : sl->done, *next; p; p = next) {
			next = p->next;
			seal_later_put(p);
		}
	pthread_mutex_destroy(&sl->mu);
	free(sl);
	st->seal_later = NULL;
}

const struct store_part seal_later_part = {
	.name = "seals waiting for a batch",
	.start = later_start,
	.release = later_release,
};
