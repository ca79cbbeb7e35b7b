/* test_window.c - the window of a cold pass (blob_cold.c): a whole page is
 * also tried as a delta on the pages copied just before it, as git's pack
 * window. Pages that share a template with the pages before them become
 * deltas on them, each with its link row, no chain deeper than
 * BLOB_DELTA_DEPTH; every page reads back, fsck --deep is clean; a page
 * that deltas hang on stays whole in a later pass; a base whose last name
 * goes is kept for its deltas and they are stored whole again; the pass's
 * mark carries the window, and a pass of another window writes the pack
 * again; pages are taken in path order when the pass is given it; a delta
 * refused at the commit leaves its page where it was; a pass stopped by a
 * crash leaves a store that reads and checks clean; the window's deltas
 * keep their shingle sets as differences from their bases'. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "archive/archive.h"
#include "archive/query.h"
#include "blob/blob.h"
#include "helpers.h"
#include "near/ndelta.h"
#include "near/nearset.h"
#include "near/sigq.h"

enum { GROUPS = 12, PER = 4, N = GROUPS * PER };

struct site {
	char *body[N];
	uint64_t ino[N];
	struct blobkey k[N];
};

/* No delta step at close: the pages stay whole until the cold pass. */
static struct store *open_store(const char *dir, bool create)
{
	struct store_opts o = { .compact_share = -1, .delta_rule = NDELTA_RULE_OFF, .no_sign_thread = true };
	return create ? th_store(dir, NULL, &o) : th_reopen(dir, &o);
}

static char *concat(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *p = malloc(la + lb + 1);
	assert_non_null(p);
	memcpy(p, a, la);
	memcpy(p + la, b, lb + 1);
	return p;
}

/* GROUPS groups of PER pages, stored group after group: the pages of a
 * group share a template of 600 words, each has 120 words of its own, and
 * the groups share nothing but the vocabulary (which the dictionary
 * knows). */
static void write_site(struct store *st, struct site *s, uint64_t seed)
{
	char name[32];
	for (int g = 0; g < GROUPS; g++) {
		char *tmpl = th_page(seed * 1000 + (uint64_t)g, 600, "");
		for (int j = 0; j < PER; j++) {
			int i = g * PER + j;
			char *own = th_page(seed * 1000 + 500 + (uint64_t)i, 120, "");
			s->body[i] = concat(tmpl, own);
			free(own);
			snprintf(name, sizeof name, "g%02d-%d.html", g, j);
			s->ino[i] = th_put_page(st, PD_ROOT_INO, name, s->body[i]);
			s->k[i] = th_blob_of(st, s->ino[i]);
		}
		free(tmpl);
	}
}

/* The same pages stored group by group's turns: the first page of every
 * group, then the second of every group, ...: in the packs, the pages of
 * a group are GROUPS apart, beyond the window. */
static void write_site_interleaved(struct store *st, struct site *s, uint64_t seed)
{
	char name[32];
	char *tmpl[GROUPS];
	for (int g = 0; g < GROUPS; g++)
		tmpl[g] = th_page(seed * 1000 + (uint64_t)g, 600, "");
	for (int j = 0; j < PER; j++)
		for (int g = 0; g < GROUPS; g++) {
			int i = g * PER + j;
			char *own = th_page(seed * 1000 + 500 + (uint64_t)i, 120, "");
			s->body[i] = concat(tmpl[g], own);
			free(own);
			snprintf(name, sizeof name, "g%02d-%d.html", g, j);
			s->ino[i] = th_put_page(st, PD_ROOT_INO, name, s->body[i]);
			s->k[i] = th_blob_of(st, s->ino[i]);
		}
	for (int g = 0; g < GROUPS; g++)
		free(tmpl[g]);
}

/* Every group's first page loses its one name (its last reference). */
static void unlink_group_firsts(struct store *st)
{
	char name[32];
	for (int g = 0; g < GROUPS; g++) {
		uint64_t ino;
		bool gone;
		snprintf(name, sizeof name, "g%02d-0.html", g);
		assert_int_equal(ns_unlink(st, PD_ROOT_INO, name, &ino, &gone), 0);
		assert_true(gone);
	}
}

static void read_site(struct store *st, const struct site *s)
{
	for (int i = 0; i < N; i++)
		th_read_back(st, s->ino[i], s->body[i]);
}

static void free_site(struct site *s)
{
	for (int i = 0; i < N; i++)
		free(s->body[i]);
}

