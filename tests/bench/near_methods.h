/* near_methods.h - part of bench_near (included by bench_near.c, not a
 * program of its own): seed 003's report, one table of precision, recall
 * and time per method, on the labelled set and on API-reference packages
 * of different generators (--pkg DIR, one per package).
 *
 * Methods (each lists pairs of pages; "confirm": the store's, shingle-set
 * resemblance >= 0.8, an estimate within NEARSET_MARGIN of it decided on
 * the pages read back, nearset.h):
 *   md5          byte-identical pages (the MD5 of the bytes);
 *   multi-md5    seed 003's multiple fingerprints: the MD5 of every block
 *                (line) of the extracted text, ranked by block size; two
 *                pages are listed when they share one of their top pre = 3
 *                fingerprints;
 *   simhash      simhash within K (what the index returns);
 *   simhash+sketch  the same, confirmed by the 64-byte sketch at 0.8 (the
 *                store before the shingle sets);
 *   simhash+confirm the same, confirmed by the shingle sets;
 *   lsh+confirm  the second generator alone: pages sharing one of the
 *                NEARSET_BANDS bands, confirmed;
 *   store        both generators, confirmed: what user.dedup.near lists.
 * Labelled set: precision = listed pairs of one base / listed; recall per
 * kind as the rows above. Packages: every distinct page (at most --pkg-max,
 * a fixed shuffle), a listed pair is right when the judge (word 5-shingle
 * resemblance of the extracted texts) gives 0.8 or more; every listed pair
 * is judged, "?" pages included (for multi-md5, whose lists can be huge, a
 * fixed sample of at most 20,000).
 * Time: thread CPU seconds for the whole collection, extraction included
 * for every method but md5, candidates by brute force for simhash (an
 * index is what the speed benchmark measures), per page in us beside it.
 */
#include <openssl/evp.h>

#define PRE 3               /* seed 003's pre */
#define JUDGE_SAMPLE 20000  /* most pairs judged per method and package */

/* ---- the per-page signals of the methods (filled by analyse) ---- */

static double t_md5, t_nearset, t_blocks; /* CPU seconds (t_extract... in bench_near.c) */

static uint64_t md5_64(const void *p, size_t n)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	if (!EVP_Digest(p, n, d, &len, EVP_md5(), NULL))
		die("EVP_Digest failed");
	uint64_t v;
	memcpy(&v, d, 8);
	return v;
}

struct block {
	size_t len;
	uint64_t fp;
};

static int block_cmp(const void *x, const void *y)
{
	const struct block *a = x, *b = y;
	if (a->len != b->len)
		return a->len < b->len ? 1 : -1;
	return (a->fp > b->fp) - (a->fp < b->fp); /* ties: a fixed order */
}

/* The MD5s of the top PRE blocks (lines) of the text, by size. */
static unsigned top_blocks(const char *t, size_t len, uint64_t top[PRE])
{
	struct block *b = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(t + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - t) : len, s = i, e = end;
		while (s < e && (t[s] == ' ' || t[s] == '\t'))
			s++;
		while (e > s && (t[e - 1] == ' ' || t[e - 1] == '\t'))
			e--;
		if (e > s) {
			if (n == cap) {
				cap = cap ? 2 * cap : 64;
				b = xrealloc(b, cap * sizeof *b);
			}
			b[n++] = (struct block){e - s, md5_64(t + s, e - s)};
		}
		i = end + 1;
	}
	qsort(b, n, sizeof *b, block_cmp);
	unsigned k = 0;
	for (size_t i = 0; i < n && k < PRE; i++) {
		bool dup = false;
		for (unsigned j = 0; j < k; j++)
			dup |= top[j] == b[i].fp;
		if (!dup)
			top[k++] = b[i].fp;
	}
	free(b);
	return k;
}

/* Bits of each kept hash the sets hold, as a store holds them (nearset.h;
 * --set-bits: 32 gives the sets of near layout 3). */
