/* sigq.c - the pending signatures: their table, the queue and the signing
 * thread, signatures computed in memory for answers, and the fsck check.
 * The design is in sigq.h.
 *
 * The queue is a ring of keys, each with a sequence number (its position
 * in the order of pushes). Whoever signs (the thread, a drain, a seal past
 * the bound) takes a batch from the head and registers it as in flight
 * until its write has committed: a drain that must see every key pushed
 * before it began waits for the batches in flight that hold such keys, not
 * for keys pushed later, so a steady stream of seals cannot hold it up.
 */
#include "sigq.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "blob/blob.h"
#include "base/clock.h"
#include "base/heap.h"
#include "ndelta.h"

/* A batch being signed: its first sequence number, while in flight. */
struct inflight {
	uint64_t first_seq;
	size_t n;
	struct inflight *next;
};

/* A page's bytes the seal handed over with its key (bytes NULL: none,
 * the record is read back), and their XXH3-128. */
struct held {
	void *bytes;
	size_t len;
	uint8_t xxh128[16];
};

/* A queued key. */
struct entry {
	struct blobkey k;
	struct held h;
};

struct sigq {
	pthread_mutex_t mu;
	pthread_cond_t work_cv; /* keys queued, or stop */
	pthread_cond_t done_cv; /* a batch in flight finished */
	struct entry *ring;
	size_t cap, head, n;    /* cap: a power of two */
	uint64_t seq_head;      /* sequence number of ring[head] */
	size_t max;             /* the bound (sigq.h) */
	struct inflight *inflight;
	size_t inflight_pages;
	pthread_t thread;
	bool running, stop;
	struct ndelta *delta; /* signed pages go on to their delta step */
	struct sigq_counts counts; /* who signed how many (queued: unused) */
	/* rows moved on by the batches' commits (near.h: only under the
	 * write lock) */
	struct near_stage_passes passes;
	size_t held;               /* bytes of the pages queued or in flight */
};

/* ---- the table ---------------------------------------------------------- */

static MDB_val key_val(uint8_t kb[BLOBKEY_BYTES], const struct blobkey *k)
{
	blobkey_encode(k, kb);
	return (MDB_val){ BLOBKEY_BYTES, kb };
}

int sigq_open_table(MDB_txn *txn, struct store *st, unsigned create)
{
	int rc = mdb_dbi_open(txn, "sigq", create, &st->db_sigq);
	st->has_sigq = rc == 0;
	return rc == MDB_NOTFOUND && !create ? 0 : pd_mdb_err(rc);
}

int sigq_row_put(MDB_txn *txn, struct store *st, const struct blobkey *k)
{
	uint8_t kb[BLOBKEY_BYTES];
	MDB_val key = key_val(kb, k), v = { 0, kb };
	return pd_mdb_err(mdb_put(txn, st->db_sigq, &key, &v, 0));
}

int sigq_row_del(MDB_txn *txn, struct store *st, const struct blobkey *k)
{
	uint8_t kb[BLOBKEY_BYTES];
	MDB_val key = key_val(kb, k);
	int rc = pd_mdb_err(mdb_del(txn, st->db_sigq, &key, NULL));
	return rc == -ENOENT ? 0 : rc; /* fsck reports a missing row; no reason to fail a write */
}

/* Walk every row (raw key and value). */
static int each_row(MDB_txn *txn, struct store *st, int (*fn)(void *ctx, const MDB_val *k, const MDB_val *v),
		    void *ctx)
{
	if (!st->has_sigq)
		return 0;
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_sigq, &c));
	if (rc)
		return rc;
	MDB_val k, v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && !rc; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		rc = fn(ctx, &k, &v);
	mdb_cursor_close(c);
	if (rc)
		return rc > 0 ? 0 : rc;
	return mrc == MDB_NOTFOUND ? 0 : pd_mdb_err(mrc);
}

struct each_ctx {
	int (*fn)(void *ctx, const struct blobkey *k);
	void *ctx;
};

static int each_key(void *p, const MDB_val *k, const MDB_val *v)
{
	struct each_ctx *e = p;
	(void)v;
	if (k->mv_size != BLOBKEY_BYTES)
		return 0; /* fsck's to report */
	struct blobkey bk;
	blobkey_decode(k->mv_data, &bk);
	return e->fn(e->ctx, &bk);
}

