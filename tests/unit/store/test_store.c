/* test_store.c - the store engine through the calls the filesystem makes:
 * refcounts, MD5 collisions, saturated counters, filter rebuild after an
 * unclean stop, concurrent seals, map growth (and LMDB's figures read
 * while it grows), store identity, refused seals. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
#include "base/fp.h"
#include "helpers.h"
#include "archive/query.h"
#include "near/sigq.h"
#include "store/store_int.h"

static void unlink_name(struct store *st, const char *name)
{
	uint64_t ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, name, &ino, &gone), 0);
	assert_true(gone);
}

static void read_all(struct store *st, uint64_t ino, char *buf, size_t size, size_t *got)
{
	struct pd_file *f;
	bool keep;
	assert_int_equal(file_open(st, ino, O_RDONLY, &f, &keep), 0);
	assert_int_equal(file_read(f, buf, size, 0, got), 0);
	assert_int_equal(file_release(f), 0);
}

static void test_refcount_sequence(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	uint64_t a = th_put(st, PD_ROOT_INO, "a", "X page", 6);
	uint64_t b = th_put(st, PD_ROOT_INO, "b", "X page", 6);
	assert_int_equal(th_refcount(st, a), 2);
	assert_int_equal(th_count_stored(st), 1);
	uint64_t c = th_put(st, PD_ROOT_INO, "c", "Y page", 6);
	assert_int_equal(th_refcount(st, c), 1);
	assert_int_equal(th_count_stored(st), 2);
	/* overwrite b with c's bytes: X loses one, Y gains one */
	th_put(st, PD_ROOT_INO, "b", "Y page", 6);
	assert_int_equal(th_refcount(st, a), 1);
	assert_int_equal(th_refcount(st, c), 2);
	/* the same bytes again (a recrawl): nothing moves */
	th_put(st, PD_ROOT_INO, "b", "Y page", 6);
	assert_int_equal(th_refcount(st, c), 2);
	/* unlink the last X: its blob goes */
	unlink_name(st, "a");
	assert_int_equal(th_count_stored(st), 1);
	/* truncate b to zero: an empty blob, Y down to one */
	assert_int_equal(file_truncate(st, b, 0, NULL), 0);
	assert_int_equal(th_refcount(st, c), 1);
	assert_int_equal(th_refcount(st, b), 1);
	struct pd_counters k;
	store_counters(st, &k);
	assert_int_equal(k.pages, 2);
	assert_int_equal(k.blobs, 2);
	assert_int_equal(k.logical_bytes, 6);
	assert_int_equal(k.stored_bytes, 6);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

static size_t live_count(struct store *st, size_t *states)
{
	struct live_counts c;
	live_counts(st, &c);
	*states = c.states;
	return c.entries;
}

/* An inode the kernel still references once its file is closed keeps a
 * small table entry and no file state (a crawl holds one per file it
 * wrote until the kernel forgets them); what the state knew comes back:
 * the bytes, and that the kernel's cached pages are still the content. */