static unsigned g_set_bits = NEARSET_BITS;

static void analyse_methods(const char *html, size_t len, const struct html_text *t, struct page *p)
{
	double c = now(CLOCK_THREAD_CPUTIME_ID);
	p->md5 = md5_64(html, len);
	double c2 = now(CLOCK_THREAD_CPUTIME_ID);
	t_md5 += c2 - c;
	p->ns = xmalloc(sizeof *p->ns);
	if (t->binary ? (memset(p->ns, 0, sizeof *p->ns), 0) : nearset_of_text(t->text, t->len, p->ns))
		die("nearset_of_text failed");
	if (p->ns->has) { /* what the store holds (--set-bits; 32: near layout 3's) */
		if (g_set_bits == 32)
			p->ns->legacy_bands = true;
		else if (p->ns->n > NEARSET_FULL_MAX)
			nearset_truncate(p->ns, g_set_bits);
		nearset_bands(p->ns);
	}
	double c3 = now(CLOCK_THREAD_CPUTIME_ID);
	t_nearset += c3 - c2;
	p->ntop = t->binary ? 0 : (uint8_t)top_blocks(t->text, t->len, p->top);
	t_blocks += now(CLOCK_THREAD_CPUTIME_ID) - c3;
}

/* ---- a collection: pages, and how a listed pair is scored ---- */

struct coll {
	struct page *(*pg)(size_t i);
	size_t n;
	bool labelled; /* else judged */
};

static struct page *lab_pg(size_t i)
{
	return &docs[i].pg;
}

static struct page *pkg_pages;
static struct page *pkg_pg(size_t i)
{
	return &pkg_pages[i];
}

enum method { M_MD5, M_MULTI, M_SIMHASH, M_SKETCH, M_CONFIRM, M_LSH, M_STORE, NMETHODS };
static const char *const method_name[NMETHODS] = {
	"md5", "multi-md5(pre=3)", "simhash", "simhash+sketch", "simhash+confirm", "lsh+confirm", "store",
};

/* Confirms compared on the store's candidates: bottom-k of 64, 128, 256
 * (the stored one), and the exact resemblance (both pages read back). */
enum { C_K64, C_K128, C_K256, C_EXACT, C_B05, C_B10, NCONFIRMS };
static const char *const cf_name[NCONFIRMS] = {"bottom-64", "bottom-128", "bottom-256", "exact",
					       "bottom-256+readback(0.05)", "bottom-256+readback(0.10)"};
static size_t g_readbacks[NCONFIRMS]; /* pairs read back, per confirm */
static bool g_count_rb;               /* in the comparison of the confirms */

static unsigned g_mk = 4; /* K of the methods (the store's default) */

static bool share_band(const struct nearset *a, const struct nearset *b)
{
	for (int i = 0; i < NEARSET_BANDS; i++)
		if (a->band[i] == b->band[i])
			return true;
	return false;
}

/* The bottom-k of a stored set (its first k hashes). */
static void truncate_set(const struct nearset *s, unsigned k, struct nearset *out)
{
	out->has = s->has;
	out->bits = s->bits;
	out->legacy_bands = s->legacy_bands;
	out->shingles = s->shingles;
	out->n = s->n < k ? s->n : k;
	out->complete = s->shingles <= k;
	memcpy(out->h, s->h, out->n * sizeof *s->h);
}

