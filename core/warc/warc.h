/* warc.h - WARC files (ISO 28500, WARC/1.1): the record writer, the
 * streaming reader, and the CDXJ index lines of what was written.
 *
 * What pagededup writes (version 1 of this description; the warcinfo
 * record of every file says "pagededup-warc: 1"):
 *
 *   file     OUT-NNNNN.warc.gz (or .warc when not compressed), NNNNN from
 *            00000; a file is closed and the next begun before a record
 *            that would start past the size limit (so a file passes the
 *            limit by at most one record, as wget --warc-max-size does).
 *   member   one gzip member (RFC 1952, deflate) per record, the ".warc.gz"
 *            convention of Annex D: a record's offset is its member's offset
 *            in the file, and a reader may seek to any record.
 *   record   "WARC/1.1" CRLF, named fields "Name: value" CRLF, CRLF, the
 *            block (Content-Length bytes), CRLF CRLF.
 *   fields   in this order, each record: WARC-Type, WARC-Record-ID
 *            (<urn:uuid:v4>), WARC-Date (UTC, "YYYY-MM-DDThh:mm:ssZ", with
 *            ".ffffff" when the time has sub-second precision), then
 *            WARC-Target-URI, WARC-Filename (warcinfo), WARC-Refers-To,
 *            WARC-Refers-To-Target-URI, WARC-Refers-To-Date, WARC-Profile
 *            (revisit), WARC-Block-Digest, WARC-Payload-Digest,
 *            Content-Type, Content-Length, where they apply.
 *   digests  "sha1:" and the 32-character RFC 4648 base32 of the SHA-1
 *            (upper case, no padding), the form wget, Heritrix and warcio
 *            write and check. The block digest covers the whole block; the
 *            payload digest the bytes after the HTTP header (response) or
 *            the whole block (resource).
 *   types    warcinfo      first in every file (application/warc-fields)
 *            response      a page whose HTTP response header is known:
 *                          "application/http;msgtype=response", the block
 *                          is that header then the page's bytes
 *            resource      any other page: the block is its bytes
 *            revisit       a later copy of bytes already written in this
 *                          export: profile identical-payload-digest
 *                          (http://netpreserve.org/warc/1.1/revisit/identical-payload-digest),
 *                          WARC-Refers-To / -Target-URI / -Date name the
 *                          first copy's record; the block is the HTTP
 *                          header (when known) and no payload.
 *
 * The reader accepts WARC/1.0 and 1.1 (and any "WARC/" version line), a
 * plain file or any number of gzip members (one per record, or a whole
 * file compressed as one). A record must end inside the gzip member it
 * started in. Malformed input never stops it: a record without WARC-Type
 * or Content-Length, a Content-Length that does not land on the CRLF CRLF
 * that ends a record, a damaged or truncated gzip member, a block whose
 * WARC-Block-Digest (sha1 or sha256, base32 or base16) does not match are
 * reported through the report
 * callback with the record's offset, and the reader moves on to the next
 * record it can find (the next gzip member, or the next "WARC/" line).
 * Blocks are streamed: nothing holds more than a header (WARC_HEAD_MAX)
 * and a buffer in memory, whatever a record's length.
 */
#ifndef PD_WARC_H
#define PD_WARC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#define WARC_FORMAT_VERSION 1
#define WARC_PROFILE_IDENTICAL \
	"http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
#define WARC_HTTP_RESPONSE_TYPE "application/http;msgtype=response"
/* "sha1:" + 32 base32 characters + NUL. */
#define WARC_DIGEST_MAX 48
/* "<urn:uuid:" + 36 + ">" + NUL. */
#define WARC_ID_MAX 48
/* "YYYY-MM-DDThh:mm:ss.ffffffZ" + NUL. */
#define WARC_DATE_MAX 32
/* The largest record header the reader takes (fields and values). */
#define WARC_HEAD_MAX (64 * 1024)
#define WARC_FIELDS_MAX 256
/* Default size at which the writer begins a new file. */
#define WARC_DEFAULT_MAX_BYTES UINT64_C(1000000000)

/* --- helpers (warc_util.c) ------------------------------------------- */

/* SHA-1 through OpenSSL's EVP interface, streamed. */
struct warc_sha1 {
	void *ctx; /* EVP_MD_CTX */
};
int warc_sha1_init(struct warc_sha1 *s);
void warc_sha1_update(struct warc_sha1 *s, const void *buf, size_t len);
/* "sha1:" + base32 into out; the context is ready for new bytes after. */
void warc_sha1_final(struct warc_sha1 *s, char out[WARC_DIGEST_MAX]);
void warc_sha1_free(struct warc_sha1 *s);
/* The raw 20 bytes as "sha1:BASE32". */
void warc_sha1_format(const uint8_t sha1[20], char out[WARC_DIGEST_MAX]);
/* Parse "sha1:" + base32 (32) or base16 (40): 0, or -EINVAL (another
 * algorithm or a malformed value). */
int warc_sha1_parse(const char *digest, uint8_t sha1[20]);

/* A new record ID "<urn:uuid:...>" (version 4, random). */
int warc_new_id(char out[WARC_ID_MAX]);
/* sec/nsec as a WARC-Date (microseconds shown when nsec >= 1000). */
void warc_format_date(int64_t sec, uint32_t nsec, char out[WARC_DATE_MAX]);
/* Parse a WARC-Date (W3C-DTF: date alone up to fractions of a second, Z);
 * -EINVAL if malformed. */
