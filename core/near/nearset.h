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
 *     sample for a long one; the function is of a 64-bit mix of the
 *     hash's top NEARSET_BITS bits, or of the 32-bit hash twice in near
 *     layouts 2 and 3: "Stored precision" below); a band's key is a 32-bit hash of its index
 *     and its bins. Two pages of resemblance R share at least one band
 *     with probability about 1 - (1 - R^r)^b: 0.9998 at R = 0.8, 0.89 at
 *     0.6, 0.12 at 0.3 for r = 4, b = 16. (One-permutation bins with
 *     rotation for the empty ones were tried first: pages of a few
 *     shingles then share bands far more often than R^r, openjdk and
 *     rust-doc queries met 140-200 candidates on average, and more rows
 *     a band made it worse.)
 *
 * Stored precision (nearset format 4, near layout 4): a set is computed
 * with 32-bit hashes and stored with the top NEARSET_BITS bits of each
 * (all 32 for a set of at most NEARSET_FULL_MAX hashes). The estimator and
 * the exact resemblance of two complete sets only ask which hashes are
 * equal and in what order, and truncation keeps the order (it may make
 * neighbours equal, never swap them), so every comparison is made on the
 * top bits both sets hold (nearset_resemblance compares at the smaller
 * precision of the two): the kept list is the same bottom-k of the same
 * 32-bit hashes, each cut short, and may hold a value twice. What the cut
 * adds is false matches: two different hashes, one of each page, equal in
 * their top b bits. A page of N shingles spreads its bottom k over about
 * 2^b * k / N values, so a hash of the other page's sample meets one of
 * its own with probability about N / 2^b, and an estimate of R rises by
 * less than 2 (1 - R) N / 2^b (bench_near --false-matches, tests/bench/
 * README.md "Near layout 4": at N = 10^5 and b = 24, a mean rise of
 * 0.0001-0.0003 and at most 2 of 256, against a standard error of 0.025;
 * an estimate within NEARSET_MARGIN of the line is decided on the pages
 * read back at 32 bits anyway). Complete sets of N <= 256 hashes meet a
 * false match with probability under N^2 / 2^b = 2^-8 ... 2^-16 a pair;
 * what that costs is answers among the many pages of a few words (one
 * shingle each: the same set of one value), which is why those keep 32
 * bits.
 * The band keys of layout 4 are computed from the top NEARSET_BITS bits of
 * each hash, whatever the set's precision (so that a set of 16 hashes and
 * one of 17 can share a band), through a 64-bit mix (bin_input); those of
 * layouts 2 and 3 from the 32-bit hash twice (legacy_bands: a set decoded
 * from formats 1-3, looked up in such a store's band rows by a read-only
 * open, near.h).
 *
 * The stored form (table `nearfeat`, near.h), NEARSET_FORMAT 4,
 * little-endian:
 *   format u8 (4) | flags u8 (1: complete) | rice u8 (0..31) |
 *   bits u8 (the precision b, 8..32: NEARSET_BITS when written, 32 for a
 *   set of at most NEARSET_FULL_MAX hashes) |
 *   shingles u32 (distinct 32-bit hashes of the text) |
 *   the m values (m = shingles when complete, else NEARSET_K; each the top
 *   b bits of a kept hash, so 0 .. 2^b - 1, ascending, maybe repeated) as
 *   Rice-coded gaps: the first value, then each value less its
 *   predecessor (0 for a repeat); a gap g is g >> rice one bits, a zero
 *   bit, then the low rice bits of g (lowest first); bits fill each byte
 *   from its lowest bit; the last byte is padded with zero bits.
 * The band keys are not kept: they are a function of the m values,
 * computed again when asked for (nearset_band: 64 multiply-shift bins
 * over the m values for all 16; tests/bench/README.md, "What a page costs
 * in LMDB", gives the price).
 * rice is the parameter that makes the row shortest (the encoder tries
 * the three around log2 of the mean gap; the decoder takes any 0..31). A
 * gap between n values spread over 2^b takes about log2(2^b / n) + 1.5
 * bits: 32 - b bits a value less than format 3.
 * Format 3 (stores of near layout 3; read, never written, rewritten in
 * format 4 by the layout upgrade, near.h): b is 32 (the byte reserved,
 * 0), and a gap is each hash less its predecessor less one (the hashes
 * are distinct).
 * Format 2 (stores of near layout 2; the same): format 3's head, then the
 * band keys u32 x NEARSET_BANDS, then the gaps as in format 3.
 * Format 1 (stores of near layout 1; the same): format 2's head and band
 * keys with rice 0, then the m hashes as u32, ascending.
 * A set decoded from formats 1-3 is held at 32 bits (what a read-only
 * open of such a store compares with its band rows); nearset_truncate
 * brings it to NEARSET_BITS.
 * Format 5, the difference from a base's set (stores of format 7 on,
 * near.h "Sets kept as differences"): a page stored as a delta against
 * another page (blob.h) has a set that differs from its base's in a few
 * values, so its row may say only that:
 *   format u8 (5) | rice u8 (the drops' parameter in bits 0-2, 0..7; the
 *   adds' in bits 3-7, 0..31) | the base's MD5 [16] | the base's variant
 *   (varint, base/varint.h) | shingles less the base's shingles (zigzag
 *   varint) | d, the base's values dropped (varint, at most NEARSET_K) |
 *   the d positions dropped in the base's list (0 .. base's m - 1,
 *   ascending, distinct) as Rice-coded gaps: the first position, then
 *   each less its predecessor less one | the a values added (each the top
 *   b bits of a kept hash, ascending, maybe repeated) as format 4's gaps |
 *   zero bits to the end of the last byte.
 * The set's m, complete and b follow from its shingles as in format 4 (m
 * = shingles when complete, i.e. at most NEARSET_K, else NEARSET_K; b =
 * 32 for m <= NEARSET_FULL_MAX, else NEARSET_BITS), and a = m - (the
 * base's m - d). Decoded: the base's values not dropped, each cut to b
 * bits, merged in order with the values added: exactly the set a format-4
 * row of the page holds (same values, count, shingles, precision). A base
 * must hold at least b bits (a base of more than NEARSET_FULL_MAX values
 * cannot carry a set of at most that many: such a set is kept whole) and
 * be a set of layout 4 (not decoded from formats 1-3). About 21 bytes of
 * fields and 3 bytes a changed value, against format 4's 254 bytes for a
 * page of more than 256 shingles.
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

#include "store/rec.h"

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
#define NEARSET_FORMAT 4
#define NEARSET_HEAD 8
/* Bits of each kept hash a stored set holds (format 4; above). Changing
 * it changes the stored sets and their band rows: a new near layout. */
#ifndef NEARSET_BITS
#define NEARSET_BITS 24
#endif
#define NEARSET_BITS_MIN 8
/* Sets of at most this many hashes are stored at 32 bits: among the many
 * pages of a few words, one false match at NEARSET_BITS makes a pair of
 * unrelated one-shingle pages (or one of 3 shingles sharing 2) an answer
 * of resemblance 1.0 (tests/bench/README.md, "Near layout 4"). */
#define NEARSET_FULL_MAX 16
/* The head and band keys of formats 1 and 2. */
#define NEARSET_FIXED (NEARSET_HEAD + 4 * NEARSET_BANDS)
/* Format 2 at worst (formats 3 and 4 are shorter by the band keys): the
 * best Rice parameter costs at most 32 bits a hash and one more bit
 * (r = 31). */
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
	uint8_t bits;          /* precision of h[]: its top `bits` bits (8..32) */
	bool legacy_bands;     /* band keys of near layouts 2 and 3 (decoded
				* from formats 1-3): bins of the hash twice */
	uint32_t n;            /* hashes held, min(shingles, NEARSET_K) */
	uint32_t h[NEARSET_K]; /* ascending (repeats once truncated), the low
				* 32 - bits bits zero */
};

