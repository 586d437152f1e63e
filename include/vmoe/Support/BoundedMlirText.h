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
// checkMlirToolInput() applies it to a tool's input file or standard input
// (read once, checked, then handed back to the driver as a memfd).
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_SUPPORT_BOUNDEDMLIRTEXT_H
#define VMOE_SUPPORT_BOUNDEDMLIRTEXT_H

#include "vmoe/Support/Limits.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

#include <sys/mman.h>
#include <unistd.h>

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

/// Replaces standard input by a memory file holding `text`, so that the
/// MLIR drivers read the bytes this process already consumed.
inline llvm::Error restoreStdin(llvm::StringRef text) {
  int fd = memfd_create("vmoe-stdin", 0);
  if (fd < 0)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot create a memory file for stdin");
  for (size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "cannot buffer stdin");
    }
    done += size_t(n);
  }
  bool ok = ::lseek(fd, 0, SEEK_SET) == 0 && ::dup2(fd, 0) == 0;
  ::close(fd);
  if (!ok)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot restore stdin");
  return llvm::Error::success();
}

/// Checks the nesting of a tool's input `inputFilename` ("-": standard
/// input, which is then handed back). Prints one error line naming `tool`
/// and returns false when the input must be refused; an unreadable file is
/// left for the driver to report.
inline bool checkMlirToolInput(llvm::StringRef tool,
                               llvm::StringRef inputFilename) {
  bool fromStdin = inputFilename == "-";
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> input =
      fromStdin ? llvm::MemoryBuffer::getSTDIN()
                : llvm::MemoryBuffer::getFile(inputFilename, /*IsText=*/true);
  if (!input)
    return true;
  llvm::StringRef text = (*input)->getBuffer();
  llvm::Error error = checkMlirNesting(text);
  if (!error && fromStdin)
    error = restoreStdin(text);
  if (!error)
    return true;
  llvm::WithColor::error(llvm::errs(), tool)
      << (fromStdin ? llvm::StringRef("<stdin>") : inputFilename) << ": "
      << llvm::toString(std::move(error)) << "\n";
  return false;
}

} // namespace vmoe

#endif // VMOE_SUPPORT_BOUNDEDMLIRTEXT_H
