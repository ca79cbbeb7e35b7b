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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	bool low;
};

struct line {
	unsigned dist;
	bool low;
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
	int rc = store_read_begin(st, &txn);
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

struct answer {
	MDB_txn *txn;
	struct store *st;
	const struct pd_cred *cred;
	const struct near_sig *query; /* the asking page's signature */
	struct hit *hits;
	size_t nhits, cap;
	struct line *heap;   /* max-heap of the lines kept, by line_cmp */
	size_t nheap, heapcap, bytes;
	bool cut_set;        /* a line that did not fit: none after it fits */
	struct line cut;
	uint64_t more;
	unsigned cur_dist;   /* of the blob whose names are being added */
	bool cur_low;
	int err;
};

static size_t line_bytes(const struct line *l)
{
	char d[16];
	return (size_t)snprintf(d, sizeof d, "%u", l->dist) + l->low + 1 + l->len + 1;
}

/* Nearest first, then by path (bytes). */
static int line_cmp(const struct line *a, const struct line *b)
{
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
	a->bytes -= line_bytes(&top);
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
	struct line l = { a->cur_dist, a->cur_low, len, (char *)path };
	size_t limit = QUERY_MAX - MORE_LINE_MAX;
	if ((a->cut_set && line_cmp(&l, &a->cut) >= 0) || line_bytes(&l) > limit) {
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
	a->bytes += line_bytes(&l);
	while (a->bytes > limit)
		evict_max(a);
	return 0;
}

static int offer_cb(void *ctx, const char *path, size_t len)
{
	return offer(ctx, path, len);
}

static int add_hit(struct answer *a, const struct blobkey *k, unsigned dist, const struct near_sig *sig)
{
	if (!near_confirm(a->query, sig))
		return 0; /* close in bits, not in text */
	if (a->nhits == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 64;
		struct hit *v = realloc(a->hits, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		a->hits = v;
		a->cap = cap;
	}
	a->hits[a->nhits++] = (struct hit){ *k, dist, sig->low_confidence };
	return 0;
}

static int hit_cb(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	struct answer *a = ctx;
	(void)h;
	struct fprec r;
	struct near_sig sig;
	int rc = blob_get(a->txn, a->st, k, &r);
	if (rc)
		return rc == -ENOENT ? -EUCLEAN : rc;
	near_sig_of_rec(&r, &sig);
	return add_hit(a, k, dist, &sig);
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
		if (!rc && p->sig.has && dist <= maxdist)
			rc = add_hit(a, &p->k, dist, &p->sig);
		if (rc)
			return rc;
	}
	return 0;
}

static int hit_dist_cmp(const void *x, const void *y)
{
	const struct hit *a = x, *b = y;
	return (a->dist > b->dist) - (a->dist < b->dist);
}

static size_t write_answer(struct answer *a, char *buf)
{
	if (a->nheap)
		qsort(a->heap, a->nheap, sizeof *a->heap, line_qsort_cmp);
	size_t n = 0;
	for (size_t i = 0; i < a->nheap; i++) {
		const struct line *l = &a->heap[i];
		n += (size_t)sprintf(buf + n, "%u%s\t", l->dist, l->low ? "?" : "");
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
}

static int near_answer(MDB_txn *txn, struct store *st, const struct near_sig *sig, uint64_t exclude,
		       const struct pd_cred *cred, const struct pending_set *ps, char *buf, size_t *len)
{
	if (!sig->has)
		return -ENODATA;
	if (st->near_stale)
		return -ESTALE; /* stored signatures of another version (near.h) */
	struct answer a = { .txn = txn, .st = st, .cred = cred, .query = sig };
	unsigned k = st->near_tables ? st->near_tables - 1 : 0;
	int rc = near_find(txn, st, sig->simhash, k, hit_cb, &a);
	if (!rc)
		rc = pending_hits(&a, ps, k);
	if (!rc && a.nhits)
		qsort(a.hits, a.nhits, sizeof *a.hits, hit_dist_cmp);
	for (size_t i = 0; i < a.nhits && !rc; i++) {
		a.cur_dist = a.hits[i].dist;
		a.cur_low = a.hits[i].low || sig->low_confidence;
		rc = path_names_of_blob(txn, st, &a.hits[i].k, exclude, cred, offer_cb, &a);
	}
	if (!rc)
		*len = write_answer(&a, buf);
	answer_free(&a);
	return rc;
}

int query_near_sig(struct store *st, const struct near_sig *sig, uint64_t exclude, const struct pd_cred *cred,
		   char *buf, size_t *len)
{
	struct pending_set ps = { 0 };
	MDB_txn *txn;
	int rc = pending_sigs(st, &ps);
	if (!rc && !(rc = store_read_begin(st, &txn))) {
		rc = near_answer(txn, st, sig, exclude, cred, &ps, buf, len);
		store_read_end(st, txn);
	}
	free(ps.v);
	return rc;
}

/* The signature of a sealed file: its record's, or for a pending record
 * the one computed from its file (in ps, or now). */
static int file_sig(MDB_txn *txn, struct store *st, uint64_t ino, const struct pending_set *ps,
		    struct near_sig *sig)
{
	struct blobkey k;
	struct fprec r;
	int rc = query_sealed_blob(txn, st, ino, &k);
	if (rc)
		return rc;
	if ((rc = blob_get(txn, st, &k, &r)))
		return rc == -ENOENT ? -EUCLEAN : rc;
	if (!(r.flags & FPREC_SIG_PENDING)) {
		near_sig_of_rec(&r, sig);
		return 0;
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
	struct pending_set ps = { 0 };
	MDB_txn *txn;
	struct near_sig sig;
	int rc = pending_sigs(st, &ps);
	if (!rc && !(rc = store_read_begin(st, &txn))) {
		if (!(rc = file_sig(txn, st, ino, &ps, &sig)))
			rc = near_answer(txn, st, &sig, ino, cred, &ps, buf, len);
		store_read_end(st, txn);
	}
	free(ps.v);
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
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = file_sig(txn, st, ino, NULL, &sig);
	store_read_end(st, txn);
	if (!rc)
		*len = query_format_simhash(&sig, buf);
	return rc;
}
