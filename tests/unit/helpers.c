/* helpers.c - see helpers.h. */
#include "archive/archive.h"
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "blob/blob.h"
#include "archive/query.h"
#include "near/near.h"
#include "near/simhash.h"

const struct pd_cred test_root = { 0, 0, 0, NULL };

char *th_tmpdir(void)
{
	char *d = strdup("/tmp/pdtest.XXXXXX");
	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void th_rmdir(char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

const char *th_store_dir(const char *dir)
{
	static char path[4096];
	snprintf(path, sizeof path, "%s/store", dir);
	return path;
}

struct store *th_store(const char *dir, const struct store_params *p, const struct store_opts *o)
{
	char err[PD_ERRLEN] = "";
	char sub[4096];
	snprintf(sub, sizeof sub, "%s", th_store_dir(dir));
	int rc = archive_mkfs(sub, p, err);
	if (rc)
		fail_msg("mkfs: %s", err);
	struct store_opts def = { 0 };
	struct store *st;
	if ((rc = archive_open(sub, o ? o : &def, &st, err)))
		fail_msg("open: %s", err);
	return st;
}

struct store *th_reopen(const char *dir, const struct store_opts *o)
{
	struct store *st;
	char err[PD_ERRLEN] = "";
	if (archive_open(th_store_dir(dir), o, &st, err))
		fail_msg("open: %s", err);
	return st;
}

uint64_t th_put(struct store *st, uint64_t parent, const char *name, const void *buf, size_t len)
{
	struct inode in;
	int rc = ns_mknode(st, parent, name, S_IFREG | 0644, 0, NULL, &test_root, &in);
	if (rc == -EEXIST)
		rc = ns_lookup(st, parent, name, &in);
	assert_int_equal(rc, 0);
	struct pd_file *f;
	bool keep;
	assert_int_equal(file_open(st, in.ino, O_WRONLY | O_TRUNC, &f, &keep), 0);
	size_t done = 0;
	/* Write in pieces, as the kernel does. */
	for (size_t off = 0; off < len; off += 4096) {
		size_t n = len - off < 4096 ? len - off : 4096, w;
		assert_int_equal(file_write(f, (const char *)buf + off, n, off, &w), 0);
		assert_int_equal(w, n);
		done += w;
	}
	assert_int_equal(done, len);
	assert_int_equal(file_flush(f), 0);
	assert_int_equal(file_release(f), 0);
	/* The close's seal may wait for its batch (archive/seal_later.h): the
	 * callers read the store's tables at once, as a page put. */
	assert_int_equal(store_settle(st), 0);
	return in.ino;
}

struct blobkey th_blob_of(struct store *st, uint64_t ino)
{
	MDB_txn *txn;
	struct inode in;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(ns_get_inode(txn, st, ino, &in), 0);
	store_read_end(st, txn);
	assert_true(in.flags & INODE_HAS_BLOB);
	return in.blob;
}

struct fprec th_fprec_of(struct store *st, uint64_t ino)
{
	struct blobkey k = th_blob_of(st, ino);
	struct fprec r;
	assert_int_equal(blob_read(st, &k, &r), 0);
	return r;
}

uint64_t th_refcount(struct store *st, uint64_t ino)
{
	char buf[QUERY_MAX];
	size_t len;
	if (query_refcount(st, ino, buf, &len))
		return 0;
	buf[len] = 0;
	return strtoull(buf, NULL, 10);
}

static void print_line(void *ctx, const char *line)
{
	(void)ctx;
	fprintf(stderr, "fsck: %s\n", line);
}

void th_assert_fsck_clean(const char *dir)
{
	struct fsck_opts o = { .deep = true, .report = print_line };
	struct fsck_result r;
	char err[512];
	assert_int_equal(fsck_run(dir, &o, &r, err), 0);
	assert_int_equal(r.problems, 0);
}

struct fsck_result th_fsck(const char *dir, struct fsck_opts o)
{
	struct fsck_result r;
	char err[512];
	assert_int_equal(fsck_run(dir, &o, &r, err), 0);
	return r;
}

void th_damage_record(struct store *st, const struct fprec *r, size_t at, size_t n)
{
	char path[4096], ff[64];
	assert_true(n <= sizeof ff);
	memset(ff, 0xff, n);
	snprintf(path, sizeof path, "%s/packs/pack-%08u", st->dir, r->pack);
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	struct pack_rec_hdr h;
	assert_int_equal(blob_rec_hdr(st, r, &h), 0);
	assert_int_equal(pwrite(fd, ff, n, (off_t)(r->pack_off + h.hdr_len + at)), (ssize_t)n);
	close(fd);
}

void th_compact_crash(struct store *st, uint32_t pack, struct blob_compact_cfg c, const char *step)
{
	c.debug_stops = true; /* no stop callback: the step returns at once */
	setenv("PD_COMPACT_STOP", step, 1);
	struct blob_compact_stats d = { 0 };
	int rc = blob_compact_pack(st, pack, &c, &d);
	unsetenv("PD_COMPACT_STOP");
	assert_int_equal(rc, -ECANCELED);
	store_abandon(st);
}

char *th_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	struct stat st;
	assert_int_equal(fstat(fileno(f), &st), 0);
	char *b = malloc((size_t)st.st_size + 1);
	assert_non_null(b);
	*len = fread(b, 1, (size_t)st.st_size, f);
	assert_int_equal(*len, (size_t)st.st_size);
	b[*len] = 0;
	fclose(f);
	return b;
}

char *th_data_page(const char *name, size_t *len)
{
	char path[4096];
	const char *base = getenv("PD_DATA");
	snprintf(path, sizeof path, "%s/near/%s", base && *base ? base : "tests/data", name);
	return th_read_file(path, len);
}

static size_t nblobs;
static int count_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)path;
	(void)sb;
	(void)ftw;
	if (flag == FTW_F)
		nblobs++;
	return 0;
}

