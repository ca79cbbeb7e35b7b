/* bench_cbf.c - speed and accuracy of the counting filter at scale.
 *
 *   bench_cbf [NKEYS [DIR]]
 *
 * For two lines per key, then one for comparison: a filter sized by
 * cbf_geometry_for(NKEYS, 1e-4) (default 1e7 keys, far bigger than the
 * caches) is filled with NKEYS random keys on one core, one at a time and
 * then again with prefetching; then as many fresh keys and the inserted ones
 * are looked up, one at a time and through the prefetching batch call. Each
 * lookup rate is the best of three passes. With DIR the two-line filter is
 * also measured as a file in DIR (the store's case: MAP_SHARED pages of the
 * page cache instead of anonymous memory).
 *
 * Every figure is printed on a line of its own as "name: value unit".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "filter/cbf.h"

#define CHUNK 4096
#define REPEAT 3
#define TARGET_FPR 1e-4

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static uint8_t *make_keys(size_t n, uint64_t seed)
{
	uint8_t *k = malloc(n * 16);
	if (!k) {
		fprintf(stderr, "bench_cbf: out of memory for %zu keys\n", n);
		exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t a = rng_next(&seed), b = rng_next(&seed);
		memcpy(k + 16 * i, &a, 8);
		memcpy(k + 16 * i + 8, &b, 8);
	}
	return k;
}

static void report(const char *prefix, const char *name, double value, const char *unit)
{
	if (value >= 1000)
		printf("%s_%s: %.0f %s\n", prefix, name, value, unit);
	else
		printf("%s_%s: %.4g %s\n", prefix, name, value, unit);
}

static void add_or_die(struct cbf *f, const struct cbf_pos *p)
{
	int rc = cbf_add(f, p, NULL, NULL, NULL);
	if (rc) {
		fprintf(stderr, "bench_cbf: cbf_add: %s\n", strerror(-rc));
		exit(1);
	}
}

/* One key at a time, as the seal path adds them. */
static void insert_single(struct cbf *f, const uint8_t *keys, size_t n, const char *prefix)
{
	struct cbf_pos p;
	double t = now();
	for (size_t i = 0; i < n; i++) {
		cbf_positions(f, keys + 16 * i, &p);
		add_or_die(f, &p);
	}
	report(prefix, "inserts_per_s", n / (now() - t), "inserts/s");
}

/* As a rebuild can add them: positions computed and lines prefetched
 * INSERT_AHEAD keys before the add. */
#define INSERT_AHEAD 16

static void insert_prefetched(struct cbf *f, const uint8_t *keys, size_t n,
			      const char *prefix)
{
	struct cbf_pos ring[INSERT_AHEAD];
	double t = now();
	for (size_t i = 0; i < n + INSERT_AHEAD; i++) {
		struct cbf_pos *p = &ring[i % INSERT_AHEAD];
		if (i >= INSERT_AHEAD)
			add_or_die(f, p);
		if (i < n) {
			cbf_positions(f, keys + 16 * i, p);
			cbf_prefetch(f, p);
		}
	}
	report(prefix, "inserts_per_s_prefetched", n / (now() - t), "inserts/s");
}

static void insert_all(struct cbf *f, const uint8_t *keys, size_t n, const char *prefix)
{
	insert_single(f, keys, n, prefix);
	cbf_clear(f);
	insert_prefetched(f, keys, n, prefix);
}

/* One key at a time: hash, test, next; each miss is waited for. */
static size_t lookup_single(const struct cbf *f, const uint8_t *keys, size_t n, double *rate)
{
	struct cbf_pos p;
	size_t hits = 0;
	double t = now();
	for (size_t i = 0; i < n; i++) {
		cbf_positions(f, keys + 16 * i, &p);
		hits += cbf_maybe_contains(f, &p);
	}
	*rate = n / (now() - t);
	return hits;
}

static size_t lookup_batch(const struct cbf *f, const uint8_t *keys, size_t n, double *rate)
{
	static bool res[CHUNK];
	size_t hits = 0;
	double t = now();
	for (size_t i = 0; i < n; i += CHUNK) {
		size_t m = n - i < CHUNK ? n - i : CHUNK;
		hits += cbf_maybe_contains_batch(f, keys + 16 * i, m, res);
	}
	*rate = n / (now() - t);
	return hits;
}

