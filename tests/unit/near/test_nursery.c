/* test_nursery.c - the nursery (pack.h, blob.h, ndelta.h): a sealed page
 * is appended to a nursery pack, reads from there, and gets its final
 * record (a delta on an older neighbour, else the page whole) from the
 * delta step exactly once, after which the emptied nursery pack is removed
 * whole; a crash between the final record's append and the commit that
 * names it, and a crash with pages still waiting, lose nothing: after the
 * restart the waiting records are found again from the packs and moved;
 * the compactor never copies a nursery record; a close() while the
 * nursery is behind helps the delta step, one close() at a time; without
 * room on the disk for background work the pages wait there; close()
 * writes a page raw while the nursery is small and at level 1 past its raw
 * share, or always at a level given; fsck clean at every step. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "archive/archive.h"
#include "blob/blob.h"
#include "helpers.h"
#include "near/ndelta.h"
#include "near/sigq.h"

static struct store_opts nursery_opts(void)
{
	return (struct store_opts){ .nursery = true, .no_sign_thread = true, .no_delta_thread = true };
}

static struct store *reopen_with(const char *dir, struct store_opts o)
{
	struct store *st;
	char err[PD_ERRLEN];
	assert_int_equal(archive_open(th_store_dir(dir), &o, &st, err), 0);
	return st;
}

static struct store *reopen(const char *dir)
{
	return reopen_with(dir, nursery_opts());
}

static bool in_nursery(struct store *st, uint64_t ino)
{
	struct fprec r = th_fprec_of(st, ino);
	assert_true(r.flags & FPREC_PACKED);
	return blob_in_nursery(st, &r);
}

static size_t nursery_files(struct store *st)
{
	uint32_t *ids;
	size_t n;
	assert_int_equal(pack_nursery_list(st->packs, &ids, &n), 0);
	free(ids);
	return n;
}

/* A copy of page with two words rewritten. */
static char *edited(const char *page)
{
	char *p = strdup(page);
	size_t len = strlen(p);
	memcpy(p + len / 2, "EDITEDx", 7);
	memcpy(p + len / 3, "CHANGEy", 7);
	return p;
}

