/* pack_read.c - reading records out of a store's packs: a record's
 * header, a whole page, the chunks that cover a range, a dictionary, a
 * record as it is stored (for the compactor's copy), and the scan of a
 * pack record by record (fsck, the rebuild from packs). The pack files
 * and their descriptors are pack.c's (fd_hold / fd_drop, pack_int.h); the
 * encodings are pack_codec.c's. The format is in pack.h. */
#include "pack.h"
#include "pack_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/byteorder.h"
#include "base/fdio.h"

int pack_read_hdr(struct pack_set *ps, const struct pack_loc *loc, struct pack_rec_hdr *h)
{
	int fd = pack_fd_hold(ps, loc->pack);
	if (fd < 0)
		return fd;
	uint8_t b[PACK_REC_HDR_MAX];
	size_t want = loc->len < sizeof b ? (size_t)loc->len : sizeof b;
	ssize_t n = fd_pread_full(fd, b, want, loc->off);
	pack_fd_drop(ps, loc->pack);
	if (n < 0)
		return (int)n;
	if ((size_t)n != want || pack_hdr_decode(b, want, h) || h->hdr_len + h->payload != loc->len)
		return -EIO;
	return 0;
}

/* The record's header, checked against what the caller expects; *fd is
 * then held (fd_drop). */
static int read_checked(struct pack_set *ps, const struct pack_loc *loc, const uint8_t md5[16], uint32_t variant,
			uint8_t kind, struct pack_rec_hdr *h, int *fd)
{
	int rc = pack_read_hdr(ps, loc, h);
	if (rc)
		return rc;
	if (h->kind != kind || (md5 && memcmp(h->md5, md5, 16)) || h->variant != variant)
		return -EIO;
	*fd = pack_fd_hold(ps, loc->pack);
	return *fd < 0 ? *fd : 0;
}

int pack_read_page(struct pack_set *ps, const struct pack_loc *loc, const uint8_t md5[16], uint32_t variant,
		   uint64_t size, const uint8_t *xxh128, const struct pack_deps *deps, void *out)
{
	struct pack_rec_hdr h;
	int fd;
	int rc = read_checked(ps, loc, md5, variant, PACK_KIND_PAGE, &h, &fd);
	if (rc)
		return rc;
	uint8_t *payload = NULL;
	if (h.size != size || (xxh128 && memcmp(h.xxh128, xxh128, 16)))
		rc = -EIO;
	else if (!(payload = malloc(h.payload ? (size_t)h.payload : 1)))
		rc = -ENOMEM;
	ssize_t n = rc ? 0 : fd_pread_full(fd, payload, (size_t)h.payload, loc->off + h.hdr_len);
	pack_fd_drop(ps, loc->pack);
	if (!rc)
		rc = n < 0 ? (int)n : (uint64_t)n != h.payload ? -EIO : pack_decode_all(&h, payload, deps, out);
	free(payload);
	return rc;
}

int pack_read_range(struct pack_set *ps, const struct pack_loc *loc, const uint8_t md5[16], uint32_t variant,
		    const struct pack_deps *deps, uint64_t off, size_t len, void *out)
{
	struct pack_rec_hdr h;
	int fd;
	int rc = read_checked(ps, loc, md5, variant, PACK_KIND_PAGE, &h, &fd);
	if (rc)
		return rc;
	if (off > h.size || len > h.size - off || len == 0 || h.nchunks == 1)
		pack_fd_drop(ps, loc->pack);
	if (off > h.size || len > h.size - off)
		return -EINVAL;
	if (len == 0)
		return 0;
	if (h.nchunks == 1) {
		uint8_t *all = malloc((size_t)h.size);
		if (!all)
			return -ENOMEM;
		rc = pack_read_page(ps, loc, md5, variant, h.size, NULL, deps, all);
		if (!rc)
			memcpy(out, all + off, len);
		free(all);
		return rc;
	}
	size_t tlen = (size_t)h.nchunks * PACK_CHUNK_ENT;
	uint64_t csize = 1ull << h.chunk_shift;
	struct pack_window win = { 0 };
	uint8_t *table = malloc(tlen), *raw = malloc((size_t)csize), *src = malloc((size_t)csize);
	if (!table || !raw || !src) {
		rc = -ENOMEM;
		goto done;
	}
	ssize_t n = fd_pread_full(fd, table, tlen, loc->off + h.hdr_len);
	if (n < 0 || (size_t)n != tlen) {
		rc = n < 0 ? (int)n : -EIO;
		goto done;
	}
	/* the stored offset of the first chunk wanted */
	uint32_t first = (uint32_t)(off >> h.chunk_shift), last = (uint32_t)((off + len - 1) >> h.chunk_shift);
	/* a chunked delta's base bytes for all of them, read once */
	if ((rc = pack_window_get(&h, table, first, last, deps, &win)))
		goto done;
	uint64_t pos = tlen;
	for (uint32_t i = 0; i < first; i++)
		pos += get_le32(table + (size_t)i * PACK_CHUNK_ENT);
	for (uint32_t i = first; i <= last && !rc; i++) {
		size_t slen = get_le32(table + (size_t)i * PACK_CHUNK_ENT);
		if (slen > csize || pos + slen > h.payload) {
			rc = -EIO;
			break;
		}
		n = fd_pread_full(fd, src, slen, loc->off + h.hdr_len + pos);
		if (n < 0 || (size_t)n != slen) {
			rc = n < 0 ? (int)n : -EIO;
			break;
		}
		if ((rc = pack_decode_chunk(&h, table, i, src, deps, &win, raw)))
			break;
		uint64_t cfrom = (uint64_t)i * csize;
		uint64_t a = off > cfrom ? off : cfrom;
		uint64_t b = off + len < cfrom + csize ? off + len : cfrom + csize;
		memcpy((uint8_t *)out + (a - off), raw + (a - cfrom), (size_t)(b - a));
		pos += slen;
	}
done:
	pack_fd_drop(ps, loc->pack);
	pack_window_put(&win);
	free(table);
	free(raw);
	free(src);
	return rc;
}

