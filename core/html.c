/* html.c - the text of a web page as UTF-8: charset detection and
 * conversion, HTML to text, boilerplate dropping. The rules are in html.h.
 *
 * Pipeline, each step one linear pass at most:
 *   1. sniff: binary signatures, BOM, UTF-16 without BOM, NUL and control
 *      byte density of the first 64 KiB;
 *   2. charset: the BOM; else UTF-8 if the bytes are valid UTF-8; else a
 *      <meta> / <?xml?> declaration in the first HTML_PRESCAN bytes, else
 *      UTF-8; a candidate that does not fit the bytes (over a quarter of
 *      the non-ASCII bytes invalid in it) is replaced by UTF-8, then by a
 *      guess (GB18030 or windows-1252);
 *   3. decode: UTF-8 is read in place (invalid bytes are skipped while
 *      copying text); windows-1252 by a table; anything else with iconv
 *      into a UTF-8 copy, skipping invalid bytes one at a time; then the
 *      control characters of the decoded page are counted (binary?);
 *   4. extract: one forward scan. Text runs are copied with white space
 *      collapsed; '&' starts an entity; '<' starts markup, which is skipped
 *      to its end without backtracking: comments to "-->", raw-text
 *      elements (script, style, ...) to their end tag, tags to '>' with
 *      quoted attribute values honoured. Nothing is ever scanned twice, so a
 *      flood of '<', '<!--' or unclosed quotes costs one pass; no element
 *      stack is kept (nesting depth costs nothing), only a counter for the
 *      one boilerplate element being dropped;
 *   5. link-heavy lines, and the lead and tail of the page (before its
 *      first <h1>, after the element that holds it) when short, are
 *      dropped, in one more pass over the text. For the edges the scan
 *      keeps line numbers and a count of open containers (div, section,
 *      table, center, main, article), not a stack.
 * An extraction whose dropped element never closed is run once more
 * without element dropping, so the worst case is two passes of step 4.
 * Steps 2 and 3 (labels, UTF-16 sniffing, the decoder that fits, the
 * conversion) are charset.c's; this file finds the declared label.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* memmem */
#endif
#include "html.h"

#include "charset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SNIFF_BYTES 65536  /* binary / UTF-16 / guess statistics */
#define HTML_SNIFF 1024    /* where HTML markers are looked for */
#define NAME_MAX_LEN 31    /* tag and attribute names kept for matching */

/* ASCII classes: 1 HTML white space, 2 letter, 4 digit, 8 text (printable,
 * not '<' or '&'). */
static const uint8_t ctab[256] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	1, 8, 8, 8, 8, 8, 0, 8, 8, 8, 8, 8, 8, 8, 8, 8,
	12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 8, 0, 8, 8, 8,
	8, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
	10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 8, 8, 8, 8, 8,
	8, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
	10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 8, 8, 8, 8, 0,
};

static bool is_space(uint8_t c)
{
	return ctab[c] & 1;
}

static bool is_alpha(uint8_t c)
{
	return ctab[c] & 2;
}

static bool is_alnum(uint8_t c)
{
	return ctab[c] & 6;
}

static bool is_text(uint8_t c)
{
	return ctab[c] & 8;
}

static uint8_t lower(uint8_t c)
{
	return (uint8_t)(c - 'A') < 26 ? (uint8_t)(c | 0x20) : c;
}

/* ---- binary and UTF-16 sniffing ---- */

static bool has_binary_signature(const uint8_t *s, size_t n)
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

/* NUL and other control characters in the first `limit` bytes of s: C0
 * controls as in is_bad_ctrl, and, when s is UTF-8 (c1), the C1 controls
 * U+0080..U+009F. Eight bytes at a time while there is none. */
