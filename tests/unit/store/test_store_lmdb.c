/* test_store_lmdb.c - the namespace rows and LMDB's file on a real store:
 * a store of format 3 (inode rows in layout 1) opens, reads, is marked
 * format 4 and takes layout 2 rows as its inodes are written again;
 * store_lmdb_compact gives free pages back, loses nothing, refuses an
 * open store and clears a copy left by a crash; the map is advised random
 * and the reserve past its last used page primed a folio a page. */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "archive/archive.h"
#include "archive/stats.h"
#include "base/byteorder.h"
#include "helpers.h"
#include "store/store_int.h"

#define FILES 600

static void name_of(int i, char *out, size_t n)
{
	snprintf(out, n, "a-page-with-a-longish-name-%05d.html", i);
}

static void body_of(int i, char *out, size_t n)
{
	snprintf(out, n, "<html><body>page number %d of the test</body></html>", i);
}

static struct store *reopen(const char *dir)
{
	struct store *st;
	struct store_opts o = { 0 };
	char err[PD_ERRLEN];
	assert_int_equal(archive_open(dir, &o, &st, err), 0);
	return st;
}

struct rowcount {
	size_t row1, row2;
};

/* The name held by an inode row, as the `links` row an older release
 * kept instead. */
static void name_to_links_row(MDB_txn *txn, MDB_dbi dirents, MDB_dbi links, const struct inode *in)
{
	uint8_t kb[16], lk[8], lv[LINK_VAL_MAX];
	put_be64(kb, in->name_parent);
	put_be64(kb + 8, in->name_hash);
	MDB_val k = { 16, kb }, v;
	MDB_cursor *c;
	assert_int_equal(mdb_cursor_open(txn, dirents, &c), 0);
	bool found = false;
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET_KEY); rc == 0 && !found;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP)) {
		const char *name;
		size_t len;
		uint64_t child;
		uint32_t type;
		assert_int_equal(dirent_val_decode(v.mv_data, v.mv_size, &name, &len, &child, &type), 0);
		if (child != in->ino)
			continue;
		put_be64(lk, in->ino);
		put_be64(lv, in->name_parent);
		memcpy(lv + 8, name, len);
		MDB_val nk = { 8, lk }, nv = { 8 + len, lv };
		mdb_cursor_close(c);
		assert_int_equal(mdb_put(txn, links, &nk, &nv, MDB_NODUPDATA), 0);
		return;
	}
	fail_msg("inode %llu: no dirent for the name its row holds", (unsigned long long)in->ino);
}

/* Every inode row of the store in layout 1 (as a release of format 3
 * wrote them, every name in `links`), and the format record set to 3,
 * LMDB opened directly. */
static void rows_to_format3(const char *store, uint64_t ino, struct inode *seen)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/meta", store);
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi inodes, meta, dirents, links;
	MDB_cursor *c;
	assert_int_equal(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 64);
	mdb_env_set_mapsize(env, 1ull << 30);
	assert_int_equal(mdb_env_open(env, path, 0, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "inodes", 0, &inodes), 0);
	assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
	assert_int_equal(mdb_dbi_open(txn, "dirents", MDB_DUPSORT, &dirents), 0);
	assert_int_equal(mdb_dbi_open(txn, "links", MDB_DUPSORT, &links), 0);
	assert_int_equal(mdb_cursor_open(txn, inodes, &c), 0);
	MDB_val k, v;
	static uint64_t inos[FILES * 2];
	size_t n = 0;
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (v.mv_size < INODE_FIXED_BYTES && n < FILES * 2)
			inos[n++] = get_be64(k.mv_data);
	mdb_cursor_close(c);
	for (size_t i = 0; i < n; i++) {
		struct inode in;
		uint8_t kb[8], row[INODE_FIXED_BYTES];
		put_be64(kb, inos[i]);
		k = (MDB_val){ 8, kb };
		assert_int_equal(mdb_get(txn, inodes, &k, &v), 0);
		assert_int_equal(inode_decode(v.mv_data, v.mv_size, &in, NULL, NULL), 0);
		in.ino = inos[i];
		if (in.name_parent)
			name_to_links_row(txn, dirents, links, &in);
		in.name_parent = in.name_hash = 0;
		if (inos[i] == ino)
			*seen = in;
		MDB_val nv = { inode_encode(&in, NULL, 0, row), row };
		assert_int_equal(mdb_put(txn, inodes, &k, &nv, 0), 0);
	}
	uint8_t fb[4];
	put_le32(fb, 3);
	MDB_val fk = { 6, "format" }, fv = { 4, fb };
	assert_int_equal(mdb_put(txn, meta, &fk, &fv, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

static struct rowcount count_rows(struct store *st)
{
	struct rowcount n = { 0, 0 };
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val k, v;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(mdb_cursor_open(txn, st->db_inodes, &c), 0);
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		*(v.mv_size < INODE_FIXED_BYTES ? &n.row2 : &n.row1) += 1;
	mdb_cursor_close(c);
	store_read_end(st, txn);
	return n;
}

static void read_page(struct store *st, int i)
{
	char name[64], body[128];
	struct inode in;
	name_of(i, name, sizeof name);
	body_of(i, body, sizeof body);
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, name, &in), 0);
	assert_int_equal(in.size, strlen(body));
	th_read_back(st, in.ino, body);
}

