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
 * Input costs little: every input is read 2 MiB at a time into one reused
 * buffer, a regular file from the page cache where it holds the file and
 * with O_DIRECT where not (read_window), and a line already in normal form
 * (most of a crawl list) is hashed and printed where it lies, so the batch
 * keeps pointers into the buffer and is sent before the next read (a batch
 * may therefore end early, at a read's end).
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

#include "urlseen/bitfilter.h"
#include "base/fdio.h"
#include "urlseen/url.h"
#include "urlseen_redis.h"

#define PROG "pagededup urlseen"
/* Bytes read at a time into the input buffer (it counts in the resident
 * set, so it stays small beside the filter), after a head area for the
 * partial line a read leaves: a longer partial line is too long to keep
 * (URL_MAX_LEN), so the head needs no more. */
#define WINDOW_BYTES ((size_t)2 << 20)
#define HEAD_BYTES ((size_t)128 << 10)
/* Offsets, lengths and addresses of O_DIRECT reads are multiples of this. */
#define IO_ALIGN 4096
#define DEFAULT_BATCH 4096
#define MAX_BATCH 1000000
/* Lines that are not URLs reported one by one; past this, only counted. */
#define MAX_REPORTS 1000
/* Characters of a refused line shown in its report. */
#define REPORT_CHARS 200

static void urlseen_usage(FILE *out)
{
	fputs("usage: pagededup urlseen [--filter FILE] [--fpr RATE] [--check] [options] [INPUT...]\n"
	      "       pagededup urlseen --redis HOST:PORT[,HOST:PORT...] [options] [INPUT...]\n"
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
	      "  --redis HOST:PORT[,HOST:PORT...]\n"
	      "                   keep the filter on Redis instead of a file: a Redis Cluster\n"
	      "                   (any of its nodes; the others are found) or one plain\n"
	      "                   server, shared by crawlers on any number of hosts. Every\n"
	      "                   URL is tested and recorded in one command, so each new\n"
	      "                   URL is printed by exactly one of them; batches go out as\n"
	      "                   one pipeline per node, all nodes at once. --fpr, --expected,\n"
	      "                   --lines and --check as for a file; --sync does not apply\n"
	      "  --redis-name NAME  the filter's name on the cluster (default urlseen):\n"
	      "                   several filters may share one cluster\n"
	      "  --redis-wait MS  how long to wait for the cluster to answer (a failover,\n"
	      "                   a restart) before giving up (default 30000)\n"
	      "  --redis-timeout MS  a node that owes answers and sends nothing for this\n"
	      "                   long is taken as dead (default 5000)\n"
	      "  --journal FILE   with --redis: each batch's URLs are written to FILE before\n"
	      "                   they are sent, and FILE emptied once the new ones are\n"
	      "                   printed; a urlseen that finds FILE not empty (an earlier\n"
	      "                   one was killed mid-batch) prints its URLs first, so no\n"
	      "                   URL recorded is left unprinted (some may come twice)\n"
	      "  --leaf-kib K     largest leaf of a new filter on Redis (default 1024)\n"
	      "  --redis-leaves N  first leaves of a new filter on Redis, at least (default\n"
	      "                   64, so that they spread over the cluster's nodes)\n"
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
	      "With --redis, a URL whose answer is lost (a node died or timed out after the\n"
	      "URL was sent) is printed as new, and counted and reported on stderr: another\n"
	      "crawler may print it too. After a failover, URLs the dead primary had\n"
	      "recorded and not yet passed to its replica may be printed again (Redis\n"
	      "replicates asynchronously). A URL is tested and recorded in one command, so\n"
	      "a urlseen killed between a batch's answer and its output has recorded URLs\n"
	      "it did not print, unless --journal keeps the batch to print on the next\n"
	      "start. See core/urlseen/rfilter.h.\n"
	      "\n"
	      "Exit status: 0 (also when some lines were not URLs), 1 on errors, 2 on usage\n"
	      "errors (a malformed --redis list too), 3 when the\n"
	      "Redis cluster cannot be reached (at the start, or for longer than\n"
	      "--redis-wait during the run: the URLs not yet tested are neither printed nor\n"
	      "recorded, and stderr says from which line to give the input again).\n",
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
	struct urlseen_redis_opts redis; /* redis.seeds NULL: a filter file */
	const char *journal;             /* --journal FILE (with --redis) */
};

/* An input. Every input is read into one reused buffer: a HEAD_BYTES area
 * that takes the partial line left at the end of the last read, then the
 * data area (WINDOW_BYTES, 4 KiB aligned) that each read fills. Lines
 * handed out point into the buffer and stay valid until the next refill:
 * the batch is flushed before one. A regular file is read by offset (pos),
 * from the page cache when it holds the data and otherwise with O_DIRECT
 * (dfd): see read_window for why. */
struct input {
	int fd;
	const char *name;
	char *buf;          /* HEAD_BYTES + WINDOW_BYTES */
	size_t start, end;  /* the unconsumed bytes of buf */
	bool eof, skipping; /* skipping: inside a line too long to keep */
	uint64_t lineno;
	bool file;          /* a regular file, read at pos */
	int dfd;            /* the same file opened with O_DIRECT, or -1 */
	uint64_t pos;       /* file offset of buf + end */
	uint64_t direct_bytes, cached_bytes; /* how it was read (--stats) */
};

struct run {
	struct opts o;
	struct bitfilter *f;
	struct urlseen_redis *rs; /* the filter on Redis (--redis), or NULL */
	const struct input *in;   /* the input of the current batch */
	uint64_t batch_first;     /* its first line */
	int exit_status;          /* a status other than 1 to end with */
	int journal;              /* --journal's descriptor, or -1 */
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
	uint64_t input_direct, input_cached; /* bytes of regular files read either way */
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
	if (r->n == 0) {
		r->in = in;
		r->batch_first = in->lineno;
	}
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

/* How many of the len bytes from pos (aligned) the page cache holds, from
 * the first on: mincore() of a mapping of them, which asks the page cache
 * and reads nothing (a read with RWF_NOWAIT would start readahead of the
 * rest). All of them when that cannot be told. */
static size_t cached_prefix(const struct input *in, size_t len)
{
	unsigned char vec[WINDOW_BYTES / IO_ALIGN];
	if (len > WINDOW_BYTES)
		return len;
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, in->fd, (off_t)in->pos);
	if (p == MAP_FAILED)
		return len;
	size_t pages = (len + IO_ALIGN - 1) / IO_ALIGN, i = 0;
	if (mincore(p, len, vec) == 0)
		while (i < pages && (vec[i] & 1))
			i++;
	else
		i = pages;
	munmap(p, len);
	return i == pages ? len : i * IO_ALIGN;
}

/* Read a regular file's next len bytes (up to WINDOW_BYTES) into dst:
 * what the page cache holds is copied from it, the rest is read with
 * O_DIRECT straight into dst. Reading uncached data through the page cache
 * costs several times the CPU of the whole copy: every new cache page is a
 * page the kernel allocates, fills and maps, and under a hypervisor the
 * first touch of such a page can fault in the host as well (1.7 CPU
 * seconds per GB measured on this project's virtual machine; 0.15 with
 * O_DIRECT). O_DIRECT needs pos, len and dst aligned (IO_ALIGN) and is
 * refused by some file systems: plain pread then. Returns the bytes read
 * (short only at the end of the file) or -errno. */
static ssize_t read_window(struct input *in, char *dst, size_t len)
{
	bool direct = in->dfd >= 0 && in->pos % IO_ALIGN == 0 && len % IO_ALIGN == 0 &&
		      (uintptr_t)dst % IO_ALIGN == 0;
	size_t cached = direct ? cached_prefix(in, len) : len;
	ssize_t r = fd_pread_full(in->fd, dst, cached, in->pos);
	if (r < 0 || (size_t)r < cached || cached == len) {
		if (r > 0)
			in->cached_bytes += (size_t)r;
		return r;
	}
	in->cached_bytes += cached;
	r = fd_pread_full(in->dfd, dst + cached, len - cached, in->pos + cached);
	if (r == -EINVAL) { /* not for this file system: plain reads */
		close(in->dfd);
		in->dfd = -1;
		r = fd_pread_full(in->fd, dst + cached, len - cached, in->pos + cached);
		if (r > 0)
			in->cached_bytes += (size_t)r;
	} else if (r > 0) {
		in->direct_bytes += (size_t)r;
	}
	return r < 0 ? r : (ssize_t)cached + r;
}

/* The end of a regular file: check that it did not shrink under us (a
 * list truncated while it is read), which would leave its end unread. */
static int file_end(struct input *in)
{
	struct stat st;
	if (fstat(in->fd, &st) != 0)
		return -errno;
	return (uint64_t)st.st_size < in->pos ? -ESTALE : 0;
}

/* Read more after the partial line at the end of the buffer, which moves
 * to the end of the head area (a partial line inside a line too long to
 * keep is dropped). */
static int refill_read(struct input *in)
{
	size_t keep = in->skipping ? 0 : in->end - in->start;
	memmove(in->buf + HEAD_BYTES - keep, in->buf + in->start, keep);
	in->start = HEAD_BYTES - keep;
	in->end = HEAD_BYTES;
	/* from an unaligned offset (stdin left there, or the end of a file
	 * that has grown since), read up to the next page boundary, so that
	 * the reads after it are aligned */
	size_t len = in->file && in->pos % IO_ALIGN ? IO_ALIGN - (size_t)(in->pos % IO_ALIGN)
						   : WINDOW_BYTES;
	ssize_t got;
	if (in->file) {
		got = read_window(in, in->buf + in->end, len);
	} else {
		do
			got = read(in->fd, in->buf + in->end, len);
		while (got < 0 && errno == EINTR);
		if (got < 0)
			got = -errno;
	}
	if (got < 0)
		return (int)got;
	in->end += (size_t)got;
	in->pos += (uint64_t)got;
	if (got == 0) {
		in->eof = true;
		if (in->file)
			return file_end(in);
	}
	return 0;
}

/* The buffer's lines are used up: read more. Returns 1 with a line in
 * *line when the rest of the buffer is the start of a line too long to
 * keep, else 0 or an error. */
static int refill(struct input *in, const char **line, size_t *len)
{
	if (!in->skipping && in->end - in->start > HEAD_BYTES) {
		hand_over_too_long(in, line, len);
		return 1;
	}
	return refill_read(in);
}

/* Read a regular file by offset (from its current one: stdin may be a
 * file redirected after a part was read); pipes, terminals and files of
 * size 0 (/proc) with read(). */
static void input_choose(struct input *in, char *buf)
{
	struct stat st;
	off_t at;
	in->buf = buf;
	in->start = in->end = HEAD_BYTES;
	in->dfd = -1;
	if (fstat(in->fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    (at = lseek(in->fd, 0, SEEK_CUR)) >= 0) {
		char path[64];
		in->file = true;
		in->pos = (uint64_t)at;
		snprintf(path, sizeof path, "/proc/self/fd/%d", in->fd);
		in->dfd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	}
}

/* Leave the file offset at what was consumed, as read() would have. */
static void input_done(struct input *in)
{
	if (!in->file)
		return;
	(void)lseek(in->fd, (off_t)(in->pos - (in->end - in->start)), SEEK_SET);
	if (in->dfd >= 0)
		close(in->dfd);
	in->dfd = -1;
}

/* Print the batch's URLs not seen (seen[i] false). */
static int print_new(struct run *r)
{
	size_t need = 0;
	for (size_t i = 0; i < r->n; i++)
		if (!r->seen[i])
			need += r->len[i] + 1;
	if (need > r->ocap) {
		char *o = realloc(r->out, need);
		if (!o) {
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
	int rc = fd_write_all(STDOUT_FILENO, r->out, w);
	if (rc)
		fprintf(stderr, PROG ": stdout: %s\n", strerror(-rc));
	return rc;
}

/* --journal: the batch's URLs, all of them, to the journal before the batch
 * is sent (they may be recorded from then on). */
static int journal_batch(struct run *r)
{
	size_t need = 0;
	for (size_t i = 0; i < r->n; i++)
		need += r->len[i] + 1;
	if (need > r->ocap) {
		char *o = realloc(r->out, need);
		if (!o)
			return -ENOMEM;
		r->out = o;
		r->ocap = need;
	}
	size_t w = 0;
	for (size_t i = 0; i < r->n; i++) {
		memcpy(r->out + w, r->text[i] ? r->text[i] : r->arena + r->off[i], r->len[i]);
		w += r->len[i];
		r->out[w++] = '\n';
	}
	int rc = fd_pwrite_all(r->journal, r->out, w, 0);
	if (rc == 0 && ftruncate(r->journal, (off_t)w) != 0)
		rc = -errno;
	return rc;
}

/* --journal at the start: what an earlier urlseen left in it (a batch it
 * sent and may not have printed) is printed, then the journal emptied. */
static int journal_open(struct run *r)
{
	r->journal = open(r->o.journal, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (r->journal < 0) {
		fprintf(stderr, PROG ": --journal %s: %s\n", r->o.journal, strerror(errno));
		return -errno;
	}
	struct stat st;
	if (fstat(r->journal, &st) != 0)
		return -errno;
	if (st.st_size > 0) {
		char *b = malloc((size_t)st.st_size);
		if (!b)
			return -ENOMEM;
		ssize_t got = fd_pread_full(r->journal, b, (size_t)st.st_size, 0);
		int rc = got < 0 ? (int)got : fd_write_all(STDOUT_FILENO, b, (size_t)got);
		size_t lines = 0;
		for (ssize_t i = 0; i < got; i++)
			lines += b[i] == '\n';
		free(b);
		if (rc) {
			fprintf(stderr, PROG ": --journal %s: %s\n", r->o.journal, strerror(-rc));
			return rc;
		}
		fprintf(stderr,
			PROG ": %s held %zu URLs of a batch an earlier urlseen sent and may not have "
			"printed; printed them first (some may have been printed already)\n",
			r->o.journal, lines);
	}
	if (ftruncate(r->journal, 0) != 0)
		return -errno;
	return 0;
}

/* The batch on the filter on Redis: tested and recorded in one call, then
 * its new URLs printed (urlseen_redis.c). */
static int flush_batch_redis(struct run *r)
{
	int rc;
	if (r->journal >= 0 && (rc = journal_batch(r)) != 0) {
		fprintf(stderr, PROG ": --journal %s: %s\n", r->o.journal, strerror(-rc));
		return rc;
	}
	int st = urlseen_redis_batch(r->rs, r->keys, r->n, r->seen, r->in ? r->in->name : "input",
				     r->batch_first, r->in ? r->in->lineno : 0);
	if (st == 1)
		return -EIO;
	size_t fresh = 0;
	for (size_t i = 0; i < r->n; i++)
		fresh += !r->seen[i];
	rc = print_new(r);
	r->printed += fresh;
	r->n = 0;
	r->used = 0;
	if (rc)
		return rc;
	if (r->journal >= 0 && ftruncate(r->journal, 0) != 0) {
		rc = -errno;
		fprintf(stderr, PROG ": --journal %s: %s\n", r->o.journal, strerror(-rc));
		return rc;
	}
	if (st) {
		r->exit_status = st;
		return -EHOSTUNREACH;
	}
	return 0;
}

/* Test the batch, print the new URLs, record them: one lock for all three.
 * Reports its own errors; returns non-zero after one. */
static int flush_batch(struct run *r)
{
	int rc;
	if (r->n == 0)
		return 0;
	if (r->rs)
		return flush_batch_redis(r);
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
	rc = fd_write_all(STDOUT_FILENO, r->out, w);
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

	if (o->journal && !o->redis.seeds) {
		fprintf(stderr, PROG ": --journal is for --redis (a filter file records after printing)\n");
		return -EINVAL;
	}
	if (o->redis.seeds) {
		struct urlseen_redis_opts ro = o->redis;
		ro.fpr = o->fpr;
		ro.fpr_given = o->fpr_given;
		ro.expected = o->expected;
		ro.lines = o->lines;
		ro.check = o->check;
		if (o->filter || o->sync) {
			fprintf(stderr, PROG ": --redis keeps the filter on Redis: leave out %s\n",
				o->filter ? "--filter" : "--sync");
			return -EINVAL;
		}
		rc = urlseen_redis_open(&ro, &r->rs);
		if (rc > 1)
			r->exit_status = rc;
		if (rc == 0 && o->journal && !o->check && journal_open(r) != 0)
			rc = 1;
		return rc ? -EIO : 0;
	}
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
	int rc = r->rs ? 0 : bitfilter_lock(r->f, false);
	if (rc == 0 && !r->rs) {
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
	/* input files read past the page cache, and copied from it */
	fprintf(stderr, "input_direct_bytes: %llu bytes\n", (unsigned long long)r->input_direct);
	fprintf(stderr, "input_cached_bytes: %llu bytes\n", (unsigned long long)r->input_cached);
	if (r->rs) {
		urlseen_redis_stats(r->rs);
		return;
	}
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

/* A usage error: the line saying what is wrong is printed already; then
 * the pointer to --help and the usage status (tools/cli.h). */
static int usage_error(void)
{
	fputs("Try 'pagededup urlseen --help' for more information.\n", stderr);
	return 2;
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
		{ "redis", required_argument, 0, 'R' },
		{ "redis-name", required_argument, 0, 'N' },
		{ "redis-wait", required_argument, 0, 'W' },
		{ "redis-timeout", required_argument, 0, 'T' },
		{ "leaf-kib", required_argument, 0, 'K' },
		{ "journal", required_argument, 0, 'J' },
		{ "redis-leaves", required_argument, 0, 'L' },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 } };
	int c;
	uint64_t v;
	char *end;

	memset(o, 0, sizeof *o);
	o->batch = DEFAULT_BATCH;
	o->redis.name = "urlseen";
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
				return usage_error();
			}
			o->fpr_given = true;
			break;
		case 'n':
			if (parse_count(optarg, UINT64_C(1) << 50, &o->expected)) {
				fprintf(stderr, PROG ": --expected wants a number >= 1\n");
				return usage_error();
			}
			break;
		case 'l':
			if (strcmp(optarg, "1") && strcmp(optarg, "2")) {
				fprintf(stderr, PROG ": --lines is 1 or 2\n");
				return usage_error();
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
				return usage_error();
			}
			o->batch = (size_t)v;
			break;
		case 'y':
			o->sync = true;
			break;
		case 's':
			o->stats = true;
			break;
		case 'R':
			o->redis.seeds = optarg;
			break;
		case 'J':
			o->journal = optarg;
			break;
		case 'N':
			o->redis.name = optarg;
			break;
		case 'W':
		case 'T':
			if (parse_count(optarg, 86400000, &v)) {
				fprintf(stderr, PROG ": --redis-%s wants milliseconds, >= 1\n",
					c == 'W' ? "wait" : "timeout");
				return usage_error();
			}
			*(c == 'W' ? &o->redis.wait_ms : &o->redis.timeout_ms) = (int)v;
			break;
		case 'K':
			if (parse_count(optarg, 1u << 20, &v) || v < 16) {
				fprintf(stderr, PROG ": --leaf-kib wants a size in KiB, >= 16\n");
				return usage_error();
			}
			o->redis.leaf_kib = (uint32_t)v;
			break;
		case 'L':
			if (parse_count(optarg, 1u << 20, &v)) {
				fprintf(stderr, PROG ": --redis-leaves wants a number from 1 to %u\n", 1u << 20);
				return usage_error();
			}
			o->redis.min_leaves = (uint32_t)v;
			break;
		case 'h':
			urlseen_usage(stdout);
			return -1;
		default:
			return usage_error();
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
	urlseen_redis_close(r->rs);
	if (r->journal >= 0)
		close(r->journal);
}

/* The input buffer: its data area starts at a multiple of 2 MiB and may
 * take a huge page (one TLB entry for the whole window). *raw and *rawlen
 * are what to unmap. */
#define BUF_ALIGN ((size_t)2 << 20)

static char *input_buffer(void **raw, size_t *rawlen)
{
	size_t len = HEAD_BYTES + WINDOW_BYTES + BUF_ALIGN;
	char *r = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED)
		return NULL;
	char *data = (char *)(((uintptr_t)r + HEAD_BYTES + BUF_ALIGN - 1) & ~(uintptr_t)(BUF_ALIGN - 1));
	(void)madvise(data, WINDOW_BYTES, MADV_HUGEPAGE);
	*raw = r;
	*rawlen = len;
	return data - HEAD_BYTES;
}

int cmd_urlseen(int argc, char **argv)
{
	struct run r;
	int rc;

	memset(&r, 0, sizeof r);
	r.journal = -1;
	rc = parse_opts(argc, argv, &r.o);
	if (rc)
		return rc < 0 ? 0 : rc;
	size_t b = r.o.batch;
	r.keys = malloc(16 * b);
	r.seen = malloc(b);
	r.text = malloc(b * sizeof *r.text);
	r.off = malloc(b * sizeof *r.off);
	r.len = malloc(b * sizeof *r.len);
	void *raw = NULL;
	size_t rawlen = 0;
	char *buf = input_buffer(&raw, &rawlen);
	if (!r.keys || !r.seen || !r.text || !r.off || !r.len || !buf) {
		fprintf(stderr, PROG ": out of memory\n");
		if (buf)
			munmap(raw, rawlen);
		free_run(&r);
		return 1;
	}
	if (open_filter(&r)) {
		munmap(raw, rawlen);
		free_run(&r);
		return r.exit_status ? r.exit_status : 1;
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
		r.input_direct += in.direct_bytes;
		r.input_cached += in.cached_bytes;
		if (in.fd != STDIN_FILENO)
			close(in.fd);
		if (rc == -ESTALE)
			fprintf(stderr,
				PROG ": %s: the file shrank while it was read (truncated?); "
				"stopped. Every URL recorded was printed.\n",
				in.name);
		else if (rc)
			fprintf(stderr, PROG ": %s: %s\n", in.name, strerror(-rc));
		if (rc || batch_failed)
			r.failed = true;
	}
	if (!r.failed && flush_batch(&r) != 0)
		r.failed = true;
	if (r.rs && !r.exit_status && (rc = urlseen_redis_finish(r.rs)) != 0) {
		r.failed = true;
		if (rc > 1)
			r.exit_status = rc;
	}
	if (r.rs && urlseen_redis_lost(r.rs))
		fprintf(stderr, PROG ": %llu URLs were printed as new without an answer from Redis\n",
			(unsigned long long)urlseen_redis_lost(r.rs));
	if (!r.failed && r.o.sync && r.o.filter && (rc = bitfilter_sync(r.f)) != 0) {
		fprintf(stderr, PROG ": %s: %s\n", r.o.filter, strerror(-rc));
		r.failed = true;
	}
	double t = now() - t0;
	if (r.invalid > r.reported || r.reported >= MAX_REPORTS)
		fprintf(stderr, PROG ": %llu lines were not URLs\n", (unsigned long long)r.invalid);
	if (r.o.stats)
		print_stats(&r, t);
	munmap(raw, rawlen);
	free_run(&r);
	if (r.failed && r.exit_status)
		return r.exit_status;
	return r.failed ? 1 : 0;
}
