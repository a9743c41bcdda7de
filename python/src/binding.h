//===- binding.h - the pieces of the sage._sage extension -----------------===//
//
// The extension is thin on purpose: it builds in seconds with only g++,
// Python headers and pybind11 (no MLIR, no CUDA toolkit), and loads both the
// compiler library and the CUDA driver with dlopen at run time.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_PYTHON_BINDING_H
#define SAGE_PYTHON_BINDING_H

#include <pybind11/pybind11.h>

namespace sage::python {
/// Compiler(path): the C API of libsage_compiler.so.
void registerCompiler(pybind11::module_ &m);
/// Module loading and kernel launch through libcuda.so.1.
void registerDriver(pybind11::module_ &m);
} // namespace sage::python

#endif // SAGE_PYTHON_BINDING_H