int sigq_each(MDB_txn *txn, struct store *st, int (*fn)(void *ctx, const struct blobkey *k), void *ctx)
{
	struct each_ctx e = { fn, ctx };
	return each_row(txn, st, each_key, &e);
}

/* ---- signing one page ------------------------------------------------------ */

/* Open blob k's bytes and sign them; the descriptor stays open (*fd) so
 * that the commit can tell it is still the file of the record (same
 * inode), and *at keeps the place of a packed record for the same check. */
/* Sign packed record r of blob k from memory. (Through a memfd, as a
 * read of the page gets it, each page cost a memfd, two shared mappings,
 * their page faults and, at each unmap, a TLB shootdown on the daemon's
 * other CPUs: about a tenth of the daemon's time in a burst of new pages,
 * the issue-15 note.) */
static int sign_record(struct store *st, const struct blobkey *k, const struct fprec *r, bool for_record,
		       const struct held *h, struct near_sig *sig)
{
	if (r->flags & FPREC_BAD)
		return -EIO;
	/* the bytes the seal handed over are the record's when its size and
	 * XXH3-128 are: the key alone is not enough (a blob freed and a page
	 * of another content but the same MD5 stored under its variant
	 * before the signer came to it) */
	if (h && h->bytes && h->len == r->size && !memcmp(h->xxh128, r->xxh128, 16))
		return for_record ? near_sig_for_record(h->bytes, h->len, sig) : near_sig_of_page(h->bytes, h->len, sig);
	void *page;
	int rc = blob_read_packed_alloc(st, k, r, &page);
	if (rc)
		return rc == -ENOMEM ? rc : -EIO;
	rc = for_record ? near_sig_for_record(page, (size_t)r->size, sig) : near_sig_of_page(page, (size_t)r->size, sig);
	free(page);
	return rc;
}

/* Sign blob k: a packed record from memory, a blob file (format 1) through
 * *fd, which stays open (the caller closes it) so that its inode number
 * cannot be taken by another file before same_file compares it. *sb (a
 * blob file's) and *at (a packed record's place) say which bytes were
 * signed. for_record: the signature is only stored (near_sig_for_record:
 * a packed page with a set gets no sketch, which nothing would read). */
static int sign_file(struct store *st, const struct blobkey *k, bool for_record, const struct held *h, int *fd,
		     struct stat *sb, struct pack_loc *at, struct near_sig *sig)
{
	struct fprec r;
	*fd = -1;
	int rc = blob_read(st, k, &r);
	if (rc)
		return rc;
	*at = (struct pack_loc){ 0 };
	memset(sb, 0, sizeof *sb);
	if (r.flags & FPREC_PACKED) {
		blob_rec_loc(&r, at);
		return sign_record(st, k, &r, for_record, h, sig);
	}
	*fd = blob_open_rec(st, k, &r);
	if (*fd < 0)
		return *fd;
	rc = fstat(*fd, sb) ? -errno : near_sig_of_fd(*fd, (uint64_t)sb->st_size, sig);
	if (rc) {
		close(*fd);
		*fd = -1;
	}
	return rc;
}

