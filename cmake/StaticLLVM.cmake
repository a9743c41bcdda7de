# Link MLIR and LLVM statically, so that the compiler library runs on a machine
# with no LLVM installed (the GPU machine).
#
# Debian builds LLVM with LLVM_LINK_LLVM_DYLIB=ON: every exported MLIR target
# names the shared `LLVM` library in its link interface. Here that entry is
# replaced by the static component archives, and the components that would
# drag in shared libraries we neither need nor can count on (z3, libxml2,
# libedit, libffi, libpfm, Polly) are left out.

set(LLVM_LINK_LLVM_DYLIB OFF)

set(SAGE_LLVM_EXCLUDED_COMPONENTS
  "^LLVM(Debuginfod|LineEditor|Interpreter|WindowsManifest|Exegesis.*|BOLT.*)$"
  "^LLVM(OptDriver|CFIVerify|Diff|PerfJITEvents|MCJIT|OrcJIT|OrcDebugging)$"
  "^LLVM(JITLink|RuntimeDyld|ExecutionEngine|OrcTargetProcess|OrcShared)$")

set(SAGE_LLVM_COMPONENTS)
foreach(lib IN LISTS LLVM_AVAILABLE_LIBS)
  if(NOT TARGET ${lib} OR NOT lib MATCHES "^LLVM." )
    continue()
  endif()
  set(excluded FALSE)
  foreach(pattern IN LISTS SAGE_LLVM_EXCLUDED_COMPONENTS)
    if(lib MATCHES "${pattern}")
      set(excluded TRUE)
    endif()
  endforeach()
  get_target_property(kind ${lib} TYPE)
  if(NOT excluded AND kind STREQUAL "STATIC_LIBRARY")
    list(APPEND SAGE_LLVM_COMPONENTS ${lib})
  endif()
endforeach()

# z3 is only reached through LLVM's optional SMT solver and Polly through the
# pass-plugin registry (LLVMExtensions); nothing here uses either, and Debian
# ships neither as a static library.
foreach(lib IN LISTS SAGE_LLVM_COMPONENTS)
  get_target_property(deps ${lib} INTERFACE_LINK_LIBRARIES)
  if(deps)
    list(FILTER deps EXCLUDE REGEX "z3|Polly")
    set_target_properties(${lib} PROPERTIES INTERFACE_LINK_LIBRARIES "${deps}")
  endif()
endforeach()

if(NOT TARGET zstd::libzstd_shared)
  add_library(zstd::libzstd_shared SHARED IMPORTED)
  set_target_properties(zstd::libzstd_shared PROPERTIES
    IMPORTED_LOCATION /usr/lib/x86_64-linux-gnu/libzstd.so.1)
endif()

add_library(sage_llvm_static INTERFACE)
target_link_libraries(sage_llvm_static INTERFACE ${SAGE_LLVM_COMPONENTS})

foreach(target IN LISTS MLIR_EXPORTED_TARGETS)
  if(NOT TARGET ${target})
    continue()
  endif()
  get_target_property(libs ${target} INTERFACE_LINK_LIBRARIES)
  if(libs AND "LLVM" IN_LIST libs)
    list(TRANSFORM libs REPLACE "^LLVM$" "sage_llvm_static")
    set_target_properties(${target} PROPERTIES INTERFACE_LINK_LIBRARIES "${libs}")
  endif()
endforeach()
