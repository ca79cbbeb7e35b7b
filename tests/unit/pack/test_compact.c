/* test_compact.c - the compactor of packs (blob_compact.c): the live
 * records of a sparse pack move, verbatim and checked, and the pack goes;
 * the space comes back; a reader that found a record before the move reads
 * it after; a damaged record is not copied; a dictionary moves with its
 * row; a crash after the copies or after the commit leaves a store fsck
 * accepts and that reads every page. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "archive/archive.h"
#include "blob/blob.h"
#include "helpers.h"

enum { N = 240, KEEP_EVERY = 5 };

struct pages {
	char *body[N];
	uint64_t ino[N];
};

static struct store *open_store(const char *dir, bool create)
{
	/* the tests run the passes, on pages the delta step leaves whole */
	struct store_opts o = { .compact_share = -1, .delta_window = -1 };
	return create ? th_store(dir, NULL, &o) : th_reopen(dir, &o);
}

static void name_of(int i, char name[32])
{
	snprintf(name, 32, "p%03d.html", i);
}

/* N pages of 1-6 KB, then all but every KEEP_EVERY-th deleted. */
static void write_and_thin(struct store *st, struct pages *p, unsigned seed)
{
	char name[32];
	for (int i = 0; i < N; i++) {
		p->body[i] = th_page(seed + (uint64_t)i, 150 + (unsigned)(i * 37) % 900, "");
		name_of(i, name);
		p->ino[i] = th_put_page(st, PD_ROOT_INO, name, p->body[i]);
	}
	for (int i = 0; i < N; i++) {
		if (i % KEEP_EVERY == 0)
			continue;
		uint64_t gone;
		bool last;
		name_of(i, name);
		assert_int_equal(ns_unlink(st, PD_ROOT_INO, name, &gone, &last), 0);
	}
}

static void read_all_kept(struct store *st, struct pages *p)
{
	for (int i = 0; i < N; i += KEEP_EVERY)
		th_read_back(st, p->ino[i], p->body[i]);
}

static void free_pages(struct pages *p)
{
	for (int i = 0; i < N; i++)
		free(p->body[i]);
}

static struct blob_compact_cfg cfg_all(void)
{
	return (struct blob_compact_cfg){ .share = 0.5, .min_dead = 1 };
}

/* The live records leave the sparse pack, which goes: the pack count does
 * not grow, the allocated bytes fall by about the dead bytes, every page
 * left reads back, and the totals are what fsck counts. */
static void test_sparse_pack_compacted(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pages p;
	write_and_thin(st, &p, 100);
	struct blob_pack_usage before;
	assert_int_equal(blob_pack_usage(st, &before), 0);
	assert_int_equal(before.packs, 1);
	uint32_t old = pack_current(st->packs);
	struct blob_compact_cfg c = cfg_all();
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	struct blob_pack_usage after;
	assert_int_equal(blob_pack_usage(st, &after), 0);
	printf("# packs: %llu bytes allocated (%llu live, %llu dead) before, %llu (%llu live, %llu dead) after; "
	       "%llu records moved, %llu bytes given back\n",
	       (unsigned long long)before.allocated, (unsigned long long)before.live, (unsigned long long)before.dead,
	       (unsigned long long)after.allocated, (unsigned long long)after.live, (unsigned long long)after.dead,
	       (unsigned long long)d.records_moved, (unsigned long long)d.bytes_freed);
	assert_int_equal(d.packs_compacted, 1);
	assert_int_equal(d.packs_removed, 1);
	assert_int_equal(d.records_moved, N / KEEP_EVERY);
	assert_int_equal(d.damaged, 0);
	assert_int_equal(after.packs, 1); /* the new one only */
	assert_true(pack_current(st->packs) != old);
	assert_int_equal(pack_file_bytes(st->packs, old), -ENOENT);
	assert_int_equal(after.live, before.live);
	assert_int_equal(after.live_records, before.live_records);
	/* the space comes back: what is left is the live bytes and a block or two */
	assert_true(after.allocated < before.allocated);
	assert_true(after.allocated <= after.live + after.dict_bytes + 2 * 4096 + after.live_records * 8);
	assert_true(before.allocated - after.allocated + 2 * 4096 >= before.allocated - before.live - 4096);
	read_all_kept(st, &p);
	/* the outcome is kept in meta */
	struct blob_compact_stats total;
	assert_int_equal(blob_compact_stats(st, &total), 0);
	assert_int_equal(total.records_moved, d.records_moved);
	assert_int_equal(total.packs_removed, 1);
	/* a second pass finds nothing to do */
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_compacted, 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	st = open_store(dir, false);
	read_all_kept(st, &p);
	assert_int_equal(store_close(st), 0);
	free_pages(&p);
	th_rmdir(dir);
}

