/* blob_cold.c - records encoded again, smaller, when the compactor copies
 * them; and the bookkeeping of a cold pass (`compact --all`): the mark its
 * packs carry, the "cold" rows it leaves, and the test that lets a second
 * pass leave such a pack as it is (blob.h).
 *
 * Pages are packed fast: at close() or by the delta step, at a level the
 * write path can afford (BLOB_FINAL_LEVEL), with the dictionary current
 * then (none for a store's first pages). By the time the compactor copies
 * a record, the store may have a dictionary that fits the archive better,
 * and a copy is the moment to spend more CPU on it, as `git gc
 * --aggressive` packs objects again harder than the commit wrote them.
 *
 * A record is decoded whole (which checks its XXH3-128: a damaged record
 * is -EIO, and the compactor leaves it where it is) and encoded again at
 * the cold level: a whole page with the store's newest dictionary, a delta
 * against the same base (its base is named by blob, and a base re-encoded
 * is still decoded to the same bytes, so deltas stay valid whatever
 * happens to their base's encoding). The new record is kept only when it
 * is smaller; its identity, size and XXH3-128 are those of the page, not
 * of its encoding, so they do not change.
 *
 * The window (blob.h): in a cold pass, each page it copies stays in a
 * ring of the last W pages with its raw bytes and the depth its record
 * will have; a page that is whole and that no delta hangs on is also
 * tried as a delta on each of them (a trial at a fast level, the base's
 * depth gating the size it must reach), and the best is encoded at the
 * cold level and kept when it beats the page whole. Such a record names
 * its base like any delta; the commit writes its link row, under the
 * delta rules checked again there (blob_delta_link_cold), or leaves the
 * page where it was.
 *
 * This runs outside any transaction (the compactor's copy step); the
 * commit that points the page at its copy moves the page from its old
 * dictionary's count to the new one's (blob_compact.c).
 */
#include "blob.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The raw bytes of the base delta header h names (*out malloc'd). */
static int base_bytes(struct store *st, const struct pack_rec_hdr *h, void **out, uint64_t *len)
{
	struct blobkey b = { .variant = h->base_variant };
	memcpy(b.md5, h->base_md5, 16);
	struct fprec r;
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = blob_delta_base_rec(txn, st, &b, &r);
	store_read_end(st, txn);
	if (rc)
		return rc == -ENOENT ? -EIO : rc;
	*len = r.size;
	return blob_read_packed_alloc(st, &b, &r, out);
}

/* How raw page bytes are encoded again for the record in: at level, a
 * delta on the same base (*base: its bytes, to free), or whole with the
 * newest dictionary. */
static int cold_opts(struct store *st, const struct pack_rec *in, int level, struct pack_encode_opts *o,
		     void **base)
{
	*o = (struct pack_encode_opts){ .level = level };
	*base = NULL;
	if (!pack_enc_is_delta(in->hdr.encoding)) {
		o->dict = blob_dict_hold(st); /* unheld by the caller */
		return 0;
	}
	uint64_t len;
	int rc = base_bytes(st, &in->hdr, base, &len);
	if (rc)
		return rc;
	o->base = *base;
	o->base_len = (size_t)len;
	memcpy(o->base_md5, in->hdr.base_md5, 16);
	o->base_variant = in->hdr.base_variant;
	return 0;
}

/* ---- the window (blob.h) ------------------------------------------------------ */

struct window_slot {
	struct blobkey k;
	void *raw;
	uint64_t len;
	unsigned depth; /* of the page's record as the pass leaves it */
	uint64_t mark;  /* the page's markup simhash (text/markup.h; the delta step's) */
};

struct blob_cold_window {
	unsigned slots, next;
	struct window_slot *v;
};

struct blob_cold_window *blob_cold_window_new(unsigned slots)
{
	if (slots == 0 || slots > BLOB_COLD_WINDOW_MAX)
		return NULL;
	struct blob_cold_window *win = calloc(1, sizeof *win);
	if (win && !(win->v = calloc(slots, sizeof *win->v))) {
		free(win);
		return NULL;
	}
	if (win)
		win->slots = slots;
	return win;
}

