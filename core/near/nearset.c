/* nearset.c - the judge's shingles, bottom-k, and LSH bands. See nearset.h. */
#include "nearset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/byteorder.h"

#define BIN_SHIFT (64 - __builtin_ctz(NEARSET_BINS))
#define EMPTY UINT64_MAX
#define SEED_BAND UINT64_C(0x4E45415242414E44)

_Static_assert((NEARSET_BINS & (NEARSET_BINS - 1)) == 0, "NEARSET_BINS must be a power of two");

struct shingler {
	uint64_t win[NEARSET_WORDS];
	size_t nwords;
	uint32_t *h;  /* top 32 bits of every shingle */
	size_t n, cap;
	uint64_t min[NEARSET_BINS];
	int err;
};

static void add_shingle(struct shingler *s, size_t words)
{
	uint64_t x = XXH3_64bits(s->win + NEARSET_WORDS - words, words * sizeof s->win[0]);
	size_t bin = (size_t)(x >> BIN_SHIFT);
	uint64_t v = x << (64 - BIN_SHIFT) >> (64 - BIN_SHIFT);
	if (v < s->min[bin])
		s->min[bin] = v;
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

/* Empty bins take the next filled bin's value (rotation), marked by the
 * steps taken so that they do not agree with that bin by accident. */
static void make_bands(const struct shingler *s, uint32_t band[NEARSET_BANDS])
{
	uint64_t full[NEARSET_BINS];
	for (size_t j = 0; j < NEARSET_BINS; j++) {
		size_t t = 0;
		while (s->min[(j + t) % NEARSET_BINS] == EMPTY)
			t++; /* ends: some bin is filled */
		full[j] = s->min[(j + t) % NEARSET_BINS] + (uint64_t)t * UINT64_C(0x9E3779B97F4A7C15);
	}
	for (size_t b = 0; b < NEARSET_BANDS; b++) {
		uint64_t key[NEARSET_ROWS + 1];
		key[0] = b;
		memcpy(key + 1, full + b * NEARSET_ROWS, NEARSET_ROWS * sizeof key[0]);
		band[b] = (uint32_t)(XXH3_64bits_withSeed(key, sizeof key, SEED_BAND) >> 32);
	}
}

/* Every shingle of the text into s (s->h sorted, distinct, s->n of them). */
static int shingle_all(const char *text, size_t len, struct shingler *s)
{
	memset(s, 0, sizeof *s);
	for (size_t j = 0; j < NEARSET_BINS; j++)
		s->min[j] = EMPTY;
	words_of(s, (const unsigned char *)text, len);
	if (s->err || !s->n)
		return s->err;
	qsort(s->h, s->n, sizeof *s->h, cmp_u32);
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
	memcpy(out->h, s.h, out->n * sizeof *s.h);
	make_bands(&s, out->band);
	free(s.h);
	return 0;
}

double nearset_resemblance(const struct nearset *a, const struct nearset *b, bool *exact)
{
	if (exact)
		*exact = false;
	if (!a->has || !b->has)
		return 0;
	/* The k smallest of the union are among the two lists' hashes; an
	 * incomplete list holds exactly k, so the walk never passes a hash
	 * it lacks. */
	uint32_t k = a->complete && b->complete ? UINT32_MAX
		     : !a->complete && !b->complete ? (a->n < b->n ? a->n : b->n)
		     : a->complete ? b->n : a->n;
	uint32_t i = 0, j = 0, taken = 0, both = 0;
	while (taken < k && (i < a->n || j < b->n)) {
		if (j == b->n || (i < a->n && a->h[i] < b->h[j])) {
			i++;
		} else if (i == a->n || b->h[j] < a->h[i]) {
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

size_t nearset_encode(const struct nearset *s, uint8_t *out)
{
	out[0] = NEARSET_VERSION;
	out[1] = s->complete ? 1 : 0;
	out[2] = out[3] = 0;
	put_le32(out + 4, s->shingles);
	uint8_t *p = out + NEARSET_HEAD;
	for (size_t b = 0; b < NEARSET_BANDS; b++, p += 4)
		put_le32(p, s->band[b]);
	for (uint32_t i = 0; i < s->n; i++, p += 4)
		put_le32(p, s->h[i]);
	return (size_t)(p - out);
}

int nearset_decode(const void *in, size_t len, struct nearset *s)
{
	const uint8_t *p = in;
	size_t fixed = NEARSET_HEAD + 4 * NEARSET_BANDS;
	memset(s, 0, sizeof *s);
	if (len < fixed || p[0] != NEARSET_VERSION || (len - fixed) % 4 || (len - fixed) / 4 > NEARSET_K)
		return -EINVAL;
	s->has = true;
	s->complete = p[1] & 1;
	s->shingles = get_le32(p + 4);
	s->n = (uint32_t)((len - fixed) / 4);
	if ((s->complete && s->n != s->shingles) || (!s->complete && s->n != NEARSET_K))
		return -EINVAL;
	p += NEARSET_HEAD;
	for (size_t b = 0; b < NEARSET_BANDS; b++, p += 4)
		s->band[b] = get_le32(p);
	for (uint32_t i = 0; i < s->n; i++, p += 4) {
		s->h[i] = get_le32(p);
		if (i && s->h[i] <= s->h[i - 1])
			return -EINVAL;
	}
	return 0;
}
