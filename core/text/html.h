/* html.h - the text of a web page, as UTF-8, for near-duplicate detection.
 *
 * html_extract() turns the bytes of a saved page into the text a reader sees:
 * one pass over the page, no DOM, no allocation per element. It is a pure
 * function of its input (no global state, thread-safe) and never fails on
 * malformed input: whatever the bytes, it returns in time linear in their
 * length with memory bounded by a small multiple of it.
 *
 * Charset, first rule that applies:
 *   1. a byte-order mark (UTF-8, UTF-16LE, UTF-16BE);
 *   2. UTF-16 without a BOM, recognised by NUL bytes at every other offset;
 *   3. UTF-8 when the bytes are UTF-8 beyond doubt (there are non-ASCII
 *      bytes and at most 1 in 64 of them is invalid), whatever the page
 *      declares: pages labelled Latin-1 or GB2312 but saved as UTF-8 are
 *      common, and text in a legacy charset is almost never valid UTF-8;
 *   4. <meta charset=X>, <meta http-equiv="Content-Type" content="...;
 *      charset=X"> or <?xml ... encoding="X"?> in the first HTML_PRESCAN
 *      bytes (comments skipped; a UTF-16 label there means UTF-8, as in
 *      HTML5);
 *   5. UTF-8.
 * Labels (about 150 of the WHATWG names, compared on their letters and
 * digits only) are mapped to the supersets browsers use: GB2312/GBK ->
 * GB18030, Big5 -> BIG5-HKSCS, Shift_JIS -> CP932, EUC-KR -> CP949,
 * ISO-8859-1/ASCII -> windows-1252; also EUC-JP, ISO-2022-JP, the other
 * windows-125x, ISO-8859-x, KOI8, IBM866, Mac Roman. An unknown label is
 * ignored. Conversion is iconv's (windows-1252 a table of our own); invalid
 * bytes are skipped one by one and counted (out->invalid), never fatal.
 * When the charset of rule 4 or 5 does not fit the bytes (more than a
 * quarter of the non-ASCII bytes are invalid in it), UTF-8 is tried, then
 * a guess: GB18030 when most non-ASCII bytes come in runs of two or more
 * (a double-byte CJK charset; Big5, Shift_JIS or EUC-KR text decodes to
 * other Han characters, but always to the same ones, so copies of a page
 * still match), else windows-1252. out->charset names what was used.
 *
 * Binary: no text at all (out->binary, out->text NULL) when the content
 * starts with the signature of a common binary format (PNG, GIF, JPEG, PDF,
 * ZIP, gzip, bzip2, xz, zstd, 7z, ELF, WOFF, WebAssembly, RIFF, Ogg, MP4,
 * ICO, SQLite, OLE2, Java class, TrueType), when more than 1 byte in 1024
 * of its first 64 KiB is NUL or more than 1 in 32 is a C0 control other
 * than tab, LF, VT, FF, CR, ESC, SUB (UTF-16 aside), or when, decoded, more
 * than 1 byte in 32 of the page belongs to a C0 or C1 control character.
 * These are the rules grep and git use, made tolerant of a stray byte.
 * Text in a charset we cannot read is still text, never "binary": invalid
 * sequences only choose the charset. A BOM is believed.
 *
 * HTML or plain text: the content is HTML when its first non-blank
 * character is '<' or when one of <html, <!doctype, <head, <body, <meta,
 * <title, <div, <p>, <br appears in its first 1024 bytes. Plain text is
 * returned as it is, decoded to UTF-8, without control characters other
 * than tab, line feed, carriage return and form feed.
 *
 * HTML to text:
 *   - tags are dropped; comments, <!...> and <?...?> too; the content of
 *     script, style, noscript, iframe, noembed, noframes, xmp, textarea,
 *     template, svg, select, object, button, dialog and of any element
 *     with the hidden attribute is dropped;
 *   - entities are decoded: &#N; and &#xN; (0x80-0x9F as windows-1252, as
 *     browsers do; NUL, surrogates and values past U+10FFFF are dropped) and
 *     about 190 named ones (markup, Latin-1, punctuation, arrows, Greek,
 *     math basics); &amp &lt &gt &quot &nbsp &copy &reg also without ';'
 *     and in capitals. An unknown entity stays as it is written;
 *   - block elements (p, div, li, td, h1..h6, br, title, ...) end a line;
 *     every other run of white space (including no-break space) becomes one
 *     space; lines carry no leading or trailing space and none is empty;
 *     out->text has no '\n' at its end;
 *   - boilerplate is dropped unless HTML_ALL_TEXT is given: nav, footer,
 *     aside, and header outside article/main; any element whose role is
 *     navigation, banner, contentinfo, complementary, search, menu, menubar
 *     or toolbar, or whose class or id has a word (split at anything not a
 *     letter or digit) in a short list of layout names (nav, navbar, menu,
 *     footer, copyright, sidebar, breadcrumb(s), cookie(s), banner, ad(s),
 *     advert..., sponsor(ed), share, social, related) - for an id the whole
 *     id must be such a name, as ids are often made from headings
 *     ("module-http.cookies"); and lines more than half of whose text is
 *     link text (menus, tables of contents, tag clouds), unless what
 *     remains is less than HTML_MIN_MAIN_FRACTION of the text, in which
 *     case every line is kept (index pages are links); the page's lead,
 *     its text after <body> (and the title) and before the first <h1>, and
 *     its tail, after the element that holds that <h1> ends - the
 *     outermost main, article or role=main element around the <h1> if
 *     there is one, else its nearest div, section, table or center - each
 *     when it is at most HTML_EDGE_FRACTION percent of the text left and
 *     at most HTML_EDGE_BYTES long (another site's name, tagline and
 *     footer around a mirrored page, however they are marked up). An
 *     <h1> inside a dropped element does not count; a page without one, or
 *     whose container never closes, keeps its edges. An element
 *     dropped as boilerplate that is still open at </body> or at the end
 *     of the page (malformed nesting) makes the page be extracted again
 *     without element dropping, so a stray <nav> never swallows a page.
 *     out->dropped says how many bytes of text went. Why: on the Debian
 *     documentation corpus, a changed footer, an inserted ad or an added
 *     list of links keeps 99.7-100% of pages within simhash distance 3
 *     with boilerplate dropped, 12-30% without (bench_simhash --quality,
 *     --quality --all-text). The edges: with another site's header and
 *     footer as divs or a layout table around a documentation page, 99.0%
 *     of the labelled mirror variants still share 80% of their word
 *     5-shingles with the original (74.4% before; 100% and 93.3% of the
 *     Chinese ones; bench_near profile_*),
 *     and the corpus keeps 99.9986% of its text: 67 of 20,000 pages lose
 *     a line or two, none more than 13%, all of it a version line or a
 *     module and package line above the title.
 *
 * Bounds: only the first HTML_MAX_INPUT bytes of a longer page are read
 * (out->truncated), so the text and its simhash are those of that prefix.
 * Memory: a decoded copy when the page is not UTF-8 (at most 4 bytes per
 * input byte), the text (at most the decoded size) and one bit per line.
 *
 * Errors are negative errno values: -EINVAL (buf NULL with len > 0, or out
 * NULL), -ENOMEM. On error *out is left empty (text NULL).
 */
