/* live.c - the live-inode table: an entry per inode the kernel references
 * or a call uses, its pins and lookups, the orphans it deletes when their
 * last handle goes, and the allocation of the file state an entry carries
 * while pinned (what the state holds is openfile.c's). The design is in
 * openfile.h. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/byteorder.h"
#include "base/heap.h"
#include "live_int.h"
#include "ns.h"
#include "openfile.h"
#include "seal_later.h"
#include "store/store.h"

struct live_table {
	pthread_mutex_t mu;
	struct live_ino **buckets;
	size_t nbuckets, count;
	size_t states;         /* entries with a file state */
	size_t freed;          /* entries freed since the last trim */
	uint64_t trims;
	uint64_t state_drops;  /* file states dropped so far (live_state_drops) */
};

struct live_table *live_table_new(void)
{
	struct live_table *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->nbuckets = 1024;
	t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
	if (!t->buckets) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->mu, NULL);
	return t;
}

static void state_free(struct live *li)
{
	if (li->staging_fd >= 0)
		close(li->staging_fd);
	if (li->blob_fd >= 0)
		close(li->blob_fd);
	free(li->lazy_done);
	if (li->hash.md5)
		fp_free(&li->hash);
	seal_later_put(li->pending); /* a store dropped without its batch */
	free(li->mem);
	free(li->page);
	pthread_mutex_destroy(&li->mu);
	free(li);
}

/* Nothing but what state_new reads again: the state may go. */
static bool state_idle(const struct live *li)
{
	return li->staging_fd < 0 && li->blob_fd < 0 && !li->in_mem && !li->mem && !li->page && !li->lazy_done &&
	       !li->dirty && !li->hash.md5;
}

static struct live *state_new(struct live_ino *e)
{
	struct live *li = calloc(1, sizeof *li);
	if (!li)
		return NULL;
	li->ino = e->ino;
	li->ref = e;
	li->staging_fd = li->blob_fd = -1;
	pthread_mutex_init(&li->mu, NULL);
	return li;
}

static void live_free(struct live_ino *e)
{
	if (e->state)
		state_free(e->state);
	free(e);
}

void live_table_free(struct live_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nbuckets; i++)
		for (struct live_ino *e = t->buckets[i], *next; e; e = next) {
			next = e->next;
			live_free(e);
		}
	free(t->buckets);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

static size_t bucket_of(const struct live_table *t, uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 20) & (t->nbuckets - 1);
}

static void table_grow(struct live_table *t)
{
	size_t n = t->nbuckets * 2;
	struct live_ino **b = calloc(n, sizeof *b);
	if (!b)
		return; /* longer chains, still correct */
	struct live_table nt = { .buckets = b, .nbuckets = n };
	for (size_t i = 0; i < t->nbuckets; i++)
		for (struct live_ino *li = t->buckets[i], *next; li; li = next) {
			next = li->next;
			size_t j = bucket_of(&nt, li->ino);
			li->next = b[j];
			b[j] = li;
		}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = n;
}

