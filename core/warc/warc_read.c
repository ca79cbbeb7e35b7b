/* warc_read.c - the streaming WARC reader (format and promises in warc.h).
 *
 * Layers: the file (a read buffer, `in`), for gzip files the inflater
 * (member by member, into `out`), then records: a header parsed into a
 * bounded buffer, and a block handed to the caller in pieces, hashed on
 * the way when it carries a sha1 WARC-Block-Digest.
 *
 * After damage the reader looks for the next record: in a gzip file the
 * next gzip member header (1f 8b 08) after the start of the damaged member,
 * in a plain file the next "WARC/1." after the damaged record's first byte.
 * A regular file is read again from there (lseek); a pipe can only go on
 * from where the damage was seen. A candidate that does not parse as a
 * record is passed over silently: one damaged spot is one report.
 */
#include "warc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <zlib.h>

#define RD_IN (256 * 1024)
#define RD_OUT (256 * 1024)

struct warc_reader {
	int fd;
	bool seekable, gz;
	warc_report_fn report;
	void *ctx;

	uint8_t *in;
	size_t in_pos, in_len;
	uint64_t in_off;       /* file offset of in[0] */
	bool in_eof;

	z_stream z;
	bool z_ready;
	bool member_done;      /* the inflater reached the end of a member */
	uint64_t member_off;   /* file offset of the current member */
	uint8_t *out;
	size_t out_pos, out_len;

	bool broken;           /* look for the next record before reading on */
	bool searching;        /* after damage: candidates fail silently */
	uint64_t damage_off;   /* where the damage was (for the resume report) */
	uint64_t rec_off;      /* offset of the current record */

	bool in_block;
	uint64_t left;         /* block bytes not yet read */
	bool check_digest;
	uint8_t want[32];      /* the block digest the header gives */
	unsigned want_len;     /* 20 (sha1) or 32 (sha256) */
	void *md;              /* EVP_MD_CTX of that algorithm */

	char *hbuf;
	struct warc_head head;
	uint64_t records, errors;
};

