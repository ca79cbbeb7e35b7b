/* urlseen.c - `pagededup urlseen`: the URL-seen test of a crawler.
 *
 *   pagededup urlseen [--filter FILE] [--fpr RATE] [--check] [options] [INPUT...]
 *
 * Reads URLs, one a line, from the INPUT files or stdin; prints each one
 * that the filter has not seen (in its normal form, url.h), and records it.
 * Lines go in batches: normalise and hash (XXH3-128) a batch, take the
 * filter's lock, test the batch, write the new URLs out, record them,
 * release the lock. Writing before recording means a urlseen killed
 * mid-batch may print a URL again on its next run, but never records a URL
 * it did not print; holding the lock across both means several urlseen
 * processes on one filter print each new URL exactly once.
 *
 * Input costs little: a regular file is mapped a window at a time rather
 * than copied by read(), and a line already in normal form (most of a
 * crawl list) is hashed and printed where it lies, so the batch keeps
 * pointers into the input and is sent before the window moves on (a batch
 * may therefore end early, at a window's end).
 */
#include "urlseen.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "bitfilter.h"
#include "url.h"

#define PROG "pagededup urlseen"
#define READ_BUF (1u << 20)
/* A regular file is mapped this much at a time (a multiple of the page
 * size) instead of read: no copy from the page cache into a buffer. The
 * window counts in the resident set, so it stays small beside the filter. */
#define MAP_WINDOW (2u << 20)
#define DEFAULT_BATCH 4096
#define MAX_BATCH 1000000
/* Lines that are not URLs reported one by one; past this, only counted. */
#define MAX_REPORTS 1000
/* Characters of a refused line shown in its report. */
#define REPORT_CHARS 200

static void urlseen_usage(FILE *out)
{
	fputs("usage: pagededup urlseen [--filter FILE] [--fpr RATE] [--check] [options] [INPUT...]\n"
	      "\n"
	      "Read URLs, one a line, from the INPUT files (\"-\" or none: stdin) and print\n"
	      "those not seen before, recording them in the filter FILE, which is made on\n"
	      "first use, keeps between runs and grows with the number of URLs. Without\n"
	      "--filter, a temporary filter remembers the URLs of this run only.\n"
	      "\n"
	      "URLs are compared in their normal form (RFC 3986 6.2.2/6.2.3), which is what\n"
	      "is printed: scheme and host in lower case, default port and fragment dropped,\n"
	      "dot segments removed, percent-encodings normalised. A line that is not an\n"
	      "absolute URL with a host (scheme://host/...) is reported on stderr and\n"
	      "skipped; blank lines are skipped silently.\n"
	      "\n"
	      "  --filter FILE    the filter file (made if missing). In memory it takes\n"
	      "                   about 1.1x the bits of an ideal Bloom filter for its\n"
	      "                   URLs and rate (2.5 bytes a URL at 1e-4); on disk also\n"
	      "                   8 bytes a URL, the URLs' hashes, read back only to\n"
	      "                   rebuild a part of the filter as it grows\n"
	      "  --fpr RATE       false-positive rate of a new filter (default 1e-4): the\n"
	      "                   share of new URLs wrongly taken as seen. It is the file's\n"
	      "                   for good; a different RATE for an existing file is an error\n"
	      "  --expected N     URLs a new filter is first sized for (default 1e6); it\n"
	      "                   grows past N by itself, N only saves the first rebuilds\n"
	      "  --lines 1|2      cache lines a URL's bits take in a new filter: 2 (default)\n"
	      "                   is within 3% of the bits a classic Bloom filter needs at\n"
	      "                   1e-4; 1 takes 14% more bits there (8% at 1e-3) for about\n"
	      "                   half the memory accesses\n"
	      "  --check          test only: print the URLs not seen, record nothing\n"
	      "  --sort-query     also sort the query's parameters (a=1&b=2 = b=2&a=1)\n"
	      "  --original       print the lines as given, not in normal form\n"
	      "  --batch N        lines per batch, tested and recorded under one lock\n"
	      "                   (default 4096)\n"
	      "  --sync           fsync the filter file before exiting\n"
	      "  --stats          print figures about the run and the filter on stderr\n"
	      "\n"
	      "Several processes (crawlers on one machine) may share one filter file. Each\n"
	      "batch is tested, printed and recorded under an exclusive flock(2) on FILE\n"
	      "(--check takes a shared one), so every new URL is printed by exactly one of\n"
	      "them. A process waits for the lock while another one writes its batch out:\n"
	      "keep batches small if the readers of the output are slow. flock(2) needs a\n"
	      "local file system (or NFS with lock support). A URL is recorded after it has\n"
	      "been written out, so a killed urlseen may print part of a batch again on the\n"
	      "next run, but never drops a URL unprinted.\n"
	      "\n"
	      "Exit status: 0 (also when some lines were not URLs), 1 on errors.\n",
	      out);
}

