/* blob_compact.c - the compactor of packs: live records out of sparse
 * packs, then the packs removed. The rules, the order of the steps and why
 * a crash at any of them loses nothing are in blob.h.
 *
 * A pass lists the packs with their live bytes (meta), the dictionaries
 * they hold (meta rows) and their allocated bytes, and takes those that
 * qualify one at a time. For one pack: the live records are found by a
 * scan of the pack checked against the fingerprint records (a scan reads
 * one header per record; a walk of the whole fingerprint table would read
 * every record of the store for one pack), copied in batches, each batch
 * synced before the transaction that points the records at the copies.
 *
 * Debugging stops (the crash tests): in the compactor's thread and in
 * `pagededup compact` (cfg.debug_stops), with PD_COMPACT_STOP set to copied,
 * committed or removed, the compactor stops after that step (the copies
 * of the first batch synced; the commit that left the pack empty durable;
 * the file removed), says so on stderr and waits there until it is told
 * to stop (a daemon's unmount) or killed.
 *
 * The thread that runs the passes in a mounted store, and its idle pass,
 * are blob_compactor.c's.
 */
#include "blob.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the "compact" row ---------------------------------------------------- */

#define STATS_KEY "compact"
#define STATS_FIELDS 9 /* a row of fewer (an older build's) reads as zeros past its end */

static void stats_to(const struct blob_compact_stats *s, uint64_t v[STATS_FIELDS])
{
	v[0] = s->packs_compacted, v[1] = s->packs_removed, v[2] = s->records_moved;
	v[3] = s->bytes_moved, v[4] = s->bytes_freed, v[5] = s->damaged;
	v[6] = s->records_cold, v[7] = s->bytes_cold_saved, v[8] = s->records_window;
}

static void stats_from(const uint64_t v[STATS_FIELDS], struct blob_compact_stats *s)
{
	*s = (struct blob_compact_stats){ .packs_compacted = v[0], .packs_removed = v[1], .records_moved = v[2],
					  .bytes_moved = v[3], .bytes_freed = v[4], .damaged = v[5],
					  .records_cold = v[6], .bytes_cold_saved = v[7], .records_window = v[8] };
}

static int stats_get(MDB_txn *txn, struct store *st, struct blob_compact_stats *s)
{
	MDB_val k = { strlen(STATS_KEY), STATS_KEY }, v;
	memset(s, 0, sizeof *s);
	int rc = mdb_get(txn, st->db_meta, &k, &v);
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return pd_mdb_err(rc);
	uint64_t f[STATS_FIELDS] = { 0 };
	for (size_t i = 0; i < STATS_FIELDS && (i + 1) * 8 <= v.mv_size; i++)
		f[i] = get_le64((const uint8_t *)v.mv_data + i * 8);
	stats_from(f, s);
	return 0;
}

static int stats_add(MDB_txn *txn, struct store *st, const struct blob_compact_stats *d)
{
	struct blob_compact_stats s;
	int rc = stats_get(txn, st, &s);
	if (rc)
		return rc;
	uint64_t a[STATS_FIELDS], b[STATS_FIELDS];
	uint8_t vb[STATS_FIELDS * 8];
	stats_to(&s, a);
	stats_to(d, b);
	for (size_t i = 0; i < STATS_FIELDS; i++)
		put_le64(vb + i * 8, a[i] + b[i]);
	MDB_val k = { strlen(STATS_KEY), STATS_KEY }, v = { sizeof vb, vb };
	return pd_mdb_err(mdb_put(txn, st->db_meta, &k, &v, 0));
}

static void stats_sum(struct blob_compact_stats *to, const struct blob_compact_stats *d)
{
	uint64_t a[STATS_FIELDS], b[STATS_FIELDS];
	uint64_t kept = to->packs_cold_kept + d->packs_cold_kept; /* not a field of the row */
	stats_to(to, a);
	stats_to(d, b);
	for (size_t i = 0; i < STATS_FIELDS; i++)
		a[i] += b[i];
	stats_from(a, to);
	to->packs_cold_kept = kept;
}

int blob_compact_stats(struct store *st, struct blob_compact_stats *out)
{
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = stats_get(txn, st, out);
	store_read_end(st, txn);
	return rc;
}

