/* simhash.c - features of a text and their 64-bit simhash. See simhash.h.
 *
 * One pass over the UTF-8 text (the lexer) decodes code points, folds them
 * and sorts them into separators, word characters, digits and characters
 * of scripts written without spaces. Word characters gather into a word
 * buffer; a finished word (a number becomes "0") is hashed once with
 * XXH3-64 and handed to a token sink, as is each CJK character. The
 * simhash's sink pushes words into a window of the last three, whose
 * hashes are hashed together into a shingle feature, and turns runs of CJK
 * characters into one feature per adjacent pair. (simhash_tokens exposes
 * the same tokens to other signals, minhash.c.) Features go into an open-addressing table of (hash, tf),
 * sized from the text length and doubled at half load.
 *
 * The table is then walked once. A feature seen more than once adds its
 * weight to 64 counters where its hash has a 1 and subtracts it where it has
 * a 0. Features seen once all weigh the same, so for them only the number
 * of ones per bit matters: those counts are kept bit-sliced (64 counters in
 * parallel, one carry-save addition per feature, about two word operations)
 * instead of 64 additions each. Cost: linear in the text.
 */
#include "simhash.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL /* the features are short: inlined XXH3 is twice as fast */
#include <xxhash.h>

#include "base/byteorder.h"
#include "text/charset.h"
#include "text/html.h"

/* The feature set (see simhash.h; changing it means a new SIMHASH_VERSION). */
/* Other values can be built in for measurement only (tests/bench/
 * bench-near-features.sh compiles bench_near with -D for each). */
#ifndef SH_SHINGLE
#define SH_SHINGLE 2      /* words per shingle */
#endif
#ifndef SH_MIN_SHINGLE
#define SH_MIN_SHINGLE 1  /* shorter shingles taken too, down to this */
#endif
#ifndef SH_CJK_GRAM
#define SH_CJK_GRAM 1     /* characters per CJK n-gram */
#endif
#ifndef SH_CJK_MIN_GRAM
#define SH_CJK_MIN_GRAM SH_CJK_GRAM
#endif

#define WORD_BUF 64               /* word bytes hashed at once */
#define SEED_WORD UINT64_C(0)     /* XXH3 seeds keep the feature kinds apart */
#define SEED_SHINGLE UINT64_C(0x5348494E474C45)
#define SEED_CJK UINT64_C(0x434A4B)

enum cclass { C_SEP, C_WORD, C_DIGIT, C_CJK, C_IGNORE };

/* ---- folding and classes ---- */

/* Case and width folding: ASCII, Latin-1, Latin Extended-A, Greek and
 * Cyrillic capitals to small letters, fullwidth ASCII to ASCII, final sigma
 * to sigma. A subset of NFKC case folding that covers what web pages mix. */
static uint32_t fold(uint32_t c)
{
	if (c < 0x80)
		return (c - 'A' < 26) ? c + 32 : c;
	if (c < 0x100)
		return (c >= 0xC0 && c <= 0xDE && c != 0xD7) ? c + 32 : c;
	if (c <= 0x17F) {
		if (c == 0x130)
			return 'i';
		if (c == 0x178)
			return 0xFF;
		if ((c >= 0x100 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
			return c | 1;
		if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E))
			return (c & 1) ? c + 1 : c;
		return c;
	}
	if (c >= 0x386 && c <= 0x3AB) {
		if (c >= 0x391 && c != 0x3A2)
			return c + 32;
		if (c == 0x386)
			return 0x3AC;
		if (c >= 0x388 && c <= 0x38A)
			return c + 37;
		if (c == 0x38C)
			return 0x3CC;
		if (c == 0x38E || c == 0x38F)
			return c + 63;
		return c;
	}
	if (c == 0x3C2)
		return 0x3C3;
	if (c >= 0x400 && c <= 0x42F)
		return c < 0x410 ? c + 80 : c + 32;
	if (c >= 0xFF01 && c <= 0xFF5E)
		return fold(c - 0xFEE0);
	return c;
}

