/* test_warc.c - unit tests of core/warc: digests, dates, SURT keys, the
 * writer read back by the reader (gzip and plain), and the reader on
 * damaged input (a wrong Content-Length, a truncated gzip member, a bad
 * block digest, a missing WARC-Type, a pipe), where every damaged spot must
 * be reported once with its record's offset and the records around it
 * still read.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "helpers.h"
#include "warc/warc.h"

static void test_sha1_base32(void **state)
{
	(void)state;
	struct warc_sha1 s;
	char d[WARC_DIGEST_MAX];
	assert_int_equal(warc_sha1_init(&s), 0);
	warc_sha1_final(&s, d);
	assert_string_equal(d, "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"); /* SHA-1 of nothing */
	warc_sha1_update(&s, "abc", 3);
	warc_sha1_final(&s, d);
	assert_string_equal(d, "sha1:VGMT4NSHA2AWVOR6EVYXQUGCNSONBWE5");
	warc_sha1_free(&s);
	uint8_t raw[20], raw2[20];
	assert_int_equal(warc_sha1_parse(d, raw), 0);
	assert_int_equal(warc_sha1_parse("sha1:a9993e364706816aba3e25717850c26c9cd0d89d", raw2), 0);
	assert_memory_equal(raw, raw2, 20);
	assert_int_equal(warc_sha1_parse("sha1:vgmt4nsha2awvor6evyxqugcnsonbwe5", raw2), 0);
	assert_memory_equal(raw, raw2, 20);
	assert_int_equal(warc_sha1_parse("sha256:VGMT4NSHA2AWVOR6EVYXQUGCNSONBWE5", raw2), -EINVAL);
	assert_int_equal(warc_sha1_parse("sha1:VGMT4NSHA2AWVOR6EVYXQUGCNSONBWE", raw2), -EINVAL);
	assert_int_equal(warc_sha1_parse("sha1:VGMT4NSHA2AWVOR6EVYXQUGCNSONBWE1", raw2), -EINVAL);
}

static void test_dates(void **state)
{
	(void)state;
	char d[WARC_DATE_MAX];
	warc_format_date(0, 0, d);
	assert_string_equal(d, "1970-01-01T00:00:00Z");
	warc_format_date(1600000000, 123456789, d);
	assert_string_equal(d, "2020-09-13T12:26:40.123456Z");
	int64_t s;
	uint32_t ns;
	assert_int_equal(warc_parse_date(d, &s, &ns), 0);
	assert_int_equal(s, 1600000000);
	assert_int_equal(ns, 123456000);
	assert_int_equal(warc_parse_date("2020-09-13T12:26:40Z", &s, &ns), 0);
	assert_int_equal(s, 1600000000);
	assert_int_equal(ns, 0);
	assert_int_equal(warc_parse_date("2020-09-13", &s, &ns), 0);
	assert_int_equal(s, 1599955200);
	assert_int_equal(warc_parse_date("2020-13-13T00:00:00Z", &s, &ns), -EINVAL);
	assert_int_equal(warc_parse_date("2020-09-13T12:26:40", &s, &ns), -EINVAL);
	assert_int_equal(warc_parse_date("yesterday", &s, &ns), -EINVAL);
	char id[WARC_ID_MAX], id2[WARC_ID_MAX];
	assert_int_equal(warc_new_id(id), 0);
	assert_int_equal(warc_new_id(id2), 0);
	assert_int_equal(strlen(id), 47);
	assert_memory_equal(id, "<urn:uuid:", 10);
	assert_int_equal(id[24], '4');
	assert_string_not_equal(id, id2);
}

static void surt_is(const char *uri, const char *want)
{
	char out[1024];
	int n = cdxj_surt(uri, out, sizeof out);
	assert_true(n >= 0);
	assert_string_equal(out, want);
}

static void test_surt(void **state)
{
	(void)state;
	surt_is("http://www.Example.com:80/a/B?z=1&a=2#frag", "com,example)/a/b?a=2&z=1");
	surt_is("https://example.com:8443/", "com,example:8443)/");
	surt_is("https://www2.example.co.uk", "uk,co,example)/");
	surt_is("http://user@example.com/x", "com,example)/x");
	surt_is("http://127.0.0.1:8000/p", "1,0,0,127:8000)/p");
	surt_is("dns:example.com", "dns:example.com");
	char small[8];
	assert_int_equal(cdxj_surt("http://example.com/long/path", small, sizeof small), -ENAMETOOLONG);
}

