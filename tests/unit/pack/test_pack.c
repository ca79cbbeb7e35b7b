/* test_pack.c - pack files on their own: records written and read back,
 * chunked reads at an offset, dictionaries and deltas, damage found as
 * damage (EIO) and skipped by a scan, roll-over to a new pack, reopen. */
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
#include <xxhash.h>
#include <cmocka.h>

#include "helpers.h"
#include "pack/pack.h"

static void canon(const void *p, size_t n, uint8_t out[16])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
	memcpy(out, c.digest, 16);
}

/* Text-like bytes: words from a small vocabulary, seeded. */
static char *text(uint64_t seed, size_t len)
{
	static const char *w[] = { "archive ", "page ", "the ", "crawler ", "<div class=\"x\">", "</div>\n",
				   "dedup ", "store ", "zstd ", "record " };
	char *b = malloc(len + 16);
	size_t n = 0;
	while (n < len) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		const char *s = w[(seed >> 33) % 10];
		size_t l = strlen(s);
		memcpy(b + n, s, l);
		n += l;
		/* a number now and then: text that compresses as pages do, not to nothing */
		if ((seed >> 20) % 3 == 0 && n + 8 < len)
			n += (size_t)snprintf(b + n, 9, "%u ", (unsigned)(seed >> 40) % 100000);
	}
	return b;
}

struct fixture {
	char *dir;
	int dfd;
	struct pack_set *ps;
};

static void open_set(struct fixture *f, uint64_t max)
{
	assert_int_equal(pack_set_open(f->dfd, false, max, &f->ps), 0);
}

static void setup(struct fixture *f, uint64_t max)
{
	f->dir = th_tmpdir();
	f->dfd = open(f->dir, O_RDONLY | O_DIRECTORY);
	assert_true(f->dfd >= 0);
	open_set(f, max);
}

static void teardown(struct fixture *f)
{
	pack_set_close(f->ps);
	close(f->dfd);
	th_rmdir(f->dir);
}

static void put(struct fixture *f, const void *buf, size_t len, uint32_t variant, const struct pack_encode_opts *o,
		struct pack_loc *loc)
{
	uint8_t md5[16] = { 1, 2, 3 }, x[16];
	canon(buf, len, x);
	struct pack_rec r;
	assert_int_equal(pack_encode_page(md5, variant, x, buf, -1, len, o, &r), 0);
	assert_int_equal(pack_append(f->ps, &r, false, loc), 0);
	pack_rec_free(&r);
}

static void check(struct fixture *f, const void *buf, size_t len, uint32_t variant, const struct pack_loc *loc,
		  const struct pack_deps *deps)
{
	uint8_t md5[16] = { 1, 2, 3 }, x[16];
	canon(buf, len, x);
	char *got = malloc(len + 1);
	assert_int_equal(pack_read_page(f->ps, loc, md5, variant, len, x, deps, got), 0);
	assert_memory_equal(got, buf, len);
	free(got);
}

static void test_roundtrip(void **state)
{
	(void)state;
	struct fixture f;
	setup(&f, 0);
	struct pack_encode_opts o = { .level = 3 };
	size_t sizes[] = { 0, 1, 100, 4096, 70000 };
	struct pack_loc loc[5];
	char *pages[5];
	for (int i = 0; i < 5; i++) {
		pages[i] = text((uint64_t)i, sizes[i]);
		put(&f, pages[i], sizes[i], (uint32_t)i, &o, &loc[i]);
		assert_int_equal(loc[i].off % PACK_ALIGN, 0);
	}
	/* text compresses: the 70,000-byte page takes far fewer bytes */
	assert_true(loc[4].len < 70000 / 3);
	for (int i = 0; i < 5; i++)
		check(&f, pages[i], sizes[i], (uint32_t)i, &loc[i], NULL);
	/* the wrong identity is not this record */
	uint8_t other[16] = { 9 };
	char buf[128];
	assert_int_equal(pack_read_page(f.ps, &loc[2], other, 2, 100, NULL, NULL, buf), -EIO);
	assert_int_equal(pack_read_page(f.ps, &loc[2], (uint8_t[16]){ 1, 2, 3 }, 3, 100, NULL, NULL, buf), -EIO);
	/* reopen: the records are still there, appends continue in the pack */
	pack_set_close(f.ps);
	open_set(&f, 0);
	for (int i = 0; i < 5; i++)
		check(&f, pages[i], sizes[i], (uint32_t)i, &loc[i], NULL);
	struct pack_loc l2;
	put(&f, pages[3], sizes[3], 7, &o, &l2);
	assert_int_equal(l2.pack, loc[0].pack);
	assert_true(l2.off > loc[4].off);
	for (int i = 0; i < 5; i++)
		free(pages[i]);
	teardown(&f);
}