static enum cclass classify(uint32_t c)
{
	if (c < 0x80) {
		if (c - '0' < 10)
			return C_DIGIT;
		if ((c | 0x20) - 'a' < 26)
			return C_WORD;
		return C_SEP;
	}
	if (c < 0xC0)
		return (c == 0xAA || c == 0xB5 || c == 0xBA) ? C_WORD : C_SEP;
	if (c < 0x2000) {
		if (c == 0xD7 || c == 0xF7 || c == 0x37E || c == 0x387 || c == 0x60C || c == 0x61B ||
		    c == 0x61F || c == 0x6D4 || c == 0x964 || c == 0x965)
			return C_SEP;
		if ((c >= 0xE00 && c <= 0xEFF) || (c >= 0x1000 && c <= 0x109F) ||
		    (c >= 0x1100 && c <= 0x11FF) || (c >= 0x1780 && c <= 0x17FF))
			return C_CJK; /* Thai, Lao, Myanmar, Hangul Jamo, Khmer */
		return C_WORD;
	}
	if (c < 0x2E80) {
		if (c >= 0x200B && c <= 0x200D)
			return C_IGNORE; /* zero-width space and joiners */
		if (c >= 0x2C00 && c <= 0x2DFF)
			return C_WORD; /* Glagolitic, Latin Extended-C, Coptic, ... */
		return C_SEP; /* punctuation, symbols, arrows, math, dingbats */
	}
	if (c < 0x3000)
		return C_CJK; /* radicals */
	if (c < 0x3040)
		return (c >= 0x3005 && c <= 0x3007) ? C_CJK : C_SEP; /* CJK punctuation */
	if (c < 0x3200)
		return c == 0x30FB ? C_SEP : C_CJK; /* kana, bopomofo, jamo */
	if (c < 0x3400)
		return C_SEP; /* enclosed and compatibility forms */
	if (c < 0xA4D0)
		return C_CJK; /* CJK ideographs, Yi */
	if (c < 0xAC00)
		return C_WORD; /* Lisu, Vai, Latin Extended-D, ... */
	if (c >= 0xAC00 && c < 0xD800)
		return C_CJK; /* Hangul syllables */
	if (c >= 0xD800 && c < 0xF900)
		return C_SEP; /* surrogates, private use */
	if (c < 0xFB00)
		return C_CJK; /* compatibility ideographs */
	if (c >= 0xFE00 && c <= 0xFE0F)
		return C_IGNORE; /* variation selectors */
	if (c >= 0xFE10 && c <= 0xFE6F)
		return C_SEP; /* vertical and small forms */
	if (c >= 0xFF00 && c <= 0xFF64)
		return C_SEP; /* fullwidth punctuation left after folding */
	if (c >= 0xFF65 && c <= 0xFFDC)
		return C_CJK; /* halfwidth katakana and hangul */
	if (c >= 0xFFF0 && c <= 0xFFFF)
		return c == 0xFEFF ? C_IGNORE : C_SEP;
	if (c == 0xFEFF)
		return C_IGNORE;
	if (c >= 0x1F000 && c <= 0x1FAFF)
		return C_SEP; /* emoji, symbols */
	if (c >= 0x20000 && c <= 0x3FFFF)
		return C_CJK; /* CJK extensions */
	if (c >= 0xE0000)
		return C_IGNORE; /* tags, variation selectors supplement */
	return C_WORD;
}

/* Decode one UTF-8 character at s[0..n); *len gets its length (1 for an
 * invalid byte, which decodes as U+FFFD and is a separator). */
static uint32_t decode_utf8(const uint8_t *s, size_t n, size_t *len)
{
	uint32_t cp;
	size_t k = charset_utf8_seq(s, n, &cp);
	*len = k ? k : 1;
	return k ? cp : 0xFFFD;
}

/* ---- the feature table: hash -> term frequency ---- */

