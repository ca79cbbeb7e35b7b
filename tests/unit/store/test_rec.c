/* test_rec.c - the inode row's two layouts (rec.h): layout 2 round-trips
 * every field, falls back to layout 1 where it must, is shorter, refuses
 * damaged rows; layout 1 rows (stores before format 4) still decode; the
 * varints under it refuse what they never write. The fingerprint row's two
 * layouts the same way, and the pad that keeps a layout 2 row from
 * reading as layout 1. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "base/varint.h"
#include "store/rec.h"

static struct inode regular_file(void)
{
	struct inode in = { .mode = S_IFREG | 0644, .uid = 1000, .gid = 1000, .nlink = 1, .size = 12345 };
	in.mtime = (struct pd_time){ 1795000000, 123456789 };
	in.atime = (struct pd_time){ 1795000000, 120000000 };
	in.ctime = (struct pd_time){ 1795000001, 5 };
	in.flags = INODE_HAS_BLOB;
	for (int i = 0; i < 16; i++)
		in.blob.md5[i] = (uint8_t)(0xa0 + i);
	return in;
}

static void assert_same(const struct inode *a, const struct inode *b)
{
	assert_int_equal(a->mode, b->mode);
	assert_int_equal(a->uid, b->uid);
	assert_int_equal(a->gid, b->gid);
	assert_int_equal(a->nlink, b->nlink);
	assert_int_equal(a->size, b->size);
	assert_int_equal(a->atime.sec, b->atime.sec);
	assert_int_equal(a->atime.nsec, b->atime.nsec);
	assert_int_equal(a->mtime.sec, b->mtime.sec);
	assert_int_equal(a->mtime.nsec, b->mtime.nsec);
	assert_int_equal(a->ctime.sec, b->ctime.sec);
	assert_int_equal(a->ctime.nsec, b->ctime.nsec);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->rdev, b->rdev);
	assert_int_equal(a->name_parent, b->name_parent);
	assert_true(a->name_hash == b->name_hash);
	if (a->flags & INODE_HAS_BLOB) {
		assert_memory_equal(a->blob.md5, b->blob.md5, 16);
		assert_int_equal(a->blob.variant, b->blob.variant);
	}
}

static size_t row2_roundtrip(const struct inode *in)
{
	uint8_t row[INODE_FIXED_BYTES];
	size_t n = inode_encode_row2(in, row);
	assert_true(n > 0 && n < INODE_FIXED_BYTES);
	struct inode out;
	memset(&out, 0x5a, sizeof out);
	const char *target = "x";
	size_t tlen = 7;
	assert_int_equal(inode_decode(row, n, &out, &target, &tlen), 0);
	assert_null(target);
	assert_int_equal(tlen, 0);
	assert_same(in, &out);
	return n;
}

static void test_row2_roundtrip(void **state)
{
	(void)state;
	struct inode in = regular_file();
	size_t n = row2_roundtrip(&in);
	assert_true(n <= 50); /* against 96 in layout 1 */
	in.blob.variant = 70000;
	row2_roundtrip(&in);
	/* a fresh file: no blob, equal times, owned by root */
	struct inode fresh = { .mode = S_IFREG | 0600, .nlink = 1 };
	fresh.atime = fresh.mtime = fresh.ctime = (struct pd_time){ 1795000000, 999999999 };
	assert_true(row2_roundtrip(&fresh) <= 20);
	/* a directory, a device, extra flags, times before 1970 and far apart */
	struct inode dir = fresh;
	dir.mode = S_IFDIR | 02755;
	dir.nlink = 40000;
	dir.ctime = (struct pd_time){ -5, 1 };
	dir.atime = (struct pd_time){ 1795000000 + 8000000000ll, 0 };
	row2_roundtrip(&dir);
	struct inode dev = fresh;
	dev.mode = S_IFCHR | 0666;
	dev.rdev = 0x123456789abcull;
	dev.flags = 0x80000000u | 6;
	dev.uid = dev.gid = UINT32_MAX;
	dev.size = UINT64_MAX;
	row2_roundtrip(&dev);
	struct inode neg = fresh;
	neg.mtime = (struct pd_time){ -2000000000, 7 };
	neg.atime = (struct pd_time){ -2000000001, 999999999 };
	row2_roundtrip(&neg);
}

