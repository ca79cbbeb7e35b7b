/* fp.h - content fingerprints: MD5 (the dedup key) and XXH3-128 (the check
 * that makes an MD5 match a real duplicate) computed in one streaming pass.
 *
 * MD5 goes through OpenSSL's EVP interface. Bytes are fed as they arrive, so a
 * page written sequentially is never read back to be fingerprinted.
 */
#ifndef PD_FP_H
#define PD_FP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fp {
	uint8_t md5[16];
	uint8_t xxh128[16]; /* canonical (big-endian) form */
	uint64_t size;
};

struct fp_ctx {
	void *md5;  /* EVP_MD_CTX */
	void *xxh;  /* XXH3_state_t */
	uint64_t size;
};

/* Start a fingerprint. -ENOMEM on allocation failure. */
int fp_init(struct fp_ctx *c);
void fp_update(struct fp_ctx *c, const void *buf, size_t len);
/* Finish into out; the context may be finished again only after fp_reset. */
int fp_final(struct fp_ctx *c, struct fp *out);
int fp_reset(struct fp_ctx *c);
void fp_free(struct fp_ctx *c);

/* Fingerprint the whole content of an open file from offset 0 (pread, so the
 * file offset is left alone). */
int fp_of_fd(int fd, struct fp *out);
/* Fingerprint a buffer. */
int fp_of_buf(const void *buf, size_t len, struct fp *out);

/* 32 lowercase hex digits and a NUL. */
void fp_hex(const uint8_t md5[16], char out[33]);
/* Parse 32 hex digits; -EINVAL if malformed. */
int fp_unhex(const char *hex, uint8_t md5[16]);

#endif
