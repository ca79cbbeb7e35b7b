/* test_fsck.c - the checker against planted damage. Each case builds a
 * small store through the real write path, closes it, damages it directly
 * in LMDB or on disk, and requires that fsck finds the damage (problems > 0
 * and a report line naming it), that repair fixes it (a second, deep check
 * is clean), and that no blob file a page refers to was deleted. */
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
#include "base/fp.h"
#include "helpers.h"
#include "archive/xattr.h"
#include "near/near.h"

/* ---- the store every case starts from ----------------------------------
 *
 *   /a.html            "page A"   blob A (refcount 2, with /sub/a2.html)
 *   /b.html, /b2.html  "page B"   one inode, two names; blob B (refcount 1)
 *   /sub/              directory
 *   /sub/a2.html       "page A"
 *   /sub/deeper/       directory
 *   /sub/deeper/c.html "page C"   blob C
 *   /link              symlink to a.html
 */
struct base {
	char *tmp;
	char store[4096];
	uint64_t a, b, sub, a2, deeper, c, link;
	char hex_a[33], hex_b[33], hex_c[33];
	size_t files; /* blob files */
};

static void hex_of(const char *s, char out[33])
{
	struct fp fp;
	assert_int_equal(fp_of_buf(s, strlen(s), &fp), 0);
	fp_hex(fp.md5, out);
}

static uint64_t mkdir_in(struct store *st, uint64_t parent, const char *name)
{
	struct inode in;
	assert_int_equal(ns_mknode(st, parent, name, S_IFDIR | 0755, 0, NULL, &test_root, &in), 0);
	return in.ino;
}

/* The base store keeps format 1's layout (a file per blob under objects/):
 * these cases check what fsck does with the files of a store not converted
 * yet; test_fsck_packs.c checks packs. */
static const struct store_opts files_layout = { .blob_files = true };

static struct store *open_rw(struct base *b)
{
	struct store *st;
	struct store_opts o = files_layout;
	char err[PD_ERRLEN];
	assert_int_equal(archive_open(b->store, &o, &st, err), 0);
	return st;
}

static void base_make(struct base *b, const struct store_params *p)
{
	memset(b, 0, sizeof *b);
	b->tmp = th_tmpdir();
	snprintf(b->store, sizeof b->store, "%s/store", b->tmp);
	struct store *st = th_store(b->tmp, p, &files_layout);
	struct inode in;
	b->a = th_put(st, PD_ROOT_INO, "a.html", "page A", 6);
	b->b = th_put(st, PD_ROOT_INO, "b.html", "page B", 6);
	assert_int_equal(ns_link(st, b->b, PD_ROOT_INO, "b2.html", &in), 0);
	b->sub = mkdir_in(st, PD_ROOT_INO, "sub");
	b->a2 = th_put(st, b->sub, "a2.html", "page A", 6);
	b->deeper = mkdir_in(st, b->sub, "deeper");
	b->c = th_put(st, b->deeper, "c.html", "page C", 6);
	assert_int_equal(ns_mknode(st, PD_ROOT_INO, "link", S_IFLNK | 0777, 0, "a.html", &test_root, &in), 0);
	b->link = in.ino;
	assert_int_equal(store_close(st), 0);
	hex_of("page A", b->hex_a);
	hex_of("page B", b->hex_b);
	hex_of("page C", b->hex_c);
	b->files = th_count_blobs(b->store);
	assert_int_equal(b->files, 3);
}

static void base_free(struct base *b)
{
	th_rmdir(b->tmp);
}

static void blob_path_of(struct base *b, const char *hex, char *out, size_t n)
{
	snprintf(out, n, "%s/objects/%.3s/%s", b->store, hex, hex);
}

/* ---- running fsck -------------------------------------------------------- */

struct out {
	char text[65536];
	size_t len;
};

static void collect(void *ctx, const char *line)
{
	struct out *o = ctx;
	int n = snprintf(o->text + o->len, sizeof o->text - o->len, "%s\n", line);
	if (n > 0 && o->len + (size_t)n < sizeof o->text)
		o->len += (size_t)n;
	if (getenv("PD_TEST_VERBOSE")) /* see what fsck says */
		fprintf(stderr, "  fsck: %s\n", line);
}

static int run_fsck(const char *store, bool deep, bool repair, struct fsck_result *r, struct out *out)
{
	out->len = 0;
	out->text[0] = 0;
	struct fsck_opts o = { .deep = deep, .repair = repair, .report = collect, .ctx = out };
	char err[512];
	int rc = fsck_run(store, &o, r, err);
	if (rc)
		fprintf(stderr, "fsck: %s\n", err);
	return rc;
}

/* fsck finds damage named by `what` (a report line contains it). */
static void assert_found(const char *store, bool deep, const char *what)
{
	struct fsck_result r;
	struct out *out = calloc(1, sizeof *out);
	assert_int_equal(run_fsck(store, deep, false, &r, out), 0);
	if (r.problems == 0 || !strstr(out->text, what))
		fail_msg("fsck should have reported '%s' (problems %llu):\n%s", what,
			 (unsigned long long)r.problems, out->text);
	free(out);
}

static void assert_clean(const char *store, bool deep)
{
	struct fsck_result r;
	struct out *out = calloc(1, sizeof *out);
	assert_int_equal(run_fsck(store, deep, false, &r, out), 0);
	if (r.problems)
		fail_msg("fsck should be clean, found %llu problems:\n%s", (unsigned long long)r.problems, out->text);
	free(out);
}

/* Repair, then a second deep check must be clean. */
static struct fsck_result repair_ok(const char *store, bool deep)
{
	struct fsck_result r;
	struct out *out = calloc(1, sizeof *out);
	assert_int_equal(run_fsck(store, deep, true, &r, out), 0);
	if (r.problems == 0 || r.repaired == 0)
		fail_msg("repair should have found and fixed something (problems %llu, repaired %llu):\n%s",
			 (unsigned long long)r.problems, (unsigned long long)r.repaired, out->text);
	free(out);
	assert_clean(store, true);
	return r;
}

/* Every blob file of a page still in the store is on disk: the deep check
 * says so; and the files of the pages we know are there. */
static void assert_blobs_present(struct base *b, bool a, bool bb, bool c)
{
	char path[4200];
	const char *hex[3] = { b->hex_a, b->hex_b, b->hex_c };
	bool want[3] = { a, bb, c };
	for (int i = 0; i < 3; i++) {
		blob_path_of(b, hex[i], path, sizeof path);
		if (want[i] && access(path, F_OK))
			fail_msg("blob file %s was deleted", path);
	}
}

/* ---- planting damage: LMDB opened directly -------------------------------- */

struct raw {
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi meta, inodes, dirents, links, fp, bi, xattrs, sat, orphans;
};

