/* test_simhash.c - text extraction (core/text/html.c) and the simhash
 * (core/near/simhash.c): exact text for small pages, charsets, binary content,
 * near-duplicate and unrelated pages, determinism, malformed input, and the
 * fuzz corpus replayed through the fuzz target's own checks.
 *
 * The pages are in tests/data/near (see its README); the corpus is
 * tests/fuzz/corpus. Both are found from $PD_DATA / $PD_TOP (set by
 * tests/run.sh) or from the current directory.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "text/html.h"
#include "text/html_int.h"
#include "helpers.h"
#include "near/simhash.h"

/* The changes these tests make keep a page within 3 bits: tighter than the
 * store's default distance K, so that a weaker hash fails here first. */
#define ROBUST_BITS 3

/* The fuzz target, its failures reported through cmocka. */
#define FUZZ_FAIL(what) fail_msg("fuzz invariant broken: %s", what)
#include "../../fuzz/fuzz_html.c"

/* ---- helpers ---- */

static char *path_of(const char *env, const char *fallback, const char *rel)
{
	static char path[4096];
	const char *base = getenv(env);
	snprintf(path, sizeof path, "%s/%s", base && *base ? base : fallback, rel);
	return path;
}

/* A page of tests/data/near, NUL-terminated. */
static char *page(const char *name, size_t *len)
{
	size_t n;
	char *b = th_data_page(name, &n);
	if (len)
		*len = n;
	return b;
}

/* The text of buf (asserting success and text), to be freed. */
static char *text_of(const void *buf, size_t len, unsigned flags)
{
	struct html_text t;
	assert_int_equal(html_extract(buf, len, flags, &t), 0);
	assert_false(t.binary);
	assert_non_null(t.text);
	return t.text;
}

static char *text_of_str(const char *s, unsigned flags)
{
	return text_of(s, strlen(s), flags);
}

static void assert_text(const char *html, unsigned flags, const char *want)
{
	char *got = text_of_str(html, flags);
	if (strcmp(got, want))
		fail_msg("extracted\n[%s]\nwanted\n[%s]\nfrom\n[%s]", got, want, html);
	free(got);
}

static struct simhash_result hash_of_page(const void *buf, size_t len)
{
	struct simhash_result r;
	assert_int_equal(simhash_of_page(buf, len, &r), 0);
	return r;
}

static struct simhash_result hash_of_str(const char *s)
{
	struct simhash_result r;
	assert_int_equal(simhash_of_text(s, strlen(s), &r), 0);
	return r;
}

/* s with its first `from` replaced by `to` (from must be there). */
static char *replace(const char *s, const char *from, const char *to)
{
	const char *p = strstr(s, from);
	if (!p)
		fail_msg("'%s' not in the page", from);
	size_t a = (size_t)(p - s), nf = strlen(from), nt = strlen(to), n = strlen(s);
	char *r = malloc(n - nf + nt + 1);
	assert_non_null(r);
	memcpy(r, s, a);
	memcpy(r + a, to, nt);
	memcpy(r + a + nt, p + nf, n - a - nf + 1);
	return r;
}

