/* test_nearset.c - the shingle sets (core/near/nearset.c): exact resemblance
 * of short texts against a count by hand, the bottom-k estimate of long
 * texts against the exact value, CJK characters as words, the stored form
 * and its damage, the LSH bands' reach; and, through a store, a page found
 * by the bands alone when its simhash is beyond K.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "archive/query.h"
#include "blob/blob.h"
#include "helpers.h"
#include "near/near.h"
#include "near/nearset.h"
#include "near/nearset_bins.h"
#include "near/sigq.h"
#include "near/simhash.h"

static char answer[QUERY_MAX + 1];

static struct nearset *set_of(const char *text, unsigned k)
{
	struct nearset *s = malloc(sizeof *s);
	assert_non_null(s);
	assert_int_equal(nearset_of_text_k(text, strlen(text), k, s), 0);
	return s;
}

static double res_of(const char *a, const char *b, unsigned k, bool *exact)
{
	struct nearset *x = set_of(a, k), *y = set_of(b, k);
	double r = nearset_resemblance(x, y, exact);
	free(x);
	free(y);
	return r;
}

/* Words w0 w1 ... of a numbered vocabulary, `n` of them from `first`. */
static char *words(unsigned first, unsigned n, unsigned change_every)
{
	char *b = malloc((size_t)n * 12 + 1);
	assert_non_null(b);
	size_t len = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned w = first + i;
		bool changed = change_every && i % change_every == change_every - 1;
		len += (size_t)sprintf(b + len, "%s%s%u", i ? " " : "", changed ? "x" : "w", w);
	}
	b[len] = 0;
	return b;
}

static void test_short_exact(void **state)
{
	(void)state;
	bool exact;
	/* 7 words: 3 shingles each; one word changed in the middle (the 4th)
	 * touches all three: nothing shared */
	assert_true(res_of("a b c d e f g", "a b c X e f g", NEARSET_K, &exact) == 0.0);
	assert_true(exact);
	/* the last word changed: 2 of 3 shingles shared, union 4: 0.5 */
	assert_true(res_of("a b c d e f g", "a b c d e f X", NEARSET_K, &exact) == 0.5);
	/* white space is not a word; the same text is 1 */
	assert_true(res_of("a  b\tc\nd e f g", "a b c d e f g", NEARSET_K, &exact) == 1.0);
	/* fewer than five words: one shingle of them all */
	assert_true(res_of("a few words", "a few words", NEARSET_K, &exact) == 1.0);
	assert_true(res_of("a few words", "a few words!", NEARSET_K, &exact) == 0.0);
	/* every CJK character is a word: 7 characters, 3 shingles, the last changed */
	assert_true(res_of("一二三四五六七", "一二三四五六八", NEARSET_K, &exact) == 0.5);
	/* no text: resembles nothing */
	assert_true(res_of("", "a b c d e f", NEARSET_K, &exact) == 0.0);
	assert_false(exact);
	struct nearset *e = set_of("  \n", NEARSET_K);
	assert_false(e->has);
	free(e);
}

/* 2,000 words with every 20th changed: the exact value from complete sets
 * (k = NEARSET_K cannot hold them, so count with a bigger k by hand:
 * each changed word removes the 5 shingles that hold it). */
static void test_long_estimate(void **state)
{
	(void)state;
	char *a = words(0, 2000, 0), *b = words(0, 2000, 20);
	/* 1996 shingles each; 100 changed words, 5 shingles each (4 at the
	 * end: the last word is changed and only one shingle holds it, the
	 * 99 others 5): shared 1996 - 496 = 1500 */
	double want = 1500.0 / (1996 + 496);
	bool exact;
	double r = res_of(a, b, NEARSET_K, &exact);
	assert_false(exact);
	/* bottom-256: standard error sqrt(R(1-R)/256) = 0.03 */
	assert_true(r > want - 0.09 && r < want + 0.09);
	struct nearset *x = set_of(a, NEARSET_K);
	assert_int_equal(x->shingles, 1996);
	assert_int_equal(x->n, NEARSET_K);
	assert_false(x->complete);
	for (unsigned i = 1; i < x->n; i++)
		assert_true(x->h[i] > x->h[i - 1]);
	free(x);
	free(a);
	free(b);
}

static void assert_same_set(const struct nearset *x, const struct nearset *y)
{
	assert_true(y->has && y->complete == x->complete && y->shingles == x->shingles && y->n == x->n);
	assert_memory_equal(x->h, y->h, x->n * sizeof x->h[0]);
	for (size_t b = 0; b < NEARSET_BANDS; b++)
		assert_int_equal(nearset_band(x, b), nearset_band(y, b));
}

