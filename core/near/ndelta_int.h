/* ndelta_int.h - what ndelta.c (the queue, its thread, the moves) and
 * ndelta_base.c (the choice of a base, the delta against it) share (not
 * an interface). */
#ifndef PD_NDELTA_INT_H
#define PD_NDELTA_INT_H

#include <pthread.h>
#include <stdbool.h>

#include "ndelta.h" /* and through store/store.h, pack.h's records */

struct near_set_cache;
struct blob_cold_window;

/* The zstd level of a delta (-o pack_level, else PACK_DEFAULT_LEVEL). */
int ndelta_level(const struct store *st);

/* Page k's record (*r) and its bytes decoded (*out, malloc'd). */
int ndelta_read_page(struct store *st, const struct blobkey *k, struct fprec *r, void **out);

/* The best delta of page k (record r, its bytes in *page, read here when
 * NULL) among the rule's candidates (ndelta.h, steps 1-3): *best
 * (best->buf NULL: none), its base in *base, the depth of that base's
 * record in *base_depth; *examined grows by the candidates that could be
 * a base. */
int ndelta_best_delta(struct store *st, struct near_set_cache *cache, unsigned rule, const struct blobkey *k,
		      const struct fprec *r, void **page, struct pack_rec *best, struct blobkey *base,
		      unsigned *base_depth, uint64_t *examined);

/* ---- the step's window (ndelta_window.c) ---- */

/* The window and its lock: tried on a copy taken under mu, kept under
 * mu. */
struct step_window {
	pthread_mutex_t mu;
	struct blob_cold_window *win; /* NULL: no window */
	unsigned tries;               /* pages a page is tried on (-o delta_window) */
};

/* The window of the store's size (-o delta_window; none, or without
 * memory: win NULL). */
void ndelta_window_init(struct step_window *sw, const struct store *st);
void ndelta_window_free(struct step_window *sw);

/* May a page of size bytes be tried on window sw (may be NULL: no) and
 * join it? */
bool ndelta_window_takes(const struct step_window *sw, uint64_t size);

/* The markup simhash that picks a page's slots (text/markup.h); 0 when
 * the page cannot join sw. */
uint64_t ndelta_window_mark(const struct step_window *sw, const void *page, uint64_t size);

/* Page k (record r, bytes page, markup mark) tried on the window when its
 * neighbours gave no delta worth keeping (against: what the delta must
 * beat): 1 and *best the window's delta (replacing what *best held; its
 * base in *base, that base's depth in *base_depth), 0 when none pays (or
 * the window cannot be copied), -errno. */
int ndelta_window_try(struct store *st, struct step_window *sw, const struct blobkey *k, const struct fprec *r,
		      const void *page, uint64_t mark, uint64_t against, struct pack_rec *best, struct blobkey *base,
		      unsigned *base_depth);

/* Page k (raw, taken over; its mark) joins the window (sw may be NULL:
 * raw is freed) at the depth its record will have. */
void ndelta_window_keep(struct step_window *sw, const struct blobkey *k, void *raw, uint64_t size, unsigned depth,
			uint64_t mark);

#endif
