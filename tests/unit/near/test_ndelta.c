/* test_ndelta.c - near-duplicates stored as deltas (ndelta.h, blob.h):
 * a near-duplicate becomes a delta on the older page and reads back; the
 * older page never becomes a delta on the newer; a base whose last name
 * goes is kept (out of the fingerprints, its record live) while its delta
 * needs it, the delta is stored whole again and the base freed, and a kept
 * base written again loses its kept row with its last delta; a chain of
 * successive edits stays within BLOB_DELTA_DEPTH; a move whose record
 * changed meanwhile is refused; a page over a chunk is a chunked delta;
 * fsck clean at every step. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "archive/archive.h"
#include "blob/blob.h"
#include "helpers.h"
#include "archive/query.h"
#include "near/near.h"
#include "near/ndelta.h"
#include "near/sigq.h"

static struct store *open_store(const char *dir, bool create)
{
	struct store_opts o = { .delta_rule = NDELTA_RULE_OFF, .no_sign_thread = true };
	return create ? th_store(dir, NULL, &o) : th_reopen(dir, &o);
}

static bool kept(struct store *st, const struct blobkey *k)
{
	MDB_txn *txn;
	struct fprec r;
	assert_int_equal(store_read_begin(st, &txn), 0);
	int rc = blob_delta_kept_get(txn, st, k, &r);
	store_read_end(st, txn);
	assert_true(rc == 0 || rc == -ENOENT);
	return rc == 0;
}

/* A copy of page with `n` words rewritten (edit e). */
static char *edited(const char *page, unsigned e, unsigned n)
{
	char *p = strdup(page);
	size_t len = strlen(p);
	for (unsigned i = 0; i < n; i++) {
		size_t at = (len / 3 + (size_t)e * 997 + i * 131) % (len - 40);
		memcpy(p + at, "EDITED", 6);
		p[at + 6] = (char)('a' + (e + i) % 26);
	}
	return p;
}

/* Page a (seed, words) and b, its edit e of n words, stored as a.html and
 * b.html and signed. */
struct pair {
	char *a, *b;
	uint64_t ia, ib;
	struct blobkey ka, kb;
};

static void put_pair(struct store *st, struct pair *p, uint64_t seed, unsigned words, unsigned e, unsigned n)
{
	p->a = th_page(seed, words, "");
	p->b = edited(p->a, e, n);
	p->ia = th_put_page(st, PD_ROOT_INO, "a.html", p->a);
	p->ib = th_put_page(st, PD_ROOT_INO, "b.html", p->b);
	assert_int_equal(sigq_drain(st), 0);
	p->ka = th_blob_of(st, p->ia);
	p->kb = th_blob_of(st, p->ib);
}

/* put_pair, then each page through the delta step: b is a delta on a. */
static void put_delta_pair(struct store *st, struct pair *p, uint64_t seed, unsigned words, unsigned e, unsigned n)
{
	put_pair(st, p, seed, words, e, n);
	struct blobkey base;
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &p->ka, NULL), 0);
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &p->kb, NULL), 0);
	assert_int_equal(th_delta_of(st, &p->kb, &base), 1);
	assert_true(blobkey_equal(&base, &p->ka));
}

static void free_pair(struct pair *p)
{
	free(p->a);
	free(p->b);
}

static void test_delta_and_kept_base(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pair p;
	put_pair(st, &p, 11, 900, 1, 2);
	const char *b = p.b;
	uint64_t ib = p.ib;
	struct blobkey ka = p.ka, kb = p.kb, base;
	struct ndelta_counts c = { 0 };
	/* the older page has no older neighbour: it stays whole */
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &ka, &c), 0);
	assert_int_equal(c.stored, 0);
	assert_int_equal(th_delta_of(st, &ka, &base), 0);
	/* the newer one becomes a delta on it, much smaller */
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &kb, &c), 0);
	assert_int_equal(c.stored, 1);
	assert_true(c.bytes_after * 4 < c.bytes_before);
	assert_int_equal(th_delta_of(st, &kb, &base), 1);
	assert_true(blobkey_equal(&base, &ka));
	assert_int_equal(th_depth_of(st, &kb), 1);
	th_read_back(st, ib, b);
	/* a base with a delta on it is not made a delta itself */
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &ka, &c), 0);
	assert_int_equal(c.stored, 1);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));

	/* the base's last name goes: it is kept for the delta */
	st = open_store(dir, false);
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a.html", &gone_ino, &gone), 0);
	struct fprec r;
	assert_int_equal(blob_read(st, &ka, &r), -ENOENT);
	assert_true(kept(st, &ka));
	struct blob_pack_usage u;
	assert_int_equal(blob_pack_usage(st, &u), 0);
	assert_int_equal(u.kept, 1);
	assert_int_equal(u.live_records, 2);
	th_read_back(st, ib, b);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));

	/* its delta is stored whole again, and the base goes */
	st = open_store(dir, false);
	th_read_back(st, ib, b);
	uint64_t moved;
	assert_int_equal(ndelta_rebase_kept(st, &moved), 0);
	assert_int_equal(moved, 1);
	assert_false(kept(st, &ka));
	assert_int_equal(th_delta_of(st, &kb, &base), 0);
	assert_int_equal(blob_pack_usage(st, &u), 0);
	assert_int_equal(u.kept, 0);
	assert_int_equal(u.live_records, 1);
	th_read_back(st, ib, b);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_pair(&p);
	th_rmdir(dir);
}

