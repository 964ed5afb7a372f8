/*
 * The data suites' scratch directory (tests/data_rig.c): one per test
 * process, made by the suite's init and removed with everything in it
 * (subdirectories too) by its fini.
 */
#ifndef ADAG_TESTS_DATA_RIG_H
#define ADAG_TESTS_DATA_RIG_H

#include <stddef.h>
#include <stdint.h>

/* The directory ("" before data_dir_make). */
extern char data_dir[64];

/* Makes it (asserts), and removes it with its files. */
void data_dir_make(void);
void data_dir_remove(void);

/* "<data_dir>/<name>" in one of 8 rotating buffers. */
const char *data_path(const char *name);

/* Writes n bytes at p to "<data_dir>/<name>" (asserts). */
void data_write_file(const char *name, const void *p, size_t n);

/* A .npy v1 file "<data_dir>/<name>" of the given descr ('<f4', '<f8',
 * ...) and shape (ndim 1..4) whose data is the `size` bytes at data. */
void data_write_npy(const char *name, const char *descr, unsigned ndim, const unsigned *shape,
                    const void *data, size_t size);

/* Encodes the w x h RGB pixels at px (w * h * 3 bytes) with libjpeg-turbo
 * into "<data_dir>/<name>": quality 1..100, chroma subsampling TJSAMP_*,
 * TurboJPEG flags (TJFLAG_PROGRESSIVE, ...). Asserts. */
void data_write_jpeg(const char *name, const unsigned char *px, unsigned w, unsigned h,
                     int subsamp, int quality, int flags);

/* A Megatron token dataset "<name>.bin" + "<name>.idx" (name relative to
 * data_dir) of int32 tokens: documents of the given sizes, token values
 * counting up from 0 across them. Returns the tokens. */
uint64_t data_write_tokens(const char *name, const uint32_t *sizes, unsigned ndocs);

#endif