static void test_chunks(void **state)
{
	(void)state;
	struct fixture f;
	setup(&f, 0);
	size_t len = 3 * (1u << 16) + 1234;
	char *p = text(42, len);
	struct pack_encode_opts o = { .level = 3, .chunk_shift = 16 };
	struct pack_loc loc;
	put(&f, p, len, 0, &o, &loc);
	struct pack_rec_hdr h;
	assert_int_equal(pack_read_hdr(f.ps, &loc, &h), 0);
	assert_int_equal(h.nchunks, 4);
	check(&f, p, len, 0, &loc, NULL);
	/* ranges inside a chunk, across chunks, the tail */
	uint64_t offs[] = { 0, 65530, 100000, len - 10 };
	size_t lens[] = { 10, 20, 70000, 10 };
	for (int i = 0; i < 4; i++) {
		char *got = malloc(lens[i]);
		assert_int_equal(pack_read_range(f.ps, &loc, (uint8_t[16]){ 1, 2, 3 }, 0, NULL, offs[i], lens[i], got), 0);
		assert_memory_equal(got, p + offs[i], lens[i]);
		free(got);
	}
	/* damage in chunk 3's bytes: a read of chunk 0 still works, chunk 3 is EIO */
	int fd = openat(f.dfd, "packs/pack-00000001", O_RDWR);
	assert_true(fd >= 0);
	uint8_t junk[8] = { 0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef };
	assert_int_equal(pwrite(fd, junk, 8, (off_t)(loc.off + loc.len - 40)), 8);
	close(fd);
	char got[16];
	assert_int_equal(pack_read_range(f.ps, &loc, (uint8_t[16]){ 1, 2, 3 }, 0, NULL, 0, 16, got), 0);
	assert_memory_equal(got, p, 16);
	assert_int_equal(pack_read_range(f.ps, &loc, (uint8_t[16]){ 1, 2, 3 }, 0, NULL, len - 16, 16, got), -EIO);
	char *all = malloc(len);
	assert_int_equal(pack_read_page(f.ps, &loc, (uint8_t[16]){ 1, 2, 3 }, 0, len, NULL, NULL, all), -EIO);
	free(all);
	free(p);
	teardown(&f);
}

struct deps_ctx {
	const struct pack_dict *dict;
	const char *base;
	size_t base_len;
};

static const struct pack_dict *dep_dict(void *ctx, uint32_t id)
{
	struct deps_ctx *d = ctx;
	return id == pack_dict_id(d->dict) ? d->dict : NULL;
}

static void *dep_base(void *ctx, const uint8_t md5[16], uint32_t variant, uint64_t *len)
{
	struct deps_ctx *d = ctx;
	(void)md5;
	if (variant != 1)
		return NULL;
	void *b = malloc(d->base_len);
	memcpy(b, d->base, d->base_len);
	*len = d->base_len;
	return b;
}