void blob_cold_window_free(struct blob_cold_window *win)
{
	if (!win)
		return;
	for (unsigned i = 0; i < win->slots; i++)
		free(win->v[i].raw);
	free(win->v);
	free(win);
}

static bool window_sized(uint64_t len)
{
	return len > 0 && len <= (1ull << PACK_DEFAULT_CHUNK_SHIFT);
}

/* Page k (raw: its bytes, taken over) joins the window at depth, the
 * oldest slot making room. */
static void window_push(struct blob_cold_window *win, const struct blobkey *k, void *raw, uint64_t len,
			unsigned depth, uint64_t mark)
{
	struct window_slot *s = &win->v[win->next];
	win->next = (win->next + 1) % win->slots;
	free(s->raw);
	*s = (struct window_slot){ .k = *k, .raw = raw, .len = len, .depth = depth, .mark = mark };
}

/* What the committed rows say of page k: how deep its record is, and
 * whether deltas hang on it (then it stays whole). */
static int page_standing(struct store *st, const struct blobkey *k, unsigned *depth, bool *has_deps)
{
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	struct fprec r;
	struct blobkey dep;
	size_t n = 0;
	rc = blob_get(txn, st, k, &r);
	if (!rc)
		rc = blob_delta_depth(txn, st, &r, depth);
	if (!rc)
		rc = blob_delta_dependents(txn, st, k, &dep, 1, &n);
	store_read_end(st, txn);
	*has_deps = n > 0;
	return rc;
}

/* What a page's record is named by: its identity, size and XXH3-128. */
struct page_id {
	const uint8_t *md5, *xxh128;
	uint32_t variant;
	uint64_t size;
};

static struct page_id id_of(const struct pack_rec *in)
{
	return (struct page_id){ in->hdr.md5, in->hdr.xxh128, in->hdr.variant, in->hdr.size };
}

/* Encode raw (page p) as a delta on slot s at level (*out, pack_rec_free). */
static int delta_on(const struct page_id *p, const void *raw, const struct window_slot *s, int level,
		    struct pack_rec *out)
{
	struct pack_encode_opts o = { .level = level, .base = s->raw, .base_len = (size_t)s->len,
				      .base_variant = s->k.variant };
	memcpy(o.base_md5, s->k.md5, 16);
	return pack_encode_page(p->md5, p->variant, p->xxh128, raw, -1, p->size, &o, out);
}

/* The page in (raw) whole with the store's newest dictionary at level:
 * the record's length, 0 when it cannot be encoded. */
static size_t whole_len(struct store *st, const struct pack_rec *in, const void *raw, int level)
{
	struct pack_encode_opts o = { .level = level, .dict = blob_dict_hold(st) };
	struct pack_rec r;
	int rc = pack_encode_page(in->hdr.md5, in->hdr.variant, in->hdr.xxh128, raw, -1, in->hdr.size, &o, &r);
	blob_dict_unhold(st, o.dict);
	if (rc)
		return 0;
	size_t len = r.len;
	pack_rec_free(&r);
	return len;
}

/* Is a delta of trial bytes on a base depth deep worth it against the
 * page whole (whole bytes, both at the trial level)? As git's
 * pack-objects scales the delta it accepts by its base's depth, the
 * deeper the base, the smaller the delta must be: any delta smaller than
 * the page on a whole base, under 1/BLOB_DELTA_DEPTH of it on a base
 * BLOB_DELTA_DEPTH - 1 deep. So a chain grows only through pages nearly
 * the same, and a page that shares less with the pages before it takes a
 * shallow base rather than none once the chains are deep (greedy, the
 * smallest delta whatever its depth, chains pages until every page of
 * the window is BLOB_DELTA_DEPTH deep, and the next page must be whole:
 * the issue-15 window note has the figures). */
static bool worth_it(size_t trial, size_t whole, unsigned depth)
{
	return depth < BLOB_DELTA_DEPTH && (uint64_t)trial * BLOB_DELTA_DEPTH < (uint64_t)whole * (BLOB_DELTA_DEPTH - depth);
}

/* The slot of win whose delta of page p (raw, key k) at level is the
 * smallest of those worth it against the page whole (whole bytes at that
 * level): 1, the delta in *out (pack_rec_free) and the slot in *slot; 0
 * when none is; -ENOMEM. */
