/* pack_int.h - what pack.c, pack_read.c and pack_codec.c share. */
#ifndef PD_PACK_INT_H
#define PD_PACK_INT_H

#include "pack.h"

/* Header h in its layout (h->layout): the bytes written. */
size_t pack_hdr_encode(const struct pack_rec_hdr *h, uint8_t out[PACK_REC_HDR_MAX]);
/* -EIO unless the avail bytes at in start with an intact record header
 * (either layout; h->layout and h->hdr_len say which and how long). */
int pack_hdr_decode(const uint8_t *in, size_t avail, struct pack_rec_hdr *h);
/* Decode a whole payload into out (h->size bytes) and check its XXH3-128. */
int pack_decode_all(const struct pack_rec_hdr *h, const uint8_t *payload, const struct pack_deps *deps, void *out);
/* The base bytes chunks first..last of a chunked delta h need (the
 * union of their windows, pack.h), read once for them all: bytes [off,
 * off + len) of a base of size bytes. All zero when h is no chunked
 * delta. */
struct pack_window {
	uint8_t *bytes;
	uint64_t off, size;
	size_t len;
};
int pack_window_get(const struct pack_rec_hdr *h, const uint8_t *table, uint32_t first, uint32_t last,
		    const struct pack_deps *deps, struct pack_window *w);
void pack_window_put(struct pack_window *w);
/* Decode chunk i (its stored bytes at src) into out and check it; w: the
 * base's window read for it (NULL: read here). */
int pack_decode_chunk(const struct pack_rec_hdr *h, const uint8_t *table, uint32_t i, const uint8_t *src,
		      const struct pack_deps *deps, const struct pack_window *w, void *out);

/* Hold the read descriptor of pack id (opened on first use, kept until
 * the pack is removed or the set closes; its header checked when
 * opened): the descriptor, or -errno (-EIO for a pack a record names
 * that is missing or removed). pack_fd_drop when done with it. */
int pack_fd_hold(struct pack_set *ps, uint32_t id);
void pack_fd_drop(struct pack_set *ps, uint32_t id);

#endif