static unsigned distance_of(const char *a, const char *b)
{
	struct simhash_result ra = hash_of_page(a, strlen(a)), rb = hash_of_page(b, strlen(b));
	assert_false(ra.none);
	assert_false(rb.none);
	return simhash_distance(ra.hash, rb.hash);
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

/* This thread's CPU seconds: what other processes run does not count. */
static double thread_cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- HTML to text ---- */

static void test_markup_dropped(void **state)
{
	(void)state;
	assert_text("<html><head><title>Tea &amp; Toast</title>"
		    "<style>p { color: red } /* <p>no</p> */</style>"
		    "<script>var a = '<p>no</p>'; if (a < b && b > c) { x(); }</script></head>"
		    "<body><!-- a comment <p>no</p> -->"
		    "<p>Hello <b>bold</b> <i>world</i>!</p>"
		    "<div>Second <span class=\"x\" title='a > b'>block</span></div>"
		    "<noscript>enable scripts</noscript><template><p>no</p></template>"
		    "<svg><title>icon</title><text>no</text></svg>"
		    "<select><option>no</option></select><button>no</button>"
		    "<p hidden>no</p><textarea>no</textarea><iframe>no</iframe>"
		    "<p>x<!-- -->y<![CDATA[bogus]]>z<?php echo 1 ?>.</p></body></html>",
		    0, "Tea & Toast\nHello bold world!\nSecond block\nxyz.");
	/* raw text runs to its own end tag only */
	assert_text("<script>document.write('<script>')</script><p>after</p>", 0, "after");
	assert_text("<STYLE>b{}</STYLE ><P>Upper</P>", 0, "Upper");
}

static void test_entities(void **state)
{
	(void)state;
	assert_text("<p>&lt;a&gt; &amp; &quot;q&quot; &apos;s &#65;&#x42;&#X43; &eacute;t&eacute; "
		    "&copy 2024 &AMP; &#128; &#x20AC; &#0;&#xD800;&#1114112;&#99999999999;x "
		    "&unknown; AT&T &#; &nbsp;end&hellip;&mdash;&ndash;&rarr;&alpha;&Omega;</p>",
		    0, "<a> & \"q\" 's ABC été © 2024 & € € x &unknown; AT&T &#; end…—–→αΩ");
	/* entities in the title too; &nbsp; is a space; soft hyphen invisible */
	assert_text("<title>A&nbsp;&nbsp;B</title><p>co&shy;operate&#173;d</p>", 0, "A B\ncooperated");
}

static void test_lines_and_spaces(void **state)
{
	(void)state;
	assert_text("  <p>  a \n\t b  </p>\n\n<p></p><p> </p><ul><li>one</li><li> two </li></ul>"
		    "x<br>y&nbsp;&nbsp;z<br/><br>\xc2\xa0w<table><tr><td>c1</td><td>c2</td></tr></table>"
		    "in<b>line</b> <em>words</em>",
		    0, "a b\none\ntwo\nx\ny z\nw\nc1\nc2\ninline words");
	assert_text("", 0, "");
	assert_text("<html><body><div></div></body></html>", 0, "");
	/* '<' that starts no tag is text */
	assert_text("<p>a < b, 3<4, <<x>> & y</p>", 0, "a < b, 3<4, <> & y");
}

static void test_boilerplate(void **state)
{
	(void)state;
	const char *html =
		"<body><header><a href=/>Site</a> tagline</header>"
		"<nav><ul><li><a href=/>Home</a></li></ul></nav>"
		"<div class=\"left sidebar-wrap\"><p>sidebar text</p></div>"
		"<main><article><header><h1>The title</h1></header>"
		"<p>Article text with a <a href=\"/x\">link</a> inside it.</p>"
		"<section id=\"module-http.cookies\"><p>Cookie module text.</p></section>"
		"<div class=\"ad\"><p>Buy now</p></div>"
		"<div role=\"navigation\"><p>prev next</p></div>"
		"<div id=\"footer\"><p>id footer</p></div>"
		"<div class=\"share-buttons\"><p>Share this</p></div>"
		"</article></main>"
		"<aside><p>aside text</p></aside>"
		"<footer><p>&copy; 2024 Site</p></footer></body>";
	assert_text(html, 0, "The title\nArticle text with a link inside it.\nCookie module text.");
	assert_text(html, HTML_ALL_TEXT,
		    "Site tagline\nHome\nsidebar text\nThe title\nArticle text with a link inside it.\n"
		    "Cookie module text.\nBuy now\nprev next\nid footer\nShare this\naside text\n© 2024 Site");
	struct html_text t;
	assert_int_equal(html_extract(html, strlen(html), 0, &t), 0);
	assert_true(t.dropped > 0);
	html_text_free(&t);
	/* nested elements of the same name inside a dropped one */
	assert_text("<div class=menu><div><div>a</div></div><p>b</p></div><p>kept</p>", 0, "kept");
}

static void test_link_lines(void **state)
{
	(void)state;
	const char *html =
		"<ul><li><a href=1>Home</a></li><li><a href=2>News and announcements</a></li>"
		"<li><a href=3>About</a></li></ul>"
		"<p>The article itself is a paragraph of ordinary text, with one "
		"<a href=4>link</a> in it, long enough to be most of the page.</p>"
		"<p>A second paragraph, also plain text, follows the first one here.</p>";
	assert_text(html, 0,
		    "The article itself is a paragraph of ordinary text, with one link in it, "
		    "long enough to be most of the page.\n"
		    "A second paragraph, also plain text, follows the first one here.");
	/* a page that is all links (an index) keeps them */
	assert_text("<ul><li><a href=1>alpha</a></li><li><a href=2>beta</a></li></ul>", 0,
		    "alpha\nbeta");
}

/* The lead (before the first <h1>) and the tail (after the h1's container)
 * of a page are another site's header and footer when they are short. */
static void test_edges(void **state)
{
	(void)state;
	const char *body = "<p>The first paragraph of the article, long enough to be most of the page: "
			   "it goes on about the subject for a good many words, as articles do.</p>"
			   "<p>A second paragraph with more of the same, so that the header and footer "
			   "around them are a small part of the text.</p>";
	const char *want = "Title\nThe first paragraph of the article, long enough to be most of the page: "
			   "it goes on about the subject for a good many words, as articles do.\n"
			   "A second paragraph with more of the same, so that the header and footer "
			   "around them are a small part of the text.";
	char html[4096];
	/* a site header as divs (no header element, no layout names), a
	 * footer after the container that holds the h1 */
	snprintf(html, sizeof html,
		 "<html><head><title>T</title></head><body><div id=\"top\"><h2>Site Name</h2>"
		 "<p>The tagline of the site.</p></div><div class=\"page\"><h1>Title</h1>%s</div>"
		 "<div class=\"site-bottom\"><p>Hosted by volunteers since 2009.</p></div></body></html>",
		 body);
	char *got, expect[4096];
	snprintf(expect, sizeof expect, "T\n%s", want);
	assert_text(html, 0, expect);
	/* a table header before the h1 and a <center><small> footer */
	snprintf(html, sizeof html,
		 "<body><table><tr><td><b>Site Name</b></td><td>Home | New</td></tr></table>"
		 "<div><h1>Title</h1>%s</div><hr><center><small>Mirrored nightly.</small></center></body>",
		 body);
	assert_text(html, 0, want);
	/* everything is kept with HTML_ALL_TEXT */
	char *all = text_of_str(html, HTML_ALL_TEXT);
	assert_non_null(strstr(all, "Site Name"));
	assert_non_null(strstr(all, "Mirrored nightly."));
	free(all);
	/* no h1: no lead, no tail */
	snprintf(html, sizeof html, "<body><div><h2>Site Name</h2></div><div><h2>Title</h2>%s</div>"
		 "<div><p>Hosted by volunteers.</p></div></body>", body);
	got = text_of_str(html, 0);
	assert_non_null(strstr(got, "Site Name"));
	assert_non_null(strstr(got, "Hosted by volunteers."));
	free(got);
	/* an h1 inside a dropped element (nav) is not the page's */
	snprintf(html, sizeof html, "<body><p>Intro line.</p><nav><h1>Menu</h1></nav><div><h2>Title</h2>%s"
		 "</div><p>After.</p></body>", body);
	got = text_of_str(html, 0);
	assert_non_null(strstr(got, "Intro line."));
	assert_non_null(strstr(got, "After."));
	free(got);
}

/* The edges are dropped only when short, and a page that marks its main
 * text keeps all of it: real content is never taken for a header. */
static void test_edges_keep_content(void **state)
{
	(void)state;
	char lead[2048] = "", html[8192];
	/* a lead that is a quarter of the text or more: kept */
	snprintf(html, sizeof html, "<body><div><p>An introduction of some length that comes before "
		 "the heading.</p></div><div><h1>Title</h1><p>Short body.</p></div></body>");
	char *got = text_of_str(html, 0);
	assert_non_null(strstr(got, "An introduction"));
	free(got);
	/* a lead of more than HTML_EDGE_BYTES: kept, however long the page */
	for (int i = 0; i < 24; i++)
		strcat(lead, "Fifty bytes of lead text that come before the h1. ");
	assert_true(strlen(lead) > HTML_EDGE_BYTES);
	char body[4200] = "";
	for (int i = 0; i < 80; i++)
		strcat(body, "Body text, body text. ");
	snprintf(html, sizeof html, "<body><div><p>%s</p></div><div><h1>Title</h1><p>%s</p><p>%s</p><p>%s"
		 "</p><p>%s</p></div></body>", lead, body, body, body, body);
	got = text_of_str(html, 0);
	assert_non_null(strstr(got, "Fifty bytes of lead"));
	free(got);
	/* the h1 inside role=main: sections after the h1's own section are
	 * the page's (they are inside main); what follows main is not */
	snprintf(html, sizeof html,
		 "<body><div role=\"main\"><section><h1>Slice objects</h1><p>%s</p></section>"
		 "<section><h2>Ellipsis object</h2><p>The Ellipsis object has no methods.</p></section>"
		 "</div><div><p>Built with a documentation generator.</p></div></body>", body);
	got = text_of_str(html, 0);
	assert_non_null(strstr(got, "Ellipsis object\nThe Ellipsis object has no methods."));
	assert_null(strstr(got, "Built with"));
	free(got);
	/* a short last line after the h1's container that is inside main stays */
	snprintf(html, sizeof html,
		 "<body><main><div class=\"header\"><h1>Uses of Class IDN</h1></div>"
		 "<p>No usage of IDN</p></main><footer>Copyright</footer></body>");
	assert_text(html, 0, "Uses of Class IDN\nNo usage of IDN");
	/* a malformed page whose containers never close keeps its tail */
	snprintf(html, sizeof html, "<body><div><h1>Title</h1><p>%s</p><div><p>Unclosed tail.</p>", body);
	got = text_of_str(html, 0);
	assert_non_null(strstr(got, "Unclosed tail."));
	free(got);
}

static void test_unclosed_boilerplate(void **state)
{
	(void)state;
	/* a drop still open at </body> or at the end must not eat the page */
	assert_text("<body><nav><a href=/>Home</a><p>The article after an unclosed nav.</p></body>",
		    0, "The article after an unclosed nav."); /* "Home": a link line */
	assert_text("<div class=\"menu\"><div>menu</div><p>Text after a menu never closed.</p>",
		    0, "menu\nText after a menu never closed.");
	assert_text("<svg><p>Inside an svg never closed</p>", 0, "Inside an svg never closed");
}

static void test_plain_text(void **state)
{
	(void)state;
	const char *txt = "Line one, a < b & c.\r\n\tLine two  has  spaces.\nCaf\xc3\xa9 \xe4\xb8\xad.\n";
	struct html_text t;
	assert_int_equal(html_extract(txt, strlen(txt), 0, &t), 0);
	assert_false(t.html);
	assert_false(t.binary);
	assert_string_equal(t.text, txt);
	html_text_free(&t);
	/* a stray NUL and controls in a long text are dropped, it stays text */
	char buf[4096];
	memset(buf, 'a', sizeof buf);
	for (size_t i = 63; i < sizeof buf; i += 64)
		buf[i] = ' ';
	buf[1000] = 0;
	buf[2000] = 0x07;
	assert_int_equal(html_extract(buf, sizeof buf, 0, &t), 0);
	assert_false(t.binary);
	assert_int_equal(t.len, sizeof buf - 2);
	html_text_free(&t);
}

/* ---- charsets ---- */

static void test_gbk_twin(void **state)
{
	(void)state;
	size_t nu, ng;
	char *utf8 = page("zh_a.utf8.html", &nu), *gbk = page("zh_a.gbk.html", &ng);
	struct html_text tu, tg;
	assert_int_equal(html_extract(utf8, nu, 0, &tu), 0);
	assert_int_equal(html_extract(gbk, ng, 0, &tg), 0);
	assert_string_equal(tu.charset, "UTF-8");
	assert_string_equal(tg.charset, "GB18030");
	assert_int_equal(tg.invalid, 0);
	assert_string_equal(tu.text, tg.text);
	assert_non_null(strstr(tg.text, "网页去重为什么难"));
	assert_non_null(strstr(tg.text, "六十四位的哈希值"));
	struct simhash_result ru = hash_of_page(utf8, nu), rg = hash_of_page(gbk, ng);
	assert_true(ru.hash == rg.hash);
	assert_int_equal(ru.features, rg.features);
	assert_true(ru.features > 300); /* the Chinese text became features */
	html_text_free(&tu);
	html_text_free(&tg);
	free(utf8);
	free(gbk);
}

static void check_sample(const char *file, const char *charset, const char *want)
{
	size_t n;
	char *b = page(file, &n);
	struct html_text t;
	assert_int_equal(html_extract(b, n, 0, &t), 0);
	assert_string_equal(t.charset, charset);
	assert_int_equal(t.invalid, 0);
	if (strcmp(t.text, want))
		fail_msg("%s: extracted\n[%s]\nwanted\n[%s]", file, t.text, want);
	html_text_free(&t);
	free(b);
}

static void test_charset_samples(void **state)
{
	(void)state;
	check_sample("big5.html", "BIG5-HKSCS",
		     "繁體中文\n繁體中文\n繁體中文網頁常用大五碼編碼，轉換之後應該得到相同的文字。"
		     "臺灣的夜市小吃非常有名。");
	check_sample("shift_jis.html", "CP932",
		     "日本語のページ\n日本語のページ\n日本語のウェブページはシフトJISで書かれている"
		     "ことが多い。半角ｶﾀｶﾅも使われる。");
	check_sample("euc-kr.html", "CP949",
		     "한국어 페이지\n한국어 페이지\n한국어 웹 페이지는 EUC-KR 인코딩을 사용하기도 "
		     "합니다. 서울의 봄은 짧다.");
	check_sample("latin1.html", "WINDOWS-1252",
		     "Café crème\nCafé crème\nÇa coûte 5 €? Non: «naïve» façade, Grüße aus "
		     "München, señor.");
}

static void check_decl(const void *buf, size_t len, const char *charset, const char *want)
{
	struct html_text t;
	assert_int_equal(html_extract(buf, len, 0, &t), 0);
	assert_false(t.binary);
	if (strcmp(t.charset, charset) || strcmp(t.text, want))
		fail_msg("charset %s, text [%s]; wanted %s, [%s]", t.charset, t.text, charset, want);
	html_text_free(&t);
}

static void test_charset_declarations(void **state)
{
	(void)state;
	/* http-equiv, single quotes, attributes in any order, any case */
	const char h1[] = "<META CONTENT='text/html; Charset=ISO-8859-1' HTTP-EQUIV='Content-Type'>"
			  "<p>caf\xe9</p>";
	check_decl(h1, sizeof h1 - 1, "WINDOWS-1252", "café");
	/* an XML declaration */
	const char h2[] = "<?xml version=\"1.0\" encoding=\"windows-1251\"?><rss><title>"
			  "\xcf\xf0\xe8\xe2\xe5\xf2</title></rss>";
	check_decl(h2, sizeof h2 - 1, "CP1251", "Привет");
	/* a comment hides a declaration */
	const char h3[] = "<!-- <meta charset=\"big5\"> --><meta charset=\"utf-8\"><p>caf\xc3\xa9</p>";
	check_decl(h3, sizeof h3 - 1, "UTF-8", "café");
	/* BOMs win over declarations */
	const char h4[] = "\xef\xbb\xbf<meta charset=\"gbk\"><p>\xe4\xb8\xad\xe6\x96\x87</p>";
	check_decl(h4, sizeof h4 - 1, "UTF-8", "中文");
	const char h5[] = "\xff\xfe<\0p\0>\0-N\x87" "e<\0/\0p\0>\0"; /* UTF-16LE "<p>中文</p>" */
	check_decl(h5, sizeof h5 - 1, "UTF-16LE", "中文");
	const char h6[] = "\xfe\xff\0<\0p\0>N-e\x87" "\0<\0/\0p\0>";
	check_decl(h6, sizeof h6 - 1, "UTF-16BE", "中文");
	/* UTF-16LE without a BOM */
	const char h7[] = "<\0p\0>\0p\0l\0a\0i\0n\0 \0A\0S\0C\0I\0I\0 \0t\0e\0x\0t\0<\0/\0p\0>\0";
	check_decl(h7, sizeof h7 - 1, "UTF-16LE", "plain ASCII text");
	/* a UTF-16 label in a meta means UTF-8; an unknown label is ignored */
	const char h8[] = "<meta charset=\"utf-16\"><p>caf\xc3\xa9</p>";
	check_decl(h8, sizeof h8 - 1, "UTF-8", "café");
	const char h9[] = "<meta charset=\"x-no-such-thing\"><p>caf\xc3\xa9</p>";
	check_decl(h9, sizeof h9 - 1, "UTF-8", "café");
	/* declared GB2312 but UTF-8 in fact */
	const char h10[] = "<meta charset=\"gb2312\"><p>d\xc3\xa9j\xc3\xa0 vu, na\xc3\xafve caf\xc3\xa9</p>";
	check_decl(h10, sizeof h10 - 1, "UTF-8", "déjà vu, naïve café");
	/* nothing declared: GBK is guessed from its byte pairs, Latin-1 otherwise */
	const char h11[] = "<p>\xc3\xbb\xd3\xd0\xc9\xf9\xc3\xf7\xb1\xe0\xc2\xeb\xb5\xc4\xcd\xf8\xd2\xb3</p>";
	check_decl(h11, sizeof h11 - 1, "GB18030", "没有声明编码的网页");
	const char h12[] = "<p>na\xefve r\xe9sum\xe9 \x80 5</p>";
	check_decl(h12, sizeof h12 - 1, "WINDOWS-1252", "naïve résumé € 5");
}

static void test_invalid_bytes(void **state)
{
	(void)state;
	size_t ng, nb;
	char *gbk = page("zh_a.gbk.html", &ng), *bad = page("zh_a.gbk-invalid.html", &nb);
	struct html_text t;
	assert_int_equal(html_extract(bad, nb, 0, &t), 0);
	assert_string_equal(t.charset, "GB18030");
	assert_int_equal(t.invalid, 4); /* FF FF, 81, and the D6 cut at the end */
	assert_non_null(strstr(t.text, "网页去重为什么难"));
	assert_non_null(strstr(t.text, "局部敏感的指纹"));
	html_text_free(&t);
	struct simhash_result rg = hash_of_page(gbk, ng), rb = hash_of_page(bad, nb);
	assert_true(simhash_distance(rg.hash, rb.hash) <= ROBUST_BITS);
	free(gbk);
	free(bad);
	/* invalid UTF-8 is skipped byte by byte */
	const char u[] = "<p>中文网页里有几个坏字节：\xff，\xc3\x28，\xe2\x82 \xed\xa0\x80 "
			 "\xc0\xaf，其余的文字都应该保留下来，包括这一整句话。</p>";
	assert_int_equal(html_extract(u, sizeof u - 1, 0, &t), 0);
	assert_string_equal(t.charset, "UTF-8");
	assert_int_equal(t.invalid, 9); /* FF, C3, E2 82, ED A0 80, C0 AF */
	assert_string_equal(t.text, "中文网页里有几个坏字节：，(， ，其余的文字都应该保留下来，包括这一整句话。");
	html_text_free(&t);
}

/* ---- binary ---- */

static void assert_binary(const void *buf, size_t len)
{
	struct html_text t;
	assert_int_equal(html_extract(buf, len, 0, &t), 0);
	assert_true(t.binary);
	assert_null(t.text);
	assert_int_equal(t.len, 0);
	struct simhash_result r = hash_of_page(buf, len);
	assert_true(r.none);
	assert_int_equal(r.features, 0);
	assert_true(r.hash == 0);
}

/* html_count_controls skips 8 bytes at a time where nothing is to be
 * counted (tabs and line ends included): the counts equal a count byte by
 * byte, whatever the mix of controls, tabs, line ends, DEL, C1 sequences,
 * text and any other byte. */
static void test_count_controls(void **state)
{
	(void)state;
	static const uint8_t alphabet[] = { 0, 1, '\t', '\n', 0x0B, '\f', '\r', 0x1A, 0x1B, 0x1F, ' ',
					     'a', '<', 0x7F, 0x80, 0x9F, 0xA0, 0xC2, 0xC3, 0xFF };
	uint64_t seed = 42;
	uint8_t buf[96];
	for (int round = 0; round < 20000; round++) {
		size_t n = (size_t)(rng_next(&seed) % sizeof buf);
		unsigned plain = (unsigned)(rng_next(&seed) % 4); /* mostly text in some rounds */
		for (size_t i = 0; i < n; i++) {
			uint64_t r = rng_next(&seed);
			/* every fifth round draws from all 256 byte values: the
			 * edges of the word test's ranges (0x08/0x09, 0x0D/0x0E,
			 * 0x19/0x1A, 0x1B/0x1C, 0x1F/0x20) */
			buf[i] = r % 4 < plain ? 'x'
				 : round % 5 == 4 ? (uint8_t)(r >> 8)
						  : alphabet[(r >> 8) % sizeof alphabet];
		}
		size_t limit = round % 3 ? SIZE_MAX : (size_t)(rng_next(&seed) % (sizeof buf + 1));
		bool c1 = round & 1;
		size_t want_nul = 0, want_ctrl = 0, m = n < limit ? n : limit;
		for (size_t i = 0; i < m; i++) {
			uint8_t c = buf[i];
			want_nul += !c;
			want_ctrl += (c < 0x20 && c != '\t' && c != '\n' && c != 0x0B && c != '\f' && c != '\r' &&
				      c != 0x1B && c != 0x1A) || c == 0x7F ||
				     (c1 && c == 0xC2 && i + 1 < n && buf[i + 1] >= 0x80 && buf[i + 1] < 0xA0);
		}
		size_t nul, ctrl;
		html_count_controls(buf, n, limit, c1, &nul, &ctrl);
		if (nul != want_nul || ctrl != want_ctrl)
			fail_msg("round %d (n %zu, limit %zu, c1 %d): %zu NULs and %zu controls, want %zu and %zu", round,
				 n, limit, c1, nul, ctrl, want_nul, want_ctrl);
	}
}

static void test_binary(void **state)
{
	(void)state;
	uint8_t b[8192];
	uint64_t seed = 42;
	for (size_t i = 0; i < sizeof b; i += 8) {
		uint64_t r = rng_next(&seed);
		memcpy(b + i, &r, 8);
	}
	assert_binary(b, sizeof b); /* random bytes: NULs and controls */
	memcpy(b, "\x89PNG\r\n\x1a\n", 8);
	assert_binary(b, sizeof b);
	assert_binary(b, 8); /* the signature alone */
	/* random bytes without a single NUL: the controls give it away */
	for (size_t i = 0; i < sizeof b; i++)
		b[i] = b[i] ? b[i] : 1;
	memcpy(b, "<html>", 6);
	assert_binary(b, sizeof b);
	static const char *const sigs[] = {"GIF89a", "\xff\xd8\xff\xe0", "%PDF-1.7", "PK\x03\x04",
					   "\x1f\x8b\x08", "\x7f" "ELF", "wOF2"};
	for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
		char buf[64];
		size_t n = strlen(sigs[k]);
		memcpy(buf, sigs[k], n);
		memset(buf + n, 'a', sizeof buf - n);
		assert_binary(buf, sizeof buf);
	}
	/* text with a NUL every 50 bytes: binary, as grep and git would say */
	char z[10000];
	for (size_t i = 0; i < sizeof z; i++)
		z[i] = i % 50 == 49 ? 0 : (char)('a' + i % 7);
	assert_binary(z, sizeof z);
	/* UTF-16 with its NULs is text */
	const char u16[] = "\xff\xfeh\0e\0l\0l\0o\0";
	struct html_text t;
	assert_int_equal(html_extract(u16, sizeof u16 - 1, 0, &t), 0);
	assert_false(t.binary);
	assert_string_equal(t.text, "hello");
	html_text_free(&t);
}

