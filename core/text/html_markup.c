/* html_markup.c - the vocabulary of HTML the extractor and the charset
 * prescan read: character classes, a tag's attributes, named entities,
 * tags and the words that mark boilerplate (see html.c for the design). */
#include "html_int.h"

#include <stdlib.h>
#include <string.h>

/* ASCII classes: 1 HTML white space, 2 letter, 4 digit, 8 text (printable,
 * not '<' or '&'). */
const uint8_t html_ctab[256] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	1, 8, 8, 8, 8, 8, 0, 8, 8, 8, 8, 8, 8, 8, 8, 8,
	12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 8, 8, 0, 8, 8, 8,
	8, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
	10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 8, 8, 8, 8, 8,
	8, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
	10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 8, 8, 8, 8, 0,
};

/* ---- attributes ---- */

bool html_ascii_caseeq(const uint8_t *p, const char *lit, size_t k)
{
	for (size_t i = 0; i < k; i++)
		if (lower(p[i]) != (uint8_t)lit[i])
			return false;
	return true;
}

bool html_name_is(const uint8_t *p, size_t n, const char *name)
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
		if (html_name_is(name, nn, "id"))
			dst = &a->id;
		break;
	case 4:
		if (html_name_is(name, nn, "role"))
			dst = &a->role;
		break;
	case 5:
		if (html_name_is(name, nn, "class"))
			dst = &a->cls;
		break;
	case 6:
		if (html_name_is(name, nn, "hidden"))
			a->hidden = true;
		break;
	case 7:
		if (html_name_is(name, nn, "charset"))
			dst = &a->charset;
		else if (html_name_is(name, nn, "content"))
			dst = &a->content;
		break;
	}
	if (dst && !dst->p) { /* the first of duplicates wins, as in HTML5 */
		dst->p = v;
		dst->n = vn;
	}
}

size_t html_scan_attrs(const uint8_t *s, size_t n, size_t i, struct attrs *a)
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

bool html_legacy_entity(const uint8_t *p, size_t n)
{
	return html_name_is(p, n, "amp") || html_name_is(p, n, "lt") || html_name_is(p, n, "gt") ||
	       html_name_is(p, n, "quot") || html_name_is(p, n, "nbsp") || html_name_is(p, n, "copy") ||
	       html_name_is(p, n, "reg");
}

uint32_t html_entity_cp(const uint8_t *p, size_t n)
{
	struct ent_key key = {p, n};
	const struct entity *e =
		bsearch(&key, entities, sizeof entities / sizeof entities[0], sizeof entities[0], ent_cmp);
	if (!e && n < 8 && html_legacy_entity(p, n)) {
		/* &AMP; &LT; ...: the legacy names in any case */
		uint8_t low[8];
		for (size_t k = 0; k < n; k++)
			low[k] = lower(p[k]);
		key.p = low;
		e = bsearch(&key, entities, sizeof entities / sizeof entities[0], sizeof entities[0],
			    ent_cmp);
	}
	return e ? e->cp : 0;
}

/* ---- tags ---- */

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

unsigned html_tag_flags(const char *name)
{
	unsigned c = (uint8_t)name[0] - 'a';
	if (c >= 26)
		return 0;
	for (unsigned i = tag_first[c]; i < tag_first[c + 1]; i++)
		if (html_str_eq(name, tags[i].name))
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
		if (list[i].len == n && (uint8_t)list[i].w[0] == c0 && html_name_is(p, n, list[i].w))
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

bool html_attrs_are_boiler(const struct attrs *a)
{
	if (a->cls.p && class_is_boiler(a->cls))
		return true;
	if (a->id.p && word_in(a->id.p, a->id.n, boiler_words, sizeof boiler_words / sizeof boiler_words[0]))
		return true;
	if (a->role.p && word_in(a->role.p, a->role.n, boiler_roles, sizeof boiler_roles / sizeof boiler_roles[0]))
		return true;
	return false;
}
