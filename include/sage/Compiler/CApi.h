/*===- CApi.h - the C API of libsage_compiler.so ------------------*- C -*-===*\
|*                                                                            *|
|* The only symbols the self-contained compiler library exports. Plain C, so  *|
|* it survives the static libstdc++ inside the library and can be loaded with *|
|* dlopen by the Python binding (which needs no MLIR/LLVM to build).          *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef SAGE_COMPILER_CAPI_H
#define SAGE_COMPILER_CAPI_H

#include <stddef.h>

#define SAGE_CAPI_EXPORT __attribute__((visibility("default")))

/* The layout version of sage_compile_options; sage_compile_ex rejects
 * options whose abi_version differs. */
#define SAGE_CAPI_ABI_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

/* Every setting of one compilation; fill it with sage_compile_options_init
 * and change what differs. Strings may be NULL (treated as ""). */
typedef struct sage_compile_options {
  int abi_version;    /* SAGE_CAPI_ABI_VERSION */
  const char *arch;   /* "": the module's sage.target, else sm_90a */
  int num_warps;      /* 0: the module's sage.num_warps, else 4 */
  int ptx_version;    /* PTX ISA version x10 (84) */
  int run_pipeline;   /* 0: the input is already lowered */
  int emit_cubin;     /* also run ptxas (SAGE_OUTPUT_CUBIN, _PTXAS_LOG) */
  int capture_passes; /* keep the IR after each pass (SAGE_OUTPUT_PASSES) */
  const char *ir_dump_path; /* "": none; else the IR after each pass, a file */
  const char *source_name;  /* the file name diagnostics give ("sage-input") */
} sage_compile_options;

/* The products of sage_compile_ex. */
typedef enum sage_output {
  SAGE_OUTPUT_PTX = 0,      /* kernel header comments + PTX module */
  SAGE_OUTPUT_LLVM_IR,      /* optimised LLVM IR */
  SAGE_OUTPUT_LOWERED_MLIR, /* the LLVM-dialect module */
  SAGE_OUTPUT_PASSES,       /* the IR after each pass, when captured */
  SAGE_OUTPUT_CUBIN,        /* binary; use the size */
  SAGE_OUTPUT_PTXAS_LOG,    /* ptxas -v report */
  SAGE_OUTPUT_DIAGNOSTICS,  /* one per line; warnings too on success */
  SAGE_OUTPUT_COUNT
} sage_output;

/* An opaque compilation result; release it with sage_result_free. */
typedef struct sage_compile_result sage_compile_result;

/* Default options: abi_version set, ptx_version 83, run_pipeline 1, the rest
 * zero or empty. */
SAGE_CAPI_EXPORT void sage_compile_options_init(sage_compile_options *options);

/* Compiles sage IR text. Never NULL unless memory runs out: invalid options
 * give a failed result whose diagnostics say why. */
SAGE_CAPI_EXPORT sage_compile_result *
sage_compile_ex(const char *source, const sage_compile_options *options);

/* 1 when the compilation succeeded (every error diagnostic fails it). */
SAGE_CAPI_EXPORT int sage_result_ok(const sage_compile_result *result);

/* One product, NUL-terminated, owned by the result; `*size` (if not NULL)
 * receives its length in bytes. An unknown `which` gives "" and 0. */
SAGE_CAPI_EXPORT const char *sage_result_get(const sage_compile_result *result,
                                             sage_output which, size_t *size);

SAGE_CAPI_EXPORT void sage_result_free(sage_compile_result *result);

/* The ptxas a cubin compilation would run ($SAGE_PTXAS, PATH, $CUDA_HOME/bin,
 * /usr/local/cuda/bin), malloc'ed (release with sage_free), or NULL. */
SAGE_CAPI_EXPORT char *sage_find_ptxas(void);

/* The simple entry point: returns 0 on success. `*ptx` or `*error` receives
 * a malloc'ed string to release with sage_free. An empty `arch` or a
 * `num_warps` of 0 keeps the module's own setting. */
SAGE_CAPI_EXPORT int sage_compile(const char *source, const char *arch,
                                  int num_warps, int ptx_version, char **ptx,
                                  char **error);
SAGE_CAPI_EXPORT void sage_free(char *text);

/* The compiler's version: "<release>+<git commit>"; part of JIT cache keys. */
SAGE_CAPI_EXPORT const char *sage_version(void);

/* The command-line tools' mains (`sage-opt`, `sage-translate`), so that the
 * executables and the Python package's console commands are thin callers of
 * this library and MLIR exists once. They parse LLVM's global command line:
 * call one at most once per process. */
SAGE_CAPI_EXPORT int sage_opt_main(int argc, char **argv);
SAGE_CAPI_EXPORT int sage_translate_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif /* SAGE_COMPILER_CAPI_H */