static struct live_ino **find_slot(struct live_table *t, uint64_t ino)
{
	struct live_ino **p = &t->buckets[bucket_of(t, ino)];
	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

/* Find or make the entry of ino; table mutex held. */
static struct live_ino *get_locked(struct live_table *t, uint64_t ino)
{
	struct live_ino **p = find_slot(t, ino);
	if (*p)
		return *p;
	struct live_ino *li = calloc(1, sizeof *li);
	if (!li)
		return NULL;
	li->ino = ino;
	li->next = t->buckets[bucket_of(t, ino)];
	t->buckets[bucket_of(t, ino)] = li;
	if (++t->count > 2 * t->nbuckets)
		table_grow(t);
	return li;
}

static bool unused(const struct live_ino *li)
{
	return li->nlookup == 0 && li->pins == 0;
}

/* Unlink li from the table; table mutex held. */
static void remove_locked(struct live_table *t, struct live_ino *li)
{
	struct live_ino **p = find_slot(t, li->ino);
	if (*p == li) {
		*p = li->next;
		t->count--;
	}
}

/* A file state leaves the table (t->mu held): counted before the entry's
 * state can be missed (live_state_drops). */
static void state_gone(struct live_table *t)
{
	t->states--;
	__atomic_add_fetch(&t->state_drops, 1, __ATOMIC_RELEASE);
}

static int delete_orphan_cb(struct wtx *w, void *arg)
{
	return ns_delete_inode(w, *(uint64_t *)arg);
}

static int delete_orphan(struct store *st, uint64_t ino)
{
	return store_write(st, delete_orphan_cb, &ino);
}

/* Drop a pin or lookups. An orphan goes from the store as soon as no
 * handle holds it: without a name and an open file nothing can reach its
 * bytes again, so its blob reference must not wait for the kernel's FORGET,
 * which comes whenever the kernel evicts its inode. The entry itself is
 * freed once the kernel holds no reference either. */
int live_settle(struct store *st, struct live_ino *li, uint32_t unpin, uint64_t forget)
{
	struct live_table *t = st->live;
	struct live *drop = NULL;
	pthread_mutex_lock(&t->mu);
	li->pins -= unpin;
	li->nlookup = forget > li->nlookup ? 0 : li->nlookup - forget;
	bool delete = li->orphan && !li->deleted && li->pins == 0;
	if (delete)
		li->deleted = true;
	bool gone = unused(li);
	if (gone)
		remove_locked(t, li);
	/* Unpinned, nobody holds the state's mutex: what holds nothing goes. */
	else if (li->pins == 0 && li->state && state_idle(li->state))
		drop = li->state, li->state = NULL, state_gone(t);
	if (gone && li->state)
		state_gone(t);
	bool trim = gone && ++t->freed >= LIVE_TRIM_EVERY;
	if (trim) {
		t->freed = 0;
		t->trims++;
	}
	pthread_mutex_unlock(&t->mu);
	uint64_t ino = li->ino;
	if (drop)
		state_free(drop);
	if (gone) {
		if (li->state)
			file_unstage(st, li->state);
		live_free(li);
	}
	if (trim)
		heap_give_back(); /* the kernel forgets inodes in bursts: at 360,000 pages of
				   * bench-scale, every entry forgotten left RssAnon at
				   * 130 MiB, and a trim gave back 70 MiB of it */
	return delete ? delete_orphan(st, ino) : 0;
}

/* Pin the entry of ino if it exists (NULL: the inode is not in use);
 * with_state: only if it has a file state (NULL: nothing staged). */
struct live_ino *live_pin_entry(struct store *st, uint64_t ino, bool with_state)
{
	struct live_table *t = st->live;
	pthread_mutex_lock(&t->mu);
	struct live_ino *li = *find_slot(t, ino);
	if (li && with_state && !li->state)
		li = NULL;
	if (li)
		li->pins++;
	pthread_mutex_unlock(&t->mu);
	return li;
}

uint64_t live_state_drops(struct store *st)
{
	return __atomic_load_n(&st->live->state_drops, __ATOMIC_ACQUIRE);
}

/* Pin ino's entry, made with its file state if need be. */
struct live *live_pin_state(struct store *st, uint64_t ino)
{
	struct live_table *t = st->live;
	pthread_mutex_lock(&t->mu);
	struct live_ino *e = get_locked(t, ino);
	if (e && !e->state) {
		if (!(e->state = state_new(e))) {
			if (unused(e)) {
				remove_locked(t, e);
				live_free(e);
			}
			e = NULL;
		} else {
			t->states++;
		}
	}
	if (e)
		e->pins++;
	pthread_mutex_unlock(&t->mu);
	return e ? e->state : NULL;
}

void live_ref(struct store *st, uint64_t ino, uint64_t n)
{
	struct live_table *t = st->live;
	pthread_mutex_lock(&t->mu);
	struct live_ino *li = get_locked(t, ino);
	if (li)
		li->nlookup += n;
	pthread_mutex_unlock(&t->mu);
}

void live_counts(struct store *st, struct live_counts *out)
{
	struct live_table *t = st->live;
	memset(out, 0, sizeof *out);
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	out->entries = t->count;
	out->states = t->states;
	out->trims = t->trims;
	pthread_mutex_unlock(&t->mu);
}

int live_pin(struct store *st, uint64_t ino)
{
	return live_pin_state(st, ino) ? 0 : -ENOMEM;
}

int live_unpin(struct store *st, uint64_t ino)
{
	struct live_ino *li = live_pin_entry(st, ino, false); /* held while settling */
	return li ? live_settle(st, li, 2, 0) : 0;
}

int live_forget(struct store *st, uint64_t ino, uint64_t n)
{
	struct live_ino *li = live_pin_entry(st, ino, false); /* held while settling */
	return li ? live_settle(st, li, 1, n) : 0;
}

int live_orphaned(struct store *st, uint64_t ino)
{
	struct live_table *t = st->live;
	if (!t)
		return delete_orphan(st, ino);
	pthread_mutex_lock(&t->mu);
	struct live_ino *li = *find_slot(t, ino);
	bool held = li && li->pins > 0;
	if (li) {
		li->orphan = true;
		li->deleted = !held;
	}
	pthread_mutex_unlock(&t->mu);
	return held ? 0 : delete_orphan(st, ino);
}

static int drop_orphans_cb(struct wtx *w, void *arg)
{
	(void)arg;
	struct store *st = w->st;
	MDB_cursor *c;
	int rc = pd_mdb_err(mdb_cursor_open(w->txn, st->db_orphans, &c));
	if (rc)
		return rc;
	uint64_t *inos = NULL;
	size_t n = 0, cap = 0;
	MDB_val k, v;
	int mrc;
	for (mrc = mdb_cursor_get(c, &k, &v, MDB_FIRST); mrc == 0; mrc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			uint64_t *p = realloc(inos, cap * sizeof *p);
			if (!p) {
				rc = -ENOMEM;
				break;
			}
			inos = p;
		}
		inos[n++] = get_be64(k.mv_data);
	}
	mdb_cursor_close(c);
	for (size_t i = 0; i < n && !rc; i++) {
		struct live_table *t = st->live;
		bool in_use = false;
		if (t) {
			pthread_mutex_lock(&t->mu);
			struct live_ino *li = *find_slot(t, inos[i]);
			in_use = li && li->pins > 0;
			pthread_mutex_unlock(&t->mu);
		}
		if (!in_use)
			rc = ns_delete_inode(w, inos[i]);
	}
	free(inos);
	return rc;
}

int live_drop_orphans(struct store *st)
{
	return store_write(st, drop_orphans_cb, NULL);
}

bool live_only_pin(struct store *st, const struct live_ino *e, bool *orphan)
{
	struct live_table *t = st->live;
	pthread_mutex_lock(&t->mu);
	bool only = e->pins == 1;
	*orphan = e->orphan;
	pthread_mutex_unlock(&t->mu);
	return only;
}