/* A pack above the threshold, or with less to give back than the minimum,
 * is left alone. */
static void test_threshold_and_minimum(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pages p;
	write_and_thin(st, &p, 300);
	struct blob_compact_stats d;
	struct blob_compact_cfg c = { .share = 0.1, .min_dead = 1 }; /* about 0.2 live */
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_compacted, 0);
	c = (struct blob_compact_cfg){ .share = 0.5, .min_dead = 1ull << 30 };
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_compacted, 0);
	assert_int_equal(store_close(st), 0);
	free_pages(&p);
	th_rmdir(dir);
}

/* A reader that found a record before the compaction reads it after the
 * old pack is gone: whole pages (blob_read_packed) and a large page read
 * by chunks through a file opened before (lazy decoding). */
static void test_reader_across_compaction(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pages p;
	write_and_thin(st, &p, 500);
	char *big = th_page(77, 450000, "");
	size_t blen = strlen(big);
	uint64_t bino = th_put_page(st, PD_ROOT_INO, "big.html", big);
	struct inode in;
	struct fprec r;
	assert_int_equal(ns_getattr(st, p.ino[0], &in), 0);
	assert_int_equal(blob_read(st, &in.blob, &r), 0);
	struct pd_file *f;
	bool keep;
	char buf[4096];
	size_t got;
	assert_int_equal(file_open(st, bino, O_RDONLY, &f, &keep), 0);
	assert_int_equal(file_read(f, buf, 100, 0, &got), 0); /* the first chunk only */
	/* compacted whatever its share (the big page is live) */
	struct blob_compact_stats d = { 0 };
	assert_int_equal(blob_compact_pack(st, r.pack, &(struct blob_compact_cfg){ 0 }, &d), 0);
	assert_int_equal(d.packs_removed, 1);
	assert_int_equal(pack_file_bytes(st->packs, r.pack), -ENOENT);
	/* the record found before: read through its new place */
	char *out = malloc(r.size);
	assert_int_equal(blob_read_packed(st, &in.blob, &r, out), 0);
	assert_memory_equal(out, p.body[0], r.size);
	free(out);
	/* the chunks not decoded yet, from the moved record */
	uint64_t off = blen - 5000;
	assert_int_equal(file_read(f, buf, sizeof buf, off, &got), 0);
	assert_int_equal(got, sizeof buf);
	assert_memory_equal(buf, big + off, sizeof buf);
	assert_int_equal(file_release(f), 0);
	read_all_kept(st, &p);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(big);
	free_pages(&p);
	th_rmdir(dir);
}

/* A damaged record is not copied: it stays in its pack (which stays),
 * marked bad and counted; the others move and their old blocks go. */
static void test_damaged_record_stays(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pages p;
	write_and_thin(st, &p, 700);
	int victim = 10 * KEEP_EVERY;
	struct inode in;
	struct fprec r;
	assert_int_equal(ns_getattr(st, p.ino[victim], &in), 0);
	assert_int_equal(blob_read(st, &in.blob, &r), 0);
	th_damage_record(st, &r, 4, 4);
	struct blob_compact_cfg c = cfg_all();
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.damaged, 1);
	assert_int_equal(d.packs_removed, 0);
	assert_int_equal(d.records_moved, N / KEEP_EVERY - 1);
	assert_true(pack_file_bytes(st->packs, r.pack) > 0);
	struct fprec now;
	assert_int_equal(blob_read(st, &in.blob, &now), 0);
	assert_true(now.flags & FPREC_BAD);
	assert_int_equal(now.pack, r.pack);
	assert_int_equal(now.pack_off, r.pack_off);
	for (int i = 0; i < N; i += KEEP_EVERY)
		if (i != victim)
			th_read_back(st, p.ino[i], p.body[i]);
	/* a refetch heals it; the next pass empties and removes the pack */
	char name[32];
	name_of(victim, name);
	th_put_page(st, PD_ROOT_INO, name, p.body[victim]);
	th_read_back(st, p.ino[victim], p.body[victim]);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(pack_file_bytes(st->packs, r.pack), -ENOENT);
	read_all_kept(st, &p);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_pages(&p);
	th_rmdir(dir);
}

