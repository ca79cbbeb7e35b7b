/* cbf.c - blocked counting Bloom filter with 4-bit saturating counters.
 *
 * Counter layout. Counters are 4 bits, two to a byte: counter i lives in
 * byte i/2 of the counter area, in the low nibble when i is even. 128
 * counters make one 64-byte line, and the counter area starts on a page
 * boundary (the file header is 4096 bytes), so a line never straddles two
 * cache lines. A key touches lines_per_key lines (1 or 2) and
 * kk = k / lines_per_key counters in each, so a lookup costs one or two cache
 * misses, which cbf_maybe_contains_batch() overlaps across many keys.
 *
 * Positions. From the 16-byte key and the geometry seed:
 *   h0 = XXH3_128bits_withSeed(key, 16, seed)
 *   line[0] = (h0.low64 * nlines) >> 64, line[1] = (h0.high64 * nlines) >> 64
 * (a multiply-shift range reduction: no division, and unbiased to within
 * nlines / 2^64). The in-line offsets are 7-bit fields taken, lowest bits
 * first, from a bit stream: with one line per key it starts with the unused
 * h0.high64; then come the halves (low64 first) of
 *   XXH3_128bits_withSeed(key, 16, seed ^ ((r + 1) * 0x9E3779B97F4A7C15))
 * for r = 0, 1, 2, ... as far as needed. Each 64-bit word gives nine fields
 * (its top bit is unused). Within one line the kk offsets are distinct: a
 * field equal to an offset already taken for that line is skipped. Distinct
 * offsets lower the false-positive rate a little (a key never wastes a
 * counter on itself); cbf_theoretical_fpr() models exactly this choice. The
 * lines are independent, so both lines of a key may be the same line (with
 * probability 1/nlines), and then one counter may appear twice among its
 * positions; add and remove apply such a counter twice. XXH3's output is
 * stable across xxHash releases since 0.8.0, so positions stored in
 * fingerprint records stay valid.
 *
 * Lookups. A key is absent as soon as one of its counters is zero, and at
 * design load most absent keys are found so at the first or second counter
 * of line 0. cbf_maybe_contains_batch() therefore hashes and prefetches
 * line 0 of each key well ahead of testing it, draws offsets only as it
 * tests them, and asks for line 1 only for the few keys that pass line 0
 * (every present key, about one absent key in a hundred): an absent key
 * costs one memory access, and the accesses of many keys overlap.
 *
 * Saturation and the exact-count table. A counter counts up to 14 by itself.
 * The increment that takes it from 14 to 15 also stores the exact count 15
 * in the caller's table (ops->put), and every further increment goes through
 * that table (get n, put n + 1) while the counter stays at 15. A decrement of
 * a counter at 15 reads the exact count n: if n - 1 is 14 the entry is
 * deleted and the counter drops to 14, otherwise n - 1 is stored. So deletes
 * stay exact whatever the load, and the table only holds the (rare) counters
 * at 15. Without ops (a filter with no exact table) a counter at 15 is stuck
 * there: it saturates, and the filter stays free of false negatives.
 *
 * Transactions. The filter lives in a MAP_SHARED mapping, outside LMDB, so an
 * aborted store transaction must undo its counter changes by hand: add and
 * remove append the old value of each counter to a struct cbf_undo before
 * they change it, and cbf_undo_rollback() writes them back in reverse order.
 * Changes to the exact-count table belong to the caller's transaction and are
 * undone with it. cbf_add() and cbf_remove() check every counter before they
 * change any, so -EUCLEAN (the filter and the store disagree) leaves both the
 * filter and the exact table untouched.
 *
 * Concurrency. One writer at a time; lookups may run at the same time. Every
 * counter byte is read and written with relaxed single-byte atomics, so a
 * reader sees each byte either before or after a change, never torn; the
 * writer's read-modify-write of a byte is safe because it is the only writer.
 */
#include "cbf.h"

#include "byteorder.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Inline xxHash: a position costs two 16-byte hashes, and a call through the
 * shared library would be a large part of a lookup's time. */
#define XXH_INLINE_ALL
#include <xxhash.h>

/* Line indices are stored as uint32_t in struct cbf_pos. */
#define CBF_MAX_NLINES (UINT64_C(1) << 32)
/* Seed of the position hashes in a geometry from cbf_geometry_for(). Any
 * value works; a fixed one makes filters reproducible. */
#define CBF_DEFAULT_SEED UINT64_C(0x7064636266736564)
/* Step between the seeds of the offset hashes (2^64 / golden ratio). */
#define CBF_SEED_STEP UINT64_C(0x9E3779B97F4A7C15)

/* File header, CBF_HEADER_BYTES long, every integer little-endian:
 *
 *   offset size field
 *        0    8 magic "PDCBF001"
 *        8    4 version (CBF_VERSION)
 *       12    4 k
 *       16    4 lines_per_key
 *       20    4 reserved, 0
 *       24    8 nlines
 *       32    8 seed
 *       40    8 generation (written by cbf_sync)
 *       48      zero up to 4096
 *
 * The counters follow: nlines * 64 bytes, so the file is exactly
 * CBF_HEADER_BYTES + nlines * CBF_LINE_BYTES bytes long. */
static const char cbf_magic[8] = { 'P', 'D', 'C', 'B', 'F', '0', '0', '1' };
#define CBF_VERSION 1
#define HDR_VERSION 8
#define HDR_K 12
#define HDR_LPK 16
#define HDR_RESERVED 20
#define HDR_NLINES 24
#define HDR_SEED 32
#define HDR_GENERATION 40