/* x cut to the stored precision (what a stored set holds). */
static struct nearset *stored_of(const struct nearset *x)
{
	struct nearset *t = malloc(sizeof *t);
	assert_non_null(t);
	*t = *x;
	nearset_to_stored(t);
	return t;
}

static void test_stored_form(void **state)
{
	(void)state;
	char *a = words(5, 2000, 0), *s = words(7, 40, 0);
	struct nearset *x = set_of(a, NEARSET_K), *y = malloc(sizeof *y), *xt = stored_of(x);
	assert_non_null(y);
	assert_int_equal(x->bits, 32);
	uint8_t buf[NEARSET_MAX_BYTES + 8];
	size_t n3 = nearset_encode_v3(x, buf);
	size_t n = nearset_encode(x, buf);
	/* format 4: the top NEARSET_BITS bits of each hash, 32 - NEARSET_BITS
	 * bits a hash fewer than format 3 (a bit of slack for the Rice
	 * parameter's choice) */
	assert_true(n * 8 <= n3 * 8 - (32 - NEARSET_BITS - 1) * NEARSET_K);
	assert_int_equal(buf[0], NEARSET_FORMAT);
	assert_int_equal(buf[0], 4);
	assert_int_equal(buf[3], NEARSET_BITS);
	assert_int_equal(nearset_decode(buf, n, y), 0);
	assert_int_equal(y->bits, NEARSET_BITS);
	assert_same_set(xt, y);
	/* damage: a short value, a longer one, another format, a complete
	 * flag on a sample, a precision out of range */
	assert_int_equal(nearset_decode(buf, n - 1, y), -EINVAL);
	buf[n] = 0;
	assert_int_equal(nearset_decode(buf, n + 1, y), -EINVAL);
	assert_int_equal(nearset_decode(buf, 10, y), -EINVAL);
	buf[0] = NEARSET_FORMAT + 1;
	assert_int_equal(nearset_decode(buf, n, y), -EINVAL);
	buf[0] = NEARSET_FORMAT;
	buf[1] = 1;
	assert_int_equal(nearset_decode(buf, n, y), -EINVAL);
	buf[1] = 0;
	buf[3] = NEARSET_BITS_MIN - 1;
	assert_int_equal(nearset_decode(buf, n, y), -EINVAL);
	buf[3] = 33;
	assert_int_equal(nearset_decode(buf, n, y), -EINVAL);
	/* format 3, what stores of near layout 3 hold: the 32-bit hashes,
	 * read at 32 bits with that layout's band keys; its reserved byte
	 * must be 0 */
	x->legacy_bands = true;
	nearset_bands(x); /* (formats 1 and 2 write them) */
	assert_int_equal(nearset_encode_v3(x, buf), n3);
	assert_int_equal(buf[0], 3);
	assert_int_equal(nearset_decode(buf, n3, y), 0);
	assert_int_equal(y->bits, 32);
	assert_same_set(x, y);
	buf[3] = NEARSET_BITS;
	assert_int_equal(nearset_decode(buf, n3, y), -EINVAL);
	/* format 2 keeps the band keys: 64 bytes more than format 3, read as
	 * before (its keys as stored) */
	size_t n2 = nearset_encode_v2(x, buf);
	assert_int_equal(n2, n3 + 4 * NEARSET_BANDS);
	assert_int_equal(buf[0], 2);
	assert_int_equal(nearset_decode(buf, n2, y), 0);
	assert_same_set(x, y);
	assert_int_equal(nearset_decode(buf, n2 - 1, y), -EINVAL);
	assert_int_equal(nearset_decode(buf, NEARSET_FIXED - 1, y), -EINVAL);
	/* format 1, what older stores hold: read as before, hashes out of
	 * order refused */
	n = nearset_encode_v1(x, buf);
	assert_int_equal(n, NEARSET_FIXED + 4 * NEARSET_K);
	assert_int_equal(nearset_decode(buf, n, y), 0);
	assert_same_set(x, y);
	uint8_t t[4];
	memcpy(t, buf + n - 4, 4);
	memcpy(buf + n - 4, buf + n - 8, 4);
	memcpy(buf + n - 8, t, 4);
	assert_int_equal(nearset_decode(buf, n, y), -EINVAL);
	/* a set cut to fewer bits than the store's is not written */
	nearset_truncate(xt, NEARSET_BITS - 1);
	assert_int_equal(nearset_encode(xt, buf), 0);
	free(x);
	free(xt);
	/* a set of a few hashes keeps all 32 bits; its band keys are those
	 * of its top NEARSET_BITS bits, as a longer set's */
	char *few = words(9, 14, 0);
	x = set_of(few, NEARSET_K);
	assert_int_equal(x->n, 10);
	xt = stored_of(x);
	assert_int_equal(xt->bits, 32);
	n = nearset_encode(x, buf);
	assert_int_equal(buf[3], 32);
	assert_int_equal(nearset_decode(buf, n, y), 0);
	assert_int_equal(y->bits, 32);
	assert_false(y->legacy_bands);
	assert_same_set(x, y);
	struct nearset *cut = stored_of(x);
	nearset_truncate(cut, NEARSET_BITS);
	for (size_t b = 0; b < NEARSET_BANDS; b++)
		assert_int_equal(nearset_band(y, b), nearset_band(cut, b));
	/* the same hashes in format 3 are of the old band keys */
	assert_int_equal(nearset_decode(buf, nearset_encode_v3(x, buf), y), 0);
	assert_true(y->legacy_bands);
	size_t differ = 0;
	for (size_t b = 0; b < NEARSET_BANDS; b++)
		differ += nearset_band(y, b) != nearset_band(cut, b);
	assert_true(differ > NEARSET_BANDS / 2);
	free(cut);
	free(few);
	free(x);
	free(xt);
	/* a short text is stored whole */
	x = set_of(s, NEARSET_K);
	xt = stored_of(x);
	n = nearset_encode(x, buf);
	assert_true(n < NEARSET_HEAD + 4 * 36);
	assert_int_equal(nearset_decode(buf, n, y), 0);
	assert_true(y->complete && y->n == 36);
	assert_same_set(xt, y);
	free(x);
	free(xt);
	free(y);
	free(a);
	free(s);
	assert_int_equal(nearset_of_text_k("a", 1, NEARSET_K + 1, (struct nearset *)buf), -EINVAL);
}

