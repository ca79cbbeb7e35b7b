/* cdxj.c - CDXJ index lines for the records the writer writes: the index
 * pywb and OpenWayback-style replay look records up by.
 *
 * A line is "SURT TIMESTAMP JSON": the URI in SURT form (the key replay
 * tools sort and binary-search), the 14-digit WARC-Date, and a JSON object
 * with url, mime, status, digest (its base32 value without "sha1:"),
 * length, offset and filename: field for field what warcio's cdx-index
 * writes (tests/fs/t_warc.sh compares the two). The SURT
 * form follows warcio's and pywb's: for http and https, "www." (and wwwN.)
 * dropped, everything lower-cased, host labels reversed and joined by ',',
 * a non-default port kept after ':', then ')' and the path, then the query
 * with its arguments sorted; the fragment dropped. Other schemes are kept
 * as given. The caller sorts the lines (LC_ALL=C sort) into the index.
 */
#include "warc.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int qcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int cdxj_surt(const char *uri, char *out, size_t size)
{
	size_t ulen = strlen(uri);
	char *low = malloc(ulen + 1);
	if (!low)
		return -ENOMEM;
	for (size_t i = 0; i <= ulen; i++)
		low[i] = (char)tolower((unsigned char)uri[i]);
	int rc = -ENAMETOOLONG;
	const char *p;
	int def_port;
	if (!strncmp(low, "http://", 7)) {
		p = low + 7;
		def_port = 80;
	} else if (!strncmp(low, "https://", 8)) {
		p = low + 8;
		def_port = 443;
	} else {
		if (ulen < size) {
			memcpy(out, uri, ulen + 1);
			rc = (int)ulen;
		}
		free(low);
		return rc;
	}
	char *hash = strchr(p, '#');
	if (hash)
		*hash = 0;
	size_t hlen = strcspn(p, "/?");
	const char *rest = p + hlen;
	/* userinfo@ is not part of the key */
	const char *at = memchr(p, '@', hlen);
	if (at) {
		hlen -= (size_t)(at + 1 - p);
		p = at + 1;
	}
	const char *colon = memchr(p, ':', hlen);
	size_t host_len = colon ? (size_t)(colon - p) : hlen;
	int port = colon ? atoi(colon + 1) : 0;
	/* www. and wwwN. */
	if (host_len > 4 && !strncmp(p, "www", 3)) {
		size_t k = 3;
		while (k < host_len && isdigit((unsigned char)p[k]))
			k++;
		if (k < host_len && p[k] == '.') {
			p += k + 1;
			host_len -= k + 1;
		}
	}
	size_t n = 0;
	/* host labels reversed */
	size_t end = host_len;
	while (end > 0) {
		size_t start = end;
		while (start > 0 && p[start - 1] != '.')
			start--;
		size_t l = end - start;
		if (n + l + 2 >= size)
			goto out;
		memcpy(out + n, p + start, l);
		n += l;
		if (start > 0)
			out[n++] = ',';
		end = start ? start - 1 : 0;
	}
	if (port && port != def_port)
		n += (size_t)snprintf(out + n, size - n, ":%d", port);
	if (n + 2 >= size)
		goto out;
	out[n++] = ')';
	const char *q = strchr(rest, '?');
	size_t plen = q ? (size_t)(q - rest) : strlen(rest);
	if (!plen) {
		out[n++] = '/';
	} else {
		if (n + plen + 1 >= size)
			goto out;
		memcpy(out + n, rest, plen);
		n += plen;
	}
	if (q && q[1]) {
		char *qs = strdup(q + 1);
		size_t cnt = 1;
		for (char *c = qs; c && *c; c++)
			cnt += *c == '&';
		char **args = qs ? calloc(cnt, sizeof *args) : NULL;
		if (!args) {
			free(qs);
			rc = -ENOMEM;
			goto out;
		}
		size_t na = 0;
		char *save = NULL;
		for (char *a = strtok_r(qs, "&", &save); a; a = strtok_r(NULL, "&", &save))
			args[na++] = a;
		qsort(args, na, sizeof *args, qcmp);
		out[n++] = '?';
		bool fit = true;
		for (size_t i = 0; i < na && fit; i++) {
			size_t l = strlen(args[i]);
			if (n + l + 2 >= size)
				fit = false;
			else {
				if (i)
					out[n++] = '&';
				memcpy(out + n, args[i], l);
				n += l;
			}
		}
		free(args);
		free(qs);
		if (!fit)
			goto out;
	}
	out[n] = 0;
	rc = (int)n;
out:
	free(low);
	return rc;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_str(FILE *f, const char *s)
{
	putc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			putc(c, f);
	}
	putc('"', f);
}

int cdxj_line(FILE *out, const struct warc_rec *r, const char *filename)
{
	char surt[8192], ts[16];
	int n = cdxj_surt(r->target_uri, surt, sizeof surt);
	if (n < 0)
		return n;
	/* 14 digits of the WARC-Date */
	size_t k = 0;
	for (const char *d = r->date; *d && k < 14; d++)
		if (isdigit((unsigned char)*d))
			ts[k++] = *d;
	ts[k] = 0;
	bool revisit = !strcmp(r->type, "revisit");
	fprintf(out, "%s %s {\"url\":", surt, ts);
	json_str(out, r->target_uri);
	fputs(",\"mime\":", out);
	json_str(out, revisit ? "warc/revisit" : (r->mime && *r->mime ? r->mime : "unk"));
	if (r->status && *r->status && strcmp(r->status, "-")) {
		fputs(",\"status\":", out);
		json_str(out, r->status);
	}
	if (r->payload_digest) {
		fputs(",\"digest\":", out);
		/* without the "sha1:" label, as pywb and warcio index it */
		const char *d = strchr(r->payload_digest, ':');
		json_str(out, d ? d + 1 : r->payload_digest);
	}
	fprintf(out, ",\"length\":\"%llu\",\"offset\":\"%llu\",\"filename\":", (unsigned long long)r->length,
		(unsigned long long)r->offset);
	json_str(out, filename);
	fputs("}\n", out);
	return ferror(out) ? -EIO : 0;
}