static void test_live_entries(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	size_t states = 99;
	assert_int_equal(live_count(st, &states), 0);
	assert_int_equal(states, 0);
	uint64_t ino = th_put(st, PD_ROOT_INO, "a", "A page", 6);
	live_ref(st, ino, 1); /* the kernel's lookup */
	assert_int_equal(live_count(st, &states), 1);
	assert_int_equal(states, 0);

	struct pd_file *f, *g;
	bool keep;
	char buf[16];
	size_t got;
	assert_int_equal(file_open(st, ino, O_RDONLY, &f, &keep), 0);
	assert_int_equal(live_count(st, &states), 1);
	assert_int_equal(states, 1);
	assert_int_equal(file_read(f, buf, sizeof buf, 0, &got), 0);
	assert_int_equal(got, 6);
	assert_memory_equal(buf, "A page", 6);
	assert_int_equal(file_release(f), 0);
	assert_int_equal(live_count(st, &states), 1);
	assert_int_equal(states, 0);
	/* the kernel cached the pages of this open: the next open keeps them */
	assert_int_equal(file_open(st, ino, O_RDONLY, &f, &keep), 0);
	assert_true(keep);
	assert_int_equal(file_release(f), 0);

	/* written through one handle, read through another: one state,
	 * gone with the last handle */
	assert_int_equal(file_open(st, ino, O_WRONLY | O_TRUNC, &f, &keep), 0);
	assert_int_equal(file_write(f, "B page!", 7, 0, &got), 0);
	assert_int_equal(file_open(st, ino, O_RDONLY, &g, &keep), 0);
	assert_int_equal(live_count(st, &states), 1);
	assert_int_equal(states, 1);
	assert_int_equal(file_read(g, buf, sizeof buf, 0, &got), 0);
	assert_int_equal(got, 7);
	assert_int_equal(file_flush(f), 0);
	assert_int_equal(file_release(f), 0);
	assert_int_equal(file_release(g), 0);
	/* the close's seal waits for its batch (archive/seal_later.h) and
	 * holds the state until then */
	assert_int_equal(live_count(st, &states), 1);
	assert_int_equal(states, 1);
	assert_int_equal(store_settle(st), 0);
	assert_int_equal(live_count(st, &states), 1);
	assert_int_equal(states, 0);
	struct inode in;
	assert_int_equal(file_getattr(st, ino, &in), 0);
	assert_int_equal(in.size, 7);
	read_all(st, ino, buf, sizeof buf, &got);
	assert_int_equal(got, 7);
	assert_memory_equal(buf, "B page!", 7);

	/* truncate(2) with no handle: sealed at once, no state left */
	assert_int_equal(file_truncate(st, ino, 2, NULL), 0);
	assert_int_equal(live_count(st, &states), 1);
	assert_int_equal(states, 0);
	read_all(st, ino, buf, sizeof buf, &got);
	assert_int_equal(got, 2);
	assert_memory_equal(buf, "B ", 2);

	assert_int_equal(live_forget(st, ino, 1), 0);
	assert_int_equal(live_count(st, &states), 0);
	assert_int_equal(states, 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* Make the blob of these bytes impossible to store in format 1's layout:
 * a file where its objects/abc/ directory would be, so that its seal fails
 * (ENOTDIR) whoever runs the test, root included. Returns the file's path
 * (static), to remove afterwards. */
static const char *block_blob(const char *dir, const char *bytes)
{
	struct fp fp;
	assert_int_equal(fp_of_buf(bytes, strlen(bytes), &fp), 0);
	struct blobkey k = { .variant = 0 };
	memcpy(k.md5, fp.md5, sizeof k.md5);
	char rel[BLOBKEY_PATH_MAX];
	blobkey_path(&k, rel);
	*strrchr(rel, '/') = 0; /* "objects/abc" */
	static char path[4096];
	snprintf(path, sizeof path, "%s/objects", th_store_dir(dir));
	assert_true(mkdir(path, 0700) == 0 || errno == EEXIST);
	snprintf(path, sizeof path, "%s/%s", th_store_dir(dir), rel);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600); /* EEXIST: another blob's directory */
	assert_true(fd >= 0);
	close(fd);
	return path;
}

static void assert_reads(struct pd_file *f, const char *want)
{
	char buf[64];
	size_t got;
	assert_int_equal(file_read(f, buf, sizeof buf, 0, &got), 0);
	assert_int_equal(got, strlen(want));
	assert_memory_equal(buf, want, got);
}

static void assert_size(struct store *st, uint64_t ino, uint64_t want)
{
	struct inode in;
	assert_int_equal(file_getattr(st, ino, &in), 0);
	assert_int_equal(in.size, want);
}

/* A change whose seal is refused leaves the file as the store holds it as
 * soon as close() returns, whatever other handles are merely open (a
 * reader, a handle already closed whose release is still to come), and
 * the next open does not keep the kernel's cached pages, which hold the
 * refused bytes. Only a handle that has written since its own close keeps
 * them staged, for its close to seal or drop. A truncate(2) refused
 * leaves the file as stored too. */
static void test_refused_seal(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .blob_files = true, .no_sign_thread = true };
	struct store *st = th_store(dir, NULL, &o);
	uint64_t ino = th_put(st, PD_ROOT_INO, "a", "A page", 6);
	live_ref(st, ino, 1); /* the kernel's lookup */
	struct pd_file *r, *w, *w2, *h;
	bool keep;
	size_t done;

	/* a reader open across a refused change */
	const char *blocked = block_blob(dir, "Z page");
	assert_int_equal(file_open(st, ino, O_RDONLY, &r, &keep), 0);
	assert_reads(r, "A page");
	assert_int_equal(file_open(st, ino, O_WRONLY, &w, &keep), 0);
	assert_int_equal(file_write(w, "Z", 1, 0, &done), 0);
	assert_reads(r, "Z page");                 /* staged, while it is written */
	assert_int_equal(file_flush(w), -ENOTDIR); /* close() */
	assert_reads(r, "A page");
	assert_size(st, ino, 6);
	assert_int_equal(file_open(st, ino, O_RDONLY, &h, &keep), 0);
	assert_false(keep); /* the kernel's cache holds "Z" */
	assert_reads(h, "A page");
	assert_int_equal(file_release(h), 0);
	assert_int_equal(file_release(w), 0);     /* the release that follows */
	assert_reads(r, "A page");

	/* a writer already closed, its release still to come, does not count */
	assert_int_equal(file_open(st, ino, O_WRONLY | O_TRUNC, &w, &keep), 0);
	assert_int_equal(file_write(w, "B page", 6, 0, &done), 0);
	assert_int_equal(file_flush(w), 0);
	assert_int_equal(file_open(st, ino, O_WRONLY, &w2, &keep), 0);
	assert_int_equal(unlink(blocked), 0);
	blocked = block_blob(dir, "B pagZ");
	assert_int_equal(file_write(w2, "Z", 1, 5, &done), 0);
	assert_int_equal(file_flush(w2), -ENOTDIR);
	assert_reads(r, "B page");
	assert_int_equal(file_release(w), 0);
	assert_int_equal(file_release(w2), 0);

	/* two writers: the first close refused keeps the bytes for the close
	 * of the other, which has written since; refused too, they go */
	assert_int_equal(unlink(blocked), 0);
	blocked = block_blob(dir, "X pagY");
	assert_int_equal(file_open(st, ino, O_WRONLY, &w, &keep), 0);
	assert_int_equal(file_open(st, ino, O_WRONLY, &w2, &keep), 0);
	assert_int_equal(file_write(w, "X", 1, 0, &done), 0);
	assert_int_equal(file_write(w2, "Y", 1, 5, &done), 0);
	assert_int_equal(file_flush(w), -ENOTDIR);
	assert_reads(r, "X pagY");
	assert_int_equal(file_flush(w2), -ENOTDIR);
	assert_reads(r, "B page");
	assert_size(st, ino, 6);
	assert_int_equal(file_release(w), 0);
	assert_int_equal(file_release(w2), 0);

	/* truncate(2), no handle: refused, nothing changes */
	assert_int_equal(unlink(blocked), 0);
	blocked = block_blob(dir, "B p");
	assert_int_equal(file_truncate(st, ino, 3, NULL), -ENOTDIR);
	assert_reads(r, "B page");
	assert_size(st, ino, 6);
	assert_int_equal(file_release(r), 0);

	/* a change whose blob can be stored is (another objects/ directory:
	 * the store remembers the ones it found) */
	assert_int_equal(unlink(blocked), 0);
	assert_int_equal(file_truncate(st, ino, 2, NULL), 0);
	th_read_back(st, ino, "B ");
	assert_int_equal(live_forget(st, ino, 1), 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* A burst of FORGETs gives the entries' memory back every
 * LIVE_TRIM_EVERY entries freed (what it gives back is measured by
 * bench-scale: malloc keeps freed small blocks resident otherwise). */
static void test_live_forget_burst(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	const uint64_t n = 2 * LIVE_TRIM_EVERY + 10, first = 1u << 20; /* inodes the kernel looked up */
	for (uint64_t i = 0; i < n; i++)
		live_ref(st, first + i, 2);
	struct live_counts c;
	live_counts(st, &c);
	assert_int_equal(c.entries, n);
	assert_int_equal(c.states, 0);
	assert_int_equal(c.trims, 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(live_forget(st, first + i, 1), 0);
	live_counts(st, &c);
	assert_int_equal(c.entries, n); /* one reference left each */
	assert_int_equal(c.trims, 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(live_forget(st, first + i, 1), 0);
	live_counts(st, &c);
	assert_int_equal(c.entries, 0);
	assert_int_equal(c.trims, 2);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

static size_t load_file(const char *name, char *buf, size_t size)
{
	char path[4096];
	const char *data = getenv("PD_DATA");
	snprintf(path, sizeof path, "%s/%s", data ? data : "tests/data", name);
	FILE *fp = fopen(path, "rb");
	assert_non_null(fp);
	size_t n = fread(buf, 1, size, fp);
	fclose(fp);
	return n;
}

static void test_md5_collision(void **state)
{
	(void)state;
	char a[512], b[512];
	size_t na = load_file("md5-collision-a.bin", a, 128), nb = load_file("md5-collision-b.bin", b, 128);
	assert_int_equal(na, 128);
	assert_int_equal(nb, 128);
	assert_memory_not_equal(a, b, 128);
	/* a common suffix keeps the collision */
	const char *suffix = "<html><body>a crawled page</body></html>\n";
	memcpy(a + na, suffix, strlen(suffix));
	memcpy(b + nb, suffix, strlen(suffix));
	size_t len = na + strlen(suffix);
	struct fp fa, fb;
	assert_int_equal(fp_of_buf(a, len, &fa), 0);
	assert_int_equal(fp_of_buf(b, len, &fb), 0);
	assert_memory_equal(fa.md5, fb.md5, 16);
	assert_memory_not_equal(fa.xxh128, fb.xxh128, 16);

	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	uint64_t ia = th_put(st, PD_ROOT_INO, "a.html", a, len);
	uint64_t ib = th_put(st, PD_ROOT_INO, "b.html", b, len);
	assert_int_equal(th_refcount(st, ia), 1);
	assert_int_equal(th_refcount(st, ib), 1);
	assert_int_equal(th_count_stored(st), 2);
	char got[512];
	size_t n;
	read_all(st, ia, got, sizeof got, &n);
	assert_int_equal(n, len);
	assert_memory_equal(got, a, len);
	read_all(st, ib, got, sizeof got, &n);
	assert_int_equal(n, len);
	assert_memory_equal(got, b, len);
	/* a third copy of b is a true duplicate of b */
	uint64_t ic = th_put(st, PD_ROOT_INO, "c.html", b, len);
	assert_int_equal(th_refcount(st, ic), 2);
	assert_int_equal(th_refcount(st, ia), 1);
	struct pd_counters k;
	store_counters(st, &k);
	assert_int_equal(k.collisions, 1);
	assert_int_equal(k.blobs, 2);
	/* the second content got variant 1 of the key, a pack record that
	 * says so */
	struct blobkey k1 = { .variant = 1 };
	memcpy(k1.md5, fa.md5, 16);
	struct fprec r1;
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_get(txn, st, &k1, &r1), 0);
	store_read_end(st, txn);
	assert_true(r1.flags & FPREC_PACKED);
	struct pack_loc l1;
	struct pack_rec_hdr h1;
	blob_rec_loc(&r1, &l1);
	assert_int_equal(pack_read_hdr(st->packs, &l1, &h1), 0);
	assert_int_equal(h1.variant, 1);
	assert_memory_equal(h1.xxh128, fb.xxh128, 16);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

static int read_exact(struct store *st, uint64_t idx, uint64_t *count)
{
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	uint8_t kb[8];
	put_be64(kb, idx);
	MDB_val k = { 8, kb }, v;
	int rc = mdb_get(txn, st->db_saturated, &k, &v);
	if (!rc)
		*count = get_le64(v.mv_data);
	store_read_end(st, txn);
	return rc;
}

static uint64_t saturated_entries(struct store *st)
{
	return th_table_rows(st, st->db_saturated);
}

/* The filter of a store opened without its split thread: one leaf. */
static const struct cbf *leaf0(struct store *st)
{
	const struct cbf *f = gf_leaf(st->gf, 0);
	assert_non_null(f);
	return f;
}

static uint8_t *snapshot(struct store *st, uint64_t *n)
{
	*n = cbf_geometry(leaf0(st))->nlines * CBF_LINE_COUNTERS;
	uint8_t *s = malloc(*n);
	assert_non_null(s);
	for (uint64_t i = 0; i < *n; i++)
		s[i] = (uint8_t)cbf_get(leaf0(st), i);
	return s;
}

/* These tests look at the counters of one fixed leaf. */
static const struct store_opts no_splits = { .no_split_thread = true };

/* 20 pages whose positions share one counter: it saturates at 15 with an
 * exact count of 20, and deleting them all brings every counter back. */
static void test_saturated_counter(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_params p;
	store_params_default(&p);
	p.expected_pages = 16; /* a tiny filter, so counters are shared */
	p.filter_fpr = 0.1;
	struct store *st = th_store(dir, &p, &no_splits);
	uint64_t ncounters;
	uint8_t *before = snapshot(st, &ncounters);
	uint32_t *hits = calloc(ncounters, sizeof *hits);
	char (*pages)[32] = calloc(200000, 32);
	assert_non_null(hits);
	assert_non_null(pages);
	/* find the counter that 20 distinct pages reach first */
	uint64_t target = UINT64_MAX;
	int npages = 0;
	for (int i = 0; i < 200000 && target == UINT64_MAX; i++) {
		snprintf(pages[i], 32, "page number %d", i);
		struct fp fp;
		struct cbf_pos pos;
		fp_of_buf(pages[i], strlen(pages[i]), &fp);
		cbf_positions(leaf0(st), fp.md5, &pos);
		for (unsigned j = 0; j < pos.k; j++) {
			uint64_t idx = cbf_pos_counter(&pos, j);
			bool dup = false;
			for (unsigned m = 0; m < j; m++)
				dup |= cbf_pos_counter(&pos, m) == idx;
			if (!dup && ++hits[idx] == 20)
				target = idx;
		}
		npages = i + 1;
	}
	assert_true(target != UINT64_MAX);
	/* store the 20 pages on the target counter */
	int chosen[20], nchosen = 0;
	for (int i = 0; i < npages && nchosen < 20; i++) {
		struct fp fp;
		struct cbf_pos pos;
		fp_of_buf(pages[i], strlen(pages[i]), &fp);
		cbf_positions(leaf0(st), fp.md5, &pos);
		bool on = false;
		for (unsigned j = 0; j < pos.k; j++)
			on |= cbf_pos_counter(&pos, j) == target;
		if (on)
			chosen[nchosen++] = i;
	}
	assert_int_equal(nchosen, 20);
	for (int i = 0; i < 20; i++)
		th_put(st, PD_ROOT_INO, pages[chosen[i]], pages[chosen[i]], strlen(pages[chosen[i]]));
	assert_int_equal(cbf_get(leaf0(st), target), 15);
	uint64_t exact = 0;
	assert_int_equal(read_exact(st, target, &exact), 0);
	assert_true(exact >= 20);
	for (int i = 0; i < 20; i++)
		unlink_name(st, pages[chosen[i]]);
	uint64_t n2;
	uint8_t *after = snapshot(st, &n2);
	assert_int_equal(n2, ncounters);
	assert_memory_equal(before, after, ncounters);
	assert_int_equal(cbf_get(leaf0(st), target), 0);
	assert_int_equal(saturated_entries(st), 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(before);
	free(after);
	free(hits);
	free(pages);
	th_rmdir(dir);
}

/* A store that was not closed cleanly rebuilds a filter identical to the
 * one it had, saturated exact counts included. */
static void test_unclean_rebuild(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_params p;
	store_params_default(&p);
	p.expected_pages = 16; /* a few lines for 1000 contents: counters saturate */
	p.filter_fpr = 0.01;
	struct store *st = th_store(dir, &p, &no_splits);
	char name[32], body[64];
	for (int i = 0; i < 1500; i++) {
		snprintf(name, sizeof name, "p%d", i);
		snprintf(body, sizeof body, "body %d", i % 1000);
		th_put(st, PD_ROOT_INO, name, body, strlen(body));
	}
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof name, "p%d", i * 3);
		unlink_name(st, name);
	}
	uint64_t n;
	uint8_t *before = snapshot(st, &n);
	uint64_t sat_before = saturated_entries(st);
	assert_true(sat_before > 0); /* the test must exercise saturated counters */
	store_abandon(st); /* as if the daemon were killed */
	/* garble the filter file: the rebuild must not trust it */
	char path[4096];
	snprintf(path, sizeof path, "%s/filter", th_store_dir(dir));
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	char junk[256];
	memset(junk, 0x5a, sizeof junk);
	assert_int_equal(pwrite(fd, junk, sizeof junk, CBF_HEADER_BYTES), (ssize_t)sizeof junk);
	close(fd);
	char err[PD_ERRLEN];
	assert_int_equal(archive_open(th_store_dir(dir), &no_splits, &st, err), 0);
	uint64_t n2;
	uint8_t *after = snapshot(st, &n2);
	assert_int_equal(n, n2);
	assert_memory_equal(before, after, n);
	assert_int_equal(saturated_entries(st), sat_before);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(before);
	free(after);
	th_rmdir(dir);
}

struct writer_arg {
	struct store *st;
	int id, nthreads, npages;
};

static void *writer_main(void *p)
{
	struct writer_arg *a = p;
	char name[32], body[4096];
	for (int i = a->id; i < a->npages; i += a->nthreads) {
		snprintf(name, sizeof name, "page-%05d", i);
		int content = i / 2; /* every content twice: half the pages are duplicates */
		int len = snprintf(body, sizeof body, "<html><body>content %d</body></html>", content);
		memset(body + len, 'a' + content % 26, 1024); /* a bit of size */
		th_put(a->st, PD_ROOT_INO, name, body, (size_t)len + 1024);
	}
	return NULL;
}

static void test_concurrent_seals(void **state)
{
	(void)state;
	enum { THREADS = 8, PAGES = 10000 };
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	pthread_t t[THREADS];
	struct writer_arg a[THREADS];
	for (int i = 0; i < THREADS; i++) {
		a[i] = (struct writer_arg){ st, i, THREADS, PAGES };
		assert_int_equal(pthread_create(&t[i], NULL, writer_main, &a[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	struct pd_counters k;
	store_counters(st, &k);
	assert_int_equal(k.pages, PAGES);
	assert_int_equal(k.blobs, PAGES / 2);
	assert_int_equal(k.hist[1], PAGES / 2); /* every blob has refcount 2 */
	char name[32];
	struct inode in;
	for (int i = 0; i < PAGES; i += 97) {
		snprintf(name, sizeof name, "page-%05d", i);
		assert_int_equal(ns_lookup(st, PD_ROOT_INO, name, &in), 0);
		assert_int_equal(th_refcount(st, in.ino), 2);
	}
	assert_int_equal(th_count_stored(st), PAGES / 2);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* 3,000 files with long names: a map of 256 KiB grows several times. */
static void fill_map(struct store *st)
{
	char name[64], body[128];
	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof name, "a-rather-long-file-name-to-fill-the-map-%d.html", i);
		snprintf(body, sizeof body, "page %d", i);
		th_put(st, PD_ROOT_INO, name, body, strlen(body));
	}
}

static void test_map_grows(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .mapsize = 256 * 1024 };
	struct store *st = th_store(dir, NULL, &o);
	uint64_t first = st->mapsize;
	fill_map(st);
	assert_true(st->mapsize > first);
	struct pd_counters k;
	store_counters(st, &k);
	assert_int_equal(k.pages, 3000);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* LMDB's figures live in its map, which a resize unmaps: a background
 * thread reads them under map_lock, so that it waits while a resize holds
 * the lock alone (the delta step's room check read them unlocked, and a
 * scale run faulted in mdb_env_info when the leader grew the map). */
struct figures_arg {
	struct store *st;
	int done, stop;
};

static void *room_once(void *p)
{
	struct figures_arg *a = p;
	(void)store_room_for_background(a->st);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *figures_loop(void *p)
{
	struct figures_arg *a = p;
	while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
		MDB_envinfo info;
		MDB_stat ms;
		(void)store_room_for_background(a->st);
		assert_int_equal(store_env_info(a->st, &info, &ms), 0);
		assert_true(info.me_mapsize >= (size_t)(info.me_last_pgno + 1) * ms.ms_psize);
	}
	return NULL;
}

static void test_map_figures_locked(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .mapsize = 256 * 1024 };
	struct store *st = th_store(dir, NULL, &o);
	struct figures_arg a = { .st = st };
	pthread_t t;
	pthread_rwlock_wrlock(&st->map_lock); /* as grow_map holds it */
	assert_int_equal(pthread_create(&t, NULL, room_once, &a), 0);
	usleep(200 * 1000);
	assert_int_equal(__atomic_load_n(&a.done, __ATOMIC_ACQUIRE), 0); /* it waits for the resize */
	pthread_rwlock_unlock(&st->map_lock);
	pthread_join(t, NULL);
	assert_int_equal(a.done, 1);
	/* the map grown again and again while a thread reads its figures */
	uint64_t first = st->mapsize;
	assert_int_equal(pthread_create(&t, NULL, figures_loop, &a), 0);
	fill_map(st);
	__atomic_store_n(&a.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	assert_true(st->mapsize >= 8 * first);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* LMDB's reserve on a full disk: 4 MiB for a small store, 1/64 of the
 * pages in use for a large one, never more than 16 MiB; a new store keeps
 * its data file at the reserve past its pages, not more. */
static void test_lmdb_reserve(void **state)
{
	(void)state;
	assert_int_equal(store_lmdb_reserve(0), 4 << 20);
	assert_int_equal(store_lmdb_reserve(64ull << 20), 4 << 20);
	assert_int_equal(store_lmdb_reserve(640ull << 20), 10 << 20);
	assert_int_equal(store_lmdb_reserve(1ull << 40), 16 << 20);
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	th_put(st, PD_ROOT_INO, "a.html", "a page", 6);
	assert_int_equal(store_close(st), 0);
	char path[4096];
	snprintf(path, sizeof path, "%s/meta/data.mdb", th_store_dir(dir));
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_true(sb.st_size >= 4 << 20);
	assert_true(sb.st_size < 5 << 20);
	th_rmdir(dir);
}

static int put_format(struct wtx *w, void *arg)
{
	(void)arg;
	uint8_t v[4] = { 99, 0, 0, 0 };
	MDB_val k = { 6, "format" }, d = { 4, v };
	return pd_mdb_err(mdb_put(w->txn, w->st->db_meta, &k, &d, 0));
}

static void test_store_identity(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	char err[PD_ERRLEN];
	struct store *st;
	struct store_opts o = { 0 };
	/* a directory that is not a store */
	assert_int_equal(archive_open(dir, &o, &st, err), -EINVAL);
	assert_non_null(strstr(err, "not a pagededup store"));
	assert_non_null(strstr(err, "mkfs"));
	/* a new store is private */
	st = th_store(dir, NULL, NULL);
	struct stat sb;
	assert_int_equal(stat(th_store_dir(dir), &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	/* a second writer is refused */
	struct store *st2;
	assert_int_equal(archive_open(th_store_dir(dir), &o, &st2, err), -EBUSY);
	assert_non_null(strstr(err, "in use"));
	/* a format from the future is refused with what to do */
	assert_int_equal(store_write(st, put_format, NULL), 0);
	assert_int_equal(store_close(st), 0);
	assert_int_equal(archive_open(th_store_dir(dir), &o, &st, err), -EPROTO);
	assert_non_null(strstr(err, "format version 99"));
	/* mkfs refuses a directory with files in it */
	assert_int_equal(archive_mkfs(th_store_dir(dir), NULL, err), -ENOTEMPTY);
	th_rmdir(dir);
}

/* ---- fingerprint rows of layout 1 converted (format 6) ------------------- */

/* Every fingerprint row: how many, how many in layout 1; each decoded into
 * recs[] (in key order) when recs is not NULL. */
static size_t fp_rows(struct store *st, size_t *row1, struct fprec *recs)
{
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val k, v;
	size_t n = 0;
	*row1 = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(mdb_cursor_open(txn, st->db_fp, &c), 0);
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT), n++) {
		*row1 += fprec_is_row1(v.mv_data, v.mv_size);
		struct fprec r;
		assert_int_equal(fprec_decode(v.mv_data, v.mv_size, &r), 0);
		if (recs)
			recs[n] = r;
	}
	mdb_cursor_close(c);
	store_read_end(st, txn);
	return n;
}

/* Every row written again in layout 1, "fp_layout" dropped and the store
 * marked format 5: a store as a release of format 5 leaves it. */
static int to_layout1(struct wtx *w, void *arg)
{
	(void)arg;
	MDB_cursor *c;
	MDB_val k, v;
	int rc = mdb_cursor_open(w->txn, w->st->db_fp, &c);
	for (int g = rc ? MDB_NOTFOUND : mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0 && !rc;
	     g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct fprec r;
		uint8_t vb[FPREC_MAX_BYTES];
		assert_int_equal(fprec_decode(v.mv_data, v.mv_size, &r), 0);
		uint8_t kb[BLOBKEY_BYTES]; /* k points into the page the put changes */
		memcpy(kb, k.mv_data, BLOBKEY_BYTES);
		if (r.ino) { /* before format 7 every inode is in blob_inodes */
			uint8_t ib[8];
			put_be64(ib, r.ino);
			MDB_val bk = { BLOBKEY_BYTES, kb }, bv = { 8, ib };
			assert_int_equal(mdb_put(w->txn, w->st->db_blob_inodes, &bk, &bv, 0), 0);
			r.ino = 0;
		}
		MDB_val nk = { BLOBKEY_BYTES, kb }, nv = { fprec_encode(&r, false, vb), vb };
		rc = mdb_cursor_put(c, &nk, &nv, MDB_CURRENT);
	}
	mdb_cursor_close(c);
	MDB_val lk = { 9, "fp_layout" }, ik = { 10, "ino_layout" };
	int drc = mdb_del(w->txn, w->st->db_meta, &lk, NULL);
	if (!drc || drc == MDB_NOTFOUND)
		drc = mdb_del(w->txn, w->st->db_meta, &ik, NULL);
	uint8_t fb[4] = { 5, 0, 0, 0 };
	MDB_val fk = { 6, "format" }, fv = { 4, fb };
	return rc ? pd_mdb_err(rc) : drc && drc != MDB_NOTFOUND ? pd_mdb_err(drc) : pd_mdb_err(mdb_put(w->txn, w->st->db_meta, &fk, &fv, 0));
}

static bool fprec_same(const struct fprec *a, const struct fprec *b)
{
	return a->refcount == b->refcount && a->size == b->size && !memcmp(a->xxh128, b->xxh128, 16) &&
	       a->simhash == b->simhash && a->flags == b->flags && a->pos.nlines == b->pos.nlines &&
	       a->pos.k == b->pos.k && !memcmp(a->pos.line, b->pos.line, a->pos.nlines * sizeof a->pos.line[0]) &&
	       !memcmp(a->pos.off, b->pos.off, a->pos.k) && a->leaf == b->leaf &&
	       (!(a->flags & FPREC_HAS_SKETCH) || !memcmp(a->sketch, b->sketch, FPREC_SKETCH_BYTES)) &&
	       a->pack == b->pack && a->pack_off == b->pack_off && a->pack_len == b->pack_len &&
	       a->pack_dict == b->pack_dict;
}

struct convert_step {
	uint8_t next[BLOBKEY_BYTES];
	uint64_t converted;
	bool finished, done;
};

static int convert_3(struct wtx *w, void *arg)
{
	struct convert_step *s = arg;
	int rc = store_fp_rows_convert(w->txn, w->st, s->next, 3, &s->converted, &s->finished);
	return rc ? rc : store_fp_rows_done(w->txn, w->st, &s->done);
}

static void test_fp_rows_converted(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	/* no signer: its writes would convert rows beside the batches */
	struct store_opts o = { .no_sign_thread = true, .compact_share = -1 };
	struct store *st = th_store(dir, NULL, &o);
	enum { N = 8 };
	uint64_t ino[N];
	char name[16], body[64];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "p%d", i);
		snprintf(body, sizeof body, "<p>page number %d of the conversion test</p>", i);
		ino[i] = th_put(st, PD_ROOT_INO, name, body, strlen(body));
	}
	th_put(st, PD_ROOT_INO, "twin", body, strlen(body)); /* refcount 2 */
	/* every page signed and through the delta step: nothing rewrites a
	 * record below but the conversion */
	assert_int_equal(sigq_drain(st), 0);
	sigq_drain_deltas(st);
	size_t row1;
	struct fprec before[N], after[N];
	/* a new store of format 6 writes layout 2 only */
	assert_int_equal(st->format, PD_FORMAT_VERSION);
	assert_int_equal(fp_rows(st, &row1, before), N);
	assert_int_equal(row1, 0);
	/* rows of layout 1, converted three at a time: the layout recorded
	 * with the last batch only */
	assert_int_equal(store_write(st, to_layout1, NULL), 0);
	st->format = PD_FORMAT_VERSION; /* as the writable open marks it */
	assert_int_equal(fp_rows(st, &row1, NULL), N);
	assert_int_equal(row1, N);
	struct convert_step s;
	memset(&s, 0, sizeof s);
	assert_int_equal(store_write(st, convert_3, &s), 0);
	assert_false(s.finished);
	assert_false(s.done);
	assert_int_equal(s.converted, 3);
	fp_rows(st, &row1, NULL);
	assert_int_equal(row1, N - 3);
	while (!s.finished)
		assert_int_equal(store_write(st, convert_3, &s), 0);
	assert_true(s.done);
	assert_int_equal(s.converted, N);
	assert_int_equal(fp_rows(st, &row1, after), N);
	assert_int_equal(row1, 0);
	for (int i = 0; i < N; i++)
		assert_true(fprec_same(&before[i], &after[i]));
	/* a store left by a release of format 5: the writable open marks it
	 * format 6 and converts every row */
	assert_int_equal(store_write(st, to_layout1, NULL), 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir)); /* layout 1 is no damage */
	char err[PD_ERRLEN];
	assert_int_equal(archive_open(th_store_dir(dir), &o, &st, err), 0);
	assert_int_equal(st->format, PD_FORMAT_VERSION);
	assert_int_equal(fp_rows(st, &row1, after), N);
	assert_int_equal(row1, 0);
	for (int i = 0; i < N; i++)
		assert_true(fprec_same(&before[i], &after[i]));
	for (int i = 0; i < N; i++) {
		snprintf(body, sizeof body, "<p>page number %d of the conversion test</p>", i);
		th_read_back(st, ino[i], body);
	}
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* ---- the inodes of a blob: in its row, or in blob_inodes (format 7) ---- */

static int collect_ino(void *ctx, uint64_t ino)
{
	uint64_t *v = ctx;
	v[++v[0]] = ino; /* v[0]: how many */
	return 0;
}

/* Blob of ino: the inode its row holds, its blob_inodes rows (*table),
 * and every inode store_blob_inodes answers (into all[1..all[0]]). */
static uint64_t row_ino(struct store *st, uint64_t ino, size_t *table, uint64_t all[8])
{
	struct blobkey k = th_blob_of(st, ino);
	struct fprec r = th_fprec_of(st, ino);
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(&k, kb);
	MDB_cursor *c;
	MDB_val key = { BLOBKEY_BYTES, kb }, v;
	assert_int_equal(mdb_cursor_open(txn, st->db_blob_inodes, &c), 0);
	*table = 0;
	if (mdb_cursor_get(c, &key, &v, MDB_SET_KEY) == 0)
		assert_int_equal(mdb_cursor_count(c, table), 0);
	mdb_cursor_close(c);
	all[0] = 0;
	assert_int_equal(store_blob_inodes(txn, st, &k, NULL, collect_ino, all), 0);
	store_read_end(st, txn);
	return r.ino;
}

/* Every row's inode moved into blob_inodes, "ino_layout" dropped, the
 * store marked format 6: a store as a release of format 6 leaves it. */
static int to_format6(struct wtx *w, void *arg)
{
	(void)arg;
	MDB_cursor *c;
	MDB_val k, v;
	int rc = mdb_cursor_open(w->txn, w->st->db_fp, &c);
	for (int g = rc ? MDB_NOTFOUND : mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0 && !rc;
	     g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct fprec r;
		assert_int_equal(fprec_decode(v.mv_data, v.mv_size, &r), 0);
		if (!r.ino)
			continue;
		uint8_t kb[BLOBKEY_BYTES], ib[8], vb[FPREC_MAX_BYTES];
		memcpy(kb, k.mv_data, BLOBKEY_BYTES);
		put_be64(ib, r.ino);
		MDB_val bk = { BLOBKEY_BYTES, kb }, bv = { 8, ib };
		assert_int_equal(mdb_put(w->txn, w->st->db_blob_inodes, &bk, &bv, 0), 0);
		r.ino = 0;
		MDB_val nv = { fprec_encode(&r, true, vb), vb };
		rc = mdb_cursor_put(c, &bk, &nv, MDB_CURRENT);
	}
	mdb_cursor_close(c);
	MDB_val ik = { 10, "ino_layout" };
	int drc = mdb_del(w->txn, w->st->db_meta, &ik, NULL);
	uint8_t fb[4] = { 6, 0, 0, 0 };
	MDB_val fk = { 6, "format" }, fv = { 4, fb };
	return rc ? pd_mdb_err(rc) : drc ? pd_mdb_err(drc) : pd_mdb_err(mdb_put(w->txn, w->st->db_meta, &fk, &fv, 0));
}

static int convert_bi_2(struct wtx *w, void *arg)
{
	struct convert_step *s = arg;
	int rc = store_blob_inodes_convert(w->txn, w->st, s->next, 2, &s->converted, &s->finished);
	return rc ? rc : store_blob_inodes_done(w->txn, w->st, &s->done);
}

static void test_blob_inodes_in_row(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .no_sign_thread = true, .compact_share = -1 };
	struct store *st = th_store(dir, NULL, &o);
	enum { N = 5 };
	uint64_t ino[N], all[8];
	size_t table;
	char name[16], body[64];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof name, "p%d", i);
		snprintf(body, sizeof body, "<p>page %d of the blob inodes test</p>", i);
		ino[i] = th_put(st, PD_ROOT_INO, name, body, strlen(body));
		/* a blob of one file: its inode in its row, no table row */
		assert_int_equal(row_ino(st, ino[i], &table, all), ino[i]);
		assert_int_equal(table, 0);
		assert_int_equal(all[0], 1);
		assert_int_equal(all[1], ino[i]);
	}
	/* a second and a third file of p0's bytes: all in the table */
	snprintf(body, sizeof body, "<p>page %d of the blob inodes test</p>", 0);
	uint64_t t1 = th_put(st, PD_ROOT_INO, "twin1", body, strlen(body));
	assert_int_equal(row_ino(st, ino[0], &table, all), 0);
	assert_int_equal(table, 2);
	assert_int_equal(all[0], 2);
	uint64_t t2 = th_put(st, PD_ROOT_INO, "twin2", body, strlen(body));
	assert_int_equal(row_ino(st, ino[0], &table, all), 0);
	assert_int_equal(table, 3);
	assert_int_equal(th_refcount(st, t2), 3);
	/* down to two: still the table; down to one: back into the row */
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "p0", &gone_ino, &gone), 0);
	assert_int_equal(row_ino(st, t1, &table, all), 0);
	assert_int_equal(table, 2);
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "twin1", &gone_ino, &gone), 0);
	assert_int_equal(row_ino(st, t2, &table, all), t2);
	assert_int_equal(table, 0);
	assert_int_equal(th_refcount(st, t2), 1);
	th_read_back(st, t2, body);
	/* an overwrite moves an inode from one blob to another */
	snprintf(body, sizeof body, "<p>page %d of the blob inodes test</p>", 1);
	assert_int_equal(th_put(st, PD_ROOT_INO, "twin2", body, strlen(body)), t2);
	assert_int_equal(row_ino(st, ino[1], &table, all), 0);
	assert_int_equal(table, 2);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));

	/* a store as a release of format 6 leaves it: every inode in the
	 * table; converted two blobs a batch, "ino_layout" with the last */
	st = th_reopen(dir, &o);
	assert_int_equal(store_write(st, to_format6, NULL), 0);
	for (int i = 2; i < N; i++) {
		assert_int_equal(row_ino(st, ino[i], &table, all), 0);
		assert_int_equal(table, 1);
		assert_int_equal(all[0], 1);
		assert_int_equal(all[1], ino[i]);
	}
	struct convert_step s;
	memset(&s, 0, sizeof s);
	assert_int_equal(store_write(st, convert_bi_2, &s), 0);
	assert_false(s.finished);
	assert_false(s.done);
	while (!s.finished)
		assert_int_equal(store_write(st, convert_bi_2, &s), 0);
	assert_true(s.done);
	assert_int_equal(s.converted, N - 2); /* p2..p4; p1's blob has two files */
	for (int i = 2; i < N; i++) {
		assert_int_equal(row_ino(st, ino[i], &table, all), ino[i]);
		assert_int_equal(table, 0);
	}
	assert_int_equal(row_ino(st, ino[1], &table, all), 0);
	assert_int_equal(table, 2);

	/* the same by a writable open of the format 6 store */
	assert_int_equal(store_write(st, to_format6, NULL), 0);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir)); /* the table's form is no damage */
	char err[PD_ERRLEN];
	assert_int_equal(archive_open(th_store_dir(dir), &o, &st, err), 0);
	assert_int_equal(st->format, PD_FORMAT_VERSION);
	for (int i = 2; i < N; i++) {
		assert_int_equal(row_ino(st, ino[i], &table, all), ino[i]);
		assert_int_equal(table, 0);
		snprintf(body, sizeof body, "<p>page %d of the blob inodes test</p>", i);
		th_read_back(st, ino[i], body);
	}
	assert_int_equal(row_ino(st, t2, &table, all), 0);
	assert_int_equal(table, 2);
	assert_int_equal(all[0], 2);
	assert_true((all[1] == ino[1] && all[2] == t2) || (all[1] == t2 && all[2] == ino[1]));
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refcount_sequence),
		cmocka_unit_test(test_live_entries),
		cmocka_unit_test(test_live_forget_burst),
		cmocka_unit_test(test_refused_seal),
		cmocka_unit_test(test_md5_collision),
		cmocka_unit_test(test_saturated_counter),
		cmocka_unit_test(test_unclean_rebuild),
		cmocka_unit_test(test_concurrent_seals),
		cmocka_unit_test(test_map_grows),
		cmocka_unit_test(test_map_figures_locked),
		cmocka_unit_test(test_lmdb_reserve),
		cmocka_unit_test(test_store_identity),
		cmocka_unit_test(test_fp_rows_converted),
		cmocka_unit_test(test_blob_inodes_in_row),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
