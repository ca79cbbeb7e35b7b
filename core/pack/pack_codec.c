/* pack_codec.c - building and decoding records (the format is in pack.h).
 *
 * Compression and decompression contexts are kept per thread (a zstd
 * context at level 3 is a few hundred KiB to set up; a page is a few
 * KiB to compress), freed when the thread ends.
 */
#include "pack.h"
#include "pack_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <zdict.h>
#include <zstd.h>

#include "base/byteorder.h"
#include "base/fdio.h"

/* ---- per-thread contexts --------------------------------------------- */

struct zctx {
	ZSTD_CCtx *c;
	ZSTD_DCtx *d;
};

static pthread_key_t zkey;
static pthread_once_t zonce = PTHREAD_ONCE_INIT;

static void zctx_free(void *p)
{
	struct zctx *z = p;
	ZSTD_freeCCtx(z->c);
	ZSTD_freeDCtx(z->d);
	free(z);
}

static void zkey_make(void)
{
	pthread_key_create(&zkey, zctx_free);
}

static struct zctx *zctx_get(void)
{
	pthread_once(&zonce, zkey_make);
	struct zctx *z = pthread_getspecific(zkey);
	if (z)
		return z;
	z = calloc(1, sizeof *z);
	if (!z)
		return NULL;
	z->c = ZSTD_createCCtx();
	z->d = ZSTD_createDCtx();
	if (!z->c || !z->d || pthread_setspecific(zkey, z)) {
		zctx_free(z);
		return NULL;
	}
	return z;
}

/* ---- dictionaries ------------------------------------------------------ */

/* A CDict carries its compression level, which takes priority over the
 * context's (zstd: a referenced CDict's level wins), so a dictionary keeps
 * one CDict per level it is used at: the one it was made for at once, the
 * others made on their first use. */
#define PACK_DICT_LEVELS 23 /* zstd levels 1..22 */

struct pack_dict {
	uint32_t id;
	void *bytes;
	size_t len;
	int level;               /* the level of c */
	ZSTD_CDict *c;
	ZSTD_DDict *d;
	pthread_mutex_t mu;      /* the other levels' CDicts */
	ZSTD_CDict *at[PACK_DICT_LEVELS];
};

struct pack_dict *pack_dict_new(uint32_t id, const void *bytes, size_t len, int level)
{
	struct pack_dict *d = calloc(1, sizeof *d);
	if (!d || !(d->bytes = malloc(len ? len : 1))) {
		free(d);
		return NULL;
	}
	memcpy(d->bytes, bytes, len);
	d->id = id;
	d->len = len;
	d->level = level > 0 ? level : PACK_DEFAULT_LEVEL;
	pthread_mutex_init(&d->mu, NULL);
	d->c = ZSTD_createCDict(d->bytes, len, d->level);
	d->d = ZSTD_createDDict(d->bytes, len);
	if (!d->c || !d->d) {
		pack_dict_free(d);
		return NULL;
	}
	return d;
}

void pack_dict_free(struct pack_dict *d)
{
	if (!d)
		return;
	ZSTD_freeCDict(d->c);
	for (int i = 0; i < PACK_DICT_LEVELS; i++)
		ZSTD_freeCDict(d->at[i]);
	ZSTD_freeDDict(d->d);
	pthread_mutex_destroy(&d->mu);
	free(d->bytes);
	free(d);
}

/* Dictionary d's CDict for level (NULL: out of memory). The cache is
 * internal state: a dictionary is shared read-only otherwise. */
static const ZSTD_CDict *cdict_at(const struct pack_dict *cd, int level)
{
	if (level == cd->level || level <= 0 || level >= PACK_DICT_LEVELS)
		return cd->c;
	struct pack_dict *d = (struct pack_dict *)cd;
	pthread_mutex_lock(&d->mu);
	if (!d->at[level])
		d->at[level] = ZSTD_createCDict(d->bytes, d->len, level);
	const ZSTD_CDict *c = d->at[level];
	pthread_mutex_unlock(&d->mu);
	return c;
}

uint32_t pack_dict_id(const struct pack_dict *d)
{
	return d->id;
}

const void *pack_dict_bytes(const struct pack_dict *d, size_t *len)
{
	*len = d->len;
	return d->bytes;
}

