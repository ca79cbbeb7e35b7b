/* bench_chunkdelta.c - pages over a chunk stored as chunked deltas
 * (pack.h): their bytes against the window margin, and what a read costs.
 *
 *   bench_chunkdelta [--level N] [--margins M,M,...] < PAIRS
 *
 * PAIRS: lines "BASE<TAB>PAGE" (paths), a page and the older version it
 * would be a delta on. For each margin (and for one frame against the
 * whole base, the encoding before chunked deltas, as reference) it prints
 * the deltas' bytes over the pages' records encoded whole (the baseline,
 * in the same run: zstd at the level, 256 KiB chunks, no dictionary),
 * what the delta step would keep (a delta under 3/4 of the whole record,
 * else the whole one), and the encoder's CPU. Then, at the default margin,
 * the CPU of reading one chunk (a read at an offset) of each page stored
 * whole and as a chunked delta on its base stored whole (the chunk and
 * its window of the base decoded), and of decoding the whole page either
 * way. Everything in memory: the codec's cost, not the disk's.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "base/byteorder.h"
#include "pack/pack.h"
#include "pack/pack_int.h"

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *b = NULL;
	long l = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
	if (l >= 0 && fseek(f, 0, SEEK_SET) == 0 && (b = malloc(l ? (size_t)l : 1)))
		*n = fread(b, 1, (size_t)l, f);
	fclose(f);
	return b;
}

static double cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void canon(const void *p, size_t n, uint8_t out[16])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
	memcpy(out, c.digest, 16);
}

/* Chunk i's stored bytes in record r (in memory). */
static const uint8_t *chunk_src(const struct pack_rec *r, uint32_t i)
{
	const uint8_t *table = r->buf + r->hdr.hdr_len;
	size_t pos = (size_t)r->hdr.nchunks * PACK_CHUNK_ENT;
	for (uint32_t j = 0; j < i; j++)
		pos += get_le32(table + (size_t)j * PACK_CHUNK_ENT);
	return table + pos;
}

/* The base, a record in memory, read by range through its chunks (as
 * blob_pack.c reads a base from its pack) or whole. */
static int base_range(void *ctx, const uint8_t md5[16], uint32_t variant, uint64_t off, size_t len, void *out,
		      size_t *got, uint64_t *size)
{
	const struct pack_rec *r = ctx;
	(void)md5;
	(void)variant;
	uint64_t cs = 1ull << r->hdr.chunk_shift, end;
	*size = r->hdr.size;
	*got = off >= r->hdr.size ? 0 : (size_t)(r->hdr.size - off < len ? r->hdr.size - off : len);
	if (!*got)
		return 0;
	end = off + *got;
	uint8_t *tmp = malloc((size_t)cs);
	int rc = tmp ? 0 : -12;
	for (uint64_t i = off / cs; !rc && i <= (end - 1) / cs; i++) {
		rc = pack_decode_chunk(&r->hdr, r->buf + r->hdr.hdr_len, (uint32_t)i, chunk_src(r, (uint32_t)i), NULL,
				       NULL, tmp);
		uint64_t a = i * cs > off ? i * cs : off, b = (i + 1) * cs < end ? (i + 1) * cs : end;
		if (!rc)
			memcpy((uint8_t *)out + (a - off), tmp + (a - i * cs), (size_t)(b - a));
	}
	free(tmp);
	return rc;
}

static void *base_whole(void *ctx, const uint8_t md5[16], uint32_t variant, uint64_t *len)
{
	const struct pack_rec *r = ctx;
	void *out;
	(void)md5;
	(void)variant;
	if (pack_rec_decode(r, NULL, &out))
		return NULL;
	*len = r->hdr.size;
	return out;
}

#define MAX_MARGINS 16

struct sums {
	double bytes, kept, cpu;
	unsigned under;
};

struct reads {
	double whole_chunk, delta_chunk, whole_all, delta_all;
	unsigned chunks, pages;
};

/* The read costs of page (whole record wr, delta dr on base record br). */
static int time_reads(const struct pack_rec *br, const struct pack_rec *wr, const struct pack_rec *dr,
		      struct reads *t)
{
	struct pack_deps deps = { .base = base_whole, .base_range = base_range, .ctx = (void *)br };
	uint8_t *out = malloc((size_t)1 << dr->hdr.chunk_shift);
	int rc = out ? 0 : -12;
	for (uint32_t i = 0; !rc && i < dr->hdr.nchunks; i++) {
		double t0 = cpu_s();
		rc = pack_decode_chunk(&wr->hdr, wr->buf + wr->hdr.hdr_len, i, chunk_src(wr, i), NULL, NULL, out);
		double t1 = cpu_s();
		if (!rc)
			rc = pack_decode_chunk(&dr->hdr, dr->buf + dr->hdr.hdr_len, i, chunk_src(dr, i), &deps, NULL,
					       out);
		t->whole_chunk += t1 - t0;
		t->delta_chunk += cpu_s() - t1;
		t->chunks++;
	}
	free(out);
	void *all = NULL;
	double t0 = cpu_s();
	if (!rc && !(rc = pack_rec_decode(wr, NULL, &all)))
		free(all);
	double t1 = cpu_s();
	if (!rc && !(rc = pack_rec_decode(dr, &deps, &all)))
		free(all);
	t->whole_all += t1 - t0;
	t->delta_all += cpu_s() - t1;
	t->pages++;
	return rc;
}

