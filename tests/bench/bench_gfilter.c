/* bench_gfilter.c - the page filter that grows against the fixed one, as a
 * store overfills: false-positive rate, LMDB probes per new page, memory
 * per page and lookup speed as pages are stored.
 *
 *   bench_gfilter [options] CSV
 *     --expected N    pages the filters are sized for at first (default 2e6)
 *     --final N       pages stored at the end (default 5 x expected)
 *     --fpr R         target rate (default 1e-4); the growing filter's bound
 *                     fmax is 2 x R
 *     --deletes F     share of operations that delete a stored page (default 0.2)
 *     --points N      measuring points (default 20)
 *     --fresh N       fresh keys per measurement (default 1e6)
 *     --max-leaf-kib K  largest leaf before it splits (default: the store's)
 *     --chunk N       keys a split moves per batch of 1024 operations
 *                     (default 16384, about 27 per net new page: the store's
 *                     split thread moves records tens of times faster than
 *                     seals arrive; 0 = a whole split at once)
 *
 * Both filters see the same stream of 16-byte keys (uniform like MD5s): a
 * new page is looked up first (a "maybe" is an LMDB probe, since the page
 * is new: a false positive), then added; a delete removes a random stored
 * page, with positions recomputed from its leaf (what the record stores).
 * Saturated counters keep exact counts in a hash table, as LMDB's
 * `saturated` table does. The growing filter commits every 1024
 * operations, as group commit does, and a split moves `chunk` keys per
 * batch in MD5 order through the same calls the store makes
 * (gf_split_next, gf_split_move, gf_split_advance, gf_split_finish): keys
 * keep arriving while a leaf splits. Everything is in memory; the filters
 * alone are measured.
 *
 * At each point: the rate measured on `fresh` keys never added, the
 * model's rate, probes per new page since the last point, counter bytes
 * per stored page, lookups per CPU second (batched, prefetching; the best
 * of 7 passes), and the
 * memory of a fixed filter sized by cbf_geometry_for for the same pages
 * at the rate the growing filter has there (its model rate: the measured
 * one is too noisy at 1e-4). CSV columns:
 *   filter,pages,fpr_measured,fpr_model,probes_per_new_page,bytes,
 *   bytes_per_page,bytes_vs_fixed_same_rate,leaves,lookups_per_s
 * Summary figures go to stdout as "name: value unit".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "filter/cbf.h"
#include "filter/gfilter.h"

#define BATCH 1024

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t z)
{
	z += UINT64_C(0x9E3779B97F4A7C15);
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* Key `id` of a stream: 16 uniform bytes. */
static void key_of(uint64_t id, uint64_t seed, uint8_t k[16])
{
	uint64_t a = mix(mix(id) ^ seed * UINT64_C(0xD6E8FEB86659FD93));
	uint64_t b = mix(a ^ UINT64_C(0x5851F42D4C957F2D));
	memcpy(k, &a, 8);
	memcpy(k + 8, &b, 8);
}

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (!p) {
		fprintf(stderr, "bench_gfilter: out of memory\n");
		exit(1);
	}
	return p;
}

/* ---- exact counts of saturated counters: an open-addressing table ---- */

struct exact {
	uint64_t *key, *val;
	size_t cap, n;
};
#define EMPTY UINT64_MAX
#define GONE (UINT64_MAX - 1)

static size_t slot_of(const struct exact *e, uint64_t idx)
{
	size_t i = (size_t)mix(idx) & (e->cap - 1);
	while (e->key[i] != EMPTY && e->key[i] != idx)
		i = (i + 1) & (e->cap - 1);
	return i;
}

static void exact_init(struct exact *e, size_t cap)
{
	e->cap = cap;
	e->n = 0;
	e->key = xmalloc(cap * 8);
	e->val = xmalloc(cap * 8);
	for (size_t i = 0; i < cap; i++)
		e->key[i] = EMPTY;
}

static int ex_get(void *ctx, uint64_t idx, uint64_t *count)
{
	struct exact *e = ctx;
	size_t i = slot_of(e, idx);
	if (e->key[i] != idx)
		return -ENOENT;
	*count = e->val[i];
	return 0;
}

static int ex_put(void *ctx, uint64_t idx, uint64_t count)
{
	struct exact *e = ctx;
	size_t i = slot_of(e, idx);
	if (e->key[i] != idx) {
		if (2 * (e->n + 1) > e->cap)
			return -ENOSPC; /* sized generously below; never seen */
		e->n++;
	}
	e->key[i] = idx;
	e->val[i] = count;
	return 0;
}

