//===- module.cpp - the sage._sage extension module -----------------------===//

#include "binding.h"

PYBIND11_MODULE(_sage, m) {
  m.doc() = "sage's native binding: the compiler library's C API and the "
            "CUDA driver calls that load and launch kernels";
  sage::python::registerCompiler(m);
  sage::python::registerDriver(m);
}
