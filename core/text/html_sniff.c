/* html_sniff.c - what a page's bytes are before extraction: binary or
 * text, the charset it declares, HTML or plain text (see html.c for the
 * design). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* memmem */
#endif
#include "html_int.h"

#include <string.h>

#include "charset.h"

/* ---- binary and UTF-16 sniffing ---- */

bool html_has_binary_signature(const uint8_t *s, size_t n)
{
	static const struct {
		uint8_t off, len;
		const char *sig;
	} sigs[] = {
		{0, 8, "\x89PNG\r\n\x1a\n"}, {0, 6, "GIF87a"}, {0, 6, "GIF89a"},
		{0, 3, "\xff\xd8\xff"}, {0, 5, "%PDF-"}, {0, 4, "PK\x03\x04"},
		{0, 4, "PK\x05\x06"}, {0, 4, "PK\x07\x08"}, {0, 2, "\x1f\x8b"},
		{0, 6, "\xfd" "7zXZ\x00"}, {0, 4, "\x28\xb5\x2f\xfd"},
		{0, 6, "7z\xbc\xaf\x27\x1c"}, {0, 4, "\x7f" "ELF"}, {0, 4, "wOFF"},
		{0, 4, "wOF2"}, {0, 4, "\x00" "asm"}, {0, 4, "OggS"}, {4, 4, "ftyp"},
		{0, 4, "\x00\x00\x01\x00"}, {0, 16, "SQLite format 3\x00"},
		{0, 8, "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"}, {0, 4, "\xca\xfe\xba\xbe"},
		{0, 4, "\x00\x01\x00\x00"}, {0, 4, "OTTO"},
	};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		if (n >= (size_t)sigs[i].off + sigs[i].len &&
		    !memcmp(s + sigs[i].off, sigs[i].sig, sigs[i].len))
			return true;
	/* bzip2 ("BZh" and a block size digit), RIFF containers */
	if (n >= 4 && !memcmp(s, "BZh", 3) && s[3] >= '1' && s[3] <= '9')
		return true;
	if (n >= 12 && !memcmp(s, "RIFF", 4) &&
	    (!memcmp(s + 8, "WEBP", 4) || !memcmp(s + 8, "WAVE", 4) || !memcmp(s + 8, "AVI ", 4)))
		return true;
	return false;
}

/* Bytes that are C0 controls and no text has: all but tab, LF, VT, FF, CR,
 * ESC (ISO-2022 escapes) and SUB (the DOS end-of-file mark). */
static bool is_bad_ctrl(uint8_t c)
{
	return (c < 0x20 && c != '\t' && c != '\n' && c != 0x0B && c != '\f' && c != '\r' &&
		c != 0x1B && c != 0x1A) || c == 0x7F;
}

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* Bytes of w below 0x80 that are >= c (c <= 0x80), each flagged by its
 * high bit: a byte's low seven bits plus 0x80 - c carry into its own high
 * bit only, and exactly when they are >= c. */
static inline uint64_t bytes_ge(uint64_t w7, unsigned c)
{
	return (w7 + (0x80 - c) * ONES) & HIGHS;
}

/* Might a word of 8 bytes hold something html_count_controls counts: a
 * NUL, a control is_bad_ctrl refuses, 0x7F, or 0xC2 (a C1 control's lead
 * byte in UTF-8)? Exact for the controls (tab, LF, CR and the others text
 * has pass), so that the indentation and line ends of HTML keep the
 * count on eight bytes at a time; those the byte loop counts are then the
 * ones it would count anyway. */
static inline bool word_may_count(uint64_t w)
{
	uint64_t w7 = w & (0x7F * ONES), ascii = ~w & HIGHS;
	/* 0x00-0x08, 0x0E-0x19, 0x1C-0x1F: the C0 controls is_bad_ctrl refuses */
	uint64_t ctrl = ascii & (~bytes_ge(w7, 0x09) | (bytes_ge(w7, 0x0E) & ~bytes_ge(w7, 0x1A)) |
				 (bytes_ge(w7, 0x1C) & ~bytes_ge(w7, 0x20)));
	uint64_t d = w ^ (0x7F * ONES), e = w ^ (0xC2 * ONES);
	return (ctrl | ((((d - ONES) & ~d) | ((e - ONES) & ~e)) & HIGHS)) != 0;
}