/* A deleted slot keeps probing chains whole (GONE never matches an index). */
static int ex_del(void *ctx, uint64_t idx)
{
	struct exact *e = ctx;
	size_t i = slot_of(e, idx);
	if (e->key[i] != idx)
		return -ENOENT;
	e->key[i] = GONE;
	return 0;
}

static const struct cbf_exact_ops exact_ops = { ex_get, ex_put, ex_del };

/* ---- the run ---- */

struct opts {
	double expected, final, fpr, deletes, fresh, leaf_kib;
	unsigned points, chunk;
	const char *csv;
};

struct entry {
	uint64_t id;
	uint32_t leaf;
};

struct run {
	struct opts o;
	struct cbf *fixed;
	struct gfilter *gf;
	struct exact ex_fixed, ex_gf;
	struct entry *live;        /* stored pages */
	size_t nlive;
	uint32_t *where;           /* id -> index in live, UINT32_MAX if gone */
	uint64_t next_id, seed_rng;
	uint64_t inserts, probes_fixed, probes_gf;
	/* the split in progress: the leaf's keys in MD5 order */
	bool splitting;
	struct gf_split split;
	uint64_t *todo;
	size_t ntodo, at;
	uint8_t *fresh;
	size_t nfresh;
	FILE *csv;
	double worst_fpr_gf, worst_ratio, min_speed_ratio, sum_speed_ratio;
	double peak_ratio, peak_pages;  /* between points too: a split's transient */
	double peak_leaf_fpr;           /* the worst leaf's model rate, every 16 batches */
	unsigned npoints;
	uint64_t splits_started;
};

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_gfilter: %s: %s\n", what, strerror(-rc));
	exit(1);
}

static void positions_on(struct run *r, uint32_t leaf, const uint8_t k[16], struct cbf_pos *pos)
{
	cbf_positions(gf_leaf(r->gf, leaf), k, pos);
}

static void insert_one(struct run *r)
{
	uint8_t k[16];
	uint64_t id = r->next_id++;
	key_of(id, 1, k);
	struct cbf_pos pos;
	cbf_positions(r->fixed, k, &pos);
	r->probes_fixed += cbf_maybe_contains(r->fixed, &pos);
	int rc = cbf_add(r->fixed, &pos, &exact_ops, &r->ex_fixed, NULL);
	if (rc)
		die("fixed add", rc);
	r->probes_gf += gf_maybe_contains(r->gf, k);
	uint32_t leaf;
	if ((rc = gf_insert(r->gf, k, &exact_ops, &r->ex_gf, &leaf, &pos)))
		die("growing insert", rc);
	r->where[id] = (uint32_t)r->nlive;
	r->live[r->nlive++] = (struct entry){ id, leaf };
	r->inserts++;
}

static void delete_one(struct run *r)
{
	size_t i = (size_t)(mix(r->seed_rng++) % r->nlive);
	struct entry e = r->live[i];
	uint8_t k[16];
	key_of(e.id, 1, k);
	struct cbf_pos pos;
	cbf_positions(r->fixed, k, &pos);
	int rc = cbf_remove(r->fixed, &pos, &exact_ops, &r->ex_fixed, NULL);
	if (rc)
		die("fixed remove", rc);
	positions_on(r, e.leaf, k, &pos);
	if ((rc = gf_remove(r->gf, e.leaf, &pos, &exact_ops, &r->ex_gf)))
		die("growing remove", rc);
	r->where[e.id] = UINT32_MAX;
	r->live[i] = r->live[--r->nlive];
	if (i < r->nlive)
		r->where[r->live[i].id] = (uint32_t)i;
}

static int by_md5(const void *a, const void *b)
{
	uint8_t ka[16], kb[16];
	key_of(*(const uint64_t *)a, 1, ka);
	key_of(*(const uint64_t *)b, 1, kb);
	return memcmp(ka, kb, 16);
}

/* The stored keys of the splitting leaf not moved yet, in MD5 order (keys
 * that arrived past the cursor since the last gathering included). */
static void gather(struct run *r)
{
	r->ntodo = r->at = 0;
	for (size_t i = 0; i < r->nlive; i++)
		if (r->live[i].leaf == r->split.leaf)
			r->todo[r->ntodo++] = r->live[i].id;
	qsort(r->todo, r->ntodo, 8, by_md5);
}

