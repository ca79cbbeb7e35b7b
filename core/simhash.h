/* simhash.h - the 64-bit simhash of a page (Charikar), for near-duplicates.
 *
 * Pure functions: no store, no global state, thread-safe. Two pages whose
 * hashes differ in at most a few bits (simhash_distance) have mostly the
 * same text. The text comes from html_extract() (html.h): scripts, styles,
 * comments, tags and boilerplate dropped, decoded to UTF-8.
 *
 * Features (SIMHASH_VERSION 1):
 *   - folding: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic
 *     capitals to small letters; fullwidth ASCII (U+FF01..FF5E) to ASCII;
 *     zero-width characters, variation selectors and BOMs ignored. Accents
 *     are kept (a subset of NFKC case folding);
 *   - words: runs of letters, digits and combining marks of alphabetic
 *     scripts (anything else separates, '_' and '.' included). A word of
 *     digits only is a number, and every number reads "0": counters, dates
 *     and prices that change do not change the features. Digits inside a
 *     word stay (utf8, x86_64, epi16: collapsing those too merged distinct
 *     API pages, 4 times as many page pairs within distance 3 on the doc
 *     corpus, for no recall gain);
 *   - a word feature is a shingle of 3 consecutive words (across
 *     punctuation and lines), hashed as XXH3-64 of the three XXH3-64 word
 *     hashes. A text of 1 or 2 words gets one shorter shingle;
 *   - CJK: Han, kana, Hangul (and Thai, Lao, Khmer, Myanmar, Yi, which are
 *     written without spaces too) give one feature per pair of adjacent
 *     characters within a run (XXH3-64 of the two code points); a run of a
 *     single character is one feature. Punctuation ends a run;
 *   - weight: 1 + ln(tf), tf the feature's count in this page only (no
 *     corpus-wide statistics, so a stored hash never goes stale), in
 *     fixed point so that every machine computes the same hash;
 *   - bit b of the hash is 1 when the weights of the features whose hash
 *     has bit b set outweigh those that have it clear.
 * Changing any of this changes stored hashes: bump SIMHASH_VERSION.
 *
 * Why these: measured with bench_simhash --quality, built once for each
 * variant, on the Debian documentation corpus (19,998 distinct pages) and
 * on 1,807 Chinese, Japanese and Korean pages. "collide": the share of
 * pages of 64+ features with another page within distance 3 whose text
 * shares under 80% of its 3-shingles; "1 word", "1 char", "3 chars": the
 * share of pages of 256+ features still within 3 after that much of their
 * text changes; "pairs": CJK page pairs within 3.
 *   words       collide  1 word      CJK n-gram  pairs  1 char  3 chars
 *   1-grams      5.8%    100%        1             9    99.4%   96.1%
 *   2-shingles   1.8%     97%        2             4    96.7%   90.6%
 *   3-shingles   0.8%     92%        3             1    96.1%   83.4%
 *   4-shingles   0.3%     87%
 * Weights 1 + ln tf / tf / 1: collide 0.8% / 1.8% / 0.8%, 1 word 92% /
 * 95% / 88%, CJK pairs 4 / 107 / 2, 3 chars 91% / 97% / 77%. The doc
 * corpus is the template trap itself (API pages that differ in a name);
 * pages from one template that do collide share most of their text and
 * need a finer check than the hash.
 *
 * Confidence: a text with fewer than SIMHASH_MIN_FEATURES distinct features
 * gets a hash marked low_confidence: there, one changed word moves the hash
 * by more than 3 bits in 94% of pages (8% at 256 features or more), so a
 * match or a miss says little. A text with no feature at all, and binary
 * content, get none (hash 0, nothing to compare).
 *
 * Errors are negative errno values: -EINVAL (NULL buffer with a length,
 * NULL out), -ENOMEM; html_extract's errors for simhash_of_page.
 */
#ifndef PD_SIMHASH_H
#define PD_SIMHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIMHASH_VERSION 2
/* Fewer distinct features than this: low_confidence. */
#define SIMHASH_MIN_FEATURES 64
/* Hamming distance at or below which two pages are near-duplicates.
 * Measured (bench_near, tests/bench/README.md), candidates confirmed by
 * the MinHash sketch (minhash.h): K=3 answers 58% of the labelled variant
 * pairs at precision 1.000, openjdk template pairs at 1.000; K=4 64%
 * (openjdk 0.974), K=6 73% (0.940), K=8 78% (0.922). Recall 0.90 needs
 * K=12 and a threshold near 0.6, where openjdk precision is 0.32: on short
 * pages an edited sentence or a mirror's header moves the hash by more
 * bits than template pages differ. The default is 4, the largest K at
 * which both precisions stay above 0.95 with a margin (1.000 and 0.974):
 * 6 points more recall than 3 for 2.6 of template precision, and the
 * index still small and fast (5 tables, 100 bytes a page, a query in
 * 11 us at 1e6 pages; bench_nearidx). K=5 (0.951) is too close to the
 * line to be a default. */
#define SIMHASH_NEAR_DISTANCE 4
/* Bounds of the work: only the first SIMHASH_MAX_TEXT bytes of a text are
 * read, and features first seen after SIMHASH_MAX_FEATURES distinct ones
 * are left out (a page of 8 MiB of text has about 1.4 million; the
 * table then takes at most 44 MB). */
#define SIMHASH_MAX_TEXT ((size_t)8 << 20)
#define SIMHASH_MAX_FEATURES (1u << 20)

struct simhash_result {
	uint64_t hash;
	uint32_t features;   /* distinct features hashed (<= SIMHASH_MAX_FEATURES) */
	bool low_confidence; /* features < SIMHASH_MIN_FEATURES */
	bool none;           /* binary or featureless: no hash */
};

/* Simhash of a page's bytes: html_extract(buf, len, 0) then
 * simhash_of_text. 0 on success (binary content too: out->none). */
int simhash_of_page(const void *buf, size_t len, struct simhash_result *out);

/* Simhash of UTF-8 text (invalid bytes are separators). 0 on success. */
int simhash_of_text(const char *utf8, size_t len, struct simhash_result *out);

/* The tokens the features are made of, for other signals over the same
 * words (minhash.h): simhash_tokens reads text as simhash_of_text does
 * (folding, separators, the SIMHASH_MAX_TEXT cap) and calls
 *   word(ctx, h)    for each word, h its XXH3-64 (every number is "0");
 *   cjk(ctx, c)     for each character of a script written without spaces
 *                   (c folded);
 *   cjk_end(ctx)    when a run of such characters ends (before the next
 *                   word, at punctuation, at the end of the text).
 * Words run on across CJK text and punctuation; a consumer that wants
 * shingles keeps its own window. Every callback is required. 0, or -EINVAL
 * (NULL sink or callback, NULL text with a length). */
struct simhash_token_sink {
	void (*word)(void *ctx, uint64_t word_hash);
	void (*cjk)(void *ctx, uint32_t codepoint);
	void (*cjk_end)(void *ctx);
};
int simhash_tokens(const char *utf8, size_t len, const struct simhash_token_sink *sink, void *ctx);

/* Number of bits in which two hashes differ. */
static inline unsigned simhash_distance(uint64_t a, uint64_t b)
{
	return (unsigned)__builtin_popcountll(a ^ b);
}

#endif
