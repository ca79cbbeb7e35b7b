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
	const struct cbf_geometry *g = cbf_geometry(st->filter);
	s->filter_bytes = cbf_bytes(st->filter);
	s->filter_counters = g->nlines * CBF_LINE_COUNTERS;
	s->filter_k = g->k;
	s->filter_lines = g->lines_per_key;
	cbf_fill(st->filter, &s->filter_nonzero, &s->filter_saturated);
	s->filter_fill = s->filter_counters ? (double)s->filter_nonzero / (double)s->filter_counters : 0;
	s->filter_fpr_estimate = cbf_estimated_fpr(st->filter);
	s->filter_fpr_design = cbf_theoretical_fpr(g, (uint64_t)(s->c.blobs > 0 ? s->c.blobs : 0));
	MDB_envinfo info;
	MDB_stat mst;
	mdb_env_info(st->env, &info);
	mdb_env_stat(st->env, &mst);
	s->lmdb_bytes = (uint64_t)(info.me_last_pgno + 1) * mst.ms_psize;
	s->lmdb_mapsize = info.me_mapsize;
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
	emit(&o, "},\"filter\":{\"bytes\":%llu,\"counters\":%llu,\"k\":%u,\"lines_per_key\":%u,"
		 "\"nonzero\":%llu,\"saturated\":%llu,\"fill\":%.6f,\"fpr_estimate\":%.3g,"
		 "\"fpr_design\":%.3g},\"lmdb_bytes\":%llu,\"lmdb_mapsize\":%llu}",
	     (unsigned long long)s->filter_bytes, (unsigned long long)s->filter_counters, s->filter_k,
	     s->filter_lines, (unsigned long long)s->filter_nonzero,
	     (unsigned long long)s->filter_saturated, s->filter_fill, s->filter_fpr_estimate,
	     s->filter_fpr_design, (unsigned long long)s->lmdb_bytes,
	     (unsigned long long)s->lmdb_mapsize);
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
	emit(&o, "\nfilter:           %llu bytes, k=%u over %u line(s), fill %.4f, %llu saturated\n",
	     (unsigned long long)s->filter_bytes, s->filter_k, s->filter_lines, s->filter_fill,
	     (unsigned long long)s->filter_saturated);
	emit(&o, "filter fpr:       %.3g estimated from fill, %.3g by design at this load\n",
	     s->filter_fpr_estimate, s->filter_fpr_design);
	emit(&o, "lmdb:             %llu bytes used, map %llu\n", (unsigned long long)s->lmdb_bytes,
	     (unsigned long long)s->lmdb_mapsize);
	return o.len;
}
