/* test_bitfilter.c - unit tests of the growing URL-seen filter
 * (core/urlseen/bitfilter.c).
 *
 * The model against measured rates; no false negatives through growth,
 * splits and reopening; the rate and the memory kept while growing from a
 * small start; the file's structure (bitfilter_verify) after every kind of
 * change; several processes on one file, also while leaves split; a writer
 * killed at random moments.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "urlseen/bitfilter.h"

/* ---- helpers ---- */

static uint64_t mix(uint64_t z)
{
	z += UINT64_C(0x9E3779B97F4A7C15);
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* Key number i of a fixed family: distinct for distinct i. */
static void key_of(uint64_t family, uint64_t i, uint8_t key[16])
{
	uint64_t a = mix(i ^ (family << 48)), b = mix(a ^ 0x5555);
	memcpy(key, &a, 8);
	memcpy(key + 8, &b, 8);
}

static uint8_t *keys_range(uint64_t family, uint64_t from, size_t n)
{
	uint8_t *k = malloc(n * 16 + 1);
	assert_non_null(k);
	for (size_t i = 0; i < n; i++)
		key_of(family, from + i, k + 16 * i);
	return k;
}

static char tmpdir[256];

static int setup_dir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof tmpdir, "/tmp/test_bitfilter.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
	(void)state;
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd);
}

static const char *path_of(const char *name)
{
	static char p[512];
	snprintf(p, sizeof p, "%s/%s", tmpdir, name);
	unlink(p);
	return p;
}

static struct bitfilter *make(const char *name, double fpr, uint64_t expected, uint32_t lpk,
			      uint32_t max_leaf_lines)
{
	struct bitfilter_params p;
	struct bitfilter *f = NULL;
	bitfilter_params_default(&p);
	p.fpr = fpr;
	p.expected = expected;
	p.lines_per_key = lpk;
	p.max_leaf_lines = max_leaf_lines;
	int rc = bitfilter_create(name ? path_of(name) : NULL, &p, &f);
	if (rc)
		fail_msg("bitfilter_create: %s", strerror(-rc));
	return f;
}

/* Add keys [from, from+n) of family in batches; returns how many were new.
 * recorded (may be NULL): recorded[i] is set when key from+i was new, that
 * is, recorded. (A key reported seen by a false positive is not recorded:
 * once its leaf has grown it may test new again, which is the right answer
 * for it.) */
static size_t add_range(struct bitfilter *f, uint64_t family, uint64_t from, size_t n,
			size_t batch, bool *recorded)
{
	size_t fresh = 0;
	bool *seen = malloc(batch);
	assert_non_null(seen);
	for (size_t i = 0; i < n; i += batch) {
		size_t m = n - i < batch ? n - i : batch, nn = 0;
		uint8_t *k = keys_range(family, from + i, m);
		int rc = bitfilter_check_and_add(f, k, m, seen, &nn);
		if (rc)
			fail_msg("check_and_add: %s", strerror(-rc));
		fresh += nn;
		if (recorded)
			for (size_t j = 0; j < m; j++)
				recorded[i + j] = !seen[j];
		free(k);
	}
	free(seen);
	return fresh;
}

/* How many of keys [from, from+n) test as seen; only those with only[i]
 * set when only is not NULL. */
static size_t count_seen_of(struct bitfilter *f, uint64_t family, uint64_t from, size_t n,
			    const bool *only)
{
	size_t hits = 0, batch = 8192;
	bool *seen = malloc(batch);
	assert_non_null(seen);
	assert_int_equal(bitfilter_lock(f, false), 0);
	for (size_t i = 0; i < n; i += batch) {
		size_t m = n - i < batch ? n - i : batch;
		uint8_t *k = keys_range(family, from + i, m);
		bitfilter_check(f, k, m, seen);
		for (size_t j = 0; j < m; j++)
			hits += seen[j] && (!only || only[i + j]);
		free(k);
	}
	bitfilter_unlock(f);
	free(seen);
	return hits;
}

static size_t count_seen(struct bitfilter *f, uint64_t family, uint64_t from, size_t n)
{
	return count_seen_of(f, family, from, n, NULL);
}

static size_t count_true(const bool *v, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += v[i];
	return c;
}

/* Every recorded key of the range tests as seen: no false negatives. */
static void assert_recorded_found(struct bitfilter *f, uint64_t family, uint64_t from,
				  size_t n, const bool *recorded)
{
	size_t want = count_true(recorded, n), got = count_seen_of(f, family, from, n, recorded);
	if (got != want)
		fail_msg("%zu of %zu recorded keys not found", want - got, want);
}

