/* store_syncer.c - the sync thread: a checkpoint every sync_ms while
 * commits are not durable (MDB_NOSYNC), sooner when a commit asks for one.
 *
 * What a checkpoint is and why a power cut needs one: store_ckpt.c. This
 * file only decides when they are taken and with which syncs: the whole
 * file system of the store for the thread and the open (blob files of a
 * format 1 store, packs and LMDB, as ext4 commits its journal), the
 * store's own files for an fsync(2) (store_sync_files).
 *
 * Schedule: every sync_ms from the start of the last sync, not from its
 * end, so that a commit waits for the next checkpoint's capture at most
 * sync_ms, then for that sync, whatever the last sync took. A commit that
 * finds LMDB's file grown past the last capture (store_ckpt_watch) kicks
 * the thread: a checkpoint lets the free pages its reader held be reused,
 * so a fast crawl does not wait sync_ms with the file growing. The kick
 * wakes this thread rather than syncing in the committing one, so that a
 * writer's commit never waits for a sync.
 */
#include "store_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/thread.h"

static int sync_whole_fs(struct store *st)
{
	if (syncfs(st->dirfd))
		return -errno;
	return pd_mdb_err(mdb_env_sync(st->env, 1));
}

int store_sync_files(struct store *st)
{
	int rc = st->packs ? pack_sync(st->packs) : 0;
	return rc ? rc : pd_mdb_err(mdb_env_sync(st->env, 1));
}

static void *sync_main(void *arg)
{
	pthread_setname_np(pthread_self(), "pd-sync"); /* its CPU apart in /proc/PID/task */
	struct store *st = arg;
	unsigned ms = st->opts.sync_ms ? st->opts.sync_ms : 1000;
	uint64_t took = 0, period = (uint64_t)ms * 1000000u;
	pthread_mutex_lock(&st->sync_mu);
	while (!st->sync_stop) {
		struct timespec ts = pd_deadline_ns(CLOCK_REALTIME, took < period ? period - took : 0);
		if (!st->sync_kick)
			pthread_cond_timedwait(&st->sync_cv, &st->sync_mu, &ts);
		if (st->sync_stop)
			break;
		__atomic_store_n(&st->sync_kick, false, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&st->sync_mu);
		uint64_t t0 = pd_clock_ns(CLOCK_MONOTONIC);
		/* what store_write_later left waits no longer than a sync, and
		 * what its batches left to do is done (store.h after_later:
		 * the bytes of files whose owner was busy when their batch ran) */
		store_settle(st);
		void (*after)(struct store *) = __atomic_load_n(&st->after_later, __ATOMIC_ACQUIRE);
		if (after)
			after(st);
		/* Blob files first, then the records that name them; then the
		 * records the commits so far left dead. */
		store_checkpoint(st, sync_whole_fs);
		took = pd_clock_ns(CLOCK_MONOTONIC) - t0;
		pthread_mutex_lock(&st->sync_mu);
	}
	pthread_mutex_unlock(&st->sync_mu);
	return NULL;
}

/* Without durable commits, a first checkpoint before any commit of this
 * run (a killed run's last commits made durable, with the pack records
 * they name, which the packs of this run do not know: the whole file
 * system synced; or the clean close's state kept); with them, the file
 * says there is nothing to restore, and no checkpoint is taken. */
int store_syncer_first_checkpoint(struct store *st, char err[PD_ERRLEN])
{
	int rc = store_ckpt_open(st);
	if (!rc && st->opts.sync_blobs) {
		rc = store_ckpt_mark_closed(st);
		store_ckpt_close(st);
	} else if (!rc) {
		rc = store_checkpoint(st, sync_whole_fs);
	}
	if (rc)
		snprintf(err, PD_ERRLEN, "cannot keep the checkpoint of %s (%s/meta/ckpt): %s", st->dir, st->dir, strerror(-rc));
	return rc;
}

void store_syncer_start(struct store *st)
{
	if (!st->opts.sync_blobs)
		st->sync_running = pthread_create(&st->sync_thread, NULL, sync_main, st) == 0;
}

void store_syncer_stop(struct store *st)
{
	thread_stop_join(st->sync_thread, &st->sync_mu, &st->sync_cv, &st->sync_stop, &st->sync_running);
}

bool store_syncer_kicked(struct store *st)
{
	return __atomic_load_n(&st->sync_kick, __ATOMIC_RELAXED);
}

void store_syncer_kick(struct store *st)
{
	pthread_mutex_lock(&st->sync_mu);
	if (!st->sync_kick) {
		__atomic_store_n(&st->sync_kick, true, __ATOMIC_RELAXED);
		pthread_cond_signal(&st->sync_cv);
	}
	pthread_mutex_unlock(&st->sync_mu);
}
