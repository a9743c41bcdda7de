//===- CApi.cpp - the C entry points of the compiler library --------------===//
//
// Compiled into libsage_compiler.so only, whose version script exports these
// symbols and nothing else: a C ABI survives the static libstdc++ inside.
//
//===----------------------------------------------------------------------===//

#include "sage/Compiler/Compiler.h"
#include "SageVersion.h"

#include <cstdlib>
#include <cstring>

static char *copyString(const std::string &s) {
  char *out = static_cast<char *>(std::malloc(s.size() + 1));
  if (out)
    std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
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
