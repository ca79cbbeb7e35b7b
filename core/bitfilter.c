/* bitfilter.c - a growing, file-backed Bloom filter of plain bits.
 *
 * Why this shape. A Bloom filter cannot be enlarged in place: a set bit does
 * not say which key set it. The two known ways out are (1) a scalable Bloom
 * filter (Almeida et al.): when full, freeze it and add a larger one with a
 * tighter rate, so that the rates sum to the target; and (2) a split that
 * re-inserts the keys of a full leaf into children, which seed 004 (the
 * dynamic splittable Bloom filter) describes and which needs the keys. (1)
 * keeps no keys, but a lookup of a new key must test every frozen filter
 * (7 of them after growing 100-fold with doubling), the tightening costs
 * bits per key at every level, and the newest filter is half empty on
 * average: about 1.5-1.9x the bits of a filter sized in advance. (2) needs
 * the keys, but then a lookup touches one leaf and the rate and memory stay
 * where they should. URLs come as 16-byte hashes, so keeping each key costs
 * 8 bytes of disk per URL (a folded 64-bit key, see below), written once
 * and read back only when its leaf is rebuilt; memory holds the bits alone.
 * We take (2).
 *
 * Leaves and routing. Key x (64 bits; a hash already) routes itself: the
 * directory has 2^D entries and x goes to the leaf in entry x >> (64 - D).
 * A leaf at depth d owns the 2^(D-d) consecutive entries that share its
 * d-bit prefix (extendible hashing); a split gives its two halves to two
 * children at depth d + 1, which bit 63 - d of x tells apart. Positions
 * come from the words W_j = mix(x ^ seed ^ j * STEP), j = 1, 2, 3, ...,
 * mix being splitmix64's finaliser and STEP 2^64 / golden ratio. Within a
 * leaf of n lines (n < 2^32), with h and l the high and low halves of W_1:
 *   line 0 = h * n >> 32;  line 1 (two lines per key) = l * (n - 1) >> 32,
 *   plus one if that is >= line 0 (so the two lines differ);
 * then W_2, W_3, ... give 9-bit offsets, seven per word from the low bits
 * up: k / lines_per_key distinct offsets for line 0, then as many for line 1
 * (an offset already taken in the same line is skipped). Bit o of a line is
 * bit o % 8 of its byte o / 8. bitpos.h computes all of this, in two ways
 * that give the same bits.
 *
 * The rate and the model. A leaf with m lines and c keys has load
 * lambda = c / m keys per line; its false-positive rate f(lambda) is the
 * exact one for this layout (Poisson load per line, distinct offsets,
 * independent lines: bitfilter_model_fpr). A new key is routed to a leaf at
 * depth d with probability 2^-d, so the filter's rate is
 *   F = sum over leaves of 2^-d * f(c / m),
 * computed from exact counts after every batch of adds (a table of f makes
 * that a look-up per leaf). While F exceeds the target (times
 * RATE_MARGIN), the leaf with the highest rate is rebuilt: 1.3 times as
 * many lines, or, if that passes the largest leaf size, two children with
 * half each. Tests run against the filter as it was before the batch that
 * they belong to (the caller tests a whole batch, then adds its new keys),
 * so every test meets a rate of at most the target.
 *
 * Memory. Each leaf's load cycles between lambda_max / GROWTH and a bit
 * above lambda_max; because the worst leaf is always the one rebuilt, the
 * leaves stay spread over that cycle, and the bits stay near those of a
 * filter sized in advance whatever the growth so far. With GROWTH 1.25 that
 * was 1.09x to 1.13x of an optimal classic Bloom filter for the same keys
 * and rate (1e-4, two lines per key; 1.113x at 1e8 in bench-filter), of
 * which 3% is the blocked layout, 1% RATE_MARGIN and the rest the growth;
 * with 1.3, 1.133x at 1e8 (peak RSS of `pagededup urlseen` 1.163x), and
 * 1.4 reaches 1.21x. The factor trades memory for rebuilding: about 4.5
 * re-insertions per key at 1.25, 3.0 at 1.4; 1.3 took the 1e8 bench
 * insert from 43.2 to 41.6 CPU seconds (the two builds run side by side),
 * within the 1.2x memory goal.
 * Two lines per key cost 3% more bits than a classic filter at 1e-4, one
 * line 14% (the uneven load of 512-bit blocks): hence two by default;
 * their two cache misses overlap in the batch pipeline.
 *
 * Time. A new key costs a test (two lines), a record (the same two lines
 * and 8 bytes of log) and, amortised, the re-insertions into rebuilt
 * leaves; a repeat costs the test. Past the caches all of these are memory
 * accesses, so leaves of 2 MiB and more are mapped with huge pages (below),
 * lookups are pipelined PREFETCH keys deep, and rebuilds
 * REBUILD_PREFETCH deep. Except in a rebuild, which writes lines that stay
 * cached: there the arithmetic of a key's bits was two thirds of a key's
 * time, hence bitpos.h's wide way (1e8 bench insert: 46.8 to 38.1 CPU
 * seconds, the filter file identical byte for byte). Recording a batch writes each leaf's new keys to
 * its log with one pwrite per chunk, then sets the bits. The leaves stay
 * shared file mappings: writeback of the dirty leaves every 30 s makes the
 * next store to each cleaned page fault to mark it dirty again, but that
 * (do_page_mkwrite) was 1.1% of the CPU time at 1e8, and ext4 maps the
 * leaves with huge pages (FilePmdMapped), so keeping them in anonymous
 * memory between checkpoints would not pay for what it costs the other
 * processes sharing the file.
 *
 * File layout (little-endian):
 *   0        header (struct bf_header), 4096 bytes
 *   4096     two directory buffers of 2^16 uint32 leaf ids; the header's
 *            dirstate selects the active one and the depth D
 *   528384   leaf table: 16384 entries of 64 bytes (struct bf_leaf)
 *   1576960  free-extent table: 4096 entries of 16 bytes
 *   2 MiB    data: leaf bits regions and key-log chunks, in 4 KiB units
 * A key log is a list of 16 KiB chunks: the offset of the next chunk
 * (0: none), then 2047 keys. Keys are appended at slot count % 2047 of the
 * last chunk, with pwrite.
 *
 * Changes and crashes. Lookups never see a half-made change: a rebuilt leaf
 * is built complete in new space, under a new leaf-table entry, in a copy
 * of the directory; a single 8-byte store of dirstate publishes it, and only
 * then is the old space freed. Appends write the keys before the count, and
 * a new chunk is linked before the (packed, single-store) tail word that
 * counts it; a leaf's bits are set only after its keys are in its log. Free extents shrink from their end and are published by their
 * length, so a process killed between any two stores leaves at worst some
 * space unreachable (never the same space owned twice).
 */
#include "bitfilter.h"
#include "bitpos.h"

#include "cbf.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "bitfilter.c stores native integers in its file: little-endian hosts only"
#endif

/* ---- tunables (see the top comment for why these values) ---- */

/* A leaf grows to this many times its lines when it is rebuilt. */
#define GROWTH 1.3
/* The filter keeps its modelled rate at or below this fraction of the
 * target: room for the model's error and for the sampling error of a
 * measurement, at about 1% more bits. */
#define RATE_MARGIN 0.9
/* A new filter has INIT_LEAVES leaves (fewer if they would be smaller than
 * INIT_LEAF_MIN_LINES, more if larger than half the largest leaf): several,
 * so that their rebuilds are spread out in time, and large, so that large
 * filters are mapped with huge pages. */
#define INIT_LEAVES 8
#define INIT_LEAF_MIN_LINES 4096
/* Leaves hold a multiple of this many lines (4 KiB). A leaf of HUGE_BYTES
 * or more starts at a multiple of HUGE_BYTES in the file and in memory, so
 * that the kernel can map its whole 2 MiB parts with huge pages (file-backed
 * huge pages need a file system with large folios: ext4 and XFS on recent
 * kernels; elsewhere the request is ignored). A lookup then needs one TLB
 * entry per 2 MiB instead of per 4 KiB: under a hypervisor's nested paging a
 * TLB miss is most of a lookup's cost. (Rounding sizes to 2 MiB as well
 * would waste up to half of a mid-sized leaf.) */
#define LEAF_LINE_UNIT 64
#define HUGE_BYTES (UINT64_C(2) << 20)
/* 32 MiB: 13 million keys at 1e-4; rebuilding one takes a fraction of a
 * second under the lock. */