struct cbf {
	uint8_t *map;          /* the whole mapping */
	size_t map_len;
	uint8_t *ctr;          /* nlines * 64 bytes of counters, page-aligned */
	struct cbf_geometry g;
	unsigned kk;           /* counters per line of a key: k / lines_per_key */
	uint64_t generation;
	bool readonly;
	bool anon;             /* no file: map holds the counters only */
};

static void header_encode(uint8_t *h, const struct cbf_geometry *g, uint64_t generation)
{
	memset(h, 0, CBF_HEADER_BYTES);
	memcpy(h, cbf_magic, sizeof cbf_magic);
	put_le32(h + HDR_VERSION, CBF_VERSION);
	put_le32(h + HDR_K, g->k);
	put_le32(h + HDR_LPK, g->lines_per_key);
	put_le32(h + HDR_RESERVED, 0);
	put_le64(h + HDR_NLINES, g->nlines);
	put_le64(h + HDR_SEED, g->seed);
	put_le64(h + HDR_GENERATION, generation);
}

static bool geometry_valid(const struct cbf_geometry *g)
{
	if (g->lines_per_key < 1 || g->lines_per_key > CBF_MAX_LINES)
		return false;
	if (g->k < g->lines_per_key || g->k > CBF_MAX_K || g->k % g->lines_per_key)
		return false;
	return g->nlines >= 1 && g->nlines <= CBF_MAX_NLINES;
}

/* -EINVAL unless h is a version-1 filter header with a sane geometry. */
static int header_decode(const uint8_t *h, struct cbf_geometry *g, uint64_t *generation)
{
	if (memcmp(h, cbf_magic, sizeof cbf_magic) != 0)
		return -EINVAL;
	if (get_le32(h + HDR_VERSION) != CBF_VERSION || get_le32(h + HDR_RESERVED) != 0)
		return -EINVAL;
	g->k = get_le32(h + HDR_K);
	g->lines_per_key = get_le32(h + HDR_LPK);
	g->nlines = get_le64(h + HDR_NLINES);
	g->seed = get_le64(h + HDR_SEED);
	*generation = get_le64(h + HDR_GENERATION);
	return geometry_valid(g) ? 0 : -EINVAL;
}

/* ---- counters ---- */

static inline unsigned ctr_get(const struct cbf *f, uint64_t idx)
{
	uint8_t b = __atomic_load_n(&f->ctr[idx >> 1], __ATOMIC_RELAXED);
	return (b >> ((idx & 1) << 2)) & 0xF;
}

/* Only the single writer calls this, so the load-modify-store of the shared
 * byte cannot lose a concurrent change to the other nibble. */
static inline void ctr_set(struct cbf *f, uint64_t idx, unsigned v)
{
	uint8_t *p = &f->ctr[idx >> 1];
	unsigned shift = (unsigned)(idx & 1) << 2;
	uint8_t b = __atomic_load_n(p, __ATOMIC_RELAXED);
	b = (uint8_t)((b & ~(0xFu << shift)) | ((v & 0xFu) << shift));
	__atomic_store_n(p, b, __ATOMIC_RELAXED);
}

static uint64_t ncounters(const struct cbf *f)
{
	return f->g.nlines * CBF_LINE_COUNTERS;
}

unsigned cbf_get(const struct cbf *f, uint64_t idx)
{
	return idx < ncounters(f) ? ctr_get(f, idx) : 0;
}

/* ---- positions ---- */

__extension__ typedef unsigned __int128 u128;

/* The high half of h * n: h scaled into 0 .. n-1 without a division. */
static inline uint32_t range_reduce(uint64_t h, uint64_t n)
{
	return (uint32_t)(((u128)h * n) >> 64);
}

/* The start of a key's positions: its lines and the first word or two of
 * its offset stream. Computing this much ahead of the lookup takes the
 * hashing off the path from the counters' arrival to the answer. */
struct probe {
	const uint8_t *key;
	uint32_t line[CBF_MAX_LINES];
	uint64_t first;   /* the first offset word */
	uint64_t second;  /* the second, with two lines per key */
};

/* The lines of key in a filter of nlines lines with shape's seed and
 * lines per key (shape may be another filter of the same shape). */
static inline void probe_start_in(const struct cbf *shape, uint64_t nlines, const uint8_t *key,
				  struct probe *p)
{
	XXH128_hash_t h0 = XXH3_128bits_withSeed(key, 16, shape->g.seed);
	p->key = key;
	p->line[0] = range_reduce(h0.low64, nlines);
	if (shape->g.lines_per_key == 2) {
		XXH128_hash_t h1 = XXH3_128bits_withSeed(key, 16, shape->g.seed ^ CBF_SEED_STEP);
		p->line[1] = range_reduce(h0.high64, nlines);
		p->first = h1.low64;
		p->second = h1.high64;
	} else {
		p->line[1] = 0;
		p->first = h0.high64;
		p->second = 0;
	}
}

static inline void probe_start(const struct cbf *f, const uint8_t *key, struct probe *p)
{
	probe_start_in(f, f->g.nlines, key, p);
}

/* The words of the offset stream after the first (see the top comment).
 * Offsets are read one field at a time, so a lookup hashes no further than
 * the counters it tests: most absent keys stop at the first or second. */
struct offstream {
	const uint8_t *key;
	uint64_t seed;
	uint64_t spare;     /* high half of the last hash, not yet used */
	unsigned nhashes;   /* offset hashes taken so far */
	bool has_spare;
};

