//===- sage-opt.cpp - replay any sage pass or pipeline on a file ----------===//

#include "sage/Registration/InitAllSage.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses(); // canonicalize, cse, ...
  mlir::sage::registerAllSagePasses();
  mlir::DialectRegistry registry;
  mlir::sage::registerAllSageDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "sage optimizer driver\n", registry));
}