void html_count_controls(const uint8_t *s, size_t n, size_t limit, bool c1, size_t *nul,
			 size_t *ctrl)
{
	size_t m = n < limit ? n : limit, z = 0, k = 0, i = 0;
	for (;;) {
		size_t end = m;
		if (i + 8 <= m) {
			uint64_t w;
			memcpy(&w, s + i, 8);
			if (!word_may_count(w)) {
				i += 8;
				continue;
			}
			end = i + 8;
		}
		for (; i < end; i++) {
			z += !s[i];
			k += is_bad_ctrl(s[i]) || (c1 && s[i] == 0xC2 && i + 1 < n && s[i + 1] >= 0x80 &&
						   s[i + 1] < 0xA0);
		}
		if (i >= m)
			break;
	}
	*nul = z;
	*ctrl = k;
}

/* ---- charset prescan ---- */

static const uint8_t *find_ci(const uint8_t *p, size_t n, const char *needle)
{
	size_t k = strlen(needle);
	for (size_t i = 0; i + k <= n; i++)
		if (html_ascii_caseeq(p + i, needle, k))
			return p + i;
	return NULL;
}

/* The label after "charset=" in a content attribute. */
static const char *charset_of_content(struct span c)
{
	const uint8_t *p = find_ci(c.p, c.n, "charset");
	if (!p)
		return NULL;
	const uint8_t *e = c.p + c.n;
	p += 7;
	while (p < e && is_space(*p))
		p++;
	if (p >= e || *p != '=')
		return NULL;
	p++;
	while (p < e && (is_space(*p) || *p == '"' || *p == '\''))
		p++;
	const uint8_t *v = p;
	while (p < e && !is_space(*p) && *p != ';' && *p != '"' && *p != '\'')
		p++;
	return charset_of_label(v, (size_t)(p - v));
}

const char *html_prescan_charset(const uint8_t *s, size_t n)
{
	if (n > HTML_PRESCAN)
		n = HTML_PRESCAN;
	if (n > 5 && !memcmp(s, "<?xml", 5)) {
		const uint8_t *end = memchr(s, '>', n);
		size_t m = end ? (size_t)(end - s) : n;
		const uint8_t *p = find_ci(s, m, "encoding");
		if (p) {
			p += 8;
			while (p < s + m && (is_space(*p) || *p == '=' || *p == '"' || *p == '\''))
				p++;
			const uint8_t *v = p;
			while (p < s + m && (is_alnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == ':'))
				p++;
			const char *cs = charset_of_label(v, (size_t)(p - v));
			if (cs)
				return cs;
		}
	}
	size_t i = 0;
	while (i < n) {
		const uint8_t *p = memchr(s + i, '<', n - i);
		if (!p)
			break;
		i = (size_t)(p - s) + 1;
		if (n - i >= 3 && !memcmp(s + i, "!--", 3)) {
			const uint8_t *q = memmem(s + i + 3, n - i - 3, "-->", 3);
			if (!q)
				break;
			i = (size_t)(q - s) + 3;
			continue;
		}
		if (n - i < 5 || !html_ascii_caseeq(s + i, "meta", 4) ||
		    !(is_space(s[i + 4]) || s[i + 4] == '/'))
			continue;
		struct attrs a;
		i = html_scan_attrs(s, n, i + 4, &a);
		const char *cs = NULL;
		if (a.charset.p)
			cs = charset_of_label(a.charset.p, a.charset.n);
		else if (a.content.p)
			cs = charset_of_content(a.content);
		if (cs)
			return cs;
	}
	return NULL;
}

/* ---- HTML or plain text ---- */

bool html_looks_like_html(const uint8_t *s, size_t n)
{
	static const char *const marks[] = {
		"<html", "<!doctype", "<head", "<body", "<meta", "<title", "<div", "<p>", "<br",
	};
	size_t i = 0;
	while (i < n && (is_space(s[i])))
		i++;
	if (i < n && s[i] == '<')
		return true;
	size_t m = n < HTML_SNIFF ? n : HTML_SNIFF;
	for (; i < m; i++) {
		const uint8_t *p = memchr(s + i, '<', m - i);
		if (!p)
			return false;
		i = (size_t)(p - s);
		for (size_t k = 0; k < sizeof marks / sizeof marks[0]; k++) {
			size_t len = strlen(marks[k]);
			if (n - i >= len && html_ascii_caseeq(s + i, marks[k], len))
				return true;
		}
	}
	return false;
}
