/* test_cold.c - records encoded again, colder, when the compactor copies
 * them (blob_cold.c): a record encoded again smaller reads back the same
 * bytes with the same XXH3-128; a page stored before the store's first
 * dictionary gets the newest one, and the dictionaries' counts of the
 * records that need them follow; a record whose new encoding is not
 * smaller keeps its bytes; a dictionary no record needs any more goes;
 * a crash after the copies and after the commit
 * leaves a store fsck --deep accepts and that reads every page. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "archive/archive.h"
#include "blob/blob.h"
#include "helpers.h"

/* Pages before the first dictionary, and as many after it. */
enum { EARLY = BLOB_DICT_FIRST, M = BLOB_DICT_FIRST + 200 };

struct pages {
	char *body[M];
	uint64_t ino[M];
};

static struct store *open_store(const char *dir, bool create)
{
	/* the tests run the passes, on pages the delta step leaves whole */
	struct store_opts o = { .compact_share = -1, .delta_window = -1 };
	return create ? th_store(dir, NULL, &o) : th_reopen(dir, &o);
}

/* M pages alike in their boilerplate (a dictionary pays), the first EARLY
 * stored before the store's first dictionary. */
static void write_pages(struct store *st, struct pages *p, unsigned seed)
{
	char name[32];
	for (int i = 0; i < M; i++) {
		p->body[i] = th_page(seed + (uint64_t)i, 400 + (unsigned)(i * 53) % 700,
				     "<div class=\"nav\"><a href=\"/\">home</a> <a href=\"/news\">news</a> "
				     "<a href=\"/about\">about us</a> the same navigation on every page</div>");
		snprintf(name, sizeof name, "c%04d.html", i);
		p->ino[i] = th_put_page(st, PD_ROOT_INO, name, p->body[i]);
		if (i == EARLY)
			blob_dict_settle(st);
	}
	blob_dict_settle(st);
}

static void read_all(struct store *st, struct pages *p)
{
	for (int i = 0; i < M; i++)
		th_read_back(st, p->ino[i], p->body[i]);
}

static void free_pages(struct pages *p)
{
	for (int i = 0; i < M; i++)
		free(p->body[i]);
}

static struct blob_compact_cfg cfg_cold(int level)
{
	return (struct blob_compact_cfg){ .share = 1.0, .min_dead = 0, .every_pack = true,
					  .cold = { .level = level, .deltas = true } };
}

static uint64_t dict_records(struct store *st, uint32_t id)
{
	MDB_txn *txn;
	struct pack_loc loc;
	uint64_t records = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_dict_row(txn, st, id, &loc, &records), 0);
	store_read_end(st, txn);
	return records;
}

static uint32_t newest_dict(struct store *st)
{
	const struct pack_dict *d = blob_dict_current(st);
	assert_non_null(d);
	return pack_dict_id(d);
}

/* Every record encoded again at level 19: the live bytes fall, each page
 * reads back with its size and XXH3-128 unchanged, the early pages (no
 * dictionary) now need the newest one, and its row counts every page. */