#define DEFAULT_MAX_LEAF_LINES (UINT32_C(1) << 19)
/* Lines of any leaf (line numbers are 32-bit range reductions): 128 GiB. */
#define MAX_LEAF_LINES (UINT64_C(1) << 31)
#define DEFAULT_FPR 1e-4
#define DEFAULT_EXPECTED 1000000
#define DEFAULT_SEED UINT64_C(0x75726c7365656e31)
/* Keys ahead whose lines are prefetched: in lookups (whose misses compete
 * with the tests' own work), and in rebuilds (pure stores, nothing waits on
 * them: more misses in flight pay). */
#define PREFETCH 16
#define REBUILD_PREFETCH 32

/* ---- file layout ---- */

#define HDR_BYTES 4096
#define DIR_ENTRIES (1u << BITFILTER_MAX_DEPTH)
#define DIR_BYTES (DIR_ENTRIES * 4u)
#define DIR_OFF HDR_BYTES
#define LEAF_OFF (DIR_OFF + 2 * DIR_BYTES)
#define LEAF_BYTES 64
#define FREE_OFF (LEAF_OFF + BITFILTER_MAX_LEAVES * LEAF_BYTES)
#define FREE_MAX 4096
#define DATA_START (UINT64_C(2) << 20)
#define UNIT 4096
#define CHUNK_BYTES 16384
#define CHUNK_KEYS (CHUNK_BYTES / 8 - 1)
#define VERSION 1

static const char magic[8] = { 'P', 'D', 'U', 'R', 'L', 'B', 'F', '1' };

struct bf_header {
	char magic[8];
	uint32_t version;
	uint32_t k;
	uint32_t lines_per_key;
	uint32_t max_leaf_lines;
	double fpr;
	uint64_t seed;
	uint64_t generation; /* +1 at every layout change */
	uint64_t dirstate;   /* bits 0-7: depth D; bit 8: the active directory */
	uint64_t frontier;   /* end of the space handed out; the file's length */
	uint32_t free_hw;    /* free-table entries in use are below this */
	uint32_t reserved;
	uint64_t lost;       /* bytes freed that the free table had no room for */
	uint64_t grows;
	uint64_t splits;
	uint64_t expected;
};

struct bf_leaf {
	uint64_t nlines;
	uint64_t count;       /* keys in the log */
	uint64_t bits_off;
	uint64_t chunk_first; /* 0: no chunk yet */
	uint64_t tail;        /* (last chunk offset / 4096) | chunks << 40 */
	uint32_t depth;
	uint32_t reserved;
	uint64_t prefix;      /* for people reading the file; routing uses the directory */
	uint64_t reserved2;
};

struct bf_extent {
	uint64_t off;
	uint64_t len; /* 0: an empty entry */
};

_Static_assert(sizeof(struct bf_header) <= HDR_BYTES, "header size");
_Static_assert(sizeof(struct bf_leaf) == LEAF_BYTES, "leaf entry size");
_Static_assert(sizeof(struct bf_extent) == 16, "extent size");
_Static_assert(FREE_OFF + FREE_MAX * 16 <= DATA_START, "metadata fits");

#define TAIL_SHIFT 40

static inline uint64_t tail_off(uint64_t t)
{
	return (t & ((UINT64_C(1) << TAIL_SHIFT) - 1)) * UNIT;
}

static inline uint64_t tail_chunks(uint64_t t)
{
	return t >> TAIL_SHIFT;
}

static inline uint64_t tail_pack(uint64_t off, uint64_t chunks)
{
	return off / UNIT | chunks << TAIL_SHIFT;
}

/* ---- this process's state ---- */

/* A key on its way through the pipeline: its leaf and lines. */
struct probe {
	uint64_t x;
	uint8_t *l0, *l1;
	uint32_t leaf;
};

/* A slot of the set of keys found new within one check call: valid when
 * its stamp is the call's, so the set is never cleared. */
struct setslot {
	uint64_t key;
	uint64_t stamp;
};

struct leafmap {
	uint8_t *bits;      /* the leaf's lines, mapped */
	size_t maplen;
	uint64_t off, nlines;
};

struct bitfilter {
	int fd;
	bool readonly;
	int lock;                 /* 0, LOCK_SH or LOCK_EX */
	uint8_t *meta;            /* [0, DATA_START) mapped */
	struct bf_header *hdr;
	struct bf_leaf *leaves;
	struct bf_extent *freel;
	uint32_t *dir;            /* the active directory (under the lock) */
	unsigned depth;
	uint64_t gen;             /* generation the maps below match */
	struct leafmap *lm;       /* BITFILTER_MAX_LEAVES entries */
	uint8_t *ref;             /* scratch: leaf ids the directory references */
	uint32_t k, lpk, max_leaf_lines;
	struct bitpos pos;        /* where a key's bits lie */
	double fpr, target, lam_cap;
	double *ftab;             /* f(i * ftab_step) */
	size_t ftab_n;
	double ftab_step;
	struct setslot *set;      /* keys new in the current check call */
	size_t set_cap;
	uint64_t stamp;
	struct probe *probes;     /* the last check call's keys and lines */
	size_t probes_n, probes_cap;
	uint64_t probes_gen;      /* the layout they belong to */
	uint64_t *chunkbuf;       /* CHUNK_BYTES for reading logs */
	/* recording: the new keys of a call grouped by leaf (stage), how many
	 * each leaf gets (lcount, zero between calls) and which leaves */
	uint64_t *stage;
	size_t stage_cap;
	uint32_t *lcount;
	uint32_t *touched;
};

/* ---- positions (bitpos.h) ---- */

static inline __attribute__((always_inline)) void prefetch(const void *p, int write)
{
	if (write)
		__builtin_prefetch(p, 1, 3);
	else
		__builtin_prefetch(p, 0, 3);
}

static inline void probe_key(const struct bitfilter *f, uint64_t x, struct probe *p, int write)
{
	uint32_t id = f->dir[f->depth ? x >> (64 - f->depth) : 0];
	const struct leafmap *m = &f->lm[id];
	uint64_t l0, l1;
	bitpos_lines(&f->pos, x, m->nlines, &l0, &l1);
	p->x = x;
	p->leaf = id;
	p->l0 = m->bits + l0 * BITFILTER_LINE_BYTES;
	p->l1 = m->bits + l1 * BITFILTER_LINE_BYTES;
	prefetch(p->l0, write);
	if (f->lpk == 2)
		prefetch(p->l1, write);
}

/* ---- the model ---- */

/* Probability that kk given distinct bits of a 512-bit line are all set,
 * when the line holds Poisson(lam) key-halves that each set kk distinct
 * random bits: inclusion-exclusion over which of the kk bits stay clear. A
 * fixed set of j bits escapes one key-half with probability
 * r_j = C(512 - j, kk) / C(512, kk), and all of them with
 * exp(-lam * (1 - r_j)). Alternating terms up to C(16, 8) in size: long
 * double keeps the result exact to many digits for kk <= 16. */
static double line_fpr(double lam, unsigned kk)
{
	return cbf_blocked_line_fpr(lam, kk, BITFILTER_LINE_BITS);
}

static bool k_valid(uint32_t k, uint32_t lpk)
{
	return (lpk == 1 || lpk == 2) && k >= lpk && k % lpk == 0 && k / lpk <= BITPOS_MAX_KK &&
	       k <= BITFILTER_MAX_K;
}

double bitfilter_model_fpr(uint32_t k, uint32_t lines_per_key, double keys_per_line)
{
	if (!k_valid(k, lines_per_key) || !(keys_per_line >= 0))
		return 1;
	if (keys_per_line == 0)
		return 0;
	double p = line_fpr(keys_per_line * lines_per_key, k / lines_per_key);
	return lines_per_key == 2 ? p * p : p;
}

/* Largest load with rate <= fpr (the rate grows with the load). */
static double load_for(uint32_t k, uint32_t lpk, double fpr)
{
	double lo = 0, hi = BITFILTER_LINE_BITS;
	for (int i = 0; i < 100; i++) {
		double mid = (lo + hi) / 2;
		if (bitfilter_model_fpr(k, lpk, mid) > fpr)
			hi = mid;
		else
			lo = mid;
	}
	return lo;
}

int bitfilter_best_k(double fpr, uint32_t lines_per_key, uint32_t *k, double *keys_per_line)
{
	if (!(fpr > 0 && fpr < 0.5) || (lines_per_key != 1 && lines_per_key != 2))
		return -EINVAL;
	uint32_t best = 0;
	double best_load = 0;
	for (uint32_t kk = lines_per_key; kk <= BITPOS_MAX_KK * lines_per_key && kk <= BITFILTER_MAX_K;
	     kk += lines_per_key) {
		double load = load_for(kk, lines_per_key, fpr);
		if (load > best_load * (1 + 1e-12)) {
			best = kk;
			best_load = load;
		}
	}
	if (!best || best_load <= 0)
		return -EINVAL;
	*k = best;
	*keys_per_line = best_load;
	return 0;
}

