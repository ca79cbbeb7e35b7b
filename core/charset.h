/* charset.h - a page's bytes as UTF-8, for the text extractor (html.h
 * gives the rules: BOM, UTF-16 without a BOM, UTF-8 beyond doubt, the
 * declared charset, UTF-8, a guess). Pure functions, no global state.
 */
#ifndef PD_CHARSET_H
#define PD_CHARSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s[0..avail) and its code point in
 * *cp; 0 if the bytes are invalid or truncated (RFC 3629: no overlongs, no
 * surrogates, at most U+10FFFF). */
size_t charset_utf8_seq(const uint8_t *s, size_t avail, uint32_t *cp);

/* Write code point cp (at most U+10FFFF) as UTF-8 at o (room for 4 bytes);
 * returns the bytes written. */
size_t charset_utf8_put(char *o, uint32_t cp);

/* windows-1252's character for v in 0x80..0x9F (the five undefined bytes
 * stay C1 controls, as in WHATWG's decoder); any other v as it is. Numeric
 * character references in that range mean these too. */
uint32_t charset_cp1252_c1(uint32_t v);

/* The iconv name of the decoder for a charset label (a WHATWG name such as
 * "gb2312", "Shift_JIS", "ISO-8859-1", compared on its letters and digits
 * and up to a ':'), or NULL for a label we do not know. UTF-16 labels give
 * "UTF-8": a label that could be read as ASCII is not in UTF-16. */
const char *charset_of_label(const uint8_t *s, size_t n);

/* "UTF-16LE" or "UTF-16BE" when s looks like UTF-16 text without a BOM
 * (NUL at nearly every other offset of its first 4 KiB), else NULL. */
const char *charset_sniff_utf16(const uint8_t *s, size_t n);

/* A page decoded: p[0..n) is UTF-8, either the input itself (buf NULL) or
 * buf, which the caller frees; charset the decoder used; invalid the input
 * bytes skipped as invalid in it. */
struct charset_decoded {
	const uint8_t *p;
	size_t n;
	uint8_t *buf;
	const char *charset;
	size_t invalid;
};

/* Decode s[0..n). fixed: cs came from a BOM and is used whatever the bytes
 * are. Otherwise cs (the declared charset, or NULL) is used when it fits
 * the bytes, after UTF-8 beyond doubt; see html.h for the order. Never
 * fails on the bytes; -ENOMEM only. */
int charset_decode_page(const uint8_t *s, size_t n, const char *cs, bool fixed,
			struct charset_decoded *d);

#endif
