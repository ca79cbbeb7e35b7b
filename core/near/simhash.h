/* simhash.h - the 64-bit simhash of a page (Charikar), for near-duplicates.
 *
 * Pure functions: no store, no global state, thread-safe. Two pages whose
 * hashes differ in at most a few bits (simhash_distance) have mostly the
 * same text. The text comes from html_extract() (html.h): scripts, styles,
 * comments, tags and boilerplate dropped, decoded to UTF-8.
 *
 * Features (SIMHASH_VERSION 2):
 *   - folding: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic
 *     capitals to small letters; fullwidth ASCII (U+FF01..FF5E) to ASCII;
 *     zero-width characters, variation selectors and BOMs ignored. Accents
 *     are kept (a subset of NFKC case folding);
 *   - words: runs of letters, digits and combining marks of alphabetic
 *     scripts (anything else separates, '_' and '.' included). A word of
 *     digits only is a number, and every number reads "0": counters, dates
 *     and prices that change do not change the features. Digits inside a
 *     word stay (utf8, x86_64, epi16: collapsing those too merged distinct
 *     API pages for no recall gain);
 *   - word features: every word (XXH3-64 of its hash) and every pair of
 *     consecutive words (across punctuation and lines; XXH3-64 of the two
 *     word hashes): a changed word changes 3 of about 2 features per
 *     word (with 3-shingles, 3 of about 1 per word);
 *   - CJK: Han, kana, Hangul (and Thai, Lao, Khmer, Myanmar, Yi, which are
 *     written without spaces too) give one feature per character (XXH3-64
 *     of the code point): a changed character changes one feature;
 *   - weight: 1 + ln(tf), tf the feature's count in this page only (no
 *     corpus-wide statistics, so a stored hash never goes stale), in
 *     fixed point so that every machine computes the same hash;
 *   - bit b of the hash is 1 when the weights of the features whose hash
 *     has bit b set outweigh those that have it clear.
 * Changing any of this changes stored hashes: bump SIMHASH_VERSION (the
 * store then computes its signatures again, near.h).
 *
 * Why these (make bench-near-features: bench_near built for each set, on
 * one labelled set of 2,000 English and 300 Chinese bases with 5-6
 * variants each, and the 10,139 openjdk-17-doc pages; K=4, candidates
 * confirmed by the MinHash sketch at 0.8, tests/bench/README.md).
 * "recall": of the 36,300 labelled positive pairs; "openjdk P": precision
 * of the answered openjdk pairs by the word 5-shingle judge; "pairs": the
 * openjdk pairs within K before the sketch; "cand", "rows": per page of
 * the 20,000-page corpus, the pages within K and the index rows a query
 * at K reads (random hashes: 14.6):
 *   words         CJK     recall  openjdk P  pairs  cand  rows
 *   3-shingles    pairs   0.779   0.974      204    0.50   61   (version 1)
 *   3-shingles    chars   0.792   0.974      204    0.50   61
 *   2-shingles    pairs   0.795   0.991      401    1.21   79
 *   2-shingles    chars   0.812   0.991      401    1.21   79
 *   1 + 2         chars   0.830   0.994      635    1.21  142   (chosen)
 *   1 + 2 + 3     chars   0.818   1.000      354    0.74  120
 *   1-grams       chars   0.850   0.985     1417    5.18  266
 * Since the sketch confirms every candidate, the simhash need not keep
 * template pages apart any more (the reason for 3-shingles in version 1):
 * features that move less when a few words change find more variants at
 * the same K. Single words alone find the most but make pages of one
 * language alike (5 times the candidates of 1 + 2 and 18 times the index
 * rows of random hashes: queries would slow down with the store); words
 * and pairs together find 5 points more than 3-shingles at K=4 with the
 * largest precision margin, for 2.4 times the candidates. CJK characters
 * rather than pairs: +1.6 points overall, the Chinese edit variants 0.54
 * -> 0.78. On random text, two changed words of 700 keep 97% of pages
 * within 4 bits (86% with version 1).
 *
 * Confidence: a text with fewer than SIMHASH_MIN_FEATURES distinct features
 * (about 35 words) gets a hash marked low_confidence: there, one changed
 * word of the text moves the hash by more than 4 bits in 64% of pages (1%
 * at 256 features or more; bench_simhash --quality, doc_recall_text_word1),
 * so a match or a miss says little. A text with no feature at all, and binary
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
 * the MinHash sketch (minhash.h): K=3 answers 78% of the labelled variant
 * pairs at precision 1.000, openjdk template pairs at 1.000; K=4 83%
 * (openjdk 0.994), K=5 86% (0.986), K=6 88% (0.947), K=8 90% (0.912).
 * The default is 4: K=5 keeps the precisions but a query reads twice the
 * rows of K=4 (6 tables of 10-11 bits), and over the corpus alike pages
 * already make a K=4 query read 9.7 times the rows of random hashes
 * (bench_near index_*; 14 us at 1e6 random hashes, bench_nearidx). Recall
 * 0.90 needs K=8, where the sketch's error lets template pairs of
 * resemblance just under 0.8 in (openjdk 0.912). */
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
