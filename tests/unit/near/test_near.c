/* test_near.c - the near-duplicate index (near.h) against brute force, its
 * upkeep through seals, overwrites and unlinks, the answers of
 * user.dedup.near / user.dedup.simhash (query.h), and its fsck check. */
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

static struct blobkey key_of(size_t i)
{
	struct blobkey k = { .variant = (uint32_t)(i % 3) };
	memset(k.md5, 0, 16);
	for (int b = 0; b < 8; b++)
		k.md5[b] = (uint8_t)(i >> (8 * b));
	return k;
}

/* Each row's blob gets a fingerprint record with its hash (near0 of
 * layout 2 names blobs by MD5 prefix, found through their records), and
 * loses it before its rows go, as blob_unref does. */
static int rows_cb(struct wtx *w, void *p)
{
	struct rows *r = p;
	for (size_t i = r->from; i < r->to; i++) {
		struct blobkey k = key_of(i);
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

static char answer[QUERY_MAX + 1];

static const char *near_of(struct store *st, uint64_t ino, const struct pd_cred *cred)
{
	size_t len = 0;
	int rc = query_near(st, ino, cred, answer, &len);
	if (rc)
		return rc == -ENODATA ? "ENODATA" : "error";
	answer[len] = 0;
	return answer;
}

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
	assert_string_equal(near_of(st, ia, &test_root), want);
	/* bob may not search alice's directory: her page is not named */
	snprintf(want, sizeof want, "0\t1.000\tcopy\t/d.html\n0\t1.000\tcopy\t/sub/a2.html\n%u\t%s\tnear\t/b.html\n", ab, r);
	assert_string_equal(near_of(st, ia, &bob), want);
	snprintf(want, sizeof want,
		 "0\t1.000\tcopy\t/d.html\n0\t1.000\tcopy\t/sub/a2.html\n%u\t%s\tnear\t/b.html\n%u\t%s\tnear\t/priv/secret.html\n",
		 ab, r, ab, r);
	assert_string_equal(near_of(st, ia, &alice), want);
	assert_string_equal(near_of(st, ic, &test_root), "");

	/* every hard link of a neighbour appears */
	assert_int_equal(ns_link(st, ib, sub.ino, "b-link.html", &ln), 0);
	snprintf(want, sizeof want,
		 "0\t1.000\tcopy\t/d.html\n0\t1.000\tcopy\t/sub/a2.html\n%u\t%s\tnear\t/b.html\n%u\t%s\tnear\t/priv/secret.html\n"
		 "%u\t%s\tnear\t/sub/b-link.html\n",
		 ab, r, ab, r, ab, r);
	assert_string_equal(near_of(st, ia, &test_root), want);

	/* a page unlinked or overwritten leaves the answers at once */
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "d.html", &gone_ino, &gone), 0);
	th_put_page(st, sub.ino, "a2.html", c);
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "b.html", &gone_ino, &gone), 0);
	snprintf(want, sizeof want, "%u\t%s\tnear\t/priv/secret.html\n%u\t%s\tnear\t/sub/b-link.html\n", ab, r, ab, r);
	assert_string_equal(near_of(st, ia, &test_root), want);
	snprintf(want, sizeof want, "0\t1.000\tcopy\t/sub/a2.html\n");
	assert_string_equal(near_of(st, ic, &test_root), want);

	/* simhash answers */
	size_t len;
	assert_int_equal(query_simhash(st, ia, answer, &len), 0);
	assert_int_equal(len, 16);
	uint64_t bin = th_put(st, PD_ROOT_INO, "bin", "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
	assert_int_equal(query_simhash(st, bin, answer, &len), 0);
	answer[len] = 0;
	assert_string_equal(answer, "none");
	assert_string_equal(near_of(st, bin, &test_root), "ENODATA");
	assert_string_equal(near_of(st, sub.ino, &test_root), "ENODATA"); /* a directory */

	/* too little text: the distance is marked */
	uint64_t s1 = th_put_page(st, PD_ROOT_INO, "short1.txt", "a few words of text");
	th_put_page(st, PD_ROOT_INO, "short2.txt", "a few words of text!");
	assert_int_equal(query_simhash(st, s1, answer, &len), 0);
	answer[len] = 0;
	assert_non_null(strstr(answer, " low-confidence"));
	/* short pages are compared exactly: four words in common of five is
	 * no near-duplicate (two one-shingle texts that differ) */
	assert_string_equal(near_of(st, s1, &test_root), "");
	th_put_page(st, PD_ROOT_INO, "short3.txt", "a few words of text");
	assert_string_equal(near_of(st, s1, &test_root), "0?\t1.000\tcopy\t/short3.txt\n");

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

static bool has_sketch(struct store *st, uint64_t ino)
{
	return (th_fprec_of(st, ino).flags & FPREC_HAS_SKETCH) != 0;
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
	assert_string_equal(near_of(st, ia, &test_root), want);
	assert_false(has_sketch(st, ia));
	assert_false(has_sketch(st, ib));
	struct sketch_edit e = { ib, 0 };
	assert_int_equal(store_write(st, sketch_edit_cb, &e), 0);
	assert_string_equal(near_of(st, ia, &test_root), want); /* the sets decide */
	e.mode = 2;
	assert_int_equal(store_write(st, sketch_edit_cb, &e), 0);
	assert_string_equal(near_of(st, ia, &test_root), ""); /* b's scrambled sketch, a's read back */
	e.mode = 1;
	assert_int_equal(store_write(st, sketch_edit_cb, &e), 0);
	snprintf(want, sizeof want, "%u\t%s\tnear\t/b.html\n", d, sketch_res(a, b));
	assert_string_equal(near_of(st, ia, &test_root), want); /* both read back */
	snprintf(want, sizeof want, "%u\t%s\tnear\t/a.html\n", d, sketch_res(a, b));
	assert_string_equal(near_of(st, ib, &test_root), want); /* and asked from b */
	free(a);
	free(b);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* ---- fsck ------------------------------------------------------------------ */

static int drop_row_cb(struct wtx *w, void *p)
{
	/* remove the first row of the last table, from the first of its
	 * levels that has one */
	struct store *st = w->st;
	(void)p;
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	size_t nl = near_hash_levels(st, st->near_tables - 1, lv);
	for (size_t l = 0; l < nl; l++) {
		MDB_cursor *c;
		MDB_val k, v;
		assert_int_equal(mdb_cursor_open(w->txn, lv[l], &c), 0);
		int g = mdb_cursor_get(c, &k, &v, MDB_FIRST);
		if (g == 0)
			assert_int_equal(mdb_cursor_del(c, 0), 0);
		mdb_cursor_close(c);
		if (g == 0)
			return 0;
	}
	fail_msg("no row in the last simhash table");
	return 0;
}

static int stray_row_cb(struct wtx *w, void *p)
{
	(void)p;
	struct blobkey k = key_of(12345);
	return near_add(w->txn, w->st, &k, 0x1234567812345678ull);
}

static void count_line(void *ctx, const char *line)
{
	(void)line;
	(*(int *)ctx)++;
}

/* A store at dir with n pages (of seeds 3, 4, ...), signed: its near rows
 * are there. */
static struct store *signed_pages(const char *dir, unsigned n)
{
	struct store *st = th_store(dir, NULL, NULL);
	for (unsigned i = 0; i < n; i++) {
		char *page = th_page(3 + i, 500, ""), name[2] = { (char)('a' + i), 0 };
		th_put_page(st, PD_ROOT_INO, name, page);
		free(page);
	}
	assert_int_equal(sigq_drain(st), 0);
	return st;
}

/* fsck of the closed store at dir, the near tables' checks given mem
 * bytes: the problems it finds (and *lines, the lines it prints). */
static uint64_t fsck_problems(const char *dir, size_t mem, int *lines)
{
	struct fsck_opts o = { .report = count_line, .ctx = lines };
	struct fsck_result r;
	char err[512];
	near_check_mem(mem);
	int rc = fsck_run(th_store_dir(dir), &o, &r, err);
	near_check_mem(NEAR_CHECK_MEM_DEFAULT);
	assert_int_equal(rc, 0);
	return r.problems;
}

/* fsck of the closed store at dir: the problems it finds (and *lines, the
 * lines it prints), the same with all the near tables checked in memory
 * (the default), with 1, 100 and 200 bytes (the band rows sorted on disk,
 * in runs of 16 rows; the simhash tables in parts of one or two records:
 * ranges of their keys) and with none (every row probed); then --repair
 * mends them, and fsck finds it clean. */
static uint64_t fsck_finds_then_repairs(const char *dir, int *lines)
{
	static const size_t mems[] = { 0, 1, 100, 200 };
	uint64_t runs = near_check_spilled_runs();
	uint64_t problems = fsck_problems(dir, NEAR_CHECK_MEM_DEFAULT, lines);
	assert_int_equal(near_check_spilled_runs(), runs); /* in memory */
	for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++) {
		int other = 0;
		runs = near_check_spilled_runs();
		assert_int_equal(fsck_problems(dir, mems[i], &other), problems);
		assert_int_equal(other, *lines);
		if (mems[i]) /* two sets or more: 32 rows, a run written */
			assert_true(near_check_spilled_runs() > runs);
		else
			assert_int_equal(near_check_spilled_runs(), runs);
	}
	struct fsck_opts o = { .report = count_line };
	struct fsck_result r;
	char err[512];
	int repair_lines = 0;
	o.repair = true;
	o.ctx = &repair_lines;
	assert_int_equal(fsck_run(th_store_dir(dir), &o, &r, err), 0);
	assert_true(r.repaired >= 1);
	th_assert_fsck_clean(th_store_dir(dir));
	return problems;
}

static void test_fsck_near(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = signed_pages(dir, 2);
	assert_int_equal(store_write(st, drop_row_cb, NULL), 0);
	assert_int_equal(store_write(st, stray_row_cb, NULL), 0);
	assert_int_equal(store_close(st), 0);
	/* a missing row, and a stray row of near0 naming a blob that has no
	 * record (its rows in the other tables are explained by that row) */
	int lines = 0;
	assert_int_equal(fsck_finds_then_repairs(dir, &lines), 2);
	assert_int_equal(lines, 2);
	th_rmdir(dir);
}

/* Shingle sets and bands: a band row lost, a band row no set has, a set
 * that does not decode, a set of a blob that has no record; fsck names
 * each, --repair mends. */
static int damage_sets_cb(struct wtx *w, void *p)
{
	struct store *st = w->st;
	(void)p;
	MDB_cursor *c;
	MDB_val k, v;
	/* the first set's blob loses its row of band 0 */
	assert_int_equal(mdb_cursor_open(w->txn, st->db_nearfeat, &c), 0);
	assert_int_equal(mdb_cursor_get(c, &k, &v, MDB_FIRST), 0);
	struct nearset *first = malloc(sizeof *first);
	assert_non_null(first);
	assert_int_equal(nearset_decode(v.mv_data, v.mv_size, first), 0);
	uint8_t bk = 0, row[8]; /* nearbands: band 0 -> key u32 BE | MD5 prefix */
	uint32_t band0 = nearset_band(first, 0);
	row[0] = (uint8_t)(band0 >> 24), row[1] = (uint8_t)(band0 >> 16), row[2] = (uint8_t)(band0 >> 8);
	row[3] = (uint8_t)band0;
	memcpy(row + 4, k.mv_data, 4);
	mdb_cursor_close(c);
	free(first);
	assert_int_equal(near_band_has(w->txn, st, 0, band0, row + 4), 1);
	assert_int_equal(near_band_del(w->txn, st, 0, band0, row + 4), 0);
	assert_int_equal(near_band_has(w->txn, st, 0, band0, row + 4), 0);
	/* a row of band 3 that no set has, under the same blob's prefix */
	bk = 3;
	memset(row, 0xde, 4);
	assert_int_equal(mdb_put(w->txn, st->db_nearlsh, &(MDB_val){ 1, &bk }, &(MDB_val){ 8, row }, 0), 0);
	/* the last set does not decode */
	assert_int_equal(mdb_cursor_open(w->txn, st->db_nearfeat, &c), 0);
	assert_int_equal(mdb_cursor_get(c, &k, &v, MDB_LAST), 0);
	uint8_t key[BLOBKEY_BYTES], junk[10] = { 9, 9, 9 };
	memcpy(key, k.mv_data, BLOBKEY_BYTES);
	mdb_cursor_close(c);
	MDB_val jv = { sizeof junk, junk };
	assert_int_equal(mdb_put(w->txn, st->db_nearfeat, &(MDB_val){ BLOBKEY_BYTES, key }, &jv, 0), 0);
	memset(key, 0xee, sizeof key); /* no such blob */
	struct nearset *s = calloc(1, sizeof *s);
	assert_non_null(s);
	s->has = s->complete = true;
	s->shingles = s->n = 1;
	s->h[0] = 7;
	uint8_t buf[NEARSET_MAX_BYTES];
	MDB_val sv = { nearset_encode(s, buf), buf };
	free(s);
	assert_int_equal(mdb_put(w->txn, st->db_nearfeat, &(MDB_val){ BLOBKEY_BYTES, key }, &sv, 0), 0);
	return 0;
}

static void test_fsck_sets(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = signed_pages(dir, 3);
	assert_int_equal(store_write(st, damage_sets_cb, NULL), 0);
	assert_int_equal(store_close(st), 0);
	int lines = 0;
	assert_int_equal(fsck_finds_then_repairs(dir, &lines), 4);
	th_rmdir(dir);
}

/* Two blobs of one simhash (the same text, other markup) share their rows
 * of near1.. (a row of those tables names no blob): every check, in memory,
 * sorted on disk and probed, finds the store clean. */
static void test_fsck_shared_simhash(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char *a = th_page(7, 500, ""), *b = th_page(7, 500, "<!-- other markup, no text -->");
	assert_string_not_equal(a, b);
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a), ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	assert_int_equal(sigq_drain(st), 0);
	struct blobkey ka = th_blob_of(st, ia), kb = th_blob_of(st, ib);
	struct fprec ra, rb;
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_get(txn, st, &ka, &ra), 0);
	assert_int_equal(blob_get(txn, st, &kb, &rb), 0);
	store_read_end(st, txn);
	assert_memory_not_equal(ka.md5, kb.md5, sizeof ka.md5);
	assert_true(ra.flags & FPREC_HAS_SIMHASH);
	assert_int_equal(ra.simhash, rb.simhash); /* the fixture: one simhash */
	assert_int_equal(store_close(st), 0);
	static const size_t mems[] = { NEAR_CHECK_MEM_DEFAULT, 1, 100, 0 };
	for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++) {
		int lines = 0;
		assert_int_equal(fsck_problems(dir, mems[i], &lines), 0);
		assert_int_equal(lines, 0);
	}
	free(a);
	free(b);
	th_rmdir(dir);
}

