/* ndelta_window.c - the delta step's window (ndelta.h): the pages given
 * their records last, whichever thread did them (the thread, a drain
 * beside it at a clean close, a close() helping), so that a page that no
 * near neighbour gives a delta meets the pages of its site stored just
 * before it. The slots and their trials are blob_cold.c's; here, the lock
 * and the step's rules. */
#include "ndelta_int.h"

#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "text/markup.h"

void ndelta_window_init(struct step_window *sw, const struct store *st)
{
	_Static_assert(NDELTA_WINDOW_MAX <= BLOB_COLD_WINDOW_MAX, "the window's bound");
	int n = st->opts.delta_window ? st->opts.delta_window : NDELTA_DEFAULT_WINDOW;
	pthread_mutex_init(&sw->mu, NULL);
	sw->tries = n > 0 ? (unsigned)n : 0;
	sw->win = n > 0 ? blob_cold_window_new(n > NDELTA_WINDOW_POOL ? (unsigned)n : NDELTA_WINDOW_POOL) : NULL;
}

void ndelta_window_free(struct step_window *sw)
{
	blob_cold_window_free(sw->win);
	pthread_mutex_destroy(&sw->mu);
}

bool ndelta_window_takes(const struct step_window *sw, uint64_t size)
{
	return sw && blob_window_takes(size);
}

uint64_t ndelta_window_mark(const struct step_window *sw, const void *page, uint64_t size)
{
	return ndelta_window_takes(sw, size) && page ? markup_simhash(page, (size_t)size) : 0;
}

int ndelta_window_try(struct store *st, struct step_window *sw, const struct blobkey *k, const struct fprec *r,
		      const void *page, uint64_t mark, uint64_t against, struct pack_rec *best, struct blobkey *base,
		      unsigned *base_depth)
{
	/* the chosen slots copied under the lock (two pages: microseconds,
	 * against the milliseconds of their trials), tried outside it */
	pthread_mutex_lock(&sw->mu);
	struct blob_cold_window *win = blob_window_pick(sw->win, k, mark, sw->tries);
	pthread_mutex_unlock(&sw->mu);
	struct pack_rec d;
	int rc = blob_window_delta(win, k, r->xxh128, page, r->size, ndelta_level(st), (size_t)against, &d,
				   base_depth);
	blob_cold_window_free(win);
	if (rc != 1)
		return rc;
	if (d.len + NDELTA_WINDOW_MIN_GAIN > against) {
		pack_rec_free(&d);
		return 0;
	}
	pack_rec_free(best);
	*best = d;
	*base = (struct blobkey){ .variant = d.hdr.base_variant };
	memcpy(base->md5, d.hdr.base_md5, 16);
	return 1;
}

void ndelta_window_keep(struct step_window *sw, const struct blobkey *k, void *raw, uint64_t size, unsigned depth,
			uint64_t mark)
{
	if (!sw) {
		free(raw);
		return;
	}
	pthread_mutex_lock(&sw->mu);
	blob_window_keep(sw->win, k, raw, size, depth, mark);
	pthread_mutex_unlock(&sw->mu);
}