static void fill(struct store *st, int from, int to)
{
	char name[64], body[128];
	for (int i = from; i < to; i++) {
		name_of(i, name, sizeof name);
		body_of(i, body, sizeof body);
		th_put(st, PD_ROOT_INO, name, body, strlen(body));
	}
}

/* stats of the store at dir, opened read-only, say it is of format fmt. */
static void assert_stats_format(const char *dir, uint32_t fmt)
{
	struct store *st;
	struct store_opts o = { .readonly = true };
	char err[PD_ERRLEN], text[8192], want[32];
	assert_int_equal(archive_open(dir, &o, &st, err), 0);
	struct pd_stats *s = calloc(1, sizeof *s);
	assert_non_null(s);
	assert_int_equal(stats_collect(st, s), 0);
	assert_int_equal(s->format, fmt);
	assert_true(stats_format(s, STATS_TEXT, text, sizeof text) < sizeof text);
	snprintf(want, sizeof want, "store format %u,", fmt);
	assert_non_null(strstr(text, want));
	free(s);
	assert_int_equal(store_close(st), 0);
}

static void test_format3_rows_converted(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	assert_int_equal(st->format, PD_FORMAT_VERSION);
	fill(st, 0, 100);
	struct inode before;
	char name[64];
	name_of(7, name, sizeof name);
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, name, &before), 0);
	struct rowcount n = count_rows(st);
	assert_int_equal(n.row2, 101); /* the files; the root stays in layout 1 */
	assert_int_equal(store_close(st), 0);
	rows_to_format3(th_store_dir(dir), before.ino, &before);
	assert_stats_format(th_store_dir(dir), 3); /* the store's, not this build's */

	st = reopen(th_store_dir(dir));
	assert_int_equal(st->format, PD_FORMAT_VERSION); /* the writable open marked it */
	n = count_rows(st);
	assert_int_equal(n.row2, 0);
	assert_int_equal(n.row1, 101);
	struct inode after;
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, name, &after), 0);
	assert_int_equal(before.atime.sec, after.atime.sec);
	assert_int_equal(before.atime.nsec, after.atime.nsec);
	assert_int_equal(before.mtime.sec, after.mtime.sec);
	assert_int_equal(before.mtime.nsec, after.mtime.nsec);
	assert_int_equal(before.ctime.nsec, after.ctime.nsec);
	assert_int_equal(before.mode, after.mode);
	assert_int_equal(before.size, after.size);
	assert_int_equal(before.flags, after.flags);
	assert_memory_equal(before.blob.md5, after.blob.md5, 16);
	for (int i = 0; i < 100; i++)
		read_page(st, i);
	/* rewritten inodes take layout 2, the others keep theirs */
	fill(st, 0, 10);
	fill(st, 100, 110);
	n = count_rows(st);
	assert_int_equal(n.row2, 20 + 1); /* the root's mtime changed too */
	assert_int_equal(n.row1, 90);
	for (int i = 0; i < 110; i++)
		read_page(st, i);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* Fewer pages than a dictionary's first training takes, none of the
 * store's threads, and durable commits (no checkpoint's read transaction,
 * store_ckpt.c): a test's readers are the only ones. */