size_t th_count_stored(struct store *st)
{
	size_t n = th_count_blobs(st->dir);
	uint32_t *ids;
	size_t nids;
	assert_int_equal(pack_list(st->packs, &ids, &nids), 0);
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	for (size_t i = 0; i < nids; i++) {
		struct blob_pack_live l;
		assert_int_equal(blob_pack_live_get(txn, st, ids[i], &l), 0);
		n += (size_t)l.records;
	}
	store_read_end(st, txn);
	free(ids);
	return n;
}

size_t th_count_blobs(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/objects", dir);
	nblobs = 0;
	nftw(path, count_one, 16, FTW_PHYS);
	return nblobs;
}

/* A page of `words` pseudo-random words (seeded), with `extra` appended to
 * its text. The words are made of two syllables of a fixed list: 1,024 of
 * them, so that, as in real text, most words are rare (with a few dozen
 * words, every page would have the same word counts and so nearly the same
 * simhash, whose features include single words). */
char *th_page(uint64_t seed, unsigned words, const char *extra)
{
	static const char *const syllable[] = { "ar", "bo", "ce", "di", "fu", "ga", "he", "ki", "lo", "mu", "na",
		"pe", "qui", "ro", "sa", "te", "vu", "wa", "xo", "ye", "zi", "cha", "sho", "tri", "pla", "gre",
		"blu", "dro", "fla", "kle", "spo", "vri" };
	size_t cap = (size_t)words * 8 + strlen(extra) + 64, n = 0;
	char *p = malloc(cap);
	assert_non_null(p);
	n += (size_t)sprintf(p, "<html><body><p>");
	uint64_t s = seed;
	for (unsigned i = 0; i < words; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		unsigned w = (unsigned)(s >> 33) % 1024;
		n += (size_t)sprintf(p + n, "%s%s ", syllable[w / 32], syllable[w % 32]);
	}
	sprintf(p + n, "%s</p></body></html>", extra);
	return p;
}

uint64_t th_put_page(struct store *st, uint64_t parent, const char *name, const char *page)
{
	return th_put(st, parent, name, page, strlen(page));
}

const char *th_page_res(const char *a, const char *b)
{
	static char out[4][16];
	static int next;
	struct near_sig *x = malloc(sizeof *x), *y = malloc(sizeof *y);
	assert_non_null(x);
	assert_non_null(y);
	assert_int_equal(near_sig_of_page(a, strlen(a), x), 0);
	assert_int_equal(near_sig_of_page(b, strlen(b), y), 0);
	assert_true(x->has_set && y->has_set);
	char *o = out[next++ % 4];
	snprintf(o, 16, "%.3f", nearset_resemblance(&x->set, &y->set, NULL));
	free(x);
	free(y);
	return o;
}

