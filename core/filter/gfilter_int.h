/* gfilter_int.h - what gfilter.c (leaves, routing, the journal,
 * statistics) and gfilter_split.c (splits) share: the in-memory tree and
 * the leaf and journal helpers. Not for use outside core/filter/. */
#ifndef PD_GFILTER_INT_H
#define PD_GFILTER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "gfilter.h"

struct gf_leaf {
	struct gf_leaf_desc d;  /* d.keys: committed count */
	int64_t batch;          /* change of the count in this batch */
	uint64_t capacity;      /* keys at the target rate: past it the leaf splits */
	struct cbf *f;
	struct cbf_undo undo;
	struct gf_leaf *child[1u << GF_MAX_CHILD_BITS];
};

enum jkind { J_START, J_CURSOR, J_FINISH };
struct jentry {
	enum jkind kind;
	struct gf_leaf *leaf;
	uint32_t old_next_id;
	uint8_t old_cursor_set;
	uint8_t old_cursor[16];
};

struct gfilter {
	char *dir;              /* NULL: leaves in memory */
	enum gf_mode mode;
	struct gf_config cfg;
	uint32_t next_id;
	struct gf_leaf **v;
	size_t n, cap;
	struct gf_leaf **by_id;
	size_t by_id_len;
	struct gf_leaf **dir_v;
	unsigned dir_bits;
	/* Beside dir_v, for lookups: the counters of each entry's leaf in one
	 * load (NULL: a splitting leaf, routed the long way), and whether every
	 * leaf places keys alike (cbf_same_shape), so that a batch lookup
	 * reads the seed and k once (shape: any leaf). */
	const struct cbf **dir_f;
	const struct cbf *shape;
	struct jentry *j;
	size_t jn, jcap;
	uint64_t splits;
	pthread_mutex_t mu;
};

static inline uint64_t gf_md5_top(const uint8_t md5[16])
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | md5[i];
	return v;
}

static inline uint32_t gf_md5_bits(const uint8_t md5[16], unsigned from, unsigned bits)
{
	if (bits == 0)
		return 0;
	return (uint32_t)((gf_md5_top(md5) << from) >> (64 - bits));
}

static inline bool gf_routed(const struct gf_leaf *l)
{
	return l->d.state == GF_ACTIVE || l->d.state == GF_SPLITTING;
}

static inline uint64_t gf_leaf_keys(const struct gf_leaf *l)
{
	return (uint64_t)((int64_t)l->d.keys + l->batch);
}

/* A leaf of descriptor d joins the tree (its counters opened or made). */
int gf_leaf_add(struct gfilter *gf, const struct gf_leaf_desc *d, struct gf_leaf **out);
/* The leaf of a stored id, NULL if none. */
struct gf_leaf *gf_leaf_by_id(const struct gfilter *gf, uint32_t id);
void gf_leaf_free(struct gf_leaf *l);
/* Map the leaf's counters from its file (create: a new file; *fresh: it
 * was made now), or from memory when the filter has no directory. */
int gf_leaf_open_counters(struct gfilter *gf, struct gf_leaf *l, bool create, bool *fresh);
/* Take a leaf out of the tree and free it. */
void gf_leaf_unlink(struct gfilter *gf, struct gf_leaf *l);
/* Add or remove one key's positions in a leaf, with the batch's undo. */
int gf_leaf_update(struct gf_leaf *l, const struct cbf_pos *pos, bool add,
		   const struct cbf_exact_ops *ops, void *ctx);
/* The lookup table beside the directory, after the routing changed. */
void gf_lookup_refresh(struct gfilter *gf);
/* The directory from the routed leaves. */
int gf_dir_rebuild(struct gfilter *gf);
/* Log a tree change of the batch, undone by gf_rollback. */
int gf_journal_push(struct gfilter *gf, enum jkind kind, struct gf_leaf *l);

#endif
