/* test_near_fsck.c - fsck's check of the near-duplicate tables (near.h,
 * near_check.c, near_setcheck.c): damaged rows, sets and hashes found and
 * repaired at every memory bound, in memory and sorted on disk, and when
 * the sort cannot write its file. */
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
	struct blobkey k = th_key_of(12345);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fsck_near),
		cmocka_unit_test(test_fsck_sets),
		cmocka_unit_test(test_fsck_sets_spill_fails),
		cmocka_unit_test(test_fsck_shared_simhash),
		cmocka_unit_test(test_fsck_set_hashes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