unsigned th_page_distance(const char *a, const char *b)
{
	struct simhash_result x, y;
	assert_int_equal(simhash_of_page(a, strlen(a), &x), 0);
	assert_int_equal(simhash_of_page(b, strlen(b), &y), 0);
	return simhash_distance(x.hash, y.hash);
}

void th_read_back(struct store *st, uint64_t ino, const char *want)
{
	struct pd_file *f;
	bool keep;
	size_t len = strlen(want), got;
	char *buf = malloc(len + 16);
	assert_int_equal(file_open(st, ino, O_RDONLY, &f, &keep), 0);
	assert_int_equal(file_read(f, buf, len + 16, 0, &got), 0);
	assert_int_equal(got, len);
	assert_memory_equal(buf, want, len);
	assert_int_equal(file_release(f), 0);
	free(buf);
}

int th_delta_of(struct store *st, const struct blobkey *k, struct blobkey *base)
{
	struct fprec r;
	assert_int_equal(blob_read(st, k, &r), 0);
	int rc = blob_delta_base(st, &r, base);
	assert_true(rc >= 0);
	return rc;
}

unsigned th_depth_of(struct store *st, const struct blobkey *k)
{
	struct fprec r;
	MDB_txn *txn;
	unsigned d;
	assert_int_equal(blob_read(st, k, &r), 0);
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_delta_depth(txn, st, &r, &d), 0);
	store_read_end(st, txn);
	return d;
}

size_t th_table_rows(struct store *st, MDB_dbi dbi)
{
	MDB_txn *txn;
	MDB_stat ms;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(mdb_stat(txn, dbi, &ms), 0);
	store_read_end(st, txn);
	return ms.ms_entries;
}

/* Blob k's nearfeat row: its format byte (0: none) and length. */
int th_set_row_format(struct store *st, const struct blobkey *k, size_t *len)
{
	MDB_txn *txn;
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(k, kb);
	MDB_val key = { BLOBKEY_BYTES, kb }, v;
	assert_int_equal(store_read_begin(st, &txn), 0);
	int rc = mdb_get(txn, st->db_nearfeat, &key, &v);
	int f = rc ? 0 : ((const uint8_t *)v.mv_data)[0];
	if (len)
		*len = rc ? 0 : v.mv_size;
	store_read_end(st, txn);
	return f;
}

/* The set blob k's row gives is the one a whole row of its page holds. */
void th_assert_set_of_page(struct store *st, const struct blobkey *k, const char *page)
{
	struct near_sig *want = malloc(sizeof *want), *got = malloc(sizeof *got);
	assert_non_null(want);
	assert_non_null(got);
	assert_int_equal(near_sig_of_page(page, strlen(page), want), 0);
	assert_true(want->has_set);
	nearset_to_stored(&want->set);
	uint8_t buf[NEARSET_MAX_BYTES];
	assert_int_equal(nearset_decode(buf, nearset_encode(&want->set, buf), &want->set), 0);
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_set_get(txn, st, k, got), 0);
	store_read_end(st, txn);
	assert_true(got->has_set);
	assert_int_equal(got->set.shingles, want->set.shingles);
	assert_int_equal(got->set.n, want->set.n);
	assert_int_equal(got->set.bits, want->set.bits);
	assert_int_equal(got->set.complete, want->set.complete);
	assert_memory_equal(got->set.h, want->set.h, sizeof want->set.h);
	free(want);
	free(got);
}

char *th_near_answer(struct store *st, uint64_t ino)
{
	char *a = malloc(QUERY_MAX + 1);
	assert_non_null(a);
	size_t len;
	assert_int_equal(query_near(st, ino, &test_root, a, &len), 0);
	a[len] = 0;
	return a;
}

const char *th_near_of(struct store *st, uint64_t ino, const struct pd_cred *cred)
{
	static char answer[QUERY_MAX + 1];
	size_t len = 0;
	int rc = query_near(st, ino, cred, answer, &len);
	if (rc)
		return rc == -ENODATA ? "ENODATA" : "error";
	answer[len] = 0;
	return answer;
}

bool th_has_sketch(struct store *st, uint64_t ino)
{
	return (th_fprec_of(st, ino).flags & FPREC_HAS_SKETCH) != 0;
}

struct blobkey th_key_of(size_t i)
{
	struct blobkey k = { .variant = (uint32_t)(i % 3) };
	memset(k.md5, 0, 16);
	for (int b = 0; b < 8; b++)
		k.md5[b] = (uint8_t)(i >> (8 * b));
	return k;
}