/* ---- near and far ---- */

/* A pretty-printer's work: a line break and an indent between tags, other
 * quotes around one attribute value. The rendered text is the same. */
static char *reformat(const char *s)
{
	size_t n = strlen(s);
	char *r = malloc(4 * n + 1), *w = r;
	assert_non_null(r);
	for (size_t i = 0; i < n; i++) {
		*w++ = s[i];
		if (s[i] == '>' && s[i + 1] == '<') {
			memcpy(w, "\n    ", 5);
			w += 5;
		}
	}
	*w = 0;
	char *q = replace(r, "<article>", "<ARTICLE CLASS=post  >");
	free(r);
	return q;
}

static void test_near_english(void **state)
{
	(void)state;
	char *a = page("en_article.html", NULL);
	struct simhash_result ra = hash_of_page(a, strlen(a));
	assert_false(ra.low_confidence);
	assert_true(ra.features > 600);

	char *date = replace(a, "Published 2023-03-14 &middot; 1,204 views",
			     "Published 2024-11-02 &middot; 98,311 views");
	char *foot = replace(a, "&copy; 2023 Coastal Review. All rights reserved.",
			     "Powered by a new engine. Hosting donated by Harbour Networks Ltd. "
			     "Subscribe to our weekly letter!");
	char *ad = replace(a, "<h2>Life on the rock</h2>",
			   "<div class=\"ad-slot\"><p>Sponsored: sea views from only 99 pounds a "
			   "night, book your cottage by the lighthouse today and get breakfast for "
			   "two included, offer ends Sunday.</p></div><h2>Life on the rock</h2>");
	char *ad_plain = replace(a, "<h2>Life on the rock</h2>",
				 "<div><p>Sponsored: sea views from only 99 pounds a night, book your "
				 "cottage by the lighthouse today and get breakfast for two included, "
				 "offer ends Sunday.</p></div><h2>Life on the rock</h2>");
	char *side = replace(a, "<li><a href=\"/p/1\">A guide to tide tables</a></li>",
			     "<li><a href=\"/p/9\">Ten ways to cook mackerel</a></li>"
			     "<li><a href=\"/p/8\">Our new podcast</a></li>");
	char *nav = replace(a, "<li><a href=\"/about-us\">About us</a></li>",
			    "<li><a href=\"/shop\">Shop</a></li><li><a href=\"/donate\">Donate</a></li>");
	char *pretty = reformat(a);
	char *edit = replace(a, "was exactly the point", "was precisely the point");
	const char *name[] = {"date and counter", "footer", "marked ad", "unmarked ad",
			      "sidebar", "menu", "reformatted", "one word"};
	char *v[] = {date, foot, ad, ad_plain, side, nav, pretty, edit};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		unsigned d = distance_of(a, v[i]);
		if (d > ROBUST_BITS)
			fail_msg("%s: distance %u", name[i], d);
		free(v[i]);
	}
	free(a);
}