static void count_controls(const uint8_t *s, size_t n, size_t limit, bool c1, size_t *nul,
			   size_t *ctrl)
{
	const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
	size_t m = n < limit ? n : limit, z = 0, k = 0, i = 0;
	for (;;) {
		size_t end = m;
		if (i + 8 <= m) {
			/* a word with no byte below 0x20 and none equal to 0x7F or
			 * 0xC2 has nothing to count */
			uint64_t w, d, e;
			memcpy(&w, s + i, 8);
			d = w ^ (0x7F * ones);
			e = w ^ (0xC2 * ones);
			if (!((((w - 0x20 * ones) & ~w) | ((d - ones) & ~d) | ((e - ones) & ~e)) & highs)) {
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

/* ---- attributes ---- */

struct span {
	const uint8_t *p;
	size_t n;
};

/* The attributes the extractor and the charset prescan look at. */
struct attrs {
	struct span cls, id, role, charset, content;
	bool hidden, self_closing;
};

/* p[0..k) equals the lowercase lit[0..k), ignoring ASCII case (whatever
 * the locale: strncasecmp follows it). */
static bool ascii_caseeq(const uint8_t *p, const char *lit, size_t k)
{
	for (size_t i = 0; i < k; i++)
		if (lower(p[i]) != (uint8_t)lit[i])
			return false;
	return true;
}

/* p[0..n) equals the lowercase name, ignoring ASCII case. */
static bool name_is(const uint8_t *p, size_t n, const char *name)
{
	size_t i = 0;
	for (; name[i]; i++)
		if (i >= n || lower(p[i]) != (uint8_t)name[i])
			return false;
	return i == n;
}

static void attr_note(struct attrs *a, const uint8_t *name, size_t nn, const uint8_t *v, size_t vn)
{
	struct span *dst = NULL;
	switch (nn) {
	case 2:
		if (name_is(name, nn, "id"))
			dst = &a->id;
		break;
	case 4:
		if (name_is(name, nn, "role"))
			dst = &a->role;
		break;
	case 5:
		if (name_is(name, nn, "class"))
			dst = &a->cls;
		break;
	case 6:
		if (name_is(name, nn, "hidden"))
			a->hidden = true;
		break;
	case 7:
		if (name_is(name, nn, "charset"))
			dst = &a->charset;
		else if (name_is(name, nn, "content"))
			dst = &a->content;
		break;
	}
	if (dst && !dst->p) { /* the first of duplicates wins, as in HTML5 */
		dst->p = v;
		dst->n = vn;
	}
}

/* Scan the attributes of a tag from s[i] (just after its name) to its '>'.
 * Returns the index after the '>', or n if the tag runs to the end (the
 * HTML5 tokenizer then drops it). A quoted value may hold '>'. a may be
 * NULL when nothing is wanted. */
static size_t scan_attrs(const uint8_t *s, size_t n, size_t i, struct attrs *a)
{
	if (a)
		memset(a, 0, sizeof *a);
	for (;;) {
		bool slash = false;
		while (i < n && (is_space(s[i]) || s[i] == '/')) {
			slash = s[i] == '/';
			i++;
		}
		if (i >= n)
			return n;
		if (s[i] == '>') {
			if (a)
				a->self_closing = slash;
			return i + 1;
		}
		size_t n0 = i++;
		while (i < n && !is_space(s[i]) && s[i] != '/' && s[i] != '>' && s[i] != '=')
			i++;
		size_t nn = i - n0;
		while (i < n && is_space(s[i]))
			i++;
		const uint8_t *v = NULL;
		size_t vn = 0;
		if (i < n && s[i] == '=') {
			i++;
			while (i < n && is_space(s[i]))
				i++;
			if (i >= n)
				return n;
			if (s[i] == '"' || s[i] == '\'') {
				const uint8_t *q = memchr(s + i + 1, s[i], n - i - 1);
				if (!q)
					return n;
				v = s + i + 1;
				vn = (size_t)(q - v);
				i = (size_t)(q - s) + 1;
			} else {
				v = s + i;
				while (i < n && !is_space(s[i]) && s[i] != '>')
					i++;
				vn = (size_t)(s + i - v);
			}
		}
		if (a)
			attr_note(a, s + n0, nn, v ? v : s + i, vn);
	}
}

/* ---- charset prescan ---- */

static const uint8_t *find_ci(const uint8_t *p, size_t n, const char *needle)
{
	size_t k = strlen(needle);
	for (size_t i = 0; i + k <= n; i++)
		if (ascii_caseeq(p + i, needle, k))
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

/* A charset declared in the first HTML_PRESCAN bytes, NULL if none (or if
 * the label is unknown). */
static const char *prescan_charset(const uint8_t *s, size_t n)
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
		if (n - i < 5 || !ascii_caseeq(s + i, "meta", 4) ||
		    !(is_space(s[i + 4]) || s[i + 4] == '/'))
			continue;
		struct attrs a;
		i = scan_attrs(s, n, i + 4, &a);
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

static bool looks_like_html(const uint8_t *s, size_t n)
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
			if (n - i >= len && ascii_caseeq(s + i, marks[k], len))
				return true;
		}
	}
	return false;
}

/* ---- entities ---- */

static const struct entity {
	const char *name;
	uint32_t cp;
} entities[] = { /* sorted by name (strcmp order) for bsearch */
	{"AElig", 0xC6}, {"Aacute", 0xC1}, {"Acirc", 0xC2}, {"Agrave", 0xC0},
	{"Alpha", 0x391}, {"Aring", 0xC5}, {"Atilde", 0xC3}, {"Auml", 0xC4},
	{"Beta", 0x392}, {"Ccedil", 0xC7}, {"Dagger", 0x2021}, {"Delta", 0x394},
	{"ETH", 0xD0}, {"Eacute", 0xC9}, {"Ecirc", 0xCA}, {"Egrave", 0xC8},
	{"Euml", 0xCB}, {"Gamma", 0x393}, {"Iacute", 0xCD}, {"Icirc", 0xCE},
	{"Igrave", 0xCC}, {"Iuml", 0xCF}, {"Lambda", 0x39B}, {"NewLine", 0xA},
	{"Ntilde", 0xD1}, {"OElig", 0x152}, {"Oacute", 0xD3}, {"Ocirc", 0xD4},
	{"Ograve", 0xD2}, {"Omega", 0x3A9}, {"Oslash", 0xD8}, {"Otilde", 0xD5},
	{"Ouml", 0xD6}, {"Pi", 0x3A0}, {"Prime", 0x2033}, {"Scaron", 0x160},
	{"Sigma", 0x3A3}, {"THORN", 0xDE}, {"Tab", 0x9}, {"Theta", 0x398},
	{"Uacute", 0xDA}, {"Ucirc", 0xDB}, {"Ugrave", 0xD9}, {"Uuml", 0xDC},
	{"Yacute", 0xDD}, {"Yuml", 0x178}, {"aacute", 0xE1}, {"acirc", 0xE2},
	{"acute", 0xB4}, {"aelig", 0xE6}, {"agrave", 0xE0}, {"alpha", 0x3B1},
	{"amp", 0x26}, {"apos", 0x27}, {"aring", 0xE5}, {"asymp", 0x2248},
	{"atilde", 0xE3}, {"auml", 0xE4}, {"bdquo", 0x201E}, {"beta", 0x3B2},
	{"brvbar", 0xA6}, {"bull", 0x2022}, {"ccedil", 0xE7}, {"cedil", 0xB8},
	{"cent", 0xA2}, {"check", 0x2713}, {"circ", 0x2C6}, {"clubs", 0x2663},
	{"copy", 0xA9}, {"curren", 0xA4}, {"dArr", 0x21D3}, {"dagger", 0x2020},
	{"darr", 0x2193}, {"deg", 0xB0}, {"delta", 0x3B4}, {"diams", 0x2666},
	{"divide", 0xF7}, {"eacute", 0xE9}, {"ecirc", 0xEA}, {"egrave", 0xE8},
	{"emsp", 0x2003}, {"ensp", 0x2002}, {"epsilon", 0x3B5}, {"equiv", 0x2261},
	{"eth", 0xF0}, {"euml", 0xEB}, {"euro", 0x20AC}, {"exist", 0x2203},
	{"fnof", 0x192}, {"forall", 0x2200}, {"frac12", 0xBD}, {"frac14", 0xBC},
	{"frac34", 0xBE}, {"frasl", 0x2044}, {"gamma", 0x3B3}, {"ge", 0x2265},
	{"gt", 0x3E}, {"hArr", 0x21D4}, {"harr", 0x2194}, {"hearts", 0x2665},
	{"hellip", 0x2026}, {"iacute", 0xED}, {"icirc", 0xEE}, {"iexcl", 0xA1},
	{"igrave", 0xEC}, {"infin", 0x221E}, {"iquest", 0xBF}, {"isin", 0x2208},
	{"iuml", 0xEF}, {"lArr", 0x21D0}, {"lambda", 0x3BB}, {"laquo", 0xAB},
	{"larr", 0x2190}, {"ldquo", 0x201C}, {"le", 0x2264}, {"loz", 0x25CA},
	{"lowast", 0x2217}, {"lrm", 0x200E}, {"lsaquo", 0x2039}, {"lsquo", 0x2018},
	{"lt", 0x3C}, {"macr", 0xAF}, {"mdash", 0x2014}, {"micro", 0xB5},
	{"middot", 0xB7}, {"minus", 0x2212}, {"mu", 0x3BC}, {"nbsp", 0xA0},
	{"ndash", 0x2013}, {"ne", 0x2260}, {"not", 0xAC}, {"ntilde", 0xF1},
	{"oacute", 0xF3}, {"ocirc", 0xF4}, {"oelig", 0x153}, {"ograve", 0xF2},
	{"oline", 0x203E}, {"omega", 0x3C9}, {"ordf", 0xAA}, {"ordm", 0xBA},
	{"oslash", 0xF8}, {"otilde", 0xF5}, {"ouml", 0xF6}, {"para", 0xB6},
	{"part", 0x2202}, {"permil", 0x2030}, {"phi", 0x3C6}, {"pi", 0x3C0},
	{"plusmn", 0xB1}, {"pound", 0xA3}, {"prime", 0x2032}, {"prod", 0x220F},
	{"quot", 0x22}, {"rArr", 0x21D2}, {"radic", 0x221A}, {"raquo", 0xBB},
	{"rarr", 0x2192}, {"rdquo", 0x201D}, {"reg", 0xAE}, {"rlm", 0x200F},
	{"rsaquo", 0x203A}, {"rsquo", 0x2019}, {"sbquo", 0x201A}, {"scaron", 0x161},
	{"sdot", 0x22C5}, {"sect", 0xA7}, {"shy", 0xAD}, {"sigma", 0x3C3},
	{"spades", 0x2660}, {"star", 0x2606}, {"sum", 0x2211}, {"sup1", 0xB9},
	{"sup2", 0xB2}, {"sup3", 0xB3}, {"szlig", 0xDF}, {"tau", 0x3C4},
	{"theta", 0x3B8}, {"thinsp", 0x2009}, {"thorn", 0xFE}, {"tilde", 0x2DC},
	{"times", 0xD7}, {"trade", 0x2122}, {"uArr", 0x21D1}, {"uacute", 0xFA},
	{"uarr", 0x2191}, {"ucirc", 0xFB}, {"ugrave", 0xF9}, {"uml", 0xA8},
	{"uuml", 0xFC}, {"yacute", 0xFD}, {"yen", 0xA5}, {"yuml", 0xFF},
	{"zwj", 0x200D}, {"zwnj", 0x200C},
};

struct ent_key {
	const uint8_t *p;
	size_t n;
};

static int ent_cmp(const void *k, const void *e)
{
	const struct ent_key *key = k;
	const char *name = ((const struct entity *)e)->name;
	size_t m = strlen(name);
	int c = memcmp(key->p, name, key->n < m ? key->n : m);
	if (c)
		return c;
	return key->n < m ? -1 : key->n > m;
}

/* Entities HTML5 also reads without ';' (the common ones of its legacy list). */
static bool legacy_entity(const uint8_t *p, size_t n)
{
	return name_is(p, n, "amp") || name_is(p, n, "lt") || name_is(p, n, "gt") ||
	       name_is(p, n, "quot") || name_is(p, n, "nbsp") || name_is(p, n, "copy") ||
	       name_is(p, n, "reg");
}

/* ---- tags ---- */

#define T_BLOCK 0x001   /* ends a line before and after */
#define T_VOID 0x002    /* never has content */
#define T_RAW 0x004     /* content is raw text, dropped (script, style, ...) */
#define T_TITLE 0x008   /* raw text with entities, kept (title) */
#define T_HIDE 0x010    /* content is never text a reader sees (svg, select) */
#define T_BOILER 0x020  /* boilerplate container (nav, footer, aside) */
#define T_HEADER 0x040  /* boilerplate outside article/main */
#define T_CONTENT 0x080 /* article, main */
#define T_LINK 0x100    /* a */
#define T_ROOT 0x200    /* html, body: a drop still open at their end failed */
#define T_KEEP 0x400    /* never dropped for its class, id or role */
#define T_H1 0x800      /* h1: where the page's own text starts */
#define T_BOX 0x1000    /* a container whose end can end the main text */

static const struct tag {
	const char *name;
	unsigned flags;
} tags[] = { /* sorted by name for bsearch */
	{"a", T_LINK},
	{"address", T_BLOCK},
	{"area", T_VOID},
	{"article", T_BLOCK | T_CONTENT | T_KEEP | T_BOX},
	{"aside", T_BLOCK | T_BOILER},
	{"base", T_VOID},
	{"blockquote", T_BLOCK},
	{"body", T_BLOCK | T_ROOT | T_KEEP},
	{"br", T_BLOCK | T_VOID},
	{"button", T_HIDE},
	{"caption", T_BLOCK},
	{"center", T_BLOCK | T_BOX},
	{"col", T_VOID},
	{"dd", T_BLOCK},
	{"details", T_BLOCK},
	{"dialog", T_BLOCK | T_HIDE},
	{"dir", T_BLOCK},
	{"div", T_BLOCK | T_BOX},
	{"dl", T_BLOCK},
	{"dt", T_BLOCK},
	{"embed", T_VOID},
	{"fieldset", T_BLOCK},
	{"figcaption", T_BLOCK},
	{"figure", T_BLOCK},
	{"footer", T_BLOCK | T_BOILER},
	{"form", T_BLOCK},
	{"frameset", T_BLOCK},
	{"h1", T_BLOCK | T_H1},
	{"h2", T_BLOCK},
	{"h3", T_BLOCK},
	{"h4", T_BLOCK},
	{"h5", T_BLOCK},
	{"h6", T_BLOCK},
	{"head", T_BLOCK | T_KEEP},
	{"header", T_BLOCK | T_HEADER},
	{"hgroup", T_BLOCK},
	{"hr", T_BLOCK | T_VOID},
	{"html", T_BLOCK | T_ROOT | T_KEEP},
	{"iframe", T_RAW},
	{"img", T_VOID},
	{"input", T_VOID},
	{"keygen", T_VOID},
	{"legend", T_BLOCK},
	{"li", T_BLOCK},
	{"link", T_VOID},
	{"main", T_BLOCK | T_CONTENT | T_KEEP | T_BOX},
	{"menu", T_BLOCK},
	{"meta", T_VOID},
	{"nav", T_BLOCK | T_BOILER},
	{"noembed", T_RAW},
	{"noframes", T_RAW},
	{"noscript", T_RAW},
	{"object", T_HIDE},
	{"ol", T_BLOCK},
	{"optgroup", T_BLOCK},
	{"option", T_BLOCK},
	{"p", T_BLOCK},
	{"param", T_VOID},
	{"pre", T_BLOCK},
	{"script", T_RAW},
	{"section", T_BLOCK | T_BOX},
	{"select", T_BLOCK | T_HIDE},
	{"source", T_VOID},
	{"style", T_RAW},
	{"summary", T_BLOCK},
	{"svg", T_HIDE},
	{"table", T_BLOCK | T_BOX},
	{"tbody", T_BLOCK},
	{"td", T_BLOCK},
	{"template", T_HIDE},
	{"textarea", T_RAW},
	{"tfoot", T_BLOCK},
	{"th", T_BLOCK},
	{"thead", T_BLOCK},
	{"title", T_BLOCK | T_TITLE},
	{"tr", T_BLOCK},
	{"track", T_VOID},
	{"ul", T_BLOCK},
	{"wbr", T_VOID},
	{"xmp", T_RAW},
};

/* Where the tags of each first letter start in tags[] ('{' ends 'z'). */
static const uint8_t tag_first[27] = {
	0, 5, 10, 13, 20, 21, 27, 27, 38, 41, 41, 42, 45, 48, 52, 56, 59, 59, 59, 66, 77, 78, 78,
	79, 80, 80, 80,
};

static bool str_eq(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}

/* Flags of a lowercase tag name, 0 for tags we do not know. */
static unsigned tag_flags(const char *name)
{
	unsigned c = (uint8_t)name[0] - 'a';
	if (c >= 26)
		return 0;
	for (unsigned i = tag_first[c]; i < tag_first[c + 1]; i++)
		if (str_eq(name, tags[i].name))
			return tags[i].flags;
	return 0;
}

/* Layout words in class names (any word) and ids (the whole id) that mark
 * boilerplate. Content-derived ids ("module-http.cookies") are why ids
 * must match whole. */
struct word {
	const char *w;
	size_t len;
};
#define W(s) {s, sizeof s - 1}

static const struct word boiler_words[] = {
	W("ad"), W("ads"), W("adsbygoogle"), W("advert"), W("advertisement"),
	W("advertising"), W("banner"), W("breadcrumb"), W("breadcrumbs"),
	W("cookie"), W("cookies"), W("copyright"), W("footer"), W("menu"), W("nav"),
	W("navbar"), W("navigation"), W("related"), W("share"), W("sharing"),
	W("sidebar"), W("social"), W("sponsor"), W("sponsored"),
};

static const struct word boiler_roles[] = {
	W("navigation"), W("banner"), W("contentinfo"), W("complementary"),
	W("search"), W("menu"), W("menubar"), W("toolbar"),
};

static bool word_in(const uint8_t *p, size_t n, const struct word *list, size_t count)
{
	if (!n)
		return false;
	uint8_t c0 = lower(p[0]);
	for (size_t i = 0; i < count; i++)
		if (list[i].len == n && (uint8_t)list[i].w[0] == c0 && name_is(p, n, list[i].w))
			return true;
	return false;
}

static bool class_is_boiler(struct span c)
{
	size_t i = 0;
	while (i < c.n) {
		while (i < c.n && !is_alnum(c.p[i]))
			i++;
		size_t w = i;
		while (i < c.n && is_alnum(c.p[i]))
			i++;
		if (i > w && word_in(c.p + w, i - w, boiler_words, sizeof boiler_words / sizeof boiler_words[0]))
			return true;
	}
	return false;
}

static bool attrs_are_boiler(const struct attrs *a)
{
	if (a->cls.p && class_is_boiler(a->cls))
		return true;
	if (a->id.p && word_in(a->id.p, a->id.n, boiler_words, sizeof boiler_words / sizeof boiler_words[0]))
		return true;
	if (a->role.p && word_in(a->role.p, a->role.n, boiler_roles, sizeof boiler_roles / sizeof boiler_roles[0]))
		return true;
	return false;
}

/* ---- the extractor ---- */

struct ex {
	const uint8_t *s;
	size_t n;
	bool drop_elems;   /* drop boilerplate elements */
	bool boiler;       /* ... including the layout ones (not HTML_ALL_TEXT) */
	char *o;
	size_t olen;
	bool sp, br;       /* a space / a line break is pending */
	/* the element being dropped, if skip_depth > 0 */
	char skip_name[NAME_MAX_LEN + 1];
	unsigned skip_depth;
	bool skip_failed;
	unsigned content_depth;
	bool in_link;
	/* lines, for the link-density filter: one bit per line, set when
	 * more than half of it is link text (a line has 2 bytes at least, so
	 * the bitmap is at most 1/16 of the text) */
	size_t line_start, line_link;
	uint8_t *heavy;
	size_t nlines, cap_bytes;
	size_t text_bytes, kept_bytes; /* of all lines / of the light ones */
	size_t skipped; /* bytes of text inside dropped elements */
	/* the edges of the page's own text, as line numbers: its lead runs
	 * from lead_from (the first line after <body> and the title) to h1_line
	 * (the first <h1>); its tail from tail_line (the first line after the
	 * container that holds that <h1> closes) to the end */
	size_t lead_from, h1_line, tail_line;
	bool seen_h1, seen_tail;
	unsigned box_depth, h1_box; /* open containers; those open at the <h1> */
	unsigned main_box;          /* box_depth of the open main element, or 0 */
	bool oom;
};

/* The number of the line the next visible character goes to, once a
 * pending break is written. */
static size_t next_line(const struct ex *x)
{
	return x->olen > x->line_start ? x->nlines + 1 : x->nlines;
}

static void end_line(struct ex *x)
{
	if (!x->boiler)
		return;
	if (x->nlines / 8 >= x->cap_bytes) {
		size_t c = x->cap_bytes ? 2 * x->cap_bytes : 64;
		uint8_t *h = realloc(x->heavy, c);
		if (!h) {
			x->oom = true;
			return;
		}
		memset(h + x->cap_bytes, 0, c - x->cap_bytes);
		x->heavy = h;
		x->cap_bytes = c;
	}
	size_t len = x->olen - x->line_start;
	x->text_bytes += len;
	if (x->line_link * 2 > len)
		x->heavy[x->nlines / 8] |= (uint8_t)(1u << (x->nlines % 8));
	else
		x->kept_bytes += len;
	x->nlines++;
}

/* Write the pending separator before a visible character. */
static void sep(struct ex *x)
{
	if (x->br) {
		if (x->olen) {
			end_line(x);
			x->o[x->olen++] = '\n';
			x->line_start = x->olen;
			x->line_link = 0;
		}
	} else if (x->sp && x->olen && x->o[x->olen - 1] != '\n') {
		x->o[x->olen++] = ' ';
		if (x->in_link)
			x->line_link++;
	}
	x->br = x->sp = false;
}

static void put_cp(struct ex *x, uint32_t cp)
{
	if (cp == 0xA0 || cp == 0x2028 || cp == 0x2029 || cp == ' ' || cp == '\t' || cp == '\n' ||
	    cp == '\r' || cp == '\f') {
		x->sp = true;
		return;
	}
	/* controls, a stray BOM, soft hyphens: nothing to see */
	if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0) || cp == 0xFEFF || cp == 0xAD)
		return;
	if (x->sp || x->br)
		sep(x);
	size_t k = charset_utf8_put(x->o + x->olen, cp);
	x->olen += k;
	if (x->in_link)
		x->line_link += k;
}

