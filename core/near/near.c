/* near.c - the permuted-table index of simhashes. See near.h. */
#include "near.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob/blob.h"
#include "text/html.h"
#include "minhash.h"
#include "near_int.h"
#include "simhash.h"

_Static_assert(MINHASH_BYTES == FPREC_SKETCH_BYTES, "a fingerprint record holds one sketch");

/* ---- signatures --------------------------------------------------------- */

/* The signature of a page; the sketch too when `sketch` says so (always,
 * or only for a page without a shingle set). */
enum sketch_rule { SKETCH_ALWAYS, SKETCH_WITHOUT_SET };

static int sig_of_page(const void *buf, size_t len, enum sketch_rule sketch, struct near_sig *out)
{
	memset(out, 0, sizeof *out);
	struct html_text t;
	int rc = html_extract(len ? buf : "", len, 0, &t);
	if (rc || t.binary)
		return rc;
	/* One extraction serves every signal. */
	struct simhash_result r;
	struct minhash_sketch m;
	bool want_sketch = false;
	if (!(rc = simhash_of_text(t.text, t.len, &r)) && !r.none && !(rc = nearset_of_text(t.text, t.len, &out->set))) {
		want_sketch = sketch == SKETCH_ALWAYS || !out->set.has;
		if (want_sketch)
			rc = minhash_of_text(t.text, t.len, &m);
	}
	html_text_free(&t);
	if (rc || r.none) {
		memset(out, 0, sizeof *out);
		return rc;
	}
	out->simhash = r.hash;
	out->has = true;
	out->low_confidence = r.low_confidence;
	out->has_sketch = want_sketch;
	if (want_sketch)
		memcpy(out->sketch, m.bytes, MINHASH_BYTES);
	out->has_set = out->set.has;
	return 0;
}

int near_sig_of_page(const void *buf, size_t len, struct near_sig *out)
{
	return sig_of_page(buf, len, SKETCH_ALWAYS, out);
}

int near_sig_for_record(const void *buf, size_t len, struct near_sig *out)
{
	return sig_of_page(buf, len, SKETCH_WITHOUT_SET, out);
}

int near_sig_of_fd(int fd, uint64_t size, struct near_sig *out)
{
	/* html_extract reads no further than this anyway. */
	size_t len = size < HTML_MAX_INPUT ? (size_t)size : HTML_MAX_INPUT;
	if (!len)
		return near_sig_of_page("", 0, out);
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	int rc = near_sig_of_page(p, len, out);
	munmap(p, len);
	return rc;
}

void near_sig_to_rec(const struct near_sig *s, struct fprec *r)
{
	r->flags &= (uint8_t) ~(FPREC_HAS_SIMHASH | FPREC_SIMHASH_LOW | FPREC_HAS_SKETCH);
	r->simhash = 0;
	if (!s->has)
		return;
	r->simhash = s->simhash;
	r->flags |= FPREC_HAS_SIMHASH | (s->low_confidence ? FPREC_SIMHASH_LOW : 0);
	if (s->has_sketch && !s->has_set) { /* a set confirms better (near.h) */
		r->flags |= FPREC_HAS_SKETCH;
		memcpy(r->sketch, s->sketch, MINHASH_BYTES);
	}
}

void near_sig_of_rec(const struct fprec *r, struct near_sig *s)
{
	memset(s, 0, sizeof *s);
	s->has = (r->flags & FPREC_HAS_SIMHASH) != 0;
	if (!s->has)
		return;
	s->simhash = r->simhash;
	s->low_confidence = (r->flags & FPREC_SIMHASH_LOW) != 0;
	s->has_sketch = (r->flags & FPREC_HAS_SKETCH) != 0;
	if (s->has_sketch)
		memcpy(s->sketch, r->sketch, MINHASH_BYTES);
}