static void test_near_chinese(void **state)
{
	(void)state;
	char *a = page("zh_a.utf8.html", NULL);
	char *date = replace(a, "Published 2023-03-14 &middot; 1,204 views",
			     "Published 2023-03-15 &middot; 1,377 views");
	char *foot = replace(a, "&copy; 2023 网络笔记 版权所有", "本站由某某云提供计算服务，欢迎投稿");
	char *ad = replace(a, "<h2>真正的难点</h2>",
			   "<div class=\"ad\"><p>限时优惠：新用户注册即送三十天会员，点击立即领取！</p>"
			   "</div><h2>真正的难点</h2>");
	char *pretty = reformat(a);
	char *v[] = {date, foot, ad, pretty};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		unsigned d = distance_of(a, v[i]);
		if (d > ROBUST_BITS)
			fail_msg("change %zu: distance %u", i, d);
		free(v[i]);
	}
	free(a);
}

static void test_far(void **state)
{
	(void)state;
	const char *pairs[][2] = {
		{"en_article.html", "en_other.html"},
		{"zh_a.utf8.html", "zh_b.utf8.html"}, /* the CJK trap */
		{"zh_a.gbk.html", "zh_b.utf8.html"},
		{"en_article.html", "zh_a.utf8.html"},
	};
	for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
		char *a = page(pairs[i][0], NULL), *b = page(pairs[i][1], NULL);
		struct simhash_result ra = hash_of_page(a, strlen(a)), rb = hash_of_page(b, strlen(b));
		assert_false(ra.low_confidence);
		assert_false(rb.low_confidence);
		unsigned d = simhash_distance(ra.hash, rb.hash);
		if (d <= 10)
			fail_msg("%s and %s: distance %u", pairs[i][0], pairs[i][1], d);
		free(a);
		free(b);
	}
	/* two Chinese texts with no shared character pair are far apart too */
	struct simhash_result x = hash_of_str("今天天气很好，我们一起去公园散步吧。"
					      "公园里的花都开了，红的黄的紫的，非常漂亮。"),
			      y = hash_of_str("这台电脑的内存不够用，编译大型程序时经常卡住。"
					      "我打算下个月换一块更大的固态硬盘。");
	assert_true(x.features >= 25 && y.features >= 25);
	assert_true(simhash_distance(x.hash, y.hash) > 10);
}