static void assert_verified(struct bitfilter *f)
{
	char msg[256];
	assert_int_equal(bitfilter_lock(f, false), 0);
	int rc = bitfilter_verify(f, msg, sizeof msg);
	bitfilter_unlock(f);
	if (rc)
		fail_msg("bitfilter_verify: %s", msg);
}

static struct bitfilter_stats stats_of(struct bitfilter *f)
{
	struct bitfilter_stats st;
	assert_int_equal(bitfilter_lock(f, false), 0);
	assert_int_equal(bitfilter_stats(f, &st), 0);
	bitfilter_unlock(f);
	return st;
}

/* ---- the model ---- */

static void test_model(void **state)
{
	(void)state;
	uint32_t k;
	double load;
	/* the rate rises with the load, from 0 */
	assert_true(bitfilter_model_fpr(12, 2, 0) == 0);
	double prev = 0;
	for (double l = 1; l < 60; l += 1) {
		double r = bitfilter_model_fpr(12, 2, l);
		assert_true(r > prev);
		prev = r;
	}
	/* out of range */
	assert_true(bitfilter_model_fpr(13, 2, 10) == 1);
	assert_true(bitfilter_model_fpr(0, 1, 10) == 1);
	assert_true(bitfilter_model_fpr(34, 2, 10) == 1);
	assert_int_equal(bitfilter_best_k(0, 2, &k, &load), -EINVAL);
	assert_int_equal(bitfilter_best_k(0.5, 2, &k, &load), -EINVAL);
	assert_int_equal(bitfilter_best_k(1e-3, 3, &k, &load), -EINVAL);
	/* the chosen k meets the rate at its load, and the next k holds less */
	for (double r = 1e-6; r < 0.2; r *= 10) {
		for (uint32_t lpk = 1; lpk <= 2; lpk++) {
			assert_int_equal(bitfilter_best_k(r, lpk, &k, &load), 0);
			assert_int_equal(k % lpk, 0);
			double got = bitfilter_model_fpr(k, lpk, load);
			assert_true(got <= r * (1 + 1e-9) && got > r * 0.999);
			/* bits per key within 3% (two lines) / 20% (one) of a
			 * classic filter's -ln r / ln^2 2 at rates >= 1e-5 */
			double classic = -log(r) / (M_LN2 * M_LN2), bits = 512 / load;
			if (r >= 1e-5)
				assert_true(bits / classic < (lpk == 2 ? 1.06 : 1.25));
		}
	}
}

/* The measured rate of a filter at its design load agrees with the model,
 * for one and for two lines per key. */
static void check_measured_rate(uint32_t lpk)
{
	const size_t n = 200000, probes = 400000;
	struct bitfilter *f = make(NULL, 0.01, n, lpk, 0);
	bool *rec = malloc(n);
	assert_non_null(rec);
	size_t fresh = add_range(f, 1, 0, n, 4096, rec);
	assert_true(fresh <= n && fresh > n - n / 50);
	struct bitfilter_stats st = stats_of(f);
	assert_recorded_found(f, 1, 0, n, rec);
	free(rec);
	double measured = (double)count_seen(f, 2, 0, probes) / probes;
	print_message("lpk %u: %llu keys, %llu leaves, model %.5f, measured %.5f\n", lpk,
		      (unsigned long long)st.keys, (unsigned long long)st.leaves, st.model_fpr,
		      measured);
	/* the filter keeps the model under the target */
	assert_true(st.model_fpr <= 0.01);
	/* and the model is right: within 5 standard deviations */
	double sd = sqrt(st.model_fpr * (1 - st.model_fpr) / probes);
	assert_true(fabs(measured - st.model_fpr) < 5 * sd + 1e-4);
	assert_verified(f);
	bitfilter_close(f);
}

static void test_measured_rate_two_lines(void **state)
{
	(void)state;
	check_measured_rate(2);
}

static void test_measured_rate_one_line(void **state)
{
	(void)state;
	check_measured_rate(1);
}

/* ---- growth ---- */

/* From a filter made for 1000 keys to 300,000: every key stays found, the
 * leaves split (small leaves here), the rate stays under the target, and
 * the bits stay near a filter sized in advance. */
