/* test_url.c - unit tests of URL normalisation (core/urlseen/url.c).
 *
 * The examples of RFC 3986 (5.2.4, 5.4, 6.2.2, 6.2.3) first, then each rule
 * of url.h on its own, the lines that are not URLs, and a fixed-seed random
 * test that normalising is idempotent and only ever emits characters a URL
 * may hold.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "urlseen/url.h"

/* Normalise, and check that the vectorised fast path (taken for URLs
 * already in normal form) and the general path agree. */
static int norm_flags(const char *in, unsigned flags, char *out, size_t cap, const char **why)
{
	static char slow[1 << 18];
	size_t n = 0, n2 = 0;
	const char *why2 = NULL;
	int rc = url_normalize(in, strlen(in), flags, out, cap, &n, why);
	int rc2 = url_normalize(in, strlen(in), flags | URL_NO_FAST_PATH, slow, sizeof slow, &n2,
				&why2);
	if (rc != rc2 && !(rc == -ENOSPC && cap < sizeof slow))
		fail_msg("\"%s\": fast path %d, general path %d", in, rc, rc2);
	if (rc == 0 && (n != n2 || memcmp(out, slow, n)))
		fail_msg("\"%s\": fast path \"%.*s\", general path \"%.*s\"", in, (int)n, out,
			 (int)n2, slow);
	if (rc == 0)
		out[n] = 0;
	return rc;
}

/* The normal form of in (asserting success), in a static buffer. */
static const char *norm2(const char *in, unsigned flags)
{
	static char out[4096];
	const char *why = NULL;
	int rc = norm_flags(in, flags, out, sizeof out - 1, &why);
	if (rc)
		fail_msg("url_normalize(\"%s\") = %d (%s)", in, rc, why ? why : "");
	return out;
}

static const char *norm(const char *in)
{
	return norm2(in, 0);
}

#define assert_norm(in, want) assert_string_equal(norm(in), want)

static void assert_not_url(const char *in, const char *reason)
{
	char out[4096];
	const char *why = NULL;
	int rc = norm_flags(in, 0, out, sizeof out, &why);
	if (rc != -EINVAL)
		fail_msg("\"%s\": expected -EINVAL, got %d (%s)", in, rc, rc ? "" : out);
	assert_non_null(why);
	if (reason && !strstr(why, reason))
		fail_msg("\"%s\": reason \"%s\", expected \"%s\"", in, why, reason);
}

static const char *dots(const char *path)
{
	static char buf[1024];
	size_t n = strlen(path);
	memcpy(buf, path, n);
	n = url_remove_dot_segments(buf, n);
	buf[n] = 0;
	return buf;
}