static void raw_open(struct raw *r, const char *store)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/meta", store);
	assert_int_equal(mdb_env_create(&r->env), 0);
	mdb_env_set_maxdbs(r->env, 16);
	mdb_env_set_mapsize(r->env, 1ull << 30);
	assert_int_equal(mdb_env_open(r->env, path, MDB_NOTLS, 0600), 0);
	assert_int_equal(mdb_txn_begin(r->env, NULL, 0, &r->txn), 0);
	struct { const char *name; MDB_dbi *dbi; unsigned flags; } t[] = {
		{ "meta", &r->meta, 0 }, { "inodes", &r->inodes, 0 }, { "dirents", &r->dirents, MDB_DUPSORT },
		{ "links", &r->links, MDB_DUPSORT }, { "fingerprints", &r->fp, 0 },
		{ "blob_inodes", &r->bi, MDB_DUPSORT | MDB_DUPFIXED }, { "xattrs", &r->xattrs, 0 },
		{ "saturated", &r->sat, 0 }, { "orphans", &r->orphans, 0 },
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		assert_int_equal(mdb_dbi_open(r->txn, t[i].name, t[i].flags, t[i].dbi), 0);
}

static void raw_commit(struct raw *r)
{
	assert_int_equal(mdb_txn_commit(r->txn), 0);
	mdb_env_close(r->env);
}

static void raw_get_inode(struct raw *r, uint64_t ino, struct inode *in)
{
	uint8_t kb[8];
	put_be64(kb, ino);
	MDB_val k = { 8, kb }, v;
	assert_int_equal(mdb_get(r->txn, r->inodes, &k, &v), 0);
	assert_int_equal(inode_decode(v.mv_data, v.mv_size, in, NULL, NULL), 0);
	in->ino = ino;
}

static void raw_put_inode(struct raw *r, const struct inode *in)
{
	uint8_t kb[8], vb[INODE_FIXED_BYTES];
	put_be64(kb, in->ino);
	size_t n = inode_encode_row2(in, vb); /* the layout the store writes, which may hold a name */
	MDB_val k = { 8, kb }, v = { n ? n : inode_encode(in, NULL, 0, vb), vb };
	assert_int_equal(mdb_put(r->txn, r->inodes, &k, &v, 0), 0);
}

static void raw_dirent(struct raw *r, bool add, uint64_t parent, const char *name, uint64_t child, uint32_t mode)
{
	size_t len = strlen(name);
	uint8_t kb[16], vb[DIRENT_VAL_MAX];
	put_be64(kb, parent);
	put_be64(kb + 8, dirent_hash(name, len));
	MDB_val k = { 16, kb }, v = { dirent_val_encode(name, len, child, mode, vb), vb };
	assert_int_equal(add ? mdb_put(r->txn, r->dirents, &k, &v, MDB_NODUPDATA) : mdb_del(r->txn, r->dirents, &k, &v),
			 0);
}

/* A name of ino taken away from where the store keeps it (its row or a
 * link record), or added as a link record. */
static void raw_link(struct raw *r, bool add, uint64_t ino, uint64_t parent, const char *name)
{
	size_t len = strlen(name);
	struct inode in;
	raw_get_inode(r, ino, &in);
	if (!add && in.name_parent == parent && in.name_hash == dirent_hash(name, len)) {
		in.name_parent = in.name_hash = 0;
		raw_put_inode(r, &in);
		return;
	}
	uint8_t kb[8], vb[LINK_VAL_MAX];
	put_be64(kb, ino);
	put_be64(vb, parent);
	memcpy(vb + 8, name, len);
	MDB_val k = { 8, kb }, v = { 8 + len, vb };
	assert_int_equal(add ? mdb_put(r->txn, r->links, &k, &v, MDB_NODUPDATA) : mdb_del(r->txn, r->links, &k, &v), 0);
}

static void key_of(const char *content, uint8_t key[BLOBKEY_BYTES])
{
	struct fp fp;
	struct blobkey k = { .variant = 0 };
	assert_int_equal(fp_of_buf(content, strlen(content), &fp), 0);
	memcpy(k.md5, fp.md5, 16);
	blobkey_encode(&k, key);
}

static void raw_get_fprec(struct raw *r, const char *content, struct fprec *out)
{
	uint8_t key[BLOBKEY_BYTES];
	key_of(content, key);
	MDB_val k = { BLOBKEY_BYTES, key }, v;
	assert_int_equal(mdb_get(r->txn, r->fp, &k, &v), 0);
	assert_int_equal(fprec_decode(v.mv_data, v.mv_size, out), 0);
}

static void raw_put_fprec(struct raw *r, const char *content, const struct fprec *rec)
{
	uint8_t key[BLOBKEY_BYTES], vb[FPREC_MAX_BYTES];
	key_of(content, key);
	MDB_val k = { BLOBKEY_BYTES, key }, v = { fprec_encode(rec, true, vb), vb };
	assert_int_equal(mdb_put(r->txn, r->fp, &k, &v, 0), 0);
}

/* ino added to or taken from the inodes of content's blob where the store
 * keeps them (format 7: the one inode of a blob in its fingerprint row,
 * two or more in blob_inodes; store.h). */
static void raw_bi(struct raw *r, const char *content, uint64_t ino, bool add)
{
	struct fprec rec;
	raw_get_fprec(r, content, &rec);
	uint8_t key[BLOBKEY_BYTES], vb[8];
	key_of(content, key);
	MDB_val k = { BLOBKEY_BYTES, key }, v = { 8, vb };
	if (!add && rec.ino == ino) {
		rec.ino = 0;
		raw_put_fprec(r, content, &rec);
		return;
	}
	if (add && rec.ino) { /* a second inode: both in the table */
		put_be64(vb, rec.ino);
		assert_int_equal(mdb_put(r->txn, r->bi, &k, &v, 0), 0);
		rec.ino = 0;
		raw_put_fprec(r, content, &rec);
	}
	put_be64(vb, ino);
	assert_int_equal(add ? mdb_put(r->txn, r->bi, &k, &v, 0) : mdb_del(r->txn, r->bi, &k, &v), 0);
}

/* ---- reading the store back ------------------------------------------------ */

static int lookup(struct store *st, uint64_t parent, const char *name, struct inode *in)
{
	return ns_lookup(st, parent, name, in);
}

static void read_content(struct store *st, uint64_t ino, char *buf, size_t size, size_t *got)
{
	struct pd_file *f;
	bool keep;
	assert_int_equal(file_open(st, ino, O_RDONLY, &f, &keep), 0);
	assert_int_equal(file_read(f, buf, size, 0, got), 0);
	assert_int_equal(file_release(f), 0);
}

static uint64_t lost_found(struct store *st)
{
	struct inode lf;
	assert_int_equal(lookup(st, PD_ROOT_INO, FSCK_LOST_FOUND, &lf), 0);
	assert_true(S_ISDIR(lf.mode));
	assert_int_equal(lf.mode & 07777, 0700);
	return lf.ino;
}

/* ---- the cases ---------------------------------------------------------------- */

