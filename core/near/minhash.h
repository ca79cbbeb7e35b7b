/* minhash.h - a small MinHash sketch of a page's text, the second signal
 * that confirms a simhash near-duplicate.
 *
 * Pure functions: no store, no global state, thread-safe. A candidate pair
 * within simhash distance K is answered only when the resemblance that
 * minhash_resemblance estimates from the two sketches reaches
 * MINHASH_NEAR_RESEMBLANCE.
 *
 * Why a second signal (bench_near; make bench-near, tests/bench/README.md):
 * pages from one template (API references) are short and alike and land
 * within a few bits of each other although their text differs. With the
 * version 1 simhash features, of the 108 pairs of the 10,139 distinct
 * openjdk-17-doc pages within distance 3, 95 shared 80% of their word
 * 5-shingles (precision 0.880); confirmed by the sketch at 0.8, 92 were
 * answered, all true. With version 2 (words and word pairs, simhash.h),
 * which keep near-duplicates closer and so let more template pages in,
 * 635 pairs are within distance 4 and 181 of them true (0.285); confirmed,
 * 172 are answered, 171 true (0.994). On the labelled variants (2,000
 * English and 300 Chinese bases) precision is 1.000 with the sketch.
 *
 * Why these choices (same benchmark):
 *   - threshold 0.8: the sketch estimates the judged quantity itself, so
 *     the judge's cut is the natural one; at K=3 0.75 lets 3 false pairs
 *     in (openjdk 0.969), 0.8 none; at K=4 0.8 gives 0.974, at K=6 0.940;
 *   - 256 x 2 bits: the same 64 bytes as 512 x 1 and 128 x 4, whose
 *     openjdk precision at threshold 0.8 is 0.990 / 1.000 at K=3 (256 x 2:
 *     1.000), 0.963 / 0.962 at K=4 (0.974), 0.942 / 0.896 at K=6 (0.940).
 *     The estimate follows the reference closely: on the labelled variants
 *     its 5th and 10th percentiles are within 0.03 of the reference's
 *     (except where numbers changed, which the sketch folds to "0");
 *   - cost: about 90-110 MB/s of extracted text, 480-600 MB/s counted per
 *     byte of HTML (extraction is shared with the simhash), against
 *     640-670 MB/s for simhash_of_text on the same texts.
 * Recall is the simhash's, not the sketch's: the sketch only removes
 * answers (at K=4 it drops 500 of 30,625 right labelled pairs, 1.6%; all
 * but 33 of them share under 80% of their 5-shingles by the judge too).
 *
 * The sketch (MINHASH_VERSION 2: the features of version 1, over the text
 * of the version 2 extractor, which drops a page's lead and tail, html.h):
 *   - features: the set (not the bag) of word 5-shingles of the text, the
 *     words being simhash's (simhash_tokens: same folding, every number
 *     "0"), and of character 3-grams within runs of CJK characters; a text
 *     of fewer words than a shingle, or a run shorter than a gram, gives
 *     one shorter feature. 5 words: the unit of the reference resemblance
 *     (word 5-shingles), so the sketch estimates what is judged;
 *   - one-permutation hashing: the 64-bit hash of each feature picks one
 *     of MINHASH_BINS bins (its top bits) and the bin keeps the smallest
 *     value of the rest; an empty bin takes the value of a donor bin picked
 *     by a fixed hash of (bin, attempt) ("optimal densification",
 *     Shrivastava 2017), so short texts give full sketches whose matches
 *     still estimate resemblance without bias;
 *   - b-bit: only MINHASH_BITS bits of each bin are kept (of a mix of its
 *     value and its index, so that bins filled from one donor are not
 *     alike). Two different minima agree with probability 2^-b; the estimator removes
 *     that. For a given size, fewer bits and more bins estimate high
 *     resemblance better (Li and Konig, b-bit minwise hashing);
 *   - MINHASH_BYTES bytes, bin i at bits [i*b, (i+1)*b) of the little-
 *     endian byte string: stored as it is beside the fingerprint.
 * Changing any of this changes stored sketches: bump MINHASH_VERSION.
 *
 * A text without features (empty, only separators) has the all-zero
 * sketch and features 0; a sketch estimate involving it is 0: such pages
 * have no simhash either and are never near-duplicates.
 *
 * Errors are negative errno values: -EINVAL (NULL argument, NULL text with
 * a length), -ENOMEM; html_extract's errors for minhash_of_page.
 */
#ifndef PD_MINHASH_H
#define PD_MINHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MINHASH_VERSION 2
#define MINHASH_BINS 256
#define MINHASH_BITS 2 /* 1, 2, 4 or 8 */
#define MINHASH_BYTES (MINHASH_BINS * MINHASH_BITS / 8)
#ifndef MINHASH_WORDS
#define MINHASH_WORDS 5    /* words per shingle */
#endif
#ifndef MINHASH_CJK_GRAM
#define MINHASH_CJK_GRAM 3 /* characters per CJK n-gram */
#endif
/* Estimated resemblance at or above which a simhash candidate is answered. */
#define MINHASH_NEAR_RESEMBLANCE 0.8

struct minhash_sketch {
	uint8_t bytes[MINHASH_BYTES]; /* what is stored */
	uint32_t features;            /* features hashed, repeats included (not stored) */
};

/* Sketch of UTF-8 text (invalid bytes are separators; only the first
 * SIMHASH_MAX_TEXT bytes are read, as for the simhash). 0 on success. */
int minhash_of_text(const char *utf8, size_t len, struct minhash_sketch *out);

/* Sketch of a page's bytes: html_extract(buf, len, 0) then
 * minhash_of_text. Binary content gets the empty sketch. 0 on success. */
int minhash_of_page(const void *buf, size_t len, struct minhash_sketch *out);

/* Estimated resemblance (Jaccard similarity of the feature sets, 0..1) of
 * the texts of two stored sketches (MINHASH_BYTES bytes each) into *out.
 * 0, or -EINVAL on a NULL argument. */
int minhash_resemblance(const uint8_t *a, const uint8_t *b, double *out);

/* The confirmation: minhash_resemblance >= MINHASH_NEAR_RESEMBLANCE.
 * false on a NULL argument. */
bool minhash_near(const uint8_t *a, const uint8_t *b);

#endif