static bool confirm_k(const struct page *a, const struct page *b, int c)
{
	if (c == C_EXACT)
		return resemblance(&a->ref, &b->ref) >= NEARSET_NEAR;
	if (c == C_K256)
		return nearset_resemblance(a->ns, b->ns, NULL) >= NEARSET_NEAR;
	if (c == C_B05 || c == C_B10) {
		bool exact;
		double r = nearset_resemblance(a->ns, b->ns, &exact);
		double m = c == C_B05 ? 0.05 : 0.10;
		if (exact || r <= NEARSET_NEAR - m || r >= NEARSET_NEAR + m)
			return r >= NEARSET_NEAR;
		g_readbacks[c] += g_count_rb;
		return resemblance(&a->ref, &b->ref) >= NEARSET_NEAR;
	}
	static struct nearset x, y;
	unsigned k = c == C_K64 ? 64 : 128;
	truncate_set(a->ns, k, &x);
	truncate_set(b->ns, k, &y);
	return nearset_resemblance(&x, &y, NULL) >= NEARSET_NEAR;
}

/* Is pair (a, b), a candidate of its generator, listed by method m? */
static bool listed(int m, const struct page *a, const struct page *b, unsigned d, bool band)
{
	switch (m) {
	case M_SIMHASH: return d <= g_mk;
	case M_SKETCH: return d <= g_mk && estimate(a, b) >= MINHASH_NEAR_RESEMBLANCE;
	case M_CONFIRM: return d <= g_mk && confirm_k(a, b, C_B05);
	case M_LSH: return band && confirm_k(a, b, C_B05);
	default: return (d <= g_mk || band) && confirm_k(a, b, C_B05);
	}
}

struct tally {
	size_t listed, right, judged;
	size_t row_listed[NROWS], row_right[NROWS], row_right_judged[NROWS];
	double cpu;
};

static void tally_pair(const struct coll *c, struct tally *t, size_t i, size_t j)
{
	t->listed++;
	if (c->labelled) {
		const struct doc *a = &docs[i], *b = &docs[j];
		bool right = a->group >= 0 && a->group == b->group;
		bool judged = right && judged_true(i, j);
		t->right += right;
		for (int r = 0; r < NROWS; r++)
			if (in_row(a, r) && in_row(b, r)) {
				t->row_listed[r]++;
				t->row_right[r] += right;
				t->row_right_judged[r] += judged;
			}
		return;
	}
	/* judged: every pair, or a fixed sample of a huge list */
	if (t->judged >= JUDGE_SAMPLE && (XXH3_64bits(&(uint64_t[2]){i, j}, 16) % 64))
		return;
	t->judged++;
	t->right += resemblance(&c->pg(i)->ref, &c->pg(j)->ref) >= TRUE_RESEMBLANCE;
}

static int u32_cmp(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a > b) - (a < b);
}

/* Bucket lists: (key, page) sorted by key. */
struct kv {
	uint64_t key;
	uint32_t page;
};

static int kv_cmp(const void *x, const void *y)
{
	const struct kv *a = x, *b = y;
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	return (a->page > b->page) - (a->page < b->page);
}

/* Pages sharing a key: for page i, every j > i of its buckets, each once
 * (stamp[j] == i + 1 marks j seen for i). */
struct buckets {
	struct kv *v;
	size_t n;
	size_t *first; /* per page: its entries' positions (pos[first[i]..first[i+1])) */
	size_t *pos;
};

static void buckets_make(struct buckets *b, size_t npages, size_t per, uint64_t (*key)(const struct page *, size_t),
			 const struct coll *c, unsigned (*count)(const struct page *))
{
	b->v = xmalloc((npages * per + 1) * sizeof *b->v);
	b->n = 0;
	for (size_t i = 0; i < npages; i++) {
		unsigned k = count(c->pg(i));
		for (unsigned x = 0; x < k; x++)
			b->v[b->n++] = (struct kv){key(c->pg(i), x), (uint32_t)i};
	}
	qsort(b->v, b->n, sizeof *b->v, kv_cmp);
	b->first = xmalloc((npages + 1) * sizeof *b->first);
	b->pos = xmalloc((b->n + 1) * sizeof *b->pos);
	memset(b->first, 0, (npages + 1) * sizeof *b->first);
	for (size_t e = 0; e < b->n; e++)
		b->first[b->v[e].page + 1]++;
	for (size_t i = 0; i < npages; i++)
		b->first[i + 1] += b->first[i];
	size_t *fill = xmalloc((npages + 1) * sizeof *fill);
	memcpy(fill, b->first, (npages + 1) * sizeof *fill);
	for (size_t e = 0; e < b->n; e++)
		b->pos[fill[b->v[e].page]++] = e;
	free(fill);
}

