/* stats.c - store statistics from the running totals (kept exact in the
 * meta table by every transaction) and a scan of the filter. */
#include "stats.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/heap.h"
#include "near/sigq.h"
#include "openfile.h"

/* ---- bytes on disk by part ---------------------------------------------- */

/* Allocated bytes of everything below the directory fd (closed here). */
static uint64_t du_fd(int fd)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	uint64_t sum = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat sb;
		if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW))
			continue;
		sum += (uint64_t)sb.st_blocks * 512;
		if (S_ISDIR(sb.st_mode)) {
			int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			if (sub >= 0)
				sum += du_fd(sub);
		}
	}
	closedir(d);
	return sum;
}

/* The parts of a store by their top-level names. */
static uint64_t *disk_part(struct stats_disk *d, const char *name)
{
	static const struct { const char *name; size_t off; } parts[] = {
		{ "packs", offsetof(struct stats_disk, packs) },
		{ "objects", offsetof(struct stats_disk, blobs) },
		{ "meta", offsetof(struct stats_disk, lmdb) },
		{ "filter", offsetof(struct stats_disk, filter) },
		{ "filter.d", offsetof(struct stats_disk, filter) },
		{ "staging", offsetof(struct stats_disk, staging) },
	};
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
		if (!strcmp(name, parts[i].name))
			return (uint64_t *)((char *)d + parts[i].off);
	return &d->other;
}

