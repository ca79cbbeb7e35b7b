/* bench_core - the store engine's figures for issue "Foundation":
 *   seals/s and MB/s of 30 KB pages, half duplicates, N threads;
 *   LMDB probes per new page against the filter's measured false-positive
 *   rate; LMDB bytes and filter bytes per stored page.
 * Baseline in the same run: MD5+XXH3 alone over the same bytes on one
 * thread (what the seal path cannot beat).
 * Each figure is printed as "name: value unit".
 *
 *   bench_core DIR [pages] [threads] [fpr] [expected]
 *   (defaults 100000, 2, 1e-4, pages / 2)
 *
 * The filter is sized for `expected` pages (by default the distinct pages,
 * its design load) at rate fpr; a large fpr (1e-2) makes the probes of new
 * pages countable, to show that they track the filter's false-positive
 * rate. A small `expected` makes the filter grow during the run: the seal
 * latencies (the close() that seals, max and 99th percentile) show how long
 * seals wait behind the split chunks.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "archive/archive.h"
#include "base/fp.h"
#include "archive/ns.h"
#include "archive/openfile.h"
#include "store/store.h"

enum { PAGE = 30 * 1024 };

static const struct pd_cred root = { 0, 0, 0, NULL };
static struct store *st;
static long npages;
static int nthreads;
static double *seal_ms; /* per page: the seal's latency */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Page i has content i/2: every content twice. */
static void make_page(long i, char *buf)
{
	long c = i / 2;
	uint64_t x = (uint64_t)c * 0x9E3779B97F4A7C15ull + 1;
	for (size_t j = 0; j < PAGE; j += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + j, &x, 8);
	}
	snprintf(buf, 64, "<html><!-- page %ld -->", c);
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "bench_core: %s: %s\n", what, strerror(-rc));
	exit(1);
}

static void *writer(void *arg)
{
	long t = (long)arg;
	char *buf = malloc(PAGE);
	char name[64];
	uint64_t dir;
	struct inode in;
	snprintf(name, sizeof name, "t%ld", t);
	int rc = ns_mknode(st, PD_ROOT_INO, name, S_IFDIR | 0755, 0, NULL, &root, &in);
	if (rc)
		die("mkdir", rc);
	dir = in.ino;
	for (long i = t; i < npages; i += nthreads) {
		make_page(i, buf);
		snprintf(name, sizeof name, "page-%ld.html", i);
		if ((rc = ns_mknode(st, dir, name, S_IFREG | 0644, 0, NULL, &root, &in)))
			die("create", rc);
		struct pd_file *f;
		bool keep;
		size_t done;
		if ((rc = file_open(st, in.ino, O_WRONLY, &f, &keep)))
			die("open", rc);
		for (size_t off = 0; off < PAGE; off += 4096) {
			size_t n = PAGE - off < 4096 ? PAGE - off : 4096;
			if ((rc = file_write(f, buf + off, n, off, &done)))
				die("write", rc);
		}
		double t0 = now_s();
		if ((rc = file_flush(f)) || (rc = file_release(f)))
			die("seal", rc);
		seal_ms[i] = (now_s() - t0) * 1e3;
	}
	free(buf);
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double hash_only_mb_s(void)
{
	char *buf = malloc(PAGE);
	long n = npages < 20000 ? npages : 20000;
	double t0 = now_s();
	for (long i = 0; i < n; i++) {
		make_page(i, buf);
		struct fp fp;
		fp_of_buf(buf, PAGE, &fp);
	}
	double t = now_s() - t0;
	free(buf);
	return (double)n * PAGE / t / 1e6;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_core DIR [pages] [threads]\n");
		return 2;
	}
	npages = argc > 2 ? atol(argv[2]) : 100000;
	nthreads = argc > 3 ? atoi(argv[3]) : 2;
	char dir[4096], err[PD_ERRLEN];
	snprintf(dir, sizeof dir, "%s/store", argv[1]);
	struct store_params p;
	store_params_default(&p);
	p.expected_pages = (uint64_t)npages / 2; /* design load: the distinct pages */
	if (argc > 4)
		p.filter_fpr = atof(argv[4]);
	if (argc > 5)
		p.expected_pages = (uint64_t)atof(argv[5]);
	seal_ms = calloc((size_t)npages, sizeof *seal_ms);
	int rc = archive_mkfs(dir, &p, err);
	struct store_opts o = { 0 };
	if (rc || (rc = archive_open(dir, &o, &st, err))) {
		fprintf(stderr, "bench_core: %s\n", err);
		return 1;
	}
	printf("pages: %ld\nthreads: %d\npage_bytes: %d bytes\nfilter_target_fpr: %g\n", npages, nthreads,
	       PAGE, p.filter_fpr);
	printf("baseline_md5_xxh3_one_core: %.1f MB/s\n", hash_only_mb_s());
	pthread_t t[64];
	double t0 = now_s();
	for (long i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, writer, (void *)i);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	double secs = now_s() - t0;
	struct pd_counters c;
	store_counters(st, &c);
	printf("seals_per_s: %.0f seals/s\n", (double)npages / secs);
	printf("seal_throughput: %.1f MB/s\n", (double)npages * PAGE / secs / 1e6);
	long newpages = (long)(c.seals - c.dup_seals);
	printf("new_pages: %ld\n", newpages);
	/* A duplicate is always probed; a new page only when the filter errs. */
	printf("lmdb_probes_per_new_page: %.6f probes/page\n",
	       (double)(c.probes - c.dup_seals) / (double)newpages);
	printf("filter_false_positive_rate_measured: %.6f\n",
	       (double)c.false_positives / (double)(c.false_positives + c.probes_skipped));
	struct gf_stats gs;
	gf_stats(st->gf, false, &gs);
	printf("filter_false_positive_rate_design: %.6f\n", gs.fpr_model);
	printf("filter_leaves: %llu\n", (unsigned long long)gs.leaves);
	printf("filter_splits: %llu\n", (unsigned long long)gs.splits);
	printf("filter_split_chunks: %llu\n", (unsigned long long)st->split_chunks);
	printf("filter_split_chunk_max: %.3f ms\n", (double)st->split_chunk_max_ns / 1e6);
	printf("filter_expected_pages: %llu\n", (unsigned long long)p.expected_pages);
	qsort(seal_ms, (size_t)npages, sizeof *seal_ms, cmp_double);
	printf("seal_latency_p50: %.3f ms\n", seal_ms[npages / 2]);
	printf("seal_latency_p99: %.3f ms\n", seal_ms[npages * 99 / 100]);
	printf("seal_latency_max: %.3f ms\n", seal_ms[npages - 1]);
	free(seal_ms);
	printf("filter_bytes_per_stored_page: %.2f bytes\n", (double)gs.bytes / (double)c.blobs);
	MDB_envinfo info;
	MDB_stat ms;
	mdb_env_info(st->env, &info);
	mdb_env_stat(st->env, &ms);
	double lmdb = (double)(info.me_last_pgno + 1) * ms.ms_psize;
	printf("lmdb_bytes_per_page: %.1f bytes\n", lmdb / (double)c.pages);
	printf("lmdb_bytes_per_stored_page: %.1f bytes\n", lmdb / (double)c.blobs);
	if ((rc = store_close(st)))
		die("close", rc);
	return 0;
}