void blob_compact_cfg_of(struct store *st, struct blob_compact_cfg *c)
{
	*c = (struct blob_compact_cfg){
		.share = st->opts.compact_share > 0 ? st->opts.compact_share : BLOB_COMPACT_SHARE,
		.min_dead = st->opts.compact_min_dead ? st->opts.compact_min_dead : BLOB_COMPACT_MIN_DEAD,
		.cold = { .level = BLOB_COMPACT_COLD_LEVEL, .deltas = false }, /* whole pages: blob.h */
	};
	if (st->opts.compact_level)
		c->cold.level = st->opts.compact_level > 0 ? st->opts.compact_level : 0;
}

/* ---- debugging stops -------------------------------------------------------- */

static bool asked_to_stop(const struct blob_compact_cfg *c)
{
	return c->stop && c->stop(c->ctx);
}

/* -ECANCELED when PD_COMPACT_STOP names this step (after waiting there
 * until c->stop says so, when there is a c->stop), else 0. */
static int stop_at(const struct blob_compact_cfg *c, const char *step)
{
	const char *want = c->debug_stops ? getenv("PD_COMPACT_STOP") : NULL;
	if (!want || strcmp(want, step))
		return 0;
	fprintf(stderr, "pagededup: compactor stopped after the step \"%s\" (PD_COMPACT_STOP)\n", step);
	fflush(stderr);
	while (c->stop && !c->stop(c->ctx))
		nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	return -ECANCELED;
}

/* ---- the records of one pack ------------------------------------------------ */

struct item {
	uint8_t kind;          /* PACK_KIND_PAGE or PACK_KIND_DICT (id: k.variant) */
	struct blobkey k;
	struct pack_loc old, copy;
	bool copied, damaged;
	bool kept; /* a base kept for its deltas: its "dkep" row names it */
	bool cold; /* the copy was encoded again (blob_cold.c) ... */
	uint32_t dict; /* ... and needs this dictionary (0: none) */
	uint64_t saved; /* ... and is this much smaller */
	bool window;    /* ... as a delta on wbase, which the window chose */
	struct blobkey wbase;
	bool stays; /* the commit refused the window's delta: the old record is the live one */
};

struct items {
	struct item *v;
	size_t n, cap;
};