static void test_dict_and_delta(void **state)
{
	(void)state;
	struct fixture f;
	setup(&f, 0);
	char *base = text(7, 20000), *near = malloc(20000);
	memcpy(near, base, 20000);
	memcpy(near + 9000, "a changed sentence, and a date 2026-11-25", 41);
	/* a dictionary trained on pages like these */
	enum { NS = 200, SL = 2000 };
	char *samples = malloc(NS * SL);
	size_t sizes[NS];
	for (int i = 0; i < NS; i++) {
		char *t = text(1000 + (uint64_t)i, SL);
		memcpy(samples + i * SL, t, SL);
		sizes[i] = SL;
		free(t);
	}
	void *dict;
	size_t dlen;
	assert_int_equal(pack_dict_train(samples, sizes, NS, 16384, &dict, &dlen), 0);
	free(samples);
	struct pack_dict *pd = pack_dict_new(5, dict, dlen, 3);
	assert_non_null(pd);
	struct deps_ctx dc = { pd, base, 20000 };
	struct pack_deps deps = { .dict = dep_dict, .base = dep_base, .ctx = &dc };
	struct pack_loc lplain, ldelta, ldict;
	struct pack_encode_opts plain = { .level = 3 };
	put(&f, near, 20000, 2, &plain, &lplain);
	struct pack_encode_opts delta = { .level = 3, .base = base, .base_len = 20000, .base_variant = 1 };
	put(&f, near, 20000, 2, &delta, &ldelta);
	/* a delta against a near copy is a small fraction of the page alone */
	assert_true(ldelta.len * 4 < lplain.len);
	check(&f, near, 20000, 2, &ldelta, &deps);
	struct pack_encode_opts withdict = { .level = 3, .dict = pd };
	put(&f, near, 20000, 2, &withdict, &ldict);
	/* a trained dictionary saves bytes on a page of its kind */
	assert_true(ldict.len < lplain.len);
	check(&f, near, 20000, 2, &ldict, &deps);
	struct pack_rec_hdr h;
	assert_int_equal(pack_read_hdr(f.ps, &ldict, &h), 0);
	assert_int_equal(h.encoding, PACK_ENC_ZSTD_DICT);
	assert_int_equal(h.dict, 5);
	/* without its dependency the record cannot be decoded: EIO, not other bytes */
	char *got = malloc(20000);
	assert_int_equal(pack_read_page(f.ps, &ldelta, (uint8_t[16]){ 1, 2, 3 }, 2, 20000, NULL, NULL, got), -EIO);
	free(got);
	/* a dictionary record */
	struct pack_rec dr;
	struct pack_loc dl;
	assert_int_equal(pack_encode_dict(5, dict, dlen, &dr), 0);
	assert_int_equal(pack_append(f.ps, &dr, true, &dl), 0);
	pack_rec_free(&dr);
	void *d2;
	size_t d2len;
	assert_int_equal(pack_read_dict(f.ps, &dl, 5, &d2, &d2len), 0);
	assert_int_equal(d2len, dlen);
	assert_memory_equal(d2, dict, dlen);
	free(d2);
	pack_dict_free(pd);
	free(base);
	free(near);
	free(dict);
	teardown(&f);
}

/* A base that begins with zstd's dictionary magic: the delta on it still
 * decodes (a decoder handed the bytes as a dictionary would read them as
 * one and fail), as does one on a base of a few bytes. */
static void test_delta_on_magic_base(void **state)
{
	(void)state;
	struct fixture f;
	setup(&f, 0);
	static const uint8_t magic[4] = { 0x37, 0xA4, 0x30, 0xEC }; /* ZSTD_MAGIC_DICTIONARY, little-endian */
	char *base = text(9, 20000), *near = malloc(20000);
	memcpy(base, magic, sizeof magic);
	memcpy(near, base, 20000);
	memcpy(near + 12000, "one more sentence, and a counter 41", 35);
	struct deps_ctx dc = { NULL, base, 20000 };
	struct pack_deps deps = { .base = dep_base, .ctx = &dc };
	struct pack_encode_opts delta = { .level = 3, .base = base, .base_len = 20000, .base_variant = 1 };
	struct pack_loc loc, plain_loc;
	put(&f, near, 20000, 2, &delta, &loc);
	struct pack_encode_opts plain = { .level = 3 };
	put(&f, near, 20000, 2, &plain, &plain_loc);
	assert_true(loc.len * 4 < plain_loc.len); /* a delta indeed */
	check(&f, near, 20000, 2, &loc, &deps);
	/* a base of 6 bytes, the magic among them */
	char tiny[6] = { 0x37, (char)0xA4, 0x30, (char)0xEC, 'a', 'b' }, page[64];
	memset(page, 'x', sizeof page);
	memcpy(page, tiny, sizeof tiny);
	struct deps_ctx tc = { NULL, tiny, sizeof tiny };
	struct pack_deps tdeps = { .base = dep_base, .ctx = &tc };
	struct pack_encode_opts tdelta = { .level = 3, .base = tiny, .base_len = sizeof tiny, .base_variant = 1 };
	put(&f, page, sizeof page, 2, &tdelta, &loc);
	check(&f, page, sizeof page, 2, &loc, &tdeps);
	free(base);
	free(near);
	teardown(&f);
}

