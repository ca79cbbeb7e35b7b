/* bench_simhash.c - speed of text extraction and simhash on real HTML, and
 * (with --quality) how well the hash separates and matches pages.
 *
 *   bench_simhash [--quality [--all-text]] [--mb N] [DIR]
 *
 * Pages: every *.html / *.htm file under DIR (default: the benchmark corpus
 * /var/tmp/pagededup-corpus/corpus/a when it exists, else /usr/share/doc);
 * when there is none, generated HTML. Speed: N MB of them (default 64),
 * taken in a fixed shuffled order so that the sample mixes the sources, are
 * loaded, then html_extract, simhash_of_page and near_sig_for_record (the
 * signer's whole computation: simhash, shingle set, bands) run over all of
 * them three times on one thread; the best pass counts, in thread CPU time (per core,
 * whatever else the machine runs) and in wall time.
 *
 * --quality, on every page under DIR (under a minute for the 20,000-page
 * corpus), then on CJK pages made from the zh_CN, zh_TW, ja and ko message
 * catalogues in /usr/share/locale (text from many programs, cut into pages
 * of 600 to 3000 characters, deterministically):
 *   - precision: among distinct pages (identical bytes counted once), the
 *     share that have another page within distance SIMHASH_NEAR_DISTANCE,
 *     and the share whose such neighbour has extracted text sharing under
 *     80% / 50% of its 3-shingles (CJK: character pairs) - a match the text
 *     does not support - by feature count;
 *   - recall: one page in 10 is changed in one way at a time and the share
 *     of pairs still within the distance is printed: a new date and
 *     counter, another <footer> or copyright div, an ad block marked and
 *     unmarked, a list of links, markup reformatted, one or three words
 *     changed in the HTML, and one word, three words, one line changed in
 *     the extracted text.
 * --all-text hashes the text of HTML_ALL_TEXT instead (boilerplate kept),
 * to see what dropping it is worth.
 *
 * Every figure is a line "name: value unit".
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
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
#include "near/near.h"
#include "near/simhash.h"

#define DEFAULT_CORPUS "/var/tmp/pagededup-corpus/corpus/a"
#define FALLBACK_DIR "/usr/share/doc"
#define REPEAT 3
#define RECALL_STRIDE 10

/* ---- helpers ---- */

