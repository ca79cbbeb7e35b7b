/* stats.c - store statistics from the running totals (kept exact in the
 * meta table by every transaction) and a scan of the filter. */
#include "stats.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

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
	MDB_envinfo info;
	MDB_stat mst;
	mdb_env_info(st->env, &info);
	mdb_env_stat(st->env, &mst);
	s->lmdb_bytes = (uint64_t)(info.me_last_pgno + 1) * mst.ms_psize;
	s->lmdb_mapsize = info.me_mapsize;
	blob_pack_usage(st, &s->packs);
	return 0;
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

size_t stats_json(const struct pd_stats *s, char *buf, size_t size)
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
		 "\"lmdb_bytes\":%llu,\"lmdb_mapsize\":%llu,",
	     (unsigned long long)s->filter_bytes, (unsigned long long)s->filter_counters,
	     s->filter_lines, (unsigned long long)s->filter_leaves, s->filter_depth,
	     (unsigned long long)s->filter_keys, s->filter_splitting ? "true" : "false",
	     (unsigned long long)s->filter_nonzero,
	     (unsigned long long)s->filter_saturated, s->filter_fill, s->filter_fpr_estimate,
	     s->filter_fpr_design, s->filter_fpr_worst, s->filter_fpr_target, s->filter_fmax,
	     (unsigned long long)s->lmdb_bytes, (unsigned long long)s->lmdb_mapsize);
	const struct blob_pack_usage *p = &s->packs;
	emit(&o, "\"packs\":{\"files\":%llu,\"bytes\":%llu,\"allocated\":%llu,\"live_bytes\":%llu,"
		 "\"live_records\":%llu,\"dead_bytes\":%llu,\"dictionaries\":%llu,\"dictionary_bytes\":%llu}}",
	     (unsigned long long)p->packs, (unsigned long long)p->length, (unsigned long long)p->allocated,
	     (unsigned long long)p->live, (unsigned long long)p->live_records, (unsigned long long)p->dead,
	     (unsigned long long)p->dicts, (unsigned long long)p->dict_bytes);
	return o.len;
}

size_t stats_text(const struct pd_stats *s, char *buf, size_t size)
{
	struct out o = { buf, size, 0 };
	const struct pd_counters *c = &s->c;
	emit(&o, "pages:            %lld\n", (long long)c->pages);
	emit(&o, "blobs:            %lld\n", (long long)c->blobs);
	emit(&o, "logical bytes:    %lld\n", (long long)c->logical_bytes);
	emit(&o, "stored bytes:     %lld\n", (long long)c->stored_bytes);
	emit(&o, "saved:            %.2f%%\n", 100 * s->saved_ratio);
	emit(&o, "seals:            %lld (%lld duplicates)\n", (long long)c->seals, (long long)c->dup_seals);
	emit(&o, "md5 collisions:   %lld\n", (long long)c->collisions);
	emit(&o, "probes skipped:   %lld of %lld lookups (filter said certainly new)\n",
	     (long long)c->probes_skipped, (long long)(c->probes + c->probes_skipped));
	emit(&o, "false positives:  %lld\n", (long long)c->false_positives);
	emit(&o, "refcounts:       ");
	for (unsigned b = 0; b < PD_HIST_BUCKETS; b++)
		if (c->hist[b])
			emit(&o, " %llu-%llu:%lld", 1ull << b, (2ull << b) - 1, (long long)c->hist[b]);
	emit(&o, "\nfilter:           %llu bytes in %llu leaves (depth %u)%s, %u line(s) per key, fill %.4f, %llu saturated\n",
	     (unsigned long long)s->filter_bytes, (unsigned long long)s->filter_leaves,
	     s->filter_depth, s->filter_splitting ? ", a split in progress" : "", s->filter_lines,
	     s->filter_fill, (unsigned long long)s->filter_saturated);
	emit(&o, "filter fpr:       %.3g estimated from fill, %.3g from the leaves' loads (worst leaf %.3g); target %.3g, bound %.3g\n",
	     s->filter_fpr_estimate, s->filter_fpr_design, s->filter_fpr_worst, s->filter_fpr_target,
	     s->filter_fmax);
	emit(&o, "lmdb:             %llu bytes used, map %llu\n", (unsigned long long)s->lmdb_bytes,
	     (unsigned long long)s->lmdb_mapsize);
	const struct blob_pack_usage *p = &s->packs;
	emit(&o, "packs:            %llu files, %llu bytes (%llu allocated): %llu live in %llu records, %llu dead, %llu in %llu dictionaries\n",
	     (unsigned long long)p->packs, (unsigned long long)p->length, (unsigned long long)p->allocated,
	     (unsigned long long)p->live, (unsigned long long)p->live_records, (unsigned long long)p->dead,
	     (unsigned long long)p->dict_bytes, (unsigned long long)p->dicts);
	return o.len;
}
