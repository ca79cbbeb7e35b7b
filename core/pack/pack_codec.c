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
#include "base/varint.h"

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
 * one CDict per level it is used at, each made on its first use: a
 * dictionary loaded only to decode has none (for a 256 KiB dictionary
 * they take 0.3 MB at level 1, 3.4 at 6, 6.6 at 9 and 8.7 at 19, its
 * DDict 0.3: the issue-15 dictsize note). */
#define PACK_DICT_LEVELS 23 /* zstd levels 1..22 */

struct pack_dict {
	uint32_t id;
	void *bytes;
	size_t len;
	int level;               /* the level asked for when no valid one is */
	ZSTD_DDict *d;
	pthread_mutex_t mu;      /* the CDicts */
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
	d->level = level > 0 && level < PACK_DICT_LEVELS ? level : PACK_DEFAULT_LEVEL;
	pthread_mutex_init(&d->mu, NULL);
	d->d = ZSTD_createDDict(d->bytes, len);
	if (!d->d) {
		pack_dict_free(d);
		return NULL;
	}
	return d;
}

void pack_dict_drop_cdicts(struct pack_dict *d)
{
	pthread_mutex_lock(&d->mu);
	for (int i = 0; i < PACK_DICT_LEVELS; i++) {
		ZSTD_freeCDict(d->at[i]);
		d->at[i] = NULL;
	}
	pthread_mutex_unlock(&d->mu);
}

size_t pack_dict_memory(const struct pack_dict *cd)
{
	struct pack_dict *d = (struct pack_dict *)cd;
	size_t n = sizeof *d + d->len + ZSTD_sizeof_DDict(d->d);
	pthread_mutex_lock(&d->mu);
	for (int i = 0; i < PACK_DICT_LEVELS; i++)
		n += d->at[i] ? ZSTD_sizeof_CDict(d->at[i]) : 0;
	pthread_mutex_unlock(&d->mu);
	return n;
}

