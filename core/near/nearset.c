/* nearset.c - the judge's shingles, bottom-k, and LSH bands. See nearset.h. */
#include "nearset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/byteorder.h"
#include "base/varint.h"
#include "nearset_bins.h"

#define SEED_BAND UINT64_C(0x4E45415242414E44)


struct shingler {
	uint64_t win[NEARSET_WORDS];
	size_t nwords;
	uint32_t *h;  /* top 32 bits of every shingle */
	size_t n, cap;
	int err;
};

static void add_shingle(struct shingler *s, size_t words)
{
	uint64_t x = XXH3_64bits(s->win + NEARSET_WORDS - words, words * sizeof s->win[0]);
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		uint32_t *h = realloc(s->h, cap * sizeof *h);
		if (!h) {
			s->err = -ENOMEM;
			return;
		}
		s->h = h;
		s->cap = cap;
	}
	s->h[s->n++] = (uint32_t)(x >> 32);
}

static void add_word(struct shingler *s, const unsigned char *w, size_t len)
{
	memmove(s->win, s->win + 1, (NEARSET_WORDS - 1) * sizeof s->win[0]);
	s->win[NEARSET_WORDS - 1] = XXH3_64bits(w, len);
	if (++s->nwords >= NEARSET_WORDS)
		add_shingle(s, NEARSET_WORDS);
}

/* A CJK character is a word of its own (runs of them have no spaces). */
static bool cjk_cp(uint32_t c)
{
	return (c >= 0x2E80 && c <= 0x9FFF) || (c >= 0xAC00 && c <= 0xD7AF) || (c >= 0xF900 && c <= 0xFAFF) ||
	       (c >= 0xFF00 && c <= 0xFFEF) || c >= 0x20000;
}

/* The code point of a 3- or 4-byte UTF-8 sequence at t (n bytes), else 0:
 * only those can be CJK. */
static uint32_t wide_cp(const unsigned char *t, size_t n)
{
	if (n == 3)
		return (uint32_t)(t[0] & 15) << 12 | (uint32_t)(t[1] & 63) << 6 | (t[2] & 63);
	if (n == 4)
		return (uint32_t)(t[0] & 7) << 18 | (uint32_t)(t[1] & 63) << 12 | (uint32_t)(t[2] & 63) << 6 |
		       (t[3] & 63);
	return 0;
}