/* The character at s[i] (non-ASCII): copied if valid UTF-8, else skipped.
 * Returns the next index. */
static size_t put_utf8(struct ex *x, size_t i, size_t end)
{
	uint32_t cp;
	size_t k = charset_utf8_seq(x->s + i, end - i, &cp);
	if (!k)
		return i + 1; /* counted by the decoder already */
	if (cp < 0xA0 || cp == 0xA0 || cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF || cp == 0xAD) {
		put_cp(x, cp);
		return i + k;
	}
	if (x->sp || x->br)
		sep(x);
	memcpy(x->o + x->olen, x->s + i, k);
	x->olen += k;
	if (x->in_link)
		x->line_link += k;
	return i + k;
}

/* The entity at s[i] == '&'. Returns the next index. */
static size_t put_entity(struct ex *x, size_t i, size_t end)
{
	const uint8_t *s = x->s;
	size_t j = i + 1;
	if (j < end && s[j] == '#') {
		j++;
		bool hex = j < end && (s[j] | 0x20) == 'x';
		if (hex)
			j++;
		uint32_t v = 0;
		size_t d0 = j;
		for (; j < end; j++) {
			unsigned dv;
			if ((uint8_t)(s[j] - '0') < 10)
				dv = s[j] - '0';
			else if (hex && (uint8_t)((s[j] | 0x20) - 'a') < 6)
				dv = (s[j] | 0x20) - 'a' + 10;
			else
				break;
			v = v * (hex ? 16 : 10) + dv;
			if (v > 0x10FFFF)
				v = 0x110000; /* saturate: stays out of range */
		}
		if (j == d0) { /* "&#" with no digits is text */
			put_cp(x, '&');
			return i + 1;
		}
		if (j < end && s[j] == ';')
			j++;
		v = charset_cp1252_c1(v);
		if (v && v <= 0x10FFFF && !(v >= 0xD800 && v < 0xE000))
			put_cp(x, v);
		return j;
	}
	size_t n0 = j;
	while (j < end && j - n0 < 32 && is_alnum(s[j]))
		j++;
	size_t nn = j - n0;
	if (nn) {
		bool semi = j < end && s[j] == ';';
		if (semi || legacy_entity(s + n0, nn)) {
			struct ent_key key = {s + n0, nn};
			const struct entity *e = bsearch(&key, entities, sizeof entities / sizeof entities[0],
							 sizeof entities[0], ent_cmp);
			if (!e && nn < 8 && legacy_entity(s + n0, nn)) {
				/* &AMP; &LT; ...: the legacy names in any case */
				uint8_t low[8];
				for (size_t k = 0; k < nn; k++)
					low[k] = lower(s[n0 + k]);
				key.p = low;
				e = bsearch(&key, entities, sizeof entities / sizeof entities[0],
					    sizeof entities[0], ent_cmp);
			}
			if (e) {
				put_cp(x, e->cp);
				return j + semi;
			}
		}
	}
	put_cp(x, '&');
	return i + 1;
}

