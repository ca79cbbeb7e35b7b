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
 *
 * The parts: this file (the file and its header, sizing, add and remove,
 * the undo log, statistics) and cbf_lookup.c (positions and lookups);
 * cbf_int.h is what they share.
 */
#include "cbf_int.h"

#include "base/byteorder.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Line indices are stored as uint32_t in struct cbf_pos. */
#define CBF_MAX_NLINES (UINT64_C(1) << 32)
/* Seed of the position hashes in a geometry from cbf_geometry_for(). Any
 * value works; a fixed one makes filters reproducible. */
#define CBF_DEFAULT_SEED UINT64_C(0x7064636266736564)

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
	if ((rc = cbf_pos_indices(f, pos, idx)) != 0)
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
