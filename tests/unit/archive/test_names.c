/* test_names.c - where the namespace keeps the way back from an inode to
 * its names (ns.h): the one name of a file or directory in its own inode
 * row, every name in `links` once a file has two, back in the row when it
 * is down to one; symlinks always in `links`. Paths, "..", rename (also
 * over a file and RENAME_EXCHANGE) and fsck agree with the tables at each
 * step; a store whose names are all in `links` (format 4) opens, reads,
 * and `fsck --repair` moves them into the rows with the same paths. */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
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
#include "archive/ns.h"
#include "archive/paths.h"
#include "base/byteorder.h"
#include "fsck/fsck.h"
#include "helpers.h"

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static const struct pd_cred root_cred = { 0, 0, 0, NULL };

static struct store *reopen(const char *dir)
{
	struct store *st;
	struct store_opts o = { 0 };
	char err[PD_ERRLEN];
	assert_int_equal(archive_open(dir, &o, &st, err), 0);
	return st;
}

/* The `links` rows of ino. */
static size_t link_rows(struct store *st, uint64_t ino)
{
	MDB_txn *txn;
	MDB_cursor *c;
	uint8_t kb[8];
	put_be64(kb, ino);
	MDB_val k = { 8, kb }, v;
	size_t n = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(mdb_cursor_open(txn, st->db_links, &c), 0);
	if (mdb_cursor_get(c, &k, &v, MDB_SET_KEY) == 0)
		assert_int_equal(mdb_cursor_count(c, &n), 0);
	mdb_cursor_close(c);
	store_read_end(st, txn);
	return n;
}

static size_t all_link_rows(struct store *st)
{
	return th_table_rows(st, st->db_links);
}

static struct inode inode_of(struct store *st, uint64_t ino)
{
	struct inode in;
	assert_int_equal(ns_getattr(st, ino, &in), 0);
	return in;
}

/* The row of ino holds the name (parent, name). */
static void assert_name_in_row(struct store *st, uint64_t ino, uint64_t parent, const char *name)
{
	struct inode in = inode_of(st, ino);
	assert_int_equal(in.name_parent, parent);
	assert_true(in.name_hash == dirent_hash(name, strlen(name)));
	assert_int_equal(link_rows(st, ino), 0);
}

static int add_path(void *ctx, const char *path, size_t len)
{
	char *out = ctx;
	size_t n = strlen(out);
	snprintf(out + n, 4096 - n, "%s%.*s", n ? "\n" : "", (int)len, path);
	return 0;
}

/* Every path of ino, one a line, in the order path_names gives them. */
static void paths_of(struct store *st, uint64_t ino, char out[4096])
{
	MDB_txn *txn;
	out[0] = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(path_names(txn, st, ino, &root_cred, add_path, out), 0);
	store_read_end(st, txn);
}

static void assert_paths(struct store *st, uint64_t ino, const char *want)
{
	char got[4096];
	paths_of(st, ino, got);
	assert_string_equal(got, want);
}

struct dotdot {
	uint64_t ino;
};

static int find_dotdot(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t type, uint64_t off,
		       const struct inode *in)
{
	(void)type;
	(void)off;
	(void)in;
	if (len == 2 && !memcmp(name, "..", 2)) {
		((struct dotdot *)ctx)->ino = ino;
		return 1;
	}
	return 0;
}

static uint64_t dotdot_of(struct store *st, uint64_t dir)
{
	struct dotdot d = { 0 };
	assert_int_equal(ns_readdir(st, dir, 0, false, find_dotdot, &d), 0);
	return d.ino;
}

static uint64_t mkdir_in(struct store *st, uint64_t parent, const char *name)
{
	struct inode in;
	assert_int_equal(ns_mknode(st, parent, name, S_IFDIR | 0755, 0, NULL, &root_cred, &in), 0);
	return in.ino;
}

