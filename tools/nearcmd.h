/* nearcmd.h - `pagededup simhash` and `pagededup near` (tools/nearcmd.c). */
#ifndef PD_NEARCMD_H
#define PD_NEARCMD_H

/* argv[0] is the command's name; each returns the exit status. */
int cmd_simhash(int argc, char **argv);
int cmd_near(int argc, char **argv);

#endif
