/* fsck_packs.c - the packs as fsck sees them.
 *
 * Check: every pack's live totals in meta (blob_pack.c) equal the sums of
 * the packed records that name it; the bytes on disk, live and dead, are
 * reported. Repair: the totals are recounted; a blob that inodes refer to
 * but that has no fingerprint record (the table lost or damaged) gets its
 * record back from the newest intact pack record of that key, decoded and
 * checked (the fingerprint table can be rebuilt from the packs alone).
 */
#include "fsck_int.h"

#include "near/near.h"

/* The live records per dictionary id (ids are small and dense). */
struct dict_sums {
	uint64_t *n;
	size_t cap;
};

static int dict_count(struct dict_sums *d, uint32_t id)
{
	if (id >= d->cap) {
		size_t cap = d->cap ? d->cap : 16;
		while (cap <= id)
			cap *= 2;
		uint64_t *v = realloc(d->n, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		memset(v + d->cap, 0, (cap - d->cap) * sizeof *v);
		d->n = v;
		d->cap = cap;
	}
	d->n[id]++;
	return 0;
}

static int dict_of_row(struct fsck *f, const uint8_t *key, const struct fprec *r, void *ctx)
{
	(void)f;
	(void)key;
	return (r->flags & FPREC_PACKED) && r->pack_dict ? dict_count(ctx, r->pack_dict) : 0;
}

/* Every dictionary's row against the records that need it (counted: as
 * pass 3's walk counted them; NULL: counted now, by a walk of the rows in
 * f->txn); repair: the counts rewritten. A record whose dictionary has no
 * row is damage: its bytes cannot be decoded (fsck --deep names it). */
static int check_dicts(struct fsck *f, bool repair, const struct dict_sums *counted)
{
	struct dict_sums d = { 0 };
	int rc = counted ? 0 : fsck_fp_rows_each(f, dict_of_row, &d);
	if (counted)
		d = *counted;
	for (uint32_t id = 1; id < d.cap && !rc; id++) {
		struct pack_loc loc;
		uint64_t rows;
		int g = blob_dict_row(f->txn, &f->sh, id, &loc, &rows);
		if (g == -ENOENT) {
			if (d.n[id] && !repair)
				fsck_say(f, K_BLOB, "dictionary %u: %llu records need it, but the store has no such dictionary (their pages cannot be read)",
					 id, (unsigned long long)d.n[id]);
			continue;
		}
		if (g) {
			rc = g;
			break;
		}
		if (rows == d.n[id])
			continue;
		if (!repair) {
			fsck_say(f, K_TOTAL, "dictionary %u: meta counts %llu records that need it, the records say %llu (repair: recounted)",
				 id, (unsigned long long)rows, (unsigned long long)d.n[id]);
			f->fix_packs = f->fix_any = true;
		} else {
			uint8_t kb[8], vb[28];
			memcpy(kb, "dict", 4);
			kb[4] = (uint8_t)(id >> 24), kb[5] = (uint8_t)(id >> 16), kb[6] = (uint8_t)(id >> 8), kb[7] = (uint8_t)id;
			put_le32(vb, loc.pack);
			put_le64(vb + 4, loc.off);
			put_le64(vb + 12, loc.len);
			put_le64(vb + 20, d.n[id]);
			MDB_val mk = { 8, kb }, mv = { 28, vb };
			rc = pd_mdb_err(mdb_put(f->txn, f->sh.db_meta, &mk, &mv, 0));
		}
	}
	if (!counted)
		free(d.n);
	return rc;
}

static int sum_cmp(const void *a, const void *b)
{
	const struct pack_sum *x = a, *y = b;
	return x->pack < y->pack ? -1 : x->pack > y->pack;
}

/* Add record r to the sums of its pack. */
static int sum_add(struct vec *sums, const struct fprec *r)
{
	struct pack_sum *last = NULL;
	for (size_t i = 0; i < sums->n && !last; i++)
		if (AT(*sums, struct pack_sum, i).pack == r->pack)
			last = &AT(*sums, struct pack_sum, i);
	if (!last) {
		if (!(last = fsck_vec_push(sums)))
			return -ENOMEM;
		*last = (struct pack_sum){ r->pack, 0, 0 };
	}
	last->bytes += r->pack_len;
	last->records++;
	return 0;
}

/* A base kept for its deltas stays live in its pack. */
static int sum_kept(void *ctx, const struct blobkey *k, const struct fprec *r)
{
	(void)k;
	return sum_add(ctx, r);
}

static int sum_of_row(struct fsck *f, const uint8_t *key, const struct fprec *r, void *ctx)
{
	(void)f;
	(void)key;
	return r->flags & FPREC_PACKED ? sum_add(ctx, r) : 0;
}

int fsck_rows_tally(struct fsck *f, const struct fprec *r)
{
	if (!(r->flags & FPREC_PACKED))
		return 0;
	struct dict_sums d = { f->row_dicts, f->row_dicts_cap };
	int rc = r->pack_dict ? dict_count(&d, r->pack_dict) : 0;
	f->row_dicts = d.n;
	f->row_dicts_cap = d.cap;
	return rc ? rc : sum_add(&f->row_sums, r);
}

/* The sums per pack of the packed records in txn (and the kept bases),
 * sorted by pack. tallied: the rows' sums are in *sums already (pass 3's
 * walk, fsck_rows_tally); else they are summed by a walk of the rows. */
static int live_sums(struct fsck *f, struct vec *sums, bool tallied)
{
	int rc = tallied ? 0 : fsck_fp_rows_each(f, sum_of_row, sums);
	if (!rc)
		rc = blob_delta_kept_each(f->txn, &f->sh, sum_kept, sums);
	if (sums->n)
		qsort(sums->v, sums->n, sizeof(struct pack_sum), sum_cmp);
	return rc;
}

/* The meta keys "pack" | id: every id that has totals. */
static int meta_pack_ids(struct fsck *f, struct vec *ids)
{
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_meta, &c));
	if (rc)
		return rc;
	MDB_val k = { 4, "pack" }, v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); mrc == 0 && !rc; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8 || memcmp(k.mv_data, "pack", 4))
			break;
		uint32_t *p = fsck_vec_push(ids);
		if (!p)
			rc = -ENOMEM;
		else
			*p = (uint32_t)get_be64((const uint8_t *)k.mv_data) & 0xFFFFFFFFu;
	}
	mdb_cursor_close(c);
	return rc;
}

