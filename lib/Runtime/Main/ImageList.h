//===- ImageList.h - Image lists of model executables -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The --image-list file of model executables: one "path [label]" per line,
// paths relative to the list's directory, blank lines and '#' comments
// skipped. Labels are resolved against the model's classes later, when the
// model is loaded. Part of vmoe_runtime_main.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_MAIN_IMAGELIST_H
#define LIB_RUNTIME_MAIN_IMAGELIST_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace vmoe::runtime {

/// One image to classify.
struct ImageEntry {
  /// The path as opened (list entries joined to the list's directory).
  std::string path;
  /// The label as written; empty without label.
  std::string label;
  /// "list.txt:3", where the entry comes from (for messages); empty for
  /// images given on the command line.
  std::string origin;
  /// The label's class index, once resolved.
  std::optional<int64_t> labelClass;
};

/// Appends the entries of the image list `listPath` to `entries`. Errors
/// read "<list>: <problem>" or "<list>:<line>: <problem>".
llvm::Error readImageList(llvm::StringRef listPath,
                          std::vector<ImageEntry> &entries);

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_MAIN_IMAGELIST_H