void pack_dict_free(struct pack_dict *d)
{
	if (!d)
		return;
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
	if (level <= 0 || level >= PACK_DICT_LEVELS)
		level = cd->level;
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

static void hdr_encode_v1(const struct pack_rec_hdr *h, uint8_t *out)
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

static bool wants_dict(uint8_t encoding)
{
	return encoding == PACK_ENC_ZSTD_DICT || encoding == PACK_ENC_DELTA_DICT;
}

/* Layout 2 (pack.h): the fields a record has, nothing else. */
static size_t hdr_encode_v2(const struct pack_rec_hdr *h, uint8_t *out)
{
	uint8_t flags = (h->variant ? PACK_RF_VARIANT : 0) | (wants_dict(h->encoding) ? PACK_RF_DICT : 0) |
			(pack_enc_is_delta(h->encoding) ? PACK_RF_BASE : 0) | (h->nchunks > 1 ? PACK_RF_CHUNKS : 0);
	put_le32(out, PACK_REC_MAGIC2);
	out[4] = h->kind;
	out[5] = h->encoding;
	out[6] = flags;
	memcpy(out + 7, h->md5, 16);
	memcpy(out + 23, h->xxh128, 16);
	size_t n = 39;
	n += varint_put(out + n, h->size);
	n += varint_put(out + n, h->payload);
	if (flags & PACK_RF_VARIANT)
		n += varint_put(out + n, h->variant);
	if (flags & PACK_RF_DICT)
		n += varint_put(out + n, h->dict);
	if (flags & PACK_RF_CHUNKS) {
		out[n++] = h->chunk_shift;
		n += varint_put(out + n, h->nchunks);
	}
	if (flags & PACK_RF_BASE) {
		memcpy(out + n, h->base_md5, 16);
		n += 16;
		n += varint_put(out + n, h->base_variant);
	}
	put_le32(out + n, (uint32_t)XXH3_64bits(out, n));
	return n + 4;
}

size_t pack_hdr_encode(const struct pack_rec_hdr *h, uint8_t out[PACK_REC_HDR_MAX])
{
	if (h->layout == 1) {
		hdr_encode_v1(h, out);
		return PACK_REC_HDR;
	}
	return hdr_encode_v2(h, out);
}

static int hdr_decode_v1(const uint8_t *in, size_t avail, struct pack_rec_hdr *h)
{
	if (avail < PACK_REC_HDR || get_le64(in + 88) != XXH3_64bits(in, 88))
		return -EIO;
	h->layout = 1;
	h->hdr_len = PACK_REC_HDR;
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
	return 0;
}

/* One varint field of a layout 2 header at *pos (of avail bytes); false
 * when malformed or past max. */
static bool v2_field(const uint8_t *in, size_t avail, size_t *pos, uint64_t max, uint64_t *v)
{
	size_t n = varint_get(in + *pos, avail - *pos, v);
	*pos += n;
	return n > 0 && *v <= max;
}

static int hdr_decode_v2(const uint8_t *in, size_t avail, struct pack_rec_hdr *h)
{
	if (avail < PACK_REC_HDR_MIN)
		return -EIO;
	uint8_t flags = in[6];
	if (flags & ~PACK_RF_ALL)
		return -EIO;
	h->layout = 2;
	h->kind = in[4];
	h->encoding = in[5];
	memcpy(h->md5, in + 7, 16);
	memcpy(h->xxh128, in + 23, 16);
	size_t pos = 39;
	uint64_t v = 0;
	bool ok = v2_field(in, avail, &pos, UINT64_MAX, &h->size) && v2_field(in, avail, &pos, UINT64_MAX, &h->payload);
	h->variant = h->dict = h->base_variant = 0;
	h->chunk_shift = 0;
	h->nchunks = 1;
	memset(h->base_md5, 0, 16);
	if (ok && (flags & PACK_RF_VARIANT) && (ok = v2_field(in, avail, &pos, UINT32_MAX, &v)))
		h->variant = (uint32_t)v;
	if (ok && (flags & PACK_RF_DICT) && (ok = v2_field(in, avail, &pos, UINT32_MAX, &v)))
		h->dict = (uint32_t)v;
	if (ok && (flags & PACK_RF_CHUNKS)) {
		ok = pos < avail;
		if (ok)
			h->chunk_shift = in[pos++];
		if (ok && (ok = v2_field(in, avail, &pos, UINT32_MAX, &v)))
			h->nchunks = (uint32_t)v;
	}
	if (ok && (flags & PACK_RF_BASE)) {
		ok = avail - pos >= 16;
		if (ok) {
			memcpy(h->base_md5, in + pos, 16);
			pos += 16;
			ok = v2_field(in, avail, &pos, UINT32_MAX, &v);
			h->base_variant = (uint32_t)v;
		}
	}
	if (!ok || avail - pos < 4 || get_le32(in + pos) != (uint32_t)XXH3_64bits(in, pos))
		return -EIO;
	h->hdr_len = (uint32_t)(pos + 4);
	/* one encoding per header: the flags say exactly what the encoding needs */
	if (!!(flags & PACK_RF_DICT) != wants_dict(h->encoding) || !!(flags & PACK_RF_BASE) != pack_enc_is_delta(h->encoding) ||
	    !!(flags & PACK_RF_VARIANT) != (h->variant != 0) || !!(flags & PACK_RF_CHUNKS) != (h->nchunks > 1))
		return -EIO;
	return 0;
}

int pack_hdr_decode(const uint8_t *in, size_t avail, struct pack_rec_hdr *h)
{
	if (avail < 4)
		return -EIO;
	uint32_t magic = get_le32(in);
	int rc = magic == PACK_REC_MAGIC2 ? hdr_decode_v2(in, avail, h)
		 : magic == PACK_REC_MAGIC ? hdr_decode_v1(in, avail, h)
					    : -EIO;
	if (rc)
		return rc;
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

/* Write r->hdr in front of the payload at r->buf + from (payload bytes
 * long; the buffer is r->buf's, of at least from + payload bytes): the
 * payload moves when the header's length changes. -ENOMEM. */
static int rec_rehead(struct pack_rec *r, size_t from)
{
	uint8_t hb[PACK_REC_HDR_MAX];
	size_t hl = pack_hdr_encode(&r->hdr, hb);
	size_t payload = (size_t)r->hdr.payload;
	if (hl > from) {
		uint8_t *nb = malloc(hl + payload);
		if (!nb)
			return -ENOMEM;
		memcpy(nb + hl, r->buf + from, payload);
		free(r->buf);
		r->buf = nb;
	} else if (hl < from) {
		memmove(r->buf + hl, r->buf + from, payload);
	}
	memcpy(r->buf, hb, hl);
	r->hdr.hdr_len = (uint32_t)hl;
	r->len = hl + payload;
	return 0;
}

int pack_rec_set_id(struct pack_rec *r, const uint8_t md5[16], uint32_t variant)
{
	memcpy(r->hdr.md5, md5, 16);
	r->hdr.variant = variant;
	return rec_rehead(r, r->hdr.hdr_len);
}

int pack_rec_set_layout(struct pack_rec *r, unsigned layout)
{
	if (layout != 1 && layout != 2)
		return -EINVAL;
	if (r->hdr.layout == layout)
		return 0;
	r->hdr.layout = (uint8_t)layout;
	return rec_rehead(r, r->hdr.hdr_len);
}

/* A record just built: its payload at r->buf + PACK_REC_HDR_MAX, its
 * header fields set but its identity; the header (this code's layout)
 * goes in front. */
static int rec_init(struct pack_rec *r, const uint8_t md5[16], uint32_t variant)
{
	r->hdr.layout = PACK_REC_LAYOUT;
	r->hdr.hdr_len = PACK_REC_HDR_MAX;
	int rc = pack_rec_set_id(r, md5, variant);
	if (rc)
		pack_rec_free(r);
	return rc;
}

static void xxh128_canon(const void *p, size_t n, uint8_t out[16])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
	memcpy(out, c.digest, 16);
}

/* ---- encoding --------------------------------------------------------- */

/* The window of a base of base_len bytes that the chunk of raw bytes
 * [lo, hi) of a chunked delta takes as prefix (pack.h): [*wlo, *whi),
 * empty when the base ends before it. */
static void delta_window(uint64_t lo, uint64_t hi, uint32_t margin, uint64_t base_len, uint64_t *wlo, uint64_t *whi)
{
	*wlo = lo > margin ? lo - margin : 0;
	*whi = hi + margin < base_len ? hi + margin : base_len;
	if (*wlo > *whi)
		*wlo = *whi;
}

/* The options for chunk [lo, hi) of a page encoded with o: a chunked
 * delta's chunk takes its window of the base, anything else o itself. */
static struct pack_encode_opts chunk_opts(const struct pack_encode_opts *o, bool chunked, uint64_t lo, uint64_t hi,
					  uint32_t margin)
{
	struct pack_encode_opts co = *o;
	if (!chunked || !o->base)
		return co;
	uint64_t wlo, whi;
	delta_window(lo, hi, margin, o->base_len, &wlo, &whi);
	co.dict = NULL;
	co.base = wlo < whi ? (const uint8_t *)o->base + wlo : NULL;
	co.base_len = (size_t)(whi - wlo);
	return co;
}

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
	/* a delta over a chunk takes a window of its base per chunk (pack.h) */
	bool chunked = size > csize;
	uint32_t margin = o->base ? (o->base_margin ? o->base_margin : PACK_DELTA_MARGIN) : 0;
	if (margin > csize)
		margin = (uint32_t)csize; /* pack.h: at most a chunk */
	uint32_t nchunks = chunked ? (uint32_t)((size + csize - 1) >> shift) : 1;
	size_t table = chunked ? (size_t)nchunks * PACK_CHUNK_ENT : 0;
	size_t one = chunked ? csize : (size_t)size;
	size_t bound = ZSTD_compressBound(one) > one ? ZSTD_compressBound(one) : one;
	size_t cap = PACK_REC_HDR_MAX + table + (chunked ? (size_t)nchunks * bound : bound);
	uint8_t *rec = malloc(cap), *raw = buf ? NULL : malloc(one ? one : 1);
	if (!rec || (!buf && !raw)) {
		free(rec);
		free(raw);
		return -ENOMEM;
	}
	size_t pos = PACK_REC_HDR_MAX + table; /* the header goes in front at the end */
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
		struct pack_encode_opts co = chunk_opts(o, chunked, from, from + len, margin);
		int64_t n = compress_chunk(z->c, &co, src, len, rec + pos, cap - pos);
		if (n < 0) {
			rc = (int)n;
			break;
		}
		any_packed |= (size_t)n < len;
		if (chunked) {
			uint8_t *e = rec + PACK_REC_HDR_MAX + (size_t)i * PACK_CHUNK_ENT;
			put_le32(e, (uint32_t)n);
			put_le32(e + 4, margin);
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
	h->payload = pos - PACK_REC_HDR_MAX;
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
	return rec_init(out, md5, variant);
}

int pack_encode_dict(uint32_t id, const void *dict, size_t len, struct pack_rec *out)
{
	memset(out, 0, sizeof *out);
	out->buf = malloc(PACK_REC_HDR_MAX + len);
	if (!out->buf)
		return -ENOMEM;
	memcpy(out->buf + PACK_REC_HDR_MAX, dict, len);
	struct pack_rec_hdr *h = &out->hdr;
	h->kind = PACK_KIND_DICT;
	h->encoding = PACK_ENC_RAW;
	h->nchunks = 1;
	h->size = h->payload = len;
	xxh128_canon(dict, len, h->xxh128);
	uint8_t md5_of_id[16] = { 0 };
	put_le32(md5_of_id, id);
	return rec_init(out, md5_of_id, id);
}

/* ---- decoding --------------------------------------------------------- */

struct dec_refs {
	const struct pack_dict *dict;
	void *base;
	uint64_t base_len;
};

/* Is h a chunked delta, whose chunks each take a window of the base? */
static bool chunked_delta(const struct pack_rec_hdr *h)
{
	return h->nchunks > 1 && pack_enc_is_delta(h->encoding);
}

/* What decoding h needs; the whole base unless whole_base is false (a
 * chunked delta's chunk decoded alone reads its window itself). */
static int refs_get(const struct pack_rec_hdr *h, const struct pack_deps *deps, bool whole_base, struct dec_refs *r)
{
	memset(r, 0, sizeof *r);
	bool want_dict = h->encoding == PACK_ENC_ZSTD_DICT || h->encoding == PACK_ENC_DELTA_DICT;
	bool want_base = pack_enc_is_delta(h->encoding) && whole_base;
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

/* Can a prefix of len bytes at base be handed to ZSTD_decompress_usingDict
 * as it is? That call takes the bytes without making anything of them,
 * where ZSTD_DCtx_refPrefix builds a DDict (some 27 KB malloc'd and freed)
 * for every frame: at scale, a third of the delta step's mallocs as it
 * read bases (the issue-15 note). But it reads 8 bytes or more that begin
 * with zstd's dictionary magic as a dictionary, so such a prefix (a page
 * could begin so) goes the refPrefix way, which takes it as raw content,
 * as the encoder's ZSTD_CCtx_refPrefix did. */
static bool prefix_as_is(const void *base, uint64_t len)
{
	return len < 8 || get_le32(base) != ZSTD_MAGIC_DICTIONARY;
}

/* Decode one chunk's stored bytes (slen) into out (exactly len bytes);
 * r->base (r->base_len bytes, or NULL) is its prefix. */
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
	bool prefixed = r->base && r->base_len;
	size_t n;
	if (prefixed && prefix_as_is(r->base, r->base_len)) {
		n = ZSTD_decompress_usingDict(z->d, out, len, src, slen, r->base, (size_t)r->base_len);
	} else {
		/* a prefix, else the dictionary, as cctx_setup references them */
		size_t ref = prefixed ? ZSTD_DCtx_refPrefix(z->d, r->base, (size_t)r->base_len)
				: r->dict ? ZSTD_DCtx_refDDict(z->d, r->dict->d) : 0;
		if (ZSTD_isError(ref))
			return -ENOMEM;
		n = ZSTD_decompressDCtx(z->d, out, len, src, slen);
	}
	return ZSTD_isError(n) || n != len ? -EIO : 0;
}

static void refs_put(struct dec_refs *r)
{
	free(r->base);
}

/* The refs chunk [lo, hi) of h decodes with, out of the whole page's
 * refs: a chunked delta's chunk takes its window of the base (margin: its
 * chunk entry's), any other chunk the same refs. */
static struct dec_refs chunk_refs(const struct pack_rec_hdr *h, const struct dec_refs *all, uint64_t lo, uint64_t hi,
				  uint32_t margin)
{
	if (!chunked_delta(h))
		return *all;
	uint64_t wlo, whi;
	delta_window(lo, hi, margin, all->base_len, &wlo, &whi);
	return (struct dec_refs){ .base = (uint8_t *)all->base + wlo, .base_len = whi - wlo };
}

/* Does chunk i's raw bytes (len at raw) match its entry's XXH3-128? */
static bool chunk_intact(const uint8_t *e, const void *raw, size_t len)
{
	uint8_t x[16];
	xxh128_canon(raw, len, x);
	return !memcmp(x, e + 8, 16);
}

/* Chunk i of h: its raw bytes [*lo, *hi) and its entry's margin. */
static uint32_t chunk_place(const struct pack_rec_hdr *h, const uint8_t *table, uint32_t i, uint64_t *lo,
			    uint64_t *hi)
{
	uint64_t csize = 1ull << h->chunk_shift;
	*lo = (uint64_t)i * csize;
	*hi = h->size - *lo < csize ? h->size : *lo + csize;
	return get_le32(table + (size_t)i * PACK_CHUNK_ENT + 4);
}

int pack_decode_all(const struct pack_rec_hdr *h, const uint8_t *payload, const struct pack_deps *deps, void *out)
{
	struct dec_refs refs;
	int rc = refs_get(h, deps, true, &refs);
	if (rc)
		return rc;
	uint8_t *dst = out;
	if (h->nchunks == 1) {
		rc = decode_chunk(h, &refs, payload, (size_t)h->payload, dst, (size_t)h->size);
	} else {
		size_t table = (size_t)h->nchunks * PACK_CHUNK_ENT, pos = table;
		for (uint32_t i = 0; i < h->nchunks && !rc; i++) {
			const uint8_t *e = payload + (size_t)i * PACK_CHUNK_ENT;
			size_t slen = get_le32(e);
			uint64_t from, to;
			uint32_t margin = chunk_place(h, payload, i, &from, &to);
			size_t len = (size_t)(to - from);
			struct dec_refs cr = chunk_refs(h, &refs, from, to, margin);
			if (table > h->payload || slen > h->payload - pos)
				rc = -EIO;
			else if (!(rc = decode_chunk(h, &cr, payload + pos, slen, dst + from, len)) &&
				 !chunk_intact(e, dst + from, len))
				rc = -EIO; /* each chunk is checked, as a read of it alone would */
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

void pack_window_put(struct pack_window *w)
{
	free(w->bytes);
	memset(w, 0, sizeof *w);
}

int pack_window_get(const struct pack_rec_hdr *h, const uint8_t *table, uint32_t first, uint32_t last,
		    const struct pack_deps *deps, struct pack_window *w)
{
	memset(w, 0, sizeof *w);
	if (!chunked_delta(h))
		return 0;
	if (!deps || !deps->base_range) {
		struct dec_refs all;
		int rc = refs_get(h, deps, true, &all);
		w->bytes = all.base;
		w->len = (size_t)all.base_len;
		w->size = all.base_len;
		return rc;
	}
	/* the union of the chunks' windows, unclipped at the base's end */
	uint64_t ulo = UINT64_MAX, uhi = 0;
	for (uint32_t i = first; i <= last; i++) {
		uint64_t lo, hi;
		uint32_t m = chunk_place(h, table, i, &lo, &hi);
		if (m > 1ull << h->chunk_shift)
			return -EIO; /* pack.h: at most a chunk; a damaged table */
		uint64_t a = lo > m ? lo - m : 0, b = hi + m;
		ulo = a < ulo ? a : ulo;
		uhi = b > uhi ? b : uhi;
	}
	if (uhi - ulo > SIZE_MAX)
		return -EIO;
	if (!(w->bytes = malloc((size_t)(uhi - ulo))))
		return -ENOMEM;
	size_t got = 0;
	int rc = deps->base_range(deps->ctx, h->base_md5, h->base_variant, ulo, (size_t)(uhi - ulo), w->bytes, &got,
				  &w->size);
	w->off = ulo;
	w->len = got;
	/* what the base's size says the range holds */
	if (!rc && got != (ulo >= w->size ? 0 : (uhi < w->size ? uhi : w->size) - ulo))
		rc = -EIO;
	if (rc)
		pack_window_put(w);
	return rc == -ENOMEM ? rc : rc ? -EIO : 0;
}

int pack_decode_chunk(const struct pack_rec_hdr *h, const uint8_t *table, uint32_t i, const uint8_t *src,
		      const struct pack_deps *deps, const struct pack_window *w, void *out)
{
	const uint8_t *e = table + (size_t)i * PACK_CHUNK_ENT;
	uint64_t lo, hi;
	uint32_t margin = chunk_place(h, table, i, &lo, &hi);
	size_t len = (size_t)(hi - lo);
	struct dec_refs refs;
	struct pack_window own = { 0 };
	int rc = refs_get(h, deps, !chunked_delta(h), &refs);
	if (!rc && chunked_delta(h) && !w && !(rc = pack_window_get(h, table, i, i, deps, &own)))
		w = &own;
	if (!rc && chunked_delta(h)) {
		/* its window, which must lie in what was read of the base */
		uint64_t wlo, whi;
		delta_window(lo, hi, margin, w->size, &wlo, &whi);
		if (wlo < whi && (wlo < w->off || whi > w->off + w->len))
			rc = -EIO;
		struct dec_refs win = { .dict = refs.dict };
		if (!rc && wlo < whi) {
			win.base = w->bytes + (wlo - w->off);
			win.base_len = whi - wlo;
		}
		if (!rc)
			rc = decode_chunk(h, &win, src, get_le32(e), out, len);
	} else if (!rc) {
		rc = decode_chunk(h, &refs, src, get_le32(e), out, len);
	}
	refs_put(&refs);
	pack_window_put(&own);
	if (rc)
		return rc;
	return chunk_intact(e, out, len) ? 0 : -EIO;
}