/* One batch's share of split work: up to `chunk` keys (all with 0). */
static void split_work(struct run *r)
{
	if (!r->splitting) {
		int rc = gf_split_next(r->gf, &r->split);
		if (rc == -ENOENT)
			return;
		if (rc)
			die("split start", rc);
		r->splitting = true;
		r->splits_started++;
		gather(r);
	}
	size_t budget = r->o.chunk ? r->o.chunk : SIZE_MAX;
	uint8_t k[16], last[16];
	bool moved = false;
	while (budget) {
		if (r->at == r->ntodo) {
			gather(r);
			if (r->ntodo == 0)
				break;
		}
		uint64_t id = r->todo[r->at++];
		uint32_t w = r->where[id];
		if (w == UINT32_MAX || r->live[w].leaf != r->split.leaf)
			continue; /* deleted since, or arrived on a child */
		key_of(id, 1, k);
		struct cbf_pos old, pos;
		positions_on(r, r->split.leaf, k, &old);
		int rc = gf_split_move(r->gf, r->split.leaf, k, &old, &exact_ops, &r->ex_gf,
				       &r->live[w].leaf, &pos);
		if (rc)
			die("split move", rc);
		memcpy(last, k, 16);
		moved = true;
		budget--;
	}
	if (r->at == r->ntodo && (gather(r), r->ntodo == 0)) {
		int rc = gf_split_finish(r->gf, r->split.leaf);
		if (rc)
			die("split finish", rc);
		r->splitting = false;
	} else if (moved) {
		gf_split_advance(r->gf, r->split.leaf, last);
	}
}

/* CPU time of this thread: lookups are timed by it, so that other work on
 * the machine does not count against either filter. */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One pass of lookups of the fresh keys: keys per CPU second. */
static double lookup_pass(const struct run *r, bool growing, bool *res, size_t *hits)
{
	double t = cpu_now();
	*hits = growing ? gf_maybe_contains_batch(r->gf, r->fresh, r->nfresh, res)
			: cbf_maybe_contains_batch(r->fixed, r->fresh, r->nfresh, res);
	return (double)r->nfresh / (cpu_now() - t);
}

/* The best of REPS passes of each filter, the passes alternating so that
 * other work on the machine weighs on both alike. */
#define REPS 7
static void lookups(const struct run *r, double *fixed, double *growing, size_t *hf, size_t *hg)
{
	bool *res = xmalloc(r->nfresh);
	*fixed = *growing = 0;
	for (int rep = 0; rep < REPS; rep++) {
		double a = lookup_pass(r, false, res, hf), b = lookup_pass(r, true, res, hg);
		*fixed = a > *fixed ? a : *fixed;
		*growing = b > *growing ? b : *growing;
	}
	free(res);
}

static void measure(struct run *r, uint64_t inserts0, uint64_t pf0, uint64_t pg0)
{
	size_t hf, hg;
	double sf, sg;
	lookups(r, &sf, &sg, &hf, &hg);
	double pages = (double)r->nlive, fresh = (double)r->nfresh;
	double newp = (double)(r->inserts - inserts0);
	struct gf_stats gs;
	gf_stats(r->gf, false, &gs);
	const struct cbf_geometry *fg = cbf_geometry(r->fixed);
	double fixed_model = cbf_theoretical_fpr(fg, r->nlive);
	/* a fixed filter sized for these pages at the rate each one has */
	struct cbf_geometry same_g, same_f;
	double ratio_g = 0, ratio_f = 0;
	if (gs.fpr_model > 0 && gs.fpr_model < 0.5 &&
	    cbf_geometry_for(r->nlive, gs.fpr_model, fg->lines_per_key, &same_g) == 0)
		ratio_g = (double)gs.bytes / (double)(same_g.nlines * CBF_LINE_BYTES);
	if (fixed_model > 0 && fixed_model < 0.5 &&
	    cbf_geometry_for(r->nlive, fixed_model, fg->lines_per_key, &same_f) == 0)
		ratio_f = (double)cbf_bytes(r->fixed) / (double)(same_f.nlines * CBF_LINE_BYTES);
	fprintf(r->csv, "fixed,%.0f,%.6g,%.6g,%.6g,%llu,%.4f,%.4f,1,%.0f\n", pages, hf / fresh,
		fixed_model, (double)(r->probes_fixed - pf0) / newp,
		(unsigned long long)cbf_bytes(r->fixed), (double)cbf_bytes(r->fixed) / pages, ratio_f,
		sf);
	fprintf(r->csv, "growing,%.0f,%.6g,%.6g,%.6g,%llu,%.4f,%.4f,%llu,%.0f\n", pages, hg / fresh,
		gs.fpr_model, (double)(r->probes_gf - pg0) / newp, (unsigned long long)gs.bytes,
		(double)gs.bytes / pages, ratio_g, (unsigned long long)gs.leaves, sg);
	fflush(r->csv);
	double fm = hg / fresh;
	if (fm > r->worst_fpr_gf)
		r->worst_fpr_gf = fm;
	if (ratio_g > r->worst_ratio)
		r->worst_ratio = ratio_g;
	double sr = sg / sf;
	if (r->npoints == 0 || sr < r->min_speed_ratio)
		r->min_speed_ratio = sr;
	r->sum_speed_ratio += sr;
	r->npoints++;
	printf("point: %.0f pages, growing fpr %.3g (model %.3g, %llu leaves, %.2f B/page, %.3fx a fixed filter at that rate), fixed fpr %.3g, lookups/s %.3g vs %.3g (%.3fx)\n",
	       pages, fm, gs.fpr_model, (unsigned long long)gs.leaves, (double)gs.bytes / pages,
	       ratio_g, hf / fresh, sg, sf, sr);
	fflush(stdout);
}

