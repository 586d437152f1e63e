//===- Main.h - The command line of compiled model executables --*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// runMain() is the whole program of a model executable; main() calls it
// (EntryPoint.cpp), or the MPI main of lib/Runtime/MPI does between
// MPI_Init and MPI_Finalize. Internal to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_MAIN_MAIN_H
#define LIB_RUNTIME_MAIN_MAIN_H

namespace vmoe::runtime {

/// Parses the command line, runs the model, prints; returns the exit
/// status.
int runMain(int argc, char **argv);

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_MAIN_MAIN_H