static void test_one_name_in_row(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	uint64_t d = mkdir_in(st, PD_ROOT_INO, "site");
	uint64_t sub = mkdir_in(st, d, "news");
	uint64_t f = th_put(st, sub, "index.html", "<p>one</p>", 10);
	struct inode sl;
	assert_int_equal(ns_mknode(st, d, "latest", S_IFLNK | 0777, 0, "news/index.html", &root_cred, &sl), 0);
	assert_name_in_row(st, d, PD_ROOT_INO, "site");
	assert_name_in_row(st, sub, d, "news");
	assert_name_in_row(st, f, sub, "index.html");
	assert_int_equal(link_rows(st, sl.ino), 1); /* a symlink's row is of layout 1 */
	assert_int_equal(all_link_rows(st), 1);
	assert_paths(st, f, "/site/news/index.html");
	assert_paths(st, sl.ino, "/site/latest");
	assert_int_equal(dotdot_of(st, sub), d);
	assert_int_equal(dotdot_of(st, d), PD_ROOT_INO);
	/* a directory cannot move below itself: its parents are found by rows */
	uint64_t replaced;
	bool gone;
	assert_int_equal(ns_rename(st, PD_ROOT_INO, "site", sub, "loop", 0, &replaced, &gone), -EINVAL);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

static void test_second_name_and_back(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	uint64_t d = mkdir_in(st, PD_ROOT_INO, "d");
	uint64_t f = th_put(st, d, "a.html", "<p>shared</p>", 13);
	struct inode in;
	assert_int_equal(ns_link(st, f, PD_ROOT_INO, "b.html", &in), 0);
	assert_int_equal(in.nlink, 2);
	assert_int_equal(inode_of(st, f).name_parent, 0);
	assert_int_equal(link_rows(st, f), 2);
	assert_paths(st, f, "/b.html\n/d/a.html");
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));

	st = reopen(th_store_dir(dir));
	uint64_t ino;
	bool gone;
	assert_int_equal(ns_unlink(st, d, "a.html", &ino, &gone), 0);
	assert_false(gone);
	assert_name_in_row(st, f, PD_ROOT_INO, "b.html");
	assert_paths(st, f, "/b.html");
	th_read_back(st, f, "<p>shared</p>");
	/* the last name goes: an orphan with neither */
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "b.html", &ino, &gone), 0);
	assert_true(gone);
	assert_int_equal(all_link_rows(st), 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

static void test_renames(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	uint64_t a = mkdir_in(st, PD_ROOT_INO, "a"), b = mkdir_in(st, PD_ROOT_INO, "b");
	uint64_t f = th_put(st, a, "f.html", "<p>f</p>", 8);
	uint64_t g = th_put(st, a, "g.html", "<p>g</p>", 8);
	uint64_t h = th_put(st, b, "h.html", "<p>h</p>", 8);
	struct inode in;
	assert_int_equal(ns_link(st, h, PD_ROOT_INO, "h2.html", &in), 0);
	uint64_t replaced;
	bool gone;
	/* a file of one name moves: its row follows */
	assert_int_equal(ns_rename(st, a, "f.html", b, "moved.html", 0, &replaced, &gone), 0);
	assert_name_in_row(st, f, b, "moved.html");
	assert_paths(st, f, "/b/moved.html");
	/* a directory moves: its row, its "..", the paths below it */
	assert_int_equal(ns_rename(st, PD_ROOT_INO, "a", b, "a2", 0, &replaced, &gone), 0);
	assert_name_in_row(st, a, b, "a2");
	assert_int_equal(dotdot_of(st, a), b);
	assert_paths(st, g, "/b/a2/g.html");
	/* exchange a one-name file with one name of a two-name file */
	assert_int_equal(ns_rename(st, a, "g.html", PD_ROOT_INO, "h2.html", RENAME_EXCHANGE, &replaced, &gone), 0);
	assert_name_in_row(st, g, PD_ROOT_INO, "h2.html");
	assert_int_equal(link_rows(st, h), 2);
	assert_paths(st, h, "/b/a2/g.html\n/b/h.html");
	/* rename over one name of the two-name file: it is back at one, in its row */
	assert_int_equal(ns_rename(st, b, "moved.html", b, "h.html", 0, &replaced, &gone), 0);
	assert_int_equal(replaced, h);
	assert_false(gone);
	assert_name_in_row(st, h, a, "g.html");
	assert_name_in_row(st, f, b, "h.html");
	assert_paths(st, h, "/b/a2/g.html");
	assert_paths(st, f, "/b/h.html");
	th_read_back(st, h, "<p>h</p>");
	assert_int_equal(all_link_rows(st), 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* Every name held by an inode row moved into `links` and the store marked
 * format 4, as a release of format 4 kept them; LMDB opened directly. */
static void names_to_format4(const char *store)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/meta", store);
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi inodes, meta;
	assert_int_equal(mdb_env_create(&env), 0);
	mdb_env_set_maxdbs(env, 64);
	mdb_env_set_mapsize(env, 1ull << 30);
	assert_int_equal(mdb_env_open(env, path, 0, 0600), 0);
	assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
	struct store sh = { .env = env, .format = PD_FORMAT_VERSION };
	assert_int_equal(mdb_dbi_open(txn, "inodes", 0, &inodes), 0);
	assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
	assert_int_equal(mdb_dbi_open(txn, "dirents", MDB_DUPSORT, &sh.db_dirents), 0);
	assert_int_equal(mdb_dbi_open(txn, "links", MDB_DUPSORT, &sh.db_links), 0);
	sh.db_inodes = inodes;
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t inos[64];
	size_t n = 0;
	assert_int_equal(mdb_cursor_open(txn, inodes, &c), 0);
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (n < 64)
			inos[n++] = get_be64(k.mv_data);
	mdb_cursor_close(c);
	for (size_t i = 0; i < n; i++) {
		struct inode in;
		assert_int_equal(ns_get_inode(txn, &sh, inos[i], &in), 0);
		if (!in.name_parent)
			continue;
		assert_int_equal(ns_name_to_links(txn, &sh, &in), 0);
		assert_int_equal(ns_put_inode(txn, &sh, &in), 0);
	}
	uint8_t fb[4];
	put_le32(fb, 4);
	MDB_val fk = { 6, "format" }, fv = { 4, fb };
	assert_int_equal(mdb_put(txn, meta, &fk, &fv, 0), 0);
	assert_int_equal(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

static void fsck_store(const char *dir, bool repair, struct fsck_result *r)
{
	struct fsck_opts o = { .repair = repair };
	char err[512];
	assert_int_equal(fsck_run(dir, &o, r, err), 0);
	assert_int_equal(r->problems, 0);
}

static void test_format4_names_converted(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	uint64_t d = mkdir_in(st, PD_ROOT_INO, "d");
	uint64_t f = th_put(st, d, "a.html", "<p>a</p>", 8);
	uint64_t g = th_put(st, PD_ROOT_INO, "g.html", "<p>g</p>", 8);
	struct inode in;
	assert_int_equal(ns_link(st, g, d, "g2.html", &in), 0);
	assert_int_equal(store_close(st), 0);
	names_to_format4(th_store_dir(dir));

	/* read as it is: every name in `links`; a writable open marks it */
	st = reopen(th_store_dir(dir));
	assert_int_equal(st->format, PD_FORMAT_VERSION);
	assert_int_equal(inode_of(st, f).name_parent, 0);
	assert_int_equal(link_rows(st, f), 1);
	assert_int_equal(link_rows(st, d), 1);
	assert_paths(st, f, "/d/a.html");
	assert_paths(st, g, "/g.html\n/d/g2.html");
	assert_int_equal(dotdot_of(st, d), PD_ROOT_INO);
	th_read_back(st, f, "<p>a</p>");
	assert_int_equal(store_close(st), 0);

	/* fsck: no damage, a note; --repair moves the one-name ones */
	struct fsck_result r;
	fsck_store(th_store_dir(dir), false, &r);
	assert_true(r.notes > 0);
	fsck_store(th_store_dir(dir), true, &r);
	st = reopen(th_store_dir(dir));
	assert_name_in_row(st, f, d, "a.html");
	assert_name_in_row(st, d, PD_ROOT_INO, "d");
	assert_int_equal(link_rows(st, g), 2);
	assert_int_equal(all_link_rows(st), 2);
	assert_paths(st, f, "/d/a.html");
	assert_paths(st, g, "/g.html\n/d/g2.html");
	th_read_back(st, f, "<p>a</p>");
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_name_in_row),
		cmocka_unit_test(test_second_name_and_back),
		cmocka_unit_test(test_renames),
		cmocka_unit_test(test_format4_names_converted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