bool near_confirm_r(const struct near_sig *a, const struct near_sig *b, double *r)
{
	double x = -1;
	bool yes = true;
	if (a->has_set && b->has_set) {
		x = nearset_resemblance(&a->set, &b->set, NULL);
		yes = x >= NEARSET_NEAR;
	} else if (a->has_sketch && b->has_sketch) {
		yes = !minhash_resemblance(a->sketch, b->sketch, &x) && x >= MINHASH_NEAR_RESEMBLANCE;
	}
	if (r)
		*r = x;
	return yes;
}

/* ---- the tables and their levels (near.h, "Rows staged") ------------------ */

/* The name of level l (0 or 1) of simhash table i. */
static void hash_level_name(unsigned i, size_t l, char *buf, size_t len)
{
	snprintf(buf, len, "near%u_%zu", i, l);
}

/* Open (create: make) each simhash table's levels, nearI_0 and nearI_1;
 * a read-only store from before them has none. */
static int open_hash_levels(MDB_txn *txn, struct store *st, unsigned create)
{
	int rc = 0;
	bool has = true;
	for (unsigned i = 0; i < st->near_tables && has && !rc; i++) {
		char n0[24], n1[24];
		hash_level_name(i, 0, n0, sizeof n0);
		hash_level_name(i, 1, n1, sizeof n1);
		const char *const names[2] = { n0, n1 };
		rc = near_stage_open(txn, names, create, st->db_nearhstage[i], &has);
	}
	st->has_nearhstage = has && !rc;
	return rc;
}

/* Table i's levels, newest first, the table itself last; how many. */
size_t near_hash_levels(const struct store *st, unsigned i, MDB_dbi lv[NEAR_STAGE_LEVELS])
{
	size_t n = 0;
	if (st->has_nearhstage) {
		lv[n++] = st->db_nearhstage[i][0];
		lv[n++] = st->db_nearhstage[i][1];
	}
	lv[n++] = st->db_near[i];
	return n;
}

/* The name of level l of table i (near_hash_levels' order), for fsck. */
void near_level_name(const struct store *st, unsigned i, size_t l, char *buf, size_t len)
{
	if (st->has_nearhstage && l < 2)
		hash_level_name(i, l, buf, len);
	else
		snprintf(buf, len, "near%u", i);
}

int near_stage_settle_all(MDB_txn *txn, struct store *st, struct near_stage_passes *p, unsigned stage_rows)
{
	int rc = 0;
	MDB_dbi bands[NEAR_BAND_TABLES];
	if (near_band_tables(st, bands) == NEAR_STAGE_LEVELS)
		rc = near_stage_settle(txn, bands, &p->bands, stage_rows ? stage_rows : NEAR_BAND_STAGE_ROWS);
	for (unsigned i = 0; i < st->near_tables && st->has_nearhstage && !rc; i++) {
		MDB_dbi lv[NEAR_STAGE_LEVELS];
		near_hash_levels(st, i, lv);
		rc = near_stage_settle(txn, lv, &p->hashes[i], stage_rows ? stage_rows : NEAR_HASH_STAGE_ROWS);
	}
	return rc;
}

int near_open_tables(MDB_txn *txn, struct store *st, unsigned create)
{
	unsigned n = st->params.near_distance + 1;
	if (n > PD_NEAR_MAX_TABLES)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof name, "near%u", i);
		int rc = mdb_dbi_open(txn, name, MDB_DUPSORT | MDB_DUPFIXED | create, &st->db_near[i]);
		if (rc == MDB_NOTFOUND && !create) {
			/* A store from before the index, opened read-only:
			 * it answers no neighbours until mounted once. */
			st->near_tables = 0;
			return 0;
		}
		if (rc)
			return pd_mdb_err(rc);
	}
	st->near_tables = n;
	int rc = open_hash_levels(txn, st, create);
	if (rc)
		return rc;
	rc = mdb_dbi_open(txn, "nearfeat", create, &st->db_nearfeat);
	if (!rc)
		rc = mdb_dbi_open(txn, "nearbands", MDB_DUPSORT | MDB_DUPFIXED | create, &st->db_nearlsh);
	st->has_nearset = rc == 0;
	st->has_nearstage = false;
	if (rc)
		return rc == MDB_NOTFOUND && !create ? 0 : pd_mdb_err(rc);
	return near_bands_open_staged(txn, st, create);
}