static double now(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "bench_simhash: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
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

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* ---- the page list ---- */

static char **paths;
static size_t npaths, cap_paths;

static int collect(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)ftw;
	size_t n = strlen(path);
	if (type != FTW_F || !S_ISREG(st->st_mode) || st->st_size == 0)
		return 0;
	if ((n < 5 || strcasecmp(path + n - 5, ".html")) && (n < 4 || strcasecmp(path + n - 4, ".htm")))
		return 0;
	if (npaths == cap_paths) {
		cap_paths = cap_paths ? 2 * cap_paths : 1024;
		paths = realloc(paths, cap_paths * sizeof *paths);
		if (!paths) {
			fprintf(stderr, "bench_simhash: out of memory\n");
			exit(1);
		}
	}
	paths[npaths] = strdup(path);
	if (!paths[npaths]) {
		fprintf(stderr, "bench_simhash: out of memory\n");
		exit(1);
	}
	npaths++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- generated pages, when there is no HTML on the machine ---- */

static const char *const gen_words[] = {
	"the", "page", "archive", "crawler", "store", "near", "duplicate", "text", "index",
	"filter", "table", "function", "returns", "value", "system", "file", "data", "user",
	"network", "request", "server", "client", "memory", "buffer", "thread", "lock",
	"version", "release", "document", "section", "example", "error", "option", "module",
};

static char *generate_page(uint64_t *seed, size_t target, size_t *len)
{
	char *b = xmalloc(target + 4096);
	size_t n = (size_t)sprintf(b, "<!DOCTYPE html><html><head><meta charset=\"utf-8\">"
				   "<title>Page %llu</title></head><body><nav><a href=\"/\">Home</a>"
				   "</nav><main>\n", (unsigned long long)rng_next(seed) % 100000);
	while (n < target) {
		n += (size_t)sprintf(b + n, "<p class=\"para\">");
		int words = 20 + (int)(rng_next(seed) % 60);
		for (int w = 0; w < words; w++) {
			uint64_t r = rng_next(seed);
			const char *word = gen_words[r % (sizeof gen_words / sizeof gen_words[0])];
			if (r % 17 == 0)
				n += (size_t)sprintf(b + n, "<a href=\"/%s.html\">%s</a> ", word, word);
			else if (r % 13 == 0)
				n += (size_t)sprintf(b + n, "<code>%s_%u</code> ", word, (unsigned)(r >> 40) % 100);
			else
				n += (size_t)sprintf(b + n, "%s ", word);
		}
		n += (size_t)sprintf(b + n, "</p>\n");
	}
	n += (size_t)sprintf(b + n, "</main><footer>&copy; 2024</footer></body></html>\n");
	*len = n;
	return b;
}

/* ---- speed ---- */

static void bench_speed(const char *src, size_t max_bytes)
{
	size_t cap = 1024, np = 0, total = 0;
	char **pages = xmalloc(cap * sizeof *pages);
	size_t *lens = xmalloc(cap * sizeof *lens);
	uint64_t seed = 1;
	/* a fixed shuffle of the pages, so that the sample mixes the sources */
	size_t *order = xmalloc((npaths ? npaths : 1) * sizeof *order);
	for (size_t i = 0; i < npaths; i++)
		order[i] = i;
	for (size_t i = npaths; i > 1; i--) {
		size_t j = rng_next(&seed) % i, t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; total < max_bytes && (npaths ? i < npaths : true); i++) {
		size_t n = 0;
		char *b = npaths ? slurp(paths[order[i]], &n)
				 : generate_page(&seed, 8192 + rng_next(&seed) % 65536, &n);
		if (!b)
			continue;
		if (np == cap) {
			cap *= 2;
			pages = realloc(pages, cap * sizeof *pages);
			lens = realloc(lens, cap * sizeof *lens);
			if (!pages || !lens) {
				fprintf(stderr, "bench_simhash: out of memory\n");
				exit(1);
			}
		}
		pages[np] = b;
		lens[np++] = n;
		total += n;
	}
	free(order);
	double best_ex = 1e30, best_sh = 1e30, best_sh_wall = 1e30, best_sig = 1e30;
	size_t text = 0, features = 0, low = 0, none = 0;
	for (int rep = 0; rep < REPEAT; rep++) {
		double c0 = now(CLOCK_THREAD_CPUTIME_ID);
		text = 0;
		for (size_t i = 0; i < np; i++) {
			struct html_text t;
			if (html_extract(pages[i], lens[i], 0, &t)) {
				fprintf(stderr, "bench_simhash: html_extract failed\n");
				exit(1);
			}
			text += t.len;
			html_text_free(&t);
		}
		double c1 = now(CLOCK_THREAD_CPUTIME_ID), w1 = now(CLOCK_MONOTONIC);
		features = low = none = 0;
		for (size_t i = 0; i < np; i++) {
			struct simhash_result r;
			if (simhash_of_page(pages[i], lens[i], &r)) {
				fprintf(stderr, "bench_simhash: simhash_of_page failed\n");
				exit(1);
			}
			features += r.features;
			low += r.low_confidence && !r.none;
			none += r.none;
		}
		double c2 = now(CLOCK_THREAD_CPUTIME_ID), w2 = now(CLOCK_MONOTONIC);
		/* the signer's whole computation of a page (simhash, shingle
		 * set and its bands; a sketch only without a set) */
		for (size_t i = 0; i < np; i++) {
			struct near_sig sig;
			if (near_sig_for_record(pages[i], lens[i], &sig)) {
				fprintf(stderr, "bench_simhash: near_sig_for_record failed\n");
				exit(1);
			}
		}
		double c3 = now(CLOCK_THREAD_CPUTIME_ID);
		if (c3 - c2 < best_sig)
			best_sig = c3 - c2;
		if (c1 - c0 < best_ex)
			best_ex = c1 - c0;
		if (c2 - c1 < best_sh)
			best_sh = c2 - c1;
		if (w2 - w1 < best_sh_wall)
			best_sh_wall = w2 - w1;
	}
	printf("source: %s\n", src);
	printf("pages: %zu pages\n", np);
	printf("html_mb: %.1f MB\n", total / 1e6);
	printf("text_mb: %.1f MB\n", text / 1e6);
	printf("features_per_page: %.0f features\n", np ? (double)features / np : 0);
	printf("low_confidence_pages: %zu pages\n", low);
	printf("no_simhash_pages: %zu pages\n", none);
	printf("extract_mb_per_s: %.0f MB/s\n", total / 1e6 / best_ex);
	printf("simhash_mb_per_s: %.0f MB/s\n", total / 1e6 / best_sh);
	printf("simhash_wall_mb_per_s: %.0f MB/s\n", total / 1e6 / best_sh_wall);
	printf("simhash_pages_per_s: %.0f pages/s\n", np / best_sh);
	printf("signature_mb_per_s: %.0f MB/s\n", total / 1e6 / best_sig);
	printf("signature_ms_per_page: %.3f ms\n", np ? best_sig * 1e3 / np : 0);
	for (size_t i = 0; i < np; i++)
		free(pages[i]);
	free(pages);
	free(lens);
}

/* ---- quality: reference similarity of two texts ---- */

static bool cjk_mode;
static unsigned hash_flags; /* html_extract flags of the hashed text */

/* simhash_of_page, with hash_flags. */
static int hash_page(const void *buf, size_t len, struct simhash_result *r)
{
	struct html_text t;
	int rc = html_extract(buf, len, hash_flags, &t);
	if (rc)
		return rc;
	if (t.binary) {
		memset(r, 0, sizeof *r);
		r->none = r->low_confidence = true;
		return 0;
	}
	rc = simhash_of_text(t.text, t.len, r);
	html_text_free(&t);
	return rc;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void push_u64(uint64_t **v, size_t *k, size_t *cap, uint64_t x)
{
	if (*k == *cap) {
		*cap = *cap ? 2 * *cap : 256;
		*v = realloc(*v, *cap * sizeof **v);
		if (!*v) {
			fprintf(stderr, "bench_simhash: out of memory\n");
			exit(1);
		}
	}
	(*v)[(*k)++] = x;
}

/* The set of word 3-shingles (words split at spaces and line ends) of the
 * extracted text, or of its character pairs in CJK mode, sorted. */
static uint64_t *shingle_set(const char *page, size_t len, size_t *count)
{
	struct html_text t;
	*count = 0;
	if (html_extract(page, len, 0, &t) || !t.text)
		return NULL;
	size_t cap = 0, k = 0;
	uint64_t *v = NULL;
	const unsigned char *s = (const unsigned char *)t.text;
	if (cjk_mode) {
		uint64_t prev = 0;
		for (size_t i = 0; i < t.len;) {
			size_t n = s[i] < 0x80 ? 1 : s[i] < 0xE0 ? 2 : s[i] < 0xF0 ? 3 : 4;
			uint64_t cp = 0;
			for (size_t j = 0; j < n && i + j < t.len; j++)
				cp = cp << 8 | s[i + j];
			bool blank = s[i] == ' ' || s[i] == '\n';
			i += n;
			if (blank) {
				prev = 0;
				continue;
			}
			if (prev) {
				uint64_t pair[2] = {prev, cp};
				push_u64(&v, &k, &cap, XXH3_64bits(pair, sizeof pair));
			}
			prev = cp;
		}
	} else {
		uint64_t w[3] = {0};
		size_t nw = 0;
		for (size_t i = 0; i < t.len;) {
			while (i < t.len && (s[i] == ' ' || s[i] == '\n'))
				i++;
			size_t j = i;
			while (j < t.len && s[j] != ' ' && s[j] != '\n')
				j++;
			if (j > i) {
				w[0] = w[1];
				w[1] = w[2];
				w[2] = XXH3_64bits(s + i, j - i);
				if (++nw >= 3)
					push_u64(&v, &k, &cap, XXH3_64bits(w, sizeof w));
			}
			i = j;
		}
	}
	html_text_free(&t);
	if (!k)
		return v;
	qsort(v, k, sizeof *v, cmp_u64);
	size_t u = 0;
	for (size_t i = 0; i < k; i++)
		if (!u || v[u - 1] != v[i])
			v[u++] = v[i];
	*count = u;
	return v;
}

static double jaccard_of(const char *path_a, const char *path_b)
{
	size_t la, lb, na, nb;
	char *a = slurp(path_a, &la), *b = slurp(path_b, &lb);
	if (!a || !b) {
		free(a);
		free(b);
		return 1.0;
	}
	uint64_t *x = shingle_set(a, la, &na), *y = shingle_set(b, lb, &nb);
	size_t i = 0, j = 0, both = 0;
	while (i < na && j < nb) {
		if (x[i] == y[j]) {
			both++;
			i++;
			j++;
		} else if (x[i] < y[j]) {
			i++;
		} else {
			j++;
		}
	}
	free(a);
	free(b);
	free(x);
	free(y);
	return na + nb - both ? (double)both / (double)(na + nb - both) : 1.0;
}

/* ---- quality: perturbations ---- */

struct buf {
	char *p;
	size_t n;
};

static struct buf copy_of(const char *s, size_t n)
{
	struct buf b = {xmalloc(n + 1), n};
	memcpy(b.p, s, n);
	b.p[n] = 0;
	return b;
}

static struct buf splice(const char *s, size_t n, size_t at, const char *ins)
{
	size_t k = strlen(ins);
	struct buf b = {xmalloc(n + k + 1), n + k};
	memcpy(b.p, s, at);
	memcpy(b.p + at, ins, k);
	memcpy(b.p + at + k, s + at, n - at);
	b.p[b.n] = 0;
	return b;
}

static size_t body_open(const char *s, size_t n)
{
	const char *p = strcasestr(s, "<body");
	const char *q = p ? memchr(p, '>', (size_t)(s + n - p)) : NULL;
	return q ? (size_t)(q - s) + 1 : 0;
}

static size_t body_close(const char *s, size_t n)
{
	const char *last = NULL;
	for (const char *q = s; (q = strcasestr(q, "</body")); q++)
		last = q;
	return last ? (size_t)(last - s) : n;
}

/* After the first </p> (else </div>) past fraction f of the page. */
static size_t para_end(const char *s, size_t n, double f)
{
	const char *p = strstr(s + (size_t)(n * f), "</p>");
	if (p)
		return (size_t)(p - s) + 4;
	p = strstr(s + (size_t)(n * f), "</div>");
	return p ? (size_t)(p - s) + 6 : body_close(s, n);
}

/* rot13 the first word of 5+ letters in text (not in a tag) after
 * para_end(f). */
static void edit_word(char *s, size_t n, double f)
{
	bool tag = false;
	for (size_t i = para_end(s, n, f); i < n; i++) {
		if (s[i] == '<' || s[i] == '>') {
			tag = s[i] == '<';
			continue;
		}
		if (tag)
			continue;
		size_t j = i;
		while (j < n && (unsigned)((s[j] | 32) - 'a') < 26)
			j++;
		if (j - i >= 5) {
			for (size_t k = i; k < j; k++) {
				char base = (s[k] & 32) ? 'a' : 'A';
				s[k] = (char)(base + (s[k] - base + 13) % 26);
			}
			return;
		}
		if (j > i)
			i = j - 1;
	}
}

/* Markup reformatted as a pretty-printer would: white space runs outside
 * <pre> become a line break and an indent, block tags go on lines of their
 * own. The rendered text is the same. */
static bool block_tag_at(const char *p)
{
	static const char *const t[] = {
		"div", "p>", "p ", "li", "ul", "ol", "tr", "td", "th", "table", "h1", "h2",
		"h3", "h4", "section", "dl", "dt", "dd", "br", "hr", "body", "head", "meta",
		"link", "title", "nav", "header", "footer", "main",
	};
	if (*p == '/')
		p++;
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strncasecmp(p, t[i], strlen(t[i])))
			return true;
	return false;
}

static struct buf reformat(const char *s, size_t n)
{
	struct buf b = {xmalloc(5 * n + 1), 0};
	bool pre = false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '<' && !strncasecmp(s + i, "<pre", 4))
			pre = true;
		if (s[i] == '<' && !strncasecmp(s + i, "</pre", 5))
			pre = false;
		if (!pre && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t')) {
			while (i + 1 < n && (s[i + 1] == ' ' || s[i + 1] == '\n' || s[i + 1] == '\t'))
				i++;
			memcpy(b.p + b.n, "\n    ", 5);
			b.n += 5;
			continue;
		}
		b.p[b.n++] = s[i];
		if (!pre && s[i] == '>' && i + 2 < n && s[i + 1] == '<' && block_tag_at(s + i + 2)) {
			memcpy(b.p + b.n, "\n  ", 3);
			b.n += 3;
		}
	}
	b.p[b.n] = 0;
	return b;
}