/* The sorts on disk cannot write their runs (a file size limit: EFBIG,
 * as a full disk fails a write): the checks of the simhash tables and of
 * the band rows go on by probes and find the same problems, in the same
 * lines. In a child process, whose limit goes with it; it answers by its
 * exit status. */
static int fsck_in_child(const char *dir, size_t mem, rlim_t fsize, uint64_t *problems, int *lines)
{
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		signal(SIGXFSZ, SIG_IGN);
		struct rlimit rl = { fsize, fsize };
		if (setrlimit(RLIMIT_FSIZE, &rl))
			_exit(2);
		struct fsck_opts o = { .report = count_line, .ctx = lines };
		struct fsck_result r;
		char err[512];
		uint64_t runs = near_check_spilled_runs();
		near_check_mem(mem);
		*lines = 0;
		if (fsck_run(th_store_dir(dir), &o, &r, err))
			_exit(3);
		uint64_t out[3] = { r.problems, (uint64_t)*lines, near_check_spilled_runs() - runs };
		_exit(write(fds[1], out, sizeof out) == sizeof out ? 0 : 4);
	}
	close(fds[1]);
	uint64_t out[3] = { 0 };
	ssize_t got = read(fds[0], out, sizeof out);
	close(fds[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(got, (ssize_t)sizeof out);
	*problems = out[0];
	*lines = (int)out[1];
	return (int)out[2];
}

static void test_fsck_sets_spill_fails(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = signed_pages(dir, 20); /* past a run of 16: the simhash tables' sorts write too */
	assert_int_equal(store_write(st, damage_sets_cb, NULL), 0);
	assert_int_equal(store_close(st), 0);
	int lines = 0, other = 0;
	uint64_t problems = fsck_problems(dir, NEAR_CHECK_MEM_DEFAULT, &lines), got;
	assert_int_equal(problems, 4);
	/* no limit: the child spills, and agrees */
	assert_true(fsck_in_child(dir, 1, RLIM_INFINITY, &got, &other) > 0);
	assert_int_equal(got, problems);
	assert_int_equal(other, lines);
	/* runs of 16 records (144 bytes and more) against a limit of 100:
	 * none written */
	assert_int_equal(fsck_in_child(dir, 1, 100, &got, &other), 0);
	assert_int_equal(got, problems);
	assert_int_equal(other, lines);
	th_rmdir(dir);
}

/* A format-3 set whose hashes were changed still decodes, but the band
 * keys computed from it are not those of its rows: fsck names it, and
 * repair makes the rows agree. */
static int damage_set_hashes_cb(struct wtx *w, void *p)
{
	(void)p;
	MDB_cursor *c;
	MDB_val k, v;
	assert_int_equal(mdb_cursor_open(w->txn, w->st->db_nearfeat, &c), 0);
	assert_int_equal(mdb_cursor_get(c, &k, &v, MDB_FIRST), 0);
	uint8_t key[BLOBKEY_BYTES], buf[NEARSET_MAX_BYTES];
	memcpy(key, k.mv_data, BLOBKEY_BYTES);
	assert_int_equal(((const uint8_t *)v.mv_data)[0], NEARSET_FORMAT);
	struct nearset *s = malloc(sizeof *s);
	assert_non_null(s);
	assert_int_equal(nearset_decode(v.mv_data, v.mv_size, s), 0);
	mdb_cursor_close(c);
	for (uint32_t i = 0; i < s->n; i++)
		s->h[i] = s->h[i] * 2 + 1; /* other hashes, still ascending */
	s->h[0] = 1;
	MDB_val sv = { nearset_encode(s, buf), buf };
	free(s);
	return mdb_put(w->txn, w->st->db_nearfeat, &(MDB_val){ BLOBKEY_BYTES, key }, &sv, 0);
}

static void test_fsck_set_hashes(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = signed_pages(dir, 2);
	assert_int_equal(store_write(st, damage_set_hashes_cb, NULL), 0);
	assert_int_equal(store_close(st), 0);
	int lines = 0;
	assert_true(fsck_finds_then_repairs(dir, &lines) >= 1);
	th_rmdir(dir);
}

/* ---- stores of an older signature version ---------------------------------- */

/* What the code of an older version left: its version in meta (or none at
 * all, as before versions were recorded) and a hash of its own features
 * on the page, indexed as such, with the sketch it computed. */
struct old_store {
	uint64_t ino;
	bool unrecorded; /* delete the version instead of writing the first one */
};

#define OLD_HASH UINT64_C(0x0123456789abcdef)

static int make_old_cb(struct wtx *w, void *p)
{
	struct old_store *o = p;
	struct inode in;
	struct fprec r;
	int rc = ns_get_inode(w->txn, w->st, o->ino, &in);
	if (rc || (rc = blob_get(w->txn, w->st, &in.blob, &r)))
		return rc;
	if ((rc = near_remove(w->txn, w->st, &in.blob, r.simhash)))
		return rc;
	r.simhash = OLD_HASH;
	memset(r.sketch, 0x5a, FPREC_SKETCH_BYTES);
	if ((rc = blob_put(w->txn, w->st, &in.blob, &r)) || (rc = near_add(w->txn, w->st, &in.blob, OLD_HASH)))
		return rc;
	MDB_val k = { 12, "near_version" };
	if (o->unrecorded)
		return mdb_del(w->txn, w->st->db_meta, &k, NULL);
	uint8_t b[4];
	put_le32(b, NEAR_SIG_VERSION_FIRST);
	MDB_val v = { 4, b };
	return mdb_put(w->txn, w->st->db_meta, &k, &v, 0);
}

static uint64_t stored_simhash(struct store *st, uint64_t ino)
{
	return th_fprec_of(st, ino).simhash;
}

static uint32_t stored_version(struct store *st)
{
	MDB_txn *txn;
	uint32_t v = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_version_get(txn, st, &v), 0);
	store_read_end(st, txn);
	return v;
}

