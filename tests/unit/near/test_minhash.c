/* test_minhash.c - the MinHash sketch (core/near/minhash.c) and the token sink
 * it reads (simhash_tokens, core/near/simhash.c): identical, disjoint and
 * half-overlapping texts, folding shared with the simhash, determinism,
 * empty and short texts, GBK and UTF-8 twins, bad arguments.
 *
 * Pages come from tests/data/near (found from $PD_DATA, set by
 * tests/run.sh, or from the current directory).
 */
#include <errno.h>
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
#include "near/minhash.h"
#include "near/simhash.h"

/* ---- helpers ---- */

static struct minhash_sketch sketch_of(const char *s)
{
	struct minhash_sketch m;
	assert_int_equal(minhash_of_text(s, strlen(s), &m), 0);
	return m;
}

static double estimate(const struct minhash_sketch *a, const struct minhash_sketch *b)
{
	double r = -1;
	assert_int_equal(minhash_resemblance(a->bytes, b->bytes, &r), 0);
	assert_true(r >= 0 && r <= 1);
	return r;
}

/* n words "<prefix>0 <prefix>1 ..." from index `from`, appended to buf. */
static void words(char *buf, size_t cap, const char *prefix, int from, int n)
{
	size_t k = strlen(buf);
	for (int i = from; i < from + n; i++)
		k += (size_t)snprintf(buf + k, cap - k, "%s%c%c%c ", prefix, 'a' + i % 26, 'a' + i / 26 % 26,
				      'a' + i / 676);
}

static bool all_zero(const uint8_t *b)
{
	for (size_t i = 0; i < MINHASH_BYTES; i++)
		if (b[i])
			return false;
	return true;
}

/* ---- the estimate ---- */

static void test_identical(void **state)
{
	(void)state;
	static char text[64 << 10];
	text[0] = 0;
	words(text, sizeof text, "w", 0, 1000);
	struct minhash_sketch a = sketch_of(text), b = sketch_of(text);
	assert_int_equal(a.features, 996); /* n words: n - 4 shingles */
	assert_memory_equal(a.bytes, b.bytes, MINHASH_BYTES);
	assert_true(estimate(&a, &b) == 1.0);
	assert_true(minhash_near(a.bytes, b.bytes));
	/* the same text in capitals, other numbers and other white space */
	struct minhash_sketch x = sketch_of("The Quick brown fox, 2024 jumps over the lazy dog; 17 times."),
			      y = sketch_of("the quick BROWN fox 1999\njumps over the lazy dog 3 times");
	assert_true(estimate(&x, &y) == 1.0);
}

static void test_disjoint(void **state)
{
	(void)state;
	static char a_text[64 << 10], b_text[64 << 10];
	a_text[0] = b_text[0] = 0;
	words(a_text, sizeof a_text, "a", 0, 1000);
	words(b_text, sizeof b_text, "b", 0, 1000);
	struct minhash_sketch a = sketch_of(a_text), b = sketch_of(b_text);
	/* only chance agreement of 2-bit values is left, and it is removed */
	assert_true(estimate(&a, &b) < 0.1);
	assert_false(minhash_near(a.bytes, b.bytes));
}

static void test_known_overlap(void **state)
{
	(void)state;
	/* A: words 0..999; B: words 0..599 then 400 others. Shared shingles
	 * lie within words 0..599: 596 of 996 each, J = 596 / 1396 = 0.427.
	 * One standard error of the estimate is about 0.04 there; a few texts
	 * (other word sets) keep the mean honest. */
	static char a_text[64 << 10], b_text[64 << 10];
	double sum = 0;
	const int runs = 8;
	for (int r = 0; r < runs; r++) {
		char pa[8], pb[8];
		snprintf(pa, sizeof pa, "s%d", r);
		snprintf(pb, sizeof pb, "t%d", r);
		a_text[0] = b_text[0] = 0;
		words(a_text, sizeof a_text, pa, 0, 1000);
		words(b_text, sizeof b_text, pa, 0, 600);
		words(b_text, sizeof b_text, pb, 600, 400);
		struct minhash_sketch a = sketch_of(a_text), b = sketch_of(b_text);
		double e = estimate(&a, &b);
		if (e < 0.427 - 0.16 || e > 0.427 + 0.16)
			fail_msg("run %d: estimate %.3f, resemblance 0.427", r, e);
		sum += e;
		assert_false(minhash_near(a.bytes, b.bytes));
	}
	double mean = sum / runs;
	if (mean < 0.427 - 0.06 || mean > 0.427 + 0.06)
		fail_msg("mean estimate %.3f, resemblance 0.427", mean);
	/* 9 words in 10 shared: J = 896 / 1096 = 0.82, above the threshold */
	a_text[0] = b_text[0] = 0;
	words(a_text, sizeof a_text, "u", 0, 1000);
	words(b_text, sizeof b_text, "u", 0, 900);
	words(b_text, sizeof b_text, "v", 900, 100);
	struct minhash_sketch a = sketch_of(a_text), b = sketch_of(b_text);
	double e = estimate(&a, &b);
	if (e < 0.82 - 0.12 || e > 0.82 + 0.12)
		fail_msg("estimate %.3f, resemblance 0.82", e);
}

