/* test_gfilter.c - the page filter that grows (gfilter.h, store_filter.c):
 * routing and the batch journal in memory; in a store, splits whose every
 * counter matches the stored positions (deletes and saturated counters
 * included), no false negative during or after a split, a batch that aborts
 * mid-split, a crash mid-split, a store of the fixed filter opened and
 * migrated, and seals that go on while splits run. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "archive/archive.h"
#include "blob/blob.h"
#include "base/fp.h"
#include "helpers.h"

/* ---- in memory: routing, journal, a whole split ---- */

struct mkey {
	uint8_t md5[16];
	uint32_t leaf;
	struct cbf_pos pos;
	bool live;
};

static void key_of(unsigned i, uint8_t md5[16])
{
	char s[32];
	struct fp fp;
	snprintf(s, sizeof s, "key %u", i);
	fp_of_buf(s, strlen(s), &fp);
	memcpy(md5, fp.md5, 16);
}

static int md5_cmp(const void *a, const void *b)
{
	return memcmp(((const struct mkey *)a)->md5, ((const struct mkey *)b)->md5, 16);
}

/* Every counter of every leaf, leaf after leaf in id order. */
static uint8_t *mem_snapshot(struct gfilter *gf, size_t *n)
{
	struct gf_tree t;
	assert_int_equal(gf_tree_get(gf, &t), 0);
	size_t total = 0;
	for (uint32_t i = 0; i < t.n; i++)
		total += t.leaf[i].g.nlines * CBF_LINE_COUNTERS;
	uint8_t *s = malloc(total + 1), *p = s;
	assert_non_null(s);
	for (uint32_t id = 0; id < t.next_id; id++) {
		const struct cbf *f = gf_leaf(gf, id);
		for (uint64_t c = 0; f && c < cbf_geometry(f)->nlines * CBF_LINE_COUNTERS; c++)
			*p++ = (uint8_t)cbf_get(f, c);
	}
	*n = (size_t)(p - s);
	gf_tree_free(&t);
	return s;
}

static size_t tree_bytes(struct gfilter *gf, uint8_t **out)
{
	struct gf_tree t;
	assert_int_equal(gf_tree_get(gf, &t), 0);
	size_t n = gf_tree_size(&t);
	*out = malloc(n);
	assert_non_null(*out);
	gf_tree_encode(&t, *out);
	gf_tree_free(&t);
	return n;
}

/* The batch lookup answers key for key as the single one does, for the
 * stored keys k (all "maybe") and as many never stored: whichever way it
 * routes (through the table, or the long way for a splitting leaf). */
static void batch_agrees(const struct gfilter *gf, const struct mkey *k, unsigned n)
{
	unsigned total = n + 3000;
	uint8_t *keys = malloc(16 * (size_t)total);
	bool *res = malloc(total);
	assert_non_null(keys);
	assert_non_null(res);
	for (unsigned i = 0; i < total; i++) {
		if (i < n)
			memcpy(keys + 16 * i, k[i].md5, 16);
		else
			key_of(1000000 + i, keys + 16 * i);
	}
	size_t hits = gf_maybe_contains_batch(gf, keys, total, res), want = 0;
	for (unsigned i = 0; i < total; i++) {
		bool one = gf_maybe_contains(gf, keys + 16 * i);
		assert_int_equal(res[i], one);
		if (i < n && k[i].live)
			assert_true(res[i]);
		want += one;
	}
	assert_int_equal(hits, want);
	assert_true(want < total); /* some answers are "no" */
	free(keys);
	free(res);
}

