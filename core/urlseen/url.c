/* url.c - syntax-based URL normalisation (RFC 3986 6.2.2 and 6.2.3).
 *
 * Two paths to one result. Most URLs of a crawl list are already in normal
 * form; rest_is_normal() proves that in one vector pass that builds bit masks
 * of the URL (bytes never allowed, capitals, ':' and '@', '/', '.', '?'),
 * 64 bytes at a time with AVX-512BW where the processor has it, 16 with
 * SSE2 elsewhere, and the normal form is then a copy of the input. Every
 * other URL goes through the general path: component by component
 * (scheme, userinfo, host, port, path, query; the fragment is dropped),
 * each byte classified through one 256-entry table, runs of plain bytes
 * copied 16 at a time, the dot-segment pass run only when a segment starts
 * with '.', the query sort only on request. URL_NO_FAST_PATH and
 * URL_FAST_PATH_SSE2 let the tests check that the paths and mask versions
 * agree. The caller's buffer is at least URL_NORM_CAP(len) bytes, checked
 * once, so the loops never test for room.
 *
 * Decisions beyond the letter of RFC 3986, all made so that a crawler's
 * list works as it comes: white space around the URL is trimmed (CRLF
 * files); bytes that a component may not hold are percent-encoded, as
 * browsers do when they send such a link, rather than refused (except in
 * the host, where they mean the line is not a URL); a stray '%' is "%25".
 */
#include "url.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Character classes, one bit each. */
#define C_LOWER 0x001  /* a-z */
#define C_UPPER 0x002  /* A-Z */
#define C_DIGIT 0x004  /* 0-9 */
#define C_MARK 0x008   /* - _ ~ */
#define C_DOT 0x010    /* . */
#define C_SUB 0x020    /* ! $ & ' ( ) * + , ; = */
#define C_COLON 0x040  /* : */
#define C_AT 0x080     /* @ */
#define C_SLASH 0x100  /* / */
#define C_QMARK 0x200  /* ? */
#define C_HASH 0x400   /* # */
#define C_HEX 0x800    /* 0-9 A-F a-f */
#define C_UNRES (C_LOWER | C_UPPER | C_DIGIT | C_MARK | C_DOT)

/* What each component may hold as it is (RFC 3986 3.2.1, 3.2.2, 3.3, 3.4),
 * and the part of it that is copied without a second look: everything but
 * '.' in a path (it may begin a dot segment) and capitals in a host. */
#define ALLOW_USERINFO (C_UNRES | C_SUB | C_COLON)
#define ALLOW_HOST (C_UNRES | C_SUB)
#define FAST_HOST (ALLOW_HOST & ~C_UPPER)
#define ALLOW_PATH (C_UNRES | C_SUB | C_COLON | C_AT | C_SLASH)
#define FAST_PATH (ALLOW_PATH & ~C_DOT)
#define ALLOW_QUERY (ALLOW_PATH | C_QMARK)

/* GNU range designators: accepted by GCC and Clang in C11 mode. */
static const uint16_t cls[256] = {
	['a' ... 'f'] = C_LOWER | C_HEX,
	['g' ... 'z'] = C_LOWER,
	['A' ... 'F'] = C_UPPER | C_HEX,
	['G' ... 'Z'] = C_UPPER,
	['0' ... '9'] = C_DIGIT | C_HEX,
	['-'] = C_MARK, ['_'] = C_MARK, ['~'] = C_MARK,
	['.'] = C_DOT,
	['!'] = C_SUB, ['$'] = C_SUB, ['&'] = C_SUB, ['\''] = C_SUB, ['('] = C_SUB,
	[')'] = C_SUB, ['*'] = C_SUB, ['+'] = C_SUB, [','] = C_SUB, [';'] = C_SUB,
	['='] = C_SUB,
	[':'] = C_COLON,
	['@'] = C_AT,
	['/'] = C_SLASH,
	['?'] = C_QMARK,
	['#'] = C_HASH,
};
static const char hexdig[] = "0123456789ABCDEF";

