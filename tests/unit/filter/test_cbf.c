/* test_cbf.c - unit tests of the blocked counting Bloom filter (core/filter/cbf.c).
 *
 * The false-positive tests fill a filter to its design load and compare the
 * measured rate with cbf_theoretical_fpr(); the rest check the counting
 * rules (saturation through an exact-count table, removal, undo) against
 * byte-for-byte snapshots of the counters, and the file format.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "filter/cbf.h"

/* ---- helpers ---- */

/* splitmix64: a fixed-seed key source, so every run tests the same keys. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static void rng_key(uint64_t *s, uint8_t key[16])
{
	uint64_t a = rng_next(s), b = rng_next(s);
	memcpy(key, &a, 8);
	memcpy(key + 8, &b, 8);
}

static uint64_t counters_of(const struct cbf *f)
{
	return cbf_geometry(f)->nlines * CBF_LINE_COUNTERS;
}

/* Every counter's value, to compare a filter before and after. */
static uint8_t *snapshot(const struct cbf *f)
{
	uint64_t n = counters_of(f);
	uint8_t *s = malloc(n);
	assert_non_null(s);
	for (uint64_t i = 0; i < n; i++)
		s[i] = (uint8_t)cbf_get(f, i);
	return s;
}

static void assert_snapshot(const struct cbf *f, const uint8_t *s)
{
	uint64_t n = counters_of(f);
	for (uint64_t i = 0; i < n; i++)
		if (cbf_get(f, i) != s[i])
			fail_msg("counter %llu is %u, was %u", (unsigned long long)i,
				 cbf_get(f, i), s[i]);
}

static struct cbf *small_filter(uint64_t nlines, uint32_t k, uint32_t lpk)
{
	struct cbf_geometry g = { .nlines = nlines, .k = k, .lines_per_key = lpk,
				  .seed = 12345 };
	struct cbf *f = NULL;
	assert_int_equal(cbf_create(NULL, &g, 0, &f), 0);
	return f;
}

static bool pos_has_counter(const struct cbf_pos *p, uint64_t idx, unsigned *times)
{
	unsigned n = 0;
	for (unsigned j = 0; j < p->k; j++)
		n += cbf_pos_counter(p, j) == idx;
	*times = n;
	return n > 0;
}

/* ---- an in-memory exact-count table ---- */

#define TABLE_MAX 64

struct exact_table {
	uint64_t idx[TABLE_MAX], count[TABLE_MAX];
	size_t len;
	int fail_put;  /* non-zero: put returns this error */
};

static int table_find(const struct exact_table *t, uint64_t idx)
{
	for (size_t i = 0; i < t->len; i++)
		if (t->idx[i] == idx)
			return (int)i;
	return -1;
}

static int table_get(void *ctx, uint64_t idx, uint64_t *count)
{
	struct exact_table *t = ctx;
	int i = table_find(t, idx);
	if (i < 0)
		return -ENOENT;
	*count = t->count[i];
	return 0;
}

static int table_put(void *ctx, uint64_t idx, uint64_t count)
{
	struct exact_table *t = ctx;
	if (t->fail_put)
		return t->fail_put;
	int i = table_find(t, idx);
	if (i < 0) {
		assert_true(t->len < TABLE_MAX);
		i = (int)t->len++;
		t->idx[i] = idx;
	}
	t->count[i] = count;
	return 0;
}

static int table_del(void *ctx, uint64_t idx)
{
	struct exact_table *t = ctx;
	int i = table_find(t, idx);
	if (i < 0)
		return -ENOENT;
	t->len--;
	t->idx[i] = t->idx[t->len];
	t->count[i] = t->count[t->len];
	return 0;
}

static const struct cbf_exact_ops table_ops = {
	.get = table_get, .put = table_put, .del = table_del,
};

static uint64_t table_count(struct exact_table *t, uint64_t idx)
{
	uint64_t n = 0;
	return table_get(t, idx, &n) == 0 ? n : 0;
}

/* ---- geometry and theory ---- */

static void test_geometry_for(void **state)
{
	(void)state;
	struct cbf_geometry g, g2;

	assert_int_equal(cbf_geometry_for(1000000, 1e-4, 0, &g), 0);
	assert_int_equal(cbf_geometry_for(1000000, 1e-4, 2, &g2), 0);
	assert_memory_equal(&g, &g2, sizeof g);
	assert_int_equal(g.lines_per_key, 2);
	assert_int_equal(g.k % 2, 0);
	assert_true(g.k >= 2 && g.k <= CBF_MAX_K);
	/* it meets the target, and one line fewer would not */
	assert_true(cbf_theoretical_fpr(&g, 1000000) <= 1e-4);
	g2.nlines--;
	assert_true(cbf_theoretical_fpr(&g2, 1000000) > 1e-4);
	double cpk = (double)g.nlines * CBF_LINE_COUNTERS / 1e6;
	assert_true(cpk > 20 && cpk < 23);
	/* no k meets the target with fewer lines */
	for (uint32_t k = 2; k <= CBF_MAX_K; k += 2) {
		struct cbf_geometry o = g2;
		o.k = k;
		assert_true(cbf_theoretical_fpr(&o, 1000000) > 1e-4);
	}

	assert_int_equal(cbf_geometry_for(1000000, 1e-4, 1, &g), 0);
	assert_int_equal(g.lines_per_key, 1);
	assert_true(cbf_theoretical_fpr(&g, 1000000) <= 1e-4);

	assert_int_equal(cbf_geometry_for(1000, 0, 2, &g), -EINVAL);
	assert_int_equal(cbf_geometry_for(1000, 1, 2, &g), -EINVAL);
	assert_int_equal(cbf_geometry_for(1000, NAN, 2, &g), -EINVAL);
	assert_int_equal(cbf_geometry_for(1000, 1e-4, 3, &g), -EINVAL);
	assert_int_equal(cbf_geometry_for(UINT64_C(1) << 40, 1e-9, 1, &g), -EFBIG);
}