static void test_clean_store(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct fsck_result r;
	struct out *out = calloc(1, sizeof *out);
	assert_int_equal(run_fsck(b.store, true, false, &r, out), 0);
	assert_int_equal(r.problems, 0);
	assert_int_equal(r.inodes, 8); /* root, a, b, sub, a2, deeper, c, link */
	assert_int_equal(r.dirs, 3);
	assert_int_equal(r.pages, 4);
	assert_int_equal(r.blobs, 3);
	assert_int_equal(r.blob_files, 3);
	assert_int_equal(r.bytes_hashed, 18);
	/* repair on a clean store changes nothing */
	assert_int_equal(run_fsck(b.store, false, true, &r, out), 0);
	assert_int_equal(r.problems, 0);
	assert_int_equal(r.repaired, 0);
	free(out);
	/* a mounted (locked) store is refused */
	struct store *st = open_rw(&b);
	struct fsck_opts o = { 0 };
	char err[512];
	assert_int_equal(fsck_run(b.store, &o, &r, err), -EBUSY);
	assert_int_equal(store_close(st), 0);
	base_free(&b);
}

static void test_refcount_off_by_one(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	struct fprec rec;
	raw_open(&r, b.store);
	raw_get_fprec(&r, "page A", &rec);
	assert_int_equal(rec.refcount, 2);
	rec.refcount = 3;
	raw_put_fprec(&r, "page A", &rec);
	raw_commit(&r);
	assert_found(b.store, false, "refcount 3, but 2 inodes refer to it");
	repair_ok(b.store, false);
	raw_open(&r, b.store);
	raw_get_fprec(&r, "page A", &rec);
	assert_int_equal(rec.refcount, 2);
	raw_commit(&r);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

/* A repair that touches no name does not say it moved names into their
 * rows: the names' round trip (rows -> link records -> rows, around the
 * name repairs) brings every name back where it was, which is no repair. */
static void test_names_round_trip_not_a_repair(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	struct fprec rec;
	raw_open(&r, b.store);
	raw_get_fprec(&r, "page A", &rec);
	rec.refcount = 3;
	raw_put_fprec(&r, "page A", &rec);
	raw_commit(&r);
	struct fsck_result res;
	struct out *out = calloc(1, sizeof *out);
	assert_int_equal(run_fsck(b.store, false, true, &res, out), 0);
	if (strstr(out->text, "hold their one name") || res.repaired != 1)
		fail_msg("one repair (the refcount) expected, and no name moved (repaired %llu):\n%s",
			 (unsigned long long)res.repaired, out->text);
	free(out);
	assert_clean(b.store, true);
	base_free(&b);
}

static void test_blob_inodes_entry_missing(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	uint8_t key[BLOBKEY_BYTES], vb[8];
	key_of("page A", key);
	put_be64(vb, b.a2);
	MDB_val k = { BLOBKEY_BYTES, key }, v = { 8, vb };
	assert_int_equal(mdb_del(r.txn, r.bi, &k, &v), 0);
	raw_commit(&r);
	assert_found(b.store, false, "blob_inodes does not list it");
	repair_ok(b.store, false);
	struct store *st = open_rw(&b);
	assert_int_equal(th_refcount(st, b.a2), 2);
	assert_int_equal(store_close(st), 0);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

static void test_blob_file_deleted(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	char path[4200];
	blob_path_of(&b, b.hex_b, path, sizeof path);
	assert_int_equal(unlink(path), 0);
	assert_found(b.store, false, "is missing");
	struct fsck_result res = repair_ok(b.store, false);
	assert_int_equal(res.lost, 1);
	assert_int_equal(th_count_blobs(b.store), 2);
	assert_blobs_present(&b, true, false, true);
	/* both names of the page are in lost+found, and no longer at the root */
	struct store *st = open_rw(&b);
	uint64_t lf = lost_found(st);
	struct inode in;
	char name[64];
	assert_int_equal(lookup(st, PD_ROOT_INO, "b.html", &in), -ENOENT);
	assert_int_equal(lookup(st, PD_ROOT_INO, "b2.html", &in), -ENOENT);
	snprintf(name, sizeof name, "%llu-b2.html", (unsigned long long)b.b);
	assert_int_equal(lookup(st, lf, name, &in), 0);
	snprintf(name, sizeof name, "%llu-b.html", (unsigned long long)b.b);
	assert_int_equal(lookup(st, lf, name, &in), 0);
	assert_int_equal(in.ino, b.b);
	assert_int_equal(in.nlink, 2);
	assert_int_equal(in.size, 0);
	assert_false(in.flags & INODE_HAS_BLOB);
	char buf[256];
	size_t len;
	assert_int_equal(xattr_get(st, b.b, FSCK_XATTR_LOST_MD5, buf, sizeof buf, &len), 0);
	assert_int_equal(len, 32);
	assert_memory_equal(buf, b.hex_b, 32);
	assert_int_equal(xattr_get(st, b.b, FSCK_XATTR_LOST_SIZE, buf, sizeof buf, &len), 0);
	assert_memory_equal(buf, "6", 1);
	assert_int_equal(xattr_get(st, b.b, FSCK_XATTR_LOST_PATH, buf, sizeof buf, &len), 0);
	buf[len] = 0;
	assert_non_null(strstr(buf, "/b.html"));
	assert_non_null(strstr(buf, "/b2.html"));
	/* the other pages read as before */
	read_content(st, b.a, buf, sizeof buf, &len);
	assert_int_equal(len, 6);
	assert_memory_equal(buf, "page A", 6);
	/* a refetch makes it an ordinary page again */
	th_put(st, lf, name, "page B", 6);
	assert_int_equal(store_close(st), 0);
	assert_clean(b.store, true);
	base_free(&b);
}

static void test_blob_byte_changed(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	char path[4200];
	blob_path_of(&b, b.hex_a, path, sizeof path);
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "q", 1, 2), 1); /* "page A" -> "paqe A" */
	close(fd);
	assert_clean(b.store, false); /* same size: only --deep can tell */
	assert_found(b.store, true, "is damaged");
	struct fsck_result res = repair_ok(b.store, true);
	assert_int_equal(res.lost, 2);
	assert_blobs_present(&b, false, true, true);
	/* the damaged bytes are kept aside */
	char kept[4200], buf[16] = "";
	snprintf(kept, sizeof kept, "%s/%s/%s", b.store, FSCK_DAMAGED_DIR, b.hex_a);
	fd = open(kept, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof buf), 6);
	close(fd);
	assert_memory_equal(buf, "paqe A", 6);
	struct store *st = open_rw(&b);
	uint64_t lf = lost_found(st);
	struct inode in;
	char name[64];
	snprintf(name, sizeof name, "%llu-a.html", (unsigned long long)b.a);
	assert_int_equal(lookup(st, lf, name, &in), 0);
	snprintf(name, sizeof name, "%llu-a2.html", (unsigned long long)b.a2);
	assert_int_equal(lookup(st, lf, name, &in), 0);
	assert_int_equal(lookup(st, b.sub, "a2.html", &in), -ENOENT);
	assert_int_equal(store_close(st), 0);
	base_free(&b);
}