static const char *const AD_TEXT =
	"<p>Sponsored: get the best deals on laptops, phones and tablets today. Free "
	"shipping on orders over fifty dollars. Limited time offer, subscribe to our "
	"newsletter for exclusive coupons and early access to seasonal sales near you.</p>";
static const char *const LINKS =
	"<ul><li><a href=\"/\">Home</a></li><li><a href=\"/news\">News and announcements</a>"
	"</li><li><a href=\"/blog\">Our engineering blog</a></li><li><a href=\"/about\">About"
	" the company</a></li><li><a href=\"/jobs\">Careers and open positions</a></li><li>"
	"<a href=\"/contact\">Contact us</a></li><li><a href=\"/privacy\">Privacy policy</a>"
	"</li></ul>";

enum change {
	CH_DATE, CH_FOOTER, CH_COPYRIGHT, CH_AD_MARKED, CH_AD_PLAIN, CH_LINKS, CH_REFORMAT,
	CH_WORD1, CH_WORD3, CH_TEXT_WORD1, CH_TEXT_WORD3, CH_TEXT_LINE, NCHANGES
};

static const char *const change_name[NCHANGES] = {
	"date", "footer", "copyright_div", "ad_marked", "ad_unmarked", "links_added",
	"reformat", "html_word1", "html_word3", "text_word1", "text_word3", "text_line",
};