static int scan_one(void *ctx, const struct pack_rec_hdr *h, const struct pack_loc *loc)
{
	struct items *it = ctx;
	if (it->n == it->cap) {
		size_t cap = it->cap ? 2 * it->cap : 256;
		struct item *v = realloc(it->v, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		it->v = v;
		it->cap = cap;
	}
	struct item *x = &it->v[it->n++];
	*x = (struct item){ .kind = h->kind, .old = *loc };
	memcpy(x->k.md5, h->md5, 16);
	x->k.variant = h->variant;
	return 0;
}

static bool same_loc(const struct pack_loc *a, const struct pack_loc *b)
{
	return a->pack == b->pack && a->off == b->off && a->len == b->len;
}

/* Does the store still name the record of x at its old place (its
 * fingerprint record, a dictionary row, or the row of a base kept for its
 * deltas: x->kept)? */
static bool named_here(MDB_txn *txn, struct store *st, struct item *x, struct fprec *r)
{
	struct pack_loc loc;
	if (x->kind == PACK_KIND_DICT) {
		uint64_t records;
		return blob_dict_row(txn, st, x->k.variant, &loc, &records) == 0 && same_loc(&loc, &x->old);
	}
	if (x->kind != PACK_KIND_PAGE)
		return false;
	int rc = blob_get(txn, st, &x->k, r);
	x->kept = rc == -ENOENT && blob_delta_kept_get(txn, st, &x->k, r) == 0;
	if ((rc && !x->kept) || !(r->flags & FPREC_PACKED))
		return false;
	blob_rec_loc(r, &loc);
	return same_loc(&loc, &x->old);
}

/* The live records of pack id: its scan, kept where a record names them. */
static int live_items(struct store *st, uint32_t id, struct items *out)
{
	struct items all = { 0 };
	uint64_t damaged;
	int rc = pack_scan(st->packs, id, scan_one, &all, &damaged);
	MDB_txn *txn;
	if (!rc)
		rc = store_read_begin(st, &txn);
	if (rc) {
		free(all.v);
		return rc;
	}
	size_t n = 0;
	for (size_t i = 0; i < all.n; i++) {
		struct fprec r;
		/* a record known bad stays where it is until a write heals it */
		if (named_here(txn, st, &all.v[i], &r) && (all.v[i].kind != PACK_KIND_PAGE || !(r.flags & FPREC_BAD)))
			all.v[n++] = all.v[i];
	}
	store_read_end(st, txn);
	all.n = n;
	*out = all;
	return 0;
}

bool blob_compact_wants_reencode(struct store *st, const struct blobkey *k, const struct pack_rec_hdr *h)
{
	(void)k;
	if (h->kind != PACK_KIND_PAGE || !pack_enc_is_delta(h->encoding))
		return false;
	struct blobkey base = { .variant = h->base_variant };
	struct fprec r;
	memcpy(base.md5, h->base_md5, 16);
	MDB_txn *txn;
	if (store_read_begin(st, &txn))
		return false; /* copied as it is; its check decides */
	bool gone = blob_delta_base_rec(txn, st, &base, &r) != 0;
	store_read_end(st, txn);
	return gone;
}

int blob_compact_reencode(struct store *st, const struct blobkey *k, const struct pack_rec *in,
			  struct pack_rec *out)
{
	(void)st, (void)k, (void)in, (void)out;
	return -EOPNOTSUPP; /* the delta rules fill this (a delta chosen by the store) */
}

/* Encode page record rec of x again, colder (blob_cold.c): 0 when done
 * (rec replaced, x->cold set) or not worth it (rec as it was; checked by
 * that decode), -ENOMEM; 1 when not tried or failed otherwise: rec is
 * left to the check of a plain copy, which decides whether it is
 * damaged. A kept base is copied as it is: its row does not count it in
 * a dictionary's records. */
static int copy_cold(struct store *st, struct item *x, struct pack_rec *rec, const struct blob_compact_cfg *c,
		     struct blob_cold_window *win)
{
	if (x->kept || c->cold.level <= 0)
		return 1;
	struct pack_rec again;
	int rc = pack_rec_set_layout(rec, PACK_REC_LAYOUT); /* the size to beat is the lean header's */
	if (!rc)
		rc = blob_cold_reencode(st, rec, &c->cold, win, &again);
	if (rc == 1) {
		x->cold = true;
		x->dict = again.hdr.encoding == PACK_ENC_ZSTD_DICT ? again.hdr.dict : 0;
		x->window = pack_enc_is_delta(again.hdr.encoding) && !pack_enc_is_delta(rec->hdr.encoding);
		if (x->window) {
			memcpy(x->wbase.md5, again.hdr.base_md5, 16);
			x->wbase.variant = again.hdr.base_variant;
		}
		x->saved = rec->len - again.len;
		pack_rec_free(rec);
		*rec = again;
		return 0;
	}
	return rc == 0 ? 0 : rc == -ENOMEM ? rc : 1;
}

/* Copy x's record to the pack taking appends, checked first (encoded
 * again when c says so: that decode is the check). A damaged record is
 * not copied (x->damaged); one that must be encoded again and cannot be
 * stays where it is. */
static int copy_item(struct store *st, struct item *x, const struct blob_compact_cfg *c,
		     struct blob_cold_window *win)
{
	struct pack_rec rec, again = { 0 };
	int rc = pack_read_rec(st->packs, &x->old, &rec);
	if (rc == -ENOMEM)
		return rc;
	if (!rc && (rec.hdr.kind != x->kind || memcmp(rec.hdr.md5, x->k.md5, 16) || rec.hdr.variant != x->k.variant))
		rc = -EIO;
	if (!rc && x->kind == PACK_KIND_PAGE && blob_compact_wants_reencode(st, &x->k, &rec.hdr)) {
		rc = blob_compact_reencode(st, &x->k, &rec, &again);
		pack_rec_free(&rec);
		if (rc == -EOPNOTSUPP)
			return 0;
		rec = again;
	} else if (!rc && x->kind == PACK_KIND_PAGE && (rc = copy_cold(st, x, &rec, c, win)) <= 0) {
		; /* encoded again (and so checked), or out of memory */
	} else if (!rc || rc == 1) {
		rc = x->kind == PACK_KIND_PAGE ? blob_rec_check(st, &rec) : pack_rec_check(&rec, NULL);
	}
	if (rc == -EIO) {
		x->damaged = true;
		pack_rec_free(&rec);
		return 0;
	}
	if (!rc) /* a layout 1 record takes the lean header on its way (pack.h) */
		rc = pack_rec_set_layout(&rec, PACK_REC_LAYOUT);
	if (!rc)
		rc = pack_append(st->packs, &rec, false, &x->copy);
	x->copied = rc == 0;
	pack_rec_free(&rec);
	return rc;
}

/* The live items of a pack in the order of c's page keys, for the
 * window (blob.h); a dictionary's record, and a page with no key, first. */
struct keyed {
	char *key;
	struct item x;
};

static int by_key(const void *a, const void *b)
{
	return strcmp(((const struct keyed *)a)->key, ((const struct keyed *)b)->key);
}

static int order_items(const struct blob_compact_cfg *c, struct items *it)
{
	struct keyed *v = calloc(it->n ? it->n : 1, sizeof *v);
	if (!v)
		return -ENOMEM;
	char buf[PATH_MAX];
	int rc = 0;
	for (size_t i = 0; i < it->n && !rc; i++) {
		v[i].x = it->v[i];
		buf[0] = 0;
		if (it->v[i].kind == PACK_KIND_PAGE && c->page_key(c->key_ctx, &it->v[i].k, buf, sizeof buf) < 0)
			buf[0] = 0;
		if (!(v[i].key = strdup(buf)))
			rc = -ENOMEM;
	}
	if (!rc) {
		qsort(v, it->n, sizeof *v, by_key);
		for (size_t i = 0; i < it->n; i++)
			it->v[i] = v[i].x;
	}
	for (size_t i = 0; i < it->n; i++)
		free(v[i].key);
	free(v);
	return rc;
}

/* ---- the transactions ------------------------------------------------------- */

static int roll_cb(struct wtx *w, void *arg)
{
	return pack_rollover(w->st->packs, *(const uint32_t *)arg, true);
}

static int live_add(MDB_txn *txn, struct store *st, uint32_t pack, int64_t bytes, int64_t records)
{
	struct blob_pack_live l;
	int rc = blob_pack_live_get(txn, st, pack, &l);
	if (rc)
		return rc;
	l.bytes = (int64_t)l.bytes + bytes > 0 ? (uint64_t)((int64_t)l.bytes + bytes) : 0;
	l.records = (int64_t)l.records + records > 0 ? (uint64_t)((int64_t)l.records + records) : 0;
	return blob_pack_live_put(txn, st, pack, &l);
}

/* x's copy was encoded again: the page leaves its old dictionary's count
 * (record r, as committed) for the new one's. The new one is the store's
 * newest, whose row was committed before it was used (blob_dict.c). */
static int cold_dict_moved(struct wtx *w, const struct item *x, const struct fprec *r)
{
	if (!x->cold || x->dict == r->pack_dict)
		return 0;
	int rc = blob_dict_account(w, r->pack_dict, -1);
	return rc ? rc : blob_dict_account(w, x->dict, +1);
}

struct move_batch {
	struct item *v;
	size_t n;
	struct blob_compact_stats d; /* what the commit did */
};

/* Point every record of the batch that still names its old place at its
 * copy; mark the damaged ones bad (the next write of their bytes heals
 * them, as after a read that found them damaged). */
static int move_cb(struct wtx *w, void *arg)
{
	struct move_batch *b = arg;
	struct store *st = w->st;
	memset(&b->d, 0, sizeof b->d); /* the callback may run again */
	int rc = 0;
	for (size_t i = 0; i < b->n && !rc; i++) {
		struct item *x = &b->v[i];
		struct fprec r;
		x->stays = false; /* the callback may run again */
		if ((!x->copied && !x->damaged) || !named_here(w->txn, st, x, &r))
			continue; /* freed, healed or moved meanwhile: its copy is dead bytes */
		if (x->damaged) {
			b->d.damaged++;
			if (x->kind == PACK_KIND_PAGE && !x->kept && !(r.flags & FPREC_BAD)) {
				r.flags |= FPREC_BAD;
				rc = blob_put(w->txn, st, &x->k, &r);
			}
			continue;
		}
		if (x->kind == PACK_KIND_DICT) {
			rc = blob_dict_set_loc(w, x->k.variant, &x->copy);
		} else if (!(r.flags & FPREC_BAD)) {
			if (x->kept) {
				rc = blob_delta_kept_set_loc(w->txn, st, &x->k, &x->copy);
			} else if (x->window && (rc = blob_delta_link_cold(w, &x->k, &x->wbase)) != 0) {
				if (rc < 0)
					break;
				/* the delta's base is gone or too deep now: the page
				 * stays where it is, its copy dead bytes, and its old
				 * record is not punched (compact_pack) */
				rc = 0;
				x->stays = true;
				continue;
			} else {
				rc = cold_dict_moved(w, x, &r);
				blob_rec_set_loc(&r, &x->copy, x->cold ? x->dict : r.pack_dict);
				if (!rc)
					rc = blob_put(w->txn, st, &x->k, &r);
			}
			if (!rc)
				rc = live_add(w->txn, st, x->old.pack, -(int64_t)x->old.len, -1);
			if (!rc)
				rc = live_add(w->txn, st, x->copy.pack, (int64_t)x->copy.len, 1);
		} else {
			continue;
		}
		b->d.records_moved++;
		b->d.bytes_moved += x->copy.len;
		if (x->cold) {
			b->d.records_cold++;
			b->d.bytes_cold_saved += x->saved;
			b->d.records_window += x->window;
		}
	}
	return rc ? rc : stats_add(w->txn, st, &b->d);
}

/* The bytes of the dictionaries whose records are in pack id (rows in txn). */
static int dicts_in(MDB_txn *txn, struct store *st, uint32_t id, uint64_t *bytes)
{
	*bytes = 0;
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_meta, &c));
	if (rc)
		return rc;
	MDB_val k = { 4, "dict" }, v;
	for (int m = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); m == 0; m = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8 || memcmp(k.mv_data, "dict", 4) || v.mv_size != 28)
			break;
		if (get_le32(v.mv_data) == id)
			*bytes += get_le64((const uint8_t *)v.mv_data + 12);
	}
	mdb_cursor_close(c);
	return 0;
}