/* Open addressing over (hash, index) slots; the features themselves sit in
 * dense arrays in the order first seen, so that the final walk reads only
 * them. */
struct slot {
	uint64_t h; /* 0 = empty (a feature hashing to 0 is stored as 1) */
	uint32_t i;
};

#define AHEAD 16 /* features whose slot is prefetched before they go in */

struct ftab {
	struct slot *slot;
	size_t cap;     /* slots, a power of two; features < cap / 2 */
	size_t room;    /* slots the arrays have room for (>= cap; kept ones may be larger) */
	uint64_t *key;  /* cap / 2 */
	uint32_t *tf;   /* cap / 2 */
	size_t used;
	bool oom;
	/* a large page's table is far bigger than the caches: each feature's
	 * slot is prefetched AHEAD features before it is probed */
	uint64_t ring[AHEAD];
	size_t queued;
};

/* Each thread keeps the arrays of its last table (up to SPARE_MAX_CAP
 * slots) for the next page. A fresh calloc'd table comes from pages the
 * kernel has not yet given: the first probe of a slot maps the shared zero
 * page and the write that follows copies it, and each such copy flushes
 * the TLB of every CPU that runs the daemon (an IPI): in a cp -r of the
 * corpus that was a sixth of the signer's time. A table kept is cleared
 * with memset instead. Freed at the thread's exit (the key's destructor). */
#define SPARE_MAX_CAP ((size_t)1 << 15) /* 512 KiB of slots, 192 KiB of features */

struct ftab_spare {
	struct slot *slot;
	uint64_t *key;
	uint32_t *tf;
	size_t cap;
};

static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_free(void *p)
{
	struct ftab_spare *sp = p;
	free(sp->slot);
	free(sp->key);
	free(sp->tf);
	free(sp);
}

static void spare_key_make(void)
{
	pthread_key_create(&spare_key, spare_free);
}

static struct ftab_spare *spare_get(void)
{
	pthread_once(&spare_once, spare_key_make);
	struct ftab_spare *sp = pthread_getspecific(spare_key);
	if (sp)
		return sp;
	sp = calloc(1, sizeof *sp);
	if (sp && pthread_setspecific(spare_key, sp)) {
		free(sp);
		sp = NULL;
	}
	return sp;
}

/* The thread's kept arrays if they hold cap slots or more (taken: the
 * thread keeps none meanwhile). */
static bool ftab_take_spare(struct ftab *t, size_t cap)
{
	struct ftab_spare *sp = spare_get();
	if (!sp || !sp->slot || sp->cap < cap)
		return false;
	t->slot = sp->slot;
	t->key = sp->key;
	t->tf = sp->tf;
	sp->slot = NULL;
	sp->key = NULL;
	sp->tf = NULL;
	memset(t->slot, 0, cap * sizeof *t->slot);
	t->room = sp->cap;
	sp->cap = 0;
	return true;
}

/* cap empty slots. Not calloc: a large calloc is fresh memory from mmap
 * that calloc leaves untouched, so the first probe of each of its pages
 * (a read) maps the shared zero page and the insert that follows (a
 * write) copies it, flushing the TLB of every CPU that runs the daemon (an
 * IPI each: in a cp -r of the corpus, 6% of the signer's time, on the
 * pages too large for the kept table). Written first, a page is faulted
 * in once, with no flush. explicit_bzero, not memset: GCC turns malloc
 * then memset(0) into calloc (the flush was still a sixth of the signer's
 * time with memset here). */
static struct slot *slots_new(size_t cap)
{
	struct slot *s = malloc(cap * sizeof *s);
	if (s)
		explicit_bzero(s, cap * sizeof *s);
	return s;
}

