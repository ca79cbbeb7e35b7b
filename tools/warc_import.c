/* warc_import.c - `pagededup import`: WARC crawls made elsewhere brought
 * into the archive.
 *
 *   pagededup import WARC... -C DIR
 *
 * import: each WARC (gzip or plain, "-" for standard input) is read as a
 * stream; response records with a 2xx status, resource records and
 * revisits that resolve become files under DIR in wget's mirror layout
 * (import_path below), written with ordinary calls so that the mount
 * deduplicates them as any crawler's writes. Each file gets
 * user.xdg.origin.url, and for a response its HTTP status line and header
 * as received in user.warc.http (at most 64 KiB, the attribute limit);
 * its mtime is the WARC-Date. A file is written under a temporary name and
 * renamed in place once its record has been read whole and checked, so a
 * damaged record leaves nothing behind. A response in chunked transfer
 * coding (as Heritrix and warcprox keep it) is undone into the page, and
 * the Transfer-Encoding line left out of the kept header; a
 * Content-Encoding (gzip, br) is kept as sent, with its header line. Records of other types (warcinfo,
 * request, metadata, conversion, continuation) and responses of other
 * statuses (redirects, errors) are skipped and counted.
 */
#include "warccmd_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "cli.h"
#include "archive/archive.h"
#include "archive/ns.h"
#include "archive/xattr.h"
#include "base/fdio.h"
#include "blob/blob.h"
#include "store/store.h"
#include "warc/warc.h"


/* ===================================================================== */
/* Import                                                                */
/* ===================================================================== */

/* Where each imported record went, to resolve revisits: by record ID,
 * by target URI, by payload digest. */
struct seen {
	char *key;
	char *path;
};

struct importer {
	const char *dir;
	int dirfd;
	const char *src;      /* the WARC being read, for reports */
	uint8_t *buf;
	unsigned tmp_seq;
	char last_dir[8192];  /* the directory the last page went to */
	struct seen *tab;
	size_t tab_cap, tab_n;
	uint64_t records, pages, revisits, skipped_type, skipped_status, unresolved, malformed, renamed, same;
	uint64_t bytes;
};

static uint64_t key_hash(const char *k)
{
	return XXH3_64bits(k, strlen(k));
}

static const char *seen_get(struct importer *im, const char *key)
{
	if (!im->tab_cap || !key)
		return NULL;
	size_t j = (size_t)key_hash(key) & (im->tab_cap - 1);
	while (im->tab[j].key) {
		if (!strcmp(im->tab[j].key, key))
			return im->tab[j].path;
		j = (j + 1) & (im->tab_cap - 1);
	}
	return NULL;
}

static int seen_put(struct importer *im, const char *key, const char *path)
{
	if (!key || !*key)
		return 0;
	if ((im->tab_n + 1) * 4 > im->tab_cap * 3) {
		size_t cap = im->tab_cap ? im->tab_cap * 2 : 1024;
		struct seen *t = calloc(cap, sizeof *t);
		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < im->tab_cap; i++) {
			if (!im->tab[i].key)
				continue;
			size_t j = (size_t)key_hash(im->tab[i].key) & (cap - 1);
			while (t[j].key)
				j = (j + 1) & (cap - 1);
			t[j] = im->tab[i];
		}
		free(im->tab);
		im->tab = t;
		im->tab_cap = cap;
	}
	size_t j = (size_t)key_hash(key) & (im->tab_cap - 1);
	while (im->tab[j].key) {
		if (!strcmp(im->tab[j].key, key)) {
			char *p = strdup(path);
			if (!p)
				return -ENOMEM;
			free(im->tab[j].path); /* the latest capture of a URI wins */
			im->tab[j].path = p;
			return 0;
		}
		j = (j + 1) & (im->tab_cap - 1);
	}
	im->tab[j].key = strdup(key);
	im->tab[j].path = strdup(path);
	if (!im->tab[j].key || !im->tab[j].path)
		return -ENOMEM;
	im->tab_n++;
	return 0;
}