/* Copy the text s[i..end) up to the next '<' (or all of it when lt_text,
 * for the content of <title>). Returns the index of the '<' or end. */
static size_t put_text(struct ex *x, size_t i, size_t end, bool lt_text)
{
	const uint8_t *s = x->s;
	while (i < end) {
		uint8_t c = s[i];
		if (is_text(c)) {
			if (x->sp || x->br)
				sep(x);
			char *o = x->o + x->olen;
			size_t i0 = i;
			do /* words are short: a loop beats a memcpy call */
				*o++ = (char)s[i++];
			while (i < end && is_text(s[i]));
			x->olen += i - i0;
			if (x->in_link)
				x->line_link += i - i0;
		} else if (is_space(c)) {
			x->sp = true;
			i++;
			while (i < end && is_space(s[i]))
				i++;
		} else if (c == '<') {
			if (!lt_text)
				return i;
			put_cp(x, '<');
			i++;
		} else if (c == '&') {
			i = put_entity(x, i, end);
		} else if (c >= 0x80) {
			i = put_utf8(x, i, end);
		} else {
			put_cp(x, c);
			i++;
		}
	}
	return end;
}

/* Skip the raw text of element `name` from s[i]: to just after its end tag,
 * or to the end. *tag_at gets where the end tag starts (or n). */