int pack_dict_train(const void *samples, const size_t *sizes, unsigned n, size_t cap, void **out, size_t *len)
{
	void *b = malloc(cap);
	if (!b)
		return -ENOMEM;
	size_t r = ZDICT_trainFromBuffer(b, cap, samples, sizes, n);
	if (ZDICT_isError(r)) {
		free(b);
		return -EINVAL;
	}
	*out = b;
	*len = r;
	return 0;
}

/* ---- headers ---------------------------------------------------------- */

void pack_hdr_encode(const struct pack_rec_hdr *h, uint8_t out[PACK_REC_HDR])
{
	memset(out, 0, PACK_REC_HDR);
	put_le32(out, PACK_REC_MAGIC);
	out[4] = h->kind;
	out[5] = h->encoding;
	out[6] = h->chunk_shift;
	memcpy(out + 8, h->md5, 16);
	put_le32(out + 24, h->variant);
	put_le32(out + 28, h->nchunks);
	memcpy(out + 32, h->xxh128, 16);
	put_le64(out + 48, h->size);
	put_le64(out + 56, h->payload);
	put_le32(out + 64, h->dict);
	memcpy(out + 68, h->base_md5, 16);
	put_le32(out + 84, h->base_variant);
	put_le64(out + 88, XXH3_64bits(out, 88));
}

int pack_hdr_decode(const uint8_t in[PACK_REC_HDR], struct pack_rec_hdr *h)
{
	if (get_le32(in) != PACK_REC_MAGIC || get_le64(in + 88) != XXH3_64bits(in, 88))
		return -EIO;
	h->kind = in[4];
	h->encoding = in[5];
	h->chunk_shift = in[6];
	memcpy(h->md5, in + 8, 16);
	h->variant = get_le32(in + 24);
	h->nchunks = get_le32(in + 28);
	memcpy(h->xxh128, in + 32, 16);
	h->size = get_le64(in + 48);
	h->payload = get_le64(in + 56);
	h->dict = get_le32(in + 64);
	memcpy(h->base_md5, in + 68, 16);
	h->base_variant = get_le32(in + 84);
	if ((h->kind != PACK_KIND_PAGE && h->kind != PACK_KIND_DICT) || h->encoding > PACK_ENC_DELTA_DICT ||
	    h->nchunks == 0 || (h->nchunks > 1 && (h->chunk_shift < 12 || h->chunk_shift > 30)))
		return -EIO;
	/* the chunk count must be the one the size and shift imply */
	uint64_t want = h->nchunks > 1 ? (h->size + (1ull << h->chunk_shift) - 1) >> h->chunk_shift : 1;
	if (want != h->nchunks)
		return -EIO;
	return 0;
}

void pack_rec_free(struct pack_rec *r)
{
	free(r->buf);
	r->buf = NULL;
	r->len = 0;
}

void pack_rec_set_id(struct pack_rec *r, const uint8_t md5[16], uint32_t variant)
{
	memcpy(r->hdr.md5, md5, 16);
	r->hdr.variant = variant;
	pack_hdr_encode(&r->hdr, r->buf);
}

static void xxh128_canon(const void *p, size_t n, uint8_t out[16])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
	memcpy(out, c.digest, 16);
}

/* ---- encoding --------------------------------------------------------- */

/* Set up z->c for one frame with the options' level and reference. */
static int cctx_setup(ZSTD_CCtx *c, const struct pack_encode_opts *o)
{
	ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, o->level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1)))
		return -EINVAL;
	if (o->base) {
		if (ZSTD_isError(ZSTD_CCtx_refPrefix(c, o->base, o->base_len)))
			return -ENOMEM;
	} else if (o->dict) {
		const ZSTD_CDict *cd = cdict_at(o->dict, o->level);
		if (!cd || ZSTD_isError(ZSTD_CCtx_refCDict(c, cd)))
			return -ENOMEM;
	}
	return 0;
}

/* Compress src into dst (capacity cap): the frame's length, or len itself
 * when the frame would not be smaller (the chunk is then stored raw). */
static int64_t compress_chunk(ZSTD_CCtx *c, const struct pack_encode_opts *o, const void *src, size_t len,
			      uint8_t *dst, size_t cap)
{
	if (o->level > 0 && len > 0) {
		int rc = cctx_setup(c, o);
		if (rc)
			return rc;
		size_t n = ZSTD_compress2(c, dst, cap, src, len);
		if (!ZSTD_isError(n) && n < len)
			return (int64_t)n;
	}
	memcpy(dst, src, len);
	return (int64_t)len;
}

