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
 * surrogates, at most U+10FFFF). Inline: the extractor and the simhash
 * lexer call it for every non-ASCII character. */
static inline size_t charset_utf8_seq(const uint8_t *s, size_t avail, uint32_t *cp)
{
	uint8_t c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c < 0xC2)
		return 0;
	if (c < 0xE0) {
		if (avail < 2 || (s[1] & 0xC0) != 0x80)
			return 0;
		*cp = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
		return 2;
	}
	if (c < 0xF0) {
		if (avail < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
			return 0;
		if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F))
			return 0;
		*cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
		return 3;
	}
	if (c < 0xF5) {
		if (avail < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 ||
		    (s[3] & 0xC0) != 0x80)
			return 0;
		if ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] > 0x8F))
			return 0;
		*cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
		      ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
		return 4;
	}
	return 0;
}

/* Write code point cp (at most U+10FFFF) as UTF-8 at o (room for 4 bytes);
 * returns the bytes written. Inline, as above. */
static inline size_t charset_utf8_put(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

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
