/* cbf.h - blocked counting Bloom filter with 4-bit saturating counters.
 *
 * The filter answers "certainly new" for a fingerprint it has never seen, so
 * the seal path can skip the LMDB probe (IMP-CB, seed 000). Counters are
 * 4 bits, two to a byte, 128 to a 64-byte line. A key touches `lines_per_key`
 * lines (1 or 2) and k/lines_per_key counters in each, so a lookup costs one
 * or two cache misses that the CPU can overlap, instead of the k misses of a
 * classical layout.
 *
 * Saturation: a counter that reaches 15 stays at 15 and its exact count is
 * kept by the caller's exact-count table (LMDB's `saturated` table), reached
 * through struct cbf_exact_ops. A decrement of a counter at 15 goes through
 * that exact count, so deletes stay exact whatever the load.
 *
 * Concurrency: one writer at a time (the caller holds the store's write
 * transaction); readers may look up concurrently, counters are read and
 * written with relaxed atomics on single bytes.
 *
 * On disk (little-endian): a 4096-byte header (its fields are listed in
 * cbf.c) then nlines * 64 bytes of counters; counter i lives in byte i/2, low
 * nibble for even i. The file is mmap'd MAP_SHARED.
 *
 * The page filter is a tree of these, each a leaf over one MD5 prefix
 * (gfilter.h): a leaf's saturated counters are keyed by
 * GF_EXACT_INDEX(leaf, counter) in the exact table, and its undo log is its
 * own. cbf_maybe_contains_routed() is the batch lookup over many leaves
 * (cbf_maybe_contains_each() where the leaves differ in shape).
 *
 * Errors are negative errno values.
 */
#ifndef PD_CBF_H
#define PD_CBF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CBF_LINE_BYTES 64
#define CBF_LINE_COUNTERS 128
#define CBF_MAX_LINES 2
#define CBF_MAX_K 16
#define CBF_COUNTER_MAX 15
#define CBF_HEADER_BYTES 4096

struct cbf_geometry {
	uint64_t nlines;        /* number of 64-byte lines, >= 1 */
	uint32_t k;             /* counters per key, a multiple of lines_per_key, <= CBF_MAX_K */
	uint32_t lines_per_key; /* 1 or 2 */
	uint64_t seed;          /* seed of the XXH3 position hashes */
};

/* The positions of one key: the lines it touches and its counter offsets
 * within each line (k / nlines offsets per line, 0..127, in order). This is
 * what a fingerprint record stores, so that a delete decrements exactly the
 * counters its insert incremented. */
struct cbf_pos {
	uint8_t nlines;
	uint8_t k;
	uint32_t line[CBF_MAX_LINES];
	uint8_t off[CBF_MAX_K];
};

/* Global index of the j-th counter of pos (line * 128 + offset). */
uint64_t cbf_pos_counter(const struct cbf_pos *pos, unsigned j);

/* The caller's exact-count table for counters that reached 15. */
struct cbf_exact_ops {
	/* count of counter idx; -ENOENT if absent */
	int (*get)(void *ctx, uint64_t idx, uint64_t *count);
	int (*put)(void *ctx, uint64_t idx, uint64_t count);
	int (*del)(void *ctx, uint64_t idx);
};

/* Undo log: the old value of every counter changed since it was cleared, so
 * that an aborted transaction can put the filter back as it was. */
struct cbf_undo {
	struct cbf_undo_entry { uint64_t idx; uint8_t old; } *v;
	size_t len, cap;
};

struct cbf;

/* Geometry for `expected` keys at false-positive rate `target_fpr` (0 < r < 1)
 * with the given lines_per_key (1 or 2; 0 picks the default, 2). Picks the k
 * that minimises counters per key (the smaller k on a tie); the seed is a
 * fixed default the caller may replace. -EINVAL for arguments out of range,
 * -EFBIG if no geometry of at most 2^32 lines meets the target. */
int cbf_geometry_for(uint64_t expected, double target_fpr, uint32_t lines_per_key,
		     struct cbf_geometry *out);

/* Probability that a query's kk distinct slots of one line of `slots` are
 * all set (non-zero), when the line holds a Poisson(lambda) number of keys
 * each setting kk distinct slots: the blocked-filter formula both this
 * filter (128 counters a line) and the URL filter (512 bits) are sized by. */
double cbf_blocked_line_fpr(double lambda, unsigned kk, unsigned slots);

/* Expected false-positive rate of geometry g holding n keys (the exact
 * formula for a blocked filter: Poisson load per line, a key's offsets in a
 * line distinct, as cbf_positions draws them). 0 for n 0. */
double cbf_theoretical_fpr(const struct cbf_geometry *g, uint64_t n);

/* Create a filter file at path (0600, replaced if present), all counters zero,
 * tagged with generation. path NULL: an anonymous in-memory filter. */
int cbf_create(const char *path, const struct cbf_geometry *g, uint64_t generation,
	       struct cbf **out);
/* Open an existing filter file. -EINVAL if it is not a filter file or its
 * size does not match its header. */
int cbf_open(const char *path, bool readonly, struct cbf **out);
void cbf_close(struct cbf *f);

