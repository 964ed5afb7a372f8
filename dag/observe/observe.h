/*
 * dag/observe/: what a compiled DAG and its actors say about themselves,
 * read without disturbing them: statistics snapshots (stats.c) and their
 * text (stats_print.c), the trace export (trace_export.c), DOT
 * (dot.c) and the live view (live_view.c), a thread that writes the
 * runtime's figures to a socket. Each asks every actor at once through
 * dag/proc/ (adag__actors_ask) and reads the driver's part of the DAG
 * under its lock; nothing below calls up here. Below: dag/driver/ and
 * everything under it.
 */
#ifndef ADAG_DAG_OBSERVE_H
#define ADAG_DAG_OBSERVE_H

#include <adag.h>
#include <adag/stats.h>

/* A snapshot's DAG counts and name (for stats_print.c). */
const adag_dag_stats_t *adag__stats_counts(adag_stats_h s);
const char *adag__stats_dag_name(adag_stats_h s);

#endif