static void words_of(struct shingler *s, const unsigned char *t, size_t len)
{
	size_t ws = 0;
	for (size_t i = 0; i <= len && !s->err;) {
		bool end = i == len, blank = !end && (t[i] == ' ' || t[i] == '\n' || t[i] == '\t');
		size_t n = end || t[i] < 0x80 ? 1 : t[i] < 0xE0 ? 2 : t[i] < 0xF0 ? 3 : 4;
		if (!end && i + n > len)
			n = len - i;
		bool cjk = !end && cjk_cp(wide_cp(t + i, n));
		if ((end || blank || cjk) && i > ws)
			add_word(s, t + ws, i - ws);
		if (end)
			break;
		if (cjk)
			add_word(s, t + i, n);
		i += n;
		if (blank || cjk)
			ws = i;
	}
	if (!s->err && s->nwords && s->nwords < NEARSET_WORDS)
		add_shingle(s, s->nwords); /* fewer words than a shingle */
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Sort v[0..n) ascending: an LSD radix sort by bytes through tmp (n
 * values), a pass skipped where every value has the same byte. qsort of
 * a page's shingles (a few thousand) took a tenth of the signer's time. */
static void sort_u32(uint32_t *v, size_t n, uint32_t *tmp)
{
	size_t count[4][256] = { { 0 } };
	for (size_t i = 0; i < n; i++)
		for (int d = 0; d < 4; d++)
			count[d][(v[i] >> (8 * d)) & 0xFF]++;
	uint32_t *from = v, *to = tmp;
	for (int d = 0; d < 4; d++) {
		if (count[d][(v[0] >> (8 * d)) & 0xFF] == n)
			continue; /* one byte value throughout: the order stands */
		size_t at = 0;
		for (size_t b = 0; b < 256; b++) {
			size_t c = count[d][b];
			count[d][b] = at;
			at += c;
		}
		for (size_t i = 0; i < n; i++)
			to[count[d][(from[i] >> (8 * d)) & 0xFF]++] = from[i];
		uint32_t *t = from;
		from = to;
		to = t;
	}
	if (from != v)
		memcpy(v, from, n * sizeof *v);
}

/* Sort h[0..n) (qsort for a few, or where the scratch cannot be had). */
static void sort_hashes(uint32_t *h, size_t n)
{
	uint32_t *tmp = n >= 64 ? malloc(n * sizeof *tmp) : NULL;
	if (tmp)
		sort_u32(h, n, tmp);
	else
		qsort(h, n, sizeof *h, cmp_u32);
	free(tmp);
}

/* A band's key: a hash of its index and its bins. */
static uint32_t band_key(size_t b, const uint32_t *bins)
{
	uint32_t key[NEARSET_ROWS + 1];
	key[0] = (uint32_t)b;
	memcpy(key + 1, bins, NEARSET_ROWS * sizeof key[0]);
	return (uint32_t)(XXH3_64bits_withSeed(key, sizeof key, SEED_BAND) >> 32);
}

/* Band b's key of s's hashes as held (at their precision). */
static uint32_t make_band(const struct nearset *s, size_t b)
{
	uint32_t arg[NEARSET_ROWS];
	nearset_bin_args(s->h, s->n, s->legacy_bands, b * NEARSET_ROWS, NEARSET_ROWS, arg);
	return band_key(b, arg);
}

static void make_bands(const struct nearset *s, uint32_t band[NEARSET_BANDS])
{
	uint32_t arg[NEARSET_BINS];
	nearset_bin_args(s->h, s->n, s->legacy_bands, 0, NEARSET_BINS, arg);
	for (size_t b = 0; b < NEARSET_BANDS; b++)
		band[b] = band_key(b, arg + b * NEARSET_ROWS);
}

/* Every shingle of the text into s (s->h sorted, distinct, s->n of them). */
static int shingle_all(const char *text, size_t len, struct shingler *s)
{
	memset(s, 0, sizeof *s);
	words_of(s, (const unsigned char *)text, len);
	if (s->err || !s->n)
		return s->err;
	sort_hashes(s->h, s->n);
	size_t u = 0;
	for (size_t i = 0; i < s->n; i++)
		if (!u || s->h[u - 1] != s->h[i])
			s->h[u++] = s->h[i];
	s->n = u;
	return 0;
}

int nearset_full_of_text(const char *text, size_t len, uint32_t **h, size_t *n)
{
	if (!h || !n || (!text && len))
		return -EINVAL;
	struct shingler *s = malloc(sizeof *s);
	if (!s)
		return -ENOMEM;
	int rc = shingle_all(text, len, s);
	*h = rc ? NULL : s->h;
	*n = rc ? 0 : s->n;
	if (rc)
		free(s->h);
	free(s);
	return rc;
}

double nearset_full_resemblance(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
	size_t i = 0, j = 0, both = 0;
	while (i < na && j < nb) {
		if (a[i] == b[j]) {
			both++;
			i++;
			j++;
		} else if (a[i] < b[j]) {
			i++;
		} else {
			j++;
		}
	}
	size_t all = na + nb - both;
	return all ? (double)both / (double)all : 0;
}

bool nearset_borderline(bool exact, double r)
{
	return !exact && r > NEARSET_NEAR - NEARSET_MARGIN && r < NEARSET_NEAR + NEARSET_MARGIN;
}

int nearset_of_text_k(const char *text, size_t len, unsigned k, struct nearset *out)
{
	if (!out || (!text && len) || k > NEARSET_K)
		return -EINVAL;
	memset(out, 0, sizeof *out);
	struct shingler s;
	int rc = shingle_all(text, len, &s);
	if (rc || !s.n) {
		free(s.h);
		return rc;
	}
	size_t u = s.n;
	out->has = true;
	out->shingles = (uint32_t)u;
	out->n = (uint32_t)(u < k ? u : k);
	out->complete = u <= k;
	out->bits = 32;
	memcpy(out->h, s.h, out->n * sizeof *s.h);
	make_bands(out, out->band);
	out->bands = true;
	free(s.h);
	return 0;
}

/* The mask that keeps the top `bits` bits of a hash. */
static uint32_t bits_mask(unsigned bits)
{
	return bits >= 32 ? UINT32_MAX : ~(UINT32_MAX >> bits);
}

/* The precision a layout-4 store keeps a set of n hashes at. */
static unsigned stored_bits(uint32_t n)
{
	return n <= NEARSET_FULL_MAX ? 32 : NEARSET_BITS;
}

void nearset_to_stored(struct nearset *s)
{
	if (s->legacy_bands)
		s->bands = false;
	s->legacy_bands = false;
	nearset_truncate(s, stored_bits(s->n));
}

void nearset_truncate(struct nearset *s, unsigned bits)
{
	if (bits >= s->bits)
		return;
	uint32_t m = bits_mask(bits);
	for (uint32_t i = 0; i < s->n; i++)
		s->h[i] &= m;
	s->bits = (uint8_t)bits;
	/* Layout 4's band keys read the top NEARSET_BITS bits of each hash
	 * alone (bin_input): a cut that keeps them keeps the keys, and the
	 * signer's set is not binned twice. */
	if (s->legacy_bands || bits < NEARSET_BITS)
		s->bands = false;
}

double nearset_resemblance(const struct nearset *a, const struct nearset *b, bool *exact)
{
	if (exact)
		*exact = false;
	if (!a->has || !b->has)
		return 0;
	/* at the precision both hold: values equal there are one hash (or
	 * a false match of that precision, nearset.h) */
	uint32_t m = bits_mask(a->bits < b->bits ? a->bits : b->bits);
	/* The k smallest of the union are among the two lists' hashes; an
	 * incomplete list holds exactly k, so the walk never passes a hash
	 * it lacks. */
	uint32_t k = a->complete && b->complete ? UINT32_MAX
		     : !a->complete && !b->complete ? (a->n < b->n ? a->n : b->n)
		     : a->complete ? b->n : a->n;
	uint32_t i = 0, j = 0, taken = 0, both = 0;
	while (taken < k && (i < a->n || j < b->n)) {
		uint32_t x = i < a->n ? a->h[i] & m : 0, y = j < b->n ? b->h[j] & m : 0;
		if (j == b->n || (i < a->n && x < y)) {
			i++;
		} else if (i == a->n || y < x) {
			j++;
		} else {
			both++;
			i++;
			j++;
		}
		taken++;
	}
	if (exact)
		*exact = a->complete && b->complete;
	return taken ? (double)both / taken : 0;
}

/* ---- the stored form (nearset.h) ---- */

static void head_encode(const struct nearset *s, unsigned format, unsigned rice, uint8_t *out)
{
	out[0] = (uint8_t)format;
	out[1] = s->complete ? 1 : 0;
	out[2] = (uint8_t)rice;
	out[3] = format >= 4 ? (uint8_t)stored_bits(s->n) : 0;
	put_le32(out + 4, s->shingles);
	if (format < 3) /* formats 1 and 2 kept the band keys */
		for (size_t b = 0; b < NEARSET_BANDS; b++)
			put_le32(out + NEARSET_HEAD + 4 * b, s->band[b]);
}

size_t nearset_encode_v1(const struct nearset *s, uint8_t *out)
{
	head_encode(s, 1, 0, out);
	uint8_t *p = out + NEARSET_FIXED;
	for (uint32_t i = 0; i < s->n; i++, p += 4)
		put_le32(p, s->h[i]);
	return (size_t)(p - out);
}

/* The values a stored form codes: the hashes at `bits` bits (32: as
 * they are; else each shifted down to its top bits), and whether they are
 * distinct (formats 2 and 3: a gap is then the difference less one;
 * format 4 codes a repeat as a gap of 0, at any precision). */
struct gaps {
	uint32_t v[NEARSET_K];
	uint32_t n;
	bool distinct;
};

static void gaps_of(const struct nearset *s, unsigned bits, bool distinct, struct gaps *g)
{
	g->n = s->n;
	g->distinct = distinct;
	for (uint32_t i = 0; i < s->n; i++)
		g->v[i] = bits == 32 ? s->h[i] : s->h[i] >> (32 - bits);
}

/* The first value, then each value less its predecessor (less one when
 * they are distinct). */
static uint32_t gap_at(const struct gaps *g, uint32_t i)
{
	return i ? g->v[i] - g->v[i - 1] - (g->distinct ? 1 : 0) : g->v[0];
}

static uint64_t rice_bits(const struct gaps *g, unsigned r)
{
	uint64_t bits = (uint64_t)g->n * (r + 1);
	for (uint32_t i = 0; i < g->n; i++)
		bits += gap_at(g, i) >> r;
	return bits;
}

/* The Rice parameter, at most max, that codes the gaps in the fewest bits
 * (each gap g takes (g >> r) + 1 + r bits): near log2 of the mean gap,
 * the best of the three around it. */
static unsigned rice_best_upto(const struct gaps *s, unsigned max)
{
	if (!s->n)
		return 0;
	uint64_t mean = ((uint64_t)s->v[s->n - 1] + 1 - (s->distinct ? s->n - 1 : 0)) / s->n;
	unsigned r0 = mean ? 63 - (unsigned)__builtin_clzll(mean) : 0, best = 0;
	uint64_t best_bits = UINT64_MAX;
	for (unsigned r = r0 ? r0 - 1 : 0; r <= r0 + 1 && r <= max; r++) {
		uint64_t bits = rice_bits(s, r);
		if (bits < best_bits) {
			best_bits = bits;
			best = r;
		}
	}
	return best;
}

static unsigned rice_best(const struct gaps *s)
{
	return rice_best_upto(s, 31);
}

/* Bits in stream order: each byte filled from its lowest bit. */
struct bitw {
	uint8_t *p;
	size_t n;     /* bytes written */
	uint64_t acc; /* bits not yet written, the first lowest */
	unsigned nacc;
};

static void bits_put(struct bitw *w, uint32_t v, unsigned count) /* count <= 32 */
{
	w->acc |= (uint64_t)v << w->nacc;
	w->nacc += count;
	while (w->nacc >= 8) {
		w->p[w->n++] = (uint8_t)w->acc;
		w->acc >>= 8;
		w->nacc -= 8;
	}
}

/* The gaps of g with parameter r, appended to w. */
static void rice_put(struct bitw *w, const struct gaps *g, unsigned r)
{
	for (uint32_t i = 0; i < g->n; i++) {
		uint32_t gap = gap_at(g, i), q = gap >> r;
		for (; q >= 32; q -= 32)
			bits_put(w, UINT32_MAX, 32);
		bits_put(w, (uint32_t)((UINT64_C(1) << q) - 1), q + 1); /* q ones, a zero */
		bits_put(w, r ? gap & (uint32_t)((UINT64_C(1) << r) - 1) : 0, r);
	}
}

/* The last byte of w, padded with zero bits: bytes written. */
static size_t bits_end(struct bitw *w)
{
	if (w->nacc)
		w->p[w->n++] = (uint8_t)w->acc;
	w->nacc = 0;
	return w->n;
}

/* The Rice-coded gaps of formats 2 to 4 after a head of `head` bytes. */
static size_t encode_rice(const struct nearset *s, unsigned format, size_t head, uint8_t *out)
{
	struct gaps all, *gs = &all;
	gaps_of(s, format >= 4 ? stored_bits(s->n) : 32, format < 4, gs);
	unsigned r = rice_best(gs);
	head_encode(s, format, r, out);
	struct bitw w = { out + head, 0, 0, 0 };
	rice_put(&w, gs, r);
	return head + bits_end(&w);
}

size_t nearset_encode(const struct nearset *s, uint8_t *out)
{
	return s->bits >= stored_bits(s->n) ? encode_rice(s, NEARSET_FORMAT, NEARSET_HEAD, out) : 0;
}

size_t nearset_encode_v3(const struct nearset *s, uint8_t *out)
{
	return s->bits == 32 ? encode_rice(s, 3, NEARSET_HEAD, out) : 0;
}

size_t nearset_encode_v2(const struct nearset *s, uint8_t *out)
{
	return s->bits == 32 ? encode_rice(s, 2, NEARSET_FIXED, out) : 0;
}

struct bitr {
	const uint8_t *p;
	size_t len;   /* bytes */
	uint64_t at;  /* bits read */
};

/* The next bits from r->at, the first lowest: at least 57 of them, or all
 * that are left (zero beyond). */
static uint64_t bits_peek(const struct bitr *r)
{
	size_t byte = (size_t)(r->at >> 3);
	uint8_t b[8] = { 0 };
	if (r->len - byte >= 8) /* a copy of constant size: one load (the decoders' hot spot) */
		memcpy(b, r->p + byte, 8);
	else
		memcpy(b, r->p + byte, r->len - byte);
	return get_le64(b) >> (r->at & 7);
}

/* n values of Rice-coded gaps with parameter rice from r into v, each
 * below `over`, ascending (strictly when distinct: a gap is then the
 * difference less one); -EINVAL when the bits do not hold them. */
static int rice_get(struct bitr *r, uint32_t n, unsigned rice, uint64_t over, bool distinct, uint32_t *v)
{
	uint64_t total = (uint64_t)r->len * 8, prev = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t q = 0;
		for (;;) { /* the ones, then a zero */
			uint64_t left = total - r->at, w = bits_peek(r);
			unsigned ones = ~w ? (unsigned)__builtin_ctzll(~w) : 64;
			if (ones >= left)
				return -EINVAL;
			if (ones < 57) {
				q += ones;
				r->at += ones + 1;
				break;
			}
			q += 56;
			r->at += 56;
			if (q > over >> rice)
				return -EINVAL;
		}
		if (q > over >> rice || total - r->at < rice)
			return -EINVAL;
		uint64_t g = rice ? bits_peek(r) & ((UINT64_C(1) << rice) - 1) : 0;
		r->at += rice;
		uint64_t h = (i ? prev + (distinct ? 1 : 0) : 0) + (q << rice | g);
		if (h >= over)
			return -EINVAL;
		prev = h;
		v[i] = (uint32_t)h;
	}
	return 0;
}