static uint64_t stream_word(struct offstream *s)
{
	if (s->has_spare) {
		s->has_spare = false;
		return s->spare;
	}
	uint64_t seed = s->seed ^ ((uint64_t)(s->nhashes + 1) * CBF_SEED_STEP);
	XXH128_hash_t h = XXH3_128bits_withSeed(s->key, 16, seed);
	s->nhashes++;
	s->spare = h.high64;
	s->has_spare = true;
	return h.low64;
}

/* The reading position in the stream and the offsets taken in the current
 * line: scalars only, so that they stay in registers. */
struct offreader {
	uint64_t cur;       /* unused fields of the current word, lowest first */
	unsigned left;      /* how many */
	uint64_t taken_lo;  /* offsets 0..63 taken in this line */
	uint64_t taken_hi;  /* offsets 64..127 */
};

static inline void reader_init(const struct cbf *f, const struct probe *p,
			       struct offstream *s, struct offreader *r)
{
	bool two = f->g.lines_per_key == 2;
	/* with two lines the first offset hash has been taken by probe_start */
	*s = (struct offstream){ .key = p->key, .seed = f->g.seed, .spare = p->second,
				 .nhashes = two, .has_spare = two };
	r->cur = p->first;
	r->left = 9;
	r->taken_lo = r->taken_hi = 0;
}

static inline void reader_new_line(struct offreader *r)
{
	r->taken_lo = r->taken_hi = 0;
}

/* The next offset of the current line: a field already taken is skipped.
 * A repeat is rare (about one key in ten has one), so that branch is well
 * predicted. */
static inline unsigned reader_next(struct offreader *r, struct offstream *s)
{
	for (;;) {
		if (r->left == 0) {
			r->cur = stream_word(s);
			r->left = 9;
		}
		unsigned o = (unsigned)(r->cur & 0x7F);
		r->cur >>= 7;
		r->left--;
		/* Masks, not branches: whether o is in the high half is a coin
		 * toss that a branch would mispredict half the time. */
		uint64_t bit = UINT64_C(1) << (o & 63), high = -(uint64_t)(o >> 6);
		uint64_t taken = (r->taken_hi & high) | (r->taken_lo & ~high);
		if ((taken & bit) == 0) {
			r->taken_hi |= bit & high;
			r->taken_lo |= bit & ~high;
			return o;
		}
	}
}

void cbf_positions(const struct cbf *f, const uint8_t key[16], struct cbf_pos *out)
{
	unsigned lpk = f->g.lines_per_key, kk = f->kk;
	struct probe p;
	struct offstream s;
	struct offreader r;

	probe_start(f, key, &p);
	reader_init(f, &p, &s, &r);
	out->nlines = (uint8_t)lpk;
	out->k = (uint8_t)f->g.k;
	out->line[0] = p.line[0];
	out->line[1] = p.line[1];
	for (unsigned l = 0; l < lpk; l++) {
		reader_new_line(&r);
		for (unsigned t = 0; t < kk; t++)
			out->off[l * kk + t] = (uint8_t)reader_next(&r, &s);
	}
}

uint64_t cbf_pos_counter(const struct cbf_pos *pos, unsigned j)
{
	unsigned kk = pos->nlines ? pos->k / pos->nlines : pos->k;
	unsigned l = kk ? j / kk : 0;
	if (l >= CBF_MAX_LINES)
		l = CBF_MAX_LINES - 1;
	return (uint64_t)pos->line[l] * CBF_LINE_COUNTERS + pos->off[j % CBF_MAX_K];
}

/* A stored position may come from a damaged record: check it against f and
 * list its counter indices. */
static int pos_indices(const struct cbf *f, const struct cbf_pos *pos, uint64_t *idx)
{
	if (pos->nlines < 1 || pos->nlines > CBF_MAX_LINES)
		return -EINVAL;
	if (pos->k < pos->nlines || pos->k > CBF_MAX_K || pos->k % pos->nlines)
		return -EINVAL;
	for (unsigned l = 0; l < pos->nlines; l++)
		if (pos->line[l] >= f->g.nlines)
			return -EINVAL;
	for (unsigned j = 0; j < pos->k; j++) {
		if (pos->off[j] >= CBF_LINE_COUNTERS)
			return -EINVAL;
		idx[j] = cbf_pos_counter(pos, j);
	}
	return 0;
}

/* A prefetch has no visible effect, so GCC's side-effect analysis judges a
 * function that only prefetches to be pure, and deletes calls to it from
 * callers that it can see. Always inlining keeps the instruction where it
 * is needed inside this file. */
static inline __attribute__((always_inline)) void prefetch_line(const struct cbf *f,
								uint32_t line)
{
	__builtin_prefetch(f->ctr + (uint64_t)line * CBF_LINE_BYTES, 0, 3);
}

static inline __attribute__((always_inline)) void prefetch_pos(const struct cbf *f,
							       const struct cbf_pos *pos)
{
	for (unsigned l = 0; l < pos->nlines && l < CBF_MAX_LINES; l++)
		if (pos->line[l] < f->g.nlines)
			prefetch_line(f, pos->line[l]);
}

void cbf_prefetch(const struct cbf *f, const struct cbf_pos *pos)
{
	prefetch_pos(f, pos);
	/* An empty statement with a side effect, so that calls from other
	 * files survive link-time optimisation (see above). */
	__asm__ __volatile__("" : : "r"(f->ctr));
}

static inline unsigned line_get(const uint8_t *line, unsigned o)
{
	uint8_t byte = __atomic_load_n(&line[o >> 1], __ATOMIC_RELAXED);
	return (byte >> ((o & 1) << 2)) & 0xF;
}

