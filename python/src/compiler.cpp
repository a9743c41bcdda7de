//===- compiler.cpp - the compiler library's C API, from Python -----------===//
//
// libsage_compiler.so is opened with dlopen (its path comes from Python), so
// the extension builds without it and imports where it is absent.
//
//===----------------------------------------------------------------------===//

#include "binding.h"

#include "sage/Compiler/CApi.h"

#include <dlfcn.h>
#include <memory>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace {
/// The entry points of one loaded library.
struct CompilerApi {
  decltype(&sage_compile_options_init) optionsInit;
  decltype(&sage_compile_ex) compileEx;
  decltype(&sage_result_ok) resultOk;
  decltype(&sage_result_get) resultGet;
  decltype(&sage_result_free) resultFree;
  decltype(&sage_find_ptxas) findPtxas;
  decltype(&sage_free) free;
  decltype(&sage_version) version;
};

/// Every product of one compilation, as Python values.
struct CompileOutput {
  bool ok = false;
  std::string ptx, llvmIR, loweredMLIR, passes, ptxasLog, diagnostics;
  py::bytes cubin;
};

class Compiler {
public:
  explicit Compiler(std::string path) : path(std::move(path)) {
    handle = dlopen(this->path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle)
      throw std::runtime_error("cannot load the sage compiler library " +
                               this->path + ": " + dlerror());
    api.optionsInit =
        symbol<decltype(api.optionsInit)>("sage_compile_options_init");
    api.compileEx = symbol<decltype(api.compileEx)>("sage_compile_ex");
    api.resultOk = symbol<decltype(api.resultOk)>("sage_result_ok");
    api.resultGet = symbol<decltype(api.resultGet)>("sage_result_get");
    api.resultFree = symbol<decltype(api.resultFree)>("sage_result_free");
    api.findPtxas = symbol<decltype(api.findPtxas)>("sage_find_ptxas");
    api.free = symbol<decltype(api.free)>("sage_free");
    api.version = symbol<decltype(api.version)>("sage_version");
  }
  // The library stays loaded: its static LLVM state must outlive every
  // object that came from it, and unloading LLVM is not supported.
  Compiler(const Compiler &) = delete;
  Compiler &operator=(const Compiler &) = delete;

  std::string version() const { return api.version(); }

  py::object findPtxas() const {
    char *path = api.findPtxas();
    if (!path)
      return py::none();
    py::object out = py::str(path);
    api.free(path);
    return out;
  }

  CompileOutput compile(const std::string &source, const std::string &arch,
                        int numWarps, int ptxVersion, bool runPipeline,
                        bool emitCubin, bool capturePasses,
                        const std::string &irDumpPath,
                        const std::string &sourceName) const {
    sage_compile_options options;
    api.optionsInit(&options);
    options.arch = arch.c_str();
    options.num_warps = numWarps;
    options.ptx_version = ptxVersion;
    options.run_pipeline = runPipeline;
    options.emit_cubin = emitCubin;
    options.capture_passes = capturePasses;
    options.ir_dump_path = irDumpPath.c_str();
    options.source_name = sourceName.c_str();
    sage_compile_result *raw;
    {
      py::gil_scoped_release unlocked;
      raw = api.compileEx(source.c_str(), &options);
    }
    if (!raw)
      throw std::bad_alloc();
    std::unique_ptr<sage_compile_result, decltype(api.resultFree)> result(
        raw, api.resultFree);
    auto get = [&](sage_output which) {
      size_t size = 0;
      const char *data = api.resultGet(result.get(), which, &size);
      return std::string(data, size);
    };
    CompileOutput out;
    out.ok = api.resultOk(result.get()) != 0;
    out.ptx = get(SAGE_OUTPUT_PTX);
    out.llvmIR = get(SAGE_OUTPUT_LLVM_IR);
    out.loweredMLIR = get(SAGE_OUTPUT_LOWERED_MLIR);
    out.passes = get(SAGE_OUTPUT_PASSES);
    out.cubin = py::bytes(get(SAGE_OUTPUT_CUBIN));
    out.ptxasLog = get(SAGE_OUTPUT_PTXAS_LOG);
    out.diagnostics = get(SAGE_OUTPUT_DIAGNOSTICS);
    return out;
  }

  const std::string path;

private:
  template <typename T> T symbol(const char *name) {
    void *address = dlsym(handle, name);
    if (!address)
      throw std::runtime_error(path + " lacks " + name +
                               ": it predates this binding; rebuild it");
    return reinterpret_cast<T>(address);
  }

  void *handle = nullptr;
  CompilerApi api{};
};
} // namespace

void sage::python::registerCompiler(py::module_ &m) {
  py::class_<CompileOutput>(m, "CompileOutput",
                            "Every product of one compilation")
      .def_readonly("ok", &CompileOutput::ok)
      .def_readonly("ptx", &CompileOutput::ptx)
      .def_readonly("llvm_ir", &CompileOutput::llvmIR)
      .def_readonly("lowered_mlir", &CompileOutput::loweredMLIR)
      .def_readonly("passes", &CompileOutput::passes)
      .def_readonly("cubin", &CompileOutput::cubin)
      .def_readonly("ptxas_log", &CompileOutput::ptxasLog)
      .def_readonly("diagnostics", &CompileOutput::diagnostics);

  py::class_<Compiler>(m, "Compiler",
                       "A loaded libsage_compiler.so (through its C API)")
      .def(py::init<std::string>(), py::arg("path"))
      .def_readonly("path", &Compiler::path)
      .def_property_readonly("version", &Compiler::version)
      .def("find_ptxas", &Compiler::findPtxas,
           "The ptxas a cubin compilation runs, or None")
      .def("compile", &Compiler::compile, py::arg("source"),
           py::arg("arch") = "", py::arg("num_warps") = 0,
           py::arg("ptx_version") = 80, py::arg("run_pipeline") = true,
           py::arg("emit_cubin") = false, py::arg("capture_passes") = false,
           py::arg("ir_dump_path") = "", py::arg("source_name") = "",
           "Compiles sage IR text; never raises on a compile error (see ok "
           "and diagnostics)");
}