typedef size_t (*lookup_fn)(const struct cbf *, const uint8_t *, size_t, double *);

/* Best of REPEAT passes: memory speed on a shared machine varies from one
 * second to the next, and the best pass is the one least disturbed. */
static size_t best_of(lookup_fn fn, const struct cbf *f, const uint8_t *keys, size_t n,
		      double *rate)
{
	size_t hits = 0;
	*rate = 0;
	for (int r = 0; r < REPEAT; r++) {
		double x;
		hits = fn(f, keys, n, &x);
		if (x > *rate)
			*rate = x;
	}
	return hits;
}

static void lookups(const struct cbf *f, const uint8_t *keys, const uint8_t *fresh, size_t n,
		    const char *prefix)
{
	double rate;
	size_t hits;

	hits = best_of(lookup_single, f, fresh, n, &rate);
	report(prefix, "lookups_per_s_single", rate, "lookups/s");
	if (best_of(lookup_batch, f, fresh, n, &rate) != hits) {
		fprintf(stderr, "bench_cbf: batch and single lookups disagree\n");
		exit(1);
	}
	report(prefix, "lookups_per_s_batch", rate, "lookups/s");
	report(prefix, "fpr_measured", (double)hits / n, "");
	best_of(lookup_single, f, keys, n, &rate);
	report(prefix, "lookups_per_s_single_present", rate, "lookups/s");
	hits = best_of(lookup_batch, f, keys, n, &rate);
	report(prefix, "lookups_per_s_batch_present", rate, "lookups/s");
	if (hits != n) {
		fprintf(stderr, "bench_cbf: %zu inserted keys not found\n", n - hits);
		exit(1);
	}
}

static void run(uint32_t lpk, const uint8_t *keys, const uint8_t *fresh, size_t n,
		const char *dir)
{
	struct cbf_geometry g;
	struct cbf *f;
	char prefix[32], path[4096];
	int rc;

	if ((rc = cbf_geometry_for(n, TARGET_FPR, lpk, &g)) != 0) {
		fprintf(stderr, "bench_cbf: cbf_geometry_for: %s\n", strerror(-rc));
		exit(1);
	}
	snprintf(prefix, sizeof prefix, "cbf_lpk%u", lpk);
	printf("%s_k: %u counters\n", prefix, g.k);
	report(prefix, "bytes_per_key", (double)g.nlines * CBF_LINE_BYTES / n, "bytes/key");
	report(prefix, "counters_per_key", (double)g.nlines * CBF_LINE_COUNTERS / n, "counters/key");
	report(prefix, "filter_bytes", (double)g.nlines * CBF_LINE_BYTES, "bytes");

	if ((rc = cbf_create(NULL, &g, 0, &f)) != 0) {
		fprintf(stderr, "bench_cbf: cbf_create: %s\n", strerror(-rc));
		exit(1);
	}
	insert_all(f, keys, n, prefix);
	lookups(f, keys, fresh, n, prefix);
	report(prefix, "fpr_theory", cbf_theoretical_fpr(&g, n), "");
	report(prefix, "fpr_estimated", cbf_estimated_fpr(f), "");
	cbf_close(f);

	if (!dir)
		return;
	snprintf(path, sizeof path, "%s/bench_cbf.filter", dir);
	strcat(prefix, "_file");
	if ((rc = cbf_create(path, &g, 0, &f)) != 0) {
		fprintf(stderr, "bench_cbf: cbf_create %s: %s\n", path, strerror(-rc));
		exit(1);
	}
	insert_all(f, keys, n, prefix);
	lookups(f, keys, fresh, n, prefix);
	cbf_close(f);
	unlink(path);
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 10000000;
	const char *dir = argc > 2 ? argv[2] : NULL;

	if (n == 0) {
		fprintf(stderr, "usage: bench_cbf [NKEYS [DIR]]\n");
		return 2;
	}
	uint8_t *keys = make_keys(n, 1), *fresh = make_keys(n, 2);
	printf("cbf_keys: %zu keys\n", n);
	run(2, keys, fresh, n, dir);
	run(1, keys, fresh, n, NULL);
	free(keys);
	free(fresh);
	return 0;
}