static void test_reencoded_smaller_reads_back(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pages p;
	write_pages(st, &p, 100);
	uint32_t dict = newest_dict(st);
	struct fprec early = th_fprec_of(st, p.ino[0]), late = th_fprec_of(st, p.ino[M - 1]);
	assert_int_equal(early.pack_dict, 0); /* stored before the first dictionary */
	assert_int_equal(late.pack_dict, dict);
	assert_true(dict_records(st, dict) < M - EARLY); /* the pages stored after it */
	struct blob_pack_usage before, after;
	assert_int_equal(blob_pack_usage(st, &before), 0);

	struct blob_compact_cfg c = cfg_cold(19);
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(blob_pack_usage(st, &after), 0);
	printf("# live bytes %llu -> %llu; %llu of %llu records encoded again, %llu bytes smaller\n",
	       (unsigned long long)before.live, (unsigned long long)after.live, (unsigned long long)d.records_cold,
	       (unsigned long long)d.records_moved, (unsigned long long)d.bytes_cold_saved);
	assert_int_equal(d.damaged, 0);
	assert_true(d.records_cold >= EARLY); /* every early page at least */
	assert_true(d.bytes_cold_saved > 0);
	assert_int_equal(before.live - after.live, d.bytes_cold_saved);
	assert_int_equal(after.live_records, before.live_records);
	struct fprec now = th_fprec_of(st, p.ino[0]);
	assert_int_equal(now.pack_dict, dict);
	assert_true(now.pack_len < early.pack_len);
	assert_int_equal(now.size, early.size);
	assert_memory_equal(now.xxh128, early.xxh128, 16);
	struct pack_rec_hdr h;
	assert_int_equal(blob_rec_hdr(st, &now, &h), 0);
	assert_int_equal(h.encoding, PACK_ENC_ZSTD_DICT);
	assert_int_equal(h.dict, dict);
	assert_memory_equal(h.xxh128, early.xxh128, 16);
	assert_int_equal(dict_records(st, dict), M); /* every page needs it now */
	read_all(st, &p);
	struct blob_compact_stats total;
	assert_int_equal(blob_compact_stats(st, &total), 0);
	assert_int_equal(total.records_cold, d.records_cold);
	assert_int_equal(total.bytes_cold_saved, d.bytes_cold_saved);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir)); /* deep: every record decoded */
	st = open_store(dir, false); /* no dictionary in memory: loaded from its row */
	read_all(st, &p);
	assert_int_equal(store_close(st), 0);
	free_pages(&p);
	th_rmdir(dir);
}

/* A record whose new encoding is not smaller keeps its bytes: encoded at
 * level 19, then copied again at level 1, every record moves with its
 * length as it was and none counts as encoded again. */
static void test_not_smaller_keeps_bytes(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pages p;
	write_pages(st, &p, 300);
	struct blob_compact_cfg c = cfg_cold(19);
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_true(d.records_cold > 0);
	struct fprec was[M];
	for (int i = 0; i < M; i++)
		was[i] = th_fprec_of(st, p.ino[i]);
	c = cfg_cold(1);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.records_moved, M + 1); /* and the dictionary's record */
	assert_int_equal(d.records_cold, 0);
	for (int i = 0; i < M; i++) {
		struct fprec now = th_fprec_of(st, p.ino[i]);
		assert_int_not_equal(now.pack, was[i].pack); /* moved ... */
		assert_int_equal(now.pack_len, was[i].pack_len); /* ... as it was */
		assert_int_equal(now.pack_dict, was[i].pack_dict);
	}
	/* level 0: copied as they are, whatever they would gain */
	c = cfg_cold(0);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.records_moved, M + 1);
	assert_int_equal(d.records_cold, 0);
	read_all(st, &p);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_pages(&p);
	th_rmdir(dir);
}

/* A damaged record is not encoded again either: it stays, marked bad,
 * and the others are encoded and moved. */
static void test_damaged_record_not_reencoded(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pages p;
	write_pages(st, &p, 500);
	int victim = 7;
	struct blobkey k = th_blob_of(st, p.ino[victim]);
	struct fprec r = th_fprec_of(st, p.ino[victim]);
	th_damage_record(st, &r, 4, 4);
	struct blob_compact_cfg c = cfg_cold(19);
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.damaged, 1);
	assert_int_equal(d.records_moved, M - 1 + 1); /* the others and the dictionary */
	struct fprec now;
	assert_int_equal(blob_read(st, &k, &now), 0);
	assert_true(now.flags & FPREC_BAD);
	assert_int_equal(now.pack, r.pack);
	for (int i = 0; i < M; i++)
		if (i != victim)
			th_read_back(st, p.ino[i], p.body[i]);
	assert_int_equal(store_close(st), 0);
	free_pages(&p);
	th_rmdir(dir);
}