static void test_page_moved_once(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = nursery_opts();
	struct store *st = th_store(dir, NULL, &o);
	char *a = th_page(21, 900, ""), *b = edited(a), *c = th_page(22, 700, "");
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	uint64_t ic = th_put_page(st, PD_ROOT_INO, "c.html", c);
	/* at close() the pages went to the nursery, and read from there */
	assert_true(in_nursery(st, ia) && in_nursery(st, ib) && in_nursery(st, ic));
	assert_int_equal(nursery_files(st), 1);
	th_read_back(st, ib, b);
	struct blob_pack_usage u;
	assert_int_equal(blob_pack_usage(st, &u), 0);
	assert_int_equal(u.nursery_live_records, 3);
	assert_int_equal(u.live_records, 3);
	/* unsigned pages wait for the signer */
	struct ndelta_counts n = { 0 };
	assert_int_equal(ndelta_nursery_sweep(st, 0, &n), 0);
	assert_int_equal(n.swept, 0);
	assert_true(in_nursery(st, ia));
	/* signed: each gets its final record, b as a delta on a */
	assert_int_equal(sigq_drain(st), 0);
	assert_int_equal(ndelta_nursery_sweep(st, 0, &n), 0);
	assert_int_equal(n.swept, 3);
	assert_int_equal(n.stored, 1);
	assert_int_equal(n.moved_whole, 2);
	assert_false(in_nursery(st, ia) || in_nursery(st, ib) || in_nursery(st, ic));
	struct blobkey kb = th_blob_of(st, ib), ka = th_blob_of(st, ia), base;
	assert_int_equal(th_delta_of(st, &kb, &base), 1);
	assert_true(blobkey_equal(&base, &ka));
	/* the emptied nursery pack went whole */
	assert_int_equal(nursery_files(st), 0);
	assert_int_equal(blob_pack_usage(st, &u), 0);
	assert_int_equal(u.nursery_packs, 0);
	assert_int_equal(u.live_records, 3);
	th_read_back(st, ia, a);
	th_read_back(st, ib, b);
	th_read_back(st, ic, c);
	/* moved once: another sweep finds nothing */
	memset(&n, 0, sizeof n);
	assert_int_equal(ndelta_nursery_sweep(st, 0, &n), 0);
	assert_int_equal(n.swept + n.stored + n.moved_whole, 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	free(c);
	th_rmdir(dir);
}

/* The child writes pages into the nursery, signs them, optionally appends
 * the final record of the first to the main pack (synced) without the
 * commit that would name it, and dies without closing the store. */
static void crash_child(const char *dir, const char *a, const char *b, bool append_final)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct store *st = reopen(dir);
		uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
		th_put_page(st, PD_ROOT_INO, "b.html", b);
		if (sigq_drain(st))
			_exit(2);
		if (append_final) {
			struct blobkey k = th_blob_of(st, ia);
			struct fprec r;
			struct fp fp = { .size = strlen(a) };
			memcpy(fp.md5, k.md5, 16);
			if (blob_read(st, &k, &r))
				_exit(3);
			memcpy(fp.xxh128, r.xxh128, 16);
			struct pack_rec rec = { 0 };
			struct pack_loc loc;
			if (blob_encode(st, &fp, a, -1, &rec) || blob_append(st, &rec, &k, &loc) ||
			    pack_sync(st->packs))
				_exit(4);
		}
		_exit(0); /* no close: a crash */
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void crash_and_restart(bool append_final)
{
	char *dir = th_tmpdir();
	struct store_opts o = nursery_opts();
	assert_int_equal(store_close(th_store(dir, NULL, &o)), 0);
	char *a = th_page(31, 800, ""), *b = th_page(32, 800, "");
	crash_child(dir, a, b, append_final);
	/* fsck takes the waiting records (and a final record no commit named)
	 * for what they are */
	th_assert_fsck_clean(th_store_dir(dir));
	struct store *st = reopen(dir);
	struct inode in;
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, "a.html", &in), 0);
	uint64_t ia = in.ino;
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, "b.html", &in), 0);
	uint64_t ib = in.ino;
	/* the pages wait in the nursery, and read */
	assert_true(in_nursery(st, ia) && in_nursery(st, ib));
	th_read_back(st, ia, a);
	struct blob_pack_usage u;
	assert_int_equal(blob_pack_usage(st, &u), 0);
	assert_int_equal(u.nursery_live_records, 2);
	uint64_t dead_before = u.dead;
	if (append_final)
		assert_true(dead_before > 0); /* the record no commit named */
	/* found again from the packs and moved, once */
	struct ndelta_counts n = { 0 };
	assert_int_equal(ndelta_nursery_sweep(st, 0, &n), 0);
	assert_int_equal(n.swept, 2);
	assert_int_equal(n.stored + n.moved_whole, 2);
	assert_false(in_nursery(st, ia) || in_nursery(st, ib));
	assert_int_equal(nursery_files(st), 0);
	th_read_back(st, ia, a);
	th_read_back(st, ib, b);
	assert_int_equal(blob_pack_usage(st, &u), 0);
	assert_int_equal(u.live_records, 2);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	th_rmdir(dir);
}

static void test_restart_with_waiting_records(void **state)
{
	(void)state;
	crash_and_restart(false);
}

static void test_crash_between_final_append_and_commit(void **state)
{
	(void)state;
	crash_and_restart(true);
}

/* A clean close moves what waits (the store closes with no nursery), and
 * the compactor, even asked for every pack, never copies a nursery record. */
static void test_close_drains_and_compactor_skips(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = nursery_opts();
	struct store *st = th_store(dir, NULL, &o);
	char *a = th_page(41, 900, ""), *b = th_page(42, 900, "");
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	th_put_page(st, PD_ROOT_INO, "b.html", b);
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "b.html", &gone_ino, &gone), 0);
	struct blob_compact_cfg c = { .share = 1.01, .min_dead = 0 };
	struct blob_compact_stats done;
	assert_int_equal(blob_compact_run(st, &c, &done), 0);
	assert_int_equal(done.records_moved, 0);
	assert_true(in_nursery(st, ia));
	th_read_back(st, ia, a);
	assert_int_equal(store_close(st), 0);
	st = reopen(dir);
	assert_false(in_nursery(st, ia));
	assert_int_equal(nursery_files(st), 0);
	th_read_back(st, ia, a);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	th_rmdir(dir);
}

static int drop_record_cb(struct wtx *w, void *arg)
{
	uint8_t key[BLOBKEY_BYTES];
	blobkey_encode(arg, key);
	MDB_val k = { BLOBKEY_BYTES, key };
	return pd_mdb_err(mdb_del(w->txn, w->st->db_fp, &k, NULL));
}

