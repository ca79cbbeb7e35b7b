/* test_near.c - the near-duplicate index (near.h) against brute force, its
 * upkeep through seals, overwrites and unlinks, and the answers of
 * user.dedup.near / user.dedup.simhash (query.h). Its fsck check is in
 * test_near_fsck.c, its upgrades from older layouts in
 * test_near_layout.c. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "archive/archive.h"
#include "blob/blob.h"
#include "helpers.h"
#include "near/near.h"
#include "near/near_int.h"
#include "archive/query.h"
#include "near/sigq.h"
#include "near/simhash.h"

/* ---- a deterministic generator ------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* h with exactly d distinct bits flipped; `within` >= 0 keeps the flips in
 * that block (so the other blocks all still match), -1 spreads them over
 * as many blocks as possible (the case the pigeonhole argument is tight
 * for: one block left intact). */
static uint64_t flip_bits(uint64_t h, unsigned d, int within, unsigned ntables)
{
	uint64_t mask = 0;
	while ((unsigned)__builtin_popcountll(mask) < d) {
		unsigned bit = (unsigned)(rnd() % 64);
		if (within >= 0) {
			uint64_t one = 1ull << (63 - bit);
			if (near_block(one, (unsigned)within, ntables) == 0)
				continue;
		}
		mask |= 1ull << bit;
	}
	if (within < 0 && d <= ntables) {
		/* one flip in each of d different blocks */
		mask = 0;
		for (unsigned b = 0; b < d; b++)
			for (;;) {
				unsigned bit = (unsigned)(rnd() % 64);
				uint64_t one = 1ull << (63 - bit);
				if (near_block(one, b, ntables) && !(mask & one)) {
					mask |= one;
					break;
				}
			}
	}
	return h ^ mask;
}

/* ---- rows written straight into the tables -------------------------------- */

/* Level 0's bound when the brute-force rows are staged: 100,000 rows make
 * several passes (a pass starts at NEAR_STAGE_FANOUT times this in level 1). */
#define STAGED_BOUND 512

struct rows {
	const uint64_t *h;
	size_t from, to;
	bool add;
	/* non-NULL: the rows moved on after each row, level 0 holding
	 * `bound` rows (near.h, "Rows staged"), as the signer's commits move
	 * them */
	struct near_stage_passes *passes;
	unsigned bound;
};

/* Each row's blob gets a fingerprint record with its hash (near0 of
 * layout 2 names blobs by MD5 prefix, found through their records), and
 * loses it before its rows go, as blob_unref does. */
static int rows_cb(struct wtx *w, void *p)
{
	struct rows *r = p;
	for (size_t i = r->from; i < r->to; i++) {
		struct blobkey k = th_key_of(i);
		struct fprec rec = { .refcount = 1, .size = 1, .flags = FPREC_HAS_SIMHASH, .simhash = r->h[i] };
		uint8_t kb[BLOBKEY_BYTES];
		blobkey_encode(&k, kb);
		MDB_val key = { BLOBKEY_BYTES, kb };
		int rc = r->add ? blob_put(w->txn, w->st, &k, &rec) : pd_mdb_err(mdb_del(w->txn, w->st->db_fp, &key, NULL));
		if (!rc)
			rc = r->add ? near_add(w->txn, w->st, &k, r->h[i]) : near_remove(w->txn, w->st, &k, r->h[i]);
		if (!rc && r->passes)
			rc = near_stage_settle_all(w->txn, w->st, r->passes, r->bound);
		if (rc)
			return rc;
	}
	return 0;
}

static void put_rows(struct store *st, const uint64_t *h, size_t from, size_t to, bool add,
		     struct near_stage_passes *passes)
{
	for (size_t i = from; i < to; i += 20000) {
		struct rows r = { h, i, i + 20000 < to ? i + 20000 : to, add, passes, STAGED_BOUND };
		assert_int_equal(store_write(st, rows_cb, &r), 0);
	}
}

/* The rows of simhash table i in level l (near_hash_levels' order). */
static size_t hash_level_rows(struct store *st, unsigned i, size_t l)
{
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	assert_true(l < near_hash_levels(st, i, lv));
	return th_table_rows(st, lv[l]);
}

