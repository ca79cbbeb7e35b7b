/* fsck_filter.c - fsck's filter and totals (see fsck.c for the whole
 * design). Pass 5 compares each counter of the filter, and the exact counts
 * of the saturated table, with the stored positions tallied by pass 4; the
 * totals in meta are compared with those computed by the passes, and
 * recounted from the repaired tables by fsck_repair_totals(). */
#include "fsck_int.h"

/* ---- pass 5: the filter and the exact counts ---------------------------- */

static uint64_t tally_of(struct fsck *f, uint64_t idx)
{
	uint64_t n = f->tally[idx];
	if (n == 255)
		for (size_t i = 0; i < f->tally_over.n; i++)
			if (((uint64_t *)f->tally_over.v)[2 * i] == idx)
				n += ((uint64_t *)f->tally_over.v)[2 * i + 1];
	return n;
}

/* Compare leaf `id`'s counters with the tally, walking the saturated table
 * (cursor c at *mrc, k, v) in step: its keys are GF_EXACT_INDEX(leaf,
 * counter), so leaves in id order and counters in order meet them in key
 * order. Returns the number of disagreements. */
static uint64_t check_leaf(struct fsck *f, uint32_t id, const struct cbf *leaf, MDB_cursor *c,
			   int *mrc, MDB_val *k, MDB_val *v, uint64_t *done, uint64_t total)
{
	uint64_t bad = 0, n = cbf_geometry(leaf)->nlines * CBF_LINE_COUNTERS;
	for (uint64_t idx = 0; idx < n; idx++, ++*done) {
		if ((*done & 0xfffff) == 0 && *done)
			fsck_prog(f, "filter", *done, total);
		uint64_t key = GF_EXACT_INDEX(id, idx);
		while (*mrc == 0 && (k->mv_size != 8 || get_be64(k->mv_data) < key)) {
			bad++;
			fsck_say(f, K_FILTER, "saturated: an entry for counter %llu, outside the filter or malformed (repair: filter rebuilt)",
			    k->mv_size == 8 ? (unsigned long long)get_be64(k->mv_data) : 0ull);
			*mrc = mdb_cursor_get(c, k, v, MDB_NEXT);
		}
		bool has_exact = *mrc == 0 && get_be64(k->mv_data) == key;
		uint64_t exact = has_exact && v->mv_size == 8 ? get_le64(v->mv_data) : 0;
		if (has_exact)
			*mrc = mdb_cursor_get(c, k, v, MDB_NEXT);
		unsigned got = cbf_get(leaf, idx);
		uint64_t t = fsck_tally_index(f, id, idx);
		uint64_t want = f->tally[t];
		if (want < CBF_COUNTER_MAX && got == want && !has_exact)
			continue;
		if (want == 255)
			want = tally_of(f, t);
		unsigned want_ctr = want < CBF_COUNTER_MAX ? (unsigned)want : CBF_COUNTER_MAX;
		if (got != want_ctr) {
			bad++;
			fsck_say(f, K_FILTER, "filter counter %llu of leaf %u is %u, but %llu stored positions are on it (repair: filter rebuilt)",
			    (unsigned long long)idx, id, got, (unsigned long long)want);
		} else if (want >= CBF_COUNTER_MAX && !has_exact) {
			bad++;
			fsck_say(f, K_FILTER, "filter counter %llu of leaf %u is saturated (%llu positions) but has no exact count in saturated (repair: filter rebuilt)",
			    (unsigned long long)idx, id, (unsigned long long)want);
		} else if (want >= CBF_COUNTER_MAX && exact != want) {
			bad++;
			fsck_say(f, K_FILTER, "saturated exact count of filter counter %llu of leaf %u is %llu, but %llu stored positions are on it (repair: filter rebuilt)",
			    (unsigned long long)idx, id, (unsigned long long)exact, (unsigned long long)want);
		} else if (want < CBF_COUNTER_MAX && has_exact) {
			bad++;
			fsck_say(f, K_FILTER, "saturated holds an exact count (%llu) for filter counter %llu of leaf %u, which is not saturated (%llu positions) (repair: filter rebuilt)",
			    (unsigned long long)exact, (unsigned long long)idx, id, (unsigned long long)want);
		}
	}
	return bad;
}