bool cbf_maybe_contains(const struct cbf *f, const struct cbf_pos *pos)
{
	unsigned lpk = pos->nlines, k = pos->k;
	/* A malformed position cannot prove absence; "maybe" is the safe answer. */
	if (lpk < 1 || lpk > CBF_MAX_LINES || k > CBF_MAX_K || (k & (lpk - 1)))
		return true;
	for (unsigned l = 0; l < lpk; l++)
		if (pos->line[l] >= f->g.nlines)
			return true;
	/* Line 1 is needed only if line 0 passes, but asking for it now costs
	 * nothing while line 0 is on its way, and saves a second wait then. */
	if (lpk == 2)
		prefetch_line(f, pos->line[1]);
	unsigned kk = lpk == 2 ? k >> 1 : k;
	for (unsigned l = 0; l < lpk; l++) {
		const uint8_t *line = f->ctr + (uint64_t)pos->line[l] * CBF_LINE_BYTES;
		for (unsigned t = 0; t < kk; t++)
			if (line_get(line, pos->off[l * kk + t] & 0x7F) == 0)
				return false;
	}
	return true;
}

/* Whether the next kk offsets drawn by r all hit non-zero counters of
 * line of the counters ctr (shape gives kk). */
static inline bool line_test(const struct cbf *shape, const uint8_t *ctr, uint32_t line,
			     struct offreader *r, struct offstream *s)
{
	const uint8_t *base = ctr + (uint64_t)line * CBF_LINE_BYTES;
	reader_new_line(r);
	for (unsigned t = 0; t < shape->kk; t++)
		if (line_get(base, reader_next(r, s)) == 0)
			return false;
	return true;
}

/* A key in flight in cbf_maybe_contains_batch(). */
struct inflight {
	const uint8_t *ctr;  /* the counters of the filter that holds the key */
	struct probe p;
	struct offstream s;
	struct offreader r;  /* where line 0's offsets stopped, for line 1 */
	bool pending;        /* line 0 passed, line 1 still to test */
};

/* Key into flight in f, whose seed, k and lines per key are shape's. */
static inline void inflight_start(const struct cbf *shape, const struct cbf *f, const uint8_t *key,
				  struct inflight *e)
{
	const uint8_t *ctr = f->ctr;
	e->ctr = ctr;
	probe_start_in(shape, f->g.nlines, key, &e->p);
	__builtin_prefetch(ctr + (uint64_t)e->p.line[0] * CBF_LINE_BYTES, 0, 3);
}

/* Line 0 of key i is prefetched BATCH_AHEAD0 keys before it is tested. Only
 * a key that passes line 0 (all present keys, about one absent key in a
 * hundred at design load) has its line 1 prefetched, and tested
 * BATCH_AHEAD1 keys later: absent keys, the common case, cost one memory
 * access instead of two. */
#define BATCH_AHEAD0 16
#define BATCH_AHEAD1 8
#define BATCH_RING 32  /* > BATCH_AHEAD0 + BATCH_AHEAD1, a power of two */

/* The batch lookup, key i in filter fs[i * stride]: stride 0 for one
 * filter, 1 for a filter per key (the leaves of a growing filter). The
 * seed, k and lines per key come from shape (NULL: each key's own
 * filter's); only the counters and the line count from fs. Always inlined,
 * so that each caller has a copy for its stride and shape: with one shape
 * the filter's fields stay in registers, and a key in flight carries no
 * more than its counters' address. */
/* How contains_batch finds key i's filter: fs[i * stride], or, with a
 * table, routed by the key's leading bits. */
struct router {
	const struct cbf *const *table; /* 2^bits entries; NULL: use fs */
	unsigned bits;
	cbf_route_fn fallback;
	const void *ctx;
};

static inline __attribute__((always_inline)) const struct cbf *
filter_of(const struct router *rt, const struct cbf *const *fs, size_t stride, size_t i,
	  const uint8_t *key)
{
	if (!rt->table)
		return fs[i * stride];
	uint64_t top;
	memcpy(&top, key, 8);
	top = __builtin_bswap64(top); /* the leading bits, big-endian */
	const struct cbf *f = rt->table[rt->bits ? top >> (64 - rt->bits) : 0];
	return f ? f : rt->fallback(rt->ctx, key);
}

static inline __attribute__((always_inline)) size_t
contains_batch(const struct cbf *const *fs, size_t stride, const struct router *rt,
	       const struct cbf *shape, const uint8_t *keys, size_t n, bool *results)
{
	struct inflight ring[BATCH_RING];
	const struct cbf *shapes[BATCH_RING]; /* used only without a shape */
	size_t hits = 0;
#define SHAPE_OF(i) (shape ? shape : shapes[(i) % BATCH_RING])
#define START(i)                                                                     \
	do {                                                                         \
		const struct cbf *f_ = filter_of(rt, fs, stride, (i), keys + 16 * (i)); \
		if (!shape)                                                          \
			shapes[(i) % BATCH_RING] = f_;                               \
		inflight_start(shape ? shape : f_, f_, keys + 16 * (i), &ring[(i) % BATCH_RING]); \
	} while (0)

	for (size_t i = 0; i < n && i < BATCH_AHEAD0; i++)
		START(i);
	for (size_t i = 0; i < n + BATCH_AHEAD1; i++) {
		if (i + BATCH_AHEAD0 < n)
			START(i + BATCH_AHEAD0);
		if (i < n) {
			/* the reader in locals (registers); kept only if needed */
			struct inflight *e = &ring[i % BATCH_RING];
			const struct cbf *sh = SHAPE_OF(i);
			struct offstream s;
			struct offreader r;
			reader_init(sh, &e->p, &s, &r);
			bool ok = line_test(sh, e->ctr, e->p.line[0], &r, &s);
			e->pending = ok && sh->g.lines_per_key == 2;
			if (e->pending) {
				__builtin_prefetch(e->ctr + (uint64_t)e->p.line[1] * CBF_LINE_BYTES, 0, 3);
				e->s = s;
				e->r = r;
			} else {
				results[i] = ok;
				hits += ok;
			}
		}
		if (i >= BATCH_AHEAD1) {
			size_t j = i - BATCH_AHEAD1;
			struct inflight *e = &ring[j % BATCH_RING];
			if (e->pending) {
				bool ok = line_test(SHAPE_OF(j), e->ctr, e->p.line[1], &e->r, &e->s);
				results[j] = ok;
				hits += ok;
			}
		}
	}
	return hits;
#undef START
#undef SHAPE_OF
}

