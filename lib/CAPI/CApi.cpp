//===- CApi.cpp - the C entry points of the compiler library --------------===//
//
// Compiled into libsage_compiler.so only, whose version script exports these
// symbols and nothing else: a C ABI survives the static libstdc++ inside.
//
//===----------------------------------------------------------------------===//

#include "SageVersion.h"
#include "sage/Compiler/Compiler.h"

#include <cstdlib>
#include <cstring>
#include <new>

/// What sage_compile_ex hands out: every product of one compilation.
struct sage_compile_result {
  ::sage::CompileResult result;
};

static char *copyString(const std::string &s) {
  char *out = static_cast<char *>(std::malloc(s.size() + 1));
  if (out)
    std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

static std::string orEmpty(const char *text) { return text ? text : ""; }

extern "C" void sage_compile_options_init(sage_compile_options *options) {
  std::memset(options, 0, sizeof(*options));
  options->abi_version = SAGE_CAPI_ABI_VERSION;
  options->ptx_version = ::mlir::sage::TargetInfo::kDefaultPtxVersion;
  options->run_pipeline = 1;
}

extern "C" sage_compile_result *
sage_compile_ex(const char *source, const sage_compile_options *options) {
  auto *out = new (std::nothrow) sage_compile_result();
  if (!out)
    return nullptr;
  ::sage::CompileResult &result = out->result;
  if (!source || !options || options->abi_version != SAGE_CAPI_ABI_VERSION) {
    result.diagnostics =
        "sage_compile_ex: a source and options of ABI version " +
        std::to_string(SAGE_CAPI_ABI_VERSION) +
        " (sage_compile_options_init) are required\n";
    return out;
  }
  ::sage::CompileOptions cxx;
  cxx.arch = orEmpty(options->arch);
  cxx.numWarps = options->num_warps;
  cxx.ptxVersion = static_cast<unsigned>(options->ptx_version);
  cxx.runPipeline = options->run_pipeline != 0;
  cxx.emitCubin = options->emit_cubin != 0;
  cxx.capturePassIR = options->capture_passes != 0;
  cxx.irDumpPath = orEmpty(options->ir_dump_path);
  if (options->source_name && *options->source_name)
    cxx.sourceName = options->source_name;
  result = ::sage::compile(source, cxx);
  return out;
}

extern "C" int sage_result_ok(const sage_compile_result *result) {
  return result && result->result.ok ? 1 : 0;
}

extern "C" const char *sage_result_get(const sage_compile_result *result,
                                       sage_output which, size_t *size) {
  static const std::string empty;
  const std::string *text = &empty;
  if (result) {
    const ::sage::CompileResult &r = result->result;
    switch (which) {
    case SAGE_OUTPUT_PTX:
      text = &r.ptx;
      break;
    case SAGE_OUTPUT_LLVM_IR:
      text = &r.llvmIR;
      break;
    case SAGE_OUTPUT_LOWERED_MLIR:
      text = &r.loweredMLIR;
      break;
    case SAGE_OUTPUT_PASSES:
      text = &r.passIR;
      break;
    case SAGE_OUTPUT_CUBIN:
      text = &r.cubin;
      break;
    case SAGE_OUTPUT_PTXAS_LOG:
      text = &r.ptxasLog;
      break;
    case SAGE_OUTPUT_DIAGNOSTICS:
      text = &r.diagnostics;
      break;
    default:
      break;
    }
  }
  if (size)
    *size = text->size();
  return text->c_str();
}

extern "C" void sage_result_free(sage_compile_result *result) { delete result; }

extern "C" char *sage_find_ptxas(void) {
  std::string path = ::sage::findPtxas();
  return path.empty() ? nullptr : copyString(path);
}

extern "C" int sage_compile(const char *source, const char *arch, int num_warps,
                            int ptx_version, char **ptx, char **error) {
  *ptx = nullptr;
  *error = nullptr;
  if (!source || !arch) {
    *error = copyString("sage_compile: source and arch are required");
    return 1;
  }
  ::sage::CompileOptions options;
  options.arch = arch;
  options.numWarps = num_warps;
  options.ptxVersion = static_cast<unsigned>(ptx_version);
  ::sage::CompileResult result = ::sage::compile(source, options);
  if (!result.ok) {
    *error = copyString(result.diagnostics);
    return 1;
  }
  *ptx = copyString(result.ptx);
  return 0;
}

extern "C" void sage_free(char *text) { std::free(text); }

extern "C" const char *sage_version(void) { return SAGE_VERSION_STRING; }