static void test_determinism(void **state)
{
	(void)state;
	/* A fixed text has a fixed sketch on every machine, in every build. If
	 * this changes, stored sketches change: bump MINHASH_VERSION. */
	const char *text = "The quick brown fox jumps over the lazy dog near the river bank, "
			   "while 12 ducks watch, watch, watch, watch. 敏捷的棕色狐狸跳过了懒狗，懒狗，懒狗。";
	struct minhash_sketch m = sketch_of(text);
	assert_int_equal(m.features, 28); /* 16 word shingles, 12 CJK grams */
	uint64_t h = XXH3_64bits(m.bytes, MINHASH_BYTES);
	if (h != UINT64_C(0x46ec1e229e4aa0f2))
		fail_msg("sketch of the reference text hashes to %016llx", (unsigned long long)h);
	char *copy = malloc(strlen(text) + 8);
	assert_non_null(copy);
	strcpy(copy + 5, text);
	struct minhash_sketch c = sketch_of(copy + 5);
	assert_memory_equal(c.bytes, m.bytes, MINHASH_BYTES);
	free(copy);
}

/* ---- empty, short, CJK ---- */

static void test_empty_and_short(void **state)
{
	(void)state;
	struct minhash_sketch e = sketch_of(""), sep = sketch_of(" \n\t.,;!? -- ()");
	assert_int_equal(e.features, 0);
	assert_int_equal(sep.features, 0);
	assert_true(all_zero(e.bytes) && all_zero(sep.bytes));
	struct minhash_sketch m;
	assert_int_equal(minhash_of_text(NULL, 0, &m), 0);
	assert_true(all_zero(m.bytes));
	/* an empty sketch resembles nothing, itself included */
	assert_true(estimate(&e, &sep) == 0);
	assert_false(minhash_near(e.bytes, e.bytes));
	/* fewer words than a shingle: one shorter feature, a full sketch */
	struct minhash_sketch h = sketch_of("hello world"), h2 = sketch_of("Hello, World!"),
			      g = sketch_of("goodbye world");
	assert_int_equal(h.features, 1);
	assert_false(all_zero(h.bytes));
	assert_true(estimate(&h, &h2) == 1.0);
	assert_true(estimate(&h, &g) < 0.2);
	assert_true(estimate(&h, &e) == 0);
	/* CJK: character 3-grams within runs; a short run is one feature */
	assert_int_equal(sketch_of("一二三四五").features, 3);
	assert_int_equal(sketch_of("一二，三四五六").features, 1 + 2);
	assert_int_equal(sketch_of("中").features, 1);
	struct minhash_sketch x = sketch_of("今天天气很好，我们一起去公园散步吧。公园里的花都开了，非常漂亮。"),
			      y = sketch_of("这台电脑的内存不够用，编译大型程序时经常卡住。下个月换一块固态硬盘。");
	assert_true(estimate(&x, &x) == 1.0);
	assert_true(estimate(&x, &y) < 0.2);
}