static size_t skip_raw(const uint8_t *s, size_t n, size_t i, const char *name, size_t *tag_at)
{
	size_t k = strlen(name);
	while (i < n) {
		const uint8_t *p = memchr(s + i, '<', n - i);
		if (!p)
			break;
		i = (size_t)(p - s) + 1;
		if (n - i >= k + 1 && s[i] == '/' && ascii_caseeq(s + i + 1, name, k) &&
		    (i + 1 + k == n || is_space(s[i + 1 + k]) || s[i + 1 + k] == '/' || s[i + 1 + k] == '>')) {
			*tag_at = i - 1;
			return scan_attrs(s, n, i + 1 + k, NULL);
		}
	}
	*tag_at = n;
	return n;
}

/* A tag name from s[i]: lowercased into name (truncated past NAME_MAX_LEN,
 * *full gets the real length). Returns the index after the name. */
static size_t tag_name(const uint8_t *s, size_t n, size_t i, char name[NAME_MAX_LEN + 1], size_t *full)
{
	size_t i0 = i, k = 0;
	while (i < n && !is_space(s[i]) && s[i] != '/' && s[i] != '>') {
		if (k < NAME_MAX_LEN)
			name[k++] = (char)lower(s[i]);
		i++;
	}
	name[k] = 0;
	*full = i - i0;
	return i;
}

