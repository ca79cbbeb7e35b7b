/* charset.c - a page's bytes as UTF-8: charset labels, UTF-16 without a
 * BOM, the choice of a decoder that fits the bytes, and the conversion.
 * The rules (which charset wins, what "fits" means) are in html.h, whose
 * extractor is the only caller; this file keeps them apart from the HTML.
 *
 * UTF-8 is read and written by hand (RFC 3629), windows-1252 (what
 * Latin-1 and ASCII labels mean, as in browsers) by a table, everything
 * else by glibc's iconv, which skips invalid bytes one code unit at a time.
 */
#include "charset.h"

#include <errno.h>
#include <iconv.h>
#include <stdlib.h>
#include <string.h>

/* Non-ASCII bytes looked at to guess between GB18030 and windows-1252. */
#define GUESS_BYTES 65536

static bool is_ascii_alnum(uint8_t c)
{
	return (uint8_t)((c | 0x20) - 'a') < 26 || (uint8_t)(c - '0') < 10;
}

static uint8_t ascii_lower(uint8_t c)
{
	return (uint8_t)(c - 'A') < 26 ? (uint8_t)(c | 0x20) : c;
}

/* ---- UTF-8 ---- */

/* Invalid and non-ASCII byte counts of s as UTF-8. Eight bytes at a time
 * while they are ASCII, which most pages mostly are. */
static void utf8_check(const uint8_t *s, size_t n, size_t *invalid, size_t *nonascii)
{
	size_t i = 0, bad = 0, hi = 0;
	while (i < n) {
		if (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, s + i, 8);
			if (!(w & UINT64_C(0x8080808080808080))) {
				i += 8;
				continue;
			}
		}
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		uint32_t cp;
		size_t k = charset_utf8_seq(s + i, n - i, &cp);
		if (k) {
			hi += k;
			i += k;
		} else {
			hi++;
			bad++;
			i++;
		}
	}
	*invalid = bad;
	*nonascii = hi;
}

/* windows-1252 0x80..0x9F (the five undefined bytes map to C1 controls,
 * which the extractor drops, as WHATWG's decoder does). */
static const uint16_t cp1252_c1[32] = {
	0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
	0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
	0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
	0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178,
};

uint32_t charset_cp1252_c1(uint32_t v)
{
	return v >= 0x80 && v < 0xA0 ? cp1252_c1[v - 0x80] : v;
}

/* ---- charsets ---- */

/* Labels, reduced to lowercase letters and digits ("ISO_8859-1:1987" ->
 * "iso88591"), and the decoder used for them. UTF-16 labels in a <meta>
 * mean UTF-8: a page whose meta could be read as ASCII is not UTF-16. */
