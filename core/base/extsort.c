/* extsort.c - fixed-size records sorted in bounded memory. See extsort.h. */
#include "extsort.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fdio.h"

#define EXTSORT_MIN_RECORDS 16	     /* the buffer's least size, in records */
#define EXTSORT_READ_MIN (4u << 10)  /* a run's read buffer: at least ... */
#define EXTSORT_READ_MAX (1u << 20)  /* ... and at most */

/* A run: its records in [off, end) of the file, read through buf; the
 * records in memory are buf[pos, len). When nothing was written, the one
 * run is the sort's buffer (off == end). */
struct run {
	uint64_t off, end;
	uint8_t *buf;
	size_t pos, len;
};

struct extsort {
	size_t rs;	   /* bytes a record */
	size_t cap, n;	   /* records the buffer holds, and holds now */
	uint8_t *buf;
	size_t mem;
	int dirfd, fd;
	uint64_t file_end;
	struct run *runs;
	size_t nruns, runs_cap, written;
	size_t *heap, nheap; /* runs with records left, by their next record */
	bool merging, returned;
};

/* ---- the buffer sorted in place ---------------------------------------
 *
 * An MSD radix sort that permutes in place (McIlroy, Bostic and McIlroy's
 * "American flag sort"), so that the buffer can take the whole memory
 * bound: qsort takes a copy of what it sorts (glibc's merge sort), and
 * compares through a callback. Buckets of a few records end with an
 * insertion sort on the bytes left. */

#define RADIX_SMALL 24 /* records a bucket sorted by insertion */

static void swap_rec(uint8_t *a, uint8_t *b, size_t rs, uint8_t *tmp)
{
	memcpy(tmp, a, rs);
	memcpy(a, b, rs);
	memcpy(b, tmp, rs);
}

/* n records of rs bytes, equal in their first d bytes. */
static void insertion_sort(uint8_t *v, size_t n, size_t rs, size_t d, uint8_t *tmp)
{
	for (size_t i = 1; i < n; i++) {
		memcpy(tmp, v + i * rs, rs);
		size_t j = i;
		for (; j > 0 && memcmp(v + (j - 1) * rs + d, tmp + d, rs - d) > 0; j--)
			memcpy(v + j * rs, v + (j - 1) * rs, rs);
		memcpy(v + j * rs, tmp, rs);
	}
}

static void radix_sort(uint8_t *v, size_t n, size_t rs, size_t d, uint8_t *tmp)
{
	size_t next[256], end[256];
	for (;; d++) { /* bytes all records share: no bucket to sort */
		if (d >= rs || n < 2)
			return;
		if (n <= RADIX_SMALL) {
			insertion_sort(v, n, rs, d, tmp);
			return;
		}
		memset(end, 0, sizeof end);
		for (size_t i = 0; i < n; i++)
			end[v[i * rs + d]]++;
		if (end[v[d]] != n)
			break;
	}
	size_t at = 0;
	for (size_t b = 0; b < 256; b++) {
		next[b] = at;
		end[b] = at += end[b];
	}
	/* each record moved into its byte's bucket: a record out of place is
	 * swapped with the one at its bucket's next free slot */
	for (size_t b = 0; b < 256; b++)
		while (next[b] < end[b]) {
			uint8_t c = v[next[b] * rs + d];
			if (c == b)
				next[b]++;
			else
				swap_rec(v + next[b] * rs, v + next[c]++ * rs, rs, tmp);
		}
	for (size_t b = 0, from = 0; b < 256; from = end[b++])
		radix_sort(v + from * rs, end[b] - from, rs, d + 1, tmp);
}

static void sort_buffer(struct extsort *s)
{
	uint8_t tmp[EXTSORT_REC_MAX];
	radix_sort(s->buf, s->n, s->rs, 0, tmp);
}