static void import_report(void *ctx, uint64_t offset, const char *what)
{
	struct importer *im = ctx;
	fprintf(stderr, "pagededup import: %s: offset %llu: %s\n", im->src, (unsigned long long)offset, what);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Append one path segment (raw bytes s[0..n)) made safe: %XX decoded
 * except where the byte is '/', NUL or a control character (kept as
 * %XX); "." and ".." dropped; a segment longer than 240 bytes cut to 200
 * and given "~" and 16 hex digits of its XXH3, so that two long names
 * stay apart. Returns the new length, or -ENAMETOOLONG. */
static int put_segment(char *out, size_t size, size_t n, const char *s, size_t len, bool query)
{
	char seg[4096];
	size_t k = 0;
	for (size_t i = 0; i < len && k + 4 < sizeof seg; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '%' && i + 2 < len + 0 && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
			int v = hexval(s[i + 1]) * 16 + hexval(s[i + 2]);
			if (v == '/' || v < 0x20 || v == 0x7f) {
				memcpy(seg + k, s + i, 3);
				k += 3;
			} else
				seg[k++] = (char)v;
			i += 2;
		} else if (c == '/' && query) {
			memcpy(seg + k, "%2F", 3);
			k += 3;
		} else if (c < 0x20 || c == 0x7f) {
			k += (size_t)snprintf(seg + k, sizeof seg - k, "%%%02X", c);
		} else
			seg[k++] = (char)c;
	}
	seg[k] = 0;
	if (!query && (!strcmp(seg, ".") || !strcmp(seg, "..") || k == 0))
		return (int)n;
	if (k > 240) {
		char tail[24];
		snprintf(tail, sizeof tail, "~%016llx", (unsigned long long)XXH3_64bits(seg, k));
		memcpy(seg + 200, tail, strlen(tail) + 1);
		k = strlen(seg);
	}
	if (n + k + 2 >= size)
		return -ENAMETOOLONG;
	if (!query && n)
		out[n++] = '/';
	memcpy(out + n, seg, k + 1);
	return (int)(n + k);
}

/* The mirror path of a URI, as wget lays out a mirror: HOST[:PORT]/PATH,
 * the host lower-cased, "index.html" for an empty path or one ending in
 * '/', the query kept after '?' in the last name with any '/' in it as
 * %2F, the fragment dropped; "." and ".." never climb. http and https
 * URIs, and file:///PATH (what export names a page outside a host
 * directory) as PATH; -EINVAL for others. */
