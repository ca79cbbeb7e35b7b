/* query_near.c - the answers of user.dedup.near and user.dedup.simhash.
 *
 * The neighbours come from the index (near_find), each confirmed by the
 * MinHash sketches (near_confirm); each is expanded to the
 * names of the files on it that the caller may reach, and the lines are
 * ordered nearest first, then by path. Only the lines that fit are kept,
 * in a max-heap: an answer never holds more than 64 KiB of paths however
 * many pages are alike (a million copies of a template page with a counter
 * in it), and the work is one path lookup per neighbouring file.
 *
 * Pages whose signature is pending (sigq.h) are answered as if signing were
 * synchronous: on a writable store the queue is drained first; what is
 * pending all the same (a read-only open of a store whose daemon was killed
 * or is running) is signed in memory, before the read transaction, and
 * compared with the query one by one.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "near/near.h"
#include "paths.h"
#include "query.h"
#include "near/sigq.h"
#include "near/simhash.h"

/* Room kept at the end of an answer for its "... N more" line. */
#define MORE_LINE_MAX 32

struct hit {
	struct blobkey k;
	unsigned dist;
	bool low, copy;
	double r; /* the confirm's resemblance; < 0: none known */
};

struct line {
	unsigned dist;
	bool low, copy;
	double r;
	size_t len;  /* path bytes */
	char *path;
};

/* The pending blobs and their signatures, computed from their files. */
struct pending {
	struct blobkey k;
	struct near_sig sig;
};

struct pending_set {
	struct pending *v;
	size_t n, cap;
};

static int collect_pending(void *ctx, const struct blobkey *k)
{
	struct pending_set *ps = ctx;
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? 2 * ps->cap : 16;
		struct pending *v = realloc(ps->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		ps->v = v;
		ps->cap = cap;
	}
	ps->v[ps->n++].k = *k;
	return 0;
}

/* Drain the queue (writable stores), then sign in memory what is still
 * pending. A blob freed meanwhile (its file gone) is left out. */
static int pending_sigs(struct store *st, struct pending_set *ps)
{
	MDB_txn *txn;
	sigq_drain(st); /* what fails is signed below */
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = sigq_each(txn, st, collect_pending, ps);
	store_read_end(st, txn);
	size_t kept = 0;
	for (size_t i = 0; i < ps->n && !rc; i++) {
		int src = sigq_sign_blob(st, &ps->v[i].k, &ps->v[i].sig);
		if (!src)
			ps->v[kept++] = ps->v[i];
		else if (src != -ENOENT)
			rc = src;
	}
	ps->n = kept;
	return rc;
}

static const struct near_sig *pending_find(const struct pending_set *ps, const struct blobkey *k)
{
	for (size_t i = 0; i < ps->n; i++)
		if (blobkey_equal(&ps->v[i].k, k))
			return &ps->v[i].sig;
	return NULL;
}

/* The blobs met as candidates, each checked once (the simhash tables and
 * the LSH bands find the same pages): open addressing on the MD5. */
struct seen {
	struct blobkey *v;
	size_t cap, n;
};

static uint64_t seen_slot(const struct blobkey *k, size_t cap)
{
	uint64_t h;
	memcpy(&h, k->md5, 8);
	return (h ^ k->variant) & (cap - 1);
}

static bool seen_empty(const struct blobkey *k)
{
	static const struct blobkey zero;
	return blobkey_equal(k, &zero);
}

/* 1: first meeting (recorded), 0: met before, or -ENOMEM. */
static int seen_add(struct seen *s, const struct blobkey *k)
{
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		struct blobkey *v = calloc(cap, sizeof *v);
		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++) {
			if (seen_empty(&s->v[i]))
				continue;
			size_t j = seen_slot(&s->v[i], cap);
			while (!seen_empty(&v[j]))
				j = (j + 1) & (cap - 1);
			v[j] = s->v[i];
		}
		free(s->v);
		s->v = v;
		s->cap = cap;
	}
	size_t j = seen_slot(k, s->cap);
	/* The all-zero key marks an empty slot; a blob of MD5 0 (not a
	 * practical one) is simply checked again. */
	while (!seen_empty(&s->v[j])) {
		if (blobkey_equal(&s->v[j], k))
			return 0;
		j = (j + 1) & (s->cap - 1);
	}
	s->v[j] = *k;
	s->n++;
	return 1;
}

