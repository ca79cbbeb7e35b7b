/* markup.c - the simhash of a page's tags (markup.h). */
#include "markup.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

#define XXH_INLINE_ALL /* short inputs: inlined XXH3 is the faster */
#include <xxhash.h>

/* Where the body of an element that holds no tags ends: after
 * "<script", "<style" (their '>' at p), the matching close tag; else p. */
static const uint8_t *skip_raw_body(const uint8_t *tag, const uint8_t *p, const uint8_t *end)
{
	const char *close = NULL;
	if (end - tag >= 7 && !strncasecmp((const char *)tag, "<script", 7))
		close = "</script";
	else if (end - tag >= 6 && !strncasecmp((const char *)tag, "<style", 6))
		close = "</style";
	if (!close)
		return p;
	size_t n = strlen(close);
	for (const uint8_t *q = p; q + n <= end; q++) {
		q = memchr(q, '<', (size_t)(end - q));
		if (!q || q + n > end)
			break;
		if (!strncasecmp((const char *)q, close, n))
			return q;
	}
	return end;
}

/* The distinct tags seen (open addressing on the tag hashes): a tag that
 * repeats (a list's items, a table's cells) counts once, or the most
 * frequent tags of HTML would outweigh the rest in every bit, and every
 * page would get about the same simhash. Past MARKUP_DISTINCT_MAX
 * distinct tags, the rest are not counted. */
#define MARKUP_SLOTS 2048
#define MARKUP_DISTINCT_MAX (MARKUP_SLOTS * 3 / 4)

static bool first_sight(uint64_t *seen, unsigned *n, uint64_t h)
{
	h |= 1; /* 0 marks a free slot */
	for (size_t i = (size_t)(h >> 11) % MARKUP_SLOTS;; i = (i + 1) % MARKUP_SLOTS) {
		if (seen[i] == h)
			return false;
		if (!seen[i]) {
			if (*n >= MARKUP_DISTINCT_MAX)
				return false;
			seen[i] = h;
			++*n;
			return true;
		}
	}
}

uint64_t markup_simhash(const void *buf, size_t len)
{
	const uint8_t *p = buf, *end = p + len;
	int32_t v[64] = { 0 };
	uint64_t seen[MARKUP_SLOTS] = { 0 };
	unsigned tags = 0;
	while ((p = memchr(p, '<', (size_t)(end - p))) != NULL) {
		const uint8_t *tag = p;
		if (end - p >= 4 && !memcmp(p, "<!--", 4)) {
			const uint8_t *q = memmem(p + 4, (size_t)(end - p - 4), "-->", 3);
			p = q ? q + 3 : end;
			continue;
		}
		const uint8_t *gt = memchr(p, '>', (size_t)(end - p));
		if (!gt)
			break;
		size_t n = (size_t)(gt - tag + 1);
		uint64_t h = XXH3_64bits(tag, n < MARKUP_TAG_BYTES ? n : MARKUP_TAG_BYTES);
		/* an end tag says nothing its start tag did not */
		if (tag[1] != '/' && first_sight(seen, &tags, h))
			for (int b = 0; b < 64; b++)
				v[b] += (h >> b & 1) ? 1 : -1;
		p = skip_raw_body(tag, gt + 1, end);
	}
	uint64_t s = 0;
	for (int b = 0; tags && b < 64; b++)
		if (v[b] > 0)
			s |= 1ull << b;
	return s;
}
