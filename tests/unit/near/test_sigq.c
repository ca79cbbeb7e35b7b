/* test_sigq.c - near-duplicate signatures computed after the commit
 * (sigq.h): a new blob is stored pending with its sigq row, the queue is
 * drained by the thread, a query or the close; a duplicate is never queued;
 * a blob freed while pending; pending rows left by a crash (answered in
 * memory by a read-only open, signed by the next writable one); the bound;
 * pages signed from the bytes the seal hands over;
 * fsck's check and repair of the table. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* ---- what the tables hold ------------------------------------------------ */

struct state {
	bool pending, simhash, row;
	uint64_t refcount;
};

/* The record of ino's blob, and whether the blob has its sigq row. */
static struct state state_of(struct store *st, uint64_t ino, struct blobkey *k)
{
	MDB_txn *txn;
	struct inode in;
	struct fprec r;
	struct state s;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(ns_get_inode(txn, st, ino, &in), 0);
	assert_true(in.flags & INODE_HAS_BLOB);
	assert_int_equal(blob_get(txn, st, &in.blob, &r), 0);
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(&in.blob, kb);
	MDB_val key = { BLOBKEY_BYTES, kb }, v;
	s.row = st->has_sigq && mdb_get(txn, st->db_sigq, &key, &v) == 0;
	store_read_end(st, txn);
	s.pending = r.flags & FPREC_SIG_PENDING;
	s.simhash = r.flags & FPREC_HAS_SIMHASH;
	s.refcount = r.refcount;
	if (k)
		*k = in.blob;
	return s;
}


static size_t sigq_rows(struct store *st)
{
	return st->has_sigq ? th_table_rows(st, st->db_sigq) : 0;
}

/* near0's rows, in all its levels. */
static size_t near0_rows(struct store *st)
{
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	size_t n = 0, nl = near_hash_levels(st, 0, lv);
	for (size_t l = 0; l < nl; l++)
		n += th_table_rows(st, lv[l]);
	return n;
}

/* what a query writes, for the tests that read it raw */
static char answer[QUERY_MAX + 1];

static const struct store_opts no_thread = { .no_sign_thread = true };

static struct store *reopen(const char *dir, const struct store_opts *o)
{
	struct store *st;
	char err[PD_ERRLEN];
	if (archive_open(th_store_dir(dir), o, &st, err))
		fail_msg("open: %s", err);
	return st;
}

/* ---- the life of a pending page --------------------------------------------- */

/* Sealed pending with its row and no near rows; a query drains the queue
 * first, so its answer lists a neighbour sealed just before. */
static void test_pending_then_signed(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, &no_thread);
	char *a = th_page(1, 500, ""), *b = th_page(1, 500, "two more words");
	unsigned d = th_page_distance(a, b);
	assert_true(d <= SIMHASH_NEAR_DISTANCE);

	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	struct state s = state_of(st, ia, NULL);
	assert_true(s.pending && s.row && !s.simhash);
	assert_int_equal(near0_rows(st), 0);
	assert_int_equal(sigq_queued(st), 1);

	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	assert_int_equal(sigq_queued(st), 2);
	char want[128];
	snprintf(want, sizeof want, "%u\t%s\tnear\t/b.html\n", d, th_page_res(a, b));
	assert_string_equal(th_near_of(st, ia, &test_root), want);
	/* the query signed both, for good */
	assert_int_equal(sigq_queued(st), 0);
	s = state_of(st, ia, NULL);
	assert_true(!s.pending && !s.row && s.simhash);
	s = state_of(st, ib, NULL);
	assert_true(!s.pending && !s.row && s.simhash);
	assert_int_equal(near0_rows(st), 2);
	assert_int_equal(sigq_rows(st), 0);

	/* a simhash query drains too */
	uint64_t ic = th_put_page(st, PD_ROOT_INO, "c.html", a);  /* a duplicate: nothing queued */
	assert_int_equal(sigq_queued(st), 0);
	uint64_t iz = th_put_page(st, PD_ROOT_INO, "z.html", "<html><body><p>a page of its own, with words</p></body></html>");
	assert_true(state_of(st, iz, NULL).pending);
	size_t len;
	assert_int_equal(query_simhash(st, iz, answer, &len), 0);
	assert_int_equal(len, 16 + strlen(" low-confidence"));
	assert_false(state_of(st, iz, NULL).pending);
	(void)ic;

	free(a);
	free(b);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* The thread signs without being asked. */