/* The figure the answers show for old_store's two pages. */
static const char *old_pair_res(void)
{
	char *a = th_page(21, 700, ""), *b = th_page(21, 700, "and a few words more");
	const char *r = th_page_res(a, b);
	free(a);
	free(b);
	return r;
}

/* A store of pages a and b (neighbours), a's signature made old. */
static struct store *old_store(char *dir, bool unrecorded, uint64_t *ia, uint64_t *ib, unsigned *d,
			       uint64_t *want_hash)
{
	struct store *st = th_store(dir, NULL, NULL);
	assert_int_equal(stored_version(st), NEAR_SIG_VERSION); /* mkfs records it */
	char *a = th_page(21, 700, ""), *b = th_page(21, 700, "and a few words more");
	*d = th_page_distance(a, b);
	assert_true(*d <= SIMHASH_NEAR_DISTANCE);
	struct simhash_result r;
	assert_int_equal(simhash_of_page(a, strlen(a), &r), 0);
	*want_hash = r.hash;
	*ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	*ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	assert_int_equal(sigq_drain(st), 0); /* signed now, so that the old hash stays */
	struct old_store o = { *ia, unrecorded };
	assert_int_equal(store_write(st, make_old_cb, &o), 0);
	assert_string_equal(near_of(st, *ia, &test_root), ""); /* the old hash is far from b's */
	free(a);
	free(b);
	return st;
}

static void test_old_version_upgraded_at_open(void **state)
{
	(void)state;
	for (int unrecorded = 0; unrecorded <= 1; unrecorded++) {
		char *dir = th_tmpdir();
		uint64_t ia, ib, want;
		unsigned d;
		struct store *st = old_store(dir, unrecorded, &ia, &ib, &d, &want);
		assert_int_equal(store_close(st), 0);

		/* fsck names the old version (and nothing else) */
		struct fsck_opts fo = { 0 };
		struct fsck_result fr;
		char err[512];
		assert_int_equal(fsck_run(th_store_dir(dir), &fo, &fr, err), 0);
		assert_int_equal(fr.problems, 1);

		/* read-only: no answers mixing the versions */
		struct store_opts ro = { .readonly = true };
		assert_int_equal(archive_open(th_store_dir(dir), &ro, &st, err), 0);
		assert_true(st->near_stale);
		assert_string_equal(near_of(st, ia, &test_root), "error");
		size_t len;
		assert_int_equal(query_near(st, ia, &test_root, answer, &len), -ESTALE);
		assert_int_equal(store_close(st), 0);

		/* writable: every signature computed again, the version recorded */
		assert_int_equal(archive_open(th_store_dir(dir), NULL, &st, err), 0);
		assert_false(st->near_stale);
		assert_int_equal(stored_version(st), NEAR_SIG_VERSION);
		assert_true(stored_simhash(st, ia) == want);
		char line[64];
		/* a figure, not "-": the upgrade computed a's shingle set too */
		snprintf(line, sizeof line, "%u\t%s\tnear\t/b.html\n", d, old_pair_res());
		assert_string_equal(near_of(st, ia, &test_root), line);
		assert_int_equal(store_close(st), 0);
		th_assert_fsck_clean(th_store_dir(dir));
		th_rmdir(dir);
	}
}