struct scan_ctx {
	unsigned pages, dicts;
	uint32_t variants;
};

static int scan_fn(void *ctx, const struct pack_rec_hdr *h, const struct pack_loc *loc)
{
	struct scan_ctx *s = ctx;
	(void)loc;
	if (h->kind == PACK_KIND_PAGE) {
		s->pages++;
		s->variants |= h->variant < 32 ? 1u << h->variant : 0;
	} else {
		s->dicts++;
	}
	return 0;
}

static void test_scan_damage_and_rollover(void **state)
{
	(void)state;
	struct fixture f;
	setup(&f, 64 << 10); /* small packs: roll over often */
	struct pack_encode_opts o = { .level = 0 }; /* raw: 10 KiB a record */
	struct pack_loc loc[16];
	char *pages[16];
	for (int i = 0; i < 16; i++) {
		pages[i] = text((uint64_t)i + 100, 10000);
		put(&f, pages[i], 10000, (uint32_t)i, &o, &loc[i]);
	}
	assert_true(loc[15].pack >= 3);
	uint32_t *ids;
	size_t n;
	assert_int_equal(pack_list(f.ps, &ids, &n), 0);
	assert_int_equal(n, loc[15].pack);
	free(ids);
	/* damage the header of record 1 and the payload of record 2 */
	int fd = openat(f.dfd, "packs/pack-00000001", O_RDWR);
	assert_true(fd >= 0);
	uint8_t junk[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	assert_int_equal(pwrite(fd, junk, 8, (off_t)loc[1].off + 8), 8);
	assert_int_equal(pwrite(fd, junk, 8, (off_t)loc[2].off + 500), 8);
	close(fd);
	char *got = malloc(10000);
	for (int i = 0; i < 4; i++) {
		int want = (i == 1 || i == 2) ? -EIO : 0;
		assert_int_equal(pack_read_page(f.ps, &loc[i], (uint8_t[16]){ 1, 2, 3 }, (uint32_t)i, 10000, NULL, NULL, got),
				 want);
	}
	free(got);
	/* the scan skips record 1 (its header is gone) and still finds the rest */
	struct scan_ctx s = { 0 };
	uint64_t damaged;
	assert_int_equal(pack_scan(f.ps, 1, scan_fn, &s, &damaged), 0);
	assert_true(damaged > 0);
	assert_int_equal(s.variants & 2u, 0);
	assert_true(s.variants & 1u);
	assert_true(s.variants & 4u);
	for (int i = 0; i < 16; i++)
		free(pages[i]);
	teardown(&f);
}


/* Record headers of layout 2 (pack.h) take only the fields a record has:
 * every combination of optional fields comes back as it was written, and
 * a whole page's header is under half of layout 1's 96 bytes. */
static void test_lean_headers(void **state)
{
	(void)state;
	struct fixture f;
	setup(&f, 0);
	char *base = text(3, 6000), *page = malloc(6000);
	memcpy(page, base, 6000);
	memcpy(page + 3000, "one changed sentence", 20);
	size_t big = 3 * (1u << 16) + 77;
	char *large = text(4, big);
	struct pack_dict *pd;
	{
		enum { NS = 100, SL = 2000 };
		char *samples = malloc(NS * SL);
		size_t sizes[NS];
		for (int i = 0; i < NS; i++) {
			char *t = text(500 + (uint64_t)i, SL);
			memcpy(samples + i * SL, t, SL);
			sizes[i] = SL;
			free(t);
		}
		void *dict;
		size_t dlen;
		assert_int_equal(pack_dict_train(samples, sizes, NS, 8192, &dict, &dlen), 0);
		pd = pack_dict_new(300, dict, dlen, 3); /* an id of two varint bytes */
		assert_non_null(pd);
		free(samples);
		free(dict);
	}
	struct deps_ctx dc = { pd, base, 6000 };
	struct pack_deps deps = { .dict = dep_dict, .base = dep_base, .ctx = &dc };
	struct {
		const char *buf;
		size_t len;
		uint32_t variant;
		struct pack_encode_opts o;
		uint8_t enc;
		unsigned max_hdr;
	} c[] = {
		{ page, 6000, 0, { .level = 3 }, PACK_ENC_ZSTD, 50 },
		{ page, 6000, 70000, { .level = 3 }, PACK_ENC_ZSTD, 53 },
		{ page, 6000, 0, { .level = 3, .dict = pd }, PACK_ENC_ZSTD_DICT, 52 },
		{ page, 6000, 2, { .level = 3, .base = base, .base_len = 6000, .base_variant = 1 }, PACK_ENC_DELTA, 67 },
		{ large, big, 0, { .level = 3, .chunk_shift = 16, .dict = pd }, PACK_ENC_ZSTD_DICT, 56 },
		{ page, 10, 5, { .level = 0 }, PACK_ENC_RAW, 48 },
	};
	struct pack_loc loc[6];
	for (int i = 0; i < 6; i++) {
		uint8_t md5[16] = { 1, 2, 3 }, x[16];
		canon(c[i].buf, c[i].len, x);
		struct pack_rec r;
		assert_int_equal(pack_encode_page(md5, c[i].variant, x, c[i].buf, -1, c[i].len, &c[i].o, &r), 0);
		assert_int_equal(r.hdr.layout, 2);
		assert_true(r.hdr.hdr_len <= c[i].max_hdr);
		assert_int_equal(pack_append(f.ps, &r, false, &loc[i]), 0);
		pack_rec_free(&r);
		struct pack_rec_hdr h;
		assert_int_equal(pack_read_hdr(f.ps, &loc[i], &h), 0);
		assert_int_equal(h.layout, 2);
		assert_true(h.hdr_len <= c[i].max_hdr);
		assert_int_equal(h.hdr_len + h.payload, loc[i].len);
		assert_int_equal(h.kind, PACK_KIND_PAGE);
		assert_int_equal(h.encoding, c[i].enc);
		assert_int_equal(h.variant, c[i].variant);
		assert_int_equal(h.size, c[i].len);
		assert_memory_equal(h.md5, md5, 16);
		assert_memory_equal(h.xxh128, x, 16);
		assert_int_equal(h.dict, c[i].o.dict ? 300 : 0);
		assert_int_equal(h.base_variant, c[i].o.base ? 1 : 0);
		assert_int_equal(h.nchunks, c[i].len > (1u << 16) ? 4 : 1);
		char *got = malloc(c[i].len + 1);
		assert_int_equal(pack_read_page(f.ps, &loc[i], md5, c[i].variant, c[i].len, x, &deps, got), 0);
		assert_memory_equal(got, c[i].buf, c[i].len);
		free(got);
	}
	/* a dictionary record is lean too */
	size_t dlen;
	const void *db = pack_dict_bytes(pd, &dlen);
	struct pack_rec dr;
	assert_int_equal(pack_encode_dict(300, db, dlen, &dr), 0);
	assert_true(dr.hdr.hdr_len <= 50);
	struct pack_loc dl;
	assert_int_equal(pack_append(f.ps, &dr, false, &dl), 0);
	pack_rec_free(&dr);
	void *back;
	size_t blen;
	assert_int_equal(pack_read_dict(f.ps, &dl, 300, &back, &blen), 0);
	assert_int_equal(blen, dlen);
	assert_memory_equal(back, db, dlen);
	free(back);
	/* a scan finds every record at its place and length */
	struct scan_ctx s = { 0 };
	uint64_t damaged;
	assert_int_equal(pack_scan(f.ps, 1, scan_fn, &s, &damaged), 0);
	assert_int_equal(damaged, 0);
	assert_int_equal(s.pages, 6);
	assert_int_equal(s.dicts, 1);
	/* any byte of a lean header changed: the record is damaged (EIO) */
	int fd = openat(f.dfd, "packs/pack-00000001", O_RDWR);
	assert_true(fd >= 0);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, (off_t)loc[3].off + 6), 1); /* the flags */
	b ^= PACK_RF_VARIANT;
	assert_int_equal(pwrite(fd, &b, 1, (off_t)loc[3].off + 6), 1);
	close(fd);
	struct pack_rec_hdr h;
	assert_int_equal(pack_read_hdr(f.ps, &loc[3], &h), -EIO);
	pack_dict_free(pd);
	free(base);
	free(page);
	free(large);
	teardown(&f);
}

