#ifndef ADAG_TOOLS_INFO_TOPO_H
#define ADAG_TOOLS_INFO_TOPO_H

/* `adag-info topo [FILE.xml] [--xml OUT.xml]`: argv after "topo". */
int adag__info_topo(int argc, char **argv);

#endif
