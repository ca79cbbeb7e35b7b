/* cli.h - the habits every `pagededup` command shares (tools/cli.c), so
 * that a command added in a file of its own behaves as the others do:
 *
 *  - a usage error is one line naming the command, then "Try 'pagededup
 *    COMMAND --help' ...", and the command's usage exit status
 *    (cli_usage_error); getopt's own messages are replaced by that line
 *    (cli_getopt), so an error is printed once;
 *  - `pagededup COMMAND --help` prints the command's help (the table in
 *    pagededup.c does it before the command runs);
 *  - a STORE argument may be the store's directory, the mount point of the
 *    store, or a path inside the mount (cli_store);
 *  - runtime errors are one line "pagededup COMMAND: what happened; what to
 *    do" on stderr (cli_error).
 *
 * Exit statuses (documented in pagededup(1) and the README):
 *   most commands: 0 success, 1 failure, 2 usage error;
 *   near (as grep): 0 neighbours found, 1 none, 2 error or usage error;
 *   fsck: 0 clean, 1 repaired, 2 damage, 3 only crash leftovers (the next
 *         mount or --repair clears them), 4 could not check (or usage).
 */
#ifndef PD_CLI_H
#define PD_CLI_H

#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2

/* One command of the table in pagededup.c. */
struct cli_cmd {
	const char *name;
	int (*run)(int argc, char **argv); /* argv[0] is the name; returns the exit status */
	const char *synopsis;  /* "STORE [--json] [-h]", for the usage lines */
	const char *summary;   /* one line for `pagededup --help` */
	const char *help;      /* the rest of `pagededup NAME --help`; NULL: the
				* command prints its own help for --help */
	int usage_status;      /* exit status of a usage error */
};

/* The command that runs (set by main before it calls run). */
extern const struct cli_cmd *cli_current;

/* "pagededup CMD: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The usage error: the message line, the "Try" line; returns the status. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* getopt_long without getopt's own messages: an unknown option or a
 * missing argument prints the one usage line and returns '?'. */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);
/* A count of bytes, with an optional suffix K, M or G (powers of 1,024):
 * false when s is not one. */
bool cli_parse_bytes(const char *s, uint64_t *out);

/* Where a STORE argument points. */
struct cli_store {
	char dir[PATH_MAX];    /* the store's directory */
	char mnt[PATH_MAX];    /* its mount point, "" when not mounted */
	char inner[PATH_MAX];  /* arg's path inside the mount ("/" for the mount point) */
	char path[PATH_MAX];   /* arg itself inside the mount (mnt + inner); "" if not mounted */
};
/* Resolve arg: a mount point (or a path below one) names its store; a
 * store's directory is looked up in the mount table. Always succeeds. */
void cli_store(const char *arg, struct cli_store *s);
/* Wait for a daemon that still closes the store after its unmount (saying
 * so on stderr). 0: the lock is free; -EBUSY: mounted (message printed). */
int cli_wait_unmounted(const struct cli_store *s);

#endif
