/* nearset_bins.c - the MinHash bins of a set's hashes. See nearset_bins.h.
 *
 * Why paths of their own: fsck computes every set's 64 bins again (a
 * stored set keeps no band keys, nearset.h format 3 on), and there the
 * bins were a quarter of the near tables' time (a profile of the check of
 * a 280,005-set store: bin_args 27% of the samples). The portable loop
 * keeps the bins' minima as independent chains a core runs side by side,
 * but a 64-bit multiply at a time. The same loop written without
 * branches, over all 64 bins and with a 64-bit bin beside each minimum,
 * is one GCC vectorizes when told the target: on sets of 256 hashes 2.3
 * times faster with AVX2 (its 64-bit multiply made of three 32-bit ones),
 * 4.6 times with AVX-512 DQ (bench_bins; tests/bench/README.md, "fsck:
 * the bins on the vector units, a walk's bases kept"). The target
 * code is compiled per function (target attribute) and chosen at run
 * time, so one build runs on any x86-64; other machines take the portable
 * path. */
#include "nearset_bins.h"

/* Bin j's hash of a kept shingle hash x: a multiply-shift function of
 * its own, ((x << 32 | x) ^ add) * mul with an odd multiplier. */
static void bin_fn(size_t j, uint64_t *mul, uint64_t *add)
{
	*mul = (UINT64_C(0x9E3779B97F4A7C15) * (2 * j + 1)) | 1;
	*add = UINT64_C(0xD6E8FEB86659FD93) * (j + 1);
}

/* A kept hash as the bins see it. At 32 bits, the hash twice (the band
 * keys of near layouts 2 and 3, which a read-only open of such a store
 * still looks up); cut short, a 64-bit mix of it (splitmix64's finaliser):
 * on values whose low bits are all zero the multiply-shift bins are far
 * from min-wise (rust-doc pages of resemblance 0.80-0.84 then shared no
 * band, and a query met 40% more candidates). */
