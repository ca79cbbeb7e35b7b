/* gfilter.h - the page filter that grows: a tree of counting-filter leaves
 * (seed 004's dynamic splittable filter) over the blocked counting filter of
 * cbf.h.
 *
 * Routing. A leaf covers one MD5 prefix: `depth` leading bits of value
 * `prefix` (the root: depth 0, every key). A leaf that splits into c = 2^b
 * children routes on the next b bits of the MD5, so each level uses other
 * bits (a different routing hash per level, as the seed asks), a key
 * reaches exactly one leaf, and a lookup touches one leaf. Because the
 * fingerprint table is keyed by MD5, a leaf is one contiguous key range of
 * it and is rebuilt by one cursor scan. A split may also have one child
 * (b = 0): the leaf is rebuilt larger over the same prefix. A directory
 * indexed by the leading `max depth` bits finds a key's leaf in one load.
 *
 * Growing. A new store starts with 2^b leaves (gf_tree_initial: the
 * fewest that fit max_leaf_lines, as the seed starts with c leaves under
 * the root), each sized (cbf_geometry_for) for its share of the expected
 * pages at the target rate. When a leaf's key count passes that capacity
 * its split starts (gf_split_wanted), and its children are sized together
 * for `growth` times the keys it holds then: one child (b = 0: the leaf is
 * rebuilt larger over the same prefix) while that fits max_leaf_lines,
 * else 2^b children. Memory therefore grows in steps of `growth` (1.25 by
 * default) per leaf instead of doubling, small leaves keep the moment when
 * a leaf and its children are both in memory a small part of the whole,
 * and a leaf's rate moves between about a quarter of the target (just
 * rebuilt) and the target (about to split). fmax, the bound, leaves room
 * for the keys a leaf takes while it waits for and goes through its split:
 * at 1e-4, a leaf at the target reaches 2e-4 after about 9% more keys.

 * A split in progress. The splitting leaf L has a cursor C (an MD5): keys
 * <= C are routed to the children, keys > C still to L. The caller moves
 * L's keys in MD5 order (gf_split_move), then advances C past them
 * (gf_split_advance); when C passes the end of L's range the caller
 * finishes the split (gf_split_finish) and L is dropped. Every stored
 * position names its leaf, so a delete removes a key from the leaf that
 * holds it whatever the state of a split.
 *
 * Batches. Every change (counters, key counts, the tree) is journalled
 * until gf_commit() or undone by gf_rollback(): the caller's transaction
 * commits or aborts, and the filter follows it.
 *
 * Saturated counters' exact counts go through the caller's cbf_exact_ops,
 * with leaf L's counter i at index L << 40 | i (GF_EXACT_INDEX): leaf 0's
 * indices are those of the single fixed filter this one grew from.
 *
 * Concurrency. One writer (the store's commit leader) changes the filter
 * and routes keys; gf_stats() and gf_tree_get() may run at the same time on
 * other threads (they take the filter's mutex, which the writer takes for
 * changes of the tree).
 *
 * Leaf files (in a store directory): leaf 0 is STORE/filter (the file of
 * the fixed filter, so a store made with it opens with its counts), leaf L
 * STORE/filter.d/leaf-L. gf_open(NULL, ...) keeps the leaves in memory.
 *
 * Errors are negative errno values.
 */
#ifndef PD_GFILTER_H
#define PD_GFILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cbf.h"

#define GF_MAX_DEPTH 20          /* routing bits; the directory has 2^depth entries */
#define GF_MAX_CHILD_BITS 4      /* at most 16 children per split */
#define GF_MAX_LEAF_ID ((UINT32_C(1) << 24) - 1)
#define GF_EXACT_INDEX(leaf, idx) ((uint64_t)(leaf) << 40 | (idx))
#define GF_LEAF_PATH_MAX 40

/* The filter's parameters (persisted with the tree). */
struct gf_config {
	double target_fpr;       /* a leaf past its capacity at this rate splits */
	double fmax;             /* the bound on any leaf's rate (default 2 x target) */
	uint32_t lines_per_key;  /* 1 or 2 */
	uint64_t max_leaf_lines; /* a leaf that would grow past this splits (default 2^14: 1 MiB) */
	double growth;           /* capacity of a split's children / keys of the leaf (default 1.25) */
};
void gf_config_default(struct gf_config *c, double target_fpr, uint32_t lines_per_key);

