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
 * small one as a fresh thread does (the feature table it keeps); the
 * shingle set equals one computed the plain way (every shingle, qsort,
 * repeats dropped, the smallest kept) on pages of every kind: HTML, CJK,
 * mixed scripts, binary, empty, huge.
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
#include "text/html.h"

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

/* ---- the shingle set computed the plain way ---- */

/* nearset.h's definition written out without any shortcut: words between
 * blanks as written, each CJK character a word of its own, each run of
 * NEARSET_WORDS word hashes hashed together (fewer words: one shingle of
 * them all), the top 32 bits kept, qsort, repeats dropped, the NEARSET_K
 * smallest held. */
static bool ref_cjk(uint32_t c)
{
	return (c >= 0x2E80 && c <= 0x9FFF) || (c >= 0xAC00 && c <= 0xD7AF) || (c >= 0xF900 && c <= 0xFAFF) ||
	       (c >= 0xFF00 && c <= 0xFFEF) || c >= 0x20000;
}

/* The length of the character at t[i] (its lead byte's, clipped to the
 * text) and its code point when it is 3 or 4 bytes long (else 0). */
static size_t ref_char(const unsigned char *t, size_t i, size_t len, uint32_t *cp)
{
	size_t n = t[i] < 0x80 ? 1 : t[i] < 0xE0 ? 2 : t[i] < 0xF0 ? 3 : 4;
	if (i + n > len)
		n = len - i;
	*cp = 0;
	if (n == 3)
		*cp = (uint32_t)(t[i] & 15) << 12 | (uint32_t)(t[i + 1] & 63) << 6 | (t[i + 2] & 63);
	else if (n == 4)
		*cp = (uint32_t)(t[i] & 7) << 18 | (uint32_t)(t[i + 1] & 63) << 12 |
		      (uint32_t)(t[i + 2] & 63) << 6 | (t[i + 3] & 63);
	return n;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

struct ref_set {
	uint32_t shingles, n;
	uint32_t h[NEARSET_K];
};

static void ref_set_of_text(const char *text, size_t len, struct ref_set *out)
{
	const unsigned char *t = (const unsigned char *)text;
	uint64_t *words = malloc((len + 1) * sizeof *words);
	uint32_t *sh = malloc((len + 1) * sizeof *sh);
	assert_non_null(words);
	assert_non_null(sh);
	size_t nw = 0, ns = 0, start = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = ref_char(t, i, len, &cp);
		bool blank = t[i] == ' ' || t[i] == '\n' || t[i] == '\t', cjk = ref_cjk(cp);
		if ((blank || cjk) && i > start)
			words[nw++] = XXH3_64bits(t + start, i - start);
		if (cjk)
			words[nw++] = XXH3_64bits(t + i, n);
		i += n;
		if (blank || cjk)
			start = i;
	}
	if (len > start)
		words[nw++] = XXH3_64bits(t + start, len - start);
	for (size_t i = 0; i + NEARSET_WORDS <= nw; i++)
		sh[ns++] = (uint32_t)(XXH3_64bits(words + i, NEARSET_WORDS * sizeof *words) >> 32);
	if (nw && nw < NEARSET_WORDS)
		sh[ns++] = (uint32_t)(XXH3_64bits(words, nw * sizeof *words) >> 32);
	qsort(sh, ns, sizeof *sh, cmp_u32);
	size_t u = 0;
	for (size_t i = 0; i < ns; i++)
		if (!u || sh[u - 1] != sh[i])
			sh[u++] = sh[i];
	out->shingles = (uint32_t)u;
	out->n = (uint32_t)(u < NEARSET_K ? u : NEARSET_K);
	memcpy(out->h, sh, out->n * sizeof *sh);
	free(words);
	free(sh);
}

/* The signer's signature of page[0..len) against the plain computation:
 * no signature for binary or textless pages, else the same set. */