/* ---- features ---- */

static void test_features(void **state)
{
	(void)state;
	struct simhash_result r;
	/* nothing to hash */
	r = hash_of_str("");
	assert_true(r.none && r.low_confidence && !r.features && !r.hash);
	r = hash_of_str(" \n\t.,;!? -- ()");
	assert_true(r.none);
	/* few words: each word and each pair of neighbours, low confidence */
	r = hash_of_str("hello world");
	assert_int_equal(r.features, 3);
	assert_true(r.low_confidence && !r.none);
	r = hash_of_str("中");
	assert_int_equal(r.features, 1);
	/* n distinct words give n words and n - 1 pairs; enough is confident */
	char words[4096] = "";
	for (int i = 0; i < 100; i++)
		snprintf(words + strlen(words), sizeof words - strlen(words), "w%c%c ",
			 'a' + i % 26, 'a' + i / 26);
	r = hash_of_str(words);
	assert_int_equal(r.features, 199);
	assert_false(r.low_confidence);
	/* CJK: one feature per character; repeats count once */
	assert_int_equal(hash_of_str("一二三四五").features, 5);
	assert_int_equal(hash_of_str("一二，三四").features, 4);
	assert_int_equal(hash_of_str("一二一二").features, 2);
	/* a repeated word adds weight, not a feature: "a b a b" has a, b, a-b, b-a */
	assert_int_equal(hash_of_str("alpha beta alpha beta").features, 4);
	/* case, width and accents */
	assert_true(hash_of_str("Hello WORLD Again").hash == hash_of_str("hello world again").hash);
	assert_true(hash_of_str("ＨＥＬＬＯ ｗｏｒｌｄ ａｇａｉｎ").hash == hash_of_str("hello world again").hash);
	assert_true(hash_of_str("ÉTÉ À PARIS").hash == hash_of_str("été à paris").hash);
	assert_true(hash_of_str("ΑΘΗΝΑ ΜΟΣΧΑ ΠΑΡΙΣΙ").hash == hash_of_str("αθηνα μοσχα παρισι").hash);
	assert_true(hash_of_str("МОСКВА ЁЛКА Дом").hash == hash_of_str("москва ёлка дом").hash);
	assert_true(hash_of_str("ete a paris").hash != hash_of_str("été à paris").hash);
	/* numbers are one word, digits inside words are kept */
	assert_true(hash_of_str("updated 2024-05-17 with 18234 views").hash ==
		    hash_of_str("updated 1999-12-31 with 7 views").hash);
	assert_true(hash_of_str("the _mm_add_epi8 function").hash !=
		    hash_of_str("the _mm_add_epi16 function").hash);
	/* punctuation and line breaks are separators; zero-width ones are not */
	assert_true(hash_of_str("one, two; three!").hash == hash_of_str("one\ntwo  three").hash);
	assert_true(hash_of_str("zero\xe2\x80\x8bwidth joins").hash == hash_of_str("zerowidth joins").hash);
	/* invalid UTF-8 separates */
	assert_true(hash_of_str("one\xfftwo three").hash == hash_of_str("one two three").hash);
}