static inline uint64_t bin_input(uint32_t h, bool legacy)
{
	if (legacy)
		return (uint64_t)h << 32 | h;
	uint64_t z = (uint64_t)(h >> (32 - NEARSET_BITS)) * UINT64_C(0x9E3779B97F4A7C15);
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* What a bin holds of the kept hash h. Layout 4: the top bits, whatever
 * the set holds. */
static inline uint32_t bin_value(uint32_t h, bool legacy)
{
	return legacy ? h : h & ~(UINT32_MAX >> NEARSET_BITS);
}

/* Bins j0 .. j0 + count - 1: each keeps the kept hash whose bin hash is
 * smallest, the first of them on a tie (independent MinHash over the
 * bottom-k sample: no empty bins, so short pages get bands as honest as
 * long ones). The hashes are the outer loop, so that the bins' minima are
 * independent chains a core runs side by side. */
static void bins_portable(const uint32_t *h, size_t n, bool legacy, size_t j0, size_t count, uint32_t *arg)
{
	uint64_t best[NEARSET_BINS], mul[NEARSET_BINS], add[NEARSET_BINS];
	for (size_t j = 0; j < count; j++) {
		best[j] = UINT64_MAX;
		arg[j] = 0;
		bin_fn(j0 + j, &mul[j], &add[j]);
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t x = bin_input(h[i], legacy);
		uint32_t at = bin_value(h[i], legacy);
		for (size_t j = 0; j < count; j++) {
			uint64_t v = (x ^ add[j]) * mul[j];
			if (v < best[j]) {
				best[j] = v;
				arg[j] = at;
			}
		}
	}
}

#if defined(__GNUC__) && defined(__x86_64__)
#define BINS_X86 1

/* The portable loop in the shape a vectorizer takes: every bin, no
 * branch, the bin's value as wide as its minimum. Inlined into each
 * target's function, which compiles it for that target. Not the portable
 * path too: compiled for plain x86-64, this shape took 17.3 us a set of
 * 256 hashes against the branching loop's 13.2 (the same stand-alone
 * timing that gave the targets' figures). */
static inline __attribute__((always_inline)) void bins_lanes(const uint32_t *h, size_t n, bool legacy,
							     uint32_t *arg)
{
	uint64_t best[NEARSET_BINS], mul[NEARSET_BINS], add[NEARSET_BINS], at[NEARSET_BINS];
	for (size_t j = 0; j < NEARSET_BINS; j++) {
		best[j] = UINT64_MAX;
		at[j] = 0;
		bin_fn(j, &mul[j], &add[j]);
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t x = bin_input(h[i], legacy), value = bin_value(h[i], legacy);
		for (size_t j = 0; j < NEARSET_BINS; j++) {
			uint64_t v = (x ^ add[j]) * mul[j];
			bool lt = v < best[j];
			best[j] = lt ? v : best[j];
			at[j] = lt ? value : at[j];
		}
	}
	for (size_t j = 0; j < NEARSET_BINS; j++)
		arg[j] = (uint32_t)at[j];
}

__attribute__((target("avx2"))) static void bins_avx2(const uint32_t *h, size_t n, bool legacy, uint32_t *arg)
{
	bins_lanes(h, n, legacy, arg);
}

__attribute__((target("avx512f,avx512dq,avx512vl"))) static void bins_avx512(const uint32_t *h, size_t n,
									     bool legacy, uint32_t *arg)
{
	bins_lanes(h, n, legacy, arg);
}

static bool have_path(enum nearset_bins_path path)
{
	__builtin_cpu_init();
	switch (path) {
	case NEARSET_BINS_AVX2:
		return __builtin_cpu_supports("avx2");
	case NEARSET_BINS_AVX512:
		return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
		       __builtin_cpu_supports("avx512vl");
	default:
		return path == NEARSET_BINS_PORTABLE;
	}
}

/* The fastest path, found once (a relaxed atomic: every thread finds the
 * same). */
static enum nearset_bins_path best_path(void)
{
	static int found = -1;
	int p = __atomic_load_n(&found, __ATOMIC_RELAXED);
	if (p < 0) {
		p = have_path(NEARSET_BINS_AVX512) ? NEARSET_BINS_AVX512
		    : have_path(NEARSET_BINS_AVX2) ? NEARSET_BINS_AVX2
						    : NEARSET_BINS_PORTABLE;
		__atomic_store_n(&found, p, __ATOMIC_RELAXED);
	}
	return (enum nearset_bins_path)p;
}
#else
static bool have_path(enum nearset_bins_path path)
{
	return path == NEARSET_BINS_PORTABLE;
}

static enum nearset_bins_path best_path(void)
{
	return NEARSET_BINS_PORTABLE;
}
#endif

/* All bins by path, which the machine has. */
static void all_bins(enum nearset_bins_path path, const uint32_t *h, size_t n, bool legacy, uint32_t *arg)
{
	switch (path) {
#ifdef BINS_X86
	case NEARSET_BINS_AVX2:
		bins_avx2(h, n, legacy, arg);
		return;
	case NEARSET_BINS_AVX512:
		bins_avx512(h, n, legacy, arg);
		return;
#endif
	default:
		bins_portable(h, n, legacy, 0, NEARSET_BINS, arg);
	}
}

void nearset_bin_args(const uint32_t *h, size_t n, bool legacy, size_t j0, size_t count, uint32_t *arg)
{
	if (j0 == 0 && count == NEARSET_BINS)
		all_bins(best_path(), h, n, legacy, arg);
	else
		bins_portable(h, n, legacy, j0, count, arg); /* a band alone: 4 bins */
}

bool nearset_bin_args_by(enum nearset_bins_path path, const uint32_t *h, size_t n, bool legacy,
			 uint32_t arg[NEARSET_BINS])
{
	if (path >= NEARSET_BINS_PATHS || !have_path(path))
		return false;
	all_bins(path, h, n, legacy, arg);
	return true;
}