static struct blob_compact_cfg cfg_window(unsigned window)
{
	return (struct blob_compact_cfg){ .share = 1.0, .min_dead = 0, .every_pack = true,
					  .cold = { .level = 19, .deltas = true, .window = window } };
}

static bool linked(struct store *st, const struct blobkey *base, const struct blobkey *dep)
{
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	int rc = blob_delta_linked(txn, st, base, dep);
	store_read_end(st, txn);
	assert_true(rc >= 0);
	return rc == 1;
}

/* The index of the page whose key is k (-1: none of the site's). */
static int index_of(const struct site *s, const struct blobkey *k)
{
	for (int i = 0; i < N; i++)
		if (blobkey_equal(&s->k[i], k))
			return i;
	return -1;
}

/* Every delta is on one of the BLOB_COLD_WINDOW pages stored just before
 * it, linked, no deeper than the bound, and every page after a group's
 * first is a delta; returns how many deltas. */
static int check_window_deltas(struct store *st, const struct site *s)
{
	int deltas = 0;
	for (int i = 0; i < N; i++) {
		struct blobkey base;
		int is_delta = th_delta_of(st, &s->k[i], &base);
		if (i % PER)
			assert_int_equal(is_delta, 1);
		if (!is_delta)
			continue;
		int b = index_of(s, &base);
		assert_true(b >= 0 && b < i && i - b <= BLOB_COLD_WINDOW);
		assert_true(linked(st, &base, &s->k[i]));
		assert_true(th_depth_of(st, &s->k[i]) <= BLOB_DELTA_DEPTH);
		deltas++;
	}
	return deltas;
}

/* Does a delta hang on k? */
static bool has_deltas(struct store *st, const struct blobkey *k)
{
	MDB_txn *txn;
	struct blobkey dep;
	size_t n = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_delta_dependents(txn, st, k, &dep, 1, &n), 0);
	store_read_end(st, txn);
	return n > 0;
}

/* A pass without a window, then one with: the pages after each group's
 * first become deltas on their group, the live bytes fall, the stats
 * count them, and every page reads back, before and after a reopen, with
 * fsck --deep clean. */
static void test_window_makes_deltas(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct site s;
	write_site(st, &s, 7);
	struct blob_compact_cfg c = cfg_window(0);
	struct blob_compact_stats d;
	struct blob_pack_usage plain, windowed;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.records_window, 0);
	assert_int_equal(blob_pack_usage(st, &plain), 0);
	for (int i = 0; i < N; i++) {
		struct blobkey base;
		assert_int_equal(th_delta_of(st, &s.k[i], &base), 0);
	}

	c = cfg_window(BLOB_COLD_WINDOW);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.damaged, 0);
	assert_int_equal(blob_pack_usage(st, &windowed), 0);
	printf("# live bytes without a window %llu, with %llu; %llu pages made deltas\n",
	       (unsigned long long)plain.live, (unsigned long long)windowed.live,
	       (unsigned long long)d.records_window);
	int deltas = check_window_deltas(st, &s);
	assert_true(deltas >= GROUPS * (PER - 1));
	assert_int_equal(d.records_window, (uint64_t)deltas);
	assert_true(windowed.live * 10 < plain.live * 7); /* a template of 600 words in 720 */
	assert_int_equal(windowed.live_records, plain.live_records);
	struct blob_delta_usage du;
	assert_int_equal(blob_delta_usage(st, &du), 0);
	assert_int_equal(du.deltas, d.records_window);
	/* a snapshot of a row or a few: the walk goes on where it stopped */
	for (size_t batch = 1; batch <= 3; batch++) {
		struct blob_delta_usage b;
		assert_int_equal(blob_delta_usage_batched(st, batch, &b), 0);
		assert_memory_equal(&b, &du, sizeof b);
	}
	struct blob_compact_stats total;
	assert_int_equal(blob_compact_stats(st, &total), 0);
	assert_int_equal(total.records_window, d.records_window);
	read_site(st, &s);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir)); /* deep: every record decoded */
	st = open_store(dir, false);
	read_site(st, &s);
	assert_int_equal(store_close(st), 0);
	free_site(&s);
	th_rmdir(dir);
}

/* The mark carries the window: the same pass again leaves the packs as
 * they are; a pass of another window writes them again, where a page that
 * deltas hang on stays whole and the deltas stay deltas on their group. */