/* Features of UTF-8 text keeping the k smallest hashes (k <= NEARSET_K;
 * other k only for measurement: the store uses NEARSET_K). */
int nearset_of_text_k(const char *utf8, size_t len, unsigned k, struct nearset *out);
static inline int nearset_of_text(const char *utf8, size_t len, struct nearset *out)
{
	return nearset_of_text_k(utf8, len, NEARSET_K, out);
}

/* Resemblance of two feature sets (0..1; 0 when either has no text); k is
 * the smaller of the two sets' k (NEARSET_K for stored ones); the hashes
 * are compared at the smaller of the two precisions. *exact tells whether
 * it is exact (both complete; up to the false matches of that precision),
 * may be NULL. */
double nearset_resemblance(const struct nearset *a, const struct nearset *b, bool *exact);

/* Is the decision on r (an estimate unless exact) too close to call? */
bool nearset_borderline(bool exact, double r);
/* Every kept hash of the text, sorted and distinct, into a malloc'd *h (*n
 * of them; NULL and 0 for a text without words): what a page read back
 * gives for the exact resemblance. */
int nearset_full_of_text(const char *utf8, size_t len, uint32_t **h, size_t *n);
/* Exact resemblance of two such lists (0 when both are empty). */
double nearset_full_resemblance(const uint32_t *a, size_t na, const uint32_t *b, size_t nb);

