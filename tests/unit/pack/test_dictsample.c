/* test_dictsample.c - the dictionaries' training sample kept by reference
 * (blob.h): the reservoir keeps a bounded, uniform sample of the pages
 * offered; the trainer reads the sampled pages back from the store
 * whatever their record (a nursery record, a final one, a delta, a page
 * cut to the sample's cap), skips a page freed or damaged since it was
 * sampled, keeps to its byte budget, and trains on what it read. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "archive/archive.h"
#include "archive/ns.h"
#include "blob/blob.h"
#include "helpers.h"
#include "near/ndelta.h"
#include "near/sigq.h"

/* A made-up identity whose size field numbers it. */
static struct fp fp_numbered(uint64_t i)
{
	struct fp f = { .size = i };
	memcpy(f.md5, &i, sizeof i);
	return f;
}

/* After 100,000 offers the reservoir holds exactly its cap, and each
 * tenth of the stream about a tenth of it (a ring of the latest pages
 * would hold the last tenth only; the first pages alone, the first). */
static void test_reservoir_bounded_and_uniform(void **state)
{
	(void)state;
	enum { CAP = 512, OFFERS = 100000, TENTHS = 10 };
	for (uint64_t seed = 1; seed <= 3; seed++) {
		struct blob_dict_reservoir r = { .cap = CAP, .rng = seed };
		for (uint64_t i = 0; i < OFFERS; i++) {
			struct fp f = fp_numbered(i);
			int kept = blob_dict_reservoir_offer(&r, &f);
			assert_true(kept == 0 || kept == 1);
			if (i < CAP)
				assert_int_equal(kept, 1); /* free slots first */
			assert_true(r.filled <= CAP);
		}
		assert_int_equal(r.filled, CAP);
		assert_int_equal(r.seen, OFFERS);
		unsigned tenth[TENTHS] = { 0 };
		for (unsigned i = 0; i < r.filled; i++)
			tenth[r.keys[i].size * TENTHS / OFFERS]++;
		/* 51.2 expected in each; a binomial's 5 sigma is 34 */
		for (unsigned t = 0; t < TENTHS; t++)
			assert_true(tenth[t] >= 17 && tenth[t] <= 86);
		blob_dict_reservoir_clear(&r);
		assert_int_equal(r.filled, 0);
		assert_int_equal(r.seen, 0);
		free(r.keys);
	}
}

static struct store_opts nursery_opts(void)
{
	return (struct store_opts){ .nursery = true, .no_sign_thread = true, .no_delta_thread = true };
}

/* A copy of page with a few words rewritten. */
static char *edited(const char *page)
{
	char *p = strdup(page);
	size_t len = strlen(p);
	for (unsigned i = 0; i < 3; i++)
		memcpy(p + len / 3 + i * 131, "EDITED", 6);
	return p;
}

enum { P_NURSERY, P_WHOLE, P_DELTA, P_BIG, P_FREED, P_DAMAGED, NP };

static bool record_is_delta(struct store *st, uint64_t ino)
{
	struct fprec r = th_fprec_of(st, ino);
	struct blobkey base;
	int rc = blob_delta_base(st, &r, &base);
	assert_true(rc >= 0);
	return rc == 1;
}

/* Every piece of s is the start of the page it says it is. */
static void assert_pieces(const struct blob_dict_sample *s, char *const page[], size_t per_page)
{
	size_t off = 0;
	for (unsigned i = 0; i < s->n; i++) {
		const char *want = page[s->from[i]];
		size_t len = strlen(want), take = len < per_page ? len : per_page;
		assert_int_equal(s->sizes[i], take);
		assert_memory_equal(s->bytes + off, want, take);
		off += take;
	}
	assert_int_equal(off, s->total);
}

