/* bench_nearidx.c - speed and size of the near-duplicate index (near.h).
 *
 *   bench_nearidx STORE [N] [QUERIES] [K] [SEEDS]      (K "" for the default)
 *
 * Makes a store in STORE (an empty or new directory; default parameters,
 * near distance K, default the store's default), indexes N random simhashes (default 1,000,000) under blob keys
 * that have no fingerprint record (the index alone is measured), then runs
 * QUERIES lookups (default 100,000) of random hashes, each with one
 * neighbour planted at a random distance 0..K so that every query finds
 * something. Printed, one "name: value unit" a line:
 *   - index bytes per page: the size of a compacted copy of the store's
 *     LMDB (mdb_env_copy2 MDB_CP_COMPACT: the pages in use, none of the
 *     free ones copy-on-write leaves behind), minus that of the empty
 *     store, over N;
 *   - insert rate (rows through store_write, 20,000 per transaction);
 *   - query latency: median, 90th and 99th percentile of near_find in one
 *     read transaction each (begin and end included), in-core (the map is
 *     in the page cache after the inserts), and the hashes read per query.
 * With SEEDS (a file of simhashes, one hex number at the start of each
 * line, as `pagededup simhash` prints them), the rows are not uniform: row
 * i is seed i mod S with 0..16 of its bits flipped, so that the index holds
 * what real pages look like (pages of one template or site share most
 * bits, and a query meets families of alike rows rather than a uniform
 * spread); the queries are made the same way from the rows.
 * The store is left in place: the mounted half of `make bench-near`
 * (tests/bench/bench-near-speed.sh) mounts it and asks through getfattr,
 * with the random rows in place around its own pages.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "near/near.h"
#include "near/simhash.h"
#include "store/store.h"

#define BATCH 20000

static uint64_t rng = 0x853c49e6748fea9bull;

static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Keys of the benchmark's rows: an MD5 no page has (first byte 0xff, then
 * the row number), so they never name a real blob. */
static struct blobkey row_key(uint64_t i)
{
	struct blobkey k = { .variant = 0 };
	memset(k.md5, 0xff, 16);
	for (int b = 0; b < 8; b++)
		k.md5[8 + b] = (uint8_t)(i >> (8 * b));
	return k;
}

struct batch {
	const uint64_t *h;
	uint64_t from, to;
};

static int insert_cb(struct wtx *w, void *p)
{
	struct batch *b = p;
	for (uint64_t i = b->from; i < b->to; i++) {
		struct blobkey k = row_key(i);
		int rc = near_add(w->txn, w->st, &k, b->h[i]);
		if (rc)
			return rc;
	}
	return 0;
}

static uint64_t used_bytes(struct store *st, const char *dir)
{
	char copy[4096], file[4200];
	snprintf(copy, sizeof copy, "%s.compact", dir);
	snprintf(file, sizeof file, "%s/data.mdb", copy);
	mkdir(copy, 0700);
	unlink(file);
	struct stat sb;
	int rc = mdb_env_copy2(st->env, copy, MDB_CP_COMPACT);
	if (rc || stat(file, &sb)) {
		fprintf(stderr, "bench_nearidx: compact copy: %s\n", mdb_strerror(rc));
		exit(1);
	}
	unlink(file);
	rmdir(copy);
	return (uint64_t)sb.st_size;
}

static int count_cb(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	(void)k;
	(void)h;
	(void)dist;
	(*(uint64_t *)ctx)++;
	return 0;
}

/* The seed hashes of a SEEDS file; exits on a file without any. */
static uint64_t *read_seeds(const char *path, size_t *count)
{
	FILE *f = fopen(path, "r");
	size_t n = 0, cap = 1024;
	uint64_t *s = malloc(cap * sizeof *s);
	char line[8192];
	while (f && s && fgets(line, sizeof line, f)) {
		char *end;
		uint64_t v = strtoull(line, &end, 16);
		if (end == line)
			continue;
		if (n == cap && !(s = realloc(s, (cap *= 2) * sizeof *s)))
			break;
		s[n++] = v;
	}
	if (f)
		fclose(f);
	if (!s || n == 0) {
		fprintf(stderr, "bench_nearidx: no simhashes in %s\n", path);
		exit(1);
	}
	*count = n;
	return s;
}