struct answer {
	MDB_txn *txn;
	struct store *st;
	const struct pd_cred *cred;
	const struct near_sig *query; /* the asking page's signature */
	const struct near_self *self; /* its bytes' fingerprint (copies), or NULL */
	struct seen seen;
	uint32_t *qfull;     /* the asking page read back (nearset_full_of_text) */
	size_t nqfull;
	int qfull_state;     /* 0: not yet, 1: in qfull, < 0: cannot be read */
	struct hit *hits;
	size_t nhits, cap;
	struct line *heap;   /* max-heap of the lines kept, by line_cmp */
	size_t nheap, heapcap, bytes;
	bool cut_set;        /* a line that did not fit: none after it fits */
	struct line cut;
	uint64_t more;
	const struct hit *cur; /* the blob whose names are being added */
	const char *prefix;    /* before every path (the mountpoint), or "" */
	size_t prefix_len;
	int err;
};

/* One line: "D[?]<TAB>R<TAB>copy|near<TAB>/path" (query.h). */
static size_t line_head(const struct line *l, char *out, size_t n)
{
	char r[8] = "-";
	if (l->r >= 0)
		snprintf(r, sizeof r, "%.3f", l->r);
	return (size_t)snprintf(out, n, "%u%s\t%s\t%s\t", l->dist, l->low ? "?" : "", r, l->copy ? "copy" : "near");
}

static size_t line_bytes(const struct answer *a, const struct line *l)
{
	char h[64];
	return line_head(l, h, sizeof h) + a->prefix_len + l->len + 1;
}

/* Copies first, then nearest, then by path (bytes). */
static int line_cmp(const struct line *a, const struct line *b)
{
	if (a->copy != b->copy)
		return a->copy ? -1 : 1;
	if (a->dist != b->dist)
		return a->dist < b->dist ? -1 : 1;
	size_t n = a->len < b->len ? a->len : b->len;
	int c = memcmp(a->path, b->path, n);
	return c ? c : (a->len > b->len) - (a->len < b->len);
}

static int line_qsort_cmp(const void *a, const void *b)
{
	return line_cmp(a, b);
}

static void swap_lines(struct line *a, struct line *b)
{
	struct line t = *a;
	*a = *b;
	*b = t;
}

static void heap_up(struct line *h, size_t i)
{
	while (i && line_cmp(&h[(i - 1) / 2], &h[i]) < 0) {
		swap_lines(&h[(i - 1) / 2], &h[i]);
		i = (i - 1) / 2;
	}
}

static void heap_down(struct line *h, size_t n, size_t i)
{
	for (;;) {
		size_t big = i, l = 2 * i + 1, r = l + 1;
		if (l < n && line_cmp(&h[l], &h[big]) > 0)
			big = l;
		if (r < n && line_cmp(&h[r], &h[big]) > 0)
			big = r;
		if (big == i)
			return;
		swap_lines(&h[i], &h[big]);
		i = big;
	}
}

/* The largest kept line leaves the answer; it becomes the cut. */
static void evict_max(struct answer *a)
{
	struct line top = a->heap[0];
	a->heap[0] = a->heap[--a->nheap];
	heap_down(a->heap, a->nheap, 0);
	a->bytes -= line_bytes(a, &top);
	a->more++;
	if (a->cut_set)
		free(a->cut.path);
	a->cut = top;
	a->cut_set = true;
}

/* Offer one line. The kept lines are always the longest run, in answer
 * order, of the lines seen so far that fits; the cut is the first line
 * past that run, and nothing after it can enter any more. */
