/* fp.c - streaming MD5 (OpenSSL EVP) and XXH3-128 in one pass. See fp.h. */
#include "fp.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

int fp_init(struct fp_ctx *c)
{
	c->size = 0;
	c->md5 = EVP_MD_CTX_new();
	c->xxh = XXH3_createState();
	if (!c->md5 || !c->xxh) {
		fp_free(c);
		return -ENOMEM;
	}
	return fp_reset(c);
}

int fp_reset(struct fp_ctx *c)
{
	c->size = 0;
	if (EVP_DigestInit_ex(c->md5, EVP_md5(), NULL) != 1)
		return -EIO;
	if (XXH3_128bits_reset(c->xxh) != XXH_OK)
		return -EIO;
	return 0;
}

void fp_update(struct fp_ctx *c, const void *buf, size_t len)
{
	/* EVP_DigestUpdate cannot fail for MD5 on a valid context. */
	EVP_DigestUpdate(c->md5, buf, len);
	XXH3_128bits_update(c->xxh, buf, len);
	c->size += len;
}

int fp_final(struct fp_ctx *c, struct fp *out)
{
	unsigned int n = 0;
	if (EVP_DigestFinal_ex(c->md5, out->md5, &n) != 1 || n != 16)
		return -EIO;
	XXH128_canonical_t canon;
	XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(c->xxh));
	memcpy(out->xxh128, canon.digest, 16);
	out->size = c->size;
	return 0;
}

void fp_free(struct fp_ctx *c)
{
	EVP_MD_CTX_free(c->md5);
	XXH3_freeState(c->xxh);
	c->md5 = c->xxh = NULL;
}

int fp_of_fd(int fd, struct fp *out)
{
	enum { CHUNK = 1 << 18 };
	struct fp_ctx c;
	int rc = fp_init(&c);
	if (rc)
		return rc;
	char *buf = malloc(CHUNK);
	if (!buf) {
		fp_free(&c);
		return -ENOMEM;
	}
	off_t off = 0;
	for (;;) {
		ssize_t n = pread(fd, buf, CHUNK, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0) {
			rc = fp_final(&c, out);
			break;
		}
		fp_update(&c, buf, (size_t)n);
		off += n;
	}
	free(buf);
	fp_free(&c);
	return rc;
}

int fp_of_buf(const void *buf, size_t len, struct fp *out)
{
	struct fp_ctx c;
	int rc = fp_init(&c);
	if (rc)
		return rc;
	fp_update(&c, buf, len);
	rc = fp_final(&c, out);
	fp_free(&c);
	return rc;
}

void fp_hex(const uint8_t md5[16], char out[33])
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = digits[md5[i] >> 4];
		out[2 * i + 1] = digits[md5[i] & 15];
	}
	out[32] = 0;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int fp_unhex(const char *hex, uint8_t md5[16])
{
	for (int i = 0; i < 16; i++) {
		int hi = hexval(hex[2 * i]), lo = hi < 0 ? -1 : hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		md5[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}