static void test_determinism(void **state)
{
	(void)state;
	/* A fixed text has a fixed hash on every machine, in every build. If
	 * this changes, stored simhashes change: bump SIMHASH_VERSION. */
	const char *text = "The quick brown fox jumps over the lazy dog near the river bank, "
			   "while 12 ducks watch, watch, watch, watch. 敏捷的棕色狐狸跳过了懒狗，懒狗，懒狗。";
	struct simhash_result r = hash_of_str(text);
	assert_int_equal(r.features, 44);
	if (r.hash != UINT64_C(0x13566cb987d3d373))
		fail_msg("simhash of the reference text is %016llx", (unsigned long long)r.hash);
	/* the same bytes elsewhere in memory, and the page twice */
	char *copy = malloc(strlen(text) + 8);
	assert_non_null(copy);
	strcpy(copy + 3, text);
	assert_true(hash_of_str(copy + 3).hash == r.hash);
	free(copy);
	size_t n;
	char *a = page("en_article.html", &n);
	struct simhash_result p1 = hash_of_page(a, n), p2 = hash_of_page(a, n);
	assert_true(p1.hash == p2.hash && p1.features == p2.features);
	free(a);
}

/* ---- malformed and huge ---- */

static char *repeat(const char *unit, size_t total, size_t *len)
{
	size_t k = strlen(unit), n = total / k * k;
	char *b = malloc(n + 1);
	assert_non_null(b);
	for (size_t i = 0; i < n; i += k)
		memcpy(b + i, unit, k);
	b[n] = 0;
	*len = n;
	return b;
}