struct final {
	uint32_t id;
	uint64_t allocated, moved; /* the pack's allocated bytes; moved out of it */
	bool empty;
	bool nursery; /* an emptied nursery pack: its removal is no compaction */
};

/* Nothing live left in the pack: count it removed (the removal follows
 * the commit). */
static int final_cb(struct wtx *w, void *arg)
{
	struct final *f = arg;
	struct blob_pack_live l;
	uint64_t dict_bytes;
	int rc = blob_pack_live_get(w->txn, w->st, f->id, &l);
	if (!rc)
		rc = dicts_in(w->txn, w->st, f->id, &dict_bytes);
	if (rc)
		return rc;
	f->empty = l.records == 0 && dict_bytes == 0;
	struct blob_compact_stats d = { .packs_compacted = 1 };
	if (f->empty) {
		if ((rc = blob_pack_live_put(w->txn, w->st, f->id, &l))) /* records 0: the row goes */
			return rc;
		d.packs_removed = 1;
		d.bytes_freed = f->allocated > f->moved ? f->allocated - f->moved : 0;
	}
	return f->nursery ? 0 : stats_add(w->txn, w->st, &d);
}

/* ---- one pack ----------------------------------------------------------------- */

static int copy_and_move(struct store *st, struct item *v, size_t n, const struct blob_compact_cfg *c,
			 struct blob_cold_window *win, struct blob_compact_stats *done, uint64_t *moved, bool *first)
{
	size_t from = 0;
	int rc = 0;
	while (from < n && !rc) {
		if (asked_to_stop(c))
			return -ECANCELED;
		size_t to = from;
		uint64_t bytes = 0;
		while (to < n && to - from < BLOB_COMPACT_BATCH && bytes < BLOB_COMPACT_BATCH_BYTES && !rc) {
			/* a batch encoded cold takes seconds: what is copied
			 * is committed, and the next batch stops */
			if (to > from && asked_to_stop(c))
				break;
			rc = copy_item(st, &v[to], c, win);
			bytes += v[to++].old.len;
		}
		/* the copies are durable before the commit that names them */
		if (!rc)
			rc = pack_sync(st->packs);
		if (!rc && *first) {
			*first = false;
			rc = stop_at(c, "copied");
		}
		if (!rc && c->before_commit)
			c->before_commit(c->ctx);
		struct move_batch b = { v + from, to - from, { 0 } };
		if (!rc)
			rc = store_write(st, move_cb, &b);
		if (!rc) {
			stats_sum(done, &b.d);
			*moved += b.d.bytes_moved;
		}
		from = to;
	}
	return rc;
}

