//===- EntryPoint.cpp - main() of compiled vmoe model executables ---------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// main() of one-process executables. Its own object in vmoe_runtime_main,
// so that the MPI main (lib/Runtime/MPI), linked before this archive,
// replaces it.
//
//===----------------------------------------------------------------------===//

#include "Main.h"

int main(int argc, char **argv) { return vmoe::runtime::runMain(argc, argv); }
