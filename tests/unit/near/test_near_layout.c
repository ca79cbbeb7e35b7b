/* test_near_layout.c - stores of older signature versions and near
 * layouts (near.h, near_layout.c), upgraded at a writable open or by
 * fsck --repair, with the same answers after; the staged band and simhash
 * rows; near0's rows by MD5 prefix. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* ---- stores of an older signature version ---------------------------------- */

/* What the code of an older version left: its version in meta (or none at
 * all, as before versions were recorded) and a hash of its own features
 * on the page, indexed as such, with the sketch it computed. */
struct old_store {
	uint64_t ino;
	bool unrecorded; /* delete the version instead of writing the first one */
};

#define OLD_HASH UINT64_C(0x0123456789abcdef)

static int make_old_cb(struct wtx *w, void *p)
{
	struct old_store *o = p;
	struct inode in;
	struct fprec r;
	int rc = ns_get_inode(w->txn, w->st, o->ino, &in);
	if (rc || (rc = blob_get(w->txn, w->st, &in.blob, &r)))
		return rc;
	if ((rc = near_remove(w->txn, w->st, &in.blob, r.simhash)))
		return rc;
	r.simhash = OLD_HASH;
	memset(r.sketch, 0x5a, FPREC_SKETCH_BYTES);
	if ((rc = blob_put(w->txn, w->st, &in.blob, &r)) || (rc = near_add(w->txn, w->st, &in.blob, OLD_HASH)))
		return rc;
	MDB_val k = { 12, "near_version" };
	if (o->unrecorded)
		return mdb_del(w->txn, w->st->db_meta, &k, NULL);
	uint8_t b[4];
	put_le32(b, NEAR_SIG_VERSION_FIRST);
	MDB_val v = { 4, b };
	return mdb_put(w->txn, w->st->db_meta, &k, &v, 0);
}

static uint64_t stored_simhash(struct store *st, uint64_t ino)
{
	return th_fprec_of(st, ino).simhash;
}

static uint32_t stored_version(struct store *st)
{
	MDB_txn *txn;
	uint32_t v = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_version_get(txn, st, &v), 0);
	store_read_end(st, txn);
	return v;
}

/* The figure the answers show for old_store's two pages. */
static const char *old_pair_res(void)
{
	char *a = th_page(21, 700, ""), *b = th_page(21, 700, "and a few words more");
	const char *r = th_page_res(a, b);
	free(a);
	free(b);
	return r;
}

/* A store of pages a and b (neighbours), a's signature made old. */
static struct store *old_store(char *dir, bool unrecorded, uint64_t *ia, uint64_t *ib, unsigned *d,
			       uint64_t *want_hash)
{
	struct store *st = th_store(dir, NULL, NULL);
	assert_int_equal(stored_version(st), NEAR_SIG_VERSION); /* mkfs records it */
	char *a = th_page(21, 700, ""), *b = th_page(21, 700, "and a few words more");
	*d = th_page_distance(a, b);
	assert_true(*d <= SIMHASH_NEAR_DISTANCE);
	struct simhash_result r;
	assert_int_equal(simhash_of_page(a, strlen(a), &r), 0);
	*want_hash = r.hash;
	*ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	*ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	assert_int_equal(sigq_drain(st), 0); /* signed now, so that the old hash stays */
	struct old_store o = { *ia, unrecorded };
	assert_int_equal(store_write(st, make_old_cb, &o), 0);
	assert_string_equal(th_near_of(st, *ia, &test_root), ""); /* the old hash is far from b's */
	free(a);
	free(b);
	return st;
}

static void test_old_version_upgraded_at_open(void **state)
{
	(void)state;
	for (int unrecorded = 0; unrecorded <= 1; unrecorded++) {
		char *dir = th_tmpdir();
		uint64_t ia, ib, want;
		unsigned d;
		struct store *st = old_store(dir, unrecorded, &ia, &ib, &d, &want);
		assert_int_equal(store_close(st), 0);

		/* fsck names the old version (and nothing else) */
		struct fsck_opts fo = { 0 };
		struct fsck_result fr;
		char err[512];
		assert_int_equal(fsck_run(th_store_dir(dir), &fo, &fr, err), 0);
		assert_int_equal(fr.problems, 1);

		/* read-only: no answers mixing the versions */
		struct store_opts ro = { .readonly = true };
		assert_int_equal(archive_open(th_store_dir(dir), &ro, &st, err), 0);
		assert_true(st->near_stale);
		assert_string_equal(th_near_of(st, ia, &test_root), "error");
		char answer[QUERY_MAX + 1];
		size_t len;
		assert_int_equal(query_near(st, ia, &test_root, answer, &len), -ESTALE);
		assert_int_equal(store_close(st), 0);

		/* writable: every signature computed again, the version recorded */
		assert_int_equal(archive_open(th_store_dir(dir), NULL, &st, err), 0);
		assert_false(st->near_stale);
		assert_int_equal(stored_version(st), NEAR_SIG_VERSION);
		assert_true(stored_simhash(st, ia) == want);
		char line[64];
		/* a figure, not "-": the upgrade computed a's shingle set too */
		snprintf(line, sizeof line, "%u\t%s\tnear\t/b.html\n", d, old_pair_res());
		assert_string_equal(th_near_of(st, ia, &test_root), line);
		assert_int_equal(store_close(st), 0);
		th_assert_fsck_clean(th_store_dir(dir));
		th_rmdir(dir);
	}
}