/* --- writing and reading --------------------------------------------- */

struct seen {
	int reports;
	uint64_t offsets[16];
	char last[512];
};

static void on_report(void *ctx, uint64_t off, const char *what)
{
	struct seen *s = ctx;
	if (strstr(what, "went on at"))
		return; /* the resume note, not a damage report */
	if (s->reports < 16)
		s->offsets[s->reports] = off;
	s->reports++;
	snprintf(s->last, sizeof s->last, "%s", what);
}

static const char http_head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n";

/* Three records: resource "one", response "two", revisit of the first.
 * offs[] gets each record's offset (after the warcinfo). */
static void write_three(const char *prefix, bool gzip, uint64_t offs[3])
{
	struct warc_writer *w;
	char err[512];
	struct warc_writer_opts o = { .prefix = prefix, .gzip = gzip, .software = "test" };
	assert_int_equal(warc_writer_open(&o, &w, err), 0);
	char pd[WARC_DIGEST_MAX], bd[WARC_DIGEST_MAX];
	struct warc_sha1 s;
	assert_int_equal(warc_sha1_init(&s), 0);

	warc_sha1_update(&s, "page one", 8);
	warc_sha1_final(&s, pd);
	struct warc_rec r1 = { .type = "resource", .target_uri = "http://a.example/one", .date_sec = 1600000000,
			       .content_type = "text/html", .block_len = 8, .block_digest = pd,
			       .payload_digest = pd };
	assert_int_equal(warc_begin(w, &r1), 0);
	assert_int_equal(warc_write(w, "page ", 5), 0);
	assert_int_equal(warc_write(w, "one", 3), 0);
	assert_int_equal(warc_end(w), 0);
	offs[0] = r1.offset;

	size_t hl = strlen(http_head);
	warc_sha1_update(&s, "page two", 8);
	warc_sha1_final(&s, pd);
	warc_sha1_update(&s, http_head, hl);
	warc_sha1_update(&s, "page two", 8);
	warc_sha1_final(&s, bd);
	struct warc_rec r2 = { .type = "response", .target_uri = "http://a.example/two", .date_sec = 1600000001,
			       .content_type = WARC_HTTP_RESPONSE_TYPE, .block_len = hl + 8,
			       .block_digest = bd, .payload_digest = pd };
	assert_int_equal(warc_begin(w, &r2), 0);
	assert_int_equal(warc_write(w, http_head, hl), 0);
	assert_int_equal(warc_write(w, "page two", 8), 0);
	/* more than block_len is refused */
	assert_int_equal(warc_write(w, "x", 1), -EINVAL);
	assert_int_equal(warc_end(w), 0);
	offs[1] = r2.offset;

	warc_sha1_final(&s, bd);
	struct warc_rec r3 = { .type = "revisit", .target_uri = "http://a.example/copy", .date_sec = 1600000002,
			       .block_len = 0, .block_digest = bd, .payload_digest = r1.payload_digest,
			       .refers_to = r1.id, .refers_to_uri = r1.target_uri, .refers_to_date = r1.date };
	assert_int_equal(warc_begin(w, &r3), 0);
	assert_int_equal(warc_end(w), 0);
	offs[2] = r3.offset;
	warc_sha1_free(&s);
	assert_int_equal(warc_writer_close(w), 0);
}

/* Read every record of fd: types joined by ',' into out; blocks joined by
 * '|' into blocks; offsets. */