/* Nothing after r but the zero bits that pad the last byte? */
static bool bits_padded(const struct bitr *r)
{
	uint64_t total = (uint64_t)r->len * 8;
	return total - r->at < 8 && !(total > r->at && bits_peek(r));
}

/* The n hashes of Rice-coded gaps of `bits`-bit values (formats 2 and 3:
 * 32, distinct; format 4: repeats allowed) into s at that precision;
 * -EINVAL when the bits do not hold exactly n ascending values below
 * 2^bits (padding: zero bits, fewer than 8). */
static int gaps_decode(const uint8_t *p, size_t len, unsigned rice, unsigned bits, bool distinct,
		       struct nearset *s)
{
	struct bitr r = { p, len, 0 };
	int rc = rice_get(&r, s->n, rice, UINT64_C(1) << bits, distinct, s->h);
	if (rc)
		return rc;
	for (uint32_t i = 0; bits < 32 && i < s->n; i++)
		s->h[i] <<= 32 - bits;
	return bits_padded(&r) ? 0 : -EINVAL;
}

static int hashes_v1_decode(const uint8_t *p, struct nearset *s)
{
	for (uint32_t i = 0; i < s->n; i++, p += 4) {
		s->h[i] = get_le32(p);
		if (i && s->h[i] <= s->h[i - 1])
			return -EINVAL;
	}
	return 0;
}