int main(int argc, char **argv)
{
	int level = 3;
	unsigned margins[MAX_MARGINS] = { 1, 1024, 4096, 16384, 32768, 65536, 131072 }, nm = 7;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--level") && i + 1 < argc) {
			level = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--margins") && i + 1 < argc) {
			nm = 0;
			for (char *t = strtok(argv[++i], ","); t && nm < MAX_MARGINS; t = strtok(NULL, ","))
				margins[nm++] = (unsigned)strtoul(t, NULL, 0);
		} else {
			fprintf(stderr, "usage: bench_chunkdelta [--level N] [--margins M,M,...] < PAIRS (BASE<TAB>PAGE lines)\n");
			return 2;
		}
	}
	struct sums s[MAX_MARGINS + 1] = { 0 };
	struct reads t = { 0 };
	double raw = 0, whole = 0;
	unsigned pairs = 0;
	char line[8192];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		char *tab = strchr(line, '\t');
		size_t bl = 0, pl = 0;
		char *base = tab ? (*tab = 0, slurp(line, &bl)) : NULL, *page = tab ? slurp(tab + 1, &pl) : NULL;
		uint8_t md5[16] = { 1 }, xb[16], xp[16];
		struct pack_rec br, wr, dr;
		struct pack_encode_opts w = { .level = level };
		if (!base || !page || pl <= (1u << PACK_DEFAULT_CHUNK_SHIFT)) {
			free(base);
			free(page);
			continue;
		}
		canon(base, bl, xb);
		canon(page, pl, xp);
		if (pack_encode_page(md5, 1, xb, base, -1, bl, &w, &br) ||
		    pack_encode_page(md5, 0, xp, page, -1, pl, &w, &wr))
			return 1;
		pairs++;
		raw += (double)pl;
		whole += (double)wr.len;
		for (unsigned m = 0; m <= nm; m++) {
			struct pack_encode_opts o = { .level = level, .base = base, .base_len = bl, .base_variant = 1 };
			if (m < nm)
				o.base_margin = margins[m];
			else
				o.chunk_shift = 30; /* one frame against the whole base */
			double c0 = cpu_s();
			if (pack_encode_page(md5, 0, xp, page, -1, pl, &o, &dr))
				return 1;
			s[m].cpu += cpu_s() - c0;
			s[m].bytes += (double)dr.len;
			bool ok = dr.len * 4 < wr.len * 3;
			s[m].under += ok;
			s[m].kept += (double)(ok ? dr.len : wr.len);
			pack_rec_free(&dr);
		}
		struct pack_encode_opts d = { .level = level, .base = base, .base_len = bl, .base_variant = 1 };
		if (pack_encode_page(md5, 0, xp, page, -1, pl, &d, &dr) || time_reads(&br, &wr, &dr, &t)) {
			fprintf(stderr, "bench_chunkdelta: %s does not decode back\n", tab + 1);
			return 1;
		}
		pack_rec_free(&dr);
		pack_rec_free(&br);
		pack_rec_free(&wr);
		free(base);
		free(page);
	}
	if (!pairs) {
		fprintf(stderr, "bench_chunkdelta: no pair with a page over a chunk\n");
		return 1;
	}
	printf("pairs: %u pages over a chunk, %.0f bytes raw; whole records (level %d, chunks, no dictionary): %.0f bytes\n",
	       pairs, raw, level, whole);
	for (unsigned m = 0; m <= nm; m++) {
		if (m < nm)
			printf("margin %7u:", margins[m]);
		else
			printf("one frame:     ");
		printf(" deltas %.4f of whole; kept under 3/4 %u, stored %.4f of whole; encode %.2f s CPU (%.0f MB/s)\n",
		       s[m].bytes / whole, s[m].under, s[m].kept / whole, s[m].cpu, raw / s[m].cpu / 1e6);
	}
	printf("read of one chunk (margin %u): whole %.0f us, chunked delta %.0f us (%.2f x); whole page: whole %.2f ms, chunked delta %.2f ms (%.2f x)\n",
	       PACK_DELTA_MARGIN, t.whole_chunk / t.chunks * 1e6, t.delta_chunk / t.chunks * 1e6,
	       t.delta_chunk / t.whole_chunk, t.whole_all / t.pages * 1e3, t.delta_all / t.pages * 1e3,
	       t.delta_all / t.whole_all);
	return 0;
}