static void test_thread_signs(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char *a = th_page(2, 400, "");
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	for (int i = 0; i < 3000 && sigq_queued(st); i++)
		usleep(10000);
	assert_int_equal(sigq_queued(st), 0);
	struct state s = state_of(st, ia, NULL);
	assert_true(!s.pending && !s.row && s.simhash);
	assert_int_equal(near0_rows(st), 1);
	free(a);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* A duplicate is never queued: neither of a signed blob nor of a pending
 * one. A clean close signs what is queued. */
static void test_duplicate_not_queued(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, &no_thread);
	char *a = th_page(3, 300, "");
	uint64_t i1 = th_put_page(st, PD_ROOT_INO, "1.html", a);
	th_put_page(st, PD_ROOT_INO, "2.html", a);
	th_put_page(st, PD_ROOT_INO, "3.html", a);
	assert_int_equal(sigq_queued(st), 1);
	assert_int_equal(sigq_rows(st), 1);
	struct state s = state_of(st, i1, NULL);
	assert_true(s.pending && s.refcount == 3);
	assert_int_equal(sigq_drain(st), 0);
	th_put_page(st, PD_ROOT_INO, "4.html", a);
	assert_int_equal(sigq_queued(st), 0);
	/* overwritten with new bytes: the new blob is queued */
	char *b = th_page(4, 300, "");
	th_put_page(st, PD_ROOT_INO, "4.html", b);
	assert_int_equal(sigq_queued(st), 1);
	assert_int_equal(store_close(st), 0);

	st = reopen(dir, &no_thread);
	assert_int_equal(sigq_queued(st), 0);
	assert_int_equal(sigq_rows(st), 0);
	assert_int_equal(near0_rows(st), 2);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	th_rmdir(dir);
}

/* A blob whose last reference goes while it waits: its row goes with its
 * record, and signing its key later finds nothing to do. Stored again
 * under the same key before the queue reaches it: signed once. */
static void test_freed_while_pending(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, &no_thread);
	char *a = th_page(5, 300, ""), *b = th_page(6, 300, "");
	th_put_page(st, PD_ROOT_INO, "a.html", a);
	th_put_page(st, PD_ROOT_INO, "b.html", b);
	assert_int_equal(sigq_rows(st), 2);
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a.html", &gone_ino, &gone), 0);
	assert_int_equal(sigq_rows(st), 1);
	th_put_page(st, PD_ROOT_INO, "b.html", a); /* b's blob freed by the overwrite; a's key stored again */
	assert_int_equal(sigq_rows(st), 1);
	assert_int_equal(sigq_queued(st), 3);
	assert_int_equal(sigq_drain(st), 0);
	assert_int_equal(sigq_queued(st), 0);
	assert_int_equal(sigq_rows(st), 0);
	assert_int_equal(near0_rows(st), 1);
	uint64_t ib = 0;
	struct inode in;
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, "b.html", &in), 0);
	ib = in.ino;
	struct state s = state_of(st, ib, NULL);
	assert_true(!s.pending && s.simhash);
	free(a);
	free(b);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* Pages staged in memory hand their bytes to the signer (sigq_push_page):
 * it signs them without decoding the record, and what it stores is what
 * a signature of the record read back gives (the simhash and the set).
 * A page left queued with its bytes when the daemon stops without
 * draining is freed with the queue (ASan: no leak) and signed by the next
 * open from its record. */