/* Formats 2 to 4 round-trip every kind of set: gaps of 0, the ends of the
 * range, one hash, 256 hashes bunched or spread, random ones; format 4
 * gives the hashes cut to NEARSET_BITS (repeated where they were closer
 * than that), and the band keys of the values it holds. */
static void test_stored_form_edges(void **state)
{
	(void)state;
	struct nearset *x = calloc(1, sizeof *x), *y = malloc(sizeof *y), *xt;
	assert_non_null(x);
	assert_non_null(y);
	uint8_t buf[NEARSET_MAX_BYTES];
	uint64_t r = 88172645463325252ull;
	unsigned repeats = 0;
	for (int round = 0; round < 400; round++) {
		memset(x, 0, sizeof *x);
		x->has = true;
		x->bits = 32;
		x->legacy_bands = true; /* the rows of formats 2 and 3 */
		uint32_t n = round < 4 ? (uint32_t[]){ 1, 2, NEARSET_K, NEARSET_K }[round] : 1 + (uint32_t)(r % NEARSET_K);
		x->complete = round % 3 != 0 || n < NEARSET_K;
		if (!x->complete)
			n = NEARSET_K;
		x->n = n;
		x->shingles = x->complete ? n : n + 1 + (uint32_t)(r % 100000);
		uint64_t start = round == 1 ? UINT32_MAX - 1 : round == 2 ? 0 : (r >> 7) % 1000;
		uint64_t room = ((uint64_t)UINT32_MAX - start + 1) / n; /* the widest span that fits */
		uint64_t span = round == 3 ? room : round % 5 == 0 ? 1 : 1 + (r >> 20) % room;
		for (uint32_t i = 0; i < n; i++) {
			r ^= r << 13, r ^= r >> 7, r ^= r << 17;
			x->h[i] = (uint32_t)(start + i * span + (span > 1 ? r % span : 0));
		}
		/* format 2 gives back the keys it stored, whatever they are */
		for (int b = 0; b < NEARSET_BANDS; b++)
			x->band[b] = (uint32_t)(r >> (b % 32));
		x->bands = true;
		size_t len = nearset_encode_v2(x, buf);
		assert_true(len <= NEARSET_MAX_BYTES);
		assert_true(len <= NEARSET_FIXED + 4 * (size_t)n + 1);
		assert_int_equal(nearset_decode(buf, len, y), 0);
		assert_same_set(x, y);
		/* format 3 computes them from the hashes when asked */
		nearset_bands(x);
		len = nearset_encode_v3(x, buf);
		assert_true(len <= NEARSET_HEAD + 4 * (size_t)n + 1);
		assert_int_equal(nearset_decode(buf, len, y), 0);
		assert_false(y->bands);
		assert_same_set(x, y);
		nearset_bands(y);
		assert_memory_equal(x->band, y->band, sizeof x->band);
		/* format 4: the values cut short, band keys of those */
		xt = stored_of(x);
		len = nearset_encode(x, buf);
		assert_true(len <= NEARSET_HEAD + 4 * (size_t)n + 1);
		assert_int_equal(nearset_decode(buf, len, y), 0);
		assert_false(y->bands);
		assert_int_equal(y->bits, n <= NEARSET_FULL_MAX ? 32 : NEARSET_BITS);
		assert_same_set(xt, y);
		for (uint32_t i = 1; i < n; i++)
			repeats += xt->h[i] == xt->h[i - 1];
		free(xt);
	}
	assert_true(repeats > 0); /* the bunched rounds repeat values */
	free(x);
	free(y);
}