/* The rate of one line computed another way: the number m of non-zero
 * counters after i keys is a Markov chain (each key turns a hypergeometric
 * number of zero counters non-zero), a query hits only non-zero counters
 * with probability C(m,kk)/C(128,kk), and i is Poisson. */
static double chain_line_fpr(double lambda, unsigned kk)
{
	static double binom[129][129];
	double p[129] = { 1 }, q[129], total = 0, pois = exp(-lambda);
	unsigned imax = (unsigned)(lambda + 30 * sqrt(lambda) + 60);

	for (unsigned a = 0; a <= 128; a++)
		for (unsigned b = 0; b <= a; b++)
			binom[a][b] = b == 0 || b == a ? 1 : binom[a - 1][b - 1] + binom[a - 1][b];
	for (unsigned i = 0; i <= imax; i++) {
		double hit = 0;
		for (unsigned m = kk; m <= 128; m++)
			hit += p[m] * binom[m][kk] / binom[128][kk];
		total += pois * hit;
		pois *= lambda / (i + 1);
		memset(q, 0, sizeof q);
		for (unsigned m = 0; m <= 128; m++)
			for (unsigned t = 0; t <= kk && t <= 128 - m; t++)
				if (kk - t <= m)
					q[m + t] += p[m] * binom[128 - m][t] * binom[m][kk - t] /
						    binom[128][kk];
		memcpy(p, q, sizeof p);
	}
	return total;
}

static void test_theory_formula(void **state)
{
	(void)state;
	const double lambdas[] = { 0.5, 4.4, 11.9, 40 };
	const unsigned kks[] = { 1, 5, 6, 9, 16 };

	for (size_t a = 0; a < sizeof lambdas / sizeof *lambdas; a++) {
		for (size_t b = 0; b < sizeof kks / sizeof *kks; b++) {
			struct cbf_geometry g = { .nlines = 1000, .k = kks[b], .lines_per_key = 1 };
			uint64_t n = (uint64_t)(lambdas[a] * 1000);
			double want = chain_line_fpr((double)n / 1000, kks[b]);
			double got = cbf_theoretical_fpr(&g, n);
			assert_true(fabs(got - want) <= 1e-9 * want + 1e-15);
			/* two lines: the rate of a line (at twice the load), squared */
			if (2 * kks[b] > CBF_MAX_K)
				continue;
			g.k *= 2;
			g.lines_per_key = 2;
			want = chain_line_fpr(2.0 * n / 1000, kks[b]);
			got = cbf_theoretical_fpr(&g, n);
			assert_true(fabs(got - want * want) <= 1e-9 * want * want + 1e-15);
		}
	}
	struct cbf_geometry g = { .nlines = 10, .k = 4, .lines_per_key = 2 };
	assert_true(cbf_theoretical_fpr(&g, 0) == 0);
}

/* ---- positions ---- */

static void test_positions(void **state)
{
	(void)state;
	struct cbf_geometry g = { .nlines = 1000, .k = 16, .lines_per_key = 1, .seed = 7 };
	struct cbf *f1, *f2;
	uint64_t s = 1;

	assert_int_equal(cbf_create(NULL, &g, 0, &f1), 0);
	g.k = 12;
	g.lines_per_key = 2;
	assert_int_equal(cbf_create(NULL, &g, 0, &f2), 0);
	for (int i = 0; i < 20000; i++) {
		uint8_t key[16];
		struct cbf_pos p, again;
		rng_key(&s, key);
		for (int which = 0; which < 2; which++) {
			struct cbf *f = which ? f2 : f1;
			unsigned lpk = cbf_geometry(f)->lines_per_key, kk = cbf_geometry(f)->k / lpk;
			cbf_positions(f, key, &p);
			cbf_positions(f, key, &again);
			assert_int_equal(p.nlines, lpk);
			assert_int_equal(p.k, cbf_geometry(f)->k);
			assert_memory_equal(p.line, again.line, sizeof p.line);
			assert_memory_equal(p.off, again.off, sizeof p.off);
			for (unsigned l = 0; l < lpk; l++) {
				assert_true(p.line[l] < g.nlines);
				for (unsigned t = 0; t < kk; t++) {
					unsigned j = l * kk + t;
					assert_true(p.off[j] < CBF_LINE_COUNTERS);
					assert_int_equal(cbf_pos_counter(&p, j),
							 (uint64_t)p.line[l] * 128 + p.off[j]);
					for (unsigned u = 0; u < t; u++)
						assert_int_not_equal(p.off[j], p.off[l * kk + u]);
				}
			}
		}
	}
	/* another seed moves the key */
	struct cbf_pos a, b;
	uint8_t key[16] = { 1, 2, 3 };
	cbf_positions(f2, key, &a);
	g.seed = 8;
	struct cbf *f3;
	assert_int_equal(cbf_create(NULL, &g, 0, &f3), 0);
	cbf_positions(f3, key, &b);
	assert_true(memcmp(a.line, b.line, sizeof a.line) || memcmp(a.off, b.off, sizeof a.off));
	cbf_close(f1);
	cbf_close(f2);
	cbf_close(f3);
}

/* The derivation written down at the top of cbf.c, done the plain way:
 * fingerprint records store positions, so they must never drift from it. */
static void spec_positions(const struct cbf_geometry *g, const uint8_t key[16],
			   struct cbf_pos *out)
{
	const uint64_t step = UINT64_C(0x9E3779B97F4A7C15);
	XXH128_hash_t h0 = XXH3_128bits_withSeed(key, 16, g->seed);
	uint64_t words[64];
	unsigned nw = 0, kk = g->k / g->lines_per_key, field = 0;