static void test_handed_over(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, &no_thread);
	enum { N = 3 * SIGQ_BATCH / 2 };
	uint64_t ino[N];
	for (int i = 0; i < N; i++) {
		char name[32], extra[64];
		snprintf(name, sizeof name, "p%d.html", i);
		snprintf(extra, sizeof extra, "page %d of the handed over ones", i);
		char *page = th_page(10 + i, 300 + 40 * i, extra);
		ino[i] = th_put_page(st, PD_ROOT_INO, name, page);
		free(page);
	}
	assert_int_equal(sigq_queued(st), N);
	assert_int_equal(sigq_drain(st), 0);
	struct sigq_counts c;
	sigq_counts(st, &c);
	assert_int_equal(c.handed, N);
	struct near_sig *stored = malloc(sizeof *stored), *again = malloc(sizeof *again);
	assert_non_null(stored);
	assert_non_null(again);
	for (int i = 0; i < N; i++) {
		struct blobkey k;
		struct state s = state_of(st, ino[i], &k);
		assert_true(!s.pending && !s.row && s.simhash);
		MDB_txn *txn;
		struct fprec r;
		assert_int_equal(store_read_begin(st, &txn), 0);
		assert_int_equal(blob_get(txn, st, &k, &r), 0);
		memset(stored, 0, sizeof *stored);
		assert_int_equal(near_set_get(txn, st, &k, stored), 0);
		store_read_end(st, txn);
		assert_int_equal(sigq_sign_blob(st, &k, again), 0); /* decoded from its record */
		assert_true(again->has && again->has_set && stored->has_set);
		assert_true(r.simhash == again->simhash);
		nearset_to_stored(&again->set);
		assert_int_equal(stored->set.shingles, again->set.shingles);
		assert_int_equal(stored->set.n, again->set.n);
		assert_memory_equal(stored->set.h, again->set.h, again->set.n * sizeof again->set.h[0]);
	}
	free(stored);
	free(again);

	/* queued with their bytes at a close that does not drain them */
	char *page = th_page(99, 400, "left queued");
	uint64_t left = th_put_page(st, PD_ROOT_INO, "left.html", page);
	free(page);
	assert_true(state_of(st, left, NULL).pending);
	store_abandon(st); /* killed: nothing drained, the queue freed with its bytes */
	st = reopen(dir, &no_thread);
	assert_true(state_of(st, left, NULL).pending);
	assert_int_equal(sigq_drain(st), 0);
	struct state s = state_of(st, left, NULL);
	assert_true(!s.pending && !s.row && s.simhash);
	sigq_counts(st, &c);
	assert_int_equal(c.handed, 0); /* read back: its bytes went with the queue */
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* Bytes handed over with a key are used only while the key still names
 * them: a page (a) of an MD5 collision pair handed over, then freed
 * before the signer came to it, and the other page of the pair (b, the
 * same MD5 and size) stored under the same key. Signing a's entry must
 * not put a's signature on b's record: the bytes' XXH3-128 is checked. */
static void test_handed_over_key_taken_again(void **state)
{
	(void)state;
	char a[8192], b[8192];
	size_t na = 0, nb = 0;
	const char *d = getenv("PD_DATA");
	char pa[512], pb[512];
	snprintf(pa, sizeof pa, "%s/md5-collision-a.bin", d && *d ? d : "tests/data");
	snprintf(pb, sizeof pb, "%s/md5-collision-b.bin", d && *d ? d : "tests/data");
	char *ca = th_read_file(pa, &na), *cb = th_read_file(pb, &nb);
	assert_non_null(ca);
	assert_non_null(cb);
	assert_int_equal(na, 128);
	assert_int_equal(nb, 128);
	memcpy(a, ca, na);
	memcpy(b, cb, nb);
	free(ca);
	free(cb);
	/* a common suffix keeps the collision; the pages' words differ where
	 * the collision blocks do */
	char *text = th_page(77, 600, "");
	size_t tl = strlen(text);
	assert_true(na + tl < sizeof a);
	memcpy(a + na, text, tl);
	memcpy(b + nb, text, tl);
	free(text);
	size_t len = na + tl;
	struct near_sig *sa = malloc(sizeof *sa), *sb = malloc(sizeof *sb);
	assert_non_null(sa);
	assert_non_null(sb);
	assert_int_equal(near_sig_of_page(a, len, sa), 0);
	assert_int_equal(near_sig_of_page(b, len, sb), 0);
	assert_true(sa->has && sb->has);
	assert_true(sa->simhash != sb->simhash); /* else this test could not tell them apart */

	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, &no_thread);
	uint64_t ia = th_put(st, PD_ROOT_INO, "a.html", a, len);
	struct blobkey ka = th_blob_of(st, ia);
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a.html", &gone_ino, &gone), 0);
	uint64_t ib = th_put(st, PD_ROOT_INO, "b.html", b, len);
	struct blobkey kb = th_blob_of(st, ib);
	assert_memory_equal(&ka, &kb, sizeof ka); /* the same key, now b's */
	assert_int_equal(sigq_drain(st), 0);
	MDB_txn *txn;
	struct fprec r;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_get(txn, st, &kb, &r), 0);
	store_read_end(st, txn);
	assert_true(!(r.flags & FPREC_SIG_PENDING));
	assert_true(r.simhash == sb->simhash);
	free(sa);
	free(sb);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* Beyond the bound, the sealing thread signs the oldest pages itself. */