/* The main pack appends continue in (pack.c's survey): the compactor
 * leaves it when nothing in it is live ("a pack just started"), even when
 * its records died since, and a nursery pack numbered after it does not
 * make it a leftover. 0: none. */
static uint32_t last_main_pack(struct pack_set *ps, const uint32_t *list, size_t n)
{
	for (size_t i = n; i-- > 0;)
		if (!pack_is_nursery(ps, list[i]))
			return list[i];
	return 0;
}

/* A pack with no live record and no dictionary, other than the last and
 * the main pack appends continue in (last_main_pack): the
 * compactor stopped between the commit that emptied it and its removal
 * (or every record in it was freed and the store was not closed since).
 * Nothing refers to it: a leftover, which the next writable open removes
 * (so the repair does, by the open that follows it). */
static int check_empty_pack(struct fsck *f, uint32_t id, const struct vec *sums)
{
	for (size_t j = 0; j < sums->n; j++)
		if (AT(*sums, struct pack_sum, j).pack == id)
			return 0;
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_meta, &c));
	if (rc)
		return rc;
	bool dict = false;
	MDB_val k = { 4, "dict" }, v;
	for (int m = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); m == 0 && !dict; m = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8 || memcmp(k.mv_data, "dict", 4))
			break;
		dict = v.mv_size >= 4 && get_le32(v.mv_data) == id;
	}
	mdb_cursor_close(c);
	if (!dict) {
		char name[PACK_NAME_MAX];
		pack_name(id, name);
		fsck_say(f, K_LEFTOVER, "leftover: %s/%s: a pack with nothing live in it (a compaction stopped before "
					"removing it; the next mount or --repair removes it)", PACK_DIR, name);
		f->fix_any = true;
	}
	return 0;
}

