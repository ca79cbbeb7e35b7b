/* warc_write.c - the WARC record writer (format in warc.h).
 *
 * Each record is one gzip member: deflate is reset (not re-initialised)
 * between records, so a record costs one gzip header and trailer and no
 * allocation. Output goes through one buffer to the file; a record's
 * offset is the file offset where its member begins, its length the
 * member's compressed size: what a CDXJ line names.
 */
#include "warc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/fdio.h"

#define WARC_OUTBUF (256 * 1024)

struct warc_writer {
	struct warc_writer_opts o;
	char *prefix;
	int fd;
	unsigned file_no;      /* the open file's number */
	uint64_t file_bytes;   /* made for the open file (written or buffered) */
	uint64_t total_bytes;  /* all files, finished ones included */
	bool in_record;
	bool z_ready;
	z_stream z;
	struct warc_rec *rec;  /* the record being written */
	uint64_t rec_written;  /* block bytes so far */
	uint64_t rec_offset;
	uint8_t *out;
	size_t out_len;
};

void warc_file_name(const struct warc_writer *w, unsigned n, char *out, size_t size)
{
	snprintf(out, size, "%s-%05u.warc%s", w->prefix, n, w->o.gzip ? ".gz" : "");
}

unsigned warc_writer_files(const struct warc_writer *w)
{
	return w->file_no + 1;
}

uint64_t warc_writer_bytes(const struct warc_writer *w)
{
	return w->total_bytes; /* counts the buffered bytes too */
}

static int flush_out(struct warc_writer *w)
{
	if (!w->out_len)
		return 0;
	int rc = fd_write_all(w->fd, w->out, w->out_len);
	if (rc)
		return rc;
	w->out_len = 0;
	return 0;
}

/* Bytes into the file, compressed when gzip is on. */
static int emit(struct warc_writer *w, const void *buf, size_t len, bool finish)
{
	if (!w->o.gzip) {
		while (len) {
			size_t n = WARC_OUTBUF - w->out_len;
			if (n > len)
				n = len;
			memcpy(w->out + w->out_len, buf, n);
			w->out_len += n;
			w->file_bytes += n;
			w->total_bytes += n;
			buf = (const uint8_t *)buf + n;
			len -= n;
			if (w->out_len == WARC_OUTBUF) {
				int rc = flush_out(w);
				if (rc)
					return rc;
			}
		}
		return 0;
	}
	w->z.next_in = (Bytef *)(uintptr_t)buf;
	for (;;) {
		/* zlib takes uInt lengths: feed at most 1 GiB at a time. */
		size_t chunk = len > (1u << 30) ? (1u << 30) : len;
		w->z.avail_in = (uInt)chunk;
		len -= chunk;
		int flush = finish && !len ? Z_FINISH : Z_NO_FLUSH;
		for (;;) {
			w->z.next_out = w->out + w->out_len;
			w->z.avail_out = (uInt)(WARC_OUTBUF - w->out_len);
			int zr = deflate(&w->z, flush);
			if (zr == Z_STREAM_ERROR)
				return -EIO;
			size_t made = WARC_OUTBUF - w->out_len - w->z.avail_out;
			w->out_len += made;
			w->file_bytes += made;
			w->total_bytes += made;
			if (w->out_len == WARC_OUTBUF) {
				int rc = flush_out(w);
				if (rc)
					return rc;
				continue;
			}
			if (flush == Z_FINISH ? zr == Z_STREAM_END : w->z.avail_in == 0)
				break;
		}
		if (!len)
			return 0;
	}
}

static int member_start(struct warc_writer *w)
{
	w->rec_offset = w->file_bytes;
	if (w->o.gzip && deflateReset(&w->z) != Z_OK)
		return -EIO;
	return 0;
}

static int put_field(char *buf, size_t size, size_t *n, const char *name, const char *value)
{
	if (!value)
		return 0;
	int k = snprintf(buf + *n, size - *n, "%s: %s\r\n", name, value);
	if (k < 0 || (size_t)k >= size - *n)
		return -ENAMETOOLONG;
	*n += (size_t)k;
	return 0;
}

static int write_warcinfo(struct warc_writer *w)
{
	char name[4096], fname[4096], body[8192], head[8192], id[WARC_ID_MAX], date[WARC_DATE_MAX];
	warc_file_name(w, w->file_no, name, sizeof name);
	const char *base = strrchr(name, '/');
	snprintf(fname, sizeof fname, "%s", base ? base + 1 : name);
	int bl = snprintf(body, sizeof body,
			  "software: %s\r\nformat: WARC File Format 1.1\r\n"
			  "conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n"
			  "pagededup-warc: %d\r\n%s",
			  w->o.software ? w->o.software : "pagededup", WARC_FORMAT_VERSION, w->o.info ? w->o.info : "");
	if (bl < 0 || (size_t)bl >= sizeof body)
		return -E2BIG;
	int rc = warc_new_id(id);
	if (rc)
		return rc;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	warc_format_date(now.tv_sec, 0, date);
	char digest[WARC_DIGEST_MAX];
	struct warc_sha1 s;
	if ((rc = warc_sha1_init(&s)))
		return rc;
	warc_sha1_update(&s, body, (size_t)bl);
	warc_sha1_final(&s, digest);
	warc_sha1_free(&s);
	char len[32];
	snprintf(len, sizeof len, "%d", bl);
	size_t n = (size_t)snprintf(head, sizeof head, "WARC/1.1\r\n");
	if ((rc = put_field(head, sizeof head, &n, "WARC-Type", "warcinfo")) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Record-ID", id)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Date", date)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Filename", fname)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Block-Digest", digest)) ||
	    (rc = put_field(head, sizeof head, &n, "Content-Type", "application/warc-fields")) ||
	    (rc = put_field(head, sizeof head, &n, "Content-Length", len)) ||
	    (rc = put_field(head, sizeof head, &n, "", NULL)))
		return rc;
	memcpy(head + n, "\r\n", 2);
	n += 2;
	if ((rc = member_start(w)) || (rc = emit(w, head, n, false)) || (rc = emit(w, body, (size_t)bl, false)) ||
	    (rc = emit(w, "\r\n\r\n", 4, true)))
		return rc;
	return 0;
}