static int best_slot(const struct blob_cold_window *win, const struct blobkey *k, const struct page_id *p,
		     const void *raw, int level, size_t whole, struct pack_rec *out, const struct window_slot **slot)
{
	memset(out, 0, sizeof *out);
	for (unsigned i = 0; i < win->slots; i++) {
		const struct window_slot *s = &win->v[i];
		if (!s->raw || s->depth >= BLOB_DELTA_DEPTH || blobkey_equal(&s->k, k))
			continue;
		struct pack_rec d;
		int rc = delta_on(p, raw, s, level, &d);
		if (rc == -ENOMEM) {
			pack_rec_free(out);
			return rc;
		}
		if (rc)
			continue; /* that base will not do: the next may */
		if (worth_it(d.len, whole, s->depth) && (!out->buf || d.len < out->len)) {
			pack_rec_free(out);
			*out = d;
			*slot = s;
		} else {
			pack_rec_free(&d);
		}
	}
	return out->buf ? 1 : 0;
}

/* The window's best delta for whole page in (raw, key k), at the cold
 * level, when it is smaller than whole (the page encoded whole at that
 * level): 1 and *out, else 0. The slots are ranked by a delta at the
 * trial level, among those worth it against the page whole at that
 * level. */
static int window_best(struct store *st, const struct pack_rec *in, const struct blobkey *k, const void *raw,
		       const struct blob_cold_window *win, int level, size_t whole, unsigned *base_depth,
		       struct pack_rec *out)
{
	size_t trial_whole = whole_len(st, in, raw, BLOB_COLD_TRIAL_LEVEL);
	struct page_id p = id_of(in);
	const struct window_slot *best = NULL;
	struct pack_rec trial;
	int rc = trial_whole ? best_slot(win, k, &p, raw, BLOB_COLD_TRIAL_LEVEL, trial_whole, &trial, &best) : 0;
	if (rc != 1)
		return rc;
	pack_rec_free(&trial);
	rc = delta_on(&p, raw, best, level, out);
	if (rc)
		return rc == -ENOMEM ? rc : 0;
	if (out->len >= whole) {
		pack_rec_free(out);
		return 0;
	}
	*base_depth = best->depth;
	return 1;
}

/* ---- the delta step's window (blob.h) ---------------------------------------- */

int blob_window_delta(struct blob_cold_window *win, const struct blobkey *k, const uint8_t xxh128[16],
		      const void *raw, uint64_t size, int level, size_t whole, struct pack_rec *out,
		      unsigned *base_depth)
{
	memset(out, 0, sizeof *out);
	if (!win || !window_sized(size))
		return 0;
	struct page_id p = { k->md5, xxh128, k->variant, size };
	const struct window_slot *s = NULL;
	int rc = best_slot(win, k, &p, raw, level, whole, out, &s);
	if (rc == 1)
		*base_depth = s->depth;
	return rc;
}

/* Slot i of win, newest first: 0 the last pushed. */
static unsigned age_of(const struct blob_cold_window *win, unsigned i)
{
	return (win->next + win->slots - 1 - i) % win->slots;
}

struct blob_cold_window *blob_window_pick(const struct blob_cold_window *win, const struct blobkey *k,
					  uint64_t mark, unsigned n)
{
	if (!win || !n)
		return NULL;
	struct blob_cold_window *c = blob_cold_window_new(n);
	bool *taken = calloc(win->slots, sizeof *taken);
	for (unsigned j = 0; c && taken && j < n; j++) {
		/* the closest markup not taken yet; of equals, the newest */
		int best = -1;
		unsigned best_d = 65, best_age = 0;
		for (unsigned i = 0; i < win->slots; i++) {
			const struct window_slot *s = &win->v[i];
			if (taken[i] || !s->raw || s->depth >= BLOB_DELTA_DEPTH || blobkey_equal(&s->k, k))
				continue;
			unsigned d = (unsigned)__builtin_popcountll(s->mark ^ mark), age = age_of(win, i);
			if (d < best_d || (d == best_d && age < best_age)) {
				best = (int)i;
				best_d = d;
				best_age = age;
			}
		}
		if (best < 0)
			break;
		taken[best] = true;
		const struct window_slot *s = &win->v[best];
		void *raw = malloc((size_t)s->len);
		if (!raw) {
			blob_cold_window_free(c);
			c = NULL;
			break;
		}
		memcpy(raw, s->raw, (size_t)s->len);
		c->v[j] = (struct window_slot){ .k = s->k, .raw = raw, .len = s->len, .depth = s->depth, .mark = s->mark };
	}
	free(taken);
	return c;
}