static int ftab_init(struct ftab *t, size_t cap)
{
	memset(t, 0, sizeof *t);
	t->cap = cap;
	if (ftab_take_spare(t, cap))
		return 0;
	t->slot = slots_new(cap);
	t->key = malloc(cap / 2 * sizeof *t->key);
	t->tf = malloc(cap / 2 * sizeof *t->tf);
	t->room = cap;
	if (!t->slot || !t->key || !t->tf) {
		free(t->slot);
		free(t->key);
		free(t->tf);
		return -ENOMEM;
	}
	return 0;
}

/* Keep the arrays for the thread's next table when they are the largest
 * it has and not too large; else free them. */
static void ftab_free(struct ftab *t)
{
	struct ftab_spare *sp = t->room <= SPARE_MAX_CAP ? spare_get() : NULL;
	if (sp && t->slot && t->room > sp->cap) {
		free(sp->slot);
		free(sp->key);
		free(sp->tf);
		*sp = (struct ftab_spare){ t->slot, t->key, t->tf, t->room };
	} else {
		free(t->slot);
		free(t->key);
		free(t->tf);
	}
	t->slot = NULL;
	t->key = NULL;
	t->tf = NULL;
}

static void ftab_grow(struct ftab *t)
{
	size_t cap = t->cap * 2, mask = cap - 1;
	struct slot *slot = slots_new(cap);
	uint64_t *key = realloc(t->key, cap / 2 * sizeof *key);
	if (key)
		t->key = key;
	uint32_t *tf = realloc(t->tf, cap / 2 * sizeof *tf);
	if (tf)
		t->tf = tf;
	if (!slot || !key || !tf) {
		free(slot);
		t->oom = true;
		return;
	}
	for (size_t i = 0; i < t->used; i++) {
		size_t j = (size_t)t->key[i] & mask;
		while (slot[j].h)
			j = (j + 1) & mask;
		slot[j] = (struct slot){t->key[i], (uint32_t)i};
	}
	free(t->slot);
	t->slot = slot;
	t->cap = t->room = cap;
}

static void ftab_insert(struct ftab *t, uint64_t h)
{
	if (t->oom)
		return;
	size_t mask = t->cap - 1, j = (size_t)h & mask;
	while (t->slot[j].h) {
		if (t->slot[j].h == h) {
			uint32_t *tf = &t->tf[t->slot[j].i];
			if (*tf != UINT32_MAX)
				(*tf)++;
			return;
		}
		j = (j + 1) & mask;
	}
	if (t->used >= SIMHASH_MAX_FEATURES)
		return; /* a new feature past the cap: left out */
	t->slot[j] = (struct slot){h, (uint32_t)t->used};
	t->key[t->used] = h;
	t->tf[t->used] = 1;
	/* key[] and tf[] hold cap / 2; no room needed past the cap */
	if (++t->used * 2 >= t->cap && t->used < SIMHASH_MAX_FEATURES)
		ftab_grow(t);
}

static void ftab_add(struct ftab *t, uint64_t h)
{
	h = h ? h : 1;
	size_t k = t->queued++ % AHEAD;
	if (t->queued > AHEAD)
		ftab_insert(t, t->ring[k]);
	t->ring[k] = h;
	__builtin_prefetch(&t->slot[h & (t->cap - 1)]);
}

/* Insert the features still queued. */
static void ftab_flush(struct ftab *t)
{
	size_t n = t->queued < AHEAD ? t->queued : AHEAD;
	for (size_t i = t->queued - n; i < t->queued; i++)
		ftab_insert(t, t->ring[i % AHEAD]);
	t->queued = 0;
}

/* ---- the lexer: words and CJK characters ---- */

/* The lexer turns text into two kinds of tokens, handed to a token sink:
 * a finished word (its XXH3-64, numbers all hashed as "0") and a CJK
 * character, plus the end of a run of CJK characters. simhash_of_text
 * builds its features from them through direct calls (the lexer is
 * inlined with its sink, so the hot loop has no indirect call);
 * simhash_tokens hands the same tokens to any sink. */
