/* bitfilter_int.h - what the parts of the URL-seen filter share: the
 * tunables, the file layout, a process's state and the functions one part
 * calls in another. bitfilter.h is the interface; this is for
 *   bitfilter.c         the design (its top comment), opening, the
 *                       directory and mappings, locking, check and add;
 *   bitfilter_space.c   space in the file and the key logs;
 *   bitfilter_grow.c    the rate model, rebuilding and splitting leaves;
 *   bitfilter_verify.c  statistics and the structure check.
 */
#ifndef PD_BITFILTER_INT_H
#define PD_BITFILTER_INT_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bitfilter.h"
#include "bitpos.h"
#include "base/fdio.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the filter stores native integers in its file: little-endian hosts only"
#endif

/* ---- tunables (bitfilter.c's top comment says why these values) ---- */

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

/* ---- helpers ---- */

static inline __attribute__((always_inline)) void prefetch(const void *p, int write)
{
	if (write)
		__builtin_prefetch(p, 1, 3);
	else
		__builtin_prefetch(p, 0, 3);
}

static inline uint64_t round_lines(double lines)
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

/* ---- space in the file and key logs (bitfilter_space.c) ---- */

/* Growable list of file offsets (the chunks a rebuild read or wrote). */
struct offlist {
	uint64_t *v;
	size_t n, cap;
};

/* A key log written whole, for a split's child. */
struct logw {
	uint64_t first, cur, chunks, count;
	uint64_t *buf;
	size_t slot;
	struct offlist mine; /* every chunk allocated, to give back on failure */
};

typedef int (*keys_fn)(struct bitfilter *f, void *ctx, const uint64_t *keys, size_t n);

int bf_region_alloc(struct bitfilter *f, uint64_t len, uint64_t align, bool mapped,
		    uint64_t *off);
void bf_region_free(struct bitfilter *f, uint64_t off, uint64_t len);
int bf_reserve(struct bitfilter *f, uint64_t off, uint64_t len);
int bf_pread_all(int fd, void *buf, size_t len, uint64_t off);
int bf_log_keys(struct bitfilter *f, uint32_t id, const uint64_t *keys, size_t n);
/* Read leaf e's keys chunk by chunk: fn(ctx, keys, n). The chunks' offsets
 * go to chunks (may be NULL). */
int bf_read_log(struct bitfilter *f, const struct bf_leaf *e, keys_fn fn, void *ctx,
		struct offlist *chunks);
int bf_logw_put(struct bitfilter *f, struct logw *w, uint64_t x);
int bf_logw_finish(struct bitfilter *f, struct logw *w);
void bf_logw_abandon(struct bitfilter *f, struct logw *w);

/* ---- mappings and the directory (bitfilter.c) ---- */

typedef int (*leaf_fn)(struct bitfilter *f, void *ctx, uint32_t id, uint32_t j);

bool bf_region_ok(const struct bitfilter *f, uint64_t off, uint64_t len);
void bf_unmap_leaf(struct leafmap *m);
int bf_map_bits(struct bitfilter *f, uint64_t off, size_t len, void **out);
int bf_map_leaf(struct bitfilter *f, uint32_t id);
bool bf_leaf_ok(const struct bitfilter *f, const struct bf_leaf *e);
void bf_commit_dir(struct bitfilter *f, unsigned d);
uint32_t *bf_inactive_dir(const struct bitfilter *f);
int bf_walk(struct bitfilter *f, leaf_fn fn, void *ctx);
int bf_mark_ref(struct bitfilter *f, void *ctx, uint32_t id, uint32_t j);
int bf_free_entries(struct bitfilter *f, uint32_t *ids, unsigned want);

/* ---- the rate and growth (bitfilter_grow.c) ---- */

struct scan {
	double mean;      /* the filter's rate */
	double worst;     /* the highest leaf rate */
	uint32_t worst_id, worst_j;
	uint32_t leaves;
	uint64_t keys, lines, chunks;
};

bool bf_k_valid(uint32_t k, uint32_t lpk);
double bf_load_for(uint32_t k, uint32_t lpk, double fpr);
int bf_ftab_init(struct bitfilter *f);
double bf_rate_at(const struct bitfilter *f, double lam);
int bf_scan_all(struct bitfilter *f, struct scan *s);
/* Rebuild the worst leaf until the filter's rate is back under the target. */
int bf_keep_rate(struct bitfilter *f);

#endif