/* What near_find answers for q, as a sorted list of row numbers. */
struct found {
	size_t *v;
	size_t n, cap;
	const uint64_t *h;
	uint64_t q;
	bool bad_dist;
};

static int found_cb(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	struct found *f = ctx;
	size_t i = 0;
	for (int b = 0; b < 8; b++)
		i |= (size_t)k->md5[b] << (8 * b);
	if (h != f->h[i] || dist != simhash_distance(h, f->q))
		f->bad_dist = true;
	if (f->n == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 16;
		f->v = realloc(f->v, f->cap * sizeof *f->v);
		assert_non_null(f->v);
	}
	f->v[f->n++] = i;
	return 0;
}

static int size_cmp(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return (x > y) - (x < y);
}

/* near_find(q, maxdist) must name exactly the live rows within maxdist,
 * each once. Returns how many it named. */
static size_t check_query(struct store *st, const uint64_t *h, const bool *live, size_t n, uint64_t q,
			  unsigned maxdist)
{
	struct found f = { .h = h, .q = q };
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_find(txn, st, q, maxdist, found_cb, &f), 0);
	store_read_end(st, txn);
	assert_false(f.bad_dist);
	if (f.n)
		qsort(f.v, f.n, sizeof *f.v, size_cmp);
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		if (!live[i] || simhash_distance(h[i], q) > maxdist)
			continue;
		if (j >= f.n || f.v[j] != i)
			fail_msg("row %zu (distance %u) missed for query %016llx at K=%u", i,
				 simhash_distance(h[i], q), (unsigned long long)q, maxdist);
		j++;
	}
	if (j != f.n)
		fail_msg("%zu rows named that are not within %u (or named twice)", f.n - j, maxdist);
	free(f.v);
	return j;
}

/* The rows of simhash table i in all its levels. */
static size_t staged_rows(struct store *st, unsigned i)
{
	size_t n = 0;
	for (size_t l = 0; l < NEAR_STAGE_LEVELS; l++)
		n += hash_level_rows(st, i, l);
	return n;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* How many distinct hashes the live rows have. */
static size_t distinct_live(const uint64_t *h, const bool *live, size_t n)
{
	uint64_t *v = malloc(n * sizeof *v);
	assert_non_null(v);
	size_t m = 0, d = 0;
	for (size_t i = 0; i < n; i++)
		if (live[i])
			v[m++] = h[i];
	qsort(v, m, sizeof *v, u64_cmp);
	for (size_t i = 0; i < m; i++)
		d += i == 0 || v[i] != v[i - 1];
	free(v);
	return d;
}

static void say_bad(void *ctx, const char *line)
{
	(void)ctx;
	print_error("near_check: %s\n", line);
}

/* near_check (fsck's check of the tables) finds nothing wrong. */
static void assert_near_check_clean(struct store *st)
{
	MDB_txn *txn;
	uint64_t nbad = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_check(txn, st, say_bad, NULL, &nbad), 0);
	store_read_end(st, txn);
	assert_int_equal(nbad, 0);
}

/* 100,000 random fingerprints, with neighbours planted around query points
 * at every distance 0..K+1, flips inside one block and spread over blocks;
 * every query must give what brute force gives. Then half the rows go and
 * the answers must follow at once. `staged`: the rows move on through the
 * levels as they are added and removed (level 0 of STAGED_BOUND rows, so
 * that passes into the tables themselves run meanwhile), and every level
 * of every table holds some when the queries run. */
