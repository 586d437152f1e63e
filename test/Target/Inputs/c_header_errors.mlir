// Errors of vmoe-translate --vmoe-to-c-header (c-header.test).

// expected-error @below {{vmoe-to-c-header: no func.func has the llvm.emit_c_interface attribute}}
module {
  func.func @no_interface(%x: f32) -> f32 {
    return %x : f32
  }
}

// -----

// expected-error @+1 {{vmoe-to-c-header: type 'vector<4xf32>' has no C interface type}}
func.func @vector_argument(%v: vector<4xf32>) attributes {llvm.emit_c_interface} {
  return
}

// -----

// expected-error @+1 {{vmoe-to-c-header: type 'tensor<4xcomplex<f32>>' has no C interface type}}
func.func @complex_elements(%x: tensor<4xcomplex<f32>>) attributes {llvm.emit_c_interface} {
  return
}

// -----

// expected-error @+1 {{vmoe-to-c-header: type 'i7' has no C interface type}}
func.func @odd_integer_result() -> i7 attributes {llvm.emit_c_interface} {
  %c = arith.constant 1 : i7
  return %c : i7
}