struct lexer {
	uint8_t word[WORD_BUF + 4];
	size_t wlen;
	uint64_t wchain;   /* hash of the word's earlier WORD_BUF-byte chunks */
	bool wlong;
	bool wletter;      /* the word has a character that is not a digit */
	bool in_cjk;       /* inside a run of CJK characters */
};

/* An ASCII letter or digit, already folded. */
static inline void word_ascii(struct lexer *k, uint8_t c, enum cclass cl)
{
	if (cl != C_DIGIT)
		k->wletter = true;
	if (k->wlen + 4 > WORD_BUF) {
		k->wchain = XXH3_64bits_withSeed(k->word, k->wlen, k->wchain);
		k->wlong = true;
		k->wlen = 0;
	}
	k->word[k->wlen++] = c;
}

static inline void word_char(struct lexer *k, uint32_t c, enum cclass cl)
{
	if (cl != C_DIGIT)
		k->wletter = true;
	if (k->wlen + 4 > WORD_BUF) {
		k->wchain = XXH3_64bits_withSeed(k->word, k->wlen, k->wchain);
		k->wlong = true;
		k->wlen = 0;
	}
	k->wlen += charset_utf8_put((char *)k->word + k->wlen, c);
}

/* The hash of the finished word, or false when no word is open. */
static inline bool word_take(struct lexer *k, uint64_t *h)
{
	if (!k->wlen && !k->wlong)
		return false;
	if (!k->wletter) { /* a number: all numbers are one word */
		k->word[0] = '0';
		k->wlen = 1;
		k->wlong = false;
	}
	*h = k->wlong ? XXH3_64bits_withSeed(k->word, k->wlen, k->wchain)
		      : XXH3_64bits_withSeed(k->word, k->wlen, SEED_WORD);
	k->wlen = 0;
	k->wlong = false;
	k->wletter = false;
	return true;
}

#define LEX_WORD_END(k, sink, ctx)                    \
	do {                                          \
		uint64_t wh_;                         \
		if (word_take((k), &wh_))             \
			(sink)->word((ctx), wh_);     \
	} while (0)
#define LEX_CJK_END(k, sink, ctx)                     \
	do {                                          \
		if ((k)->in_cjk) {                    \
			(k)->in_cjk = false;          \
			(sink)->cjk_end((ctx));       \
		}                                     \
	} while (0)

/* Lex text[0..len) (len already capped) into sink. Always inlined, so that
 * each caller gets a copy specialised for its sink. */
static inline __attribute__((always_inline)) void
lex(const uint8_t *s, size_t len, const struct simhash_token_sink *sink, void *ctx)
{
	struct lexer k;
	k.wlen = 0;
	k.wchain = 0;
	k.wlong = k.wletter = k.in_cjk = false;
	for (size_t i = 0; i < len;) {
		if (s[i] < 0x80) { /* the common case, kept short */
			uint8_t a = s[i++];
			enum cclass cl = classify(a);
			if (cl == C_SEP) {
				LEX_WORD_END(&k, sink, ctx);
				LEX_CJK_END(&k, sink, ctx);
			} else {
				LEX_CJK_END(&k, sink, ctx);
				word_ascii(&k, (uint8_t)fold(a), cl);
			}
			continue;
		}
		size_t n;
		uint32_t c = decode_utf8(s + i, len - i, &n);
		i += n;
		c = fold(c);
		enum cclass cl = classify(c);
		switch (cl) {
		case C_WORD:
		case C_DIGIT:
			LEX_CJK_END(&k, sink, ctx);
			word_char(&k, c, cl);
			break;
		case C_CJK:
			LEX_WORD_END(&k, sink, ctx);
			k.in_cjk = true;
			sink->cjk(ctx, c);
			break;
		case C_SEP:
			LEX_WORD_END(&k, sink, ctx);
			LEX_CJK_END(&k, sink, ctx);
			break;
		case C_IGNORE:
			break;
		}
	}
	LEX_WORD_END(&k, sink, ctx);
	LEX_CJK_END(&k, sink, ctx);
}