static uint64_t flip_bits(uint64_t h, unsigned d)
{
	uint64_t mask = 0;
	while ((unsigned)__builtin_popcountll(mask) < d)
		mask |= 1ull << (rnd() % 64);
	return h ^ mask;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_nearidx STORE [N] [QUERIES] [K] [SEEDS]\n");
		return 1;
	}
	uint64_t n = argc > 2 ? (uint64_t)strtod(argv[2], NULL) : 1000000;
	size_t queries = argc > 3 ? (size_t)strtod(argv[3], NULL) : 100000;
	struct store_params p;
	store_params_default(&p);
	if (argc > 4 && argv[4][0])
		p.near_distance = (uint32_t)atoi(argv[4]);
	char err[PD_ERRLEN] = "";
	struct store *st;
	struct store_opts o = { .sync_ms = 60000 };
	if (archive_mkfs(argv[1], &p, err) || archive_open(argv[1], &o, &st, err)) {
		fprintf(stderr, "bench_nearidx: %s\n", err);
		return 1;
	}
	unsigned K = st->params.near_distance;
	uint64_t *h = malloc(n * sizeof *h);
	uint64_t *q = malloc(queries * sizeof *q);
	double *lat = malloc(queries * sizeof *lat);
	if (!h || !q || !lat)
		return 1;
	size_t nseeds = 0;
	uint64_t *seeds = argc > 5 ? read_seeds(argv[5], &nseeds) : NULL;
	for (uint64_t i = 0; i < n; i++)
		h[i] = seeds ? flip_bits(seeds[i % nseeds], (unsigned)(rnd() % 17)) : rnd();
	if (seeds)
		printf("near_rows_from: %zu seed simhashes, 0..16 bits flipped\n", nseeds);
	free(seeds);
	uint64_t empty = used_bytes(st, argv[1]);
	double t0 = now();
	for (uint64_t i = 0; i < n; i += BATCH) {
		struct batch b = { h, i, i + BATCH < n ? i + BATCH : n };
		int rc = store_write(st, insert_cb, &b);
		if (rc) {
			fprintf(stderr, "bench_nearidx: insert: %s\n", strerror(-rc));
			return 1;
		}
	}
	double t_ins = now() - t0;
	uint64_t bytes = used_bytes(st, argv[1]) - empty;
	printf("near_rows: %llu hashes\n", (unsigned long long)n);
	printf("near_distance: %u bits (%u tables)\n", K, K + 1);
	printf("near_index_bytes_per_page: %.1f bytes (goal <= %d at K=3)\n", (double)bytes / (double)n, 4 * 24);
	printf("near_insert_rate: %.0f rows/s\n", (double)n / t_ins);

	/* queries: a random hash whose planted neighbour is one of the rows */
	for (size_t i = 0; i < queries; i++) {
		uint64_t row = rnd() % n;
		q[i] = flip_bits(h[row], (unsigned)(rnd() % (K + 1)));
	}
	uint64_t found = 0;
	for (size_t i = 0; i < queries; i++) {
		double a = now();
		MDB_txn *txn;
		int rc = store_read_begin(st, &txn);
		if (!rc)
			rc = near_find(txn, st, q[i], K, count_cb, &found);
		store_read_end(st, txn);
		lat[i] = now() - a;
		if (rc) {
			fprintf(stderr, "bench_nearidx: query: %s\n", strerror(-rc));
			return 1;
		}
	}
	qsort(lat, queries, sizeof *lat, dbl_cmp);
	printf("near_queries: %zu\n", queries);
	printf("near_found_per_query: %.3f\n", (double)found / (double)queries);
	printf("near_query_median: %.1f us (goal <= 100)\n", lat[queries / 2] * 1e6);
	printf("near_query_p90: %.1f us\n", lat[queries * 9 / 10] * 1e6);
	printf("near_query_p99: %.1f us\n", lat[queries * 99 / 100] * 1e6);
	double expect = 0; /* a query reads the rows under one key of each table */
	for (unsigned i = 0; i <= K; i++)
		expect += (double)n / (double)(1ull << (64 / (K + 1) + (i < 64 % (K + 1))));
	printf("near_hashes_read_per_query: %.1f (expected for uniform hashes, N / 2^width summed over the tables)\n",
	       expect);
	free(h);
	free(q);
	free(lat);
	return store_close(st) ? 1 : 0;
}
