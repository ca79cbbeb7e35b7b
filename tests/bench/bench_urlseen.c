/* bench_urlseen.c - URL lists for the URL-seen benchmark, and where the time
 * of `pagededup urlseen` goes.
 *
 *   bench_urlseen gen DISTINCT REPEATS [FIRST [SEED]]   > list
 *   bench_urlseen stages FILE [LINES]
 *
 * gen writes DISTINCT distinct URLs (numbers FIRST .. FIRST+DISTINCT-1 of
 * one family, distinct also after normalisation) with REPEATS repeats of
 * earlier ones spread among them, one a line. The family imitates a crawl:
 * hosts with Zipf-distributed sizes (a few sites hold most pages), http and
 * https, subdomains, a dozen path shapes (dated news articles with slugs,
 * product pages with tracking parameters, wiki titles, paginated listings,
 * searches, forum threads, hashed static files, PHP queries, API paths),
 * each carrying the URL's number, scrambled and in base 36, so that every
 * number gives one URL. A repeat is a link to a page seen before: half to a
 * recent one (the last 100,000), half to a popular one (earlier numbers
 * more likely); one repeat in five is written in another form that
 * normalises to the same URL (host case, default port, fragment, "./"
 * segment, an encoded letter). Numbers from DISTINCT + FIRST on never
 * occurred: `gen M 0 N` makes M URLs that a filter holding `gen N R` has
 * not seen, to measure its false-positive rate.
 *
 * stages reads FILE (its first LINES lines, default all) into memory and
 * times, per URL: finding lines; + normalising (url_normal_form, as the
 * command does: a normal URL is not copied); + hashing (XXH3-128); + the
 * filter (a temporary one, tested and added in batches of 8192 as the
 * command does). Times are CPU time. Figures as "name: value unit".
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "urlseen/bitfilter.h"
#include "urlseen/url.h"

/* CPU time of this process: the machine may be running other work, and
 * the goals are per core. */
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t z)
{
	z += UINT64_C(0x9E3779B97F4A7C15);
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static uint64_t rng(uint64_t *s)
{
	return mix((*s)++);
}

/* A uniform double in [0, 1). */
static double unit(uint64_t *s)
{
	return (double)(rng(s) >> 11) * 0x1.0p-53;
}

static const char *words[] = {
	"news", "world", "market", "city", "health", "science", "sports", "travel", "music",
	"film", "book", "game", "china", "europe", "energy", "climate", "water", "school",
	"police", "court", "election", "vote", "bank", "price", "oil", "gold", "river", "storm",
	"fire", "road", "train", "airport", "hospital", "doctor", "virus", "study", "report",
	"data", "cloud", "phone", "apple", "linux", "open", "source", "code", "python", "rust",
	"java", "server", "network", "secure", "update", "release", "review", "guide", "best",
	"top", "new", "old", "how", "why", "what", "when", "first", "last", "big", "small",
	"red", "blue", "green", "black", "white", "summer", "winter", "spring", "autumn",
	"north", "south", "east", "west", "local", "global", "daily", "weekly", "live", "video",
	"photo", "art", "food", "recipe", "chicken", "rice", "tea", "coffee", "garden", "house",
	"home", "car", "bike", "shoe", "shirt", "dress", "watch", "camera", "laptop", "table",
	"chair", "light", "lamp", "paper", "pen", "star", "moon", "sun", "sea", "lake",
	"mountain", "forest", "island", "village", "market", "union", "party", "leader",
	"minister", "team", "coach", "player", "match", "cup", "league", "final", "record",
};
#define NWORDS (sizeof words / sizeof words[0])

static const char *tlds[] = { "com", "com", "com", "com", "org", "net", "de", "cn", "co.uk",
			      "io", "ru", "jp", "fr", "edu", "gov", "com.cn", "info", "nl",
			      "it", "es", "com.br", "in", "pl", "ca" };
static const char *subs[] = { "www", "www", "www", "www", "blog", "news", "shop", "m", "en",
			      "forum", "docs", "cdn", "static", "store", "wiki", "api" };

/* Scramble a URL number (a bijection on 0 .. 2^48-1: multiply by an odd
 * constant, xor-shift), so that IDs look random yet never collide. */
static uint64_t scramble(uint64_t i)
{
	const uint64_t mask = (UINT64_C(1) << 48) - 1;
	i = (i * UINT64_C(0x5DEECE66D)) & mask;
	i ^= i >> 21;
	i = (i * UINT64_C(0x2545F4914F6CDD1D)) & mask;
	i ^= i >> 17;
	return i;
}

static char *put(char *p, const char *s)
{
	size_t n = strlen(s);
	memcpy(p, s, n);
	return p + n;
}

static char *put_u(char *p, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *put_b36(char *p, uint64_t v)
{
	char tmp[16];
	int n = 0;
	do {
		tmp[n++] = "0123456789abcdefghijklmnopqrstuvwxyz"[v % 36];
		v /= 36;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

static char *put_hex(char *p, uint64_t v, int digits)
{
	for (int i = digits - 1; i >= 0; i--)
		*p++ = "0123456789abcdef"[(v >> (4 * i)) & 15];
	return p;
}

static char *put_slug(char *p, uint64_t *s, int nw, char sep)
{
	for (int i = 0; i < nw; i++) {
		if (i)
			*p++ = sep;
		p = put(p, words[rng(s) % NWORDS]);
	}
	return p;
}

/* Host number h of nhosts: its name and scheme depend on h alone. */
static char *put_host(char *p, uint64_t h, bool *https)
{
	uint64_t s = mix(h ^ UINT64_C(0x686f7374));
	*https = rng(&s) % 5 != 0;
	p = put(p, subs[rng(&s) % (sizeof subs / sizeof subs[0])]);
	*p++ = '.';
	p = put(p, words[rng(&s) % NWORDS]);
	if (rng(&s) % 2) {
		if (rng(&s) % 3)
			*p++ = '-';
		p = put(p, words[rng(&s) % NWORDS]);
	}
	p = put_u(p, h); /* keeps host names distinct */
	*p++ = '.';
	return put(p, tlds[rng(&s) % (sizeof tlds / sizeof tlds[0])]);
}

/* Zipf-like host choice: host = nhosts^u - 1 for uniform u, so that host h
 * gets about 1/(h+1) of the pages. */
static uint64_t pick_host(uint64_t *s, uint64_t nhosts)
{
	double u = unit(s);
	uint64_t h = (uint64_t)pow((double)nhosts, u) - 1;
	return h < nhosts ? h : nhosts - 1;
}

struct family {
	uint64_t seed, nhosts;
};

/* URL number i of the family, into p (room for 512 bytes); returns its end. */
static char *url_of(const struct family *fam, uint64_t i, char *p)
{
	uint64_t s = mix(i ^ fam->seed), id = scramble(i);
	bool https;
	uint64_t h = pick_host(&s, fam->nhosts);
	char host[128], *he = put_host(host, h, &https);
	*he = 0;
	p = put(p, https ? "https://" : "http://");
	p = put(p, host);
	unsigned shape = (unsigned)(rng(&s) % 12);
	switch (shape) {
	case 0: /* dated article */
		p = put(p, "/");
		p = put(p, words[rng(&s) % NWORDS]);
		*p++ = '/';
		p = put_u(p, 2005 + rng(&s) % 20);
		*p++ = '/';
		p = put_u(p, 10 + rng(&s) % 3);
		*p++ = '/';
		p = put_u(p, 10 + rng(&s) % 19);
		*p++ = '/';
		p = put_slug(p, &s, 3 + (int)(rng(&s) % 5), '-');
		*p++ = '-';
		p = put_b36(p, id);
		p = put(p, ".html");
		break;
	case 1: /* product with tracking */
		p = put(p, "/product/");
		p = put_b36(p, id);
		p = put(p, "?ref=");
		p = put(p, words[rng(&s) % NWORDS]);
		if (rng(&s) % 2) {
			p = put(p, "&utm_source=");
			p = put(p, words[rng(&s) % NWORDS]);
			p = put(p, "&utm_medium=email");
		}
		break;
	case 2: /* paginated listing */
		p = put(p, "/category/");
		p = put_slug(p, &s, 2, '-');
		p = put(p, "/page/");
		p = put_b36(p, id);
		break;
	case 3: /* wiki title */
		p = put(p, "/wiki/");
		p = put_slug(p, &s, 1 + (int)(rng(&s) % 3), '_');
		*p++ = '_';
		p = put_b36(p, id);
		break;
	case 4: /* user profile */
		p = put(p, "/user/");
		p = put_b36(p, id);
		p = put(p, rng(&s) % 2 ? "/profile" : "/posts");
		break;
	case 5: /* search */
		p = put(p, "/search?q=");
		p = put_slug(p, &s, 1 + (int)(rng(&s) % 3), '+');
		p = put(p, "&page=");
		p = put_u(p, 1 + rng(&s) % 20);
		p = put(p, "&sid=");
		p = put_b36(p, id);
		break;
	case 6: /* hashed static file */
		p = put(p, "/static/");
		p = put(p, rng(&s) % 2 ? "js/app." : "css/main.");
		p = put_hex(p, rng(&s), 8);
		*p++ = '.';
		p = put_b36(p, id);
		p = put(p, rng(&s) % 2 ? ".js" : ".css");
		break;
	case 7: /* blog post */
		p = put(p, "/blog/");
		p = put_slug(p, &s, 2 + (int)(rng(&s) % 6), '-');
		*p++ = '-';
		p = put_b36(p, id);
		*p++ = '/';
		break;
	case 8: /* forum thread */
		p = put(p, "/forum/thread-");
		p = put_b36(p, id);
		*p++ = '-';
		p = put_u(p, 1 + rng(&s) % 9);
		p = put(p, ".html");
		break;
	case 9: /* PHP query */
		p = put(p, "/index.php?id=");
		p = put_b36(p, id);
		p = put(p, rng(&s) % 2 ? "&lang=en" : "&lang=zh-cn");
		break;
	case 10: /* image */
		p = put(p, "/img/");
		p = put_hex(p, rng(&s), 2);
		*p++ = '/';
		p = put_b36(p, id);
		p = put(p, ".jpg");
		break;
	default: /* API */
		p = put(p, "/api/v2/");
		p = put(p, words[rng(&s) % NWORDS]);
		p = put(p, "/items/");
		p = put_b36(p, id);
		break;
	}
	return p;
}

/* Another spelling of the URL in [u, e) with the same normal form. */
static char *variant(char *u, char *e, uint64_t *s)
{
	char *host = strstr(u, "://") + 3, *path = host;
	while (path < e && *path != '/')
		path++;
	switch (rng(s) % 5) {
	case 0: /* host in capitals */
		for (char *c = host; c < path; c++)
			if (*c >= 'a' && *c <= 'z')
				*c = (char)(*c - 32);
		return e;
	case 1: { /* the default port */
		const char *port = u[4] == 's' ? ":443" : ":80";
		size_t n = strlen(port);
		memmove(path + n, path, (size_t)(e - path));
		memcpy(path, port, n);
		return e + n;
	}
	case 2: /* a fragment */
		return put(e, "#section-2");
	case 3: /* a "./" segment */
		memmove(path + 2, path, (size_t)(e - path));
		memcpy(path + 1, "./", 2);
		return e + 2;
	default: { /* a letter of the path percent-encoded, as %xx */
		for (char *c = path + 1; c < e; c++) {
			if (*c >= 'a' && *c <= 'z') {
				char ch = *c;
				memmove(c + 3, c + 1, (size_t)(e - c - 1));
				c[0] = '%';
				c[1] = "0123456789abcdef"[(unsigned char)ch >> 4];
				c[2] = "0123456789abcdef"[ch & 15];
				return e + 2;
			}
		}
		return e;
	}
	}
}

#define RECENT 100000

static int cmd_gen(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: bench_urlseen gen DISTINCT REPEATS [FIRST [SEED]]\n");
		return 2;
	}
	uint64_t distinct = (uint64_t)strtod(argv[2], NULL), repeats = (uint64_t)strtod(argv[3], NULL);
	uint64_t first = argc > 4 ? (uint64_t)strtod(argv[4], NULL) : 0;
	struct family fam = { .seed = argc > 5 ? strtoull(argv[5], NULL, 0) : 2024 };
	/* hosts: about one per 200 pages of the whole list, at least 1000 */
	uint64_t all = first + distinct;
	fam.nhosts = all / 200 > 1000 ? all / 200 : 1000;
	if (first)
		fam.nhosts = first / 200 > 1000 ? first / 200 : 1000;

	static char out[1 << 20];
	size_t w = 0;
	uint64_t s = mix(fam.seed ^ first ^ UINT64_C(0x726570)), made = 0, rep = 0;
	while (made < distinct || rep < repeats) {
		uint64_t left_new = distinct - made, left_rep = repeats - rep;
		bool is_new = made == 0 || unit(&s) * (double)(left_new + left_rep) < (double)left_new;
		if (left_rep == 0)
			is_new = true;
		if (left_new == 0)
			is_new = false;
		if (w > sizeof out - 1024) {
			if (fwrite(out, 1, w, stdout) != w) {
				perror("bench_urlseen: write");
				return 1;
			}
			w = 0;
		}
		char *b = out + w, *e;
		if (is_new) {
			e = url_of(&fam, first + made++, b);
		} else {
			uint64_t j;
			if (rng(&s) % 2) /* a recent page */
				j = made - 1 - rng(&s) % (made < RECENT ? made : RECENT);
			else /* a popular one: early numbers more likely */
				j = (uint64_t)((double)made * unit(&s) * unit(&s) * unit(&s));
			if (j >= made)
				j = made - 1;
			e = url_of(&fam, first + j, b);
			if (rng(&s) % 5 == 0)
				e = variant(b, e, &s);
			rep++;
		}
		*e++ = '\n';
		w = (size_t)(e - out);
	}
	if (fwrite(out, 1, w, stdout) != w || fflush(stdout)) {
		perror("bench_urlseen: write");
		return 1;
	}
	return 0;
}

/* ---- stages ---- */

#define BATCH 8192

static void report(const char *name, double value, const char *unit_name)
{
	if (value >= 1000)
		printf("%s: %.0f %s\n", name, value, unit_name);
	else
		printf("%s: %.4g %s\n", name, value, unit_name);
}

static int batch_done(struct bitfilter *f, int stage, const uint8_t *keys, size_t nb,
		      bool *seen, uint64_t *fresh, uint64_t *sink)
{
	if (stage < 3) {
		*sink += keys[0];
		return 0;
	}
	size_t nn;
	if (bitfilter_check_and_add(f, keys, nb, seen, &nn)) {
		fprintf(stderr, "bench_urlseen: filter failed\n");
		return 1;
	}
	*fresh += nn;
	return 0;
}

static int cmd_stages(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bench_urlseen stages FILE [LINES]\n");
		return 2;
	}
	uint64_t maxlines = argc > 3 ? (uint64_t)strtod(argv[3], NULL) : UINT64_MAX;
	int fd = open(argv[2], O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		perror(argv[2]);
		return 1;
	}
	const char *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	close(fd);
	/* the part to time: whole lines, at most maxlines */
	const char *end = map, *lim = map + st.st_size;
	uint64_t lines = 0;
	while (end < lim && lines < maxlines) {
		const char *nl = memchr(end, '\n', (size_t)(lim - end));
		end = nl ? nl + 1 : lim;
		lines++;
	}
	printf("stage_lines: %llu lines\n", (unsigned long long)lines);

	char *norm = malloc(URL_NORM_CAP(URL_MAX_LEN));
	uint8_t *keys = malloc(16 * BATCH);
	bool *seen = malloc(BATCH);
	struct bitfilter *f;
	struct bitfilter_params p;
	bitfilter_params_default(&p);
	if (!norm || !keys || !seen || bitfilter_create(NULL, &p, &f)) {
		fprintf(stderr, "bench_urlseen: set-up failed\n");
		return 1;
	}
	const char *names[4] = { "split", "normalise", "hash", "filter" };
	double t_prev = 0;
	uint64_t fresh = 0, sink = 0;
	for (int stage = 0; stage < 4; stage++) {
		double t = now();
		size_t nb = 0;
		for (const char *q = map; q < end;) {
			const char *nl = memchr(q, '\n', (size_t)(end - q));
			size_t len = (size_t)((nl ? nl : end) - q);
			const char *line = q;
			q += len + 1;
			if (stage == 0) {
				sink += len;
				continue;
			}
			size_t n;
			const char *form;
			if (url_normal_form(line, len, 0, norm, URL_NORM_CAP(URL_MAX_LEN), &form, &n,
					    NULL))
				continue;
			if (stage == 1) {
				sink += n;
				continue;
			}
			XXH128_hash_t h = XXH3_128bits(form, n);
			memcpy(keys + 16 * nb, &h.low64, 8);
			memcpy(keys + 16 * nb + 8, &h.high64, 8);
			if (++nb == BATCH) {
				if (batch_done(f, stage, keys, nb, seen, &fresh, &sink))
					return 1;
				nb = 0;
			}
		}
		if (nb && batch_done(f, stage, keys, nb, seen, &fresh, &sink))
			return 1;
		t = now() - t;
		char name[64];
		snprintf(name, sizeof name, "stage_%s_ns_per_url", names[stage]);
		report(name, (t - t_prev) * 1e9 / (double)lines, "ns/url");
		snprintf(name, sizeof name, "stage_upto_%s_urls_per_s", names[stage]);
		report(name, (double)lines / t, "urls/s");
		t_prev = t;
	}
	printf("stage_new: %llu urls\n", (unsigned long long)fresh);
	if (sink == 42)
		printf("\n");
	bitfilter_close(f);
	free(norm);
	free(keys);
	free(seen);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "gen"))
		return cmd_gen(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "stages"))
		return cmd_stages(argc, argv);
	fprintf(stderr, "usage: bench_urlseen gen DISTINCT REPEATS [FIRST [SEED]]\n"
			"       bench_urlseen stages FILE [LINES]\n");
	return 2;
}