static int compact_pack(struct store *st, uint32_t id, const struct blob_compact_cfg *c,
			struct blob_cold_window *win, struct blob_compact_stats *done)
{
	if (st->readonly)
		return -EROFS;
	struct blob_compact_stats sum = { 0 };
	struct items items = { 0 };
	struct final f = { .id = id, .nursery = pack_is_nursery(st->packs, id) };
	bool first = true;
	/* 1. no more appends to it; every seal that appended to it committed */
	int rc = store_write(st, roll_cb, &id);
	if (!rc)
		rc = live_items(st, id, &items);
	if (!rc && win && c->page_key && (rc = order_items(c, &items)) == 0)
		pack_prefetch(st->packs, id); /* read out of its order next: one sweep now */
	/* 2, 3. the live records copied and pointed at, batch by batch */
	if (!rc)
		rc = copy_and_move(st, items.v, items.n, c, win, &sum, &f.moved, &first);
	/* 4. nothing live left: the pack goes */
	struct pack_space sp;
	if (!rc && pack_space(st->packs, id, &sp) == 0)
		f.allocated = sp.allocated;
	if (!rc)
		rc = pack_retire(st->packs, id, true);
	if (!rc && (rc = store_write(st, final_cb, &f)))
		pack_retire(st->packs, id, false);
	if (!rc && f.empty) {
		/* the commit durable before the file goes (and the pack's own
		 * descriptor, if a rollover left it to sync, closed) */
		rc = pack_sync(st->packs);
		if (!rc)
			rc = store_sync(st);
		if (!rc)
			rc = stop_at(c, "committed");
		if (!rc)
			rc = pack_remove(st->packs, id);
		if (!rc)
			rc = stop_at(c, "removed");
	} else if (!rc) {
		/* something stays (a damaged record, one to encode again, one
		 * stored meanwhile): the moved records' blocks go back once
		 * the commit that moved them is durable */
		pack_retire(st->packs, id, false);
		for (size_t i = 0; i < items.n; i++)
			if (items.v[i].copied && !items.v[i].stays)
				store_punch_when_durable(st, &items.v[i].old);
	}
	if (!rc && !f.nursery) {
		sum.packs_compacted++;
		if (f.empty) {
			sum.packs_removed++;
			sum.bytes_freed += f.allocated > f.moved ? f.allocated - f.moved : 0;
		}
	}
	if (done)
		stats_sum(done, &sum);
	free(items.v);
	return rc;
}