int fsck_check_packs(struct fsck *f)
{
	struct vec sums = f->row_sums, ids = VEC(uint32_t);
	f->row_sums = (struct vec)VEC(struct pack_sum); /* taken over */
	int rc = live_sums(f, &sums, true);
	if (!rc)
		rc = meta_pack_ids(f, &ids);
	for (size_t i = 0; i < sums.n && !rc; i++) {
		struct pack_sum *s = &AT(sums, struct pack_sum, i);
		struct blob_pack_live l;
		if ((rc = blob_pack_live_get(f->txn, &f->sh, s->pack, &l)))
			break;
		f->res->pack_live_bytes += s->bytes;
		if (l.bytes != s->bytes || l.records != s->records) {
			fsck_say(f, K_TOTAL, "pack %u: meta counts %llu live bytes in %llu records, the records say %llu in %llu (repair: recounted)",
				 s->pack, (unsigned long long)l.bytes, (unsigned long long)l.records,
				 (unsigned long long)s->bytes, (unsigned long long)s->records);
			f->fix_packs = f->fix_any = true;
		}
	}
	for (size_t i = 0; i < ids.n && !rc; i++) {
		uint32_t id = AT(ids, uint32_t, i);
		bool named = false;
		for (size_t j = 0; j < sums.n && !named; j++)
			named = AT(sums, struct pack_sum, j).pack == id;
		if (!named) {
			fsck_say(f, K_TOTAL, "pack %u: meta counts live records that no fingerprint names (repair: recounted)", id);
			f->fix_packs = f->fix_any = true;
		}
	}
	/* the bytes on disk */
	uint32_t *list = NULL;
	size_t n = 0;
	if (!rc && f->sh.packs && pack_list(f->sh.packs, &list, &n) == 0) {
		uint32_t appended = last_main_pack(f->sh.packs, list, n);
		for (size_t i = 0; i < n; i++) {
			int64_t b = pack_file_bytes(f->sh.packs, list[i]);
			if (b > 0)
				f->res->pack_bytes += (uint64_t)b;
			if (!rc && i + 1 < n && list[i] != appended)
				rc = check_empty_pack(f, list[i], &sums);
		}
	}
	f->res->packs = n;
	free(list);
	struct dict_sums counted = { f->row_dicts, f->row_dicts_cap };
	if (!rc)
		rc = check_dicts(f, false, &counted);
	fsck_vec_free(&sums);
	fsck_vec_free(&ids);
	return rc;
}

int fsck_repair_pack_totals(struct fsck *f)
{
	if (!f->fix_packs && !f->kfix.n)
		return 0;
	struct vec sums = VEC(struct pack_sum), ids = VEC(uint32_t);
	int rc = meta_pack_ids(f, &ids);
	for (size_t i = 0; i < ids.n && !rc; i++) {
		struct blob_pack_live zero = { 0, 0 };
		rc = blob_pack_live_put(f->txn, &f->sh, AT(ids, uint32_t, i), &zero);
	}
	if (!rc)
		rc = live_sums(f, &sums, false); /* the rows as repaired */
	for (size_t i = 0; i < sums.n && !rc; i++) {
		struct pack_sum *s = &AT(sums, struct pack_sum, i);
		struct blob_pack_live l = { s->bytes, s->records };
		rc = blob_pack_live_put(f->txn, &f->sh, s->pack, &l);
	}
	if (!rc)
		rc = check_dicts(f, true, NULL);
	if (!rc && f->fix_packs)
		fsck_say(f, K_REPAIR, "repaired: the live totals of %zu pack%s and of the dictionaries recounted from the fingerprints",
			 sums.n, sums.n == 1 ? "" : "s");
	fsck_vec_free(&sums);
	fsck_vec_free(&ids);
	return rc;
}

/* ---- records from the packs ------------------------------------------------ */

struct found {
	uint8_t key[BLOBKEY_BYTES];
	struct pack_loc loc;
};

static int found_cmp(const void *a, const void *b)
{
	return memcmp(a, b, BLOBKEY_BYTES);
}

static int index_one(void *ctx, const struct pack_rec_hdr *h, const struct pack_loc *loc)
{
	struct vec *v = ctx;
	if (h->kind != PACK_KIND_PAGE)
		return 0;
	struct found *x = fsck_vec_push(v);
	if (!x)
		return -ENOMEM;
	struct blobkey k = { .variant = h->variant };
	memcpy(k.md5, h->md5, 16);
	blobkey_encode(&k, x->key);
	x->loc = *loc;
	return 0;
}

/* Every page record of every pack, by key; for a key found more than once,
 * the newest (highest pack, then offset) comes last. */