static void test_row2_falls_back(void **state)
{
	(void)state;
	uint8_t row[INODE_FIXED_BYTES];
	struct inode link = regular_file();
	link.mode = S_IFLNK | 0777;
	link.flags = 0;
	assert_int_equal(inode_encode_row2(&link, row), 0); /* symlinks keep layout 1 */
	struct inode far = regular_file();
	far.atime.sec = INT64_MIN;
	assert_int_equal(inode_encode_row2(&far, row), 0);
	far = regular_file();
	far.ctime.sec = far.mtime.sec + 9000000001ll;
	assert_int_equal(inode_encode_row2(&far, row), 0);
	struct inode badns = regular_file();
	badns.mtime.nsec = 1000000000;
	assert_int_equal(inode_encode_row2(&badns, row), 0);
	/* every field at its widest: longer than 95 bytes, so layout 1 */
	struct inode wide = regular_file();
	wide.mode = wide.uid = wide.gid = wide.nlink = UINT32_MAX & ~(uint32_t)S_IFMT;
	wide.mode = S_IFREG | 07777 | 0x7fff0000u;
	wide.size = wide.rdev = UINT64_MAX;
	wide.mtime.sec = INT64_MIN + 1;
	wide.atime.sec = wide.mtime.sec + 9000000000ll;
	wide.ctime.sec = wide.mtime.sec + 8999999999ll;
	wide.flags = UINT32_MAX;
	wide.blob.variant = UINT32_MAX;
	assert_int_equal(inode_encode_row2(&wide, row), 0);
}

static void test_row1_still_decodes(void **state)
{
	(void)state;
	uint8_t row[INODE_FIXED_BYTES + 16];
	struct inode in = regular_file(), out;
	size_t n = inode_encode(&in, NULL, 0, row);
	assert_int_equal(n, INODE_FIXED_BYTES);
	assert_int_equal(inode_decode(row, n, &out, NULL, NULL), 0);
	assert_same(&in, &out);
	struct inode link = regular_file();
	link.mode = S_IFLNK | 0777;
	link.flags = 0;
	link.size = 9;
	n = inode_encode(&link, "../target", 9, row);
	const char *target;
	size_t tlen;
	assert_int_equal(inode_decode(row, n, &out, &target, &tlen), 0);
	assert_int_equal(tlen, 9);
	assert_memory_equal(target, "../target", 9);
	assert_same(&link, &out);
}

static void test_row2_refuses_damage(void **state)
{
	(void)state;
	struct inode in = regular_file(), out;
	uint8_t row[INODE_FIXED_BYTES + 1], bad[INODE_FIXED_BYTES + 1];
	size_t n = inode_encode_row2(&in, row);
	assert_true(n > 20);
	for (size_t cut = 0; cut < n; cut++) /* every truncation */
		assert_int_equal(inode_decode(row, cut, &out, NULL, NULL), -EUCLEAN);
	memcpy(bad, row, n);
	bad[n] = 0;
	assert_int_equal(inode_decode(bad, n + 1, &out, NULL, NULL), -EUCLEAN); /* a byte left over */
	memcpy(bad, row, n);
	bad[0] = 0x03;
	assert_int_equal(inode_decode(bad, n, &out, NULL, NULL), -EUCLEAN); /* unknown tag */
	memcpy(bad, row, n);
	bad[1] |= 0x40;
	assert_int_equal(inode_decode(bad, n, &out, NULL, NULL), -EUCLEAN); /* unknown field */
	/* a symlink in layout 2 (mode S_IFLNK | 0777 = 0xa1ff: ff c3 02) */
	struct inode fresh = { .mode = S_IFREG | 0777, .nlink = 1 };
	size_t m = inode_encode_row2(&fresh, bad);
	assert_int_equal(bad[2], 0xff);
	assert_int_equal(bad[3], 0x83);
	bad[3] = 0xc3;
	assert_int_equal(inode_decode(bad, m, &out, NULL, NULL), -EUCLEAN);
	/* an overlong uid (0 as 80 00) */
	m = inode_encode_row2(&fresh, bad);
	assert_int_equal(bad[5], 0); /* uid */
	memmove(bad + 7, bad + 6, m - 6);
	bad[5] = 0x80;
	bad[6] = 0x00;
	assert_int_equal(inode_decode(bad, m + 1, &out, NULL, NULL), -EUCLEAN);
}

/* The one name an inode row may hold (format 5): its parent and the
 * name's hash, about 10 bytes more; a damaged one is refused. */
