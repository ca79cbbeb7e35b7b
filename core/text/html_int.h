/* html_int.h - what the parts of the page-to-text code share (html.h is
 * the interface):
 *   html.c         the extractor and the whole pipeline;
 *   html_sniff.c   binary content, the declared charset, HTML or plain text;
 *   html_markup.c  the vocabulary: character classes, attributes, entities,
 *                  tags and the boilerplate words.
 */
#ifndef PD_HTML_INT_H
#define PD_HTML_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "html.h"

#define SNIFF_BYTES 65536  /* binary / UTF-16 / guess statistics */
#define HTML_SNIFF 1024    /* where HTML markers are looked for */
#define NAME_MAX_LEN 31    /* tag and attribute names kept for matching */

/* ASCII classes: 1 HTML white space, 2 letter, 4 digit, 8 text (printable,
 * not '<' or '&'). */
extern const uint8_t html_ctab[256];

static inline bool is_space(uint8_t c)
{
	return html_ctab[c] & 1;
}

static inline bool is_alpha(uint8_t c)
{
	return html_ctab[c] & 2;
}

static inline bool is_alnum(uint8_t c)
{
	return html_ctab[c] & 6;
}

static inline bool is_text(uint8_t c)
{
	return html_ctab[c] & 8;
}

static inline uint8_t lower(uint8_t c)
{
	return (uint8_t)(c - 'A') < 26 ? (uint8_t)(c | 0x20) : c;
}

struct span {
	const uint8_t *p;
	size_t n;
};

/* The attributes the extractor and the charset prescan look at. */
struct attrs {
	struct span cls, id, role, charset, content;
	bool hidden, self_closing;
};

/* ---- html_markup.c ---- */

/* p[0..k) equals the lowercase lit[0..k), ignoring ASCII case (whatever
 * the locale: strncasecmp follows it). */
bool html_ascii_caseeq(const uint8_t *p, const char *lit, size_t k);
/* p[0..n) equals the lowercase name, ignoring ASCII case. */
bool html_name_is(const uint8_t *p, size_t n, const char *name);
/* Scan the attributes of a tag from s[i] (just after its name) to its '>'.
 * Returns the index after the '>', or n if the tag runs to the end (the
 * HTML5 tokenizer then drops it). A quoted value may hold '>'. a may be
 * NULL when nothing is wanted. */
size_t html_scan_attrs(const uint8_t *s, size_t n, size_t i, struct attrs *a);
/* Entities HTML5 also reads without ';' (the common ones of its legacy list). */
bool html_legacy_entity(const uint8_t *p, size_t n);
/* The code point of the named entity p[0..n) (the legacy names in any
 * case), 0 if there is none. */
uint32_t html_entity_cp(const uint8_t *p, size_t n);

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

/* Flags of a lowercase tag name, 0 for tags we do not know. */
unsigned html_tag_flags(const char *name);
/* a and b are the same string. Inline, not strcmp(): a library call per
 * probe of the tag table slowed extraction by 5-15% (bench_simhash). */
static inline bool html_str_eq(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}
/* Whether a tag's class, id or role marks boilerplate. */
bool html_attrs_are_boiler(const struct attrs *a);

/* ---- html_sniff.c ---- */

bool html_has_binary_signature(const uint8_t *s, size_t n);
/* NUL and other control characters in the first `limit` bytes of s: C0
 * controls other than white space, ESC and SUB, DEL, and, when s is UTF-8
 * (c1), the C1 controls U+0080..U+009F. Eight bytes at a time while there
 * is none. */
void html_count_controls(const uint8_t *s, size_t n, size_t limit, bool c1, size_t *nul,
			 size_t *ctrl);
/* A charset declared in the first HTML_PRESCAN bytes, NULL if none (or if
 * the label is unknown). */
const char *html_prescan_charset(const uint8_t *s, size_t n);
bool html_looks_like_html(const uint8_t *s, size_t n);

#endif