/* Comparisons at the coarser precision of the two: a set computed from a
 * page (32 bits) against a stored one gives what two stored sets give,
 * and cutting both changes the resemblance only by false matches (two
 * hashes equal in their top bits), which can only raise it. */
static void test_truncated_compare(void **state)
{
	(void)state;
	size_t changed = 0;
	for (unsigned t = 0; t < 60; t++) {
		/* short pages (complete sets) and long ones (bottom-k) */
		unsigned len = t % 2 ? 3000 : 200;
		char *a = words(50000 * t, len, 0), *b = words(50000 * t, len, 7 + t % 13);
		struct nearset *x = set_of(a, NEARSET_K), *y = set_of(b, NEARSET_K);
		struct nearset *xt = stored_of(x), *yt = stored_of(y);
		bool e32, e;
		double r32 = nearset_resemblance(x, y, &e32), r = nearset_resemblance(xt, yt, &e);
		assert_true(e == e32);
		assert_true(r >= r32);
		changed += r != r32;
		assert_true(nearset_resemblance(x, yt, NULL) == r);
		assert_true(nearset_resemblance(xt, y, NULL) == r);
		free(x);
		free(y);
		free(xt);
		free(yt);
		free(a);
		free(b);
	}
	/* at 24 bits a false match among these few thousand shingles is
	 * rarer than one in a thousand pairs */
	assert_true(changed <= 1);
	/* a cut that joins two hashes of one page: the pair is one value
	 * twice, and both pages' copies of it count as shared */
	struct nearset p = { .has = true, .complete = true, .shingles = 2, .bits = 32, .n = 2 },
		       q = { .has = true, .complete = true, .shingles = 2, .bits = 32, .n = 2 };
	p.h[0] = 0x12345601;
	p.h[1] = 0x12345602;
	q.h[0] = 0x12345601;
	q.h[1] = 0x77000000;
	assert_true(nearset_resemblance(&p, &q, NULL) == 1.0 / 3);
	nearset_truncate(&p, 24);
	assert_true(p.h[0] == p.h[1] && p.bits == 24);
	assert_true(nearset_resemblance(&p, &q, NULL) == 1.0 / 3); /* the same hashes shared at 24 bits */
	q.h[0] = 0x123456F0;                                       /* another hash, equal in 24 bits */
	assert_true(nearset_resemblance(&p, &q, NULL) == 1.0 / 3);
	nearset_truncate(&q, 32); /* no more bits than held: nothing */
	assert_int_equal(q.bits, 32);
	assert_int_equal(q.h[0], 0x123456F0);
	/* two pages of one shingle each, equal in their top NEARSET_BITS
	 * bits: sets that small are stored at 32 bits, so they stay apart */
	struct nearset u = { .has = true, .complete = true, .shingles = 1, .bits = 32, .n = 1 },
		       v = { .has = true, .complete = true, .shingles = 1, .bits = 32, .n = 1 };
	u.h[0] = 0xABCDEF01;
	v.h[0] = 0xABCDEF02;
	nearset_to_stored(&u);
	nearset_to_stored(&v);
	assert_true(nearset_resemblance(&u, &v, NULL) == 0.0);
	nearset_truncate(&u, NEARSET_BITS);
	nearset_truncate(&v, NEARSET_BITS);
	assert_true(nearset_resemblance(&u, &v, NULL) == 1.0); /* what NEARSET_FULL_MAX prevents */
}

static bool share_band(const struct nearset *a, const struct nearset *b)
{
	for (int i = 0; i < NEARSET_BANDS; i++)
		if (a->band[i] == b->band[i])
			return true;
	return false;
}

/* The bands find pages of high resemblance and rarely low ones. */
static void test_bands(void **state)
{
	(void)state;
	int high = 0, low = 0;
	for (unsigned t = 0; t < 100; t++) {
		char *a = words(10000 * t, 300, 0), *b = words(10000 * t, 300, 100); /* R = 0.928 */
		char *c = words(10000 * t, 300, 3);                                  /* R = 0 */
		struct nearset *x = set_of(a, NEARSET_K), *y = set_of(b, NEARSET_K), *z = set_of(c, NEARSET_K);
		assert_true(nearset_resemblance(x, y, NULL) > 0.85); /* 256 of 296: estimated */
		high += share_band(x, y);
		low += share_band(x, z);
		free(x);
		free(y);
		free(z);
		free(a);
		free(b);
		free(c);
	}
	assert_true(high >= 97);
	assert_true(low <= 3);
}

