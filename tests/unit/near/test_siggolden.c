/* test_siggolden.c - pinned signatures: the simhash, the stored shingle
 * set with its band keys, and the MinHash sketch of the pages of
 * tests/data/near (English, Latin-1, Chinese in GBK, Big5 and UTF-8,
 * Japanese, Korean) and of generated texts of every size the signer
 * meets, as the code computed them before the signer was made cheaper.
 * Any change here changes stored rows and answers: it needs a new
 * SIMHASH_VERSION / NEARSET_VERSION, not a new pinned value.
 *
 * Also: the signer's form (near_sig_for_record) is near_sig_of_page's
 * without the sketch, and a thread that signed a large page signs a
 * small one as a fresh thread does (the feature table it keeps).
 *
 * PD_GOLDEN_PRINT=1 prints the table's rows from the code under test.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <xxhash.h>

#include "helpers.h"
#include "near/near.h"
#include "near/nearset.h"

struct golden {
	const char *name;   /* a page of tests/data/near, or "gen:N:SEED" */
	uint64_t simhash;
	uint32_t shingles;
	uint64_t set;       /* XXH3-64 of the stored set and its band keys */
	uint64_t sketch;    /* XXH3-64 of the sketch */
};

static const struct golden pinned[] = {
#include "siggolden.inc"
};

/* ---- inputs ---- */

static uint64_t mix(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* An HTML page of n words drawn from a vocabulary of 4n / 3 (repeats,
 * numbers and punctuation among them), wrapped in markup. */
static char *generated(size_t n, uint64_t seed, size_t *len)
{
	char *b = malloc(n * 16 + 256);
	assert_non_null(b);
	size_t at = (size_t)sprintf(b, "<html><head><title>page %llu</title></head><body><p>",
				    (unsigned long long)seed);
	uint64_t s = seed;
	for (size_t i = 0; i < n; i++) {
		uint64_t r = mix(&s);
		unsigned w = (unsigned)(r % (n * 4 / 3 + 1));
		at += (size_t)sprintf(b + at, r >> 60 == 0 ? "%u, " : r >> 60 == 1 ? "w%u.</p><p>" : "w%u ", w);
	}
	at += (size_t)sprintf(b + at, "</p></body></html>");
	*len = at;
	return b;
}

static char *input(const char *name, size_t *len)
{
	unsigned long long n, seed;
	if (sscanf(name, "gen:%llu:%llu", &n, &seed) == 2)
		return generated((size_t)n, seed, len);
	return th_data_page(name, len);
}

/* ---- digests ---- */

static uint64_t set_digest(const struct near_sig *sig)
{
	if (!sig->has_set)
		return 0;
	struct nearset *s = malloc(sizeof *s);
	uint8_t *buf = malloc(NEARSET_MAX_BYTES + 4 * NEARSET_BANDS);
	assert_non_null(s);
	assert_non_null(buf);
	*s = sig->set;
	nearset_to_stored(s);
	size_t n = nearset_encode(s, buf);
	assert_true(n > 0);
	for (size_t b = 0; b < NEARSET_BANDS; b++) {
		uint32_t key = nearset_band(s, b);
		memcpy(buf + n + 4 * b, &key, 4);
	}
	/* the keys kept through the cut are those computed afresh, a band at
	 * a time and all at once */
	struct nearset *fresh = malloc(2 * sizeof *fresh), *all = fresh + 1;
	assert_non_null(fresh);
	*fresh = *s;
	fresh->bands = false;
	*all = *fresh;
	nearset_bands(all);
	for (size_t b = 0; b < NEARSET_BANDS; b++) {
		assert_int_equal(nearset_band(fresh, b), nearset_band(s, b));
		assert_int_equal(all->band[b], nearset_band(s, b));
	}
	uint64_t d = XXH3_64bits(buf, n + 4 * NEARSET_BANDS);
	free(fresh);
	free(buf);
	free(s);
	return d;
}

static void sign(const char *name, struct near_sig *full, struct near_sig *rec)
{
	size_t len;
	char *page = input(name, &len);
	assert_int_equal(near_sig_of_page(page, len, full), 0);
	assert_int_equal(near_sig_for_record(page, len, rec), 0);
	free(page);
}

/* ---- cases ---- */

static void check_one(const struct golden *g)
{
	struct near_sig *sig = malloc(2 * sizeof *sig);
	assert_non_null(sig);
	sign(g->name, &sig[0], &sig[1]);
	struct near_sig *full = &sig[0], *rec = &sig[1];
	assert_true(full->has);
	uint64_t set = set_digest(full), sketch = full->has_sketch ? XXH3_64bits(full->sketch, MINHASH_BYTES) : 0;
	if (getenv("PD_GOLDEN_PRINT"))
		printf("\t{ \"%s\", UINT64_C(0x%016llx), %u, UINT64_C(0x%016llx), UINT64_C(0x%016llx) },\n", g->name,
		       (unsigned long long)full->simhash, full->set.shingles, (unsigned long long)set,
		       (unsigned long long)sketch);
	else if (full->simhash != g->simhash || full->set.shingles != g->shingles || set != g->set ||
		 sketch != g->sketch)
		fail_msg("%s: simhash %016llx, %u shingles, set %016llx, sketch %016llx; pinned %016llx, %u, %016llx, %016llx",
			 g->name, (unsigned long long)full->simhash, full->set.shingles, (unsigned long long)set,
			 (unsigned long long)sketch, (unsigned long long)g->simhash, g->shingles,
			 (unsigned long long)g->set, (unsigned long long)g->sketch);
	/* the signer's form: the same simhash and set, no sketch beside a set */
	assert_true(rec->has);
	assert_true(rec->simhash == full->simhash);
	assert_int_equal(rec->low_confidence, full->low_confidence);
	assert_int_equal(rec->has_set, full->has_set);
	assert_int_equal(set_digest(rec), set);
	assert_int_equal(rec->has_sketch, !full->has_set);
	free(sig);
}

static void test_pinned(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++)
		check_one(&pinned[i]);
}

/* The same pages in reverse order: a thread's kept feature table, left by
 * a larger or a smaller page, changes nothing. */
static void test_pinned_reversed(void **state)
{
	(void)state;
	for (size_t i = sizeof pinned / sizeof pinned[0]; i-- > 0;)
		check_one(&pinned[i]);
}

static void *sign_in_thread(void *arg)
{
	const struct golden *g = arg;
	struct near_sig *sig = malloc(2 * sizeof *sig);
	if (sig) {
		sign(g->name, &sig[0], &sig[1]);
		if (sig[0].simhash != g->simhash || sig[1].simhash != g->simhash)
			fprintf(stderr, "%s: simhash %016llx in a fresh thread\n", g->name,
				(unsigned long long)sig[0].simhash);
	}
	uintptr_t ok = sig && sig[0].simhash == g->simhash && sig[1].simhash == g->simhash;
	free(sig);
	return (void *)ok;
}

/* Each page in a thread of its own (the kept table freed at its exit). */
static void test_threads(void **state)
{
	(void)state;
	if (getenv("PD_GOLDEN_PRINT"))
		return;
	size_t n = sizeof pinned / sizeof pinned[0];
	pthread_t *t = calloc(n, sizeof *t);
	assert_non_null(t);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pthread_create(&t[i], NULL, sign_in_thread, (void *)&pinned[i]), 0);
	for (size_t i = 0; i < n; i++) {
		void *ok;
		assert_int_equal(pthread_join(t[i], &ok), 0);
		assert_true(ok != NULL);
	}
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pinned),
		cmocka_unit_test(test_pinned_reversed),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