static void test_old_version_fsck_repair(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	uint64_t ia, ib, want;
	unsigned d;
	struct store *st = old_store(dir, false, &ia, &ib, &d, &want);
	assert_int_equal(store_close(st), 0);
	struct fsck_opts fo = { .repair = true };
	struct fsck_result fr;
	char err[512];
	assert_int_equal(fsck_run(th_store_dir(dir), &fo, &fr, err), 0);
	assert_true(fr.repaired >= 1);
	th_assert_fsck_clean(th_store_dir(dir));
	struct store_opts ro = { .readonly = true };
	assert_int_equal(archive_open(th_store_dir(dir), &ro, &st, err), 0);
	assert_false(st->near_stale);
	assert_true(stored_simhash(st, ia) == want);
	char line[64];
	snprintf(line, sizeof line, "%u\t%s\tnear\t/b.html\n", d, old_pair_res());
	assert_string_equal(th_near_of(st, ia, &test_root), line);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* ---- the layout of the sets and bands (near.h) ---------------------------- */

static int lsh_name_cb(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	(void)h, (void)dist;
	char name[BLOBKEY_NAME_MAX];
	blobkey_name(k, name);
	strcat(ctx, name);
	strcat(ctx, " ");
	return 0;
}

/* "NAME " of the blob under name in the root. */
static void blob_named(struct store *st, const char *name, char out[BLOBKEY_NAME_MAX + 1])
{
	struct inode in;
	assert_int_equal(ns_lookup(st, PD_ROOT_INO, name, &in), 0);
	blobkey_name(&in.blob, out);
	strcat(out, " ");
}

#define LAYOUT_PAGES 24
/* room for every blob of a store of LAYOUT_PAGES found in every band */
#define LSH_LIST_MAX (NEARSET_BANDS * LAYOUT_PAGES * BLOBKEY_NAME_MAX)

/* The rows of band table i (near_band_tables' order: nearbands0,
 * nearbands1, nearbands). */
static size_t band_table_rows(struct store *st, size_t i)
{
	MDB_dbi dbi[NEAR_BAND_TABLES];
	assert_int_equal(near_band_tables(st, dbi), NEAR_BAND_TABLES);
	return th_table_rows(st, dbi[i]);
}

/* The band rows of all the band tables. */
static size_t band_rows_stored(struct store *st)
{
	size_t rows = 0;
	for (size_t i = 0; i < NEAR_BAND_TABLES; i++)
		rows += band_table_rows(st, i);
	return rows;
}

/* What the LSH bands give for the set of inode ino's blob: every blob
 * found, in order, by name. */
static void lsh_list(struct store *st, uint64_t ino, char *out)
{
	MDB_txn *txn;
	struct inode in;
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	out[0] = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(ns_get_inode(txn, st, ino, &in), 0);
	assert_int_equal(near_set_get(txn, st, &in.blob, sig), 0);
	assert_true(sig->has_set);
	assert_int_equal(near_lsh_find(txn, st, &sig->set, lsh_name_cb, out), 0);
	store_read_end(st, txn);
	free(sig);
}

struct layout_store {
	uint64_t ino[LAYOUT_PAGES];
	char lsh[LAYOUT_PAGES][LSH_LIST_MAX];     /* found by the bands of layout 4 */
	char lsh_old[LAYOUT_PAGES][LSH_LIST_MAX]; /* by those of the 32-bit sets */
	char answer[LAYOUT_PAGES][1024];
};

/* The sets of a store before layout 4: every set of nearfeat (in key
 * order) computed again from its page, at 32 bits. */
static size_t sets_of_pages(struct wtx *w, uint8_t (*keys)[BLOBKEY_BYTES], struct nearset *sets)
{
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	MDB_cursor *c;
	assert_int_equal(mdb_cursor_open(w->txn, w->st->db_nearfeat, &c), 0);
	MDB_val k, v;
	size_t n = 0;
	for (int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		memcpy(keys[n++], k.mv_data, BLOBKEY_BYTES);
	mdb_cursor_close(c);
	for (size_t i = 0; i < n; i++) {
		struct blobkey bk;
		blobkey_decode(keys[i], &bk);
		int fd = blob_open(w->st, &bk);
		struct stat sb;
		assert_true(fd >= 0 && fstat(fd, &sb) == 0);
		assert_int_equal(near_sig_of_fd(fd, (uint64_t)sb.st_size, sig), 0);
		close(fd);
		assert_true(sig->has_set);
		assert_int_equal(sig->set.bits, 32);
		sets[i] = sig->set;
		sets[i].legacy_bands = true; /* the band keys of those layouts */
		nearset_bands(&sets[i]);
	}
	free(sig);
	return n;
}

/* What a find gives by the 32-bit sets' bands: band by band, the blobs
 * whose key there is the page's, in key order (the order of a band's rows
 * for distinct MD5 prefixes). */
static void lists_of_sets(struct wtx *w, struct layout_store *ls, uint8_t (*keys)[BLOBKEY_BYTES],
			  const struct nearset *sets, size_t n)
{
	for (int p = 0; p < LAYOUT_PAGES; p++) {
		struct inode in;
		uint8_t kb[BLOBKEY_BYTES];
		assert_int_equal(ns_get_inode(w->txn, w->st, ls->ino[p], &in), 0);
		blobkey_encode(&in.blob, kb);
		size_t x = 0;
		while (x < n && memcmp(keys[x], kb, BLOBKEY_BYTES))
			x++;
		assert_true(x < n);
		ls->lsh_old[p][0] = 0;
		for (size_t b = 0; b < NEARSET_BANDS; b++)
			for (size_t y = 0; y < n; y++)
				if (sets[y].band[b] == sets[x].band[b]) {
					struct blobkey k;
					blobkey_decode(keys[y], &k);
					lsh_name_cb(ls->lsh_old[p], &k, 0, 0);
				}
	}
}

/* A sketch in every fingerprint record (layouts 1 and 2). */
static void put_sketch(struct wtx *w, const uint8_t key[BLOBKEY_BYTES])
{
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	struct blobkey bk;
	struct fprec r;
	blobkey_decode(key, &bk);
	assert_int_equal(blob_get(w->txn, w->st, &bk, &r), 0);
	assert_false(r.flags & FPREC_HAS_SKETCH);
	int fd = blob_open(w->st, &bk);
	struct stat sb;
	assert_true(fd >= 0 && fstat(fd, &sb) == 0);
	assert_int_equal(near_sig_of_fd(fd, (uint64_t)sb.st_size, sig), 0);
	close(fd);
	assert_true(sig->has_sketch);
	r.flags |= FPREC_HAS_SKETCH;
	memcpy(r.sketch, sig->sketch, FPREC_SKETCH_BYTES);
	assert_int_equal(blob_put(w->txn, w->st, &bk, &r), 0);
	free(sig);
}

struct old_layout {
	struct layout_store *ls;
	int layout;
};

/* Every simhash row moved into its table and the levels deleted, as in a
 * store before layout 6. */
static void unstage_hashes(struct wtx *w)
{
	struct store *st = w->st;
	for (unsigned i = 0; i < st->near_tables && st->has_nearhstage; i++)
		for (size_t l = 0; l < 2; l++) {
			MDB_cursor *c;
			MDB_val k, v;
			assert_int_equal(mdb_cursor_open(w->txn, st->db_nearhstage[i][l], &c), 0);
			for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0; g = mdb_cursor_get(c, &k, &v, MDB_NEXT))
				assert_int_equal(mdb_put(w->txn, st->db_near[i], &k, &v, MDB_NODUPDATA), 0);
			mdb_cursor_close(c);
			assert_int_equal(mdb_drop(w->txn, st->db_nearhstage[i][l], 1), 0);
		}
	st->has_nearhstage = false;
}

/* The store put back to an older layout, its sets computed from the pages
 * at 32 bits as that code kept them:
 *   1 (before format 2): sets as u32 arrays, band rows in nearlsh (band
 *     key u32 LE -> blobkey), no layout row, a sketch in every record;
 *   2 (before format 3): sets with their band keys (format 2), the band
 *     rows of those keys in nearbands, a sketch in every record;
 *   3 (before format 4): 32-bit sets without band keys (format 3), the
 *     band rows of their keys, no sketch beside a set. */
static int make_layout_cb(struct wtx *w, void *p)
{
	struct old_layout *o = p;
	struct store *st = w->st;
	uint8_t (*keys)[BLOBKEY_BYTES] = calloc(64, BLOBKEY_BYTES);
	struct nearset *sets = calloc(64, sizeof *sets);
	assert_non_null(keys);
	assert_non_null(sets);
	size_t n = sets_of_pages(w, keys, sets);
	assert_int_equal(n, LAYOUT_PAGES);
	lists_of_sets(w, o->ls, keys, sets, n);
	MDB_dbi old;
	if (o->layout == 1)
		assert_int_equal(mdb_dbi_open(w->txn, "nearlsh", MDB_DUPSORT | MDB_DUPFIXED | MDB_CREATE, &old), 0);
	assert_int_equal(mdb_drop(w->txn, st->db_nearlsh, o->layout == 1), 0);
	/* layouts before 5 have no staged band rows, nor their tables */
	for (size_t i = 0; i < 2 && st->has_nearstage; i++)
		assert_int_equal(mdb_drop(w->txn, st->db_nearstage[i], 1), 0);
	st->has_nearstage = false;
	unstage_hashes(w);
	for (size_t i = 0; i < n; i++) {
		uint8_t buf[NEARSET_MAX_BYTES];
		struct blobkey bk;
		blobkey_decode(keys[i], &bk);
		size_t len = o->layout == 1 ? nearset_encode_v1(&sets[i], buf)
			     : o->layout == 2 ? nearset_encode_v2(&sets[i], buf)
					      : nearset_encode_v3(&sets[i], buf);
		assert_true(len > 0);
		MDB_val key = { BLOBKEY_BYTES, keys[i] }, val = { len, buf };
		assert_int_equal(mdb_put(w->txn, st->db_nearfeat, &key, &val, 0), 0);
		if (o->layout < 3)
			put_sketch(w, keys[i]);
		if (o->layout > 1) {
			assert_int_equal(near_put_bands_settled(w->txn, st, &bk, &sets[i]), 0);
			continue;
		}
		for (size_t b = 0; b < NEARSET_BANDS; b++) {
			uint8_t bkey[4];
			put_le32(bkey, nearset_band(&sets[i], b));
			MDB_val bkv = { 4, bkey }, row = { BLOBKEY_BYTES, keys[i] };
			int rc = mdb_put(w->txn, old, &bkv, &row, MDB_NODUPDATA);
			assert_true(rc == 0 || rc == MDB_KEYEXIST);
		}
	}
	free(keys);
	free(sets);
	MDB_val lk = { 11, "near_layout" };
	if (o->layout == 1)
		return mdb_del(w->txn, st->db_meta, &lk, NULL);
	uint8_t lv[4];
	put_le32(lv, (uint32_t)o->layout);
	MDB_val lval = { 4, lv };
	return mdb_put(w->txn, st->db_meta, &lk, &lval, 0);
}

/* Families of near pages (six, four variants each), their LSH finds and
 * answers kept, then the store put back to an older layout. */
static void old_layout_store(const char *dir, struct layout_store *ls, int layout)
{
	struct store *st = th_store(dir, NULL, NULL);
	for (int i = 0; i < LAYOUT_PAGES; i++) {
		char name[32], extra[64];
		snprintf(name, sizeof name, "p%02d.html", i);
		snprintf(extra, sizeof extra, i % 4 ? "variant %d of the page" : "", i % 4);
		char *page = th_page(40 + (uint64_t)i / 4, 120 + 40 * (i / 4), extra);
		ls->ino[i] = th_put_page(st, PD_ROOT_INO, name, page);
		free(page);
	}
	assert_int_equal(sigq_drain(st), 0);
	for (int i = 0; i < LAYOUT_PAGES; i++) {
		lsh_list(st, ls->ino[i], ls->lsh[i]);
		assert_non_null(strchr(ls->lsh[i], ' ')); /* itself at least */
		snprintf(ls->answer[i], sizeof ls->answer[i], "%s", th_near_of(st, ls->ino[i], &test_root));
	}
	struct old_layout o = { ls, layout };
	assert_int_equal(store_write(st, make_layout_cb, &o), 0);
	assert_int_equal(store_close(st), 0);
}

static void assert_layout_now(struct store *st, const struct layout_store *ls)
{
	MDB_txn *txn;
	uint32_t layout = 0;
	MDB_dbi old;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_layout_get(txn, st, &layout), 0);
	assert_int_equal(layout, NEAR_LAYOUT_VERSION);
	assert_int_equal(mdb_dbi_open(txn, "nearlsh", 0, &old), MDB_NOTFOUND); /* layout 1's table is gone */
	MDB_cursor *c;
	MDB_val k, v;
	size_t n = 0;
	assert_int_equal(mdb_cursor_open(txn, st->db_nearfeat, &c), 0);
	for (int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT), n++)
		assert_int_equal(((const uint8_t *)v.mv_data)[0], NEARSET_FORMAT);
	mdb_cursor_close(c);
	assert_int_equal(n, LAYOUT_PAGES);
	/* no record keeps a sketch beside its set */
	assert_int_equal(mdb_cursor_open(txn, st->db_fp, &c), 0);
	n = 0;
	for (int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT), n++) {
		struct fprec r;
		assert_int_equal(fprec_decode(v.mv_data, v.mv_size, &r), 0);
		assert_false(r.flags & FPREC_HAS_SKETCH);
	}
	mdb_cursor_close(c);
	assert_int_equal(n, LAYOUT_PAGES);
	store_read_end(st, txn);
	char *got = malloc(LSH_LIST_MAX);
	assert_non_null(got);
	for (int i = 0; i < LAYOUT_PAGES; i++) {
		lsh_list(st, ls->ino[i], got);
		assert_string_equal(got, ls->lsh[i]);
		assert_string_equal(th_near_of(st, ls->ino[i], &test_root), ls->answer[i]);
	}
	free(got);
}