static void buckets_free(struct buckets *b)
{
	free(b->v);
	free(b->first);
	free(b->pos);
}

/* Mark in stamp every j > i sharing a bucket with i; their list in out. */
static size_t bucket_mates(const struct buckets *b, size_t i, uint32_t *stamp, uint32_t *out)
{
	size_t n = 0;
	for (size_t q = b->first[i]; q < b->first[i + 1]; q++) {
		size_t e = b->pos[q];
		uint64_t key = b->v[e].key;
		for (size_t f = e + 1; f < b->n && b->v[f].key == key; f++) {
			uint32_t j = b->v[f].page;
			if (stamp[j] != i + 1) {
				stamp[j] = (uint32_t)(i + 1);
				out[n++] = j;
			}
		}
	}
	return n;
}

static uint64_t key_md5(const struct page *p, size_t x)
{
	(void)x;
	return p->md5;
}
static unsigned one(const struct page *p)
{
	(void)p;
	return 1;
}
static uint64_t key_top(const struct page *p, size_t x)
{
	return p->top[x];
}
static unsigned ntop(const struct page *p)
{
	return p->ntop;
}
static uint64_t key_band(const struct page *p, size_t x)
{
	return (uint64_t)x << 32 | p->ns->band[x];
}
static unsigned nbands(const struct page *p)
{
	return p->ns->has ? NEARSET_BANDS : 0;
}

static void run_bucket_method(const struct coll *c, struct buckets *b, struct tally *t)
{
	uint32_t *stamp = xmalloc((c->n + 1) * sizeof *stamp), *mates = xmalloc((c->n + 1) * sizeof *mates);
	memset(stamp, 0, (c->n + 1) * sizeof *stamp);
	for (size_t i = 0; i < c->n; i++) {
		size_t m = bucket_mates(b, i, stamp, mates);
		for (size_t q = 0; q < m; q++)
			tally_pair(c, t, i, mates[q]);
	}
	free(stamp);
	free(mates);
}