static const struct cs_label {
	const char *label;
	const char *charset;
} cs_labels[] = {
	{"utf8", "UTF-8"}, {"unicode11utf8", "UTF-8"}, {"unicode20utf8", "UTF-8"},
	{"xunicode20utf8", "UTF-8"}, {"utf16", "UTF-8"}, {"utf16le", "UTF-8"},
	{"utf16be", "UTF-8"}, {"unicode", "UTF-8"}, {"ucs2", "UTF-8"},
	{"csunicode", "UTF-8"}, {"iso10646ucs2", "UTF-8"}, {"unicodefeff", "UTF-8"},
	{"unicodefffe", "UTF-8"},
	/* Chinese (simplified): all supersets of GB2312 are GB18030 */
	{"gb2312", "GB18030"}, {"gbk", "GB18030"}, {"gb18030", "GB18030"},
	{"xgbk", "GB18030"}, {"chinese", "GB18030"}, {"csgb2312", "GB18030"},
	{"csiso58gb231280", "GB18030"}, {"gb231280", "GB18030"}, {"isoir58", "GB18030"},
	{"cp936", "GB18030"}, {"ms936", "GB18030"}, {"windows936", "GB18030"},
	{"euccn", "GB18030"}, {"xeuccn", "GB18030"}, {"hzgb2312", "HZ"},
	/* Chinese (traditional) */
	{"big5", "BIG5-HKSCS"}, {"big5hkscs", "BIG5-HKSCS"}, {"cnbig5", "BIG5-HKSCS"},
	{"csbig5", "BIG5-HKSCS"}, {"xxbig5", "BIG5-HKSCS"}, {"xbig5", "BIG5-HKSCS"},
	{"cp950", "BIG5-HKSCS"}, {"windows950", "BIG5-HKSCS"},
	/* Japanese */
	{"shiftjis", "CP932"}, {"sjis", "CP932"}, {"xsjis", "CP932"},
	{"csshiftjis", "CP932"}, {"mskanji", "CP932"}, {"windows31j", "CP932"},
	{"ms932", "CP932"}, {"cp932", "CP932"}, {"eucjp", "EUC-JP"},
	{"xeucjp", "EUC-JP"}, {"cseucpkdfmtjapanese", "EUC-JP"},
	{"iso2022jp", "ISO-2022-JP"}, {"csiso2022jp", "ISO-2022-JP"},
	/* Korean */
	{"euckr", "CP949"}, {"cseuckr", "CP949"}, {"ksc56011987", "CP949"},
	{"ksc56011989", "CP949"}, {"ksc5601", "CP949"}, {"csksc56011987", "CP949"},
	{"isoir149", "CP949"}, {"korean", "CP949"}, {"windows949", "CP949"},
	{"cp949", "CP949"}, {"uhc", "CP949"},
	/* Western: Latin-1 and ASCII are read as windows-1252, as browsers do */
	{"windows1252", "WINDOWS-1252"}, {"cp1252", "WINDOWS-1252"},
	{"xcp1252", "WINDOWS-1252"}, {"iso88591", "WINDOWS-1252"},
	{"iso885911987", "WINDOWS-1252"}, {"latin1", "WINDOWS-1252"},
	{"l1", "WINDOWS-1252"}, {"csisolatin1", "WINDOWS-1252"},
	{"isoir100", "WINDOWS-1252"}, {"cp819", "WINDOWS-1252"},
	{"ibm819", "WINDOWS-1252"}, {"ascii", "WINDOWS-1252"},
	{"usascii", "WINDOWS-1252"}, {"ansix341968", "WINDOWS-1252"},
	{"iso646us", "WINDOWS-1252"},
	/* other windows code pages */
	{"windows1250", "CP1250"}, {"cp1250", "CP1250"}, {"xcp1250", "CP1250"},
	{"windows1251", "CP1251"}, {"cp1251", "CP1251"}, {"xcp1251", "CP1251"},
	{"windows1253", "CP1253"}, {"cp1253", "CP1253"}, {"xcp1253", "CP1253"},
	{"windows1254", "CP1254"}, {"cp1254", "CP1254"}, {"xcp1254", "CP1254"},
	{"iso88599", "CP1254"}, {"latin5", "CP1254"}, {"l5", "CP1254"},
	{"windows1255", "CP1255"}, {"cp1255", "CP1255"}, {"xcp1255", "CP1255"},
	{"windows1256", "CP1256"}, {"cp1256", "CP1256"}, {"xcp1256", "CP1256"},
	{"windows1257", "CP1257"}, {"cp1257", "CP1257"}, {"xcp1257", "CP1257"},
	{"windows1258", "CP1258"}, {"cp1258", "CP1258"}, {"xcp1258", "CP1258"},
	{"windows874", "CP874"}, {"dos874", "CP874"}, {"tis620", "CP874"},
	{"iso885911", "CP874"},
	/* ISO 8859 and the rest */
	{"iso88592", "ISO-8859-2"}, {"latin2", "ISO-8859-2"}, {"l2", "ISO-8859-2"},
	{"iso88593", "ISO-8859-3"}, {"latin3", "ISO-8859-3"}, {"l3", "ISO-8859-3"},
	{"iso88594", "ISO-8859-4"}, {"latin4", "ISO-8859-4"}, {"l4", "ISO-8859-4"},
	{"iso88595", "ISO-8859-5"}, {"cyrillic", "ISO-8859-5"},
	{"iso88596", "ISO-8859-6"}, {"arabic", "ISO-8859-6"},
	{"iso88597", "ISO-8859-7"}, {"greek", "ISO-8859-7"}, {"greek8", "ISO-8859-7"},
	{"iso88598", "ISO-8859-8"}, {"hebrew", "ISO-8859-8"}, {"iso88598i", "ISO-8859-8"},
	{"iso885910", "ISO-8859-10"}, {"latin6", "ISO-8859-10"},
	{"iso885913", "ISO-8859-13"}, {"iso885914", "ISO-8859-14"},
	{"iso885915", "ISO-8859-15"}, {"latin9", "ISO-8859-15"},
	{"iso885916", "ISO-8859-16"},
	{"koi8r", "KOI8-R"}, {"koi8", "KOI8-R"}, {"koi", "KOI8-R"}, {"cskoi8r", "KOI8-R"},
	{"koi8u", "KOI8-U"}, {"koi8ru", "KOI8-U"},
	{"ibm866", "IBM866"}, {"cp866", "IBM866"}, {"866", "IBM866"}, {"csibm866", "IBM866"},
	{"macintosh", "MACINTOSH"}, {"mac", "MACINTOSH"}, {"xmacroman", "MACINTOSH"},
	{"csmacintosh", "MACINTOSH"},
};