bool blob_window_takes(uint64_t size)
{
	return window_sized(size);
}

void blob_window_keep(struct blob_cold_window *win, const struct blobkey *k, void *raw, uint64_t size,
		      unsigned depth, uint64_t mark)
{
	for (unsigned i = 0; win && i < win->slots; i++)
		if (win->v[i].raw && blobkey_equal(&win->v[i].k, k)) {
			win->v[i].depth = depth; /* there already (a move tried again) */
			free(raw);
			return;
		}
	if (win && raw && window_sized(size))
		window_push(win, k, raw, size, depth, mark);
	else
		free(raw);
}

/* ---- encoding a record again ------------------------------------------------- */

/* Whole page in (raw) tried on the window: *enc (the whole encoding at the
 * cold level) replaced by the best delta when that is smaller; the page
 * joins the window at the depth it will have (raw taken over; NULL
 * after). */
static int window_try(struct store *st, const struct pack_rec *in, void **raw, struct blob_cold_window *win,
		      int level, struct pack_rec *enc, size_t kept_len)
{
	struct blobkey k = { .variant = in->hdr.variant };
	memcpy(k.md5, in->hdr.md5, 16);
	if (!window_sized(in->hdr.size))
		return 0;
	unsigned depth = 0, base_depth;
	bool has_deps;
	int rc = page_standing(st, &k, &depth, &has_deps);
	if (rc)
		return rc == -ENOMEM ? rc : 0; /* not a page the rows know: left out of the window */
	struct pack_rec d;
	size_t whole = enc->len < kept_len ? enc->len : kept_len;
	if (!has_deps && depth == 0 && (rc = window_best(st, in, &k, *raw, win, level, whole, &base_depth, &d)) == 1) {
		pack_rec_free(enc);
		*enc = d;
		depth = base_depth + 1;
	} else if (rc < 0) {
		return rc;
	}
	window_push(win, &k, *raw, in->hdr.size, depth, 0);
	*raw = NULL;
	return 0;
}

int blob_cold_reencode(struct store *st, const struct pack_rec *in, const struct blob_cold_cfg *c,
		       struct blob_cold_window *win, struct pack_rec *out)
{
	memset(out, 0, sizeof *out);
	if (in->hdr.kind != PACK_KIND_PAGE || c->level <= 0 || (pack_enc_is_delta(in->hdr.encoding) && !c->deltas))
		return -EOPNOTSUPP; /* nothing decoded: not checked either */
	void *raw, *base = NULL;
	int rc = blob_rec_decode(st, in, &raw);
	if (rc)
		return rc;
	struct pack_encode_opts o;
	rc = cold_opts(st, in, c->level, &o, &base);
	if (!rc)
		rc = pack_encode_page(in->hdr.md5, in->hdr.variant, in->hdr.xxh128, raw, -1, in->hdr.size, &o, out);
	blob_dict_unhold(st, o.dict);
	free(base);
	if (!rc && win && c->window)
		rc = window_try(st, in, &raw, win, c->level, out, in->len);
	free(raw);
	if (rc) {
		pack_rec_free(out);
		return rc == -ENOMEM ? rc : -EIO;
	}
	if (out->len >= in->len) { /* nothing gained: the old bytes stay */
		pack_rec_free(out);
		return 0;
	}
	return 1;
}

/* ---- a cold pass: its packs, their mark and rows ------------------------------ */

struct pack_cold blob_cold_mark(struct store *st, const struct blob_cold_cfg *c)
{
	const struct pack_dict *d = blob_dict_current(st);
	return (struct pack_cold){
		.level = (uint8_t)c->level, .deltas = c->deltas, .window = (uint8_t)c->window, .dict = d ? pack_dict_id(d) : 0
	};
}

/* The "cold" rows (blob.h): a pack a cold pass wrote, as that pass left
 * it. */
