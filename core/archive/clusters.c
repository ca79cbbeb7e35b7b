/* clusters.c - duplicate groups and near-duplicate clusters of the whole
 * archive. See clusters.h. */
#include "clusters.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blob/blob.h"
#include "near/near.h"
#include "near/sigq.h"
#include "paths.h"

/* ---- the names of a group ---- */

struct names {
	char **path;
	size_t *page;
	size_t n, cap;
	size_t cur_page;
};

static int names_add(void *ctx, const char *path, size_t len)
{
	struct names *nm = ctx;
	if (nm->n == nm->cap) {
		size_t cap = nm->cap ? 2 * nm->cap : 16;
		char **p = realloc(nm->path, cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		nm->path = p;
		size_t *g = realloc(nm->page, cap * sizeof *g);
		if (!g)
			return -ENOMEM;
		nm->page = g;
		nm->cap = cap;
	}
	char *s = malloc(len + 1);
	if (!s)
		return -ENOMEM;
	memcpy(s, path, len);
	s[len] = 0;
	nm->path[nm->n] = s;
	nm->page[nm->n++] = nm->cur_page;
	return 0;
}

static void names_clear(struct names *nm)
{
	for (size_t i = 0; i < nm->n; i++)
		free(nm->path[i]);
	nm->n = 0;
	nm->cur_page = 0;
}

static void names_free(struct names *nm)
{
	names_clear(nm);
	free(nm->path);
	free(nm->page);
}

static int emit(struct names *nm, uint64_t *id, size_t pages, size_t min_files, cluster_fn cb, void *ctx)
{
	if (nm->n < min_files || !nm->n)
		return 0;
	struct cluster_group g = { ++*id, pages, nm->n, (const char *const *)nm->path, nm->page };
	return cb(ctx, &g);
}

/* ---- the pages: every fingerprint's key, in key order ---- */

struct pages {
	uint8_t (*key)[BLOBKEY_BYTES];
	size_t n;
};

static int pages_load(MDB_txn *txn, struct store *st, struct pages *p)
{
	MDB_stat ms;
	int rc = pd_mdb_err(mdb_stat(txn, st->db_fp, &ms));
	if (rc)
		return rc;
	p->key = malloc((ms.ms_entries ? ms.ms_entries : 1) * sizeof *p->key);
	p->n = 0;
	if (!p->key)
		return -ENOMEM;
	MDB_cursor *c;
	if ((rc = pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &c))))
		return rc;
	MDB_val k, v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0 && p->n < ms.ms_entries;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
		if (k.mv_size == BLOBKEY_BYTES)
			memcpy(p->key[p->n++], k.mv_data, BLOBKEY_BYTES);
	mdb_cursor_close(c);
	return mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0;
}

static int key_cmp(const void *a, const void *b)
{
	return memcmp(a, b, BLOBKEY_BYTES);
}

/* The page of blob k, or -1. */
static long page_of(const struct pages *p, const struct blobkey *k)
{
	uint8_t kb[BLOBKEY_BYTES];
	blobkey_encode(k, kb);
	const uint8_t(*hit)[BLOBKEY_BYTES] = bsearch(kb, p->key, p->n, sizeof *p->key, key_cmp);
	return hit ? (long)(hit - p->key) : -1;
}

static void progress_at(cluster_progress_fn progress, void *ctx, size_t i, size_t n)
{
	size_t step = n / 1000 ? n / 1000 : 1;
	if (progress && (i % step == 0 || i == n))
		progress(ctx, i, n);
}

/* ---- dups ---- */

int clusters_dups(struct store *st, const struct pd_cred *cred, size_t min_files, cluster_fn cb,
		  cluster_progress_fn progress, void *ctx)
{
	MDB_txn *txn;
	int rc = ns_read_begin(st, &txn);
	if (rc)
		return rc;
	struct pages p = { 0 };
	struct names nm = { 0 };
	uint64_t id = 0;
	if (min_files < 2)
		min_files = 2; /* one file is no duplicate */
	rc = pages_load(txn, st, &p);
	for (size_t i = 0; i < p.n && !rc; i++) {
		progress_at(progress, ctx, i, p.n);
		struct blobkey k;
		struct fprec r;
		blobkey_decode(p.key[i], &k);
		if ((rc = blob_get(txn, st, &k, &r)) || r.refcount < min_files)
			continue; /* fewer links than asked: fewer names too */
		if (!(rc = path_names_of_blob(txn, st, &k, 0, cred, names_add, &nm)))
			rc = emit(&nm, &id, 1, min_files, cb, ctx);
		names_clear(&nm);
	}
	progress_at(progress, ctx, p.n, p.n);
	store_read_end(st, txn);
	free(p.key);
	names_free(&nm);
	return rc > 0 ? 0 : rc;
}

