/* bench_near.c - quality of near-duplicate detection: precision and recall
 * of simhash within distance K, alone and confirmed by the MinHash sketch.
 *
 *   bench_near [--bases N] [--zh-bases N] [--negatives N] [--threshold T]
 *              [--corpus DIR] [--no-jdk] [--speed-mb N]
 *              [--confirm sketch|align|both] [--rep tok|chunk] [--hunks H]
 *              [--kept F] [--align-r R] [--min-tokens N] [--no-rename-check]
 *              [--chunk C] [--dmax-frac X] [--grid] [--dump FILE]
 *
 * 1. The labelled set, made deterministically (fixed seeds) from the pages
 *    of the benchmark corpus (DIR, default /var/tmp/pagededup-corpus/
 *    corpus/a, made by corpus.sh) and from the Chinese translations that
 *    Debian ships in /usr/share/locale/zh_CN and zh_TW message catalogues:
 *    - originals: distinct pages with 64 or more distinct reference
 *      shingles (word 5-shingles), taken in a fixed shuffled order, each
 *      unrelated to every original taken before it (word 5-shingle
 *      resemblance under 0.5 with every earlier original whose sketch
 *      estimates 0.3 or more); the first N are bases, the next ones
 *      unrelated negatives. Nothing in the choice depends on the simhash,
 *      so that feature sets are compared on one set
 *      (bench-near-features.sh);
 *    - five variants of each base, the kinds of seed 001: "mirror" (the
 *      page's own header and footer removed, another site's put in, in one
 *      of three styles: header/footer elements, divs with ids, a table),
 *      "ad" (an ad block in the body, marked or not), "counter" (every
 *      number of the text changed, or a date and view counter line when
 *      the text has none), "edit" (1-5 sentences edited: words replaced,
 *      a sentence deleted or one inserted), "reformat" (white space and
 *      markup rewritten, the text the same);
 *    - Chinese: pages of catalogue text (600-3000 characters) in a news
 *      site's template (header, date and view counter, paragraphs, footer),
 *      half of them encoded as GBK with <meta charset="gbk"> (iconv), half
 *      as UTF-8, with the same five kinds of variants and a sixth,
 *      "charset": the same page in the other encoding.
 *    A pair is positive when both pages come from one base (base-variant
 *    and variant-variant); every other pair is negative. The answered set
 *    at K is every pair within simhash distance K (what an exact index
 *    returns), with the sketch: those whose estimated resemblance is at
 *    least the threshold. Per kind, the collection is the originals of its
 *    language and the variants of that kind; "all" is everything.
 * 2. The template trap: every distinct page of openjdk-17-doc in the
 *    corpus, every pair within distance K, judged by the word 5-shingle
 *    resemblance of the two extracted texts (>= 0.8: a true near-duplicate).
 * 3. The cost: the candidates and index rows a query at K meets over the
 *    corpus pages (index_*), and minhash_of_text over the extracted text of
 *    the corpus, per MB of HTML and of text.
 *
 * 4. --confirm align|both (default sketch: none of this, the output as
 *    before): another confirm, from the structure of the difference. Each
 *    page's text as tokens (simhash_tokens: words, every number "0", CJK
 *    characters) or as content-defined chunks of them (--chunk C tokens on
 *    average, a 16-bit hash each: what a store could keep per page); every
 *    pair within KMAX aligned (Myers O(ND), at most --dmax-frac of the
 *    longer text edited). A pair is accepted by its base - both: the sketch
 *    at T and the alignment's own 5-shingle resemblance estimate at
 *    --align-r R (0: the sketch alone); align: that estimate at 0.8 - or by
 *    its structure: both texts of --min-tokens or more, at most --hunks
 *    changed regions (merged across matched runs shorter than a shingle),
 *    a share --kept of the longer text kept in order, and (unless
 *    --no-rename-check) no two changed regions alike. Printed: the cost per
 *    pair (confirm_cost_*), the per-kind table at K and the K curve 0..8
 *    with openjdk precision (rule_*), candidates per query and index rows
 *    at every K (candidates_*); --grid: the rule with one parameter changed
 *    at a time (rgrid_*); --dump: one line per pair within KMAX.
 *
 * Every figure is a line "name: value".
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <iconv.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

#include "text/html.h"
#include "near/minhash.h"
#include "near/nearset.h"
#include "near/simhash.h"

#define DEFAULT_CORPUS "/var/tmp/pagededup-corpus/corpus/a"
#define KMAX 8          /* the curve asked for */
#define KFAR 16         /* pairs kept up to this distance, for the extended curve */
#define RELATED_ESTIMATE 0.3  /* originals whose sketches estimate this are checked */
#define RELATED_RESEMBLANCE 0.5
#define ORIGINAL_SHINGLES 64  /* an original has this many distinct reference shingles */
#define TRUE_RESEMBLANCE 0.8  /* the openjdk judge */
#define REF_WORDS 5           /* reference shingles: word 5-shingles */

/* ---- helpers ---- */

static void die(const char *what)
{
	fprintf(stderr, "bench_near: %s\n", what);
	exit(1);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die("out of memory");
	return p;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		die("out of memory");
	return p;
}

