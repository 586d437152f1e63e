// A function without loops or vmoe ops: nothing runs on the GPU.
func.func @nothing(%x: f32) -> f32 {
  return %x : f32
}