static int index_packs(struct fsck *f)
{
	if (f->pack_index_built)
		return 0;
	f->pack_index_built = true;
	uint32_t *ids;
	size_t n;
	int rc = pack_list(f->sh.packs, &ids, &n);
	for (size_t i = 0; i < n && !rc; i++) {
		uint64_t damaged;
		rc = pack_scan(f->sh.packs, ids[i], index_one, &f->pack_index, &damaged);
		if (rc == -EIO || rc == -EPROTO)
			rc = 0; /* a pack with a damaged header: nothing to find there */
	}
	free(ids);
	if (!rc && f->pack_index.n)
		qsort(f->pack_index.v, f->pack_index.n, sizeof(struct found), found_cmp); /* (not stable: see below) */
	return rc;
}

/* The newest record of key in the index. */
static const struct found *find_newest(struct fsck *f, const uint8_t *key)
{
	const struct found *best = NULL;
	size_t lo = 0, hi = f->pack_index.n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (memcmp(AT(f->pack_index, struct found, mid).key, key, BLOBKEY_BYTES) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < f->pack_index.n; i++) {
		const struct found *x = &AT(f->pack_index, struct found, i);
		if (memcmp(x->key, key, BLOBKEY_BYTES))
			break;
		if (!best || x->loc.pack > best->loc.pack || (x->loc.pack == best->loc.pack && x->loc.off > best->loc.off))
			best = x;
	}
	return best;
}

int fsck_recreate_from_packs(struct fsck *f, const uint8_t *key, const struct vec *inos)
{
	int rc = index_packs(f);
	if (rc)
		return rc;
	const struct found *x = find_newest(f, key);
	const struct gfilter *g = fsck_geometry_filter(f);
	if (!x || !g)
		return 1;
	struct blobkey k;
	blobkey_decode(key, &k);
	struct pack_rec_hdr h;
	if (pack_read_hdr(f->sh.packs, &x->loc, &h))
		return 1;
	struct fprec r = { .refcount = inos->n, .size = h.size, .flags = FPREC_IN_FILTER };
	memcpy(r.xxh128, h.xxh128, 16);
	blob_rec_set_loc(&r, &x->loc, h.encoding == PACK_ENC_ZSTD_DICT ? h.dict : 0);
	void *buf = malloc(h.size ? (size_t)h.size : 1);
	if (!buf)
		return -ENOMEM;
	struct fp fp;
	struct near_sig sig;
	bool ok = blob_read_packed(&f->sh, &k, &r, buf) == 0 && fp_of_buf(buf, (size_t)h.size, &fp) == 0 &&
		  memcmp(fp.md5, k.md5, 16) == 0 && near_sig_of_page(buf, (size_t)h.size, &sig) == 0;
	free(buf);
	if (!ok)
		return 1;
	return fsck_put_rebuilt(f, g, &k, &r, &sig, inos);
}

int fsck_put_rebuilt(struct fsck *f, const struct gfilter *g, const struct blobkey *k, struct fprec *r,
		     struct near_sig *sig, const struct vec *inos)
{
	if (!f->sh.has_nearset)
		sig->has_set = false; /* no table for the set: the record keeps the sketch */
	near_sig_to_rec(sig, r);
	gf_positions(g, k->md5, &r->leaf, &r->pos);
	int rc = blob_put(f->txn, &f->sh, k, r);
	if (!rc)
		rc = near_set_put(f->txn, &f->sh, k, sig);
	for (size_t i = 0; i < inos->n && !rc; i++) {
		struct inode in;
		if ((rc = ns_get_inode(f->txn, &f->sh, AT(*inos, uint64_t, i), &in)))
			break;
		if (in.size != r->size) { /* the inodes take the page's size */
			in.size = r->size;
			rc = ns_put_inode(f->txn, &f->sh, &in);
		}
	}
	return rc;
}

/* ---- deltas ------------------------------------------------------------------ */

/* The record of blob k, a live page's or a base kept for its deltas
 * (blob.h): 0, -ENOENT, -EUCLEAN for a record that does not decode (the
 * blob pass reports that one, and the delta checks go on past it). */
static int record_or_kept(struct fsck *f, const struct blobkey *k, struct fprec *r)
{
	int rc = blob_get(f->txn, &f->sh, k, r);
	return rc == -ENOENT ? blob_delta_kept_get(f->txn, &f->sh, k, r) : rc;
}

