/* test_ndelta_window.c - the delta step's window (ndelta.h, blob.h): a
 * page that shares its markup with the pages written before it but not
 * its text (no near neighbour: the simhash and the shingle sets see only
 * the text) is stored as a delta on one of them, and only with the window;
 * a chain of such pages stays within BLOB_DELTA_DEPTH; pages of two sites
 * written in turn each find their own site's by the markup; every page
 * reads back and fsck is clean. */
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

/* Page i of site `site`: the site's style sheet and its layout of empty
 * boxes (the same in every page of the site, and of no text), then a
 * text of its own. */
static char *site_page_of(unsigned site, unsigned i)
{
	char *text = th_page(100 + 50 * site + i, 120, "");
	size_t cap = strlen(text) + 64 * 200 + 64 * 60 + 64, n = 0;
	char *p = malloc(cap);
	assert_non_null(p);
	n += (size_t)sprintf(p, "<html><head><style>");
	uint64_t s = 7 + site;
	for (int r = 0; r < 200; r++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		n += (size_t)sprintf(p + n, ".c%d{margin:%upx;color:#%06x}", r, (unsigned)(s >> 59),
				     (unsigned)(s >> 40) & 0xffffff);
	}
	n += (size_t)sprintf(p + n, "</style></head>");
	for (int r = 0; r < 60; r++)
		n += (size_t)sprintf(p + n, "<div class=\"s%u-box%d\"></div>", site, r);
	sprintf(p + n, "%s", text + strlen("<html>"));
	free(text);
	return p;
}

static char *site_page(unsigned i)
{
	return site_page_of(0, i);
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
	/* the window of 2, then the default (on), then none (-o
	 * delta_window=0: each page stays whole) */
	const int windows[] = { 2, 0, -1 };
	for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++) {
		struct store_opts o = { .nursery = true, .no_sign_thread = true, .no_delta_thread = true,
					.delta_window = windows[i] };
		struct site s;
		char *dir = th_tmpdir();
		struct store *st = write_site(dir, &o, &s, 4);
		unsigned want = windows[i] < 0 ? 0 : 3; /* every page after the first */
		assert_int_equal(s.deltas, want);
		assert_int_equal(s.window, want);
		assert_int_equal(store_close(st), 0);
		th_assert_fsck_clean(th_store_dir(dir));
		free_site(&s);
		th_rmdir(dir);
	}
}

/* More pages than a chain may hold: the depth rule stops each chain at
 * BLOB_DELTA_DEPTH, and a page past it takes a shallower base in the
 * window. */
static void test_window_chains_bounded(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .nursery = true, .no_sign_thread = true, .no_delta_thread = true, .delta_window = 1 };
	struct site s;
	struct store *st = write_site(dir, &o, &s, 12);
	assert_int_equal(s.deepest, BLOB_DELTA_DEPTH); /* reached, not passed */
	/* with one page tried, a page past a full chain is tried on a
	 * shallower page of the window (all have the same markup: the
	 * newest of them), so only the first page stays whole */
	assert_int_equal(s.deltas, 11);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_site(&s);
	th_rmdir(dir);
}

/* Two sites written in turn (a0 b0 a1 b1 ...), as a crawl of two hosts
 * writes them, with one page tried: the window picks the page of the
 * same site by its markup, not the one written just before, so every
 * page after each site's first is a delta on its own site's. */
static void test_interleaved_sites(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .nursery = true, .no_sign_thread = true, .no_delta_thread = true, .delta_window = 1 };
	struct store *st = th_store(dir, NULL, &o);
	enum { N = 6 };
	char *page[2][N];
	uint64_t ino[2][N];
	for (unsigned i = 0; i < N; i++)
		for (unsigned site = 0; site < 2; site++) {
			char name[32];
			snprintf(name, sizeof name, "s%u-p%u.html", site, i);
			page[site][i] = site_page_of(site, i);
			ino[site][i] = th_put_page(st, PD_ROOT_INO, name, page[site][i]);
		}
	assert_int_equal(sigq_drain(st), 0);
	sigq_drain_deltas(st);
	for (unsigned site = 0; site < 2; site++)
		for (unsigned i = 0; i < N; i++) {
			struct blobkey k = th_blob_of(st, ino[site][i]), base;
			int d = th_delta_of(st, &k, &base);
			assert_int_equal(d, i > 0);
			bool own = false;
			for (unsigned j = 0; d && j < i; j++) {
				struct blobkey kj = th_blob_of(st, ino[site][j]);
				own |= blobkey_equal(&base, &kj);
			}
			assert_true(!d || own);
			th_read_back(st, ino[site][i], page[site][i]);
			free(page[site][i]);
		}
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_template_sibling_becomes_delta),
		cmocka_unit_test(test_window_chains_bounded),
		cmocka_unit_test(test_interleaved_sites),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