static int read_all(int fd, struct seen *sn, char *types, char *blocks, uint64_t *offs)
{
	struct warc_reader *r;
	assert_int_equal(warc_reader_open(fd, on_report, sn, &r), 0);
	const struct warc_head *h;
	int n = 0, rc;
	types[0] = blocks[0] = 0;
	while ((rc = warc_next(r, &h)) == 1) {
		char buf[256];
		size_t got = 0;
		ssize_t k;
		while ((k = warc_read(r, buf + got, sizeof buf - 1 - got)) > 0)
			got += (size_t)k;
		if (k < 0)
			continue;
		if (warc_check_end(r))
			continue;
		buf[got] = 0;
		if (strcmp(h->type, "warcinfo")) {
			strcat(types, *types ? "," : "");
			strcat(types, h->type);
			strcat(blocks, *blocks ? "|" : "");
			strcat(blocks, buf + (strncmp(buf, "HTTP/", 5) ? 0 : strlen(http_head)));
			offs[n++] = h->offset;
		}
	}
	assert_int_equal(rc, 0);
	warc_reader_close(r);
	return n;
}

static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	struct stat sb;
	assert_int_equal(fstat(fd, &sb), 0);
	char *b = malloc((size_t)sb.st_size + 1);
	assert_int_equal(read(fd, b, (size_t)sb.st_size), sb.st_size);
	close(fd);
	*len = (size_t)sb.st_size;
	return b;
}

static void spit(const char *path, const void *b, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, len), (ssize_t)len);
	close(fd);
}

static void roundtrip(bool gzip)
{
	char *dir = th_tmpdir(), prefix[512], path[600];
	snprintf(prefix, sizeof prefix, "%s/t", dir);
	uint64_t woffs[3], roffs[8];
	write_three(prefix, gzip, woffs);
	snprintf(path, sizeof path, "%s-00000.warc%s", prefix, gzip ? ".gz" : "");
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	struct seen sn = { 0 };
	char types[256], blocks[256];
	assert_int_equal(read_all(fd, &sn, types, blocks, roffs), 3);
	close(fd);
	assert_int_equal(sn.reports, 0);
	assert_string_equal(types, "resource,response,revisit");
	assert_string_equal(blocks, "page one|page two|");
	for (int i = 0; i < 3; i++)
		assert_int_equal(roffs[i], woffs[i]);
	th_rmdir(dir);
}

static void test_roundtrip_gzip(void **state)
{
	(void)state;
	roundtrip(true);
}

static void test_roundtrip_plain(void **state)
{
	(void)state;
	roundtrip(false);
}

/* Damage record 2 (the response) of a plain file in place; the first and
 * the third must still be read, one report naming record 2's offset. */
static void damaged_plain(const char *from, const char *to, bool pipe_in, const char *want_types)
{
	char *dir = th_tmpdir(), prefix[512], path[600];
	snprintf(prefix, sizeof prefix, "%s/t", dir);
	uint64_t woffs[3], roffs[8];
	write_three(prefix, false, woffs);
	snprintf(path, sizeof path, "%s-00000.warc", prefix);
	size_t len;
	char *b = slurp(path, &len);
	char *at = memmem(b + woffs[1], len - woffs[1], from, strlen(from));
	assert_non_null(at);
	assert_int_equal(strlen(from), strlen(to));
	memcpy(at, to, strlen(to));
	spit(path, b, len);
	int fd;
	pid_t pid = 0;
	if (pipe_in) {
		int p[2];
		assert_int_equal(pipe(p), 0);
		pid = fork();
		if (!pid) {
			close(p[0]);
			ssize_t k = write(p[1], b, len);
			_exit(k == (ssize_t)len ? 0 : 1);
		}
		close(p[1]);
		fd = p[0];
	} else
		fd = open(path, O_RDONLY);
	struct seen sn = { 0 };
	char types[256], blocks[256];
	read_all(fd, &sn, types, blocks, roffs);
	close(fd);
	if (pid)
		waitpid(pid, NULL, 0);
	assert_string_equal(types, want_types);
	assert_int_equal(sn.reports, 1);
	assert_int_equal(sn.offsets[0], woffs[1]);
	free(b);
	th_rmdir(dir);
}

static void test_bad_length_longer(void **state)
{
	(void)state;
	damaged_plain("Content-Length: 52", "Content-Length: 62", false, "resource,revisit");
}

static void test_bad_length_shorter(void **state)
{
	(void)state;
	damaged_plain("Content-Length: 52", "Content-Length: 42", false, "resource,revisit");
}

static void test_bad_length_pipe(void **state)
{
	(void)state;
	damaged_plain("Content-Length: 52", "Content-Length: 42", true, "resource,revisit");
}