/* A store of an older layout is converted at a writable open, losing
 * nothing and reading no page: the blobs found by the bands and the
 * answers of a store made by this build (layout 4: the sets cut to
 * NEARSET_BITS, the band rows of their keys). Read-only, layout 1 answers
 * nothing rather than from tables it cannot read, and layouts 2 and 3
 * answer as they are, at 32 bits: the same answers, the bands of the
 * 32-bit sets. */
static void check_upgraded_at_open(int layout)
{
	char *dir = th_tmpdir();
	struct layout_store *ls = calloc(1, sizeof *ls);
	assert_non_null(ls);
	old_layout_store(dir, ls, layout);
	struct fsck_opts fo = { 0 };
	struct fsck_result fr;
	char err[512];
	assert_int_equal(fsck_run(th_store_dir(dir), &fo, &fr, err), 0);
	assert_int_equal(fr.problems, 0); /* an older layout is a note, no damage */
	struct store *st;
	struct store_opts ro = { .readonly = true };
	assert_int_equal(archive_open(th_store_dir(dir), &ro, &st, err), 0);
	if (layout == 1) {
		assert_true(st->near_stale);
		assert_string_equal(th_near_of(st, ls->ino[0], &test_root), "error");
	} else {
		assert_false(st->near_stale);
		char *got = malloc(LSH_LIST_MAX);
		assert_non_null(got);
		for (int i = 0; i < LAYOUT_PAGES; i++) {
			lsh_list(st, ls->ino[i], got);
			assert_string_equal(got, ls->lsh_old[i]);
			assert_string_equal(th_near_of(st, ls->ino[i], &test_root), ls->answer[i]);
		}
		free(got);
	}
	assert_int_equal(store_close(st), 0);
	assert_int_equal(archive_open(th_store_dir(dir), NULL, &st, err), 0);
	assert_false(st->near_stale);
	assert_layout_now(st, ls);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(ls);
	th_rmdir(dir);
}

