/* minhash.c - one-permutation b-bit MinHash sketch of a text. See minhash.h.
 *
 * The words and CJK characters come from simhash_tokens, so the sketch
 * sees the text exactly as the simhash does. Each shingle or n-gram is
 * hashed once (XXH3-64); its top bits choose a bin and the bin keeps the
 * smallest of the remaining bits. No table of features is needed: a
 * minimum is the same whether a feature comes once or many times, so the
 * cost is one hash and one compare per feature, and the memory a few
 * hundred bytes whatever the text.
 */
#include "minhash.h"

#include <errno.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/byteorder.h"
#include "text/html.h"
#include "simhash.h"

#define BIN_SHIFT (64 - __builtin_ctz(MINHASH_BINS)) /* top bits: the bin */
#define VALUE_MASK ((UINT64_C(1) << BIN_SHIFT) - 1)
#define EMPTY UINT64_MAX

/* XXH3 seeds keep the feature kinds (and simhash's) apart. */
#define SEED_SHINGLE UINT64_C(0x4D494E5348494E47)
#define SEED_CJK UINT64_C(0x4D494E434A4B)
#define SEED_DONOR UINT64_C(0x444F4E4F52)

_Static_assert(MINHASH_BITS == 1 || MINHASH_BITS == 2 || MINHASH_BITS == 4 || MINHASH_BITS == 8,
	       "MINHASH_BITS must divide a byte");
_Static_assert((MINHASH_BINS & (MINHASH_BINS - 1)) == 0 && MINHASH_BINS >= 8,
	       "MINHASH_BINS must be a power of two");

struct sketcher {
	uint64_t min[MINHASH_BINS];
	uint64_t win[MINHASH_WORDS]; /* the last words, oldest first */
	size_t nwords;
	uint32_t gram[MINHASH_CJK_GRAM];
	size_t ncjk; /* characters in the current CJK run */
	uint32_t features; /* features hashed (repeats included) */
};

static void add_feature(struct sketcher *s, uint64_t h)
{
	size_t bin = (size_t)(h >> BIN_SHIFT);
	uint64_t v = h & VALUE_MASK;
	if (v < s->min[bin])
		s->min[bin] = v;
	s->features++;
}

/* The shingle of the last n words (n < MINHASH_WORDS only for a text that
 * has fewer words than a shingle). */
static void add_shingle(struct sketcher *s, size_t n)
{
	uint8_t b[8 * MINHASH_WORDS];
	size_t first = MINHASH_WORDS - n;
	for (size_t i = 0; i < n; i++)
		put_le64(b + 8 * i, s->win[first + i]);
	add_feature(s, XXH3_64bits_withSeed(b, 8 * n, SEED_SHINGLE + n));
}

static void on_word(void *ctx, uint64_t h)
{
	struct sketcher *s = ctx;
	memmove(s->win, s->win + 1, (MINHASH_WORDS - 1) * sizeof s->win[0]);
	s->win[MINHASH_WORDS - 1] = h;
	if (++s->nwords >= MINHASH_WORDS)
		add_shingle(s, MINHASH_WORDS);
}

static void add_gram(struct sketcher *s, size_t n)
{
	uint8_t b[4 * MINHASH_CJK_GRAM];
	size_t first = MINHASH_CJK_GRAM - n;
	for (size_t i = 0; i < n; i++)
		for (int j = 0; j < 4; j++)
			b[4 * i + j] = (uint8_t)(s->gram[first + i] >> (8 * j));
	add_feature(s, XXH3_64bits_withSeed(b, 4 * n, SEED_CJK + n));
}

static void on_cjk(void *ctx, uint32_t c)
{
	struct sketcher *s = ctx;
	memmove(s->gram, s->gram + 1, (MINHASH_CJK_GRAM - 1) * sizeof s->gram[0]);
	s->gram[MINHASH_CJK_GRAM - 1] = c;
	if (++s->ncjk >= MINHASH_CJK_GRAM)
		add_gram(s, MINHASH_CJK_GRAM);
}

static void on_cjk_end(void *ctx)
{
	struct sketcher *s = ctx;
	if (s->ncjk && s->ncjk < MINHASH_CJK_GRAM)
		add_gram(s, s->ncjk); /* a run shorter than a gram */
	s->ncjk = 0;
}

