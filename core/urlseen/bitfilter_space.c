/* bitfilter_space.c - the URL-seen filter's file space and key logs (see
 * bitfilter.c for the design and bitfilter_int.h for the parts). */
#include "bitfilter_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- space in the file ---- */

static int file_extend(struct bitfilter *f, uint64_t end)
{
	struct stat st;
	if (fstat(f->fd, &st) != 0)
		return -errno;
	if ((uint64_t)st.st_size < end && ftruncate(f->fd, (off_t)end) != 0)
		return -errno;
	return 0;
}

/* Blocks for [off, off+len) now, so that a store through a mapping never
 * meets a full disk (SIGBUS). */
int bf_reserve(struct bitfilter *f, uint64_t off, uint64_t len)
{
	int err = posix_fallocate(f->fd, (off_t)off, (off_t)len);
	if (err == EOPNOTSUPP || err == EINVAL || err == 0)
		return 0;
	return -err;
}

/* Space for len bytes at a multiple of align (a power of two >= UNIT).
 * mapped: the space is written through a mapping (leaf bits), so its
 * blocks are reserved now; space written with pwrite (key logs) gets them
 * as it is written, and a full disk is an error of that write. */
int bf_region_alloc(struct bitfilter *f, uint64_t len, uint64_t align, bool mapped,
		    uint64_t *off)
{
	struct bf_header *h = f->hdr;
	int rc;

	len = (len + UNIT - 1) / UNIT * UNIT;
	/* first fit, taken from the end of the extent: one store (its length)
	 * hands the space out; space after an aligned piece goes back into
	 * the table afterwards (a kill in between loses it, never gives it
	 * out twice) */
	for (uint32_t i = 0; i < h->free_hw && i < FREE_MAX; i++) {
		struct bf_extent *e = &f->freel[i];
		if (e->len < len)
			continue;
		uint64_t end = e->off + e->len, o = (end - len) & ~(align - 1);
		if (o < e->off)
			continue;
		if (mapped && (rc = bf_reserve(f, o, len)) != 0)
			return rc;
		e->len = o - e->off;
		if (o + len < end)
			bf_region_free(f, o + len, end - o - len);
		*off = o;
		return 0;
	}
	uint64_t start = h->frontier, o = (start + align - 1) & ~(align - 1);
	if ((rc = file_extend(f, o + len)) != 0)
		return rc;
	if (mapped && (rc = bf_reserve(f, o, len)) != 0) {
		if (ftruncate(f->fd, (off_t)start) != 0) {
			/* the file stays longer than the frontier: harmless */
		}
		return rc;
	}
	h->frontier = o + len;
	if (o > start)
		bf_region_free(f, start, o - start);
	*off = o;
	return 0;
}

void bf_region_free(struct bitfilter *f, uint64_t off, uint64_t len)
{
	struct bf_header *h = f->hdr;

	len = (len + UNIT - 1) / UNIT * UNIT;
	if (len == 0)
		return;
	/* give the blocks back; a file system without holes keeps them */
	(void)fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
	/* merge with free neighbours: drop the neighbour first (a kill in
	 * between loses it, never hands it out twice) */
	for (uint32_t i = 0; i < h->free_hw && i < FREE_MAX; i++) {
		struct bf_extent *e = &f->freel[i];
		if (!e->len)
			continue;
		if (e->off + e->len == off) {
			uint64_t o = e->off, l = e->len;
			e->len = 0;
			off = o;
			len += l;
		} else if (off + len == e->off) {
			uint64_t l = e->len;
			e->len = 0;
			len += l;
		}
	}
	if (off + len == h->frontier) {
		h->frontier = off;
		if (ftruncate(f->fd, (off_t)off) != 0) {
			/* longer than the frontier: harmless */
		}
		return;
	}
	for (uint32_t i = 0; i < FREE_MAX; i++) {
		struct bf_extent *e = &f->freel[i];
		if (e->len)
			continue;
		e->off = off;
		__atomic_store_n(&e->len, len, __ATOMIC_RELEASE);
		if (i >= h->free_hw)
			h->free_hw = i + 1;
		return;
	}
	h->lost += len;
}

/* ---- the key logs ---- */

/* The whole of len bytes at off: a short read is a damaged file. */
int bf_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t r = fd_pread_full(fd, buf, len, off);
	if (r < 0)
		return (int)r;
	return (size_t)r == len ? 0 : -EUCLEAN;
}

/* Give leaf id's log a new last chunk. Order (for a kill at any point): the
 * chunk's next pointer is zeroed and the chunk linked before the tail word
 * that counts it is stored. */