int nearset_decode(const void *in, size_t len, struct nearset *s)
{
	const uint8_t *p = in;
	memset(s, 0, sizeof *s);
	if (len < NEARSET_HEAD || p[0] < 1 || p[0] > NEARSET_FORMAT || p[1] > 1 || p[2] > 31)
		return -EINVAL;
	/* format 4: the precision it was written at; older ones: 32 bits */
	unsigned bits = p[0] >= 4 ? p[3] : 32;
	if (bits < NEARSET_BITS_MIN || bits > 32 || (p[0] < 4 && p[3]))
		return -EINVAL;
	/* formats 1 and 2: the band keys follow the head */
	size_t head = p[0] < 3 ? NEARSET_FIXED : NEARSET_HEAD;
	if (len < head)
		return -EINVAL;
	s->has = true;
	s->complete = p[1] & 1;
	s->shingles = get_le32(p + 4);
	if (s->complete ? s->shingles > NEARSET_K : s->shingles <= NEARSET_K)
		return -EINVAL;
	s->n = s->complete ? s->shingles : NEARSET_K;
	s->bits = (uint8_t)bits;
	s->legacy_bands = p[0] < 4;
	if (p[0] == 1 && len != NEARSET_FIXED + 4 * (size_t)s->n)
		return -EINVAL;
	int rc = p[0] == 1 ? hashes_v1_decode(p + head, s)
			   : gaps_decode(p + head, len - head, p[2], bits, p[0] < 4, s);
	if (rc) {
		memset(s, 0, sizeof *s);
		return rc;
	}
	/* formats 3 and 4: the keys are computed when asked for
	 * (nearset_band): a candidate's confirm reads the hashes only */
	s->bands = head == NEARSET_FIXED;
	if (s->bands)
		for (size_t b = 0; b < NEARSET_BANDS; b++)
			s->band[b] = get_le32(p + NEARSET_HEAD + 4 * b);
	return 0;
}