#ifndef PD_HTML_H
#define PD_HTML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Only this much of a page is read (8 MiB). */
#define HTML_MAX_INPUT ((size_t)8 << 20)
/* A <meta> charset declaration is looked for in this many leading bytes. */
#define HTML_PRESCAN 16384
/* Below this fraction (in percent) of the page's text left after dropping
 * link-heavy lines, those lines are kept after all. */
#define HTML_MIN_MAIN_FRACTION 20

/* The lead of a page (its text before the first <h1>) and its tail (after
 * the element that holds that <h1> ends) are dropped when each is at most
 * this percent of the text and at most HTML_EDGE_BYTES bytes. */
#define HTML_EDGE_FRACTION 25
#define HTML_EDGE_BYTES 1024

/* html_extract flags */
#define HTML_ALL_TEXT 1u /* keep boilerplate: every visible character */

struct html_text {
	char *text;          /* UTF-8, NUL-terminated; NULL when binary */
	size_t len;          /* bytes in text, without the NUL */
	bool binary;         /* binary content: no text */
	bool html;           /* parsed as HTML (false: plain text) */
	bool truncated;      /* longer than HTML_MAX_INPUT; the prefix was read */
	const char *charset; /* static: "UTF-8", "GB18030", "UTF-16LE", ... */
	size_t invalid;      /* bytes skipped as invalid in that charset */
	size_t dropped;      /* bytes of text dropped as boilerplate */
};

/* Extract the text of the page in buf[0..len) into *out (flags: 0 or
 * HTML_ALL_TEXT). 0 on success, binary content included; free with
 * html_text_free. -EINVAL, -ENOMEM. */
int html_extract(const void *buf, size_t len, unsigned flags, struct html_text *out);

/* Free the text; *t is left empty. NULL or an empty result is fine. */
void html_text_free(struct html_text *t);

#endif
