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
 *   - bands: NEARSET_BANDS bands of NEARSET_ROWS MinHash bins, each bin
 *     the kept hash that minimises a multiply-shift function of its own,
 *     over the kept hashes (the whole set for a short page, the bottom-k
 *     sample for a long one); a band's key is a 32-bit hash of its index
 *     and its bins. Two pages of resemblance R share at least one band
 *     with probability about 1 - (1 - R^r)^b: 0.9998 at R = 0.8, 0.89 at
 *     0.6, 0.12 at 0.3 for r = 4, b = 16. (One-permutation bins with
 *     rotation for the empty ones were tried first: pages of a few
 *     shingles then share bands far more often than R^r, openjdk and
 *     rust-doc queries met 140-200 candidates on average, and more rows
 *     a band made it worse.)
 *
 * The stored form (table `nearfeat`, near.h), NEARSET_FORMAT 3,
 * little-endian:
 *   format u8 (3) | flags u8 (1: complete) | rice u8 (0..31) | reserved u8 |
 *   shingles u32 (distinct, kept hashes) |
 *   the m hashes (m = shingles when complete, else NEARSET_K) as Rice-coded
 *   gaps: the first hash, then each hash less its predecessor less one;
 *   a gap g is g >> rice one bits, a zero bit, then the low rice bits of g
 *   (lowest first); bits fill each byte from its lowest bit; the last byte
 *   is padded with zero bits.
 * The band keys are not kept: they are a function of the m hashes,
 * computed again when asked for (nearset_band: 64 multiply-shift bins
 * over the m hashes for all 16; tests/bench/README.md, "What a page costs
 * in LMDB", gives the price).
 * rice is the parameter that makes the row shortest (the encoder tries
 * the three around log2 of the mean gap; the decoder takes any 0..31). A
 * gap between n hashes spread over 2^32 takes about log2(2^32 / n) + 1.5
 * bits where format 1 took 32: a set of 256 hashes of a long page takes
 * 560-640 bytes instead of 1,024.
 * Format 2 (stores of near layout 2; read, never written, rewritten in
 * format 3 by the layout upgrade, near.h): the same head, then the band
 * keys u32 x NEARSET_BANDS, then the gaps as in format 3.
 * Format 1 (stores of near layout 1; the same): format 2's head and band
 * keys with rice 0, then the m hashes as u32, ascending.
 * Changing the stored form: bump NEARSET_FORMAT, keep decoding the old
 * one, and convert stored rows (near_layout_upgrade, near.h). Changing the
 * features (the shingles, the bottom-k, the bands) changes stored
 * features: bump NEARSET_VERSION (it is part of NEAR_SIG_VERSION, so
 * stores are signed again, near.h).
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
#ifndef NEARSET_BANDS
#define NEARSET_BANDS 16
#endif
#ifndef NEARSET_ROWS
#define NEARSET_ROWS 4
#endif
#define NEARSET_BINS (NEARSET_BANDS * NEARSET_ROWS)
#define NEARSET_FORMAT 3
#define NEARSET_HEAD 8
/* The head and band keys of formats 1 and 2. */
#define NEARSET_FIXED (NEARSET_HEAD + 4 * NEARSET_BANDS)
/* Format 2 at worst (format 3 is shorter by the band keys): the best Rice
 * parameter costs at most 32 bits a hash and one more bit (r = 31). */
#define NEARSET_MAX_BYTES (NEARSET_FIXED + 4 * NEARSET_K + 1)
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
	bool bands;            /* band[] holds the keys (else nearset_band) */
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

/* Stored form (format NEARSET_FORMAT): bytes written (at most
 * NEARSET_MAX_BYTES). Decode: formats 1 to 3 (format 3's band keys
 * computed again); 0 or -EINVAL (a size, format or order of hashes that
 * does not fit; *s is then cleared). */
size_t nearset_encode(const struct nearset *s, uint8_t *out);
int nearset_decode(const void *in, size_t len, struct nearset *s);
/* Formats 1's and 2's forms: what stores made before format 3 hold (tests
 * of the upgrade make such rows). */
size_t nearset_encode_v1(const struct nearset *s, uint8_t *out);
size_t nearset_encode_v2(const struct nearset *s, uint8_t *out);
/* Band b's key of s: band[b] when s->bands, else computed from the
 * hashes (4 of the 64 bins: a 16th of what all keys cost). A set decoded
 * from format 3 has no keys until asked, so that a candidate's confirm,
 * which reads only the hashes, pays nothing for them. */
uint32_t nearset_band(const struct nearset *s, size_t b);
/* Every band key of s computed from its hashes into band[] (s->bands set;
 * the conversion of older rows trusts no stored key). */
void nearset_bands(struct nearset *s);

#endif