static int offer(struct answer *a, const char *path, size_t len)
{
	const struct hit *c = a->cur;
	struct line l = { c->dist, c->low || a->query->low_confidence, c->copy, c->r, len, (char *)path };
	size_t limit = QUERY_MAX - MORE_LINE_MAX;
	if ((a->cut_set && line_cmp(&l, &a->cut) >= 0) || line_bytes(a, &l) > limit) {
		a->more++;
		return 0;
	}
	if (a->nheap == a->heapcap) {
		size_t cap = a->heapcap ? 2 * a->heapcap : 256;
		struct line *h = realloc(a->heap, cap * sizeof *h);
		if (!h)
			return -ENOMEM;
		a->heap = h;
		a->heapcap = cap;
	}
	if (!(l.path = malloc(len ? len : 1)))
		return -ENOMEM;
	memcpy(l.path, path, len);
	a->heap[a->nheap++] = l;
	heap_up(a->heap, a->nheap - 1);
	a->bytes += line_bytes(a, &l);
	while (a->bytes > limit)
		evict_max(a);
	return 0;
}

static int offer_cb(void *ctx, const char *path, size_t len)
{
	return offer(ctx, path, len);
}

/* Is the blob of record r byte for byte the asking page? */
static bool is_copy(const struct answer *a, const struct blobkey *k, const struct fprec *r)
{
	const struct near_self *s = a->self;
	return s && s->has && !memcmp(k->md5, s->md5, 16) && !memcmp(r->xxh128, s->xxh128, 16) && r->size == s->size;
}

/* The asking page's every shingle, read back once per answer. */
static int query_full(struct answer *a)
{
	const struct near_self *s = a->self;
	if (a->qfull_state)
		return a->qfull_state < 0 ? a->qfull_state : 0;
	int rc = -ENOENT;
	if (s && s->has_key) {
		rc = near_full_of_blob(a->st, &s->key, &a->qfull, &a->nqfull);
	} else if (s && s->path) {
		int fd = open(s->path, O_RDONLY | O_CLOEXEC);
		struct stat sb;
		rc = fd < 0 ? -errno : fstat(fd, &sb) ? -errno : near_full_of_fd(fd, (uint64_t)sb.st_size, &a->qfull, &a->nqfull);
		if (fd >= 0)
			close(fd);
	}
	a->qfull_state = rc ? rc : 1;
	return rc;
}

/* The confirm (near.h), with a pair too close to call by the estimate
 * decided on both pages read back (nearset.h); a page that cannot be read
 * keeps the estimate. */
static int confirm(struct answer *a, const struct blobkey *k, const struct near_sig *sig, bool *yes, double *r)
{
	const struct near_sig *q = a->query;
	if (!q->has_set || !sig->has_set)
		return near_confirm_sketches(a->st, a->self && a->self->has_key ? &a->self->key : NULL, q, k, sig, yes, r);
	bool exact;
	*r = nearset_resemblance(&q->set, &sig->set, &exact);
	if (nearset_borderline(exact, *r) && !query_full(a)) {
		uint32_t *h;
		size_t n;
		int rc = near_full_of_blob(a->st, k, &h, &n);
		if (!rc)
			*r = nearset_full_resemblance(a->qfull, a->nqfull, h, n);
		free(h);
		if (rc && rc != -ENOENT && rc != -EIO && rc != -ENOMEM)
			return rc;
	}
	*yes = *r >= NEARSET_NEAR;
	return 0;
}