/* The decoder for a label, NULL if we do not know it. A label stops at
 * ':' ("iso_8859-1:1987" reads as "iso88591"). */
const char *charset_of_label(const uint8_t *s, size_t n)
{
	char key[40];
	size_t k = 0;
	for (size_t i = 0; i < n && s[i] != ':'; i++) {
		if (is_ascii_alnum(s[i])) {
			if (k + 1 >= sizeof key)
				return NULL;
			key[k++] = (char)ascii_lower(s[i]);
		}
	}
	key[k] = 0;
	if (!k)
		return NULL;
	for (size_t i = 0; i < sizeof cs_labels / sizeof cs_labels[0]; i++)
		if (!strcmp(key, cs_labels[i].label))
			return cs_labels[i].charset;
	return NULL;
}

/* ---- UTF-16 without a BOM ---- */

/* UTF-16 without a BOM: NUL at (almost) every odd offset and (almost)
 * nowhere else means UTF-16LE text that is mostly ASCII; the mirror image
 * means UTF-16BE. NULL if neither. */
const char *charset_sniff_utf16(const uint8_t *s, size_t n)
{
	size_t pairs = (n < 4096 ? n : 4096) / 2, z0 = 0, z1 = 0;
	if (pairs < 8)
		return NULL;
	for (size_t i = 0; i < pairs; i++) {
		z0 += !s[2 * i];
		z1 += !s[2 * i + 1];
	}
	if (z1 * 10 >= pairs * 7 && z0 * 20 <= pairs)
		return "UTF-16LE";
	if (z0 * 10 >= pairs * 7 && z1 * 20 <= pairs)
		return "UTF-16BE";
	return NULL;
}

/* ---- decoding ---- */

/* Whether most non-ASCII bytes of the first GUESS_BYTES come in runs of
 * two or more, as in the double-byte CJK charsets (in Latin-1 text they
 * mostly stand alone between ASCII letters). */
static bool mostly_paired(const uint8_t *s, size_t n)
{
	size_t m = n < GUESS_BYTES ? n : GUESS_BYTES, hi = 0, paired = 0;
	for (size_t i = 0; i < m; i++) {
		if (s[i] < 0x80)
			continue;
		hi++;
		if ((i > 0 && s[i - 1] >= 0x80) || (i + 1 < n && s[i + 1] >= 0x80))
			paired++;
	}
	return paired * 10 >= hi * 8;
}

/* Decode s[0..n) from charset cs into a new UTF-8 buffer. *invalid gets
 * the bytes skipped. -ENOMEM, or -EINVAL if iconv does not know cs. */
