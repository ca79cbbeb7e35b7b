/* ns_later.c - creates that commit with the next batch. See ns_later.h. */
#include "ns_later.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ns_int.h"

/* A create whose rows wait for a commit. */
struct waiting {
	struct ns_later *nl;
	struct inode in;
	uint64_t parent;
	struct pd_time made;     /* the create's time, its directory's too */
	bool taken;              /* a batch or the journal has its row: it no longer changes */
	struct waiting *next;
	char name[];
};

struct ns_later {
	pthread_mutex_t mu;      /* guards the list */
	pthread_rwlock_t names;  /* see ns_later.h, Names */
	struct waiting *head;
	size_t n;                /* the list's length (read without mu: atomic) */
};

static struct ns_later *later_of(struct store *st)
{
	struct ns_later *nl = st->ns_later;
	return nl && __atomic_load_n(&nl->n, __ATOMIC_ACQUIRE) ? nl : NULL;
}

/* The waiting create of (parent, name), if any (mu held). */
static const struct waiting *waiting_named(const struct ns_later *nl, uint64_t parent, const char *name)
{
	for (const struct waiting *c = nl->head; c; c = c->next)
		if (c->parent == parent && strcmp(c->name, name) == 0)
			return c;
	return NULL;
}

/* The waiting create of inode ino, if any (mu held). */
static struct waiting *waiting_of(const struct ns_later *nl, uint64_t ino)
{
	for (struct waiting *c = nl->head; c; c = c->next)
		if (c->in.ino == ino)
			return c;
	return NULL;
}

/* ---- the commit ------------------------------------------------------ */

/* The later of two times. */
static struct pd_time later_time(struct pd_time a, struct pd_time b)
{
	return pd_time_cmp(a, b) > 0 ? a : b;
}

/* The rows of a create that waited: inode in (numbered, a copy: the
 * callback may run again) as name in parent, made at time made. */
static int commit_create(struct wtx *w, uint64_t parent, const char *name, struct inode in, struct pd_time made)
{
	struct inode dir;
	int rc = wtx_note_ino(w, in.ino);
	if (!rc)
		rc = ns_get_dir(w->txn, w->st, parent, &dir);
	if (rc)
		return rc;
	/* the directory's times are the create's, as its getattr answered
	 * them while the create waited (ns_later_dir_times) */
	struct pd_time now = w->now;
	w->now = later_time(made, later_time(dir.mtime, dir.ctime));
	rc = ns_add_new(w, &dir, name, &in, NULL);
	w->now = now;
	return rc;
}

static int create_cb(struct wtx *w, void *p)
{
	struct waiting *c = p;
	pthread_mutex_lock(&c->nl->mu); /* ns_later_setattr changes it until taken */
	c->taken = true;
	struct inode in = c->in;
	pthread_mutex_unlock(&c->nl->mu);
	return commit_create(w, c->parent, c->name, in, c->made);
}

/* In the leader, once the batch committed or failed, before any request of
 * the batch returns: from here on the rows answer. */