/* A pack of version 1 holding layout 1 records (what stores made before
 * layout 2 have) reads and scans as before; appends go to a new pack of
 * version 2, never into it; a layout 1 record given layout 2 (as the
 * compactor does) is the same record with a shorter header. */
static void test_version1_pack(void **state)
{
	(void)state;
	struct fixture f;
	setup(&f, 0);
	struct pack_encode_opts o = { .level = 3 };
	char *pages[3];
	size_t sizes[3] = { 100, 5000, 70000 };
	struct pack_loc loc[3];
	uint8_t md5[16] = { 1, 2, 3 };
	for (int i = 0; i < 3; i++) {
		uint8_t x[16];
		pages[i] = text(50 + (uint64_t)i, sizes[i]);
		canon(pages[i], sizes[i], x);
		struct pack_rec r;
		assert_int_equal(pack_encode_page(md5, (uint32_t)i, x, pages[i], -1, sizes[i], &o, &r), 0);
		assert_int_equal(pack_rec_set_layout(&r, 1), 0);
		assert_int_equal(r.hdr.hdr_len, PACK_REC_HDR);
		assert_int_equal(pack_append(f.ps, &r, false, &loc[i]), 0);
		pack_rec_free(&r);
	}
	pack_set_close(f.ps);
	/* the pack as version 1 wrote it: version 1 in its header */
	int fd = openat(f.dfd, "packs/pack-00000001", O_RDWR);
	assert_true(fd >= 0);
	uint8_t ph[PACK_HDR_BYTES];
	assert_int_equal(pread(fd, ph, sizeof ph, 0), sizeof ph);
	assert_int_equal(ph[8], PACK_VERSION);
	ph[8] = 1;
	uint64_t sum = XXH3_64bits(ph, 56);
	for (int i = 0; i < 8; i++)
		ph[56 + i] = (uint8_t)(sum >> (8 * i));
	assert_int_equal(pwrite(fd, ph, sizeof ph, 0), sizeof ph);
	close(fd);
	open_set(&f, 0);
	for (int i = 0; i < 3; i++) {
		struct pack_rec_hdr h;
		assert_int_equal(pack_read_hdr(f.ps, &loc[i], &h), 0);
		assert_int_equal(h.layout, 1);
		check(&f, pages[i], sizes[i], (uint32_t)i, &loc[i], NULL);
	}
	struct scan_ctx s = { 0 };
	uint64_t damaged;
	assert_int_equal(pack_scan(f.ps, 1, scan_fn, &s, &damaged), 0);
	assert_int_equal(damaged, 0);
	assert_int_equal(s.pages, 3);
	/* a new record goes to pack 2, of this version, in layout 2 */
	struct pack_loc l2;
	put(&f, pages[1], sizes[1], 9, &o, &l2);
	assert_int_equal(l2.pack, 2);
	fd = openat(f.dfd, "packs/pack-00000002", O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, ph, sizeof ph, 0), sizeof ph);
	close(fd);
	assert_int_equal(ph[8], PACK_VERSION);
	/* a layout 1 record copied with layout 2: same bytes, shorter */
	struct pack_rec r;
	assert_int_equal(pack_read_rec(f.ps, &loc[2], &r), 0);
	assert_int_equal(r.hdr.layout, 1);
	assert_int_equal(pack_rec_set_layout(&r, 2), 0);
	assert_true(r.len + 40 <= loc[2].len);
	assert_int_equal(pack_rec_check(&r, NULL), 0);
	struct pack_loc l3;
	assert_int_equal(pack_append(f.ps, &r, false, &l3), 0);
	assert_int_equal(l3.len, r.len);
	pack_rec_free(&r);
	check(&f, pages[2], sizes[2], 2, &l3, NULL);
	for (int i = 0; i < 3; i++)
		free(pages[i]);
	teardown(&f);
}