/* fsck --repair converts an older layout as a writable open does. */
static void check_fsck_repair(int layout)
{
	char *dir = th_tmpdir();
	struct layout_store *ls = calloc(1, sizeof *ls);
	assert_non_null(ls);
	old_layout_store(dir, ls, layout);
	struct fsck_opts fo = { .repair = true };
	struct fsck_result fr;
	char err[512];
	assert_int_equal(fsck_run(th_store_dir(dir), &fo, &fr, err), 0);
	assert_true(fr.repaired >= 1);
	th_assert_fsck_clean(th_store_dir(dir));
	struct store *st;
	struct store_opts ro = { .readonly = true };
	assert_int_equal(archive_open(th_store_dir(dir), &ro, &st, err), 0);
	assert_false(st->near_stale);
	assert_layout_now(st, ls);
	assert_int_equal(store_close(st), 0);
	free(ls);
	th_rmdir(dir);
}

static void test_layout1_upgraded_at_open(void **state)
{
	(void)state;
	check_upgraded_at_open(1);
}

static void test_layout1_fsck_repair(void **state)
{
	(void)state;
	check_fsck_repair(1);
}

static void test_layout2_upgraded_at_open(void **state)
{
	(void)state;
	check_upgraded_at_open(2);
}

static void test_layout2_fsck_repair(void **state)
{
	(void)state;
	check_fsck_repair(2);
}