static int link_check(void *ctx, const struct blobkey *base, const struct blobkey *dep)
{
	struct fsck *f = ctx;
	char bn[BLOBKEY_NAME_MAX], dn[BLOBKEY_NAME_MAX];
	blobkey_name(base, bn);
	blobkey_name(dep, dn);
	struct fprec r;
	int rc = record_or_kept(f, dep, &r);
	if (rc == -EUCLEAN)
		return 0;
	if (rc == -ENOENT) {
		fsck_say(f, K_TOTAL, "delta link %s -> %s: no such page (repair: links rebuilt)", bn, dn);
		f->fix_deltas = f->fix_any = true;
		return 0;
	}
	if (rc)
		return rc;
	struct blobkey b;
	int d = blob_delta_base(&f->sh, &r, &b);
	if (d == 1 && blobkey_equal(&b, base))
		return 0;
	if (d == -EIO)
		return 0; /* its damaged record is the blob pass's to report */
	fsck_say(f, K_TOTAL, "delta link %s -> %s: that page is not a delta on it (repair: links rebuilt)", bn, dn);
	f->fix_deltas = f->fix_any = true;
	return 0;
}

static int kept_check(void *ctx, const struct blobkey *k, const struct fprec *r)
{
	struct fsck *f = ctx;
	struct blobkey one;
	size_t n;
	int rc = blob_delta_dependents(f->txn, &f->sh, k, &one, 1, &n);
	if (rc)
		return rc;
	f->res->kept_bases++;
	char name[BLOBKEY_NAME_MAX];
	blobkey_name(k, name);
	if (!n) {
		fsck_say(f, K_TOTAL, "kept base %s: no delta needs it any more (repair: freed)", name);
		f->fix_deltas = f->fix_any = true;
	}
	struct pack_loc loc;
	struct pack_rec_hdr h;
	blob_rec_loc(r, &loc);
	if (pack_read_hdr(f->sh.packs, &loc, &h) || h.kind != PACK_KIND_PAGE || memcmp(h.md5, k->md5, 16) ||
	    h.variant != k->variant || h.size != r->size)
		fsck_say(f, K_BLOB, "kept base %s: no intact record at pack %u offset %llu (the deltas on it cannot be read)",
			 name, r->pack, (unsigned long long)r->pack_off);
	return 0;
}

int fsck_check_deltas(struct fsck *f)
{
	int rc = blob_delta_link_each(f->txn, &f->sh, link_check, f);
	return rc ? rc : blob_delta_kept_each(f->txn, &f->sh, kept_check, f);
}

int fsck_check_delta_rec(struct fsck *f, const struct blobkey *k, const struct pack_rec_hdr *h, char why[160])
{
	struct blobkey base = { .variant = h->base_variant };
	memcpy(base.md5, h->base_md5, 16);
	f->res->delta_blobs++;
	struct fprec br;
	int rc = record_or_kept(f, &base, &br);
	if (rc == -EUCLEAN)
		return 0;
	char bn[BLOBKEY_NAME_MAX];
	blobkey_name(&base, bn);
	if (rc == -ENOENT) {
		snprintf(why, 160, "a delta on blob %s, which the store no longer has", bn);
		return -EIO;
	}
	if (rc)
		return rc;
	if ((rc = blob_delta_linked(f->txn, &f->sh, &base, k)) < 0)
		return rc;
	if (!rc) {
		char name[BLOBKEY_NAME_MAX];
		blobkey_name(k, name);
		fsck_say(f, K_TOTAL, "blob %s: a delta on %s without its link row (repair: links rebuilt)", name, bn);
		f->fix_deltas = f->fix_any = true;
	}
	return 0;
}

/* A link row's key without its prefix: base [20] | delta [20]. */
struct link_pair {
	uint8_t b[2 * BLOBKEY_BYTES];
};

/* Rebuild: every link from the records' headers. */
struct relink {
	struct fsck *f;
	struct vec keys; /* link keys to write (base [20] | dep [20]) */
};

static int relink_rec(struct relink *x, const struct blobkey *k, const struct fprec *r)
{
	struct blobkey base;
	if (blob_delta_base(&x->f->sh, r, &base) != 1)
		return 0;
	struct link_pair *e = fsck_vec_push(&x->keys);
	if (!e)
		return -ENOMEM;
	blobkey_encode(&base, e->b);
	blobkey_encode(k, e->b + BLOBKEY_BYTES);
	return 0;
}