/* fsck --repair rebuilds a lost fingerprint record from the packs when the
 * page has a nursery record and an uncommitted final one; the page reads
 * back and leaves the nursery once. */
static void test_repair_from_packs_with_nursery(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = nursery_opts();
	assert_int_equal(store_close(th_store(dir, NULL, &o)), 0);
	char *a = th_page(51, 800, ""), *b = th_page(52, 800, "");
	crash_child(dir, a, b, true);
	struct store *st = reopen(dir);
	struct inode in;
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, "a.html", &in), 0);
	uint64_t ia = in.ino;
	struct blobkey ka = th_blob_of(st, ia);
	assert_int_equal(store_write(st, drop_record_cb, &ka), 0);
	assert_int_equal(store_close(st), 0);
	struct fsck_opts fo = { .repair = true };
	struct fsck_result res;
	char err[512];
	assert_int_equal(fsck_run(th_store_dir(dir), &fo, &res, err), 0);
	assert_true(res.repaired > 0);
	assert_int_equal(res.lost, 0);
	th_assert_fsck_clean(th_store_dir(dir));
	st = reopen(dir);
	th_read_back(st, ia, a);
	struct ndelta_counts n = { 0 };
	assert_int_equal(ndelta_nursery_sweep(st, 0, &n), 0);
	assert_false(in_nursery(st, ia));
	assert_int_equal(nursery_files(st), 0);
	th_read_back(st, ia, a);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	th_rmdir(dir);
}

/* The delta thread's rest (ndelta.h): only after a full batch, while the
 * nursery grows and is under half its bound; NDELTA_YIELD times the
 * batch, capped. */
static void test_yield_rule(void **state)
{
	(void)state;
	const uint64_t ms = 1000000, max = 256u << 20;
	const size_t full = NDELTA_BATCH;
	assert_int_equal(ndelta_yield_ns(full, 10 * ms, 1000, 1000, max), 0);     /* no page arrived */
	assert_int_equal(ndelta_yield_ns(full, 10 * ms, 2000, 1000, max), 0);     /* the nursery shrank */
	assert_int_equal(ndelta_yield_ns(full, 10 * ms, 1000, 5000, max), NDELTA_YIELD * 10 * ms);
	assert_int_equal(ndelta_yield_ns(full - 1, 10 * ms, 1000, 5000, max), 0); /* the step keeps up */
	assert_int_equal(ndelta_yield_ns(full, 10 * ms, 1000, max / 2, max), 0);  /* half full: catch up */
	assert_int_equal(ndelta_yield_ns(full, 10000 * ms, 1000, 5000, max), (uint64_t)NDELTA_YIELD_MAX_MS * ms);
	assert_int_equal(ndelta_yield_ns(full, 0, 1000, 5000, max), 0);
}

/* With the signer and the delta thread running, a burst of pages (half of
 * them near-duplicates of the other half) written while the thread rests
 * between batches: a clean close still gives every page its final record
 * (the nursery gone), the near-duplicates are deltas, and everything reads
 * back. */
static void test_burst_with_resting_thread(void **state)
{
	(void)state;
	enum { PAIRS = 48 };
	char *dir = th_tmpdir();
	struct store_opts o = { .nursery = true };
	struct store *st = th_store(dir, NULL, &o);
	char *pages[2 * PAIRS];
	uint64_t ino[2 * PAIRS];
	for (int i = 0; i < PAIRS; i++) {
		pages[2 * i] = th_page(100 + i, 900, "");
		pages[2 * i + 1] = edited(pages[2 * i]);
	}
	for (int i = 0; i < 2 * PAIRS; i++) {
		char name[32];
		snprintf(name, sizeof name, "p%03d.html", i);
		ino[i] = th_put_page(st, PD_ROOT_INO, name, pages[i]);
	}
	assert_int_equal(store_close(st), 0);
	st = reopen(dir);
	assert_int_equal(nursery_files(st), 0);
	int deltas = 0;
	for (int i = 0; i < 2 * PAIRS; i++) {
		assert_false(in_nursery(st, ino[i]));
		struct fprec r = th_fprec_of(st, ino[i]);
		struct blobkey base;
		int d = blob_delta_base(st, &r, &base);
		assert_true(d >= 0);
		deltas += d;
		th_read_back(st, ino[i], pages[i]);
	}
	assert_true(deltas >= PAIRS / 2);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	for (int i = 0; i < 2 * PAIRS; i++)
		free(pages[i]);
	th_rmdir(dir);
}

