/*
 * The data suites' scratch directory (tests/data_rig.c): one per test
 * process, made by the suite's init and removed with everything in it
 * (subdirectories too) by its fini.
 */
#ifndef ADAG_TESTS_DATA_RIG_H
#define ADAG_TESTS_DATA_RIG_H

/* The directory ("" before data_dir_make). */
extern char data_dir[64];

/* Makes it (asserts), and removes it with its files. */
void data_dir_make(void);
void data_dir_remove(void);

/* "<data_dir>/<name>" in one of 8 rotating buffers. */
const char *data_path(const char *name);

#endif