	memset(out, 0, sizeof *out);
	out->nlines = (uint8_t)g->lines_per_key;
	out->k = (uint8_t)g->k;
	out->line[0] = (uint32_t)(((unsigned __int128)h0.low64 * g->nlines) >> 64);
	if (g->lines_per_key == 2)
		out->line[1] = (uint32_t)(((unsigned __int128)h0.high64 * g->nlines) >> 64);
	else
		words[nw++] = h0.high64;
	for (uint64_t r = 0; nw + 2 <= 64; r++) {
		XXH128_hash_t h = XXH3_128bits_withSeed(key, 16, g->seed ^ ((r + 1) * step));
		words[nw++] = h.low64;
		words[nw++] = h.high64;
	}
	for (unsigned l = 0; l < g->lines_per_key; l++) {
		bool taken[128] = { false };
		for (unsigned t = 0; t < kk;) {
			unsigned o = (unsigned)(words[field / 9] >> (7 * (field % 9))) & 127;
			field++;
			if (!taken[o]) {
				taken[o] = true;
				out->off[l * kk + t++] = (uint8_t)o;
			}
		}
	}
}

static void test_positions_follow_spec(void **state)
{
	(void)state;
	const struct cbf_geometry gs[] = {
		{ .nlines = 167852, .k = 12, .lines_per_key = 2, .seed = 0x7064636266736564 },
		{ .nlines = 235876, .k = 9, .lines_per_key = 1, .seed = 1 },
		{ .nlines = 3, .k = 16, .lines_per_key = 1, .seed = 2 },  /* past h1 */
		{ .nlines = 1, .k = 16, .lines_per_key = 2, .seed = 3 },
		/* 4 GiB of address space, never touched */
		{ .nlines = (UINT64_C(1) << 26) + 12345, .k = 2, .lines_per_key = 2, .seed = 4 },
	};
	uint64_t s = 77;

	for (size_t i = 0; i < sizeof gs / sizeof *gs; i++) {
		struct cbf *f;
		struct cbf_geometry g = gs[i];
		assert_int_equal(cbf_create(NULL, &g, 0, &f), 0);
		for (int j = 0; j < 20000; j++) {
			uint8_t key[16];
			struct cbf_pos got, want;
			rng_key(&s, key);
			memset(&got, 0, sizeof got);
			cbf_positions(f, key, &got);
			spec_positions(&g, key, &want);
			assert_int_equal(got.nlines, want.nlines);
			assert_int_equal(got.k, want.k);
			assert_memory_equal(got.line, want.line, g.lines_per_key * sizeof got.line[0]);
			assert_memory_equal(got.off, want.off, g.k);
		}
		cbf_close(f);
	}
	/* one example, frozen */
	struct cbf_geometry g = { .nlines = 1000, .k = 12, .lines_per_key = 2, .seed = 42 };
	const uint8_t key[16] = { 'p', 'a', 'g', 'e', 'd', 'e', 'd', 'u',
				  'p', 'f', 's', '-', 'k', 'e', 'y', '!' };
	struct cbf *f;
	struct cbf_pos p;
	assert_int_equal(cbf_create(NULL, &g, 0, &f), 0);
	cbf_positions(f, key, &p);
	const uint8_t off[12] = { 77, 90, 50, 13, 60, 88, 80, 16, 114, 12, 7, 74 };
	assert_int_equal(p.line[0], 845);
	assert_int_equal(p.line[1], 473);
	assert_memory_equal(p.off, off, sizeof off);
	cbf_close(f);
}

/* ---- false positives at design load ---- */

#define FPR_KEYS 1000000
#define FPR_QUERIES 10000000
#define QUERY_CHUNK 4096

/* Fill a filter sized for 1e6 keys at 1e-4 with 1e6 keys, check that each
 * is found, and measure the rate on 1e7 fresh keys. About 1000 false
 * positives are expected, so the 20% band is some six standard deviations
 * wide: a correct filter passes, a wrong position rule or formula does not. */
static void check_fpr(uint32_t lpk)
{
	struct cbf_geometry g;
	struct cbf *f;
	uint64_t s = 42 + lpk, misses = 0, hits = 0;
	uint8_t *keys = malloc(QUERY_CHUNK * 16);
	bool *res = malloc(QUERY_CHUNK * sizeof *res);
	struct cbf_pos p;

	assert_non_null(keys);
	assert_non_null(res);
	assert_int_equal(cbf_geometry_for(FPR_KEYS, 1e-4, lpk, &g), 0);
	assert_int_equal(cbf_create(NULL, &g, 0, &f), 0);
	for (int i = 0; i < FPR_KEYS; i++) {
		uint8_t key[16];
		rng_key(&s, key);
		cbf_positions(f, key, &p);
		assert_int_equal(cbf_add(f, &p, NULL, NULL, NULL), 0);
	}
	/* no false negative: replay the same keys */
	s = 42 + lpk;
	for (int i = 0; i < FPR_KEYS; i += QUERY_CHUNK) {
		size_t n = FPR_KEYS - i < QUERY_CHUNK ? (size_t)(FPR_KEYS - i) : QUERY_CHUNK;
		for (size_t j = 0; j < n; j++)
			rng_key(&s, keys + 16 * j);
		misses += n - cbf_maybe_contains_batch(f, keys, n, res);
	}
	assert_int_equal(misses, 0);

	for (int i = 0; i < FPR_QUERIES; i += QUERY_CHUNK) {
		for (size_t j = 0; j < QUERY_CHUNK; j++)
			rng_key(&s, keys + 16 * j);
		hits += cbf_maybe_contains_batch(f, keys, QUERY_CHUNK, res);
		if (i < 100 * QUERY_CHUNK) {
			/* the batch agrees with the one-key lookup */
			for (size_t j = 0; j < QUERY_CHUNK; j++) {
				cbf_positions(f, keys + 16 * j, &p);
				assert_int_equal(res[j], cbf_maybe_contains(f, &p));
			}
		}
	}
	double measured = (double)hits / FPR_QUERIES;
	double theory = cbf_theoretical_fpr(&g, FPR_KEYS);
	print_message("lines_per_key %u k %u: measured fpr %.4g, theory %.4g\n", lpk, g.k,
		      measured, theory);
	assert_true(theory <= 1e-4);
	assert_true(fabs(measured - theory) <= 0.2 * theory);
	/* the estimate from the fill agrees with the theory at the known load */
	double est = cbf_estimated_fpr(f);
	assert_true(fabs(est - theory) <= 0.05 * theory);
	free(keys);
	free(res);
	cbf_close(f);
}