/* A kept base's bytes written again get a record of their own beside the
 * kept row; when the last delta on it goes, the kept row goes too (its
 * record is dead bytes), the new record stays, and fsck is clean. (Before,
 * the row stayed: "kept base ...: no delta needs it any more".) */
static void test_kept_base_stored_again(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pair p;
	put_delta_pair(st, &p, 31, 900, 1, 2);
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a.html", &gone_ino, &gone), 0);
	assert_true(kept(st, &p.ka));
	/* the same bytes again: a record of their own, the kept row beside */
	uint64_t ic = th_put_page(st, PD_ROOT_INO, "c.html", p.a);
	assert_int_equal(sigq_drain(st), 0);
	struct fprec r;
	assert_int_equal(blob_read(st, &p.ka, &r), 0);
	assert_true(kept(st, &p.ka));
	th_read_back(st, p.ib, p.b);
	/* the delta goes: so does the kept row, not the page written again */
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "b.html", &gone_ino, &gone), 0);
	assert_false(kept(st, &p.ka));
	assert_int_equal(blob_read(st, &p.ka, &r), 0);
	struct blob_pack_usage u;
	assert_int_equal(blob_pack_usage(st, &u), 0);
	assert_int_equal(u.kept, 0);
	assert_int_equal(u.live_records, 1);
	th_read_back(st, ic, p.a);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_pair(&p);
	th_rmdir(dir);
}

/* The compactor moves a base kept for its deltas like any live record: its
 * "dkep" row follows the copy, its delta still reads, fsck is clean, and
 * the base is freed once its delta is stored whole again. */
static void test_compactor_moves_kept_base(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pair p;
	put_delta_pair(st, &p, 13, 900, 3, 2);
	const char *b = p.b;
	uint64_t ib = p.ib;
	struct blobkey ka = p.ka;
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a.html", &gone_ino, &gone), 0);
	assert_true(kept(st, &ka));

	MDB_txn *txn;
	struct fprec before, after;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_delta_kept_get(txn, st, &ka, &before), 0);
	store_read_end(st, txn);
	struct blob_compact_cfg cfg;
	struct blob_compact_stats done = { 0 };
	blob_compact_cfg_of(st, &cfg);
	assert_int_equal(blob_compact_pack(st, before.pack, &cfg, &done), 0);
	assert_true(done.records_moved >= 2); /* the kept base and its delta */
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_delta_kept_get(txn, st, &ka, &after), 0);
	store_read_end(st, txn);
	assert_int_not_equal(after.pack, before.pack); /* the row follows the copy */
	th_read_back(st, ib, b);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));

	st = open_store(dir, false);
	th_read_back(st, ib, b);
	uint64_t moved;
	assert_int_equal(ndelta_rebase_kept(st, &moved), 0);
	assert_int_equal(moved, 1);
	assert_false(kept(st, &ka));
	th_read_back(st, ib, b);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_pair(&p);
	th_rmdir(dir);
}

/* Records encoded again by the compactor (blob_cold.c): the base and its
 * delta both copied with the cold level; the delta names its base by
 * blob, so a base whose record changed encoding still serves it (the
 * decoder decodes the base to its bytes); the delta, encoded again on
 * the same base, stays a delta at the same depth; both read back, fsck
 * --deep is clean; and a base encoded again under a delta whose page was
 * read before still gives the same bytes after a reopen. */
static void test_cold_base_and_delta(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pair p;
	put_delta_pair(st, &p, 17, 1500, 5, 3);
	const char *a = p.a, *b = p.b;
	uint64_t ia = p.ia, ib = p.ib;
	struct blobkey ka = p.ka, kb = p.kb, base;
	struct fprec ra = th_fprec_of(st, ia), rb = th_fprec_of(st, ib);
	struct blob_compact_cfg cfg = { .share = 1.0, .every_pack = true, .cold = { .level = 19, .deltas = true } };
	struct blob_compact_stats done = { 0 };
	assert_int_equal(blob_compact_run(st, &cfg, &done), 0);
	assert_true(done.records_cold >= 1); /* the base at least: stored at level 3 */
	struct fprec na = th_fprec_of(st, ia), nb = th_fprec_of(st, ib);
	assert_int_not_equal(na.pack, ra.pack);
	assert_true(na.pack_len < ra.pack_len);
	assert_memory_equal(na.xxh128, ra.xxh128, 16);
	assert_int_not_equal(nb.pack, rb.pack);
	assert_true(nb.pack_len <= rb.pack_len); /* encoded again only if smaller */
	assert_int_equal(th_delta_of(st, &kb, &base), 1);
	assert_true(blobkey_equal(&base, &ka));
	assert_int_equal(th_depth_of(st, &kb), 1);
	th_read_back(st, ia, a);
	th_read_back(st, ib, b);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	st = open_store(dir, false);
	th_read_back(st, ib, b);
	th_read_back(st, ia, a);
	assert_int_equal(store_close(st), 0);
	free_pair(&p);
	th_rmdir(dir);
}

/* A delta the daemon's pass does not encode again (whole pages only) is
 * still checked before it is copied: a damaged one stays, marked bad. */
