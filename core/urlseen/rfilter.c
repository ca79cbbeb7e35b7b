/* rfilter.c - the URL-seen filter on Redis (rfilter.h has the design: the
 * leaves, their header, splits, and why exactly one host prints a URL).
 *
 * A call works a batch in rounds, each round one cluster_exec (every node's
 * share pipelined, all nodes at once):
 *   reads   the leaves of each key's path that this host knows frozen
 *           (only after a split; none while the filter has one level);
 *   writes  the test-and-record BITFIELD on the first leaf not known
 *           frozen; keys that meet a leaf frozen meanwhile go round again
 *           one level down (rare: right after a split);
 *   counts  the bunches of keys recorded per leaf, and the splits that
 *           their answers call for.
 *
 * Leaf sizes fit the allocator: Redis (with jemalloc) allocates a string of
 * B bytes in the size class above B plus its 9-byte header, and the large
 * classes are four to each doubling (16, 20, 24, 28, 32 KiB, ...); a leaf
 * of 2^20 bytes would take 1.25 MiB. So a leaf is a class less one line
 * (64 bytes), and level 0's count and leaf size are chosen together so that
 * the bytes are close to what the expected URLs need (rfilter_plan).
 */
#include "rfilter.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitfilter.h"
#include "bitpos.h"

#define META_MAGIC "pagededup-urlseen-redis"
#define META_VERSION 1
#define DEFAULT_SEED UINT64_C(0x75726C7365656E31)
#define ROUTE_SALT UINT64_C(0xC2B2AE3D27D4EB4F)
#define CHILDREN 2
/* A host adds its keys to a leaf's count in bunches of this share of the
 * leaf's capacity: one INCRBY per bunch, and at most hosts * capacity /
 * BUNCH_DIV keys past the capacity before the split. */
#define BUNCH_DIV 256
#define LINE_BITS 512
/* A leaf is frozen at this share of the load its rate allows: a path's
 * rates add up to the rate asked for only if no leaf is past its load, and
 * leaves go a little past the count that splits them (the hosts' counts
 * come in bunches, and hosts that have not yet seen a split write one
 * batch more into the frozen leaf). Measured: without it, a filter grown
 * eight-fold from its first size gave 1.12e-4 at 1e-4. */
#define FREEZE_AT 0.95
/* Smallest leaf: 16 KiB, the first of jemalloc's large classes. */
#define MIN_CLASS_LG 14

static const char create_script[] =
	"if redis.call('EXISTS', KEYS[1]) == 0 then "
	"redis.call('SETRANGE', KEYS[1], tonumber(ARGV[1]), '\\0') return 1 end return 0";

/* (level, leaf) -> value, open addressing; key 0 is empty. */
struct lmap {
	uint64_t *k;
	uint32_t *v;
	size_t cap, n;
};

struct level {
	struct bitpos bp;
	uint32_t k;
	uint64_t cap;   /* keys at the level's rate */
	uint32_t bunch; /* keys per INCRBY */
};

struct rfilter {
	struct cluster *c;
	char name[RFILTER_NAME_MAX + 1];
	double fpr;
	uint32_t lpk, c0;
	uint64_t leaf_bytes, data_lines, seed, expected;
	struct level lv[RFILTER_MAX_LEVELS];
	struct lmap frozen;  /* leaves known frozen (value 1) */
	char (*key0)[RFILTER_NAME_MAX + 24]; /* level 0's key names and slots, made once */
	uint16_t *slot0;
	struct lmap counts;  /* keys recorded and not yet counted in Redis */
	struct cluster_buf buf;
	struct cluster_cmd *cmds;
	size_t ncap;
	/* per key of a call */
	struct kstate *ks;
	size_t kcap;
	struct rfilter_stats st;
};

struct kstate {
	uint64_t x;       /* the folded key */
	uint64_t id[RFILTER_MAX_LEVELS];
	uint8_t known;    /* ids computed for levels < known */
	uint8_t lvl;      /* the level to write (or read, without record) */
	bool lost;        /* a read of its path had no answer */
	bool done;
};