void nearset_bands(struct nearset *s)
{
	make_bands(s, s->band);
	s->bands = true;
}

uint32_t nearset_band(const struct nearset *s, size_t b)
{
	return s->bands ? s->band[b] : make_band(s, b);
}

void nearset_band_keys(const struct nearset *s, uint32_t keys[NEARSET_BANDS])
{
	if (s->bands)
		memcpy(keys, s->band, NEARSET_BANDS * sizeof keys[0]);
	else
		make_bands(s, keys);
}

/* ---- the difference from a base's set (format 5, nearset.h) ---- */

#define DIFF_DROP_RICE_MAX 7 /* a position is below NEARSET_K: 3 bits say it */
#define DIFF_FIXED (2 + 16) /* format, Rice parameters, the base's MD5 */

bool nearset_is_diff(const void *in, size_t len)
{
	return len >= 1 && ((const uint8_t *)in)[0] == NEARSET_DIFF_FORMAT;
}

/* The form's fields up to its bits: the base's name, the set's shingles
 * (from the base's), how many of the base's values are dropped; the bytes
 * they took (0: they do not parse). */
struct diff_head {
	struct blobkey base;
	int64_t dshingles;
	uint64_t drops;
	unsigned rdrop, radd;
};

static size_t diff_head_decode(const uint8_t *p, size_t len, struct diff_head *h)
{
	if (len < DIFF_FIXED || p[0] != NEARSET_DIFF_FORMAT)
		return 0;
	h->rdrop = p[1] & 7;
	h->radd = p[1] >> 3;
	memcpy(h->base.md5, p + 2, 16);
	size_t at = DIFF_FIXED, n;
	uint64_t variant, zz;
	if (!(n = varint_get(p + at, len - at, &variant)) || variant > UINT32_MAX)
		return 0;
	h->base.variant = (uint32_t)variant;
	at += n;
	if (!(n = varint_get(p + at, len - at, &zz)))
		return 0;
	h->dshingles = zigzag_decode(zz);
	at += n;
	if (!(n = varint_get(p + at, len - at, &h->drops)) || h->drops > NEARSET_K)
		return 0;
	return at + n;
}