static void brute_force_at(unsigned K, bool staged)
{
	enum { N = 100000, QUERIES = 150 };
	char *dir = th_tmpdir();
	struct store_params p;
	store_params_default(&p);
	p.near_distance = K;
	struct store *st = th_store(dir, &p, NULL);
	unsigned nt = K + 1;
	uint64_t *h = malloc(N * sizeof *h), q[QUERIES];
	bool *live = malloc(N);
	assert_non_null(h);
	assert_non_null(live);
	size_t n = 0;
	for (size_t i = 0; i < QUERIES; i++) {
		q[i] = rnd();
		for (unsigned d = 0; d <= K + 1; d++) {
			h[n++] = flip_bits(q[i], d, -1, nt);
			h[n++] = flip_bits(q[i], d, (int)(rnd() % nt), nt);
		}
		uint64_t dup = h[n - 3]; /* at distance K */
		h[n++] = dup;            /* two blobs with one hash */
	}
	while (n < N)
		h[n++] = rnd();
	/* staged, the planted rows are spread over the order of insertion,
	 * so that each level holds some of the neighbours the queries find */
	for (size_t i = N - 1; i > 0 && staged; i--) {
		size_t j = (size_t)(rnd() % (i + 1));
		uint64_t t = h[i];
		h[i] = h[j];
		h[j] = t;
	}
	memset(live, 1, N);
	struct near_stage_passes passes = { 0 };
	put_rows(st, h, 0, N, true, staged ? &passes : NULL);
	/* every level of every table holds rows, and near0 one a blob (no
	 * row lost or doubled by the moves) */
	size_t rows0 = 0;
	for (unsigned i = 0; i < nt && staged; i++)
		for (size_t l = 0; l < NEAR_STAGE_LEVELS; l++) {
			size_t rows = hash_level_rows(st, i, l);
			assert_true(rows > 0);
			rows0 += i == 0 ? rows : 0;
		}
	if (staged)
		assert_int_equal(rows0, N);
	size_t named = 0;
	for (size_t i = 0; i < QUERIES; i++) {
		named += check_query(st, h, live, N, q[i], K);
		if (K)
			check_query(st, h, live, N, q[i], K - 1);
	}
	/* every planted neighbour within K was found: 2 per distance + 1 */
	assert_true(named >= (size_t)QUERIES * (2 * (K + 1) + 1));
	/* beyond K the index cannot promise: it refuses */
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_find(txn, st, q[0], K + 1, found_cb, &(struct found){ .h = h }), -EINVAL);
	store_read_end(st, txn);
	/* remove every other row, and the first of each shared pair */
	for (size_t i = 0; i < N; i += 2) {
		struct rows r = { h, i, i + 1, false, staged ? &passes : NULL, STAGED_BOUND };
		assert_int_equal(store_write(st, rows_cb, &r), 0);
		live[i] = false;
	}
	/* every row of a removed blob went, from whichever level held it:
	 * near0 a row a live blob, each other table a row a distinct live
	 * hash, and what is left checks */
	if (staged) {
		assert_int_equal(staged_rows(st, 0), N / 2);
		size_t distinct = distinct_live(h, live, N);
		for (unsigned i = 1; i < nt; i++)
			assert_int_equal(staged_rows(st, i), distinct);
		assert_near_check_clean(st);
	}
	for (size_t i = 0; i < QUERIES; i++)
		check_query(st, h, live, N, q[i], K);
	free(h);
	free(live);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

static void test_brute_force_k3(void **state)
{
	(void)state;
	brute_force_at(3, false);
}

static void test_brute_force_other_k(void **state)
{
	(void)state;
	brute_force_at(0, false);
	brute_force_at(5, false); /* 64 = 6 blocks of 11 and 10 bits */
}

/* The widest K mkfs takes (16): 17 simhash tables and their 34 levels
 * open beside the store's other tables, rows go through the levels to the
 * tables and are found, and fsck's check of them is clean after a reopen. */
