// vmoe.assign_slots alone (BPR order, runtime capacity, num_valid), as
// vmoe-fuse-experts leaves it for a V-MoE-S/32 layer of one routing group:
// G = 1, S = 400, k = 2, E = 32, B = 26.
func.func @slot_assignment(%ids: tensor<1x400x2xi32>, %order: tensor<1x400xi32>,
    %capacity: index, %valid: index, %slots_out: memref<1x400x2xi32>,
    %entries_out: memref<32x1x26xi32>, %fill_out: memref<32x1xi32>) {
  %slots, %entries, %fill = vmoe.assign_slots %ids, %order capacity(%capacity) valid(%valid)
      : tensor<1x400x2xi32>, tensor<1x400xi32>
      -> tensor<1x400x2xi32>, tensor<32x1x26xi32>, tensor<32x1xi32>
  bufferization.materialize_in_destination %slots in restrict writable %slots_out
      : (tensor<1x400x2xi32>, memref<1x400x2xi32>) -> ()
  bufferization.materialize_in_destination %entries in restrict writable %entries_out
      : (tensor<32x1x26xi32>, memref<32x1x26xi32>) -> ()
  bufferization.materialize_in_destination %fill in restrict writable %fill_out
      : (tensor<32x1xi32>, memref<32x1xi32>) -> ()
  return
}