int nearset_diff_base(const void *in, size_t len, struct blobkey *base)
{
	struct diff_head h;
	if (!diff_head_decode(in, len, &h))
		return -EINVAL;
	*base = h.base;
	return 0;
}

/* Can a set of n values at `bits` bits be told as a difference from base?
 * base must hold at least that precision (its values are cut to it). */
static bool diff_fits(const struct nearset *base, unsigned bits)
{
	return base->has && !base->legacy_bands && base->bits >= bits;
}

size_t nearset_diff_encode(const struct nearset *s, const struct nearset *base, const struct blobkey *bk,
			   uint8_t *out)
{
	unsigned bits = stored_bits(s->n);
	if (!s->has || s->legacy_bands || s->bits < bits || !diff_fits(base, bits))
		return 0;
	/* the base's values dropped (positions) and the set's added (values
	 * at its precision), from one walk of the two ascending lists */
	struct gaps *g = malloc(2 * sizeof *g);
	if (!g)
		return 0;
	struct gaps *drop = &g[0], *add = &g[1];
	drop->n = add->n = 0;
	drop->distinct = true;
	add->distinct = false;
	uint32_t m = bits_mask(bits), i = 0, j = 0;
	while (i < base->n || j < s->n) {
		uint32_t x = i < base->n ? base->h[i] & m : 0, y = j < s->n ? s->h[j] & m : 0;
		if (j == s->n || (i < base->n && x < y)) {
			drop->v[drop->n++] = i++;
		} else if (i == base->n || y < x) {
			add->v[add->n++] = bits == 32 ? y : y >> (32 - bits);
			j++;
		} else {
			i++;
			j++;
		}
	}
	unsigned rd = rice_best_upto(drop, DIFF_DROP_RICE_MAX), ra = rice_best(add);
	out[0] = NEARSET_DIFF_FORMAT;
	out[1] = (uint8_t)(rd | ra << 3);
	memcpy(out + 2, bk->md5, 16);
	size_t at = DIFF_FIXED;
	at += varint_put(out + at, bk->variant);
	at += varint_put(out + at, zigzag_encode((int64_t)s->shingles - (int64_t)base->shingles));
	at += varint_put(out + at, drop->n);
	struct bitw w = { out + at, 0, 0, 0 };
	rice_put(&w, drop, rd);
	rice_put(&w, add, ra);
	at += bits_end(&w);
	free(g);
	return at;
}