/* simhash / band methods, and the confirms on the store's candidates. */
static void run_index_methods(const struct coll *c, struct tally *t, struct tally *conf)
{
	struct buckets bands;
	double c0 = now(CLOCK_THREAD_CPUTIME_ID);
	buckets_make(&bands, c->n, NEARSET_BANDS, key_band, c, nbands);
	double band_cpu = now(CLOCK_THREAD_CPUTIME_ID) - c0;
	uint32_t *stamp = xmalloc((c->n + 1) * sizeof *stamp), *mates = xmalloc((c->n + 1) * sizeof *mates);
	memset(stamp, 0, (c->n + 1) * sizeof *stamp);
	uint8_t *isband = xmalloc(c->n + 1);
	memset(isband, 0, c->n + 1);
	for (int m = M_SIMHASH; m < NMETHODS; m++) {
		double m0 = now(CLOCK_THREAD_CPUTIME_ID);
		memset(stamp, 0, (c->n + 1) * sizeof *stamp);
		bool use_sim = m != M_LSH, use_band = m == M_LSH || m == M_STORE;
		for (size_t i = 0; i < c->n; i++) {
			const struct page *a = c->pg(i);
			if (a->none && !a->ns->has)
				continue;
			size_t nm = 0;
			if (use_band) {
				nm = bucket_mates(&bands, i, stamp, mates);
				for (size_t q = 0; q < nm; q++)
					isband[mates[q]] = 1;
			}
			for (size_t j = i + 1; use_sim && j < c->n; j++) {
				const struct page *b = c->pg(j);
				if (a->none || b->none)
					continue;
				unsigned d = simhash_distance(a->sh, b->sh);
				if (d <= g_mk && !isband[j] && listed(m, a, b, d, false))
					tally_pair(c, &t[m], i, j);
			}
			for (size_t q = 0; q < nm; q++) {
				const struct page *b = c->pg(mates[q]);
				unsigned d = a->none || b->none ? 64 : simhash_distance(a->sh, b->sh);
				if (listed(m, a, b, d, true))
					tally_pair(c, &t[m], i, mates[q]);
				isband[mates[q]] = 0;
			}
		}
		t[m].cpu = now(CLOCK_THREAD_CPUTIME_ID) - m0 + (use_band ? band_cpu : 0) + t_extract +
			   (m == M_SKETCH ? t_simhash + t_sketch : m == M_SIMHASH ? t_simhash
			    : m == M_LSH ? t_nearset : t_simhash + t_nearset);
	}
	/* the confirms compared, on the store's candidates (read-backs counted
	 * here only), and the candidates a query of each page meets */
	g_count_rb = true;
	uint32_t *ncand = xmalloc((c->n + 1) * sizeof *ncand);
	memset(ncand, 0, (c->n + 1) * sizeof *ncand);
	for (size_t i = 0; i < c->n; i++) {
		const struct page *a = c->pg(i);
		for (size_t j = i + 1; j < c->n; j++) {
			const struct page *b = c->pg(j);
			bool cand = !a->none && !b->none && simhash_distance(a->sh, b->sh) <= g_mk;
			cand = cand || (a->ns->has && b->ns->has && share_band(a->ns, b->ns));
			ncand[i] += cand;
			ncand[j] += cand;
			for (int k = 0; cand && k < NCONFIRMS; k++)
				if (confirm_k(a, b, k))
					tally_pair(c, &conf[k], i, j);
		}
	}
	g_count_rb = false;
	double sum = 0;
	for (size_t i = 0; i < c->n; i++)
		sum += ncand[i];
	qsort(ncand, c->n, sizeof *ncand, u32_cmp);
	if (c->n)
		printf("candidates_per_query: mean %.1f, median %u, p99 %u, max %u (simhash within %u or a shared "
		       "band, over %zu pages)\n", sum / (double)c->n, ncand[c->n / 2], ncand[c->n * 99 / 100],
		       ncand[c->n - 1], g_mk, c->n);
	free(ncand);
	buckets_free(&bands);
	free(stamp);
	free(mates);
	free(isband);
}

static void run_methods(const struct coll *c, struct tally *t, struct tally *conf)
{
	memset(g_readbacks, 0, sizeof g_readbacks);
	memset(t, 0, NMETHODS * sizeof *t);
	memset(conf, 0, NCONFIRMS * sizeof *conf);
	struct buckets b;
	double c0 = now(CLOCK_THREAD_CPUTIME_ID);
	buckets_make(&b, c->n, 1, key_md5, c, one);
	run_bucket_method(c, &b, &t[M_MD5]);
	buckets_free(&b);
	t[M_MD5].cpu = now(CLOCK_THREAD_CPUTIME_ID) - c0 + t_md5;
	c0 = now(CLOCK_THREAD_CPUTIME_ID);
	buckets_make(&b, c->n, PRE, key_top, c, ntop);
	run_bucket_method(c, &b, &t[M_MULTI]);
	buckets_free(&b);
	t[M_MULTI].cpu = now(CLOCK_THREAD_CPUTIME_ID) - c0 + t_extract + t_blocks;
	run_index_methods(c, t, conf);
}

static double precision_of(const struct coll *c, const struct tally *t)
{
	return ratio(t->right, c->labelled ? t->listed : t->judged);
}