/* ---- changes -------------------------------------------------------------- */

/* Is any blob still indexed under hash h (a row of near0, in any level)? */
int near_hash_indexed(MDB_txn *txn, struct store *st, uint64_t h, bool *yes)
{
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	size_t nl = near_hash_levels(st, 0, lv);
	unsigned n = st->near_tables;
	*yes = false;
	for (size_t l = 0; l < nl && !*yes; l++) {
		MDB_cursor *c;
		int rc = pd_mdb_err(mdb_cursor_open(txn, lv[l], &c));
		if (rc)
			return rc;
		uint8_t kb[8], vb[NEAR_ROW_MAX];
		MDB_val key = near_block_key(kb, h, 0, n), v = near_row_val(st, vb, h, 0, n, NULL);
		int mrc = mdb_cursor_get(c, &key, &v, MDB_GET_BOTH_RANGE);
		*yes = mrc == 0 && memcmp(v.mv_data, vb, near_rest_bytes(0, n)) == 0;
		mdb_cursor_close(c);
		if (mrc && mrc != MDB_NOTFOUND)
			return pd_mdb_err(mrc);
	}
	return 0;
}

/* Blob k's rows for hash h: in each table's level 0 where no level holds
 * the row yet (each row is in one level: near.h), or in the tables
 * themselves (`settled`: a rebuild or a conversion, which write every row
 * at once). A row of near1..nearK is in some level exactly when near0 has
 * a row of its hash (near_remove takes them out when the last such row
 * goes, and fsck checks it), so one probe of near0's levels tells for all
 * K+1 tables, and near0 itself is probed only when it has the hash. */
static int add_rows(MDB_txn *txn, struct store *st, const struct blobkey *k, uint64_t h, bool settled)
{
	unsigned n = st->near_tables;
	uint8_t kb[8], vb[NEAR_ROW_MAX];
	bool staged = !settled && st->has_nearhstage, indexed = false;
	int rc = staged ? near_hash_indexed(txn, st, h, &indexed) : 0;
	for (unsigned i = 0; i < n && !rc; i++) {
		MDB_val key = near_block_key(kb, h, i, n), v = near_row_val(st, vb, h, i, n, k);
		MDB_dbi lv[NEAR_STAGE_LEVELS];
		size_t nl = near_hash_levels(st, i, lv);
		if (staged && indexed) {
			int has = i > 0 ? 1 : near_stage_has(txn, lv, nl, key, v);
			if (has < 0)
				return has;
			if (has)
				continue;
		}
		rc = mdb_put(txn, staged ? lv[0] : st->db_near[i], &key, &v, MDB_NODUPDATA);
		/* Another blob of the same hash (and in near0 of layout 2, of
		 * the same MD5 prefix) is in the tables already. */
		rc = rc == MDB_KEYEXIST ? 0 : pd_mdb_err(rc);
	}
	return rc;
}

int near_add(MDB_txn *txn, struct store *st, const struct blobkey *k, uint64_t h)
{
	return add_rows(txn, st, k, h, false);
}

int near_remove(MDB_txn *txn, struct store *st, const struct blobkey *k, uint64_t h)
{
	unsigned n = st->near_tables;
	if (!n)
		return 0;
	int rc = near_set_remove(txn, st, k);
	if (rc)
		return rc;
	uint8_t kb[8], vb[NEAR_ROW_MAX];
	MDB_val key = near_block_key(kb, h, 0, n), v = near_row_val(st, vb, h, 0, n, k);
	/* near0 of layout 2: the row stays while another blob of k's MD5
	 * prefix has the same simhash (it stands for both) */
	size_t nothers = 0;
	if (!st->near0_keys && (rc = near_prefix_blobs(txn, st, k->md5, h, k, NULL, &nothers)))
		return rc;
	if (nothers)
		return 0;
	/* A row already missing is fsck's to report; the page still goes. */
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	if ((rc = near_stage_del(txn, lv, near_hash_levels(st, 0, lv), key, v)))
		return rc;
	bool shared;
	if ((rc = near_hash_indexed(txn, st, h, &shared)) || shared)
		return rc;
	for (unsigned i = 1; i < n && !rc; i++) {
		key = near_block_key(kb, h, i, n);
		v = near_row_val(st, vb, h, i, n, NULL);
		rc = near_stage_del(txn, lv, near_hash_levels(st, i, lv), key, v);
	}
	return rc;
}

