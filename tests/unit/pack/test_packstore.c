/* test_packstore.c - packs inside a store: a dictionary trained from the
 * store's own pages and used by the records after it (and read back after
 * a reopen), its live-record count kept, the disk blocks of deleted pages
 * given back, and fsck --deep clean throughout; pages read through open
 * files, decoded into memory or by chunks. */
#include <errno.h>
#include <fcntl.h>
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
#include "near/ndelta.h"
#include "near/sigq.h"

struct tally {
	uint64_t with_dict, without, dict_id;
};

/* Every record's dictionary, from the fingerprints. */
static void tally_records(struct store *st, struct tally *t)
{
	memset(t, 0, sizeof *t);
	MDB_txn *txn;
	MDB_cursor *c;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(mdb_cursor_open(txn, st->db_fp, &c), 0);
	MDB_val k, v;
	for (int m = mdb_cursor_get(c, &k, &v, MDB_FIRST); m == 0; m = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct fprec r;
		assert_int_equal(fprec_decode(v.mv_data, v.mv_size, &r), 0);
		assert_true(r.flags & FPREC_PACKED);
		if (r.pack_dict) {
			t->with_dict++;
			t->dict_id = r.pack_dict;
			/* the pack record says the same */
			struct pack_loc loc;
			struct pack_rec_hdr h;
			blob_rec_loc(&r, &loc);
			assert_int_equal(pack_read_hdr(st->packs, &loc, &h), 0);
			assert_int_equal(h.encoding, PACK_ENC_ZSTD_DICT);
			assert_int_equal(h.dict, r.pack_dict);
		} else {
			t->without++;
		}
	}
	mdb_cursor_close(c);
	store_read_end(st, txn);
}

static uint64_t allocated(const char *store)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/packs/pack-00000001", store);
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	return (uint64_t)sb.st_blocks * 512;
}

