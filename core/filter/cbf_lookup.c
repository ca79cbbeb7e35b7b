/* cbf_lookup.c - a key's positions in a counting filter and the lookups,
 * one key or many (see cbf.c's top comment, "Positions" and "Lookups"). */
#include "cbf_int.h"

#include <errno.h>
#include <string.h>

/* Inline xxHash: a position costs two 16-byte hashes, and a call through the
 * shared library would be a large part of a lookup's time. */
#define XXH_INLINE_ALL
#include <xxhash.h>

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

int cbf_pos_indices(const struct cbf *f, const struct cbf_pos *pos, uint64_t *idx)
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