void rfilter_params_default(struct rfilter_params *p)
{
	p->fpr = 1e-4;
	p->expected = 1000000;
	p->lines_per_key = 2;
	p->max_leaf_kib = 1024;
	p->min_leaves = 64;
}

/* ---- the little maps ---- */

static uint64_t lkey(unsigned level, uint64_t id)
{
	return ((uint64_t)level << 56 | id) + 1;
}

static int lmap_grow(struct lmap *m)
{
	size_t cap = m->cap ? 2 * m->cap : 1024;
	uint64_t *k = calloc(cap, sizeof *k);
	uint32_t *v = calloc(cap, sizeof *v);
	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->k[i])
			continue;
		size_t j = bitpos_mix64(m->k[i]) & (cap - 1);
		while (k[j])
			j = (j + 1) & (cap - 1);
		k[j] = m->k[i];
		v[j] = m->v[i];
	}
	free(m->k);
	free(m->v);
	m->k = k;
	m->v = v;
	m->cap = cap;
	return 0;
}

/* The slot of key, made if missing (NULL: out of memory). */
static uint32_t *lmap_slot(struct lmap *m, uint64_t key, bool make)
{
	if (m->cap) {
		size_t j = bitpos_mix64(key) & (m->cap - 1);
		while (m->k[j]) {
			if (m->k[j] == key)
				return &m->v[j];
			j = (j + 1) & (m->cap - 1);
		}
	}
	if (!make)
		return NULL;
	if ((m->n + 1) * 2 > m->cap && lmap_grow(m) != 0)
		return NULL;
	size_t j = bitpos_mix64(key) & (m->cap - 1);
	while (m->k[j])
		j = (j + 1) & (m->cap - 1);
	m->k[j] = key;
	m->v[j] = 0;
	m->n++;
	return &m->v[j];
}

static void lmap_free(struct lmap *m)
{
	free(m->k);
	free(m->v);
	memset(m, 0, sizeof *m);
}

static bool is_frozen(struct rfilter *f, unsigned level, uint64_t id)
{
	uint32_t *v = lmap_slot(&f->frozen, lkey(level, id), false);
	return v && *v;
}

static void set_frozen(struct rfilter *f, unsigned level, uint64_t id, bool frozen)
{
	uint32_t *v = lmap_slot(&f->frozen, lkey(level, id), frozen);
	if (v && *v != frozen) {
		*v = frozen;
		if (frozen)
			f->st.frozen_known++;
		else
			f->st.frozen_known--;
	}
}

/* ---- sizing ---- */

/* The jemalloc large size class at or above... the n-th from 16 KiB:
 * 16, 20, 24, 28, 32, 40, ... KiB. */
static uint64_t size_class(unsigned n)
{
	unsigned lg = MIN_CLASS_LG + n / 4;
	return (UINT64_C(1) << lg) + (uint64_t)(n % 4) * (UINT64_C(1) << (lg - 2));
}

/* Level d's rate: fpr * 3/4 * (1/4)^d, so that a path's rates add up to
 * fpr at most. Level 0, where a filter sized well keeps every URL, gets
 * most of it (3% more bits per key than fpr itself would take at 1e-4);
 * deeper levels, for growth past --expected, pay more bits per key. */
static double level_rate(double fpr, unsigned d)
{
	return fpr * 0.75 / (double)(UINT64_C(1) << (2 * d));
}

/* Keys a leaf must hold for its mean share: routing is random, so leaves
 * differ by about the square root of the mean (four of those), and hosts
 * add their counts in bunches (a few per cent). Without this room, half
 * the leaves of a filter sized for exactly its URLs would split near the
 * end. */
static double leaf_room(double mean)
{
	return mean * (1 + 3.0 / BUNCH_DIV) + 4 * sqrt(mean) + 16;
}