static void test_layout3_upgraded_at_open(void **state)
{
	(void)state;
	check_upgraded_at_open(3);
}

static void test_layout3_fsck_repair(void **state)
{
	(void)state;
	check_fsck_repair(3);
}

static int newer_layout_cb(struct wtx *w, void *p)
{
	(void)p;
	uint8_t lv[4];
	put_le32(lv, NEAR_LAYOUT_VERSION + 1);
	MDB_val lk = { 11, "near_layout" }, lval = { 4, lv };
	return mdb_put(w->txn, w->st->db_meta, &lk, &lval, 0);
}

/* A layout newer than this build's is left alone: the writable open
 * refuses (its rows may not decode here), fsck reports it unchecked. */
static void test_newer_layout_left_alone(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char *a = th_page(3, 500, "");
	th_put_page(st, PD_ROOT_INO, "a", a);
	assert_int_equal(sigq_drain(st), 0);
	assert_int_equal(store_write(st, newer_layout_cb, NULL), 0);
	assert_int_equal(store_close(st), 0);
	char err[512];
	assert_int_equal(archive_open(th_store_dir(dir), NULL, &st, err), -EPROTONOSUPPORT);
	struct fsck_opts o = { .repair = true };
	struct fsck_result r;
	assert_int_equal(fsck_run(th_store_dir(dir), &o, &r, err), 0);
	assert_true(r.problems >= 1);
	struct store_opts ro = { .readonly = true };
	assert_int_equal(archive_open(th_store_dir(dir), &ro, &st, err), 0);
	assert_true(st->near_stale);
	assert_int_equal(store_close(st), 0);
	free(a);
	th_rmdir(dir);
}

/* Two blobs of one MD5 (-o nodedup copies: variants 0 and 1) share their
 * band rows: the rows stay while either is stored, and go with the last. */
static void test_bands_shared_prefix(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .nodedup = true };
	struct store *st = th_store(dir, NULL, &o);
	char *a = th_page(61, 300, ""), *b = th_page(61, 300, "one more");
	th_put_page(st, PD_ROOT_INO, "a1.html", a);
	th_put_page(st, PD_ROOT_INO, "a2.html", a);
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	assert_int_equal(sigq_drain(st), 0);
	char *got = malloc(LSH_LIST_MAX), *both = malloc(LSH_LIST_MAX);
	assert_non_null(got);
	assert_non_null(both);
	char n1[BLOBKEY_NAME_MAX + 1], n2[BLOBKEY_NAME_MAX + 1], nb[BLOBKEY_NAME_MAX + 1];
	blob_named(st, "a1.html", n1);
	blob_named(st, "a2.html", n2);
	blob_named(st, "b.html", nb);
	assert_string_not_equal(n1, n2); /* two blobs of one MD5 */
	lsh_list(st, ib, both);
	assert_non_null(strstr(both, n1));
	assert_non_null(strstr(both, n2));
	assert_non_null(strstr(both, nb));
	uint64_t gone;
	bool freed;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a1.html", &gone, &freed), 0);
	assert_true(freed);
	lsh_list(st, ib, got);
	assert_null(strstr(got, n1));
	assert_non_null(strstr(got, n2)); /* the shared rows stayed for the copy left */
	assert_non_null(strstr(got, nb));
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a2.html", &gone, &freed), 0);
	lsh_list(st, ib, got);
	both[0] = 0;
	for (int i = 0; i < NEARSET_BANDS; i++)
		strcat(both, nb);
	assert_string_equal(got, both); /* b alone, once a band */
	assert_int_equal(band_rows_stored(st), NEARSET_BANDS); /* a's rows went with its last copy */
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	free(got);
	free(both);
	th_rmdir(dir);
}

/* ---- band rows staged (near.h, layout 5) ------------------------------------ */

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* lsh_list's names sorted (the tables are read newest first, so the same
 * rows in other tables come in another order). */
static void lsh_sorted(struct store *st, uint64_t ino, char *out)
{
	char *list = malloc(LSH_LIST_MAX), *names[16 * NEARSET_BANDS * 64];
	assert_non_null(list);
	lsh_list(st, ino, list);
	size_t n = 0;
	for (char *t = strtok(list, " "); t; t = strtok(NULL, " ")) {
		assert_true(n < sizeof names / sizeof names[0]);
		names[n++] = t;
	}
	qsort(names, n, sizeof names[0], cmp_name);
	out[0] = 0;
	for (size_t i = 0; i < n; i++) {
		strcat(out, names[i]);
		strcat(out, " ");
	}
	free(list);
}

/* Page i of `families` families of near-duplicates (seeds seed0 on),
 * written as PREFIXnn.html: a version line tells it from the others of its
 * family. */
static uint64_t put_version(struct store *st, const char *prefix, int i, uint64_t seed0, uint64_t families)
{
	char name[32], extra[64];
	snprintf(name, sizeof name, "%s%02d.html", prefix, i);
	snprintf(extra, sizeof extra, "version %d of the page", i);
	char *page = th_page(seed0 + (uint64_t)i % families, 300, extra);
	uint64_t ino = th_put_page(st, PD_ROOT_INO, name, page);
	free(page);
	return ino;
}

static int rebuild_bands_cb(struct wtx *w, void *arg)
{
	(void)arg;
	return near_lsh_rebuild(w->txn, w->st);
}

#define STAGED_PAGES 81

/* With nearbands0 bounded at 32 rows (two pages), pages signed one at a
 * time send their rows on to nearbands1 (full at 64 pages) and from there,
 * by a pass of 8 rows a commit, into nearbands; after an odd number of
 * pages, nearbands0 holds the last page's rows. Every page finds by its bands the same blobs
 * as when every row is in nearbands (a rebuild puts them there); a delete
 * takes rows from whichever table holds them; fsck finds each set's rows
 * and an owner for each row, before and after a reopen (which loses the
 * pass's place). */