static void test_memory_split_and_rollback(void **state)
{
	(void)state;
	enum { N = 600 };
	struct gf_config c;
	gf_config_default(&c, 0.01, 2);
	c.max_leaf_lines = 4; /* children split in several ways */
	struct cbf_geometry g;
	assert_int_equal(cbf_geometry_for(100, 0.01, 2, &g), 0);
	struct gf_tree t;
	assert_int_equal(gf_tree_single(&c, &g, &t), 0);
	struct gfilter *gf;
	assert_int_equal(gf_open(NULL, &t, GF_MEMORY, &gf, NULL), 0);
	gf_tree_free(&t);
	struct mkey *k = calloc(N + 10, sizeof *k);
	assert_non_null(k);
	for (unsigned i = 0; i < N; i++) {
		key_of(i, k[i].md5);
		assert_int_equal(gf_insert(gf, k[i].md5, NULL, NULL, &k[i].leaf, &k[i].pos), 0);
		k[i].live = true;
	}
	assert_true(gf_commit(gf)); /* 600 keys on a leaf made for 100: a split is due */
	assert_true(gf_split_wanted(gf));
	qsort(k, N, sizeof *k, md5_cmp);

	/* A batch that starts the split, moves half the keys, adds and removes
	 * some, then aborts: every counter and the tree as before. */
	size_t n0, n1, tb0, tb1;
	uint8_t *before = mem_snapshot(gf, &n0), *tree0, *tree1;
	tb0 = tree_bytes(gf, &tree0);
	struct gf_split s;
	assert_int_equal(gf_split_next(gf, &s), 0);
	assert_int_equal(s.leaf, 0);
	for (unsigned i = 0; i < N / 2; i++) {
		uint32_t leaf;
		struct cbf_pos pos;
		assert_int_equal(gf_split_move(gf, 0, k[i].md5, &k[i].pos, NULL, NULL, &leaf, &pos), 0);
		assert_true(leaf != 0);
	}
	gf_split_advance(gf, 0, k[N / 2 - 1].md5);
	uint8_t extra[16];
	uint32_t xl;
	struct cbf_pos xp;
	key_of(N + 1, extra);
	assert_int_equal(gf_insert(gf, extra, NULL, NULL, &xl, &xp), 0);
	gf_rollback(gf);
	uint8_t *after = mem_snapshot(gf, &n1);
	tb1 = tree_bytes(gf, &tree1);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, after, n0);
	assert_int_equal(tb0, tb1);
	assert_memory_equal(tree0, tree1, tb0);
	free(after);
	free(tree1);

	/* The split for real, in three batches, lookups checked in between:
	 * keys at or below the cursor answer from the children, the rest from
	 * the leaf. */
	struct gf_stats st0;
	gf_stats(gf, false, &st0);
	assert_int_equal(st0.leaves, 1);
	assert_int_equal(gf_split_next(gf, &s), 0);
	for (unsigned part = 0; part < 3; part++) {
		unsigned from = part * N / 3, to = (part + 1) * N / 3;
		for (unsigned i = from; i < to; i++) {
			struct cbf_pos old = k[i].pos;
			assert_int_equal(gf_split_move(gf, 0, k[i].md5, &old, NULL, NULL, &k[i].leaf,
						       &k[i].pos), 0);
		}
		if (part < 2)
			gf_split_advance(gf, 0, k[to - 1].md5);
		else
			assert_int_equal(gf_split_finish(gf, 0), 0);
		gf_commit(gf);
		for (unsigned i = 0; i < N; i++) {
			struct gf_route r;
			gf_route(gf, k[i].md5, &r);
			assert_int_equal(r.leaf, k[i].leaf);
			assert_true(gf_maybe_contains(gf, k[i].md5));
		}
		batch_agrees(gf, k, N);
	}
	struct gf_stats st1;
	gf_stats(gf, false, &st1);
	assert_true(st1.leaves > 1);
	assert_int_equal(st1.keys, N);
	assert_null(gf_leaf(gf, 0)); /* the split leaf is gone */
	/* removing every key brings every counter back to zero */
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(gf_remove(gf, k[i].leaf, &k[i].pos, NULL, NULL), 0);
	gf_commit(gf);
	size_t nz;
	uint8_t *zero = mem_snapshot(gf, &nz);
	for (size_t i = 0; i < nz; i++)
		assert_int_equal(zero[i], 0);
	bool res[N];
	uint8_t *keys = malloc(16 * N);
	for (unsigned i = 0; i < N; i++)
		memcpy(keys + 16 * i, k[i].md5, 16);
	assert_int_equal(gf_maybe_contains_batch(gf, keys, N, res), 0);
	free(keys);
	free(zero);
	free(before);
	free(tree0);
	free(k);
	gf_close(gf);
}