int rfilter_plan(const struct rfilter_params *p, uint32_t *c0, uint64_t *leaf_bytes, uint32_t *k0)
{
	uint32_t k;
	double kpl;
	int rc = bitfilter_best_k(level_rate(p->fpr, 0), p->lines_per_key, &k, &kpl);
	if (rc)
		return rc;
	uint64_t max_bytes = (uint64_t)p->max_leaf_kib << 10;
	if (max_bytes < size_class(0))
		return -EINVAL;
	unsigned nmax = 0;
	while (size_class(nmax + 1) <= max_bytes)
		nmax++;
	double max_data = (double)(size_class(nmax) / 64 - 2);
	uint64_t cmin = p->min_leaves;
	while (leaf_room((double)p->expected / (double)cmin) / (kpl * FREEZE_AT) > max_data)
		cmin++;
	if (cmin > (UINT64_C(1) << 24))
		return -EINVAL;
	uint64_t best_total = UINT64_MAX, best_c = cmin, best_bytes = size_class(nmax);
	for (uint64_t c = cmin; c <= cmin + cmin / 4 + 1; c++) {
		double lines = ceil(leaf_room((double)p->expected / (double)c) / (kpl * FREEZE_AT));
		for (unsigned n = 0; n <= nmax; n++) {
			uint64_t cls = size_class(n);
			if ((double)(cls / 64 - 2) < lines)
				continue;
			if (c * cls < best_total || (c * cls == best_total && c > best_c)) {
				best_total = c * cls;
				best_c = c;
				best_bytes = cls;
			}
			break;
		}
	}
	*c0 = (uint32_t)best_c;
	*leaf_bytes = best_bytes - 64;
	*k0 = k;
	return 0;
}

/* Levels' bits per key and capacities; false when level 0 cannot be made. */
static bool plan_levels(struct rfilter *f)
{
	for (unsigned d = 0; d < RFILTER_MAX_LEVELS; d++) {
		struct level *l = &f->lv[d];
		uint32_t k;
		double kpl;
		if (bitfilter_best_k(level_rate(f->fpr, d), f->lpk, &k, &kpl) != 0) {
			if (d == 0)
				return false;
			*l = f->lv[d - 1]; /* too tight to say: as the level above */
			continue;
		}
		bitpos_init(&l->bp, f->seed + d * BITPOS_STEP, k, f->lpk);
		l->k = k;
		l->cap = (uint64_t)(kpl * FREEZE_AT * (double)f->data_lines);
		l->bunch = (uint32_t)(l->cap / BUNCH_DIV ? l->cap / BUNCH_DIV : 1);
	}
	return true;
}

/* ---- keys and commands ---- */

static size_t leaf_key(const struct rfilter *f, unsigned level, uint64_t id, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s:%u:%" PRIu64, f->name, level, id);
	return n < 0 ? 0 : (size_t)n;
}

/* Key s's leaf at level d (computing the levels above as needed). */
static uint64_t leaf_id(const struct rfilter *f, struct kstate *s, unsigned d)
{
	while (s->known <= d) {
		unsigned l = s->known;
		uint64_t w = bitpos_mix64(s->x ^ f->seed ^ ROUTE_SALT ^ ((uint64_t)(l + 1) * BITPOS_STEP));
		if (l == 0)
			s->id[0] = ((w >> 32) * f->c0) >> 32;
		else
			s->id[l] = s->id[l - 1] * CHILDREN + (((w >> 32) * CHILDREN) >> 32);
		s->known++;
	}
	return s->id[d];
}

static int cmds_room(struct rfilter *f, size_t n)
{
	if (n <= f->ncap)
		return 0;
	struct cluster_cmd *c = realloc(f->cmds, n * sizeof *c);
	if (!c)
		return -ENOMEM;
	f->cmds = c;
	f->ncap = n;
	return 0;
}

/* "$<digits>\r\n<v>\r\n" at p; returns the end. */
static char *put_bulk_u64(char *p, uint64_t v)
{
	char t[20];
	int n = 0;
	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	*p++ = '$';
	if (n >= 10)
		*p++ = (char)('0' + n / 10);
	*p++ = (char)('0' + n % 10);
	*p++ = '\r';
	*p++ = '\n';
	while (n)
		*p++ = t[--n];
	*p++ = '\r';
	*p++ = '\n';
	return p;
}

