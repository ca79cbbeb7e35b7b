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
 * Every row also has a shingle set (nearset.h: 64 to 575 shingles, the
 * hashes spread evenly, their bands) in nearfeat and its LSH rows in
 * nearbands, as the signer writes them (near_add_sig), and a query is what
 * user.dedup.near does before it names paths: near_find and near_lsh_find
 * (the planted neighbour shares the set of its row), each candidate's set
 * read and compared (nearset_resemblance). Printed besides: the bytes per
 * page of the sets and of the bands (mdb_stat of each table, pages times
 * page size; mdb_stat counts a dup-sorted table's main tree only, which
 * for the bands, one row per key nearly always, is nearly all of it).
 * Each row also gets a fingerprint record (no blob file, no name): the
 * band rows (layout 2, near.h) name an MD5 prefix, and a find takes its
 * blobs from the fingerprints, so without them the bands find nothing;
 * PD_NEARIDX_RECORDS=0 leaves them out (the simhash tables alone). Such a
 * store also serves for timing `pagededup clusters` over N pages.
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
#include "blob/blob.h"
#include "near/near.h"
#include "near/near_int.h"
#include "near/nearset.h"
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

/* Keys of the benchmark's rows: spread over the key space as MD5s are
 * (the band rows name a 4-byte MD5 prefix, near_lsh.c), the row number in
 * the last 8 bytes; a real page's MD5 meets one with odds of 2^-64 a row. */
static struct blobkey row_key(uint64_t i)
{
	struct blobkey k = { .variant = 0 };
	uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z ^= z >> 27;
	for (int b = 0; b < 8; b++) {
		k.md5[b] = (uint8_t)(z >> (56 - 8 * b));
		k.md5[8 + b] = (uint8_t)(i >> (8 * b));
	}
	return k;
}

struct batch {
	const uint64_t *h;
	uint64_t from, to;
};

/* Row i's shingle set: a fixed function of i. */
static void row_set(uint64_t i, struct nearset *s)
{
	uint64_t r = i * 0x9E3779B97F4A7C15ull + 1;
	for (int x = 0; x < 4; x++)
		r = (r ^ (r >> 31)) * 0xbf58476d1ce4e5b9ull;
	uint32_t shingles = 64 + (uint32_t)(r % 512);
	s->has = true;
	s->bits = 32;
	s->shingles = shingles;
	s->n = shingles < NEARSET_K ? shingles : NEARSET_K;
	s->complete = shingles <= NEARSET_K;
	uint32_t step = UINT32_MAX / shingles;
	for (uint32_t j = 0; j < s->n; j++) {
		r = (r ^ (r >> 29)) * 0x94d049bb133111ebull;
		s->h[j] = j * step + (uint32_t)(r % step);
	}
	/* the bands the store computes from the hashes (a stored set keeps
	 * none since nearset format 3: its decoder computes them) */
	nearset_bands(s);
}

static bool g_records; /* a fingerprint record per row (PD_NEARIDX_RECORDS=0: none) */