static void test_damaged_delta_checked_by_whole_pages_pass(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pair p;
	put_delta_pair(st, &p, 19, 1500, 7, 3);
	struct fprec rb = th_fprec_of(st, p.ib);
	th_damage_record(st, &rb, 4, 4);
	struct blob_compact_cfg cfg = { .share = 1.0, .every_pack = true, .cold = { .level = 9, .deltas = false } };
	struct blob_compact_stats done = { 0 };
	assert_int_equal(blob_compact_run(st, &cfg, &done), 0);
	assert_int_equal(done.damaged, 1);
	struct fprec now;
	assert_int_equal(blob_read(st, &p.kb, &now), 0);
	assert_true(now.flags & FPREC_BAD);
	assert_int_equal(now.pack, rb.pack);
	th_read_back(st, p.ia, p.a);
	assert_int_equal(store_close(st), 0);
	free_pair(&p);
	th_rmdir(dir);
}

static void test_chain_bound(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	enum { N = 10 };
	char *v[N], name[32];
	uint64_t ino[N];
	v[0] = th_page(12, 900, "");
	unsigned deepest = 0, deltas = 0;
	for (int i = 0; i < N; i++) {
		if (i)
			v[i] = edited(v[i - 1], (unsigned)i, 1);
		snprintf(name, sizeof name, "v%d.html", i);
		ino[i] = th_put_page(st, PD_ROOT_INO, name, v[i]);
		assert_int_equal(sigq_drain(st), 0);
		struct blobkey k = th_blob_of(st, ino[i]), base;
		assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &k, NULL), 0);
		unsigned d = th_depth_of(st, &k);
		assert_true(d <= BLOB_DELTA_DEPTH);
		deepest = d > deepest ? d : deepest;
		deltas += (unsigned)th_delta_of(st, &k, &base);
	}
	assert_int_equal(deltas, N - 1);             /* every edit after the first */
	assert_int_equal(deepest, BLOB_DELTA_DEPTH); /* the bound was reached, not passed */
	for (int i = 0; i < N; i++)
		th_read_back(st, ino[i], v[i]);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	for (int i = 0; i < N; i++)
		free(v[i]);
	th_rmdir(dir);
}

/* A page's base is chosen among at most -o delta_candidates neighbours,
 * NDELTA_DEFAULT_CANDIDATES without it (the delta step's CPU per page grows
 * with the candidates it reads and compares, bench-scale); fewer still
 * find a base. */
static void test_candidates_bound(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	enum { N = NDELTA_DEFAULT_CANDIDATES + 4 };
	char *v[N], name[32];
	struct blobkey k[N];
	v[0] = th_page(14, 900, "");
	for (int i = 0; i < N; i++) {
		if (i)
			v[i] = edited(v[0], (unsigned)i, 1);
		snprintf(name, sizeof name, "v%d.html", i);
		k[i] = th_blob_of(st, th_put_page(st, PD_ROOT_INO, name, v[i]));
	}
	assert_int_equal(sigq_drain(st), 0);
	struct ndelta_counts c = { 0 };
	struct blobkey base;
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &k[N - 1], &c), 0);
	assert_int_equal(c.tried, 1);
	assert_int_equal(c.candidates, NDELTA_DEFAULT_CANDIDATES); /* of the N - 1 other edits */
	assert_int_equal(th_delta_of(st, &k[N - 1], &base), 1);
	assert_int_equal(store_close(st), 0);

	struct store_opts all = { .delta_rule = NDELTA_RULE_OFF, .no_sign_thread = true,
				  .delta_candidates = NDELTA_CANDIDATES };
	st = th_reopen(dir, &all);
	memset(&c, 0, sizeof c);
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &k[N - 3], &c), 0);
	assert_int_equal(c.candidates, N - 1); /* every other edit of the page */
	assert_int_equal(th_delta_of(st, &k[N - 3], &base), 1);
	assert_int_equal(store_close(st), 0);

	struct store_opts o = { .delta_rule = NDELTA_RULE_OFF, .no_sign_thread = true, .delta_candidates = 2 };
	st = th_reopen(dir, &o);
	memset(&c, 0, sizeof c);
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &k[N - 2], &c), 0);
	assert_int_equal(c.candidates, 2);
	assert_int_equal(th_delta_of(st, &k[N - 2], &base), 1);
	for (int i = 0; i < N; i++) {
		char path[32];
		snprintf(path, sizeof path, "v%d.html", i);
		struct inode in;
		assert_int_equal(ns_lookup(st, PD_ROOT_INO, path, &in), 0);
		th_read_back(st, in.ino, v[i]);
	}
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	for (int i = 0; i < N; i++)
		free(v[i]);
	th_rmdir(dir);
}

struct move_args {
	struct blobkey k;
	struct pack_loc was, loc;
	int rc;
};

static int move_cb(struct wtx *w, void *arg)
{
	struct move_args *m = arg;
	m->rc = blob_delta_move(w, &m->k, &m->was, &m->loc, 0, NULL);
	return m->rc < 0 ? m->rc : 0;
}

static void test_move_of_changed_record_refused(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	char *a = th_page(13, 300, "");
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	struct move_args m = { .k = th_blob_of(st, ia) };
	struct fprec r;
	assert_int_equal(blob_read(st, &m.k, &r), 0);
	blob_rec_loc(&r, &m.was);
	m.was.off += 8; /* not where the record is now */
	m.loc = m.was;
	assert_int_equal(store_write(st, move_cb, &m), 0);
	assert_int_equal(m.rc, 1);
	struct fprec now;
	assert_int_equal(blob_read(st, &m.k, &now), 0);
	assert_int_equal(now.pack_off, r.pack_off);
	th_read_back(st, ia, a);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free(a);
	th_rmdir(dir);
}