#define FTAB_PER_CAP 256
#define FTAB_CAPS 16

static int ftab_init(struct bitfilter *f)
{
	f->ftab_n = FTAB_PER_CAP * FTAB_CAPS + 2;
	f->ftab_step = f->lam_cap / FTAB_PER_CAP;
	f->ftab = malloc(f->ftab_n * sizeof *f->ftab);
	if (!f->ftab)
		return -ENOMEM;
	for (size_t i = 0; i < f->ftab_n; i++)
		f->ftab[i] = bitfilter_model_fpr(f->k, f->lpk, (double)i * f->ftab_step);
	return 0;
}

/* The model at load lam: the table, linearly interpolated (relative error
 * below 1e-5), or the formula past its end. */
static double rate_at(const struct bitfilter *f, double lam)
{
	double x = lam / f->ftab_step;
	size_t i = (size_t)x;
	if (i + 1 >= f->ftab_n)
		return bitfilter_model_fpr(f->k, f->lpk, lam);
	return f->ftab[i] + (f->ftab[i + 1] - f->ftab[i]) * (x - (double)i);
}

/* ---- parameters ---- */

void bitfilter_params_default(struct bitfilter_params *p)
{
	p->fpr = DEFAULT_FPR;
	p->expected = DEFAULT_EXPECTED;
	p->lines_per_key = 2;
	p->max_leaf_lines = DEFAULT_MAX_LEAF_LINES;
	p->seed = DEFAULT_SEED;
}

static uint64_t round_lines(double lines)
{
	if (!(lines < 1e15))
		lines = 1e15;
	uint64_t n = (uint64_t)ceil(lines);
	n = (n + LEAF_LINE_UNIT - 1) / LEAF_LINE_UNIT * LEAF_LINE_UNIT;
	return n ? n : LEAF_LINE_UNIT;
}

static inline size_t bits_len(uint64_t nlines)
{
	return (size_t)(nlines * BITFILTER_LINE_BYTES);
}

static inline uint64_t bits_align(uint64_t nlines)
{
	return bits_len(nlines) >= HUGE_BYTES ? HUGE_BYTES : UNIT;
}

/* ---- space in the file ---- */

static int file_extend(struct bitfilter *f, uint64_t end)
{
	struct stat st;
	if (fstat(f->fd, &st) != 0)
		return -errno;
	if ((uint64_t)st.st_size < end && ftruncate(f->fd, (off_t)end) != 0)
		return -errno;
	return 0;
}

/* Blocks for [off, off+len) now, so that a store through a mapping never
 * meets a full disk (SIGBUS). */
static int reserve(struct bitfilter *f, uint64_t off, uint64_t len)
{
	int err = posix_fallocate(f->fd, (off_t)off, (off_t)len);
	if (err == EOPNOTSUPP || err == EINVAL || err == 0)
		return 0;
	return -err;
}

static void region_free(struct bitfilter *f, uint64_t off, uint64_t len);

/* Space for len bytes at a multiple of align (a power of two >= UNIT).
 * mapped: the space is written through a mapping (leaf bits), so its
 * blocks are reserved now; space written with pwrite (key logs) gets them
 * as it is written, and a full disk is an error of that write. */
static int region_alloc(struct bitfilter *f, uint64_t len, uint64_t align, bool mapped,
			uint64_t *off)
{
	struct bf_header *h = f->hdr;
	int rc;

	len = (len + UNIT - 1) / UNIT * UNIT;
	/* first fit, taken from the end of the extent: one store (its length)
	 * hands the space out; space after an aligned piece goes back into
	 * the table afterwards (a kill in between loses it, never gives it
	 * out twice) */
	for (uint32_t i = 0; i < h->free_hw && i < FREE_MAX; i++) {
		struct bf_extent *e = &f->freel[i];
		if (e->len < len)
			continue;
		uint64_t end = e->off + e->len, o = (end - len) & ~(align - 1);
		if (o < e->off)
			continue;
		if (mapped && (rc = reserve(f, o, len)) != 0)
			return rc;
		e->len = o - e->off;
		if (o + len < end)
			region_free(f, o + len, end - o - len);
		*off = o;
		return 0;
	}
	uint64_t start = h->frontier, o = (start + align - 1) & ~(align - 1);
	if ((rc = file_extend(f, o + len)) != 0)
		return rc;
	if (mapped && (rc = reserve(f, o, len)) != 0) {
		if (ftruncate(f->fd, (off_t)start) != 0) {
			/* the file stays longer than the frontier: harmless */
		}
		return rc;
	}
	h->frontier = o + len;
	if (o > start)
		region_free(f, start, o - start);
	*off = o;
	return 0;
}

static void region_free(struct bitfilter *f, uint64_t off, uint64_t len)
{
	struct bf_header *h = f->hdr;

	len = (len + UNIT - 1) / UNIT * UNIT;
	if (len == 0)
		return;
	/* give the blocks back; a file system without holes keeps them */
	(void)fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len);
	/* merge with free neighbours: drop the neighbour first (a kill in
	 * between loses it, never hands it out twice) */
	for (uint32_t i = 0; i < h->free_hw && i < FREE_MAX; i++) {
		struct bf_extent *e = &f->freel[i];
		if (!e->len)
			continue;
		if (e->off + e->len == off) {
			uint64_t o = e->off, l = e->len;
			e->len = 0;
			off = o;
			len += l;
		} else if (off + len == e->off) {
			uint64_t l = e->len;
			e->len = 0;
			len += l;
		}
	}
	if (off + len == h->frontier) {
		h->frontier = off;
		if (ftruncate(f->fd, (off_t)off) != 0) {
			/* longer than the frontier: harmless */
		}
		return;
	}
	for (uint32_t i = 0; i < FREE_MAX; i++) {
		struct bf_extent *e = &f->freel[i];
		if (e->len)
			continue;
		e->off = off;
		__atomic_store_n(&e->len, len, __ATOMIC_RELEASE);
		if (i >= h->free_hw)
			h->free_hw = i + 1;
		return;
	}
	h->lost += len;
}

/* ---- mappings ---- */

static void unmap_leaf(struct leafmap *m)
{
	if (m->bits)
		munmap(m->bits, m->maplen);
	memset(m, 0, sizeof *m);
}

static int map_region(struct bitfilter *f, uint64_t off, size_t len, void **out)
{
	int prot = f->readonly ? PROT_READ : PROT_READ | PROT_WRITE;
	void *p = mmap(NULL, len, prot, MAP_SHARED, f->fd, (off_t)off);
	if (p == MAP_FAILED)
		return -errno;
	*out = p;
	return 0;
}

/* A leaf's bits: from HUGE_BYTES on, at an address that is a multiple of
 * it (reserve a larger range, map into it, give back the rest), with a
 * request for huge pages; a refusal only costs speed. */