/* RFC 3986 5.2.4's worked example and the paths of the 5.4 examples. */
static void test_remove_dot_segments(void **state)
{
	(void)state;
	assert_string_equal(dots("/a/b/c/./../../g"), "/a/g");
	static const char *cases[][2] = {
		{ "/b/c/g", "/b/c/g" },       { "/b/c/./g", "/b/c/g" },
		{ "/b/c/g/", "/b/c/g/" },     { "/b/c/.", "/b/c/" },
		{ "/b/c/./", "/b/c/" },       { "/b/c/..", "/b/" },
		{ "/b/c/../", "/b/" },        { "/b/c/../g", "/b/g" },
		{ "/b/c/../..", "/" },        { "/b/c/../../", "/" },
		{ "/b/c/../../g", "/g" },     { "/b/c/../../../g", "/g" },
		{ "/b/c/../../../../g", "/g" }, { "/./g", "/g" },
		{ "/../g", "/g" },            { "/b/c/g.", "/b/c/g." },
		{ "/b/c/.g", "/b/c/.g" },     { "/b/c/g..", "/b/c/g.." },
		{ "/b/c/..g", "/b/c/..g" },   { "/b/c/./../g", "/b/g" },
		{ "/b/c/./g/.", "/b/c/g/" },  { "/b/c/g/./h", "/b/c/g/h" },
		{ "/b/c/g/../h", "/b/c/h" },  { "/", "/" },
		{ "/.", "/" },                { "/..", "/" },
		{ "/a//../b", "/a/b" },       { "/a//b", "/a//b" },
		{ "/a/...", "/a/..." },       { "/../../", "/" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (strcmp(dots(cases[i][0]), cases[i][1]))
			fail_msg("%s -> %s, expected %s", cases[i][0], dots(cases[i][0]),
				 cases[i][1]);
	/* not an absolute path: left alone */
	assert_string_equal(dots("a/../b"), "a/../b");
}

/* RFC 3986 6.2.2: case, percent-encoding and path segment normalisation. */
static void test_rfc_syntax_based(void **state)
{
	(void)state;
	assert_norm("HTTP://www.Example.com/", "http://www.example.com/");
	assert_norm("example://a/b/c/%7Bfoo%7D", "example://a/b/c/%7Bfoo%7D");
	assert_norm("eXAMPLE://a/./b/../b/%63/%7bfoo%7d", "example://a/b/c/%7Bfoo%7D");
	assert_norm("http://example.com/%7Esmith/", "http://example.com/~smith/");
	assert_norm("http://example.com/%7esmith/", "http://example.com/~smith/");
	/* hex digits of encodings that stay are upper case */
	assert_norm("http://a/%3a%2f%3f", "http://a/%3A%2F%3F");
}

/* RFC 3986 6.2.3: default port, empty port, empty path. */
static void test_rfc_scheme_based(void **state)
{
	(void)state;
	const char *same[] = { "http://example.com", "http://example.com/",
			       "http://example.com:/", "http://example.com:80/",
			       "HTTP://EXAMPLE.COM:0080", "http://example.com:00080/" };
	for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
		assert_string_equal(norm(same[i]), "http://example.com/");
	assert_norm("https://a:443/x", "https://a/x");
	assert_norm("https://a:80/x", "https://a:80/x");
	assert_norm("http://a:443/x", "http://a:443/x");
	assert_norm("ws://a:80/", "ws://a/");
	assert_norm("wss://a:443/", "wss://a/");
	assert_norm("ftp://a:21/f", "ftp://a/f");
	assert_norm("gopher://a:70/", "gopher://a:70/");
	assert_norm("http://a:8080", "http://a:8080/");
	assert_norm("http://a:0/", "http://a:0/");
	assert_norm("http://a:65535/", "http://a:65535/");
}

static void test_percent_encoding(void **state)
{
	(void)state;
	/* unreserved decoded, in every component */
	assert_norm("http://a/%41%7a%30%2D%2E%5F%7E", "http://a/Az0-._~");
	assert_norm("http://a/?q=%41%62", "http://a/?q=Ab");
	assert_norm("http://us%65r@a/", "http://user@a/");
	/* reserved stays encoded, upper-cased */
	assert_norm("http://a/b%2fc", "http://a/b%2Fc");
	assert_norm("http://a/?x=%26%3d", "http://a/?x=%26%3D");
	assert_norm("http://a/%25", "http://a/%25");
	/* a stray '%' */
	assert_norm("http://a/100%", "http://a/100%25");
	assert_norm("http://a/%zz", "http://a/%25zz");
	assert_norm("http://a/%4", "http://a/%254");
	/* bytes a URL may not hold are encoded */
	assert_norm("http://a/\xc3\xa9t\xc3\xa9", "http://a/%C3%A9t%C3%A9");
	assert_norm("http://a/<x>\"{|}^`\\", "http://a/%3Cx%3E%22%7B%7C%7D%5E%60%5C");
	assert_norm("http://a/[x]", "http://a/%5Bx%5D");
	/* the encoded and the raw form are one URL */
	assert_string_equal(norm("http://a/caf\xc3\xa9"), "http://a/caf%C3%A9");
	assert_string_equal(norm("http://a/caf%c3%a9"), "http://a/caf%C3%A9");
	/* encoded dots are dot segments */
	assert_norm("http://a/b/%2E%2E/c", "http://a/c");
	assert_norm("http://a/b/%2e/c", "http://a/b/c");
	assert_norm("http://a/b/.%2E/c", "http://a/c");
}

static void test_host(void **state)
{
	(void)state;
	assert_norm("http://WWW.%45xample.COM/Path", "http://www.example.com/Path");
	assert_norm("http://[2001:DB8::1]:8080/", "http://[2001:db8::1]:8080/");
	assert_norm("http://[2001:db8::1]/", "http://[2001:db8::1]/");
	assert_norm("http://[::1]:80/", "http://[::1]/");
	assert_norm("http://user:Pass@Host.example:8080/x", "http://user:Pass@host.example:8080/x");
	assert_norm("http://a@b@c/", "http://a%40b@c/");
	assert_norm("http://@a/", "http://@a/");
	/* non-ASCII host names: percent-encoded, no IDNA */
	assert_norm("http://b\xc3\xbc" "cher.example/", "http://b%C3%BCcher.example/");
	assert_norm("http://xn--bcher-kva.EXAMPLE/", "http://xn--bcher-kva.example/");
	assert_norm("http://127.0.0.1:8000/a", "http://127.0.0.1:8000/a");
	assert_norm("http://example.com./", "http://example.com./");
	assert_norm("file:///etc/hosts", "file:///etc/hosts");
	assert_norm("file://LocalHost/x", "file://localhost/x");
}

static void test_fragment_query(void **state)
{
	(void)state;
	assert_norm("http://a/b#c", "http://a/b");
	assert_norm("http://a#c", "http://a/");
	assert_norm("http://a/b?q#c?d", "http://a/b?q");
	assert_norm("http://a/b#", "http://a/b");
	assert_norm("http://a?x", "http://a/?x");
	assert_norm("http://a/?", "http://a/?");
	assert_norm("http://a/p?b=2&a=1", "http://a/p?b=2&a=1");
	assert_norm("http://a/p?x=/y?z", "http://a/p?x=/y?z");
	assert_norm("http://a/p?q=a+b%20c", "http://a/p?q=a+b%20c");
	assert_string_equal(norm2("http://a/p?b=2&a=1&&c", URL_SORT_QUERY), "http://a/p?a=1&b=2&c");
	assert_string_equal(norm2("http://a/p?b=2&a=1#f", URL_SORT_QUERY), "http://a/p?a=1&b=2");
	assert_string_equal(norm2("http://a/p?a=1", URL_SORT_QUERY), "http://a/p?a=1");
	assert_string_equal(norm2("http://a/p?&&", URL_SORT_QUERY), "http://a/p?");
	assert_string_equal(norm2("http://a/p?a=%7e&a", URL_SORT_QUERY), "http://a/p?a&a=~");
	/* equal parameters sorted by their whole text, so any order is one URL */
	assert_string_equal(norm2("http://a/?utm_source=x&id=7&page=2", URL_SORT_QUERY),
			    norm2("http://a/?page=2&utm_source=x&id=7", URL_SORT_QUERY));
	/* many parameters (past the on-stack room) */
	char big[4096] = "http://a/?", want[4096] = "http://a/?";
	for (int i = 99; i >= 0; i--) {
		char p[16];
		snprintf(p, sizeof p, "p%02d=%d%s", i, i, i ? "&" : "");
		strcat(big, p);
	}
	for (int i = 0; i < 100; i++) {
		char p[16];
		snprintf(p, sizeof p, "p%02d=%d%s", i, i, i < 99 ? "&" : "");
		strcat(want, p);
	}
	assert_string_equal(norm2(big, URL_SORT_QUERY), want);
}

static void test_whitespace(void **state)
{
	(void)state;
	assert_norm("  http://a/b\r\n", "http://a/b");
	assert_norm("\thttp://a/b \t", "http://a/b");
	assert_norm("http://a/b\r", "http://a/b");
}

static void test_not_urls(void **state)
{
	(void)state;
	assert_not_url("", "empty");
	assert_not_url(" \r\n", "empty");
	assert_not_url("example.com/x", "no scheme");
	assert_not_url("www.example.com", "no scheme");
	assert_not_url("/relative/path", "no scheme");
	assert_not_url("../x", "no scheme");
	assert_not_url("1http://a/", "no scheme");
	assert_not_url("ht tp://a/", "no scheme");
	assert_not_url("http", "no scheme");
	assert_not_url("mailto:someone@example.com", "no authority");
	assert_not_url("javascript:void(0)", "no authority");
	assert_not_url("urn:isbn:0451450523", "no authority");
	assert_not_url("localhost:8080/x", "no authority");
	assert_not_url("http:/a/b", "no authority");
	assert_not_url("http:a", "no authority");
	assert_not_url("http://", "empty host");
	assert_not_url("http:///x", "empty host");
	assert_not_url("https://:443/x", "empty host");
	assert_not_url("http://user@/x", "empty host");
	assert_not_url("http://a b/", "space or control");
	assert_not_url("http://a/b c", "space or control");
	assert_not_url("http://a/b\tc", "space or control");
	assert_not_url("http://a/?q=\x01", "space or control");
	assert_not_url("http://a/\x7f", "space or control");
	assert_not_url("http://a/b\nhttp://c/", "space or control");
	assert_not_url("http://exa<mple.com/", "bad character in host");
	assert_not_url("http://exa\"mple.com/", "bad character in host");
	assert_not_url("http://a:8x/", "bad port");
	assert_not_url("http://a:65536/", "bad port");
	assert_not_url("http://a:99999999999999999999/", "bad port");
	assert_not_url("http://a:-1/", "bad port");
	assert_not_url("http://[::1/", "bad IPv6");
	assert_not_url("http://[::1]x/", "bad IPv6");
	assert_not_url("http://[::1%25eth0]/", "bad IPv6");
	assert_not_url("http://[::1]:x/", "bad port");
	assert_not_url("something that is not a url", "no scheme");
	assert_not_url("# a comment", "no scheme");
}

static void test_limits(void **state)
{
	(void)state;
	char out[64];
	size_t n;
	const char *why = NULL;
	const char *u = "http://example.com/abc";
	/* room is checked against the worst case before anything is written */
	assert_int_equal(url_normalize(u, strlen(u), 0, out, URL_NORM_CAP(strlen(u)) - 1, &n, &why),
			 -ENOSPC);
	assert_int_equal(url_normalize(u, strlen(u), 0, out, sizeof out, &n, &why), -ENOSPC);
	char *big = malloc(URL_NORM_CAP(URL_MAX_LEN + 10));
	char *in = malloc(URL_MAX_LEN + 10);
	assert_non_null(big);
	assert_non_null(in);
	memcpy(in, "http://a/", 9);
	memset(in + 9, 'x', URL_MAX_LEN + 1 - 9);
	assert_int_equal(url_normalize(in, URL_MAX_LEN + 1, 0, big,
				       URL_NORM_CAP(URL_MAX_LEN + 10), &n, &why), -EINVAL);
	assert_non_null(strstr(why, "long"));
	assert_int_equal(url_normalize(in, URL_MAX_LEN, 0, big, URL_NORM_CAP(URL_MAX_LEN), &n, &why),
			 0);
	assert_int_equal(n, URL_MAX_LEN);
	/* the worst case fits the promised room exactly */
	memset(in + 9, 0xff, URL_MAX_LEN - 9);
	assert_int_equal(url_normalize(in, URL_MAX_LEN, 0, big, URL_NORM_CAP(URL_MAX_LEN), &n, &why),
			 0);
	assert_int_equal(n, 9 + 3 * (URL_MAX_LEN - 9));
	assert_int_equal(url_normalize("http://a", 8, 0, out, URL_NORM_CAP(8), &n, &why), 0);
	assert_int_equal(n, 9);
	free(big);
	free(in);
}

/* ---- random: idempotent, and the output is a well-formed URL ---- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static void random_url(uint64_t *s, char *buf, size_t cap)
{
	static const char *pieces[] = {
		"http://", "HTTPS://", "ftp://", "Example.COM", "a", "b", "/", "//", ".", "..",
		"./", "../", "%", "%2e", "%2E", "%7e", "%41", "%2f", "%zz", "?", "&", "=", "#",
		":", ":80", ":443", ":0081", "@", "[::1]", "\xc3\xa9", "<", "\\", "~", "+", ";",
		"x=1", "y=2", "%25", "%", "a%", "%4",
	};
	size_t n = 0, m = 2 + rng_next(s) % 14;
	const char *start = rng_next(s) % 2 ? "http://" : "hTTp://";
	n = strlen(start);
	memcpy(buf, start, n);
	for (size_t i = 0; i < m; i++) {
		const char *p = pieces[rng_next(s) % (sizeof pieces / sizeof pieces[0])];
		size_t l = strlen(p);
		if (n + l + 1 >= cap)
			break;
		memcpy(buf + n, p, l);
		n += l;
	}
	buf[n] = 0;
}

static bool url_char_ok(unsigned char c)
{
	if (c <= 0x20 || c >= 0x7f)
		return false;
	return !strchr("\"<>\\^`{|}#", c);
}

static void test_random_idempotent(void **state)
{
	(void)state;
	uint64_t seed = 20240607;
	char in[512], out[2048], again[4096];
	size_t ok = 0;
	for (int iter = 0; iter < 50000; iter++) {
		random_url(&seed, in, sizeof in);
		for (unsigned flags = 0; flags <= URL_SORT_QUERY; flags++) {
			size_t n, n2;
			const char *why;
			int rc = url_normalize(in, strlen(in), flags, out, sizeof out, &n, &why);
			char slow[2048];
			size_t ns = 0;
			int rcs = url_normalize(in, strlen(in), flags | URL_NO_FAST_PATH, slow,
						sizeof slow, &ns, &why);
			if (rc != rcs || (rc == 0 && (ns != n || memcmp(slow, out, n))))
				fail_msg("%s: fast and general paths differ", in);
			if (rc == -EINVAL)
				continue;
			if (rc)
				fail_msg("%s: %d", in, rc);
			ok++;
			for (size_t i = 0; i < n; i++)
				if (!url_char_ok((unsigned char)out[i]))
					fail_msg("%s -> %.*s: byte 0x%02x", in, (int)n, out,
						 (unsigned char)out[i]);
			/* every '%' starts an upper-case encoding of a reserved byte */
			for (size_t i = 0; i < n; i++) {
				if (out[i] != '%')
					continue;
				if (i + 2 >= n)
					fail_msg("%.*s: '%%' at the end", (int)n, out);
				if (!out[i + 1] || !strchr("0123456789ABCDEF", out[i + 1]) ||
				    !out[i + 2] || !strchr("0123456789ABCDEF", out[i + 2]))
					fail_msg("%.*s: bad encoding at %zu", (int)n, out, i);
			}
			rc = url_normalize(out, n, flags, again, sizeof again, &n2, &why);
			if (rc)
				fail_msg("%s -> %.*s, which is refused: %s", in, (int)n, out, why);
			if (n2 != n || memcmp(out, again, n))
				fail_msg("not idempotent: %s -> %.*s -> %.*s", in, (int)n, out,
					 (int)n2, again);
		}
	}
	assert_true(ok > 10000);
}

