/* warc_export.c - `pagededup export`: the archive as WARC files (ISO 28500,
 * WARC/1.1; what is written is described in core/warc/warc.h).
 *
 *   pagededup export SRC [PATH...] -o OUT.warc.gz [--max-size BYTES] [--cdxj]
 *
 * export: SRC is a mounted archive (or any directory), walked with
 * ordinary calls: the pages' bytes, their user.xdg.origin.url (what
 * `wget --xattr` writes) and user.warc.http (the HTTP response header kept
 * by import) attributes, and user.dedup.refcount, which says whether a
 * page has copies at all. Or SRC is a store directory (it holds meta/ and
 * packs/, or objects/ for format 1): the store is opened read-only (also while it is mounted) and
 * read through the core read path, without a mount. Paths are walked in
 * byte order of their names, so the export is the same each time and the
 * "first" copy of some bytes is the first path in that order. The second
 * and later copies are revisit records (identical-payload-digest) naming
 * the first: a table keyed by the payload's SHA-1 holds, for each page
 * that has copies (refcount > 1, or every page where the refcount is not
 * known), the first record's ID, URI and date: about 100 bytes and the
 * URI per such page.
 *
 * A page without user.xdg.origin.url gets a URI made from its path: when
 * the path's first name looks like a host (has a dot, or is localhost,
 * optionally with :port), as wget's mirror layout does, http://PATH;
 * otherwise file:///PATH. Bytes outside printable ASCII, space, '"', '<',
 * '>', '\', '^', '`', '{', '|', '}' are percent-encoded.
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


/* The first record of each payload that may have copies. */
struct first_copy {
	uint8_t sha1[20];
	bool used;
	char id[WARC_ID_MAX];
	char date[WARC_DATE_MAX];
	char *uri;
};

struct exporter {
	struct warc_writer *w;
	struct first_copy *tab;
	size_t tab_cap, tab_n;
	uint8_t *buf;
	uint64_t pages, responses, resources, revisits, skipped, errors;
	uint64_t bytes_in;
	bool cut;          /* a record could not be finished: stop */
	/* The directory the export is written to and the files' base name:
	 * an export written inside the tree it walks leaves itself out. */
	dev_t out_dev;
	ino_t out_ino;
	const char *out_base;
};

static bool is_own_output(const struct exporter *e, const struct stat *dir, const char *name)
{
	if (!e->out_base || dir->st_dev != e->out_dev || dir->st_ino != e->out_ino)
		return false;
	size_t n = strlen(e->out_base);
	return !strncmp(name, e->out_base, n) && (name[n] == '-' || name[n] == '.');
}

/* One page as a source gives it. */
struct page {
	const char *path;   /* from the root of SRC, without a leading '/' */
	int fd;             /* -1: an empty page */
	uint64_t size;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	char url[URI_MAX];  /* "" if unknown */
	char *http;         /* the HTTP header, or NULL */
	size_t http_len;
	int refcount;       /* -1: unknown */
};

static struct first_copy *first_find(struct exporter *e, const uint8_t sha1[20], bool insert)
{
	if (insert && (e->tab_n + 1) * 4 > e->tab_cap * 3) {
		size_t cap = e->tab_cap ? e->tab_cap * 2 : 1024;
		struct first_copy *t = calloc(cap, sizeof *t);
		if (!t)
			return NULL;
		for (size_t i = 0; i < e->tab_cap; i++) {
			if (!e->tab[i].used)
				continue;
			size_t j = (size_t)get_le64(e->tab[i].sha1) & (cap - 1);
			while (t[j].used)
				j = (j + 1) & (cap - 1);
			t[j] = e->tab[i];
		}
		free(e->tab);
		e->tab = t;
		e->tab_cap = cap;
	}
	if (!e->tab_cap)
		return NULL;
	size_t j = (size_t)get_le64(sha1) & (e->tab_cap - 1);
	while (e->tab[j].used) {
		if (!memcmp(e->tab[j].sha1, sha1, 20))
			return &e->tab[j];
		j = (j + 1) & (e->tab_cap - 1);
	}
	if (!insert)
		return NULL;
	e->tab[j].used = true;
	memcpy(e->tab[j].sha1, sha1, 20);
	e->tab_n++;
	return &e->tab[j];
}