static int open_file(struct warc_writer *w, char err[512])
{
	char name[4096];
	warc_file_name(w, w->file_no, name, sizeof name);
	w->fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		int e = errno;
		if (err)
			snprintf(err, 512, "%s: %s", name, strerror(e));
		return -e;
	}
	w->file_bytes = 0;
	int rc = write_warcinfo(w);
	if (rc && err)
		snprintf(err, 512, "%s: %s", name, strerror(-rc));
	return rc;
}

static int close_file(struct warc_writer *w)
{
	int rc = flush_out(w);
	if (w->fd >= 0) {
		if (!rc && fsync(w->fd))
			rc = -errno;
		if (close(w->fd) && !rc)
			rc = -errno;
		w->fd = -1;
	}
	return rc;
}

int warc_writer_open(const struct warc_writer_opts *o, struct warc_writer **out, char err[512])
{
	struct warc_writer *w = calloc(1, sizeof *w);
	if (!w)
		return -ENOMEM;
	w->o = *o;
	w->fd = -1;
	if (!w->o.max_bytes)
		w->o.max_bytes = WARC_DEFAULT_MAX_BYTES;
	if (w->o.level <= 0 || w->o.level > 9)
		w->o.level = 6;
	w->prefix = strdup(o->prefix);
	w->out = malloc(WARC_OUTBUF);
	int rc = (!w->prefix || !w->out) ? -ENOMEM : 0;
	if (!rc && w->o.gzip) {
		/* windowBits 15 + 16: a gzip header and trailer around deflate. */
		if (deflateInit2(&w->z, w->o.level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			rc = -ENOMEM;
		else
			w->z_ready = true;
	}
	if (!rc)
		rc = open_file(w, err);
	if (rc) {
		warc_writer_close(w);
		return rc;
	}
	*out = w;
	return 0;
}

int warc_begin(struct warc_writer *w, struct warc_rec *r)
{
	if (w->in_record)
		return -EINVAL;
	int rc;
	if (w->file_bytes >= w->o.max_bytes) {
		if ((rc = close_file(w)))
			return rc;
		w->file_no++;
		if ((rc = open_file(w, NULL)))
			return rc;
	}
	if ((rc = warc_new_id(r->id)))
		return rc;
	warc_format_date(r->date_sec, r->date_nsec, r->date);
	char head[WARC_HEAD_MAX], len[32];
	snprintf(len, sizeof len, "%llu", (unsigned long long)r->block_len);
	size_t n = (size_t)snprintf(head, sizeof head, "WARC/1.1\r\n");
	bool revisit = !strcmp(r->type, "revisit");
	if ((rc = put_field(head, sizeof head, &n, "WARC-Type", r->type)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Record-ID", r->id)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Date", r->date)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Target-URI", r->target_uri)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Refers-To", r->refers_to)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Refers-To-Target-URI", r->refers_to_uri)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Refers-To-Date", r->refers_to_date)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Profile", revisit ? WARC_PROFILE_IDENTICAL : NULL)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Block-Digest", r->block_digest)) ||
	    (rc = put_field(head, sizeof head, &n, "WARC-Payload-Digest", r->payload_digest)) ||
	    (rc = put_field(head, sizeof head, &n, "Content-Type", r->content_type)) ||
	    (rc = put_field(head, sizeof head, &n, "Content-Length", len)))
		return rc;
	if (n + 2 >= sizeof head)
		return -ENAMETOOLONG;
	memcpy(head + n, "\r\n", 2);
	n += 2;
	if ((rc = member_start(w)) || (rc = emit(w, head, n, false)))
		return rc;
	r->file_no = w->file_no;
	w->rec = r;
	w->rec_written = 0;
	w->in_record = true;
	return 0;
}

int warc_write(struct warc_writer *w, const void *buf, size_t len)
{
	if (!w->in_record)
		return -EINVAL;
	if (len > w->rec->block_len - w->rec_written)
		return -EINVAL;
	w->rec_written += len;
	return emit(w, buf, len, false);
}

int warc_end(struct warc_writer *w)
{
	if (!w->in_record)
		return -EINVAL;
	w->in_record = false;
	if (w->rec_written != w->rec->block_len)
		return -EINVAL;
	int rc = emit(w, "\r\n\r\n", 4, true);
	if (rc)
		return rc;
	struct warc_rec *r = w->rec;
	r->offset = w->rec_offset;
	r->length = w->file_bytes - w->rec_offset;
	if (w->o.cdxj) {
		char name[4096];
		warc_file_name(w, w->file_no, name, sizeof name);
		const char *base = strrchr(name, '/');
		if ((rc = cdxj_line(w->o.cdxj, r, base ? base + 1 : name)))
			return rc;
	}
	return 0;
}

int warc_writer_close(struct warc_writer *w)
{
	if (!w)
		return 0;
	int rc = w->in_record ? -EINVAL : 0;
	int c = close_file(w);
	if (!rc)
		rc = c;
	if (w->z_ready)
		deflateEnd(&w->z);
	free(w->out);
	free(w->prefix);
	free(w);
	return rc;
}
