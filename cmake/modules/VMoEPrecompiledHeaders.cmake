# One precompiled header (lib/PrecompiledHeaders.h: the upstream MLIR and
# LLVM headers the compiler libraries share) built once and reused by every
# compiler library, instead of parsing those headers in every source file.
# The runtime libraries (plain C++) do not use it.
option(VMOE_PCH "Precompile the upstream headers of the compiler libraries" ON)
if(NOT VMOE_PCH)
  return()
endif()

set(VMOE_PCH_LIBRARIES
  VMoECodegen VMoEDialect VMoEFrontend VMoEInit VMoEPipelines VMoETarget
  VMoEToGPU VMoEToSCF VMoETransforms VMoEUtils VMoEVectorizeContractions
  VMoEVectorizeTransposes)

# The donor: compiled with the flags of the first library, so that the
# others can reuse its PCH (REUSE_FROM needs identical flags).
list(GET VMOE_PCH_LIBRARIES 0 _vmoe_pch_donor)
target_precompile_headers(obj.${_vmoe_pch_donor} PRIVATE
  "${PROJECT_SOURCE_DIR}/lib/PrecompiledHeaders.h")
foreach(lib IN LISTS VMOE_PCH_LIBRARIES)
  # ccache can cache a PCH and its users only without the PCH's timestamp.
  if(VMOE_CCACHE)
    target_compile_options(obj.${lib} PRIVATE -Xclang -fno-pch-timestamp)
  endif()
  if(NOT lib STREQUAL _vmoe_pch_donor)
    target_precompile_headers(obj.${lib} REUSE_FROM obj.${_vmoe_pch_donor})
  endif()
endforeach()
