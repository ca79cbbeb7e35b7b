/* bitfilter_grow.c - the URL-seen filter's rate model, and the rebuilds and
 * splits that keep its rate (see bitfilter.c for the design). */
#include "bitfilter_int.h"

#include "filter/cbf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

bool bf_k_valid(uint32_t k, uint32_t lpk)
{
	return (lpk == 1 || lpk == 2) && k >= lpk && k % lpk == 0 && k / lpk <= BITPOS_MAX_KK &&
	       k <= BITFILTER_MAX_K;
}

double bitfilter_model_fpr(uint32_t k, uint32_t lines_per_key, double keys_per_line)
{
	if (!bf_k_valid(k, lines_per_key) || !(keys_per_line >= 0))
		return 1;
	if (keys_per_line == 0)
		return 0;
	double p = line_fpr(keys_per_line * lines_per_key, k / lines_per_key);
	return lines_per_key == 2 ? p * p : p;
}

/* Largest load with rate <= fpr (the rate grows with the load). */
double bf_load_for(uint32_t k, uint32_t lpk, double fpr)
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
		double load = bf_load_for(kk, lines_per_key, fpr);
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

int bf_ftab_init(struct bitfilter *f)
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
double bf_rate_at(const struct bitfilter *f, double lam)
{
	double x = lam / f->ftab_step;
	size_t i = (size_t)x;
	if (i + 1 >= f->ftab_n)
		return bitfilter_model_fpr(f->k, f->lpk, lam);
	return f->ftab[i] + (f->ftab[i + 1] - f->ftab[i]) * (x - (double)i);
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
	int rc = bf_region_alloc(f, bits_len(nlines), bits_align(nlines), true, &n->off);
	if (rc)
		return rc;
	void *p = NULL;
	if ((rc = bf_map_bits(f, n->off, bits_len(nlines), &p)) != 0) {
		bf_region_free(f, n->off, bits_len(nlines));
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
		bf_region_free(f, n->off, bits_len(n->nlines));
	if (free_space)
		bf_logw_abandon(f, &n->log);
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
		if ((rc = bf_logw_put(f, &s->child[b].log, keys[i])) != 0)
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

	if ((rc = bf_free_entries(f, &nid, 1)) != 0)
		return rc;
	/* The old bits are not needed to rebuild (the log is): let them go
	 * first, so that memory holds one copy of the leaf, not two. */
	bf_unmap_leaf(&f->lm[id]);
	if ((rc = newleaf_init(f, &nl, nlines)) != 0 ||
	    (rc = bf_read_log(f, e, grow_keys, &nl, NULL)) != 0) {
		newleaf_drop(f, &nl, true);
		(void)bf_map_leaf(f, id);
		return rc;
	}
	struct bf_leaf *ne = &f->leaves[nid];
	*ne = *e;
	ne->nlines = nlines;
	ne->bits_off = nl.off;

	uint32_t *nd = bf_inactive_dir(f), n = UINT32_C(1) << f->depth;
	uint32_t run = UINT32_C(1) << (f->depth - e->depth);
	memcpy(nd, f->dir, (size_t)n * 4);
	for (uint32_t i = 0; i < run; i++)
		nd[j + i] = nid;
	bf_commit_dir(f, f->depth);
	f->hdr->grows++;

	/* the old bits are unreachable now */
	uint64_t old_off = e->bits_off, old_lines = e->nlines;
	struct leafmap *m = &f->lm[nid];
	bf_unmap_leaf(m);
	bf_unmap_leaf(&f->lm[id]);
	bf_region_free(f, old_off, bits_len(old_lines));
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
	if ((rc = bf_free_entries(f, nid, 2)) != 0)
		return rc;
	bf_unmap_leaf(&f->lm[id]); /* as in grow_leaf */
	s.bit = 63 - d;
	for (unsigned b = 0; b < 2; b++) {
		if ((rc = newleaf_init(f, &s.child[b], nlines)) != 0)
			goto fail;
		if (!(s.part[b] = malloc(CHUNK_KEYS * sizeof(uint64_t)))) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	if ((rc = bf_read_log(f, e, split_keys, &s, &old)) != 0)
		goto fail;
	for (unsigned b = 0; b < 2; b++)
		if ((rc = bf_logw_finish(f, &s.child[b].log)) != 0)
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

	uint32_t *nd = bf_inactive_dir(f);
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
	bf_commit_dir(f, nd_depth);
	f->hdr->splits++;

	uint64_t old_off = e->bits_off, old_lines = e->nlines;
	bf_unmap_leaf(&f->lm[id]);
	bf_region_free(f, old_off, bits_len(old_lines));
	for (size_t i = 0; i < old.n; i++)
		bf_region_free(f, old.v[i], CHUNK_BYTES);
	for (unsigned b = 0; b < 2; b++) {
		struct leafmap *m = &f->lm[nid[b]];
		bf_unmap_leaf(m);
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
	(void)bf_map_leaf(f, id);
	return rc;
}

/* ---- keeping the rate ---- */

static int scan_leaf(struct bitfilter *f, void *ctx, uint32_t id, uint32_t j)
{
	struct scan *s = ctx;
	const struct bf_leaf *e = &f->leaves[id];
	double r = bf_rate_at(f, (double)e->count / (double)e->nlines);
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

int bf_scan_all(struct bitfilter *f, struct scan *s)
{
	memset(s, 0, sizeof *s);
	return bf_walk(f, scan_leaf, s);
}

/* Rebuild the worst leaf until the filter's rate is back under the target. */
int bf_keep_rate(struct bitfilter *f)
{
	for (;;) {
		struct scan s;
		int rc = bf_scan_all(f, &s);
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

