/* test_later.c - a new file's create commits with its close() (ns_later.h):
 * no row before, its rows and page after, one commit for both; while it
 * waits it is answered (getattr, lookup), a readdir, a directory's times
 * and every write see it (a rename, a rmdir of its directory), a second
 * create of its name is refused, a change of its attributes before its
 * close() joins it, an empty file's close() commits it, inode
 * numbers given meanwhile do not collide, a store given up with a create
 * waiting opens clean without it, and under sync_blobs a create commits at
 * once. */
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
#include "archive/ns_later.h"
#include "archive/openfile.h"
#include "helpers.h"

static const struct pd_cred root_cred = { 0, 0, 0, NULL };

/* No background thread commits behind the test's back. */
static const struct store_opts quiet = { .no_sign_thread = true, .sync_ms = 3600 * 1000 };

/* ino's row as LMDB holds it, without committing what waits. */
static int row_of(struct store *st, uint64_t ino, struct inode *in)
{
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	int rc = ns_get_inode(txn, st, ino, in);
	store_read_end(st, txn);
	return rc;
}

static uint64_t create(struct store *st, uint64_t parent, const char *name)
{
	struct inode in;
	assert_int_equal(ns_create_file(st, parent, name, 0644, &root_cred, &in), 0);
	assert_true(S_ISREG(in.mode));
	return in.ino;
}

static void write_close(struct store *st, uint64_t ino, const char *text)
{
	struct pd_file *f;
	bool keep;
	size_t done;
	assert_int_equal(file_open(st, ino, O_WRONLY, &f, &keep), 0);
	if (text) {
		assert_int_equal(file_write(f, text, strlen(text), 0, &done), 0);
		assert_int_equal(done, strlen(text));
	}
	assert_int_equal(file_flush(f), 0);
	assert_int_equal(file_release(f), 0);
}

static void test_create_commits_with_its_page(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, &quiet);
	uint64_t commits = st->commits;
	uint64_t ino = create(st, PD_ROOT_INO, "a.html");
	struct inode in, row;
	/* nothing committed: the create waits */
	assert_int_equal(st->commits, commits);
	assert_int_equal(row_of(st, ino, &row), -ENOENT);
	/* and is answered meanwhile */
	assert_int_equal(ns_getattr(st, ino, &in), 0);
	assert_int_equal(in.ino, ino);
	assert_int_equal(in.size, 0);
	assert_int_equal(in.nlink, 1);
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, "a.html", &in), 0);
	assert_int_equal(in.ino, ino);
	/* its close commits it with the page, in one commit */
	write_close(st, ino, "<p>a</p>");
	assert_int_equal(st->commits, commits + 1);
	assert_int_equal(row_of(st, ino, &row), 0);
	assert_int_equal(row.size, 8);
	th_read_back(st, ino, "<p>a</p>");
	assert_int_equal(store_close(st), 0);
	st = th_reopen(dir, &quiet);
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, "a.html", &in), 0);
	assert_int_equal(in.ino, ino);
	th_read_back(st, ino, "<p>a</p>");
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

static bool listed(struct store *st, uint64_t dir, const char *name);

/* tar and cp -p set a new file's times, owner and mode on the open file,
 * before its close(): each joins the waiting create, none commits, and
 * the close() commits them with the create and the page. */