/* All keys at once (nearset_band_keys, fsck's) are each band's own, for
 * a set decoded without its keys and for one that holds them. */
static void test_band_keys_at_once(void **state)
{
	(void)state;
	for (unsigned t = 0; t < 20; t++) {
		char *a = words(7000 * t, 40 + 30 * t, 0);
		struct nearset *x = set_of(a, NEARSET_K);
		uint8_t buf[NEARSET_MAX_BYTES];
		size_t len = nearset_encode(x, buf);
		struct nearset *y = malloc(sizeof *y);
		assert_non_null(y);
		assert_int_equal(nearset_decode(buf, len, y), 0);
		assert_false(y->bands);
		uint32_t keys[NEARSET_BANDS], held[NEARSET_BANDS];
		nearset_band_keys(y, keys);
		nearset_bands(y);
		nearset_band_keys(y, held);
		for (size_t b = 0; b < NEARSET_BANDS; b++) {
			assert_int_equal(keys[b], held[b]);
			y->bands = false;
			assert_int_equal(keys[b], nearset_band(y, b));
			y->bands = true;
		}
		free(y);
		free(x);
		free(a);
	}
}

/* Every path of the bins this machine has gives the portable path's bins:
 * sets of 0 to NEARSET_K hashes, random, sorted (with repeats, as a set
 * cut to NEARSET_BITS holds them), at 24 and at 32 bits (legacy); and a
 * bin of each set taken alone (a band's key) is the same bin. */
static void test_bins_paths_agree(void **state)
{
	(void)state;
	uint32_t *h = malloc(NEARSET_K * sizeof *h);
	assert_non_null(h);
	uint64_t x = 0x243F6A8885A308D3u;
	unsigned compared = 0;
	for (unsigned t = 0; t < 600; t++) {
		size_t n = t % (NEARSET_K + 1);
		bool legacy = t & 1;
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			h[i] = (uint32_t)x;
			if (!legacy)
				h[i] &= ~(UINT32_MAX >> NEARSET_BITS);
			if (t % 5 == 0 && i)
				h[i] = h[i - 1]; /* repeats: ties in every bin */
		}
		for (size_t i = 1; i < n; i++) /* insertion sort: ascending, as held */
			for (size_t j = i; j > 0 && h[j - 1] > h[j]; j--) {
				uint32_t tmp = h[j];
				h[j] = h[j - 1];
				h[j - 1] = tmp;
			}
		uint32_t want[NEARSET_BINS], got[NEARSET_BINS], one[NEARSET_ROWS];
		assert_true(nearset_bin_args_by(NEARSET_BINS_PORTABLE, h, n, legacy, want));
		for (int p = NEARSET_BINS_PORTABLE + 1; p < NEARSET_BINS_PATHS; p++) {
			memset(got, 0xa5, sizeof got);
			if (!nearset_bin_args_by((enum nearset_bins_path)p, h, n, legacy, got))
				continue;
			assert_memory_equal(got, want, sizeof want);
			compared++;
		}
		nearset_bin_args(h, n, legacy, 0, NEARSET_BINS, got);
		assert_memory_equal(got, want, sizeof want);
		size_t b = t % NEARSET_BANDS;
		nearset_bin_args(h, n, legacy, b * NEARSET_ROWS, NEARSET_ROWS, one);
		assert_memory_equal(one, want + b * NEARSET_ROWS, sizeof one);
	}
	assert_false(nearset_bin_args_by(NEARSET_BINS_PATHS, h, 1, false, (uint32_t[NEARSET_BINS]){ 0 }));
	print_message("bins: %u sets compared on paths beside the portable one\n", compared);
	free(h);
}

/* Through a store: b's simhash rows moved far away (as an edit can move
 * them); the bands still find it, at its real distance. */
struct far_move {
	uint64_t ino;
};

static int far_move_cb(struct wtx *w, void *p)
{
	struct far_move *m = p;
	struct inode in;
	struct fprec r;
	int rc = ns_get_inode(w->txn, w->st, m->ino, &in);
	if (rc || (rc = blob_get(w->txn, w->st, &in.blob, &r)))
		return rc;
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	near_sig_of_rec(&r, sig);
	assert_int_equal(near_set_get(w->txn, w->st, &in.blob, sig), 0);
	assert_true(sig->has_set);
	if (!(rc = near_remove(w->txn, w->st, &in.blob, r.simhash))) {
		sig->simhash = r.simhash ^ 0xFFFFull; /* 16 bits away */
		r.simhash = sig->simhash;
		if (!(rc = blob_put(w->txn, w->st, &in.blob, &r)))
			rc = near_add_sig(w->txn, w->st, &in.blob, sig);
	}
	free(sig);
	return rc;
}