static void test_row2_name(void **state)
{
	(void)state;
	struct inode in = regular_file(), out;
	size_t plain = row2_roundtrip(&in);
	in.name_parent = 4242;
	in.name_hash = dirent_hash("index.html", 10);
	size_t n = row2_roundtrip(&in);
	assert_int_equal(n, plain + 2 + 8);
	in.name_parent = UINT64_MAX;
	row2_roundtrip(&in);
	/* a layout 1 row holds no name */
	uint8_t row[INODE_FIXED_BYTES + 8];
	assert_int_equal(inode_encode(&in, NULL, 0, row), INODE_FIXED_BYTES);
	assert_int_equal(inode_decode(row, INODE_FIXED_BYTES, &out, NULL, NULL), 0);
	assert_int_equal(out.name_parent, 0);
	assert_true(out.name_hash == 0);
	/* not a hash dirent_hash makes: bit 53 clear */
	in.name_parent = 4242;
	n = inode_encode_row2(&in, row);
	assert_int_equal(row[n - 2] & 0xe0, 0x20); /* hash bits 53..55, little-endian */
	row[n - 2] &= 0x1f;
	assert_int_equal(inode_decode(row, n, &out, NULL, NULL), -EUCLEAN);
	row[n - 2] |= 0x60; /* bit 54: above the hash's range */
	assert_int_equal(inode_decode(row, n, &out, NULL, NULL), -EUCLEAN);
	/* parent 0 */
	in.name_parent = 1;
	n = inode_encode_row2(&in, row);
	assert_int_equal(row[n - 9], 1);
	row[n - 9] = 0;
	assert_int_equal(inode_decode(row, n, &out, NULL, NULL), -EUCLEAN);
	/* every truncation */
	n = inode_encode_row2(&in, row);
	for (size_t cut = 0; cut < n; cut++)
		assert_int_equal(inode_decode(row, cut, &out, NULL, NULL), -EUCLEAN);
}

static void test_varint(void **state)
{
	(void)state;
	uint8_t b[VARINT_MAX_BYTES + 1];
	uint64_t vals[] = { 0, 1, 127, 128, 16383, 16384, UINT32_MAX, UINT64_MAX >> 1, UINT64_MAX };
	for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
		size_t n = varint_put(b, vals[i]);
		uint64_t v;
		assert_int_equal(varint_get(b, n, &v), n);
		assert_int_equal(v, vals[i]);
		assert_int_equal(varint_get(b, n - 1, &v), 0); /* ends inside */
	}
	assert_int_equal(varint_put(b, UINT64_MAX), VARINT_MAX_BYTES);
	uint64_t v;
	b[VARINT_MAX_BYTES - 1] = 0x02; /* bit 64 */
	assert_int_equal(varint_get(b, VARINT_MAX_BYTES, &v), 0);
	int64_t s[] = { 0, -1, 1, INT64_MIN, INT64_MAX };
	for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
		assert_int_equal(zigzag_decode(zigzag_encode(s[i])), s[i]);
	assert_int_equal(zigzag_encode(-1), 1);
}

/* ---- fingerprint rows -------------------------------------------------- */

static struct fprec packed_page(void)
{
	struct fprec r = { .refcount = 1, .size = 23456, .simhash = 0x8badf00ddeadbeefull };
	r.flags = FPREC_HAS_SIMHASH | FPREC_IN_FILTER | FPREC_PACKED;
	for (int i = 0; i < 16; i++)
		r.xxh128[i] = (uint8_t)(0x30 + i);
	r.pos.nlines = 2;
	r.pos.k = 14;
	r.pos.line[0] = 1234;
	r.pos.line[1] = 262143;
	for (int i = 0; i < r.pos.k; i++)
		r.pos.off[i] = (uint8_t)(i * 9);
	r.leaf = 0;
	r.pack = 7;
	r.pack_off = 123456789;
	r.pack_len = 4321;
	r.pack_dict = 3;
	return r;
}

static void assert_same_fprec(const struct fprec *a, const struct fprec *b)
{
	assert_int_equal(a->refcount, b->refcount);
	assert_int_equal(a->size, b->size);
	assert_memory_equal(a->xxh128, b->xxh128, 16);
	assert_int_equal(a->simhash, b->simhash);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->pos.nlines, b->pos.nlines);
	assert_int_equal(a->pos.k, b->pos.k);
	for (unsigned i = 0; i < a->pos.nlines; i++)
		assert_int_equal(a->pos.line[i], b->pos.line[i]);
	assert_memory_equal(a->pos.off, b->pos.off, a->pos.k);
	assert_int_equal(a->leaf, b->leaf);
	if (a->flags & FPREC_HAS_SKETCH)
		assert_memory_equal(a->sketch, b->sketch, FPREC_SKETCH_BYTES);
	assert_int_equal(a->pack, b->pack);
	assert_int_equal(a->pack_off, b->pack_off);
	assert_int_equal(a->pack_len, b->pack_len);
	assert_int_equal(a->pack_dict, b->pack_dict);
	assert_int_equal(a->ino, b->ino);
}