/* ---- chunked deltas (pack.h): a page over a chunk against a base ----------- */

/* The base as a chunked record in the pack, read by range as the store
 * reads it (blob_pack.c), each window asked for noted. */
struct range_ctx {
	struct fixture *f;
	struct pack_loc loc;
	const char *base; /* its bytes, for the whole-base path */
	size_t base_len;
	uint64_t asked_off[64];
	size_t asked_len[64];
	unsigned asked;
};

static void *range_whole(void *ctx, const uint8_t md5[16], uint32_t variant, uint64_t *len)
{
	struct range_ctx *c = ctx;
	(void)md5;
	(void)variant;
	void *b = malloc(c->base_len);
	memcpy(b, c->base, c->base_len);
	*len = c->base_len;
	return b;
}

static int range_base(void *ctx, const uint8_t md5[16], uint32_t variant, uint64_t off, size_t len, void *out,
		      size_t *got, uint64_t *size)
{
	struct range_ctx *c = ctx;
	(void)md5;
	if (variant != 1)
		return -EIO;
	if (c->asked < 64) {
		c->asked_off[c->asked] = off;
		c->asked_len[c->asked] = len;
	}
	c->asked++;
	*size = c->base_len;
	*got = off >= c->base_len ? 0 : (c->base_len - off < len ? c->base_len - off : len);
	return *got ? pack_read_range(c->f->ps, &c->loc, (uint8_t[16]){ 1, 2, 3 }, 1, NULL, off, *got, out) : 0;
}