size_t cbf_maybe_contains_batch(const struct cbf *f, const uint8_t *keys, size_t n,
				bool *results)
{
	static const struct router none = { NULL, 0, NULL, NULL };
	return contains_batch(&f, 0, &none, f, keys, n, results);
}

size_t cbf_maybe_contains_each(const struct cbf *const *fs, const uint8_t *keys, size_t n,
			       bool *results)
{
	static const struct router none = { NULL, 0, NULL, NULL };
	return contains_batch(fs, 1, &none, NULL, keys, n, results);
}

bool cbf_same_shape(const struct cbf *a, const struct cbf *b)
{
	return a->g.k == b->g.k && a->g.lines_per_key == b->g.lines_per_key &&
	       a->g.seed == b->g.seed;
}

size_t cbf_maybe_contains_routed(const struct cbf *shape, const struct cbf *const *table,
				 unsigned bits, cbf_route_fn fallback, const void *ctx,
				 const uint8_t *keys, size_t n, bool *results)
{
	const struct router rt = { table, bits, fallback, ctx };
	return contains_batch(NULL, 0, &rt, shape, keys, n, results);
}

/* ---- theory and sizing ---- */

/* Probability that kk distinct offsets of a query all hit non-zero counters
 * in a line whose load (keys placed in it) is Poisson with mean lambda, each
 * placing kk distinct uniformly random offsets.
 *
 * With i keys, a given set of j counters is still all zero with probability
 * r_j^i, r_j = C(128-j, kk) / C(128, kk) (each key's kk-subset avoids them).
 * By inclusion-exclusion the query's kk counters are all non-zero with
 * probability sum_j (-1)^j C(kk, j) r_j^i, and averaging over the Poisson
 * load turns r_j^i into exp(-lambda (1 - r_j)). Long double keeps the
 * alternating sum accurate: its terms are at most C(16, 8) in size. */
double cbf_blocked_line_fpr(double lambda, unsigned kk, unsigned slots)
{
	long double sum = 0, binom = 1, r = 1;
	for (unsigned j = 0; j <= kk; j++) {
		long double term = binom * expl(-(long double)lambda * (1 - r));
		sum += (j & 1) ? -term : term;
		binom = binom * (kk - j) / (j + 1);
		r = r * (slots - kk - j) / (slots - j);
	}
	if (sum < 0)
		sum = 0;
	if (sum > 1)
		sum = 1;
	return (double)sum;
}

/* A query key lands on lines_per_key independent random lines, so the rate
 * for one line is raised to that power. The load is over the line as chosen
 * by the query, not a line known to hold the key. */
double cbf_theoretical_fpr(const struct cbf_geometry *g, uint64_t n)
{
	if (n == 0 || !geometry_valid(g))
		return 0;
	double lambda = (double)n * g->lines_per_key / (double)g->nlines;
	double p = cbf_blocked_line_fpr(lambda, g->k / g->lines_per_key, CBF_LINE_COUNTERS);
	return g->lines_per_key == 2 ? p * p : p;
}

/* Fewest lines that hold `expected` keys at or below target with k counters
 * per key; 0 if even CBF_MAX_NLINES lines are not enough. The rate only falls
 * as lines are added, so an exponential then binary search finds it. */
static uint64_t min_lines(uint64_t expected, double target, uint32_t k, uint32_t lpk)
{
	struct cbf_geometry g = { .nlines = 1, .k = k, .lines_per_key = lpk };
	uint64_t lo = 0, hi = 1;

	while (cbf_theoretical_fpr(&g, expected) > target) {
		if (hi == CBF_MAX_NLINES)
			return 0;
		lo = hi;
		hi = hi * 2 > CBF_MAX_NLINES ? CBF_MAX_NLINES : hi * 2;
		g.nlines = hi;
	}
	/* invariant: lo fails (or is 0), hi meets the target */
	while (hi - lo > 1) {
		g.nlines = lo + (hi - lo) / 2;
		if (cbf_theoretical_fpr(&g, expected) > target)
			lo = g.nlines;
		else
			hi = g.nlines;
	}
	return hi;
}

int cbf_geometry_for(uint64_t expected, double target_fpr, uint32_t lines_per_key,
		     struct cbf_geometry *out)
{
	if (lines_per_key == 0)
		lines_per_key = 2;
	if (lines_per_key > CBF_MAX_LINES || !(target_fpr > 0 && target_fpr < 1))
		return -EINVAL;
	if (expected == 0)
		expected = 1;

	uint64_t best_lines = 0;
	uint32_t best_k = 0;
	/* Smaller k first: on a tie the cheaper key wins. */
	for (uint32_t k = lines_per_key; k <= CBF_MAX_K; k += lines_per_key) {
		uint64_t lines = min_lines(expected, target_fpr, k, lines_per_key);
		if (lines && (best_lines == 0 || lines < best_lines)) {
			best_lines = lines;
			best_k = k;
		}
	}
	if (best_lines == 0)
		return -EFBIG;
	out->nlines = best_lines;
	out->k = best_k;
	out->lines_per_key = lines_per_key;
	out->seed = CBF_DEFAULT_SEED;
	return 0;
}

