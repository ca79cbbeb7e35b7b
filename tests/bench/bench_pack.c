/* bench_pack.c - what the pack codec's settings cost and save, measured on
 * real pages: the sizes and speeds behind the defaults of pack.h and
 * blob_dict.c (zstd level, dictionary size, chunk size).
 *
 *   bench_pack [--levels 1,3,6,9] [--dicts 0,32,64,110] [--sample-pct 10]
 *              [--sample-first N | --sample-pages N] [--sample-max BYTES] [--dict-file F]
 *              [--mem-levels 19] < file-list
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
 * plus the raw size and the dictionary training time, and what the
 * dictionary takes in memory once digested (ZSTD_sizeof_CDict at each
 * level and at --mem-levels, 19 unless told; ZSTD_sizeof_DDict):
 *   dict KiB memory: CDict level L N bytes, ...; DDict N bytes
 *
 * Frames (--frames 65536,262144 [--frame-levels 9,19]): what storing the
 * pages in frames of several pages would take, the design the corpus's
 * 0.5 goal needs (issue 15). With the last dictionary trained, pages are
 * laid end to end in frames of at most F bytes (a larger page alone) in
 * path order (the order of the list) and in simhash order (sorted by
 * their 64-bit simhash, so that alike pages share a frame), each frame
 * compressed at each level, and one line printed per setting:
 *   frames F level L ORDER SET: N bytes (R of raw; A of the pages alone),
 *   P pages a frame, decode U us a frame
 * SET is "all" (every page) or "alone" (the pages with no other page
 * within SIMHASH_NEAR_DISTANCE bits: roughly those a store keeps whole
 * rather than as deltas); F 0 is each page alone, the baseline. The
 * decode time (thread CPU) is what a random read of one page would pay.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>
#include <zdict.h>
#include <zstd.h>

#include "near/simhash.h"

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

/* ---- frames ---------------------------------------------------------- */

struct frame_set {
	const char *order, *set;
	size_t *idx; /* the pages, in frame order */
	size_t n;
};

static const uint64_t *sort_keys;
static bool window_gate; /* --window-gate 1: blob_cold.c's depth gate */

static int by_key(const void *a, const void *b)
{
	uint64_t x = sort_keys[*(const size_t *)a], y = sort_keys[*(const size_t *)b];
	return x < y ? -1 : x > y;
}

/* One setting: frames of at most fsize bytes (0: each page alone). */
static void frames_one(const struct page *p, const struct frame_set *fs, size_t fsize, int level, const void *dict,
		       size_t dlen, ZSTD_CCtx *c, ZSTD_DCtx *d, size_t alone_bytes)
{
	ZSTD_CDict *cd = ZSTD_createCDict(dict, dlen, level);
	ZSTD_DDict *dd = ZSTD_createDDict(dict, dlen);
	size_t cap = fsize > 0 ? fsize : 1, total = 0, raw = 0, frames = 0;
	for (size_t i = 0; i < fs->n; i++)
		cap = p[fs->idx[i]].len > cap ? p[fs->idx[i]].len : cap;
	char *buf = malloc(cap), *out = malloc(ZSTD_compressBound(cap)), *back = malloc(cap);
	double td = 0;
	for (size_t i = 0; i < fs->n;) {
		size_t len = 0, j = i;
		do {
			memcpy(buf + len, p[fs->idx[j]].buf, p[fs->idx[j]].len);
			len += p[fs->idx[j++]].len;
		} while (fsize > 0 && j < fs->n && len + p[fs->idx[j]].len <= fsize);
		size_t r = ZSTD_compress_usingCDict(c, out, ZSTD_compressBound(len), buf, len, cd);
		double t0 = now();
		size_t b = ZSTD_decompress_usingDDict(d, back, len, out, r, dd);
		td += now() - t0;
		if (ZSTD_isError(r) || b != len || memcmp(back, buf, len)) {
			printf("frames: round trip failed\n");
			exit(1);
		}
		total += r < len ? r : len;
		raw += len;
		frames++;
		i = j;
	}
	printf("frames %zu level %d %s %s: %zu bytes (%.4f of raw; %.3f of the pages alone), %.1f pages a frame, "
	       "decode %.0f us a frame\n",
	       fsize, level, fs->order, fs->set, total, (double)total / (double)raw,
	       alone_bytes ? (double)total / (double)alone_bytes : 1.0, (double)fs->n / (double)frames,
	       td / (double)frames * 1e6);
	fflush(stdout);
	free(buf);
	free(out);
	free(back);
	ZSTD_freeCDict(cd);
	ZSTD_freeDDict(dd);
}