/* Bytes of the growing filter over those of a fixed filter sized for the
 * pages stored at the growing filter's model rate: 0 when not defined. */
static double ram_ratio(const struct run *r, const struct gf_stats *gs)
{
	struct cbf_geometry g;
	if (!(gs->fpr_model > 0 && gs->fpr_model < 0.5) ||
	    cbf_geometry_for(r->nlive, gs->fpr_model, 2, &g))
		return 0;
	return (double)gs->bytes / (double)(g.nlines * CBF_LINE_BYTES);
}

/* Every 16 batches, once the filters hold their expected pages (before,
 * both are the same presized filter): the peak of that ratio, splits in
 * progress included. */
static void track_peak(struct run *r, uint64_t batch)
{
	if (batch % 16 || (double)r->nlive < r->o.expected)
		return;
	struct gf_stats gs;
	gf_stats(r->gf, false, &gs);
	double x = ram_ratio(r, &gs);
	if (gs.worst_leaf_fpr > r->peak_leaf_fpr)
		r->peak_leaf_fpr = gs.worst_leaf_fpr;
	if (x > r->peak_ratio) {
		r->peak_ratio = x;
		r->peak_pages = (double)r->nlive;
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_gfilter [--expected N] [--final N] [--fpr R] [--deletes F] [--points N] [--fresh N] [--chunk N] [--max-leaf-kib K] CSV\n");
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .expected = 2e6, .final = 0, .fpr = 1e-4, .deletes = 0.2,
			    .fresh = 1e6, .points = 20, .chunk = 16384 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (i + 1 < argc && a[0] == '-' && a[1] == '-') {
			double v = strtod(argv[++i], NULL);
			if (!strcmp(a, "--expected")) o->expected = v;
			else if (!strcmp(a, "--final")) o->final = v;
			else if (!strcmp(a, "--fpr")) o->fpr = v;
			else if (!strcmp(a, "--deletes")) o->deletes = v;
			else if (!strcmp(a, "--points")) o->points = (unsigned)v;
			else if (!strcmp(a, "--fresh")) o->fresh = v;
			else if (!strcmp(a, "--chunk")) o->chunk = (unsigned)v;
			else if (!strcmp(a, "--max-leaf-kib")) o->leaf_kib = v;
			else usage();
		} else if (!o->csv && a[0] != '-') {
			o->csv = a;
		} else {
			usage();
		}
	}
	if (!o->csv || o->expected < 1 || o->fpr <= 0 || o->fpr >= 0.5 || o->deletes < 0 ||
	    o->deletes >= 0.5 || o->points < 1 || o->fresh < 1)
		usage();
	if (o->final <= 0)
		o->final = 5 * o->expected;
}

