/* pack_int.h - what pack.c and pack_codec.c share. */
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
/* Decode chunk i (its stored bytes at src) into out and check it. */
int pack_decode_chunk(const struct pack_rec_hdr *h, const uint8_t *table, uint32_t i, const uint8_t *src,
		      const struct pack_deps *deps, void *out);

#endif
