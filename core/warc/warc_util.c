/* warc_util.c - the small pieces of the WARC format: SHA-1 digests in
 * base32, record IDs, WARC-Dates. */
#include "warc.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int warc_sha1_init(struct warc_sha1 *s)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (!c)
		return -ENOMEM;
	if (EVP_DigestInit_ex(c, EVP_sha1(), NULL) != 1) {
		EVP_MD_CTX_free(c);
		return -EIO;
	}
	s->ctx = c;
	return 0;
}

void warc_sha1_update(struct warc_sha1 *s, const void *buf, size_t len)
{
	EVP_DigestUpdate(s->ctx, buf, len);
}

void warc_sha1_final(struct warc_sha1 *s, char out[WARC_DIGEST_MAX])
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_DigestFinal_ex(s->ctx, md, &n);
	EVP_DigestInit_ex(s->ctx, EVP_sha1(), NULL);
	warc_sha1_format(md, out);
}

void warc_sha1_free(struct warc_sha1 *s)
{
	EVP_MD_CTX_free(s->ctx);
	s->ctx = NULL;
}

static const char b32[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/* 20 bytes are 160 bits: exactly 32 base32 characters, no padding. */
void warc_sha1_format(const uint8_t sha1[20], char out[WARC_DIGEST_MAX])
{
	memcpy(out, "sha1:", 5);
	char *o = out + 5;
	for (int g = 0; g < 4; g++) {
		const uint8_t *p = sha1 + 5 * g;
		uint64_t v = (uint64_t)p[0] << 32 | (uint64_t)p[1] << 24 | (uint64_t)p[2] << 16 |
			     (uint64_t)p[3] << 8 | p[4];
		for (int i = 7; i >= 0; i--)
			*o++ = b32[(v >> (5 * i)) & 31];
	}
	*o = 0;
}

static int b32_val(int c)
{
	c = toupper(c);
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= '2' && c <= '7')
		return c - '2' + 26;
	return -1;
}

int warc_sha1_parse(const char *digest, uint8_t sha1[20])
{
	if (strncasecmp(digest, "sha1:", 5))
		return -EINVAL;
	const char *s = digest + 5;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (n == 40) { /* base16, as some writers give it */
		for (int i = 0; i < 20; i++) {
			char hx[3] = { s[2 * i], s[2 * i + 1], 0 };
			if (!isxdigit((unsigned char)hx[0]) || !isxdigit((unsigned char)hx[1]))
				return -EINVAL;
			sha1[i] = (uint8_t)strtoul(hx, NULL, 16);
		}
		return 0;
	}
	if (n != 32)
		return -EINVAL;
	for (int g = 0; g < 4; g++) {
		uint64_t v = 0;
		for (int i = 0; i < 8; i++) {
			int d = b32_val((unsigned char)s[8 * g + i]);
			if (d < 0)
				return -EINVAL;
			v = v << 5 | (uint64_t)d;
		}
		for (int i = 0; i < 5; i++)
			sha1[5 * g + i] = (uint8_t)(v >> (8 * (4 - i)));
	}
	return 0;
}

int warc_new_id(char out[WARC_ID_MAX])
{
	uint8_t u[16];
	if (RAND_bytes(u, sizeof u) != 1)
		return -EIO;
	u[6] = (uint8_t)((u[6] & 0x0f) | 0x40); /* version 4 */
	u[8] = (uint8_t)((u[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	snprintf(out, WARC_ID_MAX,
		 "<urn:uuid:%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x>", u[0], u[1],
		 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
	return 0;
}

void warc_format_date(int64_t sec, uint32_t nsec, char out[WARC_DATE_MAX])
{
	time_t t = (time_t)sec;
	struct tm tm;
	gmtime_r(&t, &tm);
	size_t n = strftime(out, WARC_DATE_MAX, "%Y-%m-%dT%H:%M:%S", &tm);
	if (nsec >= 1000)
		snprintf(out + n, WARC_DATE_MAX - n, ".%06uZ", nsec / 1000);
	else
		snprintf(out + n, WARC_DATE_MAX - n, "Z");
}

/* W3C-DTF as WARC uses it: YYYY[-MM[-DD[Thh:mm[:ss[.f+]]Z]]]. */
int warc_parse_date(const char *s, int64_t *sec, uint32_t *nsec)
{
	struct tm tm = { .tm_mday = 1 };
	int y = 0, mo = 1, d = 1, h = 0, mi = 0, se = 0, n = 0;
	uint32_t frac = 0;
	if (sscanf(s, "%4d%n", &y, &n) != 1 || n != 4)
		return -EINVAL;
	s += n;
	if (*s == '-') {
		if (sscanf(s, "-%2d%n", &mo, &n) != 1 || n != 3)
			return -EINVAL;
		s += n;
		if (*s == '-') {
			if (sscanf(s, "-%2d%n", &d, &n) != 1 || n != 3)
				return -EINVAL;
			s += n;
			if (*s == 'T') {
				if (sscanf(s, "T%2d:%2d%n", &h, &mi, &n) != 2 || n != 6)
					return -EINVAL;
				s += n;
				if (*s == ':') {
					if (sscanf(s, ":%2d%n", &se, &n) != 1 || n != 3)
						return -EINVAL;
					s += n;
					if (*s == '.') {
						uint32_t scale = 100000000;
						for (s++; isdigit((unsigned char)*s); s++, scale /= 10)
							frac += (uint32_t)(*s - '0') * scale;
					}
				}
				if (*s++ != 'Z')
					return -EINVAL;
			}
		}
	}
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return -EINVAL;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	*sec = (int64_t)timegm(&tm);
	*nsec = frac;
	return 0;
}