static void test_dictionary_trained_and_used(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	enum { N = BLOB_DICT_FIRST + 400 };
	static uint64_t ino[N];
	static char *page[N];
	char name[32];
	for (int i = 0; i < N; i++) {
		page[i] = th_page((uint64_t)i, 600, "<div class=\"nav\">site navigation, the same on every page</div>");
		snprintf(name, sizeof name, "p%04d.html", i);
		ino[i] = th_put_page(st, PD_ROOT_INO, name, page[i]);
		if (i == BLOB_DICT_FIRST)
			blob_dict_settle(st); /* the first training, started by the sample's last page */
	}
	struct tally t;
	tally_records(st, &t);
	assert_true(t.with_dict > 0);     /* the pages after the training use it */
	assert_true(t.without >= BLOB_DICT_FIRST - 1); /* those before could not */
	assert_int_equal(t.with_dict + t.without, N);
	/* its row counts exactly the records that need it */
	struct pack_loc loc;
	uint64_t records;
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_dict_row(txn, st, (uint32_t)t.dict_id, &loc, &records), 0);
	store_read_end(st, txn);
	assert_int_equal(records, t.with_dict);
	for (int i = 0; i < N; i += 37)
		th_read_back(st, ino[i], page[i]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	/* reopened: the dictionary comes back from its pack record */
	char err[PD_ERRLEN];
	struct store_opts o = { 0 };
	assert_int_equal(archive_open(th_store_dir(dir), &o, &st, err), 0);
	th_read_back(st, ino[N - 1], page[N - 1]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	for (int i = 0; i < N; i++)
		free(page[i]);
	th_rmdir(dir);
}

/* The training sample is drawn from all the pages sealed since the last
 * training, not the most recent ones: a crawl that moved from one site
 * to another keeps both in its next dictionary. After the second
 * dictionary, 400 pages of site A, then pages of site B, each site with
 * a boilerplate of its own, until the third training: it starts with at
 * least BLOB_DICT_FIRST pages of B the last ones sealed, yet its
 * dictionary holds A's boilerplate too. */
static uint32_t dict_now(struct store *st)
{
	blob_dict_settle(st);
	const struct pack_dict *d = blob_dict_current(st);
	return d ? pack_dict_id(d) : 0;
}

static void test_dictionary_sample_spread(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	static const char a_mark[] = "<nav class=\"alpha-site\">alpha navigation: home, archive, about alpha</nav>";
	static const char b_mark[] = "<nav class=\"beta-site\">beta navigation: start, index, contact beta</nav>";
	char name[32];
	int i = 0, a_after = 0, b_pages = 0;
	for (; dict_now(st) < 3; i++) {
		assert_true(i < 40 * BLOB_DICT_FIRST);
		bool site_a = dict_now(st) < 2 || a_after < 400;
		if (dict_now(st) == 2)
			site_a ? a_after++ : b_pages++;
		char *page = th_page((uint64_t)i, 300, site_a ? a_mark : b_mark);
		snprintf(name, sizeof name, "p%05d.html", i);
		th_put_page(st, PD_ROOT_INO, name, page);
		free(page);
	}
	/* the last BLOB_DICT_FIRST pages before the training were all B's */
	assert_true(b_pages >= BLOB_DICT_FIRST);
	size_t len;
	const char *bytes = pack_dict_bytes(blob_dict_current(st), &len);
	assert_non_null(memmem(bytes, len, "beta navigation", 15));
	assert_non_null(memmem(bytes, len, "alpha navigation", 16));
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* n pages of about 6,000 words (seeds from seed0) put as bigNN.html,
 * signed and through the delta step, then deleted; the packs' blocks
 * before the deletes and right after them. The background steps are done
 * first so that the deletes are all that changes the packs: a move out of
 * the nursery that a delete overtakes leaves its record to a punch of its
 * own, and records punched in different commits keep the blocks they
 * share (what compaction gives back), so a step running beside the
 * deletes left up to 14 more blocks when the machine was busy. */
static void put_then_delete(struct store *st, const char *dir, int n, uint64_t seed0, uint64_t *before,
			    uint64_t *after_deletes)
{
	char name[32];
	for (int i = 0; i < n; i++) {
		char *p = th_page(seed0 + (uint64_t)i, 6000, "");
		snprintf(name, sizeof name, "big%02d.html", i);
		th_put_page(st, PD_ROOT_INO, name, p);
		free(p);
	}
	assert_int_equal(sigq_drain(st), 0);
	sigq_drain_deltas(st);
	*before = allocated(th_store_dir(dir));
	for (int i = 0; i < n; i++) {
		uint64_t gone;
		bool last;
		snprintf(name, sizeof name, "big%02d.html", i);
		assert_int_equal(ns_unlink(st, PD_ROOT_INO, name, &gone, &last), 0);
	}
	*after_deletes = allocated(th_store_dir(dir));
}

/* Deleted pages give their disk blocks back (hole punching), for records
 * that span whole blocks (smaller ones wait for compaction), once the
 * commit that deleted them is durable, not before: until then a power cut
 * could bring back a commit that names them (store_commit.c, "Punched once
 * durable"). The sync thread is kept away (a sync every ten minutes), and
 * so are the compactor, whose commits are durable (one between the deletes
 * and the sync gave the blocks back early, 1 run in 20 under load), and
 * deltas (see below), so that the blocks go back at the store_sync below
 * and nowhere else. */
static void test_deleted_pages_give_blocks_back(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .sync_ms = 600000, .compact_share = -1, .delta_rule = NDELTA_RULE_OFF, .delta_window = -1 };
	struct store *st = th_store(dir, NULL, &o);
	uint64_t before, unsynced;
	put_then_delete(st, dir, 64, 5000, &before, &unsynced);
	assert_int_equal(store_sync(st), 0);
	uint64_t after = allocated(th_store_dir(dir));
	printf("# pack blocks: %llu bytes before the deletes, %llu after them, %llu after the sync\n",
	       (unsigned long long)before, (unsigned long long)unsynced, (unsigned long long)after);
	assert_true(unsynced >= before);
	assert_true(after < before / 2);
	assert_int_equal(th_count_stored(st), 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* With -o sync_blobs every commit is durable when it returns, and a
 * deleted page's blocks go back at once. The pages are kept whole (no
 * deltas): a base's record stays while a page stored against it lives,
 * so with deltas what the deletes give back depended on which bases the
 * delta step had chosen by then (1 run in 7 kept 70% of the blocks). */
static void test_deleted_pages_durable_commits_punch_at_once(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .sync_blobs = true, .delta_rule = NDELTA_RULE_OFF, .delta_window = -1 };
	struct store *st = th_store(dir, NULL, &o);
	uint64_t before, after;
	put_then_delete(st, dir, 16, 7000, &before, &after);
	printf("# pack blocks: %llu bytes before the deletes, %llu after\n", (unsigned long long)before,
	       (unsigned long long)after);
	assert_true(after < before / 2);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* A large page is stored in independently decodable chunks: a read at an
 * offset decodes only the chunks it covers. Damage in the first chunk
 * leaves a read near the end intact, and the first chunk's read is EIO. */
static void test_large_page_reads_by_chunk(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char *p = th_page(77, 450000, "");
	size_t len = strlen(p);
	assert_true(len > 8 * (1u << PACK_DEFAULT_CHUNK_SHIFT));
	uint64_t ino = th_put_page(st, PD_ROOT_INO, "big.html", p);
	struct inode in;
	assert_int_equal(ns_getattr(st, ino, &in), 0);
	struct fprec r;
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_get(txn, st, &in.blob, &r), 0);
	store_read_end(st, txn);
	uint32_t nchunks;
	unsigned shift;
	assert_int_equal(blob_chunking(st, &r, &nchunks, &shift), 0);
	assert_int_equal(nchunks, (len + (1u << shift) - 1) >> shift);
	/* damage the first chunk's stored bytes */
	th_damage_record(st, &r, (size_t)nchunks * PACK_CHUNK_ENT + 16, 8);
	struct pd_file *f;
	bool keep;
	char buf[4096];
	size_t got;
	assert_int_equal(file_open(st, ino, O_RDONLY, &f, &keep), 0);
	uint64_t off = len - 5000;
	assert_int_equal(file_read(f, buf, sizeof buf, off, &got), 0);
	assert_int_equal(got, sizeof buf);
	assert_memory_equal(buf, p + off, sizeof buf);
	assert_int_equal(file_read(f, buf, 100, 10, &got), -EIO);
	assert_int_equal(file_release(f), 0);
	free(p);
	store_abandon(st); /* the record is damaged: no fsck */
	th_rmdir(dir);
}

/* The bytes of an open file, read through f from offset 0. */
static void assert_reads(struct pd_file *f, const char *want, size_t len)
{
	char *buf = malloc(len + 1);
	size_t got;
	assert_non_null(buf);
	assert_int_equal(file_read(f, buf, len + 1, 0, &got), 0);
	assert_int_equal(got, len);
	assert_memory_equal(buf, want, len);
	free(buf);
}

/* A packed page of one frame is decoded at an open's first read into
 * memory charged to the staging budget, and given back at the last close;
 * past the budget the page is decoded into a memory file instead. A
 * writer of a page decoded in memory starts from those bytes, whether its
 * staged copy is in memory or (the budget full) in a staging file. A
 * damaged record reads EIO through either. */
static void test_pages_decoded_into_memory(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	/* no delta step or compactor: the damaged record below stays where it is */
	struct store_opts o = { .stage_mem_mb = 1, .delta_rule = NDELTA_RULE_OFF, .compact_share = -1 };
	struct store *st = th_store(dir, NULL, &o);
	enum { N = 40 };
	char *pages[N];
	uint64_t inos[N];
	struct pd_file *fs[N];
	bool keep;
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof name, "p%02d.html", i);
		pages[i] = th_page(300 + (uint64_t)i, 8000, "");
		assert_true(strlen(pages[i]) > 40000 && strlen(pages[i]) < (1u << PACK_DEFAULT_CHUNK_SHIFT));
		inos[i] = th_put_page(st, PD_ROOT_INO, name, pages[i]);
	}
	assert_int_equal(st->mem_staged, 0);
	/* all open at once: the first ones in memory, the rest past 1 MiB in
	 * memory files; every one reads its own bytes */
	for (int i = 0; i < N; i++) {
		assert_int_equal(file_open(st, inos[i], O_RDONLY, &fs[i], &keep), 0);
		assert_reads(fs[i], pages[i], strlen(pages[i]));
		if (i == 0)
			assert_int_equal(st->mem_staged, strlen(pages[0]));
	}
	assert_true(st->mem_staged > (1u << 20) - 40000 && st->mem_staged <= (1u << 20));
	/* a writer of page 0 (decoded in memory) with the budget full: its
	 * staged copy is a staging file made from the decoded bytes */
	struct pd_file *w;
	size_t done, len0 = strlen(pages[0]);
	assert_int_equal(file_open(st, inos[0], O_WRONLY, &w, &keep), 0);
	assert_int_equal(file_write(w, "TAIL", 4, len0, &done), 0);
	assert_int_equal(file_release(w), 0);
	char *grown = malloc(len0 + 5);
	assert_non_null(grown);
	memcpy(grown, pages[0], len0);
	memcpy(grown + len0, "TAIL", 5);
	assert_reads(fs[0], grown, len0 + 4);
	for (int i = 0; i < N; i++)
		assert_int_equal(file_release(fs[i]), 0);
	assert_int_equal(st->mem_staged, 0);
	th_read_back(st, inos[0], grown);
	/* the same with room in the budget: the staged copy in memory */
	struct pd_file *r;
	size_t len1 = strlen(pages[1]);
	assert_int_equal(file_open(st, inos[1], O_RDONLY, &r, &keep), 0);
	assert_reads(r, pages[1], len1);
	assert_int_equal(st->mem_staged, len1);
	assert_int_equal(file_open(st, inos[1], O_WRONLY, &w, &keep), 0);
	assert_int_equal(file_write(w, "TAIL", 4, len1, &done), 0);
	assert_int_equal(file_release(w), 0);
	assert_int_equal(file_release(r), 0);
	assert_int_equal(st->mem_staged, 0);
	memcpy(grown, pages[1], len1);
	memcpy(grown + len1, "TAIL", 5);
	th_read_back(st, inos[1], grown);
	free(grown);
	/* damage page 2's record: EIO, and nothing stays charged */
	struct inode in;
	struct fprec rec;
	MDB_txn *txn;
	assert_int_equal(ns_getattr(st, inos[2], &in), 0);
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_get(txn, st, &in.blob, &rec), 0);
	store_read_end(st, txn);
	th_damage_record(st, &rec, 16, 8);
	char buf[100];
	size_t got;
	assert_int_equal(file_open(st, inos[2], O_RDONLY, &r, &keep), 0);
	assert_int_equal(file_read(r, buf, sizeof buf, 0, &got), -EIO);
	assert_int_equal(st->mem_staged, 0);
	assert_int_equal(file_release(r), 0);
	for (int i = 0; i < N; i++)
		free(pages[i]);
	store_abandon(st); /* the record is damaged: no fsck */
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dictionary_trained_and_used),
		cmocka_unit_test(test_dictionary_sample_spread),
		cmocka_unit_test(test_deleted_pages_give_blocks_back),
		cmocka_unit_test(test_deleted_pages_durable_commits_punch_at_once),
		cmocka_unit_test(test_large_page_reads_by_chunk),
		cmocka_unit_test(test_pages_decoded_into_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
