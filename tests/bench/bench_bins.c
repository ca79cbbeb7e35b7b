/* bench_bins.c - the CPU a set's 64 MinHash bins cost on each code path
 * this machine has (core/near/nearset_bins.c), against the portable one.
 *
 *   bench_bins [SETS]
 *
 * SETS random sets (default 20,000) of 16, 64 and NEARSET_K hashes cut
 * to NEARSET_BITS (a stored set), ascending; each path computes every
 * set's bins three times over, the best pass counts, in thread CPU time.
 * The bins of every path are checked against the portable path's first.
 * Every figure is a line "name: value unit". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "near/nearset_bins.h"

static const char *const path_name[NEARSET_BINS_PATHS] = { "portable", "avx2", "avx512" };

static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Best of three passes over the sets, microseconds a set. */
static double time_path(enum nearset_bins_path p, const uint32_t *h, size_t sets, size_t n)
{
	uint32_t arg[NEARSET_BINS];
	double best = 1e30;
	uint32_t sink = 0;
	for (int pass = 0; pass < 3; pass++) {
		double t0 = cpu_now();
		for (size_t s = 0; s < sets; s++) {
			nearset_bin_args_by(p, h + s * NEARSET_K, n, false, arg);
			sink ^= arg[s % NEARSET_BINS];
		}
		double t = (cpu_now() - t0) / (double)sets * 1e6;
		best = t < best ? t : best;
	}
	if (sink == 0x5eed) /* keep the work */
		fputc('\n', stderr);
	return best;
}

int main(int argc, char **argv)
{
	size_t sets = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
	if (!sets) {
		fprintf(stderr, "usage: bench_bins [SETS]\n");
		return 2;
	}
	uint32_t *h = malloc(sets * NEARSET_K * sizeof *h);
	if (!h)
		return 1;
	uint64_t x = 0x9E3779B97F4A7C15u;
	for (size_t i = 0; i < sets * NEARSET_K; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		h[i] = (uint32_t)x & ~(UINT32_MAX >> NEARSET_BITS);
	}
	static const size_t sizes[] = { 16, 64, NEARSET_K };
	for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
		size_t n = sizes[z];
		for (size_t s = 0; s < sets; s++)
			qsort(h + s * NEARSET_K, n, sizeof *h, cmp_u32);
		double portable = 0;
		for (int p = 0; p < NEARSET_BINS_PATHS; p++) {
			uint32_t want[NEARSET_BINS], got[NEARSET_BINS];
			if (!nearset_bin_args_by((enum nearset_bins_path)p, h, n, false, got)) {
				printf("bins_%zu_%s: not on this machine\n", n, path_name[p]);
				continue;
			}
			nearset_bin_args_by(NEARSET_BINS_PORTABLE, h, n, false, want);
			if (memcmp(want, got, sizeof want)) {
				printf("bins_%zu_%s: differs from the portable path\n", n, path_name[p]);
				free(h);
				return 1;
			}
			double us = time_path((enum nearset_bins_path)p, h, sets, n);
			if (p == NEARSET_BINS_PORTABLE)
				portable = us;
			printf("bins_%zu_%s: %.2f us a set (%.2f x the portable path's speed)\n", n, path_name[p], us,
			       portable / us);
		}
	}
	free(h);
	return 0;
}
