//===- OneLineErrors.h - Command line errors as one line --------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Every vmoe tool and compiled model reports a bad command line as exactly one
// line on stderr (docs/Limits.md). llvm::cl prints several for some errors
// (an unknown option and its "Did you mean" hint, a missing positional
// argument and where to look), some of them to llvm::errs() whatever stream
// it is given, and exits. The helpers here run such code with standard error
// going to a temporary file and join what it printed into one line.
//
// Header-only, on LLVMSupport alone, so that the runtime of compiled models
// can use it as well as the tools.
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_SUPPORT_ONELINEERRORS_H
#define VMOE_SUPPORT_ONELINEERRORS_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <optional>
#include <string>

#include <unistd.h>

namespace vmoe {

/// Runs `body` with standard error (file descriptor 2: llvm::errs() and
/// stdio alike) going to a temporary file; returns what it wrote there.
inline std::string captureStderr(llvm::function_ref<void()> body) {
  llvm::errs().flush();
  std::fflush(stderr);
  std::FILE *capture = std::tmpfile();
  int saved = capture ? ::dup(STDERR_FILENO) : -1;
  if (saved < 0) {
    if (capture)
      std::fclose(capture);
    body();
    return "";
  }
  ::dup2(::fileno(capture), STDERR_FILENO);
  body();
  llvm::errs().flush();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string text;
  std::rewind(capture);
  char buffer[4096];
  while (size_t length = std::fread(buffer, 1, sizeof(buffer), capture))
    text.append(buffer, length);
  std::fclose(capture);
  return text;
}

/// Joins messages printed one per line ("program: problem", hints) into one
/// line, "; " between them, without repeats and without the `prefixes` of
/// their lines ("program: ").
inline std::string joinLines(llvm::StringRef text,
                             llvm::ArrayRef<llvm::StringRef> prefixes) {
  llvm::SmallVector<llvm::StringRef> lines, kept;
  text.split(lines, '\n', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines) {
    line = line.trim();
    for (llvm::StringRef prefix : prefixes)
      line.consume_front(prefix);
    line = line.trim();
    if (!line.empty() && !llvm::is_contained(kept, line))
      kept.push_back(line);
  }
  return llvm::join(kept, "; ");
}

/// The name llvm::cl prefixes its messages with: this executable's file
/// name.
inline std::string programName() {
  return llvm::sys::path::filename(llvm::sys::fs::getMainExecutable(
                                       nullptr, nullptr))
      .str();
}

/// Parses the command line with llvm::cl (--help and --version print and
/// exit as usual); on failure returns everything llvm::cl printed as one
/// line. What it prints on success (warnings) is passed on.
inline std::optional<std::string>
parseCommandLineOneLine(int argc, const char *const *argv,
                        llvm::StringRef overview) {
  std::string messages;
  llvm::raw_string_ostream stream(messages);
  bool parsed = true;
  std::string printed = captureStderr([&] {
    parsed = llvm::cl::ParseCommandLineOptions(argc, argv, overview, &stream);
  });
  if (parsed) {
    llvm::errs() << messages << printed;
    return std::nullopt;
  }
  std::string prefix = (llvm::sys::path::filename(argv[0]) + ": ").str();
  std::string line = joinLines(messages + printed, {prefix});
  return line.empty() ? "invalid command line" : line;
}

} // namespace vmoe

#endif // VMOE_SUPPORT_ONELINEERRORS_H
