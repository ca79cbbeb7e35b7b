/* test_ndelta_window.c - the delta step's window (ndelta.h, blob.h): a
 * page that shares its markup with the pages written before it but not
 * its text (no near neighbour: the simhash and the shingle sets see only
 * the text) is stored as a delta on one of them, and only with the window;
 * a chain of such pages stays within BLOB_DELTA_DEPTH; every page reads
 * back and fsck is clean. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "archive/archive.h"
#include "blob/blob.h"
#include "helpers.h"
#include "near/ndelta.h"
#include "near/sigq.h"

/* Page i of a site: the site's style sheet (the same in every page, and
 * of no text), then a text of its own. */
static char *site_page(unsigned i)
{
	char *text = th_page(100 + i, 120, "");
	size_t cap = strlen(text) + 64 * 200 + 64, n = 0;
	char *p = malloc(cap);
	assert_non_null(p);
	n += (size_t)sprintf(p, "<html><head><style>");
	uint64_t s = 7;
	for (int r = 0; r < 200; r++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		n += (size_t)sprintf(p + n, ".c%d{margin:%upx;color:#%06x}", r, (unsigned)(s >> 59),
				     (unsigned)(s >> 40) & 0xffffff);
	}
	sprintf(p + n, "</style></head>%s", text + strlen("<html>"));
	free(text);
	return p;
}

/* N pages of one site written into a store opened with o, signed, then
 * given their records by the delta step; how many became deltas, and how
 * deep the deepest is. */
struct site {
	char *page[16];
	uint64_t ino[16];
	unsigned n, deltas, deepest;
	uint64_t window; /* the step's count of deltas on the window */
};

static struct store *write_site(const char *dir, struct store_opts *o, struct site *s, unsigned n)
{
	struct store *st = th_store(dir, NULL, o);
	s->n = n;
	for (unsigned i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof name, "p%u.html", i);
		s->page[i] = site_page(i);
		s->ino[i] = th_put_page(st, PD_ROOT_INO, name, s->page[i]);
	}
	assert_int_equal(sigq_drain(st), 0);
	sigq_drain_deltas(st);
	struct sigq_counts c;
	sigq_counts(st, &c);
	s->window = c.delta.window;
	s->deltas = s->deepest = 0;
	for (unsigned i = 0; i < n; i++) {
		struct blobkey k = th_blob_of(st, s->ino[i]), base;
		int d = th_delta_of(st, &k, &base);
		assert_true(d == 0 || d == 1);
		if (d) {
			/* on a page written before it */
			bool earlier = false;
			for (unsigned j = 0; j < i; j++) {
				struct blobkey kj = th_blob_of(st, s->ino[j]);
				earlier |= blobkey_equal(&base, &kj);
			}
			assert_true(earlier);
		}
		unsigned depth = th_depth_of(st, &k);
		s->deltas += (unsigned)d;
		s->deepest = depth > s->deepest ? depth : s->deepest;
		th_read_back(st, s->ino[i], s->page[i]);
	}
	return st;
}

static void free_site(struct site *s)
{
	for (unsigned i = 0; i < s->n; i++)
		free(s->page[i]);
}

static void test_template_sibling_becomes_delta(void **state)
{
	(void)state;
	/* no near neighbours: the texts share nothing */
	char *a = site_page(0), *b = site_page(1);
	assert_string_equal(th_page_res(a, b), "0.000");
	free(a);
	free(b);
	char *dir = th_tmpdir();
	struct store_opts o = { .nursery = true, .no_sign_thread = true, .no_delta_thread = true };
	struct site s;
	struct store *st = write_site(dir, &o, &s, 4);
	assert_int_equal(s.deltas, 3); /* every page after the first */
	assert_int_equal(s.window, 3);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_site(&s);
	th_rmdir(dir);

	/* without the window, each stays whole */
	dir = th_tmpdir();
	o.delta_window = -1;
	st = write_site(dir, &o, &s, 4);
	assert_int_equal(s.deltas, 0);
	assert_int_equal(s.window, 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_site(&s);
	th_rmdir(dir);
}

/* More pages than the chains may hold: the depth rule stops each chain at
 * BLOB_DELTA_DEPTH, and a page past it takes a shallower base in the
 * window or stays whole. */
static void test_window_chains_bounded(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .nursery = true, .no_sign_thread = true, .no_delta_thread = true, .delta_window = 1 };
	struct site s;
	struct store *st = write_site(dir, &o, &s, 12);
	assert_int_equal(s.deepest, BLOB_DELTA_DEPTH); /* reached, not passed */
	/* with one page in the window, each chain is the pages one after
	 * another: a whole page, then BLOB_DELTA_DEPTH deltas, then whole
	 * again (12 pages: 0-4, 5-9, 10-11) */
	assert_int_equal(s.deltas, 12 - (12 + BLOB_DELTA_DEPTH) / (BLOB_DELTA_DEPTH + 1));
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_site(&s);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_template_sibling_becomes_delta),
		cmocka_unit_test(test_window_chains_bounded),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