/* A sweep of a nursery pack of more records than one snapshot looks up
 * (the sweep renews its read transaction every 1,024: ndelta.c) finds
 * each of them, across the renewals (a reader left open would show as a
 * leak under the sanitizers). */
static void test_sweep_across_snapshots(void **state)
{
	(void)state;
	enum { PAGES = 2600 };
	char *dir = th_tmpdir();
	struct store_opts o = nursery_opts();
	struct store *st = th_store(dir, NULL, &o);
	for (int i = 0; i < PAGES; i++) {
		char name[32];
		snprintf(name, sizeof name, "p%04d.html", i);
		char *p = th_page(5000 + i, 60, "");
		th_put_page(st, PD_ROOT_INO, name, p);
		free(p);
	}
	assert_int_equal(nursery_files(st), 1);
	assert_int_equal(sigq_drain(st), 0);
	struct ndelta_counts n = { 0 };
	assert_int_equal(ndelta_nursery_sweep(st, 0, &n), 0);
	assert_int_equal(n.swept, PAGES);
	assert_int_equal(nursery_files(st), 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* While the nursery holds half its bound or more, a close() of a new page
 * first does a batch of the delta step (ndelta_help: the pages signed
 * before it get their final records, and the nursery pack they emptied
 * goes), then enters the nursery; with nothing queued it still enters
 * below the bound; past the bound its close() writes the final record. */
static void test_close_helps_when_behind(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = nursery_opts();
	struct store *st = th_store(dir, NULL, &o);
	char *a = th_page(31, 900, ""), *b = edited(a), *c = th_page(32, 800, ""), *e = th_page(33, 700, "");
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	assert_true(in_nursery(st, ia));
	uint64_t held = pack_nursery_bytes(st->packs);
	st->opts.nursery_max_bytes = held + held / 2; /* a's pack alone: behind, under the bound */
	assert_true(blob_nursery_behind(st));
	assert_int_equal(sigq_drain(st), 0); /* a signed: queued for the delta step */
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	struct sigq_counts q;
	sigq_counts(st, &q);
	assert_int_equal(q.delta.helped, 1);
	assert_false(in_nursery(st, ia)); /* a's final record, written by b's close() */
	assert_true(in_nursery(st, ib));
	assert_int_equal(nursery_files(st), 1); /* a's pack, emptied, went */
	assert_int_equal(st->nursery_bypassed, 0);
	/* nothing signed to do: c enters all the same, under the bound */
	uint64_t ic = th_put_page(st, PD_ROOT_INO, "c.html", c);
	assert_true(in_nursery(st, ic));
	sigq_counts(st, &q);
	assert_int_equal(q.delta.helped, 1);
	assert_int_equal(st->nursery_bypassed, 0);
	/* at the bound: e's close() writes its final record */
	st->opts.nursery_max_bytes = pack_nursery_bytes(st->packs);
	uint64_t ie = th_put_page(st, PD_ROOT_INO, "e.html", e);
	assert_false(in_nursery(st, ie));
	assert_int_equal(st->nursery_bypassed, 1);
	th_read_back(st, ia, a);
	th_read_back(st, ib, b);
	assert_int_equal(store_close(st), 0);
	/* the clean close gave the rest their final records: b a delta on a */
	st = reopen(dir);
	assert_int_equal(nursery_files(st), 0);
	struct blobkey kb = th_blob_of(st, ib), ka = th_blob_of(st, ia), base;
	assert_int_equal(th_delta_of(st, &kb, &base), 1);
	assert_true(blobkey_equal(&base, &ka));
	th_read_back(st, ia, a);
	th_read_back(st, ib, b);
	th_read_back(st, ic, c);
	th_read_back(st, ie, e);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	free(c);
	free(e);
	th_rmdir(dir);
}

/* The writer held: a store_write whose callback waits until let go. */
struct held_writer {
	struct store *st;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool holding, release;
};

static int hold_cb(struct wtx *w, void *arg)
{
	(void)w;
	struct held_writer *h = arg;
	pthread_mutex_lock(&h->mu);
	h->holding = true;
	pthread_cond_broadcast(&h->cv);
	while (!h->release)
		pthread_cond_wait(&h->cv, &h->mu);
	pthread_mutex_unlock(&h->mu);
	return 0;
}

static void *hold_main(void *p)
{
	struct held_writer *h = p;
	assert_int_equal(store_write(h->st, hold_cb, h), 0);
	return NULL;
}

static void *help_main(void *p)
{
	sigq_help_deltas(p);
	return NULL;
}

static uint64_t delta_waiting(struct store *st)
{
	struct sigq_counts q;
	sigq_counts(st, &q);
	return q.delta.waiting;
}

/* A close() that would help while another helps writes on: it neither
 * takes pages from the queue nor waits for the first one's batch (held
 * here at its commit by a writer that does not let go). */
static void test_one_helper_at_a_time(void **state)
{
	(void)state;
	enum { PAGES = NDELTA_BATCH + 4 };
	char *dir = th_tmpdir();
	struct store_opts o = nursery_opts();
	struct store *st = th_store(dir, NULL, &o);
	char *pages[PAGES];
	uint64_t inos[PAGES];
	for (int i = 0; i < PAGES; i++) {
		pages[i] = th_page(400 + i, 900, "");
		char name[32];
		snprintf(name, sizeof name, "p%d.html", i);
		inos[i] = th_put_page(st, PD_ROOT_INO, name, pages[i]);
	}
	assert_int_equal(sigq_drain(st), 0);
	assert_int_equal(delta_waiting(st), PAGES);
	struct held_writer h = { .st = st };
	pthread_mutex_init(&h.mu, NULL);
	pthread_cond_init(&h.cv, NULL);
	pthread_t holder, first, second;
	assert_int_equal(pthread_create(&holder, NULL, hold_main, &h), 0);
	pthread_mutex_lock(&h.mu);
	while (!h.holding)
		pthread_cond_wait(&h.cv, &h.mu);
	pthread_mutex_unlock(&h.mu);
	/* the first helper takes a batch, then waits for the writer */
	assert_int_equal(pthread_create(&first, NULL, help_main, st), 0);
	for (int i = 0; i < 10000 && delta_waiting(st) == PAGES; i++)
		usleep(1000);
	assert_int_equal(delta_waiting(st), PAGES - NDELTA_BATCH);
	/* the second returns at once, the rest of the queue left as it was */
	assert_int_equal(pthread_create(&second, NULL, help_main, st), 0);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	int joined = pthread_timedjoin_np(second, NULL, &until);
	uint64_t waiting = delta_waiting(st);
	pthread_mutex_lock(&h.mu);
	h.release = true;
	pthread_cond_broadcast(&h.cv);
	pthread_mutex_unlock(&h.mu);
	if (joined)
		pthread_join(second, NULL);
	pthread_join(first, NULL);
	pthread_join(holder, NULL);
	assert_int_equal(joined, 0);
	assert_int_equal(waiting, PAGES - NDELTA_BATCH);
	struct sigq_counts q;
	sigq_counts(st, &q);
	assert_int_equal(q.delta.helped, NDELTA_BATCH);
	for (int i = 0; i < PAGES; i++)
		assert_int_equal(in_nursery(st, inos[i]), i >= NDELTA_BATCH);
	assert_int_equal(store_close(st), 0);
	st = reopen(dir);
	for (int i = 0; i < PAGES; i++) {
		assert_false(in_nursery(st, inos[i]));
		th_read_back(st, inos[i], pages[i]);
		free(pages[i]);
	}
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	pthread_mutex_destroy(&h.mu);
	pthread_cond_destroy(&h.cv);
	th_rmdir(dir);
}

/* Without room on the disk for background work (store_room_for_background:
 * asked for more than any disk has), the step leaves its pages where they
 * are: a sweep, a page of the queue and a clean close move nothing, the
 * pages read back and a delete goes through; once there is room, the next
 * open's sweep moves each of them once. */
static void test_no_room_pages_wait(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = nursery_opts();
	o.background_room = 1ull << 62;
	struct store *st = th_store(dir, NULL, &o);
	assert_false(store_room_for_background(st));
	char *a = th_page(61, 900, ""), *b = edited(a), *c = th_page(62, 700, "");
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	th_put_page(st, PD_ROOT_INO, "c.html", c);
	assert_int_equal(sigq_drain(st), 0);
	struct ndelta_counts n = { 0 };
	assert_int_equal(ndelta_nursery_sweep(st, 0, &n), -ENOSPC);
	assert_int_equal(n.swept + n.stored + n.moved_whole, 0);
	struct blobkey ka = th_blob_of(st, ia);
	assert_int_equal(ndelta_page(st, 0, &ka, &n), -ENOSPC);
	assert_int_equal(n.roomless, 1);
	assert_int_equal(n.stored + n.moved_whole, 0);
	assert_true(in_nursery(st, ia) && in_nursery(st, ib));
	th_read_back(st, ib, b);
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "c.html", &gone_ino, &gone), 0);
	assert_true(gone);
	assert_int_equal(store_close(st), 0); /* its drain leaves them too */
	th_assert_fsck_clean(th_store_dir(dir));
	st = reopen(dir); /* the default room: this disk has it */
	assert_true(store_room_for_background(st));
	assert_true(in_nursery(st, ia) && in_nursery(st, ib));
	memset(&n, 0, sizeof n);
	assert_int_equal(ndelta_nursery_sweep(st, 0, &n), 0);
	assert_int_equal(n.swept, 2);
	assert_int_equal(n.stored + n.moved_whole, 2);
	assert_false(in_nursery(st, ia) || in_nursery(st, ib));
	assert_int_equal(nursery_files(st), 0);
	th_read_back(st, ia, a);
	th_read_back(st, ib, b);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	free(c);
	th_rmdir(dir);
}