/* Delete every meta row under prefix (4 bytes). */
static int drop_prefix_cb(struct wtx *w, void *arg)
{
	MDB_cursor *c;
	int rc = mdb_cursor_open(w->txn, w->st->db_meta, &c);
	if (rc)
		return -EIO;
	MDB_val k = { 4, arg }, v;
	for (int m = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); m == 0; m = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size < 4 || memcmp(k.mv_data, arg, 4))
			break;
		mdb_cursor_del(c, 0);
	}
	mdb_cursor_close(c);
	return 0;
}

static uint64_t fsck_problems(const char *dir, bool repair)
{
	return th_fsck(dir, (struct fsck_opts){ .deep = true, .repair = repair }).problems;
}

static void test_fsck_rebuilds_links(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pair p;
	put_pair(st, &p, 14, 900, 3, 2);
	const char *b = p.b;
	uint64_t ib = p.ib;
	struct blobkey kb = p.kb, base;
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &kb, NULL), 0);
	assert_int_equal(th_delta_of(st, &kb, &base), 1);
	/* the link rows lost: fsck names the delta, --repair writes them again */
	assert_int_equal(store_write(st, drop_prefix_cb, "dlnk"), 0);
	assert_int_equal(store_close(st), 0);
	assert_true(fsck_problems(th_store_dir(dir), false) > 0);
	assert_true(fsck_problems(th_store_dir(dir), true) > 0);
	th_assert_fsck_clean(th_store_dir(dir));
	st = open_store(dir, false);
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(blob_delta_linked(txn, st, &base, &kb), 1);
	store_read_end(st, txn);
	th_read_back(st, ib, b);
	assert_int_equal(store_close(st), 0);
	free_pair(&p);
	th_rmdir(dir);
}

/* ---- shingle sets kept as differences (near.h) ---- */

/* text less its lines that name any of `gone` (NULL-terminated). */
static char *without_lines(const char *text, const char *const *gone)
{
	char *copy = strdup(text), *out = malloc(strlen(text) + 1);
	assert_non_null(copy);
	assert_non_null(out);
	size_t n = 0;
	for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
		bool drop = false;
		for (size_t i = 0; gone && gone[i]; i++)
			drop |= strstr(line, gone[i]) != NULL;
		if (!drop)
			n += (size_t)sprintf(out + n, "%s\n", line);
	}
	out[n] = 0;
	free(copy);
	return out;
}

/* The near answer of ino is `was` less the lines naming `gone`. */
static void assert_answer(struct store *st, uint64_t ino, const char *was, const char *const *gone)
{
	char *now = th_near_answer(st, ino), *want = without_lines(was, gone), *all = without_lines(now, NULL);
	assert_string_equal(all, want);
	free(now);
	free(want);
	free(all);
}

/* Three versions of a page: b an edit of a, c an edit of b, each through
 * the delta step; b a delta on a, c on b (the nearest), and so each set a
 * difference from its base's. */
struct versions {
	char *p[3];
	uint64_t ino[3];
	struct blobkey k[3];
};

static void put_versions(struct store *st, struct versions *v, uint64_t seed)
{
	static const char *const names[] = { "a.html", "b.html", "c.html" };
	v->p[0] = th_page(seed, 900, "");
	v->p[1] = edited(v->p[0], 1, 2);
	v->p[2] = edited(v->p[1], 2, 2);
	for (int i = 0; i < 3; i++) {
		v->ino[i] = th_put_page(st, PD_ROOT_INO, names[i], v->p[i]);
		assert_int_equal(sigq_drain(st), 0);
		v->k[i] = th_blob_of(st, v->ino[i]);
		assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &v->k[i], NULL), 0);
	}
	struct blobkey base;
	assert_int_equal(th_delta_of(st, &v->k[1], &base), 1);
	assert_true(blobkey_equal(&base, &v->k[0]));
	assert_int_equal(th_delta_of(st, &v->k[2], &base), 1);
	assert_true(blobkey_equal(&base, &v->k[1]));
}

static void free_versions(struct versions *v)
{
	for (int i = 0; i < 3; i++)
		free(v->p[i]);
}

struct unref_arg {
	struct blobkey k;
	uint64_t ino;
	struct blobkey dep;
	int dep_format; /* the dependent's row format inside the transaction */
};

/* The base's last reference goes, then the transaction fails: what a
 * crash before the commit leaves. */
static int unref_then_fail_cb(struct wtx *w, void *p)
{
	struct unref_arg *a = p;
	assert_int_equal(blob_unref(w, &a->k, a->ino), 0);
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(&a->dep, kb);
	MDB_val key = { BLOBKEY_BYTES, kb }, v;
	assert_int_equal(mdb_get(w->txn, w->st->db_nearfeat, &key, &v), 0);
	a->dep_format = ((const uint8_t *)v.mv_data)[0];
	return -ECANCELED;
}