static void test_old_version_fsck_repair(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	uint64_t ia, ib, want;
	unsigned d;
	struct store *st = old_store(dir, false, &ia, &ib, &d, &want);
	assert_int_equal(store_close(st), 0);
	struct fsck_opts fo = { .repair = true };
	struct fsck_result fr;
	char err[512];
	assert_int_equal(fsck_run(th_store_dir(dir), &fo, &fr, err), 0);
	assert_true(fr.repaired >= 1);
	th_assert_fsck_clean(th_store_dir(dir));
	struct store_opts ro = { .readonly = true };
	assert_int_equal(archive_open(th_store_dir(dir), &ro, &st, err), 0);
	assert_false(st->near_stale);
	assert_true(stored_simhash(st, ia) == want);
	char line[64];
	snprintf(line, sizeof line, "%u\t%s\tnear\t/b.html\n", d, old_pair_res());
	assert_string_equal(near_of(st, ia, &test_root), line);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* ---- the layout of the sets and bands (near.h) ---------------------------- */

static int lsh_name_cb(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	(void)h, (void)dist;
	char name[BLOBKEY_NAME_MAX];
	blobkey_name(k, name);
	strcat(ctx, name);
	strcat(ctx, " ");
	return 0;
}

/* "NAME " of the blob under name in the root. */
static void blob_named(struct store *st, const char *name, char out[BLOBKEY_NAME_MAX + 1])
{
	struct inode in;
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, name, &in), 0);
	blobkey_name(&in.blob, out);
	strcat(out, " ");
}

#define LAYOUT_PAGES 24
/* room for every blob of a store of LAYOUT_PAGES found in every band */
#define LSH_LIST_MAX (NEARSET_BANDS * LAYOUT_PAGES * BLOBKEY_NAME_MAX)

/* The rows of band table i (near_band_tables' order: nearbands0,
 * nearbands1, nearbands). */
static size_t band_table_rows(struct store *st, size_t i)
{
	MDB_dbi dbi[NEAR_BAND_TABLES];
	assert_int_equal(near_band_tables(st, dbi), NEAR_BAND_TABLES);
	return th_table_rows(st, dbi[i]);
}

/* The band rows of all the band tables. */
static size_t band_rows_stored(struct store *st)
{
	size_t rows = 0;
	for (size_t i = 0; i < NEAR_BAND_TABLES; i++)
		rows += band_table_rows(st, i);
	return rows;
}

/* What the LSH bands give for the set of inode ino's blob: every blob
 * found, in order, by name. */
static void lsh_list(struct store *st, uint64_t ino, char *out)
{
	MDB_txn *txn;
	struct inode in;
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	out[0] = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(ns_get_inode(txn, st, ino, &in), 0);
	assert_int_equal(near_set_get(txn, st, &in.blob, sig), 0);
	assert_true(sig->has_set);
	assert_int_equal(near_lsh_find(txn, st, &sig->set, lsh_name_cb, out), 0);
	store_read_end(st, txn);
	free(sig);
}

struct layout_store {
	uint64_t ino[LAYOUT_PAGES];
	char lsh[LAYOUT_PAGES][LSH_LIST_MAX];     /* found by the bands of layout 4 */
	char lsh_old[LAYOUT_PAGES][LSH_LIST_MAX]; /* by those of the 32-bit sets */
	char answer[LAYOUT_PAGES][1024];
};

/* The sets of a store before layout 4: every set of nearfeat (in key
 * order) computed again from its page, at 32 bits. */
static size_t sets_of_pages(struct wtx *w, uint8_t (*keys)[BLOBKEY_BYTES], struct nearset *sets)
{
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	MDB_cursor *c;
	assert_int_equal(mdb_cursor_open(w->txn, w->st->db_nearfeat, &c), 0);
	MDB_val k, v;
	size_t n = 0;
	for (int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		memcpy(keys[n++], k.mv_data, BLOBKEY_BYTES);
	mdb_cursor_close(c);
	for (size_t i = 0; i < n; i++) {
		struct blobkey bk;
		blobkey_decode(keys[i], &bk);
		int fd = blob_open(w->st, &bk);
		struct stat sb;
		assert_true(fd >= 0 && fstat(fd, &sb) == 0);
		assert_int_equal(near_sig_of_fd(fd, (uint64_t)sb.st_size, sig), 0);
		close(fd);
		assert_true(sig->has_set);
		assert_int_equal(sig->set.bits, 32);
		sets[i] = sig->set;
		sets[i].legacy_bands = true; /* the band keys of those layouts */
		nearset_bands(&sets[i]);
	}
	free(sig);
	return n;
}

/* What a find gives by the 32-bit sets' bands: band by band, the blobs
 * whose key there is the page's, in key order (the order of a band's rows
 * for distinct MD5 prefixes). */
static void lists_of_sets(struct wtx *w, struct layout_store *ls, uint8_t (*keys)[BLOBKEY_BYTES],
			  const struct nearset *sets, size_t n)
{
	for (int p = 0; p < LAYOUT_PAGES; p++) {
		struct inode in;
		uint8_t kb[BLOBKEY_BYTES];
		assert_int_equal(ns_get_inode(w->txn, w->st, ls->ino[p], &in), 0);
		blobkey_encode(&in.blob, kb);
		size_t x = 0;
		while (x < n && memcmp(keys[x], kb, BLOBKEY_BYTES))
			x++;
		assert_true(x < n);
		ls->lsh_old[p][0] = 0;
		for (size_t b = 0; b < NEARSET_BANDS; b++)
			for (size_t y = 0; y < n; y++)
				if (sets[y].band[b] == sets[x].band[b]) {
					struct blobkey k;
					blobkey_decode(keys[y], &k);
					lsh_name_cb(ls->lsh_old[p], &k, 0, 0);
				}
	}
}

/* A sketch in every fingerprint record (layouts 1 and 2). */
static void put_sketch(struct wtx *w, const uint8_t key[BLOBKEY_BYTES])
{
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	struct blobkey bk;
	struct fprec r;
	blobkey_decode(key, &bk);
	assert_int_equal(blob_get(w->txn, w->st, &bk, &r), 0);
	assert_false(r.flags & FPREC_HAS_SKETCH);
	int fd = blob_open(w->st, &bk);
	struct stat sb;
	assert_true(fd >= 0 && fstat(fd, &sb) == 0);
	assert_int_equal(near_sig_of_fd(fd, (uint64_t)sb.st_size, sig), 0);
	close(fd);
	assert_true(sig->has_sketch);
	r.flags |= FPREC_HAS_SKETCH;
	memcpy(r.sketch, sig->sketch, FPREC_SKETCH_BYTES);
	assert_int_equal(blob_put(w->txn, w->st, &bk, &r), 0);
	free(sig);
}

struct old_layout {
	struct layout_store *ls;
	int layout;
};

/* Every simhash row moved into its table and the levels deleted, as in a
 * store before layout 6. */
static void unstage_hashes(struct wtx *w)
{
	struct store *st = w->st;
	for (unsigned i = 0; i < st->near_tables && st->has_nearhstage; i++)
		for (size_t l = 0; l < 2; l++) {
			MDB_cursor *c;
			MDB_val k, v;
			assert_int_equal(mdb_cursor_open(w->txn, st->db_nearhstage[i][l], &c), 0);
			for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0; g = mdb_cursor_get(c, &k, &v, MDB_NEXT))
				assert_int_equal(mdb_put(w->txn, st->db_near[i], &k, &v, MDB_NODUPDATA), 0);
			mdb_cursor_close(c);
			assert_int_equal(mdb_drop(w->txn, st->db_nearhstage[i][l], 1), 0);
		}
	st->has_nearhstage = false;
}

/* The store put back to an older layout, its sets computed from the pages
 * at 32 bits as that code kept them:
 *   1 (before format 2): sets as u32 arrays, band rows in nearlsh (band
 *     key u32 LE -> blobkey), no layout row, a sketch in every record;
 *   2 (before format 3): sets with their band keys (format 2), the band
 *     rows of those keys in nearbands, a sketch in every record;
 *   3 (before format 4): 32-bit sets without band keys (format 3), the
 *     band rows of their keys, no sketch beside a set. */