/* A dictionary no record needs any more goes (blob_dict_drop_unused, as
 * `pagededup compact --all` does after its pass), one that records need
 * or the newest stays: a store trained twice keeps both while pages need
 * the first; once every page was encoded again with the second, the
 * first's row and record go, and every page still reads, after a reopen
 * too (the dictionaries loaded from their rows), fsck --deep clean. */
static void test_unneeded_dictionary_goes(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	enum { T = 3 * BLOB_DICT_FIRST };
	static char *body[T];
	static uint64_t ino[T];
	char name[32];
	for (int i = 0; i < T; i++) {
		body[i] = th_page(7000 + (uint64_t)i, 300 + (unsigned)(i * 31) % 500,
				  "<div class=\"nav\"><a href=\"/\">home</a> the same navigation on every page</div>");
		snprintf(name, sizeof name, "t%04d.html", i);
		ino[i] = th_put_page(st, PD_ROOT_INO, name, body[i]);
		if (i % 64 == 0)
			blob_dict_settle(st);
	}
	blob_dict_settle(st);
	uint32_t newest = newest_dict(st);
	assert_true(newest >= 2);
	assert_true(dict_records(st, 1) > 0);
	uint64_t dropped, bytes;
	assert_int_equal(blob_dict_drop_unused(st, &dropped, &bytes), 0);
	assert_int_equal(dropped, 0); /* every one is needed */
	struct blob_compact_cfg c = cfg_cold(19);
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(dict_records(st, newest), T);
	for (uint32_t id = 1; id < newest; id++)
		assert_int_equal(dict_records(st, id), 0);
	assert_int_equal(blob_dict_drop_unused(st, &dropped, &bytes), 0);
	assert_int_equal(dropped, newest - 1);
	assert_true(bytes > 0);
	MDB_txn *txn;
	struct pack_loc loc;
	uint64_t records;
	assert_int_equal(store_read_begin(st, &txn), 0);
	for (uint32_t id = 1; id < newest; id++)
		assert_int_equal(blob_dict_row(txn, st, id, &loc, &records), -ENOENT);
	assert_int_equal(blob_dict_row(txn, st, newest, &loc, &records), 0);
	store_read_end(st, txn);
	for (int i = 0; i < T; i++)
		th_read_back(st, ino[i], body[i]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	st = open_store(dir, false);
	for (int i = 0; i < T; i++)
		th_read_back(st, ino[i], body[i]);
	/* the newest is still the one new records are encoded with */
	assert_int_equal(newest_dict(st), newest);
	assert_int_equal(store_close(st), 0);
	for (int i = 0; i < T; i++)
		free(body[i]);
	th_rmdir(dir);
}

/* The main packs present (ascending, malloc'd). */
static uint32_t *packs_of(struct store *st, size_t *n)
{
	uint32_t *ids;
	assert_int_equal(pack_list(st->packs, &ids, n), 0);
	return ids;
}

/* A second `compact --all` on an unchanged store costs no encoding: the
 * packs the first wrote carry the cold mark (level, deltas, dictionary)
 * and stay as they are, the same files, no record moved or encoded; a
 * reopened store appends to none of them. A pass at another level still
 * runs, and a cold pack that lost a page is written again. */
static void test_second_cold_pass_keeps_packs(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pages p;
	write_pages(st, &p, 900);
	struct blob_compact_cfg c = cfg_cold(19);
	struct blob_compact_stats d;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_true(d.records_cold > 0);
	assert_int_equal(d.packs_cold_kept, 0);
	size_t n1, n2;
	uint32_t *ids1 = packs_of(st, &n1);
	assert_true(n1 >= 1);
	for (size_t i = 0; i < n1; i++) {
		struct pack_cold m;
		assert_int_equal(pack_cold_of(st->packs, ids1[i], &m, NULL), 0);
		assert_int_equal(m.level, 19);
		assert_true(m.deltas);
		assert_int_equal(m.dict, newest_dict(st));
	}

	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_compacted, 0);
	assert_int_equal(d.records_moved, 0);
	assert_int_equal(d.records_cold, 0);
	assert_int_equal(d.packs_cold_kept, n1);
	uint32_t *ids2 = packs_of(st, &n2);
	assert_int_equal(n2, n1);
	assert_memory_equal(ids2, ids1, n1 * sizeof *ids1);
	free(ids2);

	/* reopened: a new page goes to a pack of its own, not a cold one */
	assert_int_equal(store_close(st), 0);
	st = open_store(dir, false);
	char *extra = th_page(77777, 600, "");
	uint64_t ino = th_put_page(st, PD_ROOT_INO, "late.html", extra);
	struct fprec late = th_fprec_of(st, ino);
	for (size_t i = 0; i < n1; i++)
		assert_int_not_equal(late.pack, ids1[i]);

	/* another level runs */
	c = cfg_cold(18);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_true(d.packs_compacted >= n1);
	assert_int_equal(d.packs_cold_kept, 0);
	c = cfg_cold(19);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_true(d.packs_compacted >= 1);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_compacted, 0);

	/* a cold pack that grew since the pass (an older build appended to
	 * it, and the pages it appended died since: the live totals are the
	 * row's again, the dead bytes stay) is written again */
	size_t n3;
	uint32_t *ids3 = packs_of(st, &n3);
	assert_true(n3 >= 1);
	char name[PACK_NAME_MAX], path[4096];
	pack_name(ids3[n3 - 1], name);
	snprintf(path, sizeof path, "%s/packs/%s", th_store_dir(dir), name);
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(truncate(path, sb.st_size + 8192), 0);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_compacted, 1);
	assert_int_equal(d.packs_cold_kept, n3 - 1);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_compacted, 0);
	free(ids3);

	/* a cold pack that lost a page is written again */
	uint64_t gone;
	bool last;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "c0003.html", &gone, &last), 0);
	assert_true(last);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_compacted, 1);
	assert_int_equal(d.records_moved, M - 1 + 2); /* the others, the late page and the dictionary */
	for (int i = 0; i < M; i++)
		if (i != 3)
			th_read_back(st, p.ino[i], p.body[i]);
	th_read_back(st, ino, extra);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(ids1);
	free(extra);
	free_pages(&p);
	th_rmdir(dir);
}