int blob_compact_pack(struct store *st, uint32_t id, const struct blob_compact_cfg *c,
		      struct blob_compact_stats *done)
{
	return compact_pack(st, id, c, NULL, done);
}

/* ---- a pass ----------------------------------------------------------------- */

struct pack_view {
	uint32_t id;
	struct pack_space sp;
	struct blob_pack_live live;
	uint64_t dict_bytes;
	bool nursery; /* a nursery pack (pack.h): removed when empty, never copied */
	bool leave;   /* an idle pass leaves it: a cold pass marked it (cfg.skip_marked) */
};

/* Should pack p be compacted (cur: the pack taking appends)? */
static bool qualifies(const struct pack_view *p, uint32_t cur, const struct blob_compact_cfg *c)
{
	uint64_t kept = p->live.bytes + p->dict_bytes;
	if (p->id == cur && p->live.records == 0)
		return false; /* a pack just started: nothing to move, nothing to gain */
	if (kept == 0 && p->live.records == 0)
		return true; /* nothing live: the file goes */
	if (p->nursery)
		return false; /* its records get their final ones from the delta step */
	if (c->every_pack && p->live.records > 0)
		return true; /* every record encoded cold (compact --all) */
	uint64_t body = p->sp.length > PACK_HDR_BYTES ? p->sp.length - PACK_HDR_BYTES : 0;
	double share = body ? (double)kept / (double)body : 1.0;
	uint64_t gain = p->sp.allocated > kept + PACK_HDR_BYTES ? p->sp.allocated - kept - PACK_HDR_BYTES : 0;
	return share < c->share && gain >= c->min_dead;
}