/* Runs of plain bytes are copied 16 at a time: the same URL tail must give
 * the same result at every alignment and with the special byte at every
 * place of a 16-byte block. A prefix segment of j letters shifts the rest;
 * the tails hold no dot segments, so the prefix segment stays as it is. */
static void test_alignment(void **state)
{
	(void)state;
	static const char *tails[] = {
		"/AbC-_/x%7e%41%2f%zz\xc3\xa9<>|y/z?q=1&r=%7E+s.t#frag",
		"/0123456789abcdefghijklmnopqrstuvwxyz/%2E%2E%2Fq?a=b.c&d=%20#",
		"/long-path-with-many-plain-bytes-before-the-first-special-one%7E-and-after",
		"/x?0123456789abcdefghij=klmnopqrstuvwxyz&ABCDEFGHIJ=KLMNOPQRSTUVWXYZ%7e",
		"/a%41b%42c%43d%44e%45f%46g%47h%48i%49j%4Ak%4Bl%4Cm%4Dn%4Eo%4Fp",
		"/%c3%a9%c3%a9%c3%a9%c3%a9%c3%a9%c3%a9%c3%a9%c3%a9%c3%a9%c3%a9",
		"?only=query&with=a.dot.and.more.dots.and.plus+signs&x=%zz",
	};
	static const char *hosts[] = {
		"Example.COM", "a-very-long-host-name-with-dashes.and.dots.example.org",
		"WWW.%45XAMPLE.com", "h",
	};
	char in[1024], want[2048], base[2048];
	for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++) {
		for (size_t h = 0; h < sizeof hosts / sizeof hosts[0]; h++) {
			snprintf(in, sizeof in, "http://%s%s", hosts[h], tails[t]);
			snprintf(base, sizeof base, "%s", norm(in));
			/* where the path (or query) starts in the normal form */
			const char *rest = strchr(base + 7, tails[t][0]);
			assert_non_null(rest);
			for (int j = 1; j <= 40; j++) {
				char seg[64];
				memset(seg, 'a' + j % 26, (size_t)j);
				seg[j] = 0;
				const char *tail = tails[t][0] == '?' ? "" : tails[t];
				const char *q = tails[t][0] == '?' ? tails[t] : "";
				snprintf(in, sizeof in, "http://%s/%s%s%s", hosts[h], seg, tail, q);
				/* a query-only tail: the normal form has "/" before it */
				int cut = (int)(rest - base) - (tails[t][0] == '?');
				snprintf(want, sizeof want, "%.*s/%s%s", cut, base, seg, rest);
				assert_string_equal(norm(in), want);
			}
		}
	}
}