int extsort_new(size_t rec_bytes, size_t mem, int dirfd, struct extsort **out)
{
	*out = NULL;
	if (!rec_bytes || rec_bytes > EXTSORT_REC_MAX)
		return -EINVAL;
	struct extsort *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->rs = rec_bytes;
	s->cap = mem / rec_bytes;
	if (s->cap < EXTSORT_MIN_RECORDS)
		s->cap = EXTSORT_MIN_RECORDS;
	s->mem = s->cap * rec_bytes;
	s->dirfd = dirfd;
	s->fd = -1;
	if (!(s->buf = malloc(s->mem))) {
		free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void extsort_free(struct extsort *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nruns; i++)
		if (s->runs[i].buf != s->buf)
			free(s->runs[i].buf);
	free(s->runs);
	free(s->heap);
	free(s->buf);
	if (s->fd >= 0)
		close(s->fd);
	free(s);
}

/* An unnamed file for the runs: beside the caller's data first (a disk
 * sized for it), else the usual temporary directories. */
static int open_file(struct extsort *s)
{
	int fd = s->dirfd >= 0 ? openat(s->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) : -1;
	int err = s->dirfd >= 0 ? errno : ENOENT;
	const char *dirs[] = { getenv("TMPDIR"), "/var/tmp", "/tmp" };
	for (size_t i = 0; fd < 0 && i < sizeof dirs / sizeof dirs[0]; i++)
		if (dirs[i] && *dirs[i]) {
			fd = open(dirs[i], O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
			if (fd < 0 && err == ENOENT)
				err = errno;
		}
	if (fd < 0)
		return -err;
	s->fd = fd;
	return 0;
}

static int add_run(struct extsort *s, struct run r)
{
	if (s->nruns == s->runs_cap) {
		size_t cap = s->runs_cap ? s->runs_cap * 2 : 16;
		struct run *v = realloc(s->runs, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		s->runs = v;
		s->runs_cap = cap;
	}
	s->runs[s->nruns++] = r;
	return 0;
}

/* The buffer sorted and written out as a run. */
static int spill(struct extsort *s)
{
	int rc = s->fd < 0 ? open_file(s) : 0;
	if (rc)
		return rc;
	sort_buffer(s);
	size_t len = s->n * s->rs;
	if ((rc = fd_pwrite_all(s->fd, s->buf, len, s->file_end)))
		return rc;
	rc = add_run(s, (struct run){ .off = s->file_end, .end = s->file_end + len });
	s->file_end += len;
	s->n = 0;
	s->written += !rc;
	return rc;
}

int extsort_add(struct extsort *s, const void *rec)
{
	if (s->merging)
		return -EINVAL;
	int rc = s->n == s->cap ? spill(s) : 0; /* (sorted there) */
	if (rc)
		return rc;
	memcpy(s->buf + s->n++ * s->rs, rec, s->rs);
	return 0;
}

size_t extsort_runs(const struct extsort *s)
{
	return s->written;
}

/* The next records of run r read into its buffer (none left: len 0). */
static int refill(struct extsort *s, struct run *r, size_t bufsize)
{
	r->pos = r->len = 0;
	if (r->off >= r->end)
		return 0;
	size_t want = r->end - r->off < bufsize ? (size_t)(r->end - r->off) : bufsize;
	ssize_t got = fd_pread_full(s->fd, r->buf, want, r->off);
	if (got < 0)
		return (int)got;
	if ((size_t)got != want)
		return -EIO; /* the file is shorter than what was written to it */
	r->off += want;
	r->len = want;
	return 0;
}

static const uint8_t *head_of(const struct extsort *s, size_t run)
{
	const struct run *r = &s->runs[run];
	return r->buf + r->pos;
}

static bool heap_less(const struct extsort *s, size_t a, size_t b)
{
	return memcmp(head_of(s, s->heap[a]), head_of(s, s->heap[b]), s->rs) < 0;
}

static void heap_swap(struct extsort *s, size_t a, size_t b)
{
	size_t t = s->heap[a];
	s->heap[a] = s->heap[b];
	s->heap[b] = t;
}

static void sift_down(struct extsort *s, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < s->nheap && heap_less(s, l, m))
			m = l;
		if (l + 1 < s->nheap && heap_less(s, l + 1, m))
			m = l + 1;
		if (m == i)
			return;
		heap_swap(s, i, m);
		i = m;
	}
}

/* Each run's read buffer: the memory bound shared among the runs (the
 * sort's buffer is freed by then), a whole number of records. */
static size_t read_buffer_bytes(const struct extsort *s)
{
	size_t each = s->mem / (s->nruns ? s->nruns : 1);
	if (each < EXTSORT_READ_MIN)
		each = EXTSORT_READ_MIN;
	if (each > EXTSORT_READ_MAX)
		each = EXTSORT_READ_MAX;
	each -= each % s->rs;
	return each ? each : s->rs;
}

int extsort_finish(struct extsort *s)
{
	if (s->merging)
		return 0;
	s->merging = true;
	int rc = 0;
	if (!s->nruns) { /* all in memory: one run, the buffer itself */
		sort_buffer(s);
		rc = s->n ? add_run(s, (struct run){ .buf = s->buf, .len = s->n * s->rs }) : 0;
	} else { /* the last run written too, its memory for the runs' reads */
		rc = s->n ? spill(s) : 0;
		free(s->buf);
		s->buf = NULL;
	}
	if (rc)
		return rc;
	size_t file_runs = s->buf ? 0 : s->nruns, bufsize = read_buffer_bytes(s);
	if (!(s->heap = malloc((s->nruns ? s->nruns : 1) * sizeof *s->heap)))
		return -ENOMEM;
	for (size_t i = 0; i < file_runs; i++) {
		if (!(s->runs[i].buf = malloc(bufsize)))
			return -ENOMEM;
		if ((rc = refill(s, &s->runs[i], bufsize)))
			return rc;
	}
	for (size_t i = 0; i < s->nruns; i++)
		if (s->runs[i].len)
			s->heap[s->nheap++] = i;
	for (size_t i = s->nheap / 2; i-- > 0;)
		sift_down(s, i);
	return 0;
}

int extsort_next(struct extsort *s, const void **rec)
{
	if (!s->merging)
		return -EINVAL;
	if (s->returned && s->nheap) {
		/* the record returned last goes: its run moves on */
		struct run *r = &s->runs[s->heap[0]];
		r->pos += s->rs;
		if (r->pos == r->len && r->buf != s->buf) {
			int rc = refill(s, r, read_buffer_bytes(s));
			if (rc)
				return rc;
		}
		if (r->pos == r->len)
			s->heap[0] = s->heap[--s->nheap];
		if (s->nheap)
			sift_down(s, 0);
	}
	s->returned = false;
	if (!s->nheap)
		return 0;
	*rec = head_of(s, s->heap[0]);
	s->returned = true;
	return 1;
}