static int import_path(const char *uri, char *out, size_t size)
{
	const char *p;
	int n = 0;
	if (!strncasecmp(uri, "http://", 7))
		p = uri + 7;
	else if (!strncasecmp(uri, "https://", 8))
		p = uri + 8;
	else if (!strncasecmp(uri, "file:///", 8)) {
		/* what export names a page outside a host directory */
		out[0] = 0;
		p = uri + 7;
		goto path;
	} else
		return -EINVAL;
	size_t hl = strcspn(p, "/?#");
	const char *at = memchr(p, '@', hl);
	if (at) {
		hl -= (size_t)(at + 1 - p);
		p = at + 1;
	}
	if (!hl || hl > 255)
		return -EINVAL;
	char host[256];
	for (size_t i = 0; i < hl; i++) {
		char c = p[i];
		if (c == '/' || c == '\\' || (unsigned char)c < 0x20)
			return -EINVAL;
		host[i] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	host[hl] = 0;
	/* default ports are not part of the name */
	size_t hlen = hl;
	if ((hlen > 3 && !strcmp(host + hlen - 3, ":80") && !strncasecmp(uri, "http:", 5)) ||
	    (hlen > 4 && !strcmp(host + hlen - 4, ":443") && !strncasecmp(uri, "https:", 6)))
		host[strcspn(host, ":")] = 0;
	if (!strcmp(host, ".") || !strcmp(host, ".."))
		return -EINVAL;
	n = put_segment(out, size, 0, host, strlen(host), false);
	if (n <= 0)
		return -EINVAL;
	p += hl;
path:;
	const char *path = p;
	size_t plen = strcspn(path, "?#");
	const char *q = path[plen] == '?' ? path + plen + 1 : NULL;
	size_t qlen = q ? strcspn(q, "#") : 0;
	bool dir = plen == 0 || path[plen - 1] == '/';
	size_t i = 0;
	while (i < plen) {
		while (i < plen && path[i] == '/')
			i++;
		size_t j = i;
		while (j < plen && path[j] != '/')
			j++;
		if (j > i && (n = put_segment(out, size, (size_t)n, path + i, j - i, false)) < 0)
			return n;
		i = j;
	}
	/* a path of only "." and ".." names the host's root */
	if (dir || (p != uri + 7 && !strchr(out, '/')) || !out[0]) {
		if ((n = put_segment(out, size, (size_t)n, "index.html", 10, false)) < 0)
			return n;
	}
	if (q) {
		if ((size_t)n + 2 >= size)
			return -ENAMETOOLONG;
		out[n++] = '?';
		out[n] = 0;
		if ((n = put_segment(out, size, (size_t)n, q, qlen, true)) < 0)
			return n;
	}
	/* the last name must fit NAME_MAX too */
	const char *last = strrchr(out, '/');
	if (strlen(last ? last + 1 : out) > 255)
		return -ENAMETOOLONG;
	return 0;
}

/* Make the directories of rel under DIR; a page in the way moves into the
 * directory made in its place (file_to_index); -ENOTDIR for anything else
 * in the way. */
/* A page at NAME when NAME must become a directory (http://h/a, then
 * http://h/a/b): the page moves to NAME/index.html, as a mirror of
 * http://h/a/ would have it, its origin URL kept with it. */
static int file_to_index(struct importer *im, const char *name)
{
	char moved[8300], dst[8300];
	snprintf(moved, sizeof moved, "%s.pagededup-move.%d", name, (int)getpid());
	snprintf(dst, sizeof dst, "%s/index.html", name);
	if (renameat(im->dirfd, name, im->dirfd, moved))
		return -errno;
	if (mkdirat(im->dirfd, name, 0755) || renameat(im->dirfd, moved, im->dirfd, dst)) {
		int e = -errno;
		renameat(im->dirfd, moved, im->dirfd, name);
		return e;
	}
	for (size_t i = 0; i < im->tab_cap; i++) /* revisits may name it */
		if (im->tab[i].path && !strcmp(im->tab[i].path, name)) {
			char *p = strdup(dst);
			if (!p)
				return -ENOMEM;
			free(im->tab[i].path);
			im->tab[i].path = p;
		}
	return 0;
}

static int make_dirs(struct importer *im, const char *rel)
{
	char tmp[8192];
	/* Pages of one directory come together in a crawl: the directory of
	 * the last page needs no look-up again (each is a round trip through
	 * the mount). */
	const char *slash = strrchr(rel, '/');
	size_t dl = slash ? (size_t)(slash - rel) : 0;
	if (dl && dl == strlen(im->last_dir) && !memcmp(rel, im->last_dir, dl))
		return 0;
	snprintf(tmp, sizeof tmp, "%s", rel);
	for (char *s = strchr(tmp, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		if (mkdirat(im->dirfd, tmp, 0755) && errno != EEXIST)
			return -errno;
		struct stat sb;
		if (fstatat(im->dirfd, tmp, &sb, AT_SYMLINK_NOFOLLOW))
			return -errno;
		if (S_ISREG(sb.st_mode)) {
			int rc = file_to_index(im, tmp);
			if (rc)
				return rc;
		} else if (!S_ISDIR(sb.st_mode))
			return -ENOTDIR;
		*s = '/';
	}
	if (dl < sizeof im->last_dir) {
		memcpy(im->last_dir, rel, dl);
		im->last_dir[dl] = 0;
	}
	return 0;
}

/* The name a new capture goes to: rel itself, rel/index.html if rel is a
 * directory, or rel.1, rel.2 ... when the name is taken (a page already
 * there is never overwritten). */
static int final_name(struct importer *im, const char *rel, char *out, size_t size)
{
	struct stat sb;
	snprintf(out, size, "%s", rel);
	if (!fstatat(im->dirfd, out, &sb, AT_SYMLINK_NOFOLLOW) && S_ISDIR(sb.st_mode))
		snprintf(out, size, "%s/index.html", rel);
	char base[8192];
	snprintf(base, sizeof base, "%s", out);
	for (unsigned k = 1; !fstatat(im->dirfd, out, &sb, AT_SYMLINK_NOFOLLOW); k++) {
		if ((size_t)snprintf(out, size, "%s.%u", base, k) >= size)
			return -ENAMETOOLONG;
		im->renamed += k == 1;
	}
	return errno == ENOENT ? 0 : -errno;
}

struct capture {
	const char *uri;
	const char *http;   /* HTTP header to keep, or NULL */
	size_t http_len;
	int64_t sec;
	uint32_t nsec;
	bool have_date;
	bool chunked;       /* the payload is in HTTP/1.1 chunked framing */
};

/* HTTP/1.1 chunked transfer coding (RFC 9112 section 7.1), undone as the
 * bytes stream by: the page is the data of the chunks. Chunk extensions
 * and trailer fields are dropped. */
enum { CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_TRAILER_LINE, CH_DONE };
struct dechunk {
	int state;
	uint64_t left;
	unsigned digits;
};

/* Feed n bytes; the data goes to fd. -EBADMSG on bad framing. */
static int dechunk_feed(struct dechunk *d, const uint8_t *in, size_t n, int fd, uint64_t *total)
{
	size_t i = 0;
	while (i < n) {
		uint8_t c = in[i];
		switch (d->state) {
		case CH_SIZE: {
			int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
				: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
			if (v >= 0) {
				if (++d->digits > 15)
					return -EPROTO;
				d->left = d->left * 16 + (uint64_t)v;
			} else if (!d->digits) {
				return -EPROTO;
			} else if (c == ';' || c == ' ' || c == '\t') {
				d->state = CH_EXT;
			} else if (c == '\r') {
				d->state = CH_SIZE_LF;
			} else if (c == '\n') {
				d->state = d->left ? CH_DATA : CH_TRAILER;
			} else
				return -EPROTO;
			i++;
			break;
		}
		case CH_EXT:
			if (c == '\n')
				d->state = d->left ? CH_DATA : CH_TRAILER;
			i++;
			break;
		case CH_SIZE_LF:
			if (c != '\n')
				return -EPROTO;
			d->state = d->left ? CH_DATA : CH_TRAILER;
			i++;
			break;
		case CH_DATA: {
			size_t k = n - i < d->left ? n - i : (size_t)d->left;
			int rc = fd_write_all(fd, in + i, k);
			if (rc)
				return rc;
			*total += k;
			d->left -= k;
			i += k;
			if (!d->left)
				d->state = CH_DATA_CR;
			break;
		}
		case CH_DATA_CR:
			if (c == '\n') {
				d->state = CH_SIZE;
				d->digits = 0;
			} else if (c == '\r')
				d->state = CH_DATA_LF;
			else
				return -EPROTO;
			i++;
			break;
		case CH_DATA_LF:
			if (c != '\n')
				return -EPROTO;
			d->state = CH_SIZE;
			d->digits = 0;
			i++;
			break;
		case CH_TRAILER: /* at the start of a trailer line */
			if (c == '\n')
				d->state = CH_DONE;
			else if (c != '\r')
				d->state = CH_TRAILER_LINE;
			i++;
			break;
		case CH_TRAILER_LINE:
			if (c == '\n')
				d->state = CH_TRAILER;
			i++;
			break;
		default: /* CH_DONE: bytes after the last chunk are not the page's */
			return 0;
		}
	}
	return 0;
}

/* The body ended: complete if the last chunk was seen. */
static int dechunk_end(const struct dechunk *d)
{
	return d->state == CH_DONE || d->state == CH_TRAILER ? 0 : -EPROTO;
}

/* Write a file for one capture: bytes from the reader (r != NULL, `pre`
 * already read from it) or from a file imported before (copy_from). The
 * file is named only once complete. */
static int write_capture(struct importer *im, struct warc_reader *r, const uint8_t *pre, size_t pre_len,
			 const char *copy_from, const struct capture *cap, char *made, size_t made_size)
{
	char rel[8192], tmp[8300];
	int rc = import_path(cap->uri, rel, sizeof rel);
	if (rc)
		return rc;
	if ((rc = make_dirs(im, rel)))
		return rc;
	const char *slash = strrchr(rel, '/');
	snprintf(tmp, sizeof tmp, "%.*s.pagededup-import.%d.%u", slash ? (int)(slash - rel + 1) : 0, rel,
		 (int)getpid(), im->tmp_seq++);
	int fd = openat(im->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	int sfd = -1;
	struct dechunk dc = { 0 };
	uint64_t total = 0;
	if (pre_len && cap->chunked)
		rc = dechunk_feed(&dc, pre, pre_len, fd, &total);
	else if (pre_len) {
		rc = fd_write_all(fd, pre, pre_len);
		total = pre_len;
	}
	if (!rc && r) {
		for (;;) {
			ssize_t n = warc_read(r, im->buf, IO_CHUNK);
			if (n < 0) {
				rc = (int)n;
				break;
			}
			if (n == 0)
				break;
			if (cap->chunked)
				rc = dechunk_feed(&dc, im->buf, (size_t)n, fd, &total);
			else if (!(rc = fd_write_all(fd, im->buf, (size_t)n)))
				total += (uint64_t)n;
			if (rc)
				break;
		}
		if (!rc)
			rc = warc_check_end(r);
		if (!rc && cap->chunked)
			rc = dechunk_end(&dc);
	} else if (!rc && copy_from) {
		sfd = openat(im->dirfd, copy_from, O_RDONLY | O_CLOEXEC);
		if (sfd < 0)
			rc = -errno;
		for (uint64_t off = 0; !rc;) {
			ssize_t n = fd_pread_full(sfd, im->buf, IO_CHUNK, off);
			if (n < 0)
				rc = (int)n;
			if (n <= 0)
				break;
			if ((rc = fd_write_all(fd, im->buf, (size_t)n)))
				break;
			off += (uint64_t)n;
			total += (uint64_t)n;
		}
	}
	if (sfd >= 0)
		close(sfd);
	if (!rc && fsetxattr(fd, XATTR_URL, cap->uri, strlen(cap->uri), 0))
		rc = -errno;
	if (!rc && cap->http && fsetxattr(fd, XATTR_HTTP, cap->http, cap->http_len, 0))
		rc = -errno;
	if (!rc && cap->have_date) {
		struct timespec ts[2] = { { cap->sec, cap->nsec }, { cap->sec, cap->nsec } };
		if (futimens(fd, ts))
			rc = -errno;
	}
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && (rc = final_name(im, rel, made, made_size)) == 0 && renameat(im->dirfd, tmp, im->dirfd, made))
		rc = -errno;
	if (rc) {
		unlinkat(im->dirfd, tmp, 0);
		return rc;
	}
	im->bytes += total;
	return 0;
}

/* A header that says "Transfer-Encoding: chunked": that line is taken
 * out (the file holds the page, not the framing) and true returned. */
static bool http_unchunk_head(uint8_t *h, size_t *len)
{
	uint8_t *p = h, *end = h + *len;
	while (p < end) {
		uint8_t *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			break;
		size_t l = (size_t)(eol + 1 - p);
		if (l > 18 && !strncasecmp((char *)p, "transfer-encoding:", 18) &&
		    memmem(p, l, "chunked", 7)) {
			memmove(p, eol + 1, (size_t)(end - eol - 1));
			*len -= l;
			return true;
		}
		p = eol + 1;
	}
	return false;
}

/* Read the HTTP header at the start of a response block (at most
 * HTTP_HEAD_MAX bytes). *head_len: its length with the CRLF CRLF; the
 * bytes read past it stay in buf[head_len..*got). */
static int read_http_head(struct warc_reader *r, uint8_t *buf, size_t *got, size_t *head_len)
{
	size_t n = 0;
	while (n < HTTP_HEAD_MAX) {
		ssize_t k = warc_read(r, buf + n, HTTP_HEAD_MAX - n);
		if (k < 0)
			return (int)k;
		if (k == 0)
			break;
		size_t from = n >= 3 ? n - 3 : 0;
		n += (size_t)k;
		const uint8_t *e = memmem(buf + from, n - from, "\r\n\r\n", 4);
		if (e) {
			*head_len = (size_t)(e - buf) + 4;
			*got = n;
			return 0;
		}
	}
	*got = n;
	return -EBADMSG;
}

static int import_record(struct importer *im, struct warc_reader *r, const struct warc_head *h)
{
	const char *type = h->type;
	const char *uri = warc_field(h, "WARC-Target-URI");
	char made[8300];
	struct capture cap = { .uri = uri };
	const char *date = warc_field(h, "WARC-Date");
	cap.have_date = date && !warc_parse_date(date, &cap.sec, &cap.nsec);
	if (uri && *uri == '<') { /* WARC/1.0 drafts wrote <uri> */
		static char u[URI_MAX];
		snprintf(u, sizeof u, "%.*s", (int)strcspn(uri + 1, ">"), uri + 1);
		cap.uri = uri = u;
	}
	bool response = !strcasecmp(type, "response");
	bool resource = !strcasecmp(type, "resource");
	bool revisit = !strcasecmp(type, "revisit");
	if (!response && !resource && !revisit) {
		im->skipped_type++;
		return 0;
	}
	if (!uri || !*uri) {
		import_report(im, h->offset, "a record without WARC-Target-URI: skipped");
		im->malformed++;
		return 0;
	}
	char rel[8192];
	if (import_path(uri, rel, sizeof rel) == -EINVAL) {
		im->skipped_type++; /* metadata:, dns:, urn: ... name no page */
		return 0;
	}
	/* The same bytes already under this name (wget's layout gives
	 * http://h/ and http://h/index.html one name): nothing to add. */
	const char *pd = warc_field(h, "WARC-Payload-Digest");
	const char *there = seen_get(im, pd);
	if (there && !strcmp(there, rel)) {
		im->same++;
		return 0;
	}
	const char *ct = warc_field(h, "Content-Type");
	bool http = response || (revisit && ct && !strncasecmp(ct, "application/http", 16));
	size_t got = 0, head_len = 0;
	int rc = 0;
	if (http && h->length) {
		rc = read_http_head(r, im->buf, &got, &head_len);
		if (rc == -EBADMSG && got == h->length && revisit) {
			head_len = got; /* a revisit's header without the blank line */
			rc = 0;
		} else if (rc) {
			if (rc == -EBADMSG && got < HTTP_HEAD_MAX) {
				if (warc_check_end(r) == 0) {
					import_report(im, h->offset, "no HTTP header in a response record: skipped");
					im->malformed++;
				}
				return 0;
			}
			if (rc == -EBADMSG && got == HTTP_HEAD_MAX) {
				import_report(im, h->offset, "HTTP header longer than 64 KiB: record skipped");
				im->malformed++;
				return 0;
			}
			return rc;
		}
		const char *sp = memchr(im->buf, ' ', head_len);
		int status = sp ? atoi(sp + 1) : 0;
		if (status < 200 || status > 299) {
			im->skipped_status++;
			return 0;
		}
		cap.http = (const char *)im->buf;
		cap.http_len = head_len;
		cap.chunked = http_unchunk_head(im->buf, &cap.http_len);
	}
	if (revisit) {
		const char *from = seen_get(im, warc_field(h, "WARC-Refers-To"));
		if (!from)
			from = seen_get(im, warc_field(h, "WARC-Refers-To-Target-URI"));
		if (!from)
			from = seen_get(im, warc_field(h, "WARC-Payload-Digest"));
		if (!from) {
			char msg[URI_MAX + 128];
			snprintf(msg, sizeof msg, "revisit of %s: the record it names was not imported: skipped", uri);
			import_report(im, h->offset, msg);
			im->unresolved++;
			return 0;
		}
		if (warc_check_end(r))
			return 0; /* reported by the reader */
		/* the header sits in im->buf, which the copy reuses */
		char *hcopy = cap.http ? malloc(cap.http_len) : NULL;
		if (cap.http) {
			if (!hcopy)
				return -ENOMEM;
			memcpy(hcopy, cap.http, cap.http_len);
			cap.http = hcopy;
		}
		char src_copy[8300];
		snprintf(src_copy, sizeof src_copy, "%s", from);
		rc = write_capture(im, NULL, NULL, 0, src_copy, &cap, made, sizeof made);
		free(hcopy);
		if (rc)
			goto failed;
		im->revisits++;
		im->pages++;
		return seen_put(im, uri, made);
	}
	/* the header moves out of the buffer the block is copied through */
	char *hcopy = NULL;
	uint8_t *rest = NULL;
	if (cap.http) {
		hcopy = malloc(head_len + (got - head_len) + 1);
		if (!hcopy)
			return -ENOMEM;
		memcpy(hcopy, im->buf, got);
		cap.http = hcopy;
		rest = (uint8_t *)hcopy + head_len;
	}
	rc = write_capture(im, r, rest, got - head_len, NULL, &cap, made, sizeof made);
	free(hcopy);
	if (rc)
		goto failed;
	im->pages++;
	if ((rc = seen_put(im, warc_field(h, "WARC-Record-ID"), made)) || (rc = seen_put(im, uri, made)) ||
	    (rc = seen_put(im, warc_field(h, "WARC-Payload-Digest"), made)))
		return rc;
	return 0;
failed:
	if (rc == -EBADMSG)
		return 0; /* reported and counted by the reader; nothing was kept */
	if (rc == -ENOSPC || rc == -EDQUOT || rc == -ENOMEM || rc == -EROFS || rc == -EIO)
		return rc;
	{
		char msg[URI_MAX + 160];
		snprintf(msg, sizeof msg, "%s: %s: record skipped", uri,
			 rc == -EINVAL    ? "not an http(s) URI that names a file"
			 : rc == -ENOTDIR ? "a file is in the way of a directory it needs"
			 : rc == -EPROTO  ? "its chunked transfer coding is broken"
					  : strerror(-rc));
		import_report(im, h->offset, msg);
	}
	im->malformed++;
	return 0;
}

static int import_one(struct importer *im, const char *path)
{
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : dup(0);
	if (fd < 0) {
		fprintf(stderr, "pagededup import: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	im->src = strcmp(path, "-") ? path : "(standard input)";
	struct warc_reader *r;
	int rc = warc_reader_open(fd, import_report, im, &r);
	if (rc) {
		fprintf(stderr, "pagededup import: %s: %s\n", path, strerror(-rc));
		close(fd);
		return rc;
	}
	const struct warc_head *h;
	while ((rc = warc_next(r, &h)) == 1) {
		im->records++;
		if ((rc = import_record(im, r, h))) {
			fprintf(stderr, "pagededup import: %s: offset %llu: %s; stopping\n", im->src,
				(unsigned long long)h->offset, strerror(-rc));
			break;
		}
	}
	if (rc < 0 && rc != -ENOSPC && rc != -EDQUOT && rc != -ENOMEM)
		fprintf(stderr, "pagededup import: %s: %s\n", im->src, strerror(-rc));
	im->malformed += warc_reader_errors(r);
	warc_reader_close(r);
	close(fd);
	return rc < 0 ? rc : 0;
}

static void import_usage(FILE *f)
{
	fputs("usage: pagededup import WARC... -C DIR\n"
	      "  Bring the pages of WARC files (gzip or plain; - for standard input) into\n"
	      "  DIR, a directory inside a mounted archive (or any directory), laid out as\n"
	      "  wget lays out a mirror: HOST/PATH, index.html for a path ending in '/',\n"
	      "  the query kept after '?' in the name. Response (2xx) and resource records\n"
	      "  become files with user.xdg.origin.url and, for responses, the HTTP header\n"
	      "  in user.warc.http; revisits become copies of the page they name; other\n"
	      "  records are counted and skipped. A name already taken gets .1, .2 ...\n"
	      "  A malformed record is reported with its offset and skipped.\n"
	      "  Exit 0: all read; 3: done, but some records were malformed (or revisits\n"
	      "  named records not imported) and were skipped, as reported; 1: an error\n"
	      "  stopped the import; 2: usage error.\n",
	      f);
}

int cmd_import(int argc, char **argv)
{
	static const struct option opts[] = { { "directory", required_argument, 0, 'C' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	const char *dir = NULL;
	int c;
	while ((c = cli_getopt(argc, argv, "C:h", opts)) != -1) {
		if (c == 'C')
			dir = optarg;
		else if (c == 'h') {
			import_usage(stdout);
			return CLI_OK;
		} else
			return CLI_USAGE;
	}
	if (!dir || optind >= argc)
		return cli_usage_error("%s", dir ? "no WARC file given" : "-C DIR is missing");
	struct importer im = { .dir = dir };
	im.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (im.dirfd < 0) {
		fprintf(stderr, "pagededup import: %s: %s (make the directory first)\n", dir, strerror(errno));
		return CLI_FAIL;
	}
	im.buf = malloc(HTTP_HEAD_MAX > IO_CHUNK ? HTTP_HEAD_MAX : IO_CHUNK);
	int rc = im.buf ? 0 : -ENOMEM;
	double t0 = warccmd_now();
	for (int i = optind; !rc && i < argc; i++) {
		rc = import_one(&im, argv[i]);
		if (rc == -ENOENT || rc == -EACCES || rc == -EISDIR)
			rc = 0, im.malformed++; /* that file is reported; go on with the next */
	}
	double dt = warccmd_now() - t0;
	fprintf(stderr,
		"pagededup import: %llu records: %llu pages written (%llu from revisits), %.1f MB; skipped: "
		"%llu of other types, %llu of non-2xx status, %llu unresolved revisits, %llu malformed; "
		"%llu already there (same name, same bytes); %llu names taken got a .N suffix; %.2f s\n",
		(unsigned long long)im.records, (unsigned long long)im.pages, (unsigned long long)im.revisits,
		(double)im.bytes / 1e6, (unsigned long long)im.skipped_type, (unsigned long long)im.skipped_status,
		(unsigned long long)im.unresolved, (unsigned long long)im.malformed, (unsigned long long)im.same,
		(unsigned long long)im.renamed, dt);
	for (size_t i = 0; i < im.tab_cap; i++) {
		free(im.tab[i].key);
		free(im.tab[i].path);
	}
	free(im.tab);
	free(im.buf);
	close(im.dirfd);
	if (rc)
		return CLI_FAIL;
	return im.malformed || im.unresolved ? WARC_CMD_PARTIAL : CLI_OK;
}