/* Many leaves of one shape (a new store's tree), one of them splitting:
 * the batch lookup routes through the table for the others and the long
 * way for that one (keys on both sides of its cursor), then through the
 * table to its children. */
static void test_batch_lookup_routes(void **state)
{
	(void)state;
	enum { N = 4000 };
	struct gf_config c;
	gf_config_default(&c, 0.01, 2);
	c.max_leaf_lines = 8;
	struct gf_tree t;
	assert_int_equal(gf_tree_initial(&c, 2000, &t), 0);
	assert_true(t.n >= 4);
	struct gfilter *gf;
	assert_int_equal(gf_open(NULL, &t, GF_MEMORY, &gf, NULL), 0);
	gf_tree_free(&t);
	struct mkey *k = calloc(N, sizeof *k);
	assert_non_null(k);
	for (unsigned i = 0; i < N; i++) {
		key_of(i, k[i].md5);
		assert_int_equal(gf_insert(gf, k[i].md5, NULL, NULL, &k[i].leaf, &k[i].pos), 0);
		k[i].live = true;
	}
	assert_true(gf_commit(gf));
	batch_agrees(gf, k, N);

	struct gf_split s;
	assert_int_equal(gf_split_next(gf, &s), 0);
	qsort(k, N, sizeof *k, md5_cmp);
	unsigned first = N, last = 0;
	for (unsigned i = 0; i < N; i++) {
		if (k[i].leaf == s.leaf) {
			first = i < first ? i : first;
			last = i;
		}
	}
	assert_true(first < last);
	unsigned half = first + (last - first) / 2;
	for (unsigned i = first; i <= half; i++) {
		struct cbf_pos old = k[i].pos;
		assert_int_equal(gf_split_move(gf, s.leaf, k[i].md5, &old, NULL, NULL, &k[i].leaf,
					       &k[i].pos), 0);
	}
	gf_split_advance(gf, s.leaf, k[half].md5);
	gf_commit(gf);
	batch_agrees(gf, k, N);
	for (unsigned i = half + 1; i <= last; i++) {
		struct cbf_pos old = k[i].pos;
		assert_int_equal(gf_split_move(gf, s.leaf, k[i].md5, &old, NULL, NULL, &k[i].leaf,
					       &k[i].pos), 0);
	}
	assert_int_equal(gf_split_finish(gf, s.leaf), 0);
	gf_commit(gf);
	assert_null(gf_leaf(gf, s.leaf));
	batch_agrees(gf, k, N);
	free(k);
	gf_close(gf);
}

/* ---- stores ---- */

/* Every counter of every leaf equals the number of stored positions on it
 * (capped at 15, with the exact count in `saturated` past that), every
 * record is on the leaf its MD5 is routed to, and every leaf's key count
 * is right. Returns the number of saturated counters. */