/* Each page alone at level (the baseline of the frames' figures). */
static size_t alone_total(const struct page *p, const struct frame_set *fs, int level, const void *dict, size_t dlen,
			  ZSTD_CCtx *c)
{
	ZSTD_CDict *cd = ZSTD_createCDict(dict, dlen, level);
	size_t total = 0, cap = 1;
	for (size_t i = 0; i < fs->n; i++)
		cap = p[fs->idx[i]].len > cap ? p[fs->idx[i]].len : cap;
	char *out = malloc(ZSTD_compressBound(cap));
	for (size_t i = 0; i < fs->n; i++) {
		const struct page *q = &p[fs->idx[i]];
		size_t r = ZSTD_compress_usingCDict(c, out, ZSTD_compressBound(q->len), q->buf, q->len, cd);
		total += !ZSTD_isError(r) && r < q->len ? r : q->len;
	}
	free(out);
	ZSTD_freeCDict(cd);
	return total;
}

static void window_one(const struct page *p, const struct frame_set *fs, int window, int depth, int level,
		       const void *dict, size_t dlen, ZSTD_CCtx *c, ZSTD_DCtx *d);

static void frames_run(const struct page *p, size_t n, const int *fsizes, int nf, const int *windows, int nw, int depth,
		       const int *levels, int nl, const void *dict, size_t dlen)
{
	uint64_t *sh = malloc(n * sizeof *sh);
	bool *near = calloc(n, sizeof *near);
	size_t nohash = 0;
	for (size_t i = 0; i < n; i++) {
		struct simhash_result r;
		sh[i] = simhash_of_page(p[i].buf, p[i].len, &r) == 0 && !r.none ? r.hash : 0;
		nohash += sh[i] == 0;
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; sh[i] && j < n; j++)
			if (sh[j] && simhash_distance(sh[i], sh[j]) <= SIMHASH_NEAR_DISTANCE)
				near[i] = near[j] = true;
	struct frame_set sets[4] = { { "path", "all", NULL, 0 }, { "simhash", "all", NULL, 0 },
				     { "path", "alone", NULL, 0 }, { "simhash", "alone", NULL, 0 } };
	for (int s = 0; s < 4; s++) {
		sets[s].idx = malloc(n * sizeof(size_t));
		for (size_t i = 0; i < n; i++)
			if (s < 2 || !near[i])
				sets[s].idx[sets[s].n++] = i;
		if (s % 2) {
			sort_keys = sh;
			qsort(sets[s].idx, sets[s].n, sizeof(size_t), by_key);
		}
	}
	printf("frames: %zu pages, %zu of them with no other within %d bits of simhash (%zu without a simhash)\n", n,
	       sets[2].n, SIMHASH_NEAR_DISTANCE, nohash);
	ZSTD_CCtx *c = ZSTD_createCCtx();
	ZSTD_DCtx *d = ZSTD_createDCtx();
	for (int li = 0; li < nl; li++)
		for (int s = 0; s < 4; s++) {
			size_t alone = nf ? alone_total(p, &sets[s], levels[li], dict, dlen, c) : 0;
			for (int fi = 0; fi < nf; fi++)
				frames_one(p, &sets[s], (size_t)fsizes[fi], levels[li], dict, dlen, c, d, alone);
			for (int wi = 0; wi < nw; wi++)
				window_one(p, &sets[s], windows[wi], depth, levels[li], dict, dlen, c, d);
		}
	for (int s = 0; s < 4; s++)
		free(sets[s].idx);
	ZSTD_freeCCtx(c);
	ZSTD_freeDCtx(d);
	free(sh);
	free(near);
}

/* ---- window deltas --------------------------------------------------- */

/* What keeping a page as a delta against one of the W pages before it in
 * the set's order (git's pack window) would take, beside the page alone
 * with the dictionary: each page is encoded alone and as a delta (zstd,
 * the candidate as reference prefix, no dictionary) against each of the
 * W previous pages whose chain is shorter than depth, and the smallest
 * kept. One line per setting:
 *   window W depth D level L ORDER SET: N bytes (A of the pages alone),
 *   P deltas, mean chain C, decode U us a page
 * where the decode time is what a read pays: the page's record and its
 * bases' along the chain. */
static size_t delta_size(ZSTD_CCtx *c, char *out, size_t cap, const struct page *q, const struct page *base, int level)
{
	ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_refPrefix(c, base->buf, base->len);
	size_t r = ZSTD_compress2(c, out, cap, q->buf, q->len);
	return ZSTD_isError(r) ? q->len : r;
}