static void test_no_type(void **state)
{
	(void)state;
	damaged_plain("WARC-Type: response", "WARC-Tipo: response", false, "resource,revisit");
}

static void test_bad_digest(void **state)
{
	(void)state;
	damaged_plain("page two", "page twO", false, "resource,revisit");
}

/* A gzip file whose second record's member is cut in half. */
static void test_truncated_member(void **state)
{
	(void)state;
	char *dir = th_tmpdir(), prefix[512], path[600];
	snprintf(prefix, sizeof prefix, "%s/t", dir);
	uint64_t woffs[3], roffs[8];
	write_three(prefix, true, woffs);
	snprintf(path, sizeof path, "%s-00000.warc.gz", prefix);
	size_t len;
	char *b = slurp(path, &len);
	size_t m2 = woffs[2] - woffs[1], cut = m2 / 2;
	memmove(b + woffs[1] + cut, b + woffs[2], len - woffs[2]);
	spit(path, b, len - (m2 - cut));
	int fd = open(path, O_RDONLY);
	struct seen sn = { 0 };
	char types[256], blocks[256];
	read_all(fd, &sn, types, blocks, roffs);
	close(fd);
	assert_string_equal(types, "resource,revisit");
	assert_int_equal(sn.reports, 1);
	assert_int_equal(sn.offsets[0], woffs[1]);
	/* the same file cut inside its last member: the end is reported */
	spit(path, b, woffs[1] + cut);
	fd = open(path, O_RDONLY);
	memset(&sn, 0, sizeof sn);
	read_all(fd, &sn, types, blocks, roffs);
	close(fd);
	assert_string_equal(types, "resource");
	assert_int_equal(sn.reports, 1);
	assert_int_equal(sn.offsets[0], woffs[1]);
	free(b);
	th_rmdir(dir);
}

/* What other writers produce: WARC/1.0, LF line ends, a folded field, a
 * whole file gzipped as one member. */
static void test_lenient(void **state)
{
	(void)state;
	static const char text[] = "WARC/1.0\nWARC-Type: resource\nWARC-Target-URI: http://x.example/\n"
				   "X-Folded: first\n second\nContent-Length: 3\n\nabc\n\n"
				   "\r\nWARC/1.0\r\nWARC-Type: metadata\r\nContent-Length: 0\r\n\r\n\r\n\r\n";
	char *dir = th_tmpdir(), path[600];
	snprintf(path, sizeof path, "%s/one-member.warc.gz", dir);
	uint8_t gz[1024];
	z_stream z = { 0 };
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)text;
	z.avail_in = sizeof text - 1;
	z.next_out = gz;
	z.avail_out = sizeof gz;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	spit(path, gz, sizeof gz - z.avail_out);
	deflateEnd(&z);
	int fd = open(path, O_RDONLY);
	struct warc_reader *r;
	struct seen sn = { 0 };
	assert_int_equal(warc_reader_open(fd, on_report, &sn, &r), 0);
	const struct warc_head *h;
	assert_int_equal(warc_next(r, &h), 1);
	assert_string_equal(h->version, "WARC/1.0");
	assert_string_equal(h->type, "resource");
	assert_string_equal(warc_field(h, "x-folded"), "first  second");
	char buf[8];
	assert_int_equal(warc_read(r, buf, sizeof buf), 3);
	assert_memory_equal(buf, "abc", 3);
	assert_int_equal(warc_check_end(r), 0);
	assert_int_equal(warc_next(r, &h), 1);
	assert_string_equal(h->type, "metadata");
	assert_int_equal(warc_next(r, &h), 0);
	assert_int_equal(sn.reports, 0);
	warc_reader_close(r);
	close(fd);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha1_base32),
		cmocka_unit_test(test_dates),
		cmocka_unit_test(test_surt),
		cmocka_unit_test(test_roundtrip_gzip),
		cmocka_unit_test(test_roundtrip_plain),
		cmocka_unit_test(test_bad_length_longer),
		cmocka_unit_test(test_bad_length_shorter),
		cmocka_unit_test(test_bad_length_pipe),
		cmocka_unit_test(test_no_type),
		cmocka_unit_test(test_bad_digest),
		cmocka_unit_test(test_truncated_member),
		cmocka_unit_test(test_lenient),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
