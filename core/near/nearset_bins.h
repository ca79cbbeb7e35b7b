/* nearset_bins.h - the MinHash bins of a set's hashes (nearset.h,
 * "bands"): the one computation a set's band keys cost (64 bins, each a
 * multiply-shift hash of every kept hash), with the code paths this
 * machine has. Every path gives the same bins; the portable one is the
 * definition. Pure functions, thread-safe. */
#ifndef PD_NEARSET_BINS_H
#define PD_NEARSET_BINS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nearset.h"

enum nearset_bins_path {
	NEARSET_BINS_PORTABLE, /* any C11 compiler and CPU */
	NEARSET_BINS_AVX2,     /* x86-64 with AVX2: four bins at a time */
	NEARSET_BINS_AVX512,   /* x86-64 with AVX-512 F, DQ and VL: eight */
	NEARSET_BINS_PATHS
};

/* Bins j0 .. j0 + count - 1 (count <= NEARSET_BINS) of the n hashes h
 * into arg: each the kept hash (as nearset.h says a bin holds it) whose
 * bin hash is smallest, the first of them on a tie. legacy: the bins of
 * near layouts 2 and 3. All 64 at once take the fastest path the machine
 * has. */
void nearset_bin_args(const uint32_t *h, size_t n, bool legacy, size_t j0, size_t count, uint32_t *arg);
/* All NEARSET_BINS bins by `path`: false (arg untouched) when this
 * machine or build lacks it. For tests and measurement. */
bool nearset_bin_args_by(enum nearset_bins_path path, const uint32_t *h, size_t n, bool legacy,
			 uint32_t arg[NEARSET_BINS]);

#endif