static void test_widest_k_staged(void **state)
{
	(void)state;
	enum { N = 3000 };
	char *dir = th_tmpdir();
	struct store_params p;
	store_params_default(&p);
	p.near_distance = NEAR_MAX_DISTANCE;
	struct store *st = th_store(dir, &p, NULL);
	assert_int_equal(st->near_tables, NEAR_MAX_DISTANCE + 1);
	assert_true(st->has_nearhstage);
	uint64_t *h = malloc(N * sizeof *h);
	bool *live = malloc(N);
	assert_non_null(h);
	assert_non_null(live);
	for (size_t i = 0; i < N; i++)
		h[i] = rnd();
	memset(live, 1, N);
	struct near_stage_passes passes = { 0 };
	for (size_t i = 0; i < N; i += 100) {
		struct rows r = { h, i, i + 100, true, &passes, 8 };
		assert_int_equal(store_write(st, rows_cb, &r), 0);
	}
	/* every table's rows reached the table itself, none lost */
	for (unsigned i = 0; i <= NEAR_MAX_DISTANCE; i++) {
		assert_true(hash_level_rows(st, i, NEAR_STAGE_LEVELS - 1) > 0);
		assert_int_equal(staged_rows(st, i), N);
	}
	assert_int_equal(store_close(st), 0);
	st = th_reopen(dir, NULL);
	for (size_t i = 0; i < 20; i++)
		check_query(st, h, live, N, flip_bits(h[i * 97], NEAR_MAX_DISTANCE, -1, NEAR_MAX_DISTANCE + 1),
			    NEAR_MAX_DISTANCE);
	assert_near_check_clean(st);
	assert_int_equal(store_close(st), 0);
	free(h);
	free(live);
	th_rmdir(dir);
}

/* The same with the simhash rows staged (near.h, layout 6). */
static void test_brute_force_staged(void **state)
{
	(void)state;
	brute_force_at(3, true);
}

static void test_blocks(void **state)
{
	(void)state;
	uint64_t h = 0x0123456789abcdefull;
	assert_int_equal(near_block(h, 0, 4), 0x0123);
	assert_int_equal(near_block(h, 3, 4), 0xcdef);
	assert_true(near_block(h, 0, 1) == h);
	/* the blocks of any K cover the 64 bits once */
	for (unsigned nt = 1; nt <= NEAR_MAX_DISTANCE + 1; nt++) {
		unsigned bits = 0;
		for (unsigned i = 0; i < nt; i++)
			bits += (unsigned)__builtin_popcountll(near_block(~0ull, i, nt));
		assert_int_equal(bits, 64);
	}
}

/* ---- through the calls the filesystem makes -------------------------------- */

/* what a query writes, for the tests that read it raw */
static char answer[QUERY_MAX + 1];

static const struct pd_cred alice = { 1000, 1000, 0, NULL }, bob = { 2000, 2000, 0, NULL };