/* URLs that are normal or nearly so, of every length up to 300 bytes (the
 * fast path works in blocks of 16 and groups of 64): the fast path and the
 * general path give the same answer, and a normal URL comes back as it is
 * (url_normal_form: without a copy). */
static void test_fast_path_agrees(void **state)
{
	(void)state;
	static const char host_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789-.";
	static const char path_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
					 "-._~!$&'()*+,;=:@//////...";
	static const char rare[] = "?#%:@A[]\\\"<> \x7f\xc3" "_.";
	uint64_t seed = 77;
	char in[512], out[2048], slow[2048];
	size_t taken_same = 0, in_place = 0;
	for (int iter = 0; iter < 60000; iter++) {
		size_t n = 0;
		n += (size_t)snprintf(in, sizeof in, "%s://", rng_next(&seed) % 8 ? "https" : "hTtp");
		size_t hl = 1 + rng_next(&seed) % 70, pl = rng_next(&seed) % 220;
		for (size_t i = 0; i < hl; i++)
			in[n++] = host_chars[rng_next(&seed) % (sizeof host_chars - 1)];
		if (rng_next(&seed) % 4)
			in[n++] = '/';
		for (size_t i = 0; i < pl; i++) {
			uint64_t r = rng_next(&seed);
			if (r % 97 == 0)
				in[n++] = rare[(r >> 8) % (sizeof rare - 1)];
			else
				in[n++] = path_chars[(r >> 8) % (sizeof path_chars - 1)];
		}
		in[n] = 0;
		size_t a = 0, b = 0;
		const char *why = NULL;
		int rc = url_normalize(in, n, 0, out, sizeof out, &a, &why);
		int rc2 = url_normalize(in, n, URL_NO_FAST_PATH, slow, sizeof slow, &b, &why);
		if (rc != rc2 || (rc == 0 && (a != b || memcmp(out, slow, a))))
			fail_msg("%s: fast path %d \"%.*s\", general %d \"%.*s\"", in, rc, (int)a, out,
				 rc2, (int)b, slow);
		taken_same += rc == 0 && a == n && !memcmp(out, in, n);
		/* url_normal_form: the same form, from the input itself when
		 * the URL is normal already (with spaces around it too), else
		 * from out; the general path always writes out */
		char padded[520], out2[2048];
		const char *form = NULL;
		size_t c = 0;
		int lead = iter % 3;
		memcpy(padded, "  \t", (size_t)lead);
		memcpy(padded + lead, in, n);
		padded[lead + n] = '\r';
		int rc3 = url_normal_form(padded, n + (size_t)lead + 1, 0, out2, sizeof out2, &form, &c,
					  &why);
		assert_int_equal(rc3, rc);
		if (rc == 0) {
			assert_int_equal(c, a);
			assert_memory_equal(form, out, a);
			if (form != out2) /* the input, less the white space */
				assert_ptr_equal(form, padded + lead);
			in_place += form == padded + lead;
		}
		/* the SSE2 masks, where the default is AVX-512BW: the same
		 * answer, and the same URLs proved normal in place */
		const char *form_sse2 = NULL;
		size_t c2 = 0;
		assert_int_equal(url_normal_form(padded, n + (size_t)lead + 1, URL_FAST_PATH_SSE2, out2,
						 sizeof out2, &form_sse2, &c2, &why),
				 rc);
		if (rc == 0) {
			assert_int_equal(c2, a);
			assert_memory_equal(form_sse2, out, a);
			assert_true((form_sse2 == padded + lead) == (form == padded + lead));
		}
		assert_int_equal(url_normal_form(in, n, URL_NO_FAST_PATH, out2, sizeof out2, &form, &c,
						 &why), rc);
		if (rc == 0)
			assert_ptr_equal(form, out2);
	}
	assert_true(in_place > 5000);
	/* many of them were normal already */
	assert_true(taken_same > 5000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_remove_dot_segments),
		cmocka_unit_test(test_rfc_syntax_based),
		cmocka_unit_test(test_rfc_scheme_based),
		cmocka_unit_test(test_percent_encoding),
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_fragment_query),
		cmocka_unit_test(test_whitespace),
		cmocka_unit_test(test_not_urls),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_random_idempotent),
		cmocka_unit_test(test_alignment),
		cmocka_unit_test(test_fast_path_agrees),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