int stats_disk(const char *dir, struct stats_disk *d)
{
	memset(d, 0, sizeof *d);
	DIR *top = opendir(dir);
	if (!top)
		return -errno;
	struct dirent *e;
	while ((e = readdir(top))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat sb;
		if (fstatat(dirfd(top), e->d_name, &sb, AT_SYMLINK_NOFOLLOW))
			continue;
		uint64_t bytes = (uint64_t)sb.st_blocks * 512;
		if (S_ISDIR(sb.st_mode)) {
			int fd = openat(dirfd(top), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			if (fd >= 0)
				bytes += du_fd(fd);
		}
		*disk_part(d, e->d_name) += bytes;
		d->total += bytes;
	}
	closedir(top);
	return 0;
}

/* LMDB's freelist, and how much of it the oldest reader keeps from
 * reuse (a reader left open makes the file grow: stats tells it apart
 * from a freelist that is merely long). */
static void lmdb_free_stats(struct store *st, size_t psize, struct pd_stats *s)
{
	MDB_txn *txn;
	if (store_read_begin(st, &txn))
		return;
	struct store_lmdb_readers r = { 0 };
	uint64_t pages = 0, pinned = 0;
	if (store_lmdb_readers(st->env, &r) == 0) {
		s->lmdb_readers = r.active;
		s->lmdb_reader_lag = r.oldest_txnid ? r.last_txnid - r.oldest_txnid : 0;
	}
	uint64_t from = r.oldest_txnid ? r.oldest_txnid : mdb_txn_id(txn);
	store_lmdb_free_pages(txn, from, &pages, &pinned);
	store_read_end(st, txn);
	s->lmdb_free_bytes = pages * psize;
	s->lmdb_pinned_bytes = pinned * psize;
	pthread_mutex_lock(&st->reader_mu);
	s->lmdb_longest_reader = st->reader_max_commits;
	snprintf(s->lmdb_longest_reader_in, sizeof s->lmdb_longest_reader_in, "%s",
		 st->reader_max_in ? st->reader_max_in : "");
	pthread_mutex_unlock(&st->reader_mu);
}

int stats_collect(struct store *st, struct pd_stats *s)
{
	memset(s, 0, sizeof *s);
	store_counters(st, &s->c);
	s->saved_ratio = s->c.logical_bytes > 0 ? 1.0 - (double)s->c.stored_bytes / (double)s->c.logical_bytes : 0;
	struct gf_stats g;
	gf_stats(st->gf, true, &g);
	s->filter_bytes = g.bytes;
	s->filter_counters = g.counters;
	s->filter_lines = st->params.filter_lines;
	s->filter_nonzero = g.nonzero;
	s->filter_saturated = g.saturated;
	s->filter_fill = s->filter_counters ? (double)s->filter_nonzero / (double)s->filter_counters : 0;
	s->filter_fpr_estimate = g.fpr_estimate;
	s->filter_fpr_design = g.fpr_model;
	s->filter_fpr_worst = g.worst_leaf_fpr;
	s->filter_fpr_target = st->params.filter_fpr;
	s->filter_fmax = st->params.filter_fmax;
	s->filter_leaves = g.leaves;
	s->filter_keys = g.keys;
	s->filter_depth = g.max_depth;
	s->filter_splitting = g.splitting;
	MDB_envinfo info = { 0 };
	MDB_stat mst = { 0 };
	store_env_info(st, &info, &mst);
	s->lmdb_bytes = (uint64_t)(info.me_last_pgno + 1) * mst.ms_psize;
	s->lmdb_mapsize = info.me_mapsize;
	lmdb_free_stats(st, mst.ms_psize, s);
	stats_disk(st->dir, &s->disk);
	s->disk_ratio = s->c.logical_bytes > 0 ? (double)s->disk.total / (double)s->c.logical_bytes : 0;
	s->format = st->format;
	store_versions(st, s->made_by, s->written_by);
	blob_pack_usage(st, &s->packs);
	blob_compact_stats(st, &s->compact);
	blob_delta_usage(st, &s->deltas);
	stats_daemon(st, &s->daemon);
	return 0;
}

void stats_daemon(struct store *st, struct stats_daemon *out)
{
	memset(out, 0, sizeof *out);
	if (!st->live)
		return;
	struct sigq_counts q;
	sigq_counts(st, &q);
	out->running = true;
	/* seals whose batch committed while their file's owner was busy go
	 * now (the sync thread would within sync_ms): a state counted holds
	 * something. A query holds no entry's mutex. */
	file_resolve_sealed(st, true);
	struct live_counts lc;
	live_counts(st, &lc);
	out->inodes_held = lc.entries;
	out->file_states = lc.states;
	out->staged_bytes = __atomic_load_n(&st->mem_staged, __ATOMIC_RELAXED);
	out->sign_queue = q.queued;
	out->signed_by_thread = q.by_thread;
	out->signed_by_writers = q.by_writers;
	out->signed_by_drain = q.by_drain;
	out->delta_queue = q.delta.waiting;
	out->delta_dropped = q.delta.dropped;
	out->delta_tried = q.delta.tried;
	out->delta_candidates = q.delta.candidates;
	out->delta_by_writers = q.delta.helped;
	out->nursery_bypassed = __atomic_load_n(&st->nursery_bypassed, __ATOMIC_RELAXED);
	out->heap_give_backs = heap_give_backs();
}

struct out { char *buf; size_t size, len; };

static void emit(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t room = o->len < o->size ? o->size - o->len : 0;
	int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

static size_t stats_json(const struct pd_stats *s, char *buf, size_t size)
{
	struct out o = { buf, size, 0 };
	const struct pd_counters *c = &s->c;
	emit(&o, "{\"pages\":%lld,\"blobs\":%lld,\"logical_bytes\":%lld,\"stored_bytes\":%lld,"
		 "\"saved_ratio\":%.6f,\"collisions\":%lld,\"seals\":%lld,\"dup_seals\":%lld,"
		 "\"probes\":%lld,\"probes_skipped\":%lld,\"false_positives\":%lld,",
	     (long long)c->pages, (long long)c->blobs, (long long)c->logical_bytes,
	     (long long)c->stored_bytes, s->saved_ratio, (long long)c->collisions, (long long)c->seals,
	     (long long)c->dup_seals, (long long)c->probes, (long long)c->probes_skipped,
	     (long long)c->false_positives);
	emit(&o, "\"refcount_histogram\":{");
	bool first = true;
	for (unsigned b = 0; b < PD_HIST_BUCKETS; b++) {
		if (!c->hist[b])
			continue;
		emit(&o, "%s\"%llu-%llu\":%lld", first ? "" : ",", 1ull << b, (2ull << b) - 1,
		     (long long)c->hist[b]);
		first = false;
	}
	emit(&o, "},\"filter\":{\"bytes\":%llu,\"counters\":%llu,\"lines_per_key\":%u,"
		 "\"leaves\":%llu,\"depth\":%u,\"keys\":%llu,\"splitting\":%s,"
		 "\"nonzero\":%llu,\"saturated\":%llu,\"fill\":%.6f,\"fpr_estimate\":%.3g,"
		 "\"fpr_design\":%.3g,\"fpr_worst_leaf\":%.3g,\"fpr_target\":%.3g,\"fmax\":%.3g},"
		 "\"lmdb_bytes\":%llu,\"lmdb_mapsize\":%llu,\"lmdb_free_bytes\":%llu,"
		 "\"lmdb_pinned_bytes\":%llu,\"lmdb_readers\":%u,\"lmdb_reader_lag\":%llu,"
		 "\"lmdb_longest_reader\":%llu,\"lmdb_longest_reader_in\":\"%s\",",
	     (unsigned long long)s->filter_bytes, (unsigned long long)s->filter_counters,
	     s->filter_lines, (unsigned long long)s->filter_leaves, s->filter_depth,
	     (unsigned long long)s->filter_keys, s->filter_splitting ? "true" : "false",
	     (unsigned long long)s->filter_nonzero,
	     (unsigned long long)s->filter_saturated, s->filter_fill, s->filter_fpr_estimate,
	     s->filter_fpr_design, s->filter_fpr_worst, s->filter_fpr_target, s->filter_fmax,
	     (unsigned long long)s->lmdb_bytes, (unsigned long long)s->lmdb_mapsize,
	     (unsigned long long)s->lmdb_free_bytes, (unsigned long long)s->lmdb_pinned_bytes,
	     s->lmdb_readers, (unsigned long long)s->lmdb_reader_lag,
	     (unsigned long long)s->lmdb_longest_reader, s->lmdb_longest_reader_in);
	const struct stats_disk *d = &s->disk;
	emit(&o, "\"disk\":{\"total\":%llu,\"packs\":%llu,\"blobs\":%llu,\"lmdb\":%llu,\"filter\":%llu,\"staging\":%llu,"
		 "\"other\":%llu,\"ratio_to_logical\":%.6f},\"made_by\":\"%s\",\"written_by\":\"%s\",",
	     (unsigned long long)d->total, (unsigned long long)d->packs, (unsigned long long)d->blobs, (unsigned long long)d->lmdb,
	     (unsigned long long)d->filter, (unsigned long long)d->staging, (unsigned long long)d->other,
	     s->disk_ratio, s->made_by, s->written_by);
	const struct blob_pack_usage *p = &s->packs;
	emit(&o, "\"packs\":{\"files\":%llu,\"bytes\":%llu,\"allocated\":%llu,\"live_bytes\":%llu,"
		 "\"live_records\":%llu,\"dead_bytes\":%llu,\"dictionaries\":%llu,\"dictionary_bytes\":%llu,"
		 "\"kept_bases\":%llu,\"kept_bytes\":%llu,\"nursery\":{\"files\":%llu,\"bytes\":%llu,"
		 "\"allocated\":%llu,\"live_bytes\":%llu,\"live_records\":%llu}},",
	     (unsigned long long)p->packs, (unsigned long long)p->length, (unsigned long long)p->allocated,
	     (unsigned long long)p->live, (unsigned long long)p->live_records, (unsigned long long)p->dead,
	     (unsigned long long)p->dicts, (unsigned long long)p->dict_bytes, (unsigned long long)p->kept,
	     (unsigned long long)p->kept_bytes, (unsigned long long)p->nursery_packs,
	     (unsigned long long)p->nursery_length, (unsigned long long)p->nursery_allocated,
	     (unsigned long long)p->nursery_live, (unsigned long long)p->nursery_live_records);
	const struct blob_delta_usage *du = &s->deltas;
	emit(&o, "\"deltas\":{\"pages\":%llu,\"bytes\":%llu,\"chunked\":%llu,\"chunked_bytes\":%llu},",
	     (unsigned long long)du->deltas, (unsigned long long)du->delta_bytes, (unsigned long long)du->chunked,
	     (unsigned long long)du->chunked_bytes);
	const struct blob_compact_stats *k = &s->compact;
	emit(&o, "\"compaction\":{\"packs_compacted\":%llu,\"packs_removed\":%llu,\"records_moved\":%llu,"
		 "\"bytes_moved\":%llu,\"bytes_given_back\":%llu,\"damaged_left\":%llu,"
		 "\"records_encoded_again\":%llu,\"bytes_saved_encoding_again\":%llu,\"records_made_deltas_by_window\":%llu}",
	     (unsigned long long)k->packs_compacted, (unsigned long long)k->packs_removed,
	     (unsigned long long)k->records_moved, (unsigned long long)k->bytes_moved,
	     (unsigned long long)k->bytes_freed, (unsigned long long)k->damaged,
	     (unsigned long long)k->records_cold, (unsigned long long)k->bytes_cold_saved,
	     (unsigned long long)k->records_window);
	const struct stats_daemon *dm = &s->daemon;
	if (dm->running)
		emit(&o, ",\"daemon\":{\"inodes_held\":%llu,\"file_states\":%llu,\"staged_bytes\":%llu,\"sign_queue\":%llu,"
			 "\"signed_by_thread\":%llu,\"signed_by_writers\":%llu,\"signed_by_drain\":%llu,"
			 "\"delta_queue\":%llu,\"delta_dropped\":%llu,\"delta_tried\":%llu,\"delta_candidates\":%llu,"
			 "\"delta_by_writers\":%llu,\"nursery_bypassed\":%llu,\"heap_give_backs\":%llu}",
		     (unsigned long long)dm->inodes_held, (unsigned long long)dm->file_states,
		     (unsigned long long)dm->staged_bytes,
		     (unsigned long long)dm->sign_queue, (unsigned long long)dm->signed_by_thread,
		     (unsigned long long)dm->signed_by_writers, (unsigned long long)dm->signed_by_drain,
		     (unsigned long long)dm->delta_queue, (unsigned long long)dm->delta_dropped,
		     (unsigned long long)dm->delta_tried, (unsigned long long)dm->delta_candidates,
		     (unsigned long long)dm->delta_by_writers, (unsigned long long)dm->nursery_bypassed,
		     (unsigned long long)dm->heap_give_backs);
	emit(&o, "}");
	return o.len;
}

/* A size for people: exact bytes, or with -h KiB/MiB/GiB/TiB. */
static const char *size_str(uint64_t n, bool human, char buf[32])
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	if (!human || n < 1024) {
		snprintf(buf, 32, "%llu%s", (unsigned long long)n, human ? " B" : "");
		return buf;
	}
	double v = (double)n / 1024;
	unsigned u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, 32, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

static size_t stats_text(const struct pd_stats *s, bool human, char *buf, size_t size)
{
	struct out o = { buf, size, 0 };
	const struct pd_counters *c = &s->c;
	const struct stats_disk *d = &s->disk;
	char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], b7[32];
	emit(&o, "pages:            %lld\n", (long long)c->pages);
	emit(&o, "blobs:            %lld (distinct contents)\n", (long long)c->blobs);
	emit(&o, "logical bytes:    %s (the pages as a plain copy holds them)\n",
	     size_str((uint64_t)c->logical_bytes, human, b1));
	emit(&o, "unique bytes:     %s (each distinct content once): %.2f%% fewer than logical\n",
	     size_str((uint64_t)c->stored_bytes, human, b1), 100 * s->saved_ratio);
	emit(&o, "on disk:          %s: packs %s, blob files %s, lmdb %s, filter %s, staging %s, other %s\n",
	     size_str(d->total, human, b1), size_str(d->packs, human, b7), size_str(d->blobs, human, b2),
	     size_str(d->lmdb, human, b3),
	     size_str(d->filter, human, b4), size_str(d->staging, human, b5), size_str(d->other, human, b6));
	if (c->logical_bytes > 0 && s->disk_ratio < 10)
		emit(&o, "disk vs logical:  %.1f%% (%s)\n", 100 * s->disk_ratio,
		     s->disk_ratio <= 1 ? "the store takes less than the pages' bytes"
					: "the store takes more than the pages' bytes: blocks of small files, indexes");
	else if (c->logical_bytes > 0) /* a young store: its indexes and reserve outweigh the pages */
		emit(&o, "disk vs logical:  %.0f times (LMDB's reserve and the filter, sized at mkfs, outweigh the pages)\n",
		     s->disk_ratio);
	emit(&o, "seals:            %lld (%lld duplicates)\n", (long long)c->seals, (long long)c->dup_seals);
	emit(&o, "md5 collisions:   %lld\n", (long long)c->collisions);
	emit(&o, "probes skipped:   %lld of %lld lookups (filter said certainly new)\n",
	     (long long)c->probes_skipped, (long long)(c->probes + c->probes_skipped));
	emit(&o, "false positives:  %lld\n", (long long)c->false_positives);
	emit(&o, "refcounts:       ");
	for (unsigned b = 0; b < PD_HIST_BUCKETS; b++)
		if (c->hist[b])
			emit(&o, " %llu-%llu:%lld", 1ull << b, (2ull << b) - 1, (long long)c->hist[b]);
	emit(&o, "\nfilter:           %s in %llu leaves (depth %u)%s, %u line(s) per key, fill %.4f, %llu saturated\n",
	     size_str(s->filter_bytes, human, b1), (unsigned long long)s->filter_leaves,
	     s->filter_depth, s->filter_splitting ? ", a split in progress" : "", s->filter_lines,
	     s->filter_fill, (unsigned long long)s->filter_saturated);
	emit(&o, "filter fpr:       %.3g estimated from fill, %.3g from the leaves' loads (worst leaf %.3g); target %.3g, bound %.3g\n",
	     s->filter_fpr_estimate, s->filter_fpr_design, s->filter_fpr_worst, s->filter_fpr_target,
	     s->filter_fmax);
	emit(&o, "lmdb:             %s used, map %s; %s of it free (reused by later writes; pagededup compact gives it back)\n",
	     size_str(s->lmdb_bytes, human, b1), size_str(s->lmdb_mapsize, human, b2),
	     size_str(s->lmdb_free_bytes, human, b3));
	emit(&o, "lmdb readers:     %u running, the oldest %llu commits behind; %s of the free pages kept for it\n",
	     s->lmdb_readers, (unsigned long long)s->lmdb_reader_lag, size_str(s->lmdb_pinned_bytes, human, b1));
	if (s->lmdb_longest_reader)
		emit(&o, "lmdb long reader: %llu commits under one reader (in %s) since the open\n",
		     (unsigned long long)s->lmdb_longest_reader, s->lmdb_longest_reader_in);
	emit(&o, "versions:         store format %u, made by pagededup %s, last written by %s\n", s->format,
	     *s->made_by ? s->made_by : "(before 0.9.0: not recorded)",
	     *s->written_by ? s->written_by : "(before 0.9.0: not recorded)");
	const struct blob_pack_usage *p = &s->packs;
	emit(&o, "packs:            %llu files, %llu bytes (%llu allocated): %llu live in %llu records, %llu dead, %llu in %llu dictionaries\n",
	     (unsigned long long)p->packs, (unsigned long long)p->length, (unsigned long long)p->allocated,
	     (unsigned long long)p->live, (unsigned long long)p->live_records, (unsigned long long)p->dead,
	     (unsigned long long)p->dict_bytes, (unsigned long long)p->dicts);
	if (p->nursery_packs)
		emit(&o, "  of which nursery: %llu files, %llu bytes (%llu allocated): %llu live in %llu records waiting for their final record\n",
		     (unsigned long long)p->nursery_packs, (unsigned long long)p->nursery_length,
		     (unsigned long long)p->nursery_allocated, (unsigned long long)p->nursery_live,
		     (unsigned long long)p->nursery_live_records);
	if (p->kept)
		emit(&o, "kept for deltas:  %llu bytes of %llu pages no file names any more (in live)\n",
		     (unsigned long long)p->kept_bytes, (unsigned long long)p->kept);
	const struct blob_delta_usage *du = &s->deltas;
	emit(&o, "deltas:           %llu pages stored as deltas against a similar page, their records %s; "
		 "of them %llu chunked (pages over a chunk), %s\n",
	     (unsigned long long)du->deltas, size_str(du->delta_bytes, human, b1), (unsigned long long)du->chunked,
	     size_str(du->chunked_bytes, human, b2));
	const struct blob_compact_stats *k = &s->compact;
	emit(&o, "compaction:       %llu packs compacted, %llu removed: %llu records (%s) moved, %s given back, %llu damaged records left\n",
	     (unsigned long long)k->packs_compacted, (unsigned long long)k->packs_removed,
	     (unsigned long long)k->records_moved, size_str(k->bytes_moved, human, b1),
	     size_str(k->bytes_freed, human, b2), (unsigned long long)k->damaged);
	if (k->records_cold)
		emit(&o, "encoded again:    %llu of the records moved, %s smaller; %llu whole pages made deltas by a window\n",
		     (unsigned long long)k->records_cold, size_str(k->bytes_cold_saved, human, b1),
		     (unsigned long long)k->records_window);
	const struct stats_daemon *dm = &s->daemon;
	if (dm->running)
		emit(&o, "daemon:           %llu inodes held (%llu with a file state), %s staged in memory; signer: %llu queued, signed %llu by its thread, %llu by writers past the bound, %llu by drains; delta step: %llu queued, %llu dropped, %llu candidates examined for %llu pages, %llu pages done by writers while the nursery was behind, %llu pages sealed past its bound; heap given back %llu times\n",
		     (unsigned long long)dm->inodes_held, (unsigned long long)dm->file_states,
		     size_str(dm->staged_bytes, human, b1),
		     (unsigned long long)dm->sign_queue, (unsigned long long)dm->signed_by_thread,
		     (unsigned long long)dm->signed_by_writers, (unsigned long long)dm->signed_by_drain,
		     (unsigned long long)dm->delta_queue, (unsigned long long)dm->delta_dropped,
		     (unsigned long long)dm->delta_candidates, (unsigned long long)dm->delta_tried,
		     (unsigned long long)dm->delta_by_writers, (unsigned long long)dm->nursery_bypassed,
		     (unsigned long long)dm->heap_give_backs);
	return o.len;
}

size_t stats_format(const struct pd_stats *s, enum stats_format f, char *buf, size_t size)
{
	return f == STATS_JSON ? stats_json(s, buf, size) : stats_text(s, f == STATS_HUMAN, buf, size);
}

size_t stats_tree_format(const char *path, const struct stats_tree *t, enum stats_format f, char *buf,
			 size_t size)
{
	struct out o = { buf, size, 0 };
	double saved = t->logical_bytes ? 1.0 - (double)t->unique_bytes / (double)t->logical_bytes : 0;
	if (f == STATS_JSON) {
		emit(&o, "{\"subtree\":\"");
		for (const char *p = path; *p; p++)
			emit(&o, *p == '"' || *p == '\\' ? "\\%c" : (unsigned char)*p < 32 ? "\\u%04x" : "%c", *p);
		emit(&o, "\",\"files\":%llu,\"dirs\":%llu,\"others\":%llu,\"logical_bytes\":%llu,\"blobs\":%llu,"
			 "\"unique_bytes\":%llu,\"saved_ratio\":%.6f,\"own_blobs\":%llu,\"own_bytes\":%llu}\n",
		     (unsigned long long)t->files, (unsigned long long)t->dirs, (unsigned long long)t->others,
		     (unsigned long long)t->logical_bytes, (unsigned long long)t->blobs,
		     (unsigned long long)t->unique_bytes, saved, (unsigned long long)t->own_blobs,
		     (unsigned long long)t->own_bytes);
		return o.len;
	}
	bool human = f == STATS_HUMAN;
	char b1[32];
	emit(&o, "subtree:          %s\n", path);
	emit(&o, "files:            %llu (in %llu directories; %llu other entries)\n", (unsigned long long)t->files,
	     (unsigned long long)t->dirs, (unsigned long long)t->others);
	emit(&o, "logical bytes:    %s\n", size_str(t->logical_bytes, human, b1));
	emit(&o, "unique bytes:     %s in %llu distinct contents: %.2f%% fewer than logical\n",
	     size_str(t->unique_bytes, human, b1), (unsigned long long)t->blobs, 100 * saved);
	emit(&o, "held only here:   %s in %llu contents (what removing the subtree frees)\n",
	     size_str(t->own_bytes, human, b1), (unsigned long long)t->own_blobs);
	return o.len;
}