/* Append "BITFIELD leaf GET u8 0 (SET u1 OFF 1 | GET u1 OFF)..." for key s
 * at level d as command i. */
static void put_bits_cmd(struct rfilter *f, struct kstate *s, unsigned d, bool set, size_t i)
{
	const struct level *l = &f->lv[d];
	uint64_t id = leaf_id(f, s, d);
	char kbuf[RFILTER_NAME_MAX + 48];
	const char *key = kbuf;
	size_t kl;
	uint16_t slot;
	if (d == 0) {
		key = f->key0[id];
		kl = strlen(key);
		slot = f->slot0[id];
	} else {
		kl = leaf_key(f, d, id, kbuf, sizeof kbuf);
		slot = cluster_slot(key, kl);
	}
	uint64_t l0, l1;
	struct bitpos_masks m;
	bitpos_lines(&l->bp, s->x, f->data_lines, &l0, &l1);
	bitpos_masks(&l->bp, s->x, &m);
	struct cluster_buf *b = &f->buf;
	size_t off = b->len;
	/* the fixed parts as whole strings (this is most of a client's work
	 * per URL): "SET u1 <offset> 1" per bit */
	static const char get_state[] = "$3\r\nGET\r\n$2\r\nu8\r\n$1\r\n0\r\n";
	static const char set_op[] = "$3\r\nSET\r\n$2\r\nu1\r\n";
	static const char get_op[] = "$3\r\nGET\r\n$2\r\nu1\r\n";
	static const char one[] = "$1\r\n1\r\n";
	cluster_buf_cmd(b, 2 + 3 + (set ? 4 : 3) * l->k);
	cluster_buf_arg(b, "BITFIELD", 8);
	cluster_buf_arg(b, key, kl);
	if (!cluster_buf_room(b, sizeof get_state + (size_t)l->k * (sizeof set_op + 16 + sizeof one)))
		return;
	char *p = b->p + b->len;
	memcpy(p, get_state, sizeof get_state - 1);
	p += sizeof get_state - 1;
	for (unsigned ln = 0; ln < f->lpk; ln++) {
		uint64_t base = ((ln ? l1 : l0) + 1) * LINE_BITS; /* line 0 is the header */
		for (unsigned w = 0; w < 8; w++) {
			uint64_t bits = m.m[ln][w];
			while (bits) {
				unsigned bit = (unsigned)__builtin_ctzll(bits);
				bits &= bits - 1;
				memcpy(p, set ? set_op : get_op, sizeof set_op - 1);
				p += sizeof set_op - 1;
				p = put_bulk_u64(p, base + w * 64 + bit);
				if (set) {
					memcpy(p, one, sizeof one - 1);
					p += sizeof one - 1;
				}
			}
		}
	}
	b->len = (size_t)(p - b->p);
	f->cmds[i] = (struct cluster_cmd){ .off = off, .len = b->len - off, .slot = slot };
}

/* A BITFIELD answer: the state and whether every bit was set. false: not
 * such an answer (an error reply). */
static bool parse_bits(const redisReply *r, unsigned k, bool *frozen, bool *all)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 1 + (size_t)k)
		return false;
	for (size_t i = 0; i < r->elements; i++)
		if (r->element[i]->type != REDIS_REPLY_INTEGER)
			return false;
	*frozen = r->element[0]->integer != 0;
	bool a = true;
	for (size_t i = 1; i < r->elements; i++)
		a &= r->element[i]->integer == 1;
	*all = a;
	return true;
}

static int exec(struct rfilter *f, size_t n)
{
	if (f->buf.oom)
		return -ENOMEM;
	return cluster_exec(f->c, f->buf.p, f->cmds, n);
}

/* ---- splits ---- */