int main(int argc, char **argv)
{
	struct run r = { 0 };
	parse(argc, argv, &r.o);
	struct cbf_geometry g;
	int rc = cbf_geometry_for((uint64_t)r.o.expected, r.o.fpr, 2, &g);
	if (rc || (rc = cbf_create(NULL, &g, 0, &r.fixed)))
		die("fixed filter", rc);
	struct gf_config c;
	gf_config_default(&c, r.o.fpr, 2);
	if (r.o.leaf_kib >= 1)
		c.max_leaf_lines = (uint64_t)(r.o.leaf_kib * 1024 / CBF_LINE_BYTES);
	struct gf_tree t;
	if ((rc = gf_tree_initial(&c, (uint64_t)r.o.expected, &t)) ||
	    (rc = gf_open(NULL, &t, GF_MEMORY, &r.gf, NULL)))
		die("growing filter", rc);
	gf_tree_free(&t);
	/* inserts needed to end with `final` stored pages at this delete share */
	uint64_t total = (uint64_t)(r.o.final / (1 - 2 * r.o.deletes) * 1.05) + BATCH;
	r.live = xmalloc(((size_t)r.o.final + BATCH) * sizeof *r.live);
	r.where = xmalloc(total * sizeof *r.where);
	r.todo = xmalloc(((size_t)r.o.final + BATCH) * sizeof *r.todo);
	exact_init(&r.ex_fixed, (size_t)1 << 24);
	exact_init(&r.ex_gf, (size_t)1 << 20);
	r.nfresh = (size_t)r.o.fresh;
	r.fresh = xmalloc(16 * r.nfresh);
	for (size_t i = 0; i < r.nfresh; i++)
		key_of(i, 2, r.fresh + 16 * i);
	if (!(r.csv = fopen(r.o.csv, "w"))) {
		perror(r.o.csv);
		return 1;
	}
	fprintf(r.csv, "filter,pages,fpr_measured,fpr_model,probes_per_new_page,bytes,bytes_per_page,bytes_vs_fixed_same_rate,leaves,lookups_per_s\n");
	printf("expected_pages: %.0f\nfinal_pages: %.0f\ndelete_share: %.2f\nfpr_target: %g\nfmax: %g\n",
	       r.o.expected, r.o.final, r.o.deletes, r.o.fpr, c.fmax);
	double step = r.o.final / r.o.points, next = step, t0 = now();
	uint64_t ins0 = 0, pf0 = 0, pg0 = 0, batch = 0;
	while ((double)r.nlive < r.o.final) {
		for (unsigned i = 0; i < BATCH; i++) {
			bool del = r.nlive > 0 && (double)(mix(r.seed_rng++) >> 11) * 0x1p-53 < r.o.deletes;
			if (del)
				delete_one(&r);
			else if (r.next_id < total)
				insert_one(&r);
		}
		split_work(&r);
		gf_commit(r.gf);
		track_peak(&r, batch++);
		if ((double)r.nlive >= next) {
			measure(&r, ins0, pf0, pg0);
			ins0 = r.inserts;
			pf0 = r.probes_fixed;
			pg0 = r.probes_gf;
			next += step;
		}
	}
	fclose(r.csv);
	double avg = r.sum_speed_ratio / r.npoints;
	printf("seconds: %.1f s\n", now() - t0);
	printf("inserts: %llu\n", (unsigned long long)r.inserts);
	printf("splits: %llu\n", (unsigned long long)r.splits_started);
	printf("growing_fpr_max_measured: %.3g\n", r.worst_fpr_gf);
	printf("growing_worst_leaf_fpr_peak: %.3g (model, every 16 batches)\n", r.peak_leaf_fpr);
	printf("growing_lookups_vs_fixed_min: %.3f x\n", r.min_speed_ratio);
	printf("growing_lookups_vs_fixed_mean: %.3f x\n", avg);
	printf("growing_ram_vs_fixed_same_rate_max: %.3f x\n", r.worst_ratio);
	printf("growing_ram_vs_fixed_same_rate_peak: %.3f x (at %.0f pages, every 16 batches)\n",
	       r.peak_ratio, r.peak_pages);
	printf("goal_fpr_le_fmax: %s\n", r.worst_fpr_gf <= c.fmax ? "met" : "missed");
	printf("goal_lookups_ge_0.8: %s\n", r.min_speed_ratio >= 0.8 ? "met" : avg >= 0.8 ? "met on average" : "missed");
	printf("goal_ram_le_1.3: %s\n", r.worst_ratio <= 1.3 && r.peak_ratio <= 1.3 ? "met" : "missed");
	cbf_close(r.fixed);
	gf_close(r.gf);
	free(r.live);
	free(r.where);
	free(r.todo);
	free(r.fresh);
	free(r.ex_fixed.key);
	free(r.ex_fixed.val);
	free(r.ex_gf.key);
	free(r.ex_gf.val);
	return 0;
}