/* r through both layouts: each decodes to r, reads as the layout it is,
 * and layout 2 is never longer than FPREC_MAX_BYTES */
static size_t fp_roundtrip(const struct fprec *r, size_t *len1)
{
	uint8_t b[FPREC_MAX_BYTES];
	struct fprec got;
	size_t n1 = fprec_encode(r, false, b);
	assert_true(n1 <= FPREC_MAX_BYTES);
	assert_true(fprec_is_row1(b, n1));
	assert_int_equal(fprec_decode(b, n1, &got), 0);
	assert_same_fprec(r, &got);
	size_t n2 = fprec_encode(r, true, b);
	assert_true(n2 <= FPREC_MAX_BYTES);
	assert_false(fprec_is_row1(b, n2));
	memset(&got, 0x55, sizeof got);
	assert_int_equal(fprec_decode(b, n2, &got), 0);
	assert_same_fprec(r, &got);
	if (len1)
		*len1 = n1;
	return n2;
}

static void test_fp_row2_roundtrip(void **state)
{
	(void)state;
	struct fprec r = packed_page();
	size_t n1, n2 = fp_roundtrip(&r, &n1);
	assert_int_equal(n1, 44 + 8 + 14 + 24);
	assert_int_equal(n2, 3 + 1 + 3 + 16 + 8 + 2 + 2 + 3 + 14 + 1 + 4 + 2 + 1); /* 30 bytes fewer */
	/* every optional field, and the widest values */
	r.leaf = 0x12345678;
	r.flags |= FPREC_HAS_SKETCH | FPREC_SIMHASH_LOW | FPREC_BAD;
	for (int i = 0; i < FPREC_SKETCH_BYTES; i++)
		r.sketch[i] = (uint8_t)(255 - i);
	r.refcount = UINT64_MAX;
	r.size = UINT64_MAX;
	r.pos.nlines = CBF_MAX_LINES;
	r.pos.k = CBF_MAX_K;
	for (int i = 0; i < CBF_MAX_LINES; i++)
		r.pos.line[i] = UINT32_MAX - (uint32_t)i;
	r.pack = UINT32_MAX;
	r.pack_off = r.pack_len = UINT64_MAX;
	r.pack_dict = UINT32_MAX;
	fp_roundtrip(&r, NULL);
	/* the fewest: a blob file of format 1, binary (no simhash), no filter */
	struct fprec z = { .refcount = 2, .size = 0 };
	fp_roundtrip(&z, NULL);
	/* a record waiting for its signature, with no dictionary */
	r = packed_page();
	r.flags = (uint8_t)((r.flags & ~FPREC_HAS_SIMHASH) | FPREC_SIG_PENDING);
	r.simhash = 0;
	r.pack_dict = 0;
	fp_roundtrip(&r, NULL);
}

/* A layout 2 row that, as it stands, would pass for layout 1 (byte 43
 * zero and a length that bytes 40-42 give): the pad byte keeps it apart. */
static void test_fp_row2_pad(void **state)
{
	(void)state;
	/* tag, flags, present, refcount, size: 5 bytes; xxh128 to byte 20;
	 * nlines and k at 21 and 22; the sketch from 23, so row bytes 40-43
	 * are sketch bytes 17-20: flags 0, nlines 0, k 43 and a zero say 87
	 * bytes, the row's length */
	struct fprec r = { .refcount = 1, .size = 1, .flags = FPREC_HAS_SKETCH };
	r.sketch[17] = 0;
	r.sketch[18] = 0;
	r.sketch[19] = 43;
	r.sketch[20] = 0;
	uint8_t b[FPREC_MAX_BYTES];
	size_t n = fprec_encode(&r, true, b);
	assert_int_equal(n, 88);
	assert_int_equal(b[87], 0);
	assert_true(fprec_is_row1(b, 87)); /* without the pad */
	assert_false(fprec_is_row1(b, 88));
	struct fprec got;
	assert_int_equal(fprec_decode(b, n, &got), 0);
	assert_same_fprec(&r, &got);
	/* a pad where none is needed is refused */
	r.sketch[19] = 42;
	n = fprec_encode(&r, true, b);
	assert_int_equal(n, 87);
	b[n] = 0;
	assert_int_equal(fprec_decode(b, n + 1, &got), -EUCLEAN);
}

