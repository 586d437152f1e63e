//===- BoundedMlirText.h - Nesting check of MLIR text -----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// MLIR's parser recurses once per nested attribute, type or region, so a few
// KB of '[' overflow the stack of vmoe-opt (fuzz/MlirFuzzer.cpp found it). The
// tools check the text first: brackets ( [ { < (a '>' of '->' closes none),
// outside strings and // comments, nest at most limits::kMaxMlirNesting
// deep. The count is an upper bound of the parser's depth, not a parse.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_SUPPORT_BOUNDEDMLIRTEXT_H
#define VMOE_SUPPORT_BOUNDEDMLIRTEXT_H

#include "vmoe/Support/Limits.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

namespace vmoe {

/// Checks the bracket nesting of MLIR `text`; the error gives the byte
/// offset of the first bracket too deep.
inline llvm::Error
checkMlirNesting(llvm::StringRef text,
                 unsigned maxNesting = limits::kMaxMlirNesting) {
  unsigned depth = 0;
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    if (c == '"') { // A string: skip to its end (escapes included).
      for (++i; i < e && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
    } else if (c == '/' && i + 1 < e && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == llvm::StringRef::npos)
        break;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > maxNesting)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "MLIR nesting exceeds the limit of " + llvm::Twine(maxNesting) +
                " levels (at byte " + llvm::Twine(i) + ")");
    } else if ((c == ')' || c == ']' || c == '}' ||
                (c == '>' && (i == 0 || text[i - 1] != '-'))) &&
               depth > 0) {
      --depth;
    }
  }
  return llvm::Error::success();
}

} // namespace vmoe

#endif // VMOE_SUPPORT_BOUNDEDMLIRTEXT_H
