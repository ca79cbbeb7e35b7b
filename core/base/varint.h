/* varint.h - unsigned LEB128 integers (7 bits a byte, low group first, the
 * top bit set on every byte but the last), for on-disk rows whose fields
 * are usually small. A u64 takes 1 to 10 bytes. Signed values go through
 * zigzag (0, -1, 1, -2 ... -> 0, 1, 2, 3 ...) so that small magnitudes of
 * either sign stay short.
 *
 * varint_get refuses what varint_put never writes: a value past 64 bits, a
 * group of zeros after the last significant one (an overlong encoding), a
 * buffer that ends inside a number. A row read with it therefore has one
 * encoding per value, which is what lets a checker compare bytes. */
#ifndef PD_VARINT_H
#define PD_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define VARINT_MAX_BYTES 10

static inline size_t varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Reads one number at p[0..len); returns the bytes it took, 0 when
 * malformed (see above). */
static inline size_t varint_get(const uint8_t *p, size_t len, uint64_t *v)
{
	uint64_t r = 0;
	for (size_t n = 0; n < len && n < VARINT_MAX_BYTES; n++) {
		uint64_t g = p[n] & 0x7f;
		if (n == VARINT_MAX_BYTES - 1 && g > 1)
			return 0; /* past 64 bits */
		r |= g << (7 * n);
		if (!(p[n] & 0x80)) {
			if (n > 0 && g == 0)
				return 0; /* overlong */
			*v = r;
			return n + 1;
		}
	}
	return 0;
}

static inline uint64_t zigzag_encode(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t zigzag_decode(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

#endif