static void test_set_diffs_and_their_bases(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct versions v;
	put_versions(st, &v, 21);
	size_t whole, len;
	assert_int_equal(th_set_row_format(st, &v.k[0], &whole), NEARSET_FORMAT);
	for (int i = 1; i < 3; i++) {
		assert_int_equal(th_set_row_format(st, &v.k[i], &len), NEARSET_DIFF_FORMAT);
		assert_true(len * 4 < whole);
	}
	for (int i = 0; i < 3; i++)
		th_assert_set_of_page(st, &v.k[i], v.p[i]);
	char *before[3];
	for (int i = 0; i < 3; i++)
		before[i] = th_near_answer(st, v.ino[i]);
	assert_non_null(strstr(before[2], "b.html")); /* they answer one another */
	assert_non_null(strstr(before[1], "a.html"));
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));

	/* a's last reference goes in a transaction that fails: b's set was
	 * written whole in it, and nothing of it stays */
	st = open_store(dir, false);
	struct unref_arg ua = { v.k[0], v.ino[0], v.k[1], 0 };
	assert_int_equal(store_write(st, unref_then_fail_cb, &ua), -ECANCELED);
	assert_int_equal(ua.dep_format, NEARSET_FORMAT);
	assert_int_equal(th_set_row_format(st, &v.k[1], NULL), NEARSET_DIFF_FORMAT);
	assert_int_equal(th_set_row_format(st, &v.k[0], NULL), NEARSET_FORMAT);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));

	/* a's last name goes: b's set is whole, c's still a difference
	 * from b's; the answers are those of before less a */
	st = open_store(dir, false);
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a.html", &gone_ino, &gone), 0);
	assert_true(kept(st, &v.k[0]));
	assert_int_equal(th_set_row_format(st, &v.k[0], NULL), 0);
	assert_int_equal(th_set_row_format(st, &v.k[1], NULL), NEARSET_FORMAT);
	assert_int_equal(th_set_row_format(st, &v.k[2], NULL), NEARSET_DIFF_FORMAT);
	th_assert_set_of_page(st, &v.k[1], v.p[1]);
	th_assert_set_of_page(st, &v.k[2], v.p[2]);
	static const char *const no_a[] = { "a.html", NULL }, *const no_ab[] = { "a.html", "b.html", NULL };
	for (int i = 1; i < 3; i++)
		assert_answer(st, v.ino[i], before[i], no_a);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));

	/* b goes too (c's base, the middle of the chain): c's set whole */
	st = open_store(dir, false);
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "b.html", &gone_ino, &gone), 0);
	assert_int_equal(th_set_row_format(st, &v.k[2], NULL), NEARSET_FORMAT);
	th_assert_set_of_page(st, &v.k[2], v.p[2]);
	assert_answer(st, v.ino[2], before[2], no_ab);
	/* the deltas on the dead bases stored whole again */
	uint64_t moved;
	assert_int_equal(ndelta_rebase_kept(st, &moved), 0);
	assert_true(moved >= 1);
	th_read_back(st, v.ino[2], v.p[2]);
	th_assert_set_of_page(st, &v.k[2], v.p[2]);
	assert_answer(st, v.ino[2], before[2], no_ab);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	for (int i = 0; i < 3; i++)
		free(before[i]);
	free_versions(&v);
	th_rmdir(dir);
}

struct forget_arg {
	struct blobkey k;
	int format_after;
};

/* b's record stops hanging on its base (as when it is freed, healed or
 * stored whole again): its set is written whole in that transaction; the
 * transaction is then cancelled (the record is still the delta). */
static int forget_cb(struct wtx *w, void *p)
{
	struct forget_arg *a = p;
	struct fprec r;
	assert_int_equal(blob_get(w->txn, w->st, &a->k, &r), 0);
	assert_int_equal(blob_delta_forget(w, &a->k, &r), 0);
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(&a->k, kb);
	MDB_val key = { BLOBKEY_BYTES, kb }, v;
	assert_int_equal(mdb_get(w->txn, w->st->db_nearfeat, &key, &v), 0);
	a->format_after = ((const uint8_t *)v.mv_data)[0];
	return -ECANCELED;
}

static void test_set_diff_unlinked(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pair p;
	put_delta_pair(st, &p, 22, 900, 1, 2);
	assert_int_equal(th_set_row_format(st, &p.kb, NULL), NEARSET_DIFF_FORMAT);
	struct forget_arg fa = { p.kb, 0 };
	assert_int_equal(store_write(st, forget_cb, &fa), -ECANCELED);
	assert_int_equal(fa.format_after, NEARSET_FORMAT);
	assert_int_equal(th_set_row_format(st, &p.kb, NULL), NEARSET_DIFF_FORMAT);
	/* the page's own last name goes: its set and rows with it */
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "b.html", &gone_ino, &gone), 0);
	assert_int_equal(th_set_row_format(st, &p.kb, NULL), 0);
	th_assert_set_of_page(st, &p.ka, p.a);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_pair(&p);
	th_rmdir(dir);
}

/* Damage to sets kept as differences: a row cut short, and a base whose
 * set is gone. fsck names each; --repair makes the set again from the
 * page (whole), and fsck is clean after. */
/* Blob k's difference row: a copy of its bytes into buf, and its length. */
static size_t diff_row_copy(struct wtx *w, const struct blobkey *k, uint8_t buf[NEARSET_DIFF_MAX_BYTES])
{
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(k, kb);
	MDB_val key = { BLOBKEY_BYTES, kb }, v;
	assert_int_equal(mdb_get(w->txn, w->st->db_nearfeat, &key, &v), 0);
	assert_true(v.mv_size <= NEARSET_DIFF_MAX_BYTES);
	memcpy(buf, v.mv_data, v.mv_size);
	return v.mv_size;
}

