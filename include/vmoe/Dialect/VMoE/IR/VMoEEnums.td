//===- VMoEEnums.td - vmoe enumerations --------------------*- tablegen -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Closed sets of choices: expert activation, routing order, BPR priority
// score, capacity rounding rule and the number format of weight panels.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_DIALECT_VMOE_IR_VMOEENUMS_TD
#define VMOE_DIALECT_VMOE_IR_VMOEENUMS_TD

include "mlir/IR/EnumAttr.td"

def VMoE_Activation : I32EnumAttr<"Activation",
    "activation between the two expert matmuls", [
      I32EnumAttrCase<"gelu_tanh", 0>,
      I32EnumAttrCase<"gelu_erf", 1>,
      I32EnumAttrCase<"relu", 2>,
      I32EnumAttrCase<"silu", 3>
    ]> {
  let cppNamespace = "::mlir::vmoe";
  let genSpecializedAttr = 0;
}

def VMoE_RouteOrder : I32EnumAttr<"RouteOrder",
    "order of softmax and top-k in the router", [
      I32EnumAttrCase<"softmax_topk", 0>,
      I32EnumAttrCase<"topk_softmax", 1>
    ]> {
  let cppNamespace = "::mlir::vmoe";
  let genSpecializedAttr = 0;
}

def VMoE_PriorityScore : I32EnumAttr<"PriorityScore",
    "priority score of Batch Prioritized Routing", [
      I32EnumAttrCase<"max", 0>,
      I32EnumAttrCase<"sum_topk", 1>
    ]> {
  let cppNamespace = "::mlir::vmoe";
  let genSpecializedAttr = 0;
}

def VMoE_CapacityRule : I32EnumAttr<"CapacityRule",
    "rounding of k*S*C/E to a per-expert capacity", [
      I32EnumAttrCase<"round", 0>,
      I32EnumAttrCase<"ceil", 1>
    ]> {
  let cppNamespace = "::mlir::vmoe";
  let genSpecializedAttr = 0;
}

def VMoE_PanelStorage : I32EnumAttr<"PanelStorage",
    "number format of weights stored in GEMM panel layout", [
      I32EnumAttrCase<"f32", 0>,
      I32EnumAttrCase<"bf16_pairs", 1>
    ]> {
  let cppNamespace = "::mlir::vmoe";
  let genSpecializedAttr = 0;
}

#endif // VMOE_DIALECT_VMOE_IR_VMOEENUMS_TD