static void test_attributes_join_the_create(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, &quiet);
	struct inode d, in, row;
	assert_int_equal(ns_mknode(st, PD_ROOT_INO, "site", S_IFDIR | 0755, 0, NULL, &root_cred, &d), 0);
	uint64_t ino = create(st, d.ino, "a.html");
	struct inode made;
	assert_int_equal(ns_getattr(st, ino, &made), 0);
	struct pd_file *f;
	bool keep;
	size_t done;
	assert_int_equal(file_open(st, ino, O_WRONLY, &f, &keep), 0);
	assert_int_equal(file_write(f, "<p>a</p>", 8, 0, &done), 0);
	usleep(2000);
	uint64_t commits = st->commits;
	/* as tar x does: utimensat, fchown, fchmod on the open file */
	struct pd_time past = { 1500000000, 123456789 };
	struct ns_setattr sa = { .valid = NS_SET_MTIME, .mtime = past };
	assert_int_equal(ns_setattr(st, ino, &sa, &in), 0);
	file_set_mtime(st, ino, in.mtime);
	sa = (struct ns_setattr){ .valid = NS_SET_UID | NS_SET_GID, .uid = 1234, .gid = 5678 };
	assert_int_equal(ns_setattr(st, ino, &sa, &in), 0);
	assert_int_equal(in.uid, 1234);
	sa = (struct ns_setattr){ .valid = NS_SET_MODE, .mode = 04751 };
	assert_int_equal(ns_setattr(st, ino, &sa, &in), 0);
	assert_int_equal(st->commits, commits);
	assert_int_equal(row_of(st, ino, &row), -ENOENT);
	/* answered meanwhile */
	assert_int_equal(ns_getattr(st, ino, &in), 0);
	assert_int_equal(in.uid, 1234);
	assert_int_equal(in.gid, 5678);
	assert_int_equal(in.mode, S_IFREG | 04751);
	assert_true(pd_time_cmp(in.ctime, made.ctime) > 0);
	/* a change of owner takes set-user-ID away, as chown(2) does */
	sa = (struct ns_setattr){ .valid = NS_SET_UID, .uid = 1235 };
	assert_int_equal(ns_setattr(st, ino, &sa, &in), 0);
	assert_int_equal(in.mode, S_IFREG | 0751);
	assert_int_equal(st->commits, commits);
	/* the close commits them all, once */
	assert_int_equal(file_flush(f), 0);
	assert_int_equal(file_release(f), 0);
	assert_int_equal(store_settle(st), 0);
	assert_int_equal(st->commits, commits + 1);
	assert_int_equal(row_of(st, ino, &row), 0);
	assert_int_equal(row.uid, 1235);
	assert_int_equal(row.gid, 5678);
	assert_int_equal(row.mode, S_IFREG | 0751);
	assert_int_equal(pd_time_cmp(row.mtime, past), 0);
	assert_int_equal(row.size, 8);
	/* the directory has the create's time, not the chown's */
	assert_int_equal(row_of(st, d.ino, &row), 0);
	assert_int_equal(pd_time_cmp(row.mtime, made.ctime), 0);
	/* once committed, a change commits at once */
	sa = (struct ns_setattr){ .valid = NS_SET_GID, .gid = 42 };
	assert_int_equal(ns_setattr(st, ino, &sa, &in), 0);
	assert_int_equal(st->commits, commits + 2);
	assert_int_equal(row_of(st, ino, &row), 0);
	assert_int_equal(row.gid, 42);
	th_read_back(st, ino, "<p>a</p>");
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