/* Page (len bytes) as a chunked delta on the range context's base: its
 * place; it reads back whole and at every chunk edge, and each chunk's
 * window is the one pack.h defines. */
static void chunked_delta_case(struct fixture *f, struct range_ctx *rc, const char *page, size_t len,
			       struct pack_loc *loc)
{
	const uint64_t cs = 1u << PACK_DEFAULT_CHUNK_SHIFT, m = PACK_DELTA_MARGIN;
	struct pack_encode_opts o = { .level = 3, .base = rc->base, .base_len = rc->base_len, .base_variant = 1 };
	put(f, page, len, 2, &o, loc);
	struct pack_rec_hdr h;
	assert_int_equal(pack_read_hdr(f->ps, loc, &h), 0);
	assert_int_equal(h.encoding, PACK_ENC_DELTA);
	assert_int_equal(h.nchunks, (len + cs - 1) / cs);
	struct pack_deps whole = { .base = range_whole, .ctx = rc };
	check(f, page, len, 2, loc, &whole); /* the whole base, cut into windows */
	struct pack_deps ranged = { .base = range_whole, .base_range = range_base, .ctx = rc };
	char *got = malloc(cs);
	for (uint32_t i = 0; i < h.nchunks; i++) {
		uint64_t lo = i * cs, hi = lo + cs < len ? lo + cs : len;
		rc->asked = 0;
		assert_int_equal(pack_read_range(f->ps, loc, (uint8_t[16]){ 1, 2, 3 }, 2, &ranged, lo, (size_t)(hi - lo), got),
				 0);
		assert_memory_equal(got, page + lo, hi - lo);
		/* one window, [lo - margin, hi + margin) clipped at 0 (the base's end: range_base) */
		assert_int_equal(rc->asked, 1);
		assert_int_equal(rc->asked_off[0], lo > m ? lo - m : 0);
		assert_int_equal(rc->asked_len[0], hi + m - (lo > m ? lo - m : 0));
		/* 16 bytes across the edge to the next chunk: the base's bytes
		 * for both chunks are read at once */
		if (hi < len) {
			rc->asked = 0;
			assert_int_equal(pack_read_range(f->ps, loc, (uint8_t[16]){ 1, 2, 3 }, 2, &ranged, hi - 8, 16, got), 0);
			assert_memory_equal(got, page + hi - 8, 16);
			assert_int_equal(rc->asked, 1);
			assert_int_equal(rc->asked_off[0], lo > m ? lo - m : 0);
		}
	}
	free(got);
}

