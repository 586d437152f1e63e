//===- VMoEAttrs.td - vmoe attributes ----------------------*- tablegen -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Attribute wrappers of the vmoe enumerations, printed as
// `#vmoe.activation<relu>`.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_DIALECT_VMOE_IR_VMOEATTRS_TD
#define VMOE_DIALECT_VMOE_IR_VMOEATTRS_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "vmoe/Dialect/VMoE/IR/VMoEDialect.td"
include "vmoe/Dialect/VMoE/IR/VMoEEnums.td"

def VMoE_ActivationAttr
    : EnumAttr<VMoE_Dialect, VMoE_Activation, "activation"> {
  let assemblyFormat = "`<` $value `>`";
}

def VMoE_RouteOrderAttr
    : EnumAttr<VMoE_Dialect, VMoE_RouteOrder, "route_order"> {
  let assemblyFormat = "`<` $value `>`";
}

def VMoE_PriorityScoreAttr
    : EnumAttr<VMoE_Dialect, VMoE_PriorityScore, "priority_score"> {
  let assemblyFormat = "`<` $value `>`";
}

def VMoE_CapacityRuleAttr
    : EnumAttr<VMoE_Dialect, VMoE_CapacityRule, "capacity_rule"> {
  let assemblyFormat = "`<` $value `>`";
}

/// How the 32-bit words of a panel-layout weight hold its values: `f32`
/// (one value per word) or `bf16_pairs` (two bf16 values of consecutive k
/// per word, k even in the low half; docs/Dialect.md, Weight panels).
def VMoE_PanelStorageAttr
    : EnumAttr<VMoE_Dialect, VMoE_PanelStorage, "panel_storage"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // VMOE_DIALECT_VMOE_IR_VMOEATTRS_TD