/* ---- queries -------------------------------------------------------------- */

struct finder {
	MDB_txn *txn;
	struct store *st;
	uint64_t q;
	unsigned maxdist, n;
	near_hit_fn cb;
	void *ctx;
	struct near_stage_cursors c0; /* near0's levels, to resolve a hash found in another table */
};

/* A hash found in table i was found already in an earlier table if it
 * agrees with the query on an earlier block: report it only there. */
static bool seen_before(const struct finder *f, uint64_t h, unsigned i)
{
	for (unsigned j = 0; j < i; j++)
		if (near_block(h, j, f->n) == near_block(f->q, j, f->n))
			return true;
	return false;
}

/* The blobs of a near0 row of hash h whose tail (after the rest) is at
 * tail: its blob key, or (layout 2) the blobs of its MD5 prefix with
 * that hash. */
static int row0_blobs(struct finder *f, const uint8_t *tail, uint64_t h, unsigned dist)
{
	struct blobkey k, *v;
	size_t n;
	if (f->st->near0_keys) {
		blobkey_decode(tail, &k);
		return f->cb(f->ctx, &k, h, dist);
	}
	int rc = near_prefix_blobs(f->txn, f->st, tail, h, NULL, &v, &n);
	for (size_t i = 0; i < n && !rc; i++)
		rc = f->cb(f->ctx, &v[i], h, dist);
	free(v);
	return rc;
}

/* Every blob of hash h, through its rows in one level of near0. */
static int resolve_in(struct finder *f, MDB_cursor *c0, uint64_t h, unsigned dist)
{
	uint8_t kb[8], vb[NEAR_ROW_MAX];
	size_t r = near_rest_bytes(0, f->n), t = near_tail0_bytes(f->st);
	MDB_val key = near_block_key(kb, h, 0, f->n), v = near_row_val(f->st, vb, h, 0, f->n, NULL);
	int rc = 0, mrc;
	for (mrc = mdb_cursor_get(c0, &key, &v, MDB_GET_BOTH_RANGE); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(c0, &key, &v, MDB_NEXT_DUP)) {
		if (memcmp(v.mv_data, vb, r) || v.mv_size != r + t)
			break;
		uint8_t tail[BLOBKEY_BYTES];
		memcpy(tail, (const uint8_t *)v.mv_data + r, t); /* the callback may read other tables */
		rc = row0_blobs(f, tail, h, dist);
	}
	return rc ? rc : (mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0);
}

/* Every blob of hash h, through its rows in near0 (each in one level). */
static int resolve_hash(struct finder *f, uint64_t h, unsigned dist)
{
	int rc = 0;
	for (size_t l = 0; l < f->c0.n && !rc; l++)
		rc = resolve_in(f, f->c0.c[l], h, dist);
	return rc;
}

/* One page of packed values of table i under the query's block. */
static int scan_values(struct finder *f, unsigned i, const uint8_t *p, size_t bytes)
{
	size_t width = near_row_bytes(f->st, i, f->n);
	uint64_t block = near_block(f->q, i, f->n);
	int rc = 0;
	for (size_t off = 0; off + width <= bytes && !rc; off += width) {
		uint64_t h = near_row_hash(block, p + off, i, f->n);
		unsigned d = simhash_distance(h, f->q);
		if (d > f->maxdist || seen_before(f, h, i))
			continue;
		if (i == 0) {
			rc = row0_blobs(f, p + off + near_rest_bytes(0, f->n), h, d);
		} else {
			rc = resolve_hash(f, h, d);
		}
	}
	return rc;
}