static void test_fpr_two_lines(void **state)
{
	(void)state;
	check_fpr(2);
}

static void test_fpr_one_line(void **state)
{
	(void)state;
	check_fpr(1);
}

/* Batches of every small size, present and absent keys mixed, answer as
 * one-key lookups do (the pipeline's start and end). */
static void test_batch_sizes(void **state)
{
	(void)state;
	struct cbf *f = small_filter(64, 8, 2);
	uint8_t keys[70 * 16];
	bool res[70];
	struct cbf_pos p;
	uint64_t s = 31;

	for (int i = 0; i < 70; i++) {
		rng_key(&s, keys + 16 * i);
		if (i % 3 == 0) {
			cbf_positions(f, keys + 16 * i, &p);
			assert_int_equal(cbf_add(f, &p, NULL, NULL, NULL), 0);
		}
	}
	assert_int_equal(cbf_maybe_contains_batch(f, NULL, 0, NULL), 0);
	for (size_t n = 1; n <= 70; n++) {
		size_t want = 0;
		memset(res, 0xAA, sizeof res);
		size_t got = cbf_maybe_contains_batch(f, keys, n, res);
		for (size_t i = 0; i < n; i++) {
			cbf_positions(f, keys + 16 * i, &p);
			bool one = cbf_maybe_contains(f, &p);
			assert_int_equal(res[i], one);
			if (i % 3 == 0)
				assert_true(one);
			want += one;
		}
		assert_int_equal(got, want);
	}
	cbf_close(f);
}

/* ---- saturation and the exact-count table ---- */

/* 20 keys that all touch counter `shared` exactly once drive it through 15
 * into the exact table and back to 0; background keys elsewhere must come
 * out untouched. */
static void test_shared_counter(void **state)
{
	(void)state;
	struct cbf *f = small_filter(8, 4, 2);
	const uint64_t shared = 3 * 128 + 77;
	struct exact_table t = { 0 };
	struct cbf_pos bg, keys[20];
	uint64_t s = 99;
	unsigned times;
	int found = 0;

	for (int i = 0; i < 40; i++) {
		uint8_t key[16];
		do {
			rng_key(&s, key);
			cbf_positions(f, key, &bg);
		} while (pos_has_counter(&bg, shared, &times));
		assert_int_equal(cbf_add(f, &bg, &table_ops, &t, NULL), 0);
	}
	assert_int_equal(t.len, 0);
	uint8_t *before = snapshot(f);
	assert_int_equal(cbf_get(f, shared), 0);

	while (found < 20) {
		uint8_t key[16];
		rng_key(&s, key);
		cbf_positions(f, key, &keys[found]);
		if (pos_has_counter(&keys[found], shared, &times) && times == 1)
			found++;
	}
	for (int i = 0; i < 20; i++) {
		assert_int_equal(cbf_add(f, &keys[i], &table_ops, &t, NULL), 0);
		unsigned want = i + 1 < 15 ? (unsigned)i + 1 : 15;
		assert_int_equal(cbf_get(f, shared), want);
		assert_int_equal(table_count(&t, shared), i + 1 < 15 ? 0 : (uint64_t)i + 1);
	}
	assert_int_equal(cbf_get(f, shared), 15);
	assert_int_equal(table_count(&t, shared), 20);
	assert_int_equal(t.len, 1);

	/* remove in another order than added */
	for (int i = 0; i < 20; i++) {
		int at = (i * 7) % 20;
		assert_int_equal(cbf_remove(f, &keys[at], &table_ops, &t, NULL), 0);
		unsigned left = 19 - i;
		assert_int_equal(cbf_get(f, shared), left < 15 ? left : 15);
		assert_int_equal(table_count(&t, shared), left < 15 ? 0 : left);
	}
	assert_int_equal(cbf_get(f, shared), 0);
	assert_int_equal(t.len, 0);
	assert_snapshot(f, before);
	free(before);
	cbf_close(f);
}

/* A key whose two lines coincide can hold one counter twice: both
 * increments count, and removal needs room for both decrements. */