const struct cbf_geometry *cbf_geometry(const struct cbf *f);
uint64_t cbf_generation(const struct cbf *f);
/* Write generation into the header and msync the whole file (only records
 * it for an anonymous filter). -EROFS if opened read-only. */
int cbf_sync(struct cbf *f, uint64_t generation);
/* Set every counter to zero (before a rebuild). Nothing on a read-only
 * filter. */
void cbf_clear(struct cbf *f);

/* Positions of a 16-byte fingerprint (an MD5) under f's geometry. */
void cbf_positions(const struct cbf *f, const uint8_t key[16], struct cbf_pos *out);
void cbf_prefetch(const struct cbf *f, const struct cbf_pos *pos);
/* false: the key was certainly never added. true: it may have been (also
 * the answer for a malformed pos, which cannot prove absence). */
bool cbf_maybe_contains(const struct cbf *f, const struct cbf_pos *pos);
/* cbf_maybe_contains for n keys of 16 bytes each, stored back to back at
 * keys; results[i] answers key i. Positions are computed and lines prefetched
 * several keys ahead, so cache misses overlap. Returns how many are true. */
size_t cbf_maybe_contains_batch(const struct cbf *f, const uint8_t *keys, size_t n,
				bool *results);

/* cbf_maybe_contains_batch with a filter per key: key i is looked up in
 * fs[i]. The leaves of a growing filter (gfilter.h) use it. */
size_t cbf_maybe_contains_each(const struct cbf *const *fs, const uint8_t *keys, size_t n,
			       bool *results);

/* Whether a and b differ at most in their number of lines (same k, lines
 * per key and seed): keys are placed alike in both. */
bool cbf_same_shape(const struct cbf *a, const struct cbf *b);
/* cbf_maybe_contains_batch over many filters of one shape (cbf_same_shape
 * with `shape`), each key routed to its filter on the way into the
 * pipeline: key i is looked up in table[its leading `bits` bits] (the
 * first 8 bytes read big-endian), or where that entry is NULL in
 * fallback(ctx, key). The seed and k are read once, and a key in flight
 * carries only its filter's counters: the lookup of a growing filter's
 * leaves (gfilter.h) at nearly the speed of one filter. */
typedef const struct cbf *(*cbf_route_fn)(const void *ctx, const uint8_t *key);
size_t cbf_maybe_contains_routed(const struct cbf *shape, const struct cbf *const *table,
				 unsigned bits, cbf_route_fn fallback, const void *ctx,
				 const uint8_t *keys, size_t n, bool *results);

/* Value of counter idx; 0 past the end. */
unsigned cbf_get(const struct cbf *f, uint64_t idx);

/* Increment the counters at pos (saturating at 15; exact counts through ops).
 * Every changed counter's old value is appended to undo (may be NULL).
 * ops NULL: no exact table, a counter at 15 stays at 15 for good.
 * -EUCLEAN if a counter at 15 has no exact count: nothing is changed then.
 * -EINVAL if pos does not fit f, -EROFS on a read-only filter, -ENOMEM if the
 * undo log cannot grow. An error from ops is returned with the counters
 * restored; exact-count writes already made belong to the caller's
 * transaction, which must then be aborted. */
int cbf_add(struct cbf *f, const struct cbf_pos *pos, const struct cbf_exact_ops *ops,
	    void *ctx, struct cbf_undo *undo);
/* Decrement the counters at pos. -EUCLEAN if a counter is already 0 (or
 * would go below 0: a counter may occur twice in pos) or a counter at 15 has
 * no exact count (the filter disagrees with the store): nothing is changed
 * then. Other errors as for cbf_add. */
int cbf_remove(struct cbf *f, const struct cbf_pos *pos, const struct cbf_exact_ops *ops,
	       void *ctx, struct cbf_undo *undo);

/* Undo log handling. */
size_t cbf_undo_mark(const struct cbf_undo *u);
void cbf_undo_rollback(struct cbf *f, struct cbf_undo *u, size_t mark);
void cbf_undo_clear(struct cbf_undo *u);
void cbf_undo_free(struct cbf_undo *u);

/* Fill statistics: counters that are non-zero, counters at 15. Scans the
 * whole filter. */
void cbf_fill(const struct cbf *f, uint64_t *nonzero, uint64_t *saturated);
/* Estimated false-positive rate from the measured fill: the load per line
 * that explains the fraction of zero counters, put into the formula of
 * cbf_theoretical_fpr. (The plainer (nonzero / counters) ^ k ignores how
 * unevenly keys fall on blocked lines and underestimates the rate, 20-fold
 * for one line per key at design load.) 0 for an empty filter, 1 for a full
 * one. */
double cbf_estimated_fpr(const struct cbf *f);
/* Keys the filter holds, estimated from its fill as cbf_estimated_fpr
 * does (the load that explains the fraction of zero counters). For a store
 * that kept no count of its keys. Scans the whole filter. */
uint64_t cbf_estimated_keys(const struct cbf *f);
/* The most keys g holds with cbf_theoretical_fpr at or below rate. */
uint64_t cbf_capacity(const struct cbf_geometry *g, double rate);
/* Bytes of memory the counters take. */
uint64_t cbf_bytes(const struct cbf *f);

#endif
