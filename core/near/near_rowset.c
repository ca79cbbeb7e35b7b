/* near_rowset.c - the rows a table should hold, for fsck's checks of the
 * simhash and band tables (near_check.c, near_setcheck.c): sorted in
 * memory and marked by a pass over the table, or sorted by
 * base/extsort.h and met by one merged pass over a table's levels
 * (near_meet_sorted). See near_int.h.
 *
 * Why: checking each record's rows by a probe of every table, and each
 * row by a look-up of the records it stands for, is a random walk of
 * LMDB's pages: at 5,000,000 pages those probes took 745 of fsck's 787
 * seconds (tests/bench/README.md). A table is dup-sorted, so one pass
 * over it in order meets its rows sorted as memcmp sorts them; the rows
 * the records ask for, sorted the same way, are then met by a binary
 * search in memory. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/extsort.h"
#include "near_int.h"

static size_t check_mem = NEAR_CHECK_MEM_DEFAULT;

void near_check_mem(size_t bytes)
{
	check_mem = bytes;
}

size_t near_check_mem_max(void)
{
	return check_mem;
}

static uint64_t runs_written;

void near_check_count_runs(uint64_t runs)
{
	__atomic_add_fetch(&runs_written, runs, __ATOMIC_RELAXED);
}

uint64_t near_check_spilled_runs(void)
{
	return __atomic_load_n(&runs_written, __ATOMIC_RELAXED);
}

int near_rowset_init(struct near_rowset *r, size_t row_bytes, bool tagged, size_t cap)
{
	*r = (struct near_rowset){ .rs = row_bytes, .es = near_rowset_entry_bytes(row_bytes, tagged) };
	if (!cap)
		cap = 1;
	r->v = malloc(cap * r->es);
	if (!r->v)
		return -ENOMEM;
	r->cap = cap;
	return 0;
}

void near_rowset_free(struct near_rowset *r)
{
	free(r->v);
	free(r->seen);
	*r = (struct near_rowset){ 0 };
}

int near_rowset_add(struct near_rowset *r, const void *row, uint32_t tag)
{
	if (r->n == r->cap) {
		size_t cap = r->cap * 2;
		uint8_t *v = realloc(r->v, cap * r->es);
		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	uint8_t *e = r->v + r->n++ * r->es;
	memcpy(e, row, r->rs);
	if (r->es > r->rs)
		memcpy(e + r->rs, &tag, sizeof tag);
	return 0;
}

static int cmp_rows(const void *a, const void *b, void *rs)
{
	return memcmp(a, b, *(const size_t *)rs);
}

int near_rowset_sort(struct near_rowset *r)
{
	qsort_r(r->v, r->n, r->es, cmp_rows, &r->rs);
	r->seen = calloc(r->n / 8 + 1, 1);
	return r->seen ? 0 : -ENOMEM;
}

/* The first entry not below row (r->n when none). */
static size_t lower_bound(const struct near_rowset *r, const void *row)
{
	size_t lo = 0, hi = r->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (memcmp(r->v + mid * r->es, row, r->rs) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool near_rowset_mark(struct near_rowset *r, const void *row)
{
	size_t i = lower_bound(r, row);
	bool found = false;
	for (; i < r->n && !memcmp(r->v + i * r->es, row, r->rs); i++) {
		near_bit_set(r->seen, i);
		found = true;
	}
	return found;
}

int near_rowset_each_unseen(const struct near_rowset *r, int (*fn)(void *ctx, const uint8_t *row, uint32_t tag),
			    void *ctx)
{
	int rc = 0;
	for (size_t i = 0; i < r->n && !rc; i++) {
		if (near_bit_get(r->seen, i))
			continue;
		const uint8_t *e = r->v + i * r->es;
		uint32_t tag = 0;
		if (r->es > r->rs)
			memcpy(&tag, e + r->rs, sizeof tag);
		rc = fn(ctx, e, tag);
	}
	return rc;
}

/* ---- sorted rows met by one pass over a table's levels ------------------ */

struct walk {
	MDB_cursor *cur;
	MDB_val k, v;
	int mrc;
};

/* Walk t at its next row of the meet's sizes (mrc MDB_NOTFOUND at the
 * end), the others given to unasked on the way; first: from its first. */
static int walk_on(const struct near_meet *m, size_t t, struct walk *w, bool first)
{
	int rc = 0;
	for (w->mrc = mdb_cursor_get(w->cur, &w->k, &w->v, first ? MDB_FIRST : MDB_NEXT); w->mrc == 0 && !rc;
	     w->mrc = mdb_cursor_get(w->cur, &w->k, &w->v, MDB_NEXT)) {
		if (w->k.mv_size == m->ks && w->v.mv_size == m->vs)
			return 0;
		rc = m->unasked(m->ctx, t, &w->k, &w->v);
	}
	return rc ? rc : w->mrc == MDB_NOTFOUND ? 0 : pd_mdb_err(w->mrc);
}

/* The walk whose row comes first (SIZE_MAX: every walk ended), its row
 * (key, then value) into row. */
static size_t first_walk(const struct near_meet *m, const struct walk *w, size_t n, uint8_t *row)
{
	size_t best = SIZE_MAX, rs = m->ks + m->vs;
	uint8_t r[2 * (8 + NEAR_ROW_MAX)];
	for (size_t t = 0; t < n; t++) {
		if (w[t].mrc)
			continue;
		memcpy(r, w[t].k.mv_data, m->ks);
		memcpy(r + m->ks, w[t].v.mv_data, m->vs);
		if (best == SIZE_MAX || memcmp(r, row, rs) < 0) {
			memcpy(row, r, rs);
			best = t;
		}
	}
	return best;
}

/* The records asked for before row (every one left: row NULL): missing. */
static int pass_missing(const struct near_meet *m, struct extsort *want, const uint8_t *row, const void **rec,
			int *wrc)
{
	int rc = 0;
	while (!rc && *wrc == 1 && (!row || memcmp(*rec, row, m->ks + m->vs) < 0)) {
		rc = m->missing(m->ctx, *rec);
		*wrc = extsort_next(want, rec);
	}
	return rc;
}

static int meet_walks(const struct near_meet *m, struct walk *w, size_t n, struct extsort *want)
{
	size_t rs = m->ks + m->vs;
	const void *rec = NULL;
	int wrc = extsort_next(want, &rec), rc = 0;
	uint8_t row[2 * (8 + NEAR_ROW_MAX)];
	for (size_t t; wrc >= 0 && !rc && (t = first_walk(m, w, n, row)) != SIZE_MAX;) {
		if ((rc = pass_missing(m, want, row, &rec, &wrc)) || wrc < 0)
			break;
		if (wrc == 1 && !memcmp(rec, row, rs)) {
			while (wrc == 1 && !memcmp(rec, row, rs))
				wrc = extsort_next(want, &rec);
		} else {
			rc = m->unasked(m->ctx, t, &w[t].k, &w[t].v);
		}
		if (!rc)
			rc = walk_on(m, t, &w[t], false);
	}
	if (!rc && wrc >= 0)
		rc = pass_missing(m, want, NULL, &rec, &wrc);
	return rc ? rc : wrc < 0 ? wrc : 0;
}

int near_meet_sorted(MDB_txn *txn, const MDB_dbi *dbi, size_t n, struct extsort *want, const struct near_meet *m)
{
	struct walk w[NEAR_STAGE_LEVELS] = { 0 };
	if (n > NEAR_STAGE_LEVELS || m->ks + m->vs > 2 * (8 + NEAR_ROW_MAX))
		return -EINVAL;
	int rc = 0;
	for (size_t t = 0; t < n && !rc; t++)
		if (!(rc = pd_mdb_err(mdb_cursor_open(txn, dbi[t], &w[t].cur))))
			rc = walk_on(m, t, &w[t], true);
	if (!rc)
		rc = meet_walks(m, w, n, want);
	for (size_t t = 0; t < n; t++)
		if (w[t].cur)
			mdb_cursor_close(w[t].cur);
	return rc;
}
