/* test_setcache.c - the cache of resolved shingle sets (near.h,
 * near_set_cache): a set resolved again is answered from the cache, and
 * only while every row of its chain is the one decoded: a base whose set
 * changes or goes, with the differences from it left naming it or written
 * whole, in the cache's own write transaction or in another, is decoded
 * again, and every answer is the one resolved without the cache; the
 * difference the delta step writes is kept with its set. A fixed cache
 * (a walk in which no set changes, near_each_set) keeps the bases alone
 * and answers them at once, within the chain's bound, and never for a
 * base whose set does not decode. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "blob/blob.h"
#include "helpers.h"
#include "near/near.h"
#include "near/near_int.h"
#include "near/ndelta.h"
#include "near/sigq.h"

/* Pages a, b (an edit of a, a delta on it) and c (an edit of b, a delta
 * on b): b's and c's sets kept as differences, a chain of two. */
struct chain {
	char *p[3];
	struct blobkey k[3];
};

static char *edited(const char *page, unsigned e)
{
	char *p = strdup(page);
	size_t len = strlen(p);
	for (unsigned i = 0; i < 2; i++) {
		size_t at = (len / 3 + (size_t)e * 997 + i * 131) % (len - 40);
		memcpy(p + at, "EDITED", 6);
		p[at + 6] = (char)('a' + (e + i) % 26);
	}
	return p;
}

static struct store *put_chain(const char *dir, struct chain *c)
{
	struct store_opts o = { .delta_rule = NDELTA_RULE_OFF, .no_sign_thread = true };
	struct store *st = th_store(dir, NULL, &o);
	static const char *const names[] = { "a.html", "b.html", "c.html" };
	c->p[0] = th_page(41, 900, "");
	c->p[1] = edited(c->p[0], 1);
	c->p[2] = edited(c->p[1], 2);
	for (int i = 0; i < 3; i++) {
		uint64_t ino = th_put_page(st, PD_ROOT_INO, names[i], c->p[i]);
		assert_int_equal(sigq_drain(st), 0);
		c->k[i] = th_blob_of(st, ino);
		assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &c->k[i], NULL), 0);
	}
	assert_int_equal(th_set_row_format(st, &c->k[0], NULL), NEARSET_FORMAT);
	assert_int_equal(th_set_row_format(st, &c->k[1], NULL), NEARSET_DIFF_FORMAT);
	assert_int_equal(th_set_row_format(st, &c->k[2], NULL), NEARSET_DIFF_FORMAT);
	return st;
}

static void free_chain(struct chain *c)
{
	for (int i = 0; i < 3; i++)
		free(c->p[i]);
}

static bool same_set(const struct near_sig *a, const struct near_sig *b)
{
	if (a->has_set != b->has_set)
		return false;
	return !a->has_set || (a->set.shingles == b->set.shingles && a->set.n == b->set.n &&
			       a->set.bits == b->set.bits && a->set.complete == b->set.complete &&
			       !memcmp(a->set.h, b->set.h, a->set.n * sizeof a->set.h[0]));
}

/* Blob k's set in txn through cache into *got; it must be the one
 * resolved without a cache. */
static void get_checked(MDB_txn *txn, struct store *st, struct near_set_cache *cache, const struct blobkey *k,
			struct near_sig *got)
{
	struct near_sig *plain = malloc(sizeof *plain);
	assert_non_null(plain);
	assert_int_equal(near_set_get(txn, st, k, plain), 0);
	assert_int_equal(near_set_get_cached(txn, st, cache, k, got), 0);
	assert_true(same_set(got, plain));
	free(plain);
}

/* The same in a read transaction of its own. */
static void read_checked(struct store *st, struct near_set_cache *cache, const struct blobkey *k, struct near_sig *got)
{
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	get_checked(txn, st, cache, k, got);
	store_read_end(st, txn);
}

static uint64_t decoded(const struct near_set_cache *c)
{
	uint64_t h, d;
	near_set_cache_counts(c, &h, &d);
	return d;
}

static uint64_t hits(const struct near_set_cache *c)
{
	uint64_t h, d;
	near_set_cache_counts(c, &h, &d);
	return h;
}

/* Blob k's row written whole with the set of `page` (its set changed;
 * the differences from it are left as they are, naming it). */