static void test_window_in_the_mark(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct site s;
	write_site(st, &s, 8);
	struct blob_compact_cfg c = cfg_window(BLOB_COLD_WINDOW);
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_true(d.records_window > 0);
	struct fprec r = th_fprec_of(st, s.ino[1]);
	struct pack_cold m;
	assert_int_equal(pack_cold_of(st->packs, r.pack, &m, NULL), 0);
	assert_int_equal(m.level, 19);
	assert_int_equal(m.window, BLOB_COLD_WINDOW);

	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_true(d.packs_cold_kept >= 1);
	assert_int_equal(d.records_moved, 0);

	bool hung[N];
	int was_delta[N], bases = 0;
	struct blobkey was_base[N];
	for (int i = 0; i < N; i++) {
		bases += hung[i] = has_deltas(st, &s.k[i]);
		was_delta[i] = th_delta_of(st, &s.k[i], &was_base[i]);
	}
	assert_true(bases > 0);
	c = cfg_window(2);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_cold_kept, 0);
	assert_true(d.records_moved >= N);
	for (int i = 0; i < N; i++) {
		struct blobkey b;
		int now = th_delta_of(st, &s.k[i], &b);
		if (was_delta[i]) { /* encoded again on the same base */
			assert_int_equal(now, 1);
			assert_true(blobkey_equal(&b, &was_base[i]));
		} else if (hung[i]) { /* deltas hang on it: it stays whole */
			assert_int_equal(now, 0);
		}
	}
	check_window_deltas(st, &s);
	r = th_fprec_of(st, s.ino[1]);
	assert_int_equal(pack_cold_of(st->packs, r.pack, &m, NULL), 0);
	assert_int_equal(m.window, 2);
	read_site(st, &s);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_site(&s);
	th_rmdir(dir);
}

/* Pages each one edit away from the page before it: the window chains
 * them (a delta on a page nearly the same passes the depth gate at every
 * depth), and no chain is deeper than BLOB_DELTA_DEPTH, which the chain
 * reaches. */
static void test_window_depth_bounded(void **state)
{
	(void)state;
	enum { CHAIN = 24 };
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	char *body[CHAIN], name[32];
	uint64_t ino[CHAIN];
	struct blobkey k[CHAIN];
	for (int i = 0; i < CHAIN; i++) {
		body[i] = i ? strdup(body[i - 1]) : th_page(9000, 1500, "");
		assert_non_null(body[i]);
		size_t at = 100 + (size_t)i * 311 % (strlen(body[i]) - 200);
		memcpy(body[i] + at, "EDIT", 4);
		body[i][at + 4] = (char)('a' + i % 26);
		snprintf(name, sizeof name, "c%02d.html", i);
		ino[i] = th_put_page(st, PD_ROOT_INO, name, body[i]);
		k[i] = th_blob_of(st, ino[i]);
	}
	struct blob_compact_cfg c = cfg_window(BLOB_COLD_WINDOW);
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	unsigned deepest = 0;
	for (int i = 0; i < CHAIN; i++) {
		unsigned depth = th_depth_of(st, &k[i]);
		assert_true(depth <= BLOB_DELTA_DEPTH);
		deepest = depth > deepest ? depth : deepest;
		th_read_back(st, ino[i], body[i]);
	}
	printf("# %llu pages made deltas, the deepest %u\n", (unsigned long long)d.records_window, deepest);
	assert_int_equal(deepest, BLOB_DELTA_DEPTH);
	assert_true(d.records_window >= CHAIN / 2);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	for (int i = 0; i < CHAIN; i++)
		free(body[i]);
	th_rmdir(dir);
}

/* A group's first page, which the window made a base, loses its last
 * name: it is kept for its deltas (they still read), then the deltas are
 * stored whole again (or on another base) and the kept base goes. */
static void test_window_base_goes(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct site s;
	write_site(st, &s, 9);
	struct blob_compact_cfg c = cfg_window(BLOB_COLD_WINDOW);
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	check_window_deltas(st, &s);
	unlink_group_firsts(st);
	struct blob_pack_usage u;
	assert_int_equal(blob_pack_usage(st, &u), 0);
	assert_true(u.kept >= 1); /* at least one first page has a delta on it */
	for (int i = 0; i < N; i++)
		if (i % PER)
			th_read_back(st, s.ino[i], s.body[i]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));

	st = open_store(dir, false);
	uint64_t moved;
	assert_int_equal(ndelta_rebase_kept(st, &moved), 0);
	assert_true(moved >= 1);
	assert_int_equal(blob_pack_usage(st, &u), 0);
	assert_int_equal(u.kept, 0);
	for (int i = 0; i < N; i++)
		if (i % PER)
			th_read_back(st, s.ino[i], s.body[i]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_site(&s);
	th_rmdir(dir);
}

