/* stats.h - what the store holds and how well it de-duplicates, for
 * `pagededup stats` and the user.dedup.stats attribute. */
#ifndef PD_STATS_H
#define PD_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blob/blob.h"
#include "store/store.h"

struct pd_stats {
	struct pd_counters c;
	double saved_ratio;        /* 1 - stored/logical */
	uint64_t filter_bytes;     /* counters of every leaf */
	uint64_t filter_counters;
	uint64_t filter_nonzero;
	uint64_t filter_saturated;
	double filter_fill;        /* nonzero / counters */
	double filter_fpr_estimate;/* from the leaves' fill */
	double filter_fpr_design;  /* from the leaves' key counts: what a new page meets */
	double filter_fpr_worst;   /* the highest leaf's rate by its key count */
	double filter_fpr_target, filter_fmax;
	uint64_t filter_leaves;    /* leaves routed to */
	uint64_t filter_keys;
	uint32_t filter_depth;     /* routing bits of the deepest leaf */
	uint32_t filter_lines;
	bool filter_splitting;
	uint64_t lmdb_bytes;       /* pages in use times page size */
	uint64_t lmdb_mapsize;
	struct blob_pack_usage packs; /* the page bytes on disk (blob_pack_usage) */
};

int stats_collect(struct store *st, struct pd_stats *out);
/* Format as JSON (one object) or as aligned text lines. Returns the length
 * (snprintf-like: may exceed size). */
size_t stats_json(const struct pd_stats *s, char *buf, size_t size);
size_t stats_text(const struct pd_stats *s, char *buf, size_t size);

#endif