int fsck_pass_filter(struct fsck *f)
{
	if (!f->sh.gf) {
		fsck_say(f, K_FILTER, "filter: the file is missing or is not a filter (a leaf of the filter tree; repair: rebuilt)");
		f->fix_filter = f->fix_any = true;
		return 0;
	}
	if (!f->clean) {
		fsck_say(f, K_NOTE, "note: the store was not closed cleanly; its filter is rebuilt from the stored positions at the next open, so it is not checked");
		return 0;
	}
	if (!f->filter_trusted) {
		fsck_say(f, K_NOTE, "note: the filter file is of another generation than the store; it is rebuilt at the next open, so it is not checked");
		return 0;
	}
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_saturated, &c));
	if (rc)
		return rc;
	MDB_val k, v;
	int mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	uint64_t bad = 0, done = 0, n = f->ncounters;
	fsck_prog(f, "filter", 0, n);
	for (uint32_t id = 0; id < f->tree.next_id; id++) {
		const struct cbf *leaf = gf_leaf(f->sh.gf, id);
		if (leaf && fsck_tally_index(f, id, 0) != UINT64_MAX)
			bad += check_leaf(f, id, leaf, c, &mrc, &k, &v, &done, n);
	}
	for (; mrc == 0; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		bad++;
		fsck_say(f, K_FILTER, "saturated: an entry for counter %llu, outside the filter (repair: filter rebuilt)",
		    k.mv_size == 8 ? (unsigned long long)get_be64(k.mv_data) : 0ull);
	}
	mdb_cursor_close(c);
	fsck_prog(f, "filter", n, n);
	if (bad)
		f->fix_filter = f->fix_any = true;
	return 0;
}

/* ---- totals --------------------------------------------------------------- */

void fsck_check_totals(struct fsck *f)
{
	struct pd_counters *c = &f->stored, *w = &f->computed;
	struct { const char *name; int64_t have, want; } t[] = {
		{ "pages", c->pages, w->pages },
		{ "logical_bytes", c->logical_bytes, w->logical_bytes },
		{ "blobs", c->blobs, w->blobs },
		{ "stored_bytes", c->stored_bytes, w->stored_bytes },
	};
	bool bad = false;
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (t[i].have != t[i].want) {
			fsck_say(f, K_TOTAL, "total %s is %lld, the tables hold %lld (repair: recounted)", t[i].name,
			    (long long)t[i].have, (long long)t[i].want);
			bad = true;
		}
	for (unsigned b = 0; b < PD_HIST_BUCKETS; b++)
		if (c->hist[b] != w->hist[b]) {
			fsck_say(f, K_TOTAL, "total of blobs with refcount %llu..%llu is %lld, the tables hold %lld (repair: recounted)",
			    1ull << b, (2ull << b) - 1, (long long)c->hist[b], (long long)w->hist[b]);
			bad = true;
		}
	f->fix_any |= bad;
}

int fsck_repair_totals(struct fsck *f)
{
	struct pd_counters now = f->stored, want = f->stored;
	want.pages = want.logical_bytes = want.blobs = want.stored_bytes = 0;
	memset(want.hist, 0, sizeof want.hist);
	MDB_cursor *c;
	MDB_val k, v;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_inodes, &c));
	int mrc;
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct inode in;
		if (inode_decode(v.mv_data, v.mv_size, &in, NULL, NULL) || !S_ISREG(in.mode))
			continue;
		want.pages++;
		want.logical_bytes += (int64_t)in.size;
	}
	if (!rc)
		mdb_cursor_close(c);
	if (!rc)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_fp, &c));
	for (mrc = rc ? MDB_NOTFOUND : mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0;
	     mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct fprec r;
		if (fprec_decode(v.mv_data, v.mv_size, &r))
			continue;
		want.blobs++;
		want.stored_bytes += (int64_t)r.size;
		if (r.refcount)
			want.hist[pd_hist_bucket(r.refcount)]++;
	}
	if (!rc)
		mdb_cursor_close(c);
	if (!rc && memcmp(&now, &want, sizeof now)) {
		rc = fsck_counters_write(f, &want);
		if (!rc)
			fsck_say(f, K_REPAIR, "repaired: totals recounted (%lld pages, %lld blobs)", (long long)want.pages,
			    (long long)want.blobs);
	}
	return rc;
}