static void test_bound(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .no_sign_thread = true, .sign_queue = 4 };
	struct store *st = th_store(dir, NULL, &o);
	uint64_t first = 0;
	for (int i = 0; i < 20; i++) {
		char name[32];
		char *p = th_page(100 + (uint64_t)i, 200, "");
		snprintf(name, sizeof name, "%d.html", i);
		uint64_t ino = th_put_page(st, PD_ROOT_INO, name, p);
		first = first ? first : ino;
		free(p);
		assert_true(sigq_queued(st) <= 4);
	}
	assert_true(sigq_rows(st) <= 4);
	assert_true(near0_rows(st) >= 16);
	assert_false(state_of(st, first, NULL).pending);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* With no bound given, SIGQ_DEFAULT_MAX pages wait before a writer signs
 * one itself: a burst of that many closes signs nothing on the writers'
 * path, the next one does. */
static void test_default_bound(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .no_sign_thread = true };
	struct store *st = th_store(dir, NULL, &o);
	struct sigq_counts c;
	for (int i = 0; i <= SIGQ_DEFAULT_MAX; i++) {
		char name[32];
		char *p = th_page(5000 + (uint64_t)i, 120, "");
		snprintf(name, sizeof name, "%d.html", i);
		th_put_page(st, PD_ROOT_INO, name, p);
		free(p);
		if (i == SIGQ_DEFAULT_MAX - 1) {
			sigq_counts(st, &c);
			assert_int_equal(c.by_writers, 0);
			assert_int_equal(sigq_queued(st), SIGQ_DEFAULT_MAX);
		}
	}
	sigq_counts(st, &c);
	assert_true(c.by_writers >= 1);
	assert_true(sigq_queued(st) <= SIGQ_DEFAULT_MAX);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* ---- a crash with pages pending ------------------------------------------------ */

static void count_line(void *ctx, const char *line)
{
	(void)line;
	(*(int *)ctx)++;
}

static void test_crash_pending(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, &no_thread);
	char *a = th_page(7, 500, ""), *b = th_page(7, 500, "and a few words more"), *c = th_page(8, 500, "");
	unsigned d = th_page_distance(a, b);
	assert_true(d <= SIMHASH_NEAR_DISTANCE);
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	th_put_page(st, PD_ROOT_INO, "b.html", b);
	th_put_page(st, PD_ROOT_INO, "c.html", c);
	assert_int_equal(sigq_rows(st), 3);
	store_abandon(st); /* killed: nothing drained */

	/* valid as it is: a note, no problem */
	int lines = 0;
	struct fsck_opts fo = { .report = count_line, .ctx = &lines };
	struct fsck_result r;
	char err[512];
	assert_int_equal(fsck_run(th_store_dir(dir), &fo, &r, err), 0);
	assert_int_equal(r.problems, 0);
	assert_true(r.notes >= 1);

	/* read-only: the pending pages are signed in memory for the answer */
	struct store_opts ro = { .readonly = true };
	st = reopen(dir, &ro);
	char want[128];
	snprintf(want, sizeof want, "%u\t%s\tnear\t/b.html\n", d, th_page_res(a, b));
	assert_string_equal(th_near_of(st, ia, &test_root), want);
	struct near_sig sig;
	assert_int_equal(near_sig_of_page(a, strlen(a), &sig), 0);
	size_t len;
	assert_int_equal(query_near_sig(st, &sig, NULL, 0, NULL, answer, &len), 0);
	answer[len] = 0;
	/* no fingerprint of the asking bytes given: a's own file is a variant at 1.000 */
	snprintf(want, sizeof want, "0\t1.000\tnear\t/a.html\n%u\t%s\tnear\t/b.html\n", d, th_page_res(a, b));
	assert_string_equal(answer, want);
	assert_int_equal(sigq_rows(st), 3); /* nothing written */
	assert_int_equal(store_close(st), 0);

	/* writable: the rows are queued again and the thread signs them */
	st = reopen(dir, NULL);
	for (int i = 0; i < 3000 && sigq_queued(st); i++)
		usleep(10000);
	assert_int_equal(sigq_queued(st), 0);
	assert_int_equal(sigq_rows(st), 0);
	assert_int_equal(near0_rows(st), 3);
	assert_false(state_of(st, ia, NULL).pending);
	snprintf(want, sizeof want, "%u\t%s\tnear\t/b.html\n", d, th_page_res(a, b));
	assert_string_equal(th_near_of(st, ia, &test_root), want);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	free(c);
	th_rmdir(dir);
}