static int put_row_of_page(struct wtx *w, const struct blobkey *k, const char *page)
{
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	assert_int_equal(near_sig_of_page(page, strlen(page), sig), 0);
	assert_true(sig->has_set);
	nearset_to_stored(&sig->set);
	uint8_t kb[BLOBKEY_BYTES], vb[NEARSET_MAX_BYTES];
	blobkey_encode(k, kb);
	MDB_val key = { BLOBKEY_BYTES, kb }, v = { nearset_encode(&sig->set, vb), vb };
	free(sig);
	return pd_mdb_err(mdb_put(w->txn, w->st->db_nearfeat, &key, &v, 0));
}

struct change {
	struct chain *c;
	const char *page; /* a's new set: this page's */
};

static int change_base_row_cb(struct wtx *w, void *p)
{
	struct change *ch = p;
	return put_row_of_page(w, &ch->c->k[0], ch->page);
}

static int drop_base_row_cb(struct wtx *w, void *p)
{
	const struct blobkey *k = p;
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(k, kb);
	MDB_val key = { BLOBKEY_BYTES, kb };
	return pd_mdb_err(mdb_del(w->txn, w->st->db_nearfeat, &key, NULL));
}

struct resign {
	const struct blobkey *k;
	const struct near_sig *sig;
};

static int resign_cb(struct wtx *w, void *p)
{
	struct resign *r = p;
	return near_set_put(w->txn, w->st, r->k, r->sig);
}

static int remove_set_cb(struct wtx *w, void *p)
{
	return near_set_remove(w->txn, w->st, p);
}

/* Resolved again, the sets are answered from the cache. */
static void test_hits(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct chain c;
	struct store *st = put_chain(dir, &c);
	struct near_set_cache *cache = near_set_cache_new();
	assert_non_null(cache);
	struct near_sig *got = malloc(sizeof *got);
	assert_non_null(got);
	read_checked(st, cache, &c.k[2], got); /* c, through b and a */
	assert_true(got->has_set);
	assert_int_equal(decoded(cache), 3);
	assert_int_equal(hits(cache), 0);
	for (int i = 0; i < 3; i++)
		read_checked(st, cache, &c.k[i], got);
	assert_int_equal(decoded(cache), 3);
	assert_true(hits(cache) >= 3);
	free(got);
	near_set_cache_free(cache);
	assert_int_equal(store_close(st), 0);
	free_chain(&c);
	th_rmdir(dir);
}

/* a's set changes under the cache with b's difference left naming it
 * (the resolve decodes what the rows say, whatever wrote them): b and c
 * resolved again against a's new set, not answered from the cache. */
static void test_base_changes(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct chain c;
	struct store *st = put_chain(dir, &c);
	struct near_set_cache *cache = near_set_cache_new();
	struct near_sig *was = malloc(3 * sizeof *was), *got = malloc(sizeof *got);
	assert_non_null(cache);
	assert_non_null(was);
	assert_non_null(got);
	for (int i = 0; i < 3; i++)
		read_checked(st, cache, &c.k[i], &was[i]);
	char *other = th_page(42, 900, "");
	struct change ch = { &c, other };
	assert_int_equal(store_write(st, change_base_row_cb, &ch), 0);
	uint64_t before = decoded(cache);
	for (int i = 0; i < 3; i++) {
		read_checked(st, cache, &c.k[i], got);
		assert_true(got->has_set);
		assert_false(same_set(got, &was[i])); /* a stale answer would be was[i] */
	}
	assert_int_equal(decoded(cache), before + 3);
	/* through the interface: a signed again with b's page, b's set
	 * written whole first (as it was), c's still a difference from b */
	for (int i = 0; i < 3; i++)
		read_checked(st, cache, &c.k[i], &was[i]);
	struct near_sig *sig = malloc(sizeof *sig);
	assert_non_null(sig);
	assert_int_equal(near_sig_of_page(c.p[1], strlen(c.p[1]), sig), 0);
	struct resign rs = { &c.k[0], sig };
	assert_int_equal(store_write(st, resign_cb, &rs), 0);
	assert_int_equal(th_set_row_format(st, &c.k[1], NULL), NEARSET_FORMAT);
	assert_int_equal(th_set_row_format(st, &c.k[2], NULL), NEARSET_DIFF_FORMAT);
	read_checked(st, cache, &c.k[0], got);
	assert_false(same_set(got, &was[0]));
	for (int i = 1; i < 3; i++) {
		read_checked(st, cache, &c.k[i], got);
		assert_true(same_set(got, &was[i]));
	}
	free(sig);
	free(other);
	free(was);
	free(got);
	near_set_cache_free(cache);
	assert_int_equal(store_close(st), 0);
	free_chain(&c);
	th_rmdir(dir);
}

