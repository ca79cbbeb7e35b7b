/* blob_dict.c - zstd dictionaries of a store. The rules are in blob.h.
 *
 * In memory: every dictionary loaded so far (by id, kept until the store
 * closes, so that a decode never races with its dictionary's removal),
 * the current one, and the training sample: a reservoir (Vitter's
 * algorithm R) of BLOB_DICT_SAMPLES pages over the pages sealed since the
 * last training, each of them in it with the same chance, whatever order
 * a crawler writes them in. The reservoir holds the pages' identities
 * (struct fp, 40 bytes: 160 KiB in all), not their bytes: the trainer
 * reads the pages back from the store when it trains (any record form:
 * nursery, final, delta), in a random order of the reservoir, each cut to
 * BLOB_DICT_SAMPLE_MAX bytes, until BLOB_DICT_SAMPLE_BYTES; a page freed
 * since it was sampled is skipped. That buffer lives only while the
 * trainer runs, and is given back to the system after it.
 */
#include "blob.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fdio.h"
#include "base/heap.h"
#include "base/thread.h"

#define DRIFT_WINDOW 2048 /* pages per ratio measurement */
#define DRIFT_WORSE 1.2   /* a window this much worse than the baseline: retrain */

struct dicts {
	pthread_mutex_t mu;
	struct store *st;
	struct pack_dict **byid; /* loaded, by id */
	unsigned *users;         /* by id: encodes holding it (blob_dict_hold) */
	size_t cap;
	uint32_t max_id;         /* the newest in meta (0: none) */
	struct pack_dict *cur;   /* encodes new records */
	bool cur_tried;          /* max_id was loaded (or failed to) */
	/* the sample: the pages' identities, read back when training */
	struct blob_dict_reservoir sample;
	/* when to train */
	uint64_t pages;          /* pages encoded since the last training (or open) */
	uint64_t next_train;     /* train when pages reaches this */
	double base_raw, base_enc, win_raw, win_enc;
	uint64_t base_n, win_n;
	bool drifted;
	/* the trainer */
	pthread_t thr;
	bool thr_running, thr_done, stopping;
	struct blob_dict_info info; /* trainings since the open */
};

static MDB_val dict_key(uint8_t kb[8], uint32_t id)
{
	return store_meta_id_key(kb, "dict", id);
}

int blob_dict_row(MDB_txn *txn, struct store *st, uint32_t id, struct pack_loc *loc, uint64_t *records)
{
	uint8_t kb[8];
	MDB_val k = dict_key(kb, id), v;
	int rc = pd_mdb_err(mdb_get(txn, st->db_meta, &k, &v));
	if (rc)
		return rc;
	if (v.mv_size != 28)
		return -EUCLEAN;
	const uint8_t *p = v.mv_data;
	*loc = (struct pack_loc){ get_le32(p), get_le64(p + 4), get_le64(p + 12) };
	*records = get_le64(p + 20);
	return 0;
}

static int dict_row_put(MDB_txn *txn, struct store *st, uint32_t id, const struct pack_loc *loc, uint64_t records)
{
	uint8_t kb[8], vb[28];
	MDB_val k = dict_key(kb, id), v = { 28, vb };
	put_le32(vb, loc->pack);
	put_le64(vb + 4, loc->off);
	put_le64(vb + 12, loc->len);
	put_le64(vb + 20, records);
	return pd_mdb_err(mdb_put(txn, st->db_meta, &k, &v, 0));
}

int blob_dict_set_loc(struct wtx *w, uint32_t id, const struct pack_loc *loc)
{
	struct pack_loc was;
	uint64_t records;
	int rc = blob_dict_row(w->txn, w->st, id, &was, &records);
	return rc ? rc : dict_row_put(w->txn, w->st, id, loc, records);
}

/* The newest dictionary id in meta (0: none). */
static uint32_t newest_id(struct store *st)
{
	MDB_txn *txn;
	MDB_cursor *c;
	uint32_t id = 0;
	if (store_read_begin(st, &txn))
		return 0;
	if (mdb_cursor_open(txn, st->db_meta, &c) == 0) {
		MDB_val k = { 4, "dict" }, v;
		for (int m = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); m == 0; m = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
			if (k.mv_size != 8 || memcmp(k.mv_data, "dict", 4))
				break;
			const uint8_t *p = k.mv_data;
			id = (uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
		}
		mdb_cursor_close(c);
	}
	store_read_end(st, txn);
	return id;
}