int sigq_sign_blob(struct store *st, const struct blobkey *k, struct near_sig *sig)
{
	int fd;
	struct stat sb;
	struct pack_loc at;
	int rc = sign_file(st, k, false, NULL, &fd, &sb, &at, sig);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* ---- a batch ------------------------------------------------------------------ */

struct page {
	struct blobkey k;
	struct held h; /* the page's bytes, handed over by the seal */
	bool ok; /* signed: else nothing to store (file gone, or signing failed) */
	int fd;  /* a blob file's, held open until the signature is stored */
	struct stat sb;
	struct pack_loc at; /* a packed record's place (pack 0: a blob file) */
	struct near_sig sig;
};

struct batch {
	struct page p[SIGQ_BATCH];
	size_t n;
	size_t handed; /* pages signed from bytes handed over */
};

/* Are the bytes of record r the ones that were signed? A blob freed and
 * stored again under the same key (a -o nodedup copy, a collision variant)
 * has a new file or a new pack record. */
static bool same_file(struct store *st, const struct page *p, const struct fprec *r)
{
	if (r->flags & FPREC_PACKED)
		return p->at.pack == r->pack && p->at.off == r->pack_off;
	if (p->at.pack)
		return false;
	char path[BLOBKEY_PATH_MAX];
	struct stat now;
	blobkey_path(&p->k, path);
	return fstatat(st->dirfd, path, &now, 0) == 0 && now.st_ino == p->sb.st_ino && now.st_dev == p->sb.st_dev;
}

static int store_sig(struct wtx *w, const struct page *p)
{
	struct store *st = w->st;
	struct fprec r;
	int rc = blob_get(w->txn, st, &p->k, &r);
	if (rc == -ENOENT)
		return 0; /* freed since: its row went with it */
	if (rc || !(r.flags & FPREC_SIG_PENDING) || !same_file(st, p, &r))
		return rc;
	near_sig_to_rec(&p->sig, &r);
	r.flags &= (uint8_t)~FPREC_SIG_PENDING;
	if ((rc = blob_put(w->txn, st, &p->k, &r)) || (rc = sigq_row_del(w->txn, st, &p->k)))
		return rc;
	return (r.flags & FPREC_HAS_SIMHASH) ? near_add_sig(w->txn, st, &p->k, &p->sig) : 0;
}

static int store_batch_cb(struct wtx *w, void *arg)
{
	struct batch *b = arg;
	int rc = 0;
	for (size_t i = 0; i < b->n && !rc; i++)
		if (b->p[i].ok)
			rc = store_sig(w, &b->p[i]);
	/* the rows just added, and those before them, moved on when their
	 * level is full (near.h, "Rows staged") */
	return rc ? rc : near_stage_settle_all(w->txn, w->st, &w->st->sigq->passes, w->st->opts.stage_rows);
}

/* Sign the batch's pages outside any transaction, store the signatures in
 * one write. A page that cannot be signed keeps its row (sigq.h). */
static int sign_batch(struct store *st, struct batch *b)
{
	bool any = false;
	for (size_t i = 0; i < b->n; i++) {
		struct page *p = &b->p[i];
		p->ok = sign_file(st, &p->k, true, &p->h, &p->fd, &p->sb, &p->at, &p->sig) == 0;
		b->handed += p->ok && p->h.bytes;
		free(p->h.bytes); /* signed or not, the record can be read back */
		p->h.bytes = NULL;
		any |= p->ok;
	}
	int rc = any ? store_write(st, store_batch_cb, b) : 0;
	for (size_t i = 0; i < b->n; i++) {
		struct page *p = &b->p[i];
		if (p->fd >= 0)
			close(p->fd);
		if (p->ok && !rc && p->sig.has)
			ndelta_push(st->sigq->delta, &p->k);
	}
	return rc;
}

/* ---- the queue ------------------------------------------------------------- */

static int ring_push(struct sigq *q, const struct blobkey *k, const struct held *h)
{
	if (q->n == q->cap) {
		size_t cap = q->cap ? 2 * q->cap : 64;
		struct entry *v = malloc(cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < q->n; i++)
			v[i] = q->ring[(q->head + i) & (q->cap - 1)];
		free(q->ring);
		q->ring = v;
		q->cap = cap;
		q->head = 0;
	}
	q->ring[(q->head + q->n) & (q->cap - 1)] = (struct entry){ *k, h ? *h : (struct held){ 0 } };
	q->n++;
	q->held += h ? h->len : 0;
	return 0;
}

/* Take up to SIGQ_BATCH keys pushed before sequence number `limit` from
 * the head, and register them in flight (under q->mu). */
static void take_batch(struct sigq *q, uint64_t limit, struct batch *b, struct inflight *f)
{
	b->n = 0;
	b->handed = 0;
	while (b->n < SIGQ_BATCH && q->n && q->seq_head < limit) {
		const struct entry *e = &q->ring[q->head];
		b->p[b->n++] = (struct page){ .k = e->k, .h = e->h, .fd = -1 };
		q->head = (q->head + 1) & (q->cap - 1);
		q->n--;
		q->seq_head++;
	}
	*f = (struct inflight){ q->seq_head - b->n, b->n, q->inflight };
	q->inflight = f;
	q->inflight_pages += b->n;
}

static void finish_batch(struct sigq *q, struct inflight *f, const struct batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		q->held -= b->p[i].h.len; /* freed as each page was signed */
	struct inflight **pp = &q->inflight;
	while (*pp != f)
		pp = &(*pp)->next;
	*pp = f->next;
	q->inflight_pages -= f->n;
	pthread_cond_broadcast(&q->done_cv);
}

/* Sign one batch of the keys pushed before `limit`, counted in *signed.
 * Called without q->mu; *idle when there were none. */
static int work_batch(struct store *st, uint64_t limit, bool *idle, uint64_t *signed_pages)
{
	struct sigq *q = st->sigq;
	struct batch *b = malloc(sizeof *b);
	struct inflight f;
	if (!b)
		return -ENOMEM;
	pthread_mutex_lock(&q->mu);
	take_batch(q, limit, b, &f);
	pthread_mutex_unlock(&q->mu);
	*idle = b->n == 0;
	int rc = b->n ? sign_batch(st, b) : 0;
	pthread_mutex_lock(&q->mu);
	finish_batch(q, &f, b);
	*signed_pages += b->n;
	q->counts.handed += b->handed;
	pthread_mutex_unlock(&q->mu);
	free(b);
	return rc;
}

/* Wait on cv for at most ms milliseconds (under q->mu). */
static void wait_ms(struct sigq *q, pthread_cond_t *cv, unsigned ms)
{
	struct timespec ts = pd_deadline_ns(CLOCK_REALTIME, (uint64_t)ms * 1000000u);
	pthread_cond_timedwait(cv, &q->mu, &ts);
}

/* Pages signed so far, by anyone (under q->mu). */
static uint64_t pages_signed(const struct sigq *q)
{
	return q->counts.by_thread + q->counts.by_writers + q->counts.by_drain;
}

/* The thread takes whole batches where it can: a batch of one page per
 * seal would double the commits that the writers queue behind. Nobody
 * waits for the pages meanwhile (a query signs them itself). Once pages
 * were signed and none came for SIGQ_IDLE_MS, it gives the heap's free
 * pages back (base/heap.h): the burst's page buffers are free by then. */
static void *signer_main(void *arg)
{
	pthread_setname_np(pthread_self(), "pd-signer"); /* its CPU apart in /proc/PID/task */
	struct store *st = arg;
	struct sigq *q = st->sigq;
	bool waited = false;
	uint64_t signed_at_give_back = 0;
	pthread_mutex_lock(&q->mu);
	while (!q->stop) {
		if (!q->n) {
			if (pages_signed(q) == signed_at_give_back) {
				pthread_cond_wait(&q->work_cv, &q->mu);
				continue;
			}
			wait_ms(q, &q->work_cv, SIGQ_IDLE_MS);
			if (!q->n && !q->stop) { /* a burst of pages ended */
				signed_at_give_back = pages_signed(q);
				pthread_mutex_unlock(&q->mu);
				heap_give_back();
				pthread_mutex_lock(&q->mu);
			}
			continue;
		}
		if (q->n < SIGQ_BATCH && !waited) {
			wait_ms(q, &q->work_cv, SIGQ_GATHER_MS);
			waited = true;
			continue;
		}
		waited = false;
		pthread_mutex_unlock(&q->mu);
		bool idle;
		work_batch(st, UINT64_MAX, &idle, &q->counts.by_thread); /* a failed page keeps its row */
		pthread_mutex_lock(&q->mu);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

static int queue_row(void *ctx, const struct blobkey *k)
{
	return ring_push(ctx, k, NULL);
}

int sigq_start(struct store *st)
{
	struct sigq *q = calloc(1, sizeof *q);
	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->work_cv, NULL);
	pthread_cond_init(&q->done_cv, NULL);
	q->max = st->opts.sign_queue ? st->opts.sign_queue : SIGQ_DEFAULT_MAX;
	st->sigq = q;
	/* Rows left by a crash (or by pages that could not be signed). */
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (!rc) {
		rc = sigq_each(txn, st, queue_row, q);
		store_read_end(st, txn);
	}
	if (!rc && !st->opts.no_sign_thread)
		q->running = pthread_create(&q->thread, NULL, signer_main, st) == 0;
	if (!rc)
		rc = ndelta_start(st, &q->delta);
	if (rc)
		sigq_stop(st);
	return rc;
}

void sigq_stop(struct store *st)
{
	struct sigq *q = st->sigq;
	if (!q)
		return;
	/* the signer first: a batch it is signing pushes its pages to the
	 * delta step, which must still be there (a stop in the other order
	 * freed it under such a push) */
	if (q->running) {
		pthread_mutex_lock(&q->mu);
		q->stop = true;
		pthread_cond_signal(&q->work_cv);
		pthread_mutex_unlock(&q->mu);
		pthread_join(q->thread, NULL);
	}
	ndelta_stop(q->delta);
	q->delta = NULL;
	st->sigq = NULL;
	for (size_t i = 0; i < q->n; i++) /* what is left keeps its row */
		free(q->ring[(q->head + i) & (q->cap - 1)].h.bytes);
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->work_cv);
	pthread_cond_destroy(&q->done_cv);
	free(q->ring);
	free(q);
}

/* Queue k (with the bytes h when the queue may hold them: *taken); beyond
 * the bound, sign the oldest pages until the queue is back under it. */
static void push(struct store *st, const struct blobkey *k, const struct held *h, bool *taken)
{
	struct sigq *q = st->sigq;
	*taken = false;
	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	if (h && (h->len > SIGQ_HELD_PAGE_MAX || q->held + h->len > SIGQ_HELD_MAX))
		h = NULL;
	/* Out of memory: the row stays, the next open queues it. The thread
	 * is woken by the first key (it then gathers a batch) and by a full
	 * batch. */
	int rc = ring_push(q, k, h);
	*taken = !rc && h;
	if (!rc && (q->n == 1 || q->n == SIGQ_BATCH))
		pthread_cond_signal(&q->work_cv);
	bool over = q->n > q->max;
	pthread_mutex_unlock(&q->mu);
	while (over) {
		bool idle;
		work_batch(st, UINT64_MAX, &idle, &q->counts.by_writers);
		pthread_mutex_lock(&q->mu);
		over = q->n > q->max && !idle;
		pthread_mutex_unlock(&q->mu);
	}
}

void sigq_push(struct store *st, const struct blobkey *k)
{
	bool taken;
	push(st, k, NULL, &taken);
}

bool sigq_push_page(struct store *st, const struct blobkey *k, void *page, size_t len, const uint8_t xxh128[16])
{
	bool taken;
	struct held h = { page, len, { 0 } };
	memcpy(h.xxh128, xxh128, 16);
	push(st, k, &h, &taken);
	return taken;
}

/* Is a batch holding keys pushed before `limit` in flight? */
static bool inflight_before(const struct sigq *q, uint64_t limit)
{
	for (const struct inflight *f = q->inflight; f; f = f->next)
		if (f->n && f->first_seq < limit)
			return true;
	return false;
}

int sigq_drain(struct store *st)
{
	struct sigq *q = st->sigq;
	if (!q)
		return 0;
	int rc = 0;
	pthread_mutex_lock(&q->mu);
	uint64_t limit = q->seq_head + q->n;
	for (;;) {
		if (q->n && q->seq_head < limit) {
			pthread_mutex_unlock(&q->mu);
			bool idle;
			int brc = work_batch(st, limit, &idle, &q->counts.by_drain);
			rc = rc ? rc : brc;
			pthread_mutex_lock(&q->mu);
		} else if (inflight_before(q, limit)) {
			pthread_cond_wait(&q->done_cv, &q->mu);
		} else {
			break;
		}
	}
	pthread_mutex_unlock(&q->mu);
	return rc;
}

void sigq_drain_deltas(struct store *st)
{
	if (st->sigq)
		ndelta_drain(st->sigq->delta);
}

void sigq_help_deltas(struct store *st)
{
	if (st->sigq)
		ndelta_help(st->sigq->delta);
}

size_t sigq_queued(struct store *st)
{
	struct sigq *q = st->sigq;
	if (!q)
		return 0;
	pthread_mutex_lock(&q->mu);
	size_t n = q->n + q->inflight_pages;
	pthread_mutex_unlock(&q->mu);
	return n;
}

void sigq_counts(struct store *st, struct sigq_counts *out)
{
	struct sigq *q = st->sigq;
	memset(out, 0, sizeof *out);
	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	*out = q->counts;
	out->queued = q->n + q->inflight_pages;
	struct ndelta *d = q->delta;
	pthread_mutex_unlock(&q->mu);
	ndelta_counts(d, &out->delta);
}

/* ---- fsck ------------------------------------------------------------------ */

struct checker {
	MDB_txn *txn;
	struct store *st;
	near_bad_fn bad;
	void *ctx;
	uint64_t nbad, npending;
};

#define report(c, ...) near_report((c)->bad, (c)->ctx, &(c)->nbad, __VA_ARGS__)

/* A row names a record that is pending. */
static int check_row(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct checker *c = ctx;
	if (k->mv_size != BLOBKEY_BYTES || v->mv_size != 0) {
		report(c, "sigq: a row with a key of %zu bytes and a value of %zu (want %d and 0)", k->mv_size,
		       v->mv_size, BLOBKEY_BYTES);
		return 0;
	}
	struct blobkey bk;
	struct fprec r;
	char name[BLOBKEY_NAME_MAX];
	blobkey_decode(k->mv_data, &bk);
	blobkey_name(&bk, name);
	int rc = blob_get(c->txn, c->st, &bk, &r);
	if (rc == -ENOENT || rc == -EUCLEAN)
		report(c, "sigq: a row names blob %s, which has no fingerprint record", name);
	else if (!rc && !(r.flags & FPREC_SIG_PENDING))
		report(c, "sigq: a row names blob %s, whose record is not waiting for its signature", name);
	return rc == -ENOENT || rc == -EUCLEAN ? 0 : rc;
}

/* A pending record has its row and no signature. */
static int check_record(struct checker *c, const MDB_val *k, const struct fprec *r)
{
	struct blobkey bk;
	char name[BLOBKEY_NAME_MAX];
	blobkey_decode(k->mv_data, &bk);
	blobkey_name(&bk, name);
	c->npending++;
	if (r->flags & FPREC_HAS_SIMHASH)
		report(c, "blob %s: waiting for its signature, yet it has a simhash", name);
	MDB_val v;
	int mrc = c->st->has_sigq ? mdb_get(c->txn, c->st->db_sigq, (MDB_val *)k, &v) : MDB_NOTFOUND;
	if (mrc == MDB_NOTFOUND)
		report(c, "blob %s: waiting for its signature, without its row in sigq", name);
	return mrc == MDB_NOTFOUND ? 0 : pd_mdb_err(mrc);
}

/* Walk the pending fingerprint records (a damaged record is the blob
 * pass's to report). */
static int each_pending(MDB_txn *txn, struct store *st, int (*fn)(struct checker *c, const MDB_val *k, const struct fprec *r),
			struct checker *c)
{
	MDB_cursor *cur;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &cur));
	if (rc)
		return rc;
	MDB_val k, v;
	int mrc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == 0 && !rc; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct fprec r;
		if (k.mv_size == BLOBKEY_BYTES && !fprec_decode(v.mv_data, v.mv_size, &r) &&
		    (r.flags & FPREC_SIG_PENDING))
			rc = fn(c, &k, &r);
	}
	mdb_cursor_close(cur);
	return rc ? rc : (mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0);
}