static void test_growth(void **state)
{
	(void)state;
	const size_t n = 300000;
	const double fpr = 1e-3;
	struct bitfilter *f = make("grow", fpr, 1000, 2, 1024);
	bool *rec = malloc(n);
	assert_non_null(rec);
	size_t fresh = add_range(f, 3, 0, n, 4096, rec);
	/* a false positive while adding loses a key: a few at most */
	assert_true(fresh <= n && fresh >= n - n * fpr * 2);
	struct bitfilter_stats st = stats_of(f);
	print_message("%llu keys in %llu leaves (depth %u): %llu grows, %llu splits, "
		      "model rate %.3g, bits %.3f x theory, log %llu bytes\n",
		      (unsigned long long)st.keys, (unsigned long long)st.leaves, st.depth,
		      (unsigned long long)st.grows, (unsigned long long)st.splits, st.model_fpr,
		      st.bits_bytes / st.theoretical_bytes, (unsigned long long)st.log_bytes);
	assert_int_equal(st.keys, fresh);
	assert_true(st.splits > 0 && st.grows > 0);
	assert_true(st.model_fpr <= fpr);
	assert_true(st.bits_bytes / st.theoretical_bytes < 1.2);
	assert_true(st.log_bytes >= st.keys * 8);
	assert_recorded_found(f, 3, 0, n, rec);
	free(rec);
	double measured = (double)count_seen(f, 4, 0, 300000) / 300000;
	assert_true(measured <= fpr * 1.15);
	assert_verified(f);
	bitfilter_close(f);
}

static void test_reopen(void **state)
{
	(void)state;
	char path[512];
	struct bitfilter *f;
	snprintf(path, sizeof path, "%s", path_of("reopen"));
	struct bitfilter_params p;
	bitfilter_params_default(&p);
	p.expected = 5000;
	p.max_leaf_lines = 256;
	assert_int_equal(bitfilter_create(path, &p, &f), 0);
	bool *rec = malloc(120000);
	assert_non_null(rec);
	size_t fresh = add_range(f, 5, 0, 60000, 1000, rec);
	struct bitfilter_stats a = stats_of(f);
	assert_int_equal(a.keys, fresh);
	bitfilter_close(f);

	assert_int_equal(bitfilter_open(path, false, &f), 0);
	struct bitfilter_stats b = stats_of(f);
	assert_int_equal(b.keys, a.keys);
	assert_int_equal(b.leaves, a.leaves);
	assert_int_equal(b.bits_bytes, a.bits_bytes);
	assert_recorded_found(f, 5, 0, 60000, rec);
	/* keep adding after the reopen */
	add_range(f, 5, 60000, 60000, 1000, rec + 60000);
	assert_recorded_found(f, 5, 0, 120000, rec);
	assert_verified(f);
	bitfilter_close(f);

	/* read-only: tests work, adds do not */
	assert_int_equal(bitfilter_open(path, true, &f), 0);
	assert_recorded_found(f, 5, 0, 120000, rec);
	free(rec);
	assert_int_equal(bitfilter_lock(f, true), -EROFS);
	uint8_t k[16];
	key_of(6, 0, k);
	assert_int_equal(bitfilter_add(f, k, 1), -EROFS);
	bitfilter_close(f);

	/* an existing file is not replaced */
	assert_int_equal(bitfilter_create(path, &p, &f), -EEXIST);
	unlink(path);
}

/* path_of() gives a fresh path in the test directory (removing any file of
 * that name); make() creates the filter there, or in a temporary file. */

/* A big first batch on a small filter: the filter jumps to size. */
static void test_big_batch(void **state)
{
	(void)state;
	struct bitfilter *f = make(NULL, 1e-3, 100, 2, 0);
	size_t fresh = add_range(f, 7, 0, 100000, 100000, NULL);
	assert_int_equal(fresh, 100000); /* tested against the filter before the batch */
	struct bitfilter_stats st = stats_of(f);
	assert_true(st.model_fpr <= 1e-3);
	assert_int_equal(count_seen(f, 7, 0, 100000), 100000);
	assert_verified(f);
	bitfilter_close(f);
}

/* ---- the calls ---- */

/* Every way keys are recorded writes each leaf's log right: bitfilter_add
 * of more keys than it takes at a time (4096), bitfilter_record of a check
 * (the keys it found new), bitfilter_record after the lock was let go (it
 * falls back to adding). The batches cover several leaves and cross log
 * chunks (2047 keys); the keys must then survive rebuilds of every leaf,
 * which read them back from the logs only, and a reopen. */
