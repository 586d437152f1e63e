//===- Labels.h - Class name files of model executables ---------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The --labels file of model executables: plain text, the name of class i
// on line i + 1 (the ImageNet-1k and ImageNet-21k label lists are such
// files). Part of vmoe_runtime_main.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_MAIN_LABELS_H
#define LIB_RUNTIME_MAIN_LABELS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace vmoe::runtime {

/// Reads one class name per line from `path`, which must have `classes`
/// lines: a final newline ends the last line, "\r\n" endings are accepted,
/// each name is its line without surrounding whitespace and must not be
/// empty. Errors read "<path>: <problem>" or "<path>:<line>: <problem>".
llvm::Expected<std::vector<std::string>> readLabels(llvm::StringRef path,
                                                    int64_t classes);

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_MAIN_LABELS_H
