/* test_extsort.c - records sorted in bounded memory (base/extsort.h): the
 * records come back in memcmp order, every one and no other, repeats
 * kept (the in-place radix sort against qsort), whether they fit the
 * buffer (no file made) or were spilled in runs of every size down to
 * the least buffer; an empty sort returns none; records of one byte and
 * of odd sizes; the runs go to the directory given, or to another. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/extsort.h"
#include "helpers.h"

static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static int cmp_rs;
static int cmp_ref(const void *a, const void *b)
{
	return memcmp(a, b, (size_t)cmp_rs);
}

/* How the records' bytes are drawn. */
enum draw {
	ANY,	 /* any byte */
	REPEATS, /* three values: many records equal */
	PREFIX,	 /* all but the last two bytes zero: a long shared prefix */
};

/* n records of rs bytes drawn so, sorted with mem bytes: the same as
 * qsort of them, and *runs the runs written. */
static void sort_matches(size_t rs, size_t n, size_t mem, int dirfd, enum draw draw, size_t *runs)
{
	uint8_t *in = malloc(n * rs + 1);
	assert_non_null(in);
	uint64_t x = 0x9e3779b97f4a7c15ull ^ (n * 31 + rs);
	for (size_t i = 0; i < n * rs; i++) {
		uint8_t b = (uint8_t)rng_next(&x);
		in[i] = draw == REPEATS ? b % 3 : draw == PREFIX && i % rs + 2 < rs ? 0 : b;
	}
	struct extsort *s;
	assert_int_equal(extsort_new(rs, mem, dirfd, &s), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(extsort_add(s, in + i * rs), 0);
	assert_int_equal(extsort_finish(s), 0);
	cmp_rs = (int)rs;
	qsort(in, n, rs, cmp_ref);
	const void *rec;
	size_t got = 0;
	int rc;
	while ((rc = extsort_next(s, &rec)) == 1) {
		assert_true(got < n);
		assert_memory_equal(rec, in + got * rs, rs);
		got++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(got, n);
	assert_int_equal(extsort_next(s, &rec), 0); /* stays at the end */
	*runs = extsort_runs(s);
	extsort_free(s);
	free(in);
}

static void test_in_memory(void **state)
{
	(void)state;
	size_t runs;
	for (enum draw d = ANY; d <= PREFIX; d++) {
		sort_matches(9, 1000, 1 << 20, -1, d, &runs);
		assert_int_equal(runs, 0);
		sort_matches(41, 100000, 8 << 20, -1, d, &runs);
		assert_int_equal(runs, 0);
	}
	sort_matches(9, 0, 1 << 20, -1, ANY, &runs);
	assert_int_equal(runs, 0);
}

/* Spilled: from two runs to hundreds, the least buffer (16 records) too,
 * each draw, records of 1, 9 and 13 bytes. */
static void test_spilled(void **state)
{
	(void)state;
	static const size_t sizes[] = { 1, 9, 13 };
	static const size_t mems[] = { 0, 100, 4096, 60000 };
	char *dir = th_tmpdir();
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dirfd >= 0);
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
		for (size_t j = 0; j < sizeof mems / sizeof mems[0]; j++)
			for (enum draw d = ANY; d <= PREFIX; d++) {
				size_t n = 20000, runs;
				sort_matches(sizes[i], n, mems[j], dirfd, d, &runs);
				size_t per_run = mems[j] / sizes[i] < 16 ? 16 : mems[j] / sizes[i];
				size_t full = (n - 1) / per_run; /* 1-byte records at 60,000: none */
				assert_int_equal(runs, full ? full + 1 : 0); /* the last written too */
			}
	close(dirfd);
	th_rmdir(dir);
}

/* A directory that cannot hold the file: the usual temporary directories
 * take it. */
static void test_other_directory(void **state)
{
	(void)state;
	size_t runs;
	int fd = open("/proc", O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	sort_matches(9, 5000, 900, fd, ANY, &runs);
	assert_true(runs > 1);
	close(fd);
}

/* Records added after the merge began are refused; sizes out of range. */
static void test_no_add_after_finish(void **state)
{
	(void)state;
	struct extsort *s;
	uint8_t r[4] = { 1, 2, 3, 4 };
	assert_int_equal(extsort_new(sizeof r, 64, -1, &s), 0);
	assert_int_equal(extsort_add(s, r), 0);
	assert_int_equal(extsort_finish(s), 0);
	assert_int_equal(extsort_add(s, r), -EINVAL);
	const void *rec;
	assert_int_equal(extsort_next(s, &rec), 1);
	assert_memory_equal(rec, r, sizeof r);
	assert_int_equal(extsort_next(s, &rec), 0);
	extsort_free(s);
	assert_int_equal(extsort_new(0, 64, -1, &s), -EINVAL);
	assert_int_equal(extsort_new(EXTSORT_REC_MAX + 1, 64, -1, &s), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_memory),
		cmocka_unit_test(test_spilled),
		cmocka_unit_test(test_other_directory),
		cmocka_unit_test(test_no_add_after_finish),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
