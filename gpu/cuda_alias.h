/*
 * The cuda backend's handles that this process exported, imported here
 * again (gpu/cuda_alias.c): aliases of the exporter's memory and events,
 * since CUDA refuses to open an IPC handle in the process that made it.
 * gpu/cuda.c and gpu/cuda_stream.c call these at the edges of their
 * export, import, free and destroy ops. Only with the toolkit's headers.
 */
#ifndef ADAG_GPU_CUDA_ALIAS_H
#define ADAG_GPU_CUDA_ALIAS_H

#ifdef ADAG_HAVE_CUDA

#include "gpu/cuda_impl.h"

/* After a successful export of memory (ptr, size) or of an event (ev): the
 * object is entered in the process's table and h gets a trailer after its
 * ipc_len bytes of CUDA IPC handle (which stay as they are for other
 * processes) naming this process and the entry. */
adag_status_t adag__cuda_alias_export_mem(cuda_dev_t *d, adag_dev_handle_t *h, size_t ipc_len,
                                          void *ptr, size_t size);
adag_status_t adag__cuda_alias_export_event(cuda_dev_t *d, adag_dev_handle_t *h, size_t ipc_len,
                                            cudaEvent_t ev);

/* At import: 1 if h is a handle of this process (*st then says how its
 * alias went: *mem / *out set on ADAG_OK; h's fds taken); 0 if it is
 * another process's, with the trailer taken off so that h is the plain
 * IPC handle of ipc_len bytes the caller opens. */
int adag__cuda_alias_import_mem(cuda_dev_t *d, adag_dev_handle_t *h, size_t ipc_len,
                                adag_dev_mem_t *mem, adag_status_t *st);
int adag__cuda_alias_import_event(cuda_dev_t *d, adag_dev_handle_t *h, size_t ipc_len,
                                  adag_dev_event_t **out, adag_status_t *st);

/* The owner's mem_free of exported memory, mem_unimport of an alias, and
 * event_destroy of an exported event or an alias: 1 if it was one (then
 * done: the count dropped, the object is freed with its last holder), 0
 * if the caller frees as usual. */
int adag__cuda_alias_mem_free(cuda_dev_t *d, adag_dev_mem_t *mem);
int adag__cuda_alias_mem_unimport(cuda_dev_t *d, adag_dev_mem_t *mem);
int adag__cuda_alias_event_destroy(adag_dev_event_t *ev);

#endif /* ADAG_HAVE_CUDA */
#endif
