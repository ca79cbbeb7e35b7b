/* compactcmd.h - `pagededup compact` (tools/compactcmd.c). */
#ifndef PD_COMPACTCMD_H
#define PD_COMPACTCMD_H

/* argv[0] is the command's name; returns the exit status. */
int cmd_compact(int argc, char **argv);

#endif