static void test_malformed_is_quick(void **state)
{
	(void)state;
	static const char *const units[] = {
		"<", "<!--", "<div>", "</div>", "<a ", "<p a=b ", "\"", "<a href=\"", "&#", "&amp",
		"&#x10FFFF;", "<nav>", "</nav><nav>", "<script>", "<script><", "<p>", "<a>x</a>",
		"<div class=\"menu\"><p>", "<!", "</", "<?", "<title>&lt;", "<<>>", "\xe4\xb8",
		"<svg><a>", "< p >", "<meta charset=\"gbk\">\xd6",
	};
	const size_t size = (size_t)1 << 20;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		size_t n;
		char *b = repeat(units[i], size, &n);
		double t0 = thread_cpu_seconds();
		struct html_text t;
		struct simhash_result r;
		assert_int_equal(html_extract(b, n, 0, &t), 0);
		assert_int_equal(simhash_of_page(b, n, &r), 0);
		/* Not a speed check: a scan that restarts at every unit is
		 * quadratic, about 10^11 steps (minutes of CPU) on 1 MiB, while
		 * a linear one takes well under a second even under ASan; the
		 * bound is the thread's own CPU, so the machine's load cannot
		 * trip it. */
		double cpu = thread_cpu_seconds() - t0;
		if (cpu > 30.0)
			fail_msg("1 MB of '%s' took %.1f s of CPU: superlinear", units[i], cpu);
		if (!strcmp(units[i], "<")) /* a '<' that starts nothing is text */
			assert_int_equal(t.len, n);
		html_text_free(&t);
		free(b);
	}
	/* nesting deeper than any parser's stack, then text */
	size_t n;
	char *b = repeat("<div><span><b>", 3u << 20, &n);
	memcpy(b + n - 14, "deep text here", 14);
	char *got = text_of(b, n, 0);
	assert_string_equal(got, "deep text here");
	free(got);
	free(b);
}