/* a's set goes: with b's difference left naming it, b and c have no set
 * (damaged: fsck's to report), though the cache held theirs; through
 * near_set_remove, b's set is written whole first and stays. */
static void test_base_goes(void **state)
{
	(void)state;
	for (int how = 0; how < 2; how++) {
		char *dir = th_tmpdir();
		struct chain c;
		struct store *st = put_chain(dir, &c);
		struct near_set_cache *cache = near_set_cache_new();
		struct near_sig *was = malloc(3 * sizeof *was), *got = malloc(sizeof *got);
		assert_non_null(cache);
		assert_non_null(was);
		assert_non_null(got);
		for (int i = 0; i < 3; i++) {
			read_checked(st, cache, &c.k[i], &was[i]);
			assert_true(was[i].has_set);
		}
		if (how == 0) {
			assert_int_equal(store_write(st, drop_base_row_cb, &c.k[0]), 0);
		} else {
			assert_int_equal(store_write(st, remove_set_cb, &c.k[0]), 0);
		}
		for (int i = 0; i < 3; i++) {
			read_checked(st, cache, &c.k[i], got);
			if (i == 0 || how == 0)
				assert_false(got->has_set);
			else
				assert_true(same_set(got, &was[i]));
		}
		free(was);
		free(got);
		near_set_cache_free(cache);
		assert_int_equal(store_close(st), 0);
		free_chain(&c);
		th_rmdir(dir);
	}
}

struct in_txn {
	struct chain *c;
	struct near_set_cache *cache;
	const char *page;
	bool changed; /* b's set after a's changed differs from before */
};

/* In one write transaction (as the delta step's moves): b resolved, a's
 * set changed, b resolved again. */
static int change_in_txn_cb(struct wtx *w, void *p)
{
	struct in_txn *t = p;
	struct near_sig *before = malloc(sizeof *before), *after = malloc(sizeof *after);
	assert_non_null(before);
	assert_non_null(after);
	get_checked(w->txn, w->st, t->cache, &t->c->k[1], before);
	get_checked(w->txn, w->st, t->cache, &t->c->k[1], after);
	assert_true(same_set(before, after));
	int rc = put_row_of_page(w, &t->c->k[0], t->page);
	if (!rc) {
		get_checked(w->txn, w->st, t->cache, &t->c->k[1], after);
		t->changed = !same_set(before, after);
	}
	free(before);
	free(after);
	return rc ? rc : -ECANCELED;
}

static void test_change_in_the_same_transaction(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct chain c;
	struct store *st = put_chain(dir, &c);
	struct near_set_cache *cache = near_set_cache_new();
	assert_non_null(cache);
	char *other = th_page(43, 900, "");
	struct in_txn t = { &c, cache, other, false };
	assert_int_equal(store_write(st, change_in_txn_cb, &t), -ECANCELED);
	assert_true(t.changed);
	/* cancelled: what is committed is answered again, as it was */
	struct near_sig *got = malloc(sizeof *got);
	assert_non_null(got);
	for (int i = 0; i < 3; i++)
		read_checked(st, cache, &c.k[i], got);
	free(got);
	free(other);
	near_set_cache_free(cache);
	assert_int_equal(store_close(st), 0);
	free_chain(&c);
	th_rmdir(dir);
}

struct diff_arg {
	struct near_set_cache *cache;
	const struct blobkey *k, *base;
};

static int diff_cb(struct wtx *w, void *p)
{
	struct diff_arg *a = p;
	return near_set_diff(w->txn, w->st, a->cache, a->k, a->base);
}

/* The difference near_set_diff writes is kept in the cache with the set
 * it resolves to: the page's set is then answered without a decode, and
 * is the one resolved without the cache. */