static void test_stray_files(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	char path[4200];
	/* a blob-named file no record knows, a junk name, a staged leftover */
	char hex[33];
	hex_of("never stored", hex);
	snprintf(path, sizeof path, "%s/objects/%.3s", b.store, hex);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/objects/%.3s/%s", b.store, hex, hex);
	int fd = open(path, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
	snprintf(path, sizeof path, "%s/objects/%.3s/junk", b.store, b.hex_a);
	assert_true((fd = open(path, O_WRONLY | O_CREAT, 0600)) >= 0);
	close(fd);
	snprintf(path, sizeof path, "%s/staging/s123", b.store);
	assert_true((fd = open(path, O_WRONLY | O_CREAT, 0600)) >= 0);
	close(fd);
	assert_found(b.store, false, "objects/");
	assert_found(b.store, false, "/junk: file unknown to the store");
	assert_found(b.store, false, "staging/s123: file unknown to the store");
	repair_ok(b.store, false);
	assert_int_equal(th_count_blobs(b.store), 3);
	assert_blobs_present(&b, true, true, true);
	assert_int_equal(access(path, F_OK), -1);
	base_free(&b);
}

/* The filter: a counter of page A's positions off by one. */
static void test_filter_counter_changed(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	struct fprec rec;
	raw_open(&r, b.store);
	raw_get_fprec(&r, "page A", &rec);
	raw_commit(&r);
	uint64_t idx = cbf_pos_counter(&rec.pos, 0);
	char path[4200], leaf[GF_LEAF_PATH_MAX];
	gf_leaf_path(rec.leaf, leaf); /* the leaf file that holds page A */
	snprintf(path, sizeof path, "%s/%s", b.store, leaf);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint8_t byte;
	off_t off = CBF_HEADER_BYTES + (off_t)(idx / 2);
	assert_int_equal(pread(fd, &byte, 1, off), 1);
	unsigned shift = (idx & 1) * 4, ctr = (byte >> shift) & 15;
	assert_true(ctr >= 1 && ctr < 15);
	byte = (uint8_t)((byte & ~(15u << shift)) | (ctr + 1) << shift);
	assert_int_equal(pwrite(fd, &byte, 1, off), 1);
	close(fd);
	assert_found(b.store, false, "filter counter");
	repair_ok(b.store, false);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

/* Saturated counters: a tiny filter with many pages. */
static void test_saturated_count_wrong(void **state)
{
	(void)state;
	struct base b;
	struct store_params p;
	store_params_default(&p);
	p.expected_pages = 16;
	p.filter_fpr = 0.01;
	base_make(&b, &p);
	/* the filter kept from growing, so that counters saturate */
	struct store *st;
	struct store_opts o = { .no_split_thread = true };
	char err[PD_ERRLEN];
	assert_int_equal(archive_open(b.store, &o, &st, err), 0);
	char name[32], body[32];
	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof name, "p%d", i);
		snprintf(body, sizeof body, "body %d", i);
		th_put(st, PD_ROOT_INO, name, body, strlen(body));
	}
	assert_int_equal(store_close(st), 0);
	assert_clean(b.store, false);
	struct raw r;
	raw_open(&r, b.store);
	MDB_cursor *c;
	MDB_val k, v;
	assert_int_equal(mdb_cursor_open(r.txn, r.sat, &c), 0);
	assert_int_equal(mdb_cursor_get(c, &k, &v, MDB_FIRST), 0); /* the test needs a saturated counter */
	uint8_t vb[8];
	put_le64(vb, get_le64(v.mv_data) + 1);
	MDB_val nv = { 8, vb };
	assert_int_equal(mdb_cursor_put(c, &k, &nv, MDB_CURRENT), 0);
	mdb_cursor_close(c);
	raw_commit(&r);
	assert_found(b.store, false, "saturated exact count of filter counter");
	repair_ok(b.store, false);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

static void test_dirent_child_missing(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	raw_dirent(&r, true, b.sub, "ghost.html", 999999, S_IFREG);
	raw_commit(&r);
	assert_found(b.store, false, "dirent 'ghost.html'");
	assert_found(b.store, false, "inode 999999 does not exist");
	repair_ok(b.store, false);
	struct store *st = open_rw(&b);
	struct inode in;
	assert_int_equal(lookup(st, b.sub, "ghost.html", &in), -ENOENT);
	assert_int_equal(lookup(st, b.sub, "a2.html", &in), 0);
	assert_int_equal(store_close(st), 0);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

/* A page that lost its only name (dirent and link record) but not its
 * link count: not an orphan, so it must not be deleted. */
static void test_inode_without_name(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	raw_dirent(&r, false, b.deeper, "c.html", b.c, S_IFREG);
	raw_link(&r, false, b.c, b.deeper, "c.html");
	raw_commit(&r);
	assert_found(b.store, false, "has no name (nlink 1) and is not an orphan");
	struct fsck_result res = repair_ok(b.store, false);
	assert_int_equal(res.adopted, 1);
	assert_blobs_present(&b, true, true, true);
	struct store *st = open_rw(&b);
	uint64_t lf = lost_found(st);
	struct inode in;
	char name[32], buf[16];
	size_t len;
	snprintf(name, sizeof name, "%llu", (unsigned long long)b.c);
	assert_int_equal(lookup(st, lf, name, &in), 0);
	assert_int_equal(in.ino, b.c);
	read_content(st, b.c, buf, sizeof buf, &len);
	assert_int_equal(len, 6);
	assert_memory_equal(buf, "page C", 6);
	assert_int_equal(store_close(st), 0);
	base_free(&b);
}

static void set_nlink(struct base *b, uint64_t ino, uint32_t nlink)
{
	struct raw r;
	struct inode in;
	raw_open(&r, b->store);
	raw_get_inode(&r, ino, &in);
	in.nlink = nlink;
	raw_put_inode(&r, &in);
	raw_commit(&r);
}

static uint32_t nlink_of(struct base *b, uint64_t ino)
{
	struct raw r;
	struct inode in;
	raw_open(&r, b->store);
	raw_get_inode(&r, ino, &in);
	raw_commit(&r);
	return in.nlink;
}

/* Inode rows in layout 2 (rec.h): a row with a byte too many, or with its
 * tag changed, is undecodable and fsck names the inode. */
static void damage_row2(struct base *b, uint64_t ino, bool extra_byte)
{
	struct raw r;
	raw_open(&r, b->store);
	uint8_t kb[8], vb[INODE_FIXED_BYTES + 1];
	put_be64(kb, ino);
	MDB_val k = { 8, kb }, v;
	assert_int_equal(mdb_get(r.txn, r.inodes, &k, &v), 0);
	assert_true(v.mv_size < INODE_FIXED_BYTES); /* written in layout 2 */
	memcpy(vb, v.mv_data, v.mv_size);
	if (extra_byte)
		vb[v.mv_size++] = 0;
	else
		vb[0] ^= 0x40;
	v.mv_data = vb;
	assert_int_equal(mdb_put(r.txn, r.inodes, &k, &v, 0), 0);
	raw_commit(&r);
}

static void test_inode_row2_damaged(void **state)
{
	(void)state;
	char what[64];
	for (int extra = 0; extra < 2; extra++) {
		struct base b;
		base_make(&b, NULL);
		assert_clean(b.store, false);
		damage_row2(&b, b.c, extra);
		snprintf(what, sizeof what, "inode %llu: undecodable record", (unsigned long long)b.c);
		struct fsck_result res;
		struct out *out = calloc(1, sizeof *out);
		int rc = run_fsck(b.store, false, false, &res, out);
		assert_true(rc == 0 || rc == -EUCLEAN);
		if (!strstr(out->text, what))
			fail_msg("fsck should have reported '%s':\n%s", what, out->text);
		free(out);
		base_free(&b);
	}
}

static void test_wrong_nlink_file(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	set_nlink(&b, b.b, 5);
	char what[64];
	snprintf(what, sizeof what, "inode %llu: nlink 5 but 2 names", (unsigned long long)b.b);
	assert_found(b.store, false, what);
	repair_ok(b.store, false);
	assert_int_equal(nlink_of(&b, b.b), 2);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

static void test_wrong_nlink_dir(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	set_nlink(&b, b.sub, 7);
	char what[64];
	snprintf(what, sizeof what, "directory %llu: nlink 7, should be 3", (unsigned long long)b.sub);
	assert_found(b.store, false, what);
	repair_ok(b.store, false);
	assert_int_equal(nlink_of(&b, b.sub), 3);
	base_free(&b);
}

/* /sub is moved into its own subdirectory /sub/deeper: a cycle, cut off
 * from the root. */
static void test_directory_cycle(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	raw_dirent(&r, false, PD_ROOT_INO, "sub", b.sub, S_IFDIR);
	raw_link(&r, false, b.sub, PD_ROOT_INO, "sub");
	raw_dirent(&r, true, b.deeper, "sub", b.sub, S_IFDIR);
	raw_link(&r, true, b.sub, b.deeper, "sub");
	raw_commit(&r);
	assert_found(b.store, false, "in a cycle of directories");
	struct fsck_result res = repair_ok(b.store, false);
	assert_true(res.adopted >= 1);
	struct store *st = open_rw(&b);
	uint64_t lf = lost_found(st);
	struct inode in;
	char name[32], buf[16];
	size_t len;
	/* one of the two is now in lost+found, the other below it */
	snprintf(name, sizeof name, "%llu-sub", (unsigned long long)b.sub);
	if (lookup(st, lf, name, &in) == 0) {
		assert_int_equal(lookup(st, b.sub, "deeper", &in), 0);
	} else {
		snprintf(name, sizeof name, "%llu-deeper", (unsigned long long)b.deeper);
		assert_int_equal(lookup(st, lf, name, &in), 0);
		assert_int_equal(lookup(st, b.deeper, "sub", &in), 0);
	}
	read_content(st, b.a2, buf, sizeof buf, &len);
	assert_memory_equal(buf, "page A", 6);
	assert_int_equal(store_close(st), 0);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

/* /sub/deeper is filed under a parent that does not exist. */
static void test_directory_disconnected(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	raw_dirent(&r, false, b.sub, "deeper", b.deeper, S_IFDIR);
	raw_link(&r, false, b.deeper, b.sub, "deeper");
	raw_dirent(&r, true, 777777, "deeper", b.deeper, S_IFDIR);
	raw_link(&r, true, b.deeper, 777777, "deeper");
	raw_commit(&r);
	assert_found(b.store, false, "not connected to the root");
	repair_ok(b.store, false);
	struct store *st = open_rw(&b);
	uint64_t lf = lost_found(st);
	struct inode in;
	char name[32];
	snprintf(name, sizeof name, "%llu-deeper", (unsigned long long)b.deeper);
	assert_int_equal(lookup(st, lf, name, &in), 0);
	assert_int_equal(lookup(st, b.deeper, "c.html", &in), 0);
	assert_int_equal(store_close(st), 0);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

/* A directory with no name at all. */
static void test_directory_nameless(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	raw_dirent(&r, false, b.sub, "deeper", b.deeper, S_IFDIR);
	raw_link(&r, false, b.deeper, b.sub, "deeper");
	raw_commit(&r);
	char what[80];
	snprintf(what, sizeof what, "directory %llu has no name", (unsigned long long)b.deeper);
	assert_found(b.store, false, what);
	repair_ok(b.store, false);
	struct store *st = open_rw(&b);
	uint64_t lf = lost_found(st);
	struct inode in;
	char name[32];
	snprintf(name, sizeof name, "%llu", (unsigned long long)b.deeper);
	assert_int_equal(lookup(st, lf, name, &in), 0);
	assert_int_equal(lookup(st, b.deeper, "c.html", &in), 0);
	assert_int_equal(store_close(st), 0);
	assert_int_equal(nlink_of(&b, b.sub), 2);
	base_free(&b);
}

static void test_wrong_totals(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	MDB_val k = { 8, "counters" }, v;
	assert_int_equal(mdb_get(r.txn, r.meta, &k, &v), 0);
	uint8_t *buf = malloc(v.mv_size);
	memcpy(buf, v.mv_data, v.mv_size);
	put_le64(buf, get_le64(buf) + 1);           /* pages */
	put_le64(buf + 24, get_le64(buf + 24) + 5); /* stored_bytes */
	MDB_val nv = { v.mv_size, buf };
	assert_int_equal(mdb_put(r.txn, r.meta, &k, &nv, 0), 0);
	raw_commit(&r);
	free(buf);
	assert_found(b.store, false, "total pages is 5, the tables hold 4");
	assert_found(b.store, false, "total stored_bytes is 23, the tables hold 18");
	repair_ok(b.store, false);
	base_free(&b);
}

/* A name kept in a link record (a file of two names keeps both there)
 * whose dirent is gone: the dirent is restored from the record. */
static void test_link_record_without_dirent(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	raw_dirent(&r, false, PD_ROOT_INO, "b2.html", b.b, S_IFREG);
	raw_commit(&r);
	assert_found(b.store, false, "link record 'b2.html'");
	repair_ok(b.store, false);
	struct store *st = open_rw(&b);
	struct inode in;
	assert_int_equal(lookup(st, PD_ROOT_INO, "b2.html", &in), 0);
	assert_int_equal(in.ino, b.b);
	assert_int_equal(in.nlink, 2);
	assert_int_equal(store_close(st), 0);
	base_free(&b);
}

/* A file of one name keeps it in its inode row (its parent and the name's
 * hash, not the name): with its dirent gone the name is lost, and the
 * page goes to lost+found with its bytes. */
static void test_name_in_row_without_dirent(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	struct inode in;
	raw_get_inode(&r, b.a2, &in);
	assert_int_equal(in.name_parent, b.sub);
	assert_true(in.name_hash == dirent_hash("a2.html", 7));
	raw_dirent(&r, false, b.sub, "a2.html", b.a2, S_IFREG);
	raw_commit(&r);
	assert_found(b.store, false, "its row names a dirent");
	repair_ok(b.store, false);
	struct store *st = open_rw(&b);
	char name[32], buf[64];
	size_t got;
	snprintf(name, sizeof name, "%llu", (unsigned long long)b.a2);
	assert_int_equal(lookup(st, lost_found(st), name, &in), 0);
	assert_int_equal(in.ino, b.a2);
	assert_int_equal(in.nlink, 1);
	read_content(st, b.a2, buf, sizeof buf, &got);
	assert_true(got > 0);
	assert_int_equal(store_close(st), 0);
	base_free(&b);
}

static void test_dirent_without_link_record(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	raw_link(&r, false, b.b, PD_ROOT_INO, "b2.html");
	raw_commit(&r);
	assert_found(b.store, false, "has no link record");
	repair_ok(b.store, false);
	assert_int_equal(nlink_of(&b, b.b), 2);
	base_free(&b);
}

/* The record of a shared blob is gone, its file is not: the record is
 * rebuilt from the file and no page is lost. */
static void test_record_missing_rebuilt(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	uint8_t key[BLOBKEY_BYTES];
	key_of("page A", key);
	MDB_val k = { BLOBKEY_BYTES, key };
	assert_int_equal(mdb_del(r.txn, r.fp, &k, NULL), 0);
	raw_commit(&r);
	assert_found(b.store, false, "has no fingerprint record");
	struct fsck_result res = repair_ok(b.store, false);
	assert_int_equal(res.lost, 0);
	assert_blobs_present(&b, true, true, true);
	struct store *st = open_rw(&b);
	char buf[16];
	size_t len;
	read_content(st, b.a2, buf, sizeof buf, &len);
	assert_int_equal(len, 6);
	assert_memory_equal(buf, "page A", 6);
	assert_int_equal(th_refcount(st, b.a), 2);
	/* signed again from the page: the set kept in nearfeat, and so no
	 * sketch in the record (near layout 3) */
	MDB_txn *txn;
	struct blobkey bk;
	struct fprec fr;
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	blobkey_decode(key, &bk);
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_get(txn, st, &bk, &fr), 0);
	assert_true(fr.flags & FPREC_HAS_SIMHASH);
	assert_false(fr.flags & FPREC_HAS_SKETCH);
	near_sig_of_rec(&fr, sig);
	assert_int_equal(near_set_get(txn, st, &bk, sig), 0);
	assert_true(sig->has_set);
	store_read_end(st, txn);
	free(sig);
	assert_int_equal(store_close(st), 0);
	base_free(&b);
}

/* A record no inode refers to goes, with its file; the others stay. */
static void test_unreferenced_record(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	struct fprec rec;
	raw_open(&r, b.store);
	raw_bi(&r, "page C", b.c, false);
	/* c now points at blob B, as if it had been rewritten */
	struct inode in;
	raw_get_inode(&r, b.c, &in);
	struct fp fp;
	fp_of_buf("page B", 6, &fp);
	memcpy(in.blob.md5, fp.md5, 16);
	raw_put_inode(&r, &in);
	raw_bi(&r, "page B", b.c, true);
	raw_get_fprec(&r, "page B", &rec);
	rec.refcount = 2;
	raw_put_fprec(&r, "page B", &rec);
	raw_commit(&r);
	assert_found(b.store, false, "no inode refers to it");
	repair_ok(b.store, false);
	assert_blobs_present(&b, true, true, false);
	assert_int_equal(th_count_blobs(b.store), 2);
	base_free(&b);
}

static void test_orphan_marks(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	uint8_t kb[8];
	put_be64(kb, b.a);
	MDB_val k = { 8, kb }, e = { 0, NULL };
	assert_int_equal(mdb_put(r.txn, r.orphans, &k, &e, 0), 0);
	raw_commit(&r);
	assert_found(b.store, false, "has a name but an orphan mark");
	repair_ok(b.store, false);
	struct store *st = open_rw(&b); /* the page was not deleted as an orphan */
	struct inode in;
	assert_int_equal(lookup(st, PD_ROOT_INO, "a.html", &in), 0);
	assert_int_equal(store_close(st), 0);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

/* A store a crash left: not closed cleanly, an unlinked file still open
 * (an orphan), bytes in staging (a crash leftover). None of it is damage;
 * the next open deletes the orphan and empties staging. */
static void test_unclean_store_is_not_damage(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct store *st = open_rw(&b);
	struct pd_file *fh;
	bool keep;
	uint64_t ino;
	bool gone;
	assert_int_equal(file_open(st, b.c, O_RDONLY, &fh, &keep), 0);
	assert_int_equal(ns_unlink(st, b.deeper, "c.html", &ino, &gone), 0);
	assert_true(gone);
	char path[4200];
	snprintf(path, sizeof path, "%s/staging/s999", b.store);
	int fd = open(path, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
	store_abandon(st); /* as if the daemon were killed, the file still open */
	free(fh); /* (its handle died with the daemon) */
	struct fsck_result r;
	struct out *out = calloc(1, sizeof *out);
	assert_int_equal(run_fsck(b.store, true, false, &r, out), 0);
	if (r.problems)
		fail_msg("an unclean store is not damage:\n%s", out->text);
	assert_true(r.notes >= 1);     /* the filter is not checked */
	assert_true(r.leftovers >= 1); /* staging: a crash leftover, not damage */
	assert_non_null(strstr(out->text, "leftover: staging/s999"));
	assert_non_null(strstr(out->text, "not closed cleanly"));
	free(out);
	/* the next open deletes the orphan and its blob */
	st = open_rw(&b);
	assert_int_equal(store_close(st), 0);
	assert_clean(b.store, true);
	assert_blobs_present(&b, true, true, false);
	assert_int_equal(th_count_blobs(b.store), 2);
	base_free(&b);
}

struct phases {
	char seen[16][32];
	bool started[16], ended[16];
	int n;
};

static void note_progress(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
	struct phases *p = ctx;
	int i = 0;
	while (i < p->n && strcmp(p->seen[i], phase))
		i++;
	if (i == p->n && p->n < 16)
		snprintf(p->seen[p->n++], 32, "%s", phase);
	if (i >= 16)
		return;
	if (done == 0 && !p->ended[i])
		p->started[i] = true;
	if (done == total)
		p->ended[i] = true;
	assert_true(total == 0 || done <= total);
}

static void test_progress(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct phases ph = { .n = 0 };
	struct fsck_opts o = { .progress = note_progress, .ctx = &ph };
	struct fsck_result r;
	char err[512];
	assert_int_equal(fsck_run(b.store, &o, &r, err), 0);
	const char *want[] = { "inodes", "names", "blob index", "blobs", "filter", "staging" };
	for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
		int i = 0;
		while (i < ph.n && strcmp(ph.seen[i], want[w]))
			i++;
		if (i == ph.n)
			fail_msg("no progress for phase %s", want[w]);
		assert_true(ph.started[i]);
		assert_true(ph.ended[i]);
	}
	base_free(&b);
}

static void test_dirent_wrong_type_and_hash(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	/* a2.html says it is a directory; c.html sits under another name's hash */
	raw_dirent(&r, false, b.sub, "a2.html", b.a2, S_IFREG);
	raw_dirent(&r, true, b.sub, "a2.html", b.a2, S_IFDIR);
	raw_dirent(&r, false, b.deeper, "c.html", b.c, S_IFREG);
	uint8_t kb[16], vb[DIRENT_VAL_MAX];
	put_be64(kb, b.deeper);
	put_be64(kb + 8, dirent_hash("x", 1));
	MDB_val k = { 16, kb }, v = { dirent_val_encode("c.html", 6, b.c, S_IFREG, vb), vb };
	assert_int_equal(mdb_put(r.txn, r.dirents, &k, &v, 0), 0);
	raw_commit(&r);
	assert_found(b.store, false, "says directory, but inode");
	assert_found(b.store, false, "filed under the wrong hash");
	repair_ok(b.store, false);
	struct store *st = open_rw(&b);
	struct inode in;
	assert_int_equal(lookup(st, b.deeper, "c.html", &in), 0);
	assert_int_equal(in.ino, b.c);
	assert_int_equal(store_close(st), 0);
	base_free(&b);
}

static void test_directory_two_names(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	raw_dirent(&r, true, PD_ROOT_INO, "alias", b.deeper, S_IFDIR);
	raw_link(&r, true, b.deeper, PD_ROOT_INO, "alias");
	raw_commit(&r);
	char what[64];
	snprintf(what, sizeof what, "directory %llu has 2 names", (unsigned long long)b.deeper);
	assert_found(b.store, false, what);
	repair_ok(b.store, false);
	base_free(&b);
}

/* No record, and the file under its name holds other bytes: the pages are
 * lost, the bytes kept aside. */
static void test_record_missing_file_damaged(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	uint8_t key[BLOBKEY_BYTES];
	key_of("page C", key);
	MDB_val k = { BLOBKEY_BYTES, key };
	assert_int_equal(mdb_del(r.txn, r.fp, &k, NULL), 0);
	raw_commit(&r);
	char path[4200];
	blob_path_of(&b, b.hex_c, path, sizeof path);
	int fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "other", 5), 5);
	close(fd);
	assert_found(b.store, false, "has no fingerprint record");
	struct fsck_result res = repair_ok(b.store, false);
	assert_int_equal(res.lost, 1);
	snprintf(path, sizeof path, "%s/%s/%s", b.store, FSCK_DAMAGED_DIR, b.hex_c);
	assert_int_equal(access(path, F_OK), 0);
	assert_blobs_present(&b, true, true, false);
	base_free(&b);
}

static void test_filter_file_missing(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	char path[4200];
	snprintf(path, sizeof path, "%s/filter", b.store);
	assert_int_equal(truncate(path, 100), 0); /* not a filter any more */
	assert_found(b.store, false, "filter: the file is missing or is not a filter");
	repair_ok(b.store, false);
	assert_int_equal(unlink(path), 0);
	assert_found(b.store, false, "filter: the file is missing or is not a filter");
	repair_ok(b.store, false);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

/* Fingerprint rows of layout 1 (a store before format 6) are no damage:
 * a note, and --repair rewrites them in layout 2 (rec.h). */
static size_t fp_rows_of_layout1(const char *store)
{
	struct raw r;
	raw_open(&r, store);
	MDB_cursor *c;
	MDB_val k, v;
	size_t n = 0;
	assert_int_equal(mdb_cursor_open(r.txn, r.fp, &c), 0);
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		n += fprec_is_row1(v.mv_data, v.mv_size);
	mdb_cursor_close(c);
	raw_commit(&r);
	return n;
}

static void test_fp_rows_layout1(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	assert_int_equal(fp_rows_of_layout1(b.store), 0);
	struct raw r;
	raw_open(&r, b.store);
	const char *pages[] = { "page A", "page B", "page C" };
	for (int i = 0; i < 3; i++) {
		struct fprec rec;
		raw_get_fprec(&r, pages[i], &rec);
		uint8_t key[BLOBKEY_BYTES], vb[FPREC_MAX_BYTES];
		key_of(pages[i], key);
		if (rec.ino) { /* layout 1 has no room for it: in blob_inodes, as before format 7 */
			uint8_t ib[8];
			put_be64(ib, rec.ino);
			MDB_val bk = { BLOBKEY_BYTES, key }, bv = { 8, ib };
			assert_int_equal(mdb_put(r.txn, r.bi, &bk, &bv, 0), 0);
		}
		MDB_val k = { BLOBKEY_BYTES, key }, v = { fprec_encode(&rec, false, vb), vb };
		assert_int_equal(mdb_put(r.txn, r.fp, &k, &v, 0), 0);
	}
	raw_commit(&r);
	assert_int_equal(fp_rows_of_layout1(b.store), 3);
	struct fsck_result res;
	struct out *out = calloc(1, sizeof *out);
	assert_int_equal(run_fsck(b.store, true, false, &res, out), 0);
	assert_int_equal(res.problems, 0);
	assert_true(res.notes > 0);
	assert_non_null(strstr(out->text, "3 fingerprint rows of layout 1"));
	assert_int_equal(run_fsck(b.store, false, true, &res, out), 0);
	assert_non_null(strstr(out->text, "3 fingerprint rows rewritten in layout 2"));
	assert_int_equal(fp_rows_of_layout1(b.store), 0);
	assert_int_equal(run_fsck(b.store, true, false, &res, out), 0);
	assert_int_equal(res.problems, 0);
	assert_null(strstr(out->text, "layout 1"));
	free(out);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

/* A layout 2 row with a byte too many, or a wrong tag, is undecodable:
 * reported. (Only the report is asserted: with an undecodable record the
 * check goes on to the near-duplicate tables and stops there with EUCLEAN,
 * for a layout 1 row as well, in the code before layout 2.) */
static void test_fp_row2_damaged(void **state)
{
	(void)state;
	for (int extra = 0; extra < 2; extra++) {
		struct base b;
		base_make(&b, NULL);
		struct raw r;
		raw_open(&r, b.store);
		uint8_t key[BLOBKEY_BYTES], vb[FPREC_MAX_BYTES + 1];
		key_of("page C", key);
		MDB_val k = { BLOBKEY_BYTES, key }, v;
		assert_int_equal(mdb_get(r.txn, r.fp, &k, &v), 0);
		assert_false(fprec_is_row1(v.mv_data, v.mv_size)); /* written in layout 2 */
		memcpy(vb, v.mv_data, v.mv_size);
		if (extra)
			vb[v.mv_size++] = 1;
		else
			vb[0] ^= 0x01;
		v.mv_data = vb;
		assert_false(fprec_is_row1(vb, v.mv_size));
		assert_int_equal(mdb_put(r.txn, r.fp, &k, &v, 0), 0);
		raw_commit(&r);
		char what[96];
		snprintf(what, sizeof what, "blob %s: undecodable fingerprint record", b.hex_c);
		struct fsck_result res;
		struct out *out = calloc(1, sizeof *out);
		/* the check runs to its end (a damaged row is one problem, not a
		 * reason to stop), and --repair rebuilds the row from the page */
		assert_int_equal(run_fsck(b.store, false, false, &res, out), 0);
		if (!strstr(out->text, what))
			fail_msg("fsck should have reported '%s':\n%s", what, out->text);
		assert_int_equal(run_fsck(b.store, false, true, &res, out), 0);
		assert_true(res.repaired > 0);
		free(out);
		assert_clean(b.store, true);
		base_free(&b);
	}
}

/* ---- the inodes of a blob in its fingerprint row (format 7) ---------------- */

/* After a repair: the inodes of content's blob, where format 7 keeps
 * them: row_ino in its row (0: none), `table` in blob_inodes. */
static void assert_bi_form(struct base *b, const char *content, uint64_t row_ino, size_t table, uint64_t refcount)
{
	struct raw r;
	raw_open(&r, b->store);
	struct fprec rec;
	raw_get_fprec(&r, content, &rec);
	assert_int_equal(rec.ino, row_ino);
	assert_int_equal(rec.refcount, refcount);
	uint8_t key[BLOBKEY_BYTES];
	key_of(content, key);
	MDB_cursor *c;
	MDB_val k = { BLOBKEY_BYTES, key }, v;
	size_t n = 0;
	assert_int_equal(mdb_cursor_open(r.txn, r.bi, &c), 0);
	if (mdb_cursor_get(c, &k, &v, MDB_SET_KEY) == 0)
		assert_int_equal(mdb_cursor_count(c, &n), 0);
	mdb_cursor_close(c);
	assert_int_equal(n, table);
	raw_commit(&r);
}

/* A row holding an inode that refers to another blob. */
static void test_row_ino_of_another_blob(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	assert_bi_form(&b, "page C", b.c, 0, 1); /* as the store writes it */
	struct raw r;
	raw_open(&r, b.store);
	struct fprec rec;
	raw_get_fprec(&r, "page C", &rec);
	rec.ino = b.b;
	raw_put_fprec(&r, "page C", &rec);
	raw_commit(&r);
	assert_found(b.store, false, "its fingerprint row holds inode");
	assert_found(b.store, false, "but blob_inodes does not list it"); /* c, listed nowhere now */
	repair_ok(b.store, false);
	assert_bi_form(&b, "page C", b.c, 0, 1);
	assert_bi_form(&b, "page B", b.b, 0, 1);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

/* An inode in the row beside table rows, and an inode in both. */
static void test_row_ino_beside_table(void **state)
{
	(void)state;
	for (int both = 0; both < 2; both++) {
		struct base b;
		base_make(&b, NULL);
		assert_bi_form(&b, "page A", 0, 2, 2); /* a and a2 in the table */
		struct raw r;
		raw_open(&r, b.store);
		struct fprec rec;
		raw_get_fprec(&r, "page A", &rec);
		rec.ino = b.a;
		raw_put_fprec(&r, "page A", &rec);
		if (!both) {
			uint8_t key[BLOBKEY_BYTES], vb[8];
			key_of("page A", key);
			put_be64(vb, b.a);
			MDB_val k = { BLOBKEY_BYTES, key }, v = { 8, vb };
			assert_int_equal(mdb_del(r.txn, r.bi, &k, &v), 0);
		}
		raw_commit(&r);
		assert_found(b.store, false,
			     both ? "is in its fingerprint row and in blob_inodes both" : "an inode in its fingerprint row and 1 in blob_inodes");
		repair_ok(b.store, false);
		assert_bi_form(&b, "page A", 0, 2, 2);
		struct store *st = open_rw(&b);
		assert_int_equal(th_refcount(st, b.a), 2);
		assert_int_equal(store_close(st), 0);
		assert_blobs_present(&b, true, true, true);
		base_free(&b);
	}
}

/* A blob of one file listed in blob_inodes (a format 6 store not yet
 * converted): a note, no damage; the repair puts it in the row. */
static void test_lone_inode_in_table(void **state)
{
	(void)state;
	struct base b;
	base_make(&b, NULL);
	struct raw r;
	raw_open(&r, b.store);
	raw_bi(&r, "page C", b.c, false);
	uint8_t key[BLOBKEY_BYTES], vb[8];
	key_of("page C", key);
	put_be64(vb, b.c);
	MDB_val k = { BLOBKEY_BYTES, key }, v = { 8, vb };
	assert_int_equal(mdb_put(r.txn, r.bi, &k, &v, 0), 0);
	raw_commit(&r);
	struct fsck_result res;
	struct out *out = calloc(1, sizeof *out);
	assert_int_equal(run_fsck(b.store, true, false, &res, out), 0);
	assert_int_equal(res.problems, 0);
	assert_non_null(strstr(out->text, "1 blobs of one file list it in blob_inodes"));
	assert_int_equal(run_fsck(b.store, false, true, &res, out), 0);
	assert_non_null(strstr(out->text, "put in format 7's form"));
	assert_bi_form(&b, "page C", b.c, 0, 1);
	assert_int_equal(run_fsck(b.store, true, false, &res, out), 0);
	assert_int_equal(res.problems, 0);
	assert_null(strstr(out->text, "list it in blob_inodes"));
	free(out);
	assert_blobs_present(&b, true, true, true);
	base_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_store),
		cmocka_unit_test(test_fp_rows_layout1),
		cmocka_unit_test(test_fp_row2_damaged),
		cmocka_unit_test(test_refcount_off_by_one),
		cmocka_unit_test(test_names_round_trip_not_a_repair),
		cmocka_unit_test(test_blob_inodes_entry_missing),
		cmocka_unit_test(test_row_ino_of_another_blob),
		cmocka_unit_test(test_row_ino_beside_table),
		cmocka_unit_test(test_lone_inode_in_table),
		cmocka_unit_test(test_blob_file_deleted),
		cmocka_unit_test(test_blob_byte_changed),
		cmocka_unit_test(test_stray_files),
		cmocka_unit_test(test_filter_counter_changed),
		cmocka_unit_test(test_saturated_count_wrong),
		cmocka_unit_test(test_dirent_child_missing),
		cmocka_unit_test(test_inode_without_name),
		cmocka_unit_test(test_wrong_nlink_file),
		cmocka_unit_test(test_inode_row2_damaged),
		cmocka_unit_test(test_wrong_nlink_dir),
		cmocka_unit_test(test_directory_cycle),
		cmocka_unit_test(test_directory_disconnected),
		cmocka_unit_test(test_directory_nameless),
		cmocka_unit_test(test_wrong_totals),
		cmocka_unit_test(test_link_record_without_dirent),
		cmocka_unit_test(test_name_in_row_without_dirent),
		cmocka_unit_test(test_dirent_without_link_record),
		cmocka_unit_test(test_record_missing_rebuilt),
		cmocka_unit_test(test_unreferenced_record),
		cmocka_unit_test(test_orphan_marks),
		cmocka_unit_test(test_unclean_store_is_not_damage),
		cmocka_unit_test(test_progress),
		cmocka_unit_test(test_dirent_wrong_type_and_hash),
		cmocka_unit_test(test_directory_two_names),
		cmocka_unit_test(test_record_missing_file_damaged),
		cmocka_unit_test(test_filter_file_missing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