static void test_answers(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char *a = th_page(1, 600, ""), *b = th_page(1, 600, "three more words");
	char *c = th_page(2, 600, "");
	unsigned ab = th_page_distance(a, b);
	assert_true(ab >= 1 && ab <= SIMHASH_NEAR_DISTANCE); /* the fixture itself */
	assert_true(th_page_distance(a, c) > SIMHASH_NEAR_DISTANCE);

	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	uint64_t ic = th_put_page(st, PD_ROOT_INO, "c.html", c);
	th_put_page(st, PD_ROOT_INO, "d.html", a);
	struct inode sub, priv, ln;
	assert_int_equal(ns_mknode(st, PD_ROOT_INO, "sub", S_IFDIR | 0755, 0, NULL, &test_root, &sub), 0);
	assert_int_equal(ns_mknode(st, PD_ROOT_INO, "priv", S_IFDIR | 0700, 0, NULL, &alice, &priv), 0);
	th_put_page(st, sub.ino, "a2.html", a);
	th_put_page(st, priv.ino, "secret.html", b);

	char want[512];
	const char *r = th_page_res(a, b);
	assert_true(strcmp(r, "0.800") >= 0 && strcmp(r, "1.000") < 0);
	/* copies first (the same bytes), then the variants, with their figures */
	snprintf(want, sizeof want,
		 "0\t1.000\tcopy\t/d.html\n0\t1.000\tcopy\t/sub/a2.html\n%u\t%s\tnear\t/b.html\n%u\t%s\tnear\t/priv/secret.html\n",
		 ab, r, ab, r);
	assert_string_equal(th_near_of(st, ia, &test_root), want);
	/* bob may not search alice's directory: her page is not named */
	snprintf(want, sizeof want, "0\t1.000\tcopy\t/d.html\n0\t1.000\tcopy\t/sub/a2.html\n%u\t%s\tnear\t/b.html\n", ab, r);
	assert_string_equal(th_near_of(st, ia, &bob), want);
	snprintf(want, sizeof want,
		 "0\t1.000\tcopy\t/d.html\n0\t1.000\tcopy\t/sub/a2.html\n%u\t%s\tnear\t/b.html\n%u\t%s\tnear\t/priv/secret.html\n",
		 ab, r, ab, r);
	assert_string_equal(th_near_of(st, ia, &alice), want);
	assert_string_equal(th_near_of(st, ic, &test_root), "");

	/* every hard link of a neighbour appears */
	assert_int_equal(ns_link(st, ib, sub.ino, "b-link.html", &ln), 0);
	snprintf(want, sizeof want,
		 "0\t1.000\tcopy\t/d.html\n0\t1.000\tcopy\t/sub/a2.html\n%u\t%s\tnear\t/b.html\n%u\t%s\tnear\t/priv/secret.html\n"
		 "%u\t%s\tnear\t/sub/b-link.html\n",
		 ab, r, ab, r, ab, r);
	assert_string_equal(th_near_of(st, ia, &test_root), want);

	/* a page unlinked or overwritten leaves the answers at once */
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "d.html", &gone_ino, &gone), 0);
	th_put_page(st, sub.ino, "a2.html", c);
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "b.html", &gone_ino, &gone), 0);
	snprintf(want, sizeof want, "%u\t%s\tnear\t/priv/secret.html\n%u\t%s\tnear\t/sub/b-link.html\n", ab, r, ab, r);
	assert_string_equal(th_near_of(st, ia, &test_root), want);
	snprintf(want, sizeof want, "0\t1.000\tcopy\t/sub/a2.html\n");
	assert_string_equal(th_near_of(st, ic, &test_root), want);

	/* simhash answers */
	size_t len;
	assert_int_equal(query_simhash(st, ia, answer, &len), 0);
	assert_int_equal(len, 16);
	uint64_t bin = th_put(st, PD_ROOT_INO, "bin", "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
	assert_int_equal(query_simhash(st, bin, answer, &len), 0);
	answer[len] = 0;
	assert_string_equal(answer, "none");
	assert_string_equal(th_near_of(st, bin, &test_root), "ENODATA");
	assert_string_equal(th_near_of(st, sub.ino, &test_root), "ENODATA"); /* a directory */

	/* too little text: the distance is marked */
	uint64_t s1 = th_put_page(st, PD_ROOT_INO, "short1.txt", "a few words of text");
	th_put_page(st, PD_ROOT_INO, "short2.txt", "a few words of text!");
	assert_int_equal(query_simhash(st, s1, answer, &len), 0);
	answer[len] = 0;
	assert_non_null(strstr(answer, " low-confidence"));
	/* short pages are compared exactly: four words in common of five is
	 * no near-duplicate (two one-shingle texts that differ) */
	assert_string_equal(th_near_of(st, s1, &test_root), "");
	th_put_page(st, PD_ROOT_INO, "short3.txt", "a few words of text");
	assert_string_equal(th_near_of(st, s1, &test_root), "0?\t1.000\tcopy\t/short3.txt\n");

	free(a);
	free(b);
	free(c);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* More neighbours than 64 KiB holds: the nearest, by path, that fit, and a
 * count of the rest. */
static void test_answer_limit(void **state)
{
	(void)state;
	enum { FILES = 300 };
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char *a = th_page(7, 400, "");
	char name[256];
	uint64_t first = 0;
	for (int i = FILES - 1; i >= 0; i--) { /* stored in reverse order */
		snprintf(name, sizeof name, "%03d-%0240d", i, 0);
		uint64_t ino = th_put_page(st, PD_ROOT_INO, name, a);
		if (i == 0)
			first = ino;
	}
	size_t len;
	assert_int_equal(query_near(st, first, &test_root, answer, &len), 0);
	assert_true(len <= QUERY_MAX);
	answer[len] = 0;
	/* each line is "0\t1.000\tcopy\t/NNN-000...\n": 13 + 245 + 1 bytes */
	size_t line = 259, kept = (QUERY_MAX - 32) / line;
	char want[128];
	for (size_t i = 0; i < kept; i++) {
		snprintf(want, sizeof want, "0\t1.000\tcopy\t/%03zu-", i + 1);
		assert_memory_equal(answer + i * line, want, strlen(want));
	}
	snprintf(want, sizeof want, "... %zu more\n", (size_t)FILES - 1 - kept);
	assert_string_equal(answer + kept * line, want);
	free(a);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* A candidate is answered when the shingle sets agree, whatever the
 * sketch says; a record without a set is confirmed by its sketch; one
 * without either is taken on its simhash. */
struct sketch_edit {
	uint64_t ino;
	int mode; /* 0: scramble the sketch, 1: drop it, 2: drop the shingle set */
};

static int sketch_edit_cb(struct wtx *w, void *p)
{
	struct sketch_edit *e = p;
	struct inode in;
	struct fprec r;
	int rc = ns_get_inode(w->txn, w->st, e->ino, &in);
	if (rc || (rc = blob_get(w->txn, w->st, &in.blob, &r)))
		return rc;
	if (e->mode == 2)
		return near_set_remove(w->txn, w->st, &in.blob);
	if (e->mode == 0) { /* a sketch unlike the page's */
		r.flags |= FPREC_HAS_SKETCH;
		for (size_t i = 0; i < FPREC_SKETCH_BYTES; i++)
			r.sketch[i] = (uint8_t)(0x5a + 7 * i);
	} else {
		r.flags &= (uint8_t)~FPREC_HAS_SKETCH;
	}
	return blob_put(w->txn, w->st, &in.blob, &r);
}

/* The sketches' estimate for two pages, as an answer shows it. */
static const char *sketch_res(const char *a, const char *b)
{
	static char out[16];
	struct near_sig *x = malloc(sizeof *x), *y = malloc(sizeof *y);
	assert_non_null(x);
	assert_non_null(y);
	assert_int_equal(near_sig_of_page(a, strlen(a), x), 0);
	assert_int_equal(near_sig_of_page(b, strlen(b), y), 0);
	double r;
	assert_int_equal(minhash_resemblance(x->sketch, y->sketch, &r), 0);
	assert_true(r >= MINHASH_NEAR_RESEMBLANCE);
	snprintf(out, sizeof out, "%.3f", r);
	free(x);
	free(y);
	return out;
}

/* Layout 3: a record with a set keeps no sketch, and the sets confirm; a
 * page whose set is gone is confirmed by the sketches as before, the
 * missing ones computed from the pages read back. */
static void test_confirmation(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char *a = th_page(11, 800, ""), *b = th_page(11, 800, "one more line of words");
	unsigned d = th_page_distance(a, b);
	assert_true(d <= SIMHASH_NEAR_DISTANCE);
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	char want[128];
	snprintf(want, sizeof want, "%u\t%s\tnear\t/b.html\n", d, th_page_res(a, b));
	assert_string_equal(th_near_of(st, ia, &test_root), want);
	assert_false(th_has_sketch(st, ia));
	assert_false(th_has_sketch(st, ib));
	struct sketch_edit e = { ib, 0 };
	assert_int_equal(store_write(st, sketch_edit_cb, &e), 0);
	assert_string_equal(th_near_of(st, ia, &test_root), want); /* the sets decide */
	e.mode = 2;
	assert_int_equal(store_write(st, sketch_edit_cb, &e), 0);
	assert_string_equal(th_near_of(st, ia, &test_root), ""); /* b's scrambled sketch, a's read back */
	e.mode = 1;
	assert_int_equal(store_write(st, sketch_edit_cb, &e), 0);
	snprintf(want, sizeof want, "%u\t%s\tnear\t/b.html\n", d, sketch_res(a, b));
	assert_string_equal(th_near_of(st, ia, &test_root), want); /* both read back */
	snprintf(want, sizeof want, "%u\t%s\tnear\t/a.html\n", d, sketch_res(a, b));
	assert_string_equal(th_near_of(st, ib, &test_root), want); /* and asked from b */
	free(a);
	free(b);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocks),
		cmocka_unit_test(test_brute_force_k3),
		cmocka_unit_test(test_brute_force_other_k),
		cmocka_unit_test(test_brute_force_staged),
		cmocka_unit_test(test_widest_k_staged),
		cmocka_unit_test(test_answers),
		cmocka_unit_test(test_answer_limit),
		cmocka_unit_test(test_confirmation),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