/* The query's block in one level of table i. */
static int scan_level(struct finder *f, unsigned i, MDB_dbi dbi)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, dbi, &c));
	if (rc)
		return rc;
	uint8_t kb[8];
	MDB_val key = near_block_key(kb, f->q, i, f->n), v;
	int mrc = mdb_cursor_get(c, &key, &v, MDB_SET);
	if (mrc == 0)
		mrc = mdb_cursor_get(c, &key, &v, MDB_GET_MULTIPLE);
	while (mrc == 0 && !rc) {
		rc = scan_values(f, i, v.mv_data, v.mv_size);
		mrc = mdb_cursor_get(c, &key, &v, MDB_NEXT_MULTIPLE);
	}
	mdb_cursor_close(c);
	return rc ? rc : (mrc && mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0);
}

/* Table i, level by level, the table itself first: a caller that stops
 * after a few hits (the delta step's candidates) meets the pages it met
 * before the levels, in key order; the newest pages, which are less often
 * a base yet (still in the nursery, or deltas already on a chain), come
 * last. */
static int scan_table(struct finder *f, unsigned i)
{
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	size_t nl = near_hash_levels(f->st, i, lv);
	int rc = 0;
	for (size_t l = nl; l-- > 0 && !rc;)
		rc = scan_level(f, i, lv[l]);
	return rc;
}

int near_find(MDB_txn *txn, struct store *st, uint64_t q, unsigned maxdist, near_hit_fn cb, void *ctx)
{
	struct finder f = { txn, st, q, maxdist, st->near_tables, cb, ctx, { { NULL }, 0 } };
	if (!f.n)
		return 0;
	/* Beyond K the pigeonhole argument fails: some neighbours would be
	 * missed, so the index never answers past it. */
	if (maxdist > f.n - 1)
		return -EINVAL;
	MDB_dbi lv[NEAR_STAGE_LEVELS];
	int rc = near_stage_cursors_open(txn, lv, near_hash_levels(st, 0, lv), &f.c0);
	for (unsigned i = 0; i < f.n && !rc; i++)
		rc = scan_table(&f, i);
	near_stage_cursors_close(&f.c0); /* (none open when the open failed) */
	return rc > 0 ? 0 : rc;
}

/* ---- rebuilding (fsck --repair) ------------------------------------------- */

/* Walk the fingerprints that have a simhash. */
int near_each_simhash(MDB_txn *txn, struct store *st,
		      int (*fn)(void *ctx, const struct blobkey *k, uint64_t h), void *ctx)
{
	MDB_cursor *cur;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &cur));
	if (rc)
		return rc;
	MDB_val key, v;
	int mrc;
	for (mrc = mdb_cursor_get(cur, &key, &v, MDB_FIRST); mrc == 0 && !rc;
	     mrc = mdb_cursor_get(cur, &key, &v, MDB_NEXT)) {
		struct fprec r;
		if (key.mv_size != BLOBKEY_BYTES || fprec_decode(v.mv_data, v.mv_size, &r) ||
		    !(r.flags & FPREC_HAS_SIMHASH))
			continue; /* a damaged record is the blob pass's to report */
		struct blobkey k;
		blobkey_decode(key.mv_data, &k);
		rc = fn(ctx, &k, r.simhash);
	}
	mdb_cursor_close(cur);
	return rc ? rc : (mrc != MDB_NOTFOUND ? pd_mdb_err(mrc) : 0);
}

struct rebuilder {
	MDB_txn *txn;
	struct store *st;
};

static int rebuild_cb(void *ctx, const struct blobkey *k, uint64_t h)
{
	struct rebuilder *r = ctx;
	return add_rows(r->txn, r->st, k, h, true);
}

int near_rebuild(MDB_txn *txn, struct store *st)
{
	for (unsigned i = 0; i < st->near_tables; i++) {
		MDB_dbi lv[NEAR_STAGE_LEVELS];
		int rc = near_stage_drop(txn, lv, near_hash_levels(st, i, lv));
		if (rc)
			return rc;
	}
	struct rebuilder r = { txn, st };
	int rc = st->near_tables ? near_each_simhash(txn, st, rebuild_cb, &r) : 0;
	return rc ? rc : near_lsh_rebuild(txn, st);
}

