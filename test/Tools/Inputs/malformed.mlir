func.func @broken(%x: tensor<1x8x16xf32>) {
  %g = vmoe.bpr_sort %x tensor<1x8x16xf32>
  return
}