static const struct simhash_token_sink sink = {on_word, on_cjk, on_cjk_end};

/* The donor of empty bin j at its attempt-th try: a fixed function of both,
 * the same in every sketch, so that two sketches of one text agree. */
static size_t donor(size_t j, uint32_t attempt)
{
	uint64_t key[2] = {j, attempt};
	return (size_t)(XXH3_64bits_withSeed(key, sizeof key, SEED_DONOR) >> BIN_SHIFT);
}

/* The MINHASH_BITS kept of bin j holding v: bits of a mix of both, so that
 * bins filled from one donor still disagree independently with another
 * text's (with the raw low bits, two texts of one feature each would agree
 * in every bin one time in 2^b). */
static unsigned bin_bits(uint64_t v, size_t j)
{
	uint64_t x = v + (uint64_t)j * UINT64_C(0x9E3779B97F4A7C15);
	x ^= x >> 32;
	x *= UINT64_C(0xD6E8FEB86659FD93);
	x ^= x >> 32;
	return (unsigned)(x & ((1u << MINHASH_BITS) - 1));
}

/* Fill the empty bins from donors, then keep MINHASH_BITS of each bin. */
static void finish(const struct sketcher *s, uint8_t *out)
{
	memset(out, 0, MINHASH_BYTES);
	for (size_t j = 0; j < MINHASH_BINS; j++) {
		uint64_t v = s->min[j];
		for (uint32_t a = 1; v == EMPTY; a++)
			v = s->min[donor(j, a)]; /* ends: some bin is filled */
		size_t bit = j * MINHASH_BITS;
		out[bit / 8] |= (uint8_t)(bin_bits(v, j) << (bit % 8));
	}
}

int minhash_of_text(const char *text, size_t len, struct minhash_sketch *out)
{
	if (!out || (!text && len))
		return -EINVAL;
	memset(out, 0, sizeof *out);
	struct sketcher s;
	memset(&s, 0, sizeof s);
	for (size_t j = 0; j < MINHASH_BINS; j++)
		s.min[j] = EMPTY;
	int r = simhash_tokens(text, len, &sink, &s);
	if (r)
		return r;
	if (s.nwords && s.nwords < MINHASH_WORDS)
		add_shingle(&s, s.nwords); /* fewer words than a shingle */
	out->features = s.features;
	if (s.features)
		finish(&s, out->bytes);
	return 0;
}

int minhash_of_page(const void *buf, size_t len, struct minhash_sketch *out)
{
	if (!out || (!buf && len))
		return -EINVAL;
	memset(out, 0, sizeof *out);
	struct html_text t;
	int r = html_extract(buf, len, 0, &t);
	if (r)
		return r;
	if (!t.binary)
		r = minhash_of_text(t.text, t.len, out);
	html_text_free(&t);
	return r;
}

static bool all_zero(const uint8_t *a)
{
	for (size_t i = 0; i < MINHASH_BYTES; i++)
		if (a[i])
			return false;
	return true;
}

int minhash_resemblance(const uint8_t *a, const uint8_t *b, double *out)
{
	if (!a || !b || !out)
		return -EINVAL;
	*out = 0;
	if (all_zero(a) || all_zero(b))
		return 0; /* a text without features resembles nothing */
	/* bins that agree: the b-bit lanes of a ^ b that are all zero */
	size_t differ = 0;
	for (size_t i = 0; i < MINHASH_BYTES; i++) {
		unsigned x = a[i] ^ b[i];
		for (unsigned s = 1; s < MINHASH_BITS; s *= 2)
			x |= x >> s; /* lane's low bit: any bit of the lane set */
		for (unsigned lane = 0; lane < 8; lane += MINHASH_BITS)
			differ += (x >> lane) & 1;
	}
	/* P(agree) = R + (1 - R) 2^-b: solve for R */
	double agree = 1.0 - (double)differ / MINHASH_BINS;
	double chance = 1.0 / (1u << MINHASH_BITS);
	double r = (agree - chance) / (1.0 - chance);
	*out = r < 0 ? 0 : r > 1 ? 1 : r;
	return 0;
}

bool minhash_near(const uint8_t *a, const uint8_t *b)
{
	double r;
	return !minhash_resemblance(a, b, &r) && r >= MINHASH_NEAR_RESEMBLANCE;
}