static void window_one(const struct page *p, const struct frame_set *fs, int window, int depth, int level,
		       const void *dict, size_t dlen, ZSTD_CCtx *c, ZSTD_DCtx *d)
{
	ZSTD_CDict *cd = ZSTD_createCDict(dict, dlen, level);
	ZSTD_DDict *dd = ZSTD_createDDict(dict, dlen);
	size_t cap = 1;
	for (size_t i = 0; i < fs->n; i++)
		cap = p[fs->idx[i]].len > cap ? p[fs->idx[i]].len : cap;
	char *out = malloc(ZSTD_compressBound(cap)), *back = malloc(cap);
	int *dep = calloc(fs->n, sizeof *dep);
	size_t alone_sum = 0, total = 0, deltas = 0, chain = 0;
	double td = 0;
	for (size_t i = 0; i < fs->n; i++) {
		const struct page *q = &p[fs->idx[i]];
		size_t r = ZSTD_compress_usingCDict(c, out, ZSTD_compressBound(q->len), q->buf, q->len, cd);
		size_t alone = !ZSTD_isError(r) && r < q->len ? r : q->len, best = alone;
		if (!ZSTD_isError(r)) {
			double t0 = now();
			ZSTD_decompress_usingDDict(d, back, q->len, out, r, dd);
			td += now() - t0;
		}
		int bj = -1;
		for (size_t k = 1; k <= (size_t)window && k <= i; k++) {
			if (dep[i - k] >= depth)
				continue;
			size_t s = delta_size(c, out, ZSTD_compressBound(q->len), q, &p[fs->idx[i - k]], level);
			/* the gate: a deeper base must give a smaller delta */
			if (window_gate && s * (size_t)depth >= alone * (size_t)(depth - dep[i - k]))
				continue;
			if (s < best) {
				best = s;
				bj = (int)(i - k);
			}
		}
		if (bj >= 0) {
			dep[i] = dep[bj] + 1;
			deltas++;
			/* a read decodes the chain: time one delta decode per link */
			size_t s = delta_size(c, out, ZSTD_compressBound(q->len), q, &p[fs->idx[bj]], level);
			double t0 = now();
			ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters);
			ZSTD_DCtx_refPrefix(d, p[fs->idx[bj]].buf, p[fs->idx[bj]].len);
			size_t b = ZSTD_decompressDCtx(d, back, q->len, out, s);
			td += (now() - t0) * dep[i];
			if (ZSTD_isError(b) || b != q->len || memcmp(back, q->buf, b)) {
				printf("window: round trip failed\n");
				exit(1);
			}
		}
		chain += (size_t)dep[i];
		alone_sum += alone;
		total += best;
	}
	printf("window %d depth %d%s level %d %s %s: %zu bytes (%.3f of the pages alone, %zu), %zu deltas, mean chain %.2f, "
	       "decode %.0f us a page\n",
	       window, depth, window_gate ? " gated" : "", level, fs->order, fs->set, total, alone_sum ? (double)total / (double)alone_sum : 1.0,
	       alone_sum, deltas, (double)chain / (double)fs->n, td / (double)fs->n * 1e6);
	fflush(stdout);
	free(dep);
	free(out);
	free(back);
	ZSTD_freeCDict(cd);
	ZSTD_freeDDict(dd);
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
	int fsizes[8], nf = 0, flevels[8] = { 9, 19 }, nfl = 2, mlevels[8] = { 19 }, nml = 1;
	int windows[8], nw = 0, wdepth = 4;
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
		else if (!strcmp(argv[i], "--frames"))
			nf = parse_list(argv[i + 1], fsizes, 8);
		else if (!strcmp(argv[i], "--frame-levels"))
			nfl = parse_list(argv[i + 1], flevels, 8);
		else if (!strcmp(argv[i], "--window"))
			nw = parse_list(argv[i + 1], windows, 8);
		else if (!strcmp(argv[i], "--window-depth"))
			wdepth = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--window-gate"))
			window_gate = atoi(argv[i + 1]) != 0;
		else if (!strcmp(argv[i], "--mem-levels"))
			nml = parse_list(argv[i + 1], mlevels, 8);
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
		if (dict) {
			printf("dict %d KiB memory:", dicts[di]);
			for (int li = 0; li < nlev + nml; li++) {
				int level = li < nlev ? levels[li] : mlevels[li - nlev];
				ZSTD_CDict *cd = ZSTD_createCDict(dict, dlen, level);
				printf(" CDict level %d %zu bytes,", level, ZSTD_sizeof_CDict(cd));
				ZSTD_freeCDict(cd);
			}
			ZSTD_DDict *dd = ZSTD_createDDict(dict, dlen);
			printf(" DDict %zu bytes\n", ZSTD_sizeof_DDict(dd));
			ZSTD_freeDDict(dd);
		}
		if ((nf || nw) && di == ndict - 1 && dict) {
			frames_run(p, n, fsizes, nf, windows, nw, wdepth, flevels, nfl, dict, dlen);
			nlev = 0; /* the frames only */
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