static void test_chunked_delta(void **state)
{
	(void)state;
	struct fixture f;
	setup(&f, 0);
	const size_t cs = 1u << PACK_DEFAULT_CHUNK_SHIFT, blen = 5 * cs - 1000;
	char *base = text(21, blen);
	struct pack_encode_opts plain = { .level = 3 };
	struct range_ctx rc = { .f = &f, .base = base, .base_len = blen };
	put(&f, base, blen, 1, &plain, &rc.loc);
	struct pack_loc lplain, loc;

	/* a shift by an insertion: 3,000 bytes early in the page move the rest */
	size_t len = blen + 3000;
	char *page = malloc(len);
	memcpy(page, base, 100000);
	char *ins = text(99, 3000);
	memcpy(page + 100000, ins, 3000);
	memcpy(page + 103000, base + 100000, blen - 100000);
	put(&f, page, len, 2, &plain, &lplain);
	chunked_delta_case(&f, &rc, page, len, &loc);
	assert_true(loc.len * 20 < lplain.len); /* the shifted chunks found their bytes in the windows */

	/* a base shorter than the page: the chunks past its end have no window */
	struct range_ctx shortb = rc;
	shortb.base_len = cs + 5000;
	struct pack_loc sl;
	put(&f, base, shortb.base_len, 1, &plain, &shortb.loc);
	chunked_delta_case(&f, &shortb, page, len, &sl);
	/* a base longer than the page */
	struct pack_loc ll;
	size_t plen = 2 * cs + 777;
	chunked_delta_case(&f, &rc, page, plen, &ll);

	/* a damaged chunk of the base: EIO for the delta's chunks whose window
	 * reaches into it only (base chunk 0: the delta's chunks 0 and 1, whose
	 * window starts margin bytes before its own place) */
	struct pack_rec_hdr bh;
	assert_int_equal(pack_read_hdr(f.ps, &rc.loc, &bh), 0);
	char name[PACK_NAME_MAX];
	pack_name(rc.loc.pack, name);
	int pfd = openat(f.dfd, "packs", O_RDONLY | O_DIRECTORY);
	assert_true(pfd >= 0);
	int fd = openat(pfd, name, O_RDWR);
	assert_true(fd >= 0);
	uint64_t at = rc.loc.off + bh.hdr_len + (uint64_t)bh.nchunks * PACK_CHUNK_ENT + 100;
	assert_int_equal(pwrite(fd, "XXXXXXXX", 8, (off_t)at), 8);
	close(fd);
	close(pfd);
	struct pack_deps ranged = { .base = range_whole, .base_range = range_base, .ctx = &rc };
	char *got = malloc(cs);
	for (uint32_t i = 0; i * cs < len; i++) {
		size_t n = (size_t)(len - i * cs < cs ? len - i * cs : cs);
		int want = i <= 1 ? -EIO : 0;
		assert_int_equal(pack_read_range(f.ps, &loc, (uint8_t[16]){ 1, 2, 3 }, 2, &ranged, i * cs, n, got), want);
		if (!want)
			assert_memory_equal(got, page + i * cs, n);
	}
	/* a damaged margin in the delta's chunk table (chunk 3's: past a
	 * chunk) is damage, EIO, not a huge window read; chunk 4 still reads */
	struct pack_rec_hdr dh;
	assert_int_equal(pack_read_hdr(f.ps, &loc, &dh), 0);
	pack_name(loc.pack, name);
	pfd = openat(f.dfd, "packs", O_RDONLY | O_DIRECTORY);
	fd = openat(pfd, name, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "\xff\xff\xff\xff", 4, (off_t)(loc.off + dh.hdr_len + 3 * PACK_CHUNK_ENT + 4)), 4);
	close(fd);
	close(pfd);
	assert_int_equal(pack_read_range(f.ps, &loc, (uint8_t[16]){ 1, 2, 3 }, 2, &ranged, 3 * cs, 100, got), -EIO);
	assert_int_equal(pack_read_range(f.ps, &loc, (uint8_t[16]){ 1, 2, 3 }, 2, &ranged, 4 * cs, 100, got), 0);
	assert_memory_equal(got, page + 4 * cs, 100);
	free(got);
	free(ins);
	free(page);
	free(base);
	teardown(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_chunks),
		cmocka_unit_test(test_dict_and_delta),
		cmocka_unit_test(test_delta_on_magic_base),
		cmocka_unit_test(test_chunked_delta),
		cmocka_unit_test(test_lean_headers),
		cmocka_unit_test(test_version1_pack),
		cmocka_unit_test(test_scan_damage_and_rollover),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