/* ---- fsck ---------------------------------------------------------------------- */

struct damage {
	uint64_t drop_row_of;  /* the pending blob of this inode loses its row */
	uint64_t row_for;      /* this inode's signed blob gets a row */
};

static int damage_cb(struct wtx *w, void *p)
{
	struct damage *d = p;
	struct inode in;
	struct blobkey stray = { .variant = 7 };
	memset(stray.md5, 0xab, 16);
	int rc = sigq_row_put(w->txn, w->st, &stray); /* names no record */
	if (!rc && !(rc = ns_get_inode(w->txn, w->st, d->drop_row_of, &in))) {
		uint8_t kb[BLOBKEY_BYTES];
		blobkey_encode(&in.blob, kb);
		MDB_val key = { BLOBKEY_BYTES, kb };
		rc = pd_mdb_err(mdb_del(w->txn, w->st->db_sigq, &key, NULL));
	}
	if (!rc && !(rc = ns_get_inode(w->txn, w->st, d->row_for, &in)))
		rc = sigq_row_put(w->txn, w->st, &in.blob);
	return rc;
}

static void test_fsck_sigq(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, &no_thread);
	char *a = th_page(9, 400, ""), *b = th_page(10, 400, "");
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	assert_int_equal(sigq_drain(st), 0);
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	struct damage d = { .drop_row_of = ib, .row_for = ia };
	assert_int_equal(store_write(st, damage_cb, &d), 0);
	store_abandon(st); /* no close: it would sign b */

	int lines = 0;
	struct fsck_opts o = { .report = count_line, .ctx = &lines };
	struct fsck_result r;
	char err[512];
	assert_int_equal(fsck_run(th_store_dir(dir), &o, &r, err), 0);
	/* a stray row, a row of a signed record, a pending record without
	 * its row */
	assert_int_equal(r.problems, 3);
	o.repair = true;
	assert_int_equal(fsck_run(th_store_dir(dir), &o, &r, err), 0);
	assert_true(r.repaired >= 1);
	th_assert_fsck_clean(th_store_dir(dir));
	/* the repair's open and close signed b */
	st = reopen(dir, &no_thread);
	assert_int_equal(sigq_queued(st), 0);
	assert_int_equal(sigq_rows(st), 0);
	struct state s = state_of(st, ib, NULL);
	assert_true(!s.pending && s.simhash);
	assert_int_equal(near0_rows(st), 2);
	assert_int_equal(store_close(st), 0);
	free(a);
	free(b);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pending_then_signed),
		cmocka_unit_test(test_thread_signs),
		cmocka_unit_test(test_duplicate_not_queued),
		cmocka_unit_test(test_freed_while_pending),
		cmocka_unit_test(test_bound),
		cmocka_unit_test(test_default_bound),
		cmocka_unit_test(test_handed_over),
		cmocka_unit_test(test_handed_over_key_taken_again),
		cmocka_unit_test(test_crash_pending),
		cmocka_unit_test(test_fsck_sigq),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