static void test_sample_read_back_from_every_record(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store_opts o = nursery_opts();
	struct store *st = th_store(dir, NULL, &o);
	char *page[NP];
	uint64_t ino[NP];
	page[P_NURSERY] = th_page(1, 900, "");
	page[P_WHOLE] = th_page(2, 900, "");
	page[P_DELTA] = edited(page[P_WHOLE]);
	page[P_BIG] = th_page(3, 50000, ""); /* over a chunk (256 KiB) */
	page[P_FREED] = th_page(4, 900, "");
	page[P_DAMAGED] = th_page(5, 900, "");
	static const char *const name[NP] = { "n.html", "w.html", "d.html", "big.html", "f.html", "x.html" };
	for (int i = 0; i < NP; i++)
		ino[i] = th_put_page(st, PD_ROOT_INO, name[i], page[i]);
	assert_true(strlen(page[P_BIG]) > (1u << PACK_DEFAULT_CHUNK_SHIFT));
	assert_int_equal(sigq_drain(st), 0);
	/* the delta step: w.html out of the nursery whole, d.html a delta on it */
	struct blobkey kw = th_blob_of(st, ino[P_WHOLE]), kd = th_blob_of(st, ino[P_DELTA]);
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &kw, NULL), 0);
	assert_int_equal(ndelta_page(st, NDELTA_RULE_RESEMBLANCE, &kd, NULL), 0);
	struct fprec rw = th_fprec_of(st, ino[P_WHOLE]);
	assert_false(blob_in_nursery(st, &rw));
	assert_false(record_is_delta(st, ino[P_WHOLE]));
	assert_true(record_is_delta(st, ino[P_DELTA]));
	struct fprec rn = th_fprec_of(st, ino[P_NURSERY]);
	assert_true(blob_in_nursery(st, &rn));
	/* f.html freed, x.html damaged, after they were sampled */
	uint64_t gone_ino;
	bool gone;
	assert_int_equal(ns_unlink(st, PD_ROOT_INO, name[P_FREED], &gone_ino, &gone), 0);
	assert_true(gone);
	struct fprec rx = th_fprec_of(st, ino[P_DAMAGED]);
	th_damage_record(st, &rx, 16, 8);

	struct fp fps[NP];
	for (int i = 0; i < NP; i++)
		assert_int_equal(fp_of_buf(page[i], strlen(page[i]), &fps[i]), 0);
	enum { PER_PAGE = 16 * 1024 };
	struct blob_dict_sample s;
	assert_int_equal(blob_dict_sample_read(st, fps, NP, PER_PAGE, SIZE_MAX, 7, NULL, NULL, &s), 0);
	assert_int_equal(s.n, NP - 2);
	assert_int_equal(s.skipped, 2);
	bool read[NP] = { false };
	for (unsigned i = 0; i < s.n; i++)
		read[s.from[i]] = true;
	assert_true(read[P_NURSERY] && read[P_WHOLE] && read[P_DELTA] && read[P_BIG]);
	assert_false(read[P_FREED] || read[P_DAMAGED]);
	assert_pieces(&s, page, PER_PAGE);
	size_t all = s.total;
	blob_dict_sample_free(&s);

	/* a budget under what the pages hold: fewer pages, within it */
	assert_int_equal(blob_dict_sample_read(st, fps, NP, PER_PAGE, all - 1, 7, NULL, NULL, &s), 0);
	assert_true(s.n < NP - 2);
	assert_true(s.total <= all - 1);
	assert_pieces(&s, page, PER_PAGE);
	blob_dict_sample_free(&s);

	for (int i = 0; i < NP; i++)
		free(page[i]);
	store_abandon(st); /* a record is damaged: no fsck */
	th_rmdir(dir);
}

/* The first training reads its BLOB_DICT_FIRST pages back from the store
 * and skips those freed meanwhile; the dictionary's size follows the
 * sample's; the reservoir starts again after it. */
