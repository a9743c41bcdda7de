//===- sage-translate.cpp - sage IR to PTX on the command line ------------===//
//
// The driver is sage_translate_main in libsage_compiler.so
// (lib/CAPI/ToolMains.cpp).
//
//===----------------------------------------------------------------------===//

#include "sage/Compiler/CApi.h"

int main(int argc, char **argv) { return sage_translate_main(argc, argv); }
