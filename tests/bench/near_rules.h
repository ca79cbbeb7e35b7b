/* near_rules.h - part of bench_near (included by bench_near.c): --rules
 * FILE writes, for every pair of a collection that the store's generators
 * make a candidate (simhash within K or a shared band) and, in the
 * labelled set, every positive pair, one line of what a confirm could look
 * at beyond the word 5-shingle resemblance:
 *
 *   coll i j dist band kind_i kind_j same change_i change_j words_i words_j
 *   r5 r8 c8 rline cline hunks merged distinct kept D lang
 *
 * dist: simhash distance (64: none); band: 1 when a band is shared; kind:
 * the labelled kind (-1 in a package); same: one base; change: sentences
 * edited (edit variants), numbers changed (counter variants); r5: the judge's
 * resemblance; r8 / c8: resemblance and containment (shared over the
 * smaller set) of word 8-shingles; rline / cline: the same for the text's
 * lines, weighted by their words; from a word alignment (Myers, the judge's
 * words as written) of the pairs with 0.2 <= r5 < 0.8 (else -1): hunks,
 * merged (hunks joined across matched runs of fewer than 5 words),
 * distinct (hunks of distinct content), kept (words aligned over the
 * longer text), D (words inserted and deleted); lang: the labelled page's
 * language (en, zh; - in a package). An analysis script turns
 * the lines into recall per kind and precision per package for any rule.
 */

static FILE *g_rules_out;
static double g_align_cpu; /* thread CPU seconds in the alignments */
static size_t g_aligned;   /* pairs aligned */

struct sh8 {
	uint64_t *v;
	size_t n;
};

static struct sh8 shingles8(const struct page *p)
{
	struct sh8 s = {NULL, 0};
	if (p->nw >= 8) {
		s.v = xmalloc((p->nw - 7) * sizeof *s.v);
		for (size_t i = 0; i + 8 <= p->nw; i++)
			s.v[s.n++] = XXH3_64bits(p->w + i, 8 * sizeof *p->w);
		qsort(s.v, s.n, sizeof *s.v, cmp_u64);
		size_t u = 0;
		for (size_t i = 0; i < s.n; i++)
			if (!u || s.v[u - 1] != s.v[i])
				s.v[u++] = s.v[i];
		s.n = u;
	}
	return s;
}

static size_t common_u64(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
	size_t i = 0, j = 0, both = 0;
	while (i < na && j < nb) {
		if (a[i] == b[j])
			both++, i++, j++;
		else if (a[i] < b[j])
			i++;
		else
			j++;
	}
	return both;
}

/* Lines in common (as a multiset), weighted by words: *shared, and each
 * page's total in *wa, *wb. */
static void common_lines(const struct page *a, const struct page *b, double *shared, double *wa, double *wb)
{
	size_t i = 0, j = 0;
	*shared = *wa = *wb = 0;
	for (uint32_t k = 0; k < a->nline; k++)
		*wa += a->lw[k];
	for (uint32_t k = 0; k < b->nline; k++)
		*wb += b->lw[k];
	while (i < a->nline && j < b->nline) {
		if (a->line[i] == b->line[j])
			*shared += a->lw[i], i++, j++;
		else if (a->line[i] < b->line[j])
			i++;
		else
			j++;
	}
}