/* An element that is not dropped opens (has_end: an end tag may follow):
 * the first <h1>, containers and the main one, for the edges of the
 * page's text. The <h1>'s container is the outermost main content element
 * (main, article, role=main) around it if there is one, else its nearest
 * container: a page that marks its main text ends where that does. */
static void opened(struct ex *x, unsigned f, const struct attrs *a, bool has_end)
{
	if ((f & T_H1) && !x->seen_h1) {
		x->seen_h1 = true;
		x->h1_line = next_line(x);
		x->h1_box = x->main_box ? x->main_box : x->box_depth;
	}
	if (!(f & T_BOX) || !has_end)
		return;
	x->box_depth++;
	if (!x->main_box && ((f & T_CONTENT) || (a->role.p && name_is(a->role.p, a->role.n, "main"))))
		x->main_box = x->box_depth;
}

static size_t start_tag(struct ex *x, size_t i)
{
	char name[NAME_MAX_LEN + 1];
	size_t full;
	struct attrs a;
	i = tag_name(x->s, x->n, i, name, &full);
	i = scan_attrs(x->s, x->n, i, &a);
	unsigned f = full <= NAME_MAX_LEN ? tag_flags(name) : 0;

	if (f & (T_RAW | T_TITLE)) {
		size_t at, next = skip_raw(x->s, x->n, i, name, &at);
		if ((f & T_TITLE) && !x->skip_depth) {
			x->br = true;
			put_text(x, i, at, true);
			x->br = true;
			if (!x->seen_h1)
				x->lead_from = next_line(x);
		}
		return next;
	}
	if (x->skip_depth) {
		if (!(f & T_VOID) && !a.self_closing && str_eq(name, x->skip_name))
			x->skip_depth++;
		return i;
	}
	if (f & T_BLOCK)
		x->br = true;
	if (f & T_LINK)
		x->in_link = true;
	if (f & T_CONTENT)
		x->content_depth++;
	if ((f & T_ROOT) && name[0] == 'b' && !x->seen_h1)
		x->lead_from = next_line(x);
	if (!x->drop_elems || (f & T_VOID) || a.self_closing || full > NAME_MAX_LEN) {
		opened(x, f, &a, !(f & T_VOID) && !a.self_closing);
		return i;
	}
	bool drop = (f & T_HIDE) || a.hidden;
	if (x->boiler && !(f & T_KEEP))
		drop = drop || (f & T_BOILER) || ((f & T_HEADER) && !x->content_depth) || attrs_are_boiler(&a);
	if (drop) {
		memcpy(x->skip_name, name, sizeof x->skip_name);
		x->skip_depth = 1;
		x->in_link = false;
		if (f & T_CONTENT)
			x->content_depth--;
	} else {
		opened(x, f, &a, true);
	}
	return i;
}

