"""Integration tooling: the case matrix, memref descriptors, check_layers."""