static double now(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static size_t rng_below(uint64_t *s, size_t n)
{
	return n ? (size_t)(rng_next(s) % n) : 0;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	struct stat st;
	if (fstat(fileno(f), &st) || st.st_size < 0) {
		fclose(f);
		return NULL;
	}
	char *b = xmalloc((size_t)st.st_size + 1);
	*len = fread(b, 1, (size_t)st.st_size, f);
	b[*len] = 0;
	fclose(f);
	return b;
}

/* A growing byte string, always NUL-terminated. */
struct buf {
	char *p;
	size_t n, cap;
};

static void put_n(struct buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->p = xrealloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

static void put(struct buf *b, const char *s)
{
	put_n(b, s, strlen(s));
}

static void putf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		die("vsnprintf failed");
	char *tmp = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(tmp, (size_t)n + 1, fmt, ap);
	va_end(ap);
	put_n(b, tmp, (size_t)n);
	free(tmp);
}

/* ---- the reference: word 5-shingle resemblance of extracted texts ---- */

/* A CJK character is a word of its own (runs of them have no spaces). */
static bool cjk_cp(uint32_t c)
{
	return (c >= 0x2E80 && c <= 0x9FFF) || (c >= 0xAC00 && c <= 0xD7AF) ||
	       (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFF00 && c <= 0xFFEF) || c >= 0x20000;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct set {
	uint64_t *v;
	size_t n;
};

/* The words of text as the judge splits them: runs between white space, as
 * written (no folding: the judge is independent of the hashes), and each
 * CJK character a word of its own (runs of them have no spaces). Each word
 * as the 64-bit hash of its bytes, in text order; the number in *n. A word
 * that ends a line has *line_end set when line_end is given. */
static uint64_t *ref_words(const char *text, size_t len, size_t *n, uint8_t **line_end)
{
	uint64_t *w = NULL;
	uint8_t *le = NULL;
	size_t nw = 0, cap = 0, ws = 0;
	const unsigned char *t = (const unsigned char *)text;
	for (size_t i = 0; i <= len;) {
		bool end = i == len, blank = !end && (t[i] == ' ' || t[i] == '\n' || t[i] == '\t');
		size_t k = end || t[i] < 0x80 ? 1 : t[i] < 0xE0 ? 2 : t[i] < 0xF0 ? 3 : 4;
		uint32_t cp = 0;
		if (!end && i + k <= len && k == 3)
			cp = (uint32_t)(t[i] & 15) << 12 | (uint32_t)(t[i + 1] & 63) << 6 | (t[i + 2] & 63);
		else if (!end && i + k <= len && k == 4)
			cp = (uint32_t)(t[i] & 7) << 18 | (uint32_t)(t[i + 1] & 63) << 12 |
			     (uint32_t)(t[i + 2] & 63) << 6 | (t[i + 3] & 63);
		if (!end && i + k > len)
			k = len - i;
		bool cjk = cp && cjk_cp(cp);
		for (int part = 0; part < 2; part++) {
			/* a word ends at a blank, at the end, and before a CJK character;
			 * then the CJK character is a word */
			size_t from = part ? i : ws, to = part ? i + k : i;
			if (part ? !cjk : !((end || blank || cjk) && i > ws))
				continue;
			if (nw == cap) {
				cap = cap ? 2 * cap : 256;
				w = xrealloc(w, cap * sizeof *w);
				le = xrealloc(le, cap);
			}
			w[nw] = XXH3_64bits(t + from, to - from);
			le[nw++] = 0;
		}
		if (nw && (end || t[i] == '\n'))
			le[nw - 1] = 1;
		if (end)
			break;
		i += k;
		if (blank || cjk)
			ws = i;
	}
	*n = nw;
	if (line_end)
		*line_end = le;
	else
		free(le);
	return w;
}

/* The sorted set of word 5-shingles of text (words as ref_words). */
static struct set ref_shingles(const char *text, size_t len)
{
	struct set s = {NULL, 0};
	size_t nw;
	uint64_t *w = ref_words(text, len, &nw, NULL);
	if (nw >= REF_WORDS) {
		s.v = xmalloc((nw - REF_WORDS + 1) * sizeof *s.v);
		for (size_t i = 0; i + REF_WORDS <= nw; i++)
			s.v[s.n++] = XXH3_64bits(w + i, REF_WORDS * sizeof *w);
	}
	free(w);
	if (s.n) {
		qsort(s.v, s.n, sizeof *s.v, cmp_u64);
		size_t u = 0;
		for (size_t i = 0; i < s.n; i++)
			if (!u || s.v[u - 1] != s.v[i])
				s.v[u++] = s.v[i];
		s.n = u;
	}
	return s;
}

static double resemblance(const struct set *a, const struct set *b)
{
	size_t i = 0, j = 0, both = 0;
	while (i < a->n && j < b->n) {
		if (a->v[i] == b->v[j]) {
			both++;
			i++;
			j++;
		} else if (a->v[i] < b->v[j]) {
			i++;
		} else {
			j++;
		}
	}
	size_t all = a->n + b->n - both;
	return all ? (double)both / (double)all : 1.0;
}

/* ---- a page analysed: text, simhash, sketch, reference shingles ---- */

/* Content-defined chunks of a page's tokens (chunk_seq). */
struct chunks {
	uint32_t *h; /* 16-bit hash of the chunk's tokens */
	uint32_t *w; /* its length in tokens */
	uint32_t n;
};

struct page {
	uint64_t sh;
	bool none, low;
	uint32_t features;
	uint8_t mh[MINHASH_BYTES];
	struct set ref;
	struct nearset *ns; /* the store's shingle set (nearset.h) */
	uint64_t md5, top[3]; /* near_methods.h: the bytes' MD5, seed 003's top blocks */
	uint8_t ntop;
	uint32_t *tok; /* --confirm align/both: the text's tokens (token_seq) */
	uint32_t ntok;
	struct chunks ch; /* and its chunks (chunk_seq) */
	uint32_t *w;     /* --rules: the judge's words (ref_words, cut to 32 bits) */
	uint32_t nw;
	uint64_t *line;  /* --rules: each line of the text, the hash of its words */
	uint32_t *lw;    /* and its number of words */
	uint32_t nline;
};

static bool g_tokens; /* token sequences wanted (--confirm align or both) */
static bool g_rules;  /* the judge's words and lines wanted (--rules) */
static bool g_counter_stamp; /* --counter stamp (make_counter_stamp) */
static void words_and_lines(const char *text, size_t len, struct page *p);
static unsigned g_chunk = 8; /* --chunk: average chunk length in tokens */
static void token_seq(const char *text, size_t len, struct page *p);
static void analyse_methods(const char *html, size_t len, const struct html_text *t, struct page *p);
static double t_extract, t_simhash, t_sketch; /* CPU seconds in analyse, for near_methods.h */

/* The page's words (32 bits each, for the alignment) and lines. */
static void words_and_lines(const char *text, size_t len, struct page *p)
{
	size_t n;
	uint8_t *le;
	uint64_t *w = ref_words(text, len, &n, &le);
	p->w = xmalloc((n ? n : 1) * sizeof *p->w);
	p->line = xmalloc((n ? n : 1) * sizeof *p->line);
	p->lw = xmalloc((n ? n : 1) * sizeof *p->lw);
	p->nw = (uint32_t)n;
	p->nline = 0;
	size_t start = 0;
	for (size_t i = 0; i < n; i++) {
		p->w[i] = (uint32_t)(w[i] ^ (w[i] >> 32));
		if (!le[i] && i + 1 < n)
			continue;
		p->line[p->nline] = XXH3_64bits(w + start, (i + 1 - start) * sizeof *w);
		p->lw[p->nline++] = (uint32_t)(i + 1 - start);
		start = i + 1;
	}
	free(w);
	free(le);
	/* lines sorted by hash, their word counts beside (insertion sort: a
	 * page has tens to a few thousand lines) */
	for (uint32_t i = 1; i < p->nline; i++) {
		uint64_t h = p->line[i];
		uint32_t c = p->lw[i], j = i;
		for (; j && p->line[j - 1] > h; j--) {
			p->line[j] = p->line[j - 1];
			p->lw[j] = p->lw[j - 1];
		}
		p->line[j] = h;
		p->lw[j] = c;
	}
}

static void free_page_methods(struct page *p)
{
	free(p->ref.v);
	free(p->ns);
	free(p->w);
	free(p->line);
	free(p->lw);
	p->ref.v = NULL;
	p->ns = NULL;
	p->w = NULL;
	p->line = NULL;
	p->lw = NULL;
}

/* Analyse page bytes; the text is kept in *text when asked. */
static void analyse(const char *html, size_t len, struct page *p, bool want_ref, struct html_text *text)
{
	struct html_text t;
	memset(p, 0, sizeof *p);
	double c0 = now(CLOCK_THREAD_CPUTIME_ID);
	if (html_extract(html, len, 0, &t))
		die("html_extract failed");
	struct simhash_result r = {.none = true};
	struct minhash_sketch m;
	memset(&m, 0, sizeof m);
	double c1 = now(CLOCK_THREAD_CPUTIME_ID), c2 = c1;
	t_extract += c1 - c0;
	if (!t.binary) {
		if (simhash_of_text(t.text, t.len, &r))
			die("simhash failed");
		c2 = now(CLOCK_THREAD_CPUTIME_ID);
		if (minhash_of_text(t.text, t.len, &m))
			die("minhash failed");
		t_simhash += c2 - c1;
		t_sketch += now(CLOCK_THREAD_CPUTIME_ID) - c2;
		if (want_ref)
			p->ref = ref_shingles(t.text, t.len);
		if (want_ref && g_rules)
			words_and_lines(t.text, t.len, p);
	}
	analyse_methods(html, len, &t, p);
	p->sh = r.hash;
	p->none = r.none;
	p->low = r.low_confidence;
	p->features = r.features;
	memcpy(p->mh, m.bytes, MINHASH_BYTES);
	if (text)
		*text = t;
	else
		html_text_free(&t);
}

static double estimate(const struct page *a, const struct page *b)
{
	double r;
	if (minhash_resemblance(a->mh, b->mh, &r))
		die("minhash_resemblance failed");
	return r;
}

/* ---- the labelled set ---- */

enum kind { K_BASE, K_MIRROR, K_AD, K_COUNTER, K_EDIT, K_REFORMAT, K_CHARSET, K_NEG, NKINDS };
static const char *const kind_name[NKINDS] = {
	"base", "mirror", "ad", "counter", "edit", "reformat", "charset", "negative",
};
enum lang { L_EN, L_ZH, NLANGS };
static const char *const lang_name[NLANGS] = {"en", "zh"};

struct doc {
	struct page pg;
	int group; /* the base it comes from; -1 for a negative */
	enum kind kind;
	enum lang lang;
	int edits; /* edit variants: sentences edited */
	size_t numbers; /* English counter variants: numbers changed */
};

static struct doc *docs;
static size_t ndocs, cap_docs;

static struct doc *new_doc(void)
{
	if (ndocs == cap_docs) {
		cap_docs = cap_docs ? 2 * cap_docs : 1024;
		docs = xrealloc(docs, cap_docs * sizeof *docs);
	}
	memset(&docs[ndocs], 0, sizeof docs[ndocs]);
	return &docs[ndocs++];
}

static void add_doc(const char *html, size_t len, int group, enum kind kind, enum lang lang, int edits)
{
	struct doc *d = new_doc();
	struct html_text t;
	analyse(html, len, &d->pg, true, g_tokens ? &t : NULL);
	if (g_tokens) {
		if (!t.binary)
			token_seq(t.text, t.len, &d->pg);
		html_text_free(&t);
	}
	d->group = group;
	d->kind = kind;
	d->lang = lang;
	d->edits = edits;
}

/* ---- English variants: edits of real HTML ---- */

static const char *find_ci(const char *s, const char *end, const char *what)
{
	size_t k = strlen(what);
	for (const char *p = s; p + k <= end; p++)
		if (!strncasecmp(p, what, k))
			return p;
	return NULL;
}

static size_t body_open(const char *s, size_t n)
{
	const char *p = find_ci(s, s + n, "<body");
	const char *q = p ? memchr(p, '>', (size_t)(s + n - p)) : NULL;
	return q ? (size_t)(q - s) + 1 : 0;
}

static size_t body_close(const char *s, size_t n)
{
	const char *last = NULL;
	for (const char *q = s; (q = find_ci(q, s + n, "</body")); q++)
		last = q;
	return last ? (size_t)(last - s) : n;
}

/* The end of the element of tag `name` opening at s + at (nested elements of
 * the same name counted), or 0 when it does not close. */
static size_t element_end(const char *s, size_t n, size_t at, const char *name)
{
	char open[32], close[32];
	snprintf(open, sizeof open, "<%s", name);
	snprintf(close, sizeof close, "</%s>", name);
	size_t lo = strlen(open), depth = 0;
	for (size_t i = at; i < n; i++) {
		if (s[i] != '<')
			continue;
		if (!strncasecmp(s + i, open, lo) && (s[i + lo] == ' ' || s[i + lo] == '>')) {
			depth++;
		} else if (!strncasecmp(s + i, close, strlen(close))) {
			if (--depth == 0)
				return i + strlen(close);
		}
	}
	return 0;
}

/* Remove every element that opens with `open` (e.g. "<footer", "<div
 * class=\"related\""), which is an element of tag `name`. */
static void remove_elements(struct buf *b, const char *open, const char *name)
{
	for (;;) {
		const char *p = find_ci(b->p, b->p + b->n, open);
		if (!p)
			return;
		size_t at = (size_t)(p - b->p), end = element_end(b->p, b->n, at, name);
		if (!end)
			return;
		memmove(b->p + at, b->p + end, b->n - end + 1);
		b->n -= end - at;
	}
}

static struct buf splice(const char *s, size_t n, size_t at, const char *ins)
{
	struct buf b = {NULL, 0, 0};
	put_n(&b, s, at);
	put(&b, ins);
	put_n(&b, s + at, n - at);
	return b;
}

static const char *const site_names[] = {
	"DevDocs Mirror", "CodeArchive.net", "The Reference Library", "OpenManuals Hub",
	"Programmer's Shelf", "DocuVault",
};
static const char *const taglines[] = {
	"Fast, searchable copies of the documentation you use every day, updated weekly.",
	"An independent mirror of free software manuals for readers behind slow links.",
	"Offline-friendly documentation for developers, students and system administrators.",
	"Every manual in one place, mirrored nightly from the upstream projects.",
};
static const char *const footers[] = {
	"This copy is provided as a courtesy and may lag behind the original. Report broken pages "
	"to the mirror team. Hosting kindly donated by a university computing centre.",
	"Mirrored content remains the property of its authors and is redistributed under its "
	"original license. Site design and search service by the archive volunteers.",
	"All trademarks belong to their owners. This mirror is not affiliated with the upstream "
	"project. Bandwidth sponsored by a regional internet exchange.",
};

/* Another site's header and footer around the page's body, in one of three
 * styles; the page's own header, footer and navigation bars go. */
static struct buf make_mirror(const char *s, size_t n, uint64_t *rng)
{
	struct buf b = {NULL, 0, 0};
	put_n(&b, s, n);
	remove_elements(&b, "<header", "header");
	remove_elements(&b, "<footer", "footer");
	remove_elements(&b, "<div class=\"related\"", "div");
	remove_elements(&b, "<div class=\"footer\"", "div");
	const char *site = site_names[rng_below(rng, 6)];
	const char *tag = taglines[rng_below(rng, 4)];
	const char *foot = footers[rng_below(rng, 3)];
	struct buf head = {NULL, 0, 0}, tail = {NULL, 0, 0};
	switch (rng_below(rng, 3)) {
	case 0:
		putf(&head, "<header class=\"site\"><div class=\"brand\">%s</div><p>%s</p><nav><a href=\"/\">"
		     "Home</a> <a href=\"/search\">Search</a></nav></header>", site, tag);
		putf(&tail, "<footer><p>%s</p></footer>", foot);
		break;
	case 1:
		putf(&head, "<div id=\"masthead\"><h2>%s</h2><p>%s</p><ul><li><a href=\"/\">Home</a></li>"
		     "<li><a href=\"/all\">All manuals</a></li><li><a href=\"/about\">About</a></li></ul>"
		     "</div>", site, tag);
		putf(&tail, "<div class=\"site-info\"><p>%s</p><p>Mirrored from the upstream documentation."
		     "</p></div>", foot);
		break;
	default:
		putf(&head, "<table width=\"100%%\"><tr><td><b>%s</b></td><td><a href=\"/\">Home</a> | <a "
		     "href=\"/new\">What's new</a></td></tr><tr><td colspan=\"2\">%s</td></tr></table>",
		     site, tag);
		putf(&tail, "<hr><center><small>%s</small></center>", foot);
		break;
	}
	size_t at = body_open(b.p, b.n);
	struct buf c = splice(b.p, b.n, at, head.p);
	size_t end = body_close(c.p, c.n);
	struct buf d = splice(c.p, c.n, end, tail.p);
	free(b.p);
	free(c.p);
	free(head.p);
	free(tail.p);
	return d;
}

static const char *const ads[] = {
	"Sponsored: get the best deals on laptops, phones and tablets today. Free shipping on orders "
	"over fifty dollars, limited time offer.",
	"Advertisement. Learn to code in twelve weeks with our online bootcamp. Job guarantee or your "
	"money back, enrol now and save thirty percent.",
	"Need cloud servers? Deploy in seconds on solid state storage in data centres around the "
	"world. Try it free for sixty days.",
	"Looking for a new job? Thousands of remote developer positions are waiting for you. Upload "
	"your resume and get matched today.",
};

/* An ad block after a paragraph in the middle of the body, marked as an ad
 * (class, aside) or not. */
static struct buf make_ad(const char *s, size_t n, uint64_t *rng)
{
	static const char *const wraps[][2] = {
		{"<div class=\"ad\">", "</div>"},
		{"<aside>", "</aside>"},
		{"<div class=\"sponsored\">", "</div>"},
		{"<div class=\"promo-box\"><p><small>Advertisement</small></p>", "</div>"},
		{"<div>", "</div>"},
	};
	size_t w = rng_below(rng, 5);
	char ins[1024];
	snprintf(ins, sizeof ins, "%s<p>%s</p>%s", wraps[w][0], ads[rng_below(rng, 4)], wraps[w][1]);
	size_t lo = body_open(s, n), hi = body_close(s, n);
	size_t at = lo + (hi - lo) * (20 + rng_below(rng, 60)) / 100;
	const char *p = find_ci(s + at, s + hi, "</p>");
	if (p)
		at = (size_t)(p - s) + 4;
	else if ((p = find_ci(s + at, s + hi, "</div>")))
		at = (size_t)(p - s) + 6;
	else
		at = hi;
	return splice(s, n, at, ins);
}

/* Visible text runs of the body: outside tags, script, style and the head. */
struct span {
	size_t at, len;
};

static size_t text_spans(const char *s, size_t n, struct span *out, size_t max)
{
	size_t k = 0, i = body_open(s, n), end = body_close(s, n);
	while (i < end && k < max) {
		if (s[i] == '<') {
			if (!strncasecmp(s + i, "<script", 7) || !strncasecmp(s + i, "<style", 6)) {
				const char *c = find_ci(s + i, s + end, s[i + 2] == 'c' || s[i + 2] == 'C'
								  ? "</script" : "</style");
				i = c ? (size_t)(c - s) : end;
			}
			const char *g = memchr(s + i, '>', end - i);
			i = g ? (size_t)(g - s) + 1 : end;
			continue;
		}
		size_t j = i;
		while (j < end && s[j] != '<')
			j++;
		out[k++] = (struct span){i, j - i};
		i = j;
	}
	return k;
}

static bool is_letter(char c)
{
	return (unsigned)((c | 32) - 'a') < 26;
}

/* Runs of digits standing alone in visible text: those numbered [from, to)
 * in text order changed (same length). Returns how many there are. */
static size_t change_numbers(struct buf *b, uint64_t *rng, size_t from, size_t to)
{
	struct span *sp = xmalloc(65536 * sizeof *sp);
	size_t ns = text_spans(b->p, b->n, sp, 65536), seen = 0;
	for (size_t k = 0; k < ns; k++) {
		char *t = b->p + sp[k].at;
		for (size_t i = 0; i < sp[k].len; i++) {
			if ((unsigned)(t[i] - '0') >= 10 || (i && (is_letter(t[i - 1]) || t[i - 1] == '_' ||
								   t[i - 1] == '&' || t[i - 1] == '#')))
				continue;
			size_t j = i;
			while (j < sp[k].len && (unsigned)(t[j] - '0') < 10)
				j++;
			if (j < sp[k].len && (is_letter(t[j]) || t[j] == '_' || t[j] == ';')) {
				i = j;
				continue; /* inside a word or an entity */
			}
			for (size_t d = i; d < j && seen >= from && seen < to; d++)
				t[d] = (char)('0' + (t[d] - '0' + 1 + rng_below(rng, 8)) % 10);
			seen++;
			i = j;
		}
	}
	free(sp);
	return seen;
}

/* A dated view counter at the top of the body: the counter of a page that
 * shows none. */
static struct buf insert_stamp(const struct buf *b, uint64_t *rng)
{
	char line[256];
	snprintf(line, sizeof line, "<p class=\"stamp\">Last updated %d-%02d-%02d, %zu views</p>",
		 2020 + (int)rng_below(rng, 5), 1 + (int)rng_below(rng, 12), 1 + (int)rng_below(rng, 28),
		 100 + rng_below(rng, 100000));
	return splice(b->p, b->n, body_open(b->p, b->n), line);
}

/* --counter all (the default): every number of the text changed, or a
 * dated counter line inserted when the text has none. *changed: the
 * numbers changed. */
static struct buf make_counter(const char *s, size_t n, uint64_t *rng, bool *inserted, size_t *changed)
{
	struct buf b = {NULL, 0, 0};
	put_n(&b, s, n);
	*inserted = false;
	if ((*changed = change_numbers(&b, rng, 0, SIZE_MAX)))
		return b;
	/* no number to change: the page as served later, with a dated counter */
	struct buf c = insert_stamp(&b, rng);
	free(b.p);
	*inserted = true;
	return c;
}

/* --counter stamp: seed 001's "count changed" as the Chinese pages have it
 * (their date and view count): COUNTER_RUN numbers in a row changed from a
 * random one on (a date and a count, wherever the text has them), or a
 * dated counter line inserted when the text has no number. */
#define COUNTER_RUN 4
static struct buf make_counter_stamp(const char *s, size_t n, uint64_t *rng, bool *inserted, size_t *changed)
{
	struct buf b = {NULL, 0, 0};
	put_n(&b, s, n);
	*inserted = false;
	size_t all = change_numbers(&b, rng, 0, 0);
	if (all) {
		size_t from = rng_below(rng, all);
		change_numbers(&b, rng, from, from + COUNTER_RUN);
		*changed = all - from < COUNTER_RUN ? all - from : COUNTER_RUN;
		return b;
	}
	struct buf c = insert_stamp(&b, rng);
	free(b.p);
	*inserted = true;
	*changed = 0;
	return c;
}

static const char *const new_words[] = {
	"carefully", "instead", "usually", "another", "several", "quickly", "object", "result",
	"process", "returns", "value", "element", "request", "handle", "simple", "current",
};
static const char *const new_sentences[] = {
	" Note that this behaviour may change in a future release.",
	" See the examples below for the most common way to use it.",
	" This was added to make the interface easier to use from scripts.",
	" In most programs the default is what you want.",
	" Earlier versions documented this differently, which caused some confusion.",
};

/* The sentence of span text t[0..len) around offset at: [*a, *b). */
static void sentence_at(const char *t, size_t len, size_t at, size_t *a, size_t *b)
{
	size_t i = at;
	while (i > 0 && !(t[i - 1] == '.' && (t[i] == ' ' || t[i] == '\n')))
		i--;
	size_t j = at;
	while (j < len && t[j] != '.')
		j++;
	*a = i;
	*b = j < len ? j + 1 : len;
}

/* Spans worth editing: 8+ words of prose that the extracted text has. */
static size_t prose_spans(const char *s, size_t n, const char *text, struct span *out, size_t max)
{
	struct span *all = xmalloc(65536 * sizeof *all);
	size_t na = text_spans(s, n, all, 65536), k = 0;
	for (size_t i = 0; i < na && k < max; i++) {
		const char *t = s + all[i].at;
		size_t len = all[i].len, words = 0;
		if (len < 50 || memchr(t, '&', len))
			continue;
		for (size_t j = 0; j + 1 < len; j++)
			words += t[j] != ' ' && t[j] != '\n' && (t[j + 1] == ' ' || t[j + 1] == '\n');
		if (words < 8)
			continue;
		/* in the extracted text? its first 30 characters, white space collapsed */
		char snip[32];
		size_t m = 0;
		for (size_t j = 0; j < len && m < 30; j++) {
			char c = t[j] == '\n' || t[j] == '\t' || t[j] == '\r' ? ' ' : t[j];
			if (c == ' ' && (!m || snip[m - 1] == ' '))
				continue;
			snip[m++] = c;
		}
		snip[m] = 0;
		if (m < 30 || !strstr(text, snip))
			continue;
		out[k++] = all[i];
	}
	free(all);
	return k;
}

/* 1-5 sentences of prose edited: two words replaced, the sentence deleted,
 * or a sentence inserted after it. *edits gets the number made. */
static struct buf make_edit(const char *s, size_t n, const char *text, uint64_t *rng, int *edits)
{
	struct span sp[512];
	size_t ns = prose_spans(s, n, text, sp, 512);
	size_t want = 1 + rng_below(rng, 5);
	if (want > ns)
		want = ns;
	/* distinct spans, edited from the last to the first so offsets hold */
	bool pick[512] = {false};
	for (size_t k = 0; k < want;) {
		size_t i = rng_below(rng, ns);
		if (!pick[i]) {
			pick[i] = true;
			k++;
		}
	}
	struct buf b = {NULL, 0, 0};
	put_n(&b, s, n);
	for (size_t i = ns; i-- > 0;) {
		if (!pick[i])
			continue;
		char *t = b.p + sp[i].at;
		size_t a, e;
		sentence_at(t, sp[i].len, rng_below(rng, sp[i].len), &a, &e);
		struct buf c = {NULL, 0, 0};
		put_n(&c, b.p, sp[i].at + a);
		switch (rng_below(rng, 3)) {
		case 0: { /* two words replaced */
			size_t w = 0, target1 = 1 + rng_below(rng, 4), target2 = target1 + 1 + rng_below(rng, 3);
			for (size_t j = a; j < e; j++) {
				bool start = t[j] != ' ' && t[j] != '\n' && (j == a || t[j - 1] == ' ' || t[j - 1] == '\n');
				if (start && (++w == target1 || w == target2)) {
					size_t z = j;
					while (z < e && t[z] != ' ' && t[z] != '\n' && t[z] != '.' && t[z] != ',')
						z++;
					put(&c, new_words[rng_below(rng, 16)]);
					j = z - 1;
					continue;
				}
				put_n(&c, t + j, 1);
			}
			break;
		}
		case 1: /* deleted */
			break;
		default: /* one inserted after it */
			put_n(&c, t + a, e - a);
			put(&c, new_sentences[rng_below(rng, 5)]);
			break;
		}
		put_n(&c, t + e, b.n - (sp[i].at + e));
		free(b.p);
		b = c;
	}
	*edits = (int)want;
	return b;
}

static bool block_tag_at(const char *p)
{
	static const char *const t[] = {
		"div", "p>", "p ", "li", "ul", "ol", "tr", "td", "th", "table", "h1", "h2", "h3",
		"h4", "section", "dl", "dt", "dd", "br", "hr", "body", "head", "meta", "link",
		"title", "nav", "header", "footer", "main",
	};
	if (*p == '/')
		p++;
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strncasecmp(p, t[i], strlen(t[i])))
			return true;
	return false;
}

/* White space and markup rewritten, the text the same: tag names in
 * capitals, block tags on lines of their own, runs of white space outside
 * <pre> as a line break and an indent, attribute quotes single. */
static struct buf make_reformat(const char *s, size_t n, uint64_t *rng)
{
	bool upper = rng_below(rng, 2), quotes = rng_below(rng, 2);
	struct buf b = {NULL, 0, 0};
	bool pre = false, in_tag = false, raw = false, name = false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '<' && !raw) {
			if (!strncasecmp(s + i, "<pre", 4))
				pre = true;
			if (!strncasecmp(s + i, "</pre", 5))
				pre = false;
			if (!strncasecmp(s + i, "<script", 7) || !strncasecmp(s + i, "<style", 6))
				raw = true;
			if (i && !pre && block_tag_at(s + i + 1))
				put(&b, "\n  "); /* a block tag: a line break there changes no text */
			in_tag = name = true;
			put_n(&b, &c, 1);
			continue;
		}
		if (raw && c == '<' && (!strncasecmp(s + i, "</script", 8) || !strncasecmp(s + i, "</style", 7))) {
			raw = false;
			in_tag = name = true;
			put_n(&b, &c, 1);
			continue;
		}
		if (in_tag) {
			if (c == '>') {
				in_tag = name = false;
			} else if (c == ' ' || c == '\n' || c == '\t') {
				name = false;
			} else if (name && upper && (unsigned)(c - 'a') < 26) {
				c = (char)(c - 32);
			} else if (quotes && c == '"') {
				/* a value without a single quote: quote it with single quotes */
				const char *q = memchr(s + i + 1, '"', n - i - 1);
				if (q && !memchr(s + i + 1, '\'', (size_t)(q - s) - i - 1) &&
				    !memchr(s + i + 1, '>', (size_t)(q - s) - i - 1)) {
					put(&b, "'");
					put_n(&b, s + i + 1, (size_t)(q - s) - i - 1);
					put(&b, "'");
					i = (size_t)(q - s);
					continue;
				}
			}
			put_n(&b, &c, 1);
			continue;
		}
		if (!pre && !raw && (c == ' ' || c == '\n' || c == '\t')) {
			while (i + 1 < n && (s[i + 1] == ' ' || s[i + 1] == '\n' || s[i + 1] == '\t'))
				i++;
			put(&b, "\n    ");
			continue;
		}
		put_n(&b, &c, 1);
	}
	return b;
}

