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
 * conversion) are charset.c's; html_sniff.c does step 1, finds the
 * declared label and tells HTML from plain text; html_markup.c holds the
 * vocabulary (attributes, entities, tags, boilerplate words); this file
 * extracts (steps 4 and 5) and runs the whole.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* memmem */
#endif
#include "html_int.h"

#include "charset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
		if (semi || html_legacy_entity(s + n0, nn)) {
			uint32_t cp = html_entity_cp(s + n0, nn);
			if (cp) {
				put_cp(x, cp);
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
		if (n - i >= k + 1 && s[i] == '/' && html_ascii_caseeq(s + i + 1, name, k) &&
		    (i + 1 + k == n || is_space(s[i + 1 + k]) || s[i + 1 + k] == '/' || s[i + 1 + k] == '>')) {
			*tag_at = i - 1;
			return html_scan_attrs(s, n, i + 1 + k, NULL);
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
	if (!x->main_box && ((f & T_CONTENT) || (a->role.p && html_name_is(a->role.p, a->role.n, "main"))))
		x->main_box = x->box_depth;
}

static size_t start_tag(struct ex *x, size_t i)
{
	char name[NAME_MAX_LEN + 1];
	size_t full;
	struct attrs a;
	i = tag_name(x->s, x->n, i, name, &full);
	i = html_scan_attrs(x->s, x->n, i, &a);
	unsigned f = full <= NAME_MAX_LEN ? html_tag_flags(name) : 0;

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
		if (!(f & T_VOID) && !a.self_closing && html_str_eq(name, x->skip_name))
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
		drop = drop || (f & T_BOILER) || ((f & T_HEADER) && !x->content_depth) || html_attrs_are_boiler(&a);
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
	i = html_scan_attrs(x->s, x->n, i, NULL);
	unsigned f = full <= NAME_MAX_LEN ? html_tag_flags(name) : 0;
	if (x->skip_depth) {
		if (html_str_eq(name, x->skip_name) && full <= NAME_MAX_LEN) {
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
	if (html_has_binary_signature(s, n)) {
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
		html_count_controls(s, n, SNIFF_BYTES, false, &nul, &ctrl);
		if (nul * 1024 > m || ctrl * 32 > m) {
			out->binary = true;
			return 0;
		}
	}

	/* 2, 3. charset: declared, then UTF-8, then a guess; decode */
	if (!fixed)
		cs = html_prescan_charset(s, n);
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
	html_count_controls(work, wn, SIZE_MAX, true, &nul, &ctrl);
	if (ctrl * 32 > wn) {
		free(dec);
		out->binary = true;
		return 0;
	}

	/* 4. extract */
	out->html = html_looks_like_html(work, wn);
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