enum gf_state {
	GF_ACTIVE = 0,    /* routed to through the directory */
	GF_SPLITTING = 1, /* routed to, and moving its keys to its children */
	GF_CHILD = 2,     /* a child of a split in progress */
	GF_DROPPED = 3,   /* split done, removed at the commit */
};

/* One leaf as the tree record describes it. */
struct gf_leaf_desc {
	uint32_t id;
	uint32_t parent;     /* GF_CHILD: the splitting leaf */
	uint8_t depth, state, child_bits, cursor_set;
	uint32_t prefix;
	struct cbf_geometry g;
	uint64_t keys;       /* keys in the leaf (as of the record) */
	uint8_t cursor[16];  /* GF_SPLITTING with cursor_set: keys <= cursor moved */
};

struct gf_tree {
	struct gf_config cfg;
	uint32_t next_id;
	uint32_t n;
	struct gf_leaf_desc *leaf;
};

/* The tree record (little-endian):
 *   version u32 | next_id u32 | n u32 | lines_per_key u32 | target f64 | fmax f64 |
 *   growth f64 | max_leaf_lines u64 | n x leaf
 *   leaf: id u32 | parent u32 | depth u8 | state u8 | child_bits u8 | cursor_set u8 |
 *         prefix u32 | nlines u64 | k u32 | lines_per_key u32 | seed u64 | keys u64 |
 *         cursor [16]  (72 bytes) */
/* Whether a configuration is one the filter can run with. */
bool gf_config_valid(const struct gf_config *c);
size_t gf_tree_size(const struct gf_tree *t);
void gf_tree_encode(const struct gf_tree *t, uint8_t *out);
/* -EUCLEAN for a malformed record. Allocates t->leaf. */
int gf_tree_decode(const void *buf, size_t len, struct gf_tree *t);
void gf_tree_free(struct gf_tree *t);
/* A tree of one leaf, id 0, of geometry g (a new store, or the fixed filter
 * of an older one). */
int gf_tree_single(const struct gf_config *c, const struct cbf_geometry *g, struct gf_tree *t);

/* The tree of a new store: 2^b leaves of depth b, the fewest whose
 * geometry for `expected` / 2^b keys fits max_leaf_lines, but at least 16
 * while each keeps 64 KiB, as seed 004 starts with c leaves under the
 * root. Many leaves keep a split's transient (the leaf and its children
 * both in memory) a small part of the whole. */
int gf_tree_initial(const struct gf_config *c, uint64_t expected, struct gf_tree *t);

/* Relative path of a leaf's file under the store directory. */
void gf_leaf_path(uint32_t id, char out[GF_LEAF_PATH_MAX]);

struct gfilter;

enum gf_mode {
	GF_READWRITE, /* open the leaf files; a missing or damaged one is made anew (zero) */
	GF_READONLY,  /* open the leaf files; fail if one is unusable */
	GF_MEMORY,    /* leaves in memory, all zero (dir is ignored) */
};
/* Open the leaves of tree t under dir. *fresh (may be NULL) tells whether a
 * leaf file had to be made anew. */
int gf_open(const char *dir, const struct gf_tree *t, enum gf_mode mode, struct gfilter **out,
	    bool *fresh);
void gf_close(struct gfilter *gf);
/* The tree as it stands (committed and current batch), with each leaf's key
 * count. Allocates out->leaf. */
int gf_tree_get(struct gfilter *gf, struct gf_tree *out);
/* Whether every leaf file carries this generation. */
bool gf_generation_is(const struct gfilter *gf, uint64_t generation);
/* Write generation into every leaf file and msync it. */
int gf_sync(struct gfilter *gf, uint64_t generation);
/* Set every counter and key count to zero (before a rebuild). */
void gf_clear(struct gfilter *gf);
/* Remove the files under STORE/filter.d that no leaf of the tree owns
 * (children of a split whose batch never committed, a dropped leaf whose
 * removal a crash prevented). */
void gf_remove_strays(const struct gfilter *gf);