static void test_found_by_bands(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char *a = th_page(31, 800, ""), *b = th_page(31, 800, "one more line of words");
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	assert_int_equal(sigq_drain(st), 0);
	struct far_move m = { ib };
	assert_int_equal(store_write(st, far_move_cb, &m), 0);
	size_t len;
	assert_int_equal(query_near(st, ia, &test_root, answer, &len), 0);
	answer[len] = 0;
	char want[128];
	const char *tab = strchr(answer, '\t');
	assert_non_null(tab);
	assert_true(strtoul(answer, NULL, 10) > SIMHASH_NEAR_DISTANCE);
	snprintf(want, sizeof want, "\t%s\tnear\t/b.html\n", th_page_res(a, b));
	assert_string_equal(tab, want);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	free(b);
	th_rmdir(dir);
}

/* Long pages (beyond NEARSET_K shingles) whose estimate is too close to
 * the line to call: the answer shows, and decides on, the exact
 * resemblance of both pages read back. */
static void test_read_back(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char *base = words(0, 2000, 0);
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "base.html", base);
	struct nearset *x = set_of(base, NEARSET_K);
	int tried = 0;
	/* m changed words: exact (1996 - 5m) / (1996 + 5m), 0.86 down to 0.74 */
	for (unsigned m = 30; m <= 60; m++) {
		char *v = words(0, 2000, 0);
		/* change m words, 40 apart from word 20: "w" -> "x" */
		for (unsigned c = 0, pos = 0, w = 0; c < m; w++) {
			char *p = v + pos;
			char *sp = strchr(p, ' ');
			if (w % 40 == 20) {
				*p = 'x';
				c++;
			}
			pos = (unsigned)((sp ? sp : p + strlen(p)) - v) + 1;
		}
		struct nearset *y = set_of(v, NEARSET_K);
		bool exact;
		double est = nearset_resemblance(x, y, &exact), want = (1996.0 - 5 * m) / (1996.0 + 5 * m);
		assert_false(exact);
		if (nearset_borderline(exact, est)) {
			char name[32], line[64];
			snprintf(name, sizeof name, "v%u.html", m);
			th_put_page(st, PD_ROOT_INO, name, v);
			size_t len;
			assert_int_equal(query_near(st, ib, &test_root, answer, &len), 0);
			answer[len] = 0;
			snprintf(line, sizeof line, "\t%.3f\tnear\t/%s\n", want, name);
			/* listed exactly when the exact value reaches the line */
			assert_true((strstr(answer, line) != NULL) == (want >= NEARSET_NEAR));
			assert_true((strstr(answer, name) != NULL) == (want >= NEARSET_NEAR));
			tried++;
		}
		free(y);
		free(v);
	}
	assert_true(tried >= 3);
	free(x);
	free(base);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* ---- the difference from a base's set (format 5) ---- */

/* What a whole format-4 row of text's set decodes to. */
static struct nearset *row_set_of(const char *text)
{
	struct nearset *x = set_of(text, NEARSET_K), *y = malloc(sizeof *y);
	assert_non_null(y);
	uint8_t buf[NEARSET_MAX_BYTES];
	nearset_to_stored(x);
	assert_int_equal(nearset_decode(buf, nearset_encode(x, buf), y), 0);
	free(x);
	return y;
}

/* The decoded sets are one (every field a row gives, every value). */
static void assert_identical(const struct nearset *x, const struct nearset *y)
{
	assert_int_equal(x->has, y->has);
	assert_int_equal(x->complete, y->complete);
	assert_int_equal(x->shingles, y->shingles);
	assert_int_equal(x->n, y->n);
	assert_int_equal(x->bits, y->bits);
	assert_int_equal(x->legacy_bands, y->legacy_bands);
	assert_int_equal(x->bands, y->bands);
	assert_memory_equal(x->h, y->h, sizeof x->h);
}

static const struct blobkey diff_base_key = { .md5 = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 },
					      .variant = 300 };

/* d as the difference from b: it decodes to d exactly and names the
 * base; the bytes it took (0: not expressible). */