/* Whether pack id is among ids[0..n). */
static bool has_pack(const uint32_t *ids, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/* The idle pass's choice of packs (cfg.skip_marked, blob.h): nothing is
 * done under min_cold_bytes of records in packs not marked; over it, the
 * packs are encoded again and marked; with nothing new, a second pass does
 * nothing; with new pages, a marked pack under a sixteenth of
 * pack_max_bytes (what the last rest left) is taken again with them, and
 * one over it is left as it is. Every page reads back, fsck is clean. */
static void test_idle_pass_choice(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pages p;
	write_pages(st, &p, 1300);
	struct blob_compact_cfg c = cfg_cold(9);
	c.skip_marked = true;
	c.min_cold_bytes = UINT64_MAX;
	struct blob_compact_stats d;
	size_t n0, n1, n2, n3;
	uint32_t *ids0 = packs_of(st, &n0);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_compacted, 0);
	uint32_t *ids1 = packs_of(st, &n1);
	assert_int_equal(n1, n0);
	assert_memory_equal(ids1, ids0, n0 * sizeof *ids0);
	free(ids1);

	c.min_cold_bytes = 1;
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_true(d.packs_compacted >= 1);
	ids1 = packs_of(st, &n1);
	for (size_t i = 0; i < n1; i++) {
		struct pack_cold m;
		assert_int_equal(pack_cold_of(st->packs, ids1[i], &m, NULL), 0);
		assert_int_equal(m.level, 9);
		assert_false(has_pack(ids0, n0, ids1[i]));
	}
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_int_equal(d.packs_compacted, 0);

	/* new pages: the small marked packs go with them */
	char *more = th_page(4242, 3000, "");
	uint64_t more_ino = th_put_page(st, PD_ROOT_INO, "more.html", more);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_true(d.packs_compacted >= n1 + 1);
	uint32_t *ids2 = packs_of(st, &n2);
	for (size_t i = 0; i < n1; i++)
		assert_false(has_pack(ids2, n2, ids1[i]));

	/* a pack limit under the marked packs' size: they stay */
	assert_int_equal(store_close(st), 0);
	struct store_opts o = { .compact_share = -1, .delta_window = -1, .pack_max_bytes = 16384 };
	st = th_reopen(dir, &o);
	char *last = th_page(4343, 3000, "");
	uint64_t last_ino = th_put_page(st, PD_ROOT_INO, "last.html", last);
	assert_int_equal(blob_compact_run(st, &c, &d), 0);
	assert_true(d.packs_compacted >= 1);
	uint32_t *ids3 = packs_of(st, &n3);
	for (size_t i = 0; i < n2; i++)
		assert_true(has_pack(ids3, n3, ids2[i]));
	read_all(st, &p);
	th_read_back(st, more_ino, more);
	th_read_back(st, last_ino, last);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(ids0);
	free(ids1);
	free(ids2);
	free(ids3);
	free(more);
	free(last);
	free_pages(&p);
	th_rmdir(dir);
}

