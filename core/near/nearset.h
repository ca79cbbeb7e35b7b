/* nearset.h - a page's word 5-shingles as the judge counts them, kept for
 * an exact (short pages) or tightly estimated (long pages) resemblance, and
 * the MinHash LSH bands that find pages of high resemblance whatever their
 * simhash distance.
 *
 * Pure functions: no store, no global state, thread-safe.
 *
 * Why (issue 16; make bench-near, tests/bench/README.md "The confirm"):
 * the 64-byte sketch (minhash.h) folds every number to "0" and estimates
 * with a standard error of about 0.04-0.06 near 0.8, so sibling pages of
 * one API reference (a struct page of one vector type and of another, 0.6-
 * 0.7 by the judge) pass it, and ten-word pages are listed on a handful of
 * shared shingles. The confirm here counts the judge's own features:
 *   - features: the set of word 5-shingles of the extracted text, words
 *     being runs between white space as written (no folding), each CJK
 *     character a word of its own; a text of fewer than 5 words gives one
 *     shingle of all its words. Each shingle is a 64-bit XXH3; its top 32
 *     bits are kept;
 *   - bottom-k: the NEARSET_K smallest distinct kept hashes. A page with
 *     at most NEARSET_K shingles is held whole ("complete"), and two
 *     complete pages get the exact resemblance (up to 32-bit collisions);
 *     otherwise the bottom-k estimator (Broder): of the k smallest hashes
 *     of the union, the share held by both; standard error
 *     sqrt(R(1-R)/k), 0.025 at R = 0.8 and k = 256;
 *   - bands: NEARSET_BANDS bands of NEARSET_ROWS one-permutation MinHash
 *     bins over the full 64-bit shingle hashes (empty bins filled by
 *     rotation from the next filled bin, Shrivastava and Li 2014); a band's
 *     key is a 32-bit hash of its index and its bins. Two pages of
 *     resemblance R share at least one band with probability about
 *     1 - (1 - R^r)^b: 0.9998 at R = 0.8, 0.89 at 0.6, 0.34 at 0.4 for
 *     r = 4, b = 16.
 *
 * The stored form (table `nearfeat`, near.h), NEARSET_VERSION 1,
 * little-endian:
 *   version u8 | flags u8 (1: complete) | reserved u16 | shingles u32
 *   (distinct, kept hashes) | band key u32 x NEARSET_BANDS |
 *   hash u32 x m, ascending (m = min(shingles, NEARSET_K))
 * Changing any of this changes stored features: bump NEARSET_VERSION
 * (it is part of NEAR_SIG_VERSION, so stores are upgraded, near.h).
 *
 * Errors are negative errno values: -EINVAL, -ENOMEM.
 */
#ifndef PD_NEARSET_H
#define PD_NEARSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NEARSET_VERSION 1
#define NEARSET_WORDS 5 /* words per shingle: the judge's */
#ifndef NEARSET_K
#define NEARSET_K 256   /* hashes kept: 1 KiB at most */
#endif
#define NEARSET_BANDS 16
#define NEARSET_ROWS 4
#define NEARSET_BINS (NEARSET_BANDS * NEARSET_ROWS)
#define NEARSET_HEAD 8
#define NEARSET_MAX_BYTES (NEARSET_HEAD + 4 * NEARSET_BANDS + 4 * NEARSET_K)
/* Resemblance at or above which a candidate is answered: the judge's. */
#define NEARSET_NEAR 0.8
/* An estimate (a page of more than NEARSET_K shingles) this close to
 * NEARSET_NEAR is decided by the exact resemblance, both pages read back
 * (two standard errors at k = 256; bench_near confirm_*: at 0.05, precision
 * 1.000 on libstdc++ and rust API pages, where the estimate alone gives
 * 0.937 and 0.984, with a read-back for about one page in twelve). */
#define NEARSET_MARGIN 0.05

struct nearset {
	bool has;              /* false: no text */
	bool complete;         /* every shingle held: exact resemblance */
	uint32_t shingles;     /* distinct kept hashes of the text */
	uint32_t band[NEARSET_BANDS];
	uint32_t n;            /* hashes held, min(shingles, NEARSET_K) */
	uint32_t h[NEARSET_K]; /* ascending */
};

/* Features of UTF-8 text keeping the k smallest hashes (k <= NEARSET_K;
 * other k only for measurement: the store uses NEARSET_K). */
int nearset_of_text_k(const char *utf8, size_t len, unsigned k, struct nearset *out);
static inline int nearset_of_text(const char *utf8, size_t len, struct nearset *out)
{
	return nearset_of_text_k(utf8, len, NEARSET_K, out);
}

/* Resemblance of two feature sets (0..1; 0 when either has no text); k is
 * the smaller of the two sets' k (NEARSET_K for stored ones). *exact tells
 * whether it is exact (both complete), may be NULL. */
double nearset_resemblance(const struct nearset *a, const struct nearset *b, bool *exact);

/* Is the decision on r (an estimate unless exact) too close to call? */
bool nearset_borderline(bool exact, double r);
/* Every kept hash of the text, sorted and distinct, into a malloc'd *h (*n
 * of them; NULL and 0 for a text without words): what a page read back
 * gives for the exact resemblance. */
int nearset_full_of_text(const char *utf8, size_t len, uint32_t **h, size_t *n);
/* Exact resemblance of two such lists (0 when both are empty). */
double nearset_full_resemblance(const uint32_t *a, size_t na, const uint32_t *b, size_t nb);

/* Stored form: bytes written (at most NEARSET_MAX_BYTES) / 0 or -EINVAL
 * (a size or version that does not fit). */
size_t nearset_encode(const struct nearset *s, uint8_t *out);
int nearset_decode(const void *in, size_t len, struct nearset *s);

#endif
