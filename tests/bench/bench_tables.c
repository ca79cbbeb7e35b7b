/* bench_tables.c - what each LMDB table of a store costs, with LMDB's
 * overheads.
 *
 *   bench_tables META_DIR [FILES [PAGES]]
 *
 * For each named table of the environment in META_DIR (a store's meta/,
 * opened read-only): its rows, the bytes of its keys and of its values, and
 * the pages it takes when written alone, in key order with MDB_APPEND, into
 * an empty scratch environment (as `pagededup compact` writes it). Those
 * pages include a dup-sorted table's sub-databases, which mdb_stat -a does
 * not count, so the figure is the table's whole share of a compacted file;
 * what the pages hold beyond the keys and values is LMDB's node headers,
 * page headers and slack, given per row. FILES and PAGES (the files and
 * distinct pages the store holds) give per-file and per-page columns.
 * Last, nearfeat's rows by stored form (whole sets, differences).
 */
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call)                                                                   \
	do {                                                                          \
		int rc_ = (call);                                                     \
		if (rc_) {                                                            \
			fprintf(stderr, "bench_tables: %s: %s\n", #call, mdb_strerror(rc_)); \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

struct tally {
	size_t rows, keys, vals, pages;
};

static size_t env_pages(MDB_env *env)
{
	MDB_envinfo info;
	MDB_stat main_st;
	MDB_txn *txn;
	CHECK(mdb_env_info(env, &info));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CHECK(mdb_stat(txn, 1, &main_st)); /* MAIN_DBI: the names of the tables */
	mdb_txn_abort(txn);
	/* pages 0 and 1 are the meta pages; one write transaction frees none */
	return info.me_last_pgno + 1 - 2 - main_st.ms_branch_pages - main_st.ms_leaf_pages -
	       main_st.ms_overflow_pages;
}

static struct tally table_alone(MDB_txn *src, const char *name, const char *scratch)
{
	struct tally t = {0};
	MDB_dbi sdbi, ddbi;
	unsigned flags;
	CHECK(mdb_dbi_open(src, name, 0, &sdbi));
	CHECK(mdb_dbi_flags(src, sdbi, &flags));
	MDB_env *env;
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_set_mapsize(env, (size_t)64 << 30));
	CHECK(mdb_env_set_maxdbs(env, 4));
	CHECK(mdb_env_open(env, scratch, MDB_NOSYNC | MDB_WRITEMAP, 0644));
	MDB_txn *txn;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, name, flags | MDB_CREATE, &ddbi));
	MDB_cursor *in, *out;
	CHECK(mdb_cursor_open(src, sdbi, &in));
	CHECK(mdb_cursor_open(txn, ddbi, &out));
	MDB_val k, v, last = {0, NULL};
	int rc;
	for (rc = mdb_cursor_get(in, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(in, &k, &v, MDB_NEXT)) {
		unsigned put = MDB_APPEND;
		if ((flags & MDB_DUPSORT) && last.mv_data && last.mv_size == k.mv_size &&
		    memcmp(last.mv_data, k.mv_data, k.mv_size) == 0)
			put = MDB_APPENDDUP;
		CHECK(mdb_cursor_put(out, &k, &v, put));
		t.rows++;
		t.vals += v.mv_size;
		if (put == MDB_APPEND)
			t.keys += k.mv_size;
		last = k;
	}
	if (rc != MDB_NOTFOUND)
		CHECK(rc);
	mdb_cursor_close(in);
	mdb_cursor_close(out);
	CHECK(mdb_txn_commit(txn));
	t.pages = env_pages(env);
	mdb_env_close(env);
	return t;
}

/* nearfeat's rows by their stored form (the first byte of the value:
 * nearset.h's format; 5, a difference from a base's set): rows and mean
 * value bytes of each. */
static void nearfeat_forms(MDB_txn *txn)
{
	MDB_dbi dbi;
	if (mdb_dbi_open(txn, "nearfeat", 0, &dbi))
		return;
	size_t rows[256] = { 0 }, bytes[256] = { 0 };
	MDB_cursor *c;
	CHECK(mdb_cursor_open(txn, dbi, &c));
	MDB_val k, v;
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		unsigned f = v.mv_size ? ((const unsigned char *)v.mv_data)[0] : 0;
		rows[f]++;
		bytes[f] += v.mv_size;
	}
	mdb_cursor_close(c);
	printf("nearfeat forms:");
	for (unsigned f = 0; f < 256; f++)
		if (rows[f])
			printf(" format %u: %zu rows, %.1f value B/row;", f, rows[f], (double)bytes[f] / (double)rows[f]);
	printf("\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_tables META_DIR [FILES [PAGES]]\n");
		return 2;
	}
	double files = argc > 2 ? atof(argv[2]) : 1, pages = argc > 3 ? atof(argv[3]) : 1;
	char scratch[] = "/tmp/pd-tables.XXXXXX";
	if (!mkdtemp(scratch)) {
		perror("bench_tables: mkdtemp");
		return 1;
	}
	MDB_env *env;
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_set_maxdbs(env, 64));
	CHECK(mdb_env_open(env, argv[1], MDB_RDONLY, 0644));
	MDB_txn *txn;
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	MDB_dbi main_dbi;
	CHECK(mdb_dbi_open(txn, NULL, 0, &main_dbi));
	MDB_cursor *c;
	CHECK(mdb_cursor_open(txn, main_dbi, &c));
	MDB_val k, v;
	size_t total = 0;
	printf("%-13s %9s %10s %11s %7s %11s %7s %7s %7s %7s %9s\n", "table", "rows", "key B", "value B", "pages",
	       "bytes", "B/row", "B/file", "B/page", "kv/row", "ovh/row");
	for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		char name[256];
		if (k.mv_size >= sizeof name)
			continue;
		memcpy(name, k.mv_data, k.mv_size);
		name[k.mv_size] = 0;
		char path[512];
		snprintf(path, sizeof path, "%s/data.mdb", scratch);
		unlink(path);
		snprintf(path, sizeof path, "%s/lock.mdb", scratch);
		unlink(path);
		struct tally t = table_alone(txn, name, scratch);
		double b = (double)t.pages * 4096, rows = t.rows ? (double)t.rows : 1;
		total += t.pages;
		printf("%-13s %9zu %10zu %11zu %7zu %11.0f %7.1f %7.1f %7.1f %7.1f %9.1f\n", name, t.rows, t.keys,
		       t.vals, t.pages, b, b / rows, b / files, b / pages, (double)(t.keys + t.vals) / rows,
		       (b - (double)t.keys - (double)t.vals) / rows);
	}
	printf("total: %zu pages, %zu bytes, %.1f B/file, %.1f B/page\n", total, total * 4096,
	       (double)total * 4096 / files, (double)total * 4096 / pages);
	mdb_cursor_close(c);
	nearfeat_forms(txn);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	char path[512];
	snprintf(path, sizeof path, "%s/data.mdb", scratch);
	unlink(path);
	snprintf(path, sizeof path, "%s/lock.mdb", scratch);
	unlink(path);
	rmdir(scratch);
	return 0;
}