static size_t diff_round(const struct nearset *d, const struct nearset *b)
{
	uint8_t buf[NEARSET_DIFF_MAX_BYTES];
	size_t len = nearset_diff_encode(d, b, &diff_base_key, buf);
	if (!len)
		return 0;
	assert_true(len <= NEARSET_DIFF_MAX_BYTES);
	assert_true(nearset_is_diff(buf, len));
	struct nearset *y = malloc(sizeof *y);
	assert_non_null(y);
	assert_int_equal(nearset_diff_decode(buf, len, b, y), 0);
	assert_identical(d, y);
	struct blobkey k;
	assert_int_equal(nearset_diff_base(buf, len, &k), 0);
	assert_true(blobkey_equal(&k, &diff_base_key));
	/* a whole row's decoder refuses it: it needs its base */
	assert_int_equal(nearset_decode(buf, len, y), -EINVAL);
	free(y);
	return len;
}

static size_t whole_bytes(const struct nearset *s)
{
	uint8_t buf[NEARSET_MAX_BYTES];
	return nearset_encode(s, buf);
}

static void test_diff_form(void **state)
{
	(void)state;
	char *a = words(0, 2000, 0), *b = words(0, 2000, 0), *far = words(90000, 2000, 0);
	memcpy(strstr(b, " w1000 ") + 1, "x1000", 5); /* one word changed: 5 shingles */
	struct nearset *x = row_set_of(a), *y = row_set_of(b), *z = row_set_of(far);
	/* a recrawl's page: a few values dropped and added, a tenth of the
	 * whole row or less */
	size_t len = diff_round(y, x), whole = whole_bytes(y);
	assert_true(whole > 240);
	assert_true(len < 60 && len * 5 < whole);
	/* the same set: the fields alone (format, parameters, the base's
	 * MD5, its variant in 2 bytes, shingles and drops in 1 each) */
	assert_int_equal(diff_round(x, x), 2 + 16 + 2 + 1 + 1);
	/* everything changed: exact all the same, and longer than the whole
	 * row (the caller keeps that) */
	assert_true(diff_round(z, x) > whole_bytes(z));
	assert_true(diff_round(x, z) > whole_bytes(x));
	free(x);
	free(y);
	free(z);
	free(a);
	free(b);
	free(far);
}

/* Complete sets of a few shingles, sets across NEARSET_K and across
 * NEARSET_FULL_MAX, and the precision each holds. */
static void test_diff_small_and_precision(void **state)
{
	(void)state;
	char *t6 = words(0, 10, 0), *t8 = words(0, 12, 0), *t40 = words(0, 44, 0), *t200 = words(0, 204, 0),
	     *t300 = words(0, 304, 0), *t1 = words(0, 3, 0);
	struct nearset *s6 = row_set_of(t6), *s8 = row_set_of(t8), *s40 = row_set_of(t40), *s200 = row_set_of(t200),
		       *s300 = row_set_of(t300), *s1 = row_set_of(t1);
	assert_true(s6->complete && s6->n == 6 && s6->bits == 32);
	assert_true(s40->complete && s40->n == 40 && s40->bits == NEARSET_BITS);
	assert_true(!s300->complete && s300->n == NEARSET_K);
	/* 32 bits on 32 bits */
	assert_true(diff_round(s8, s6) > 0);
	assert_true(diff_round(s6, s8) > 0);
	assert_true(diff_round(s1, s6) > 0);
	/* a set at NEARSET_BITS on a base at 32: the base's values cut */
	assert_true(diff_round(s40, s6) > 0);
	/* a set at 32 bits cannot be told from a base at NEARSET_BITS */
	uint8_t buf[NEARSET_DIFF_MAX_BYTES];
	assert_int_equal(nearset_diff_encode(s6, s40, &diff_base_key, buf), 0);
	/* complete on incomplete and back */
	assert_true(diff_round(s200, s300) > 0);
	assert_true(diff_round(s300, s200) > 0);
	assert_true(diff_round(s300, s40) > 0);
	/* a base decoded from formats 1-3 (32 bits, the old band keys) is
	 * no base */
	struct nearset *old = malloc(sizeof *old);
	assert_non_null(old);
	*old = *s8;
	old->legacy_bands = true;
	assert_int_equal(nearset_diff_encode(s6, old, &diff_base_key, buf), 0);
	size_t len = nearset_diff_encode(s6, s8, &diff_base_key, buf);
	assert_true(len > 0);
	struct nearset *y = malloc(sizeof *y);
	assert_non_null(y);
	assert_int_equal(nearset_diff_decode(buf, len, old, y), -EINVAL);
	assert_false(y->has);
	/* decoded against another base than its own: refused when the
	 * counts do not fit (here, more values dropped than it holds) */
	assert_int_equal(nearset_diff_decode(buf, len, s1, y), -EINVAL);
	free(old);
	free(y);
	free(s6), free(s8), free(s40), free(s200), free(s300), free(s1);
	free(t6), free(t8), free(t40), free(t200), free(t300), free(t1);
}