int warc_parse_date(const char *s, int64_t *sec, uint32_t *nsec);

/* --- writer (warc_write.c) ------------------------------------------- */

struct warc_writer_opts {
	const char *prefix;   /* files are PREFIX-NNNNN.warc[.gz] */
	bool gzip;            /* one gzip member per record */
	int level;            /* deflate level 1..9 (0: 6) */
	uint64_t max_bytes;   /* begin a new file past this (0: WARC_DEFAULT_MAX_BYTES) */
	const char *software; /* the warcinfo "software" field */
	const char *info;     /* more warcinfo fields, "name: value\r\n" lines, or NULL */
	FILE *cdxj;           /* an index line per record (cdxj_line) or NULL */
};

/* What the caller says about a record before its block. The block's
 * length and digests are known before it is written (the header comes
 * first), so a caller reads a file twice, or knows them. */
struct warc_rec {
	const char *type;        /* "response", "resource", "revisit" */
	const char *target_uri;
	int64_t date_sec;
	uint32_t date_nsec;
	const char *content_type;   /* NULL: none */
	uint64_t block_len;
	const char *block_digest;   /* "sha1:..." or NULL */
	const char *payload_digest; /* "sha1:..." or NULL */
	const char *refers_to;      /* revisit: the first copy's record ID */
	const char *refers_to_uri;
	const char *refers_to_date;
	/* For the index line: the page's media type and HTTP status ("-"
	 * or NULL when unknown). */
	const char *mime;
	const char *status;
	/* Out: the record's ID, WARC-Date as written, and where it went. */
	char id[WARC_ID_MAX];
	char date[WARC_DATE_MAX];
	uint64_t offset, length;    /* in its file (compressed bytes) */
	unsigned file_no;
};

struct warc_writer;
/* Open the first file (and write its warcinfo). -errno; the path that
 * failed is in err. */
int warc_writer_open(const struct warc_writer_opts *o, struct warc_writer **out, char err[512]);
/* Begin a record: its header is written, then the block through
 * warc_write, then warc_end. A new file is begun first when the current
 * one has reached max_bytes. */
int warc_begin(struct warc_writer *w, struct warc_rec *r);
int warc_write(struct warc_writer *w, const void *buf, size_t len);
/* End the record: -EINVAL if the bytes written differ from block_len. */
int warc_end(struct warc_writer *w);
/* Finish the last file; the writer is freed whatever the result. */
int warc_writer_close(struct warc_writer *w);
/* The name of file number n ("PREFIX-NNNNN.warc.gz") into out. */
void warc_file_name(const struct warc_writer *w, unsigned n, char *out, size_t size);
unsigned warc_writer_files(const struct warc_writer *w);
uint64_t warc_writer_bytes(const struct warc_writer *w); /* all files so far */

/* --- CDXJ (cdxj.c) --------------------------------------------------- */

/* The SURT form of a URI as pywb and warcio index it ("com,example)/a?b"):
 * scheme and "www." dropped, host labels reversed and joined by ',', ')'
 * then the path and query, lower-cased; query arguments sorted. Returns
 * the length, or -ENAMETOOLONG if it does not fit. */
int cdxj_surt(const char *uri, char *out, size_t size);
/* One CDXJ line: "SURT YYYYMMDDhhmmss {json}\n" with url, mime, status,
 * digest, length, offset, filename (the pywb fields). */
int cdxj_line(FILE *out, const struct warc_rec *r, const char *filename);

/* --- reader (warc_read.c) -------------------------------------------- */

struct warc_field {
	const char *name, *value;
};
struct warc_head {
	uint64_t offset;      /* the record's offset in the file (its member's, gzipped) */
	uint64_t length;      /* Content-Length */
	const char *version;  /* "WARC/1.1" */
	const char *type;     /* WARC-Type */
	size_t nfields;
	struct warc_field f[WARC_FIELDS_MAX];
};
/* A field's value (names compare without case), or NULL. */
const char *warc_field(const struct warc_head *h, const char *name);

/* Malformed input is reported here (offset of the record or member, and
 * what is wrong); the reader goes on. */
typedef void (*warc_report_fn)(void *ctx, uint64_t offset, const char *what);

struct warc_reader;
/* fd is read from its current position (a pipe works; a regular file lets
 * the reader look back for the next record after damage). */
int warc_reader_open(int fd, warc_report_fn report, void *ctx, struct warc_reader **out);
void warc_reader_close(struct warc_reader *r);
/* The next record's header: 1 (*h valid until the next call), 0 at the
 * end, -errno on a read error. The block of the previous record, if not
 * read to its end, is skipped. */
int warc_next(struct warc_reader *r, const struct warc_head **h);
/* Up to len bytes of the block: > 0, 0 at its end, -EBADMSG when it is
 * cut short (reported; the next warc_next looks for the next record). */
ssize_t warc_read(struct warc_reader *r, void *buf, size_t len);
/* After the block: 0 if the record ended as it should (CRLF CRLF after
 * Content-Length bytes, the block digest matching when given),
 * -EBADMSG otherwise (reported). Reads the rest of the block first. */
int warc_check_end(struct warc_reader *r);
/* Records seen and malformed spots reported so far. */
uint64_t warc_reader_records(const struct warc_reader *r);
uint64_t warc_reader_errors(const struct warc_reader *r);

#endif