/* ---- near0's layout (near.h) ----------------------------------------------- */

#define NEAR0_LAYOUT_KEY "near0_layout"

int near0_layout_get(MDB_txn *txn, struct store *st, uint32_t *layout)
{
	return store_meta_version_get(txn, st, NEAR0_LAYOUT_KEY, 1, layout); /* absent: layout 1 */
}

int near0_layout_put(MDB_txn *txn, struct store *st, uint32_t layout)
{
	return store_meta_version_put(txn, st, NEAR0_LAYOUT_KEY, layout);
}

int near0_layout_convert(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch,
			 bool *finished)
{
	*finished = false;
	unsigned n = st->near_tables;
	static const uint8_t first[BLOBKEY_BYTES];
	int rc = 0;
	if (!batch)
		return -EINVAL;
	/* The first batch empties near0 and marks it as being converted
	 * (layout 0: a read-only open answers nothing from it). */
	if (!memcmp(next, first, BLOBKEY_BYTES)) {
		MDB_dbi lv[NEAR_STAGE_LEVELS];
		if (n && (rc = near_stage_drop(txn, lv, near_hash_levels(st, 0, lv))))
			return rc;
		if ((rc = near0_layout_put(txn, st, 0)))
			return rc;
		st->near0_keys = false;
	}
	/* the batch's rows first, then the writes: near0 is another table,
	 * but the same order as the other conversions keeps it simple */
	struct { struct blobkey k; uint64_t h; } *v = calloc(batch, sizeof *v);
	MDB_cursor *c;
	rc = v ? pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &c)) : -ENOMEM;
	size_t got = 0, seen = 0;
	bool more = false;
	if (!rc) {
		MDB_val key = { BLOBKEY_BYTES, next }, val;
		int mrc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE);
		for (; mrc == 0 && !(more = seen == batch); mrc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
			struct fprec r;
			seen++;
			/* (a record that does not decode is fsck's to report) */
			if (key.mv_size == BLOBKEY_BYTES && !fprec_decode(val.mv_data, val.mv_size, &r) &&
			    (r.flags & FPREC_HAS_SIMHASH)) {
				blobkey_decode(key.mv_data, &v[got].k);
				v[got++].h = r.simhash;
			}
		}
		rc = store_batch_next(next, more, &key, mrc);
		mdb_cursor_close(c);
	}
	for (size_t i = 0; i < got && !rc && n; i++) {
		uint8_t kb[8], vb[NEAR_ROW_MAX];
		MDB_val key = near_block_key(kb, v[i].h, 0, n), val = near_row_val(st, vb, v[i].h, 0, n, &v[i].k);
		int mrc = mdb_put(txn, st->db_near[0], &key, &val, MDB_NODUPDATA);
		rc = mrc == MDB_KEYEXIST ? 0 : pd_mdb_err(mrc);
	}
	free(v);
	if (!rc && !more && !(rc = near0_layout_put(txn, st, NEAR0_LAYOUT_VERSION)))
		*finished = true;
	return rc;
}

int near0_layout_upgrade(struct store *st)
{
	MDB_txn *txn;
	uint32_t layout = 1;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = near0_layout_get(txn, st, &layout);
	store_read_end(st, txn);
	if (rc || layout > NEAR0_LAYOUT_VERSION)
		return rc ? rc : -EPROTONOSUPPORT;
	/* near0_layout_convert sets the layout with its last batch */
	return near_meta_upgrade(st, NEAR0_LAYOUT_KEY, 1, NEAR0_LAYOUT_VERSION, near0_layout_convert);
}

/* ---- the version of the signatures -------------------------------------- */

int near_version_get(MDB_txn *txn, struct store *st, uint32_t *version)
{
	return store_meta_version_get(txn, st, "near_version", NEAR_SIG_VERSION_FIRST, version);
}