/* The leaf a key is routed to, and its positions there. */
struct gf_route {
	uint32_t leaf;
	const struct cbf *f;
};
void gf_route(const struct gfilter *gf, const uint8_t md5[16], struct gf_route *r);
void gf_positions(const struct gfilter *gf, const uint8_t md5[16], uint32_t *leaf,
		  struct cbf_pos *pos);
/* The leaf of this id, NULL if the tree has none. */
const struct cbf *gf_leaf(const struct gfilter *gf, uint32_t id);
/* false: the key was certainly never added. */
bool gf_maybe_contains(const struct gfilter *gf, const uint8_t md5[16]);
/* For n keys of 16 bytes back to back; as cbf_maybe_contains_batch. */
size_t gf_maybe_contains_batch(const struct gfilter *gf, const uint8_t *keys, size_t n,
			       bool *results);

/* Add a new key: route, compute its positions, add them. *leaf and *pos
 * are what the key's record stores. Errors as cbf_add. */
int gf_insert(struct gfilter *gf, const uint8_t md5[16], const struct cbf_exact_ops *ops,
	      void *ctx, uint32_t *leaf, struct cbf_pos *pos);
/* Add or remove stored positions on leaf `leaf` (-EINVAL: no such leaf). */
int gf_add(struct gfilter *gf, uint32_t leaf, const struct cbf_pos *pos,
	   const struct cbf_exact_ops *ops, void *ctx);
int gf_remove(struct gfilter *gf, uint32_t leaf, const struct cbf_pos *pos,
	      const struct cbf_exact_ops *ops, void *ctx);
/* The batch's changes stay (the caller's transaction committed); true if a
 * leaf is now past its capacity (a split is due). */
bool gf_commit(struct gfilter *gf);
/* The batch's changes are undone (the transaction aborted). */
void gf_rollback(struct gfilter *gf);

/* Splitting. A split in progress, or a leaf past its capacity (by the
 * committed counts: any thread may ask). */
bool gf_split_wanted(const struct gfilter *gf);
/* The split to work on: the one in progress, else one started now on the
 * leaf most over its capacity (its children are made, their files
 * created). -ENOENT: none wanted. */
struct gf_split {
	uint32_t leaf;        /* the splitting leaf */
	uint8_t depth;        /* its range: MD5s whose leading depth bits are prefix */
	uint32_t prefix;
	bool cursor_set;      /* keys <= cursor are moved already */
	uint8_t cursor[16];
};
int gf_split_next(struct gfilter *gf, struct gf_split *s);
/* Move one key of the splitting leaf `from` to its child: remove its
 * stored positions old from the leaf, compute and add the child's
 * positions. *leaf and *pos get them, for the key's record. */
int gf_split_move(struct gfilter *gf, uint32_t from, const uint8_t md5[16],
		  const struct cbf_pos *old, const struct cbf_exact_ops *ops, void *ctx,
		  uint32_t *leaf, struct cbf_pos *pos);
/* Keys <= md5 of the splitting leaf are moved. */
void gf_split_advance(struct gfilter *gf, uint32_t leaf, const uint8_t md5[16]);
/* Every key of the splitting leaf is moved: drop it (freed at the commit;
 * the caller removes its file after the commit). -EBUSY if it still holds
 * keys by its count. */
int gf_split_finish(struct gfilter *gf, uint32_t leaf);
/* Whether md5 lies in the range of (depth, prefix). */
bool gf_in_range(const uint8_t md5[16], uint8_t depth, uint32_t prefix);
/* The first MD5 of the range. */
void gf_range_start(uint8_t depth, uint32_t prefix, uint8_t md5[16]);

struct gf_stats {
	uint64_t leaves;        /* routed to (active and splitting) */
	uint64_t children;      /* of a split in progress */
	uint32_t max_depth;
	uint64_t bytes;         /* counters of every leaf */
	uint64_t keys;
	uint64_t nonzero, saturated, counters;
	double fpr_model;       /* from the key counts: the rate a new key meets */
	double fpr_estimate;    /* from the leaves' fill (scans every leaf) */
	double worst_leaf_fpr;  /* highest leaf rate from its key count */
	bool splitting;
	uint64_t splits;        /* splits finished since open */
};
/* fill: also scan the counters (nonzero, saturated, fpr_estimate). */
void gf_stats(struct gfilter *gf, bool fill, struct gf_stats *s);

#endif