static int view_packs(struct store *st, struct pack_view **out, size_t *n)
{
	uint32_t *ids;
	int rc = pack_list(st->packs, &ids, n);
	if (rc)
		return rc;
	struct pack_view *v = calloc(*n ? *n : 1, sizeof *v);
	MDB_txn *txn;
	if (!v || (rc = store_read_begin(st, &txn))) {
		free(ids);
		free(v);
		return v ? rc : -ENOMEM;
	}
	size_t m = 0;
	for (size_t i = 0; i < *n && !rc; i++) {
		struct pack_view *p = &v[m];
		p->id = ids[i];
		p->nursery = pack_is_nursery(st->packs, ids[i]);
		if (pack_space(st->packs, ids[i], &p->sp))
			continue; /* gone meanwhile */
		if (!(rc = blob_pack_live_get(txn, st, ids[i], &p->live)))
			rc = dicts_in(txn, st, ids[i], &p->dict_bytes);
		m++;
	}
	store_read_end(st, txn);
	free(ids);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*n = m;
	return 0;
}

/* Pack p's live totals are those a pass left it with: nothing to do. */
static bool memo_same(const struct blob_compact_memo *m, const struct pack_view *p)
{
	for (size_t i = 0; m && i < m->n; i++)
		if (m->v[i].id == p->id)
			return m->v[i].bytes == p->live.bytes && m->v[i].records == p->live.records;
	return false;
}

/* After pack id was compacted: remember its live totals if it is still
 * there (something stayed in it), forget it if it is gone. */
static void memo_after(struct store *st, struct blob_compact_memo *m, uint32_t id)
{
	size_t at = m->n;
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].id == id)
			at = i;
	struct blob_pack_live l;
	MDB_txn *txn;
	bool there = pack_file_bytes(st->packs, id) >= 0 && store_read_begin(st, &txn) == 0;
	if (there) {
		there = blob_pack_live_get(txn, st, id, &l) == 0;
		store_read_end(st, txn);
	}
	if (!there) {
		if (at < m->n)
			m->v[at] = m->v[--m->n];
		return;
	}
	if (at == m->n) {
		if (m->n == m->cap) {
			size_t cap = m->cap ? 2 * m->cap : 8;
			void *v = realloc(m->v, cap * sizeof *m->v);
			if (!v)
				return; /* only a hint */
			m->v = v;
			m->cap = cap;
		}
		m->n++;
	}
	m->v[at].id = id;
	m->v[at].bytes = l.bytes;
	m->v[at].records = l.records;
}

/* One pass at a time: the compactor's thread and the delta step's
 * removal of emptied nursery packs (ndelta.h) both run passes, and two
 * passes over one pack would copy its records twice. */
static pthread_mutex_t pass_mu = PTHREAD_MUTEX_INITIALIZER;

static int compact_run(struct store *st, const struct blob_compact_cfg *c, struct blob_compact_stats *done);

int blob_compact_run(struct store *st, const struct blob_compact_cfg *c, struct blob_compact_stats *done)
{
	pthread_mutex_lock(&pass_mu);
	int rc = compact_run(st, c, done);
	pthread_mutex_unlock(&pass_mu);
	return rc;
}

