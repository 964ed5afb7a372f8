/* examples/llm/safetensors.h: the model's weights in a .safetensors file.
 *
 * Format: an 8-byte little-endian header length N, N bytes of JSON (padded
 * with spaces to a multiple of 8), then the tensors' data:
 *   {"tok_emb": {"dtype": "F32", "shape": [256, 256], "data_offsets": [b, e]},
 *    ..., "__metadata__": {"vocab": "256", "d_model": "256", ...}}
 * Offsets are relative to the data, which follows the header. The writer
 * puts the tensors in llm_tensor order, contiguous. The loader takes the
 * config from __metadata__ and checks everything: header length bounds, the
 * JSON, every tensor present once with dtype F32 and the config's shape,
 * offsets in bounds, non-overlapping and covering the data exactly (the file
 * size). Floats are stored little-endian (the host's order on the machines
 * this runs on; the loader refuses a big-endian host). */
#ifndef LLM_SAFETENSORS_H
#define LLM_SAFETENSORS_H

#include "model.h"

/* Writes m to path (replaced). -1 with llm_error() naming the file. */
int llm_st_save(const llm_model_t *m, const char *path);
/* Loads path into m (allocated; llm_model_free frees). -1 with llm_error()
 * naming the file and the tensor at fault; m is then empty. */
int llm_st_load(llm_model_t *m, const char *path);

#endif