static int insert_cb(struct wtx *w, void *p)
{
	struct batch *b = p;
	static struct near_sig sig;
	for (uint64_t i = b->from; i < b->to; i++) {
		struct blobkey k = row_key(i);
		sig.has = sig.has_set = true;
		sig.simhash = b->h[i];
		row_set(i, &sig.set);
		int rc = near_add_sig(w->txn, w->st, &k, &sig);
		if (!rc && g_records) {
			struct fprec r = { .refcount = 1, .size = 4096 };
			near_sig_to_rec(&sig, &r);
			rc = blob_put(w->txn, w->st, &k, &r);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static double table_bytes(struct store *st, MDB_dbi dbi)
{
	MDB_txn *txn;
	MDB_stat ms;
	if (store_read_begin(st, &txn))
		return 0;
	int rc = mdb_stat(txn, dbi, &ms);
	store_read_end(st, txn);
	return rc ? 0 : (double)(ms.ms_branch_pages + ms.ms_leaf_pages + ms.ms_overflow_pages) * ms.ms_psize;
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

/* A query's candidates: each one's set read and compared, as the answer
 * confirms it (the rows have no fingerprint record to read). */
struct qctx {
	MDB_txn *txn;
	struct store *st;
	const struct nearset *q;
	struct near_sig cand;
	uint64_t found, candidates;
	struct blobkey seen[64]; /* met already (the answer keeps a set) */
	size_t nseen;
};

static int count_cb(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	struct qctx *c = ctx;
	(void)h;
	(void)dist;
	for (size_t i = 0; i < c->nseen; i++)
		if (blobkey_equal(&c->seen[i], k))
			return 0;
	if (c->nseen < 64)
		c->seen[c->nseen++] = *k;
	c->candidates++;
	int rc = near_set_get(c->txn, c->st, k, &c->cand);
	if (!rc && c->cand.has_set && nearset_resemblance(c->q, &c->cand.set, NULL) >= NEARSET_NEAR)
		c->found++;
	return rc;
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
	const char *rec = getenv("PD_NEARIDX_RECORDS");
	g_records = !rec || strcmp(rec, "0");
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
	printf("near_index_bytes_per_page: %.1f bytes, everything (a compacted copy; goal <= %d at K=3 was for the "
	       "simhash tables alone)\n", (double)bytes / (double)n, 4 * 24);
	printf("near_sets_bytes_per_page: %.1f bytes (nearfeat: %u to %u shingles a row, at most %d kept)\n",
	       table_bytes(st, st->db_nearfeat) / (double)n, 64, 575, NEARSET_K);
	MDB_dbi bands[NEAR_BAND_TABLES];
	size_t nbands = near_band_tables(st, bands);
	double band_bytes = 0;
	for (size_t i = 0; i < nbands; i++)
		band_bytes += table_bytes(st, bands[i]);
	printf("near_bands_bytes_per_page: %.1f bytes (nearbands0, nearbands1 and nearbands: %d bands; the main trees only, a band's rows are in its sub-database)\n",
	       band_bytes / (double)n, NEARSET_BANDS);
	printf("near_insert_rate: %.0f rows/s\n", (double)n / t_ins);

	/* queries: a random hash whose planted neighbour is one of the rows */
	uint64_t *qrow = malloc(queries * sizeof *qrow);
	if (!qrow)
		return 1;
	for (size_t i = 0; i < queries; i++) {
		qrow[i] = rnd() % n;
		q[i] = flip_bits(h[qrow[i]], (unsigned)(rnd() % (K + 1)));
	}
	static struct qctx c;
	static struct nearset qset;
	uint64_t found = 0, cands = 0;
	for (size_t i = 0; i < queries; i++) {
		row_set(qrow[i], &qset); /* the query's own set: its planted row's */
		double a = now();
		MDB_txn *txn;
		int rc = store_read_begin(st, &txn);
		c = (struct qctx){ .txn = txn, .st = st, .q = &qset };
		if (!rc)
			rc = near_find(txn, st, q[i], K, count_cb, &c);
		if (!rc)
			rc = near_lsh_find(txn, st, &qset, count_cb, &c);
		store_read_end(st, txn);
		found += c.found;
		cands += c.candidates;
		lat[i] = now() - a;
		if (rc) {
			fprintf(stderr, "bench_nearidx: query: %s\n", strerror(-rc));
			return 1;
		}
	}
	qsort(lat, queries, sizeof *lat, dbl_cmp);
	printf("near_queries: %zu\n", queries);
	printf("near_found_per_query: %.3f (confirmed; candidates met %.3f, by both generators)\n",
	       (double)found / (double)queries, (double)cands / (double)queries);
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
	free(qrow);
	free(lat);
	return store_close(st) ? 1 : 0;
}