static int make_layout_cb(struct wtx *w, void *p)
{
	struct old_layout *o = p;
	struct store *st = w->st;
	uint8_t (*keys)[BLOBKEY_BYTES] = calloc(64, BLOBKEY_BYTES);
	struct nearset *sets = calloc(64, sizeof *sets);
	assert_non_null(keys);
	assert_non_null(sets);
	size_t n = sets_of_pages(w, keys, sets);
	assert_int_equal(n, LAYOUT_PAGES);
	lists_of_sets(w, o->ls, keys, sets, n);
	MDB_dbi old;
	if (o->layout == 1)
		assert_int_equal(mdb_dbi_open(w->txn, "nearlsh", MDB_DUPSORT | MDB_DUPFIXED | MDB_CREATE, &old), 0);
	assert_int_equal(mdb_drop(w->txn, st->db_nearlsh, o->layout == 1), 0);
	/* layouts before 5 have no staged band rows, nor their tables */
	for (size_t i = 0; i < 2 && st->has_nearstage; i++)
		assert_int_equal(mdb_drop(w->txn, st->db_nearstage[i], 1), 0);
	st->has_nearstage = false;
	unstage_hashes(w);
	for (size_t i = 0; i < n; i++) {
		uint8_t buf[NEARSET_MAX_BYTES];
		struct blobkey bk;
		blobkey_decode(keys[i], &bk);
		size_t len = o->layout == 1 ? nearset_encode_v1(&sets[i], buf)
			     : o->layout == 2 ? nearset_encode_v2(&sets[i], buf)
					      : nearset_encode_v3(&sets[i], buf);
		assert_true(len > 0);
		MDB_val key = { BLOBKEY_BYTES, keys[i] }, val = { len, buf };
		assert_int_equal(mdb_put(w->txn, st->db_nearfeat, &key, &val, 0), 0);
		if (o->layout < 3)
			put_sketch(w, keys[i]);
		if (o->layout > 1) {
			assert_int_equal(near_put_bands_settled(w->txn, st, &bk, &sets[i]), 0);
			continue;
		}
		for (size_t b = 0; b < NEARSET_BANDS; b++) {
			uint8_t bkey[4];
			put_le32(bkey, nearset_band(&sets[i], b));
			MDB_val bkv = { 4, bkey }, row = { BLOBKEY_BYTES, keys[i] };
			int rc = mdb_put(w->txn, old, &bkv, &row, MDB_NODUPDATA);
			assert_true(rc == 0 || rc == MDB_KEYEXIST);
		}
	}
	free(keys);
	free(sets);
	MDB_val lk = { 11, "near_layout" };
	if (o->layout == 1)
		return mdb_del(w->txn, st->db_meta, &lk, NULL);
	uint8_t lv[4];
	put_le32(lv, (uint32_t)o->layout);
	MDB_val lval = { 4, lv };
	return mdb_put(w->txn, st->db_meta, &lk, &lval, 0);
}

/* Families of near pages (six, four variants each), their LSH finds and
 * answers kept, then the store put back to an older layout. */
static void old_layout_store(const char *dir, struct layout_store *ls, int layout)
{
	struct store *st = th_store(dir, NULL, NULL);
	for (int i = 0; i < LAYOUT_PAGES; i++) {
		char name[32], extra[64];
		snprintf(name, sizeof name, "p%02d.html", i);
		snprintf(extra, sizeof extra, i % 4 ? "variant %d of the page" : "", i % 4);
		char *page = th_page(40 + (uint64_t)i / 4, 120 + 40 * (i / 4), extra);
		ls->ino[i] = th_put_page(st, PD_ROOT_INO, name, page);
		free(page);
	}
	assert_int_equal(sigq_drain(st), 0);
	for (int i = 0; i < LAYOUT_PAGES; i++) {
		lsh_list(st, ls->ino[i], ls->lsh[i]);
		assert_non_null(strchr(ls->lsh[i], ' ')); /* itself at least */
		snprintf(ls->answer[i], sizeof ls->answer[i], "%s", near_of(st, ls->ino[i], &test_root));
	}
	struct old_layout o = { ls, layout };
	assert_int_equal(store_write(st, make_layout_cb, &o), 0);
	assert_int_equal(store_close(st), 0);
}

static void assert_layout_now(struct store *st, const struct layout_store *ls)
{
	MDB_txn *txn;
	uint32_t layout = 0;
	MDB_dbi old;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_layout_get(txn, st, &layout), 0);
	assert_int_equal(layout, NEAR_LAYOUT_VERSION);
	assert_int_equal(mdb_dbi_open(txn, "nearlsh", 0, &old), MDB_NOTFOUND); /* layout 1's table is gone */
	MDB_cursor *c;
	MDB_val k, v;
	size_t n = 0;
	assert_int_equal(mdb_cursor_open(txn, st->db_nearfeat, &c), 0);
	for (int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT), n++)
		assert_int_equal(((const uint8_t *)v.mv_data)[0], NEARSET_FORMAT);
	mdb_cursor_close(c);
	assert_int_equal(n, LAYOUT_PAGES);
	/* no record keeps a sketch beside its set */
	assert_int_equal(mdb_cursor_open(txn, st->db_fp, &c), 0);
	n = 0;
	for (int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT), n++) {
		struct fprec r;
		assert_int_equal(fprec_decode(v.mv_data, v.mv_size, &r), 0);
		assert_false(r.flags & FPREC_HAS_SKETCH);
	}
	mdb_cursor_close(c);
	assert_int_equal(n, LAYOUT_PAGES);
	store_read_end(st, txn);
	char *got = malloc(LSH_LIST_MAX);
	assert_non_null(got);
	for (int i = 0; i < LAYOUT_PAGES; i++) {
		lsh_list(st, ls->ino[i], got);
		assert_string_equal(got, ls->lsh[i]);
		assert_string_equal(near_of(st, ls->ino[i], &test_root), ls->answer[i]);
	}
	free(got);
}

/* A store of an older layout is converted at a writable open, losing
 * nothing and reading no page: the blobs found by the bands and the
 * answers of a store made by this build (layout 4: the sets cut to
 * NEARSET_BITS, the band rows of their keys). Read-only, layout 1 answers
 * nothing rather than from tables it cannot read, and layouts 2 and 3
 * answer as they are, at 32 bits: the same answers, the bands of the
 * 32-bit sets. */
static void check_upgraded_at_open(int layout)
{
	char *dir = th_tmpdir();
	struct layout_store *ls = calloc(1, sizeof *ls);
	assert_non_null(ls);
	old_layout_store(dir, ls, layout);
	struct fsck_opts fo = { 0 };
	struct fsck_result fr;
	char err[512];
	assert_int_equal(fsck_run(th_store_dir(dir), &fo, &fr, err), 0);
	assert_int_equal(fr.problems, 0); /* an older layout is a note, no damage */
	struct store *st;
	struct store_opts ro = { .readonly = true };
	assert_int_equal(archive_open(th_store_dir(dir), &ro, &st, err), 0);
	if (layout == 1) {
		assert_true(st->near_stale);
		assert_string_equal(near_of(st, ls->ino[0], &test_root), "error");
	} else {
		assert_false(st->near_stale);
		char *got = malloc(LSH_LIST_MAX);
		assert_non_null(got);
		for (int i = 0; i < LAYOUT_PAGES; i++) {
			lsh_list(st, ls->ino[i], got);
			assert_string_equal(got, ls->lsh_old[i]);
			assert_string_equal(near_of(st, ls->ino[i], &test_root), ls->answer[i]);
		}
		free(got);
	}
	assert_int_equal(store_close(st), 0);
	assert_int_equal(archive_open(th_store_dir(dir), NULL, &st, err), 0);
	assert_false(st->near_stale);
	assert_layout_now(st, ls);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(ls);
	th_rmdir(dir);
}