static int log_new_chunk(struct bitfilter *f, struct bf_leaf *e)
{
	uint64_t off, zero = 0;
	int rc;
	if ((rc = bf_region_alloc(f, CHUNK_BYTES, UNIT, false, &off)) != 0)
		return rc;
	if ((rc = fd_pwrite_all(f->fd, &zero, sizeof zero, off)) != 0) {
		bf_region_free(f, off, CHUNK_BYTES);
		return rc;
	}
	if (tail_chunks(e->tail) == 0)
		e->chunk_first = off;
	else if ((rc = fd_pwrite_all(f->fd, &off, sizeof off, tail_off(e->tail))) != 0) {
		bf_region_free(f, off, CHUNK_BYTES);
		return rc;
	}
	__atomic_store_n(&e->tail, tail_pack(off, tail_chunks(e->tail) + 1), __ATOMIC_RELEASE);
	return 0;
}

/* Append n keys to leaf id's log: one pwrite per chunk they land in (not
 * stores through a mapping of the last chunk: each new chunk then cost a
 * map, an unmap and page faults that zero, fill and mark its pages, about
 * twice the time of the writes). The keys are written before the count
 * that covers them is stored. */
int bf_log_keys(struct bitfilter *f, uint32_t id, const uint64_t *keys, size_t n)
{
	struct bf_leaf *e = &f->leaves[id];
	int rc;
	while (n) {
		uint64_t slot = e->count % CHUNK_KEYS;
		if (tail_chunks(e->tail) < e->count / CHUNK_KEYS + 1 &&
		    (rc = log_new_chunk(f, e)) != 0)
			return rc;
		size_t m = CHUNK_KEYS - slot < n ? (size_t)(CHUNK_KEYS - slot) : n;
		if ((rc = fd_pwrite_all(f->fd, keys, m * 8, tail_off(e->tail) + 8 * (1 + slot))) != 0)
			return rc;
		__atomic_store_n(&e->count, e->count + m, __ATOMIC_RELEASE);
		keys += m;
		n -= m;
	}
	return 0;
}

static int offlist_push(struct offlist *l, uint64_t off)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		uint64_t *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = off;
	return 0;
}

int bf_read_log(struct bitfilter *f, const struct bf_leaf *e, keys_fn fn, void *ctx,
		struct offlist *chunks)
{
	uint64_t left = e->count, off = e->chunk_first;
	uint64_t nchunks = tail_chunks(e->tail);
	int rc;

	for (uint64_t c = 0; c < nchunks; c++) {
		if (!bf_region_ok(f, off, CHUNK_BYTES))
			return -EUCLEAN;
		if (chunks && (rc = offlist_push(chunks, off)) != 0)
			return rc;
		if ((rc = bf_pread_all(f->fd, f->chunkbuf, CHUNK_BYTES, off)) != 0)
			return rc;
		size_t n = left < CHUNK_KEYS ? (size_t)left : CHUNK_KEYS;
		if (n && fn && (rc = fn(f, ctx, f->chunkbuf + 1, n)) != 0)
			return rc;
		left -= n;
		if (c + 1 < nchunks)
			off = f->chunkbuf[0];
	}
	return left ? -EUCLEAN : 0;
}

int bf_logw_put(struct bitfilter *f, struct logw *w, uint64_t x)
{
	int rc;
	if (w->chunks == 0 || w->slot == CHUNK_KEYS) {
		uint64_t off;
		if ((rc = bf_region_alloc(f, CHUNK_BYTES, UNIT, false, &off)) != 0)
			return rc;
		if ((rc = offlist_push(&w->mine, off)) != 0) {
			bf_region_free(f, off, CHUNK_BYTES);
			return rc;
		}
		if (w->chunks) {
			w->buf[0] = off;
			if ((rc = fd_pwrite_all(f->fd, w->buf, CHUNK_BYTES, w->cur)) != 0)
				return rc;
		} else {
			w->first = off;
		}
		memset(w->buf, 0, CHUNK_BYTES);
		w->cur = off;
		w->chunks++;
		w->slot = 0;
	}
	w->buf[1 + w->slot++] = x;
	w->count++;
	return 0;
}

int bf_logw_finish(struct bitfilter *f, struct logw *w)
{
	if (!w->chunks)
		return 0;
	w->buf[0] = 0;
	return fd_pwrite_all(f->fd, w->buf, CHUNK_BYTES, w->cur);
}

void bf_logw_abandon(struct bitfilter *f, struct logw *w)
{
	for (size_t i = 0; i < w->mine.n; i++)
		bf_region_free(f, w->mine.v[i], CHUNK_BYTES);
}