static int make_leaves(struct rfilter *f, unsigned level, uint64_t first, uint64_t n)
{
	int rc = cmds_room(f, n);
	if (rc)
		return rc;
	cluster_buf_reset(&f->buf);
	for (uint64_t i = 0; i < n; i++) {
		char key[RFILTER_NAME_MAX + 48];
		size_t kl = leaf_key(f, level, first + i, key, sizeof key);
		size_t off = f->buf.len;
		cluster_buf_cmd(&f->buf, 5);
		cluster_buf_arg_str(&f->buf, "EVAL");
		cluster_buf_arg_str(&f->buf, create_script);
		cluster_buf_arg_str(&f->buf, "1");
		cluster_buf_arg(&f->buf, key, kl);
		cluster_buf_arg_u64(&f->buf, f->leaf_bytes - 1);
		f->cmds[i] = (struct cluster_cmd){ .off = off, .len = f->buf.len - off,
						   .slot = cluster_slot(key, kl) };
	}
	if ((rc = exec(f, n)) != 0)
		return rc;
	for (uint64_t i = 0; i < n && !rc; i++) {
		if (f->cmds[i].status)
			rc = f->cmds[i].status;
		else if (f->cmds[i].reply->type != REDIS_REPLY_INTEGER)
			rc = -EPROTO;
	}
	cluster_cmd_free(f->cmds, n);
	return rc;
}

/* Split leaf (level, id): its children made, then it frozen. */
static int split(struct rfilter *f, unsigned level, uint64_t id)
{
	if (level + 1 >= RFILTER_MAX_LEVELS) {
		f->st.levels_full++;
		return 0;
	}
	int rc = make_leaves(f, level + 1, id * CHILDREN, CHILDREN);
	if (rc)
		return rc;
	char key[RFILTER_NAME_MAX + 48];
	const char *argv[] = { "BITFIELD", key, "SET", "u8", "0", "1" };
	leaf_key(f, level, id, key, sizeof key);
	int status;
	(void)cluster_command(f->c, key, &status, 6, argv);
	if (status)
		return status;
	set_frozen(f, level, id, true);
	f->st.splits++;
	return 0;
}

/* Add the counts of the leaves with a bunch recorded (all: every count) to
 * their leaves; split those the answers say are full. */
static int add_counts(struct rfilter *f, bool all)
{
	struct lmap *m = &f->counts;
	size_t n = 0;
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->k[i] || !m->v[i])
			continue;
		unsigned level = (unsigned)((m->k[i] - 1) >> 56);
		if (all || m->v[i] >= f->lv[level].bunch)
			n++;
	}
	if (n == 0)
		return 0;
	int rc = cmds_room(f, n);
	if (rc)
		return rc;
	size_t *which = malloc(n * sizeof *which);
	if (!which)
		return -ENOMEM;
	cluster_buf_reset(&f->buf);
	size_t j = 0;
	for (size_t i = 0; i < m->cap && j < n; i++) {
		if (!m->k[i] || !m->v[i])
			continue;
		unsigned level = (unsigned)((m->k[i] - 1) >> 56);
		uint64_t id = (m->k[i] - 1) & ((UINT64_C(1) << 56) - 1);
		if (!all && m->v[i] < f->lv[level].bunch)
			continue;
		char key[RFILTER_NAME_MAX + 48];
		size_t kl = leaf_key(f, level, id, key, sizeof key);
		size_t off = f->buf.len;
		cluster_buf_cmd(&f->buf, 8);
		cluster_buf_arg_str(&f->buf, "BITFIELD");
		cluster_buf_arg(&f->buf, key, kl);
		cluster_buf_arg_str(&f->buf, "OVERFLOW");
		cluster_buf_arg_str(&f->buf, "SAT");
		cluster_buf_arg_str(&f->buf, "INCRBY");
		cluster_buf_arg_str(&f->buf, "u32");
		cluster_buf_arg_u64(&f->buf, 32);
		cluster_buf_arg_u64(&f->buf, m->v[i]);
		f->cmds[j] = (struct cluster_cmd){ .off = off, .len = f->buf.len - off,
						   .slot = cluster_slot(key, kl) };
		which[j++] = i;
	}
	if ((rc = exec(f, n)) != 0) {
		free(which);
		return rc;
	}
	/* the splits to make; the counts are added (or lost with a reply:
	 * then the leaf splits a little late, never early) */
	uint64_t *full = malloc(n * sizeof *full);
	size_t nfull = 0;
	for (j = 0; j < n; j++) {
		size_t i = which[j];
		unsigned level = (unsigned)((m->k[i] - 1) >> 56);
		uint64_t id = (m->k[i] - 1) & ((UINT64_C(1) << 56) - 1);
		const redisReply *r = f->cmds[j].reply;
		if (f->cmds[j].status == -EHOSTUNREACH)
			continue; /* not added: try again later */
		m->v[i] = 0;
		if (full && r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
		    r->element[0]->type == REDIS_REPLY_INTEGER &&
		    (uint64_t)r->element[0]->integer >= f->lv[level].cap && !is_frozen(f, level, id))
			full[nfull++] = lkey(level, id);
	}
	cluster_cmd_free(f->cmds, n);
	free(which);
	for (size_t i = 0; i < nfull && !rc; i++)
		rc = split(f, (unsigned)((full[i] - 1) >> 56), (full[i] - 1) & ((UINT64_C(1) << 56) - 1));
	free(full);
	return rc == -ETIMEDOUT || rc == -ECONNRESET ? 0 : rc; /* a split is done again later */
}

