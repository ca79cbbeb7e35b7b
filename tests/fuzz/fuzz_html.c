/* fuzz_html.c - libFuzzer target for html_extract and the simhash.
 *
 * Every input goes through html_extract (with and without HTML_ALL_TEXT),
 * simhash_of_page and simhash_of_text, and the results are checked against
 * the contracts of html.h and simhash.h: no error, text NUL-terminated with
 * no NUL inside, valid UTF-8, bounded in size; HTML text in lines with no
 * leading, trailing or doubled spaces, no empty line and no control
 * character but '\n'; plain text without control characters other than
 * tab, LF, CR, FF; binary content without text and without a simhash; the
 * same result twice; simhash_of_page equal to simhash_of_text of the
 * extracted text. The sanitizers catch the rest; libFuzzer's -timeout
 * catches stalls.
 *
 * Built and run by tests/fuzz/run.sh. tests/unit/near/test_simhash.c includes
 * this file (with FUZZ_FAIL defined as a cmocka failure) and replays the
 * committed corpus, tests/fuzz/corpus/, through fuzz_check().
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/html.h"
#include "near/simhash.h"

#ifndef FUZZ_FAIL
#define FUZZ_FAIL(what)                                                         \
	do {                                                                    \
		fprintf(stderr, "fuzz_html: %s (%s:%d)\n", what, __FILE__, __LINE__); \
		abort();                                                        \
	} while (0)
#endif

#define FUZZ_CHECK(cond)                 \
	do {                             \
		if (!(cond))             \
			FUZZ_FAIL(#cond); \
	} while (0)

static bool fuzz_valid_utf8(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t k;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xC2 && c < 0xE0) {
			k = 2;
			cp = c & 0x1F;
		} else if (c >= 0xE0 && c < 0xF0) {
			k = 3;
			cp = c & 0x0F;
		} else if (c >= 0xF0 && c < 0xF5) {
			k = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i < k)
			return false;
		for (size_t j = 1; j < k; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3F);
		}
		if ((k == 3 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) ||
		    (k == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
			return false;
		i += k;
	}
	return true;
}

static void fuzz_check_text(const struct html_text *t, size_t in_len)
{
	if (t->binary) {
		FUZZ_CHECK(!t->text && !t->len);
		return;
	}
	FUZZ_CHECK(t->text != NULL);
	FUZZ_CHECK(t->text[t->len] == 0);
	FUZZ_CHECK(strlen(t->text) == t->len);
	FUZZ_CHECK(t->charset != NULL);
	size_t read = in_len < HTML_MAX_INPUT ? in_len : HTML_MAX_INPUT;
	FUZZ_CHECK(t->truncated == (in_len > HTML_MAX_INPUT));
	FUZZ_CHECK(t->len <= 4 * read + 8);
	FUZZ_CHECK(fuzz_valid_utf8((const unsigned char *)t->text, t->len));
	const char *s = t->text;
	size_t n = t->len;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (t->html) {
			FUZZ_CHECK(c >= 0x20 || c == '\n');
			FUZZ_CHECK(c != 0x7F);
			if (c == '\n') {
				FUZZ_CHECK(i > 0 && i + 1 < n);
				FUZZ_CHECK(s[i - 1] != '\n' && s[i - 1] != ' ' && s[i + 1] != ' ');
			} else if (c == ' ') {
				FUZZ_CHECK(i > 0 && i + 1 < n);
				FUZZ_CHECK(s[i + 1] != ' ');
			}
		} else {
			FUZZ_CHECK(c >= 0x20 || c == '\t' || c == '\n' || c == '\r' || c == '\f');
			FUZZ_CHECK(c != 0x7F);
		}
	}
}

static void fuzz_same_text(const struct html_text *a, const struct html_text *b)
{
	FUZZ_CHECK(a->binary == b->binary && a->len == b->len && a->html == b->html);
	FUZZ_CHECK(!a->len || !memcmp(a->text, b->text, a->len));
}

/* Run every check on one input. */
static void fuzz_check(const uint8_t *data, size_t size)
{
	struct html_text main_text, again, all;
	FUZZ_CHECK(html_extract(data, size, 0, &main_text) == 0);
	fuzz_check_text(&main_text, size);
	FUZZ_CHECK(html_extract(data, size, 0, &again) == 0);
	fuzz_same_text(&main_text, &again);
	html_text_free(&again);
	FUZZ_CHECK(html_extract(data, size, HTML_ALL_TEXT, &all) == 0);
	fuzz_check_text(&all, size);
	FUZZ_CHECK(all.binary == main_text.binary);
	html_text_free(&all);

	struct simhash_result page, text;
	FUZZ_CHECK(simhash_of_page(data, size, &page) == 0);
	if (main_text.binary) {
		FUZZ_CHECK(page.none && !page.hash);
	} else {
		FUZZ_CHECK(simhash_of_text(main_text.text, main_text.len, &text) == 0);
		FUZZ_CHECK(page.hash == text.hash && page.features == text.features &&
			   page.none == text.none && page.low_confidence == text.low_confidence);
		FUZZ_CHECK(page.none == (page.features == 0));
		FUZZ_CHECK(page.low_confidence == (page.features < SIMHASH_MIN_FEATURES));
		FUZZ_CHECK(!page.none || !page.hash);
	}
	html_text_free(&main_text);
	/* the raw bytes as text: invalid UTF-8 is a separator, never an error */
	FUZZ_CHECK(simhash_of_text((const char *)data, size, &text) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_check(data, size);
	return 0;
}