/* ---- near clusters: union-find over the pages ---- */

struct joiner {
	MDB_txn *txn;
	struct store *st;
	struct pages p;
	uint32_t *parent;
	size_t cur;          /* the page whose candidates are being met */
	struct blobkey cur_k;
	struct near_sig *cur_sig, *other;
	/* pages whose signature is pending (sigq.h: a store whose daemon
	 * runs or was killed), signed in memory as the answers sign them */
	struct pend {
		uint32_t page;
		struct near_sig sig;
	} *pend;
	size_t npend, cappend;
};

static uint32_t find(uint32_t *parent, uint32_t i)
{
	while (parent[i] != i) {
		parent[i] = parent[parent[i]];
		i = parent[i];
	}
	return i;
}

static void join(uint32_t *parent, uint32_t a, uint32_t b)
{
	a = find(parent, a);
	b = find(parent, b);
	if (a != b)
		parent[a > b ? a : b] = a < b ? a : b; /* the smaller page leads */
}

/* A pending page's signature, in memory; remembered for the pending
 * pairs (the index does not hold them). */
static int pending_sig(struct joiner *j, const struct blobkey *k, struct near_sig *sig)
{
	int rc = sigq_sign_blob(j->st, k, sig);
	if (rc == -ENOENT) {
		sig->has = false; /* freed since */
		return 0;
	}
	if (rc || !sig->has)
		return rc;
	if (j->npend == j->cappend) {
		size_t cap = j->cappend ? 2 * j->cappend : 16;
		struct pend *v = realloc(j->pend, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		j->pend = v;
		j->cappend = cap;
	}
	j->pend[j->npend].page = (uint32_t)j->cur;
	j->pend[j->npend].sig = *sig;
	if (sig->has_set) { /* compared pair by pair below: computed once, */
		/* at the precision of the store's band rows */
		near_set_for_store(j->st, &j->pend[j->npend].sig.set);
		nearset_bands(&j->pend[j->npend].sig.set);
	}
	j->npend++;
	return 0;
}

static int sig_of(struct joiner *j, const struct blobkey *k, struct near_sig *sig, bool *pending)
{
	struct fprec r;
	int rc = blob_get(j->txn, j->st, k, &r);
	if (rc)
		return rc;
	*pending = (r.flags & FPREC_SIG_PENDING) != 0;
	near_sig_of_rec(&r, sig);
	return sig->has ? near_set_get(j->txn, j->st, k, sig) : 0;
}

/* Pairs of two pending pages: within K or sharing a band, confirmed. */
static int join_pending(struct joiner *j)
{
	unsigned kd = j->st->near_tables ? j->st->near_tables - 1 : 0;
	for (size_t x = 0; x < j->npend; x++)
		for (size_t y = x + 1; y < j->npend; y++) {
			const struct pend *a = &j->pend[x], *b = &j->pend[y];
			if (find(j->parent, a->page) == find(j->parent, b->page))
				continue;
			bool band = false;
			for (int i = 0; a->sig.has_set && b->sig.has_set && i < NEARSET_BANDS; i++)
				band |= a->sig.set.band[i] == b->sig.set.band[i];
			if (!band && simhash_distance(a->sig.simhash, b->sig.simhash) > kd)
				continue;
			struct blobkey ka, kb;
			blobkey_decode(j->p.key[a->page], &ka);
			blobkey_decode(j->p.key[b->page], &kb);
			bool yes;
			double r;
			int rc = near_confirm_pair(j->st, &ka, &a->sig, &kb, &b->sig, &yes, &r);
			if (rc)
				return rc;
			if (yes)
				join(j->parent, a->page, b->page);
		}
	return 0;
}

static int candidate_cb(void *ctx, const struct blobkey *k, uint64_t h, unsigned dist)
{
	struct joiner *j = ctx;
	(void)h;
	(void)dist;
	long o = page_of(&j->p, k);
	if (o < 0 || (size_t)o == j->cur || find(j->parent, (uint32_t)o) == find(j->parent, (uint32_t)j->cur))
		return 0; /* gone since, itself, or joined already */
	bool pending;
	int rc = sig_of(j, k, j->other, &pending);
	if (rc || !j->other->has)
		return rc == -ENOENT ? 0 : rc; /* a pending one is met in join_pending */
	bool yes;
	double r;
	if (!(rc = near_confirm_pair(j->st, &j->cur_k, j->cur_sig, k, j->other, &yes, &r)) && yes)
		join(j->parent, (uint32_t)j->cur, (uint32_t)o);
	return rc;
}

static int join_all(struct joiner *j, cluster_progress_fn progress, void *ctx)
{
	unsigned kd = j->st->near_tables ? j->st->near_tables - 1 : 0;
	int rc = 0;
	for (size_t i = 0; i < j->p.n && !rc; i++) {
		progress_at(progress, ctx, i, j->p.n);
		j->cur = i;
		blobkey_decode(j->p.key[i], &j->cur_k);
		bool pending;
		if (!(rc = sig_of(j, &j->cur_k, j->cur_sig, &pending)) && pending)
			rc = pending_sig(j, &j->cur_k, j->cur_sig);
		if (rc || !j->cur_sig->has)
			continue;
		if (!(rc = near_find(j->txn, j->st, j->cur_sig->simhash, kd, candidate_cb, j)) && j->cur_sig->has_set)
			rc = near_lsh_find(j->txn, j->st, &j->cur_sig->set, candidate_cb, j);
	}
	progress_at(progress, ctx, j->p.n, j->p.n);
	return rc ? rc : join_pending(j);
}

/* Each cluster's pages, chained in page order from its leader. */
static int emit_clusters(struct joiner *j, const struct pd_cred *cred, size_t min_files, cluster_fn cb, void *ctx)
{
	size_t n = j->p.n;
	uint32_t *next = malloc((n ? n : 1) * sizeof *next), *last = malloc((n ? n : 1) * sizeof *last);
	int rc = next && last ? 0 : -ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		uint32_t r = find(j->parent, (uint32_t)i);
		next[i] = UINT32_MAX;
		if (r != i)
			next[last[r]] = (uint32_t)i;
		last[r] = (uint32_t)i;
	}
	struct names nm = { 0 };
	uint64_t id = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		if (j->parent[i] != i || next[i] == UINT32_MAX)
			continue; /* not a leader, or a page alone (its copies: dups) */
		size_t pages = 0;
		for (uint32_t q = (uint32_t)i; q != UINT32_MAX && !rc; q = next[q], pages++) {
			struct blobkey k;
			blobkey_decode(j->p.key[q], &k);
			nm.cur_page = pages;
			rc = path_names_of_blob(j->txn, j->st, &k, 0, cred, names_add, &nm);
		}
		if (!rc)
			rc = emit(&nm, &id, pages, min_files, cb, ctx);
		names_clear(&nm);
	}
	names_free(&nm);
	free(next);
	free(last);
	return rc;
}

int clusters_near(struct store *st, const struct pd_cred *cred, size_t min_files, cluster_fn cb,
		  cluster_progress_fn progress, void *ctx)
{
	if (st->near_stale)
		return -ESTALE;
	struct joiner j = { .st = st };
	int rc = ns_read_begin(st, &j.txn);
	if (rc)
		return rc;
	j.cur_sig = malloc(sizeof *j.cur_sig);
	j.other = malloc(sizeof *j.other);
	rc = j.cur_sig && j.other ? pages_load(j.txn, st, &j.p) : -ENOMEM;
	if (!rc && j.p.n >= UINT32_MAX)
		rc = -EOVERFLOW;
	if (!rc && !(j.parent = malloc((j.p.n ? j.p.n : 1) * sizeof *j.parent)))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < j.p.n; i++)
		j.parent[i] = (uint32_t)i;
	if (!rc)
		rc = join_all(&j, progress, ctx);
	if (!rc)
		rc = emit_clusters(&j, cred, min_files ? min_files : 2, cb, ctx);
	store_read_end(st, j.txn);
	free(j.p.key);
	free(j.parent);
	free(j.cur_sig);
	free(j.other);
	free(j.pend);
	return rc > 0 ? 0 : rc;
}
