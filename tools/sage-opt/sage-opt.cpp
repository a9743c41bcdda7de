//===- sage-opt.cpp - replay any sage pass or pipeline on a file ----------===//
//
// The driver is sage_opt_main in libsage_compiler.so (lib/CAPI/ToolMains.cpp).
//
//===----------------------------------------------------------------------===//

#include "sage/Compiler/CApi.h"

int main(int argc, char **argv) { return sage_opt_main(argc, argv); }
