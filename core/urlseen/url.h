/* url.h - syntax-based URL normalisation (RFC 3986 section 6.2.2, with the
 * scheme-based rules of 6.2.3 for default ports and empty paths), the form
 * in which `pagededup urlseen` tests and records URLs.
 *
 * A URL here is what a crawler fetches: an absolute URI with an authority,
 * "scheme://authority path [?query] [#fragment]". Relative references,
 * URIs without an authority (mailto:, javascript:, urn:), and lines with
 * spaces or control characters inside are refused as "not a URL".
 *
 * What normalisation does, in order:
 *   - leading and trailing ASCII white space is dropped (so CRLF lines work);
 *   - the scheme and the host are lower-cased (a percent-encoded unreserved
 *     character in the host is decoded first, then lower-cased);
 *   - in every component, a percent-encoded unreserved character
 *     (A-Z a-z 0-9 - . _ ~) is decoded, the hex digits of every other
 *     percent-encoding are upper-cased, and a '%' not followed by two hex
 *     digits becomes "%25";
 *   - bytes that RFC 3986 does not allow in a component (non-ASCII bytes,
 *     such as raw UTF-8, and " < > \ ^ ` { | } [ ]) are percent-encoded,
 *     as browsers send them; in the host such an ASCII character is refused
 *     instead, and non-ASCII bytes are percent-encoded (no IDNA/punycode);
 *   - the port loses leading zeros, an empty port (":") is dropped, and so
 *     is the scheme's default port (http 80, https 443, ws 80, wss 443,
 *     ftp 21);
 *   - dot segments are removed from the path (RFC 3986 5.2.4), after the
 *     percent-decoding, so "/a/%2E%2E/b" is "/b"; an empty path is "/";
 *   - the fragment ("#..." to the end) is dropped;
 *   - with URL_SORT_QUERY only: the query's '&'-separated parameters are
 *     sorted bytewise and empty ones dropped ("?b=2&&a=1" -> "?a=1&b=2").
 *     Servers may give parameter order a meaning, hence an option.
 * Not done: IPv4/IPv6 address canonical forms, IDNA, case of the userinfo,
 * a trailing dot in the host, "+" versus "%20" in queries: these are not
 * syntax-based equivalences, or not safe for every server.
 *
 * The result is idempotent: normalising a normalised URL gives it back.
 *
 * Errors are negative errno values: -EINVAL for a line that is not a URL
 * (the reason, a static string, through *why), -ENOSPC if out is smaller
 * than URL_NORM_CAP(len), -ENOMEM if sorting a query cannot get memory.
 */
#ifndef PD_URL_H
#define PD_URL_H

#include <stddef.h>

/* Longest input accepted (bytes, after trimming white space). */
#define URL_MAX_LEN 65536
/* Output room that always suffices for an input of len bytes: each byte may
 * become a three-byte percent-encoding, and an empty path becomes "/". */
#define URL_NORM_CAP(len) (3 * (size_t)(len) + 2)

/* Flags of url_normalize. */
#define URL_SORT_QUERY 1u
/* Tests only: always take the general path (url.c proves most URLs already
 * normal in one vectorised pass; the result must not depend on it). */
#define URL_NO_FAST_PATH 0x80000000u
/* Tests only: prove a URL normal with the SSE2 masks even where the
 * processor has AVX-512BW (the two must agree). */
#define URL_FAST_PATH_SSE2 0x40000000u

/* Normalise the URL in in[0..len) into out (cap bytes, not NUL-terminated)
 * and store its length in *outlen. On -EINVAL, *why (if why is not NULL)
 * names the reason, e.g. "no scheme". */
int url_normalize(const char *in, size_t len, unsigned flags, char *out, size_t cap,
		  size_t *outlen, const char **why);

/* url_normalize without the copy of a URL that is already normal: *form
 * gets either out or, when the trimmed input is its own normal form (most
 * URLs of a crawl list), the place of that form in `in`; *formlen its
 * length. out needs URL_NORM_CAP(len) bytes all the same. */
int url_normal_form(const char *in, size_t len, unsigned flags, char *out, size_t cap,
		    const char **form, size_t *formlen, const char **why);

/* Remove dot segments (RFC 3986 5.2.4) from an absolute path (one that
 * starts with '/') in place; returns its new length. Exposed for tests. */
size_t url_remove_dot_segments(char *path, size_t len);

#endif
