//===- InitAllSage.h - everything sage tools register -----------*- C++ -*-===//
//
// The one place that says which dialects and passes sage tools know, so that
// sage-opt, sage-translate and the JIT's compiler library see the same world.
//
//===----------------------------------------------------------------------===//

#ifndef SAGE_REGISTRATION_INITALLSAGE_H
#define SAGE_REGISTRATION_INITALLSAGE_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::sage {

/// Adds the sage dialect and every upstream dialect sage IR may contain or
/// lower to.
void registerAllSageDialects(DialectRegistry &registry);

/// Registers every sage pass and named pipeline with the global registry.
void registerAllSagePasses();

} // namespace mlir::sage

#endif // SAGE_REGISTRATION_INITALLSAGE_H