static void test_repeated_counter(void **state)
{
	(void)state;
	struct cbf *f = small_filter(2, 8, 2);
	struct exact_table t = { 0 };
	struct cbf_pos p;
	uint64_t s = 5, dup = UINT64_MAX;

	/* a real key with a repeated counter */
	while (dup == UINT64_MAX) {
		uint8_t key[16];
		rng_key(&s, key);
		cbf_positions(f, key, &p);
		for (unsigned j = 0; j < p.k && dup == UINT64_MAX; j++) {
			unsigned times;
			pos_has_counter(&p, cbf_pos_counter(&p, j), &times);
			if (times == 2)
				dup = cbf_pos_counter(&p, j);
		}
	}
	uint8_t *empty = snapshot(f);
	assert_int_equal(cbf_add(f, &p, &table_ops, &t, NULL), 0);
	assert_int_equal(cbf_get(f, dup), 2);
	assert_true(cbf_maybe_contains(f, &p));
	assert_int_equal(cbf_remove(f, &p, &table_ops, &t, NULL), 0);
	assert_snapshot(f, empty);
	assert_int_equal(cbf_remove(f, &p, &table_ops, &t, NULL), -EUCLEAN);

	/* crafted: a takes counter 5 twice, b takes 5..8 once */
	struct cbf_pos a = { .nlines = 2, .k = 4, .line = { 1, 1 }, .off = { 5, 6, 5, 7 } };
	struct cbf_pos b = { .nlines = 2, .k = 4, .line = { 1, 1 }, .off = { 5, 6, 7, 8 } };
	const uint64_t c5 = 128 + 5, c6 = 128 + 6, c7 = 128 + 7, c8 = 128 + 8;
	assert_int_equal(cbf_add(f, &b, &table_ops, &t, NULL), 0);
	uint8_t *one = snapshot(f);
	assert_int_equal(cbf_get(f, c5), 1);
	/* every counter of a is non-zero, but 5 cannot go down twice */
	assert_true(cbf_maybe_contains(f, &a));
	assert_int_equal(cbf_remove(f, &a, &table_ops, &t, NULL), -EUCLEAN);
	assert_int_equal(cbf_remove(f, &a, NULL, NULL, NULL), -EUCLEAN);
	assert_snapshot(f, one);

	/* through saturation: counter 5 goes 14 -> 15 (exact 15) -> exact 16 */
	for (int i = 0; i < 13; i++)
		assert_int_equal(cbf_add(f, &b, &table_ops, &t, NULL), 0);
	uint8_t *fourteen = snapshot(f);
	assert_int_equal(cbf_get(f, c5), 14);
	assert_int_equal(cbf_add(f, &a, &table_ops, &t, NULL), 0);
	assert_int_equal(cbf_get(f, c5), 15);
	assert_int_equal(table_count(&t, c5), 16);
	assert_int_equal(table_count(&t, c6), 15);
	assert_int_equal(table_count(&t, c7), 15);
	assert_int_equal(cbf_get(f, c8), 14);
	assert_int_equal(t.len, 3);
	assert_int_equal(cbf_remove(f, &a, &table_ops, &t, NULL), 0);
	assert_int_equal(t.len, 0);
	assert_snapshot(f, fourteen);
	free(empty);
	free(one);
	free(fourteen);
	cbf_close(f);
}

/* Without an exact table a counter at 15 stays there: no false negative
 * even after more removals than the counter could count. */
static void test_saturating_without_table(void **state)
{
	(void)state;
	struct cbf *f = small_filter(1, 2, 1);
	struct cbf_pos p;
	uint8_t key[16] = { 9 };

	cbf_positions(f, key, &p);
	for (int i = 0; i < 20; i++)
		assert_int_equal(cbf_add(f, &p, NULL, NULL, NULL), 0);
	for (unsigned j = 0; j < p.k; j++)
		assert_int_equal(cbf_get(f, cbf_pos_counter(&p, j)), 15);
	for (int i = 0; i < 30; i++)
		assert_int_equal(cbf_remove(f, &p, NULL, NULL, NULL), 0);
	for (unsigned j = 0; j < p.k; j++)
		assert_int_equal(cbf_get(f, cbf_pos_counter(&p, j)), 15);
	assert_true(cbf_maybe_contains(f, &p));
	uint64_t nz, sat;
	cbf_fill(f, &nz, &sat);
	assert_int_equal(nz, 2);
	assert_int_equal(sat, 2);
	cbf_close(f);
}

/* ---- removal that the filter cannot explain ---- */

static void test_remove_never_inserted(void **state)
{
	(void)state;
	struct cbf *f = small_filter(64, 8, 2);
	struct exact_table t = { 0 };
	struct cbf_pos p;
	uint64_t s = 3;
	uint8_t key[16];

	for (int i = 0; i < 100; i++) {
		rng_key(&s, key);
		cbf_positions(f, key, &p);
		assert_int_equal(cbf_add(f, &p, &table_ops, &t, NULL), 0);
	}
	uint8_t *before = snapshot(f);
	int tried = 0;
	for (int i = 0; i < 1000; i++) {
		rng_key(&s, key);
		cbf_positions(f, key, &p);
		if (cbf_maybe_contains(f, &p))
			continue;  /* a false positive: its removal would succeed */
		assert_int_equal(cbf_remove(f, &p, &table_ops, &t, NULL), -EUCLEAN);
		assert_int_equal(cbf_remove(f, &p, NULL, NULL, NULL), -EUCLEAN);
		tried++;
	}
	assert_true(tried > 500);
	assert_snapshot(f, before);
	assert_int_equal(t.len, 0);
	free(before);
	cbf_close(f);
}

/* A counter at 15 with no exact count: both add and remove refuse, and
 * change nothing. */
static void test_missing_exact_count(void **state)
{
	(void)state;
	struct cbf *f = small_filter(4, 4, 2);
	struct exact_table t = { 0 };
	struct cbf_pos p;
	uint8_t key[16] = { 1 };

	cbf_positions(f, key, &p);
	for (int i = 0; i < 15; i++)
		assert_int_equal(cbf_add(f, &p, NULL, NULL, NULL), 0);
	uint8_t *before = snapshot(f);
	assert_int_equal(cbf_add(f, &p, &table_ops, &t, NULL), -EUCLEAN);
	assert_int_equal(cbf_remove(f, &p, &table_ops, &t, NULL), -EUCLEAN);
	assert_snapshot(f, before);
	assert_int_equal(t.len, 0);
	free(before);
	cbf_close(f);
}

/* A refused add or removal must not touch the exact table either: the
 * key's first counter would write the table, and a later one makes the
 * call fail (it cannot go down, alone or because it occurs twice; or it is
 * at 15 with no exact count). */