static uint64_t check_counts(struct store *st)
{
	struct gf_tree t;
	assert_int_equal(gf_tree_get(st->gf, &t), 0);
	uint32_t **tally = calloc(t.next_id, sizeof *tally);
	uint64_t *keys = calloc(t.next_id, sizeof *keys);
	assert_non_null(tally);
	assert_non_null(keys);
	for (uint32_t i = 0; i < t.n; i++) {
		tally[t.leaf[i].id] = calloc(t.leaf[i].g.nlines * CBF_LINE_COUNTERS, sizeof **tally);
		assert_non_null(tally[t.leaf[i].id]);
	}
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val k, v;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(mdb_cursor_open(txn, st->db_fp, &c), 0);
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct fprec r;
		assert_int_equal(fprec_decode(v.mv_data, v.mv_size, &r), 0);
		if (!(r.flags & FPREC_IN_FILTER))
			continue;
		assert_true(r.leaf < t.next_id && tally[r.leaf]);
		struct gf_route route;
		gf_route(st->gf, k.mv_data, &route);
		assert_int_equal(route.leaf, r.leaf);
		keys[r.leaf]++;
		for (unsigned j = 0; j < r.pos.k; j++)
			tally[r.leaf][cbf_pos_counter(&r.pos, j)]++;
	}
	mdb_cursor_close(c);
	uint64_t saturated = 0;
	for (uint32_t i = 0; i < t.n; i++) {
		uint32_t id = t.leaf[i].id;
		const struct cbf *f = gf_leaf(st->gf, id);
		assert_non_null(f);
		assert_int_equal(t.leaf[i].keys, keys[id]);
		for (uint64_t idx = 0; idx < t.leaf[i].g.nlines * CBF_LINE_COUNTERS; idx++) {
			uint32_t want = tally[id][idx];
			assert_int_equal(cbf_get(f, idx), want < 15 ? want : 15);
			uint8_t kb[8];
			put_be64(kb, GF_EXACT_INDEX(id, idx));
			MDB_val sk = { 8, kb }, sv;
			int rc = mdb_get(txn, st->db_saturated, &sk, &sv);
			if (want < 15) {
				assert_int_equal(rc, MDB_NOTFOUND);
				continue;
			}
			assert_int_equal(rc, 0);
			assert_int_equal(get_le64(sv.mv_data), want);
			saturated++;
		}
	}
	MDB_stat ms;
	mdb_stat(txn, st->db_saturated, &ms);
	assert_int_equal(ms.ms_entries, saturated); /* no entry for a counter of no leaf */
	store_read_end(st, txn);
	for (uint32_t i = 0; i < t.next_id; i++)
		free(tally[i]);
	free(tally);
	free(keys);
	gf_tree_free(&t);
	return saturated;
}

static void body_of(unsigned content, char *buf, size_t n)
{
	snprintf(buf, n, "<html>page body %u</html>", content);
}

/* Every content in [0, n) whose page is alive answers "maybe". */
static void check_no_false_negative(struct store *st, const bool *alive, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (!alive[i])
			continue;
		char body[64];
		struct fp fp;
		body_of(i, body, sizeof body);
		fp_of_buf(body, strlen(body), &fp);
		assert_true(gf_maybe_contains(st->gf, fp.md5));
	}
}

static void put_page(struct store *st, unsigned name, unsigned content)
{
	char n[32], body[64];
	snprintf(n, sizeof n, "p%u", name);
	body_of(content, body, sizeof body);
	th_put(st, PD_ROOT_INO, n, body, strlen(body));
}

static void drop_page(struct store *st, unsigned name)
{
	char n[32];
	uint64_t ino;
	bool gone;
	snprintf(n, sizeof n, "p%u", name);
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, n, &ino, &gone), 0);
}

static void small_params(struct store_params *p)
{
	store_params_default(p);
	p->expected_pages = 16;
	p->filter_fpr = 0.01;
	p->filter_leaf_lines = 4; /* 256-byte leaves: splits go several ways */
}

static unsigned leaf_files(const char *store)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/filter.d", store);
	DIR *d = opendir(path);
	unsigned n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* Counters saturate on the fixed leaf first (no split thread), then the
 * split moves them; deletes come between the steps. */
