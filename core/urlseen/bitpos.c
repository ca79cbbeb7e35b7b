/* bitpos.c - the wide way to a key's bits (see bitpos.h): a line's mask in
 * one AVX-512 register, built from the key's fields unrolled for each kk.
 *
 * Why unrolled: walking the fields one at a time costs a branch and a
 * load, test and store per field, with the mask in memory; that is most of
 * a rebuild's time per key (measured: 18 of 27 ns). With kk known to the
 * compiler, every field's word and shift are constants, each field is a
 * shift and a masked broadcast OR'ed into a register, and one population
 * count tells whether the fields were distinct. kk is the filter's, fixed
 * for its life, so the switch below always takes the same case.
 */
#include "bitpos.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define WIDE __attribute__((target("avx512f,avx512vpopcntdq")))
#define INLINE inline __attribute__((always_inline))

/* Bit v of a line: word v / 64 holding 1 << v % 64. */
WIDE static INLINE __m512i bit_of(unsigned v)
{
	return _mm512_maskz_set1_epi64((__mmask8)(1u << (v >> 6)), UINT64_C(1) << (v & 63));
}

/* The mask of fields [from, from + kk) of the field stream w. */
WIDE static INLINE __m512i fields_mask(const uint64_t *w, unsigned from, unsigned kk)
{
	__m512i m = _mm512_setzero_si512();
#pragma GCC unroll 16
	for (unsigned t = from; t < from + kk; t++)
		m = _mm512_or_si512(m, bit_of((unsigned)(w[t / 7] >> (9 * (t % 7))) & 511));
	return m;
}

WIDE static INLINE unsigned bits_in(__m512i m)
{
	return (unsigned)_mm512_reduce_add_epi64(_mm512_popcnt_epi64(m));
}

/* w[i] = W_(2+i) for i in [from, to): the words of fields 7 from to 7 to. */
WIDE static INLINE void field_words(uint64_t seed, uint64_t x, unsigned from, unsigned to,
				    uint64_t *w)
{
#pragma GCC unroll 5
	for (unsigned i = from; i < to; i++)
		w[i] = bitpos_word(seed, x, 2 + i);
}

WIDE static INLINE bool covered(const uint8_t *line, __m512i m)
{
	__m512i miss = _mm512_andnot_si512(_mm512_loadu_si512(line), m);
	return _mm512_test_epi64_mask(miss, miss) == 0;
}

WIDE static INLINE void or_into(uint8_t *line, __m512i m)
{
	_mm512_storeu_si512(line, _mm512_or_si512(_mm512_loadu_si512(line), m));
}

/* Test with kk a constant: line 0's words first, line 1's only when line 0
 * holds the key (a new key usually fails there). */
WIDE static INLINE int test_kk(uint64_t seed, unsigned kk, unsigned lpk, uint64_t x,
			       const uint8_t *l0, const uint8_t *l1)
{
	uint64_t w[(2 * BITPOS_MAX_KK + 6) / 7];
	unsigned first = (kk + 6) / 7, all = (lpk * kk + 6) / 7;
	field_words(seed, x, 0, first, w);
	__m512i a = fields_mask(w, 0, kk);
	if (bits_in(a) != kk)
		return -1;
	if (!covered(l0, a))
		return 0;
	if (lpk == 1)
		return 1;
	field_words(seed, x, first, all, w);
	__m512i b = fields_mask(w, kk, kk);
	if (bits_in(b) != kk)
		return -1;
	return covered(l1, b);
}

WIDE static INLINE bool set_kk(uint64_t seed, unsigned kk, unsigned lpk, uint64_t x, uint8_t *l0,
			       uint8_t *l1)
{
	uint64_t w[(2 * BITPOS_MAX_KK + 6) / 7];
	field_words(seed, x, 0, (lpk * kk + 6) / 7, w);
	__m512i a = fields_mask(w, 0, kk);
	if (lpk == 1) {
		if (bits_in(a) != kk)
			return false;
		or_into(l0, a);
		return true;
	}
	__m512i b = fields_mask(w, kk, kk);
	__m512i both = _mm512_add_epi64(_mm512_popcnt_epi64(a), _mm512_popcnt_epi64(b));
	if ((unsigned)_mm512_reduce_add_epi64(both) != 2 * kk)
		return false;
	or_into(l0, a);
	or_into(l1, b);
	return true;
}

#define EACH_KK(X)                                                                            \
	X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16)

/* The switches over kk, compiled for AVX-512; entered only through the
 * checks below, which are compiled without it (noinline: nothing of them
 * is moved before the check). */
WIDE __attribute__((noinline)) static int wide_test(const struct bitpos *p, uint64_t x, const uint8_t *l0,
						    const uint8_t *l1)
{
	switch (p->kk) {
#define TEST_CASE(K)                                                                          \
	case K:                                                                               \
		return test_kk(p->seed, K, p->lpk, x, l0, l1);
		EACH_KK(TEST_CASE)
	}
	return -1;
}

WIDE __attribute__((noinline)) static bool wide_set(const struct bitpos *p, uint64_t x, uint8_t *l0, uint8_t *l1)
{
	switch (p->kk) {
#define SET_CASE(K)                                                                           \
	case K:                                                                               \
		return set_kk(p->seed, K, p->lpk, x, l0, l1);
		EACH_KK(SET_CASE)
	}
	return false;
}

/* A processor without AVX-512 would fault on the first instruction of the
 * wide way: p->wide (bitpos_init) says whether this one has it. */
int bitpos_wide_test(const struct bitpos *p, uint64_t x, const uint8_t *l0, const uint8_t *l1)
{
	return p->wide ? wide_test(p, x, l0, l1) : -1;
}

bool bitpos_wide_set(const struct bitpos *p, uint64_t x, uint8_t *l0, uint8_t *l1)
{
	return p->wide && wide_set(p, x, l0, l1);
}

static bool wide_supported(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq");
}

#else

int bitpos_wide_test(const struct bitpos *p, uint64_t x, const uint8_t *l0, const uint8_t *l1)
{
	(void)p, (void)x, (void)l0, (void)l1;
	return -1;
}

bool bitpos_wide_set(const struct bitpos *p, uint64_t x, uint8_t *l0, uint8_t *l1)
{
	(void)p, (void)x, (void)l0, (void)l1;
	return false;
}

static bool wide_supported(void)
{
	return false;
}

#endif

void bitpos_init(struct bitpos *p, uint64_t seed, uint32_t k, uint32_t lpk)
{
	p->seed = seed;
	p->lpk = lpk;
	p->kk = k / lpk;
	p->wide = p->kk >= 1 && p->kk <= BITPOS_MAX_KK && wide_supported();
}