static inline uint8_t lower(uint8_t c)
{
	return (uint8_t)(cls[c] & C_UPPER ? c + 32 : c);
}

static inline unsigned hexval(uint8_t c)
{
	return c <= '9' ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
}

static inline bool is_ws(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

enum comp { COMP_USER, COMP_HOST, COMP_PATH, COMP_QUERY };

#if defined(__SSE2__)
#include <emmintrin.h>

/* Bytes of v in lo .. lo+n-1: unsigned range check through a signed
 * compare of v shifted so that lo lands on -128. */
static inline __m128i in_range(__m128i v, int lo, int n)
{
	__m128i x = _mm_add_epi8(v, _mm_set1_epi8((char)(signed char)(0x80 - lo)));
	return _mm_cmplt_epi8(x, _mm_set1_epi8((char)(signed char)(-128 + n)));
}

static inline __m128i eq(__m128i v, char c)
{
	return _mm_cmpeq_epi8(v, _mm_set1_epi8(c));
}

/* Bit i set: byte i of v is one that the component copies unchanged, from a
 * subset of the scalar loop's fast bytes (letters, digits, a few marks). */
static inline unsigned plain_mask(__m128i v, enum comp kind)
{
	__m128i m = _mm_or_si128(in_range(v, 'a', 26), in_range(v, '0', 10));
	m = _mm_or_si128(m, eq(v, '-'));
	if (kind == COMP_HOST) {
		m = _mm_or_si128(m, eq(v, '.'));
	} else {
		m = _mm_or_si128(m, in_range(v, 'A', 26));
		m = _mm_or_si128(m, _mm_or_si128(eq(v, '_'), eq(v, '/')));
		if (kind == COMP_QUERY)
			m = _mm_or_si128(_mm_or_si128(m, eq(v, '.')),
					 _mm_or_si128(_mm_or_si128(eq(v, '='), eq(v, '&')),
						      eq(v, '+')));
	}
	return (unsigned)_mm_movemask_epi8(m);
}
#endif

/* Copy from *sp up to e, or to the first byte in stop, into o, normalising
 * percent-encodings and encoding what allow does not admit; bytes in
 * `fast` are copied as they are (and runs of the commonest of them 16 at a
 * time). COMP_HOST: lower-case letters and refuse disallowed ASCII.
 * COMP_PATH: set *dots if a segment starts with '.' (after decoding).
 * Returns the new end of the output and leaves *sp where it stopped, or
 * returns NULL with *why set. Always inlined, so that the kind and the
 * masks are constants in each copy of the loop.
 *
 * Room: the output never passes 3 bytes per input byte read, so a 16-byte
 * store while 16 input bytes remain stays within URL_NORM_CAP. */
static inline __attribute__((always_inline)) uint8_t *
component(const uint8_t **sp, const uint8_t *e, uint8_t *o, unsigned fast, unsigned allow,
	  unsigned stop, enum comp kind, bool *dots, const char **why)
{
	const uint8_t *s = *sp;
	for (;;) {
#if defined(__SSE2__)
		if (kind != COMP_USER) {
			while (e - s >= 16) {
				__m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
				unsigned m = plain_mask(v, kind);
				_mm_storeu_si128((__m128i *)(void *)o, v);
				if (m == 0xFFFF) {
					s += 16;
					o += 16;
					continue;
				}
				unsigned n = (unsigned)__builtin_ctz(~m);
				s += n;
				o += n;
				break;
			}
		}
#endif
		if (s >= e)
			break;
		uint8_t c = *s;
		unsigned k = cls[c];
		if (k & fast) {
			*o++ = c;
			s++;
			continue;
		}
		if (k & stop)
			break;
		if (c == '%') {
			if (e - s >= 3 && (cls[s[1]] & C_HEX) && (cls[s[2]] & C_HEX)) {
				uint8_t v = (uint8_t)(hexval(s[1]) << 4 | hexval(s[2]));
				if (cls[v] & C_UNRES) {
					if (kind == COMP_HOST)
						v = lower(v);
					if (kind == COMP_PATH && v == '.' && o[-1] == '/')
						*dots = true;
					*o++ = v;
				} else {
					*o++ = '%';
					*o++ = (uint8_t)hexdig[v >> 4];
					*o++ = (uint8_t)hexdig[v & 15];
				}
				s += 3;
			} else {
				*o++ = '%';
				*o++ = '2';
				*o++ = '5';
				s++;
			}
			continue;
		}
		if (k & allow) {
			if (kind == COMP_HOST)
				c = lower(c);
			if (kind == COMP_PATH && c == '.' && o[-1] == '/')
				*dots = true;
			*o++ = c;
			s++;
			continue;
		}
		if (c <= 0x20 || c == 0x7F) {
			*why = "space or control character";
			return NULL;
		}
		if (kind == COMP_HOST && c < 0x80) {
			*why = "bad character in host";
			return NULL;
		}
		*o++ = '%';
		*o++ = (uint8_t)hexdig[c >> 4];
		*o++ = (uint8_t)hexdig[c & 15];
		s++;
	}
	*sp = s;
	return o;
}

/* The end of the authority (the first '/', '?' or '#'), noting its last '@'
 * and last ':'. */
static inline const uint8_t *authority_end(const uint8_t *p, const uint8_t *e,
					   const uint8_t **at, const uint8_t **colon)
{
	for (;;) {
#if defined(__SSE2__)
		while (e - p >= 16) {
			__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
			__m128i m = _mm_or_si128(_mm_or_si128(eq(v, '/'), eq(v, '?')),
						 _mm_or_si128(_mm_or_si128(eq(v, '#'), eq(v, '@')),
							      eq(v, ':')));
			unsigned bits = (unsigned)_mm_movemask_epi8(m);
			if (!bits) {
				p += 16;
				continue;
			}
			p += __builtin_ctz(bits);
			break;
		}
#endif
		if (p >= e)
			return p;
		unsigned k = cls[*p];
		if (k & (C_SLASH | C_QMARK | C_HASH))
			return p;
		if (k & C_AT)
			*at = p;
		else if (k & C_COLON)
			*colon = p;
		p++;
	}
}

size_t url_remove_dot_segments(char *path, size_t len)
{
	/* The path is a sequence of "/segment"; each is read at r and either
	 * dropped ("."), pops the last written one (".."), or is moved down to
	 * w. Writing never overtakes reading, so this works in place. A
	 * final "." or ".." leaves the path ending in "/" (RFC 3986 5.2.4). */
	size_t r = 0, w = 0;
	if (len == 0 || path[0] != '/')
		return len;
	while (r < len) {
		size_t s = r + 1, e = s; /* segment path[s..e), after the '/' at r */
		while (e < len && path[e] != '/')
			e++;
		size_t n = e - s;
		bool last = e == len;
		if (n == 1 && path[s] == '.') {
			if (last)
				path[w++] = '/';
		} else if (n == 2 && path[s] == '.' && path[s + 1] == '.') {
			while (w > 0 && path[w - 1] != '/')
				w--;
			if (w > 0)
				w--; /* the '/' that began the popped segment */
			if (last)
				path[w++] = '/';
		} else {
			memmove(path + w, path + r, n + 1);
			w += n + 1;
		}
		r = e;
	}
	return w;
}

/* Default port of a (lower-case) scheme, 0 if none. */
static unsigned default_port(const uint8_t *s, size_t n)
{
	if (n == 4 && !memcmp(s, "http", 4))
		return 80;
	if (n == 5 && !memcmp(s, "https", 5))
		return 443;
	if (n == 2 && !memcmp(s, "ws", 2))
		return 80;
	if (n == 3 && !memcmp(s, "wss", 3))
		return 443;
	if (n == 3 && !memcmp(s, "ftp", 3))
		return 21;
	return 0;
}

struct param {
	const char *p;
	size_t n;
};

static int param_cmp(const void *a, const void *b)
{
	const struct param *x = a, *y = b;
	size_t n = x->n < y->n ? x->n : y->n;
	int c = memcmp(x->p, y->p, n);
	if (c)
		return c;
	return x->n < y->n ? -1 : x->n > y->n;
}

/* Sort the '&'-separated parameters of q[0..len) and drop empty ones, in
 * place; returns the new length. */
static int sort_query(char *q, size_t len, size_t *newlen)
{
	struct param stack_params[32], *v = stack_params;
	char stack_copy[1024], *copy = stack_copy;
	size_t np = 1, n = 0;
	int rc = 0;

	for (size_t i = 0; i < len; i++)
		np += q[i] == '&';
	if (np == 1) {
		*newlen = len;
		return 0;
	}
	if (np > sizeof stack_params / sizeof stack_params[0] &&
	    !(v = malloc(np * sizeof *v)))
		return -ENOMEM;
	if (len > sizeof stack_copy && !(copy = malloc(len))) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(copy, q, len);
	for (size_t i = 0, start = 0; i <= len; i++) {
		if (i == len || copy[i] == '&') {
			if (i > start)
				v[n++] = (struct param){ copy + start, i - start };
			start = i + 1;
		}
	}
	qsort(v, n, sizeof *v, param_cmp);
	size_t w = 0;
	for (size_t i = 0; i < n; i++) {
		if (i)
			q[w++] = '&';
		memcpy(q + w, v[i].p, v[i].n);
		w += v[i].n;
	}
	*newlen = w;
out:
	if (copy != stack_copy)
		free(copy);
	if (v != stack_params)
		free(v);
	return rc;
}

/* ---- the fast path: a URL already in normal form ----
 *
 * Most URLs of a crawl list are already normal: a lower-case scheme and
 * host, no port, userinfo, percent sign, fragment or dot segment, only
 * characters a URL may hold, a path that starts with '/'. Then the normal
 * form is the input itself, and proving it takes one SSE2 pass of masks
 * over the URL (one bit per byte: bytes never allowed, capitals, ':' and
 * '@', '/', '.', '?') instead of the byte-by-byte copy. Anything else goes
 * the long way, which gives the same result for these URLs (the unit tests
 * compare both on every input they use). */
#if defined(__SSE2__)
struct fmask {
	uint64_t bad, upper, colat, slash, dot, qmark;
};

/* Add the masks of the n <= 16 bytes at x to m, at bit `shift`. Fewer than
 * 16 bytes: with overlap, the 16 bytes that end at x + n are readable and
 * loaded; without, the n bytes are copied into a padded block. */
static inline void fmask16(const uint8_t *x, unsigned n, bool overlap, struct fmask *m,
			   unsigned shift)
{
	__m128i v;
	uint8_t pad[16];
	unsigned drop = 0;
	if (n == 16) {
		v = _mm_loadu_si128((const __m128i *)(const void *)x);
	} else if (overlap) { /* the 16 bytes that end at x + n */
		v = _mm_loadu_si128((const __m128i *)(const void *)(x + n - 16));
		drop = 16 - n;
	} else {
		memset(pad, 'a', sizeof pad);
		memcpy(pad, x, n);
		v = _mm_loadu_si128((const __m128i *)(const void *)pad);
	}
	/* never allowed: outside '!'..'~', and " # % < > [ \ ] ^ ` { | } */
	__m128i bad = _mm_xor_si128(in_range(v, '!', '~' - '!' + 1), _mm_set1_epi8((char)0xFF));
	bad = _mm_or_si128(bad, _mm_or_si128(eq(v, '"'), eq(v, '#')));
	bad = _mm_or_si128(bad, _mm_or_si128(eq(v, '%'), eq(v, '<')));
	bad = _mm_or_si128(bad, _mm_or_si128(eq(v, '>'), eq(v, '`')));
	bad = _mm_or_si128(bad, _mm_or_si128(in_range(v, '[', 4), in_range(v, '{', 3)));
	unsigned b = (unsigned)_mm_movemask_epi8(bad) >> drop;
	unsigned u = (unsigned)_mm_movemask_epi8(in_range(v, 'A', 26)) >> drop;
	unsigned c = (unsigned)_mm_movemask_epi8(_mm_or_si128(eq(v, ':'), eq(v, '@'))) >> drop;
	unsigned sl = (unsigned)_mm_movemask_epi8(eq(v, '/')) >> drop;
	unsigned d = (unsigned)_mm_movemask_epi8(eq(v, '.')) >> drop;
	unsigned q = (unsigned)_mm_movemask_epi8(eq(v, '?')) >> drop;
	unsigned keep = n == 16 ? 0xFFFFu : (1u << n) - 1;
	m->bad |= (uint64_t)(b & keep) << shift;
	m->upper |= (uint64_t)(u & keep) << shift;
	m->colat |= (uint64_t)(c & keep) << shift;
	m->slash |= (uint64_t)(sl & keep) << shift;
	m->dot |= (uint64_t)(d & keep) << shift;
	m->qmark |= (uint64_t)(q & keep) << shift;
}

/* The masks of the n <= 64 bytes at p (bit i: byte i), with SSE2. The
 * overlapping load of a short tail reads only bytes of [p, p + len), the
 * whole URL after its scheme: len >= 16 lets it. */
static void fmask64_sse2(const uint8_t *p, unsigned n, bool tail_overlap, struct fmask *m)
{
	memset(m, 0, sizeof *m);
	for (unsigned b = 0; b < n; b += 16) {
		unsigned k = n - b < 16 ? n - b : 16;
		fmask16(p + b, k, tail_overlap && b + 16 > n, m, b);
	}
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define URL_HAVE_AVX512 1
#include <immintrin.h>

/* The same masks with AVX-512BW: one masked load of up to 64 bytes (bytes
 * past n are neither read nor faulted on) and one compare per class, each
 * giving its 64-bit mask directly. About a quarter of the SSE2 version's
 * instructions for a typical URL. */
__attribute__((target("avx512bw"))) static void fmask64_avx512(const uint8_t *p, unsigned n,
							       bool tail_overlap, struct fmask *m)
{
	(void)tail_overlap;
	__mmask64 keep = n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1;
	__m512i v = _mm512_maskz_loadu_epi8(keep, p);
#define IN_RANGE(lo, cnt)                                                                     \
	_mm512_cmplt_epu8_mask(_mm512_sub_epi8(v, _mm512_set1_epi8((char)(lo))),             \
			       _mm512_set1_epi8((char)(cnt)))
#define EQ(c) _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(c))
	/* never allowed: outside '!'..'~', and " # % < > [ \ ] ^ ` { | } */
	__mmask64 bad = ~IN_RANGE('!', '~' - '!' + 1);
	bad |= EQ('"') | EQ('#') | EQ('%') | EQ('<') | EQ('>') | EQ('`');
	bad |= IN_RANGE('[', 4) | IN_RANGE('{', 3);
	m->bad = bad & keep;
	m->upper = IN_RANGE('A', 26);
	m->colat = EQ(':') | EQ('@');
	m->slash = EQ('/');
	m->dot = EQ('.');
	m->qmark = EQ('?');
#undef IN_RANGE
#undef EQ
}
#endif

typedef void fmask64_fn(const uint8_t *p, unsigned n, bool tail_overlap, struct fmask *m);

/* The widest version this processor runs, chosen on first use (a race
 * between threads stores the same pointer twice). */
static fmask64_fn *fmask64_choose(void)
{
	static fmask64_fn *chosen;
	fmask64_fn *f = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
	if (f)
		return f;
	f = fmask64_sse2;
#ifdef URL_HAVE_AVX512
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512bw"))
		f = fmask64_avx512;
#endif
	__atomic_store_n(&chosen, f, __ATOMIC_RELAXED);
	return f;
}

static inline uint64_t below(unsigned n)
{
	return n >= 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1;
}

/* Whether [p, e), the part after "scheme://", is a normal authority, path
 * and query: see above. */
static bool rest_is_normal(const uint8_t *p, const uint8_t *e, fmask64_fn *fmask64)
{
	size_t len = (size_t)(e - p);
	bool in_host = true, in_path = false, carry = false;
	size_t host = 0;
	for (size_t g = 0; g < len; g += 64) {
		struct fmask m;
		size_t n = len - g < 64 ? len - g : 64;
		fmask64(p + g, (unsigned)n, len >= 16, &m);
		if (m.bad)
			return false;
		uint64_t all = below((unsigned)n), region = all;
		if (in_host) {
			uint64_t term = m.slash | m.qmark;
			unsigned t = term ? (unsigned)__builtin_ctzll(term) : 64;
			uint64_t hmask = below(t);
			if ((m.upper | m.colat) & hmask)
				return false;
			host += t < n ? t : n;
			if (!term)
				continue;
			/* the authority ends at '/': a path follows */
			if (!(m.slash >> t & 1) || host == 0)
				return false;
			in_host = false;
			in_path = true;
			region = all & ~hmask;
		}
		if (in_path) {
			uint64_t qm = m.qmark & region;
			unsigned qpos = qm ? (unsigned)__builtin_ctzll(qm) : 64;
			uint64_t pmask = region & below(qpos);
			/* a segment that starts with '.' */
			if (m.dot & ((m.slash << 1) | (uint64_t)carry) & pmask)
				return false;
			carry = (m.slash >> 63) & 1;
			if (qm)
				in_path = false;
		}
	}
	return !in_host;
}
#endif

/* The length of the scheme when [p, e) starts with "https://" or "http://",
 * the schemes of nearly every line of a crawl list, already in lower case:
 * two compares instead of the loop over the scheme's bytes. Else 0. */
static inline size_t common_scheme(const uint8_t *p, const uint8_t *e)
{
	if (e - p >= 8 && !memcmp(p, "https://", 8))
		return 5;
	if (e - p >= 7 && !memcmp(p, "http://", 7))
		return 4;
	return 0;
}

static inline bool is_scheme_char(uint8_t c)
{
	return (cls[c] & (C_LOWER | C_UPPER | C_DIGIT)) || c == '+' || c == '-' || c == '.';
}

int url_normal_form(const char *in, size_t len, unsigned flags, char *out, size_t cap,
		    const char **form, size_t *formlen, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;

	const uint8_t *s = (const uint8_t *)in, *e = s + len;
	while (s < e && is_ws(*s))
		s++;
	while (e > s && is_ws(e[-1]))
		e--;
	if (s == e) {
		*why = "empty";
		return -EINVAL;
	}
	if ((size_t)(e - s) > URL_MAX_LEN) {
		*why = "longer than 65536 bytes";
		return -EINVAL;
	}
	if (cap < URL_NORM_CAP(e - s))
		return -ENOSPC;

	uint8_t *o = (uint8_t *)out, *o0 = o;

	/* scheme ":" "//" */
	const uint8_t *p = s;
	if (!(cls[*p] & (C_LOWER | C_UPPER))) {
		*why = "no scheme";
		return -EINVAL;
	}
	bool lower_seen = false; /* a capital in the scheme */
	size_t known = common_scheme(p, e);
	if (known) {
		memcpy(o, p, known);
		o += known;
		p += known;
	} else {
		while (p < e && is_scheme_char(*p)) {
			lower_seen |= (cls[*p] & C_UPPER) != 0;
			*o++ = lower(*p++);
		}
	}
	if (p == e || *p != ':') {
		*why = "no scheme";
		return -EINVAL;
	}
	const uint8_t *scheme = o0;
	size_t scheme_len = (size_t)(o - o0);
	if (e - p < 3 || p[1] != '/' || p[2] != '/') {
		*why = "no authority (scheme://host...)";
		return -EINVAL;
	}
	memcpy(o, "://", 3);
	o += 3;
	p += 3;
#if defined(__SSE2__)
	if (!(flags & (URL_SORT_QUERY | URL_NO_FAST_PATH)) && !lower_seen &&
	    rest_is_normal(p, e, flags & URL_FAST_PATH_SSE2 ? fmask64_sse2 : fmask64_choose())) {
		/* the scheme had no capitals either: the input is the form */
		*form = (const char *)s;
		*formlen = (size_t)(e - s);
		return 0;
	}
#endif

	/* authority: up to the first '/', '?' or '#'; the userinfo ends at its
	 * last '@', the port starts at its last ':' */
	const uint8_t *a = p, *at = NULL, *colon = NULL;
	p = authority_end(p, e, &at, &colon);
	const uint8_t *aend = p, *hs = at ? at + 1 : a;
	if (at) { /* userinfo */
		const uint8_t *u = a;
		if (!(o = component(&u, at, o, ALLOW_USERINFO, ALLOW_USERINFO, 0, COMP_USER, NULL,
				    why)))
			return -EINVAL;
		*o++ = '@';
	}
	/* host [":" port] */
	const uint8_t *he, *port = NULL;
	if (hs < aend && *hs == '[') {
		he = hs + 1;
		while (he < aend && *he != ']')
			he++;
		if (he == aend) {
			*why = "bad IPv6 literal";
			return -EINVAL;
		}
		for (const uint8_t *q = hs + 1; q < he; q++) {
			if (!(cls[*q] & (C_UNRES | C_SUB | C_COLON))) {
				*why = "bad IPv6 literal";
				return -EINVAL;
			}
		}
		he++; /* past ']' */
		if (he < aend) {
			if (*he != ':') {
				*why = "bad IPv6 literal";
				return -EINVAL;
			}
			port = he + 1;
		}
		for (const uint8_t *q = hs; q < he; q++)
			*o++ = lower(*q);
	} else {
		he = aend;
		if (colon && colon >= hs) { /* not one in the userinfo */
			he = colon;
			port = colon + 1;
		}
		const uint8_t *h = hs;
		if (!(o = component(&h, he, o, FAST_HOST, ALLOW_HOST, 0, COMP_HOST, NULL, why)))
			return -EINVAL;
	}
	if (hs == he && default_port(scheme, scheme_len)) {
		*why = "empty host";
		return -EINVAL;
	}
	if (port) {
		unsigned long v = 0;
		for (const uint8_t *q = port; q < aend; q++) {
			if (*q < '0' || *q > '9') {
				*why = "bad port";
				return -EINVAL;
			}
			v = v * 10 + (unsigned)(*q - '0');
			if (v > 65535) {
				*why = "bad port";
				return -EINVAL;
			}
		}
		if (port < aend && v != default_port(scheme, scheme_len)) {
			char digits[8];
			int n = 0;
			do {
				digits[n++] = (char)('0' + v % 10);
				v /= 10;
			} while (v);
			*o++ = ':';
			while (n)
				*o++ = (uint8_t)digits[--n];
		}
	}

	/* path: up to the first '?' or '#' */
	uint8_t *opath = o;
	bool dots = false;
	if (!(o = component(&p, e, o, FAST_PATH, ALLOW_PATH, C_QMARK | C_HASH, COMP_PATH, &dots,
			    why)))
		return -EINVAL;
	if (o == opath)
		*o++ = '/';
	else if (dots)
		o = opath + url_remove_dot_segments((char *)opath, (size_t)(o - opath));

	/* query; the fragment is dropped */
	if (p < e && *p == '?') {
		p++;
		*o++ = '?';
		uint8_t *oq = o;
		if (!(o = component(&p, e, o, ALLOW_QUERY, ALLOW_QUERY, C_HASH, COMP_QUERY, NULL,
				    why)))
			return -EINVAL;
		if (flags & URL_SORT_QUERY) {
			size_t n;
			int rc = sort_query((char *)oq, (size_t)(o - oq), &n);
			if (rc)
				return rc;
			o = oq + n;
		}
	}
	*form = out;
	*formlen = (size_t)(o - o0);
	return 0;
}

int url_normalize(const char *in, size_t len, unsigned flags, char *out, size_t cap,
		  size_t *outlen, const char **why)
{
	const char *form;
	int rc = url_normal_form(in, len, flags, out, cap, &form, outlen, why);
	if (rc == 0 && form != out)
		memcpy(out, form, *outlen);
	return rc;
}