static void test_record_paths(void **state)
{
	(void)state;
	const size_t n = 30000;
	char path[512];
	snprintf(path, sizeof path, "%s", path_of("paths"));
	struct bitfilter_params p;
	struct bitfilter *f;
	bitfilter_params_default(&p);
	p.expected = 20000;
	p.max_leaf_lines = 128; /* several leaves, none larger */
	assert_int_equal(bitfilter_create(path, &p, &f), 0);
	bool *seen = malloc(n), *rec = malloc(3 * n);
	assert_non_null(seen);
	assert_non_null(rec);

	/* add: 30000 keys in one call, no check before it */
	uint8_t *k = keys_range(21, 0, n);
	assert_int_equal(bitfilter_lock(f, true), 0);
	assert_int_equal(bitfilter_add(f, k, n), 0);
	bitfilter_unlock(f);
	free(k);
	for (size_t i = 0; i < n; i++)
		rec[i] = true;
	assert_int_equal(stats_of(f).keys, n);

	/* record right after a check of a batch in which every other key was
	 * added before */
	k = malloc(n * 16);
	assert_non_null(k);
	for (size_t i = 0; i < n; i++)
		key_of(21, i % 2 ? n + i : i, k + 16 * i);
	assert_int_equal(bitfilter_lock(f, true), 0);
	size_t fresh = bitfilter_check(f, k, n, seen);
	assert_true(fresh <= n / 2 && fresh >= n / 2 - 5);
	assert_int_equal(bitfilter_record(f, k, n, seen), 0);
	bitfilter_unlock(f);
	for (size_t i = 1; i < n; i += 2)
		rec[n + i] = !seen[i];
	free(k);

	/* record after the lock was let go and taken again */
	k = keys_range(21, 2 * n, n);
	assert_int_equal(bitfilter_lock(f, true), 0);
	fresh = bitfilter_check(f, k, n, seen);
	bitfilter_unlock(f);
	assert_int_equal(bitfilter_lock(f, true), 0);
	assert_int_equal(bitfilter_record(f, k, n, seen), 0);
	bitfilter_unlock(f);
	for (size_t i = 0; i < n; i++)
		rec[2 * n + i] = !seen[i];
	free(k);

	struct bitfilter_stats st = stats_of(f);
	size_t want = n + fresh;
	for (size_t i = 1; i < n; i += 2)
		want += rec[n + i];
	assert_int_equal(st.keys, want);
	uint64_t splits = st.splits, leaves = st.leaves;
	assert_true(leaves >= 8);
	/* 300000 more keys, ten times what the leaves hold at their largest:
	 * every leaf splits, and its children are built from its log alone */
	add_range(f, 22, 0, 300000, 4096, NULL);
	st = stats_of(f);
	print_message("%llu leaves, %llu splits -> %llu leaves, %llu splits\n",
		      (unsigned long long)leaves, (unsigned long long)splits,
		      (unsigned long long)st.leaves, (unsigned long long)st.splits);
	assert_true(st.splits >= splits + leaves);
	for (size_t i = 0; i < n; i++)
		rec[n + i] = rec[n + i] && i % 2;
	assert_recorded_found(f, 21, 0, 3 * n, rec);
	assert_verified(f);
	bitfilter_close(f);

	assert_int_equal(bitfilter_open(path, true, &f), 0);
	assert_recorded_found(f, 21, 0, 3 * n, rec);
	bitfilter_close(f);
	free(seen);
	free(rec);
	unlink(path);
}

static void test_repeats_within_a_call(void **state)
{
	(void)state;
	struct bitfilter *f = make(NULL, 1e-4, 1000, 2, 0);
	uint8_t k[6 * 16];
	bool seen[6];
	key_of(8, 1, k);
	key_of(8, 2, k + 16);
	memcpy(k + 32, k, 16);      /* a repeat of key 0 */
	key_of(8, 3, k + 48);
	memcpy(k + 64, k + 16, 16); /* of key 1 */
	memcpy(k + 80, k, 16);      /* key 0 again */
	size_t nnew;
	assert_int_equal(bitfilter_check_and_add(f, k, 6, seen, &nnew), 0);
	assert_int_equal(nnew, 3);
	bool want[6] = { false, false, true, false, true, true };
	for (int i = 0; i < 6; i++)
		assert_int_equal(seen[i], want[i]);
	struct bitfilter_stats st = stats_of(f);
	assert_int_equal(st.keys, 3);
	assert_int_equal(bitfilter_check_and_add(f, k, 6, seen, &nnew), 0);
	assert_int_equal(nnew, 0);
	bitfilter_close(f);
}

