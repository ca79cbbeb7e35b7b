/* warccmd.h - `pagededup export` (tools/warc_export.c) and `pagededup import`
 * (tools/warc_import.c). */
#ifndef PD_WARCCMD_H
#define PD_WARCCMD_H

/* argv[0] is the command's name; each returns the exit status. */
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);

#endif