static int map_bits(struct bitfilter *f, uint64_t off, size_t len, void **out)
{
	if (len < HUGE_BYTES || off % HUGE_BYTES)
		return map_region(f, off, len, out);
	uint8_t *r = mmap(NULL, len + HUGE_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED)
		return -errno;
	uint8_t *a = (uint8_t *)(((uintptr_t)r + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
	int prot = f->readonly ? PROT_READ : PROT_READ | PROT_WRITE;
	void *p = mmap(a, len, prot, MAP_SHARED | MAP_FIXED, f->fd, (off_t)off);
	if (p == MAP_FAILED) {
		int rc = -errno;
		munmap(r, len + HUGE_BYTES);
		return rc;
	}
	if (a > r)
		munmap(r, (size_t)(a - r));
	if (a + len < r + len + HUGE_BYTES)
		munmap(a + len, (size_t)(r + len + HUGE_BYTES - (a + len)));
	(void)madvise(p, len, MADV_HUGEPAGE);
	*out = p;
	return 0;
}

static bool region_ok(const struct bitfilter *f, uint64_t off, uint64_t len)
{
	return off >= DATA_START && off % UNIT == 0 && len > 0 && off + len >= off &&
	       off + len <= f->hdr->frontier;
}

static bool leaf_ok(const struct bitfilter *f, const struct bf_leaf *e)
{
	if (e->nlines < 2 || e->nlines > MAX_LEAF_LINES)
		return false;
	if (!region_ok(f, e->bits_off, e->nlines * BITFILTER_LINE_BYTES))
		return false;
	uint64_t chunks = tail_chunks(e->tail);
	if (e->count > chunks * CHUNK_KEYS)
		return false;
	if (chunks && (!region_ok(f, e->chunk_first, CHUNK_BYTES) ||
		       !region_ok(f, tail_off(e->tail), CHUNK_BYTES)))
		return false;
	return true;
}

/* Map leaf id's bits as the table now describes them. */
static int map_leaf(struct bitfilter *f, uint32_t id)
{
	const struct bf_leaf *e = &f->leaves[id];
	struct leafmap *m = &f->lm[id];
	if (m->bits && m->off == e->bits_off && m->nlines == e->nlines)
		return 0;
	if (!leaf_ok(f, e))
		return -EUCLEAN;
	unmap_leaf(m);
	void *p = NULL;
	int rc = map_bits(f, e->bits_off, bits_len(e->nlines), &p);
	if (rc)
		return rc;
	m->bits = p;
	m->maplen = bits_len(e->nlines);
	m->off = e->bits_off;
	m->nlines = e->nlines;
	return 0;
}

/* ---- the directory ---- */

static inline uint32_t *dir_buf(const struct bitfilter *f, unsigned which)
{
	return (uint32_t *)(void *)(f->meta + DIR_OFF + (size_t)which * DIR_BYTES);
}

static void read_dirstate(struct bitfilter *f)
{
	uint64_t s = __atomic_load_n(&f->hdr->dirstate, __ATOMIC_ACQUIRE);
	f->depth = (unsigned)(s & 0xFF);
	f->dir = dir_buf(f, (unsigned)(s >> 8) & 1);
}

/* Publish the inactive directory (already written) with depth d. */
static void commit_dir(struct bitfilter *f, unsigned d)
{
	struct bf_header *h = f->hdr;
	unsigned active = (unsigned)(h->dirstate >> 8) & 1;
	__atomic_store_n(&h->dirstate, (uint64_t)(active ^ 1) << 8 | d, __ATOMIC_RELEASE);
	h->generation++;
	f->gen = h->generation;
	read_dirstate(f);
}

static uint32_t *inactive_dir(const struct bitfilter *f)
{
	return dir_buf(f, ((unsigned)(f->hdr->dirstate >> 8) & 1) ^ 1);
}

/* Walk the leaves in directory order: fn(ctx, id, first entry, depth). The
 * structure is checked as it goes: -EUCLEAN if an entry names no leaf or a
 * leaf's run of entries is misplaced. */
typedef int (*leaf_fn)(struct bitfilter *f, void *ctx, uint32_t id, uint32_t j);

static int walk(struct bitfilter *f, leaf_fn fn, void *ctx)
{
	uint32_t n = UINT32_C(1) << f->depth;
	for (uint32_t j = 0; j < n;) {
		uint32_t id = f->dir[j];
		if (id >= BITFILTER_MAX_LEAVES)
			return -EUCLEAN;
		uint32_t d = f->leaves[id].depth;
		if (d > f->depth)
			return -EUCLEAN;
		uint32_t run = UINT32_C(1) << (f->depth - d);
		if (j & (run - 1))
			return -EUCLEAN;
		for (uint32_t i = 1; i < run; i++)
			if (f->dir[j + i] != id)
				return -EUCLEAN;
		int rc = fn(f, ctx, id, j);
		if (rc)
			return rc;
		j += run;
	}
	return 0;
}

static int mark_ref(struct bitfilter *f, void *ctx, uint32_t id, uint32_t j)
{
	(void)ctx;
	(void)j;
	if (f->ref[id])
		return -EUCLEAN; /* one leaf in two places */
	f->ref[id] = 1;
	return 0;
}

static int mark_and_map(struct bitfilter *f, void *ctx, uint32_t id, uint32_t j)
{
	int rc = mark_ref(f, ctx, id, j);
	return rc ? rc : map_leaf(f, id);
}

/* After another process changed the layout: map what the directory now
 * references, unmap the rest. */
static int revalidate(struct bitfilter *f)
{
	struct stat st;
	if (fstat(f->fd, &st) != 0)
		return -errno;
	if (f->hdr->frontier < DATA_START || f->hdr->frontier > (uint64_t)st.st_size ||
	    f->depth > BITFILTER_MAX_DEPTH)
		return -EUCLEAN;
	memset(f->ref, 0, BITFILTER_MAX_LEAVES);
	int rc = walk(f, mark_and_map, NULL);
	if (rc)
		return rc;
	for (uint32_t id = 0; id < BITFILTER_MAX_LEAVES; id++) {
		struct leafmap *m = &f->lm[id];
		if (!f->ref[id] && m->bits)
			unmap_leaf(m);
	}
	f->gen = f->hdr->generation;
	return 0;
}

/* Unused leaf-table entries: those the directory does not reference. */
static int free_entries(struct bitfilter *f, uint32_t *ids, unsigned want)
{
	memset(f->ref, 0, BITFILTER_MAX_LEAVES);
	int rc = walk(f, mark_ref, NULL);
	if (rc)
		return rc;
	unsigned got = 0;
	for (uint32_t id = 0; id < BITFILTER_MAX_LEAVES && got < want; id++)
		if (!f->ref[id])
			ids[got++] = id;
	return got == want ? 0 : -ENOSPC;
}

/* ---- the key logs ---- */

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t w = pwrite(fd, p, len, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t r = pread(fd, p, len, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EUCLEAN;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* Give leaf id's log a new last chunk. Order (for a kill at any point): the
 * chunk's next pointer is zeroed and the chunk linked before the tail word
 * that counts it is stored. */
static int log_new_chunk(struct bitfilter *f, struct bf_leaf *e)
{
	uint64_t off, zero = 0;
	int rc;
	if ((rc = region_alloc(f, CHUNK_BYTES, UNIT, false, &off)) != 0)
		return rc;
	if ((rc = pwrite_all(f->fd, &zero, sizeof zero, off)) != 0) {
		region_free(f, off, CHUNK_BYTES);
		return rc;
	}
	if (tail_chunks(e->tail) == 0)
		e->chunk_first = off;
	else if ((rc = pwrite_all(f->fd, &off, sizeof off, tail_off(e->tail))) != 0) {
		region_free(f, off, CHUNK_BYTES);
		return rc;
	}
	__atomic_store_n(&e->tail, tail_pack(off, tail_chunks(e->tail) + 1), __ATOMIC_RELEASE);
	return 0;
}

/* Append n keys to leaf id's log: one pwrite per chunk they land in (not
 * stores through a mapping of the last chunk: each new chunk then cost a
 * map, an unmap and page faults that zero, fill and mark its pages, about
 * twice the time of the writes). The keys are written before the count
 * that covers them is stored. */
static int log_keys(struct bitfilter *f, uint32_t id, const uint64_t *keys, size_t n)
{
	struct bf_leaf *e = &f->leaves[id];
	int rc;
	while (n) {
		uint64_t slot = e->count % CHUNK_KEYS;
		if (tail_chunks(e->tail) < e->count / CHUNK_KEYS + 1 &&
		    (rc = log_new_chunk(f, e)) != 0)
			return rc;
		size_t m = CHUNK_KEYS - slot < n ? (size_t)(CHUNK_KEYS - slot) : n;
		if ((rc = pwrite_all(f->fd, keys, m * 8, tail_off(e->tail) + 8 * (1 + slot))) != 0)
			return rc;
		__atomic_store_n(&e->count, e->count + m, __ATOMIC_RELEASE);
		keys += m;
		n -= m;
	}
	return 0;
}

/* Growable list of file offsets (the chunks a rebuild read or wrote). */
struct offlist {
	uint64_t *v;
	size_t n, cap;
};

static int offlist_push(struct offlist *l, uint64_t off)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		uint64_t *v = realloc(l->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = off;
	return 0;
}

/* Read leaf e's keys chunk by chunk: fn(ctx, keys, n). The chunks' offsets
 * go to chunks (may be NULL). */
typedef int (*keys_fn)(struct bitfilter *f, void *ctx, const uint64_t *keys, size_t n);

static int read_log(struct bitfilter *f, const struct bf_leaf *e, keys_fn fn, void *ctx,
		    struct offlist *chunks)
{
	uint64_t left = e->count, off = e->chunk_first;
	uint64_t nchunks = tail_chunks(e->tail);
	int rc;

	for (uint64_t c = 0; c < nchunks; c++) {
		if (!region_ok(f, off, CHUNK_BYTES))
			return -EUCLEAN;
		if (chunks && (rc = offlist_push(chunks, off)) != 0)
			return rc;
		if ((rc = pread_all(f->fd, f->chunkbuf, CHUNK_BYTES, off)) != 0)
			return rc;
		size_t n = left < CHUNK_KEYS ? (size_t)left : CHUNK_KEYS;
		if (n && fn && (rc = fn(f, ctx, f->chunkbuf + 1, n)) != 0)
			return rc;
		left -= n;
		if (c + 1 < nchunks)
			off = f->chunkbuf[0];
	}
	return left ? -EUCLEAN : 0;
}

/* A key log written whole, for a split's child. */
struct logw {
	uint64_t first, cur, chunks, count;
	uint64_t *buf;
	size_t slot;
	struct offlist mine; /* every chunk allocated, to give back on failure */
};

static int logw_put(struct bitfilter *f, struct logw *w, uint64_t x)
{
	int rc;
	if (w->chunks == 0 || w->slot == CHUNK_KEYS) {
		uint64_t off;
		if ((rc = region_alloc(f, CHUNK_BYTES, UNIT, false, &off)) != 0)
			return rc;
		if ((rc = offlist_push(&w->mine, off)) != 0) {
			region_free(f, off, CHUNK_BYTES);
			return rc;
		}
		if (w->chunks) {
			w->buf[0] = off;
			if ((rc = pwrite_all(f->fd, w->buf, CHUNK_BYTES, w->cur)) != 0)
				return rc;
		} else {
			w->first = off;
		}
		memset(w->buf, 0, CHUNK_BYTES);
		w->cur = off;
		w->chunks++;
		w->slot = 0;
	}
	w->buf[1 + w->slot++] = x;
	w->count++;
	return 0;
}

static int logw_finish(struct bitfilter *f, struct logw *w)
{
	if (!w->chunks)
		return 0;
	w->buf[0] = 0;
	return pwrite_all(f->fd, w->buf, CHUNK_BYTES, w->cur);
}

static void logw_abandon(struct bitfilter *f, struct logw *w)
{
	for (size_t i = 0; i < w->mine.n; i++)
		region_free(f, w->mine.v[i], CHUNK_BYTES);
}

/* ---- rebuilding leaves ---- */

/* A leaf being built: its lines, mapped, and (for a split) its log. */
struct newleaf {
	uint64_t nlines, off;
	uint8_t *bits;
	struct logw log;
};

static int newleaf_init(struct bitfilter *f, struct newleaf *n, uint64_t nlines)
{
	memset(n, 0, sizeof *n);
	n->nlines = nlines;
	int rc = region_alloc(f, bits_len(nlines), bits_align(nlines), true, &n->off);
	if (rc)
		return rc;
	void *p = NULL;
	if ((rc = map_bits(f, n->off, bits_len(nlines), &p)) != 0) {
		region_free(f, n->off, bits_len(nlines));
		n->off = 0;
		return rc;
	}
	n->bits = p;
	/* reused space reads as zero where holes are punched; not everywhere */
	memset(n->bits, 0, bits_len(nlines));
	if (!(n->log.buf = calloc(1, CHUNK_BYTES)))
		return -ENOMEM;
	return 0;
}

static void newleaf_drop(struct bitfilter *f, struct newleaf *n, bool free_space)
{
	if (n->bits)
		munmap(n->bits, bits_len(n->nlines));
	if (free_space && n->off)
		region_free(f, n->off, bits_len(n->nlines));
	if (free_space)
		logw_abandon(f, &n->log);
	free(n->log.buf);
	free(n->log.mine.v);
	n->bits = NULL;
	n->log.buf = NULL;
	n->log.mine.v = NULL;
}

/* Set the bits of n keys in a leaf of nlines lines, REBUILD_PREFETCH keys
 * ahead. */
static void insert_keys(const struct bitfilter *f, uint8_t *bits, uint64_t nlines,
			const uint64_t *keys, size_t n)
{
	uint8_t *ring0[REBUILD_PREFETCH], *ring1[REBUILD_PREFETCH];
	for (size_t i = 0; i < n + REBUILD_PREFETCH; i++) {
		size_t s = i % REBUILD_PREFETCH;
		if (i >= REBUILD_PREFETCH)
			bitpos_set(&f->pos, keys[i - REBUILD_PREFETCH], ring0[s], ring1[s]);
		if (i < n) {
			uint64_t l0, l1;
			bitpos_lines(&f->pos, keys[i], nlines, &l0, &l1);
			ring0[s] = bits + l0 * BITFILTER_LINE_BYTES;
			ring1[s] = bits + l1 * BITFILTER_LINE_BYTES;
			prefetch(ring0[s], 1);
			prefetch(ring1[s], 1);
		}
	}
}

static int grow_keys(struct bitfilter *f, void *ctx, const uint64_t *keys, size_t n)
{
	struct newleaf *nl = ctx;
	insert_keys(f, nl->bits, nl->nlines, keys, n);
	return 0;
}

struct split_ctx {
	struct newleaf child[2];
	unsigned bit; /* bit of the key that tells the children apart: 63 - depth */
	uint64_t *part[2];
};

static int split_keys(struct bitfilter *f, void *ctx, const uint64_t *keys, size_t n)
{
	struct split_ctx *s = ctx;
	size_t np[2] = { 0, 0 };
	int rc;
	for (size_t i = 0; i < n; i++) {
		unsigned b = (unsigned)(keys[i] >> s->bit) & 1;
		s->part[b][np[b]++] = keys[i];
		if ((rc = logw_put(f, &s->child[b].log, keys[i])) != 0)
			return rc;
	}
	for (unsigned b = 0; b < 2; b++)
		insert_keys(f, s->child[b].bits, s->child[b].nlines, s->part[b], np[b]);
	return 0;
}

/* Rebuild leaf id (owning directory entries from j) with nlines lines. */
static int grow_leaf(struct bitfilter *f, uint32_t id, uint32_t j, uint64_t nlines)
{
	struct bf_leaf *e = &f->leaves[id];
	uint32_t nid;
	struct newleaf nl;
	int rc;

	if ((rc = free_entries(f, &nid, 1)) != 0)
		return rc;
	/* The old bits are not needed to rebuild (the log is): let them go
	 * first, so that memory holds one copy of the leaf, not two. */
	unmap_leaf(&f->lm[id]);
	if ((rc = newleaf_init(f, &nl, nlines)) != 0 ||
	    (rc = read_log(f, e, grow_keys, &nl, NULL)) != 0) {
		newleaf_drop(f, &nl, true);
		(void)map_leaf(f, id);
		return rc;
	}
	struct bf_leaf *ne = &f->leaves[nid];
	*ne = *e;
	ne->nlines = nlines;
	ne->bits_off = nl.off;

	uint32_t *nd = inactive_dir(f), n = UINT32_C(1) << f->depth;
	uint32_t run = UINT32_C(1) << (f->depth - e->depth);
	memcpy(nd, f->dir, (size_t)n * 4);
	for (uint32_t i = 0; i < run; i++)
		nd[j + i] = nid;
	commit_dir(f, f->depth);
	f->hdr->grows++;

	/* the old bits are unreachable now */
	uint64_t old_off = e->bits_off, old_lines = e->nlines;
	struct leafmap *m = &f->lm[nid];
	unmap_leaf(m);
	unmap_leaf(&f->lm[id]);
	region_free(f, old_off, bits_len(old_lines));
	m->bits = nl.bits;
	m->maplen = bits_len(nlines);
	m->off = nl.off;
	m->nlines = nlines;
	nl.bits = NULL;
	newleaf_drop(f, &nl, false);
	return 0;
}

/* Split leaf id (at depth d < D_max, entries from j) into two children of
 * nlines each. */
static int split_leaf(struct bitfilter *f, uint32_t id, uint32_t j, uint64_t nlines)
{
	struct bf_leaf *e = &f->leaves[id];
	uint32_t nid[2];
	struct split_ctx s;
	struct offlist old = { 0 };
	unsigned d = e->depth;
	int rc;

	memset(&s, 0, sizeof s);
	if ((rc = free_entries(f, nid, 2)) != 0)
		return rc;
	unmap_leaf(&f->lm[id]); /* as in grow_leaf */
	s.bit = 63 - d;
	for (unsigned b = 0; b < 2; b++) {
		if ((rc = newleaf_init(f, &s.child[b], nlines)) != 0)
			goto fail;
		if (!(s.part[b] = malloc(CHUNK_KEYS * sizeof(uint64_t)))) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	if ((rc = read_log(f, e, split_keys, &s, &old)) != 0)
		goto fail;
	for (unsigned b = 0; b < 2; b++)
		if ((rc = logw_finish(f, &s.child[b].log)) != 0)
			goto fail;

	uint64_t prefix = j >> (f->depth - d);
	for (unsigned b = 0; b < 2; b++) {
		struct logw *w = &s.child[b].log;
		struct bf_leaf *c = &f->leaves[nid[b]];
		memset(c, 0, sizeof *c);
		c->nlines = nlines;
		c->count = w->count;
		c->bits_off = s.child[b].off;
		c->chunk_first = w->chunks ? w->first : 0;
		c->tail = w->chunks ? tail_pack(w->cur, w->chunks) : 0;
		c->depth = d + 1;
		c->prefix = prefix * 2 + b;
	}

	uint32_t *nd = inactive_dir(f);
	unsigned nd_depth = f->depth;
	if (d == f->depth) {
		nd_depth++;
		for (uint32_t i = 0; i < (UINT32_C(1) << nd_depth); i++)
			nd[i] = f->dir[i >> 1];
	} else {
		memcpy(nd, f->dir, ((size_t)1 << f->depth) * 4);
	}
	uint32_t start = (uint32_t)(prefix << (nd_depth - d)), half = UINT32_C(1) << (nd_depth - d - 1);
	for (uint32_t i = 0; i < half; i++) {
		nd[start + i] = nid[0];
		nd[start + half + i] = nid[1];
	}
	commit_dir(f, nd_depth);
	f->hdr->splits++;

	uint64_t old_off = e->bits_off, old_lines = e->nlines;
	unmap_leaf(&f->lm[id]);
	region_free(f, old_off, bits_len(old_lines));
	for (size_t i = 0; i < old.n; i++)
		region_free(f, old.v[i], CHUNK_BYTES);
	for (unsigned b = 0; b < 2; b++) {
		struct leafmap *m = &f->lm[nid[b]];
		unmap_leaf(m);
		m->bits = s.child[b].bits;
		m->maplen = bits_len(nlines);
		m->off = s.child[b].off;
		m->nlines = nlines;
		s.child[b].bits = NULL;
		newleaf_drop(f, &s.child[b], false);
		free(s.part[b]);
	}
	free(old.v);
	return 0;
fail:
	for (unsigned b = 0; b < 2; b++) {
		newleaf_drop(f, &s.child[b], true);
		free(s.part[b]);
	}
	free(old.v);
	(void)map_leaf(f, id);
	return rc;
}

/* ---- keeping the rate ---- */

struct scan {
	double mean;      /* the filter's rate */
	double worst;     /* the highest leaf rate */
	uint32_t worst_id, worst_j;
	uint32_t leaves;
	uint64_t keys, lines, chunks;
};

static int scan_leaf(struct bitfilter *f, void *ctx, uint32_t id, uint32_t j)
{
	struct scan *s = ctx;
	const struct bf_leaf *e = &f->leaves[id];
	double r = rate_at(f, (double)e->count / (double)e->nlines);
	s->mean += ldexp(r, -(int)e->depth);
	if (r > s->worst || s->leaves == 0) {
		s->worst = r;
		s->worst_id = id;
		s->worst_j = j;
	}
	s->leaves++;
	s->keys += e->count;
	s->lines += e->nlines;
	s->chunks += tail_chunks(e->tail);
	return 0;
}

static int scan_all(struct bitfilter *f, struct scan *s)
{
	memset(s, 0, sizeof *s);
	return walk(f, scan_leaf, s);
}

/* Rebuild the worst leaf until the filter's rate is back under the target. */
static int keep_rate(struct bitfilter *f)
{
	for (;;) {
		struct scan s;
		int rc = scan_all(f, &s);
		if (rc)
			return rc;
		if (s.mean <= f->target)
			return 0;
		const struct bf_leaf *e = &f->leaves[s.worst_id];
		double lam = (double)e->count / (double)e->nlines;
		uint64_t nlines = round_lines((double)e->nlines * GROWTH);
		if (lam > f->lam_cap) /* far over (a big batch on a small filter): jump */
			nlines = round_lines(fmax((double)nlines, (double)e->count / f->lam_cap * GROWTH));
		if (nlines <= e->nlines)
			nlines = e->nlines + LEAF_LINE_UNIT;
		bool can_split = e->depth < BITFILTER_MAX_DEPTH &&
				 s.leaves + 3 <= BITFILTER_MAX_LEAVES;
		if (nlines > f->max_leaf_lines && can_split)
			rc = split_leaf(f, s.worst_id, s.worst_j, round_lines((double)nlines / 2));
		else if (e->nlines >= MAX_LEAF_LINES)
			rc = -EFBIG; /* no room left to grow: 2^31 lines, 16384 leaves */
		else
			rc = grow_leaf(f, s.worst_id, s.worst_j,
				       nlines < MAX_LEAF_LINES ? nlines : MAX_LEAF_LINES);
		if (rc)
			return rc;
	}
}

/* ---- life cycle ---- */

static int setup(struct bitfilter *f)
{
	struct bf_header *h = f->hdr;
	f->k = h->k;
	f->lpk = h->lines_per_key;
	f->max_leaf_lines = h->max_leaf_lines;
	bitpos_init(&f->pos, h->seed, h->k, h->lines_per_key);
	f->fpr = h->fpr;
	f->target = h->fpr * RATE_MARGIN;
	f->lam_cap = load_for(f->k, f->lpk, f->target);
	f->gen = UINT64_MAX;
	if (!(f->lam_cap > 0))
		return -EINVAL;
	f->lm = calloc(BITFILTER_MAX_LEAVES, sizeof *f->lm);
	f->ref = calloc(BITFILTER_MAX_LEAVES, 1);
	f->chunkbuf = malloc(CHUNK_BYTES);
	f->lcount = calloc(BITFILTER_MAX_LEAVES, sizeof *f->lcount);
	f->touched = malloc(BITFILTER_MAX_LEAVES * sizeof *f->touched);
	if (!f->lm || !f->ref || !f->chunkbuf || !f->lcount || !f->touched)
		return -ENOMEM;
	return ftab_init(f);
}

static bool header_ok(const struct bf_header *h)
{
	return !memcmp(h->magic, magic, sizeof magic) && h->version == VERSION &&
	       k_valid(h->k, h->lines_per_key) && h->fpr > 0 && h->fpr < 0.5 &&
	       h->max_leaf_lines >= LEAF_LINE_UNIT;
}

static struct bitfilter *alloc_filter(int fd, bool readonly)
{
	struct bitfilter *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->fd = fd;
	f->readonly = readonly;
	f->meta = MAP_FAILED;
	return f;
}

static void free_filter(struct bitfilter *f)
{
	if (!f)
		return;
	if (f->lm)
		for (uint32_t id = 0; id < BITFILTER_MAX_LEAVES; id++)
			unmap_leaf(&f->lm[id]);
	if (f->meta != MAP_FAILED)
		munmap(f->meta, DATA_START);
	if (f->fd >= 0)
		close(f->fd);
	free(f->lm);
	free(f->ref);
	free(f->chunkbuf);
	free(f->lcount);
	free(f->touched);
	free(f->stage);
	free(f->ftab);
	free(f->set);
	free(f->probes);
	free(f);
}

static int map_meta(struct bitfilter *f)
{
	void *p = NULL;
	int rc = map_region(f, 0, DATA_START, &p);
	if (rc)
		return rc;
	f->meta = p;
	f->hdr = p;
	f->leaves = (struct bf_leaf *)(void *)(f->meta + LEAF_OFF);
	f->freel = (struct bf_extent *)(void *)(f->meta + FREE_OFF);
	return 0;
}

static int open_tmpfile(void)
{
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd >= 0 ? fd : -errno;
	char path[4096];
	snprintf(path, sizeof path, "%s/urlseen.XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	unlink(path);
	return fd;
}

/* Write a new, empty filter into fd (an empty file). */
static int init_file(struct bitfilter *f, const struct bitfilter_params *p, uint32_t k,
		     double lam)
{
	int rc;
	if (ftruncate(f->fd, (off_t)DATA_START) != 0)
		return -errno;
	if ((rc = reserve(f, 0, DATA_START)) != 0)
		return rc;
	if ((rc = map_meta(f)) != 0)
		return rc;
	struct bf_header *h = f->hdr;
	memcpy(h->magic, magic, sizeof magic);
	h->version = VERSION;
	h->k = k;
	h->lines_per_key = p->lines_per_key;
	h->max_leaf_lines = p->max_leaf_lines;
	h->fpr = p->fpr;
	h->seed = p->seed;
	h->frontier = DATA_START;
	h->expected = p->expected;

	/* first leaves: a power of two of them, see INIT_LEAVES */
	double total = ceil((double)(p->expected ? p->expected : 1) / lam);
	unsigned d = 0;
	while ((UINT32_C(2) << d) <= INIT_LEAVES &&
	       total / (double)(UINT64_C(2) << d) >= INIT_LEAF_MIN_LINES)
		d++;
	while (d < BITFILTER_MAX_DEPTH && (UINT32_C(2) << d) <= BITFILTER_MAX_LEAVES / 2 &&
	       total / (double)(UINT64_C(1) << d) > p->max_leaf_lines / 2.0)
		d++;
	uint64_t nlines = round_lines(total / (double)(UINT64_C(1) << d));
	uint32_t *dir = dir_buf(f, 0);
	for (uint32_t i = 0; i < (UINT32_C(1) << d); i++) {
		struct bf_leaf *e = &f->leaves[i];
		if ((rc = region_alloc(f, bits_len(nlines), bits_align(nlines), true, &e->bits_off)) != 0)
			return rc;
		e->nlines = nlines;
		e->depth = d;
		e->prefix = i;
		dir[i] = i;
	}
	h->dirstate = d;
	h->generation = 1;
	return 0;
}

int bitfilter_create(const char *path, const struct bitfilter_params *p, struct bitfilter **out)
{
	struct bitfilter_params q;
	uint32_t k;
	double lam;
	char tmp[4096];
	int fd, rc;

	if (!p || !out)
		return -EINVAL;
	q = *p;
	if (!q.lines_per_key)
		q.lines_per_key = 2;
	if (!q.max_leaf_lines)
		q.max_leaf_lines = DEFAULT_MAX_LEAF_LINES;
	if (!q.seed)
		q.seed = DEFAULT_SEED;
	if (!q.expected)
		q.expected = 1;
	q.max_leaf_lines = (uint32_t)round_lines(q.max_leaf_lines);
	if ((rc = bitfilter_best_k(q.fpr * RATE_MARGIN, q.lines_per_key, &k, &lam)) != 0)
		return rc;
	if (!(q.fpr < 0.5) || q.expected > (UINT64_C(1) << 50))
		return -EINVAL;

	if (path) {
		if ((size_t)snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= sizeof tmp)
			return -ENAMETOOLONG;
		fd = mkostemp(tmp, O_CLOEXEC);
		if (fd < 0)
			return -errno;
	} else {
		fd = open_tmpfile();
		if (fd < 0)
			return fd;
	}
	struct bitfilter *f = alloc_filter(fd, false);
	if (!f) {
		close(fd);
		if (path)
			unlink(tmp);
		return -ENOMEM;
	}
	rc = init_file(f, &q, k, lam);
	if (rc == 0)
		rc = setup(f);
	if (rc == 0 && path) {
		/* appear whole or not at all; link() never replaces */
		if (link(tmp, path) != 0)
			rc = -errno;
		unlink(tmp);
		path = NULL;
	}
	if (rc) {
		if (path)
			unlink(tmp);
		free_filter(f);
		return rc;
	}
	*out = f;
	return 0;
}

int bitfilter_open(const char *path, bool readonly, struct bitfilter **out)
{
	struct bf_header h;
	struct stat st;
	int rc;

	if (!path || !out)
		return -EINVAL;
	int fd = open(path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < DATA_START) {
		close(fd);
		return -EINVAL;
	}
	if ((rc = pread_all(fd, &h, sizeof h, 0)) != 0 || !header_ok(&h)) {
		close(fd);
		return rc && rc != -EUCLEAN ? rc : -EINVAL;
	}
	struct bitfilter *f = alloc_filter(fd, readonly);
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	if ((rc = map_meta(f)) != 0 || (rc = setup(f)) != 0) {
		free_filter(f);
		return rc;
	}
	*out = f;
	return 0;
}

void bitfilter_close(struct bitfilter *f)
{
	free_filter(f);
}

int bitfilter_sync(struct bitfilter *f)
{
	return fsync(f->fd) == 0 ? 0 : -errno;
}

/* ---- locking ---- */

int bitfilter_lock(struct bitfilter *f, bool exclusive)
{
	if (exclusive && f->readonly)
		return -EROFS;
	if (f->lock)
		return -EBUSY;
	int op = exclusive ? LOCK_EX : LOCK_SH;
	while (flock(f->fd, op) != 0)
		if (errno != EINTR)
			return -errno;
	f->lock = op;
	read_dirstate(f);
	if (f->hdr->generation != f->gen) {
		int rc = revalidate(f);
		if (rc) {
			bitfilter_unlock(f);
			return rc;
		}
	}
	return 0;
}

void bitfilter_unlock(struct bitfilter *f)
{
	if (!f->lock)
		return;
	f->lock = 0;
	f->probes_n = 0; /* another process may change the layout now */
	(void)flock(f->fd, LOCK_UN);
}

/* ---- check and add ---- */

/* The keys found new so far in one check call: open addressing, slots
 * valid when their stamp is the call's. */
static int set_prepare(struct bitfilter *f, size_t n)
{
	size_t cap = 64;
	while (cap < 2 * n)
		cap *= 2;
	if (cap > f->set_cap) {
		free(f->set);
		f->set = calloc(cap, sizeof *f->set);
		f->set_cap = f->set ? cap : 0;
		if (!f->set)
			return -ENOMEM;
	}
	f->stamp++;
	return 0;
}

static inline size_t set_slot(const struct bitfilter *f, uint64_t x)
{
	return (size_t)(x ^ (x >> 29)) & (f->set_cap - 1);
}

/* Insert x; false if it was there already. */
static bool set_insert(struct bitfilter *f, uint64_t x)
{
	size_t mask = f->set_cap - 1, i = set_slot(f, x);
	while (f->set[i].stamp == f->stamp) {
		if (f->set[i].key == x)
			return false;
		i = (i + 1) & mask;
	}
	f->set[i].stamp = f->stamp;
	f->set[i].key = x;
	return true;
}

/* Room to keep n probes for bitfilter_record; false without memory. */
static bool probes_reserve(struct bitfilter *f, size_t n)
{
	if (n > f->probes_cap) {
		struct probe *v = realloc(f->probes, n * sizeof *v);
		if (!v)
			return false;
		f->probes = v;
		f->probes_cap = n;
	}
	return true;
}

size_t bitfilter_check(struct bitfilter *f, const uint8_t *keys, size_t n, bool *seen)
{
	struct probe ring[PREFETCH];
	size_t fresh = 0;
	bool dedup = set_prepare(f, n) == 0;
	bool keep = probes_reserve(f, n);

	f->probes_n = 0;
	for (size_t i = 0; i < n + PREFETCH; i++) {
		if (i >= PREFETCH) {
			size_t j = i - PREFETCH;
			struct probe *p = keep ? &f->probes[j] : &ring[j % PREFETCH];
			bool s = bitpos_test(&f->pos, p->x, p->l0, p->l1);
			/* without memory for the set, a repeat within the call
			 * counts as new: shown twice, never lost */
			if (!s && dedup)
				s = !set_insert(f, p->x);
			seen[j] = s;
			fresh += !s;
		}
		if (i < n) {
			struct probe *p = keep ? &f->probes[i] : &ring[i % PREFETCH];
			probe_key(f, bitpos_fold(keys + 16 * i), p, 0);
			if (dedup)
				prefetch(&f->set[set_slot(f, p->x)], 1);
		}
	}
	if (keep) {
		f->probes_n = n;
		f->probes_gen = f->gen;
	}
	return fresh;
}

/* Room to stage n keys for recording; false without memory. */
static bool stage_reserve(struct bitfilter *f, size_t n)
{
	if (n > f->stage_cap) {
		uint64_t *v = realloc(f->stage, n * sizeof *v);
		if (!v)
			return false;
		f->stage = v;
		f->stage_cap = n;
	}
	return true;
}

/* Group the keys of p[0..n) that are to be recorded (seen[i] false; seen
 * NULL: all) by leaf into f->stage, each leaf's keys together, in the
 * order of f->touched; f->lcount[id] is left at the end of leaf id's run.
 * Returns the number of leaves. */
static size_t stage_by_leaf(struct bitfilter *f, const struct probe *p, size_t n, const bool *seen)
{
	size_t nt = 0, at = 0;
	for (size_t i = 0; i < n; i++)
		if (!(seen && seen[i]) && f->lcount[p[i].leaf]++ == 0)
			f->touched[nt++] = p[i].leaf;
	for (size_t t = 0; t < nt; t++) {
		uint32_t *c = &f->lcount[f->touched[t]];
		size_t cnt = *c;
		*c = (uint32_t)at;
		at += cnt;
	}
	for (size_t i = 0; i < n; i++)
		if (!(seen && seen[i]))
			f->stage[f->lcount[p[i].leaf]++] = p[i].x;
	return nt;
}

/* Record the keys of p[0..n) that seen does not mark (NULL: all): first
 * every leaf's new keys go to its log (one write per leaf and chunk), then
 * the bits are set, so that a key in the bits is always in the log. When a
 * log cannot be written, the keys of the leaves written before it are
 * recorded and the error returned. */
static int record_probes(struct bitfilter *f, const struct probe *p, size_t n, const bool *seen)
{
	if (!stage_reserve(f, n))
		return -ENOMEM;
	size_t nt = stage_by_leaf(f, p, n, seen), logged = 0;
	int rc = 0;
	for (; logged < nt && rc == 0; logged++) {
		uint32_t id = f->touched[logged];
		uint32_t start = logged ? f->lcount[f->touched[logged - 1]] : 0;
		rc = log_keys(f, id, f->stage + start, f->lcount[id] - start);
	}
	if (rc)
		logged--; /* the leaf that failed */
	/* lcount now marks the leaves whose keys are all logged */
	for (size_t t = 0; t < nt; t++)
		f->lcount[f->touched[t]] = t < logged;
	for (size_t i = 0; i < n; i++) {
		/* the lines were fetched by the check; the TLB may have let
		 * them go, so ask again a little ahead */
		size_t j = i + PREFETCH;
		if (j < n && !(seen && seen[j])) {
			prefetch(p[j].l0, 1);
			prefetch(p[j].l1, 1);
		}
		if (!(seen && seen[i]) && f->lcount[p[i].leaf])
			bitpos_set(&f->pos, p[i].x, p[i].l0, p[i].l1);
	}
	for (size_t t = 0; t < nt; t++)
		f->lcount[f->touched[t]] = 0;
	return rc;
}

/* Keys are added this many at a time (the probes and the staging of one
 * slice stay in the caches). */
#define ADD_SLICE 4096

int bitfilter_add(struct bitfilter *f, const uint8_t *keys, size_t n)
{
	int rc = 0;

	if (f->readonly)
		return -EROFS;
	if (f->lock != LOCK_EX)
		return -EPERM;
	if (!probes_reserve(f, n < ADD_SLICE ? n : ADD_SLICE))
		return -ENOMEM;
	for (size_t s = 0; s < n && rc == 0; s += ADD_SLICE) {
		size_t m = n - s < ADD_SLICE ? n - s : ADD_SLICE;
		for (size_t i = 0; i < m; i++)
			probe_key(f, bitpos_fold(keys + 16 * (s + i)), &f->probes[i], 1);
		rc = record_probes(f, f->probes, m, NULL);
	}
	f->probes_n = 0;
	int rc2 = keep_rate(f);
	return rc ? rc : rc2;
}

int bitfilter_record(struct bitfilter *f, const uint8_t *keys, size_t n, const bool *seen)
{
	if (f->readonly)
		return -EROFS;
	if (f->lock != LOCK_EX)
		return -EPERM;
	bool cached = f->probes_n == n && f->probes_gen == f->gen;
	for (size_t i = 0; cached && i < n; i++)
		cached = f->probes[i].x == bitpos_fold(keys + 16 * i);
	if (!cached) {
		/* not right after the check of these keys: the long way */
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			m += !seen[i];
		uint8_t *add = malloc(m ? m * 16 : 1);
		if (!add)
			return -ENOMEM;
		for (size_t i = 0, j = 0; i < n; i++)
			if (!seen[i])
				memcpy(add + 16 * j++, keys + 16 * i, 16);
		int rc = bitfilter_add(f, add, m);
		free(add);
		return rc;
	}
	int rc = record_probes(f, f->probes, n, seen);
	f->probes_n = 0;
	int rc2 = keep_rate(f);
	return rc ? rc : rc2;
}

int bitfilter_check_and_add(struct bitfilter *f, const uint8_t *keys, size_t n, bool *seen,
			    size_t *nnew)
{
	int rc = bitfilter_lock(f, true);
	if (rc)
		return rc;
	size_t fresh = bitfilter_check(f, keys, n, seen);
	if (nnew)
		*nnew = fresh;
	rc = bitfilter_record(f, keys, n, seen);
	bitfilter_unlock(f);
	return rc;
}

/* ---- statistics and checks ---- */

int bitfilter_stats(struct bitfilter *f, struct bitfilter_stats *st)
{
	struct scan s;
	int rc = scan_all(f, &s);
	if (rc)
		return rc;
	memset(st, 0, sizeof *st);
	st->keys = s.keys;
	st->leaves = s.leaves;
	st->depth = f->depth;
	st->k = f->k;
	st->lines_per_key = f->lpk;
	st->max_leaf_lines = f->max_leaf_lines;
	st->target_fpr = f->fpr;
	st->model_fpr = s.mean;
	st->bits_bytes = s.lines * BITFILTER_LINE_BYTES;
	st->theoretical_bytes = (double)s.keys * -log(f->fpr) / (M_LN2 * M_LN2) / 8;
	st->log_bytes = s.chunks * CHUNK_BYTES;
	st->file_bytes = f->hdr->frontier;
	for (uint32_t i = 0; i < f->hdr->free_hw && i < FREE_MAX; i++)
		st->free_bytes += f->freel[i].len;
	st->lost_bytes = f->hdr->lost;
	st->grows = f->hdr->grows;
	st->splits = f->hdr->splits;
	return 0;
}

struct verify_ctx {
	struct bf_extent *v; /* every extent in use or free */
	size_t n, cap;
	char *msg;
	size_t msglen;
	int rc;
};

static int vpush(struct verify_ctx *c, uint64_t off, uint64_t len)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 256;
		struct bf_extent *v = realloc(c->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = (struct bf_extent){ off, len };
	return 0;
}

static int vfail(struct verify_ctx *c, const char *what, uint32_t id)
{
	if (c->msg && c->msglen)
		snprintf(c->msg, c->msglen, "leaf %u: %s", id, what);
	return -EUCLEAN;
}

static int verify_leaf(struct bitfilter *f, void *ctx, uint32_t id, uint32_t j)
{
	struct verify_ctx *c = ctx;
	const struct bf_leaf *e = &f->leaves[id];
	int rc;
	(void)j;
	if (!leaf_ok(f, e))
		return vfail(c, "bad geometry or offsets", id);
	uint64_t chunks = tail_chunks(e->tail);
	uint64_t need = (e->count + CHUNK_KEYS - 1) / CHUNK_KEYS;
	/* one more chunk than the count needs: a kill between the two stores
	 * of an append, harmless */
	if (chunks != need && !(chunks == e->count / CHUNK_KEYS + 1))
		return vfail(c, "chunk count does not match key count", id);
	if ((rc = vpush(c, e->bits_off, (bits_len(e->nlines) + UNIT - 1) / UNIT * UNIT)) != 0)
		return rc;
	uint64_t off = e->chunk_first;
	for (uint64_t i = 0; i < chunks; i++) {
		if (!region_ok(f, off, CHUNK_BYTES))
			return vfail(c, "chunk outside the file", id);
		if ((rc = vpush(c, off, CHUNK_BYTES)) != 0)
			return rc;
		uint64_t next;
		if (i + 1 == chunks) {
			if (off != tail_off(e->tail))
				return vfail(c, "last chunk is not the tail", id);
			break;
		}
		if ((rc = pread_all(f->fd, &next, sizeof next, off)) != 0)
			return rc;
		off = next;
	}
	return 0;
}

static int ext_cmp(const void *a, const void *b)
{
	const struct bf_extent *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

int bitfilter_verify(struct bitfilter *f, char *msg, size_t msglen)
{
	struct verify_ctx c = { .msg = msg, .msglen = msglen };
	int rc;

	if (msg && msglen)
		msg[0] = 0;
	if (f->hdr->frontier < DATA_START || f->hdr->frontier % UNIT) {
		if (msg && msglen)
			snprintf(msg, msglen, "bad frontier %llu", (unsigned long long)f->hdr->frontier);
		return -EUCLEAN;
	}
	memset(f->ref, 0, BITFILTER_MAX_LEAVES);
	rc = walk(f, mark_ref, NULL);
	if (rc == 0)
		rc = walk(f, verify_leaf, &c);
	else if (msg && msglen)
		snprintf(msg, msglen, "directory does not describe a tree of leaves");
	for (uint32_t i = 0; rc == 0 && i < f->hdr->free_hw && i < FREE_MAX; i++) {
		const struct bf_extent *e = &f->freel[i];
		if (!e->len)
			continue;
		if (!region_ok(f, e->off, e->len) || e->len % UNIT) {
			if (msg && msglen)
				snprintf(msg, msglen, "free extent %u outside the file", i);
			rc = -EUCLEAN;
		} else {
			rc = vpush(&c, e->off, e->len);
		}
	}
	if (rc == 0) {
		qsort(c.v, c.n, sizeof *c.v, ext_cmp);
		for (size_t i = 1; i < c.n; i++) {
			if (c.v[i - 1].off + c.v[i - 1].len > c.v[i].off) {
				if (msg && msglen)
					snprintf(msg, msglen, "space at %llu used twice",
						 (unsigned long long)c.v[i].off);
				rc = -EUCLEAN;
				break;
			}
		}
	}
	free(c.v);
	return rc;
}