static void test_fp_row2_refuses_damage(void **state)
{
	(void)state;
	struct fprec r = packed_page(), got;
	uint8_t b[FPREC_MAX_BYTES + 1], d[FPREC_MAX_BYTES + 1];
	size_t n = fprec_encode(&r, true, b);
	/* every shorter row (none of them reads as layout 1 here) */
	for (size_t len = 0; len < n; len++)
		if (!fprec_is_row1(b, len))
			assert_int_equal(fprec_decode(b, len, &got), -EUCLEAN);
	/* a byte left over */
	memcpy(d, b, n);
	d[n] = 1;
	assert_int_equal(fprec_decode(d, n + 1, &got), -EUCLEAN);
	/* a wrong tag, unknown present bits, a dictionary without a pack */
	memcpy(d, b, n);
	d[0] ^= 1;
	assert_int_equal(fprec_decode(d, n, &got), -EUCLEAN);
	memcpy(d, b, n);
	d[2] |= 0x80;
	assert_int_equal(fprec_decode(d, n, &got), -EUCLEAN);
	memcpy(d, b, n);
	d[1] &= (uint8_t)~FPREC_PACKED;
	assert_int_equal(fprec_decode(d, n, &got), -EUCLEAN);
	/* an overlong refcount (1 written as 0x81 0x00) */
	d[0] = b[0];
	d[1] = b[1];
	d[2] = b[2];
	d[3] = 0x81;
	d[4] = 0x00;
	memcpy(d + 5, b + 4, n - 4);
	assert_int_equal(fprec_decode(d, n + 1, &got), -EUCLEAN);
	/* a simhash of zero said to be present */
	struct fprec s = packed_page();
	n = fprec_encode(&s, true, b);
	memset(b + 3 + 1 + 3 + 16, 0, 8); /* refcount 1 byte, size 3 */
	assert_int_equal(fprec_decode(b, n, &got), -EUCLEAN);
}

/* The inode of a blob of one file in its row (format 7): a varint after
 * the pack's fields, in layout 2 only; an inode of 0 said to be present
 * is refused. */
static void test_fp_row2_ino(void **state)
{
	(void)state;
	struct fprec r = packed_page(), got;
	uint8_t b[FPREC_MAX_BYTES + 1];
	size_t without = fprec_encode(&r, true, b);
	const uint64_t inos[] = { 1, 127, 128, 20005, 1ull << 40, UINT64_MAX };
	for (size_t i = 0; i < sizeof inos / sizeof inos[0]; i++) {
		r.ino = inos[i];
		size_t n = fprec_encode(&r, true, b);
		uint8_t vb[VARINT_MAX_BYTES];
		assert_int_equal(n, without + varint_put(vb, inos[i]));
		assert_true(n <= FPREC_MAX_BYTES);
		memset(&got, 0x55, sizeof got);
		assert_int_equal(fprec_decode(b, n, &got), 0);
		assert_same_fprec(&r, &got);
	}
	/* the bit with an inode of 0 */
	r.ino = 1;
	size_t n = fprec_encode(&r, true, b);
	b[n - 1] = 0;
	assert_int_equal(fprec_decode(b, n, &got), -EUCLEAN);
	/* the bit without its varint */
	assert_int_equal(fprec_decode(b, n - 1, &got), -EUCLEAN);
	/* layout 1 has no room: a row of layout 1 decodes with none */
	n = fprec_encode(&r, false, b);
	assert_int_equal(fprec_decode(b, n, &got), 0);
	assert_int_equal(got.ino, 0);
	/* a row without the field decodes with none */
	r.ino = 0;
	n = fprec_encode(&r, true, b);
	memset(&got, 0x55, sizeof got);
	assert_int_equal(fprec_decode(b, n, &got), 0);
	assert_int_equal(got.ino, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_row2_roundtrip),
		cmocka_unit_test(test_fp_row2_ino),
		cmocka_unit_test(test_row2_falls_back),
		cmocka_unit_test(test_row1_still_decodes),
		cmocka_unit_test(test_row2_refuses_damage),
		cmocka_unit_test(test_row2_name),
		cmocka_unit_test(test_varint),
		cmocka_unit_test(test_fp_row2_roundtrip),
		cmocka_unit_test(test_fp_row2_pad),
		cmocka_unit_test(test_fp_row2_refuses_damage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