struct opts {
	const char *filter;
	double fpr;
	bool fpr_given;
	uint64_t expected;
	uint32_t lines;
	bool check, sort_query, original, sync, stats;
	size_t batch;
};

/* An input: read into buf (pipes, terminals), or, for a regular file,
 * mapped a window at a time (buf is the window, at file offset win_off).
 * Lines handed out point into buf and stay valid until the next refill:
 * the batch is flushed before one. */
struct input {
	int fd;
	const char *name;
	char *buf;
	size_t start, end;  /* the unconsumed bytes of buf */
	size_t cap;         /* READ_BUF, or the window's largest length */
	bool eof, skipping; /* skipping: inside a line too long to keep */
	uint64_t lineno;
	bool mapped;
	uint64_t size, win_off; /* mapped: the file's size, the window's offset */
};

struct run {
	struct opts o;
	struct bitfilter *f;
	/* the current batch */
	size_t n;
	uint8_t *keys;      /* 16 bytes each */
	bool *seen;
	const char **text;  /* text to print: in the input, or NULL: in arena at off */
	size_t *off, *len;
	char *arena;        /* URLs that normalising changed */
	size_t used, acap;
	char *out;          /* the batch's output */
	size_t ocap;
	/* figures */
	uint64_t lines, invalid, printed, reported;
	bool failed;
};