/* A damaged difference: short, long, a drop past the base's values, bits
 * left over, fields that do not parse. */
static void test_diff_damaged(void **state)
{
	(void)state;
	char *a = words(0, 600, 0), *b = words(0, 600, 7);
	struct nearset *x = row_set_of(a), *y = row_set_of(b), *out = malloc(sizeof *out);
	assert_non_null(out);
	uint8_t buf[NEARSET_DIFF_MAX_BYTES + 1];
	size_t len = nearset_diff_encode(y, x, &diff_base_key, buf);
	assert_true(len > 30);
	assert_int_equal(nearset_diff_decode(buf, len, x, out), 0);
	assert_int_equal(nearset_diff_decode(buf, len - 1, x, out), -EINVAL);
	buf[len] = 0;
	assert_int_equal(nearset_diff_decode(buf, len + 1, x, out), -EINVAL);
	assert_int_equal(nearset_diff_decode(buf, 17, x, out), -EINVAL);
	struct blobkey k;
	assert_int_equal(nearset_diff_base(buf, 17, &k), -EINVAL);
	buf[18] = 0x80; /* the variant's varint runs on into the shingles */
	buf[19] |= 0x80;
	buf[20] |= 0x80;
	buf[21] |= 0x80;
	buf[22] = 0x80;
	assert_int_equal(nearset_diff_decode(buf, len, x, out), -EINVAL);
	assert_false(out->has);
	free(x), free(y), free(out), free(a), free(b);
}

/* Stored sets of random values (repeats and all, as truncation makes
 * them) against random bases sharing part of them: every difference
 * decodes to its set exactly. */
static void test_diff_random(void **state)
{
	(void)state;
	struct nearset *b = calloc(1, sizeof *b), *d = calloc(1, sizeof *d);
	assert_non_null(b);
	assert_non_null(d);
	uint64_t x = 88172645463325252ull;
	unsigned expressible = 0;
	for (int round = 0; round < 3000; round++) {
		struct nearset *v[2] = { b, d };
		for (int w = 0; w < 2; w++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			uint32_t shingles = 1 + (uint32_t)(x % 600);
			memset(v[w], 0, sizeof *v[w]);
			v[w]->has = true;
			v[w]->shingles = shingles;
			v[w]->complete = shingles <= NEARSET_K;
			v[w]->n = v[w]->complete ? shingles : NEARSET_K;
			v[w]->bits = v[w]->n <= NEARSET_FULL_MAX ? 32 : NEARSET_BITS;
			uint32_t mask = v[w]->bits == 32 ? UINT32_MAX : ~(UINT32_MAX >> v[w]->bits);
			for (uint32_t i = 0; i < v[w]->n; i++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				/* from the base half the time, from a narrow range
				 * (repeats once cut) the other */
				uint32_t h = w && i < b->n && (x & 1) ? b->h[(x >> 8) % b->n] : (uint32_t)(x >> 32);
				if ((x >> 3) % 5 == 0)
					h = (uint32_t)((x >> 20) % 64) << 26;
				v[w]->h[i] = h & mask;
			}
			/* ascending */
			for (uint32_t i = 1; i < v[w]->n; i++)
				for (uint32_t j = i; j > 0 && v[w]->h[j - 1] > v[w]->h[j]; j--) {
					uint32_t t = v[w]->h[j];
					v[w]->h[j] = v[w]->h[j - 1];
					v[w]->h[j - 1] = t;
				}
		}
		/* what a whole row of d decodes to */
		uint8_t buf[NEARSET_MAX_BYTES];
		assert_int_equal(nearset_decode(buf, nearset_encode(d, buf), d), 0);
		assert_int_equal(nearset_decode(buf, nearset_encode(b, buf), b), 0);
		expressible += diff_round(d, b) > 0;
	}
	assert_true(expressible > 2000);
	free(b);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_short_exact),
		cmocka_unit_test(test_long_estimate),
		cmocka_unit_test(test_stored_form),
		cmocka_unit_test(test_stored_form_edges),
		cmocka_unit_test(test_truncated_compare),
		cmocka_unit_test(test_bands),
		cmocka_unit_test(test_band_keys_at_once),
		cmocka_unit_test(test_bins_paths_agree),
		cmocka_unit_test(test_found_by_bands),
		cmocka_unit_test(test_read_back),
		cmocka_unit_test(test_diff_form),
		cmocka_unit_test(test_diff_small_and_precision),
		cmocka_unit_test(test_diff_damaged),
		cmocka_unit_test(test_diff_random),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