int simhash_tokens(const char *text, size_t len, const struct simhash_token_sink *sink, void *ctx)
{
	if (!sink || !sink->word || !sink->cjk || !sink->cjk_end || (!text && len))
		return -EINVAL;
	if (len > SIMHASH_MAX_TEXT)
		len = SIMHASH_MAX_TEXT;
	lex((const uint8_t *)text, len, sink, ctx);
	return 0;
}

/* ---- simhash features: word shingles and CJK pairs ---- */

struct feat {
	struct ftab tab;
	uint64_t win[SH_SHINGLE];
	size_t nwords;
	uint32_t cjk[SH_CJK_GRAM];
	size_t ncjk;       /* characters in the current CJK run */
};

static void shingle(struct feat *k, size_t n)
{
	uint8_t b[8 * SH_SHINGLE];
	size_t first = SH_SHINGLE - n;
	for (size_t i = 0; i < n; i++)
		put_le64(b + 8 * i, k->win[first + i]);
	ftab_add(&k->tab, XXH3_64bits_withSeed(b, 8 * n, SEED_SHINGLE + n));
}

static void feat_word(void *ctx, uint64_t h)
{
	struct feat *k = ctx;
	memmove(k->win, k->win + 1, (SH_SHINGLE - 1) * sizeof k->win[0]);
	k->win[SH_SHINGLE - 1] = h;
	++k->nwords;
	for (size_t n = SH_MIN_SHINGLE; n <= SH_SHINGLE; n++)
		if (k->nwords >= n)
			shingle(k, n);
}

static void cjk_gram(struct feat *k, size_t n)
{
	uint8_t b[4 * SH_CJK_GRAM];
	size_t first = SH_CJK_GRAM - n;
	for (size_t i = 0; i < n; i++)
		for (int j = 0; j < 4; j++)
			b[4 * i + j] = (uint8_t)(k->cjk[first + i] >> (8 * j));
	ftab_add(&k->tab, XXH3_64bits_withSeed(b, 4 * n, SEED_CJK + n));
}

static void feat_cjk(void *ctx, uint32_t c)
{
	struct feat *k = ctx;
	memmove(k->cjk, k->cjk + 1, (SH_CJK_GRAM - 1) * sizeof k->cjk[0]);
	k->cjk[SH_CJK_GRAM - 1] = c;
	++k->ncjk;
	for (size_t n = SH_CJK_MIN_GRAM; n <= SH_CJK_GRAM; n++)
		if (k->ncjk >= n)
			cjk_gram(k, n);
}

static void feat_cjk_end(void *ctx)
{
	struct feat *k = ctx;
	if (k->ncjk && k->ncjk < SH_CJK_MIN_GRAM)
		cjk_gram(k, k->ncjk); /* a run shorter than an n-gram */
	k->ncjk = 0;
}

static const struct simhash_token_sink feat_sink = {feat_word, feat_cjk, feat_cjk_end};

/* ---- weights and the hash ---- */

/* Weight of a feature seen tf times, in 1/1024 units so that the sum is
 * exact and the same on every machine. */
static int64_t weight(uint32_t tf)
{
	if (tf == 1)
		return 1024;
	return 1024 + (int64_t)lround(1024.0 * log((double)tf));
}

/* Byte b of spread[x] is bit b of x: adding spread[] of the 8 bytes of a
 * hash to 8 accumulators counts its ones, 8 bits per addition. */
#define SP(x) ((uint64_t)((x) & 1) | (uint64_t)(((x) >> 1) & 1) << 8 | \
	       (uint64_t)(((x) >> 2) & 1) << 16 | (uint64_t)(((x) >> 3) & 1) << 24 | \
	       (uint64_t)(((x) >> 4) & 1) << 32 | (uint64_t)(((x) >> 5) & 1) << 40 | \
	       (uint64_t)(((x) >> 6) & 1) << 48 | (uint64_t)(((x) >> 7) & 1) << 56)