static void test_bands_staged(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .stage_rows = 32 };
	struct store *st = th_store(dir, NULL, &o);
	uint64_t ino[STAGED_PAGES];
	for (int i = 0; i < STAGED_PAGES; i++) {
		ino[i] = put_version(st, "p", i, 90, 5);
		assert_int_equal(sigq_drain(st), 0);
	}
	/* all three tables hold rows, and no row is lost or doubled */
	assert_int_equal(band_table_rows(st, 0), NEARSET_BANDS);
	assert_true(band_table_rows(st, 1) > 0);
	/* the pass began with the 64th page's commit: 8 rows a commit since */
	assert_int_equal(band_table_rows(st, 2), (STAGED_PAGES - 63) * 8);
	assert_int_equal(band_rows_stored(st), STAGED_PAGES * NEARSET_BANDS);
	char(*staged)[LSH_LIST_MAX] = malloc(STAGED_PAGES * LSH_LIST_MAX);
	char *got = malloc(LSH_LIST_MAX);
	assert_non_null(staged);
	assert_non_null(got);
	for (int i = 0; i < STAGED_PAGES; i++) {
		lsh_sorted(st, ino[i], staged[i]);
		/* the page's family: its own rows and those of its versions */
		assert_true(strlen(staged[i]) > (BLOBKEY_NAME_MAX + 1) * NEARSET_BANDS);
	}
	/* the first half deleted: their rows go from every table */
	for (int i = 0; i < STAGED_PAGES / 2; i++) {
		char name[32];
		uint64_t gone;
		bool freed;
		snprintf(name, sizeof name, "p%02d.html", i);
		assert_int_equal(ns_unlink(st, PD_ROOT_INO, name, &gone, &freed), 0);
		assert_true(freed);
	}
	assert_int_equal(band_rows_stored(st), (STAGED_PAGES - STAGED_PAGES / 2) * NEARSET_BANDS);
	for (int i = STAGED_PAGES / 2; i < STAGED_PAGES; i++)
		lsh_sorted(st, ino[i], staged[i]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	/* reopened: the same finds; then every row put in nearbands */
	st = th_reopen(dir, &o);
	for (int i = STAGED_PAGES / 2; i < STAGED_PAGES; i++) {
		lsh_sorted(st, ino[i], got);
		assert_string_equal(got, staged[i]);
	}
	assert_int_equal(store_write(st, rebuild_bands_cb, NULL), 0);
	assert_int_equal(band_table_rows(st, 0) + band_table_rows(st, 1), 0);
	assert_int_equal(band_table_rows(st, 2), (STAGED_PAGES - STAGED_PAGES / 2) * NEARSET_BANDS);
	for (int i = STAGED_PAGES / 2; i < STAGED_PAGES; i++) {
		lsh_sorted(st, ino[i], got);
		assert_string_equal(got, staged[i]);
	}
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(staged);
	free(got);
	th_rmdir(dir);
}

/* The store put back to layout 4 (every band row in nearbands, every
 * simhash row in its table, no staged tables) or 5 (the band rows where
 * they are, the simhash rows in their tables, no levels for them). */
static int make_layout_staged_cb(struct wtx *w, void *arg)
{
	int layout = *(const int *)arg;
	struct store *st = w->st;
	if (layout == 4) {
		assert_int_equal(near_lsh_rebuild(w->txn, st), 0);
		for (size_t i = 0; i < 2; i++)
			assert_int_equal(mdb_drop(w->txn, st->db_nearstage[i], 1), 0);
		st->has_nearstage = false;
	}
	unstage_hashes(w);
	uint8_t lv[4];
	put_le32(lv, (uint32_t)layout);
	MDB_val lk = { 11, "near_layout" }, lval = { 4, lv };
	return mdb_put(w->txn, st->db_meta, &lk, &lval, 0);
}

/* The simhash rows of the tables themselves (no levels read). */
static size_t hash_rows_settled(struct store *st)
{
	size_t n = 0;
	for (unsigned i = 0; i < st->near_tables; i++)
		n += th_table_rows(st, st->db_near[i]);
	return n;
}

/* A store of layout 4 or 5 answers as it is read-only, and a writable
 * open records layout 6 with its rows where they are: the same finds and
 * answers, the levels made, fsck clean. */