/* A dictionary's record moves with its row: after a reopen (no
 * dictionary in memory) the pages that need it decode. */
static void test_dictionary_moves(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	enum { M = BLOB_DICT_FIRST + 200 };
	static char *body[M];
	static uint64_t ino[M];
	char name[32];
	for (int i = 0; i < M; i++) {
		body[i] = th_page(9000 + (uint64_t)i, 500, "<div class=\"nav\">the same navigation on every page</div>");
		snprintf(name, sizeof name, "d%04d.html", i);
		ino[i] = th_put_page(st, PD_ROOT_INO, name, body[i]);
		if (i == BLOB_DICT_FIRST)
			blob_dict_settle(st);
	}
	/* delete the early pages (no dictionary) */
	for (int i = 0; i < BLOB_DICT_FIRST; i++) {
		uint64_t gone;
		bool last;
		snprintf(name, sizeof name, "d%04d.html", i);
		assert_int_equal(ns_unlink(st, PD_ROOT_INO, name, &gone, &last), 0);
	}
	MDB_txn *txn;
	struct pack_loc dloc;
	uint64_t records;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_dict_row(txn, st, 1, &dloc, &records), 0);
	store_read_end(st, txn);
	assert_true(records > 0);
	struct blob_compact_cfg c = cfg_all();
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_removed, 1);
	struct pack_loc now;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_dict_row(txn, st, 1, &now, &records), 0);
	store_read_end(st, txn);
	assert_true(now.pack != dloc.pack);
	assert_int_equal(now.len, dloc.len);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	st = open_store(dir, false);
	for (int i = BLOB_DICT_FIRST; i < M; i++)
		th_read_back(st, ino[i], body[i]);
	assert_int_equal(store_close(st), 0);
	for (int i = 0; i < M; i++)
		free(body[i]);
	th_rmdir(dir);
}

/* A crash after a step (PD_COMPACT_STOP: the compactor stops there, the
 * store is abandoned as by a kill): fsck finds no damage (after the
 * commit: the emptied pack as a leftover), the next open removes what is
 * left over and every page reads. */
static void crash_after(const char *step, bool leftover)
{
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pages p;
	write_and_thin(st, &p, 900);
	uint32_t old = pack_current(st->packs);
	th_compact_crash(st, old, cfg_all(), step);
	struct fsck_result fr = th_fsck(th_store_dir(dir), (struct fsck_opts){ .deep = true });
	assert_int_equal(fr.problems, 0);
	assert_int_equal(fr.leftovers, leftover ? 1 : 0);
	if (leftover) {
		/* fsck --repair removes it (through the open that ends a repair) */
		th_fsck(th_store_dir(dir), (struct fsck_opts){ .repair = true });
		char path[4096];
		struct stat sb;
		snprintf(path, sizeof path, "%s/packs/pack-%08u", th_store_dir(dir), old);
		assert_int_equal(stat(path, &sb), -1);
	}
	st = open_store(dir, false);
	read_all_kept(st, &p);
	if (strcmp(step, "copied")) /* removed by the compactor, or by the repair */
		assert_int_equal(pack_file_bytes(st->packs, old), -ENOENT);
	else /* the commit never came: the old pack holds the pages still */
		assert_true(pack_file_bytes(st->packs, old) > 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	fr = th_fsck(th_store_dir(dir), (struct fsck_opts){ .deep = true });
	assert_int_equal(fr.leftovers, 0);
	free_pages(&p);
	th_rmdir(dir);
}

static void test_crash_after_copies(void **state)
{
	(void)state;
	crash_after("copied", false);
}

static void test_crash_after_commit(void **state)
{
	(void)state;
	crash_after("committed", true);
}

static void test_crash_after_removal(void **state)
{
	(void)state;
	crash_after("removed", false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sparse_pack_compacted),
		cmocka_unit_test(test_threshold_and_minimum),
		cmocka_unit_test(test_reader_across_compaction),
		cmocka_unit_test(test_damaged_record_stays),
		cmocka_unit_test(test_dictionary_moves),
		cmocka_unit_test(test_crash_after_copies),
		cmocka_unit_test(test_crash_after_commit),
		cmocka_unit_test(test_crash_after_removal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