/* Blob k's row written as len bytes of buf. */
static int diff_row_put(struct wtx *w, const struct blobkey *k, const uint8_t *buf, size_t len)
{
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(k, kb);
	MDB_val key = { BLOBKEY_BYTES, kb }, v = { len, (void *)buf };
	return pd_mdb_err(mdb_put(w->txn, w->st->db_nearfeat, &key, &v, 0));
}

static int cut_row_cb(struct wtx *w, void *p)
{
	uint8_t buf[NEARSET_DIFF_MAX_BYTES];
	size_t len = diff_row_copy(w, p, buf);
	return diff_row_put(w, p, buf, len - 1);
}

static int drop_row_cb(struct wtx *w, void *p)
{
	const struct blobkey *k = p;
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(k, kb);
	MDB_val key = { BLOBKEY_BYTES, kb };
	return mdb_del(w->txn, w->st->db_nearfeat, &key, NULL) ? -EIO : 0;
}

static void test_set_diff_damaged(void **state)
{
	(void)state;
	for (int damage = 0; damage < 2; damage++) {
		char *dir = th_tmpdir();
		struct store *st = open_store(dir, true);
		struct pair p;
		put_delta_pair(st, &p, 23 + (uint64_t)damage, 900, 1, 2);
		assert_int_equal(th_set_row_format(st, &p.kb, NULL), NEARSET_DIFF_FORMAT);
		if (damage == 0)
			assert_int_equal(store_write(st, cut_row_cb, &p.kb), 0);
		else
			assert_int_equal(store_write(st, drop_row_cb, &p.ka), 0);
		assert_int_equal(store_close(st), 0);
		struct fsck_result r = th_fsck(th_store_dir(dir), (struct fsck_opts){ .deep = true });
		assert_true(r.problems > 0);
		r = th_fsck(th_store_dir(dir), (struct fsck_opts){ .deep = true, .repair = true });
		assert_true(r.problems > 0);
		th_assert_fsck_clean(th_store_dir(dir));
		st = open_store(dir, false);
		assert_int_equal(th_set_row_format(st, &p.kb, NULL), NEARSET_FORMAT);
		th_assert_set_of_page(st, &p.kb, p.b);
		th_read_back(st, p.ib, p.b);
		assert_int_equal(store_close(st), 0);
		free_pair(&p);
		th_rmdir(dir);
	}
}

/* Link rows base -> fake deltas (keys of no blob): how many deltas a base
 * has, as the bound on its differences counts them. put: add, else take
 * them out again. */
struct fake_links {
	struct blobkey base;
	unsigned n;
	bool put;
};

static int fake_links_cb(struct wtx *w, void *p)
{
	struct fake_links *f = p;
	for (unsigned i = 0; i < f->n; i++) {
		uint8_t kb[4 + 2 * BLOBKEY_BYTES];
		struct blobkey dep = { .variant = 0 };
		memset(dep.md5, 0xf0, 16);
		dep.md5[0] = (uint8_t)i; /* n distinct keys, up to 65,536 */
		dep.md5[1] = (uint8_t)(i >> 8);
		memcpy(kb, "dlnk", 4);
		blobkey_encode(&f->base, kb + 4);
		blobkey_encode(&dep, kb + 4 + BLOBKEY_BYTES);
		MDB_val k = { sizeof kb, kb }, v = { 0, kb };
		int rc = f->put ? mdb_put(w->txn, w->st->db_meta, &k, &v, 0) : mdb_del(w->txn, w->st->db_meta, &k, NULL);
		if (rc)
			return -EIO;
	}
	return 0;
}

/* A base with NEAR_SET_DIFFS_PER_BASE deltas on it takes no more
 * differences (the work its set's removal does is bounded): the next
 * delta's set stays whole; with one fewer, it is a difference. */
static void test_set_diff_bound(void **state)
{
	(void)state;
	for (unsigned others = NEAR_SET_DIFFS_PER_BASE - 1; others <= NEAR_SET_DIFFS_PER_BASE; others++) {
		char *dir = th_tmpdir();
		struct store *st = open_store(dir, true);
		struct pair p;
		put_pair(st, &p, 25, 900, 1, 2);
		assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &p.ka, NULL), 0);
		struct fake_links f = { p.ka, others, true };
		assert_int_equal(store_write(st, fake_links_cb, &f), 0);
		assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &p.kb, NULL), 0);
		struct blobkey base;
		assert_int_equal(th_delta_of(st, &p.kb, &base), 1);
		assert_int_equal(th_set_row_format(st, &p.kb, NULL),
				 others < NEAR_SET_DIFFS_PER_BASE ? NEARSET_DIFF_FORMAT : NEARSET_FORMAT);
		th_assert_set_of_page(st, &p.kb, p.b);
		f.put = false;
		assert_int_equal(store_write(st, fake_links_cb, &f), 0);
		assert_int_equal(store_close(st), 0);
		th_assert_fsck_clean(th_store_dir(dir));
		free_pair(&p);
		th_rmdir(dir);
	}
}

