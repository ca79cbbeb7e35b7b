/* ndelta_int.h - what ndelta.c (the queue, its thread, the moves) and
 * ndelta_base.c (the choice of a base, the delta against it) share (not
 * an interface). */
#ifndef PD_NDELTA_INT_H
#define PD_NDELTA_INT_H

#include "ndelta.h" /* and through store/store.h, pack.h's records */

struct near_set_cache;

/* The zstd level of a delta (-o pack_level, else PACK_DEFAULT_LEVEL). */
int ndelta_level(const struct store *st);

/* Page k's record (*r) and its bytes decoded (*out, malloc'd). */
int ndelta_read_page(struct store *st, const struct blobkey *k, struct fprec *r, void **out);

/* The best delta of page k (record r, its bytes in *page, read here when
 * NULL) among the rule's candidates (ndelta.h, steps 1-3): *best
 * (best->buf NULL: none), its base in *base; *examined grows by the
 * candidates that could be a base. */
int ndelta_best_delta(struct store *st, struct near_set_cache *cache, unsigned rule, const struct blobkey *k,
		      const struct fprec *r, void **page, struct pack_rec *best, struct blobkey *base,
		      uint64_t *examined);

#endif
