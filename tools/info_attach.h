#ifndef ADAG_TOOLS_INFO_ATTACH_H
#define ADAG_TOOLS_INFO_ATTACH_H

/* `adag-info attach [PID | SOCKET-PATH] [--interval SECONDS] [--count N]`:
 * argv after "attach". Shows a running driver's live view (common/live.h)
 * every interval. Returns the exit status: 0 done (--count views shown, or
 * the driver closed the connection after one view at least), 1 an error or
 * no driver to attach to, 2 a usage error or several drivers to choose from. */
int adag__info_attach(int argc, char **argv);

#endif