/* ---- life cycle ---- */

static int cbf_alloc(const struct cbf_geometry *g, uint64_t generation, bool readonly,
		     struct cbf **out)
{
	struct cbf *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	f->g = *g;
	f->kk = g->k / g->lines_per_key;
	f->generation = generation;
	f->readonly = readonly;
	*out = f;
	return 0;
}

static int create_anon(const struct cbf_geometry *g, uint64_t generation, struct cbf **out)
{
	struct cbf *f;
	int rc = cbf_alloc(g, generation, false, &f);
	if (rc)
		return rc;
	f->anon = true;
	f->map_len = (size_t)(g->nlines * CBF_LINE_BYTES);
	f->map = mmap(NULL, f->map_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (f->map == MAP_FAILED) {
		rc = -errno;
		free(f);
		return rc;
	}
	/* Huge pages spare a TLB miss per lookup in a filter far bigger than
	 * the TLB reach; a refusal only costs speed. */
	(void)madvise(f->map, f->map_len, MADV_HUGEPAGE);
	f->ctr = f->map;
	*out = f;
	return 0;
}

/* Map fd, which is exactly len bytes long. */
static int map_file(struct cbf *f, int fd, size_t len)
{
	int prot = f->readonly ? PROT_READ : PROT_READ | PROT_WRITE;
	void *m = mmap(NULL, len, prot, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	f->map = m;
	f->map_len = len;
	f->ctr = f->map + CBF_HEADER_BYTES;
	/* As for anonymous filters (see create_anon): where the file system
	 * keeps large folios, the page cache reads the file in huge pages. */
	(void)madvise(f->map, f->map_len, MADV_HUGEPAGE);
	return 0;
}

/* Size the new file's blocks now: a store into a hole of a full disk would
 * otherwise come as SIGBUS through the mapping. */
static int reserve_file(int fd, size_t len)
{
	if (ftruncate(fd, (off_t)len) != 0)
		return -errno;
	int err = posix_fallocate(fd, 0, (off_t)len);
	if (err == EOPNOTSUPP || err == EINVAL)
		return 0;
	return -err;
}

int cbf_create(const char *path, const struct cbf_geometry *g, uint64_t generation,
	       struct cbf **out)
{
	if (!g || !out || !geometry_valid(g))
		return -EINVAL;
	if (!path)
		return create_anon(g, generation, out);

	struct cbf *f;
	int rc = cbf_alloc(g, generation, false, &f);
	if (rc)
		return rc;
	/* Unlink rather than truncate: a reader that still maps the old file
	 * keeps a valid mapping instead of taking SIGBUS. */
	if (unlink(path) != 0 && errno != ENOENT) {
		rc = -errno;
		free(f);
		return rc;
	}
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		free(f);
		return rc;
	}
	size_t len = (size_t)(CBF_HEADER_BYTES + g->nlines * CBF_LINE_BYTES);
	rc = reserve_file(fd, len);
	if (rc == 0)
		rc = map_file(f, fd, len);
	close(fd);
	if (rc) {
		unlink(path);
		free(f);
		return rc;
	}
	header_encode(f->map, g, generation);
	*out = f;
	return 0;
}

int cbf_open(const char *path, bool readonly, struct cbf **out)
{
	uint8_t hdr[CBF_HEADER_BYTES];
	struct cbf_geometry g;
	uint64_t generation;
	struct stat st;
	int rc;

	if (!path || !out)
		return -EINVAL;
	int fd = open(path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		goto out_close;
	}
	rc = -EINVAL;
	if (!S_ISREG(st.st_mode) || st.st_size < CBF_HEADER_BYTES)
		goto out_close;
	if (pread(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr) {
		rc = -EIO;
		goto out_close;
	}
	rc = header_decode(hdr, &g, &generation);
	if (rc)
		goto out_close;
	rc = -EINVAL;
	if ((uint64_t)st.st_size != CBF_HEADER_BYTES + g.nlines * CBF_LINE_BYTES)
		goto out_close;

	struct cbf *f;
	rc = cbf_alloc(&g, generation, readonly, &f);
	if (rc)
		goto out_close;
	rc = map_file(f, fd, (size_t)st.st_size);
	if (rc) {
		free(f);
		goto out_close;
	}
	*out = f;
out_close:
	close(fd);
	return rc;
}

void cbf_close(struct cbf *f)
{
	if (!f)
		return;
	munmap(f->map, f->map_len);
	free(f);
}

const struct cbf_geometry *cbf_geometry(const struct cbf *f)
{
	return &f->g;
}

uint64_t cbf_generation(const struct cbf *f)
{
	return f->generation;
}

int cbf_sync(struct cbf *f, uint64_t generation)
{
	if (f->readonly)
		return -EROFS;
	f->generation = generation;
	if (f->anon)
		return 0;
	put_le64(f->map + HDR_GENERATION, generation);
	return msync(f->map, f->map_len, MS_SYNC) == 0 ? 0 : -errno;
}

/* Word stores keep each byte's change atomic for concurrent readers while
 * clearing at memory speed. */
void cbf_clear(struct cbf *f)
{
	if (f->readonly)
		return;
	uint64_t *w = (uint64_t *)(void *)f->ctr;
	uint64_t nwords = f->g.nlines * (CBF_LINE_BYTES / 8);
	for (uint64_t i = 0; i < nwords; i++)
		__atomic_store_n(&w[i], 0, __ATOMIC_RELAXED);
}

/* ---- undo log ---- */

/* Room for n more entries, made before any counter changes so that the log
 * can never fail half-way through a key. */
static int undo_reserve(struct cbf_undo *u, size_t n)
{
	if (!u || u->len + n <= u->cap)
		return 0;
	size_t cap = u->cap ? u->cap : 64;
	while (cap < u->len + n)
		cap *= 2;
	struct cbf_undo_entry *v = realloc(u->v, cap * sizeof *v);
	if (!v)
		return -ENOMEM;
	u->v = v;
	u->cap = cap;
	return 0;
}

static void undo_push(struct cbf_undo *u, uint64_t idx, unsigned old)
{
	if (u)
		u->v[u->len++] = (struct cbf_undo_entry){ .idx = idx, .old = (uint8_t)old };
}

size_t cbf_undo_mark(const struct cbf_undo *u)
{
	return u->len;
}

void cbf_undo_rollback(struct cbf *f, struct cbf_undo *u, size_t mark)
{
	while (u->len > mark) {
		const struct cbf_undo_entry *e = &u->v[--u->len];
		ctr_set(f, e->idx, e->old);
	}
}

void cbf_undo_clear(struct cbf_undo *u)
{
	u->len = 0;
}

void cbf_undo_free(struct cbf_undo *u)
{
	free(u->v);
	u->v = NULL;
	u->len = u->cap = 0;
}

/* ---- add and remove ---- */

/* Exact count of a counter at 15. A missing entry, or one below 15, means the
 * table and the filter disagree. */
static int exact_get(const struct cbf_exact_ops *ops, void *ctx, uint64_t idx, uint64_t *n)
{
	int rc = ops->get(ctx, idx, n);
	if (rc == -ENOENT)
		return -EUCLEAN;
	if (rc == 0 && *n < CBF_COUNTER_MAX)
		return -EUCLEAN;
	return rc;
}

/* How often idx[j] occurs in idx[0..k), counted at its first occurrence
 * only (0 for repeats), so that each distinct counter is checked once. */
static unsigned first_multiplicity(const uint64_t *idx, unsigned k, unsigned j)
{
	unsigned m = 1;
	for (unsigned i = 0; i < j; i++)
		if (idx[i] == idx[j])
			return 0;
	for (unsigned i = j + 1; i < k; i++)
		m += idx[i] == idx[j];
	return m;
}

/* Every counter already at 15 must have its exact count before the add. */
static int add_check(const struct cbf *f, const uint64_t *idx, unsigned k,
		     const struct cbf_exact_ops *ops, void *ctx)
{
	if (!ops)
		return 0;
	for (unsigned j = 0; j < k; j++) {
		uint64_t n;
		if (ctr_get(f, idx[j]) != CBF_COUNTER_MAX || first_multiplicity(idx, k, j) == 0)
			continue;
		int rc = exact_get(ops, ctx, idx[j], &n);
		if (rc)
			return rc;
	}
	return 0;
}

/* Every counter must be able to take as many decrements as it occurs. */
static int remove_check(const struct cbf *f, const uint64_t *idx, unsigned k,
			const struct cbf_exact_ops *ops, void *ctx)
{
	for (unsigned j = 0; j < k; j++) {
		unsigned m = first_multiplicity(idx, k, j), v = ctr_get(f, idx[j]);
		uint64_t n;
		if (m == 0)
			continue;
		if (v < CBF_COUNTER_MAX) {
			if (v < m)
				return -EUCLEAN;
			continue;
		}
		if (!ops)
			continue;  /* saturated for good: decrements leave it at 15 */
		int rc = exact_get(ops, ctx, idx[j], &n);
		if (rc)
			return rc;
		if (n < m)
			return -EUCLEAN;
	}
	return 0;
}

static int add_one(struct cbf *f, uint64_t idx, const struct cbf_exact_ops *ops, void *ctx)
{
	unsigned v = ctr_get(f, idx);
	uint64_t n;
	int rc;

	if (v < CBF_COUNTER_MAX - 1) {
		ctr_set(f, idx, v + 1);
		return 0;
	}
	if (v == CBF_COUNTER_MAX - 1) {
		/* The table first: if it fails, this counter is unchanged. */
		if (ops && (rc = ops->put(ctx, idx, CBF_COUNTER_MAX)) != 0)
			return rc;
		ctr_set(f, idx, CBF_COUNTER_MAX);
		return 0;
	}
	if (!ops)
		return 0;
	if ((rc = exact_get(ops, ctx, idx, &n)) != 0)
		return rc;
	return ops->put(ctx, idx, n + 1);
}

static int remove_one(struct cbf *f, uint64_t idx, const struct cbf_exact_ops *ops,
		      void *ctx)
{
	unsigned v = ctr_get(f, idx);
	uint64_t n;
	int rc;

	if (v == 0)
		return -EUCLEAN;
	if (v < CBF_COUNTER_MAX) {
		ctr_set(f, idx, v - 1);
		return 0;
	}
	if (!ops)
		return 0;
	if ((rc = exact_get(ops, ctx, idx, &n)) != 0)
		return rc;
	if (n - 1 > CBF_COUNTER_MAX - 1)
		return ops->put(ctx, idx, n - 1);
	if ((rc = ops->del(ctx, idx)) != 0)
		return rc;
	ctr_set(f, idx, CBF_COUNTER_MAX - 1);
	return 0;
}

typedef int (*step_fn)(struct cbf *, uint64_t, const struct cbf_exact_ops *, void *);

/* Apply step to each counter in order, logging old values. If a step fails
 * (the exact table returned an error), the counters changed so far are put
 * back and their log entries dropped; the caller's transaction, which holds
 * any exact-table writes already made, must then be aborted. */
static int apply(struct cbf *f, const uint64_t *idx, unsigned k, step_fn step,
		 const struct cbf_exact_ops *ops, void *ctx, struct cbf_undo *undo)
{
	uint8_t old[CBF_MAX_K];
	size_t mark = undo ? undo->len : 0;

	for (unsigned j = 0; j < k; j++) {
		old[j] = (uint8_t)ctr_get(f, idx[j]);
		undo_push(undo, idx[j], old[j]);
		int rc = step(f, idx[j], ops, ctx);
		if (rc) {
			for (unsigned i = j + 1; i-- > 0;)
				ctr_set(f, idx[i], old[i]);
			if (undo)
				undo->len = mark;
			return rc;
		}
	}
	return 0;
}

static int update(struct cbf *f, const struct cbf_pos *pos, bool add,
		  const struct cbf_exact_ops *ops, void *ctx, struct cbf_undo *undo)
{
	uint64_t idx[CBF_MAX_K];
	int rc;

	if (f->readonly)
		return -EROFS;
	if ((rc = pos_indices(f, pos, idx)) != 0)
		return rc;
	/* Both lines' misses overlap instead of following one another. */
	prefetch_pos(f, pos);
	rc = add ? add_check(f, idx, pos->k, ops, ctx) : remove_check(f, idx, pos->k, ops, ctx);
	if (rc)
		return rc;
	if ((rc = undo_reserve(undo, pos->k)) != 0)
		return rc;
	return apply(f, idx, pos->k, add ? add_one : remove_one, ops, ctx, undo);
}

int cbf_add(struct cbf *f, const struct cbf_pos *pos, const struct cbf_exact_ops *ops,
	    void *ctx, struct cbf_undo *undo)
{
	return update(f, pos, true, ops, ctx, undo);
}

int cbf_remove(struct cbf *f, const struct cbf_pos *pos, const struct cbf_exact_ops *ops,
	       void *ctx, struct cbf_undo *undo)
{
	return update(f, pos, false, ops, ctx, undo);
}

/* ---- statistics ---- */

#define NIBBLE_LOW_BITS UINT64_C(0x1111111111111111)

/* Number of bits set in x, whose bits can only be the lowest of each nibble:
 * add nibble pairs into bytes, then all bytes into the top one. (No popcnt
 * instruction is assumed: the build does not set -march.) */
static inline unsigned count_nibble_bits(uint64_t x)
{
	x = (x + (x >> 4)) & UINT64_C(0x0F0F0F0F0F0F0F0F);
	return (unsigned)((x * UINT64_C(0x0101010101010101)) >> 56);
}

void cbf_fill(const struct cbf *f, uint64_t *nonzero, uint64_t *saturated)
{
	const uint64_t *w = (const uint64_t *)(const void *)f->ctr;
	uint64_t nwords = f->g.nlines * (CBF_LINE_BYTES / 8), nz = 0, sat = 0;

	/* Per word, fold each nibble onto its lowest bit: OR for "non-zero",
	 * AND for "all four bits set", then count. */
	for (uint64_t i = 0; i < nwords; i++) {
		uint64_t x = __atomic_load_n(&w[i], __ATOMIC_RELAXED);
		nz += count_nibble_bits((x | x >> 1 | x >> 2 | x >> 3) & NIBBLE_LOW_BITS);
		sat += count_nibble_bits((x & x >> 1 & x >> 2 & x >> 3) & NIBBLE_LOW_BITS);
	}
	if (nonzero)
		*nonzero = nz;
	if (saturated)
		*saturated = sat;
}

/* The fill tells the load: with Poisson(lambda) keys per line, each taking kk
 * distinct counters of the line's 128, a counter stays zero with probability
 * exp(-lambda kk / 128). The rate then follows from the exact formula. The
 * plain (nonzero / counters)^k would miss the uneven load of blocked lines
 * and underestimate the rate several times over. */
double cbf_estimated_fpr(const struct cbf *f)
{
	uint64_t nz, total = ncounters(f);
	unsigned lpk = f->g.lines_per_key, kk = f->g.k / lpk;

	cbf_fill(f, &nz, NULL);
	if (nz == 0)
		return 0;
	if (nz == total)
		return 1;
	double zero = (double)(total - nz) / (double)total;
	double lambda = -log(zero) * CBF_LINE_COUNTERS / kk;
	double p = cbf_blocked_line_fpr(lambda, kk, CBF_LINE_COUNTERS);
	return lpk == 2 ? p * p : p;
}

uint64_t cbf_estimated_keys(const struct cbf *f)
{
	uint64_t nz, total = ncounters(f);
	cbf_fill(f, &nz, NULL);
	if (nz == 0)
		return 0;
	if (nz == total)
		nz = total - 1;
	/* a counter stays zero with probability exp(-n k / counters) */
	double zero = (double)(total - nz) / (double)total;
	return (uint64_t)llround(-log(zero) * (double)total / f->g.k);
}

/* The rate only rises with the load: an exponential then binary search. */
uint64_t cbf_capacity(const struct cbf_geometry *g, double rate)
{
	uint64_t lo = 0, hi = 1;
	while (cbf_theoretical_fpr(g, hi) <= rate) {
		lo = hi;
		if (hi > (UINT64_C(1) << 62))
			return hi;
		hi *= 2;
	}
	/* invariant: lo meets the rate (or is 0), hi does not */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (cbf_theoretical_fpr(g, mid) <= rate)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

uint64_t cbf_bytes(const struct cbf *f)
{
	return f->g.nlines * CBF_LINE_BYTES;
}