static bool looks_like_host(const char *s, size_t n)
{
	if (n == 9 && !memcmp(s, "localhost", 9))
		return true;
	if (n > 10 && !memcmp(s, "localhost:", 10))
		return true;
	bool dot = false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '.')
			dot = true;
		else if (!(c == '-' || c == ':' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
			   (c >= 'A' && c <= 'Z')))
			return false;
	}
	return dot && s[0] != '.';
}

/* The URI of a page that has none recorded (the rule in the top comment). */
static void uri_from_path(const char *path, char *out, size_t size)
{
	size_t first = strcspn(path, "/");
	size_t n = (size_t)snprintf(out, size, "%s", looks_like_host(path, first) ? "http://" : "file:///");
	for (const unsigned char *p = (const unsigned char *)path; *p && n + 4 < size; p++) {
		if (*p <= 0x20 || *p >= 0x7f || strchr("\"<>\\^`{|}", *p))
			n += (size_t)snprintf(out + n, size - n, "%%%02X", *p);
		else
			out[n++] = (char)*p;
	}
	out[n] = 0;
}

static const char *mime_of_path(const char *path)
{
	static const char *const map[][2] = {
		{ ".html", "text/html" }, { ".htm", "text/html" }, { ".css", "text/css" },
		{ ".js", "application/javascript" }, { ".json", "application/json" },
		{ ".xml", "application/xml" }, { ".txt", "text/plain" }, { ".png", "image/png" },
		{ ".jpg", "image/jpeg" }, { ".jpeg", "image/jpeg" }, { ".gif", "image/gif" },
		{ ".svg", "image/svg+xml" }, { ".pdf", "application/pdf" }, { ".ico", "image/x-icon" },
	};
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	size_t blen = strcspn(base, "?");
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
		size_t l = strlen(map[i][0]);
		if (blen >= l && !strncasecmp(base + blen - l, map[i][0], l))
			return map[i][1];
	}
	return "application/octet-stream";
}

/* The status code and media type of an HTTP header ("200", "text/html"). */
static void http_info(const char *h, size_t len, char status[8], char mime[128])
{
	snprintf(status, 8, "-");
	mime[0] = 0;
	const char *sp = memchr(h, ' ', len);
	if (sp && sp + 4 <= h + len) {
		memcpy(status, sp + 1, 3);
		status[3] = 0;
	}
	const char *p = h;
	while (p < h + len) {
		const char *eol = memchr(p, '\n', (size_t)(h + len - p));
		if (!eol)
			break;
		if ((size_t)(eol - p) > 13 && !strncasecmp(p, "content-type:", 13)) {
			const char *v = p + 13;
			while (*v == ' ' || *v == '\t')
				v++;
			size_t l = strcspn(v, ";\r\n");
			while (l && (v[l - 1] == ' '))
				l--;
			if (l >= 128)
				l = 127;
			memcpy(mime, v, l);
			mime[l] = 0;
			for (char *c = mime; *c; c++)
				if (*c >= 'A' && *c <= 'Z')
					*c = (char)(*c - 'A' + 'a');
		}
		p = eol + 1;
	}
}

/* An HTTP header as kept by import: a status line, header lines, CRLF CRLF. */
static bool http_head_valid(const char *h, size_t len)
{
	return len >= 16 && !memcmp(h, "HTTP/", 5) && !memcmp(h + len - 4, "\r\n\r\n", 4);
}