/* ---- a batch ---- */

/* Reads of the leaves each key's path has that this host knows frozen. */
static int read_known_frozen(struct rfilter *f, size_t n, uint8_t *verdict, bool *unreached)
{
	size_t nc = 0;
	for (size_t i = 0; i < n; i++)
		nc += f->ks[i].lvl;
	if (nc == 0)
		return 0;
	int rc = cmds_room(f, nc);
	if (rc)
		return rc;
	cluster_buf_reset(&f->buf);
	size_t j = 0;
	for (size_t i = 0; i < n; i++)
		for (unsigned d = 0; d < f->ks[i].lvl; d++)
			put_bits_cmd(f, &f->ks[i], d, false, j++);
	if ((rc = exec(f, nc)) != 0)
		return rc;
	j = 0;
	for (size_t i = 0; i < n; i++) {
		struct kstate *s = &f->ks[i];
		unsigned levels = s->lvl, lowest_active = levels;
		for (unsigned d = 0; d < levels; d++, j++) {
			const struct cluster_cmd *c = &f->cmds[j];
			bool frozen, all;
			if (s->done)
				continue;
			if (c->status == -EHOSTUNREACH) {
				verdict[i] = RFILTER_NOT_RUN;
				s->done = true;
				*unreached = true;
			} else if (c->status || !parse_bits(c->reply, f->lv[d].k, &frozen, &all)) {
				s->lost = true;
			} else if (all) {
				verdict[i] = RFILTER_SEEN;
				s->done = true;
			} else if (!frozen && d < lowest_active) {
				/* a freeze undone (a failover lost it): write here */
				lowest_active = d;
				set_frozen(f, d, s->id[d], false);
			}
		}
		s->lvl = (uint8_t)lowest_active;
	}
	cluster_cmd_free(f->cmds, nc);
	return 0;
}

/* The BITFIELD round(s): each open key tested (and recorded) in the first
 * leaf of its path not known frozen, one level further down when that
 * turns out frozen. */
static int write_round(struct rfilter *f, size_t n, bool record, uint8_t *verdict, bool *unreached)
{
	for (;;) {
		size_t nc = 0;
		for (size_t i = 0; i < n; i++)
			nc += !f->ks[i].done;
		if (nc == 0)
			return 0;
		int rc = cmds_room(f, nc);
		if (rc)
			return rc;
		cluster_buf_reset(&f->buf);
		size_t j = 0;
		for (size_t i = 0; i < n; i++)
			if (!f->ks[i].done)
				put_bits_cmd(f, &f->ks[i], f->ks[i].lvl, record, j++);
		if ((rc = exec(f, nc)) != 0)
			return rc;
		j = 0;
		for (size_t i = 0; i < n; i++) {
			struct kstate *s = &f->ks[i];
			if (s->done)
				continue;
			const struct cluster_cmd *c = &f->cmds[j++];
			unsigned d = s->lvl;
			bool frozen, all;
			if (c->status == -EHOSTUNREACH) {
				verdict[i] = RFILTER_NOT_RUN;
				*unreached = true;
			} else if (c->status || !parse_bits(c->reply, f->lv[d].k, &frozen, &all)) {
				verdict[i] = RFILTER_LOST;
				f->st.lost++;
			} else if (all) {
				verdict[i] = RFILTER_SEEN;
			} else if (frozen && d + 1 < RFILTER_MAX_LEVELS) {
				set_frozen(f, d, s->id[d], true);
				if (record)
					f->st.stray++;
				s->lvl++;
				continue; /* round again, one level down */
			} else {
				verdict[i] = s->lost ? RFILTER_LOST : RFILTER_NEW;
				if (s->lost)
					f->st.lost++;
				if (record) {
					uint32_t *cnt = lmap_slot(&f->counts, lkey(d, s->id[d]), true);
					if (cnt)
						(*cnt)++;
				}
			}
			s->done = true;
		}
		cluster_cmd_free(f->cmds, nc);
	}
}