static int relink_kept(void *ctx, const struct blobkey *k, const struct fprec *r)
{
	return relink_rec(ctx, k, r);
}

static int drop_link(void *ctx, const struct blobkey *base, const struct blobkey *dep)
{
	struct vec *v = ctx;
	struct link_pair *e = fsck_vec_push(v);
	if (!e)
		return -ENOMEM;
	blobkey_encode(base, e->b);
	blobkey_encode(dep, e->b + BLOBKEY_BYTES);
	return 0;
}

static int collect_kept_keys(void *ctx, const struct blobkey *k, const struct fprec *r)
{
	(void)r;
	struct vec *v = ctx;
	struct blobkey *e = fsck_vec_push(v);
	if (!e)
		return -ENOMEM;
	*e = *k;
	return 0;
}

static int link_row(struct fsck *f, const uint8_t *pair, bool put)
{
	uint8_t kb[4 + 2 * BLOBKEY_BYTES];
	memcpy(kb, "dlnk", 4);
	memcpy(kb + 4, pair, 2 * BLOBKEY_BYTES);
	MDB_val k = { sizeof kb, kb }, v = { 0, kb };
	int rc = put ? mdb_put(f->txn, f->sh.db_meta, &k, &v, 0) : mdb_del(f->txn, f->sh.db_meta, &k, NULL);
	return rc == MDB_NOTFOUND ? 0 : pd_mdb_err(rc);
}

int fsck_repair_deltas(struct fsck *f)
{
	if (!f->fix_deltas)
		return 0;
	struct vec old = VEC(struct link_pair), kept = VEC(struct blobkey);
	struct relink x = { f, VEC(struct link_pair) };
	int rc = blob_delta_link_each(f->txn, &f->sh, drop_link, &old);
	for (size_t i = 0; i < old.n && !rc; i++)
		rc = link_row(f, AT(old, struct link_pair, i).b, false);
	MDB_cursor *c = NULL;
	if (!rc)
		rc = pd_mdb_err(mdb_cursor_open(f->txn, f->sh.db_fp, &c));
	MDB_val k, v;
	for (int m = rc ? MDB_NOTFOUND : mdb_cursor_get(c, &k, &v, MDB_FIRST); m == 0 && !rc;
	     m = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		struct fprec r;
		struct blobkey bk;
		if (k.mv_size != BLOBKEY_BYTES || fprec_decode(v.mv_data, v.mv_size, &r))
			continue;
		blobkey_decode(k.mv_data, &bk);
		rc = relink_rec(&x, &bk, &r);
	}
	if (c)
		mdb_cursor_close(c);
	if (!rc)
		rc = blob_delta_kept_each(f->txn, &f->sh, relink_kept, &x);
	for (size_t i = 0; i < x.keys.n && !rc; i++)
		rc = link_row(f, AT(x.keys, struct link_pair, i).b, true);
	/* kept bases nothing hangs on any more go (their bytes are dead) */
	if (!rc)
		rc = blob_delta_kept_each(f->txn, &f->sh, collect_kept_keys, &kept);
	size_t freed = 0;
	for (size_t i = 0; i < kept.n && !rc; i++) {
		struct blobkey *kk = &AT(kept, struct blobkey, i), one;
		size_t n;
		if ((rc = blob_delta_dependents(f->txn, &f->sh, kk, &one, 1, &n)) || n)
			continue;
		uint8_t kb[4 + BLOBKEY_BYTES];
		memcpy(kb, "dkep", 4);
		blobkey_encode(kk, kb + 4);
		MDB_val mk = { sizeof kb, kb };
		rc = pd_mdb_err(mdb_del(f->txn, f->sh.db_meta, &mk, NULL));
		freed++;
	}
	if (!rc) {
		f->fix_packs = true; /* the totals follow */
		fsck_say(f, K_REPAIR, "repaired: %zu delta link%s written from the records, %zu kept base%s freed",
			 x.keys.n, x.keys.n == 1 ? "" : "s", freed, freed == 1 ? "" : "s");
	}
	fsck_vec_free(&old);
	fsck_vec_free(&kept);
	fsck_vec_free(&x.keys);
	return rc;
}
