/* bitpos.h - where a key's bits lie in a leaf of the URL-seen filter
 * (bitfilter.c): its line or two lines of 512 bits, and the kk bits it sets
 * in each. These positions are part of the filter's file format: a change
 * to anything here makes every existing filter file wrong.
 *
 * From the 64-bit key x and the filter's seed come the words
 * W_j = mix64(x ^ seed ^ j * STEP), j = 1, 2, ..., mix64 being splitmix64's
 * finaliser and STEP 2^64 / golden ratio. In a leaf of n lines (n < 2^32),
 * with h and l the high and low halves of W_1:
 *   line 0 = h * n >> 32;  line 1 (two lines per key) = l * (n - 1) >> 32,
 *   plus one if that is >= line 0 (so the two lines differ).
 * The bit offsets are 9-bit fields of W_2, W_3, ..., seven per word from
 * the low bits up; line 0 takes the first kk distinct fields, line 1 the
 * next kk distinct ones (a field already in the current line's mask is
 * skipped). Bit o of a line is bit o % 64 of its 64-bit word o / 64, which
 * on a little-endian host is bit o % 8 of byte o / 8.
 *
 * Two ways compute the same bits. The general one, here, walks the fields
 * one at a time. The wide one (bitpos.c) holds a line's mask in one AVX-512
 * register, its fields unrolled for the filter's kk: a quarter to a third
 * less time per key to rebuild a leaf, where this arithmetic and not the
 * memory is what a key costs. It assumes the fields distinct, which 95% of
 * keys at kk = 6 are, checks that by counting the mask's bits and hands
 * the rest to the general way. bitpos_init chooses it where the processor
 * has it; tests compare the two.
 */
#ifndef PD_BITPOS_H
#define PD_BITPOS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define BITPOS_LINE_BYTES 64
#define BITPOS_MAX_KK 16

struct bitpos {
	uint64_t seed;
	uint32_t kk;  /* bits per line, 1..BITPOS_MAX_KK */
	uint32_t lpk; /* lines per key, 1 or 2 */
	bool wide;    /* the wide way serves this shape on this processor */
};

/* Fill p for a filter of k bits per key over lpk lines (k a multiple of
 * lpk, k / lpk <= BITPOS_MAX_KK: the caller checks), choosing the wide
 * way when it can. */
void bitpos_init(struct bitpos *p, uint64_t seed, uint32_t k, uint32_t lpk);

/* The wide way (bitpos.c). test: 1 all bits set, 0 not, -1 fields not
 * distinct or no wide way here (!p->wide; use the general way). set:
 * false when the fields are not distinct or there is no wide way, and
 * nothing set. */
int bitpos_wide_test(const struct bitpos *p, uint64_t x, const uint8_t *l0, const uint8_t *l1);
bool bitpos_wide_set(const struct bitpos *p, uint64_t x, uint8_t *l0, uint8_t *l1);

#define BITPOS_STEP UINT64_C(0x9E3779B97F4A7C15)

static inline uint64_t bitpos_mix64(uint64_t z)
{
	z ^= z >> 30;
	z *= UINT64_C(0xBF58476D1CE4E5B9);
	z ^= z >> 27;
	z *= UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static inline uint64_t bitpos_word(uint64_t seed, uint64_t x, unsigned j)
{
	return bitpos_mix64(x ^ seed ^ ((uint64_t)j * BITPOS_STEP));
}

/* The 16-byte filter key folded to the 64 bits everything derives from. */
static inline uint64_t bitpos_fold(const uint8_t *k16)
{
	uint64_t lo, hi;
	memcpy(&lo, k16, 8);
	memcpy(&hi, k16 + 8, 8);
	return lo ^ (hi * BITPOS_STEP);
}

/* The key's line numbers in a leaf of nlines lines (l1 = l0 with one line
 * per key). */
static inline void bitpos_lines(const struct bitpos *p, uint64_t x, uint64_t nlines, uint64_t *l0,
				uint64_t *l1)
{
	uint64_t w = bitpos_word(p->seed, x, 1);
	*l0 = ((w >> 32) * nlines) >> 32;
	if (p->lpk == 2) {
		uint64_t y = ((w & 0xFFFFFFFF) * (nlines - 1)) >> 32;
		*l1 = y + (y >= *l0);
	} else {
		*l1 = *l0;
	}
}

/* The key's bits in its line(s) as 512-bit masks of eight words. */
struct bitpos_masks {
	uint64_t m[2][8];
};

static inline void bitpos_masks(const struct bitpos *p, uint64_t x, struct bitpos_masks *k)
{
	unsigned j = 2, left = 0;
	uint64_t cur = 0;
	for (unsigned l = 0; l < p->lpk; l++) {
		uint64_t *m = k->m[l];
		/* eight stores (not a string instruction for the whole struct) */
		for (int i = 0; i < 8; i += 2) {
			m[i] = 0;
			m[i + 1] = 0;
		}
		for (unsigned t = 0; t < p->kk;) {
			if (left == 0) {
				cur = bitpos_word(p->seed, x, j++);
				left = 7;
			}
			unsigned v = (unsigned)(cur & 511);
			cur >>= 9;
			left--;
			uint64_t bit = UINT64_C(1) << (v & 63);
			if (m[v >> 6] & bit)
				continue;
			m[v >> 6] |= bit;
			t++;
		}
	}
}

static inline bool bitpos_line_has(const uint8_t *line, const uint64_t *m)
{
	const uint64_t *w = (const uint64_t *)(const void *)line;
	uint64_t miss = 0;
	for (int i = 0; i < 8; i++)
		miss |= m[i] & ~w[i];
	return miss == 0;
}

static inline void bitpos_line_set(uint8_t *line, const uint64_t *m)
{
	uint64_t *w = (uint64_t *)(void *)line;
	for (int i = 0; i < 8; i++)
		w[i] |= m[i];
}

/* The general way, for the wide one's leftovers and other processors. */
static inline bool bitpos_test_general(const struct bitpos *p, uint64_t x, const uint8_t *l0,
				       const uint8_t *l1)
{
	struct bitpos_masks k;
	bitpos_masks(p, x, &k);
	return bitpos_line_has(l0, k.m[0]) && (p->lpk == 1 || bitpos_line_has(l1, k.m[1]));
}

static inline void bitpos_set_general(const struct bitpos *p, uint64_t x, uint8_t *l0, uint8_t *l1)
{
	struct bitpos_masks k;
	bitpos_masks(p, x, &k);
	bitpos_line_set(l0, k.m[0]);
	if (p->lpk == 2)
		bitpos_line_set(l1, k.m[1]);
}

/* Whether every bit of key x is set in its lines l0 and l1. */
static inline bool bitpos_test(const struct bitpos *p, uint64_t x, const uint8_t *l0,
			       const uint8_t *l1)
{
	if (p->wide) {
		int r = bitpos_wide_test(p, x, l0, l1);
		if (r >= 0)
			return r;
	}
	return bitpos_test_general(p, x, l0, l1);
}

/* Set the bits of key x in its lines l0 and l1. */
static inline void bitpos_set(const struct bitpos *p, uint64_t x, uint8_t *l0, uint8_t *l1)
{
	if (!p->wide || !bitpos_wide_set(p, x, l0, l1))
		bitpos_set_general(p, x, l0, l1);
}

#endif