static int hash_page(struct exporter *e, struct page *pg, uint8_t sha1[20], char payload[WARC_DIGEST_MAX],
		     char block[WARC_DIGEST_MAX])
{
	struct warc_sha1 sp, sb;
	int rc = warc_sha1_init(&sp);
	if (rc)
		return rc;
	if ((rc = warc_sha1_init(&sb))) {
		warc_sha1_free(&sp);
		return rc;
	}
	if (pg->http)
		warc_sha1_update(&sb, pg->http, pg->http_len);
	uint64_t off = 0;
	while (off < pg->size) {
		size_t want = pg->size - off < IO_CHUNK ? (size_t)(pg->size - off) : IO_CHUNK;
		ssize_t n = fd_pread_full(pg->fd, e->buf, want, off);
		if (n <= 0) {
			rc = n < 0 ? (int)n : -EIO; /* shorter than its size: changed under us */
			break;
		}
		warc_sha1_update(&sp, e->buf, (size_t)n);
		warc_sha1_update(&sb, e->buf, (size_t)n);
		off += (uint64_t)n;
	}
	warc_sha1_final(&sp, payload);
	warc_sha1_final(&sb, block);
	warc_sha1_free(&sp);
	warc_sha1_free(&sb);
	if (!rc)
		rc = warc_sha1_parse(payload, sha1);
	return rc;
}