int rfilter_check(struct rfilter *f, const uint8_t *keys, size_t n, bool record, uint8_t *verdict)
{
	if (n > f->kcap) {
		struct kstate *ks = realloc(f->ks, n * sizeof *ks);
		if (!ks)
			return -ENOMEM;
		f->ks = ks;
		f->kcap = n;
	}
	for (size_t i = 0; i < n; i++) {
		struct kstate *s = &f->ks[i];
		s->x = bitpos_fold(keys + 16 * i);
		s->known = 0;
		s->lost = s->done = false;
		unsigned d = 0;
		while (d + 1 < RFILTER_MAX_LEVELS && f->frozen.n && is_frozen(f, d, leaf_id(f, s, d)))
			d++;
		s->lvl = (uint8_t)d;
		leaf_id(f, s, d);
	}
	bool unreached = false;
	int rc = read_known_frozen(f, n, verdict, &unreached);
	if (rc == 0)
		rc = write_round(f, n, record, verdict, &unreached);
	if (rc == 0 && record)
		rc = add_counts(f, false);
	if (rc == 0 && unreached)
		rc = -EHOSTUNREACH;
	return rc;
}

int rfilter_flush(struct rfilter *f)
{
	return add_counts(f, true);
}

/* ---- opening ---- */

static bool name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > RFILTER_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

static int parse_meta(struct rfilter *f, const char *s)
{
	char magic[32];
	int version;
	unsigned lines, c0, children;
	unsigned long long bytes, seed, expected;
	double fpr;
	if (sscanf(s, "%31s %d fpr=%lg lines=%u c0=%u leafbytes=%llu children=%u seed=%llu expected=%llu",
		   magic, &version, &fpr, &lines, &c0, &bytes, &children, &seed, &expected) != 9 ||
	    strcmp(magic, META_MAGIC))
		return -EINVAL;
	if (version != META_VERSION)
		return -EPROTONOSUPPORT;
	if (!(fpr > 0 && fpr < 0.5) || (lines != 1 && lines != 2) || c0 == 0 || children != CHILDREN ||
	    bytes < 1024 || bytes % 64 != 0)
		return -EINVAL;
	f->fpr = fpr;
	f->lpk = lines;
	f->c0 = c0;
	f->leaf_bytes = bytes;
	f->data_lines = bytes / 64 - 1;
	f->seed = seed;
	f->expected = expected;
	return 0;
}