static void test_refusals_keep_table(void **state)
{
	(void)state;
	struct cbf *f = small_filter(2, 4, 2);
	struct exact_table t = { 0 };
	struct cbf_pos sat = { .nlines = 1, .k = 1, .line = { 0 }, .off = { 10 } };
	struct cbf_pos once = { .nlines = 1, .k = 1, .line = { 0 }, .off = { 11 } };
	/* counter 10, then 11 twice (both lines are line 0) */
	struct cbf_pos twice = { .nlines = 2, .k = 4, .line = { 0, 0 }, .off = { 10, 11, 12, 11 } };
	struct cbf_pos zero = { .nlines = 2, .k = 4, .line = { 0, 1 }, .off = { 10, 12, 13, 14 } };

	for (int i = 0; i < 20; i++)
		assert_int_equal(cbf_add(f, &sat, &table_ops, &t, NULL), 0);
	assert_int_equal(cbf_add(f, &once, &table_ops, &t, NULL), 0);
	struct cbf_pos twelve = { .nlines = 1, .k = 1, .line = { 0 }, .off = { 12 } };
	assert_int_equal(cbf_add(f, &twelve, &table_ops, &t, NULL), 0);
	assert_int_equal(table_count(&t, 10), 20);
	uint8_t *before = snapshot(f);

	assert_int_equal(cbf_remove(f, &twice, &table_ops, &t, NULL), -EUCLEAN);
	assert_int_equal(cbf_remove(f, &zero, &table_ops, &t, NULL), -EUCLEAN);
	assert_snapshot(f, before);
	assert_int_equal(t.len, 1);
	assert_int_equal(table_count(&t, 10), 20);

	/* an add whose first counter reaches 15 (a table write) and whose
	 * last is at 15 without an exact count */
	struct cbf_pos lost = { .nlines = 1, .k = 1, .line = { 1 }, .off = { 40 } };
	struct cbf_pos fourteen = { .nlines = 1, .k = 1, .line = { 1 }, .off = { 30 } };
	struct cbf_pos both = { .nlines = 1, .k = 2, .line = { 1 }, .off = { 30, 40 } };
	for (int i = 0; i < 15; i++)
		assert_int_equal(cbf_add(f, &lost, NULL, NULL, NULL), 0);
	for (int i = 0; i < 14; i++)
		assert_int_equal(cbf_add(f, &fourteen, &table_ops, &t, NULL), 0);
	free(before);
	before = snapshot(f);
	assert_int_equal(cbf_add(f, &both, &table_ops, &t, NULL), -EUCLEAN);
	assert_snapshot(f, before);
	assert_int_equal(t.len, 1);

	/* an exact count below 15 is as wrong as a missing one */
	t.count[0] = 3;
	assert_int_equal(cbf_add(f, &sat, &table_ops, &t, NULL), -EUCLEAN);
	assert_int_equal(cbf_remove(f, &sat, &table_ops, &t, NULL), -EUCLEAN);
	assert_snapshot(f, before);
	assert_int_equal(table_count(&t, 10), 3);
	free(before);
	cbf_close(f);
}

/* ---- undo ---- */