/* Two versions of page s for a change made to the HTML. */
static void change_html(enum change c, const char *s, size_t n, struct buf *a, struct buf *b)
{
	char ins[1024];
	switch (c) {
	case CH_DATE:
		*a = splice(s, n, body_open(s, n), "<p>Updated 2024-05-17 12:34, 18234 views</p>");
		*b = splice(s, n, body_open(s, n), "<p>Updated 2025-01-02 08:10, 19999 views</p>");
		return;
	case CH_FOOTER:
	case CH_COPYRIGHT: {
		const char *open = c == CH_FOOTER ? "<footer>" : "<div class=\"copyright\">";
		const char *close = c == CH_FOOTER ? "</footer>" : "</div>";
		snprintf(ins, sizeof ins, "%s<p>Copyright 2023 Example Corp. All rights reserved. "
			 "Terms of use and privacy policy apply.</p>%s", open, close);
		*a = splice(s, n, body_close(s, n), ins);
		snprintf(ins, sizeof ins, "%s<p>Powered by a blog engine, hosted by Another Hosting "
			 "Ltd. Follow us for daily updates from the team.</p>%s", open, close);
		*b = splice(s, n, body_close(s, n), ins);
		return;
	}
	case CH_AD_MARKED:
	case CH_AD_PLAIN:
		snprintf(ins, sizeof ins, "<div%s>%s</div>", c == CH_AD_MARKED ? " class=\"ad\"" : "",
			 AD_TEXT);
		*a = copy_of(s, n);
		*b = splice(s, n, para_end(s, n, 0.5), ins);
		return;
	case CH_LINKS:
		*a = copy_of(s, n);
		*b = splice(s, n, body_open(s, n), LINKS);
		return;
	case CH_REFORMAT:
		*a = copy_of(s, n);
		*b = reformat(s, n);
		return;
	case CH_WORD1:
	case CH_WORD3:
		*a = copy_of(s, n);
		*b = copy_of(s, n);
		if (c == CH_WORD1) {
			edit_word(b->p, b->n, 0.5);
		} else {
			for (int k = 1; k <= 3; k++)
				edit_word(b->p, b->n, 0.25 * k);
		}
		return;
	default:
		return;
	}
}