/* fsck --repair converts an older layout as a writable open does. */
static void check_fsck_repair(int layout)
{
	char *dir = th_tmpdir();
	struct layout_store *ls = calloc(1, sizeof *ls);
	assert_non_null(ls);
	old_layout_store(dir, ls, layout);
	struct fsck_opts fo = { .repair = true };
	struct fsck_result fr;
	char err[512];
	assert_int_equal(fsck_run(th_store_dir(dir), &fo, &fr, err), 0);
	assert_true(fr.repaired >= 1);
	th_assert_fsck_clean(th_store_dir(dir));
	struct store *st;
	struct store_opts ro = { .readonly = true };
	assert_int_equal(archive_open(th_store_dir(dir), &ro, &st, err), 0);
	assert_false(st->near_stale);
	assert_layout_now(st, ls);
	assert_int_equal(store_close(st), 0);
	free(ls);
	th_rmdir(dir);
}

static void test_layout1_upgraded_at_open(void **state)
{
	(void)state;
	check_upgraded_at_open(1);
}

static void test_layout1_fsck_repair(void **state)
{
	(void)state;
	check_fsck_repair(1);
}

static void test_layout2_upgraded_at_open(void **state)
{
	(void)state;
	check_upgraded_at_open(2);
}

static void test_layout2_fsck_repair(void **state)
{
	(void)state;
	check_fsck_repair(2);
}

static void test_layout3_upgraded_at_open(void **state)
{
	(void)state;
	check_upgraded_at_open(3);
}

static void test_layout3_fsck_repair(void **state)
{
	(void)state;
	check_fsck_repair(3);
}

static int newer_layout_cb(struct wtx *w, void *p)
{
	(void)p;
	uint8_t lv[4];
	put_le32(lv, NEAR_LAYOUT_VERSION + 1);
	MDB_val lk = { 11, "near_layout" }, lval = { 4, lv };
	return mdb_put(w->txn, w->st->db_meta, &lk, &lval, 0);
}

/* A layout newer than this build's is left alone: the writable open
 * refuses (its rows may not decode here), fsck reports it unchecked. */
static void test_newer_layout_left_alone(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char *a = th_page(3, 500, "");
	th_put_page(st, PD_ROOT_INO, "a", a);
	assert_int_equal(sigq_drain(st), 0);
	assert_int_equal(store_write(st, newer_layout_cb, NULL), 0);
	assert_int_equal(store_close(st), 0);
	char err[512];
	assert_int_equal(archive_open(th_store_dir(dir), NULL, &st, err), -EPROTONOSUPPORT);
	struct fsck_opts o = { .repair = true };
	struct fsck_result r;
	assert_int_equal(fsck_run(th_store_dir(dir), &o, &r, err), 0);
	assert_true(r.problems >= 1);
	struct store_opts ro = { .readonly = true };
	assert_int_equal(archive_open(th_store_dir(dir), &ro, &st, err), 0);
	assert_true(st->near_stale);
	assert_int_equal(store_close(st), 0);
	free(a);
	th_rmdir(dir);
}

/* Two blobs of one MD5 (-o nodedup copies: variants 0 and 1) share their
 * band rows: the rows stay while either is stored, and go with the last. */
static void test_bands_shared_prefix(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .nodedup = true };
	struct store *st = th_store(dir, NULL, &o);
	char *a = th_page(61, 300, ""), *b = th_page(61, 300, "one more");
	th_put_page(st, PD_ROOT_INO, "a1.html", a);
	th_put_page(st, PD_ROOT_INO, "a2.html", a);
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	assert_int_equal(sigq_drain(st), 0);
	char *got = malloc(LSH_LIST_MAX), *both = malloc(LSH_LIST_MAX);
	assert_non_null(got);
	assert_non_null(both);
	char n1[BLOBKEY_NAME_MAX + 1], n2[BLOBKEY_NAME_MAX + 1], nb[BLOBKEY_NAME_MAX + 1];
	blob_named(st, "a1.html", n1);
	blob_named(st, "a2.html", n2);
	blob_named(st, "b.html", nb);
	assert_string_not_equal(n1, n2); /* two blobs of one MD5 */
	lsh_list(st, ib, both);
	assert_non_null(strstr(both, n1));
	assert_non_null(strstr(both, n2));
	assert_non_null(strstr(both, nb));
	uint64_t gone;
	bool freed;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a1.html", &gone, &freed), 0);
	assert_true(freed);
	lsh_list(st, ib, got);
	assert_null(strstr(got, n1));
	assert_non_null(strstr(got, n2)); /* the shared rows stayed for the copy left */
	assert_non_null(strstr(got, nb));
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a2.html", &gone, &freed), 0);
	lsh_list(st, ib, got);
	both[0] = 0;
	for (int i = 0; i < NEARSET_BANDS; i++)
		strcat(both, nb);
	assert_string_equal(got, both); /* b alone, once a band */
	assert_int_equal(band_rows_stored(st), NEARSET_BANDS); /* a's rows went with its last copy */
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	free(got);
	free(both);
	th_rmdir(dir);
}

/* ---- band rows staged (near.h, layout 5) ------------------------------------ */

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* lsh_list's names sorted (the tables are read newest first, so the same
 * rows in other tables come in another order). */
static void lsh_sorted(struct store *st, uint64_t ino, char *out)
{
	char *list = malloc(LSH_LIST_MAX), *names[16 * NEARSET_BANDS * 64];
	assert_non_null(list);
	lsh_list(st, ino, list);
	size_t n = 0;
	for (char *t = strtok(list, " "); t; t = strtok(NULL, " ")) {
		assert_true(n < sizeof names / sizeof names[0]);
		names[n++] = t;
	}
	qsort(names, n, sizeof names[0], cmp_name);
	out[0] = 0;
	for (size_t i = 0; i < n; i++) {
		strcat(out, names[i]);
		strcat(out, " ");
	}
	free(list);
}

/* Page i of `families` families of near-duplicates (seeds seed0 on),
 * written as PREFIXnn.html: a version line tells it from the others of its
 * family. */
static uint64_t put_version(struct store *st, const char *prefix, int i, uint64_t seed0, uint64_t families)
{
	char name[32], extra[64];
	snprintf(name, sizeof name, "%s%02d.html", prefix, i);
	snprintf(extra, sizeof extra, "version %d of the page", i);
	char *page = th_page(seed0 + (uint64_t)i % families, 300, extra);
	uint64_t ino = th_put_page(st, PD_ROOT_INO, name, page);
	free(page);
	return ino;
}

static int rebuild_bands_cb(struct wtx *w, void *arg)
{
	(void)arg;
	return near_lsh_rebuild(w->txn, w->st);
}

#define STAGED_PAGES 81

/* With nearbands0 bounded at 32 rows (two pages), pages signed one at a
 * time send their rows on to nearbands1 (full at 64 pages) and from there,
 * by a pass of 8 rows a commit, into nearbands; after an odd number of
 * pages, nearbands0 holds the last page's rows. Every page finds by its bands the same blobs
 * as when every row is in nearbands (a rebuild puts them there); a delete
 * takes rows from whichever table holds them; fsck finds each set's rows
 * and an owner for each row, before and after a reopen (which loses the
 * pass's place). */