static void test_undo_rollback(void **state)
{
	(void)state;
	struct cbf *f = small_filter(4, 6, 2);
	struct exact_table t = { 0 };
	struct cbf_undo u = { 0 };
	struct cbf_pos p[30];
	uint64_t s = 11;

	for (int i = 0; i < 30; i++) {
		uint8_t key[16];
		rng_key(&s, key);
		cbf_positions(f, key, &p[i]);
	}
	/* a committed past, with p[0]'s counters saturated */
	for (int r = 0; r < 3; r++)
		for (int i = 0; i < 30; i++)
			assert_int_equal(cbf_add(f, &p[i], &table_ops, &t, &u), 0);
	for (int r = 0; r < 15; r++)
		assert_int_equal(cbf_add(f, &p[0], &table_ops, &t, &u), 0);
	for (unsigned j = 0; j < p[0].k; j++)
		assert_int_equal(cbf_get(f, cbf_pos_counter(&p[0], j)), 15);
	cbf_undo_clear(&u);
	assert_int_equal(cbf_undo_mark(&u), 0);
	uint8_t *before = snapshot(f);

	for (int i = 0; i < 30; i++)
		assert_int_equal(cbf_add(f, &p[i], &table_ops, &t, &u), 0);
	size_t mark = cbf_undo_mark(&u);
	assert_int_equal(mark, 30 * 6);
	uint8_t *middle = snapshot(f);
	for (int i = 0; i < 30; i += 2)
		assert_int_equal(cbf_remove(f, &p[i], &table_ops, &t, &u), 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(cbf_add(f, &p[i], &table_ops, &t, &u), 0);
	/* a refused removal adds nothing to the log */
	size_t len = u.len;
	uint8_t key[16] = { 0xEE };
	struct cbf_pos fresh;
	cbf_positions(f, key, &fresh);
	if (!cbf_maybe_contains(f, &fresh))
		assert_int_equal(cbf_remove(f, &fresh, &table_ops, &t, &u), -EUCLEAN);
	assert_int_equal(u.len, len);

	cbf_undo_rollback(f, &u, mark);
	assert_int_equal(cbf_undo_mark(&u), mark);
	assert_snapshot(f, middle);
	cbf_undo_rollback(f, &u, 0);
	assert_snapshot(f, before);
	cbf_undo_free(&u);
	free(before);
	free(middle);
	cbf_close(f);
}

/* An error from the exact table in the middle of a key puts back the
 * counters already changed and drops their log entries. */
static void test_table_error_restores(void **state)
{
	(void)state;
	struct cbf *f = small_filter(1, 4, 1);
	struct exact_table t = { 0 };
	struct cbf_undo u = { 0 };
	struct cbf_pos p = { .nlines = 1, .k = 4, .off = { 10, 11, 12, 13 } };
	struct cbf_pos q = { .nlines = 1, .k = 4, .off = { 20, 21, 12, 22 } };

	for (int i = 0; i < 14; i++)
		assert_int_equal(cbf_add(f, &p, &table_ops, &t, &u), 0);
	cbf_undo_clear(&u);
	uint8_t *before = snapshot(f);
	/* q's third counter (12) is at 14: its put fails after 20 and 21 rose */
	t.fail_put = -EIO;
	assert_int_equal(cbf_add(f, &q, &table_ops, &t, &u), -EIO);
	assert_int_equal(cbf_undo_mark(&u), 0);
	assert_snapshot(f, before);
	assert_int_equal(t.len, 0);
	t.fail_put = 0;
	assert_int_equal(cbf_add(f, &q, &table_ops, &t, &u), 0);
	assert_int_equal(cbf_undo_mark(&u), 4);
	assert_int_equal(cbf_get(f, 12), 15);
	assert_int_equal(table_count(&t, 12), 15);
	/* and the same on the way down: 12 needs del, which succeeds, but a
	 * failing put on a count above 15 stops a later key */
	assert_int_equal(cbf_add(f, &p, &table_ops, &t, &u), 0);
	assert_int_equal(table_count(&t, 12), 16);
	uint8_t *full = snapshot(f);
	size_t mark = cbf_undo_mark(&u);
	t.fail_put = -ENOSPC;
	assert_int_equal(cbf_remove(f, &q, &table_ops, &t, &u), -ENOSPC);
	assert_int_equal(cbf_undo_mark(&u), mark);
	assert_snapshot(f, full);
	t.fail_put = 0;
	cbf_undo_rollback(f, &u, 0);
	assert_snapshot(f, before);
	cbf_undo_free(&u);
	free(before);
	free(full);
	cbf_close(f);
}

static void test_bad_positions(void **state)
{
	(void)state;
	struct cbf *f = small_filter(4, 4, 2);
	struct cbf_pos p;
	uint8_t key[16] = { 3 };

	cbf_positions(f, key, &p);
	struct cbf_pos bad = p;
	bad.line[1] = 4;
	assert_int_equal(cbf_add(f, &bad, NULL, NULL, NULL), -EINVAL);
	assert_true(cbf_maybe_contains(f, &bad));
	bad = p;
	bad.off[0] = 128;
	assert_int_equal(cbf_add(f, &bad, NULL, NULL, NULL), -EINVAL);
	bad = p;
	bad.k = 3;
	assert_int_equal(cbf_remove(f, &bad, NULL, NULL, NULL), -EINVAL);
	bad = p;
	bad.nlines = 0;
	assert_int_equal(cbf_add(f, &bad, NULL, NULL, NULL), -EINVAL);
	uint64_t nz;
	cbf_fill(f, &nz, NULL);
	assert_int_equal(nz, 0);
	assert_int_equal(cbf_get(f, 4 * 128), 0);  /* out of range reads 0 */
	cbf_close(f);
}

static void test_fill_and_clear(void **state)
{
	(void)state;
	struct cbf *f = small_filter(16, 8, 2);
	struct cbf_pos p;
	uint64_t s = 8, nz, sat, want_nz = 0, want_sat = 0;

	for (int i = 0; i < 150; i++) {
		uint8_t key[16];
		rng_key(&s, key);
		cbf_positions(f, key, &p);
		assert_int_equal(cbf_add(f, &p, NULL, NULL, NULL), 0);
	}
	double est = cbf_estimated_fpr(f), theory = cbf_theoretical_fpr(cbf_geometry(f), 150);
	assert_true(est > theory / 2 && est < theory * 2);
	for (int i = 0; i < 15; i++)
		assert_int_equal(cbf_add(f, &p, NULL, NULL, NULL), 0);
	/* a whole 8-byte word of line 5 at 15: sixteen counters in one word */
	struct cbf_pos word = { .nlines = 1, .k = 16, .line = { 5 },
				.off = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 } };
	for (int i = 0; i < 15; i++)
		assert_int_equal(cbf_add(f, &word, NULL, NULL, NULL), 0);
	for (uint64_t i = 0; i < counters_of(f); i++) {
		want_nz += cbf_get(f, i) != 0;
		want_sat += cbf_get(f, i) == 15;
	}
	cbf_fill(f, &nz, &sat);
	assert_int_equal(nz, want_nz);
	assert_int_equal(sat, want_sat);
	assert_true(want_sat > 0 && want_nz > want_sat);
	assert_int_equal(cbf_bytes(f), 16 * 64);
	cbf_clear(f);
	cbf_fill(f, &nz, &sat);
	assert_int_equal(nz, 0);
	assert_int_equal(sat, 0);
	assert_true(cbf_estimated_fpr(f) == 0);
	cbf_close(f);
}

/* ---- the file ---- */

struct tmp { char dir[256], path[300]; };

static void tmp_make(struct tmp *t)
{
	const char *base = getenv("TMPDIR");
	snprintf(t->dir, sizeof t->dir, "%s/test_cbf.XXXXXX", base && *base ? base : "/tmp");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->path, sizeof t->path, "%s/filter", t->dir);
}

