//===- BoundedJson.h - llvm::json::parse with bounded nesting ---*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// llvm::json::parse recurses once per nested array or object, so a few
// hundred KB of '[' overflow the stack. Every JSON reader of vmoe (model
// descriptions, safetensors headers, compiled models' manifests) calls
// parseBoundedJson instead: a linear scan first checks the nesting against
// limits::kMaxJsonNesting (skipping strings and their escapes), then
// llvm::json parses the text, which it then does within that depth.
//
// Header-only and LLVMSupport-only so that the runtime of compiled models,
// which links no vmoe library, can use it.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_SUPPORT_BOUNDEDJSON_H
#define VMOE_SUPPORT_BOUNDEDJSON_H

#include "vmoe/Support/Limits.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace vmoe {

/// Checks that arrays and objects in `text` nest at most `maxNesting`
/// deep; the error gives the byte offset of the first bracket too deep.
/// Only nesting is checked: the rest is llvm::json's job.
inline llvm::Error
checkJsonNesting(llvm::StringRef text,
                 unsigned maxNesting = limits::kMaxJsonNesting) {
  unsigned depth = 0;
  bool inString = false;
  for (size_t i = 0, e = text.size(); i < e; ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i; // The escaped character cannot end the string.
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxNesting)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "JSON nesting exceeds the limit of " + llvm::Twine(maxNesting) +
                " levels (at byte " + llvm::Twine(i) + ")");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return llvm::Error::success();
}

/// llvm::json::parse after checkJsonNesting: the one entry point for JSON
/// read from files.
inline llvm::Expected<llvm::json::Value>
parseBoundedJson(llvm::StringRef text,
                 unsigned maxNesting = limits::kMaxJsonNesting) {
  if (llvm::Error e = checkJsonNesting(text, maxNesting))
    return std::move(e);
  return llvm::json::parse(text);
}

} // namespace vmoe

#endif // VMOE_SUPPORT_BOUNDEDJSON_H