int rfilter_open(struct cluster *c, const char *name, const struct rfilter_params *p,
		 bool fpr_given, bool create, struct rfilter **out, char *err, size_t errlen)
{
	*out = NULL;
	if (!name_ok(name)) {
		snprintf(err, errlen, "the filter name '%s' may have only letters, digits, '.', '_', '-' (at most %d)",
			 name, RFILTER_NAME_MAX);
		return -EINVAL;
	}
	struct rfilter *f = calloc(1, sizeof *f);
	if (!f)
		return -ENOMEM;
	f->c = c;
	snprintf(f->name, sizeof f->name, "%s", name);
	char mkey[RFILTER_NAME_MAX + 8];
	snprintf(mkey, sizeof mkey, "%s:meta", name);
	int status, rc;
	const char *get[] = { "GET", mkey };
	redisReply *r = cluster_command(c, mkey, &status, 2, get);
	if (!r)
		goto unreachable;
	if (r->type == REDIS_REPLY_NIL && create) {
		uint32_t c0, k0;
		uint64_t bytes;
		if ((rc = rfilter_plan(p, &c0, &bytes, &k0)) != 0) {
			snprintf(err, errlen, "cannot size a filter for these parameters");
			goto fail;
		}
		char meta[256];
		snprintf(meta, sizeof meta,
			 "%s %d fpr=%.17g lines=%u c0=%u leafbytes=%llu children=%u seed=%llu expected=%llu",
			 META_MAGIC, META_VERSION, p->fpr, p->lines_per_key, c0, (unsigned long long)bytes,
			 CHILDREN, (unsigned long long)DEFAULT_SEED, (unsigned long long)p->expected);
		const char *set[] = { "SET", mkey, meta, "NX" };
		redisReply *s = cluster_command(c, mkey, &status, 4, set);
		if (!s)
			goto unreachable_r;
		/* whoever won the SET NX, read what is there */
		if (!(r = cluster_command(c, mkey, &status, 2, get)))
			goto unreachable;
	}
	if (r->type == REDIS_REPLY_NIL) {
		snprintf(err, errlen, "no filter '%s' on this cluster (--check does not make one)", name);
		rc = -ENOENT;
		goto fail;
	}
	rc = r->type == REDIS_REPLY_STRING ? parse_meta(f, r->str) : -EINVAL;
	if (rc) {
		snprintf(err, errlen, "%s: %s", mkey,
			 r->type == REDIS_REPLY_ERROR ? r->str
			 : rc == -EPROTONOSUPPORT ? "a filter of a newer format"
						  : "not a URL filter's description");
		goto fail;
	}
	if (fpr_given && f->fpr != p->fpr) {
		snprintf(err, errlen,
			 "filter '%s' was made for a false-positive rate of %g, not %g; leave out --fpr, or use another --redis-name",
			 name, f->fpr, p->fpr);
		rc = -EINVAL;
		goto fail;
	}
	f->key0 = calloc(f->c0, sizeof *f->key0);
	f->slot0 = calloc(f->c0, sizeof *f->slot0);
	if (!f->key0 || !f->slot0) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < f->c0; i++) {
		size_t kl = leaf_key(f, 0, i, f->key0[i], sizeof f->key0[i]);
		f->slot0[i] = cluster_slot(f->key0[i], kl);
	}
	if (!plan_levels(f)) {
		snprintf(err, errlen, "filter '%s': cannot size its leaves", name);
		rc = -EINVAL;
		goto fail;
	}
	if (create && (rc = make_leaves(f, 0, 0, f->c0)) != 0) {
		snprintf(err, errlen, "making the filter's leaves: %s (%s)", strerror(-rc), cluster_error(c));
		goto fail;
	}
	f->st.fpr = f->fpr;
	f->st.k0 = f->lv[0].k;
	f->st.lines_per_key = f->lpk;
	f->st.c0 = f->c0;
	f->st.children = CHILDREN;
	f->st.leaf_bytes = f->leaf_bytes;
	f->st.cap0 = f->lv[0].cap;
	f->st.expected = f->expected;
	*out = f;
	return 0;
unreachable_r:
unreachable:
	rc = status ? status : -EHOSTUNREACH;
	snprintf(err, errlen, "reading %s: %s", mkey, cluster_error(c));
fail:
	rfilter_close(f);
	return rc;
}

void rfilter_close(struct rfilter *f)
{
	if (!f)
		return;
	lmap_free(&f->frozen);
	lmap_free(&f->counts);
	free(f->key0);
	free(f->slot0);
	cluster_buf_free(&f->buf);
	free(f->cmds);
	free(f->ks);
	free(f);
}

void rfilter_get_stats(const struct rfilter *f, struct rfilter_stats *st)
{
	*st = f->st;
}