int pack_encode_page(const uint8_t md5[16], uint32_t variant, const uint8_t xxh128[16], const void *buf,
		     int fd, uint64_t size, const struct pack_encode_opts *o, struct pack_rec *out)
{
	memset(out, 0, sizeof *out);
	struct zctx *z = zctx_get();
	if (!z)
		return -ENOMEM;
	unsigned shift = o->chunk_shift ? o->chunk_shift : PACK_DEFAULT_CHUNK_SHIFT;
	uint64_t csize = 1ull << shift;
	/* deltas are one frame: the base is one prefix */
	bool chunked = size > csize && !o->base;
	uint32_t nchunks = chunked ? (uint32_t)((size + csize - 1) >> shift) : 1;
	size_t table = chunked ? (size_t)nchunks * PACK_CHUNK_ENT : 0;
	size_t one = chunked ? csize : (size_t)size;
	size_t bound = ZSTD_compressBound(one) > one ? ZSTD_compressBound(one) : one;
	size_t cap = PACK_REC_HDR + table + (chunked ? (size_t)nchunks * bound : bound);
	uint8_t *rec = malloc(cap), *raw = buf ? NULL : malloc(one ? one : 1);
	if (!rec || (!buf && !raw)) {
		free(rec);
		free(raw);
		return -ENOMEM;
	}
	size_t pos = PACK_REC_HDR + table;
	int rc = 0;
	bool any_packed = false;
	for (uint32_t i = 0; i < nchunks && !rc; i++) {
		uint64_t from = (uint64_t)i * csize;
		size_t len = (size_t)(size - from < one ? size - from : one);
		const uint8_t *src = buf ? (const uint8_t *)buf + from : raw;
		if (!buf) {
			ssize_t n = fd_pread_full(fd, raw, len, from);
			if (n < 0 || (size_t)n != len) {
				rc = n < 0 ? (int)n : -EIO;
				break;
			}
		}
		int64_t n = compress_chunk(z->c, o, src, len, rec + pos, cap - pos);
		if (n < 0) {
			rc = (int)n;
			break;
		}
		any_packed |= (size_t)n < len;
		if (chunked) {
			uint8_t *e = rec + PACK_REC_HDR + (size_t)i * PACK_CHUNK_ENT;
			put_le32(e, (uint32_t)n);
			put_le32(e + 4, 0);
			xxh128_canon(src, len, e + 8);
		}
		pos += (size_t)n;
	}
	free(raw);
	if (rc) {
		free(rec);
		return rc;
	}
	struct pack_rec_hdr *h = &out->hdr;
	h->kind = PACK_KIND_PAGE;
	h->chunk_shift = chunked ? (uint8_t)shift : 0;
	h->nchunks = nchunks;
	memcpy(h->xxh128, xxh128, 16);
	h->size = size;
	h->payload = pos - PACK_REC_HDR;
	if (!any_packed && !chunked) {
		h->encoding = PACK_ENC_RAW; /* nothing gained: no dependency either */
	} else if (o->base) {
		h->encoding = PACK_ENC_DELTA;
		memcpy(h->base_md5, o->base_md5, 16);
		h->base_variant = o->base_variant;
	} else {
		h->encoding = o->level <= 0 ? PACK_ENC_RAW : o->dict ? PACK_ENC_ZSTD_DICT : PACK_ENC_ZSTD;
	}
	if (h->encoding == PACK_ENC_ZSTD_DICT)
		h->dict = o->dict->id;
	out->buf = rec;
	out->len = pos;
	pack_rec_set_id(out, md5, variant);
	return 0;
}

int pack_encode_dict(uint32_t id, const void *dict, size_t len, struct pack_rec *out)
{
	memset(out, 0, sizeof *out);
	out->buf = malloc(PACK_REC_HDR + len);
	if (!out->buf)
		return -ENOMEM;
	memcpy(out->buf + PACK_REC_HDR, dict, len);
	struct pack_rec_hdr *h = &out->hdr;
	h->kind = PACK_KIND_DICT;
	h->encoding = PACK_ENC_RAW;
	h->nchunks = 1;
	h->size = h->payload = len;
	xxh128_canon(dict, len, h->xxh128);
	uint8_t md5_of_id[16] = { 0 };
	put_le32(md5_of_id, id);
	out->len = PACK_REC_HDR + len;
	pack_rec_set_id(out, md5_of_id, id);
	return 0;
}