static void test_bands_staged(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .stage_rows = 32 };
	struct store *st = th_store(dir, NULL, &o);
	uint64_t ino[STAGED_PAGES];
	for (int i = 0; i < STAGED_PAGES; i++) {
		ino[i] = put_version(st, "p", i, 90, 5);
		assert_int_equal(sigq_drain(st), 0);
	}
	/* all three tables hold rows, and no row is lost or doubled */
	assert_int_equal(band_table_rows(st, 0), NEARSET_BANDS);
	assert_true(band_table_rows(st, 1) > 0);
	/* the pass began with the 64th page's commit: 8 rows a commit since */
	assert_int_equal(band_table_rows(st, 2), (STAGED_PAGES - 63) * 8);
	assert_int_equal(band_rows_stored(st), STAGED_PAGES * NEARSET_BANDS);
	char(*staged)[LSH_LIST_MAX] = malloc(STAGED_PAGES * LSH_LIST_MAX);
	char *got = malloc(LSH_LIST_MAX);
	assert_non_null(staged);
	assert_non_null(got);
	for (int i = 0; i < STAGED_PAGES; i++) {
		lsh_sorted(st, ino[i], staged[i]);
		/* the page's family: its own rows and those of its versions */
		assert_true(strlen(staged[i]) > (BLOBKEY_NAME_MAX + 1) * NEARSET_BANDS);
	}
	/* the first half deleted: their rows go from every table */
	for (int i = 0; i < STAGED_PAGES / 2; i++) {
		char name[32];
		uint64_t gone;
		bool freed;
		snprintf(name, sizeof name, "p%02d.html", i);
		assert_int_equal(ns_unlink(st, PD_ROOT_INO, name, &gone, &freed), 0);
		assert_true(freed);
	}
	assert_int_equal(band_rows_stored(st), (STAGED_PAGES - STAGED_PAGES / 2) * NEARSET_BANDS);
	for (int i = STAGED_PAGES / 2; i < STAGED_PAGES; i++)
		lsh_sorted(st, ino[i], staged[i]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	/* reopened: the same finds; then every row put in nearbands */
	st = th_reopen(dir, &o);
	for (int i = STAGED_PAGES / 2; i < STAGED_PAGES; i++) {
		lsh_sorted(st, ino[i], got);
		assert_string_equal(got, staged[i]);
	}
	assert_int_equal(store_write(st, rebuild_bands_cb, NULL), 0);
	assert_int_equal(band_table_rows(st, 0) + band_table_rows(st, 1), 0);
	assert_int_equal(band_table_rows(st, 2), (STAGED_PAGES - STAGED_PAGES / 2) * NEARSET_BANDS);
	for (int i = STAGED_PAGES / 2; i < STAGED_PAGES; i++) {
		lsh_sorted(st, ino[i], got);
		assert_string_equal(got, staged[i]);
	}
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(staged);
	free(got);
	th_rmdir(dir);
}

/* The store put back to layout 4 (every band row in nearbands, every
 * simhash row in its table, no staged tables) or 5 (the band rows where
 * they are, the simhash rows in their tables, no levels for them). */
static int make_layout_staged_cb(struct wtx *w, void *arg)
{
	int layout = *(const int *)arg;
	struct store *st = w->st;
	if (layout == 4) {
		assert_int_equal(near_lsh_rebuild(w->txn, st), 0);
		for (size_t i = 0; i < 2; i++)
			assert_int_equal(mdb_drop(w->txn, st->db_nearstage[i], 1), 0);
		st->has_nearstage = false;
	}
	unstage_hashes(w);
	uint8_t lv[4];
	put_le32(lv, (uint32_t)layout);
	MDB_val lk = { 11, "near_layout" }, lval = { 4, lv };
	return mdb_put(w->txn, st->db_meta, &lk, &lval, 0);
}

/* The simhash rows of the tables themselves (no levels read). */
static size_t hash_rows_settled(struct store *st)
{
	size_t n = 0;
	for (unsigned i = 0; i < st->near_tables; i++)
		n += th_table_rows(st, st->db_near[i]);
	return n;
}

/* A store of layout 4 or 5 answers as it is read-only, and a writable
 * open records layout 6 with its rows where they are: the same finds and
 * answers, the levels made, fsck clean. */
static void older_layout_recorded(int old)
{
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	enum { N = 8 };
	uint64_t ino[N];
	char(*lists)[LSH_LIST_MAX] = malloc(N * LSH_LIST_MAX), (*answers)[1024] = malloc(N * 1024);
	char *got = malloc(LSH_LIST_MAX);
	assert_non_null(lists);
	assert_non_null(answers);
	assert_non_null(got);
	for (int i = 0; i < N; i++) {
		ino[i] = put_version(st, "q", i, 120, 2);
	}
	assert_int_equal(sigq_drain(st), 0);
	for (int i = 0; i < N; i++) {
		lsh_sorted(st, ino[i], lists[i]);
		snprintf(answers[i], 1024, "%s", near_of(st, ino[i], &test_root));
	}
	assert_int_equal(store_write(st, make_layout_staged_cb, &old), 0);
	size_t hash_rows = hash_rows_settled(st);
	assert_true(hash_rows >= N);
	assert_int_equal(store_close(st), 0);
	struct fsck_result fr = th_fsck(th_store_dir(dir), (struct fsck_opts){ .deep = true });
	assert_int_equal(fr.problems, 0); /* an older layout is a note */
	struct store_opts ro = { .readonly = true };
	st = th_reopen(dir, &ro);
	assert_false(st->near_stale);
	assert_int_equal(st->has_nearstage, old == 5);
	assert_false(st->has_nearhstage);
	for (int i = 0; i < N; i++) {
		lsh_sorted(st, ino[i], got);
		assert_string_equal(got, lists[i]);
		assert_string_equal(near_of(st, ino[i], &test_root), answers[i]);
	}
	assert_int_equal(store_close(st), 0);
	st = th_reopen(dir, NULL);
	assert_true(st->has_nearstage);
	assert_true(st->has_nearhstage);
	MDB_txn *txn;
	uint32_t layout = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_layout_get(txn, st, &layout), 0);
	store_read_end(st, txn);
	assert_int_equal(layout, NEAR_LAYOUT_VERSION);
	/* left where they were */
	assert_int_equal(band_table_rows(st, old == 5 ? 0 : 2), N * NEARSET_BANDS);
	assert_int_equal(hash_rows_settled(st), hash_rows);
	for (int i = 0; i < N; i++) {
		lsh_sorted(st, ino[i], got);
		assert_string_equal(got, lists[i]);
		assert_string_equal(near_of(st, ino[i], &test_root), answers[i]);
	}
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(lists);
	free(answers);
	free(got);
	th_rmdir(dir);
}

static void test_layout4_is_layout6(void **state)
{
	(void)state;
	older_layout_recorded(4);
}

static void test_layout5_is_layout6(void **state)
{
	(void)state;
	older_layout_recorded(5);
}

/* ---- near0 keyed by MD5 prefix (near0 layout 2) ---------------------------- */

/* The bytes of a near0 row's rest (the hash's bits its key does not
 * hold: near.h); the widest block is block 0. */
static size_t rest0(const struct store *st)
{
	unsigned n = st->near_tables, w = 64 / n + (64 % n != 0);
	return (64 - w + 7) / 8;
}

/* near0's rows: how many, and whether each is rest0 + `tail` bytes of
 * value. */
static size_t near0_rows_of(struct store *st, size_t tail)
{
	size_t width = rest0(st) + tail;
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val k, v;
	size_t n = 0;
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	size_t nl = near_hash_levels(st, 0, lv);
	assert_int_equal(store_read_begin(st, &txn), 0);
	for (size_t l = 0; l < nl; l++) {
		assert_int_equal(mdb_cursor_open(txn, lv[l], &c), 0);
		for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
		     g = mdb_cursor_get(c, &k, &v, MDB_NEXT), n++)
			assert_int_equal(v.mv_size, width);
		mdb_cursor_close(c);
	}
	store_read_end(st, txn);
	return n;
}

static uint32_t near0_layout_of(struct store *st)
{
	MDB_txn *txn;
	uint32_t layout;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near0_layout_get(txn, st, &layout), 0);
	store_read_end(st, txn);
	return layout;
}

/* near0 written again as layout 1 (whole blob keys) leaves it: emptied,
 * each record with a simhash indexed again with st->near0_keys, the
 * layout row set to 1. */
static int near0_to_layout1_cb(struct wtx *w, void *p)
{
	(void)p;
	struct store *st = w->st;
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	size_t nl = near_hash_levels(st, 0, lv);
	for (size_t l = 0; l < nl; l++)
		assert_int_equal(mdb_drop(w->txn, lv[l], 0), 0);
	st->near0_keys = true;
	MDB_cursor *c;
	MDB_val k, v;
	assert_int_equal(mdb_cursor_open(w->txn, st->db_fp, &c), 0);
	struct { struct blobkey k; uint64_t h; } rows[64];
	size_t n = 0;
	for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0; g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct fprec r;
		assert_int_equal(fprec_decode(v.mv_data, v.mv_size, &r), 0);
		if (!(r.flags & FPREC_HAS_SIMHASH))
			continue;
		assert_true(n < 64);
		blobkey_decode(k.mv_data, &rows[n].k);
		rows[n++].h = r.simhash;
	}
	mdb_cursor_close(c);
	for (size_t i = 0; i < n; i++) {
		/* near_add writes the other tables' rows again: they are there */
		int rc = near_add(w->txn, st, &rows[i].k, rows[i].h);
		if (rc)
			return rc;
	}
	return near0_layout_put(w->txn, st, 1);
}