static size_t end_tag(struct ex *x, size_t i)
{
	char name[NAME_MAX_LEN + 1];
	size_t full;
	i = tag_name(x->s, x->n, i, name, &full);
	i = scan_attrs(x->s, x->n, i, NULL);
	unsigned f = full <= NAME_MAX_LEN ? tag_flags(name) : 0;
	if (x->skip_depth) {
		if (str_eq(name, x->skip_name) && full <= NAME_MAX_LEN) {
			if (--x->skip_depth == 0)
				x->br = true;
		} else if (f & T_ROOT) {
			x->skip_failed = true;
		}
		return i;
	}
	if (f & T_BLOCK)
		x->br = true;
	if (f & T_LINK)
		x->in_link = false;
	if ((f & T_CONTENT) && x->content_depth)
		x->content_depth--;
	if ((f & T_BOX) && x->box_depth) {
		/* the container of the first <h1> closes: the page's own text
		 * ends here, what follows is its footer (or more text) */
		if (x->seen_h1 && !x->seen_tail && x->box_depth == x->h1_box) {
			x->seen_tail = true;
			x->tail_line = next_line(x);
		}
		if (x->box_depth == x->main_box)
			x->main_box = 0;
		x->box_depth--;
	}
	return i;
}

/* Markup at s[i] == '<'. Returns the index after it. */
static size_t markup(struct ex *x, size_t i)
{
	const uint8_t *s = x->s;
	size_t n = x->n;
	uint8_t c = i + 1 < n ? s[i + 1] : 0;
	if (is_alpha(c))
		return start_tag(x, i + 1);
	if (c == '/' && i + 2 < n && is_alpha(s[i + 2]))
		return end_tag(x, i + 2);
	if (c == '!' && n - i >= 4 && s[i + 2] == '-' && s[i + 3] == '-') {
		size_t j = i + 4;
		if (j < n && s[j] == '>') /* <!--> */
			return j + 1;
		if (n - j >= 2 && s[j] == '-' && s[j + 1] == '>') /* <!---> */
			return j + 2;
		const uint8_t *q = memmem(s + j, n - j, "-->", 3);
		return q ? (size_t)(q - s) + 3 : n;
	}
	if (c == '!' || c == '?' || c == '/') { /* bogus comment, </> */
		const uint8_t *q = i + 2 < n ? memchr(s + i + 2, '>', n - i - 2) : NULL;
		return q ? (size_t)(q - s) + 1 : n;
	}
	if (!x->skip_depth)
		put_cp(x, '<');
	return i + 1;
}

static void extract_html(struct ex *x)
{
	size_t i = 0, n = x->n;
	while (i < n && !x->oom && !x->skip_failed) { /* failed: done again anyway */
		if (x->skip_depth) {
			const uint8_t *p = memchr(x->s + i, '<', n - i);
			if (!p) {
				x->skipped += n - i;
				break;
			}
			x->skipped += (size_t)(p - x->s) - i;
			i = markup(x, (size_t)(p - x->s));
		} else if (x->s[i] == '<') {
			i = markup(x, i);
		} else {
			i = put_text(x, i, n, false);
		}
	}
	if (x->skip_depth)
		x->skip_failed = true;
	if (x->olen)
		end_line(x);
}

static void extract_plain(struct ex *x)
{
	const uint8_t *s = x->s;
	size_t i = 0, n = x->n;
	while (i < n) {
		uint8_t c = s[i];
		if (c >= 0x80) {
			uint32_t cp;
			size_t k = charset_utf8_seq(s + i, n - i, &cp);
			if (!k) {
				i++;
				continue;
			}
			if (cp >= 0xA0 && cp != 0xFEFF) { /* C1 controls and BOMs go */
				memcpy(x->o + x->olen, s + i, k);
				x->olen += k;
			}
			i += k;
		} else {
			if ((c >= 0x20 && c != 0x7F) || c == '\t' || c == '\n' || c == '\r' || c == '\f')
				x->o[x->olen++] = (char)c;
			i++;
		}
	}
}

static bool line_heavy(const struct ex *x, size_t k)
{
	return x->heavy[k / 8] & (1u << (k % 8));
}

/* Line k is in the page's lead (before its first <h1>) or its tail (after
 * the container of that <h1>). */
static bool line_in_lead(const struct ex *x, size_t k)
{
	return x->seen_h1 && k >= x->lead_from && k < x->h1_line;
}

static bool line_in_tail(const struct ex *x, size_t k)
{
	return x->seen_tail && k >= x->tail_line;
}