static int parse_count(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	double d = strtod(s, &end);
	if (errno || end == s || *end || !(d >= 1) || d > (double)max)
		return -1;
	*out = (uint64_t)d;
	return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Room for `more` bytes in the arena. Offsets stay valid when it moves. */
static int arena_reserve(struct run *r, size_t more)
{
	if (r->used + more <= r->acap)
		return 0;
	size_t cap = r->acap ? r->acap : 1u << 20;
	while (cap < r->used + more)
		cap *= 2;
	char *a = realloc(r->arena, cap);
	if (!a)
		return -ENOMEM;
	r->arena = a;
	r->acap = cap;
	return 0;
}

static void report_bad(struct run *r, const struct input *in, const char *line, size_t len,
		       const char *why)
{
	r->invalid++;
	if (r->reported >= MAX_REPORTS)
		return;
	if (++r->reported == MAX_REPORTS) {
		fprintf(stderr, PROG ": further lines that are not URLs are counted, not shown\n");
		return;
	}
	char shown[4 * REPORT_CHARS + 8];
	size_t w = 0;
	for (size_t i = 0; i < len && i < REPORT_CHARS; i++) {
		unsigned char c = (unsigned char)line[i];
		if (c < 0x20 || c == 0x7f || c == '\\')
			w += (size_t)snprintf(shown + w, sizeof shown - w, "\\x%02x", c);
		else
			shown[w++] = (char)c;
	}
	shown[w] = 0;
	fprintf(stderr, PROG ": %s:%llu: not a URL (%s): %s%s\n", in->name,
		(unsigned long long)in->lineno, why, shown, len > REPORT_CHARS ? "..." : "");
}

/* One line of input: normalise it (into the arena unless the line is
 * already normal, as most are) and hash it into the batch. */
static int take_line(struct run *r, const struct input *in, const char *line, size_t len)
{
	size_t i = 0;
	while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
		i++;
	if (i == len)
		return 0; /* blank */
	r->lines++;
	if (len > URL_MAX_LEN + 64) {
		report_bad(r, in, line, len, "longer than 65536 bytes");
		return 0;
	}
	int rc = arena_reserve(r, URL_NORM_CAP(len));
	if (rc)
		return rc;
	char *dst = r->arena + r->used;
	const char *form, *why = "";
	size_t n;
	rc = url_normal_form(line, len, r->o.sort_query ? URL_SORT_QUERY : 0, dst,
			     URL_NORM_CAP(len), &form, &n, &why);
	if (rc == -EINVAL) {
		report_bad(r, in, line, len, why);
		return 0;
	}
	if (rc)
		return rc;
	XXH128_hash_t h = XXH3_128bits(form, n);
	uint8_t *k = r->keys + 16 * r->n;
	memcpy(k, &h.low64, 8);
	memcpy(k + 8, &h.high64, 8);
	if (r->o.original) {
		/* print the line as given (without surrounding white space) */
		size_t s = 0, e = len;
		while (s < e && (line[s] == ' ' || line[s] == '\t'))
			s++;
		while (e > s && (line[e - 1] == '\r' || line[e - 1] == ' ' || line[e - 1] == '\t'))
			e--;
		form = line + s;
		n = e - s;
	}
	r->len[r->n] = n;
	if (form == dst) {
		r->text[r->n] = NULL;
		r->off[r->n] = r->used;
		r->used += n;
	} else {
		r->text[r->n] = form;
	}
	r->n++;
	return 0;
}

/* The next line in in's buffer. false: none there; in->eof tells whether
 * the input is at its end or needs a refill. */
static bool buffered_line(struct input *in, const char **line, size_t *len)
{
	while (in->start < in->end) {
		char *s = in->buf + in->start;
		char *nl = memchr(s, '\n', in->end - in->start);
		if (!nl)
			break;
		size_t n = (size_t)(nl - s);
		in->start += n + 1;
		if (in->skipping) { /* the end of an over-long line */
			in->skipping = false;
			continue;
		}
		in->lineno++;
		*line = s;
		*len = n;
		return true;
	}
	if (!in->eof || in->start == in->end)
		return false;
	/* the last line, without a newline */
	char *s = in->buf + in->start;
	size_t n = in->end - in->start;
	in->start = in->end;
	if (in->skipping)
		return false;
	in->lineno++;
	*line = s;
	*len = n;
	return true;
}

/* The rest of the buffer, a line with no end in sight, as a line too long
 * to keep (take_line refuses it); the rest of it is skipped. */
static void hand_over_too_long(struct input *in, const char **line, size_t *len)
{
	in->lineno++;
	in->skipping = true;
	*line = in->buf + in->start;
	*len = in->end - in->start;
	in->start = in->end;
}

/* Read more after the partial line at the end of the buffer. */
static int refill_read(struct input *in)
{
	memmove(in->buf, in->buf + in->start, in->end - in->start);
	in->end -= in->start;
	in->start = 0;
	ssize_t got;
	do
		got = read(in->fd, in->buf + in->end, in->cap - in->end);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	if (got == 0)
		in->eof = true;
	in->end += (size_t)got;
	return 0;
}

/* Map the next window of a regular file, from the page that holds the
 * unconsumed rest of the current one. At the end, look again: the file
 * may have grown since (a list still being written), as read() would see. */
static int refill_mapped(struct input *in)
{
	uint64_t pos = in->win_off + in->start, page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t off = pos - pos % page, mapped_to = in->buf ? in->win_off + in->end : pos;
	if (mapped_to >= in->size) {
		struct stat st;
		if (fstat(in->fd, &st) != 0)
			return -errno;
		if ((uint64_t)st.st_size <= mapped_to) {
			in->eof = true;
			return 0;
		}
		in->size = (uint64_t)st.st_size;
	}
	size_t len = in->size - off < in->cap ? (size_t)(in->size - off) : in->cap;
	void *w = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, in->fd, (off_t)off);
	if (w == MAP_FAILED)
		return -errno;
	if (in->buf)
		munmap(in->buf, in->end);
	in->buf = w;
	in->win_off = off;
	in->start = (size_t)(pos - off);
	in->end = len;
	return 0;
}

