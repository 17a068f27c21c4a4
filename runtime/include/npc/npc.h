/* npc's C API: the runtime for callers in other languages.
 *
 * Every function returns 0 on success and a non-zero value on failure; on
 * failure, when `error` is not NULL, a NUL-terminated message (truncated to
 * `error_size` bytes) is written into it. Objects are owned by the caller
 * and freed with the matching *_destroy function.
 *
 * Buffers are dense, row-major, little-endian arrays of the parameter's or
 * output's element type (XLA PrimitiveType numbers, e.g. 11 = F32, 4 = S32,
 * 5 = S64, 1 = PRED with one byte per element).
 *
 * Errors: no C++ exception ever leaves these functions (one thrown inside,
 * e.g. out of memory, becomes a failure with its message). NULL pointers are
 * checked: a NULL `out`, runtime, executable, HLO buffer (with a non-zero
 * size), `inputs`/`outputs` array or buffer is a failure naming the argument;
 * functions without an error channel return their neutral value (0 counts,
 * rank -1, all-zero counters) and the *_destroy functions accept NULL. On
 * failure `*out` is set to NULL.
 *
 * Thread safety: one npc_runtime may be used from several threads at once
 * (its counters are locked; a compile on a miss holds the cache entry's
 * lock, which other lookups of that graph wait for). One npc_executable may
 * be run from several threads at once (each run has its own buffers). An
 * object must not be destroyed while another thread uses it, and an
 * npc_executable stays valid after its runtime is destroyed. The `error`
 * buffer belongs to the caller: do not share one between threads.
 */
#ifndef NPC_NPC_H_
#define NPC_NPC_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct npc_runtime npc_runtime;
typedef struct npc_executable npc_executable;

typedef struct npc_counters {
  int64_t hits;
  int64_t misses;
  int64_t compiles;
  int64_t failed_compiles;
  int64_t extracted;
} npc_counters;

/* A runtime configured from the environment (NEURON_CC_FLAGS,
 * NEURON_COMPILE_CACHE_URL, NEURON_EXTRACT_GRAPHS_ONLY, NPC_BACKEND, ...). */
int npc_runtime_create(npc_runtime** out, char* error, size_t error_size);
void npc_runtime_destroy(npc_runtime* runtime);
void npc_runtime_counters(const npc_runtime* runtime, npc_counters* out);

/* The executable of a serialized HLO module (HloModuleProto, HloProto, gzip
 * or HLO text). `graph_key` may be NULL: npc computes the canonical key. */
int npc_runtime_get_executable(npc_runtime* runtime, const void* hlo_bytes, size_t hlo_size,
                               const char* graph_key, npc_executable** out, char* error, size_t error_size);
void npc_executable_destroy(npc_executable* executable);

size_t npc_executable_num_parameters(const npc_executable* executable);
size_t npc_executable_num_outputs(const npc_executable* executable);
/* Element type and dimensions of parameter/output `index`. `dims` receives at
 * most `max_dims` values; the return value is the rank (or -1 for a bad index). */
int npc_executable_parameter_shape(const npc_executable* executable, size_t index, int* element_type,
                                   int64_t* dims, size_t max_dims);
int npc_executable_output_shape(const npc_executable* executable, size_t index, int* element_type,
                                int64_t* dims, size_t max_dims);

/* Runs: inputs[i] points to parameter i's buffer, outputs[i] to a buffer of
 * output i's size, filled on success. */
int npc_executable_run(const npc_executable* executable, const void* const* inputs, void* const* outputs,
                       char* error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* NPC_NPC_H_ */