static void test_split_counts(void **state)
{
	(void)state;
	enum { PAGES = 700 };
	char *dir = th_tmpdir();
	struct store_params p;
	small_params(&p);
	struct store_opts o = { .no_split_thread = true, .split_chunk = 40 };
	struct store *st = th_store(dir, &p, &o);
	bool alive[PAGES] = { false };
	for (unsigned i = 0; i < PAGES; i++) {
		put_page(st, i, i);
		alive[i] = true;
	}
	for (unsigned i = 0; i < 100; i++) /* duplicates: refcounts, not positions */
		put_page(st, PAGES + i, i);
	for (unsigned i = 0; i < PAGES; i += 5) {
		drop_page(st, i);
		alive[i] = false;
	}
	assert_true(check_counts(st) > 0); /* the test needs saturated counters */
	unsigned steps = 0;
	bool idle = false;
	while (!idle) {
		assert_int_equal(store_filter_step(st, &idle), 0);
		steps++;
		/* deletes and new pages between the chunks of a split */
		if (steps % 3 == 0) {
			unsigned i = 1 + 5 * steps % (PAGES - 1);
			if (alive[i] && i >= 100) {
				drop_page(st, i);
				alive[i] = false;
			}
		}
		check_counts(st);
		check_no_false_negative(st, alive, PAGES);
	}
	assert_true(steps > 5); /* the split went in several chunks */
	struct gf_stats gs;
	gf_stats(st->gf, false, &gs);
	assert_true(gs.leaves > 1);
	assert_true(gs.max_depth >= 1);
	assert_false(gs.splitting);
	/* a duplicate of a stored page is found through its new leaf */
	put_page(st, 5000, 1);
	struct inode in;
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, "p5000", &in), 0);
	assert_int_equal(th_refcount(st, in.ino), 3);
	/* more pages and splits past the first */
	for (unsigned i = PAGES; i < PAGES + 300; i++)
		put_page(st, 6000 + i, 100000 + i);
	assert_int_equal(store_filter_settle(st), 0);
	check_counts(st);
	gf_stats(st->gf, false, &gs);
	assert_true(gs.worst_leaf_fpr <= p.filter_fpr * 2);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

static int fail_start_cb(struct wtx *w, void *arg)
{
	(void)arg;
	struct gf_split s;
	int rc = gf_split_next(w->st->gf, &s);
	assert_int_equal(rc, 0);
	uint8_t md5[16];
	uint32_t leaf;
	struct cbf_pos pos;
	key_of(424242, md5);
	assert_int_equal(gf_insert(w->st->gf, md5, &store_saturated_ops, w, &leaf, &pos), 0);
	memset(md5, 0xFF, 16);
	gf_split_advance(w->st->gf, s.leaf, md5);
	return -EIO;
}

static uint8_t *store_snapshot(struct store *st, size_t *n, uint8_t **tree, size_t *tn)
{
	*tn = tree_bytes(st->gf, tree);
	return mem_snapshot(st->gf, n);
}

/* A batch that aborts, once as it starts a split and once in the middle
 * of one, leaves every leaf, the tree and the leaf files as before. */