static void tmp_remove(struct tmp *t)
{
	unlink(t->path);
	rmdir(t->dir);
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void test_file_persistence(void **state)
{
	(void)state;
	struct tmp t;
	struct cbf_geometry g;
	struct cbf *f;
	struct cbf_pos p;
	uint64_t s = 21;

	tmp_make(&t);
	assert_int_equal(cbf_geometry_for(5000, 1e-3, 2, &g), 0);
	assert_int_equal(cbf_create(t.path, &g, 7, &f), 0);
	assert_int_equal(cbf_generation(f), 7);
	for (int i = 0; i < 5000; i++) {
		uint8_t key[16];
		rng_key(&s, key);
		cbf_positions(f, key, &p);
		assert_int_equal(cbf_add(f, &p, NULL, NULL, NULL), 0);
	}
	uint8_t *before = snapshot(f);
	assert_int_equal(cbf_sync(f, 42), 0);
	assert_int_equal(cbf_generation(f), 42);
	cbf_close(f);

	struct stat st;
	assert_int_equal(stat(t.path, &st), 0);
	assert_int_equal(st.st_size, CBF_HEADER_BYTES + g.nlines * CBF_LINE_BYTES);
	assert_int_equal(st.st_mode & 0777, 0600);

	for (int ro = 0; ro < 2; ro++) {
		assert_int_equal(cbf_open(t.path, ro, &f), 0);
		assert_int_equal(cbf_generation(f), 42);
		assert_memory_equal(cbf_geometry(f), &g, sizeof g);
		assert_snapshot(f, before);
		s = 21;
		for (int i = 0; i < 5000; i++) {
			uint8_t key[16];
			rng_key(&s, key);
			cbf_positions(f, key, &p);
			assert_true(cbf_maybe_contains(f, &p));
			if (ro)
				assert_int_equal(cbf_add(f, &p, NULL, NULL, NULL), -EROFS);
		}
		if (ro)
			assert_int_equal(cbf_sync(f, 43), -EROFS);
		cbf_close(f);
	}

	/* create replaces the file with an empty filter */
	assert_int_equal(cbf_create(t.path, &g, 1, &f), 0);
	cbf_close(f);
	assert_int_equal(cbf_open(t.path, true, &f), 0);
	uint64_t nz;
	cbf_fill(f, &nz, NULL);
	assert_int_equal(nz, 0);
	assert_int_equal(cbf_generation(f), 1);
	cbf_close(f);
	free(before);
	tmp_remove(&t);
}

static void test_open_bad_files(void **state)
{
	(void)state;
	struct tmp t;
	struct cbf_geometry g = { .nlines = 4, .k = 4, .lines_per_key = 2, .seed = 1 };
	struct cbf *f = NULL;
	uint8_t *buf = calloc(1, 8192);

	assert_non_null(buf);
	tmp_make(&t);
	assert_int_equal(cbf_open(t.path, true, &f), -ENOENT);

	/* garbage of the right size */
	for (int i = 0; i < 8192; i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	write_file(t.path, buf, 4096 + 4 * 64);
	assert_int_equal(cbf_open(t.path, true, &f), -EINVAL);
	write_file(t.path, buf, 100);
	assert_int_equal(cbf_open(t.path, false, &f), -EINVAL);
	write_file(t.path, buf, 0);
	assert_int_equal(cbf_open(t.path, false, &f), -EINVAL);

	/* a real header, then broken one field at a time */
	assert_int_equal(cbf_create(t.path, &g, 3, &f), 0);
	cbf_close(f);
	int fd = open(t.path, O_RDONLY);
	assert_int_equal(read(fd, buf, 4096 + 4 * 64), 4096 + 4 * 64);
	close(fd);
	assert_memory_equal(buf, "PDCBF001", 8);
	assert_int_equal(buf[8], 1);   /* version, little-endian */
	assert_int_equal(buf[12], 4);  /* k */
	assert_int_equal(buf[16], 2);  /* lines_per_key */
	assert_int_equal(buf[24], 4);  /* nlines */
	assert_int_equal(buf[40], 3);  /* generation */

	struct { size_t at; uint8_t value; size_t len; } cases[] = {
		{ 0, 'X', 4096 + 4 * 64 },   /* magic */
		{ 8, 2, 4096 + 4 * 64 },     /* version */
		{ 12, 3, 4096 + 4 * 64 },    /* k not a multiple of lines_per_key */
		{ 12, 18, 4096 + 4 * 64 },   /* k above CBF_MAX_K */
		{ 16, 3, 4096 + 4 * 64 },    /* lines_per_key */
		{ 24, 0, 4096 + 4 * 64 },    /* nlines 0 */
		{ 24, 5, 4096 + 4 * 64 },    /* nlines disagrees with the size */
		{ 24, 4, 4096 + 3 * 64 },    /* truncated */
		{ 24, 4, 4096 + 5 * 64 },    /* too long */
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		uint8_t saved = buf[cases[i].at];
		buf[cases[i].at] = cases[i].value;
		write_file(t.path, buf, cases[i].len);
		assert_int_equal(cbf_open(t.path, true, &f), -EINVAL);
		buf[cases[i].at] = saved;
	}
	write_file(t.path, buf, 4096 + 4 * 64);
	assert_int_equal(cbf_open(t.path, true, &f), 0);
	cbf_close(f);
	free(buf);
	tmp_remove(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_geometry_for),
		cmocka_unit_test(test_theory_formula),
		cmocka_unit_test(test_positions),
		cmocka_unit_test(test_positions_follow_spec),
		cmocka_unit_test(test_fpr_two_lines),
		cmocka_unit_test(test_fpr_one_line),
		cmocka_unit_test(test_batch_sizes),
		cmocka_unit_test(test_shared_counter),
		cmocka_unit_test(test_repeated_counter),
		cmocka_unit_test(test_saturating_without_table),
		cmocka_unit_test(test_remove_never_inserted),
		cmocka_unit_test(test_missing_exact_count),
		cmocka_unit_test(test_refusals_keep_table),
		cmocka_unit_test(test_undo_rollback),
		cmocka_unit_test(test_table_error_restores),
		cmocka_unit_test(test_bad_positions),
		cmocka_unit_test(test_fill_and_clear),
		cmocka_unit_test(test_file_persistence),
		cmocka_unit_test(test_open_bad_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