static void dicts_free(void *p);

/* Pages to be sealed before the next training, for a store of blobs
 * pages: as many again while the store is young (its first dictionaries
 * saw a few packages or sites of the crawl and are soon unfit), then 3
 * times as many (the store has grown 4 times): blob.h. */
static uint64_t train_after(uint64_t blobs)
{
	uint64_t n = blobs < BLOB_DICT_YOUNG ? blobs : 3 * blobs;
	return n > BLOB_DICT_FIRST ? n : BLOB_DICT_FIRST;
}

void blob_dict_release(struct store *st)
{
	struct dicts *d = st->blob_priv;
	if (!d)
		return;
	blob_dict_stop(st);
	st->blob_priv = NULL;
	dicts_free(d);
}

void blob_dict_stop(struct store *st)
{
	struct dicts *d = st->blob_priv;
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->stopping = true;
	bool join = d->thr_running;
	pthread_mutex_unlock(&d->mu);
	if (join)
		pthread_join(d->thr, NULL);
	pthread_mutex_lock(&d->mu);
	d->thr_running = d->thr_done = false;
	struct blob_dict_info i = d->info;
	d->info.trained = d->info.failed = 0; /* said once */
	pthread_mutex_unlock(&d->mu);
	if (i.trained || i.failed)
		fprintf(stderr, "pagededupfs: dictionaries: %llu trained (%llu failed, %llu trained again smaller), %.2f s of the trainer's CPU; the last, %u: %llu bytes, on %llu pages read back (%llu bytes; %llu sampled pages freed since)\n",
			(unsigned long long)i.trained, (unsigned long long)i.failed,
			(unsigned long long)i.short_retrained, i.cpu_seconds, i.last_id,
			(unsigned long long)i.last_dict_bytes, (unsigned long long)i.last_read,
			(unsigned long long)i.last_sample_bytes, (unsigned long long)i.last_skipped);
}