enum { READER_PAGES = 400 };

static struct store *store_for_readers(char **dir)
{
	*dir = th_tmpdir();
	struct store_opts o = { .no_split_thread = true, .no_sign_thread = true, .no_delta_thread = true,
				.compact_share = -1, .sync_blobs = true };
	struct store *st = th_store(*dir, NULL, &o);
	fill(st, 0, READER_PAGES);
	return st;
}

/* Unlink every other page (a commit each); the inode of the first. */
static uint64_t unlink_every_other(struct store *st)
{
	char name[64];
	uint64_t first = 0;
	for (int i = 0; i < READER_PAGES; i += 2) {
		uint64_t ino;
		bool gone;
		name_of(i, name, sizeof name);
		assert_int_equal(ns_unlink(st, PD_ROOT_INO, name, &ino, &gone), 0);
		assert_true(gone);
		first = i ? first : ino;
	}
	return first;
}

/* A reader left open keeps the pages freed after its snapshot from reuse:
 * the reader table names its snapshot, and the freelist counts those
 * pages as pinned until it ends. */
static void test_lmdb_readers_pin_free_pages(void **state)
{
	(void)state;
	enum { PAGES = READER_PAGES };
	char *dir;
	struct store *st = store_for_readers(&dir);
	struct store_lmdb_readers r;
	assert_int_equal(store_lmdb_readers(st->env, &r), 0);
	assert_int_equal(r.active, 0);
	assert_int_equal(r.oldest_txnid, 0);
	assert_true(r.last_txnid > 0);

	MDB_txn *held, *txn;
	assert_int_equal(store_read_begin(st, &held), 0);
	uint64_t snapshot = mdb_txn_id(held);
	unlink_every_other(st);
	assert_int_equal(store_lmdb_readers(st->env, &r), 0);
	assert_int_equal(r.active, 1);
	assert_int_equal(r.oldest_txnid, snapshot);
	assert_true(r.last_txnid >= snapshot + PAGES / 2);
	uint64_t pages, pinned;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(store_lmdb_free_pages(txn, r.oldest_txnid, &pages, &pinned), 0);
	store_read_end(st, txn);
	assert_true(pinned > 0 && pinned <= pages);
	store_read_end(st, held);
	/* the longest reader is kept with the function that ended it */
	assert_true(st->reader_max_commits >= PAGES / 2);
	assert_string_equal(st->reader_max_in, __func__);

	assert_int_equal(store_lmdb_readers(st->env, &r), 0);
	assert_int_equal(r.active, 0);
	uint64_t pinned_after;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(store_lmdb_free_pages(txn, mdb_txn_id(txn), &pages, &pinned_after), 0);
	store_read_end(st, txn);
	assert_true(pinned_after < pinned);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* A long walk renews its snapshot in place: the same handle then reads
 * the newest commit and no longer keeps what the commits under its old
 * snapshot freed, and the commits it lived through are counted as a
 * reader's end counts them. */
static void test_lmdb_read_renew(void **state)
{
	(void)state;
	enum { PAGES = READER_PAGES };
	char *dir;
	struct store *st = store_for_readers(&dir);
	MDB_txn *walk;
	assert_int_equal(store_read_begin(st, &walk), 0);
	uint64_t snapshot = mdb_txn_id(walk);
	uint64_t first = unlink_every_other(st);
	struct store_lmdb_readers r;
	assert_int_equal(store_lmdb_readers(st->env, &r), 0);
	assert_int_equal(r.oldest_txnid, snapshot);
	struct inode in;
	assert_int_equal(ns_get_inode(walk, st, first, &in), 0); /* the old snapshot still has it */
	uint64_t pages, pinned_before, pinned;
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(store_lmdb_free_pages(txn, snapshot, &pages, &pinned_before), 0);
	store_read_end(st, txn);
	assert_true(pinned_before > 0);
	MDB_txn *same = walk;
	assert_int_equal(store_read_renew(st, &walk), 0);
	assert_ptr_equal(walk, same);
	assert_int_equal(store_lmdb_readers(st->env, &r), 0);
	assert_int_equal(r.active, 1);
	assert_int_equal(mdb_txn_id(walk), r.last_txnid);
	assert_int_equal(r.oldest_txnid, r.last_txnid);
	/* what the last commit freed stays kept for any reader of its snapshot */
	assert_int_equal(store_lmdb_free_pages(walk, r.oldest_txnid, &pages, &pinned), 0);
	assert_true(pinned < pinned_before);
	assert_true(st->reader_max_commits >= PAGES / 2);
	assert_string_equal(st->reader_max_in, __func__);
	assert_int_equal(ns_get_inode(walk, st, first, &in), -ENOENT); /* the renewed one sees the unlink */
	store_read_end(st, walk);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

static const struct store_opts SMALL_STORE_OPTS = { .no_split_thread = true, .no_sign_thread = true,
						     .no_delta_thread = true };

/* A store of 8 pages, open; *dir its directory, data its LMDB file. */
static struct store *small_store(char **dir, char *data, size_t n)
{
	*dir = th_tmpdir();
	struct store *st = th_store(*dir, NULL, &SMALL_STORE_OPTS);
	fill(st, 0, 8);
	snprintf(data, n, "%s/meta/data.mdb", th_store_dir(*dir));
	return st;
}

/* The VmFlags of the mapping of `path` in /proc/self/smaps, "" if none. */
static void map_flags(const char *path, char *out, size_t n)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	assert_non_null(f);
	char line[4200];
	bool in_map = false;
	out[0] = 0;
	while (fgets(line, sizeof line, f)) {
		size_t len = strlen(line);
		if (len && line[len - 1] == '\n')
			line[--len] = 0;
		if (!strncmp(line, "VmFlags:", 8)) {
			if (in_map)
				snprintf(out, n, "%s ", line + 8);
			in_map = false;
		} else if (strchr(line, '/') && len >= strlen(path) && !strcmp(line + len - strlen(path), path))
			in_map = true;
	}
	fclose(f);
}

/* The store's map is advised random (MDB_NORDAHEAD: VmFlags "rr"), so a
 * fault reads no large folio ahead into which a commit's pwrite()s would
 * then go (store.c env_open). */
static void test_lmdb_map_random(void **state)
{
	(void)state;
	char *dir, data[4200], flags[512];
	struct store *st = small_store(&dir, data, sizeof data);
	map_flags(data, flags, sizeof flags);
	assert_non_null(strstr(flags, " mr ")); /* the mapping is there, read-only */
	assert_non_null(strstr(flags, " rr "));
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* Whether the page at `p` (mapped, present) sits in a large folio, read
 * through pagemap (pm, /proc/self/pagemap) and kpageflags (kf,
 * /proc/kpageflags: KPF_COMPOUND_HEAD 15, KPF_COMPOUND_TAIL 16); -1 when
 * the kernel does not tell (no root). */
static int in_large_folio(int pm, int kf, const void *p)
{
	uint64_t e = 0, f = 0, pfn_mask = (1ull << 55) - 1;
	off_t at = (off_t)((uintptr_t)p / (uintptr_t)sysconf(_SC_PAGESIZE) * 8);
	if (pm < 0 || kf < 0 || pread(pm, &e, 8, at) != 8 || !(e >> 63) || !(e & pfn_mask) ||
	    pread(kf, &f, 8, (off_t)((e & pfn_mask) * 8)) != 8)
		return -1;
	return ((f >> 15) & 3) != 0;
}

/* The reserve past LMDB's last used page is in the page cache when the
 * store opens, a folio a page, so the commits' pwrite()s of new pages go
 * into pages of their own (store_commit.c prime_pages). */
static void test_lmdb_reserve_primed(void **state)
{
	(void)state;
	char *dir, data[4200];
	struct store *st = small_store(&dir, data, sizeof data);
	assert_int_equal(store_close(st), 0);
	int fd = open(data, O_RDONLY);
	assert_true(fd >= 0);
	struct stat sb;
	assert_int_equal(fstat(fd, &sb), 0);
	assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	st = th_reopen(dir, &SMALL_STORE_OPTS);
	MDB_envinfo info;
	mdb_env_info(st->env, &info);
	MDB_stat ms;
	mdb_env_stat(st->env, &ms);
	size_t ps = ms.ms_psize, used = (info.me_last_pgno + 1) * ps, size = (size_t)sb.st_size;
	assert_true(size >= used + (1u << 20)); /* a reserve of at least 1 MiB */
	unsigned char *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(madvise(m, size, MADV_RANDOM), 0);
	size_t n = (size - used) / ps, resident = 0, large = 0, told = 0;
	unsigned char *vec = malloc(n);
	int pm = open("/proc/self/pagemap", O_RDONLY), kf = open("/proc/kpageflags", O_RDONLY);
	assert_int_equal(mincore(m + used, size - used, vec), 0);
	for (size_t i = 0; i < n; i++) {
		if (!(vec[i] & 1))
			continue;
		resident++;
		volatile unsigned char touch = m[used + i * ps];
		(void)touch;
		int l = in_large_folio(pm, kf, m + used + i * ps);
		told += l >= 0;
		large += l > 0;
	}
	assert_int_equal(resident, n);
	if (told)
		assert_int_equal(large, 0);
	if (pm >= 0)
		close(pm);
	if (kf >= 0)
		close(kf);
	free(vec);
	munmap(m, size);
	close(fd);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* The rewrite at a close is bounded by LMDB's pages in use, not by its
 * file: a reader held over many commits (as the checkpoints' reader is
 * held over a sync interval, store_ckpt.c) leaves a file many times its
 * pages in use, and a bound between the two still rewrites it, losing
 * nothing. */
static void test_lmdb_rewrite_bound_on_pages_in_use(void **state)
{
	(void)state;
	char *dir;
	struct store *st = store_for_readers(&dir);
	const char *store = th_store_dir(dir);
	char data[4200];
	snprintf(data, sizeof data, "%s/meta/data.mdb", store);
	MDB_txn *held, *txn;
	assert_int_equal(store_read_begin(st, &held), 0);
	unlink_every_other(st);
	store_read_end(st, held);
	MDB_envinfo info;
	MDB_stat ms;
	uint64_t free_pages;
	assert_int_equal(store_env_info(st, &info, &ms), 0);
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(store_lmdb_free_pages(txn, UINT64_MAX, &free_pages, NULL), 0);
	store_read_end(st, txn);
	uint64_t in_use = (info.me_last_pgno + 1 - free_pages) * ms.ms_psize;
	struct stat s0, s1;
	assert_int_equal(stat(data, &s0), 0);
	assert_true((uint64_t)s0.st_size > 2 * in_use);
	/* over the pages in use, under the file */
	st->opts.lmdb_rewrite_max = in_use + ((uint64_t)s0.st_size - in_use) / 2;
	assert_int_equal(store_close(st), 0);
	assert_int_equal(stat(data, &s1), 0);
	assert_int_not_equal(s0.st_ino, s1.st_ino);
	assert_true((uint64_t)s1.st_size < (uint64_t)s0.st_size / 2);
	th_assert_fsck_clean(store);
	st = reopen(store);
	for (int i = 1; i < READER_PAGES; i += 2)
		read_page(st, i);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

static void test_lmdb_compact(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	const char *store = th_store_dir(dir);
	char err[PD_ERRLEN], name[64], leftover[4200], data[4200];
	snprintf(leftover, sizeof leftover, "%s/meta/data.mdb.compact", store);
	snprintf(data, sizeof data, "%s/meta/data.mdb", store);
	struct store *st = th_store(dir, NULL, NULL);
	fill(st, 0, FILES);
	for (int i = 0; i < FILES; i += 3) {
		uint64_t ino;
		bool gone;
		name_of(i, name, sizeof name);
		assert_int_equal(ns_unlink(st, PD_ROOT_INO, name, &ino, &gone), 0);
	}
	/* deletes leave pages on LMDB's freelist */
	MDB_txn *txn;
	uint64_t free_before, free_after;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(store_lmdb_free_pages(txn, UINT64_MAX, &free_before, NULL), 0);
	store_read_end(st, txn);
	assert_true(free_before > 0);
	MDB_envinfo info;
	assert_int_equal(mdb_env_info(st->env, &info), 0);
	uint64_t pages_before = info.me_last_pgno + 1;
	/* an open store is refused and left alone */
	uint64_t before, after;
	struct stat s0, s1;
	assert_int_equal(stat(data, &s0), 0);
	assert_int_equal(store_lmdb_compact(store, &before, &after, err), -EBUSY);
	assert_non_null(strstr(err, "in use"));
	assert_int_equal(stat(data, &s1), 0);
	assert_int_equal(s0.st_ino, s1.st_ino);
	assert_int_equal(store_close(st), 0);

	/* a copy left by a crash before its rename goes */
	int fd = open(leftover, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "half a copy", 11), 11);
	close(fd);
	assert_int_equal(store_lmdb_compact(store, &before, &after, err), 0);
	assert_true(after > 0 && before > 0);
	assert_int_equal(access(leftover, F_OK), -1);
	MDB_env *env;
	MDB_stat ms;
	assert_int_equal(mdb_env_create(&env), 0);
	char meta[4200];
	snprintf(meta, sizeof meta, "%s/meta", store);
	assert_int_equal(mdb_env_open(env, meta, MDB_RDONLY, 0600), 0);
	mdb_env_stat(env, &ms);
	mdb_env_info(env, &info);
	mdb_env_close(env);
	/* no page beyond the live ones, and LMDB's reserve after them */
	assert_true(info.me_last_pgno + 1 < pages_before);
	uint64_t used = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
	assert_int_equal(stat(data, &s1), 0);
	assert_int_equal((uint64_t)s1.st_size, used + store_lmdb_reserve(used));

	th_assert_fsck_clean(store);
	st = reopen(store);
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(store_lmdb_free_pages(txn, UINT64_MAX, &free_after, NULL), 0);
	store_read_end(st, txn);
	assert_true(free_after < free_before); /* the open's own commits free a few */
	for (int i = 0; i < FILES; i++) {
		struct inode in;
		name_of(i, name, sizeof name);
		if (i % 3 == 0)
			assert_int_equal(ns_lookup(st, PD_ROOT_INO, name, &in), -ENOENT);
		else
			read_page(st, i);
	}
	fill(st, FILES, FILES + 50);
	read_page(st, FILES + 49);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(store);
	th_rmdir(dir);
}

/* Pages and entries of one table, LMDB opened directly (a closed store). */
static MDB_stat table_stat(const char *store, const char *table, bool *exists)
{
	char meta[4200];
	snprintf(meta, sizeof meta, "%s/meta", store);
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi d;
	MDB_stat ms = { 0 };
	assert_int_equal(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 64);
	assert_int_equal(mdb_env_open(env, meta, MDB_RDONLY, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	*exists = mdb_dbi_open(txn, table, 0, &d) == 0;
	if (*exists)
		assert_int_equal(mdb_stat(txn, d, &ms), 0);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	return ms;
}

struct listing {
	char text[1 << 17];
	size_t n;
};

static int list_one(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t type, uint64_t off,
		    const struct inode *in)
{
	(void)in;
	struct listing *l = ctx;
	l->n += (size_t)snprintf(l->text + l->n, sizeof l->text - l->n, "%.*s %llu %u %llx\n", (int)len, name,
				 (unsigned long long)ino, type, (unsigned long long)off);
	assert_true(l->n < sizeof l->text);
	return 0;
}

/* compact writes every table again in key order: fuller pages,
 * the same rows (readdir gives the same names at the same offsets), and
 * a scratch table left by a crash goes. */
static void test_lmdb_compact_repacks(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char store[4200], name[64], err[PD_ERRLEN];
	snprintf(store, sizeof store, "%s", th_store_dir(dir));
	fill(st, 0, 1500);
	struct inode in, sub;
	const struct pd_cred cred = { 0, 0, 0, NULL };
	assert_int_equal(ns_mknode(st, PD_ROOT_INO, "sub", S_IFDIR | 0755, 0, NULL, &cred, &sub), 0);
	for (int i = 0; i < 200; i++) { /* two names each: link rows with two values */
		name_of(i, name, sizeof name);
		assert_int_equal(ns_lookup(st, PD_ROOT_INO, name, &in), 0);
		assert_int_equal(ns_link(st, in.ino, sub.ino, name, &in), 0);
	}
	for (int i = 0; i < 300; i++) /* one page under many files: blob_inodes values */
		th_put(st, sub.ino, (snprintf(name, sizeof name, "same-%d", i), name), "the same page", 13);
	/* a second file of 600 pages: blobs of two files, whose inodes are
	 * blob_inodes rows in MD5 order (format 7: a blob of one file keeps
	 * its inode in its fingerprint row) */
	for (int i = 0; i < 600; i++) {
		char body[128], twin[64];
		body_of(i, body, sizeof body);
		snprintf(twin, sizeof twin, "twin-%d", i);
		th_put(st, sub.ino, twin, body, strlen(body));
	}
	static struct listing before, after;
	assert_int_equal(ns_readdir(st, PD_ROOT_INO, 0, false, list_one, &before), 0);
	assert_int_equal(store_close(st), 0);
	bool exists;
	MDB_stat d0 = table_stat(store, "dirents", &exists), b0 = table_stat(store, "blob_inodes", &exists);
	MDB_stat l0 = table_stat(store, "links", &exists), f0 = table_stat(store, "fingerprints", &exists);

	/* a scratch table as a crash in the middle would leave it */
	char meta[4200];
	snprintf(meta, sizeof meta, "%s/meta", store);
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi scratch;
	assert_int_equal(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 64);
	assert_int_equal(mdb_env_open(env, meta, 0, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	assert_int_equal(mdb_dbi_open(txn, "repack.scratch", MDB_CREATE | MDB_DUPSORT, &scratch), 0);
	MDB_val k = { 3, "key" }, v = { 5, "value" };
	assert_int_equal(mdb_put(txn, scratch, &k, &v, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);

	uint64_t lb, la;
	assert_int_equal(store_lmdb_compact(store, &lb, &la, err), 0);
	MDB_stat d1 = table_stat(store, "dirents", &exists), b1 = table_stat(store, "blob_inodes", &exists);
	MDB_stat l1 = table_stat(store, "links", &exists), f1 = table_stat(store, "fingerprints", &exists);
	table_stat(store, "repack.scratch", &exists);
	assert_false(exists);
	assert_int_equal(d1.ms_entries, d0.ms_entries);
	assert_int_equal(b1.ms_entries, b0.ms_entries);
	assert_int_equal(l1.ms_entries, l0.ms_entries);
	assert_int_equal(f1.ms_entries, f0.ms_entries);
	assert_true(f1.ms_leaf_pages < f0.ms_leaf_pages); /* keyed by MD5 too */
	assert_true(l0.ms_entries >= 400);
	/* a key-ordered table fills its leaves: fewer of them */
	assert_true(d1.ms_leaf_pages < d0.ms_leaf_pages);
	assert_true(b1.ms_leaf_pages < b0.ms_leaf_pages);
	print_message("dirents leaf pages %zu -> %zu, blob_inodes %zu -> %zu\n", d0.ms_leaf_pages, d1.ms_leaf_pages,
		      b0.ms_leaf_pages, b1.ms_leaf_pages);

	th_assert_fsck_clean(store);
	st = reopen(store);
	assert_int_equal(ns_readdir(st, PD_ROOT_INO, 0, false, list_one, &after), 0);
	assert_string_equal(before.text, after.text);
	for (int i = 0; i < 1500; i++)
		read_page(st, i);
	th_read_back(st, th_put(st, sub.ino, "same-299", "the same page", 13), "the same page");
	fill(st, 1500, 1600); /* and it takes more */
	read_page(st, 1599);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(store);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format3_rows_converted),
		cmocka_unit_test(test_lmdb_readers_pin_free_pages),
		cmocka_unit_test(test_lmdb_read_renew),
		cmocka_unit_test(test_lmdb_map_random),
		cmocka_unit_test(test_lmdb_reserve_primed),
		cmocka_unit_test(test_lmdb_rewrite_bound_on_pages_in_use),
		cmocka_unit_test(test_lmdb_compact),
		cmocka_unit_test(test_lmdb_compact_repacks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