#define SP4(x) SP(x), SP((x) + 1), SP((x) + 2), SP((x) + 3)
#define SP16(x) SP4(x), SP4((x) + 4), SP4((x) + 8), SP4((x) + 12)
#define SP64(x) SP16(x), SP16((x) + 16), SP16((x) + 32), SP16((x) + 48)
static const uint64_t spread[256] = {SP64(0), SP64(64), SP64(128), SP64(192)};

/* The sum over features of +weight where the feature's hash has bit b set
 * and -weight where it has it clear, for each b; the hash has bit b set
 * where that sum is positive. Features seen once (most of them) all weigh
 * 1024, so for them only the count of ones at each bit matters: those are
 * counted 8 bits per addition in byte lanes, emptied every 255 features. */
static uint64_t hash_of(const struct ftab *t)
{
	int64_t v[64] = {0}, ones[64] = {0};
	uint64_t lane[8] = {0};
	size_t once = 0, in_lanes = 0;
	for (size_t i = 0; i < t->used; i++) {
		uint64_t h = t->key[i];
		if (t->tf[i] == 1) {
			for (int j = 0; j < 8; j++)
				lane[j] += spread[(h >> (8 * j)) & 0xFF];
			once++;
			if (++in_lanes == 255) {
				for (int b = 0; b < 64; b++)
					ones[b] += (int64_t)((lane[b / 8] >> (8 * (b % 8))) & 0xFF);
				memset(lane, 0, sizeof lane);
				in_lanes = 0;
			}
			continue;
		}
		int64_t w = weight(t->tf[i]);
		for (int b = 0; b < 64; b++)
			v[b] += ((h >> b) & 1) ? w : -w;
	}
	uint64_t out = 0;
	for (int b = 0; b < 64; b++) {
		ones[b] += (int64_t)((lane[b / 8] >> (8 * (b % 8))) & 0xFF);
		v[b] += 1024 * (2 * ones[b] - (int64_t)once);
		if (v[b] > 0)
			out |= UINT64_C(1) << b;
	}
	return out;
}

int simhash_of_text(const char *text, size_t len, struct simhash_result *out)
{
	if (!out || (!text && len))
		return -EINVAL;
	memset(out, 0, sizeof *out);
	struct feat k;
	memset(&k, 0, sizeof k);
	if (len > SIMHASH_MAX_TEXT)
		len = SIMHASH_MAX_TEXT;
	size_t cap = 256; /* about one feature per 6 bytes of text, at most half full */
	while (cap < len / 3 && cap < 2 * (size_t)SIMHASH_MAX_FEATURES)
		cap *= 2;
	if (ftab_init(&k.tab, cap))
		return -ENOMEM;
	lex((const uint8_t *)text, len, &feat_sink, &k);
	if (k.nwords && k.nwords < SH_MIN_SHINGLE)
		shingle(&k, k.nwords); /* fewer words than a shingle */
	ftab_flush(&k.tab);
	if (k.tab.oom) {
		ftab_free(&k.tab);
		return -ENOMEM;
	}
	out->features = k.tab.used > UINT32_MAX ? UINT32_MAX : (uint32_t)k.tab.used;
	out->hash = out->features ? hash_of(&k.tab) : 0;
	out->none = !out->features;
	out->low_confidence = out->features < SIMHASH_MIN_FEATURES;
	ftab_free(&k.tab);
	return 0;
}

int simhash_of_page(const void *buf, size_t len, struct simhash_result *out)
{
	if (!out || (!buf && len))
		return -EINVAL;
	memset(out, 0, sizeof *out);
	struct html_text t;
	int r = html_extract(buf, len, 0, &t);
	if (r)
		return r;
	if (t.binary) {
		out->none = true;
		out->low_confidence = true;
		return 0;
	}
	r = simhash_of_text(t.text, t.len, out);
	html_text_free(&t);
	return r;
}
