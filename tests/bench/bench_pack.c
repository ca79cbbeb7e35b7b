/* bench_pack.c - what the pack codec's settings cost and save, measured on
 * real pages: the sizes and speeds behind the defaults of pack.h and
 * blob_dict.c (zstd level, dictionary size, chunk size).
 *
 *   bench_pack [--levels 1,3,6,9] [--dicts 0,32,64,110] [--sample-pct 10]
 *              [--sample-first N | --sample-pages N] [--sample-max BYTES] [--dict-file F] < file-list
 *
 * Reads the files named on stdin (one path a line; duplicates by content
 * are dropped), trains a dictionary of each size on a sample of the pages
 * (every 100/pct-th page, N pages spread evenly: --sample-pages, or the
 * first N pages as a store's first training sees them: --sample-first; each cut to --sample-max bytes, 64 KiB unless
 * told), or takes the dictionary of file F (--dict-file, e.g. one read out
 * of a store's pack), then compresses every page alone at each level
 * with each dictionary and prints one line per setting:
 *   level L dict KiB: N bytes (ratio R of raw), compress X MB/s, decompress Y MB/s
 * (MB/s of raw bytes per CPU second of the one thread that does the work)
 * plus the raw size and the dictionary training time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>
#include <zdict.h>
#include <zstd.h>

struct page {
	char *buf;
	size_t len;
};

/* CPU seconds of this thread: speeds are of one core, whatever else the
 * machine runs. */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc(n > 0 ? (size_t)n : 1);
	if (b && n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = n > 0 ? (size_t)n : 0;
	return b;
}

static int parse_list(const char *s, int *v, int max)
{
	int n = 0;
	while (*s && n < max) {
		v[n++] = atoi(s);
		const char *c = strchr(s, ',');
		if (!c)
			break;
		s = c + 1;
	}
	return n;
}

int main(int argc, char **argv)
{
	int levels[8] = { 1, 3, 6, 9 }, nlev = 4, dicts[8] = { 0, 32, 64, 110 }, ndict = 4, pct = 10;
	size_t first = 0, spread = 0, smax = 65536;
	const char *dict_file = NULL;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--levels"))
			nlev = parse_list(argv[i + 1], levels, 8);
		else if (!strcmp(argv[i], "--dicts"))
			ndict = parse_list(argv[i + 1], dicts, 8);
		else if (!strcmp(argv[i], "--sample-pct"))
			pct = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--sample-first"))
			first = (size_t)atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--sample-pages"))
			spread = (size_t)atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--sample-max"))
			smax = (size_t)atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--dict-file"))
			dict_file = argv[i + 1];
	}
	if (dict_file) {
		dicts[0] = -1; /* the file's */
		ndict = 1;
	}
	size_t cap = 1024, n = 0, raw = 0;
	struct page *p = malloc(cap * sizeof *p);
	size_t hcap = 1 << 20;
	uint64_t *seen = calloc(hcap, sizeof *seen);
	char line[8192];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		size_t len;
		char *b = slurp(line, &len);
		if (!b)
			continue;
		uint64_t h = XXH3_64bits(b, len) | 1;
		size_t j = h & (hcap - 1);
		while (seen[j] && seen[j] != h)
			j = (j + 1) & (hcap - 1);
		if (seen[j]) {
			free(b);
			continue;
		}
		seen[j] = h;
		if (n == cap)
			p = realloc(p, (cap *= 2) * sizeof *p);
		p[n++] = (struct page){ b, len };
		raw += len;
	}
	printf("pages %zu, raw %zu bytes\n", n, raw);
	/* the training sample: every (100/pct)-th page or the first ones, cut
	 * to smax bytes each */
	size_t step = first ? 1 : spread ? (n / spread > 0 ? n / spread : 1) : pct > 0 ? (size_t)(100 / pct) : 10;
	size_t ns = 0, sbytes = 0;
	size_t end = first && first < n ? first : n;
	size_t *ssz = malloc((n / step + 1) * sizeof *ssz);
	char *sample = malloc(raw + 1);
	for (size_t i = 0; i < end; i += step) {
		size_t l = p[i].len < smax ? p[i].len : smax;
		memcpy(sample + sbytes, p[i].buf, l);
		ssz[ns++] = l;
		sbytes += l;
	}
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_DCtx *d = ZSTD_createDCtx();
	size_t maxlen = 0;
	for (size_t i = 0; i < n; i++)
		maxlen = p[i].len > maxlen ? p[i].len : maxlen;
	char *out = malloc(ZSTD_compressBound(maxlen)), *back = malloc(maxlen + 1);
	for (int di = 0; di < ndict; di++) {
		void *dict = NULL;
		size_t dlen = 0;
		if (dicts[di] < 0) {
			dict = slurp(dict_file, &dlen);
			if (!dict) {
				printf("dict file %s: cannot be read\n", dict_file);
				return 1;
			}
			printf("dict from %s: %zu bytes\n", dict_file, dlen);
		} else if (dicts[di] > 0) {
			dict = malloc((size_t)dicts[di] * 1024);
			double t0 = now();
			dlen = ZDICT_trainFromBuffer(dict, (size_t)dicts[di] * 1024, sample, ssz, (unsigned)ns);
			if (ZDICT_isError(dlen)) {
				printf("dict %d KiB: training failed: %s\n", dicts[di], ZDICT_getErrorName(dlen));
				free(dict);
				continue;
			}
			printf("dict %d KiB: trained on %zu pages (%zu bytes) in %.2f s\n", dicts[di], ns, sbytes, now() - t0);
		}
		for (int li = 0; li < nlev; li++) {
			ZSTD_CDict *cd = dict ? ZSTD_createCDict(dict, dlen, levels[li]) : NULL;
			ZSTD_DDict *dd = dict ? ZSTD_createDDict(dict, dlen) : NULL;
			size_t total = 0;
			double tc = 0, td = 0;
			for (size_t i = 0; i < n; i++) {
				double t0 = now();
				size_t r = cd ? ZSTD_compress_usingCDict(c, out, ZSTD_compressBound(p[i].len), p[i].buf, p[i].len, cd)
					      : ZSTD_compressCCtx(c, out, ZSTD_compressBound(p[i].len), p[i].buf, p[i].len, levels[li]);
				double t1 = now();
				size_t b = dd ? ZSTD_decompress_usingDDict(d, back, p[i].len, out, r, dd)
					      : ZSTD_decompressDCtx(d, back, p[i].len, out, r);
				double t2 = now();
				if (ZSTD_isError(r) || b != p[i].len || memcmp(back, p[i].buf, b)) {
					printf("round trip failed on page %zu\n", i);
					return 1;
				}
				tc += t1 - t0;
				td += t2 - t1;
				total += r < p[i].len ? r : p[i].len;
			}
			printf("level %d dict %d KiB: %zu bytes (ratio %.4f of raw), compress %.0f MB/s, decompress %.0f MB/s\n",
			       levels[li], dicts[di], total + dlen, (double)(total + dlen) / (double)raw, raw / tc / 1e6,
			       raw / td / 1e6);
			fflush(stdout);
			ZSTD_freeCDict(cd);
			ZSTD_freeDDict(dd);
		}
		free(dict);
	}
	return 0;
}