static void test_diff_written_is_kept(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .delta_rule = NDELTA_RULE_OFF, .no_sign_thread = true };
	struct store *st = th_store(dir, NULL, &o);
	char *a = th_page(44, 900, ""), *b = edited(a, 1);
	uint64_t ia = th_put_page(st, PD_ROOT_INO, "a.html", a), ib = th_put_page(st, PD_ROOT_INO, "b.html", b);
	assert_int_equal(sigq_drain(st), 0);
	struct blobkey ka = th_blob_of(st, ia), kb = th_blob_of(st, ib);
	assert_int_equal(th_set_row_format(st, &kb, NULL), NEARSET_FORMAT);
	struct near_set_cache *cache = near_set_cache_new();
	struct near_sig *was = malloc(sizeof *was), *got = malloc(sizeof *got);
	assert_non_null(cache);
	assert_non_null(was);
	assert_non_null(got);
	read_checked(st, cache, &kb, was);
	struct diff_arg da = { cache, &kb, &ka };
	assert_int_equal(store_write(st, diff_cb, &da), 0);
	assert_int_equal(th_set_row_format(st, &kb, NULL), NEARSET_DIFF_FORMAT);
	uint64_t before = decoded(cache), hit = hits(cache);
	read_checked(st, cache, &kb, got); /* b, through a (resolved by near_set_diff) */
	assert_true(same_set(got, was));
	assert_int_equal(decoded(cache), before);
	assert_int_equal(hits(cache), hit + 2);
	free(was);
	free(got);
	free(a);
	free(b);
	near_set_cache_free(cache);
	assert_int_equal(store_close(st), 0);
	th_rmdir(dir);
}

/* ---- the fixed cache of a walk ---- */

struct walk_seen {
	size_t sets, undecoded;
	struct blobkey undecodable[4];
};

struct walk_ctx {
	MDB_txn *txn;
	struct store *st;
	struct walk_seen *seen;
};

/* Each set of the walk is the one resolved without a cache; the rows
 * whose set does not decode are noted. */
static int walk_cb(void *ctx, const MDB_val *key, const MDB_val *row, const struct nearset *s)
{
	struct walk_ctx *w = ctx;
	(void)row;
	struct blobkey k;
	assert_int_equal(key->mv_size, BLOBKEY_BYTES);
	blobkey_decode(key->mv_data, &k);
	struct nearset *plain = malloc(sizeof *plain);
	assert_non_null(plain);
	int rc = near_set_read(w->txn, w->st, &k, plain);
	if (s) {
		assert_int_equal(rc, 0);
		assert_true(plain->n == s->n && plain->shingles == s->shingles && plain->bits == s->bits &&
			    !memcmp(plain->h, s->h, s->n * sizeof s->h[0]));
		w->seen->sets++;
	} else {
		assert_int_equal(rc, -EINVAL);
		assert_true(w->seen->undecoded < 4);
		w->seen->undecodable[w->seen->undecoded++] = k;
	}
	free(plain);
	return 0;
}

static void walk(struct store *st, struct walk_seen *seen)
{
	*seen = (struct walk_seen){ 0 };
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	struct walk_ctx w = { txn, st, seen };
	assert_int_equal(near_each_set(txn, st, walk_cb, &w), 0);
	store_read_end(st, txn);
}

/* A fixed cache answers a base it holds without a decode, and keeps no
 * set that no difference names. */
static void test_fixed_keeps_bases(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct chain c;
	struct store *st = put_chain(dir, &c);
	assert_null(near_set_cache_fixed(1));
	struct near_set_cache *cache = near_set_cache_fixed(64);
	assert_non_null(cache);
	struct nearset *s = malloc(sizeof *s), *plain = malloc(sizeof *plain);
	assert_non_null(s);
	assert_non_null(plain);
	MDB_txn *txn;
	assert_int_equal(store_read_begin(st, &txn), 0);
	assert_int_equal(near_set_resolve_row_cached(txn, st, cache, &c.k[2], NULL, s), 0); /* c, through b and a */
	assert_int_equal(decoded(cache), 3);
	for (int i = 0; i < 2; i++) { /* b and a: bases, held */
		assert_int_equal(near_set_resolve_row_cached(txn, st, cache, &c.k[i], NULL, s), 0);
		assert_int_equal(near_set_read(txn, st, &c.k[i], plain), 0);
		assert_true(s->n == plain->n && !memcmp(s->h, plain->h, s->n * sizeof s->h[0]));
	}
	assert_int_equal(decoded(cache), 3);
	assert_int_equal(hits(cache), 2);
	/* c: no difference names it, so it was not kept (b is answered) */
	assert_int_equal(near_set_resolve_row_cached(txn, st, cache, &c.k[2], NULL, s), 0);
	assert_int_equal(decoded(cache), 4);
	assert_int_equal(hits(cache), 3);
	store_read_end(st, txn);
	free(s);
	free(plain);
	near_set_cache_free(cache);
	struct walk_seen seen;
	walk(st, &seen);
	assert_int_equal(seen.sets, 3);
	assert_int_equal(seen.undecoded, 0);
	assert_int_equal(store_close(st), 0);
	free_chain(&c);
	th_rmdir(dir);
}