/* The encoding of page ino's nursery record. */
static unsigned nursery_encoding(struct store *st, uint64_t ino)
{
	struct fprec r = th_fprec_of(st, ino);
	assert_true(blob_in_nursery(st, &r));
	struct pack_rec_hdr h;
	assert_int_equal(blob_rec_hdr(st, &r, &h), 0);
	return h.encoding;
}

/* Raw below the raw share (blob.h), level 1 past it; nursery_level fixes
 * the level whatever the nursery holds. Every page reads back, and gets
 * its final record from the step as any other. */
static void test_raw_while_small(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = nursery_opts();
	o.nursery_raw_bytes = 2 * 1024; /* past the first page */
	struct store *st = th_store(dir, NULL, &o);
	char *a = th_page(41, 900, ""), *b = th_page(42, 900, ""), *c = th_page(43, 900, "");
	assert_true(strlen(a) > 2 * 1024);
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	assert_int_equal(nursery_encoding(st, ia), PACK_ENC_RAW);
	assert_int_equal(nursery_encoding(st, ib), PACK_ENC_ZSTD); /* no dictionary yet */
	struct fprec ra = th_fprec_of(st, ia), rb = th_fprec_of(st, ib);
	assert_true(ra.pack_len > strlen(a) && rb.pack_len < strlen(b));
	th_read_back(st, ia, a);
	th_read_back(st, ib, b);
	st->opts.nursery_level = -1; /* raw always, the nursery past its share */
	uint64_t ic = th_put_page(st, PD_ROOT_INO, "c.html", c);
	assert_int_equal(nursery_encoding(st, ic), PACK_ENC_RAW);
	th_read_back(st, ic, c);
	assert_int_equal(sigq_drain(st), 0);
	struct ndelta_counts n = { 0 };
	assert_int_equal(ndelta_nursery_sweep(st, 0, &n), 0);
	assert_int_equal(n.swept, 3);
	assert_false(in_nursery(st, ia) || in_nursery(st, ib) || in_nursery(st, ic));
	th_read_back(st, ia, a);
	th_read_back(st, ib, b);
	th_read_back(st, ic, c);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	/* a level given: level 1 on the first page of an empty nursery */
	o.nursery_level = 1;
	o.nursery_raw_bytes = 0;
	st = reopen_with(dir, o);
	char *d = th_page(44, 900, "");
	uint64_t id = th_put_page(st, PD_ROOT_INO, "d.html", d);
	assert_int_not_equal(nursery_encoding(st, id), PACK_ENC_RAW);
	th_read_back(st, id, d);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	free(c);
	free(d);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_page_moved_once),
		cmocka_unit_test(test_restart_with_waiting_records),
		cmocka_unit_test(test_crash_between_final_append_and_commit),
		cmocka_unit_test(test_close_drains_and_compactor_skips),
		cmocka_unit_test(test_repair_from_packs_with_nursery),
		cmocka_unit_test(test_yield_rule),
		cmocka_unit_test(test_burst_with_resting_thread),
		cmocka_unit_test(test_sweep_across_snapshots),
		cmocka_unit_test(test_close_helps_when_behind),
		cmocka_unit_test(test_one_helper_at_a_time),
		cmocka_unit_test(test_no_room_pages_wait),
		cmocka_unit_test(test_raw_while_small),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