int nearset_diff_decode(const void *in, size_t len, const struct nearset *base, struct nearset *s)
{
	const uint8_t *p = in;
	struct diff_head h;
	memset(s, 0, sizeof *s);
	size_t at = diff_head_decode(p, len, &h);
	int64_t shingles = (int64_t)base->shingles + h.dshingles;
	if (!at || shingles < 1 || shingles > UINT32_MAX || h.drops > base->n)
		return -EINVAL;
	bool complete = shingles <= NEARSET_K;
	uint32_t n = complete ? (uint32_t)shingles : NEARSET_K;
	unsigned bits = stored_bits(n);
	int64_t adds = (int64_t)n - ((int64_t)base->n - (int64_t)h.drops);
	if (!diff_fits(base, bits) || adds < 0 || adds > n)
		return -EINVAL;
	uint32_t *v = malloc((h.drops + (uint64_t)adds + 1) * sizeof *v);
	if (!v)
		return -ENOMEM;
	uint32_t *drop = v, *add = v + h.drops;
	struct bitr r = { p + at, len - at, 0 };
	int rc = rice_get(&r, (uint32_t)h.drops, h.rdrop, base->n, true, drop);
	if (!rc)
		rc = rice_get(&r, (uint32_t)adds, h.radd, UINT64_C(1) << bits, false, add);
	if (!rc && !bits_padded(&r))
		rc = -EINVAL;
	if (rc) {
		free(v);
		return rc;
	}
	/* the base's values kept, cut to the set's precision, merged with the
	 * values added: the ascending list a whole row of the set holds */
	uint32_t m = bits_mask(bits), i = 0, d = 0, a = 0, o = 0;
	while (i < base->n || a < (uint32_t)adds) {
		if (d < h.drops && drop[d] == i) {
			d++;
			i++;
			continue;
		}
		uint32_t x = i < base->n ? base->h[i] & m : 0;
		uint32_t y = a < (uint32_t)adds ? (bits == 32 ? add[a] : add[a] << (32 - bits)) : 0;
		if (a == (uint32_t)adds || (i < base->n && x <= y)) {
			s->h[o++] = x;
			i++;
		} else {
			s->h[o++] = y;
			a++;
		}
	}
	free(v);
	s->has = true;
	s->complete = complete;
	s->shingles = (uint32_t)shingles;
	s->n = n;
	s->bits = (uint8_t)bits;
	return 0;
}