/* Is k's record a delta of more than one chunk (pack.h's chunked delta)? */
static uint32_t chunks_of(struct store *st, const struct blobkey *k)
{
	struct fprec r;
	uint32_t n;
	unsigned shift;
	assert_int_equal(blob_read(st, k, &r), 0);
	assert_int_equal(blob_chunking(st, &r, &n, &shift), 0);
	return n;
}

/* Page bytes [off, off+len) of blob k read through its chunks. */
static void read_range_back(struct store *st, const struct blobkey *k, const char *page, uint64_t off, size_t len)
{
	struct fprec r;
	assert_int_equal(blob_read(st, k, &r), 0);
	char *got = malloc(len);
	assert_int_equal(blob_read_range(st, k, &r, off, len, got), 0);
	assert_memory_equal(got, page + off, len);
	free(got);
}

/* A page over a chunk and its edit: the edit is a chunked delta on it,
 * which reads back whole and at offsets, is encoded again on the same base
 * by the compactor's cold pass, and is stored whole again (in chunks) when
 * its base dies. */
static void test_large_pages(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pair p;
	put_delta_pair(st, &p, 23, 220000, 9, 3);
	const size_t len = strlen(p.b), cs = (size_t)1 << PACK_DEFAULT_CHUNK_SHIFT;
	assert_true(len > 4 * cs);
	struct blobkey base;
	struct fprec ra = th_fprec_of(st, p.ia), rb = th_fprec_of(st, p.ib);
	assert_int_equal(chunks_of(st, &p.kb), (len + cs - 1) / cs);
	assert_true(rb.pack_len * 20 < ra.pack_len);
	th_read_back(st, p.ib, p.b);
	read_range_back(st, &p.kb, p.b, 0, 100);
	read_range_back(st, &p.kb, p.b, cs - 10, 20);
	read_range_back(st, &p.kb, p.b, 3 * cs + 5, len - 3 * cs - 5);

	/* encoded again, colder, against the same base */
	struct blob_compact_cfg cfg = { .share = 1.0, .every_pack = true, .cold = { .level = 19, .deltas = true } };
	struct blob_compact_stats done = { 0 };
	assert_int_equal(blob_compact_run(st, &cfg, &done), 0);
	assert_int_equal(done.damaged, 0);
	assert_int_equal(th_delta_of(st, &p.kb, &base), 1);
	assert_true(blobkey_equal(&base, &p.ka));
	assert_int_equal(chunks_of(st, &p.kb), (len + cs - 1) / cs);
	th_read_back(st, p.ib, p.b);
	th_read_back(st, p.ia, p.a);
	read_range_back(st, &p.kb, p.b, 2 * cs - 3, 9);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir)); /* deep: each chunk decoded and checked */

	/* the base's last name goes: the delta is stored whole again, in chunks */
	st = open_store(dir, false);
	uint64_t gone_ino, moved;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a.html", &gone_ino, &gone), 0);
	assert_true(kept(st, &p.ka));
	read_range_back(st, &p.kb, p.b, cs + 1, 1000);
	assert_int_equal(ndelta_rebase_kept(st, &moved), 0);
	assert_int_equal(moved, 1);
	assert_false(kept(st, &p.ka));
	assert_int_equal(th_delta_of(st, &p.kb, &base), 0);
	assert_int_equal(chunks_of(st, &p.kb), (len + cs - 1) / cs);
	th_read_back(st, p.ib, p.b);
	read_range_back(st, &p.kb, p.b, 4 * cs, len - 4 * cs);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_pair(&p);
	th_rmdir(dir);
}

/* ---- sets kept as differences, damaged ---- */

/* Blob k's difference row made to name another base (damage fsck reports:
 * a difference from a base its record is not a delta on). */
static int rename_diff_base_cb(struct wtx *w, void *p)
{
	uint8_t buf[NEARSET_DIFF_MAX_BYTES];
	size_t len = diff_row_copy(w, p, buf);
	buf[2] ^= 0x5a; /* a byte of the base's MD5 */
	return diff_row_put(w, p, buf, len);
}

/* Two deltas on one base, the set of the one let go of first naming
 * another base: letting go of the base moves both whole (the damaged row
 * is no refusal), the base is freed only after both, every page reads
 * back, and fsck --repair leaves the store clean. */
