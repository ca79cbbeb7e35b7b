/* urlseen.h - `pagededup urlseen`: print the URLs of a crawl list that were
 * not seen before, and remember them in a filter file (tools/urlseen.c). */
#ifndef PD_URLSEEN_H
#define PD_URLSEEN_H

/* argv[0] is "urlseen"; returns the exit status. */
int cmd_urlseen(int argc, char **argv);

#endif