/* Keep the top `bits` bits of every hash of s (nothing when it holds no
 * more); band keys it had are kept when they are layout 4's and the cut
 * leaves NEARSET_BITS or more (they read no more), else computed again
 * when next asked for. */
void nearset_truncate(struct nearset *s, unsigned bits);
/* s as a store of near layout 4 keeps it: at NEARSET_BITS (32 when it
 * holds at most NEARSET_FULL_MAX hashes), the band keys of layout 4. */
void nearset_to_stored(struct nearset *s);
/* Stored form (format NEARSET_FORMAT, the hashes at NEARSET_BITS; s holds
 * at least that many): bytes written (at most NEARSET_MAX_BYTES). Decode:
 * formats 1 to 4 (the band keys of formats 3 and 4 computed again; a
 * format-4 set at its stored precision, the older ones at 32 bits); 0 or
 * -EINVAL (a size, format, precision or order of hashes that does not
 * fit; *s is then cleared). */
size_t nearset_encode(const struct nearset *s, uint8_t *out);
int nearset_decode(const void *in, size_t len, struct nearset *s);
/* Formats 1's to 3's forms (32-bit hashes; s at 32 bits): what stores
 * made before format 4 hold (tests of the upgrade make such rows). */
size_t nearset_encode_v1(const struct nearset *s, uint8_t *out);
size_t nearset_encode_v2(const struct nearset *s, uint8_t *out);
size_t nearset_encode_v3(const struct nearset *s, uint8_t *out);
/* Format 5 (above): s as the difference from base, which the row names
 * as bk: bytes written (at most NEARSET_DIFF_MAX_BYTES), 0 when s cannot
 * be told so (base of too low a precision or of layouts 1-3, or no
 * memory); the caller keeps the shorter of this and nearset_encode. */
#define NEARSET_DIFF_FORMAT 5
/* fields 36 bytes at most; a drop 10 bits at worst (r <= 7), an add 33 */
#define NEARSET_DIFF_MAX_BYTES (40 + 2 * NEARSET_K + 5 * NEARSET_K)
size_t nearset_diff_encode(const struct nearset *s, const struct nearset *base, const struct blobkey *bk,
			   uint8_t *out);
/* Is the row a difference (format 5)? nearset_decode refuses it
 * (-EINVAL): it needs its base's set. */
bool nearset_is_diff(const void *in, size_t len);
/* The base a format-5 row names: 0, or -EINVAL when its fields do not
 * parse. */
int nearset_diff_base(const void *in, size_t len, struct blobkey *base);
/* A format-5 row against its base's set (decoded, at its stored
 * precision) into s: 0, -EINVAL (a row that does not fit that base, or
 * damaged; *s cleared), -ENOMEM. */
int nearset_diff_decode(const void *in, size_t len, const struct nearset *base, struct nearset *s);
/* Band b's key of s: band[b] when s->bands, else computed from the
 * hashes (4 of the 64 bins: a 16th of what all keys cost). A set decoded
 * from format 3 has no keys until asked, so that a candidate's confirm,
 * which reads only the hashes, pays nothing for them. */
uint32_t nearset_band(const struct nearset *s, size_t b);
/* Every band key of s computed from its hashes into band[] (s->bands set;
 * the conversion of older rows trusts no stored key). */
void nearset_bands(struct nearset *s);
/* Every band key of s into keys (s->band when s->bands, else computed in
 * one pass over the hashes: each hash mixed once for all 64 bins, where
 * 16 calls of nearset_band mix it 16 times). */
void nearset_band_keys(const struct nearset *s, uint32_t keys[NEARSET_BANDS]);

#endif