static void test_training_reads_pages_back(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	enum { FREED = 100 };
	char name[32];
	for (int i = 0; i < BLOB_DICT_FIRST; i++) {
		char *p = th_page((uint64_t)i + 100, 600, "<div class=\"nav\">site navigation, the same on every page</div>");
		snprintf(name, sizeof name, "p%04d.html", i);
		th_put_page(st, PD_ROOT_INO, name, p);
		free(p);
		if (i == BLOB_DICT_FIRST - 2) { /* sampled, then freed before the training */
			for (int j = 0; j < FREED; j++) {
				uint64_t gone_ino;
				bool gone;
				snprintf(name, sizeof name, "p%04d.html", j);
				assert_int_equal(ns_unlink(st, PD_ROOT_INO, name, &gone_ino, &gone), 0);
			}
		}
	}
	blob_dict_settle(st);
	struct blob_dict_info info;
	blob_dict_info(st, &info);
	assert_int_equal(info.trained, 1);
	assert_int_equal(info.failed, 0);
	/* the last page may still be on its way in when the trainer reads it */
	assert_true(info.last_skipped >= FREED && info.last_skipped <= FREED + 1);
	assert_int_equal(info.last_read + info.last_skipped, BLOB_DICT_FIRST);
	assert_true(info.last_sample_bytes > 0 && info.last_sample_bytes <= BLOB_DICT_SAMPLE_BYTES);
	assert_true(info.last_dict_bytes > 0 && info.last_dict_bytes <= blob_dict_size_for(info.last_sample_bytes));
	assert_int_equal(info.reservoir, 0); /* the next sample starts empty */
	const struct pack_dict *d = blob_dict_current(st);
	assert_non_null(d);
	size_t len;
	const char *bytes = pack_dict_bytes(d, &len);
	assert_int_equal(len, info.last_dict_bytes);
	assert_non_null(memmem(bytes, len, "site navigation", 15));
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* A dictionary a newer one replaced keeps only what a decode needs:
 * zstd's compression forms (MiBs for a large dictionary) go, and come
 * back if it ever encodes again; pages of both still read. */
static void test_replaced_dictionary_frees_its_encoders(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	struct store *st = th_store(dir, NULL, NULL);
	char name[32];
	uint64_t first_ino = 0;
	char *first_page = NULL;
	int i = 0;
	for (;; i++) {
		blob_dict_settle(st);
		const struct pack_dict *cur = blob_dict_current(st);
		if (cur && pack_dict_id(cur) == 2)
			break;
		assert_true(i < 8 * BLOB_DICT_FIRST);
		char *p = th_page((uint64_t)i + 7000, 400, "<div class=\"nav\">site navigation</div>");
		snprintf(name, sizeof name, "p%05d.html", i);
		uint64_t ino = th_put_page(st, PD_ROOT_INO, name, p);
		if (cur && !first_page) { /* encoded with the first dictionary */
			first_page = p;
			first_ino = ino;
		} else {
			free(p);
		}
	}
	assert_non_null(first_page);
	assert_int_equal(th_fprec_of(st, first_ino).pack_dict, 1);
	char *p = th_page(99999, 400, "<div class=\"nav\">site navigation</div>");
	uint64_t ino = th_put_page(st, PD_ROOT_INO, "last.html", p); /* encoded with the second */
	assert_int_equal(th_fprec_of(st, ino).pack_dict, 2);
	const struct pack_dict *old = blob_dict_get(st, 1), *cur = blob_dict_current(st);
	size_t old_len, cur_len;
	pack_dict_bytes(old, &old_len);
	pack_dict_bytes(cur, &cur_len);
	/* the old one: its bytes and a DDict (about its size again) */
	assert_true(pack_dict_memory(old) < 3 * old_len);
	/* the current one: a CDict too (level 3: about 5 times its size) */
	assert_true(pack_dict_memory(cur) > 3 * cur_len);
	struct blob_dict_info info;
	blob_dict_info(st, &info);
	assert_int_equal(info.loaded, 2);
	assert_int_equal(info.loaded_bytes, pack_dict_memory(old) + pack_dict_memory(cur));
	th_read_back(st, first_ino, first_page);
	th_read_back(st, ino, p);
	free(p);
	free(first_page);
	assert_int_equal(store_close(st), 0);
	th_assert_fsck_clean(th_store_dir(dir));
	th_rmdir(dir);
}

/* The dictionary's size: a share of the sample, within its bounds. */
static void test_dictionary_size_rule(void **state)
{
	(void)state;
	assert_int_equal(blob_dict_size_for(0), BLOB_DICT_MIN_BYTES);
	assert_int_equal(blob_dict_size_for(BLOB_DICT_MIN_BYTES), BLOB_DICT_MIN_BYTES);
	size_t mid = (size_t)(BLOB_DICT_MIN_BYTES + BLOB_DICT_MAX_BYTES) / 2;
	assert_int_equal(blob_dict_size_for(mid * BLOB_DICT_RATIO), mid);
	assert_int_equal(blob_dict_size_for((size_t)BLOB_DICT_SAMPLE_BYTES * 4), BLOB_DICT_MAX_BYTES);
	assert_true(blob_dict_size_for(BLOB_DICT_SAMPLE_BYTES) <= BLOB_DICT_MAX_BYTES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reservoir_bounded_and_uniform),
		cmocka_unit_test(test_sample_read_back_from_every_record),
		cmocka_unit_test(test_training_reads_pages_back),
		cmocka_unit_test(test_replaced_dictionary_frees_its_encoders),
		cmocka_unit_test(test_dictionary_size_rule),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