static void check_against_reference(const char *what, const void *page, size_t len)
{
	struct near_sig *sig = malloc(sizeof *sig);
	struct ref_set *ref = malloc(sizeof *ref);
	assert_non_null(sig);
	assert_non_null(ref);
	assert_int_equal(near_sig_for_record(page, len, sig), 0);
	struct html_text t;
	assert_int_equal(html_extract(page, len, 0, &t), 0);
	if (t.binary || !sig->has) {
		/* a page with any word has a simhash */
		ref_set_of_text(t.binary ? "" : t.text, t.binary ? 0 : t.len, ref);
		if (ref->shingles)
			fail_msg("%s: no signature, yet %u shingles", what, ref->shingles);
		assert_false(sig->has_set);
		html_text_free(&t);
		free(ref);
		free(sig);
		return;
	}
	ref_set_of_text(t.text, t.len, ref);
	html_text_free(&t);
	assert_true(sig->has_set);
	const struct nearset *s = &sig->set;
	if (s->shingles != ref->shingles || s->n != ref->n || s->complete != (ref->shingles <= NEARSET_K) ||
	    s->bits != 32 || memcmp(s->h, ref->h, ref->n * sizeof ref->h[0]))
		fail_msg("%s: set of %u shingles (%u held, complete %d, %u bits), the plain way %u (%u held)%s", what,
			 s->shingles, s->n, s->complete, s->bits, ref->shingles, ref->n,
			 s->n == ref->n && memcmp(s->h, ref->h, ref->n * sizeof ref->h[0]) ? ", values differ" : "");
	free(ref);
	free(sig);
}

/* Text of n words mixing scripts: Latin words, numbers, CJK characters
 * in runs, Cyrillic, tabs and line ends, entities. */
static char *mixed(size_t n, uint64_t seed, size_t *len)
{
	static const char *const pieces[] = { "word", "Wort", "\xe4\xb8\xad\xe6\x96\x87", "\xe6\x96\x87",
					      "\xed\x95\x9c", "\xd1\x81\xd0\xbb\xd0\xbe\xd0\xb2\xd0\xbe", "42",
					      "&amp;", "\xf0\xa0\x80\x80", "caf\xc3\xa9" };
	static const char *const gaps[] = { " ", "\n", "\t", "", ", ", "<br>", "</p><p>" };
	char *b = malloc(n * 32 + 128);
	assert_non_null(b);
	size_t at = (size_t)sprintf(b, "<html><meta charset=utf-8><body><p>");
	uint64_t s = seed;
	for (size_t i = 0; i < n; i++) {
		uint64_t r = mix(&s);
		at += (size_t)sprintf(b + at, "%s%u%s", pieces[r % 10], (unsigned)((r >> 8) % 7),
				      gaps[(r >> 16) % 7]);
	}
	at += (size_t)sprintf(b + at, "</p></body></html>");
	*len = at;
	return b;
}

static void test_reference_set(void **state)
{
	(void)state;
	/* HTML and CJK pages of every charset tests/data/near holds */
	for (size_t i = 0; i < sizeof pinned / sizeof pinned[0]; i++) {
		size_t len;
		char *page = input(pinned[i].name, &len);
		check_against_reference(pinned[i].name, page, len);
		free(page);
	}
	/* generated: every size around a shingle and around NEARSET_K, and huge */
	static const size_t sizes[] = { 1, 2, 4, 5, 6, 7, 250, 255, 256, 257, 258, 262, 1000, 20000, 500000 };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		for (int kind = 0; kind < 2; kind++) {
			char what[64];
			size_t len;
			char *page = kind ? mixed(sizes[i], 7 + i, &len) : generated(sizes[i], 11 + i, &len);
			snprintf(what, sizeof what, "%s page of %zu words", kind ? "mixed" : "generated", sizes[i]);
			check_against_reference(what, page, len);
			free(page);
		}
	}
	/* binary, empty, markup only, blanks only */
	static const unsigned char png[] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H' };
	check_against_reference("png", png, sizeof png);
	unsigned char *noise = malloc(65536);
	assert_non_null(noise);
	uint64_t s = 5;
	for (size_t i = 0; i < 65536; i++)
		noise[i] = (unsigned char)mix(&s);
	check_against_reference("random bytes", noise, 65536);
	free(noise);
	check_against_reference("empty", "", 0);
	check_against_reference("markup only", "<html><body><div></div></body></html>", 37);
	check_against_reference("blanks only", " \n\t \n", 5);
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	assert_int_equal(near_sig_for_record("", 0, sig), 0);
	assert_false(sig->has);
	assert_int_equal(near_sig_for_record(png, sizeof png, sig), 0);
	assert_false(sig->has);
	free(sig);
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
		cmocka_unit_test(test_reference_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