static void test_lock_rules(void **state)
{
	(void)state;
	struct bitfilter *f = make(NULL, 1e-4, 1000, 2, 0);
	uint8_t k[16];
	key_of(9, 1, k);
	assert_int_equal(bitfilter_add(f, k, 1), -EPERM);
	assert_int_equal(bitfilter_lock(f, false), 0);
	assert_int_equal(bitfilter_add(f, k, 1), -EPERM);
	assert_int_equal(bitfilter_lock(f, true), -EBUSY);
	bitfilter_unlock(f);
	assert_int_equal(bitfilter_lock(f, true), 0);
	assert_int_equal(bitfilter_add(f, k, 1), 0);
	assert_int_equal(bitfilter_add(f, k, 0), 0);
	bitfilter_unlock(f);
	bitfilter_unlock(f); /* harmless */
	bitfilter_close(f);
}

static void test_bad_params_and_files(void **state)
{
	(void)state;
	struct bitfilter_params p;
	struct bitfilter *f;
	bitfilter_params_default(&p);
	p.fpr = 0;
	assert_int_equal(bitfilter_create(NULL, &p, &f), -EINVAL);
	p.fpr = 0.5;
	assert_int_equal(bitfilter_create(NULL, &p, &f), -EINVAL);
	p.fpr = 1e-3;
	p.lines_per_key = 3;
	assert_int_equal(bitfilter_create(NULL, &p, &f), -EINVAL);

	const char *path = path_of("junk");
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	for (int i = 0; i < 300000; i++)
		fputs("not a filter ", fp);
	fclose(fp);
	assert_int_equal(bitfilter_open(path, false, &f), -EINVAL);
	truncate(path, 100);
	assert_int_equal(bitfilter_open(path, false, &f), -EINVAL);
	assert_int_equal(bitfilter_open(path_of("missing"), false, &f), -ENOENT);
}

/* A damaged directory is found when the lock is taken, not by a crash. */
static void test_damage_detected(void **state)
{
	(void)state;
	char path[512];
	snprintf(path, sizeof path, "%s", path_of("damage"));
	struct bitfilter_params p;
	struct bitfilter *f;
	bitfilter_params_default(&p);
	p.expected = 100000;
	assert_int_equal(bitfilter_create(path, &p, &f), 0);
	add_range(f, 10, 0, 1000, 1000, NULL);
	bitfilter_close(f);

	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint32_t bad = 60000; /* a leaf id past the table */
	assert_int_equal(pwrite(fd, &bad, 4, 4096), 4);
	close(fd);
	assert_int_equal(bitfilter_open(path, false, &f), 0);
	assert_int_equal(bitfilter_lock(f, false), -EUCLEAN);
	bitfilter_close(f);

	/* a leaf's bits pointing past the end of the file */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(bitfilter_create(path, &p, &f), 0);
	bitfilter_close(f);
	fd = open(path, O_RDWR);
	uint64_t off = UINT64_C(1) << 40;
	assert_int_equal(pwrite(fd, &off, 8, 528384 + 16), 8);
	close(fd);
	assert_int_equal(bitfilter_open(path, false, &f), 0);
	assert_int_equal(bitfilter_lock(f, false), -EUCLEAN);
	bitfilter_close(f);
	unlink(path);
}

/* ---- several processes ---- */

/* Four processes add overlapping ranges of one key family into one file
 * that starts tiny, so leaves grow and split while the others wait for the
 * lock. Each key must be reported new by exactly one process (a false
 * positive may hide a handful). */