#define COLD_ROW_BYTES 32

struct cold_row {
	uint64_t created, records, bytes, length;
};

static MDB_val cold_key(uint8_t kb[8], uint32_t id)
{
	return store_meta_id_key(kb, "cold", id);
}

/* 0, -ENOENT (no row, or one of another size: taken as none), -errno. */
static int cold_row_get(MDB_txn *txn, struct store *st, uint32_t id, struct cold_row *out)
{
	uint8_t kb[8];
	MDB_val k = cold_key(kb, id), v;
	int rc = mdb_get(txn, st->db_meta, &k, &v);
	if (rc)
		return rc == MDB_NOTFOUND ? -ENOENT : pd_mdb_err(rc);
	if (v.mv_size != COLD_ROW_BYTES)
		return -ENOENT;
	const uint8_t *p = v.mv_data;
	*out = (struct cold_row){ get_le64(p), get_le64(p + 8), get_le64(p + 16), get_le64(p + 24) };
	return 0;
}

struct cold_rows {
	uint32_t after;          /* the packs this pass made have higher ids */
	struct pack_cold mark;   /* ... and this mark */
};

/* The rows of the packs this cold pass wrote (their live totals now),
 * and none left for a pack that is gone. */
static int cold_rows_cb(struct wtx *w, void *arg)
{
	const struct cold_rows *cr = arg;
	struct store *st = w->st;
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(w->txn, st->db_meta, &c));
	if (rc)
		return rc;
	MDB_val k = { 4, "cold" }, v;
	for (int m = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); m == 0 && !rc; m = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8 || memcmp(k.mv_data, "cold", 4))
			break;
		if (pack_file_bytes(st->packs, (uint32_t)(get_be64(k.mv_data) & 0xFFFFFFFFu)) < 0)
			rc = pd_mdb_err(mdb_cursor_del(c, 0));
	}
	mdb_cursor_close(c);
	uint32_t *ids;
	size_t n;
	if (rc || (rc = pack_list(st->packs, &ids, &n)))
		return rc;
	for (size_t i = 0; i < n && !rc; i++) {
		struct pack_cold m;
		uint64_t created;
		struct blob_pack_live l;
		int64_t length = pack_file_bytes(st->packs, ids[i]);
		if (ids[i] <= cr->after || length < 0 || pack_cold_of(st->packs, ids[i], &m, &created) ||
		    m.level != cr->mark.level || m.deltas != cr->mark.deltas || m.window != cr->mark.window ||
		    m.dict != cr->mark.dict ||
		    (rc = blob_pack_live_get(w->txn, st, ids[i], &l)))
			continue;
		uint8_t kb[8], vb[COLD_ROW_BYTES];
		put_le64(vb, created);
		put_le64(vb + 8, l.records);
		put_le64(vb + 16, l.bytes);
		put_le64(vb + 24, (uint64_t)length);
		MDB_val rk = cold_key(kb, ids[i]), rv = { sizeof vb, vb };
		rc = pd_mdb_err(mdb_put(w->txn, st->db_meta, &rk, &rv, 0));
	}
	free(ids);
	return rc;
}

int blob_cold_rows_write(struct store *st, uint32_t after, const struct pack_cold *mark)
{
	struct cold_rows cr = { .after = after, .mark = *mark };
	return store_write(st, cold_rows_cb, &cr);
}

bool blob_cold_pack_unchanged(struct store *st, uint32_t id, const struct blob_pack_live *live,
			      const struct pack_cold *mark)
{
	struct pack_cold m;
	uint64_t created;
	if (pack_cold_of(st->packs, id, &m, &created) || m.level == 0 || m.level != mark->level ||
	    (mark->deltas && !m.deltas) || m.window != mark->window || m.dict != mark->dict)
		return false;
	struct cold_row r = { 0 };
	MDB_txn *txn;
	if (store_read_begin(st, &txn))
		return false;
	int rc = cold_row_get(txn, st, id, &r);
	store_read_end(st, txn);
	int64_t length = pack_file_bytes(st->packs, id);
	return rc == 0 && r.created == created && r.records == live->records && r.bytes == live->bytes &&
	       length >= 0 && r.length == (uint64_t)length && live->records > 0;
}