/* Change the extracted text itself: a word (a letter, or a CJK
 * character, one code point up) or a line dropped. */
static void change_text(enum change c, char *t, size_t *len)
{
	if (c == CH_TEXT_LINE) {
		size_t m = *len / 2, e;
		while (m < *len && t[m] != '\n')
			m++;
		for (e = m + 1; e < *len && t[e] != '\n'; e++)
			;
		if (e < *len) {
			memmove(t + m, t + e, *len - e);
			*len -= e - m;
		}
		return;
	}
	int reps = c == CH_TEXT_WORD1 ? 1 : 3;
	for (int r = 0; r < reps; r++) {
		size_t m = (size_t)(*len * (reps == 1 ? 0.5 : 0.25 * (r + 1)));
		if (cjk_mode) {
			unsigned char *u = (unsigned char *)t;
			while (m + 2 < *len && !(u[m] >= 0xE4 && u[m] <= 0xE9))
				m++;
			if (m + 2 < *len)
				u[m + 2] = u[m + 2] == 0xBF ? 0x80 : (unsigned char)(u[m + 2] + 1);
			continue;
		}
		while (m < *len && (unsigned)((t[m] | 32) - 'a') >= 26)
			m++;
		for (size_t e = m; e < *len && (unsigned)((t[e] | 32) - 'a') < 26; e++)
			t[e] = (t[e] | 32) == 'z' ? (char)(t[e] - 25) : (char)(t[e] + 1);
	}
}