/* The daemon's compactor takes its level from the mount (-o
 * compact_level): the default, a level, or -1 for copies as they are;
 * deltas are never encoded again in its passes. */
static void test_daemon_level_option(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .compact_share = -1 };
	struct store *st = th_store(dir, NULL, &o);
	struct blob_compact_cfg c;
	blob_compact_cfg_of(st, &c);
	assert_int_equal(c.cold.level, BLOB_COMPACT_COLD_LEVEL);
	assert_false(c.cold.deltas);
	assert_false(c.every_pack);
	st->opts.compact_level = 12;
	blob_compact_cfg_of(st, &c);
	assert_int_equal(c.cold.level, 12);
	st->opts.compact_level = -1;
	blob_compact_cfg_of(st, &c);
	assert_int_equal(c.cold.level, 0);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* A crash after the re-encoded copies are synced (the commit never came:
 * the pages are read from their old records, the copies are dead bytes)
 * or after the commit (the pages read from the copies, the emptied pack a
 * leftover): fsck --deep finds no damage and every page reads. */
static void crash_after(const char *step, bool committed)
{
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pages p;
	write_pages(st, &p, 900);
	uint32_t dict = newest_dict(st);
	uint32_t old = th_fprec_of(st, p.ino[0]).pack;
	struct fprec was = th_fprec_of(st, p.ino[0]);
	th_compact_crash(st, old, cfg_cold(19), step);
	struct fsck_result fr = th_fsck(th_store_dir(dir), (struct fsck_opts){ .deep = true });
	assert_int_equal(fr.problems, 0);
	assert_int_equal(fr.leftovers, committed ? 1 : 0);
	st = open_store(dir, false);
	read_all(st, &p);
	struct fprec now = th_fprec_of(st, p.ino[0]);
	if (committed) { /* encoded again, and counted in the newest dictionary */
		assert_int_equal(now.pack_dict, dict);
		assert_true(now.pack_len < was.pack_len);
	} else { /* as before the pass */
		assert_int_equal(now.pack, was.pack);
		assert_int_equal(now.pack_off, was.pack_off);
		assert_int_equal(now.pack_dict, 0);
	}
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reencoded_smaller_reads_back),
		cmocka_unit_test(test_not_smaller_keeps_bytes),
		cmocka_unit_test(test_damaged_record_not_reencoded),
		cmocka_unit_test(test_unneeded_dictionary_goes),
		cmocka_unit_test(test_daemon_level_option),
		cmocka_unit_test(test_second_cold_pass_keeps_packs),
		cmocka_unit_test(test_idle_pass_choice),
		cmocka_unit_test(test_crash_after_copies),
		cmocka_unit_test(test_crash_after_commit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