static void rules_pair(const char *label, const struct coll *c, const struct sh8 *s8, size_t i, size_t j,
		       unsigned d, bool band)
{
	const struct page *a = c->pg(i), *b = c->pg(j);
	int ki = -1, kj = -1, same = 0, ei = 0, ej = 0;
	if (c->labelled) {
		ki = docs[i].kind, kj = docs[j].kind;
		same = docs[i].group >= 0 && docs[i].group == docs[j].group;
		ei = docs[i].kind == K_COUNTER ? (int)docs[i].numbers : docs[i].edits;
		ej = docs[j].kind == K_COUNTER ? (int)docs[j].numbers : docs[j].edits;
	}
	double r5 = resemblance(&a->ref, &b->ref);
	size_t both8 = common_u64(s8[i].v, s8[i].n, s8[j].v, s8[j].n);
	size_t un8 = s8[i].n + s8[j].n - both8, mn8 = s8[i].n < s8[j].n ? s8[i].n : s8[j].n;
	double sl, wa, wb;
	common_lines(a, b, &sl, &wa, &wb);
	double ul = wa + wb - sl, ml = wa < wb ? wa : wb;
	struct diffstat ds;
	memset(&ds, 0, sizeof ds);
	long D = -2;
	if (r5 >= 0.2 && r5 < TRUE_RESEMBLANCE) {
		long mx = a->nw > b->nw ? a->nw : b->nw;
		long dmax = mx < 4000 ? mx : 4000;
		double c0 = now(CLOCK_THREAD_CPUTIME_ID);
		D = myers(&g_al, a->w, a->nw, b->w, b->nw, dmax);
		diff_stats(&g_al, a->w, NULL, a->nw, b->w, NULL, b->nw, D, &ds);
		g_align_cpu += now(CLOCK_THREAD_CPUTIME_ID) - c0;
		g_aligned++;
	}
	fprintf(g_rules_out, "%s %zu %zu %u %d %d %d %d %d %d %u %u %.4f %.4f %.4f %.4f %.4f %d %d %d %.4f %ld %s\n",
		label, i, j, d, band, ki, kj, same, ei, ej, a->nw, b->nw, r5, un8 ? (double)both8 / un8 : 1.0,
		mn8 ? (double)both8 / mn8 : (un8 ? 0.0 : 1.0), ul > 0 ? sl / ul : 1.0, ml > 0 ? sl / ml : 1.0,
		D >= -1 ? (int)ds.hunks : -1, D >= -1 ? (int)ds.merged : -1, D >= -1 ? (int)ds.distinct : -1,
		D >= -1 ? kept_share(&ds) : -1.0, D, c->labelled ? lang_name[docs[i].lang] : "-");
}

static void rules_dump(const char *label, const struct coll *c)
{
	if (!g_rules_out)
		return;
	struct sh8 *s8 = xmalloc((c->n ? c->n : 1) * sizeof *s8);
	for (size_t i = 0; i < c->n; i++)
		s8[i] = shingles8(c->pg(i));
	double c0 = now(CLOCK_THREAD_CPUTIME_ID), words = 0;
	size_t n = 0;
	g_align_cpu = 0;
	g_aligned = 0;
	for (size_t i = 0; i < c->n; i++)
		words += c->pg(i)->nw;
	for (size_t i = 0; i < c->n; i++) {
		const struct page *a = c->pg(i);
		for (size_t j = i + 1; j < c->n; j++) {
			const struct page *b = c->pg(j);
			unsigned d = a->none || b->none ? 64 : simhash_distance(a->sh, b->sh);
			bool band = a->ns->has && b->ns->has && share_band(a->ns, b->ns);
			bool same = c->labelled && docs[i].group >= 0 && docs[i].group == docs[j].group;
			if (d <= g_mk || band || same) {
				rules_pair(label, c, s8, i, j, d, band);
				n++;
			}
		}
	}
	printf("rules_%s: %zu pairs written, %.2f CPU s; %zu aligned, %.1f us a pair; %.0f words a page (%.0f bytes "
	       "at 4 a word)\n", label, n, now(CLOCK_THREAD_CPUTIME_ID) - c0, g_aligned,
	       g_aligned ? 1e6 * g_align_cpu / (double)g_aligned : 0, c->n ? words / (double)c->n : 0,
	       c->n ? 4 * words / (double)c->n : 0);
	for (size_t i = 0; i < c->n; i++)
		free(s8[i].v);
	free(s8);
	fflush(g_rules_out);
}