int blob_compact_empty_packs(struct store *st, bool wait)
{
	if (wait)
		pthread_mutex_lock(&pass_mu);
	else if (pthread_mutex_trylock(&pass_mu))
		return 0;
	struct blob_compact_cfg cfg = { .share = 0 }; /* nothing copied */
	int rc = compact_run(st, &cfg, NULL);
	pthread_mutex_unlock(&pass_mu);
	return rc;
}

/* An idle pass (cfg.skip_marked) leaves the packs that a cold pass marked
 * at its level or a colder one, whatever their dictionary (a store whose
 * dictionary was trained again is not encoded again whole at every rest),
 * once they are a sixteenth of a full pack (16 MiB: some thousands of
 * pages): a smaller one, what the last rest left, is taken again with the
 * new pages, so that the rests of a slow crawl leave one small pack, not
 * one each, for the CPU of encoding it again (seconds). Returns the live
 * bytes of the packs not marked, which it would encode again. */
static uint64_t leave_marked(struct store *st, struct pack_view *v, size_t n, uint32_t cur,
			     const struct blob_compact_cfg *c)
{
	uint64_t full = (st->opts.pack_max_bytes ? st->opts.pack_max_bytes : PACK_DEFAULT_MAX_BYTES) / 16;
	uint64_t bytes = 0;
	for (size_t i = 0; i < n; i++) {
		struct pack_cold m;
		if (!qualifies(&v[i], cur, c) || v[i].live.records == 0)
			continue; /* (a pack with nothing live is removed all the same) */
		if (pack_cold_of(st->packs, v[i].id, &m, NULL) || m.level < c->cold.level)
			bytes += v[i].live.bytes;
		else if (v[i].sp.length >= full)
			v[i].leave = true;
	}
	return bytes;
}

static int compact_run(struct store *st, const struct blob_compact_cfg *c, struct blob_compact_stats *done)
{
	if (done)
		memset(done, 0, sizeof *done);
	if (st->readonly)
		return -EROFS;
	struct pack_view *v;
	size_t n;
	int rc = view_packs(st, &v, &n);
	if (rc)
		return rc;
	/* a cold pass writes packs of its own, marked (pack.h) */
	bool cold_pass = c->every_pack && c->cold.level > 0;
	if (cold_pass && c->skip_marked &&
	    leave_marked(st, v, n, pack_current(st->packs), c) < c->min_cold_bytes) {
		free(v); /* too little to be worth two pack files */
		return 0;
	}
	struct pack_cold mark = { 0 };
	struct blob_cold_window *win = NULL;
	if (cold_pass) {
		mark = blob_cold_mark(st, &c->cold);
		pack_set_cold(st->packs, &mark);
		/* the window spans the packs of the pass, in their order */
		if (c->cold.window && !(win = blob_cold_window_new(c->cold.window)))
			rc = c->cold.window > BLOB_COLD_WINDOW_MAX ? -EINVAL : -ENOMEM;
	}
	uint32_t cur = pack_current(st->packs);
	for (size_t i = 0; i < n && !rc; i++) {
		if (asked_to_stop(c)) {
			rc = -ECANCELED;
		} else if (v[i].leave) {
			continue;
		} else if (qualifies(&v[i], cur, c) && !memo_same(c->memo, &v[i])) {
			/* (an idle pass has chosen already: leave_marked) */
			if (cold_pass && !c->skip_marked && !v[i].nursery &&
			    blob_cold_pack_unchanged(st, v[i].id, &v[i].live, &mark)) {
				if (done)
					done->packs_cold_kept++;
				continue;
			}
			rc = compact_pack(st, v[i].id, c, win, done);
			if (!rc && c->memo)
				memo_after(st, c->memo, v[i].id);
		}
	}
	if (cold_pass) {
		pack_set_cold(st->packs, NULL); /* its last pack takes nothing else */
		if (!rc)
			rc = blob_cold_rows_write(st, n ? v[n - 1].id : 0, &mark);
	}
	blob_cold_window_free(win);
	free(v);
	return rc;
}

void blob_compact_memo_free(struct blob_compact_memo *m)
{
	free(m->v);
	memset(m, 0, sizeof *m);
}