/* "-" when nothing was listed (no precision to speak of). */
static const char *prec_str(const struct coll *c, const struct tally *t)
{
	static char b[4][16];
	static int next;
	char *o = b[next++ % 4];
	if (!t->listed)
		return "-";
	snprintf(o, 16, "%.4f", precision_of(c, t));
	return o;
}

static void print_methods(const char *label, const struct coll *c, const struct tally *t,
			  const struct tally *conf)
{
	printf("## seed 003's report: %s (%zu pages; K=%u, confirm >= %.1f)\n", label, c->n, g_mk, NEARSET_NEAR);
	printf("| method | precision | recall | listed pairs | CPU s | us/page |\n|---|---|---|---|---|---|\n");
	for (int m = 0; m < NMETHODS; m++) {
		char rec[32] = "-";
		if (c->labelled)
			snprintf(rec, sizeof rec, "%.4f", ratio(t[m].right, positives[ROW_ALL]));
		printf("| %s | %s | %s | %zu%s | %.2f | %.1f |\n", method_name[m], prec_str(c, &t[m]), rec,
		       t[m].listed, !c->labelled && t[m].judged < t[m].listed ? " (sampled)" : "", t[m].cpu,
		       c->n ? 1e6 * t[m].cpu / (double)c->n : 0);
	}
	for (int m = 0; m < NMETHODS; m++)
		printf("methods_%s_%s: precision %s listed %zu%s\n", label, method_name[m], prec_str(c, &t[m]),
		       t[m].listed, c->labelled ? "" : " (judged)");
	for (int k = 0; k < NCONFIRMS; k++)
		printf("confirm_%s_%s: precision %s listed %zu (pairs read back %zu)\n", label, cf_name[k],
		       prec_str(c, &conf[k]), conf[k].listed, g_readbacks[k]);
	if (!c->labelled)
		return;
	for (int k = 0; k < NCONFIRMS; k++)
		printf("confirm_%s_%s_recall: %.4f\n", label, cf_name[k], ratio(conf[k].right, positives[ROW_ALL]));
	/* per kind, the store's */
	for (int r = 0; r < NROWS; r++) {
		if (!positives[r] || r == ROW_ALL)
			continue;
		const struct tally *s = &t[M_STORE];
		printf("store_%s_%s: precision %.4f recall %.4f (listed %zu, right %zu, positives %zu); of the %zu "
		       "positives of resemblance >= %.1f (a confirm at the judge's line can list no more: ceiling "
		       "%.4f) listed %.4f\n",
		       lang_name[r / NKINDS], kind_name[r % NKINDS], ratio(s->row_right[r], s->row_listed[r]),
		       ratio(s->row_right[r], positives[r]), s->row_listed[r], s->row_right[r], positives[r],
		       positives_judged[r], TRUE_RESEMBLANCE, ratio(positives_judged[r], positives[r]),
		       ratio(s->row_right_judged[r], positives_judged[r]));
	}
}

/* Bytes a stored set takes, on average, at bottom-k. */
static void print_set_bytes(const struct coll *c, const char *label)
{
	double sum[3] = {0};
	unsigned ks[3] = {64, 128, 256};
	for (size_t i = 0; i < c->n; i++)
		for (int x = 0; x < 3; x++) {
			const struct nearset *s = c->pg(i)->ns;
			if (s->has)
				sum[x] += NEARSET_HEAD + 4 * NEARSET_BANDS + 4.0 * (s->shingles < ks[x] ? s->shingles : ks[x]);
		}
	printf("set_bytes_%s: bottom-64 %.0f, bottom-128 %.0f, bottom-256 %.0f bytes a page (mean)\n", label,
	       sum[0] / (double)(c->n ? c->n : 1), sum[1] / (double)(c->n ? c->n : 1), sum[2] / (double)(c->n ? c->n : 1));
}

/* The distinct pages of a package tree, at most max of them, in a fixed
 * shuffled order. */