int sigq_check(MDB_txn *txn, struct store *st, near_bad_fn bad, void *ctx, uint64_t *nbad, uint64_t *npending)
{
	struct checker c = { txn, st, bad, ctx, 0, 0 };
	int rc = each_row(txn, st, check_row, &c);
	if (!rc)
		rc = each_pending(txn, st, check_record, &c);
	*nbad = c.nbad;
	*npending = c.npending;
	return rc;
}

/* A record both pending and signed keeps its signature; every other
 * pending record gets its row. */
static int rebuild_record(struct checker *c, const MDB_val *k, const struct fprec *r)
{
	struct blobkey bk;
	blobkey_decode(k->mv_data, &bk);
	if (!(r->flags & FPREC_HAS_SIMHASH))
		return sigq_row_put(c->txn, c->st, &bk);
	struct fprec fixed = *r;
	fixed.flags &= (uint8_t)~FPREC_SIG_PENDING;
	return blob_put(c->txn, c->st, &bk, &fixed);
}

int sigq_rebuild(MDB_txn *txn, struct store *st)
{
	int rc = st->has_sigq ? pd_mdb_err(mdb_drop(txn, st->db_sigq, 0)) : sigq_open_table(txn, st, MDB_CREATE);
	struct checker c = { txn, st, NULL, NULL, 0, 0 };
	return rc ? rc : each_pending(txn, st, rebuild_record, &c);
}