static void test_processes_share_a_file(void **state)
{
	(void)state;
	const int nproc = 4;
	const size_t per = 20000, total = 50000; /* process p adds [p*10000, p*10000+20000) */
	char path[512];
	snprintf(path, sizeof path, "%s", path_of("shared"));
	struct bitfilter_params p;
	struct bitfilter *f;
	bitfilter_params_default(&p);
	p.fpr = 1e-5;
	p.expected = 500;
	p.max_leaf_lines = 128;
	assert_int_equal(bitfilter_create(path, &p, &f), 0);
	bitfilter_close(f);

	unsigned *hits = mmap(NULL, total * sizeof *hits, PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(hits != MAP_FAILED);
	pid_t pids[8];
	for (int i = 0; i < nproc; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			struct bitfilter *g;
			if (bitfilter_open(path, false, &g))
				_exit(2);
			size_t batch = 97 + 50 * (size_t)i;
			bool *seen = malloc(batch);
			for (size_t a = 0; a < per; a += batch) {
				size_t m = per - a < batch ? per - a : batch;
				uint64_t from = (uint64_t)i * 10000 + a;
				uint8_t *k = malloc(m * 16);
				for (size_t j = 0; j < m; j++)
					key_of(11, from + j, k + 16 * j);
				if (bitfilter_check_and_add(g, k, m, seen, NULL))
					_exit(3);
				for (size_t j = 0; j < m; j++)
					if (!seen[j])
						__atomic_add_fetch(&hits[from + j], 1, __ATOMIC_RELAXED);
				free(k);
			}
			free(seen);
			bitfilter_close(g);
			_exit(0);
		}
	}
	for (int i = 0; i < nproc; i++) {
		int st;
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	size_t once = 0;
	for (size_t i = 0; i < total; i++) {
		if (hits[i] > 1)
			fail_msg("key %zu reported new by %u processes", i, hits[i]);
		once += hits[i];
	}
	assert_true(once >= total - 5);
	assert_int_equal(bitfilter_open(path, false, &f), 0);
	struct bitfilter_stats st = stats_of(f);
	print_message("%zu keys new once; %llu leaves, %llu splits, %llu grows\n", once,
		      (unsigned long long)st.leaves, (unsigned long long)st.splits,
		      (unsigned long long)st.grows);
	assert_int_equal(st.keys, once);
	assert_true(st.splits > 0);
	bool *rec = malloc(total);
	assert_non_null(rec);
	for (size_t i = 0; i < total; i++)
		rec[i] = hits[i] > 0;
	assert_recorded_found(f, 11, 0, total, rec);
	free(rec);
	assert_verified(f);
	bitfilter_close(f);
	munmap(hits, total * sizeof *hits);
	unlink(path);
}

/* A writer killed at random moments (mid-batch, mid-rebuild): the file
 * stays consistent and every batch whose add returned is found. */
static void test_killed_writer(void **state)
{
	(void)state;
	char path[512];
	snprintf(path, sizeof path, "%s", path_of("killed"));
	struct bitfilter_params p;
	struct bitfilter *f;
	bitfilter_params_default(&p);
	p.expected = 200;
	p.max_leaf_lines = 128;
	assert_int_equal(bitfilter_create(path, &p, &f), 0);
	bitfilter_close(f);

	const size_t maxkeys = 4000000;
	uint64_t *done = mmap(NULL, sizeof *done + maxkeys, PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(done != MAP_FAILED);
	bool *rec = (bool *)(done + 1); /* set once the add of its batch returned */
	*done = 0;
	struct timespec ts = { 0, 0 };
	for (int round = 0; round < 6; round++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct bitfilter *g;
			if (bitfilter_open(path, false, &g))
				_exit(2);
			bool seen[500];
			for (uint64_t a = *done; a + 500 <= maxkeys; a += 500) {
				uint8_t k[500 * 16];
				for (size_t j = 0; j < 500; j++)
					key_of(12, a + j, k + 16 * j);
				if (bitfilter_check_and_add(g, k, 500, seen, NULL))
					_exit(3);
				for (size_t j = 0; j < 500; j++)
					rec[a + j] = !seen[j];
				__atomic_store_n(done, a + 500, __ATOMIC_SEQ_CST);
			}
			_exit(4);
		}
		ts.tv_nsec = 20000000 + 13000000 * round;
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFSIGNALED(st));
		assert_int_equal(bitfilter_open(path, false, &f), 0);
		assert_verified(f);
		uint64_t n = __atomic_load_n(done, __ATOMIC_SEQ_CST);
		assert_recorded_found(f, 12, 0, n, rec);
		bitfilter_close(f);
	}
	print_message("%llu keys added across 6 killed writers\n", (unsigned long long)*done);
	assert_true(*done > 0);
	munmap(done, sizeof *done + maxkeys);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_model),
		cmocka_unit_test(test_measured_rate_two_lines),
		cmocka_unit_test(test_measured_rate_one_line),
		cmocka_unit_test(test_growth),
		cmocka_unit_test(test_reopen),
		cmocka_unit_test(test_big_batch),
		cmocka_unit_test(test_record_paths),
		cmocka_unit_test(test_repeats_within_a_call),
		cmocka_unit_test(test_lock_rules),
		cmocka_unit_test(test_bad_params_and_files),
		cmocka_unit_test(test_damage_detected),
		cmocka_unit_test(test_processes_share_a_file),
		cmocka_unit_test(test_killed_writer),
	};
	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