static void test_huge_input_truncated(void **state)
{
	(void)state;
	size_t n;
	char *b = repeat("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>\n",
			 HTML_MAX_INPUT + ((size_t)1 << 20), &n);
	struct html_text t;
	assert_int_equal(html_extract(b, n, 0, &t), 0);
	assert_true(t.truncated);
	assert_true(t.len < HTML_MAX_INPUT);
	html_text_free(&t);
	free(b);
}

static void test_errors(void **state)
{
	(void)state;
	struct html_text t;
	struct simhash_result r;
	assert_int_equal(html_extract(NULL, 5, 0, &t), -EINVAL);
	assert_null(t.text);
	assert_int_equal(html_extract("x", 1, 0, NULL), -EINVAL);
	assert_int_equal(html_extract(NULL, 0, 0, &t), 0);
	assert_string_equal(t.text, "");
	html_text_free(&t);
	html_text_free(&t); /* twice is fine */
	html_text_free(NULL);
	assert_int_equal(simhash_of_text(NULL, 3, &r), -EINVAL);
	assert_int_equal(simhash_of_text("x", 1, NULL), -EINVAL);
	assert_int_equal(simhash_of_page(NULL, 3, &r), -EINVAL);
	assert_int_equal(simhash_of_page(NULL, 0, &r), 0);
	assert_true(r.none);
}

/* ---- the fuzz corpus ---- */

static void test_fuzz_corpus(void **state)
{
	(void)state;
	const char *dir = path_of("PD_TOP", ".", "tests/fuzz/corpus");
	char base[4096];
	snprintf(base, sizeof base, "%s", dir);
	DIR *d = opendir(base);
	if (!d)
		fail_msg("cannot open %s: %s", base, strerror(errno));
	size_t count = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[8192];
		snprintf(path, sizeof path, "%s/%s", base, e->d_name);
		size_t n;
		char *b = th_read_file(path, &n);
		fuzz_check((const uint8_t *)b, n);
		free(b);
		count++;
	}
	closedir(d);
	assert_true(count >= 40);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_markup_dropped),
		cmocka_unit_test(test_entities),
		cmocka_unit_test(test_lines_and_spaces),
		cmocka_unit_test(test_boilerplate),
		cmocka_unit_test(test_link_lines),
		cmocka_unit_test(test_unclosed_boilerplate),
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_edges_keep_content),
		cmocka_unit_test(test_plain_text),
		cmocka_unit_test(test_gbk_twin),
		cmocka_unit_test(test_charset_samples),
		cmocka_unit_test(test_charset_declarations),
		cmocka_unit_test(test_invalid_bytes),
		cmocka_unit_test(test_binary),
		cmocka_unit_test(test_count_controls),
		cmocka_unit_test(test_near_english),
		cmocka_unit_test(test_near_chinese),
		cmocka_unit_test(test_far),
		cmocka_unit_test(test_features),
		cmocka_unit_test(test_determinism),
		cmocka_unit_test(test_malformed_is_quick),
		cmocka_unit_test(test_huge_input_truncated),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_fuzz_corpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