static int add_hit(struct answer *a, const struct blobkey *k, unsigned dist, const struct near_sig *sig, bool copy)
{
	double r = 1;
	bool yes = true;
	int rc = copy ? 0 : confirm(a, k, sig, &yes, &r);
	if (rc || !yes)
		return rc; /* close in bits, not in text */
	if (a->nhits == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 64;
		struct hit *v = realloc(a->hits, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		a->hits = v;
		a->cap = cap;
	}
	a->hits[a->nhits++] = (struct hit){ *k, dist, sig->low_confidence, copy, r };
	return 0;
}

/* A candidate from either generator: its record, its set, the confirm. */
static int candidate(struct answer *a, const struct blobkey *k)
{
	int rc = seen_add(&a->seen, k);
	if (rc <= 0)
		return rc;
	struct fprec r;
	struct near_sig *sig = malloc(sizeof *sig);
	if (!sig)
		return -ENOMEM;
	rc = blob_get(a->txn, a->st, k, &r);
	if (rc) {
		rc = rc == -ENOENT ? -EUCLEAN : rc;
	} else if (r.flags & FPREC_HAS_SIMHASH) { /* pending ones: pending_hits */
		near_sig_of_rec(&r, sig);
		if (!(rc = near_set_get(a->txn, a->st, k, sig)))
			rc = add_hit(a, k, simhash_distance(sig->simhash, a->query->simhash), sig, is_copy(a, k, &r));
	}
	free(sig);
	return rc;
}

static int hit_cb(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	(void)h;
	(void)dist;
	return candidate(ctx, k);
}

/* The pending blobs within distance maxdist; one signed since it was
 * collected is in the index, and one freed since is gone. */
static int pending_hits(struct answer *a, const struct pending_set *ps, unsigned maxdist)
{
	for (size_t i = 0; i < ps->n; i++) {
		const struct pending *p = &ps->v[i];
		struct fprec r;
		int rc = blob_get(a->txn, a->st, &p->k, &r);
		if (rc == -ENOENT || (!rc && !(r.flags & FPREC_SIG_PENDING)))
			continue;
		unsigned dist = simhash_distance(p->sig.simhash, a->query->simhash);
		bool copy = !rc && is_copy(a, &p->k, &r);
		/* within K, or a set that the bands would have found */
		if (!rc && p->sig.has && (dist <= maxdist || (p->sig.has_set && a->query->has_set)))
			rc = add_hit(a, &p->k, dist, &p->sig, copy);
		if (rc)
			return rc;
	}
	return 0;
}

static int hit_dist_cmp(const void *x, const void *y)
{
	const struct hit *a = x, *b = y;
	if (a->copy != b->copy)
		return a->copy ? -1 : 1;
	return (a->dist > b->dist) - (a->dist < b->dist);
}

static size_t write_answer(struct answer *a, char *buf)
{
	if (a->nheap)
		qsort(a->heap, a->nheap, sizeof *a->heap, line_qsort_cmp);
	size_t n = 0;
	for (size_t i = 0; i < a->nheap; i++) {
		const struct line *l = &a->heap[i];
		n += line_head(l, buf + n, QUERY_MAX - n);
		memcpy(buf + n, a->prefix, a->prefix_len);
		n += a->prefix_len;
		memcpy(buf + n, l->path, l->len);
		n += l->len;
		buf[n++] = '\n';
	}
	if (a->more)
		n += (size_t)snprintf(buf + n, MORE_LINE_MAX, "... %" PRIu64 " more\n", a->more);
	return n;
}

static void answer_free(struct answer *a)
{
	for (size_t i = 0; i < a->nheap; i++)
		free(a->heap[i].path);
	if (a->cut_set)
		free(a->cut.path);
	free(a->heap);
	free(a->hits);
	free(a->seen.v);
	free(a->qfull);
}

static int near_answer(MDB_txn *txn, struct store *st, const struct near_sig *sig, const struct near_self *self,
		       uint64_t exclude, const struct pd_cred *cred, const char *prefix, const struct pending_set *ps,
		       char *buf, size_t *len)
{
	if (!sig->has)
		return -ENODATA;
	if (st->near_stale)
		return -ESTALE; /* stored signatures of another version (near.h) */
	struct answer a = { .txn = txn, .st = st, .cred = cred, .query = sig, .self = self };
	a.prefix = prefix ? prefix : "";
	a.prefix_len = strlen(a.prefix);
	unsigned k = st->near_tables ? st->near_tables - 1 : 0;
	int rc = near_find(txn, st, sig->simhash, k, hit_cb, &a);
	if (!rc && sig->has_set)
		rc = near_lsh_find(txn, st, &sig->set, hit_cb, &a);
	if (!rc)
		rc = pending_hits(&a, ps, k);
	if (!rc && a.nhits)
		qsort(a.hits, a.nhits, sizeof *a.hits, hit_dist_cmp);
	for (size_t i = 0; i < a.nhits && !rc; i++) {
		a.cur = &a.hits[i];
		rc = path_names_of_blob(txn, st, &a.hits[i].k, exclude, cred, offer_cb, &a);
	}
	if (!rc)
		*len = write_answer(&a, buf);
	answer_free(&a);
	return rc;
}

int query_near_sig(struct store *st, const struct near_sig *sig, const struct near_self *self, uint64_t exclude,
		   const struct pd_cred *cred, char *buf, size_t *len)
{
	struct pending_set ps = { 0 };
	MDB_txn *txn;
	int rc = pending_sigs(st, &ps);
	if (!rc && !(rc = ns_read_begin(st, &txn))) {
		rc = near_answer(txn, st, sig, self, exclude, cred, NULL, &ps, buf, len);
		store_read_end(st, txn);
	}
	free(ps.v);
	return rc;
}

/* The signature of a sealed file: its record's, or for a pending record
 * the one computed from its file (in ps, or now). */
static int file_sig(MDB_txn *txn, struct store *st, uint64_t ino, const struct pending_set *ps,
		    struct near_sig *sig, struct near_self *self)
{
	struct blobkey k;
	struct fprec r;
	int rc = query_sealed_blob(txn, st, ino, &k);
	if (rc)
		return rc;
	if ((rc = blob_get(txn, st, &k, &r)))
		return rc == -ENOENT ? -EUCLEAN : rc;
	if (self) {
		*self = (struct near_self){ .has = true, .size = r.size, .has_key = true, .key = k };
		memcpy(self->md5, k.md5, 16);
		memcpy(self->xxh128, r.xxh128, 16);
	}
	if (!(r.flags & FPREC_SIG_PENDING)) {
		near_sig_of_rec(&r, sig);
		return near_set_get(txn, st, &k, sig);
	}
	const struct near_sig *known = ps ? pending_find(ps, &k) : NULL;
	if (known) {
		*sig = *known;
		return 0;
	}
	rc = sigq_sign_blob(st, &k, sig);
	return rc == -ENOENT ? -EUCLEAN : rc; /* a pending record keeps its file */
}

int query_near(struct store *st, uint64_t ino, const struct pd_cred *cred, char *buf, size_t *len)
{
	return query_near_prefixed(st, ino, cred, NULL, buf, len);
}

int query_near_prefixed(struct store *st, uint64_t ino, const struct pd_cred *cred, const char *prefix, char *buf,
			size_t *len)
{
	struct pending_set ps = { 0 };
	MDB_txn *txn;
	struct near_sig *sig = malloc(sizeof *sig);
	struct near_self self;
	int rc = sig ? pending_sigs(st, &ps) : -ENOMEM;
	if (!rc && !(rc = ns_read_begin(st, &txn))) {
		if (!(rc = file_sig(txn, st, ino, &ps, sig, &self)))
			rc = near_answer(txn, st, sig, &self, ino, cred, prefix, &ps, buf, len);
		store_read_end(st, txn);
	}
	free(ps.v);
	free(sig);
	return rc;
}

size_t query_format_simhash(const struct near_sig *sig, char *buf)
{
	if (!sig->has)
		return (size_t)sprintf(buf, "none");
	return (size_t)sprintf(buf, "%016" PRIx64 "%s", sig->simhash, sig->low_confidence ? " low-confidence" : "");
}

int query_simhash(struct store *st, uint64_t ino, char *buf, size_t *len)
{
	MDB_txn *txn;
	struct near_sig sig;
	sigq_drain(st); /* what fails is signed by file_sig */
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = file_sig(txn, st, ino, NULL, &sig, NULL);
	store_read_end(st, txn);
	if (!rc)
		*len = query_format_simhash(&sig, buf);
	return rc;
}
