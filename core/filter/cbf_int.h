/* cbf_int.h - what the two parts of the counting filter share: cbf.c (the
 * file, sizing, add and remove, statistics) and cbf_lookup.c (a key's
 * positions and the lookups). cbf.h is the interface. */
#ifndef PD_CBF_INT_H
#define PD_CBF_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "cbf.h"

/* Step between the seeds of the offset hashes (2^64 / golden ratio). */
#define CBF_SEED_STEP UINT64_C(0x9E3779B97F4A7C15)

struct cbf {
	uint8_t *map;          /* the whole mapping */
	size_t map_len;
	uint8_t *ctr;          /* nlines * 64 bytes of counters, page-aligned */
	struct cbf_geometry g;
	unsigned kk;           /* counters per line of a key: k / lines_per_key */
	uint64_t generation;
	bool readonly;
	bool anon;             /* no file: map holds the counters only */
};

/* A prefetch has no visible effect, so GCC's side-effect analysis judges a
 * function that only prefetches to be pure, and deletes calls to it from
 * callers that it can see. Always inlining keeps the instruction where it
 * is needed. */
static inline __attribute__((always_inline)) void prefetch_line(const struct cbf *f,
								uint32_t line)
{
	__builtin_prefetch(f->ctr + (uint64_t)line * CBF_LINE_BYTES, 0, 3);
}

static inline __attribute__((always_inline)) void prefetch_pos(const struct cbf *f,
							       const struct cbf_pos *pos)
{
	for (unsigned l = 0; l < pos->nlines && l < CBF_MAX_LINES; l++)
		if (pos->line[l] < f->g.nlines)
			prefetch_line(f, pos->line[l]);
}

/* A stored position may come from a damaged record: check it against f and
 * list its counter indices (-EINVAL: it does not fit f). */
int cbf_pos_indices(const struct cbf *f, const struct cbf_pos *pos, uint64_t *idx);

#endif