static int hexdig(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void say(struct warc_reader *r, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(struct warc_reader *r, uint64_t off, const char *fmt, ...)
{
	if (r->searching)
		return;
	r->errors++;
	if (!r->report)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	r->report(r->ctx, off, msg);
}

/* --- the file -------------------------------------------------------- */

static int in_fill(struct warc_reader *r)
{
	if (r->in_pos < r->in_len)
		return 1;
	if (r->in_eof)
		return 0;
	r->in_off += r->in_len;
	r->in_pos = r->in_len = 0;
	for (;;) {
		ssize_t n = read(r->fd, r->in, RD_IN);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			r->in_eof = true;
			return 0;
		}
		r->in_len = (size_t)n;
		return 1;
	}
}

static uint64_t in_cur(const struct warc_reader *r)
{
	return r->in_off + r->in_pos;
}

static int seek_to(struct warc_reader *r, uint64_t off)
{
	if (lseek(r->fd, (off_t)off, SEEK_SET) < 0)
		return -errno;
	r->in_off = off;
	r->in_pos = r->in_len = 0;
	r->in_eof = false;
	return 0;
}

/* --- bytes of the WARC (inflated when gzip) -------------------------- */

/* Make bytes available: 1, 0 at the end of the member (gzip) or the file,
 * -EBADMSG for a damaged or truncated member, -errno. */
static int more(struct warc_reader *r)
{
	if (!r->gz)
		return in_fill(r);
	if (r->out_pos < r->out_len)
		return 1;
	if (r->member_done)
		return 0;
	r->out_pos = r->out_len = 0;
	for (;;) {
		int rc = in_fill(r);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return -EBADMSG; /* the file ends inside a member */
		r->z.next_in = r->in + r->in_pos;
		r->z.avail_in = (uInt)(r->in_len - r->in_pos);
		r->z.next_out = r->out;
		r->z.avail_out = RD_OUT;
		int zr = inflate(&r->z, Z_NO_FLUSH);
		r->in_pos = r->in_len - r->z.avail_in;
		r->out_len = RD_OUT - r->z.avail_out;
		if (zr == Z_STREAM_END) {
			r->member_done = true;
			return r->out_len ? 1 : 0;
		}
		if (zr != Z_OK && zr != Z_BUF_ERROR)
			return -EBADMSG;
		if (r->out_len)
			return 1;
	}
}

static const uint8_t *avail(const struct warc_reader *r, size_t *n)
{
	if (r->gz) {
		*n = r->out_len - r->out_pos;
		return r->out + r->out_pos;
	}
	*n = r->in_len - r->in_pos;
	return r->in + r->in_pos;
}

static void consume(struct warc_reader *r, size_t n)
{
	if (r->gz)
		r->out_pos += n;
	else
		r->in_pos += n;
}

static int get_byte(struct warc_reader *r, int *c)
{
	int rc = more(r);
	if (rc <= 0)
		return rc;
	size_t n;
	*c = *avail(r, &n);
	consume(r, 1);
	return 1;
}

/* Begin the gzip member at the current file position: 1, 0 at the end of
 * the file, -EBADMSG if what follows is not a gzip member. */
static int start_member(struct warc_reader *r)
{
	int rc = in_fill(r);
	if (rc <= 0)
		return rc;
	r->member_off = in_cur(r);
	r->member_done = false;
	r->out_pos = r->out_len = 0;
	if (inflateReset(&r->z) != Z_OK)
		return -EIO;
	/* two magic bytes, possibly split across reads */
	if (r->in[r->in_pos] != 0x1f || (r->in_pos + 1 < r->in_len && r->in[r->in_pos + 1] != 0x8b))
		return -EBADMSG;
	return 1;
}

/* --- finding the next record after damage ---------------------------- */

static int resync(struct warc_reader *r)
{
	static const uint8_t gzmagic[3] = { 0x1f, 0x8b, 0x08 };
	const uint8_t *pat = r->gz ? gzmagic : (const uint8_t *)"WARC/";
	size_t plen = r->gz ? 3 : 5;
	uint64_t from = (r->gz ? r->member_off : r->rec_off) + 1;
	int rc;
	r->in_block = false;
	if (r->seekable) {
		if ((rc = seek_to(r, from)))
			return rc;
	}
	r->searching = true;
	for (;;) {
		if ((rc = in_fill(r)) <= 0)
			return rc;
		size_t n = r->in_len - r->in_pos;
		const uint8_t *p = memmem(r->in + r->in_pos, n, pat, plen);
		if (p) {
			r->in_pos = (size_t)(p - r->in);
			/* keep the whole pattern in the buffer: if it ends at
			 * the buffer's edge, read again from its start */
			if (r->in_len - r->in_pos < plen && r->seekable) {
				if ((rc = seek_to(r, in_cur(r))) || (rc = in_fill(r)) <= 0)
					return rc;
			}
			break;
		}
		/* the pattern may straddle two reads: keep its possible start */
		size_t keep = n < plen - 1 ? n : plen - 1;
		uint64_t next = in_cur(r) + n - keep;
		if (r->seekable) {
			if ((rc = seek_to(r, next)))
				return rc;
			if (r->in_eof)
				return 0;
			/* a short tail that cannot hold the pattern: done */
			if ((rc = in_fill(r)) <= 0)
				return rc;
			if (in_cur(r) + (r->in_len - r->in_pos) <= next + keep && r->in_len - r->in_pos == keep)
				return 0;
		} else {
			r->in_pos += n; /* a pipe: a pattern split across reads is missed */
		}
	}
	if (r->gz) {
		r->member_done = true; /* read_head starts the member here */
		r->out_pos = r->out_len = 0;
	} else {
		r->rec_off = in_cur(r);
	}
	return 1;
}

/* --- records --------------------------------------------------------- */

/* "sha1:" or "sha256:" and the digest in base32 (upper or lower case,
 * padding allowed) or base16, as writers give them (wget and Heritrix sha1
 * base32, warcio.js sha256 hex). 0, or -EINVAL for another algorithm or a
 * malformed value: such a block is not checked. */
static int digest_parse(const char *d, uint8_t *out, unsigned *len)
{
	unsigned want;
	if (!strncasecmp(d, "sha1:", 5))
		want = 20, d += 5;
	else if (!strncasecmp(d, "sha256:", 7))
		want = 32, d += 7;
	else
		return -EINVAL;
	size_t n = strcspn(d, " \t=");
	if (n == 2 * want) {
		for (unsigned i = 0; i < want; i++) {
			int hi = hexdig(d[2 * i]), lo = hexdig(d[2 * i + 1]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			out[i] = (uint8_t)(hi << 4 | lo);
		}
	} else if (n == (want * 8 + 4) / 5) {
		uint64_t acc = 0;
		unsigned bits = 0, k = 0;
		for (size_t i = 0; i < n; i++) {
			int c = d[i], v = c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a'
					  : c >= '2' && c <= '7' ? c - '2' + 26 : -1;
			if (v < 0)
				return -EINVAL;
			acc = acc << 5 | (uint64_t)v;
			bits += 5;
			if (bits >= 8) {
				bits -= 8;
				if (k < want)
					out[k++] = (uint8_t)(acc >> bits);
			}
		}
		if (k != want)
			return -EINVAL;
	} else
		return -EINVAL;
	*len = want;
	return 0;
}

const char *warc_field(const struct warc_head *h, const char *name)
{
	for (size_t i = 0; i < h->nfields; i++)
		if (!strcasecmp(h->f[i].name, name))
			return h->f[i].value;
	return NULL;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		s[--n] = 0;
	return s;
}

/* Split the header text into fields. -EBADMSG with a report if a line is
 * not "Name: value". */
static int parse_fields(struct warc_reader *r, size_t len)
{
	char *h = r->hbuf;
	h[len] = 0;
	/* unfold continuation lines */
	for (size_t i = 0; i + 1 < len; i++)
		if (h[i] == '\n' && (h[i + 1] == ' ' || h[i + 1] == '\t')) {
			h[i] = ' ';
			if (i && h[i - 1] == '\r')
				h[i - 1] = ' ';
		}
	struct warc_head *hd = &r->head;
	hd->nfields = 0;
	char *save = NULL;
	char *line = strtok_r(h, "\n", &save);
	hd->version = trim(line);
	while ((line = strtok_r(NULL, "\n", &save))) {
		line = trim(line);
		if (!*line)
			break;
		char *colon = strchr(line, ':');
		if (!colon) {
			say(r, r->rec_off, "a record header line is not 'Name: value' (\"%.60s\"): record skipped", line);
			return -EBADMSG;
		}
		if (hd->nfields == WARC_FIELDS_MAX) {
			say(r, r->rec_off, "more than %d header fields: record skipped", WARC_FIELDS_MAX);
			return -EBADMSG;
		}
		*colon = 0;
		hd->f[hd->nfields].name = trim(line);
		hd->f[hd->nfields].value = trim(colon + 1);
		hd->nfields++;
	}
	return 0;
}

/* Read the next record header. 1: a record; 2: a record to skip (its
 * length is known, it is reported); 0: the end; -EBADMSG: damage
 * (reported); -errno. */
static int read_head(struct warc_reader *r)
{
	int rc, c;
	for (;;) {
		if (r->gz && r->member_done && r->out_pos == r->out_len) {
			rc = start_member(r);
			if (rc == -EBADMSG) {
				r->rec_off = in_cur(r);
				say(r, in_cur(r), "not a gzip member where one should begin");
				return rc;
			}
			if (rc <= 0)
				return rc;
		}
		r->rec_off = r->gz ? r->member_off : in_cur(r);
		/* blank lines between records are tolerated */
		do {
			if (!r->gz)
				r->rec_off = in_cur(r);
			rc = get_byte(r, &c);
		} while (rc == 1 && (c == '\r' || c == '\n'));
		if (rc == 0 && r->gz && r->member_done)
			continue; /* an empty member */
		if (rc == -EBADMSG) {
			say(r, r->rec_off, "damaged or truncated gzip member");
			return rc;
		}
		if (rc <= 0)
			return rc;
		break;
	}
	size_t n = 0;
	r->hbuf[n++] = (char)c;
	for (;;) {
		rc = get_byte(r, &c);
		if (rc == 0 || rc == -EBADMSG) {
			say(r, r->rec_off, rc ? "damaged or truncated gzip member inside a record header"
					      : "the input ends inside a record header");
			return -EBADMSG;
		}
		if (rc < 0)
			return rc;
		if (n == WARC_HEAD_MAX - 1) {
			say(r, r->rec_off, "a record header longer than %d bytes", WARC_HEAD_MAX);
			return -EBADMSG;
		}
		r->hbuf[n++] = (char)c;
		if (n == 5 && memcmp(r->hbuf, "WARC/", 5)) {
			say(r, r->rec_off, "no 'WARC/' version line where a record should begin");
			return -EBADMSG;
		}
		if (c == '\n' && n >= 2 &&
		    (r->hbuf[n - 2] == '\n' || (n >= 3 && r->hbuf[n - 2] == '\r' && r->hbuf[n - 3] == '\n')))
			break;
	}
	if ((rc = parse_fields(r, n)))
		return rc;
	struct warc_head *hd = &r->head;
	hd->offset = r->rec_off;
	const char *cl = warc_field(hd, "Content-Length");
	char *end = NULL;
	if (!cl || !*cl || *cl == '-' || (errno = 0, hd->length = strtoull(cl, &end, 10), errno) || *end) {
		say(r, r->rec_off, "no valid Content-Length (%s): record skipped", cl ? cl : "missing");
		return -EBADMSG;
	}
	hd->type = warc_field(hd, "WARC-Type");
	r->in_block = true;
	r->left = hd->length;
	r->check_digest = false;
	const char *bd = warc_field(hd, "WARC-Block-Digest");
	if (bd && digest_parse(bd, r->want, &r->want_len) == 0)
		r->check_digest = EVP_DigestInit_ex(r->md, r->want_len == 20 ? EVP_sha1() : EVP_sha256(), NULL) == 1;
	if (r->searching) {
		r->searching = false;
		if (r->report) {
			char msg[160];
			snprintf(msg, sizeof msg, "went on at the next record, offset %llu",
				 (unsigned long long)r->rec_off);
			r->report(r->ctx, r->damage_off, msg);
		}
	}
	if (!hd->type || !*hd->type) {
		say(r, r->rec_off, "no WARC-Type: record skipped");
		return 2;
	}
	return 1;
}

static int skip_block(struct warc_reader *r, bool hash)
{
	while (r->left) {
		int rc = more(r);
		if (rc <= 0) {
			say(r, r->rec_off, "the record's block ends %llu bytes short of its Content-Length (%s)",
			    (unsigned long long)r->left,
			    rc == 0 ? (r->gz ? "a wrong length, or a record split across gzip members"
					     : "a truncated file or a wrong length")
				    : "a damaged or truncated gzip member");
			r->broken = true;
			r->in_block = false;
			return rc < 0 && rc != -EBADMSG ? rc : -EBADMSG;
		}
		size_t n;
		const uint8_t *p = avail(r, &n);
		if (n > r->left)
			n = (size_t)r->left;
		if (hash && r->check_digest)
			EVP_DigestUpdate(r->md, p, n);
		consume(r, n);
		r->left -= n;
	}
	return 0;
}

ssize_t warc_read(struct warc_reader *r, void *buf, size_t len)
{
	if (!r->in_block)
		return r->broken ? -EBADMSG : 0;
	if (!r->left || !len)
		return 0;
	int rc = more(r);
	if (rc <= 0) {
		int e = skip_block(r, false); /* reports and marks the damage */
		return e ? e : -EBADMSG;
	}
	size_t n;
	const uint8_t *p = avail(r, &n);
	if (n > len)
		n = len;
	if (n > r->left)
		n = (size_t)r->left;
	memcpy(buf, p, n);
	if (r->check_digest)
		EVP_DigestUpdate(r->md, p, n);
	consume(r, n);
	r->left -= n;
	return (ssize_t)n;
}

int warc_check_end(struct warc_reader *r)
{
	if (!r->in_block)
		return r->broken ? -EBADMSG : 0;
	int rc = skip_block(r, true);
	if (rc)
		return rc;
	r->in_block = false;
	/* CRLF CRLF (LF LF tolerated) */
	char t[4];
	size_t n = 0;
	int c = 0;
	while (n < 4) {
		rc = get_byte(r, &c);
		if (rc != 1)
			break;
		t[n++] = (char)c;
		if (n == 2 && t[0] == '\n' && t[1] == '\n')
			break;
	}
	bool ok = (n == 4 && !memcmp(t, "\r\n\r\n", 4)) || (n == 2 && !memcmp(t, "\n\n", 2));
	if (!ok) {
		say(r, r->rec_off,
		    "no CRLF CRLF after the record's %llu bytes: its Content-Length is wrong or the record is damaged",
		    (unsigned long long)r->head.length);
		r->broken = true;
		return -EBADMSG;
	}
	if (r->check_digest) {
		uint8_t got[EVP_MAX_MD_SIZE];
		unsigned glen = 0;
		EVP_DigestFinal_ex(r->md, got, &glen);
		r->check_digest = false;
		if (glen != r->want_len || memcmp(got, r->want, glen)) {
			say(r, r->rec_off, "WARC-Block-Digest %s does not match the block",
			    warc_field(&r->head, "WARC-Block-Digest"));
			return -EBADMSG;
		}
	}
	return 0;
}

int warc_next(struct warc_reader *r, const struct warc_head **h)
{
	int rc;
	if (r->in_block) {
		r->check_digest = false; /* a block skipped is not checked */
		warc_check_end(r);
	}
	for (;;) {
		if (r->broken) {
			if (!r->searching)
				r->damage_off = r->rec_off;
			r->broken = false;
			rc = resync(r);
			if (rc <= 0) {
				r->searching = false;
				return rc;
			}
		}
		rc = read_head(r);
		if (rc == 1) {
			r->records++;
			*h = &r->head;
			return 1;
		}
		if (rc == 2) {
			r->records++;
			r->check_digest = false;
			warc_check_end(r);
			continue;
		}
		if (rc == -EBADMSG) {
			r->in_block = false;
			r->broken = true;
			continue;
		}
		r->searching = false;
		return rc;
	}
}

int warc_reader_open(int fd, warc_report_fn report, void *ctx, struct warc_reader **out)
{
	struct warc_reader *r = calloc(1, sizeof *r);
	if (!r)
		return -ENOMEM;
	r->fd = fd;
	r->report = report;
	r->ctx = ctx;
	struct stat sb;
	off_t cur = lseek(fd, 0, SEEK_CUR);
	r->seekable = !fstat(fd, &sb) && S_ISREG(sb.st_mode) && cur >= 0;
	r->in_off = cur > 0 ? (uint64_t)cur : 0;
	r->in = malloc(RD_IN);
	r->hbuf = malloc(WARC_HEAD_MAX);
	r->md = EVP_MD_CTX_new();
	int rc = (!r->in || !r->hbuf || !r->md) ? -ENOMEM : 0;
	if (!rc) {
		rc = in_fill(r);
		if (rc > 0) {
			rc = 0;
			/* A gzip file begins with the member magic; anything
			 * else is read as a plain WARC. */
			r->gz = r->in_len >= 2 && r->in[0] == 0x1f && r->in[1] == 0x8b;
		}
	}
	if (!rc && r->gz) {
		r->out = malloc(RD_OUT);
		/* 15 + 32: zlib or gzip header detected, one member at a time */
		if (!r->out || inflateInit2(&r->z, 15 + 32) != Z_OK)
			rc = -ENOMEM;
		else
			r->z_ready = true;
		r->member_done = true;
	}
	if (rc) {
		warc_reader_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

void warc_reader_close(struct warc_reader *r)
{
	if (!r)
		return;
	if (r->z_ready)
		inflateEnd(&r->z);
	EVP_MD_CTX_free(r->md);
	free(r->in);
	free(r->out);
	free(r->hbuf);
	free(r);
}

uint64_t warc_reader_records(const struct warc_reader *r)
{
	return r->records;
}

uint64_t warc_reader_errors(const struct warc_reader *r)
{
	return r->errors;
}