static int decode(const uint8_t *s, size_t n, const char *cs, uint8_t **out, size_t *outlen,
		  size_t *invalid)
{
	size_t cap = 2 * n + 16, olen = 0, bad = 0;
	uint8_t *o;
	*out = NULL;
	if (!strcmp(cs, "WINDOWS-1252")) {
		o = malloc(3 * n + 1);
		if (!o)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++) {
			uint32_t cp = s[i];
			cp = charset_cp1252_c1(cp);
			olen += charset_utf8_put((char *)o + olen, cp);
		}
		*out = o;
		*outlen = olen;
		*invalid = 0;
		return 0;
	}
	size_t unit = strncmp(cs, "UTF-16", 6) ? 1 : 2; /* skip whole code units */
	iconv_t cd = iconv_open("UTF-8", cs);
	if (cd == (iconv_t)-1)
		return errno == ENOMEM ? -ENOMEM : -EINVAL;
	o = malloc(cap);
	if (!o) {
		iconv_close(cd);
		return -ENOMEM;
	}
	char *ip = (char *)s;
	size_t ileft = n;
	for (;;) {
		char *op = (char *)o + olen;
		size_t oleft = cap - olen;
		size_t r = iconv(cd, ileft ? &ip : NULL, ileft ? &ileft : NULL, &op, &oleft);
		int e = errno;
		olen = (size_t)(op - (char *)o);
		if (r != (size_t)-1)
			break;
		if (e == E2BIG) {
			size_t ncap = cap * 2;
			uint8_t *no = realloc(o, ncap);
			if (!no) {
				free(o);
				iconv_close(cd);
				return -ENOMEM;
			}
			o = no;
			cap = ncap;
		} else if (e == EILSEQ) {
			size_t k = unit < ileft ? unit : ileft;
			ip += k;
			ileft -= k;
			bad += k;
		} else { /* EINVAL: truncated sequence at the end */
			bad += ileft;
			ileft = 0;
		}
	}
	iconv_close(cd);
	*out = o;
	*outlen = olen;
	*invalid = bad;
	return 0;
}

static size_t count_nonascii(const uint8_t *s, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += s[i] >> 7;
	return k;
}


static void use(struct charset_decoded *d, const char *cs, uint8_t *buf, size_t n, size_t invalid)
{
	d->buf = buf;
	d->p = buf;
	d->n = n;
	d->charset = cs;
	d->invalid = invalid;
}

/* Decode s: bytes with a BOM (fixed) in its charset; bytes that are UTF-8
 * beyond doubt (non-ASCII, at most 1 in 64 of those bytes invalid) as
 * UTF-8 whatever their label says (mislabelled pages are common; text in a
 * legacy charset is almost never valid UTF-8); else with the declared
 * charset, else UTF-8, else the guess: the first that fits, the last one
 * whatever happens. A charset fits when at most a quarter of the non-ASCII
 * bytes are invalid in it. */
int charset_decode_page(const uint8_t *s, size_t n, const char *cs, bool fixed,
			struct charset_decoded *d)
{
	uint8_t *buf = NULL, *kept = NULL;
	size_t bn, bad, kept_n = 0, kept_bad = 0, u8_bad = 0, u8_hi = 0;
	int r;
	d->buf = NULL;
	d->p = s;
	d->n = n;
	d->charset = "UTF-8";
	d->invalid = 0;
	if (!fixed || !strcmp(cs, "UTF-8")) {
		utf8_check(s, n, &u8_bad, &u8_hi);
		if (fixed || (u8_hi && u8_bad * 64 <= u8_hi)) {
			d->invalid = u8_bad;
			return 0;
		}
	}
	if (cs && strcmp(cs, "UTF-8")) {
		r = decode(s, n, cs, &buf, &bn, &bad);
		if (r == -ENOMEM)
			return r;
		if (!r) {
			if (fixed || bad * 4 <= count_nonascii(s, n)) {
				use(d, cs, buf, bn, bad);
				return 0;
			}
			kept = buf;
			kept_n = bn;
			kept_bad = bad;
		}
	}
	if (u8_bad * 4 <= u8_hi) {
		free(kept);
		d->invalid = u8_bad;
		return 0;
	}
	const char *guess = mostly_paired(s, n) ? "GB18030" : "WINDOWS-1252";
	if (kept && !strcmp(cs, guess)) {
		use(d, cs, kept, kept_n, kept_bad);
		return 0;
	}
	free(kept);
	r = decode(s, n, guess, &buf, &bn, &bad);
	if (r == -ENOMEM)
		return r;
	if (!r)
		use(d, guess, buf, bn, bad);
	else
		d->invalid = u8_bad; /* no converter: UTF-8 it is */
	return 0;
}