/* The buffer's lines are used up: read or map more. Returns 1 with a line
 * in *line when the rest of the buffer is the start of a line too long to
 * keep, else 0 or an error. */
static int refill(struct input *in, const char **line, size_t *len)
{
	if (in->mapped) {
		uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
		uint64_t pos = in->win_off + in->start;
		/* a new window from pos would end where this one does */
		if (in->buf && pos - pos % page + in->cap <= in->win_off + in->end) {
			hand_over_too_long(in, line, len);
			return 1;
		}
		return refill_mapped(in);
	}
	if (in->start == 0 && in->end == in->cap) {
		hand_over_too_long(in, line, len);
		return 1;
	}
	return refill_read(in);
}

/* A mapped file cut short under us (truncated by another process) makes a
 * touch of the lost pages a SIGBUS. The run stops there with a message, as
 * if killed: every URL recorded was printed first (flush_batch), so nothing
 * is lost, and the filter file is as a kill leaves it (consistent). */
static const char *mapped_name = "input";

static void put_stderr(const char *s)
{
	size_t n = strlen(s);
	while (n) {
		ssize_t w = write(2, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static void on_sigbus(int sig)
{
	(void)sig;
	put_stderr("pagededup urlseen: ");
	put_stderr(mapped_name);
	put_stderr(": the file shrank while it was read (truncated?); stopped. Every URL recorded was printed.\n");
	_exit(1);
}

static void catch_sigbus(const char *name)
{
	static bool installed;
	mapped_name = name;
	if (installed)
		return;
	struct sigaction sa = { .sa_handler = on_sigbus };
	sigemptyset(&sa.sa_mask);
	installed = sigaction(SIGBUS, &sa, NULL) == 0;
}

/* Map a regular file rather than read it (from its current offset: stdin
 * may be a file redirected after a part was read). Other files, and a
 * regular one of size 0 (/proc), are read. */
static void input_choose(struct input *in, char *readbuf)
{
	struct stat st;
	off_t at;
	in->buf = readbuf;
	in->cap = READ_BUF;
	if (fstat(in->fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    (at = lseek(in->fd, 0, SEEK_CUR)) >= 0) {
		catch_sigbus(in->name);
		in->mapped = true;
		in->buf = NULL;
		in->cap = MAP_WINDOW;
		in->size = (uint64_t)st.st_size;
		in->win_off = (uint64_t)at;
		(void)posix_fadvise(in->fd, at, 0, POSIX_FADV_SEQUENTIAL);
	}
}

/* Unmap the window; leave the file offset at what was consumed, as read()
 * would have. */
static void input_done(struct input *in)
{
	if (!in->mapped)
		return;
	(void)lseek(in->fd, (off_t)(in->win_off + in->start), SEEK_SET);
	if (in->buf)
		munmap(in->buf, in->end);
	in->buf = NULL;
}

/* Test the batch, print the new URLs, record them: one lock for all three.
 * Reports its own errors; returns non-zero after one. */
static int flush_batch(struct run *r)
{
	int rc;
	if (r->n == 0)
		return 0;
	if ((rc = bitfilter_lock(r->f, !r->o.check)) != 0) {
		fprintf(stderr, PROG ": %s: %s\n", r->o.filter ? r->o.filter : "filter",
			rc == -EUCLEAN ? "the filter file is damaged" : strerror(-rc));
		return rc;
	}
	size_t fresh = bitfilter_check(r->f, r->keys, r->n, r->seen);
	size_t need = 0;
	for (size_t i = 0; i < r->n; i++)
		if (!r->seen[i])
			need += r->len[i] + 1;
	if (need > r->ocap) {
		char *o = realloc(r->out, need);
		if (!o) {
			bitfilter_unlock(r->f);
			fprintf(stderr, PROG ": out of memory\n");
			return -ENOMEM;
		}
		r->out = o;
		r->ocap = need;
	}
	size_t w = 0;
	for (size_t i = 0; i < r->n; i++) {
		if (r->seen[i])
			continue;
		memcpy(r->out + w, r->text[i] ? r->text[i] : r->arena + r->off[i], r->len[i]);
		w += r->len[i];
		r->out[w++] = '\n';
	}
	rc = write_all(STDOUT_FILENO, r->out, w);
	if (rc) {
		fprintf(stderr, PROG ": stdout: %s\n", strerror(-rc));
	} else if (!r->o.check && (rc = bitfilter_record(r->f, r->keys, r->n, r->seen)) != 0) {
		fprintf(stderr, PROG ": recording in %s: %s\n", r->o.filter ? r->o.filter : "filter",
			rc == -EUCLEAN ? "the filter file is damaged" : strerror(-rc));
	}
	bitfilter_unlock(r->f);
	r->printed += fresh;
	r->n = 0;
	r->used = 0;
	return rc;
}

/* Errors of the batch are reported by flush_batch (*batch_failed set);
 * others (reading, memory) are returned. */
static int run_input(struct run *r, struct input *in, bool *batch_failed)
{
	const char *line = NULL;
	size_t len = 0;
	int rc;
	for (;;) {
		if (!buffered_line(in, &line, &len)) {
			/* the batch's lines point into the buffer: send them
			 * before it moves on (and at the end of the input) */
			if (flush_batch(r) != 0) {
				*batch_failed = true;
				return 0;
			}
			if (in->eof)
				return 0;
			if ((rc = refill(in, &line, &len)) < 0)
				return rc;
			if (rc == 0)
				continue;
		}
		if ((rc = take_line(r, in, line, len)) != 0)
			return rc;
		if (r->n == r->o.batch && flush_batch(r) != 0) {
			*batch_failed = true;
			return 0;
		}
	}
}

static int open_filter(struct run *r)
{
	const struct opts *o = &r->o;
	struct bitfilter_params p;
	int rc;

	bitfilter_params_default(&p);
	if (o->fpr_given)
		p.fpr = o->fpr;
	if (o->expected)
		p.expected = o->expected;
	if (o->lines)
		p.lines_per_key = o->lines;
	if (!o->filter) {
		if (o->check) {
			fprintf(stderr, PROG ": --check needs --filter FILE\n");
			return -EINVAL;
		}
		rc = bitfilter_create(NULL, &p, &r->f);
		if (rc)
			fprintf(stderr, PROG ": cannot make a temporary filter: %s\n", strerror(-rc));
		return rc;
	}
	for (int attempt = 0; attempt < 3; attempt++) {
		rc = bitfilter_open(o->filter, o->check, &r->f);
		if (rc != -ENOENT || o->check)
			break;
		rc = bitfilter_create(o->filter, &p, &r->f);
		if (rc != -EEXIST) /* another process made it first: open that */
			break;
	}
	if (rc == -EINVAL)
		fprintf(stderr, PROG ": %s is not a URL filter file\n", o->filter);
	else if (rc == -EUCLEAN)
		fprintf(stderr, PROG ": %s is damaged\n", o->filter);
	else if (rc == -ENOENT && o->check)
		fprintf(stderr, PROG ": %s: no such filter (--check does not make one)\n", o->filter);
	else if (rc)
		fprintf(stderr, PROG ": %s: %s\n", o->filter, strerror(-rc));
	if (rc)
		return rc;
	if (o->fpr_given) {
		struct bitfilter_stats st;
		if ((rc = bitfilter_lock(r->f, false)) == 0) {
			rc = bitfilter_stats(r->f, &st);
			bitfilter_unlock(r->f);
		}
		if (rc) {
			fprintf(stderr, PROG ": %s: %s\n", o->filter, strerror(-rc));
			return rc;
		}
		if (st.target_fpr != o->fpr) {
			fprintf(stderr,
				PROG ": %s was made for a false-positive rate of %g, not %g; "
				"leave out --fpr, or use a new filter file\n",
				o->filter, st.target_fpr, o->fpr);
			return -EINVAL;
		}
	}
	return 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void print_stats(struct run *r, double seconds)
{
	struct bitfilter_stats st;
	struct rusage ru;
	int rc = bitfilter_lock(r->f, false);
	if (rc == 0) {
		rc = bitfilter_stats(r->f, &st);
		bitfilter_unlock(r->f);
	}
	getrusage(RUSAGE_SELF, &ru);
	fprintf(stderr, "urls_read: %llu lines\n", (unsigned long long)r->lines);
	fprintf(stderr, "urls_invalid: %llu lines\n", (unsigned long long)r->invalid);
	fprintf(stderr, "urls_new: %llu urls\n", (unsigned long long)r->printed);
	fprintf(stderr, "urls_seen: %llu urls\n",
		(unsigned long long)(r->lines - r->invalid - r->printed));
	double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
		     (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
	fprintf(stderr, "seconds: %.3f s\n", seconds);
	fprintf(stderr, "cpu_seconds: %.3f s\n", cpu);
	fprintf(stderr, "urls_per_s: %.0f urls/s\n", seconds > 0 ? r->lines / seconds : 0);
	/* per core: the machine may be running other work */
	fprintf(stderr, "urls_per_cpu_s: %.0f urls/s\n", cpu > 0 ? r->lines / cpu : 0);
	fprintf(stderr, "peak_rss: %.1f MiB\n", ru.ru_maxrss / 1024.0);
	if (rc) {
		fprintf(stderr, PROG ": filter figures: %s\n", strerror(-rc));
		return;
	}
	fprintf(stderr, "filter_keys: %llu keys\n", (unsigned long long)st.keys);
	fprintf(stderr, "filter_leaves: %llu leaves\n", (unsigned long long)st.leaves);
	fprintf(stderr, "filter_depth: %u\n", st.depth);
	fprintf(stderr, "filter_k: %u bits/key in %u line(s)\n", st.k, st.lines_per_key);
	fprintf(stderr, "filter_target_fpr: %g\n", st.target_fpr);
	fprintf(stderr, "filter_model_fpr: %.4g\n", st.model_fpr);
	fprintf(stderr, "filter_bits_bytes: %llu bytes\n", (unsigned long long)st.bits_bytes);
	fprintf(stderr, "filter_theoretical_bytes: %.0f bytes\n", st.theoretical_bytes);
	fprintf(stderr, "filter_bits_vs_theory: %.3f x\n",
		st.theoretical_bytes > 0 ? st.bits_bytes / st.theoretical_bytes : 0);
	fprintf(stderr, "peak_rss_vs_theory: %.3f x\n",
		st.theoretical_bytes > 0 ? ru.ru_maxrss * 1024.0 / st.theoretical_bytes : 0);
	fprintf(stderr, "filter_log_bytes: %llu bytes\n", (unsigned long long)st.log_bytes);
	fprintf(stderr, "filter_file_bytes: %llu bytes\n", (unsigned long long)st.file_bytes);
	fprintf(stderr, "filter_free_bytes: %llu bytes\n", (unsigned long long)st.free_bytes);
	fprintf(stderr, "filter_grows: %llu\n", (unsigned long long)st.grows);
	fprintf(stderr, "filter_splits: %llu\n", (unsigned long long)st.splits);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "filter", required_argument, 0, 'f' },
		{ "fpr", required_argument, 0, 'r' },
		{ "expected", required_argument, 0, 'n' },
		{ "lines", required_argument, 0, 'l' },
		{ "check", no_argument, 0, 'c' },
		{ "sort-query", no_argument, 0, 'q' },
		{ "original", no_argument, 0, 'o' },
		{ "batch", required_argument, 0, 'b' },
		{ "sync", no_argument, 0, 'y' },
		{ "stats", no_argument, 0, 's' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 } };
	int c;
	uint64_t v;
	char *end;

	memset(o, 0, sizeof *o);
	o->batch = DEFAULT_BATCH;
	while ((c = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			o->filter = optarg;
			break;
		case 'r':
			errno = 0;
			o->fpr = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->fpr > 0 && o->fpr < 0.5)) {
				fprintf(stderr, PROG ": --fpr wants a rate between 0 and 0.5\n");
				return 1;
			}
			o->fpr_given = true;
			break;
		case 'n':
			if (parse_count(optarg, UINT64_C(1) << 50, &o->expected)) {
				fprintf(stderr, PROG ": --expected wants a number >= 1\n");
				return 1;
			}
			break;
		case 'l':
			if (strcmp(optarg, "1") && strcmp(optarg, "2")) {
				fprintf(stderr, PROG ": --lines is 1 or 2\n");
				return 1;
			}
			o->lines = (uint32_t)(optarg[0] - '0');
			break;
		case 'c':
			o->check = true;
			break;
		case 'q':
			o->sort_query = true;
			break;
		case 'o':
			o->original = true;
			break;
		case 'b':
			if (parse_count(optarg, MAX_BATCH, &v)) {
				fprintf(stderr, PROG ": --batch wants a number from 1 to %u\n",
					MAX_BATCH);
				return 1;
			}
			o->batch = (size_t)v;
			break;
		case 'y':
			o->sync = true;
			break;
		case 's':
			o->stats = true;
			break;
		case 'h':
			urlseen_usage(stdout);
			return -1;
		default:
			urlseen_usage(stderr);
			return 1;
		}
	}
	return 0;
}

static void free_run(struct run *r)
{
	free(r->keys);
	free(r->seen);
	free(r->text);
	free(r->off);
	free(r->len);
	free(r->arena);
	free(r->out);
	if (r->f)
		bitfilter_close(r->f);
}

int cmd_urlseen(int argc, char **argv)
{
	struct run r;
	int rc;

	memset(&r, 0, sizeof r);
	rc = parse_opts(argc, argv, &r.o);
	if (rc)
		return rc < 0 ? 0 : rc;
	size_t b = r.o.batch;
	r.keys = malloc(16 * b);
	r.seen = malloc(b);
	r.text = malloc(b * sizeof *r.text);
	r.off = malloc(b * sizeof *r.off);
	r.len = malloc(b * sizeof *r.len);
	char *buf = malloc(READ_BUF);
	if (!r.keys || !r.seen || !r.text || !r.off || !r.len || !buf) {
		fprintf(stderr, PROG ": out of memory\n");
		free(buf);
		free_run(&r);
		return 1;
	}
	if (open_filter(&r)) {
		free(buf);
		free_run(&r);
		return 1;
	}

	double t0 = now();
	int ninputs = argc - optind;
	for (int i = 0; i < (ninputs ? ninputs : 1) && !r.failed; i++) {
		const char *name = ninputs ? argv[optind + i] : "-";
		struct input in = { .fd = STDIN_FILENO, .name = "stdin" };
		if (strcmp(name, "-")) {
			in.name = name;
			in.fd = open(name, O_RDONLY | O_CLOEXEC);
			if (in.fd < 0) {
				fprintf(stderr, PROG ": %s: %s\n", name, strerror(errno));
				r.failed = true;
				break;
			}
		}
		input_choose(&in, buf);
		bool batch_failed = false;
		rc = run_input(&r, &in, &batch_failed);
		input_done(&in);
		if (in.fd != STDIN_FILENO)
			close(in.fd);
		if (rc)
			fprintf(stderr, PROG ": %s: %s\n", in.name, strerror(-rc));
		if (rc || batch_failed)
			r.failed = true;
	}
	if (!r.failed && flush_batch(&r) != 0)
		r.failed = true;
	if (!r.failed && r.o.sync && r.o.filter && (rc = bitfilter_sync(r.f)) != 0) {
		fprintf(stderr, PROG ": %s: %s\n", r.o.filter, strerror(-rc));
		r.failed = true;
	}
	double t = now() - t0;
	if (r.invalid > r.reported || r.reported >= MAX_REPORTS)
		fprintf(stderr, PROG ": %llu lines were not URLs\n", (unsigned long long)r.invalid);
	if (r.o.stats)
		print_stats(&r, t);
	free(buf);
	free_run(&r);
	return r.failed ? 1 : 0;
}