static void test_set_diff_naming_another_base(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	char *a = th_page(31, 900, ""), *b = edited(a, 1, 2), *c = edited(a, 7, 2);
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a);
	assert_int_equal(sigq_drain(st), 0);
	struct blobkey ka = th_blob_of(st, ia), base;
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &ka, NULL), 0);
	uint64_t ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	assert_int_equal(sigq_drain(st), 0);
	struct blobkey kb = th_blob_of(st, ib);
	assert_int_equal(ndelta_page(st, NDELTA_RULE_SIMHASH, &kb, NULL), 0);
	uint64_t ic = th_put_page(st, PD_ROOT_INO, "c.html", c);
	assert_int_equal(sigq_drain(st), 0);
	struct blobkey kc = th_blob_of(st, ic);
	assert_int_equal(ndelta_page(st, NDELTA_RULE_SIMHASH, &kc, NULL), 0);
	assert_int_equal(th_delta_of(st, &kb, &base), 1);
	assert_true(blobkey_equal(&base, &ka));
	assert_int_equal(th_delta_of(st, &kc, &base), 1);
	assert_true(blobkey_equal(&base, &ka));
	assert_int_equal(th_set_row_format(st, &kb, NULL), NEARSET_DIFF_FORMAT);
	assert_int_equal(th_set_row_format(st, &kc, NULL), NEARSET_DIFF_FORMAT);
	/* the dependent walked first (link rows in key order) */
	const struct blobkey *first = memcmp(kb.md5, kc.md5, 16) < 0 ? &kb : &kc;
	assert_int_equal(store_write(st, rename_diff_base_cb, (void *)first), 0);
	uint64_t gone_ino, moved = 0;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, "a.html", &gone_ino, &gone), 0);
	assert_true(kept(st, &ka));
	assert_int_equal(ndelta_rebase_kept(st, &moved), 0);
	assert_int_equal(moved, 2);
	assert_false(kept(st, &ka));
	assert_int_equal(th_delta_of(st, &kb, &base), 0);
	assert_int_equal(th_delta_of(st, &kc, &base), 0);
	th_read_back(st, ib, b);
	th_read_back(st, ic, c);
	assert_int_equal(store_close(st), 0);
	struct fsck_result r = th_fsck(th_store_dir(dir), (struct fsck_opts){ .deep = true, .repair = true });
	assert_true(r.problems >= 1); /* the renamed row */
	th_assert_fsck_clean(th_store_dir(dir));
	st = open_store(dir, false);
	th_read_back(st, ib, b);
	th_read_back(st, ic, c);
	assert_int_equal(store_close(st), 0);
	free(a);
	free(b);
	free(c);
	th_rmdir(dir);
}

/* The base's record without its signature (so fsck --repair drops the
 * base's set): the difference from it is written whole first, and the
 * page keeps its set. */
static int clear_simhash_cb(struct wtx *w, void *p)
{
	const struct blobkey *k = p;
	struct fprec r;
	int rc = blob_get(w->txn, w->st, k, &r);
	if (rc)
		return rc;
	r.flags &= (uint8_t)~FPREC_HAS_SIMHASH;
	return blob_put(w->txn, w->st, k, &r);
}

static void test_set_diff_base_set_dropped_by_repair(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pair p;
	put_delta_pair(st, &p, 22, 900, 1, 2);
	assert_int_equal(th_set_row_format(st, &p.kb, NULL), NEARSET_DIFF_FORMAT);
	assert_int_equal(store_write(st, clear_simhash_cb, &p.ka), 0);
	assert_int_equal(store_close(st), 0);
	th_fsck(th_store_dir(dir), (struct fsck_opts){ .deep = true, .repair = true });
	th_assert_fsck_clean(th_store_dir(dir));
	st = open_store(dir, false);
	assert_int_equal(th_set_row_format(st, &p.kb, NULL), NEARSET_FORMAT);
	MDB_txn *txn;
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_set_get(txn, st, &p.kb, sig), 0);
	assert_true(sig->has_set);
	store_read_end(st, txn);
	free(sig);
	th_read_back(st, p.ib, p.b);
	assert_int_equal(store_close(st), 0);
	free_pair(&p);
	th_rmdir(dir);
}

/* The base's inode row lost (so no inode refers to it): fsck --repair
 * keeps it for its delta, as the last reference going would, instead of
 * dropping it and losing the delta's page. */
static int drop_inode_row_cb(struct wtx *w, void *p)
{
	uint8_t kb[8];
	MDB_val k = store_ino_key(kb, *(const uint64_t *)p);
	return pd_mdb_err(mdb_del(w->txn, w->st->db_inodes, &k, NULL));
}

static void test_unreferenced_base_kept_by_repair(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = open_store(dir, true);
	struct pair p;
	put_delta_pair(st, &p, 22, 900, 1, 2);
	assert_int_equal(store_write(st, drop_inode_row_cb, &p.ia), 0);
	assert_int_equal(store_close(st), 0);
	th_fsck(th_store_dir(dir), (struct fsck_opts){ .deep = true, .repair = true });
	th_assert_fsck_clean(th_store_dir(dir));
	st = open_store(dir, false);
	assert_true(kept(st, &p.ka));
	th_read_back(st, p.ib, p.b);
	uint64_t moved = 0;
	assert_int_equal(ndelta_rebase_kept(st, &moved), 0);
	assert_int_equal(moved, 1);
	assert_false(kept(st, &p.ka));
	th_read_back(st, p.ib, p.b);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	free_pair(&p);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delta_and_kept_base),
		cmocka_unit_test(test_kept_base_stored_again),
		cmocka_unit_test(test_compactor_moves_kept_base),
		cmocka_unit_test(test_cold_base_and_delta),
		cmocka_unit_test(test_damaged_delta_checked_by_whole_pages_pass),
		cmocka_unit_test(test_chain_bound),
		cmocka_unit_test(test_candidates_bound),
		cmocka_unit_test(test_move_of_changed_record_refused),
		cmocka_unit_test(test_fsck_rebuilds_links),
		cmocka_unit_test(test_set_diffs_and_their_bases),
		cmocka_unit_test(test_set_diff_unlinked),
		cmocka_unit_test(test_set_diff_damaged),
		cmocka_unit_test(test_set_diff_bound),
		cmocka_unit_test(test_large_pages),
		cmocka_unit_test(test_set_diff_naming_another_base),
		cmocka_unit_test(test_set_diff_base_set_dropped_by_repair),
		cmocka_unit_test(test_unreferenced_base_kept_by_repair),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
