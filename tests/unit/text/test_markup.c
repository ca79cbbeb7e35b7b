/* test_markup.c - the markup simhash (text/markup.h): pages of one
 * template with different texts get the same simhash, pages of two
 * templates far ones; a tag that repeats counts once, end tags, comments
 * and the bodies of scripts and styles not at all; a page with no tag
 * gets 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "text/markup.h"

static uint64_t of(const char *s)
{
	return markup_simhash(s, strlen(s));
}

static unsigned dist(uint64_t a, uint64_t b)
{
	return (unsigned)__builtin_popcountll(a ^ b);
}

/* A page of template t (its boxes' classes) with text `text`. */
static char *page(unsigned t, const char *text)
{
	size_t cap = 80 * 40 + strlen(text) + 64, n = 0;
	char *p = malloc(cap);
	assert_non_null(p);
	n += (size_t)sprintf(p, "<html><body>");
	for (int i = 0; i < 40; i++)
		n += (size_t)sprintf(p + n, "<div class=\"t%u-box%d\">%s</div>", t, i, i == 20 ? text : "");
	sprintf(p + n, "</body></html>");
	return p;
}

static void test_templates(void **state)
{
	(void)state;
	char *a1 = page(1, "the first text of the site"), *a2 = page(1, "a quite different text, longer than that");
	char *b1 = page(2, "the first text of the site");
	assert_int_equal(of(a1), of(a2)); /* the text is not markup */
	assert_true(dist(of(a1), of(b1)) >= 16);
	free(a1);
	free(a2);
	free(b1);
}

static void test_what_counts(void **state)
{
	(void)state;
	uint64_t base = of("<html><body><ul><li class=\"x\">a</ul></body></html>");
	assert_int_not_equal(base, 0);
	/* a repeated tag once, end tags never */
	assert_int_equal(of("<html><body><ul><li class=\"x\">a<li class=\"x\">b<li class=\"x\">c</li></ul></body></html>"),
			 base);
	/* comments and the bodies of scripts and styles are not tags */
	assert_int_equal(of("<html><body><!-- <p class=\"y\"> --><ul><li class=\"x\">a</ul></body></html>"), base);
	uint64_t s = of("<html><body><script>if (a<b) x();</script><ul><li class=\"x\">a</ul></body></html>");
	assert_int_equal(s, of("<html><body><script>if (c<d && e>f) g();</script><ul><li class=\"x\">a</ul></body></html>"));
	/* a tag more does count */
	assert_int_not_equal(of("<html><body><ul><li class=\"x\">a<li class=\"z\">b</ul></body></html>"), base);
	/* no tag: 0; a tag left open at the end: not counted */
	assert_int_equal(of("just some text, no markup at all"), 0);
	assert_int_equal(of(""), 0);
	assert_int_equal(of("<html><body><ul><li class=\"x\">a</ul></body></html><p class=\"unclosed"), base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_templates),
		cmocka_unit_test(test_what_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
