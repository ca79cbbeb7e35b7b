/* warccmd.h - `pagededup export` and `pagededup import` (tools/warccmd.c). */
#ifndef PD_WARCCMD_H
#define PD_WARCCMD_H

/* argv[0] is the command's name; each returns the exit status. */
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);

#endif