/* ---- originals ---- */

struct original {
	char *html;
	size_t len;
	char *text;     /* extracted (UTF-8) */
	struct page pg; /* with reference shingles */
};

/* Accept o unless it is related to an original already taken. The sketch
 * (whose estimate is within a few hundredths of the reference) picks the
 * pairs to check, not the simhash: the labelled set must not depend on the
 * simhash features it measures. */
static bool unrelated(const struct original *o, struct original *taken, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (estimate(&o->pg, &taken[i].pg) >= RELATED_ESTIMATE &&
		    resemblance(&o->pg.ref, &taken[i].pg.ref) >= RELATED_RESEMBLANCE)
			return false;
	return true;
}

static char **paths;
static size_t npaths, cap_paths;

static int collect(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	size_t n = strlen(path);
	if (type != FTW_F || !S_ISREG(st->st_mode) || st->st_size == 0 || n < 5 ||
	    strcasecmp(path + n - 5, ".html"))
		return 0;
	if (npaths == cap_paths) {
		cap_paths = cap_paths ? 2 * cap_paths : 1024;
		paths = xrealloc(paths, cap_paths * sizeof *paths);
	}
	paths[npaths] = strdup(path);
	if (!paths[npaths])
		die("out of memory");
	npaths++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list_pages(const char *dir)
{
	for (size_t i = 0; i < npaths; i++)
		free(paths[i]);
	npaths = 0;
	if (nftw(dir, collect, 32, FTW_PHYS))
		fprintf(stderr, "bench_near: walking %s: %s\n", dir, strerror(errno));
	qsort(paths, npaths, sizeof *paths, cmp_str);
}

static uint64_t *seen_bytes;
static size_t nseen, cap_seen;

/* True the first time these bytes are seen. */
static bool first_time(const char *s, size_t n)
{
	uint64_t h = XXH3_64bits(s, n);
	for (size_t i = 0; i < nseen; i++)
		if (seen_bytes[i] == h)
			return false;
	if (nseen == cap_seen) {
		cap_seen = cap_seen ? 2 * cap_seen : 1024;
		seen_bytes = xrealloc(seen_bytes, cap_seen * sizeof *seen_bytes);
	}
	seen_bytes[nseen++] = h;
	return true;
}

static void free_original(struct original *o)
{
	free(o->html);
	free(o->text);
	free_page_methods(&o->pg);
}

/* English: bases then negatives from the corpus, in a fixed shuffled order. */
static size_t english_originals(size_t want_bases, size_t want_neg, struct original **out)
{
	size_t want = want_bases + want_neg, n = 0;
	struct original *o = xmalloc(want * sizeof *o);
	size_t *order = xmalloc((npaths ? npaths : 1) * sizeof *order);
	uint64_t seed = 1;
	for (size_t i = 0; i < npaths; i++)
		order[i] = i;
	for (size_t i = npaths; i > 1; i--) {
		size_t j = rng_below(&seed, i), t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; i < npaths && n < want; i++) {
		struct original c;
		memset(&c, 0, sizeof c);
		c.html = slurp(paths[order[i]], &c.len);
		if (!c.html || !first_time(c.html, c.len)) {
			free(c.html);
			continue;
		}
		struct html_text t;
		analyse(c.html, c.len, &c.pg, true, &t);
		c.text = t.text;
		bool ok = !c.pg.none && c.pg.ref.n >= ORIGINAL_SHINGLES && unrelated(&c, o, n);
		if (ok && n < want_bases) { /* a base must have prose to edit */
			struct span sp[1];
			ok = prose_spans(c.html, c.len, c.text, sp, 1) == 1;
		}
		if (!ok) {
			free_original(&c);
			continue;
		}
		o[n++] = c;
	}
	free(order);
	*out = o;
	return n;
}

/* ---- Chinese pages: catalogue text in a news site's template ---- */

static uint32_t mo_u32(const unsigned char *p, bool le)
{
	return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
		  : (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

/* UTF-8 to GBK; false when some character has no GBK form. */
static bool to_gbk(const char *s, size_t n, struct buf *out)
{
	iconv_t cd = iconv_open("GBK", "UTF-8");
	if (cd == (iconv_t)-1)
		die("iconv cannot convert to GBK");
	size_t cap = 2 * n + 16;
	char *o = xmalloc(cap), *op = o;
	char *ip = (char *)s;
	size_t il = n, ol = cap;
	bool ok = iconv(cd, &ip, &il, &op, &ol) != (size_t)-1;
	iconv_close(cd);
	if (ok && out) {
		out->n = 0;
		put_n(out, o, (size_t)(op - o));
	}
	free(o);
	return ok;
}

static size_t count_cjk(const char *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i + 2 < n; i++)
		k += (unsigned char)s[i] >= 0xE4 && (unsigned char)s[i] <= 0xE9;
	return k;
}

/* The translations of a .mo file that GBK can encode, one per line, without
 * markup characters. */
static void mo_lines(const char *path, struct buf *text)
{
	size_t n;
	unsigned char *d = (unsigned char *)slurp(path, &n);
	if (!d || n < 28) {
		free(d);
		return;
	}
	bool le = mo_u32(d, true) == 0x950412de;
	if (!le && mo_u32(d, false) != 0x950412de) {
		free(d);
		return;
	}
	uint32_t count = mo_u32(d + 8, le), table = mo_u32(d + 16, le);
	struct buf line = {NULL, 0, 0};
	for (uint32_t i = 0; i < count && (size_t)table + 8 * (i + 1) <= n; i++) {
		uint32_t len = mo_u32(d + table + 8 * i, le), off = mo_u32(d + table + 8 * i + 4, le);
		if ((size_t)off + len > n || !len || (len >= 10 && !memcmp(d + off, "Project-Id", 10)))
			continue;
		line.n = 0;
		for (uint32_t k = 0; k < len; k++) {
			char c = (char)d[off + k];
			if (c == '<' || c == '>' || c == '&' || c == 0 || c == '\n' || c == '\t' || c == '\r')
				c = ' ';
			put_n(&line, &c, 1);
		}
		if (count_cjk(line.p, line.n) < 4 || !to_gbk(line.p, line.n, NULL))
			continue;
		put_n(text, line.p, line.n);
		put(text, "\n");
	}
	free(line.p);
	free(d);
}

struct zh_page {
	char **para; /* UTF-8 paragraphs */
	size_t npara;
	int site;
	bool gbk;
	int year, month, day, views;
};

static const char *const zh_sites[][3] = {
	{"开源软件资讯网", "每日更新自由软件与开源项目的最新动态", "版权所有 开源软件资讯网 未经许可不得转载 京ICP备00000001号"},
	{"程序员之家", "分享编程经验与技术文章的社区", "本站文章均来自网友投稿 如有侵权请联系管理员删除"},
	{"软件下载中心", "绿色安全的软件下载与使用教程", "免责声明：本站资源仅供学习交流 下载后请于二十四小时内删除"},
	{"技术文档镜像站", "国内高速镜像 方便查阅各类手册", "本站为非官方镜像 内容以原站为准 感谢高校网络中心提供带宽"},
};
static const char *const zh_ads[] = {
	"限时特惠：云服务器新用户首年只要九十九元，立即注册领取优惠券，名额有限先到先得。",
	"广告：零基础学编程，十二周就业培训，不就业全额退款，现在报名立减三千元。",
	"热门推荐：全新笔记本电脑火热促销中，下单即送无线鼠标和一年延保服务。",
};
static const char *const zh_sentences[] = {
	"请注意，该功能在以后的版本中可能会有所变化。",
	"更多用法请参考下面的示例。",
	"这一改动是为了方便在脚本中调用。",
	"在大多数情况下使用默认设置即可。",
};
static const char *const zh_chars[] = {"的", "是", "在", "了", "文", "件", "数", "据", "用", "户"};

/* Render a Chinese page; style 0 the site's, 1 reformatted. `site` picks the
 * header and footer, ad (or NULL) goes after paragraph ad_at. */
static struct buf zh_render(const struct zh_page *z, int site, int style, const char *ad, size_t ad_at,
			    bool gbk)
{
	struct buf b = {NULL, 0, 0};
	const char *nl = style ? "\n\n    " : "\n";
	const char *P = style ? "<P style='margin:0'>" : "<p>";
	const char *EP = style ? "</P>" : "</p>";
	char title[64];
	size_t tl = 0;
	for (const char *p = z->para[0]; *p && tl < 36; p++)
		title[tl++] = *p;
	while (tl && ((unsigned char)z->para[0][tl] & 0xC0) == 0x80)
		tl--; /* whole characters only */
	title[tl] = 0;
	putf(&b, "<!DOCTYPE html>%s<html><head><meta charset=\"%s\">%s<title>%s - %s</title></head>%s<body>",
	     nl, gbk ? "gbk" : "utf-8", nl, title, zh_sites[site][0], nl);
	putf(&b, "%s<div class=\"header\"><h2>%s</h2>%s<p>%s</p><ul><li><a href=\"/\">首页</a></li>"
	     "<li><a href=\"/news\">新闻</a></li><li><a href=\"/down\">下载</a></li></ul></div>",
	     nl, zh_sites[site][0], nl, zh_sites[site][1]);
	putf(&b, "%s<div class=\"content\">%s<h1>%s</h1>%s<p class=\"meta\">发布时间：%d年%d月%d日　阅读：%d次</p>",
	     nl, nl, title, nl, z->year, z->month, z->day, z->views);
	for (size_t i = 0; i < z->npara; i++) {
		putf(&b, "%s%s%s%s", nl, P, z->para[i], EP);
		if (ad && i == ad_at)
			putf(&b, "%s<div class=\"gg\"><p>%s</p></div>", nl, ad);
	}
	putf(&b, "%s</div>%s<div class=\"bottom\"><p>%s</p></div>%s</body></html>\n", nl, nl,
	     zh_sites[site][2], nl);
	if (gbk) {
		struct buf g = {NULL, 0, 0};
		if (!to_gbk(b.p, b.n, &g))
			die("a Chinese page has no GBK form");
		free(b.p);
		return g;
	}
	return b;
}

/* A copy of the paragraphs with 1-5 sentences edited. */
static char **zh_edit(const struct zh_page *z, uint64_t *rng, int *edits)
{
	char **p = xmalloc(z->npara * sizeof *p);
	for (size_t i = 0; i < z->npara; i++)
		p[i] = strdup(z->para[i]);
	int want = 1 + (int)rng_below(rng, 5);
	for (int e = 0; e < want; e++) {
		size_t i = rng_below(rng, z->npara);
		struct buf c = {NULL, 0, 0};
		size_t len = strlen(p[i]);
		switch (rng_below(rng, 3)) {
		case 0: { /* two characters replaced */
			put(&c, p[i]);
			for (int r = 0; r < 2; r++) {
				size_t at = rng_below(rng, c.n);
				while (at < c.n && !((unsigned char)c.p[at] >= 0xE4 && (unsigned char)c.p[at] <= 0xE9))
					at++;
				if (at + 3 <= c.n)
					memcpy(c.p + at, zh_chars[rng_below(rng, 10)], 3);
			}
			break;
		}
		case 1: /* the paragraph's first sentence (or all of it) deleted */
		{
			const char *end = strstr(p[i], "。");
			if (end && (size_t)(end - p[i]) + 3 < len)
				put(&c, end + 3);
			else
				put(&c, zh_sentences[rng_below(rng, 4)]);
			break;
		}
		default: /* a sentence inserted */
			put(&c, p[i]);
			put(&c, zh_sentences[rng_below(rng, 4)]);
			break;
		}
		free(p[i]);
		p[i] = c.p;
	}
	*edits = want;
	return p;
}

static void zh_variants(const struct zh_page *z, int group, uint64_t *rng)
{
	struct buf v;
	/* mirror: another site's header and footer */
	int other = (z->site + 1 + (int)rng_below(rng, 3)) % 4;
	v = zh_render(z, other, 0, NULL, 0, z->gbk);
	add_doc(v.p, v.n, group, K_MIRROR, L_ZH, 0);
	free(v.p);
	v = zh_render(z, z->site, 0, zh_ads[rng_below(rng, 3)], rng_below(rng, z->npara), z->gbk);
	add_doc(v.p, v.n, group, K_AD, L_ZH, 0);
	free(v.p);
	struct zh_page c = *z;
	c.year = z->year + 1;
	c.month = 1 + (z->month + 4) % 12;
	c.views = z->views * 3 + 17;
	v = zh_render(&c, z->site, 0, NULL, 0, z->gbk);
	add_doc(v.p, v.n, group, K_COUNTER, L_ZH, 0);
	free(v.p);
	int edits;
	c = *z;
	c.para = zh_edit(z, rng, &edits);
	v = zh_render(&c, z->site, 0, NULL, 0, z->gbk);
	add_doc(v.p, v.n, group, K_EDIT, L_ZH, edits);
	free(v.p);
	for (size_t i = 0; i < c.npara; i++)
		free(c.para[i]);
	free(c.para);
	v = zh_render(z, z->site, 1, NULL, 0, z->gbk);
	add_doc(v.p, v.n, group, K_REFORMAT, L_ZH, 0);
	free(v.p);
	v = zh_render(z, z->site, 0, NULL, 0, !z->gbk);
	add_doc(v.p, v.n, group, K_CHARSET, L_ZH, 0);
	free(v.p);
}

/* Chinese originals: chunks of zh_CN and zh_TW catalogue text. */
static size_t chinese_pages(size_t want, struct zh_page **out, struct original **orig)
{
	static const char *const langs[] = {"zh_CN", "zh_TW"};
	struct buf all = {NULL, 0, 0};
	for (size_t l = 0; l < 2; l++) {
		char path[4096];
		snprintf(path, sizeof path, "/usr/share/locale/%s/LC_MESSAGES", langs[l]);
		struct dirent **ents;
		int ne = scandir(path, &ents, NULL, alphasort);
		for (int e = 0; e < ne; e++) {
			size_t nl = strlen(ents[e]->d_name);
			if (nl > 3 && !strcmp(ents[e]->d_name + nl - 3, ".mo")) {
				snprintf(path, sizeof path, "/usr/share/locale/%s/LC_MESSAGES/%s", langs[l],
					 ents[e]->d_name);
				mo_lines(path, &all);
			}
			free(ents[e]);
		}
		if (ne >= 0)
			free(ents);
	}
	struct zh_page *z = xmalloc((want ? want : 1) * sizeof *z);
	struct original *o = xmalloc((want ? want : 1) * sizeof *o);
	size_t n = 0;
	uint64_t seed = 7;
	for (size_t i = 0; i < all.n && n < want;) {
		size_t m = 1200 + rng_below(&seed, 5400); /* 600-3000 characters */
		if (m > all.n - i)
			m = all.n - i;
		while (i + m < all.n && all.p[i + m - 1] != '\n')
			m++; /* whole lines */
		const char *s = all.p + i;
		i += m;
		if (count_cjk(s, m) < 300)
			continue;
		struct zh_page p;
		memset(&p, 0, sizeof p);
		for (size_t a = 0; a < m;) {
			/* paragraphs of 2-4 catalogue lines */
			size_t b = a, lines = 2 + rng_below(&seed, 3);
			while (b < m && lines) {
				if (s[b++] == '\n')
					lines--;
			}
			p.para = xrealloc(p.para, (p.npara + 1) * sizeof *p.para);
			char *q = xmalloc(b - a + 1);
			size_t k = 0;
			for (size_t j = a; j < b; j++)
				if (s[j] != '\n' || (j + 1 < b))
					q[k++] = s[j] == '\n' ? ' ' : s[j];
			q[k] = 0;
			p.para[p.npara++] = q;
			a = b;
		}
		p.site = (int)(n % 4);
		p.gbk = n % 2 == 0;
		p.year = 2015 + (int)rng_below(&seed, 9);
		p.month = 1 + (int)rng_below(&seed, 12);
		p.day = 1 + (int)rng_below(&seed, 28);
		p.views = 10 + (int)rng_below(&seed, 50000);
		struct original c;
		memset(&c, 0, sizeof c);
		struct buf h = zh_render(&p, p.site, 0, NULL, 0, p.gbk);
		c.html = h.p;
		c.len = h.n;
		struct html_text t;
		analyse(c.html, c.len, &c.pg, true, &t);
		c.text = t.text;
		if (c.pg.none || c.pg.ref.n < ORIGINAL_SHINGLES || !unrelated(&c, o, n)) {
			for (size_t j = 0; j < p.npara; j++)
				free(p.para[j]);
			free(p.para);
			free_original(&c);
			continue;
		}
		z[n] = p;
		o[n++] = c;
	}
	free(all.p);
	*out = z;
	*orig = o;
	return n;
}

/* ---- scoring ---- */

struct pair {
	uint32_t a, b;
	uint8_t dist;
	bool judged; /* labelled set: reference resemblance >= TRUE_RESEMBLANCE */
	float est;
};

static struct pair *pairs;
static size_t npairs, cap_pairs;

static bool judged_true(size_t a, size_t b)
{
	return resemblance(&docs[a].pg.ref, &docs[b].pg.ref) >= TRUE_RESEMBLANCE;
}

static void find_pairs(void)
{
	for (size_t i = 0; i < ndocs; i++) {
		if (docs[i].pg.none)
			continue;
		for (size_t j = i + 1; j < ndocs; j++) {
			unsigned d = simhash_distance(docs[i].pg.sh, docs[j].pg.sh);
			if (d > KFAR || docs[j].pg.none)
				continue;
			if (npairs == cap_pairs) {
				cap_pairs = cap_pairs ? 2 * cap_pairs : 4096;
				pairs = xrealloc(pairs, cap_pairs * sizeof *pairs);
			}
			pairs[npairs++] = (struct pair){(uint32_t)i, (uint32_t)j, (uint8_t)d, judged_true(i, j),
							(float)estimate(&docs[i].pg, &docs[j].pg)};
		}
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* How far each kind of variant is from its base: simhash distance, the
 * reference resemblance and the sketch's estimate, as percentiles. */
static void variant_profile(void)
{
	double *dist = xmalloc(ndocs * sizeof *dist), *ref = xmalloc(ndocs * sizeof *ref);
	double *est = xmalloc(ndocs * sizeof *est);
	for (int lang = 0; lang < NLANGS; lang++)
		for (int kind = K_MIRROR; kind <= K_CHARSET; kind++) {
			size_t n = 0, below = 0;
			const struct doc *base = NULL;
			for (size_t i = 0; i < ndocs; i++) {
				const struct doc *d = &docs[i];
				if (d->kind == K_BASE)
					base = d;
				if ((int)d->lang != lang || (int)d->kind != kind || !base)
					continue;
				dist[n] = simhash_distance(d->pg.sh, base->pg.sh);
				ref[n] = resemblance(&d->pg.ref, &base->pg.ref);
				est[n] = estimate(&d->pg, &base->pg);
				below += ref[n] < TRUE_RESEMBLANCE;
				n++;
			}
			if (!n)
				continue;
			qsort(dist, n, sizeof *dist, cmp_double);
			qsort(ref, n, sizeof *ref, cmp_double);
			qsort(est, n, sizeof *est, cmp_double);
			printf("profile_%s_%s: distance p50 %.0f p90 %.0f p95 %.0f; resemblance p5 %.2f p10 %.2f "
			       "p50 %.2f (under %.1f: %.1f%%); estimate p5 %.2f p10 %.2f p50 %.2f\n",
			       lang_name[lang], kind_name[kind], dist[n / 2], dist[n * 9 / 10], dist[n * 95 / 100],
			       ref[n / 20], ref[n / 10], ref[n / 2], TRUE_RESEMBLANCE, 100.0 * below / n, est[n / 20],
			       est[n / 10], est[n / 2]);
		}
	free(dist);
	free(ref);
	free(est);
}

/* Rows: one per (language, kind) and "all". A row's collection: the
 * originals of its language and the variants of its kind. */
#define NROWS (NLANGS * NKINDS + 1)
#define ROW_ALL (NLANGS * NKINDS)

static bool in_row(const struct doc *d, int row)
{
	if (row == ROW_ALL)
		return true;
	int lang = row / NKINDS, kind = row % NKINDS;
	return (int)d->lang == lang && (d->kind == K_BASE || d->kind == K_NEG || (int)d->kind == kind);
}

static size_t positives[NROWS];
static size_t positives_judged[NROWS]; /* of those, resemblance >= TRUE_RESEMBLANCE */


static void count_positives(void)
{
	/* a group: its base and its variants, contiguous in docs[] */
	for (size_t i = 0; i < ndocs;) {
		size_t j = i + 1;
		while (j < ndocs && docs[i].group >= 0 && docs[j].group == docs[i].group)
			j++;
		if (docs[i].group >= 0) {
			size_t k = j - i;
			positives[ROW_ALL] += k * (k - 1) / 2;
			for (size_t v = i + 1; v < j; v++) {
				size_t row = docs[v].lang * NKINDS + docs[v].kind;
				positives[row]++;
				positives_judged[row] += judged_true(i, v);
				for (size_t w = i; w < v; w++)
					positives_judged[ROW_ALL] += judged_true(w, v);
			}
		}
		i = j;
	}
}

struct score {
	size_t answered, right, right_judged;
};

/* Answered and right pairs per row at distance <= k, with estimated
 * resemblance >= t (t < 0: simhash alone). edit_k > 0: only pairs of a base
 * and its edit variant of that many edits count as positives. */
static void score_pair(size_t p, struct score *s)
{
	const struct doc *a = &docs[pairs[p].a], *b = &docs[pairs[p].b];
	bool right = a->group >= 0 && a->group == b->group;
	for (int r = 0; r < NROWS; r++) {
		if (!in_row(a, r) || !in_row(b, r))
			continue;
		s[r].answered++;
		s[r].right += right;
		s[r].right_judged += right && pairs[p].judged;
	}
}

static void score(unsigned k, double t, struct score *s)
{
	memset(s, 0, NROWS * sizeof *s);
	for (size_t p = 0; p < npairs; p++)
		if (pairs[p].dist <= k && (t < 0 || pairs[p].est >= t))
			score_pair(p, s);
}

static double ratio(size_t a, size_t b)
{
	return b ? (double)a / (double)b : 1.0;
}

/* The judge's ceiling of each kind (its variants of resemblance >= 0.8 to
 * their base) by the base's length in distinct word 5-shingles: where the
 * positives under the judge's line come from. The store lists every
 * candidate the judge accepts, so this is also its recall there. */
static void length_profile(void)
{
	static const size_t edge[] = {0, 100, 200, 400, 800, SIZE_MAX};
	enum { NB = sizeof edge / sizeof edge[0] - 1 };
	for (int lang = 0; lang < NLANGS; lang++)
		for (int kind = K_MIRROR; kind <= K_CHARSET; kind++) {
			size_t n[NB] = {0}, ok[NB] = {0}, all = 0;
			const struct doc *base = NULL;
			for (size_t i = 0; i < ndocs; i++) {
				const struct doc *d = &docs[i];
				if (d->kind == K_BASE)
					base = d;
				if ((int)d->lang != lang || (int)d->kind != kind || !base)
					continue;
				size_t b = 0;
				while (b + 1 < NB && base->pg.ref.n >= edge[b + 1])
					b++;
				n[b]++;
				ok[b] += resemblance(&d->pg.ref, &base->pg.ref) >= TRUE_RESEMBLANCE;
				all++;
			}
			if (!all)
				continue;
			printf("ceiling_by_length_%s_%s:", lang_name[lang], kind_name[kind]);
			for (int b = 0; b < NB; b++)
				if (n[b] && edge[b + 1] == SIZE_MAX)
					printf(" %zu+ shingles %.3f (%zu)", edge[b], ratio(ok[b], n[b]), n[b]);
				else if (n[b])
					printf(" %zu-%zu %.3f (%zu)", edge[b], edge[b + 1] - 1, ratio(ok[b], n[b]), n[b]);
			printf("\n");
		}
}

/* Recall of base-edit pairs by number of edits. */
static void edit_recall(unsigned k, double t, const char *label)
{
	size_t tried[6] = {0}, kept[6] = {0};
	for (size_t i = 0; i < ndocs; i++)
		if (docs[i].kind == K_EDIT)
			tried[docs[i].edits]++;
	for (size_t p = 0; p < npairs; p++) {
		const struct doc *a = &docs[pairs[p].a], *b = &docs[pairs[p].b];
		if (pairs[p].dist > k || (t >= 0 && pairs[p].est < t) || a->group < 0 ||
		    a->group != b->group || a->kind != K_BASE || b->kind != K_EDIT)
			continue;
		kept[b->edits]++;
	}
	for (int e = 1; e <= 5; e++)
		printf("%s_recall_edit%d: %.3f (%zu pairs)\n", label, e, ratio(kept[e], tried[e]), tried[e]);
}

/* Why the positives not answered at K (with the sketch at t) are missed:
 * their texts share under TRUE_RESEMBLANCE of their reference shingles
 * (the judge would not call them near-duplicates either), else their
 * hashes are farther apart than K, else the sketch turned them down; each
 * split by whether the pair has an edit variant in it. */
static void missed_breakdown(unsigned k, double t)
{
	size_t n[3][2] = {{0}}, total = 0;
	for (size_t i = 0; i < ndocs;) {
		size_t j = i + 1;
		while (j < ndocs && docs[i].group >= 0 && docs[j].group == docs[i].group)
			j++;
		for (size_t v = i + 1; docs[i].group >= 0 && v < j; v++)
			for (size_t w = i; w < v; w++) {
				const struct page *a = &docs[w].pg, *b = &docs[v].pg;
				unsigned d = a->none || b->none ? 64 : simhash_distance(a->sh, b->sh);
				bool answered = d <= k && estimate(a, b) >= t;
				if (answered)
					continue;
				int why = !judged_true(w, v) ? 0 : d > k ? 1 : 2;
				n[why][docs[w].kind == K_EDIT || docs[v].kind == K_EDIT]++;
				total++;
			}
		i = j;
	}
	printf("missed_k%u: %zu positives; %zu share under %.1f of their shingles (%zu with an edit variant), "
	       "%zu more than %u bits apart (%zu with an edit variant), %zu turned down by the sketch (%zu with an "
	       "edit variant)\n",
	       k, total, n[0][0] + n[0][1], TRUE_RESEMBLANCE, n[0][1], n[1][0] + n[1][1], k, n[1][1],
	       n[2][0] + n[2][1], n[2][1]);
}

/* One line per row of the table: "LABEL_kK_ROW: precision ... recall ...". */
static void print_score_rows(const char *label, unsigned k, const struct score *s)
{
	for (int r = 0; r < NROWS; r++) {
		if (!positives[r])
			continue;
		char name[64];
		if (r == ROW_ALL)
			snprintf(name, sizeof name, "all");
		else
			snprintf(name, sizeof name, "%s_%s", lang_name[r / NKINDS], kind_name[r % NKINDS]);
		printf("%s_k%u_%s: precision %.4f recall %.4f (answered %zu, right %zu, positives %zu; "
		       "recall of the %zu positives of resemblance >= %.1f: %.4f)\n",
		       label, k, name, ratio(s[r].right, s[r].answered), ratio(s[r].right, positives[r]),
		       s[r].answered, s[r].right, positives[r], positives_judged[r], TRUE_RESEMBLANCE,
		       ratio(s[r].right_judged, positives_judged[r]));
	}
}

static void print_rows(unsigned k, double t, const char *label)
{
	struct score s[NROWS];
	score(k, t, s);
	print_score_rows(label, k, s);
}

/* ---- the openjdk measurement ---- */

struct jdk {
	struct page *pg;
	size_t n;
	struct pair *pairs; /* est: the estimate; dist; b-a in the page table */
	float *truth;       /* reference resemblance of each pair */
	size_t npairs;
};

static void jdk_load(const char *dir, struct jdk *j)
{
	char sub[4096];
	snprintf(sub, sizeof sub, "%s/openjdk-17-doc", dir);
	list_pages(sub);
	nseen = 0;
	j->pg = xmalloc((npaths ? npaths : 1) * sizeof *j->pg);
	j->n = 0;
	for (size_t i = 0; i < npaths; i++) {
		size_t len;
		char *h = slurp(paths[i], &len);
		if (!h || !first_time(h, len)) {
			free(h);
			continue;
		}
		struct html_text t;
		analyse(h, len, &j->pg[j->n], true, g_tokens ? &t : NULL);
		free(h);
		if (g_tokens) {
			if (!t.binary)
				token_seq(t.text, t.len, &j->pg[j->n]);
			html_text_free(&t);
		}
		if (!j->pg[j->n].none)
			j->n++;
		else
			free_page_methods(&j->pg[j->n]);
	}
	size_t cap = 0;
	j->pairs = NULL;
	j->truth = NULL;
	j->npairs = 0;
	for (size_t a = 0; a < j->n; a++)
		for (size_t b = a + 1; b < j->n; b++) {
			unsigned d = simhash_distance(j->pg[a].sh, j->pg[b].sh);
			if (d > KFAR)
				continue;
			if (j->npairs == cap) {
				cap = cap ? 2 * cap : 4096;
				j->pairs = xrealloc(j->pairs, cap * sizeof *j->pairs);
				j->truth = xrealloc(j->truth, cap * sizeof *j->truth);
			}
			j->pairs[j->npairs] = (struct pair){(uint32_t)a, (uint32_t)b, (uint8_t)d, false,
							    (float)estimate(&j->pg[a], &j->pg[b])};
			j->truth[j->npairs++] = (float)resemblance(&j->pg[a].ref, &j->pg[b].ref);
		}
}

/* Precision at distance <= k, estimate >= t (t < 0: simhash alone); only
 * pairs of two confident pages when confident. */
static void jdk_score(const struct jdk *j, unsigned k, double t, bool confident, size_t *answered,
		      size_t *right, size_t *true_all)
{
	*answered = *right = *true_all = 0;
	for (size_t p = 0; p < j->npairs; p++) {
		const struct pair *q = &j->pairs[p];
		if (q->dist > k || (confident && (j->pg[q->a].low || j->pg[q->b].low)))
			continue;
		bool truth = j->truth[p] >= TRUE_RESEMBLANCE;
		*true_all += truth;
		if (t >= 0 && q->est < t)
			continue;
		(*answered)++;
		*right += truth;
	}
}

static void jdk_print(const struct jdk *j, unsigned k, double t, const char *label)
{
	size_t ans, right, truth;
	jdk_score(j, k, t, false, &ans, &right, &truth);
	printf("%s_k%u_precision: %.4f (answered %zu, true %zu; true pairs within k %zu, kept %.4f)\n",
	       label, k, ratio(right, ans), ans, right, truth, ratio(right, truth));
	jdk_score(j, k, t, true, &ans, &right, &truth);
	printf("%s_k%u_precision_confident: %.4f (answered %zu, true %zu)\n", label, k, ratio(right, ans),
	       ans, right);
}

#include "near_methods.h"

/* ---- the cost of the features in the index ---- */

/* The simhashes of the distinct corpus pages under dir that have one;
 * their number in *n. */
static uint64_t *corpus_simhashes(const char *dir, size_t *n)
{
	list_pages(dir);
	nseen = 0;
	uint64_t *h = xmalloc((npaths ? npaths : 1) * sizeof *h);
	*n = 0;
	for (size_t i = 0; i < npaths; i++) {
		size_t len;
		char *b = slurp(paths[i], &len);
		struct simhash_result r;
		if (b && first_time(b, len) && !simhash_of_page(b, len, &r) && !r.none)
			h[(*n)++] = r.hash;
		free(b);
	}
	return h;
}

/* Over every distinct page of the corpus: the pages within distance K of
 * each (the candidates a query confirms with the sketch) and the rows an
 * index query at K reads (pages that share one of its K+1 blocks, cut as
 * near.h cuts them), against what random hashes would give. Hashes of
 * alike pages share blocks more often than random ones: that ratio is what
 * the random hashes of bench_nearidx leave out. */
static void index_cost(const char *dir, unsigned k)
{
	size_t n;
	uint64_t *h = corpus_simhashes(dir, &n);
	size_t within = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			within += simhash_distance(h[i], h[j]) <= k;
	unsigned tables = k + 1, base = 64 / tables, extra = 64 % tables, start = 0;
	double rows = 0, random = 0;
	uint64_t *blk = xmalloc((n ? n : 1) * sizeof *blk);
	for (unsigned t = 0; t < tables; t++) {
		unsigned width = base + (t < extra);
		for (size_t i = 0; i < n; i++)
			blk[i] = width == 64 ? h[i] : (h[i] << start) >> (64 - width);
		qsort(blk, n, sizeof *blk, cmp_u64);
		for (size_t i = 0; i < n;) { /* a run of m equal blocks: m (m - 1) rows read */
			size_t j = i;
			while (j < n && blk[j] == blk[i])
				j++;
			rows += (double)(j - i) * (double)(j - i - 1);
			i = j;
		}
		random += (double)(n ? n - 1 : 0) / (double)(UINT64_C(1) << width);
		start += width;
	}
	printf("index_pages: %zu distinct corpus pages with a simhash\n", n);
	printf("index_k%u_neighbours_per_page: %.2f (pairs within %u bits: %zu)\n", k, n ? 2.0 * within / n : 0, k,
	       within);
	printf("index_k%u_rows_per_query: %.1f (random hashes: %.1f, ratio %.1f)\n", k, n ? rows / n : 0, random,
	       random > 0 && n ? rows / n / random : 0);
	free(blk);
	free(h);
}

/* ---- the cost of the sketch ---- */

static void sketch_speed(const char *dir, size_t max_bytes)
{
	list_pages(dir);
	size_t html = 0, text = 0, np = 0, cap = 0;
	char **texts = NULL;
	size_t *lens = NULL;
	uint64_t seed = 3;
	for (size_t i = 0; i < npaths && html < max_bytes; i++) {
		size_t len;
		char *h = slurp(paths[rng_below(&seed, npaths)], &len);
		if (!h)
			continue;
		struct html_text t;
		if (html_extract(h, len, 0, &t))
			die("html_extract failed");
		free(h);
		if (t.binary)
			continue;
		if (np == cap) {
			cap = cap ? 2 * cap : 1024;
			texts = xrealloc(texts, cap * sizeof *texts);
			lens = xrealloc(lens, cap * sizeof *lens);
		}
		texts[np] = t.text;
		lens[np++] = t.len;
		html += len;
		text += t.len;
	}
	double best_m = 1e30, best_s = 1e30;
	for (int rep = 0; rep < 3; rep++) {
		double c0 = now(CLOCK_THREAD_CPUTIME_ID);
		for (size_t i = 0; i < np; i++) {
			struct minhash_sketch m;
			if (minhash_of_text(texts[i], lens[i], &m))
				die("minhash_of_text failed");
		}
		double c1 = now(CLOCK_THREAD_CPUTIME_ID);
		for (size_t i = 0; i < np; i++) {
			struct simhash_result r;
			if (simhash_of_text(texts[i], lens[i], &r))
				die("simhash_of_text failed");
		}
		double c2 = now(CLOCK_THREAD_CPUTIME_ID);
		if (c1 - c0 < best_m)
			best_m = c1 - c0;
		if (c2 - c1 < best_s)
			best_s = c2 - c1;
	}
	printf("speed_pages: %zu pages (%.1f MB of HTML, %.1f MB of text)\n", np, html / 1e6, text / 1e6);
	printf("sketch_text_mb_per_s: %.0f MB/s\n", text / 1e6 / best_m);
	printf("sketch_html_mb_per_s: %.0f MB/s (HTML bytes per second of sketching, extraction not counted)\n",
	       html / 1e6 / best_m);
	printf("simhash_text_html_mb_per_s: %.0f MB/s (the same for simhash_of_text)\n", html / 1e6 / best_s);
	printf("sketch_bytes_per_page: %d bytes (%d bins of %d bits)\n", MINHASH_BYTES, MINHASH_BINS,
	       MINHASH_BITS);
	for (size_t i = 0; i < np; i++)
		free(texts[i]);
	free(texts);
	free(lens);
}

/* ---- the structure of the difference (--confirm align|both) ---- */

/* A page's text as a sequence of 32-bit tokens: simhash_tokens' words
 * (folded, every number "0") and CJK characters, in text order. */
struct tokbuf {
	uint32_t *v;
	size_t n, cap;
};

static void tok_push(struct tokbuf *b, uint32_t x)
{
	if (b->n == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 256;
		b->v = xrealloc(b->v, b->cap * sizeof *b->v);
	}
	b->v[b->n++] = x;
}

static void tok_word(void *ctx, uint64_t h)
{
	tok_push(ctx, (uint32_t)(h ^ (h >> 32)));
}

static void tok_cjk(void *ctx, uint32_t c)
{
	uint64_t h = XXH3_64bits(&c, sizeof c) ^ UINT64_C(0x636a6b);
	tok_push(ctx, (uint32_t)(h ^ (h >> 32)));
}

static void tok_cjk_end(void *ctx)
{
	(void)ctx;
}

static void chunk_seq(const uint32_t *t, size_t n, unsigned avg, struct chunks *c);

static void token_seq(const char *text, size_t len, struct page *p)
{
	struct tokbuf b = {NULL, 0, 0};
	static const struct simhash_token_sink sink = {tok_word, tok_cjk, tok_cjk_end};
	if (simhash_tokens(text, len, &sink, &b))
		die("simhash_tokens failed");
	p->tok = b.v;
	p->ntok = (uint32_t)b.n;
	chunk_seq(p->tok, p->ntok, g_chunk, &p->ch);
}

/* Content-defined chunks of a token sequence: a chunk ends after token i
 * when a hash of tokens i-1 and i is 0 modulo avg (or at 4 avg tokens), so
 * an edit changes only the chunks around it. Each chunk: a 16-bit hash of
 * its tokens (what would be stored) and its length in tokens (weight). */
static void chunk_seq(const uint32_t *t, size_t n, unsigned avg, struct chunks *c)
{
	c->h = xmalloc((n ? n : 1) * sizeof *c->h);
	c->w = xmalloc((n ? n : 1) * sizeof *c->w);
	c->n = 0;
	size_t start = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t prev = i ? t[i - 1] : 0;
		uint64_t m = ((uint64_t)prev << 32 | t[i]) * UINT64_C(0x9E3779B97F4A7C15);
		bool end = (m >> 40) % avg == 0 || i + 1 - start >= 4 * avg || i + 1 == n;
		if (!end)
			continue;
		uint64_t h = XXH3_64bits(t + start, (i + 1 - start) * sizeof *t);
		c->h[c->n] = (uint32_t)(h & 0xFFFF);
		c->w[c->n++] = (uint32_t)(i + 1 - start);
		start = i + 1;
	}
}

/* Myers' O(ND) shortest edit script of a[0..n) into b[0..m), at most dmax
 * insertions and deletions; the matched runs (snakes) in text order. */
struct snake {
	uint32_t x, y, len;
};

struct aligner {
	int32_t *v;
	size_t vcap;
	struct snake *sn;
	size_t nsn, sncap;
};

/* The furthest x on diagonal k at step d from row prev (step d-1; entry
 * k at prev[k + d - 1]), or -1; *down says the last move was an insertion. */
static long myers_step(const int32_t *prev, long d, long k, long n, long m, bool *down)
{
	long xd = -1, xr = -1;
	if (k + 1 <= d - 1 && prev[k + 1 + d - 1] >= 0) {
		xd = prev[k + 1 + d - 1];
		if (xd - k > m)
			xd = -1;
	}
	if (k - 1 >= -(d - 1) && prev[k - 1 + d - 1] >= 0) {
		xr = prev[k - 1 + d - 1] + 1;
		if (xr > n || xr - k < 0)
			xr = -1;
	}
	*down = xd >= xr;
	return *down ? xd : xr;
}

/* D, or -1 when more than dmax edits are needed. */
static long myers(struct aligner *al, const uint32_t *a, long n, const uint32_t *b, long m, long dmax)
{
	if (dmax > n + m)
		dmax = n + m;
	size_t need = (size_t)(dmax + 1) * (size_t)(dmax + 1);
	if (need > al->vcap) {
		al->vcap = need;
		al->v = xrealloc(al->v, need * sizeof *al->v);
	}
	long D = -1, fx = 0;
	for (long d = 0; d <= dmax && D < 0; d++) {
		int32_t *cur = al->v + (size_t)d * (size_t)d;
		const int32_t *prev = d ? al->v + (size_t)(d - 1) * (size_t)(d - 1) : NULL;
		for (long k = -d; k <= d; k += 2) {
			bool down;
			long x = d ? myers_step(prev, d, k, n, m, &down) : 0;
			if (x < 0) {
				cur[k + d] = -1;
				continue;
			}
			long y = x - k;
			while (x < n && y < m && a[x] == b[y])
				x++, y++;
			cur[k + d] = (int32_t)x;
			if (x == n && y == m) {
				D = d;
				fx = x;
				break;
			}
		}
	}
	al->nsn = 0;
	if (D < 0)
		return -1;
	/* trace back from (n, m) */
	long x = fx, y = m;
	for (long d = D; d >= 0; d--) {
		long k = x - y, mx = 0, my = 0, px = 0, py = 0;
		if (d) {
			bool down;
			const int32_t *prev = al->v + (size_t)(d - 1) * (size_t)(d - 1);
			long s = myers_step(prev, d, k, n, m, &down);
			mx = s;
			my = s - k;
			px = down ? s : s - 1;
			py = down ? my - 1 : my;
		}
		if (x > mx) {
			if (al->nsn == al->sncap) {
				al->sncap = al->sncap ? 2 * al->sncap : 64;
				al->sn = xrealloc(al->sn, al->sncap * sizeof *al->sn);
			}
			al->sn[al->nsn++] = (struct snake){(uint32_t)mx, (uint32_t)my, (uint32_t)(x - mx)};
		}
		x = px;
		y = py;
	}
	for (size_t i = 0; i < al->nsn / 2; i++) { /* into text order */
		struct snake t = al->sn[i];
		al->sn[i] = al->sn[al->nsn - 1 - i];
		al->sn[al->nsn - 1 - i] = t;
	}
	return D;
}

#define SHINGLE_GAP 5 /* matched runs shorter than a shingle do not split a hunk */

/* What the alignment says about a pair. */
struct diffstat {
	uint32_t wa, wb;    /* tokens of each text */
	uint32_t kept;      /* tokens aligned (in a) */
	uint16_t hunks;     /* changed regions */
	uint16_t merged;    /* changed regions, runs of < SHINGLE_GAP tokens between them merged */
	uint16_t distinct;  /* (token level) hunks of distinct content */
	bool cut;           /* more edits than dmax: no alignment */
	float rsh;          /* 5-shingle resemblance estimated from the matched runs */
};

static double kept_share(const struct diffstat *s)
{
	uint32_t mx = s->wa > s->wb ? s->wa : s->wb;
	return s->cut ? 0 : mx ? (double)s->kept / mx : 1.0;
}

/* Statistics of the alignment in al over sequences of weights wa_v, wb_v
 * (NULL: every element weighs 1), elements a, b (for hunk contents). */
static void diff_stats(const struct aligner *al, const uint32_t *a, const uint32_t *wa_v, long n,
		       const uint32_t *b, const uint32_t *wb_v, long m, long D, struct diffstat *s)
{
	memset(s, 0, sizeof *s);
	for (long i = 0; i < n; i++)
		s->wa += wa_v ? wa_v[i] : 1;
	for (long i = 0; i < m; i++)
		s->wb += wb_v ? wb_v[i] : 1;
	if (D < 0) {
		s->cut = true;
		return;
	}
	long pa = 0, pb = 0;
	bool open = false;
	double shared = 0;
	uint64_t seen[256];
	size_t nseen_h = 0;
	for (size_t i = 0; i <= al->nsn; i++) {
		long x = i < al->nsn ? al->sn[i].x : n, y = i < al->nsn ? al->sn[i].y : m;
		if (x > pa || y > pb) {
			s->hunks++;
			if (!open)
				s->merged++;
			open = true;
			uint64_t h = XXH3_64bits(a + pa, (size_t)(x - pa) * sizeof *a) * 31 +
				     XXH3_64bits(b + pb, (size_t)(y - pb) * sizeof *b);
			bool dup = false;
			for (size_t j = 0; j < nseen_h; j++)
				dup |= seen[j] == h;
			if (!dup && nseen_h < 256)
				seen[nseen_h++] = h;
		}
		if (i == al->nsn)
			break;
		uint32_t w = 0;
		for (uint32_t j = 0; j < al->sn[i].len; j++)
			w += wa_v ? wa_v[al->sn[i].x + j] : 1;
		s->kept += w;
		if (w >= SHINGLE_GAP)
			open = false;
		shared += w >= REF_WORDS ? w - (REF_WORDS - 1) : 0;
		pa = x + al->sn[i].len;
		pb = y + al->sn[i].len;
	}
	s->distinct = (uint16_t)nseen_h;
	double sa = s->wa > REF_WORDS ? s->wa - (REF_WORDS - 1) : 1, sb = s->wb > REF_WORDS ? s->wb - (REF_WORDS - 1) : 1;
	s->rsh = (float)(shared / (sa + sb - shared));
}

enum { REP_TOK, REP_CHUNK, NREPS };
static const char *const rep_name[NREPS] = {"tok", "chunk"};
static long g_dmax_tok = 2000;    /* edits at most, token level */
static double g_dmax_frac = 1.0;  /* --dmax-frac: and at most this share of the longer text */
static struct aligner g_al;

static void pair_diff(const struct page *a, const struct page *b, int rep, struct diffstat *s)
{
	if (rep == REP_TOK) {
		long dmax = (long)(g_dmax_frac * (a->ntok > b->ntok ? a->ntok : b->ntok)) + 8;
		dmax = dmax < g_dmax_tok ? dmax : g_dmax_tok;
		long D = myers(&g_al, a->tok, a->ntok, b->tok, b->ntok, dmax);
		diff_stats(&g_al, a->tok, NULL, a->ntok, b->tok, NULL, b->ntok, D, s);
	} else {
		const struct chunks *ca = &a->ch, *cb = &b->ch;
		long D = myers(&g_al, ca->h, ca->n, cb->h, cb->n, (long)ca->n + cb->n);
		diff_stats(&g_al, ca->h, ca->w, ca->n, cb->h, cb->w, cb->n, D, s);
	}
}

/* Per pair within KMAX: the alignment statistics of each representation. */
struct pdiff {
	struct diffstat s[NREPS];
};

static struct pdiff *lab_diff; /* parallel to pairs[] (KMAX and closer) */
static struct pdiff *jdk_diff; /* parallel to the openjdk pairs */
static double cost_us[NREPS + 1][2]; /* CPU us per pair: [rep or sketch][labelled, openjdk] */

/* Pages at base + i * stride (the pg of docs[], or an array of pages). */
#define PAGE_AT(base, stride, i) ((const struct page *)((const char *)(base) + (size_t)(i) * (stride)))

static void diffs_of(const void *pg, size_t stride, const struct pair *pp, size_t np, struct pdiff *out, int set)
{
	for (int r = 0; r <= NREPS; r++) {
		size_t done = 0;
		double c0 = now(CLOCK_THREAD_CPUTIME_ID), sink = 0;
		for (size_t p = 0; p < np; p++) {
			if (pp[p].dist > KMAX)
				continue;
			done++;
			if (r < NREPS) {
				pair_diff(PAGE_AT(pg, stride, pp[p].a), PAGE_AT(pg, stride, pp[p].b), r, &out[p].s[r]);
			} else {
				double e;
				if (minhash_resemblance(PAGE_AT(pg, stride, pp[p].a)->mh, PAGE_AT(pg, stride, pp[p].b)->mh, &e))
					die("minhash_resemblance failed");
				sink += e;
			}
		}
		double c1 = now(CLOCK_THREAD_CPUTIME_ID);
		cost_us[r][set] = done ? (c1 - c0) * 1e6 / (double)done : 0;
		if (sink < 0)
			die("impossible");
	}
}

/* The rule of a confirm. The base: the sketch at t (sketch), the sketch
 * at t and the alignment's own resemblance estimate at R0 (both; R0 0:
 * the sketch alone), or that estimate at TRUE_RESEMBLANCE alone (align).
 * Or the difference's structure: both texts of minw tokens or more, at
 * most H changed regions (merged across matched runs shorter than a
 * shingle), a share F of the longer text's tokens kept in order, and no
 * two changed regions alike (a name substituted throughout is a template,
 * not an edit). */
enum confirm { C_SKETCH, C_ALIGN, C_BOTH };
static const char *const confirm_name[] = {"sketch", "align", "both"};

struct rule {
	enum confirm c;
	int rep;
	unsigned H; /* 0: no structural acceptance */
	double F;
	double R0;
	unsigned minw;
	bool rename;
};

static bool structural(const struct diffstat *s, const struct rule *r)
{
	uint32_t w = s->wa < s->wb ? s->wa : s->wb;
	return r->H && !s->cut && w >= r->minw && s->merged <= r->H && kept_share(s) >= r->F &&
	       (!r->rename || s->distinct == s->hunks);
}

static bool accepted(const struct pair *q, const struct pdiff *d, const struct rule *r, double t)
{
	if (q->dist > KMAX)
		return r->c != C_ALIGN && q->est >= t && (r->c == C_SKETCH || r->R0 <= 0);
	const struct diffstat *s = &d->s[r->rep];
	switch (r->c) {
	case C_SKETCH:
		return q->est >= t;
	case C_BOTH:
		if (q->est >= t && (r->R0 <= 0 || (!s->cut && s->rsh >= r->R0)))
			return true;
		break;
	case C_ALIGN:
		if (!s->cut && s->rsh >= TRUE_RESEMBLANCE)
			return true;
		break;
	}
	return structural(s, r);
}

static void score_rule(unsigned k, const struct rule *ru, double t, struct score *s)
{
	memset(s, 0, NROWS * sizeof *s);
	for (size_t p = 0; p < npairs; p++)
		if (pairs[p].dist <= k && accepted(&pairs[p], &lab_diff[p], ru, t))
			score_pair(p, s);
}

static void jdk_rule(const struct jdk *j, unsigned k, const struct rule *ru, double t, size_t *answered,
		     size_t *right)
{
	*answered = *right = 0;
	for (size_t p = 0; p < j->npairs; p++) {
		const struct pair *q = &j->pairs[p];
		if (q->dist > k || !accepted(q, &jdk_diff[p], ru, t))
			continue;
		(*answered)++;
		*right += j->truth[p] >= TRUE_RESEMBLANCE;
	}
}

static void rule_name(const struct rule *r, double t, char *out, size_t n)
{
	char base[64];
	if (r->c == C_SKETCH)
		snprintf(base, sizeof base, "sketch>=%.2f", t);
	else if (r->c == C_ALIGN)
		snprintf(base, sizeof base, "alignR>=%.2f", TRUE_RESEMBLANCE);
	else if (r->R0 > 0)
		snprintf(base, sizeof base, "(sketch>=%.2f and alignR>=%.2f)", t, r->R0);
	else
		snprintf(base, sizeof base, "sketch>=%.2f", t);
	if (r->c == C_SKETCH || !r->H)
		snprintf(out, n, "%s", base);
	else
		snprintf(out, n, "%s or (%s level: tokens>=%u, regions<=%u, kept>=%.2f%s)", base, rep_name[r->rep],
			 r->minw, r->H, r->F, r->rename ? ", no two regions alike" : "");
}

/* The per-kind table and the K curve of one rule. */
static void print_rule(const struct jdk *j, const struct rule *ru, double t, unsigned K)
{
	char name[128];
	rule_name(ru, t, name, sizeof name);
	printf("## confirm %s: %s\n", confirm_name[ru->c], name);
	struct score s[NROWS];
	score_rule(K, ru, t, s);
	print_score_rows("rule", K, s);
	for (unsigned k = 0; k <= KMAX; k++) {
		score_rule(k, ru, t, s);
		size_t ans = 0, right = 0;
		if (j->n)
			jdk_rule(j, k, ru, t, &ans, &right);
		printf("rule_curve_k%u: labelled precision %.4f recall %.4f; en_edit %.4f zh_edit %.4f; openjdk "
		       "precision %.4f (answered %zu, true %zu)\n",
		       k, ratio(s[ROW_ALL].right, s[ROW_ALL].answered), ratio(s[ROW_ALL].right, positives[ROW_ALL]),
		       ratio(s[L_EN * NKINDS + K_EDIT].right, positives[L_EN * NKINDS + K_EDIT]),
		       ratio(s[L_ZH * NKINDS + K_EDIT].right, positives[L_ZH * NKINDS + K_EDIT]),
		       ratio(right, ans), ans, right);
	}
}

/* The rule with one parameter changed at a time, at K 4..KMAX. */
static void rule_grid(const struct jdk *j, const struct rule *r0, double t)
{
	static const unsigned Hs[] = {0, 1, 2, 3, 4, 5, 6, 8};
	static const double Fs[] = {0.6, 0.7, 0.75, 0.8, 0.85, 0.9};
	static const unsigned Ws[] = {0, 32, 64, 96, 128};
	static const double Rs[] = {0, 0.7, 0.75, 0.8, 0.85};
	struct rule v[64];
	size_t nv = 0;
	for (size_t i = 0; i < sizeof Hs / sizeof Hs[0]; i++)
		v[nv] = *r0, v[nv++].H = Hs[i];
	for (size_t i = 0; i < sizeof Fs / sizeof Fs[0]; i++)
		v[nv] = *r0, v[nv++].F = Fs[i];
	for (size_t i = 0; i < sizeof Ws / sizeof Ws[0]; i++)
		v[nv] = *r0, v[nv++].minw = Ws[i];
	for (size_t i = 0; r0->c == C_BOTH && i < sizeof Rs / sizeof Rs[0]; i++)
		v[nv] = *r0, v[nv++].R0 = Rs[i];
	v[nv] = *r0, v[nv++].rename = !r0->rename;
	for (size_t i = 0; i < nv; i++)
		for (unsigned k = 4; k <= KMAX; k++) {
			struct score s[NROWS];
			score_rule(k, &v[i], t, s);
			size_t ans = 0, right = 0;
			if (j->n)
				jdk_rule(j, k, &v[i], t, &ans, &right);
			printf("rgrid_%s_%s_k%u_h%u_f%.2f_w%u_r%.2f%s: labelled precision %.4f recall %.4f en_edit %.4f "
			       "zh_edit %.4f; openjdk precision %.4f (answered %zu)\n",
			       confirm_name[v[i].c], rep_name[v[i].rep], k, v[i].H, v[i].F, v[i].minw, v[i].R0,
			       v[i].rename ? "" : "_norename", ratio(s[ROW_ALL].right, s[ROW_ALL].answered),
			       ratio(s[ROW_ALL].right, positives[ROW_ALL]),
			       ratio(s[L_EN * NKINDS + K_EDIT].right, positives[L_EN * NKINDS + K_EDIT]),
			       ratio(s[L_ZH * NKINDS + K_EDIT].right, positives[L_ZH * NKINDS + K_EDIT]), ratio(right, ans),
			       ans);
		}
}

/* Pairs within KMAX, one line each, for analysis outside. */
static void dump_pairs(const char *path, const struct jdk *j)
{
	FILE *f = fopen(path, "w");
	if (!f)
		die("cannot write the dump");
	fprintf(f, "set\tkinda\tkindb\tlang\tpos\tedits\tdist\tref\test");
	for (int r = 0; r < NREPS; r++)
		fprintf(f, "\t%s_wa\t%s_wb\t%s_kept\t%s_hunks\t%s_merged\t%s_distinct\t%s_cut\t%s_rsh", rep_name[r],
			rep_name[r], rep_name[r], rep_name[r], rep_name[r], rep_name[r], rep_name[r], rep_name[r]);
	fprintf(f, "\n");
	for (int set = 0; set < 2; set++) {
		size_t np = set ? j->npairs : npairs;
		for (size_t p = 0; p < np; p++) {
			const struct pair *q = set ? &j->pairs[p] : &pairs[p];
			if (q->dist > KMAX)
				continue;
			const struct pdiff *d = set ? &jdk_diff[p] : &lab_diff[p];
			if (set)
				fprintf(f, "jdk\t-\t-\ten\t%d\t0\t%u\t%.4f\t%.4f", j->truth[p] >= TRUE_RESEMBLANCE, q->dist,
					j->truth[p], q->est);
			else {
				const struct doc *a = &docs[q->a], *b = &docs[q->b];
				fprintf(f, "lab\t%s\t%s\t%s\t%d\t%d\t%u\t%.4f\t%.4f", kind_name[a->kind], kind_name[b->kind],
					lang_name[a->lang], a->group >= 0 && a->group == b->group,
					a->edits + b->edits, q->dist, resemblance(&a->pg.ref, &b->pg.ref), q->est);
			}
			for (int r = 0; r < NREPS; r++) {
				const struct diffstat *s = &d->s[r];
				fprintf(f, "\t%u\t%u\t%u\t%u\t%u\t%u\t%d\t%.4f", s->wa, s->wb, s->kept, s->hunks, s->merged,
					s->distinct, s->cut, s->rsh);
			}
			fprintf(f, "\n");
		}
	}
	fclose(f);
}

/* Candidates per query (pages within k) and index rows per query at every
 * k up to KMAX, over the distinct corpus pages; the candidates' spread. */
static void index_curve(const char *dir)
{
	size_t n;
	uint64_t *h = corpus_simhashes(dir, &n);
	uint32_t *cnt = xmalloc((KMAX + 1) * (n ? n : 1) * sizeof *cnt);
	memset(cnt, 0, (KMAX + 1) * (n ? n : 1) * sizeof *cnt);
	for (size_t i = 0; i < n; i++)
		for (size_t jj = i + 1; jj < n; jj++) {
			unsigned d = simhash_distance(h[i], h[jj]);
			for (unsigned k = d; k <= KMAX; k++) {
				cnt[k * n + i]++;
				cnt[k * n + jj]++;
			}
		}
	double *v = xmalloc((n ? n : 1) * sizeof *v);
	uint64_t *blk = xmalloc((n ? n : 1) * sizeof *blk);
	for (unsigned k = 0; k <= KMAX; k++) {
		double sum = 0;
		for (size_t i = 0; i < n; i++)
			sum += v[i] = cnt[k * n + i];
		qsort(v, n, sizeof *v, cmp_double);
		unsigned tables = k + 1, base = 64 / tables, extra = 64 % tables, start = 0;
		double rows = 0, random = 0;
		for (unsigned t = 0; t < tables; t++) {
			unsigned width = base + (t < extra);
			for (size_t i = 0; i < n; i++)
				blk[i] = width == 64 ? h[i] : (h[i] << start) >> (64 - width);
			qsort(blk, n, sizeof *blk, cmp_u64);
			for (size_t i = 0; i < n;) {
				size_t jj = i;
				while (jj < n && blk[jj] == blk[i])
					jj++;
				rows += (double)(jj - i) * (double)(jj - i - 1);
				i = jj;
			}
			random += width == 64 ? 0 : (double)(n ? n - 1 : 0) / (double)(UINT64_C(1) << width);
			start += width;
		}
		printf("candidates_k%u: per query mean %.2f p50 %.0f p90 %.0f p99 %.0f max %.0f; index rows per query "
		       "%.1f (random hashes %.1f)\n",
		       k, n ? sum / n : 0, v[n / 2], v[n * 9 / 10], v[n * 99 / 100], v[n - 1], n ? rows / n : 0, random);
	}
	free(v);
	free(blk);
	free(cnt);
	free(h);
}

/* ---- main ---- */

static const double thresholds[] = {0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.72, 0.75, 0.78, 0.8, 0.82, 0.85, 0.88, 0.9};
#define NTHRESH (sizeof thresholds / sizeof thresholds[0])

#include "near_rules.h"

/* --false-matches: what cutting the kept hashes to b bits adds to the
 * bottom-k estimate (nearset.h, "Stored precision"), on random sets: two
 * sets of N hashes of resemblance R (shared hashes, the rest each its
 * own), compared at 32 bits and at b bits. Prints the mean rise of the
 * estimate, its largest, and the share of pairs whose estimate moved. */
static int cmp_u32_fm(const void *p, const void *q)
{
	uint32_t x = *(const uint32_t *)p, y = *(const uint32_t *)q;
	return (x > y) - (x < y);
}

static uint64_t fm_rng = UINT64_C(0x66616c7365);
static uint32_t fm_next(void)
{
	fm_rng ^= fm_rng << 13, fm_rng ^= fm_rng >> 7, fm_rng ^= fm_rng << 17;
	return (uint32_t)(fm_rng >> 32);
}

static void fm_set(uint32_t *all, size_t n, struct nearset *s)
{
	qsort(all, n, sizeof *all, cmp_u32_fm);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (!u || all[u - 1] != all[i])
			all[u++] = all[i];
	memset(s, 0, sizeof *s);
	s->has = true;
	s->bits = 32;
	s->shingles = (uint32_t)u;
	s->complete = u <= NEARSET_K;
	s->n = (uint32_t)(u < NEARSET_K ? u : NEARSET_K);
	memcpy(s->h, all, s->n * sizeof *all);
}

static int false_matches(void)
{
	static const size_t sizes[] = { 200, 1000, 10000, 30000, 100000 };
	static const unsigned bits[] = { 16, 20, 24, 28 };
	static const double rs[] = { 0.7, 0.8 };
	const int trials = 400;
	struct nearset *x = xmalloc(sizeof *x), *y = xmalloc(sizeof *y);
	uint32_t *a = xmalloc(100000 * sizeof *a), *b = xmalloc(100000 * sizeof *b);
	printf("## false matches of the cut (%d pairs a line; rise = estimate at b bits less at 32)\n", trials);
	for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
		for (size_t ri = 0; ri < sizeof rs / sizeof rs[0]; ri++)
			for (size_t bi = 0; bi < sizeof bits / sizeof bits[0]; bi++) {
				size_t n = sizes[si];
				/* R = s / (2n - s): s = 2nR / (1 + R) shared */
				size_t shared = (size_t)(2.0 * (double)n * rs[ri] / (1 + rs[ri]) + 0.5);
				double sum = 0, max = 0;
				int moved = 0;
				fm_rng = UINT64_C(0x66616c7365) + si * 131 + ri * 17; /* the same pairs for every b */
				for (int t = 0; t < trials; t++) {
					for (size_t i = 0; i < n; i++) {
						a[i] = fm_next();
						b[i] = i < shared ? a[i] : fm_next();
					}
					fm_set(a, n, x);
					fm_set(b, n, y);
					double r32 = nearset_resemblance(x, y, NULL);
					nearset_truncate(x, bits[bi]);
					nearset_truncate(y, bits[bi]);
					double rise = nearset_resemblance(x, y, NULL) - r32;
					sum += rise;
					max = rise > max ? rise : max;
					moved += rise != 0;
				}
				printf("false_match_n%zu_r%.1f_b%u: mean rise %.5f max %.4f moved %.3f "
				       "(bound 2(1-R)N/2^b %.5f)\n",
				       n, rs[ri], bits[bi], sum / trials, max, (double)moved / trials,
				       2 * (1 - rs[ri]) * (double)n / (double)(UINT64_C(1) << bits[bi]));
			}
	free(x);
	free(y);
	free(a);
	free(b);
	return 0;
}

int main(int argc, char **argv)
{
	size_t nbases = 2000, zh_bases = 300, nneg = 2000, speed_mb = 64;
	double t = MINHASH_NEAR_RESEMBLANCE;
	const char *dir = DEFAULT_CORPUS;
	bool jdk = true;
	unsigned k_opt = SIMHASH_NEAR_DISTANCE;
	struct rule ru = {C_SKETCH, REP_TOK, 3, 0.8, 0.8, 64, true};
	const char *dump = NULL;
	bool grid = false;
	const char *pkgs[16];
	size_t npkgs = 0, pkg_max = 12000;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--bases") && i + 1 < argc)
			nbases = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--zh-bases") && i + 1 < argc)
			zh_bases = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--negatives") && i + 1 < argc)
			nneg = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--threshold") && i + 1 < argc)
			t = strtod(argv[++i], NULL);
		else if (!strcmp(argv[i], "--corpus") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--speed-mb") && i + 1 < argc)
			speed_mb = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--k") && i + 1 < argc && atoi(argv[i + 1]) >= 0 &&
			 atoi(argv[i + 1]) <= KFAR)
			k_opt = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--pkg") && i + 1 < argc && npkgs < 16)
			pkgs[npkgs++] = argv[++i];
		else if (!strcmp(argv[i], "--pkg-max") && i + 1 < argc)
			pkg_max = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--no-jdk"))
			jdk = false;
		else if (!strcmp(argv[i], "--confirm") && i + 1 < argc && !strcmp(argv[i + 1], "sketch"))
			ru.c = C_SKETCH, i++;
		else if (!strcmp(argv[i], "--confirm") && i + 1 < argc && !strcmp(argv[i + 1], "align"))
			ru.c = C_ALIGN, i++;
		else if (!strcmp(argv[i], "--confirm") && i + 1 < argc && !strcmp(argv[i + 1], "both"))
			ru.c = C_BOTH, i++;
		else if (!strcmp(argv[i], "--rep") && i + 1 < argc && !strcmp(argv[i + 1], "tok"))
			ru.rep = REP_TOK, i++;
		else if (!strcmp(argv[i], "--rep") && i + 1 < argc && !strcmp(argv[i + 1], "chunk"))
			ru.rep = REP_CHUNK, i++;
		else if (!strcmp(argv[i], "--hunks") && i + 1 < argc)
			ru.H = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--kept") && i + 1 < argc)
			ru.F = strtod(argv[++i], NULL);
		else if (!strcmp(argv[i], "--align-r") && i + 1 < argc)
			ru.R0 = strtod(argv[++i], NULL);
		else if (!strcmp(argv[i], "--min-tokens") && i + 1 < argc)
			ru.minw = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--no-rename-check"))
			ru.rename = false;
		else if (!strcmp(argv[i], "--dmax-frac") && i + 1 < argc)
			g_dmax_frac = strtod(argv[++i], NULL);
		else if (!strcmp(argv[i], "--chunk") && i + 1 < argc && atoi(argv[i + 1]) >= 1)
			g_chunk = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--dump") && i + 1 < argc)
			dump = argv[++i];
		else if (!strcmp(argv[i], "--set-bits") && i + 1 < argc && atoi(argv[i + 1]) >= NEARSET_BITS_MIN &&
			 atoi(argv[i + 1]) <= 32)
			g_set_bits = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--false-matches"))
			return false_matches();
		else if (!strcmp(argv[i], "--grid"))
			grid = true;
		else if (!strcmp(argv[i], "--counter") && i + 1 < argc && !strcmp(argv[i + 1], "all"))
			g_counter_stamp = false, i++;
		else if (!strcmp(argv[i], "--counter") && i + 1 < argc && !strcmp(argv[i + 1], "stamp"))
			g_counter_stamp = true, i++;
		else if (!strcmp(argv[i], "--rules") && i + 1 < argc) {
			g_rules_out = fopen(argv[++i], "w");
			if (!g_rules_out)
				die("cannot write the --rules file");
			g_rules = true;
		}
		else {
			fprintf(stderr, "usage: bench_near [--bases N] [--zh-bases N] [--negatives N] "
					"[--threshold T] [--k K] [--corpus DIR] [--no-jdk] [--speed-mb N]\n"
					"                  [--confirm sketch|align|both] [--rep tok|chunk] [--hunks H] "
					"[--kept F]\n                  [--align-r R] [--min-tokens N] [--no-rename-check] "
					"[--chunk C] [--dmax-frac X] [--grid] [--dump FILE]\n"
					"                  [--pkg DIR]... [--pkg-max N] [--rules FILE] [--counter all|stamp]\n"
					"                  [--set-bits B] [--false-matches]\n");
			return 2;
		}
	}
	unsigned K = k_opt;
	g_tokens = ru.c != C_SKETCH;
	double t0 = now(CLOCK_MONOTONIC);
	printf("k: %u (default %u)\n", K, SIMHASH_NEAR_DISTANCE);
	printf("sketch: %d bins x %d bits = %d bytes, word %d-shingles, CJK %d-grams, threshold %.2f\n",
	       MINHASH_BINS, MINHASH_BITS, MINHASH_BYTES, MINHASH_WORDS, MINHASH_CJK_GRAM, t);

	/* 1. the labelled set */
	list_pages(dir);
	if (!npaths)
		die("no pages in the corpus (run tests/bench/corpus.sh)");
	struct original *en;
	size_t nen = english_originals(nbases, nneg, &en);
	if (nen < nbases)
		nbases = nen;
	size_t en_inserted = 0;
	for (size_t i = 0; i < nen; i++) {
		bool base = i < nbases;
		int group = base ? (int)i : -1;
		add_doc(en[i].html, en[i].len, group, base ? K_BASE : K_NEG, L_EN, 0);
		if (!base)
			continue;
		uint64_t rng = UINT64_C(0x6E656172) + i;
		struct buf v;
		v = make_mirror(en[i].html, en[i].len, &rng);
		add_doc(v.p, v.n, group, K_MIRROR, L_EN, 0);
		free(v.p);
		v = make_ad(en[i].html, en[i].len, &rng);
		add_doc(v.p, v.n, group, K_AD, L_EN, 0);
		free(v.p);
		bool ins;
		size_t changed;
		uint64_t own = rng ^ UINT64_C(0x636f756e746572); /* --counter stamp's: the other kinds unchanged */
		v = make_counter(en[i].html, en[i].len, &rng, &ins, &changed);
		if (g_counter_stamp) {
			free(v.p);
			v = make_counter_stamp(en[i].html, en[i].len, &own, &ins, &changed);
		}
		en_inserted += ins;
		add_doc(v.p, v.n, group, K_COUNTER, L_EN, 0);
		docs[ndocs - 1].numbers = changed;
		free(v.p);
		int edits;
		v = make_edit(en[i].html, en[i].len, en[i].text, &rng, &edits);
		add_doc(v.p, v.n, group, K_EDIT, L_EN, edits);
		free(v.p);
		v = make_reformat(en[i].html, en[i].len, &rng);
		add_doc(v.p, v.n, group, K_REFORMAT, L_EN, 0);
		free(v.p);
	}
	struct zh_page *zh;
	struct original *zo;
	size_t nzh = chinese_pages(2 * zh_bases, &zh, &zo);
	size_t zb = nzh / 2 < zh_bases ? nzh / 2 : zh_bases;
	for (size_t i = 0; i < nzh; i++) {
		bool base = i < zb;
		int group = base ? (int)(nbases + i) : -1;
		add_doc(zo[i].html, zo[i].len, group, base ? K_BASE : K_NEG, L_ZH, 0);
		if (base) {
			uint64_t rng = UINT64_C(0x7A68) + i;
			zh_variants(&zh[i], group, &rng);
		}
	}
	printf("labelled_en: %zu bases, %zu negatives, %zu counter variants given a dated line\n", nbases,
	       nen - nbases, en_inserted);
	printf("labelled_zh: %zu bases (%zu GBK), %zu negatives\n", zb, (zb + 1) / 2, nzh - zb);
	printf("labelled_pages: %zu\n", ndocs);
	find_pairs();
	count_positives();
	printf("labelled_pairs_within_%d: %zu\n", KFAR, npairs);
	g_mk = K;
	labelled_report();
	for (size_t i = 0; i < npkgs; i++)
		pkg_report(pkgs[i], pkg_max);
	variant_profile();
	length_profile();
	printf("## labelled set, simhash alone, K=%u\n", K);
	print_rows(K, -1, "simhash");
	edit_recall(K, -1, "simhash");
	printf("## labelled set, simhash + sketch (threshold %.2f), K=%u\n", t, K);
	print_rows(K, t, "confirmed");
	edit_recall(K, t, "confirmed");
	missed_breakdown(K, t);
	printf("## labelled set, all pairs, the K curve\n");
	for (unsigned k = 0; k <= KFAR; k++) {
		struct score s[NROWS], c[NROWS];
		score(k, -1, s);
		score(k, t, c);
		printf("curve_k%u: simhash precision %.4f recall %.4f; confirmed precision %.4f recall %.4f\n", k,
		       ratio(s[ROW_ALL].right, s[ROW_ALL].answered), ratio(s[ROW_ALL].right, positives[ROW_ALL]),
		       ratio(c[ROW_ALL].right, c[ROW_ALL].answered), ratio(c[ROW_ALL].right, positives[ROW_ALL]));
	}
	for (unsigned k = 0; k <= KFAR; k++) {
		printf("curve_kinds_k%u:", k);
		struct score c[NROWS];
		score(k, t, c);
		for (int r = 0; r < ROW_ALL; r++)
			if (positives[r])
				printf(" %s_%s %.3f/%.3f", lang_name[r / NKINDS], kind_name[r % NKINDS],
				       ratio(c[r].right, c[r].answered), ratio(c[r].right, positives[r]));
		printf("\n");
	}

	/* 2. the template trap */
	struct jdk j = {0};
	if (jdk) {
		jdk_load(dir, &j);
		printf("## openjdk-17-doc: every distinct page, pairs judged by word %d-shingle resemblance\n",
		       REF_WORDS);
		size_t low = 0;
		for (size_t i = 0; i < j.n; i++)
			low += j.pg[i].low;
		printf("jdk_pages: %zu (%zu low confidence)\n", j.n, low);
		printf("jdk_pairs_within_%d: %zu\n", KFAR, j.npairs);
		for (unsigned k = 0; k <= KFAR; k++) {
			jdk_print(&j, k, -1, "jdk_simhash");
			jdk_print(&j, k, t, "jdk_confirmed");
		}
	}

	/* the threshold curve, at every K */
	printf("## the grid: K x threshold -> labelled precision / recall (all; worst kind), openjdk precision\n");
	for (unsigned k = 0; k <= KFAR; k++)
		for (size_t i = 0; i <= NTHRESH; i++) {
			double th = i < NTHRESH ? thresholds[i] : -1; /* -1: simhash alone */
			struct score s[NROWS];
			score(k, th, s);
			double worst_r = 1, worst_p = 1;
			for (int r = 0; r < ROW_ALL; r++) {
				if (!positives[r])
					continue;
				double rr = ratio(s[r].right, positives[r]), pp = ratio(s[r].right, s[r].answered);
				worst_r = rr < worst_r ? rr : worst_r;
				worst_p = pp < worst_p ? pp : worst_p;
			}
			size_t ans = 0, right = 0, truth = 0;
			if (jdk)
				jdk_score(&j, k, th, false, &ans, &right, &truth);
			char tname[16];
			if (i < NTHRESH)
				snprintf(tname, sizeof tname, "%.2f", th);
			else
				snprintf(tname, sizeof tname, "none");
			printf("grid_k%u_t%s: labelled precision %.4f recall %.4f (worst kind %.4f / %.4f); "
			       "openjdk precision %.4f (answered %zu, true kept %.4f)\n",
			       k, tname, ratio(s[ROW_ALL].right, s[ROW_ALL].answered),
			       ratio(s[ROW_ALL].right, positives[ROW_ALL]), worst_p, worst_r, ratio(right, ans), ans,
			       ratio(right, truth));
		}

	/* the structure of the difference */
	if (ru.c != C_SKETCH) {
		lab_diff = xmalloc((npairs ? npairs : 1) * sizeof *lab_diff);
		jdk_diff = xmalloc((j.npairs ? j.npairs : 1) * sizeof *jdk_diff);
		memset(lab_diff, 0, (npairs ? npairs : 1) * sizeof *lab_diff);
		memset(jdk_diff, 0, (j.npairs ? j.npairs : 1) * sizeof *jdk_diff);
		diffs_of(&docs[0].pg, sizeof *docs, pairs, npairs, lab_diff, 0);
		if (jdk)
			diffs_of(j.pg, sizeof *j.pg, j.pairs, j.npairs, jdk_diff, 1);
		printf("## the structure of the difference: chunks of %u tokens on average; cost per pair within %d "
		       "bits, CPU time\n", g_chunk, KMAX);
		for (int r = 0; r <= NREPS; r++)
			printf("confirm_cost_%s: %.2f us per labelled pair, %.2f us per openjdk pair\n",
			       r < NREPS ? rep_name[r] : "sketch", cost_us[r][0], cost_us[r][1]);
		size_t nt = 0, nc = 0, np_ = 0;
		for (size_t i = 0; i < j.n; i++, np_++)
			nt += j.pg[i].ntok, nc += j.pg[i].ch.n;
		for (size_t i = 0; i < ndocs; i++, np_++)
			nt += docs[i].pg.ntok, nc += docs[i].pg.ch.n;
		printf("confirm_stored: %.1f tokens and %.1f chunks per page (openjdk and labelled pages; %.0f bytes "
		       "at 2 bytes a chunk, %.0f at 3)\n", np_ ? (double)nt / np_ : 0, np_ ? (double)nc / np_ : 0,
		       np_ ? 2.0 * nc / np_ : 0, np_ ? 3.0 * nc / np_ : 0);
		print_rule(&j, &ru, t, K);
		if (grid)
			rule_grid(&j, &ru, t);
		if (dump)
			dump_pairs(dump, &j);
		index_curve(dir);
	}

	/* 3. the cost */
	index_cost(dir, K);
	if (speed_mb)
		sketch_speed(dir, speed_mb << 20);
	printf("bench_seconds: %.1f s\n", now(CLOCK_MONOTONIC) - t0);

	for (size_t i = 0; i < nen; i++)
		free_original(&en[i]);
	free(en);
	for (size_t i = 0; i < nzh; i++) {
		free_original(&zo[i]);
		for (size_t p = 0; p < zh[i].npara; p++)
			free(zh[i].para[p]);
		free(zh[i].para);
	}
	free(zo);
	free(zh);
	for (size_t i = 0; i < j.n; i++) {
		free_page_methods(&j.pg[i]);
		free(j.pg[i].tok);
		free(j.pg[i].ch.h);
		free(j.pg[i].ch.w);
	}
	free(j.pg);
	free(j.pairs);
	free(j.truth);
	for (size_t i = 0; i < ndocs; i++) {
		free_page_methods(&docs[i].pg);
		free(docs[i].pg.tok);
		free(docs[i].pg.ch.h);
		free(docs[i].pg.ch.w);
	}
	free(lab_diff);
	free(jdk_diff);
	free(g_al.v);
	free(g_al.sn);
	if (g_rules_out)
		fclose(g_rules_out);
	free(docs);
	free(pairs);
	free(seen_bytes);
	for (size_t i = 0; i < npaths; i++)
		free(paths[i]);
	free(paths);
	return 0;
}