static int export_page(struct exporter *e, struct page *pg)
{
	char uri[URI_MAX], payload[WARC_DIGEST_MAX], block[WARC_DIGEST_MAX], status[8], mime[128];
	uint8_t sha1[20];
	if (pg->url[0])
		snprintf(uri, sizeof uri, "%s", pg->url);
	else
		uri_from_path(pg->path, uri, sizeof uri);
	if (pg->http && !http_head_valid(pg->http, pg->http_len))
		pg->http = NULL;
	if (pg->http)
		http_info(pg->http, pg->http_len, status, mime);
	else {
		snprintf(status, sizeof status, "-");
		snprintf(mime, sizeof mime, "%s", mime_of_path(pg->path));
	}
	if (!mime[0])
		snprintf(mime, sizeof mime, "%s", mime_of_path(pg->path));
	int rc = hash_page(e, pg, sha1, payload, block);
	if (rc)
		return rc;
	struct warc_rec r = {
		.target_uri = uri, .date_sec = pg->mtime_sec, .date_nsec = pg->mtime_nsec,
		.payload_digest = payload, .mime = mime, .status = status,
	};
	struct first_copy *fc = first_find(e, sha1, false);
	if (fc) {
		/* A later copy: the HTTP header (if any) and no payload. */
		struct warc_sha1 s;
		char hd[WARC_DIGEST_MAX];
		if ((rc = warc_sha1_init(&s)))
			return rc;
		if (pg->http)
			warc_sha1_update(&s, pg->http, pg->http_len);
		warc_sha1_final(&s, hd);
		warc_sha1_free(&s);
		r.type = "revisit";
		r.content_type = pg->http ? WARC_HTTP_RESPONSE_TYPE : NULL;
		r.block_len = pg->http ? pg->http_len : 0;
		r.block_digest = hd;
		r.refers_to = fc->id;
		r.refers_to_uri = fc->uri;
		r.refers_to_date = fc->date;
		if ((rc = warc_begin(e->w, &r)) || (pg->http && (rc = warc_write(e->w, pg->http, pg->http_len))) ||
		    (rc = warc_end(e->w)))
			return rc;
		e->revisits++;
		e->pages++;
		return 0;
	}
	r.type = pg->http ? "response" : "resource";
	r.content_type = pg->http ? WARC_HTTP_RESPONSE_TYPE : mime;
	r.block_len = (pg->http ? pg->http_len : 0) + pg->size;
	r.block_digest = block;
	if ((rc = warc_begin(e->w, &r)))
		return rc;
	if (pg->http && (rc = warc_write(e->w, pg->http, pg->http_len)))
		return rc;
	/* From here a failure leaves a record cut short in the file: the
	 * export cannot go on (export_tree stops on e->cut). */
	uint64_t off = 0;
	while (off < pg->size) {
		size_t want = pg->size - off < IO_CHUNK ? (size_t)(pg->size - off) : IO_CHUNK;
		ssize_t n = fd_pread_full(pg->fd, e->buf, want, off);
		if (n <= 0) {
			e->cut = true;
			return n < 0 ? (int)n : -EIO;
		}
		if ((rc = warc_write(e->w, e->buf, (size_t)n))) {
			e->cut = true;
			return rc;
		}
		off += (uint64_t)n;
	}
	if ((rc = warc_end(e->w)))
		return rc;
	e->bytes_in += pg->size;
	e->pages++;
	if (pg->http)
		e->responses++;
	else
		e->resources++;
	if (pg->refcount != 1) { /* it may have copies: remember it */
		fc = first_find(e, sha1, true);
		if (!fc || !(fc->uri = strdup(uri)))
			return -ENOMEM;
		memcpy(fc->id, r.id, sizeof fc->id);
		memcpy(fc->date, r.date, sizeof fc->date);
	}
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* --- source: a directory tree (a mount) ------------------------------ */

static ssize_t get_xattr_str(const char *path, const char *name, char *buf, size_t size)
{
	ssize_t n = lgetxattr(path, name, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return n;
}

static int export_file(struct exporter *e, const char *full, const char *rel)
{
	struct page pg = { .path = rel, .fd = -1, .refcount = -1 };
	int fd = open(full, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	struct stat sb;
	if (fstat(fd, &sb)) {
		close(fd);
		return -errno;
	}
	pg.fd = fd;
	pg.size = (uint64_t)sb.st_size;
	pg.mtime_sec = sb.st_mtim.tv_sec;
	pg.mtime_nsec = (uint32_t)sb.st_mtim.tv_nsec;
	if (get_xattr_str(full, XATTR_URL, pg.url, sizeof pg.url) < 0)
		pg.url[0] = 0;
	char rc_s[32];
	if (get_xattr_str(full, XATTR_REFCOUNT, rc_s, sizeof rc_s) > 0)
		pg.refcount = atoi(rc_s);
	char *http = malloc(HTTP_HEAD_MAX + 1);
	ssize_t hl = http ? lgetxattr(full, XATTR_HTTP, http, HTTP_HEAD_MAX) : -1;
	if (hl > 0) {
		pg.http = http;
		pg.http_len = (size_t)hl;
	}
	int rc = export_page(e, &pg);
	free(http);
	close(fd);
	return rc;
}

static int export_tree(struct exporter *e, const char *full, const char *rel)
{
	struct stat sb;
	if (lstat(full, &sb))
		return -errno;
	if (S_ISREG(sb.st_mode)) {
		int rc = export_file(e, full, rel);
		if (rc == -ENOMEM || rc == -ENOSPC || rc == -EDQUOT || e->cut)
			return rc; /* the output cannot go on */
		if (rc) {
			fprintf(stderr, "pagededup export: %s: %s (page left out)\n", full, strerror(-rc));
			e->errors++;
		}
		return 0;
	}
	if (!S_ISDIR(sb.st_mode)) {
		e->skipped++;
		return 0;
	}
	DIR *d = opendir(full);
	if (!d) {
		fprintf(stderr, "pagededup export: %s: %s (left out)\n", full, strerror(errno));
		e->errors++;
		return 0;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (is_own_output(e, &sb, de->d_name))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **t = realloc(names, cap * sizeof *t);
			if (!t) {
				rc = -ENOMEM;
				break;
			}
			names = t;
		}
		if (!(names[n] = strdup(de->d_name))) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof *names, name_cmp);
	for (size_t i = 0; i < n && !rc; i++) {
		size_t fl = strlen(full) + strlen(names[i]) + 2, rl = strlen(rel) + strlen(names[i]) + 2;
		char *f = malloc(fl), *r = malloc(rl);
		if (!f || !r)
			rc = -ENOMEM;
		else {
			snprintf(f, fl, "%s/%s", full, names[i]);
			snprintf(r, rl, "%s%s%s", rel, *rel ? "/" : "", names[i]);
			rc = export_tree(e, f, r);
		}
		free(f);
		free(r);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* --- source: a store (the core read path, no mount) ------------------- */

struct child {
	char *name;
	uint64_t ino;
	uint32_t type;
};
struct children {
	struct child *v;
	size_t n, cap;
	int rc;
};

static int collect_child(void *ctx, const char *name, size_t len, uint64_t ino, uint32_t type, uint64_t next_off,
			 const struct inode *attr)
{
	(void)next_off;
	(void)attr;
	struct children *c = ctx;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct child *t = realloc(c->v, cap * sizeof *t);
		if (!t) {
			c->rc = -ENOMEM;
			return 1;
		}
		c->v = t;
		c->cap = cap;
	}
	if (!(c->v[c->n].name = strndup(name, len))) {
		c->rc = -ENOMEM;
		return 1;
	}
	c->v[c->n].ino = ino;
	c->v[c->n].type = type;
	c->n++;
	return 0;
}

static int child_cmp(const void *a, const void *b)
{
	return strcmp(((const struct child *)a)->name, ((const struct child *)b)->name);
}

static int store_page(struct exporter *e, struct store *st, uint64_t ino, const char *rel)
{
	struct inode in;
	int rc = ns_getattr(st, ino, &in);
	if (rc)
		return rc;
	struct page pg = { .path = rel, .fd = -1, .refcount = -1 };
	pg.size = in.size;
	pg.mtime_sec = in.mtime.sec;
	pg.mtime_nsec = in.mtime.nsec;
	if (in.flags & INODE_HAS_BLOB) {
		MDB_txn *txn;
		struct fprec fr;
		if (!(rc = store_read_begin(st, &txn))) {
			if (!blob_get(txn, st, &in.blob, &fr))
				pg.refcount = (int)(fr.refcount > 1000000 ? 1000000 : fr.refcount);
			store_read_end(st, txn);
		}
		pg.fd = blob_open(st, &in.blob);
		if (pg.fd < 0)
			return pg.fd;
	} else if (in.size) {
		return -EIO;
	}
	size_t len = 0;
	if (!xattr_get(st, ino, XATTR_URL, pg.url, sizeof pg.url - 1, &len))
		pg.url[len] = 0;
	else
		pg.url[0] = 0;
	char *http = malloc(HTTP_HEAD_MAX);
	if (http && !xattr_get(st, ino, XATTR_HTTP, http, HTTP_HEAD_MAX, &len) && len) {
		pg.http = http;
		pg.http_len = len;
	}
	rc = export_page(e, &pg);
	free(http);
	if (pg.fd >= 0)
		close(pg.fd);
	return rc;
}

static int store_tree(struct exporter *e, struct store *st, uint64_t dir, const char *rel)
{
	struct children c = { 0 };
	int rc = ns_readdir(st, dir, 0, false, collect_child, &c);
	if (!rc)
		rc = c.rc;
	if (!rc)
		qsort(c.v, c.n, sizeof *c.v, child_cmp);
	for (size_t i = 0; i < c.n && !rc; i++) {
		size_t rl = strlen(rel) + strlen(c.v[i].name) + 2;
		char *r = malloc(rl);
		if (!r) {
			rc = -ENOMEM;
			break;
		}
		snprintf(r, rl, "%s%s%s", rel, *rel ? "/" : "", c.v[i].name);
		if (S_ISDIR(c.v[i].type))
			rc = store_tree(e, st, c.v[i].ino, r);
		else if (S_ISREG(c.v[i].type)) {
			int prc = store_page(e, st, c.v[i].ino, r);
			if (prc == -ENOMEM || prc == -ENOSPC || prc == -EDQUOT || e->cut)
				rc = prc;
			else if (prc) {
				fprintf(stderr, "pagededup export: /%s: %s (page left out)\n", r, strerror(-prc));
				e->errors++;
			}
		} else
			e->skipped++;
		free(r);
	}
	for (size_t i = 0; i < c.n; i++)
		free(c.v[i].name);
	free(c.v);
	return rc;
}

/* The inode of PATH (relative to the root) in the store. */
static int store_resolve(struct store *st, const char *path, uint64_t *ino, uint32_t *mode)
{
	uint64_t cur = PD_ROOT_INO;
	uint32_t m = S_IFDIR;
	char *dup = strdup(path), *save = NULL;
	if (!dup)
		return -ENOMEM;
	int rc = 0;
	for (char *n = strtok_r(dup, "/", &save); n && !rc; n = strtok_r(NULL, "/", &save)) {
		struct inode in;
		if (!strcmp(n, "."))
			continue;
		if ((rc = ns_lookup(st, cur, n, &in)))
			break;
		cur = in.ino;
		m = in.mode;
	}
	free(dup);
	*ino = cur;
	*mode = m;
	return rc;
}

/* A store's directory: its LMDB environment, and blob files (objects/,
 * format 1) or packs (packs/). */
static bool is_store_dir(const char *dir)
{
	char p[4096];
	struct stat sb;
	snprintf(p, sizeof p, "%s/meta/data.mdb", dir);
	if (stat(p, &sb))
		return false;
	/* packs/ (format 2) or objects/ (format 1) beside it */
	snprintf(p, sizeof p, "%s/packs", dir);
	if (!stat(p, &sb) && S_ISDIR(sb.st_mode))
		return true;
	snprintf(p, sizeof p, "%s/objects", dir);
	return !stat(p, &sb) && S_ISDIR(sb.st_mode);
}

static void export_usage(FILE *f)
{
	fputs("usage: pagededup export SRC [PATH...] -o OUT.warc.gz [--max-size BYTES] [--cdxj]\n"
	      "                        [--level 1-9] [--no-gzip]\n"
	      "  Write the pages under SRC (a mounted archive, any directory, or a store\n"
	      "  directory, read without a mount), or only those under each PATH (relative\n"
	      "  to SRC), as WARC/1.1 files OUT-00000.warc.gz, OUT-00001.warc.gz ... (one\n"
	      "  gzip member per record, a new file past --max-size, default 1 GB, a\n"
	      "  warcinfo record first in each). A page with a recorded HTTP header is a\n"
	      "  response record, others resource records; the second and later copies of\n"
	      "  the same bytes are revisit records naming the first. WARC-Target-URI is\n"
	      "  user.xdg.origin.url, else a URI made from the path; WARC-Date the mtime.\n"
	      "  --cdxj also writes OUT.cdxj, the sorted CDXJ index of the records.\n"
	      "  Exit 0; 3: done, but some pages could not be read and are not in the\n"
	      "  export, as reported; 1: failed; 2: usage error.\n",
	      f);
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double d = strtod(s, &end);
	double mul = 1;
	if (*end == 'k' || *end == 'K')
		mul = 1e3, end++;
	else if (*end == 'M')
		mul = 1e6, end++;
	else if (*end == 'G')
		mul = 1e9, end++;
	if (errno || *end || d * mul < 1 || d * mul > 1e18)
		return -1;
	*out = (uint64_t)(d * mul);
	return 0;
}

/* Strip .warc.gz / .warc / .gz from OUT: the prefix of the file names. */
static char *out_prefix(const char *out, bool *gzip)
{
	char *p = strdup(out);
	if (!p)
		return NULL;
	size_t n = strlen(p);
	if (n > 8 && !strcmp(p + n - 8, ".warc.gz"))
		p[n - 8] = 0;
	else if (n > 5 && !strcmp(p + n - 5, ".warc")) {
		p[n - 5] = 0;
		*gzip = false;
	}
	return p;
}

static int sort_cdxj(const char *unsorted, const char *sorted)
{
	char cmd[8400];
	snprintf(cmd, sizeof cmd, "LC_ALL=C sort -o '%s' '%s'", sorted, unsorted);
	for (const char *c = sorted; *c; c++)
		if (*c == '\'')
			return -EINVAL;
	for (const char *c = unsorted; *c; c++)
		if (*c == '\'')
			return -EINVAL;
	int st = system(cmd);
	return st == 0 ? 0 : -EIO;
}

int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = { { "output", required_argument, 0, 'o' },
					      { "max-size", required_argument, 0, 'm' },
					      { "cdxj", no_argument, 0, 'c' },
					      { "level", required_argument, 0, 'l' },
					      { "no-gzip", no_argument, 0, 'z' },
					      { "help", no_argument, 0, 'h' },
					      { 0, 0, 0, 0 } };
	const char *out = NULL;
	uint64_t max_bytes = WARC_DEFAULT_MAX_BYTES;
	bool cdxj = false, gzip = true;
	int level = 6, c;
	while ((c = cli_getopt(argc, argv, "o:h", opts)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'm':
			if (parse_size(optarg, &max_bytes))
				return cli_usage_error("--max-size wants a size in bytes (1e9, 500M, 2G)");
			break;
		case 'c': cdxj = true; break;
		case 'l':
			level = atoi(optarg);
			if (level < 1 || level > 9)
				return cli_usage_error("--level is 1 to 9");
			break;
		case 'z': gzip = false; break;
		case 'h': export_usage(stdout); return CLI_OK;
		default: return CLI_USAGE;
		}
	}
	if (!out || optind >= argc)
		return cli_usage_error("%s", out ? "SRC is missing" : "-o OUT.warc.gz is missing");
	const char *src = argv[optind];
	char **paths = argv + optind + 1;
	int npaths = argc - optind - 1;
	char *prefix = out_prefix(out, &gzip);
	char *cdxj_tmp = NULL, *cdxj_path = NULL;
	FILE *cf = NULL;
	int rc = 0;
	if (!prefix)
		return CLI_FAIL;
	if (cdxj) {
		size_t l = strlen(prefix) + 32;
		cdxj_tmp = malloc(l);
		cdxj_path = malloc(l);
		if (!cdxj_tmp || !cdxj_path)
			rc = -ENOMEM;
		else {
			snprintf(cdxj_path, l, "%s.cdxj", prefix);
			snprintf(cdxj_tmp, l, "%s.cdxj.unsorted", prefix);
			if (!(cf = fopen(cdxj_tmp, "w"))) {
				fprintf(stderr, "pagededup export: %s: %s\n", cdxj_tmp, strerror(errno));
				rc = -errno;
			}
		}
	}
	struct store *st = NULL;
	bool from_store = is_store_dir(src);
	char err[PD_ERRLEN] = "";
	if (!rc && from_store) {
		struct cli_store settled;
		cli_store(src, &settled); /* a mounted store's waiting closes committed */
		struct store_opts so = { .readonly = true };
		if ((rc = archive_open(src, &so, &st, err)))
			fprintf(stderr, "pagededup export: %s\n", err);
	} else if (!rc) {
		struct stat sb;
		if (stat(src, &sb) || !S_ISDIR(sb.st_mode)) {
			fprintf(stderr, "pagededup export: %s: not a directory, a mounted archive or a store\n", src);
			rc = -ENOTDIR;
		}
	}
	struct exporter e = { 0 };
	{
		char *slash = strrchr(prefix, '/');
		struct stat ob;
		e.out_base = slash ? slash + 1 : prefix;
		if (slash)
			*slash = 0;
		if (!stat(slash ? (*prefix ? prefix : "/") : ".", &ob)) {
			e.out_dev = ob.st_dev;
			e.out_ino = ob.st_ino;
		} else
			e.out_base = NULL;
		if (slash)
			*slash = '/';
	}
	char info[256];
	snprintf(info, sizeof info, "description: pages of %s\r\n", src);
	struct warc_writer_opts wo = { .prefix = prefix, .gzip = gzip, .level = level, .max_bytes = max_bytes,
				       .software = "pagededup export", .info = info, .cdxj = cf };
	double t0 = warccmd_now();
	if (!rc && !(e.buf = malloc(IO_CHUNK)))
		rc = -ENOMEM;
	if (!rc && (rc = warc_writer_open(&wo, &e.w, err)))
		fprintf(stderr, "pagededup export: %s\n", err);
	for (int i = 0; !rc && i < (npaths ? npaths : 1); i++) {
		const char *rel = npaths ? paths[i] : "";
		while (*rel == '/')
			rel++;
		if (st) {
			uint64_t ino;
			uint32_t mode;
			if ((rc = store_resolve(st, rel, &ino, &mode))) {
				fprintf(stderr, "pagededup export: %s: no such path in the store\n", rel);
				break;
			}
			if (S_ISDIR(mode))
				rc = store_tree(&e, st, ino, rel);
			else if (S_ISREG(mode)) {
				rc = store_page(&e, st, ino, rel);
			}
		} else {
			size_t l = strlen(src) + strlen(rel) + 2;
			char *full = malloc(l);
			if (!full) {
				rc = -ENOMEM;
				break;
			}
			snprintf(full, l, "%s%s%s", src, *rel ? "/" : "", rel);
			rc = export_tree(&e, full, rel);
			if (rc)
				fprintf(stderr, "pagededup export: %s: %s\n", full, strerror(-rc));
			free(full);
		}
	}
	if (e.cut)
		fprintf(stderr, "pagededup export: a page changed or could not be read while it was being "
				"written: the last file ends with an incomplete record; export again\n");
	unsigned files = e.w ? warc_writer_files(e.w) : 0;
	uint64_t out_bytes = e.w ? warc_writer_bytes(e.w) : 0;
	int crc = warc_writer_close(e.w);
	if (!rc && crc) {
		fprintf(stderr, "pagededup export: finishing the last file: %s\n", strerror(-crc));
		rc = crc;
	}
	if (cf && fclose(cf) && !rc)
		rc = -EIO;
	if (!rc && cdxj && (rc = sort_cdxj(cdxj_tmp, cdxj_path)))
		fprintf(stderr, "pagededup export: sorting the CDXJ index failed\n");
	if (cdxj_tmp)
		unlink(cdxj_tmp);
	double dt = warccmd_now() - t0;
	if (!rc)
		fprintf(stderr,
			"pagededup export: %llu pages (%llu response, %llu resource, %llu revisit) in %u file%s, "
			"%.1f MB of pages, %.1f MB written, %.2f s\n",
			(unsigned long long)e.pages, (unsigned long long)e.responses, (unsigned long long)e.resources,
			(unsigned long long)e.revisits, files, files == 1 ? "" : "s", (double)e.bytes_in / 1e6,
			(double)out_bytes / 1e6, dt);
	if (e.errors)
		fprintf(stderr, "pagededup export: %llu page%s could not be read (above) and are not in the export\n",
			(unsigned long long)e.errors, e.errors == 1 ? "" : "s");
	for (size_t i = 0; i < e.tab_cap; i++)
		free(e.tab[i].uri);
	free(e.tab);
	free(e.buf);
	if (st)
		store_close(st);
	free(prefix);
	free(cdxj_tmp);
	free(cdxj_path);
	return rc ? CLI_FAIL : (e.errors ? WARC_CMD_PARTIAL : CLI_OK);
}