static size_t pkg_load(const char *dir, size_t max)
{
	list_pages(dir);
	uint64_t rng = 0x5EED0003;
	for (size_t i = npaths; i > 1; i--) {
		size_t j = rng_below(&rng, i);
		char *t = paths[i - 1];
		paths[i - 1] = paths[j];
		paths[j] = t;
	}
	nseen = 0;
	pkg_pages = xmalloc((npaths ? npaths : 1) * sizeof *pkg_pages);
	size_t n = 0;
	t_extract = t_md5 = t_simhash = t_sketch = t_nearset = t_blocks = 0;
	for (size_t i = 0; i < npaths && n < max; i++) {
		size_t len;
		char *h = slurp(paths[i], &len);
		if (!h || !first_time(h, len)) {
			free(h);
			continue;
		}
		analyse(h, len, &pkg_pages[n], true, NULL);
		free(h);
		if (pkg_pages[n].ns->has || !pkg_pages[n].none)
			n++;
		else
			free_page_methods(&pkg_pages[n]);
	}
	return n;
}

/* Time to read a candidate back: extraction and shingles, per page. */
static void print_readback(const char *label, size_t n)
{
	printf("readback_%s: %.1f us a page read back (extraction %.1f + shingles %.1f); stored set compared: see "
	       "confirm_cost\n",
	       label, n ? 1e6 * (t_extract + t_nearset) / (double)n : 0, n ? 1e6 * t_extract / (double)n : 0,
	       n ? 1e6 * t_nearset / (double)n : 0);
}

static void confirm_cost(const struct coll *c, const char *label)
{
	size_t np = 0;
	volatile double sink = 0;
	double c0 = now(CLOCK_THREAD_CPUTIME_ID);
	for (size_t i = 0; i + 1 < c->n && np < 200000; i++)
		for (size_t j = i + 1; j < c->n && j < i + 20; j++, np++)
			sink += nearset_resemblance(c->pg(i)->ns, c->pg(j)->ns, NULL);
	double c1 = now(CLOCK_THREAD_CPUTIME_ID);
	(void)sink;
	printf("confirm_cost_%s: %.3f us a pair (bottom-256 sets in memory, %zu pairs)\n", label,
	       np ? 1e6 * (c1 - c0) / (double)np : 0, np);
}

static void rules_dump(const char *label, const struct coll *c); /* near_rules.h */

static void pkg_report(const char *dir, size_t max)
{
	const char *label = strrchr(dir, '/');
	label = label && label[1] ? label + 1 : dir;
	size_t n = pkg_load(dir, max);
	struct coll c = {pkg_pg, n, false};
	struct tally t[NMETHODS], conf[NCONFIRMS];
	run_methods(&c, t, conf);
	size_t low = 0;
	for (size_t i = 0; i < n; i++)
		low += pkg_pages[i].low;
	printf("pkg_%s_pages: %zu distinct (%zu low confidence)\n", label, n, low);
	print_methods(label, &c, t, conf);
	rules_dump(label, &c);
	printf("pkg_precision_%s: %s (%zu listed pairs, store; before the shingle sets, simhash+sketch: %s, %zu "
	       "pairs)\n", label, prec_str(&c, &t[M_STORE]), t[M_STORE].listed, prec_str(&c, &t[M_SKETCH]),
	       t[M_SKETCH].listed);
	print_set_bytes(&c, label);
	print_readback(label, n);
	confirm_cost(&c, label);
	for (size_t i = 0; i < n; i++)
		free_page_methods(&pkg_pages[i]);
	free(pkg_pages);
	pkg_pages = NULL;
}

static void labelled_report(void)
{
	struct coll c = {lab_pg, ndocs, true};
	struct tally t[NMETHODS], conf[NCONFIRMS];
	run_methods(&c, t, conf);
	print_methods("labelled", &c, t, conf);
	print_set_bytes(&c, "labelled");
	rules_dump("labelled", &c);
}