static void test_abort_mid_split(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_params p;
	small_params(&p);
	struct store_opts o = { .no_split_thread = true, .split_chunk = 30 };
	struct store *st = th_store(dir, &p, &o);
	for (unsigned i = 0; i < 300; i++)
		put_page(st, i, i);
	for (int round = 0; round < 2; round++) {
		if (round == 1) { /* a split in progress, cursor set */
			bool idle;
			assert_int_equal(store_filter_step(st, &idle), 0);
			assert_int_equal(store_filter_step(st, &idle), 0);
			assert_false(idle);
		}
		size_t n0, n1, t0, t1;
		uint8_t *tr0, *tr1;
		uint8_t *c0 = store_snapshot(st, &n0, &tr0, &t0);
		unsigned files = leaf_files(th_store_dir(dir));
		assert_int_equal(store_write(st, fail_start_cb, NULL), -EIO);
		uint8_t *c1 = store_snapshot(st, &n1, &tr1, &t1);
		assert_int_equal(n0, n1);
		assert_memory_equal(c0, c1, n0);
		assert_int_equal(t0, t1);
		assert_memory_equal(tr0, tr1, t0);
		assert_int_equal(leaf_files(th_store_dir(dir)), files);
		check_counts(st);
		free(c0);
		free(c1);
		free(tr0);
		free(tr1);
	}
	assert_int_equal(store_filter_settle(st), 0);
	check_counts(st);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* Killed in the middle of a split: the reopened store rebuilds the leaves
 * from the stored positions, resumes from the committed cursor and
 * finishes. */
static void test_crash_mid_split(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_params p;
	small_params(&p);
	struct store_opts o = { .no_split_thread = true, .split_chunk = 25 };
	struct store *st = th_store(dir, &p, &o);
	bool alive[400];
	for (unsigned i = 0; i < 400; i++) {
		put_page(st, i, i);
		alive[i] = true;
	}
	bool idle;
	for (int i = 0; i < 4; i++)
		assert_int_equal(store_filter_step(st, &idle), 0);
	assert_false(idle);
	struct gf_split s0;
	struct gf_tree t0;
	assert_int_equal(gf_tree_get(st->gf, &t0), 0);
	store_abandon(st);
	/* a leaf file no tree names (children of a batch that never
	 * committed): removed at the open */
	char stray[4200];
	snprintf(stray, sizeof stray, "%s/filter.d/leaf-999", th_store_dir(dir));
	FILE *sf = fopen(stray, "w");
	assert_non_null(sf);
	fclose(sf);
	char err[PD_ERRLEN];
	assert_int_equal(archive_open(th_store_dir(dir), &o, &st, err), 0);
	struct gf_stats gs;
	assert_int_equal(access(stray, F_OK), -1);
	gf_stats(st->gf, false, &gs);
	assert_true(gs.splitting); /* the split survived the crash */
	struct gf_tree t1;
	assert_int_equal(gf_tree_get(st->gf, &t1), 0);
	assert_int_equal(t0.n, t1.n);
	for (uint32_t i = 0; i < t0.n; i++) {
		assert_int_equal(t0.leaf[i].state, t1.leaf[i].state);
		assert_int_equal(t0.leaf[i].keys, t1.leaf[i].keys);
		assert_memory_equal(t0.leaf[i].cursor, t1.leaf[i].cursor, 16);
	}
	gf_tree_free(&t0);
	gf_tree_free(&t1);
	check_counts(st);
	check_no_false_negative(st, alive, 400);
	/* the split resumes past the committed cursor */
	assert_int_equal(gf_split_next(st->gf, &s0), 0);
	assert_true(s0.cursor_set);
	assert_int_equal(store_filter_settle(st), 0);
	check_counts(st);
	check_no_false_negative(st, alive, 400);
	gf_stats(st->gf, false, &gs);
	assert_false(gs.splitting);
	assert_true(gs.leaves > 1);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	/* and the clean close keeps it all */
	assert_int_equal(archive_open(th_store_dir(dir), &o, &st, err), 0);
	check_counts(st);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* Closed cleanly in the middle of a split: fsck checks every leaf,
 * children included, and the reopened store trusts the leaf files and
 * finishes the split. */
static void test_clean_close_mid_split(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_params p;
	small_params(&p);
	struct store_opts o = { .no_split_thread = true, .split_chunk = 25 };
	struct store *st = th_store(dir, &p, &o);
	for (unsigned i = 0; i < 300; i++)
		put_page(st, i, i);
	bool idle;
	for (int i = 0; i < 3; i++)
		assert_int_equal(store_filter_step(st, &idle), 0);
	assert_false(idle);
	size_t n0, n1;
	uint8_t *before = mem_snapshot(st->gf, &n0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	char err[PD_ERRLEN];
	assert_int_equal(archive_open(th_store_dir(dir), &o, &st, err), 0);
	uint8_t *after = mem_snapshot(st->gf, &n1);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, after, n0);
	struct gf_stats gs;
	gf_stats(st->gf, false, &gs);
	assert_true(gs.splitting);
	check_counts(st);
	assert_int_equal(store_filter_settle(st), 0);
	check_counts(st);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(before);
	free(after);
	th_rmdir(dir);
}

/* The layout the fixed filter wrote: no tree record (records without a
 * leaf id, saturated keys by counter index: as written on leaf 0). */
static void drop_tree_record(const char *store)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi meta, fp, bi;
	char path[4200];
	snprintf(path, sizeof path, "%s/meta", store);
	assert_int_equal(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 64);
	assert_int_equal(mdb_env_open(env, path, MDB_NOTLS, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
	assert_int_equal(mdb_dbi_open(txn, "fingerprints", 0, &fp), 0);
	assert_int_equal(mdb_dbi_open(txn, "blob_inodes", MDB_DUPSORT | MDB_DUPFIXED, &bi), 0);
	MDB_val k = { strlen("filter_tree"), "filter_tree" };
	assert_int_equal(mdb_del(txn, meta, &k, NULL), 0);
	/* every record as the fixed filter wrote it: no leaf, and in layout 1
	 * (rec.h): 44 bytes, lines, offsets (and the sketch, which has
	 * nothing to do with the filter) */
	MDB_cursor *c;
	MDB_val key, v;
	assert_int_equal(mdb_cursor_open(txn, fp, &c), 0);
	for (int rc = mdb_cursor_get(c, &key, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &key, &v, MDB_NEXT)) {
		struct fprec r;
		assert_int_equal(fprec_decode(v.mv_data, v.mv_size, &r), 0);
		assert_int_equal(r.leaf, 0);
		uint8_t kb[BLOBKEY_BYTES], vb[FPREC_MAX_BYTES];
		memcpy(kb, key.mv_data, BLOBKEY_BYTES); /* key points into the page the put changes */
		if (r.ino) { /* layout 1 has no room for it: in blob_inodes, as then */
			uint8_t ib[8];
			put_be64(ib, r.ino);
			MDB_val bk = { BLOBKEY_BYTES, kb }, bv = { 8, ib };
			assert_int_equal(mdb_put(txn, bi, &bk, &bv, 0), 0);
		}
		MDB_val nk = { BLOBKEY_BYTES, kb }, nv = { fprec_encode(&r, false, vb), vb };
		assert_int_equal(nv.mv_size, 44 + 4 * r.pos.nlines + r.pos.k + (r.flags & FPREC_HAS_SKETCH ? FPREC_SKETCH_BYTES : 0));
		assert_int_equal(mdb_cursor_put(c, &nk, &nv, MDB_CURRENT), 0);
	}
	mdb_cursor_close(c);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

static uint8_t *file_counters(const char *store, size_t *n)
{
	char path[4200];
	struct cbf *f;
	snprintf(path, sizeof path, "%s/filter", store);
	assert_int_equal(cbf_open(path, true, &f), 0);
	*n = cbf_geometry(f)->nlines * CBF_LINE_COUNTERS;
	uint8_t *s = malloc(*n);
	assert_non_null(s);
	for (size_t i = 0; i < *n; i++)
		s[i] = (uint8_t)cbf_get(f, i);
	cbf_close(f);
	return s;
}

static void test_migrate_fixed_store(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_params p;
	store_params_default(&p);
	p.expected_pages = 16;
	p.filter_fpr = 0.01;
	/* a store of that time: blob files, records without a pack place */
	struct store_opts o = { .no_split_thread = true, .blob_files = true };
	struct store *st = th_store(dir, &p, &o);
	bool alive[500];
	for (unsigned i = 0; i < 500; i++) {
		put_page(st, i, i);
		alive[i] = true;
	}
	for (unsigned i = 0; i < 500; i += 7) {
		drop_page(st, i);
		alive[i] = false;
	}
	uint64_t sat = check_counts(st);
	assert_true(sat > 0);
	assert_int_equal(store_close(st), 0);
	drop_tree_record(th_store_dir(dir));
	size_t n0, n1;
	uint8_t *before = file_counters(th_store_dir(dir), &n0);
	th_assert_fsck_clean(th_store_dir(dir)); /* fsck reads the old layout */
	char err[PD_ERRLEN];
	assert_int_equal(archive_open(th_store_dir(dir), &o, &st, err), 0);
	assert_int_equal(check_counts(st), sat);
	uint8_t *now = mem_snapshot(st->gf, &n1);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, now, n0); /* not a count lost */
	check_no_false_negative(st, alive, 500);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	/* the migrated store grows like any other */
	assert_int_equal(archive_open(th_store_dir(dir), &o, &st, err), 0);
	assert_int_equal(store_filter_settle(st), 0);
	check_counts(st);
	check_no_false_negative(st, alive, 500);
	struct gf_stats gs;
	gf_stats(st->gf, false, &gs);
	assert_true(gs.leaves > 1 || gs.splits > 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(before);
	free(now);
	th_rmdir(dir);
}

struct writer {
	struct store *st;
	unsigned id, n;
};

static void *writer_main(void *p)
{
	struct writer *w = p;
	for (unsigned i = 0; i < w->n; i++) {
		unsigned name = w->id * 100000 + i;
		put_page(w->st, name, name / 2); /* every content twice */
		if (i % 5 == 4)
			drop_page(w->st, name - 2);
	}
	return NULL;
}

/* Seals and deletes on four threads while the split thread works. */
static void test_seals_during_splits(void **state)
{
	(void)state;
	enum { THREADS = 4, PER = 1200 };
	char *dir = th_tmpdir();
	struct store_params p;
	small_params(&p);
	p.filter_leaf_lines = 16;
	struct store_opts o = { .split_chunk = 16 };
	struct store *st = th_store(dir, &p, &o);
	pthread_t t[THREADS];
	struct writer w[THREADS];
	for (unsigned i = 0; i < THREADS; i++) {
		w[i] = (struct writer){ st, i, PER };
		assert_int_equal(pthread_create(&t[i], NULL, writer_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(store_filter_settle(st), 0);
	check_counts(st);
	struct pd_counters c;
	store_counters(st, &c);
	assert_int_equal(c.pages, THREADS * (PER - PER / 5));
	/* every content twice: each second seal of a content found the first */
	assert_true(c.dup_seals > 0);
	struct gf_stats gs;
	gf_stats(st->gf, false, &gs);
	assert_true(gs.leaves > 1);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* The tree record: what is written is what is read; damage is refused. */
static void test_tree_record(void **state)
{
	(void)state;
	struct gf_config c;
	gf_config_default(&c, 1e-4, 2);
	struct cbf_geometry g;
	assert_int_equal(cbf_geometry_for(1000, 1e-4, 2, &g), 0);
	struct gf_tree t, back;
	assert_int_equal(gf_tree_single(&c, &g, &t), 0);
	t.leaf[0].keys = 77;
	size_t n = gf_tree_size(&t);
	uint8_t *b = malloc(n);
	gf_tree_encode(&t, b);
	assert_int_equal(gf_tree_decode(b, n, &back), 0);
	assert_int_equal(back.n, 1);
	assert_int_equal(back.leaf[0].keys, 77);
	assert_int_equal(back.leaf[0].g.nlines, g.nlines);
	assert_true(back.cfg.fmax == 2e-4);
	gf_tree_free(&back);
	assert_int_equal(gf_tree_decode(b, n - 1, &back), -EUCLEAN);
	b[0] ^= 1;
	assert_int_equal(gf_tree_decode(b, n, &back), -EUCLEAN);
	free(b);
	gf_tree_free(&t);
	/* leaves that do not cover every MD5 once are refused */
	assert_int_equal(gf_tree_single(&c, &g, &t), 0);
	t.leaf[0].depth = 1;
	struct gfilter *gf;
	assert_int_equal(gf_open(NULL, &t, GF_MEMORY, &gf, NULL), -EUCLEAN);
	gf_tree_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tree_record),
		cmocka_unit_test(test_memory_split_and_rollback),
		cmocka_unit_test(test_batch_lookup_routes),
		cmocka_unit_test(test_split_counts),
		cmocka_unit_test(test_abort_mid_split),
		cmocka_unit_test(test_crash_mid_split),
		cmocka_unit_test(test_clean_close_mid_split),
		cmocka_unit_test(test_migrate_fixed_store),
		cmocka_unit_test(test_seals_during_splits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