int near_version_put(MDB_txn *txn, struct store *st)
{
	return store_meta_version_put(txn, st, "near_version", NEAR_SIG_VERSION);
}

void near_sig_of_blob(struct store *st, const struct blobkey *k, const struct fprec *r, struct near_sig *sig)
{
	memset(sig, 0, sizeof *sig);
	int fd = blob_open_rec(st, k, r);
	if (fd < 0)
		return;
	struct stat sb;
	if (fstat(fd, &sb) || near_sig_of_fd(fd, (uint64_t)sb.st_size, sig))
		memset(sig, 0, sizeof *sig);
	close(fd);
}

static int resign_one(MDB_txn *txn, struct store *st, const struct blobkey *k)
{
	struct fprec r;
	int rc = blob_get(txn, st, k, &r);
	if (rc || !(r.flags & FPREC_HAS_SIMHASH))
		return rc;
	struct near_sig *sig = malloc(sizeof *sig);
	if (!sig)
		return -ENOMEM;
	near_sig_of_blob(st, k, &r, sig);
	if (!(st->near_tables && (rc = near_remove(txn, st, k, r.simhash)))) {
		near_sig_to_rec(sig, &r);
		if (!(rc = blob_put(txn, st, k, &r)) && st->near_tables)
			rc = near_add_sig(txn, st, k, sig);
	}
	free(sig);
	return rc;
}

int near_resign(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch, bool *finished)
{
	/* The batch's keys first, then the changes: no cursor over a table
	 * that is being written. */
	struct blobkey *keys = calloc(batch ? batch : 1, sizeof *keys);
	if (!keys)
		return -ENOMEM;
	MDB_cursor *cur;
	int rc = pd_mdb_err(mdb_cursor_open(txn, st->db_fp, &cur));
	size_t n = 0;
	*finished = false;
	if (!rc) {
		MDB_val key = { BLOBKEY_BYTES, next }, v;
		int mrc = mdb_cursor_get(cur, &key, &v, MDB_SET_RANGE);
		while (mrc == 0 && n < batch) {
			struct fprec r;
			if (key.mv_size == BLOBKEY_BYTES && !fprec_decode(v.mv_data, v.mv_size, &r) &&
			    (r.flags & FPREC_HAS_SIMHASH))
				blobkey_decode(key.mv_data, &keys[n++]);
			mrc = mdb_cursor_get(cur, &key, &v, MDB_NEXT);
		}
		rc = store_batch_next(next, mrc == 0, &key, mrc);
		*finished = !rc && mrc == MDB_NOTFOUND;
		mdb_cursor_close(cur);
	}
	for (size_t i = 0; i < n && !rc; i++)
		rc = resign_one(txn, st, &keys[i]);
	free(keys);
	return rc;
}

/* A batch of a near conversion (store_write_batches). */
static int upgrade_batch(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], void *ctx, bool *finished)
{
	near_upgrade_step *step = ctx;
	return (*step)(txn, st, next, NEAR_UPGRADE_BATCH, finished);
}

int near_meta_upgrade(struct store *st, const char *key, uint32_t absent, uint32_t target, near_upgrade_step step)
{
	MDB_txn *txn;
	uint32_t version = 0;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = store_meta_version_get(txn, st, key, absent, &version);
	store_read_end(st, txn);
	if (rc || version == target)
		return rc;
	return store_write_batches(st, upgrade_batch, NULL, &step);
}

/* A batch of the signature upgrade; the version is set with its last. */
static int resign_step(MDB_txn *txn, struct store *st, uint8_t next[BLOBKEY_BYTES], size_t batch, bool *finished)
{
	int rc = near_resign(txn, st, next, batch, finished);
	if (!rc && *finished)
		rc = near_version_put(txn, st);
	return rc;
}

int near_upgrade(struct store *st)
{
	return near_meta_upgrade(st, "near_version", NEAR_SIG_VERSION_FIRST, NEAR_SIG_VERSION, resign_step);
}