static void older_layout_recorded(int old)
{
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	enum { N = 8 };
	uint64_t ino[N];
	char(*lists)[LSH_LIST_MAX] = malloc(N * LSH_LIST_MAX), (*answers)[1024] = malloc(N * 1024);
	char *got = malloc(LSH_LIST_MAX);
	assert_non_null(lists);
	assert_non_null(answers);
	assert_non_null(got);
	for (int i = 0; i < N; i++) {
		ino[i] = put_version(st, "q", i, 120, 2);
	}
	assert_int_equal(sigq_drain(st), 0);
	for (int i = 0; i < N; i++) {
		lsh_sorted(st, ino[i], lists[i]);
		snprintf(answers[i], 1024, "%s", th_near_of(st, ino[i], &test_root));
	}
	assert_int_equal(store_write(st, make_layout_staged_cb, &old), 0);
	size_t hash_rows = hash_rows_settled(st);
	assert_true(hash_rows >= N);
	assert_int_equal(store_close(st), 0);
	struct fsck_result fr = th_fsck(th_store_dir(dir), (struct fsck_opts){ .deep = true });
	assert_int_equal(fr.problems, 0); /* an older layout is a note */
	struct store_opts ro = { .readonly = true };
	st = th_reopen(dir, &ro);
	assert_false(st->near_stale);
	assert_int_equal(st->has_nearstage, old == 5);
	assert_false(st->has_nearhstage);
	for (int i = 0; i < N; i++) {
		lsh_sorted(st, ino[i], got);
		assert_string_equal(got, lists[i]);
		assert_string_equal(th_near_of(st, ino[i], &test_root), answers[i]);
	}
	assert_int_equal(store_close(st), 0);
	st = th_reopen(dir, NULL);
	assert_true(st->has_nearstage);
	assert_true(st->has_nearhstage);
	MDB_txn *txn;
	uint32_t layout = 0;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_layout_get(txn, st, &layout), 0);
	store_read_end(st, txn);
	assert_int_equal(layout, NEAR_LAYOUT_VERSION);
	/* left where they were */
	assert_int_equal(band_table_rows(st, old == 5 ? 0 : 2), N * NEARSET_BANDS);
	assert_int_equal(hash_rows_settled(st), hash_rows);
	for (int i = 0; i < N; i++) {
		lsh_sorted(st, ino[i], got);
		assert_string_equal(got, lists[i]);
		assert_string_equal(th_near_of(st, ino[i], &test_root), answers[i]);
	}
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(lists);
	free(answers);
	free(got);
	th_rmdir(dir);
}

static void test_layout4_is_layout6(void **state)
{
	(void)state;
	older_layout_recorded(4);
}

static void test_layout5_is_layout6(void **state)
{
	(void)state;
	older_layout_recorded(5);
}

/* ---- near0 keyed by MD5 prefix (near0 layout 2) ---------------------------- */

/* The bytes of a near0 row's rest (the hash's bits its key does not
 * hold: near.h); the widest block is block 0. */
static size_t rest0(const struct store *st)
{
	unsigned n = st->near_tables, w = 64 / n + (64 % n != 0);
	return (64 - w + 7) / 8;
}

/* near0's rows: how many, and whether each is rest0 + `tail` bytes of
 * value. */
static size_t near0_rows_of(struct store *st, size_t tail)
{
	size_t width = rest0(st) + tail;
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val k, v;
	size_t n = 0;
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	size_t nl = near_hash_levels(st, 0, lv);
	assert_int_equal(store_read_begin(st, &txn), 0);
	for (size_t l = 0; l < nl; l++) {
		assert_int_equal(mdb_cursor_open(txn, lv[l], &c), 0);
		for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
		     g = mdb_cursor_get(c, &k, &v, MDB_NEXT), n++)
			assert_int_equal(v.mv_size, width);
		mdb_cursor_close(c);
	}
	store_read_end(st, txn);
	return n;
}

static uint32_t near0_layout_of(struct store *st)
{
	MDB_txn *txn;
	uint32_t layout;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near0_layout_get(txn, st, &layout), 0);
	store_read_end(st, txn);
	return layout;
}

/* near0 written again as layout 1 (whole blob keys) leaves it: emptied,
 * each record with a simhash indexed again with st->near0_keys, the
 * layout row set to 1. */
static int near0_to_layout1_cb(struct wtx *w, void *p)
{
	(void)p;
	struct store *st = w->st;
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	size_t nl = near_hash_levels(st, 0, lv);
	for (size_t l = 0; l < nl; l++)
		assert_int_equal(mdb_drop(w->txn, lv[l], 0), 0);
	st->near0_keys = true;
	MDB_cursor *c;
	MDB_val k, v;
	assert_int_equal(mdb_cursor_open(w->txn, st->db_fp, &c), 0);
	struct { struct blobkey k; uint64_t h; } rows[64];
	size_t n = 0;
	for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0; g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct fprec r;
		assert_int_equal(fprec_decode(v.mv_data, v.mv_size, &r), 0);
		if (!(r.flags & FPREC_HAS_SIMHASH))
			continue;
		assert_true(n < 64);
		blobkey_decode(k.mv_data, &rows[n].k);
		rows[n++].h = r.simhash;
	}
	mdb_cursor_close(c);
	for (size_t i = 0; i < n; i++) {
		/* near_add writes the other tables' rows again: they are there */
		int rc = near_add(w->txn, st, &rows[i].k, rows[i].h);
		if (rc)
			return rc;
	}
	return near0_layout_put(w->txn, st, 1);
}

/* Pages with near neighbours; the answers of each (into ans). */
enum { N0 = 6 };
static void near0_answers(struct store *st, const uint64_t *ino, char ans[N0][512])
{
	for (int i = 0; i < N0; i++)
		snprintf(ans[i], 512, "%s", th_near_of(st, ino[i], &test_root));
}

static struct store *near0_pages(const char *dir, uint64_t *ino, char ans[N0][512])
{
	struct store *st = th_store(dir, NULL, NULL);
	static const char *extra[N0] = { "", "one more sentence here", "", "and another", "", "" };
	static const unsigned seed[N0] = { 11, 11, 12, 12, 13, 14 };
	for (int i = 0; i < N0; i++) {
		char *page = th_page(seed[i], 600, extra[i]), name[16];
		snprintf(name, sizeof name, "p%d.html", i);
		ino[i] = th_put_page(st, PD_ROOT_INO, name, page);
		free(page);
	}
	assert_int_equal(sigq_drain(st), 0);
	near0_answers(st, ino, ans);
	assert_string_not_equal(ans[0], "ENODATA"); /* the fixture: p0 and p1 are near */
	assert_non_null(strstr(ans[0], "p1.html"));
	return st;
}

