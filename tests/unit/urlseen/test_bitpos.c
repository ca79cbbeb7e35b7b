/* test_bitpos.c - unit tests of a key's bit positions (core/urlseen/bitpos.h): the
 * wide way and the general way give the same bits for every shape a filter
 * can have, and the wide way is taken where the processor offers it.
 *
 * The positions are the URL-seen filter's file format, so the general way
 * is also pinned to fixed values: a change to it fails here before it
 * makes existing filter files wrong.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "urlseen/bitpos.h"

static uint64_t next(uint64_t *s)
{
	*s += UINT64_C(0x9E3779B97F4A7C15);
	return bitpos_mix64(*s);
}

static void random_line(uint64_t *s, uint8_t *line, unsigned density)
{
	/* density 0..3: each word the AND of 3 - density randoms (1/8 .. all) */
	for (int i = 0; i < 8; i++) {
		uint64_t w = ~UINT64_C(0);
		for (unsigned d = density; d < 3; d++)
			w &= next(s);
		memcpy(line + 8 * i, &w, 8);
	}
}

static bool processor_has_wide(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vpopcntdq");
#else
	return false;
#endif
}

#define KEYS 40000

/* Setting: from the same random lines, both ways leave the same bytes; a
 * refusal leaves the lines untouched. */
static void compare_set(const struct bitpos *p, uint64_t *s, size_t *served)
{
	_Alignas(64) uint8_t orig[2][64], a[2][64], b[2][64];
	for (int i = 0; i < KEYS; i++) {
		uint64_t x = next(s);
		random_line(s, orig[0], (unsigned)i % 3);
		random_line(s, orig[1], (unsigned)i % 2);
		memcpy(a, orig, sizeof a);
		memcpy(b, orig, sizeof b);
		bitpos_set_general(p, x, a[0], a[1]);
		if (bitpos_wide_set(p, x, b[0], b[1])) {
			++*served;
			assert_memory_equal(b, a, sizeof a);
		} else {
			assert_memory_equal(b, orig, sizeof b);
		}
		memcpy(b, orig, sizeof b);
		bitpos_set(p, x, b[0], b[1]);
		assert_memory_equal(b, a, sizeof a);
	}
}

/* Testing: lines holding the key's bits, the same with one of them
 * cleared, and random lines of every density. */
static void compare_test(const struct bitpos *p, uint64_t *s, size_t *served, size_t *present)
{
	_Alignas(64) uint8_t l[2][64];
	for (int i = 0; i < KEYS; i++) {
		uint64_t x = next(s);
		unsigned kind = (unsigned)i % 4;
		if (kind == 0) {
			memset(l, 0, sizeof l);
			bitpos_set_general(p, x, l[0], l[1]);
		} else if (kind == 1) {
			memset(l, 0xff, sizeof l);
			struct bitpos_masks k;
			bitpos_masks(p, x, &k);
			/* clear one of the key's bits, in the line s chooses */
			unsigned line = p->lpk == 2 ? (unsigned)(next(s) & 1) : 0;
			for (int w = 0; w < 8; w++)
				if (k.m[line][w]) {
					uint64_t v;
					memcpy(&v, l[line] + 8 * w, 8);
					v &= ~(k.m[line][w] & -k.m[line][w]);
					memcpy(l[line] + 8 * w, &v, 8);
					break;
				}
		} else {
			random_line(s, l[0], 3 - (unsigned)i % 3 / 2);
			random_line(s, l[1], 3 - (unsigned)i % 3 / 2);
		}
		bool general = bitpos_test_general(p, x, l[0], l[1]);
		int wide = bitpos_wide_test(p, x, l[0], l[1]);
		if (kind == 0)
			assert_true(general);
		if (kind == 1)
			assert_false(general);
		if (wide >= 0) {
			assert_int_equal(wide, general);
			++*served;
		}
		assert_int_equal(bitpos_test(p, x, l[0], l[1]), general);
		*present += general;
	}
}

static void test_wide_agrees_with_general(void **state)
{
	(void)state;
	uint64_t s = 42;
	for (uint32_t lpk = 1; lpk <= 2; lpk++)
		for (uint32_t kk = 1; kk <= BITPOS_MAX_KK; kk++) {
			struct bitpos p;
			bitpos_init(&p, next(&s), kk * lpk, lpk);
			assert_int_equal(p.kk, kk);
			assert_int_equal(p.wide, processor_has_wide());
			size_t set_served = 0, test_served = 0, present = 0;
			compare_set(&p, &s, &set_served);
			compare_test(&p, &s, &test_served, &present);
			if (!p.wide) {
				/* no wide way here: it must refuse everything */
				assert_int_equal(set_served, 0);
				assert_int_equal(test_served, 0);
				continue;
			}
			/* Distinct fields: sum over pairs of 1/512, so at least
			 * 1 - C(n, 2) / 512 of keys for n = kk * lpk fields (a
			 * bound; the real share is higher). And the refusals
			 * must have been met too, except where a key has too few
			 * fields to repeat one. */
			unsigned n = kk * lpk;
			double floor = 1 - (double)n * (n - 1) / 2 / 512 - 0.01;
			assert_true((double)set_served >= floor * KEYS);
			if (n >= 6)
				assert_true(set_served < KEYS);
			assert_true(test_served >= (size_t)(0.5 * KEYS));
			assert_true(present > KEYS / 4 && present < 3 * KEYS / 4);
		}
}

/* Fixed values of the general way (the file format): lines and the masks
 * of one key at the default shape. */
static void test_positions_pinned(void **state)
{
	(void)state;
	struct bitpos p;
	bitpos_init(&p, UINT64_C(0x75726c7365656e31), 12, 2);
	uint8_t key[16];
	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)(i * 17 + 3);
	uint64_t x = bitpos_fold(key);
	uint64_t l0, l1;
	bitpos_lines(&p, x, 1u << 19, &l0, &l1);
	struct bitpos_masks k;
	bitpos_masks(&p, x, &k);
	uint64_t h0 = 0, h1 = 0;
	for (int i = 0; i < 8; i++) {
		h0 = bitpos_mix64(h0 ^ k.m[0][i]);
		h1 = bitpos_mix64(h1 ^ k.m[1][i]);
	}
	assert_true(x == UINT64_C(0xc2db7bf6c71a3f64));
	assert_int_equal(l0, 502093);
	assert_int_equal(l1, 317962);
	assert_true(h0 == UINT64_C(0xf70c35808af08102));
	assert_true(h1 == UINT64_C(0xdec5f7d37d6bff8b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wide_agrees_with_general),
		cmocka_unit_test(test_positions_pinned),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