static void test_reads_and_writes_see_it(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, &quiet);
	struct inode d, in, row, before;
	assert_int_equal(ns_mknode(st, PD_ROOT_INO, "site", S_IFDIR | 0755, 0, NULL, &root_cred, &d), 0);
	assert_int_equal(row_of(st, d.ino, &before), 0);
	usleep(2000);
	/* a readdir commits what waits, and lists it */
	uint64_t a = create(st, d.ino, "a.html");
	assert_int_equal(row_of(st, a, &row), -ENOENT);
	assert_true(listed(st, d.ino, "a.html"));
	assert_int_equal(row_of(st, a, &row), 0);
	/* the directory's times show a create that waits, answered from it
	 * without a commit (the kernel asks for them before each create in
	 * the directory), and its commit gives the directory the same times */
	uint64_t b = create(st, d.ino, "b.html");
	struct inode shown;
	assert_int_equal(ns_getattr(st, d.ino, &shown), 0);
	assert_true(pd_time_cmp(shown.mtime, before.mtime) > 0);
	assert_true(pd_time_cmp(shown.ctime, before.ctime) > 0);
	assert_int_equal(row_of(st, b, &row), -ENOENT);
	assert_int_equal(store_settle(st), 0);
	assert_int_equal(row_of(st, b, &row), 0);
	assert_int_equal(row_of(st, d.ino, &row), 0);
	assert_int_equal(pd_time_cmp(row.mtime, shown.mtime), 0);
	assert_int_equal(pd_time_cmp(row.ctime, shown.ctime), 0);
	/* a second create of a waiting name, or a mkdir of it, finds it taken */
	uint64_t c = create(st, d.ino, "c.html");
	assert_int_equal(ns_create_file(st, d.ino, "c.html", 0644, &root_cred, &in), -EEXIST);
	assert_int_equal(row_of(st, c, &row), -ENOENT);
	assert_int_equal(ns_mknode(st, d.ino, "c.html", S_IFDIR | 0755, 0, NULL, &root_cred, &in), -EEXIST);
	assert_int_equal(row_of(st, c, &row), 0);
	/* a rename of a waiting file commits both, in order */
	uint64_t e = create(st, d.ino, "e.tmp");
	uint64_t replaced;
	bool gone;
	assert_int_equal(ns_rename(st, d.ino, "e.tmp", d.ino, "e.html", 0, &replaced, &gone), 0);
	assert_int_equal(ns_lookup(st, d.ino, "e.html", &in), 0);
	assert_int_equal(in.ino, e);
	assert_int_equal(ns_lookup(st, d.ino, "e.tmp", &in), -ENOENT);
	/* an empty file's close commits its create */
	uint64_t f = create(st, d.ino, "empty");
	write_close(st, f, NULL);
	assert_int_equal(row_of(st, f, &row), 0);
	assert_int_equal(row.size, 0);
	/* numbers given while a create waits do not collide */
	uint64_t g = create(st, d.ino, "g.html");
	struct inode sub;
	assert_int_equal(ns_mknode(st, d.ino, "sub", S_IFDIR | 0755, 0, NULL, &root_cred, &sub), 0);
	assert_true(sub.ino != g);
	write_close(st, g, "<p>g</p>");
	/* a directory with a create waiting in it is not empty */
	uint64_t x = create(st, sub.ino, "x.html"), gone_ino;
	assert_int_equal(ns_rmdir(st, d.ino, "sub", &gone_ino), -ENOTEMPTY);
	assert_int_equal(row_of(st, x, &row), 0);
	write_close(st, x, "<p>x</p>");
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	st = th_reopen(dir, &quiet);
	uint64_t h = create(st, d.ino, "h.html");
	assert_true(h > sub.ino && h > g);
	write_close(st, h, "<p>h</p>");
	th_read_back(st, g, "<p>g</p>");
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

struct seen {
	const char *name;
	bool found;
};

static int seen_cb(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t type, uint64_t next,
		   const struct inode *in)
{
	(void)ino, (void)type, (void)next, (void)in;
	struct seen *s = ctx;
	if (len == strlen(s->name) && memcmp(name, s->name, len) == 0)
		s->found = true;
	return 0;
}

static bool listed(struct store *st, uint64_t dir, const char *name)
{
	struct seen s = { name, false };
	assert_int_equal(ns_readdir(st, dir, 0, false, seen_cb, &s), 0);
	return s.found;
}

static void test_given_up_store_opens_without_it(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, &quiet);
	uint64_t kept = th_put(st, PD_ROOT_INO, "kept.html", "<p>k</p>", 8);
	uint64_t lost = create(st, PD_ROOT_INO, "open.html");
	store_abandon(st); /* as a killed daemon: the file was never closed */
	st = th_reopen(dir, &quiet);
	struct inode in;
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, "open.html", &in), -ENOENT);
	assert_int_equal(ns_getattr(st, lost, &in), -ENOENT);
	th_read_back(st, kept, "<p>k</p>");
	uint64_t again = create(st, PD_ROOT_INO, "open.html");
	write_close(st, again, "<p>o</p>");
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

static void test_sync_blobs_creates_at_once(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = quiet;
	o.sync_blobs = true;
	struct store *st = th_store(dir, NULL, &o);
	uint64_t ino = create(st, PD_ROOT_INO, "a.html");
	struct inode row;
	assert_int_equal(row_of(st, ino, &row), 0);
	write_close(st, ino, "<p>a</p>");
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_commits_with_its_page),
		cmocka_unit_test(test_reads_and_writes_see_it),
		cmocka_unit_test(test_attributes_join_the_create),
		cmocka_unit_test(test_given_up_store_opens_without_it),
		cmocka_unit_test(test_sync_blobs_creates_at_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