static void check_near0_converted(bool by_fsck)
{
	char *dir = th_tmpdir();
	uint64_t ino[N0];
	char before[N0][512], now[N0][512];
	struct store *st = near0_pages(dir, ino, before);
	assert_int_equal(near0_layout_of(st), NEAR0_LAYOUT_VERSION);
	size_t rows = near0_rows_of(st, NEAR0_PREFIX);
	assert_int_equal(rows, N0);
	assert_int_equal(store_write(st, near0_to_layout1_cb, NULL), 0);
	assert_int_equal(near0_rows_of(st, BLOBKEY_BYTES), rows);
	assert_int_equal(store_close(st), 0);
	/* an older layout is a note, no damage; read-only, it answers as is */
	struct fsck_opts fo = { 0 };
	struct fsck_result fr = th_fsck(th_store_dir(dir), fo);
	assert_int_equal(fr.problems, 0);
	assert_true(fr.notes >= 1);
	struct store_opts ro = { .readonly = true };
	st = th_reopen(dir, &ro);
	assert_true(st->near0_keys);
	near0_answers(st, ino, now);
	for (int i = 0; i < N0; i++)
		assert_string_equal(now[i], before[i]);
	assert_int_equal(store_close(st), 0);
	if (by_fsck) {
		fo.repair = true;
		fr = th_fsck(th_store_dir(dir), fo);
		assert_true(fr.repaired >= 1);
	}
	st = th_reopen(dir, NULL);
	assert_false(st->near0_keys);
	assert_int_equal(near0_layout_of(st), NEAR0_LAYOUT_VERSION);
	assert_int_equal(near0_rows_of(st, NEAR0_PREFIX), rows);
	near0_answers(st, ino, now);
	for (int i = 0; i < N0; i++)
		assert_string_equal(now[i], before[i]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

static void test_near0_layout1_upgraded_at_open(void **state)
{
	(void)state;
	check_near0_converted(false);
}

static void test_near0_layout1_fsck_repair(void **state)
{
	(void)state;
	check_near0_converted(true);
}

/* A batch of the near0 conversion run again after the map was grown
 * (store_commit.c rolls its writes back and calls it again) starts where
 * it started: every row ends in layout 2 and the answers are unchanged.
 * The step converts two blobs a batch and reports a full map once. */
static int near0_step_calls;
static int near0_step_map_full_once(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch,
				    bool *finished)
{
	(void)batch;
	int rc = near0_layout_convert(txn, st, next, 2, finished);
	if (!rc && near0_step_calls++ == 0)
		return -ECHRNG; /* PD_EMAPFULL (store_int.h) */
	return rc;
}

static void test_near0_batch_run_again(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	uint64_t ino[N0];
	char before[N0][512], now[N0][512];
	struct store *st = near0_pages(dir, ino, before);
	size_t rows = near0_rows_of(st, NEAR0_PREFIX);
	assert_int_equal(store_write(st, near0_to_layout1_cb, NULL), 0);
	near0_step_calls = 0;
	assert_int_equal(near_meta_upgrade(st, "near0_layout", 1, NEAR0_LAYOUT_VERSION, near0_step_map_full_once), 0);
	assert_true(near0_step_calls > 2);
	assert_int_equal(near0_layout_of(st), NEAR0_LAYOUT_VERSION);
	assert_int_equal(near0_rows_of(st, NEAR0_PREFIX), rows);
	near0_answers(st, ino, now);
	for (int i = 0; i < N0; i++)
		assert_string_equal(now[i], before[i]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* Copies of one page under -o nodedup: variants of one MD5, one near0
 * row for them all, which stays until the last goes. */
static void test_near0_shared_row(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .nodedup = true };
	struct store *st = th_store(dir, NULL, &o);
	char *page = th_page(21, 600, ""), *other = th_page(22, 600, "");
	uint64_t c[3];
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof name, "copy%d.html", i);
		c[i] = th_put_page(st, PD_ROOT_INO, name, page);
	}
	th_put_page(st, PD_ROOT_INO, "other.html", other);
	assert_int_equal(sigq_drain(st), 0);
	assert_int_equal(near0_rows_of(st, NEAR0_PREFIX), 2);
	const char *a = th_near_of(st, c[0], &test_root);
	assert_non_null(strstr(a, "copy1.html"));
	assert_non_null(strstr(a, "copy2.html"));
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "copy0.html", &gone_ino, &gone), 0);
	assert_int_equal(near0_rows_of(st, NEAR0_PREFIX), 2);
	a = th_near_of(st, c[1], &test_root);
	assert_non_null(strstr(a, "copy2.html"));
	assert_null(strstr(a, "copy0.html"));
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	st = th_reopen(dir, &o);
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "copy1.html", &gone_ino, &gone), 0);
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "copy2.html", &gone_ino, &gone), 0);
	assert_int_equal(near0_rows_of(st, NEAR0_PREFIX), 1);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(page);
	free(other);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_old_version_upgraded_at_open),
		cmocka_unit_test(test_old_version_fsck_repair),
		cmocka_unit_test(test_layout1_upgraded_at_open),
		cmocka_unit_test(test_layout1_fsck_repair),
		cmocka_unit_test(test_layout2_upgraded_at_open),
		cmocka_unit_test(test_layout2_fsck_repair),
		cmocka_unit_test(test_layout3_upgraded_at_open),
		cmocka_unit_test(test_layout3_fsck_repair),
		cmocka_unit_test(test_newer_layout_left_alone),
		cmocka_unit_test(test_bands_shared_prefix),
		cmocka_unit_test(test_bands_staged),
		cmocka_unit_test(test_layout4_is_layout6),
		cmocka_unit_test(test_layout5_is_layout6),
		cmocka_unit_test(test_near0_layout1_upgraded_at_open),
		cmocka_unit_test(test_near0_layout1_fsck_repair),
		cmocka_unit_test(test_near0_shared_row),
		cmocka_unit_test(test_near0_batch_run_again),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
