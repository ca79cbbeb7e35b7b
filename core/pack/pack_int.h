/* pack_int.h - what pack.c and pack_codec.c share. */
#ifndef PD_PACK_INT_H
#define PD_PACK_INT_H

#include "pack.h"

void pack_hdr_encode(const struct pack_rec_hdr *h, uint8_t out[PACK_REC_HDR]);
/* -EIO unless in is an intact record header. */
int pack_hdr_decode(const uint8_t in[PACK_REC_HDR], struct pack_rec_hdr *h);
/* Decode a whole payload into out (h->size bytes) and check its XXH3-128. */
int pack_decode_all(const struct pack_rec_hdr *h, const uint8_t *payload, const struct pack_deps *deps, void *out);
/* Decode chunk i (its stored bytes at src) into out and check it. */
int pack_decode_chunk(const struct pack_rec_hdr *h, const uint8_t *table, uint32_t i, const uint8_t *src,
		      const struct pack_deps *deps, void *out);

#endif