int pack_read_dict(struct pack_set *ps, const struct pack_loc *loc, uint32_t id, void **out, size_t *len)
{
	struct pack_rec_hdr h;
	int fd;
	int rc = read_checked(ps, loc, NULL, id, PACK_KIND_DICT, &h, &fd);
	if (rc)
		return rc;
	void *b = malloc(h.size ? (size_t)h.size : 1);
	ssize_t n = b ? fd_pread_full(fd, b, (size_t)h.size, loc->off + h.hdr_len) : 0;
	pack_fd_drop(ps, loc->pack);
	if (!b)
		return -ENOMEM;
	rc = n < 0 ? (int)n : (uint64_t)n != h.size ? -EIO : pack_decode_all(&h, b, NULL, b);
	if (rc) {
		free(b);
		return rc;
	}
	*out = b;
	*len = (size_t)h.size;
	return 0;
}

/* The scan reads the pack through a window of this many bytes: a dead
 * stretch (a punched hole, the partial blocks a punched record left) is
 * stepped over 8 bytes at a time, in memory, not with a pread each. */
#define SCAN_WINDOW (256u << 10)

static int scan_fd(int fd, uint32_t id,
		   int (*fn)(void *ctx, const struct pack_rec_hdr *h, const struct pack_loc *loc), void *ctx,
		   uint64_t *damaged)
{
	struct stat sb;
	if (fstat(fd, &sb))
		return -errno;
	uint8_t *win = malloc(SCAN_WINDOW);
	if (!win)
		return -ENOMEM;
	uint64_t end = (uint64_t)sb.st_size, off = PACK_HDR_BYTES, wstart = 0, wlen = 0;
	int rc = 0;
	while (off + PACK_REC_HDR_MIN <= end) {
		/* the window holds the longest header there can be here */
		uint64_t need = end - off < PACK_REC_HDR_MAX ? end - off : PACK_REC_HDR_MAX;
		if (off < wstart || off + need > wstart + wlen) {
			ssize_t n = fd_pread_full(fd, win, SCAN_WINDOW, off);
			if (n < 0) {
				rc = (int)n;
				break;
			}
			wstart = off;
			wlen = (uint64_t)n;
			if (wlen < need)
				break; /* the file is shorter than its size said */
		}
		const uint8_t *b = win + (off - wstart);
		struct pack_rec_hdr h;
		bool zero_pad = get_le32(b) == 0; /* alignment padding is not damage */
		if (pack_hdr_decode(b, (size_t)need, &h) == 0 && h.payload <= end - off - h.hdr_len) {
			struct pack_loc loc = { id, off, h.hdr_len + h.payload };
			if ((rc = fn(ctx, &h, &loc)))
				break;
			off = (off + loc.len + PACK_ALIGN - 1) & ~(uint64_t)(PACK_ALIGN - 1);
			continue;
		}
		if (!zero_pad)
			*damaged += PACK_ALIGN;
		off += PACK_ALIGN;
	}
	free(win);
	return rc;
}

int pack_scan(struct pack_set *ps, uint32_t id,
	      int (*fn)(void *ctx, const struct pack_rec_hdr *h, const struct pack_loc *loc), void *ctx,
	      uint64_t *damaged)
{
	*damaged = 0;
	int fd = pack_fd_hold(ps, id);
	if (fd < 0)
		return fd;
	int rc = scan_fd(fd, id, fn, ctx, damaged);
	pack_fd_drop(ps, id);
	return rc;
}

void pack_prefetch(struct pack_set *ps, uint32_t id)
{
	int fd = pack_fd_hold(ps, id);
	if (fd < 0)
		return;
	posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
	pack_fd_drop(ps, id);
}

int pack_read_rec(struct pack_set *ps, const struct pack_loc *loc, struct pack_rec *out)
{
	memset(out, 0, sizeof *out);
	if (loc->len < PACK_REC_HDR_MIN || loc->len > SIZE_MAX)
		return -EIO;
	int fd = pack_fd_hold(ps, loc->pack);
	if (fd < 0)
		return fd;
	uint8_t *buf = malloc((size_t)loc->len);
	ssize_t n = buf ? fd_pread_full(fd, buf, (size_t)loc->len, loc->off) : 0;
	pack_fd_drop(ps, loc->pack);
	int rc = !buf ? -ENOMEM : n < 0 ? (int)n : (uint64_t)n != loc->len ? -EIO : 0;
	if (!rc && (pack_hdr_decode(buf, (size_t)loc->len, &out->hdr) || out->hdr.hdr_len + out->hdr.payload != loc->len))
		rc = -EIO;
	if (rc) {
		free(buf);
		return rc;
	}
	out->buf = buf;
	out->len = (size_t)loc->len;
	return 0;
}

int pack_rec_decode(const struct pack_rec *r, const struct pack_deps *deps, void **out)
{
	const struct pack_rec_hdr *h = &r->hdr;
	*out = NULL;
	if (h->size > SIZE_MAX)
		return -EIO;
	void *b = malloc(h->size ? (size_t)h->size : 1);
	if (!b)
		return -ENOMEM;
	int rc = pack_decode_all(h, r->buf + h->hdr_len, deps, b);
	if (rc) {
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

int pack_rec_check(const struct pack_rec *r, const struct pack_deps *deps)
{
	void *out;
	int rc = pack_rec_decode(r, deps, &out);
	free(out);
	return rc;
}