static void create_done(void *arg, int rc)
{
	struct waiting *c = arg;
	struct ns_later *nl = c->nl;
	pthread_mutex_lock(&nl->mu);
	for (struct waiting **pp = &nl->head; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	__atomic_store_n(&nl->n, nl->n - 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&nl->mu);
	if (rc && rc != -ECANCELED)
		fprintf(stderr, "pagededupfs: the create of inode %llu ('%s' in directory inode %llu) could not be committed: %s; the file is gone and its close() fails\n",
			(unsigned long long)c->in.ino, c->name, (unsigned long long)c->parent, strerror(-rc));
	free(c);
}

/* ---- the create ------------------------------------------------------ */

/* name is free in parent (neither waiting nor committed); *dir: parent. */
static int name_free(struct store *st, struct ns_later *nl, uint64_t parent, const char *name,
		     struct inode *dir)
{
	pthread_mutex_lock(&nl->mu);
	bool waits = waiting_named(nl, parent, name) != NULL;
	pthread_mutex_unlock(&nl->mu);
	if (waits)
		return -EEXIST;
	MDB_txn *txn;
	int rc = store_read_begin(st, &txn); /* parents are directories: never waiting */
	if (rc)
		return rc;
	struct ns_dirent_hit hit;
	rc = ns_get_dir(txn, st, parent, dir);
	if (!rc)
		rc = ns_dirent_find(txn, st, parent, name, &hit);
	store_read_end(st, txn);
	return rc == -ENOENT ? 0 : rc ? rc : -EEXIST;
}

int ns_create_file(struct store *st, uint64_t parent, const char *name, uint32_t mode,
		   const struct pd_cred *cred, struct inode *out)
{
	struct ns_later *nl = st->ns_later;
	mode = S_IFREG | (mode & 07777);
	if (!nl || st->opts.sync_blobs || !st->next_ino_ready)
		return ns_mknode(st, parent, name, mode, 0, NULL, cred, out);
	int rc = ns_check_name(name);
	if (rc)
		return rc;
	size_t len = strlen(name);
	struct waiting *c = malloc(sizeof *c + len + 1);
	if (!c)
		return -ENOMEM;
	c->nl = nl;
	c->parent = parent;
	c->taken = false;
	memcpy(c->name, name, len + 1);
	struct inode dir;
	pthread_rwlock_wrlock(&nl->names);
	if (!(rc = name_free(st, nl, parent, name, &dir))) {
		c->made = pd_now();
		ns_new_inode(&dir, mode, 0, cred, c->made, &c->in);
		rc = store_take_ino(st, &c->in.ino);
		if (!rc && ns_may_hold_name(st, &c->in)) { /* as its row will (ns_name_first) */
			c->in.name_parent = parent;
			c->in.name_hash = dirent_hash(name, len);
		}
	}
	if (!rc) {
		*out = c->in; /* c is the leader's once queued */
		pthread_mutex_lock(&nl->mu);
		c->next = nl->head;
		nl->head = c;
		__atomic_store_n(&nl->n, nl->n + 1, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&nl->mu);
		if ((rc = store_write_later(st, create_cb, create_done, c)))
			create_done(c, -ECANCELED);
	} else {
		free(c);
	}
	pthread_rwlock_unlock(&nl->names);
	return rc;
}

/* ---- answers while waiting ------------------------------------------- */

enum ns_later_role ns_later_find(struct store *st, uint64_t ino, struct inode *out)
{
	struct ns_later *nl = later_of(st);
	if (!nl)
		return NS_LATER_NONE;
	enum ns_later_role role = NS_LATER_NONE;
	pthread_mutex_lock(&nl->mu);
	for (const struct waiting *c = nl->head; c && role != NS_LATER_WAITS; c = c->next)
		if (c->in.ino == ino) {
			*out = c->in;
			role = NS_LATER_WAITS;
		} else if (c->parent == ino) {
			role = NS_LATER_PARENT;
		}
	pthread_mutex_unlock(&nl->mu);
	return role;
}

void ns_later_dir_times(struct store *st, struct inode *dir)
{
	struct ns_later *nl = later_of(st);
	if (!nl)
		return;
	pthread_mutex_lock(&nl->mu);
	for (const struct waiting *c = nl->head; c; c = c->next)
		if (c->parent == dir->ino) {
			struct pd_time t = later_time(c->made, later_time(dir->mtime, dir->ctime));
			dir->mtime = dir->ctime = t;
		}
	pthread_mutex_unlock(&nl->mu);
}

bool ns_later_lookup(struct store *st, uint64_t parent, const char *name, struct inode *out)
{
	struct ns_later *nl = later_of(st);
	if (!nl)
		return false;
	pthread_mutex_lock(&nl->mu);
	const struct waiting *c = waiting_named(nl, parent, name);
	if (c)
		*out = c->in;
	pthread_mutex_unlock(&nl->mu);
	return c != NULL;
}

bool ns_later_create_of(struct store *st, uint64_t ino, uint64_t *parent, char *name, size_t size, struct inode *in)
{
	struct ns_later *nl = later_of(st);
	if (!nl)
		return false;
	pthread_mutex_lock(&nl->mu);
	struct waiting *c = waiting_of(nl, ino);
	bool found = c && strlen(c->name) < size;
	if (found) {
		c->taken = true; /* the journal keeps this row */
		*parent = c->parent;
		*in = c->in;
		strcpy(name, c->name);
	}
	pthread_mutex_unlock(&nl->mu);
	return found;
}

int ns_later_setattr(struct store *st, uint64_t ino, const struct ns_setattr *sa, struct inode *out)
{
	struct ns_later *nl = later_of(st);
	if (!nl)
		return -EAGAIN;
	int rc = -EAGAIN;
	pthread_mutex_lock(&nl->mu);
	struct waiting *c = waiting_of(nl, ino);
	if (c && !c->taken) {
		ns_apply_setattr(&c->in, sa, pd_now());
		*out = c->in;
		rc = 0;
	}
	pthread_mutex_unlock(&nl->mu);
	return rc;
}

struct create_again {
	uint64_t parent;
	const char *name;
	const struct inode *in;
};

static int create_again_cb(struct wtx *w, void *p)
{
	const struct create_again *a = p;
	struct inode old;
	if (ns_get_inode(w->txn, w->st, a->in->ino, &old) == 0)
		return 0; /* it committed before the crash */
	/* the journal keeps the row as the close() found it: a change of its
	 * attributes before the close() gave it its ctime */
	return commit_create(w, a->parent, a->name, *a->in, a->in->ctime);
}

int ns_later_create_again(struct store *st, uint64_t parent, const char *name, const struct inode *in)
{
	struct create_again a = { parent, name, in };
	store_ino_used(st, in->ino);
	return store_write(st, create_again_cb, &a);
}

int ns_later_settle(struct store *st)
{
	/* waiting creates, and seals that wait for a batch (seal_later.h) */
	return st->ns_later ? store_settle(st) : 0;
}

int ns_sync(struct store *st)
{
	int rc = ns_later_settle(st);
	return rc ? rc : store_sync(st);
}

int ns_read_begin(struct store *st, MDB_txn **txn)
{
	int rc = ns_later_settle(st);
	return rc ? rc : store_read_begin(st, txn);
}

int ns_write_name(struct store *st, store_write_fn fn, void *arg)
{
	struct ns_later *nl = st->ns_later;
	if (!nl)
		return store_write(st, fn, arg);
	pthread_rwlock_rdlock(&nl->names);
	int rc = store_write(st, fn, arg);
	pthread_rwlock_unlock(&nl->names);
	return rc;
}

/* ---- the part -------------------------------------------------------- */

static int later_start(struct store *st, bool clean, char err[PD_ERRLEN])
{
	(void)clean;
	(void)err;
	struct ns_later *nl = calloc(1, sizeof *nl);
	if (!nl)
		return -ENOMEM;
	pthread_mutex_init(&nl->mu, NULL);
	pthread_rwlock_init(&nl->names, NULL);
	st->ns_later = nl;
	return 0;
}

/* After store_free dropped what no batch ran (each create_done freed its
 * entry): the list is empty. */
static void later_release(struct store *st)
{
	struct ns_later *nl = st->ns_later;
	if (!nl)
		return;
	pthread_rwlock_destroy(&nl->names);
	pthread_mutex_destroy(&nl->mu);
	free(nl);
	st->ns_later = NULL;
}

const struct store_part ns_later_part = {
	.name = "waiting creates",
	.start = later_start, /* no stop: store_close settles what waits before the parts stop */
	.release = later_release,
};