/* ---- decoding --------------------------------------------------------- */

struct dec_refs {
	const struct pack_dict *dict;
	void *base;
	uint64_t base_len;
};

static int refs_get(const struct pack_rec_hdr *h, const struct pack_deps *deps, struct dec_refs *r)
{
	memset(r, 0, sizeof *r);
	bool want_dict = h->encoding == PACK_ENC_ZSTD_DICT || h->encoding == PACK_ENC_DELTA_DICT;
	bool want_base = h->encoding == PACK_ENC_DELTA || h->encoding == PACK_ENC_DELTA_DICT;
	if (want_dict) {
		r->dict = deps && deps->dict ? deps->dict(deps->ctx, h->dict) : NULL;
		if (!r->dict)
			return -EIO;
	}
	if (want_base) {
		r->base = deps && deps->base ? deps->base(deps->ctx, h->base_md5, h->base_variant, &r->base_len) : NULL;
		if (!r->base)
			return -EIO;
	}
	return 0;
}

/* Decode one chunk's stored bytes (slen) into out (exactly len bytes). */
static int decode_chunk(const struct pack_rec_hdr *h, const struct dec_refs *r, const uint8_t *src, size_t slen,
			uint8_t *out, size_t len)
{
	if (slen == len || h->encoding == PACK_ENC_RAW) {
		if (slen != len)
			return -EIO;
		memcpy(out, src, len);
		return 0;
	}
	struct zctx *z = zctx_get();
	if (!z)
		return -ENOMEM;
	ZSTD_DCtx_reset(z->d, ZSTD_reset_session_and_parameters);
	if (r->dict && ZSTD_isError(ZSTD_DCtx_refDDict(z->d, r->dict->d)))
		return -ENOMEM;
	if (r->base && ZSTD_isError(ZSTD_DCtx_refPrefix(z->d, r->base, (size_t)r->base_len)))
		return -ENOMEM;
	size_t n = ZSTD_decompressDCtx(z->d, out, len, src, slen);
	return ZSTD_isError(n) || n != len ? -EIO : 0;
}

static void refs_put(struct dec_refs *r)
{
	free(r->base);
}

int pack_decode_all(const struct pack_rec_hdr *h, const uint8_t *payload, const struct pack_deps *deps, void *out)
{
	struct dec_refs refs;
	int rc = refs_get(h, deps, &refs);
	if (rc)
		return rc;
	uint8_t *dst = out;
	if (h->nchunks == 1) {
		rc = decode_chunk(h, &refs, payload, (size_t)h->payload, dst, (size_t)h->size);
	} else {
		size_t table = (size_t)h->nchunks * PACK_CHUNK_ENT, pos = table;
		uint64_t csize = 1ull << h->chunk_shift;
		for (uint32_t i = 0; i < h->nchunks && !rc; i++) {
			const uint8_t *e = payload + (size_t)i * PACK_CHUNK_ENT;
			size_t slen = get_le32(e);
			uint64_t from = (uint64_t)i * csize;
			size_t len = (size_t)(h->size - from < csize ? h->size - from : csize);
			if (table > h->payload || slen > h->payload - pos)
				rc = -EIO;
			else
				rc = decode_chunk(h, &refs, payload + pos, slen, dst + from, len);
			pos += slen;
		}
		if (!rc && pos != h->payload)
			rc = -EIO;
	}
	refs_put(&refs);
	if (rc)
		return rc;
	uint8_t x[16];
	xxh128_canon(out, (size_t)h->size, x);
	return memcmp(x, h->xxh128, 16) ? -EIO : 0;
}

int pack_decode_chunk(const struct pack_rec_hdr *h, const uint8_t *table, uint32_t i, const uint8_t *src,
		      const struct pack_deps *deps, void *out)
{
	struct dec_refs refs;
	int rc = refs_get(h, deps, &refs);
	if (rc)
		return rc;
	const uint8_t *e = table + (size_t)i * PACK_CHUNK_ENT;
	uint64_t csize = 1ull << h->chunk_shift, from = (uint64_t)i * csize;
	size_t len = (size_t)(h->size - from < csize ? h->size - from : csize);
	rc = decode_chunk(h, &refs, src, get_le32(e), out, len);
	refs_put(&refs);
	if (rc)
		return rc;
	uint8_t x[16];
	xxh128_canon(out, len, x);
	return memcmp(x, e + 8, 16) ? -EIO : 0;
}
