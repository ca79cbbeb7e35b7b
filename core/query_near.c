/* query_near.c - the answers of user.dedup.near and user.dedup.simhash.
 *
 * The neighbours come from the index (near_find), each confirmed by the
 * MinHash sketches (near_confirm); each is expanded to the
 * names of the files on it that the caller may reach, and the lines are
 * ordered nearest first, then by path. Only the lines that fit are kept,
 * in a max-heap: an answer never holds more than 64 KiB of paths however
 * many pages are alike (a million copies of a template page with a counter
 * in it), and the work is one path lookup per neighbouring file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob.h"
#include "near.h"
#include "paths.h"
#include "query.h"

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
	if (!near_confirm(a->query, &sig))
		return 0; /* close in bits, not in text */
	if (a->nhits == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 64;
		struct hit *v = realloc(a->hits, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		a->hits = v;
		a->cap = cap;
	}
	a->hits[a->nhits++] = (struct hit){ *k, dist, sig.low_confidence };
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
		       const struct pd_cred *cred, char *buf, size_t *len)
{
	if (!sig->has)
		return -ENODATA;
	if (st->near_stale)
		return -ESTALE; /* stored signatures of another version (near.h) */
	struct answer a = { .txn = txn, .st = st, .cred = cred, .query = sig };
	unsigned k = st->near_tables ? st->near_tables - 1 : 0;
	int rc = near_find(txn, st, sig->simhash, k, hit_cb, &a);
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
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = near_answer(txn, st, sig, exclude, cred, buf, len);
	store_read_end(st, txn);
	return rc;
}

/* The signature a sealed file's record keeps. */
static int file_sig(MDB_txn *txn, struct store *st, uint64_t ino, struct near_sig *sig)
{
	struct blobkey k;
	struct fprec r;
	int rc = query_sealed_blob(txn, st, ino, &k);
	if (rc)
		return rc;
	if ((rc = blob_get(txn, st, &k, &r)))
		return rc == -ENOENT ? -EUCLEAN : rc;
	near_sig_of_rec(&r, sig);
	return 0;
}

int query_near(struct store *st, uint64_t ino, const struct pd_cred *cred, char *buf, size_t *len)
{
	MDB_txn *txn;
	struct near_sig sig;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	if (!(rc = file_sig(txn, st, ino, &sig)))
		rc = near_answer(txn, st, &sig, ino, cred, buf, len);
	store_read_end(st, txn);
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
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = file_sig(txn, st, ino, &sig);
	store_read_end(st, txn);
	if (!rc)
		*len = query_format_simhash(&sig, buf);
	return rc;
}