static void test_pages(void **state)
{
	(void)state;
	size_t nu, ng, na, no;
	char *u = th_data_page("zh_a.utf8.html", &nu), *g = th_data_page("zh_a.gbk.html", &ng);
	char *a = th_data_page("en_article.html", &na), *o = th_data_page("en_other.html", &no);
	struct minhash_sketch su, sg, sa, so;
	assert_int_equal(minhash_of_page(u, nu, &su), 0);
	assert_int_equal(minhash_of_page(g, ng, &sg), 0);
	assert_int_equal(minhash_of_page(a, na, &sa), 0);
	assert_int_equal(minhash_of_page(o, no, &so), 0);
	/* one text in two charsets: the same sketch */
	assert_true(su.features > 300);
	assert_memory_equal(su.bytes, sg.bytes, MINHASH_BYTES);
	assert_true(minhash_near(su.bytes, sg.bytes));
	/* two articles in one site template are not near-duplicates */
	assert_true(sa.features > 300 && so.features > 300);
	assert_false(minhash_near(sa.bytes, so.bytes));
	assert_true(estimate(&sa, &so) < 0.3);
	/* binary content: the empty sketch */
	static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
	struct minhash_sketch sb;
	assert_int_equal(minhash_of_page(png, sizeof png, &sb), 0);
	assert_int_equal(sb.features, 0);
	assert_true(all_zero(sb.bytes));
	free(u);
	free(g);
	free(a);
	free(o);
}

/* ---- the token sink ---- */

struct counts {
	int words, cjk, ends;
	uint64_t first_word;
	uint64_t number_word;
};

static void count_word(void *ctx, uint64_t h)
{
	struct counts *c = ctx;
	if (!c->words)
		c->first_word = h;
	if (c->words == 1)
		c->number_word = h;
	c->words++;
}

static void count_cjk(void *ctx, uint32_t cp)
{
	struct counts *c = ctx;
	assert_true(cp >= 0x4E00 && cp <= 0x9FFF);
	c->cjk++;
}

static void count_end(void *ctx)
{
	((struct counts *)ctx)->ends++;
}

static void test_tokens(void **state)
{
	(void)state;
	static const struct simhash_token_sink sink = {count_word, count_cjk, count_end};
	const char *t = "Hello, 2024 world 中文字。Again 第二";
	struct counts c = {0}, d = {0};
	assert_int_equal(simhash_tokens(t, strlen(t), &sink, &c), 0);
	assert_int_equal(c.words, 4); /* hello, 0, world, again */
	assert_int_equal(c.cjk, 5);
	assert_int_equal(c.ends, 2); /* at the full stop, at the end */
	const char *u = "HELLO 7 x";
	assert_int_equal(simhash_tokens(u, strlen(u), &sink, &d), 0);
	assert_true(d.first_word == c.first_word);   /* folded */
	assert_true(d.number_word == c.number_word); /* every number is "0" */
	/* errors */
	struct simhash_token_sink partial = {count_word, NULL, count_end};
	assert_int_equal(simhash_tokens(t, 3, NULL, &c), -EINVAL);
	assert_int_equal(simhash_tokens(t, 3, &partial, &c), -EINVAL);
	assert_int_equal(simhash_tokens(NULL, 3, &sink, &c), -EINVAL);
	assert_int_equal(simhash_tokens(NULL, 0, &sink, &c), 0);
}

/* ---- errors ---- */

static void test_errors(void **state)
{
	(void)state;
	struct minhash_sketch m = sketch_of("some text of a few words here");
	double r = 5;
	assert_int_equal(minhash_of_text(NULL, 3, &m), -EINVAL);
	assert_int_equal(minhash_of_text("x", 1, NULL), -EINVAL);
	assert_int_equal(minhash_of_page(NULL, 3, &m), -EINVAL);
	assert_int_equal(minhash_of_page("x", 1, NULL), -EINVAL);
	assert_int_equal(minhash_of_page(NULL, 0, &m), 0);
	assert_true(all_zero(m.bytes));
	m = sketch_of("some text of a few words here");
	assert_int_equal(minhash_resemblance(NULL, m.bytes, &r), -EINVAL);
	assert_int_equal(minhash_resemblance(m.bytes, NULL, &r), -EINVAL);
	assert_int_equal(minhash_resemblance(m.bytes, m.bytes, NULL), -EINVAL);
	assert_false(minhash_near(NULL, m.bytes));
	assert_false(minhash_near(m.bytes, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identical),
		cmocka_unit_test(test_disjoint),
		cmocka_unit_test(test_known_overlap),
		cmocka_unit_test(test_determinism),
		cmocka_unit_test(test_empty_and_short),
		cmocka_unit_test(test_pages),
		cmocka_unit_test(test_tokens),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