/* Pages with near neighbours; the answers of each (into ans). */
enum { N0 = 6 };
static void near0_answers(struct store *st, const uint64_t *ino, char ans[N0][512])
{
	for (int i = 0; i < N0; i++)
		snprintf(ans[i], 512, "%s", near_of(st, ino[i], &test_root));
}

static struct store *near0_pages(const char *dir, uint64_t *ino, char ans[N0][512])
{
	struct store *st = th_store(dir, NULL, NULL);
	static const char *extra[N0] = { "", "one more sentence here", "", "and another", "", "" };
	static const unsigned seed[N0] = { 11, 11, 12, 12, 13, 14 };
	for (int i = 0; i < N0; i++) {
		char *page = th_page(seed[i], 600, extra[i]), name[16];
		snprintf(name, sizeof name, "p%d.html", i);
		ino[i] = th_put_page(st, PD_ROOT_INO, name, page);
		free(page);
	}
	assert_int_equal(sigq_drain(st), 0);
	near0_answers(st, ino, ans);
	assert_string_not_equal(ans[0], "ENODATA"); /* the fixture: p0 and p1 are near */
	assert_non_null(strstr(ans[0], "p1.html"));
	return st;
}

static void check_near0_converted(bool by_fsck)
{
	char *dir = th_tmpdir();
	uint64_t ino[N0];
	char before[N0][512], now[N0][512];
	struct store *st = near0_pages(dir, ino, before);
	assert_int_equal(near0_layout_of(st), NEAR0_LAYOUT_VERSION);
	size_t rows = near0_rows_of(st, NEAR0_PREFIX);
	assert_int_equal(rows, N0);
	assert_int_equal(store_write(st, near0_to_layout1_cb, NULL), 0);
	assert_int_equal(near0_rows_of(st, BLOBKEY_BYTES), rows);
	assert_int_equal(store_close(st), 0);
	/* an older layout is a note, no damage; read-only, it answers as is */
	struct fsck_opts fo = { 0 };
	struct fsck_result fr = th_fsck(th_store_dir(dir), fo);
	assert_int_equal(fr.problems, 0);
	assert_true(fr.notes >= 1);
	struct store_opts ro = { .readonly = true };
	st = th_reopen(dir, &ro);
	assert_true(st->near0_keys);
	near0_answers(st, ino, now);
	for (int i = 0; i < N0; i++)
		assert_string_equal(now[i], before[i]);
	assert_int_equal(store_close(st), 0);
	if (by_fsck) {
		fo.repair = true;
		fr = th_fsck(th_store_dir(dir), fo);
		assert_true(fr.repaired >= 1);
	}
	st = th_reopen(dir, NULL);
	assert_false(st->near0_keys);
	assert_int_equal(near0_layout_of(st), NEAR0_LAYOUT_VERSION);
	assert_int_equal(near0_rows_of(st, NEAR0_PREFIX), rows);
	near0_answers(st, ino, now);
	for (int i = 0; i < N0; i++)
		assert_string_equal(now[i], before[i]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

static void test_near0_layout1_upgraded_at_open(void **state)
{
	(void)state;
	check_near0_converted(false);
}

static void test_near0_layout1_fsck_repair(void **state)
{
	(void)state;
	check_near0_converted(true);
}

/* A batch of the near0 conversion run again after the map was grown
 * (store_commit.c rolls its writes back and calls it again) starts where
 * it started: every row ends in layout 2 and the answers are unchanged.
 * The step converts two blobs a batch and reports a full map once. */
static int near0_step_calls;
static int near0_step_map_full_once(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch,
				    bool *finished)
{
	(void)batch;
	int rc = near0_layout_convert(txn, st, next, 2, finished);
	if (!rc && near0_step_calls++ == 0)
		return -ECHRNG; /* PD_EMAPFULL (store_int.h) */
	return rc;
}

static void test_near0_batch_run_again(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	uint64_t ino[N0];
	char before[N0][512], now[N0][512];
	struct store *st = near0_pages(dir, ino, before);
	size_t rows = near0_rows_of(st, NEAR0_PREFIX);
	assert_int_equal(store_write(st, near0_to_layout1_cb, NULL), 0);
	near0_step_calls = 0;
	assert_int_equal(near_meta_upgrade(st, "near0_layout", 1, NEAR0_LAYOUT_VERSION, near0_step_map_full_once), 0);
	assert_true(near0_step_calls > 2);
	assert_int_equal(near0_layout_of(st), NEAR0_LAYOUT_VERSION);
	assert_int_equal(near0_rows_of(st, NEAR0_PREFIX), rows);
	near0_answers(st, ino, now);
	for (int i = 0; i < N0; i++)
		assert_string_equal(now[i], before[i]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* Copies of one page under -o nodedup: variants of one MD5, one near0
 * row for them all, which stays until the last goes. */
static void test_near0_shared_row(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .nodedup = true };
	struct store *st = th_store(dir, NULL, &o);
	char *page = th_page(21, 600, ""), *other = th_page(22, 600, "");
	uint64_t c[3];
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof name, "copy%d.html", i);
		c[i] = th_put_page(st, PD_ROOT_INO, name, page);
	}
	th_put_page(st, PD_ROOT_INO, "other.html", other);
	assert_int_equal(sigq_drain(st), 0);
	assert_int_equal(near0_rows_of(st, NEAR0_PREFIX), 2);
	const char *a = near_of(st, c[0], &test_root);
	assert_non_null(strstr(a, "copy1.html"));
	assert_non_null(strstr(a, "copy2.html"));
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "copy0.html", &gone_ino, &gone), 0);
	assert_int_equal(near0_rows_of(st, NEAR0_PREFIX), 2);
	a = near_of(st, c[1], &test_root);
	assert_non_null(strstr(a, "copy2.html"));
	assert_null(strstr(a, "copy0.html"));
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	st = th_reopen(dir, &o);
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "copy1.html", &gone_ino, &gone), 0);
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "copy2.html", &gone_ino, &gone), 0);
	assert_int_equal(near0_rows_of(st, NEAR0_PREFIX), 1);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(page);
	free(other);
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
		cmocka_unit_test(test_fsck_near),
		cmocka_unit_test(test_fsck_sets),
		cmocka_unit_test(test_fsck_sets_spill_fails),
		cmocka_unit_test(test_fsck_shared_simhash),
		cmocka_unit_test(test_fsck_set_hashes),
		cmocka_unit_test(test_old_version_upgraded_at_open),
		cmocka_unit_test(test_old_version_fsck_repair),
		cmocka_unit_test(test_layout1_upgraded_at_open),
		cmocka_unit_test(test_layout1_fsck_repair),
		cmocka_unit_test(test_layout2_upgraded_at_open),
		cmocka_unit_test(test_layout2_fsck_repair),
		cmocka_unit_test(test_layout3_upgraded_at_open),
		cmocka_unit_test(test_layout3_fsck_repair),
		cmocka_unit_test(test_newer_layout_left_alone),
		cmocka_unit_test(test_bands_shared_prefix),
		cmocka_unit_test(test_bands_staged),
		cmocka_unit_test(test_layout4_is_layout6),
		cmocka_unit_test(test_layout5_is_layout6),
		cmocka_unit_test(test_near0_layout1_upgraded_at_open),
		cmocka_unit_test(test_near0_layout1_fsck_repair),
		cmocka_unit_test(test_near0_shared_row),
		cmocka_unit_test(test_near0_batch_run_again),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