/* Between the copies and their commit, every group's first page loses
 * its name: the window's deltas on them are refused at the commit. */
struct unlink_firsts {
	struct store *st;
	bool done;
};

static void unlink_firsts(void *ctx)
{
	struct unlink_firsts *u = ctx;
	if (!u->done)
		unlink_group_firsts(u->st);
	u->done = true;
}

/* A delta the window chose whose base went before the commit is refused
 * there: its page stays where it was, readable (its old record is not
 * given back with the moved ones), and fsck --deep is clean. */
static void test_window_delta_refused(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct site s;
	write_site(st, &s, 11);
	uint32_t pack_before[N];
	for (int i = 0; i < N; i++)
		pack_before[i] = th_fprec_of(st, s.ino[i]).pack;
	struct unlink_firsts u = { st, false };
	struct blob_compact_cfg c = cfg_window(BLOB_COLD_WINDOW);
	c.before_commit = unlink_firsts;
	c.ctx = &u;
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_true(u.done);
	int stayed = 0;
	for (int i = 0; i < N; i++) {
		if (i % PER == 0)
			continue;
		struct blobkey base;
		int was_first = th_delta_of(st, &s.k[i], &base) && index_of(&s, &base) % PER == 0;
		assert_false(was_first); /* no delta on a page gone */
		stayed += th_fprec_of(st, s.ino[i]).pack == pack_before[i];
		th_read_back(st, s.ino[i], s.body[i]);
	}
	printf("# %llu pages made deltas, %d refused and left where they were\n", (unsigned long long)d.records_window,
	       stayed);
	assert_true(stayed > 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	st = open_store(dir, false);
	for (int i = 0; i < N; i++)
		if (i % PER)
			th_read_back(st, s.ino[i], s.body[i]);
	assert_int_equal(store_close(st), 0);
	free_site(&s);
	th_rmdir(dir);
}

/* A pass with a window stopped at step as by a kill (PD_COMPACT_STOP):
 * after the copies, no delta is committed; after the first commit, its
 * deltas are; either way every page reads, fsck --deep is clean, and a
 * full pass after it too. */
static void crash_at(const char *step, bool committed)
{
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct site s;
	write_site(st, &s, 12);
	struct blob_compact_cfg c = cfg_window(BLOB_COLD_WINDOW);
	c.debug_stops = true;
	setenv("PD_COMPACT_STOP", step, 1);
	struct blob_compact_stats d = { 0 };
	int rc = blob_compact_run(st, &c, &d);
	unsetenv("PD_COMPACT_STOP");
	assert_int_equal(rc, -ECANCELED);
	store_abandon(st);
	st = open_store(dir, false);
	read_site(st, &s);
	int deltas = 0;
	for (int i = 0; i < N; i++) {
		struct blobkey b;
		deltas += th_delta_of(st, &s.k[i], &b);
	}
	printf("# stopped after %s: %d deltas committed\n", step, deltas);
	if (committed)
		assert_true(deltas > 0);
	else
		assert_int_equal(deltas, 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	st = open_store(dir, false);
	c = cfg_window(BLOB_COLD_WINDOW);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	read_site(st, &s);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_site(&s);
	th_rmdir(dir);
}

static void test_window_crash_after_copies(void **state)
{
	(void)state;
	crash_at("copied", false);
}

static void test_window_crash_after_commit(void **state)
{
	(void)state;
	crash_at("committed", true);
}

static int page_path(void *ctx, const struct blobkey *k, char *buf, size_t size)
{
	return query_blob_path(ctx, k, buf, size);
}

/* How many pages of the site are deltas on a page of their own group. */
static int own_group_deltas(struct store *st, const struct site *s)
{
	int n = 0;
	for (int i = 0; i < N; i++) {
		struct blobkey base;
		if (th_delta_of(st, &s->k[i], &base)) {
			int b = index_of(s, &base);
			n += b >= 0 && b / PER == i / PER;
		}
	}
	return n;
}

/* Pages stored with a group's pages GROUPS apart: in the packs' order the
 * window never sees two of a group together; in the order of their paths
 * (cfg.page_key, as `compact --all` gives) every page after a group's
 * first is a delta on its group. */
static void test_window_in_path_order(void **state)
{
	(void)state;
	int own[2];
	for (int keyed = 0; keyed < 2; keyed++) {
		char *dir = th_tmpdir();
		struct store *st = open_store(dir, true);
		struct site s;
		write_site_interleaved(st, &s, 10);
		struct blob_compact_cfg c = cfg_window(BLOB_COLD_WINDOW);
		if (keyed) {
			c.page_key = page_path;
			c.key_ctx = st;
		}
		struct blob_compact_stats d;
		assert_int_equal(blob_compact_run(st, &c, &d), 0);
		own[keyed] = own_group_deltas(st, &s);
		printf("# %s: %llu pages made deltas, %d of them on their own group\n",
		       keyed ? "path order" : "the packs' order", (unsigned long long)d.records_window, own[keyed]);
		read_site(st, &s);
		assert_int_equal(store_close(st), 0);
		th_assert_fsck_clean(th_store_dir(dir));
		free_site(&s);
		th_rmdir(dir);
	}
	assert_int_equal(own[0], 0);
	assert_int_equal(own[1], GROUPS * (PER - 1));
}

/* A page the window makes a delta keeps its shingle set as the difference
 * from its base's, as the delta step's deltas do (near.h): shorter rows,
 * the same sets, the same near answers; fsck is clean; when the groups'
 * first pages go, the sets kept as differences from theirs are written
 * whole, and every set left still gives its page's. */
static void test_window_sets_as_differences(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct site s;
	write_site(st, &s, 11);
	assert_int_equal(sigq_drain(st), 0);
	size_t whole[N];
	char *answer[N];
	for (int i = 0; i < N; i++) {
		assert_int_equal(th_set_row_format(st, &s.k[i], &whole[i]), NEARSET_FORMAT);
		answer[i] = th_near_answer(st, s.ino[i]);
	}
	struct blob_compact_cfg c = cfg_window(BLOB_COLD_WINDOW);
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(check_window_deltas(st, &s), (int)d.records_window);
	size_t rows = 0, diff_rows = 0;
	for (int i = 0; i < N; i++) {
		struct blobkey base;
		size_t len;
		int f = th_set_row_format(st, &s.k[i], &len);
		bool delta = th_delta_of(st, &s.k[i], &base) == 1;
		if (!delta)
			assert_int_equal(f, NEARSET_FORMAT);
		else if (index_of(&s, &base) / PER == i / PER || f != NEARSET_FORMAT)
			/* a delta on its own group; one on another group (a
			 * first page's, sharing the vocabulary alone) may stay whole */
			assert_true(f == NEARSET_DIFF_FORMAT && len < whole[i]);
		rows += whole[i];
		diff_rows += len;
		th_assert_set_of_page(st, &s.k[i], s.body[i]);
		char *now = th_near_answer(st, s.ino[i]);
		assert_string_equal(now, answer[i]);
		free(now);
	}
	printf("# %llu pages made deltas; their sets' rows %zu bytes in all, %zu whole\n",
	       (unsigned long long)d.records_window, diff_rows, rows);
	read_site(st, &s);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));

	st = open_store(dir, false);
	unlink_group_firsts(st);
	for (int i = 0; i < N; i++) {
		struct blobkey base;
		int f = th_set_row_format(st, &s.k[i], NULL);
		if (i % PER == 0) {
			assert_int_equal(f, 0); /* its last name went, and its set */
			continue;
		}
		th_assert_set_of_page(st, &s.k[i], s.body[i]);
		if (th_delta_of(st, &s.k[i], &base) == 1 && index_of(&s, &base) % PER == 0)
			assert_int_equal(f, NEARSET_FORMAT); /* on a first page: written whole */
		th_read_back(st, s.ino[i], s.body[i]);
	}
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	for (int i = 0; i < N; i++)
		free(answer[i]);
	free_site(&s);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_makes_deltas),
		cmocka_unit_test(test_window_in_the_mark),
		cmocka_unit_test(test_window_depth_bounded),
		cmocka_unit_test(test_window_base_goes),
		cmocka_unit_test(test_window_in_path_order),
		cmocka_unit_test(test_window_sets_as_differences),
		cmocka_unit_test(test_window_delta_refused),
		cmocka_unit_test(test_window_crash_after_copies),
		cmocka_unit_test(test_window_crash_after_commit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