/* A base whose set does not decode is never held: every difference on
 * it, down the chain, is reported as not decoding by the walk. */
static void test_fixed_damaged_base(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct chain c;
	struct store *st = put_chain(dir, &c);
	assert_int_equal(store_write(st, drop_base_row_cb, &c.k[0]), 0);
	struct walk_seen seen;
	walk(st, &seen);
	assert_int_equal(seen.sets, 0);
	assert_int_equal(seen.undecoded, 2);
	assert_int_equal(store_close(st), 0);
	free_chain(&c);
	th_rmdir(dir);
}

/* Rows written by hand: k[0] whole, k[i] the difference from k[i-1], a
 * chain one longer than NEAR_SET_DIFF_DEPTH, the keys in chain order. */
#define LONG_CHAIN (NEAR_SET_DIFF_DEPTH + 2)
struct long_chain {
	struct store *st;
	struct blobkey k[LONG_CHAIN];
};

static int put_long_chain_cb(struct wtx *w, void *p)
{
	struct long_chain *lc = p;
	struct near_sig *sig = malloc(LONG_CHAIN * sizeof *sig);
	uint8_t *vb = malloc(NEARSET_DIFF_MAX_BYTES + NEARSET_MAX_BYTES);
	assert_non_null(sig);
	assert_non_null(vb);
	char *page = th_page(45, 900, "");
	int rc = 0;
	for (unsigned i = 0; i < LONG_CHAIN && !rc; i++) {
		char *e = i ? edited(page, i) : strdup(page);
		assert_int_equal(near_sig_of_page(e, strlen(e), &sig[i]), 0);
		free(e);
		nearset_to_stored(&sig[i].set);
		lc->k[i] = (struct blobkey){ .md5 = { (uint8_t)(i + 1) } };
		size_t len = i ? nearset_diff_encode(&sig[i].set, &sig[i - 1].set, &lc->k[i - 1], vb)
			       : nearset_encode(&sig[i].set, vb);
		assert_true(len > 0);
		uint8_t kb[BLOBKEY_BYTES];
		blobkey_encode(&lc->k[i], kb);
		MDB_val key = { BLOBKEY_BYTES, kb }, v = { len, vb };
		rc = pd_mdb_err(mdb_put(w->txn, w->st->db_nearfeat, &key, &v, 0));
	}
	free(page);
	free(vb);
	free(sig);
	return rc;
}

/* A base held at depth d is not the answer where the chain may follow
 * fewer than d more differences: the walk holds k[3] (depth 3) when it
 * resolves k[4]; k[5]'s chain is one too long and must not decode
 * through it. */
static void test_fixed_chain_bound(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = { .delta_rule = NDELTA_RULE_OFF, .no_sign_thread = true };
	struct long_chain lc = { .st = th_store(dir, NULL, &o) };
	assert_int_equal(store_write(lc.st, put_long_chain_cb, &lc), 0);
	struct walk_seen seen;
	walk(lc.st, &seen);
	assert_int_equal(seen.sets, LONG_CHAIN - 1);
	assert_int_equal(seen.undecoded, 1);
	assert_true(blobkey_equal(&seen.undecodable[0], &lc.k[LONG_CHAIN - 1]));
	assert_int_equal(store_close(lc.st), 0);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hits),
		cmocka_unit_test(test_base_changes),
		cmocka_unit_test(test_base_goes),
		cmocka_unit_test(test_change_in_the_same_transaction),
		cmocka_unit_test(test_diff_written_is_kept),
		cmocka_unit_test(test_fixed_keeps_bases),
		cmocka_unit_test(test_fixed_damaged_base),
		cmocka_unit_test(test_fixed_chain_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