/* ---- quality ---- */

#define NBUCKETS 4
static const unsigned bucket_edge[NBUCKETS + 1] = {0, SIMHASH_MIN_FEATURES, 128, 256, UINT32_MAX};

static unsigned bucket_of(uint32_t features)
{
	unsigned b = 0;
	while (b + 1 < NBUCKETS && features >= bucket_edge[b + 1])
		b++;
	return b;
}

static void quality(const char *label)
{
	uint64_t *hash = xmalloc(npaths * sizeof *hash), *bytes_hash = xmalloc(npaths * sizeof *bytes_hash);
	uint32_t *feat = xmalloc(npaths * sizeof *feat);
	bool *ok = xmalloc(npaths * sizeof *ok);
	for (size_t i = 0; i < npaths; i++) {
		size_t n;
		char *b = slurp(paths[i], &n);
		struct simhash_result r = {.none = true};
		ok[i] = b && !hash_page(b, n, &r) && !r.none;
		hash[i] = r.hash;
		feat[i] = r.features;
		bytes_hash[i] = b ? XXH3_64bits(b, n) : 0;
		free(b);
	}
	/* identical pages once */
	uint64_t *sorted = xmalloc(npaths * 2 * sizeof *sorted);
	for (size_t i = 0; i < npaths; i++) {
		sorted[2 * i] = bytes_hash[i];
		sorted[2 * i + 1] = i;
	}
	qsort(sorted, npaths, 2 * sizeof *sorted, cmp_u64);
	for (size_t i = 1; i < npaths; i++)
		if (sorted[2 * i] == sorted[2 * i - 2])
			ok[sorted[2 * i + 1]] = false;
	free(sorted);

	/* precision */
	uint8_t *flag = calloc(npaths, 1); /* 1: a neighbour, 2: J < .8, 4: J < .5 */
	size_t distinct = 0, pairs = 0;
	if (!flag) {
		fprintf(stderr, "bench_simhash: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < npaths; i++) {
		if (!ok[i])
			continue;
		distinct++;
		for (size_t j = i + 1; j < npaths; j++) {
			if (!ok[j] || simhash_distance(hash[i], hash[j]) > SIMHASH_NEAR_DISTANCE)
				continue;
			pairs++;
			double J = jaccard_of(paths[i], paths[j]);
			uint8_t f = (uint8_t)(1 | (J < 0.8 ? 2 : 0) | (J < 0.5 ? 4 : 0));
			flag[i] |= f;
			flag[j] |= f;
		}
	}
	printf("%s_distinct_pages: %zu pages\n", label, distinct);
	printf("%s_pairs_within_%d: %zu pairs\n", label, SIMHASH_NEAR_DISTANCE, pairs);
	for (unsigned b = 0; b < NBUCKETS; b++) {
		size_t c = 0, nb = 0, j8 = 0, j5 = 0;
		for (size_t i = 0; i < npaths; i++) {
			if (!ok[i] || bucket_of(feat[i]) != b)
				continue;
			c++;
			nb += flag[i] & 1;
			j8 += (flag[i] >> 1) & 1;
			j5 += (flag[i] >> 2) & 1;
		}
		char name[64];
		if (b + 1 < NBUCKETS)
			snprintf(name, sizeof name, "%u_%u", bucket_edge[b], bucket_edge[b + 1] - 1);
		else
			snprintf(name, sizeof name, "%u_up", bucket_edge[b]);
		printf("%s_pages_features_%s: %zu pages\n", label, name, c);
		if (!c)
			continue;
		printf("%s_with_neighbour_features_%s: %.2f %%\n", label, name, 100.0 * nb / c);
		printf("%s_collide_j80_features_%s: %.2f %%\n", label, name, 100.0 * j8 / c);
		printf("%s_collide_j50_features_%s: %.2f %%\n", label, name, 100.0 * j5 / c);
	}
	free(flag);

	/* recall */
	size_t tried[NCHANGES][NBUCKETS] = {{0}}, kept[NCHANGES][NBUCKETS] = {{0}};
	for (size_t i = 0; i < npaths; i += RECALL_STRIDE) {
		if (!ok[i])
			continue;
		size_t n;
		char *s = slurp(paths[i], &n);
		if (!s)
			continue;
		struct html_text t;
		if (html_extract(s, n, hash_flags, &t) || !t.text) {
			free(s);
			continue;
		}
		for (int c = 0; c < NCHANGES; c++) {
			struct simhash_result ra, rb;
			if (cjk_mode && (c == CH_WORD1 || c == CH_WORD3))
				continue; /* ASCII words: not in CJK pages */
			if (c >= CH_TEXT_WORD1) {
				struct buf b = copy_of(t.text, t.len);
				change_text((enum change)c, b.p, &b.n);
				simhash_of_text(t.text, t.len, &ra);
				simhash_of_text(b.p, b.n, &rb);
				free(b.p);
			} else {
				struct buf a, b;
				change_html((enum change)c, s, n, &a, &b);
				hash_page(a.p, a.n, &ra);
				hash_page(b.p, b.n, &rb);
				free(a.p);
				free(b.p);
			}
			unsigned bk = bucket_of(ra.features);
			tried[c][bk]++;
			kept[c][bk] += simhash_distance(ra.hash, rb.hash) <= SIMHASH_NEAR_DISTANCE;
		}
		html_text_free(&t);
		free(s);
	}
	for (int c = 0; c < NCHANGES; c++) {
		size_t all_t = 0, all_k = 0;
		for (unsigned b = 0; b < NBUCKETS; b++) {
			all_t += tried[c][b];
			all_k += kept[c][b];
		}
		if (!all_t)
			continue;
		printf("%s_recall_%s: %.1f %% (features <%u: %.1f %%, %u-%u: %.1f %%, %u-%u: %.1f %%, "
		       "%u+: %.1f %%)\n",
		       label, change_name[c], 100.0 * all_k / all_t, bucket_edge[1],
		       tried[c][0] ? 100.0 * kept[c][0] / tried[c][0] : 0.0, bucket_edge[1],
		       bucket_edge[2] - 1, tried[c][1] ? 100.0 * kept[c][1] / tried[c][1] : 0.0,
		       bucket_edge[2], bucket_edge[3] - 1,
		       tried[c][2] ? 100.0 * kept[c][2] / tried[c][2] : 0.0, bucket_edge[3],
		       tried[c][3] ? 100.0 * kept[c][3] / tried[c][3] : 0.0);
	}
	free(hash);
	free(bytes_hash);
	free(feat);
	free(ok);
}

/* ---- CJK pages from message catalogues ---- */

static uint32_t mo_u32(const unsigned char *p, bool le)
{
	return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
		  : (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

static size_t count_cjk(const char *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i + 2 < n; i++)
		k += (unsigned char)s[i] >= 0xE3 && (unsigned char)s[i] <= 0xED;
	return k;
}

/* Append the translations of one .mo file to *text as lines. */
static void mo_text(const char *path, struct buf *text)
{
	size_t n;
	unsigned char *d = (unsigned char *)slurp(path, &n);
	if (!d || n < 28) {
		free(d);
		return;
	}
	uint32_t magic = mo_u32(d, true);
	bool le = magic == 0x950412de;
	if (!le && mo_u32(d, false) != 0x950412de) {
		free(d);
		return;
	}
	uint32_t count = mo_u32(d + 8, le), table = mo_u32(d + 16, le);
	for (uint32_t i = 0; i < count && (size_t)table + 8 * (i + 1) <= n; i++) {
		uint32_t len = mo_u32(d + table + 8 * i, le), off = mo_u32(d + table + 8 * i + 4, le);
		if ((size_t)off + len > n || !len || !memcmp(d + off, "Project-Id", 10))
			continue;
		text->p = realloc(text->p, text->n + len + 2);
		if (!text->p) {
			fprintf(stderr, "bench_simhash: out of memory\n");
			exit(1);
		}
		for (uint32_t k = 0; k < len; k++) {
			unsigned char c = d[off + k];
			text->p[text->n++] = (char)(c == 0 || c == '<' || c == '&' ? '\n' : c);
		}
		text->p[text->n++] = '\n';
	}
	free(d);
}

static void make_cjk_pages(const char *dir)
{
	static const char *const langs[] = {"zh_CN", "zh_TW", "ja", "ko"};
	uint64_t seed = 7;
	size_t made = 0;
	for (size_t l = 0; l < sizeof langs / sizeof langs[0]; l++) {
		char path[4096];
		snprintf(path, sizeof path, "/usr/share/locale/%s/LC_MESSAGES", langs[l]);
		struct dirent **ents;
		int ne = scandir(path, &ents, NULL, alphasort);
		for (int e = 0; e < ne; e++) {
			size_t nl = strlen(ents[e]->d_name);
			if (nl > 3 && !strcmp(ents[e]->d_name + nl - 3, ".mo")) {
				struct buf text = {NULL, 0};
				snprintf(path, sizeof path, "/usr/share/locale/%s/LC_MESSAGES/%s", langs[l],
					 ents[e]->d_name);
				mo_text(path, &text);
				for (size_t i = 0; i < text.n;) {
					size_t want = 1200 + rng_next(&seed) % 5400; /* bytes: 600-3000 chars */
					size_t m = text.n - i < want ? text.n - i : want;
					while (i + m < text.n && ((unsigned char)text.p[i + m] & 0xC0) == 0x80)
						m++;
					if (count_cjk(text.p + i, m) >= 300) {
						snprintf(path, sizeof path, "%s/%s_%04zu.html", dir, langs[l], made++);
						FILE *f = fopen(path, "w");
						if (f) {
							fprintf(f, "<html><head><meta charset=\"utf-8\"><title>%s</title>"
								"</head><body><div class=\"content\"><p>",
								ents[e]->d_name);
							for (size_t k = 0; k < m; k++) {
								if (text.p[i + k] == '\n')
									fputs("</p>\n<p>", f);
								else
									fputc(text.p[i + k], f);
							}
							fputs("</p></div></body></html>\n", f);
							fclose(f);
						}
					}
					i += m;
				}
				free(text.p);
			}
			free(ents[e]);
		}
		if (ne >= 0)
			free(ents);
	}
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

int main(int argc, char **argv)
{
	bool want_quality = false;
	size_t mb = 64;
	const char *dir = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quality")) {
			want_quality = true;
		} else if (!strcmp(argv[i], "--all-text")) {
			hash_flags = HTML_ALL_TEXT;
		} else if (!strcmp(argv[i], "--mb") && i + 1 < argc) {
			mb = strtoul(argv[++i], NULL, 10);
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "usage: bench_simhash [--quality [--all-text]] [--mb N] [DIR]\n");
			return 2;
		} else {
			dir = argv[i];
		}
	}
	struct stat st;
	if (!dir)
		dir = !stat(DEFAULT_CORPUS, &st) ? DEFAULT_CORPUS : FALLBACK_DIR;
	if (nftw(dir, collect, 32, FTW_PHYS) && errno != ENOENT)
		fprintf(stderr, "bench_simhash: walking %s: %s\n", dir, strerror(errno));
	qsort(paths, npaths, sizeof *paths, cmp_str);
	bench_speed(npaths ? dir : "generated HTML", mb << 20);
	if (want_quality && npaths) {
		quality("doc");
		for (size_t i = 0; i < npaths; i++)
			free(paths[i]);
		npaths = 0;
		char tmp[] = "/tmp/bench_simhash.XXXXXX";
		if (mkdtemp(tmp)) {
			make_cjk_pages(tmp);
			nftw(tmp, collect, 32, FTW_PHYS);
			qsort(paths, npaths, sizeof *paths, cmp_str);
			if (npaths) {
				cjk_mode = true;
				quality("cjk");
			}
			nftw(tmp, remove_entry, 32, FTW_DEPTH | FTW_PHYS);
		}
	}
	for (size_t i = 0; i < npaths; i++)
		free(paths[i]);
	free(paths);
	return 0;
}