static void dicts_free(void *p)
{
	struct dicts *d = p;
	if (!d)
		return;
	for (size_t i = 0; i < d->cap; i++)
		pack_dict_free(d->byid[i]);
	free(d->byid);
	free(d->users);
	free(d->sample.keys);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;

static struct dicts *dicts_of(struct store *st)
{
	struct dicts *d = __atomic_load_n((struct dicts **)&st->blob_priv, __ATOMIC_ACQUIRE);
	if (d)
		return d;
	pthread_mutex_lock(&init_mu);
	if (!(d = st->blob_priv) && (d = calloc(1, sizeof *d))) {
		pthread_mutex_init(&d->mu, NULL);
		d->st = st;
		d->sample = (struct blob_dict_reservoir){ .cap = BLOB_DICT_SAMPLES,
							  .rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)d };
		d->max_id = newest_id(st);
		/* a store that has a dictionary retrains once it grew (train_after) */
		d->next_train = d->max_id ? train_after(st->counters.blobs > 0 ? (uint64_t)st->counters.blobs : 1)
					  : BLOB_DICT_FIRST;
		__atomic_store_n((struct dicts **)&st->blob_priv, d, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&init_mu);
	return d;
}

static int level_of(struct store *st)
{
	int level = st->opts.pack_level ? st->opts.pack_level : PACK_DEFAULT_LEVEL;
	return level > 0 ? level : PACK_DEFAULT_LEVEL;
}

/* Remember dictionary dict under its id (mutex held). */
static int keep(struct dicts *d, struct pack_dict *dict)
{
	uint32_t id = pack_dict_id(dict);
	if (id >= d->cap) {
		size_t cap = d->cap ? d->cap : 8;
		while (cap <= id)
			cap *= 2;
		struct pack_dict **v = realloc(d->byid, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		memset(v + d->cap, 0, (cap - d->cap) * sizeof *v);
		d->byid = v;
		unsigned *u = realloc(d->users, cap * sizeof *u);
		if (!u)
			return -ENOMEM;
		memset(u + d->cap, 0, (cap - d->cap) * sizeof *u);
		d->users = u;
		d->cap = cap;
	}
	if (d->byid[id])
		pack_dict_free(d->byid[id]);
	d->byid[id] = dict;
	return 0;
}

const struct pack_dict *blob_dict_get(struct store *st, uint32_t id)
{
	struct dicts *d = dicts_of(st);
	if (!d || id == 0)
		return NULL;
	pthread_mutex_lock(&d->mu);
	struct pack_dict *dict = id < d->cap ? d->byid[id] : NULL;
	pthread_mutex_unlock(&d->mu);
	if (dict)
		return dict;
	/* load it: its row, then its record (again from the row if the
	 * compactor moved the record meanwhile: blob_compact.c) */
	struct pack_loc loc, was = { 0, 0, 0 };
	uint64_t records;
	void *bytes;
	size_t len;
	for (int tries = 0;; tries++) {
		MDB_txn *txn;
		if (store_read_begin(st, &txn))
			return NULL;
		int rc = blob_dict_row(txn, st, id, &loc, &records);
		store_read_end(st, txn);
		if (rc || (tries && loc.pack == was.pack && loc.off == was.off && loc.len == was.len))
			return NULL;
		if (pack_read_dict(st->packs, &loc, id, &bytes, &len) == 0)
			break;
		if (tries == 3)
			return NULL;
		was = loc;
	}
	struct pack_dict *nd = pack_dict_new(id, bytes, len, level_of(st));
	free(bytes);
	if (!nd)
		return NULL;
	pthread_mutex_lock(&d->mu);
	if (id < d->cap && d->byid[id]) { /* loaded meanwhile */
		pack_dict_free(nd);
		nd = d->byid[id];
	} else if (keep(d, nd)) {
		pack_dict_free(nd);
		nd = NULL;
	}
	pthread_mutex_unlock(&d->mu);
	return nd;
}

const struct pack_dict *blob_dict_current(struct store *st)
{
	struct dicts *d = dicts_of(st);
	if (!d)
		return NULL;
	pthread_mutex_lock(&d->mu);
	struct pack_dict *cur = d->cur;
	bool tried = d->cur_tried;
	uint32_t id = d->max_id;
	d->cur_tried = true;
	pthread_mutex_unlock(&d->mu);
	if (cur || tried || !id)
		return cur;
	const struct pack_dict *got = blob_dict_get(st, id);
	pthread_mutex_lock(&d->mu);
	if (!d->cur && got && pack_dict_id(got) == d->max_id)
		d->cur = (struct pack_dict *)got;
	cur = d->cur;
	pthread_mutex_unlock(&d->mu);
	return cur;
}

const struct pack_dict *blob_dict_hold(struct store *st)
{
	struct dicts *d = dicts_of(st);
	if (!d || !blob_dict_current(st))
		return NULL;
	pthread_mutex_lock(&d->mu);
	struct pack_dict *cur = d->cur; /* a training may have replaced it meanwhile */
	if (cur)
		d->users[pack_dict_id(cur)]++;
	pthread_mutex_unlock(&d->mu);
	return cur;
}

/* Dictionary id no longer encodes (mutex held): its compression forms go
 * once the last encode holding it is done. */
static void retire_if_unused(struct dicts *d, uint32_t id)
{
	if (id < d->cap && d->byid[id] && d->byid[id] != d->cur && d->users[id] == 0)
		pack_dict_drop_cdicts(d->byid[id]);
}

void blob_dict_unhold(struct store *st, const struct pack_dict *dict)
{
	struct dicts *d = dicts_of(st);
	if (!d || !dict)
		return;
	uint32_t id = pack_dict_id(dict);
	pthread_mutex_lock(&d->mu);
	if (id < d->cap && d->users[id] > 0 && --d->users[id] == 0)
		retire_if_unused(d, id);
	pthread_mutex_unlock(&d->mu);
}

/* ---- training ----------------------------------------------------------- */

struct new_dict {
	uint32_t id;
	struct pack_loc loc;
};

static int new_dict_cb(struct wtx *w, void *arg)
{
	struct new_dict *n = arg;
	if (pack_retired(w->st->packs, n->loc.pack))
		return -ESTALE; /* appended just before the compactor took that pack: train again later */
	return dict_row_put(w->txn, w->st, n->id, &n->loc, 0);
}

/* xorshift64*: the reservoir's and the read order's random numbers. */
static uint64_t next_random(uint64_t *s)
{
	if (!*s)
		*s = 0x9E3779B97F4A7C15ull;
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1Dull;
}

size_t blob_dict_size_for(size_t sample_bytes)
{
	size_t n = sample_bytes / BLOB_DICT_RATIO;
	return n < BLOB_DICT_MIN_BYTES ? BLOB_DICT_MIN_BYTES : n > BLOB_DICT_MAX_BYTES ? BLOB_DICT_MAX_BYTES : n;
}

/* The first take bytes of the page of content fp, as the store holds it
 * now, into dst: -ENOENT when no blob has that content any more, -EIO
 * when its record is damaged (or was freed while being read). */
static int sample_page(struct store *st, const struct fp *fp, size_t take, char *dst)
{
	MDB_txn *txn;
	struct blobkey k;
	struct fprec r;
	bool found = false, collision;
	int rc = store_read_begin(st, &txn);
	if (rc)
		return rc;
	rc = blob_find(txn, st, fp, &k, &found, &collision);
	if (!rc && found)
		rc = blob_get(txn, st, &k, &r);
	store_read_end(st, txn);
	if (rc || !found)
		return rc ? rc : -ENOENT;
	if (r.flags & FPREC_BAD)
		return -EIO;
	if (r.flags & FPREC_PACKED)
		return blob_read_range(st, &k, &r, 0, take, dst); /* the chunks it needs only */
	int fd = blob_open_rec(st, &k, &r); /* a format 1 blob file */
	if (fd < 0)
		return fd;
	ssize_t got = fd_pread_full(fd, dst, take, 0);
	close(fd);
	return got < 0 ? (int)got : (size_t)got == take ? 0 : -EIO;
}

void blob_dict_sample_free(struct blob_dict_sample *s)
{
	free(s->bytes);
	free(s->sizes);
	free(s->from);
	memset(s, 0, sizeof *s);
}

int blob_dict_sample_read(struct store *st, const struct fp *pages, unsigned n, size_t per_page, size_t budget,
			  uint64_t seed, bool (*stop)(void *ctx), void *ctx, struct blob_dict_sample *out)
{
	memset(out, 0, sizeof *out);
	unsigned *order = malloc((n ? n : 1) * sizeof *order);
	if (!order)
		return -ENOMEM;
	/* a random order of the reservoir (Fisher-Yates): its first pages
	 * are as uniform a sample as all of it, so the byte budget cuts it
	 * without favouring any page */
	for (unsigned i = 0; i < n; i++)
		order[i] = i;
	for (unsigned i = n; i > 1; i--) {
		unsigned j = (unsigned)(next_random(&seed) % i), t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	unsigned want = 0;
	size_t total = 0;
	for (; want < n; want++) {
		uint64_t size = pages[order[want]].size;
		size_t take = size < per_page ? (size_t)size : per_page;
		if (total + take > budget)
			break;
		total += take;
	}
	out->bytes = malloc(total ? total : 1);
	out->sizes = malloc((want ? want : 1) * sizeof *out->sizes);
	out->from = malloc((want ? want : 1) * sizeof *out->from);
	int rc = out->bytes && out->sizes && out->from ? 0 : -ENOMEM;
	for (unsigned i = 0; i < want && !rc; i++) {
		if (stop && stop(ctx)) {
			rc = -ECANCELED;
			break;
		}
		const struct fp *fp = &pages[order[i]];
		size_t take = fp->size < per_page ? (size_t)fp->size : per_page;
		int prc = sample_page(st, fp, take, out->bytes + out->total);
		if (prc == -ENOMEM) {
			rc = prc;
		} else if (prc) {
			out->skipped++; /* freed since it was sampled, or damaged */
		} else {
			out->sizes[out->n] = take;
			out->from[out->n++] = order[i];
			out->total += take;
		}
	}
	free(order);
	if (rc)
		blob_dict_sample_free(out);
	return rc;
}

static bool trainer_stopping(void *ctx)
{
	struct dicts *d = ctx;
	pthread_mutex_lock(&d->mu);
	bool stop = d->stopping;
	pthread_mutex_unlock(&d->mu);
	return stop;
}

/* Train dictionary id on the sample (keys: its pages), append its record
 * (synced) and name it in meta: 0 and *out, or -errno. */
static int train_one(struct dicts *d, uint32_t id, const struct fp *keys, unsigned n, uint64_t seed,
		     struct pack_dict **out, struct blob_dict_info *info)
{
	struct store *st = d->st;
	struct blob_dict_sample s;
	int rc = blob_dict_sample_read(st, keys, n, BLOB_DICT_SAMPLE_MAX, BLOB_DICT_SAMPLE_BYTES,
				       seed, trainer_stopping, d, &s);
	if (rc)
		return rc;
	info->last_read = s.n;
	info->last_skipped = s.skipped;
	info->last_sample_bytes = s.total;
	void *bytes = NULL;
	size_t len = 0, want = blob_dict_size_for(s.total);
	rc = pack_dict_train(s.bytes, s.sizes, s.n, want, &bytes, &len);
	if (!rc && want > BLOB_DICT_MIN_BYTES && len < want / 2) {
		/* zstd's trainer gave far less than asked: such a dictionary was
		 * seen to compress twice worse than one of the smallest size
		 * (blob.h); train that size instead */
		free(bytes);
		bytes = NULL;
		rc = pack_dict_train(s.bytes, s.sizes, s.n, BLOB_DICT_MIN_BYTES, &bytes, &len);
		info->short_retrained++;
	}
	blob_dict_sample_free(&s);
	heap_give_back(); /* the sample was tens of MiB */
	struct pack_rec rec = { 0 };
	struct new_dict nd = { .id = id };
	/* durable before the row that names it, named before any record needs it */
	if (!rc)
		rc = pack_encode_dict(id, bytes, len, &rec);
	if (!rc)
		rc = pack_append(st->packs, &rec, true, &nd.loc);
	if (!rc)
		rc = store_write(st, new_dict_cb, &nd);
	if (!rc && !(*out = pack_dict_new(id, bytes, len, level_of(st))))
		rc = -ENOMEM;
	if (!rc)
		info->last_dict_bytes = len;
	pack_rec_free(&rec);
	free(bytes);
	return rc;
}

static void *trainer(void *arg)
{
	thread_background("pd-dict", THREAD_BACKGROUND_NICE);
	struct dicts *d = arg;
	struct store *st = d->st;
	uint64_t cpu0 = pd_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	/* the sample's identities (the reservoir is left alone while the
	 * trainer runs: blob_dict_observe returns at once then) */
	pthread_mutex_lock(&d->mu);
	unsigned n = d->sample.filled;
	uint64_t seed = d->sample.rng ^ d->sample.seen;
	struct fp *keys = malloc((n ? n : 1) * sizeof *keys);
	if (keys)
		memcpy(keys, d->sample.keys, n * sizeof *keys);
	uint32_t id = d->max_id + 1;
	struct blob_dict_info info = d->info;
	pthread_mutex_unlock(&d->mu);
	struct pack_dict *dict = NULL;
	int rc = keys ? train_one(d, id, keys, n, seed, &dict, &info) : -ENOMEM;
	free(keys);
	pthread_mutex_lock(&d->mu);
	if (!rc && keep(d, dict) == 0) {
		struct pack_dict *was = d->cur;
		d->cur = dict;
		if (was)
			retire_if_unused(d, pack_dict_id(was));
		d->cur_tried = true;
		d->max_id = id;
		/* next: when the store has grown (train_after), or drifts */
		d->next_train = train_after(st->counters.blobs > 0 ? (uint64_t)st->counters.blobs : 1);
		info.trained++;
		info.last_id = id;
	} else {
		if (dict)
			pack_dict_free(dict);
		d->next_train = d->pages + 4 * BLOB_DICT_FIRST; /* try again later */
		info.failed++;
	}
	info.cpu_seconds += (double)(pd_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0) / 1e9;
	d->info = info;
	d->pages = 0;
	blob_dict_reservoir_clear(&d->sample); /* the next sample: the pages after this training */
	d->base_raw = d->base_enc = d->win_raw = d->win_enc = 0;
	d->base_n = d->win_n = 0;
	d->drifted = false;
	d->thr_done = true; /* the next observe joins it */
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* Keep the encoded size of one more page; true when the pages drifted. */
static bool drift_step(struct dicts *d, uint64_t len, uint64_t enc)
{
	if (!d->cur)
		return false;
	if (d->base_n < DRIFT_WINDOW) {
		d->base_raw += (double)len;
		d->base_enc += (double)enc;
		d->base_n++;
		return false;
	}
	d->win_raw += (double)len;
	d->win_enc += (double)enc;
	if (++d->win_n < DRIFT_WINDOW)
		return false;
	bool worse = d->win_raw > 0 && d->base_raw > 0 && d->base_enc > 0 &&
		     (d->win_enc / d->win_raw) > DRIFT_WORSE * (d->base_enc / d->base_raw);
	d->win_raw = d->win_enc = 0;
	d->win_n = 0;
	return worse;
}

int blob_dict_reservoir_offer(struct blob_dict_reservoir *r, const struct fp *fp)
{
	if (!r->keys && !(r->keys = malloc((size_t)r->cap * sizeof *r->keys)))
		return -ENOMEM;
	r->seen++;
	uint64_t j = r->filled < r->cap ? r->filled++ : next_random(&r->rng) % r->seen;
	if (j >= r->cap)
		return 0;
	r->keys[j] = *fp;
	return 1;
}

void blob_dict_reservoir_clear(struct blob_dict_reservoir *r)
{
	r->filled = 0;
	r->seen = 0;
}

void blob_dict_drift(struct store *st, uint64_t len, uint64_t enc_len)
{
	struct dicts *d = dicts_of(st);
	if (!d || st->readonly || len < 64)
		return;
	pthread_mutex_lock(&d->mu);
	d->drifted |= drift_step(d, len, enc_len);
	pthread_mutex_unlock(&d->mu);
}

void blob_dict_observe(struct store *st, const struct fp *fp, uint64_t enc_len)
{
	struct dicts *d = dicts_of(st);
	if (!d || st->readonly || fp->size < 64)
		return;
	pthread_mutex_lock(&d->mu);
	if (d->thr_running && d->thr_done) {
		pthread_join(d->thr, NULL); /* it has returned: no wait */
		d->thr_running = d->thr_done = false;
	}
	if (d->stopping || d->thr_running) {
		pthread_mutex_unlock(&d->mu);
		return;
	}
	if (blob_dict_reservoir_offer(&d->sample, fp) < 0) {
		pthread_mutex_unlock(&d->mu);
		return;
	}
	d->pages++;
	if (enc_len)
		d->drifted |= drift_step(d, fp->size, enc_len);
	/* the first training once BLOB_DICT_FIRST pages were seen, the next
	 * ones by train_after or drift, each on what the reservoir holds */
	bool train = d->sample.filled >= BLOB_DICT_FIRST && (d->pages >= d->next_train || d->drifted);
	if (train) {
		d->thr_done = false;
		d->thr_running = pthread_create(&d->thr, NULL, trainer, d) == 0;
	}
	pthread_mutex_unlock(&d->mu);
}

void blob_dict_info(struct store *st, struct blob_dict_info *out)
{
	struct dicts *d = dicts_of(st);
	memset(out, 0, sizeof *out);
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	*out = d->info;
	for (size_t i = 0; i < d->cap; i++) {
		if (d->byid[i]) {
			out->loaded++;
			out->loaded_bytes += pack_dict_memory(d->byid[i]);
		}
	}
	out->reservoir = d->sample.filled;
	out->seen = d->sample.seen;
	pthread_mutex_unlock(&d->mu);
}
void blob_dict_settle(struct store *st)
{
	struct dicts *d = dicts_of(st);
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	bool join = d->thr_running;
	pthread_mutex_unlock(&d->mu);
	if (join)
		pthread_join(d->thr, NULL);
	pthread_mutex_lock(&d->mu);
	d->thr_running = d->thr_done = false;
	pthread_mutex_unlock(&d->mu);
}

/* ---- liveness ------------------------------------------------------------- */

int blob_dict_account(struct wtx *w, uint32_t id, int sign)
{
	if (!id)
		return 0;
	struct store *st = w->st;
	struct pack_loc loc;
	uint64_t records;
	int rc = blob_dict_row(w->txn, st, id, &loc, &records);
	if (rc)
		return rc == -ENOENT ? -EUCLEAN : rc;
	if (sign > 0)
		return dict_row_put(w->txn, st, id, &loc, records + 1);
	/* A dictionary no record needs any more stays: a page encoded with it
	 * before this commit may still be on its way in (a seal encodes
	 * outside its transaction), and it costs BLOB_DICT_MAX_BYTES at most,
	 * a few per store (blob.h). */
	return dict_row_put(w->txn, st, id, &loc, records ? records - 1 : 0);
}

/* ---- dictionaries no record needs ----------------------------------------- */

struct drop {
	struct store *st;
	uint32_t newest;
	uint32_t *needed; /* by kept bases (their rows count in no dictionary) */
	size_t n_needed, cap;
	uint64_t dropped, bytes;
};

static int kept_needs(void *ctx, const struct blobkey *k, const struct fprec *r)
{
	(void)k;
	struct drop *d = ctx;
	struct pack_rec_hdr h;
	int rc = blob_rec_hdr(d->st, r, &h);
	if (rc)
		return rc;
	if (h.encoding != PACK_ENC_ZSTD_DICT)
		return 0;
	if (d->n_needed == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 16;
		uint32_t *v = realloc(d->needed, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		d->needed = v;
		d->cap = cap;
	}
	d->needed[d->n_needed++] = h.dict;
	return 0;
}

static bool needed_by_kept(const struct drop *d, uint32_t id)
{
	for (size_t i = 0; i < d->n_needed; i++)
		if (d->needed[i] == id)
			return true;
	return false;
}

/* Every row of a dictionary no record needs, other than the newest and
 * those a kept base needs, deleted; its record's blocks punched after the
 * commit. */
static int drop_cb(struct wtx *w, void *arg)
{
	struct drop *d = arg;
	d->dropped = d->bytes = 0; /* the callback may run again */
	d->n_needed = 0;
	int rc = blob_delta_kept_each(w->txn, w->st, kept_needs, d);
	MDB_cursor *c;
	if (rc || (rc = pd_mdb_err(mdb_cursor_open(w->txn, w->st->db_meta, &c))))
		return rc;
	MDB_val k = { 4, "dict" }, v;
	for (int m = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); m == 0 && !rc; m = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 8 || memcmp(k.mv_data, "dict", 4) || v.mv_size != 28)
			break;
		const uint8_t *kp = k.mv_data, *p = v.mv_data;
		uint32_t id = (uint32_t)kp[4] << 24 | (uint32_t)kp[5] << 16 | (uint32_t)kp[6] << 8 | kp[7];
		struct pack_loc loc = { get_le32(p), get_le64(p + 4), get_le64(p + 12) };
		if (get_le64(p + 20) != 0 || id == d->newest || needed_by_kept(d, id))
			continue;
		if (!(rc = pd_mdb_err(mdb_cursor_del(c, 0))))
			rc = wtx_punch_after(w, &loc);
		d->dropped++;
		d->bytes += loc.len;
	}
	mdb_cursor_close(c);
	return rc;
}

int blob_dict_drop_unused(struct store *st, uint64_t *dropped, uint64_t *bytes)
{
	*dropped = *bytes = 0;
	if (st->readonly)
		return -EROFS;
	struct drop d = { .st = st, .newest = newest_id(st) };
	int rc = store_write(st, drop_cb, &d);
	free(d.needed);
	if (!rc) {
		*dropped = d.dropped;
		*bytes = d.bytes;
	}
	return rc;
}