/* Drop the boilerplate lines: those more than half of which is link text,
 * unless that leaves less than HTML_MIN_MAIN_FRACTION percent of the text;
 * the lead (before the first <h1>) and the tail (after the container of
 * that <h1>), each when it is at most HTML_EDGE_FRACTION percent of the
 * text and at most HTML_EDGE_BYTES long. */
static void drop_lines(struct ex *x)
{
	bool links = x->kept_bytes != x->text_bytes &&
		     x->kept_bytes * 100 >= x->text_bytes * HTML_MIN_MAIN_FRACTION;
	size_t lead = 0, tail = 0, r = 0;
	for (size_t k = 0; k < x->nlines && r < x->olen; k++) {
		const char *nl = memchr(x->o + r, '\n', x->olen - r);
		size_t end = nl ? (size_t)(nl - x->o) : x->olen;
		if (!(links && line_heavy(x, k))) {
			if (line_in_lead(x, k))
				lead += end - r;
			if (line_in_tail(x, k))
				tail += end - r;
		}
		r = end + 1;
	}
	size_t text = links ? x->kept_bytes : x->text_bytes; /* what is left of it */
	bool cut_lead = lead && lead <= HTML_EDGE_BYTES && lead * 100 <= text * HTML_EDGE_FRACTION;
	bool cut_tail = tail && tail <= HTML_EDGE_BYTES && tail * 100 <= text * HTML_EDGE_FRACTION;
	if (!links && !cut_lead && !cut_tail)
		return;
	size_t w = 0;
	r = 0;
	for (size_t k = 0; k < x->nlines && r < x->olen; k++) {
		const char *nl = memchr(x->o + r, '\n', x->olen - r);
		size_t end = nl ? (size_t)(nl - x->o) : x->olen;
		bool drop = (links && line_heavy(x, k)) || (cut_lead && line_in_lead(x, k)) ||
			    (cut_tail && line_in_tail(x, k));
		if (!drop) {
			if (w)
				x->o[w++] = '\n';
			memmove(x->o + w, x->o + r, end - r);
			w += end - r;
		}
		r = end + 1;
	}
	x->olen = w;
}

/* ---- the whole ---- */

static int run(struct ex *x, const uint8_t *s, size_t n, bool html, unsigned flags, bool drop_elems)
{
	free(x->heavy);
	memset(x, 0, sizeof *x);
	x->s = s;
	x->n = n;
	x->drop_elems = drop_elems;
	x->boiler = !(flags & HTML_ALL_TEXT);
	x->o = malloc(n + 8);
	if (!x->o)
		return -ENOMEM;
	if (html)
		extract_html(x);
	else
		extract_plain(x);
	if (x->oom) {
		free(x->o);
		x->o = NULL;
		return -ENOMEM;
	}
	return 0;
}

int html_extract(const void *buf, size_t len, unsigned flags, struct html_text *out)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof *out);
	if (!buf && len)
		return -EINVAL;
	const uint8_t *s = buf ? buf : (const uint8_t *)"";
	size_t n = len;
	if (n > HTML_MAX_INPUT) {
		n = HTML_MAX_INPUT;
		out->truncated = true;
	}
	out->charset = "UTF-8";
	if (has_binary_signature(s, n)) {
		out->binary = true;
		return 0;
	}

	/* 1. BOM, UTF-16 */
	const char *cs = NULL;
	bool fixed = false;
	if (n >= 3 && !memcmp(s, "\xef\xbb\xbf", 3)) {
		s += 3;
		n -= 3;
		cs = "UTF-8";
		fixed = true;
	} else if (n >= 2 && (!memcmp(s, "\xff\xfe", 2) || !memcmp(s, "\xfe\xff", 2))) {
		cs = s[0] == 0xFF ? "UTF-16LE" : "UTF-16BE";
		s += 2;
		n -= 2;
		fixed = true;
	} else if ((cs = charset_sniff_utf16(s, n))) {
		fixed = true;
	}
	if (!fixed || !strcmp(cs, "UTF-8")) {
		size_t m = n < SNIFF_BYTES ? n : SNIFF_BYTES, nul, ctrl;
		count_controls(s, n, SNIFF_BYTES, false, &nul, &ctrl);
		if (nul * 1024 > m || ctrl * 32 > m) {
			out->binary = true;
			return 0;
		}
	}

	/* 2, 3. charset: declared, then UTF-8, then a guess; decode */
	if (!fixed)
		cs = prescan_charset(s, n);
	struct charset_decoded d;
	int r = charset_decode_page(s, n, cs, fixed, &d);
	if (r)
		return r;
	const uint8_t *work = d.p;
	size_t wn = d.n;
	uint8_t *dec = d.buf;
	out->charset = d.charset;
	out->invalid = d.invalid;
	size_t nul, ctrl;
	count_controls(work, wn, SIZE_MAX, true, &nul, &ctrl);
	if (ctrl * 32 > wn) {
		free(dec);
		out->binary = true;
		return 0;
	}

	/* 4. extract */
	out->html = looks_like_html(work, wn);
	struct ex x = {0};
	r = run(&x, work, wn, out->html, flags, out->html);
	if (!r && out->html && x.skip_failed) {
		free(x.o);
		r = run(&x, work, wn, true, flags, false);
	}
	if (r) {
		free(x.heavy);
		free(dec);
		return r;
	}
	size_t all = x.olen;
	if (out->html && x.boiler)
		drop_lines(&x);
	free(x.heavy);
	free(dec);
	x.o[x.olen] = 0;
	out->text = x.o;
	out->len = x.olen;
	out->dropped = all - x.olen + x.skipped;
	return 0;
}

void html_text_free(struct html_text *t)
{
	if (!t)
		return;
	free(t->text);
	t->text = NULL;
	t->len = 0;
}
