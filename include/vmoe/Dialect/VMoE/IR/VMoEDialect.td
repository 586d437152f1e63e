//===- VMoEDialect.td - vmoe dialect definition ------------*- tablegen -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The `vmoe` dialect and the base class of its operations.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_DIALECT_VMOE_IR_VMOEDIALECT_TD
#define VMOE_DIALECT_VMOE_IR_VMOEDIALECT_TD

include "mlir/IR/OpBase.td"

def VMoE_Dialect : Dialect {
  let name = "vmoe";
  let cppNamespace = "::mlir::vmoe";
  let summary = "Sparse mixture-of-experts layers of Vision Transformers (V-MoE)";
  let description = [{
    The `vmoe` dialect describes the sparse mixture-of-experts (MoE) layer of
    V-MoE (Riquelme et al. 2021, arXiv 2106.05974) at tensor level:

    * `vmoe.route` computes router gates and each token's top-k experts;
    * `vmoe.bpr_sort` orders tokens by priority (Batch Prioritized Routing);
    * `vmoe.capacity` computes a per-expert capacity from a runtime ratio;
    * `vmoe.dispatch` fills fixed-capacity expert buffers, dropping overflow;
    * `vmoe.expert_ffn` applies every expert MLP to its buffer;
    * `vmoe.combine` scatters expert outputs back, weighted by the gates.

    Shapes follow one convention: tokens are `G x S x D` (G routing groups, S
    tokens per group, model width D); expert buffers are `E x G x B x D` (E
    experts, per-expert capacity B). Routing decisions of one group never
    depend on another group. The exact semantics and the constraint IDs quoted
    in the op descriptions (`dispatch-C3`) are in `docs/Dialect.md`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

/// vmoe-C1 and vmoe-C2 (SPEC §11): the size limits of every vmoe op
/// (vmoe/Dialect/VMoE/IR/SizeLimits.h). A trait of the base class, so that
/// no op can skip them; verified after the op's other traits and before its
/// verifier.
def VMoE_SizeLimits : NativeOpTrait<"SizeLimits"> {
  let cppNamespace = "::mlir::vmoe::OpTrait";
}

/// Base class of every vmoe operation.
class VMoE_Op<string mnemonic, list<Trait> traits = []>
    : Op<VMoE_Dialect, mnemonic, !listconcat(traits, [VMoE_SizeLimits])>;

#endif // VMOE_DIALECT_VMOE_IR_VMOEDIALECT_TD
