//===- Labels.cpp - Class name files of model executables -----------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "Labels.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace vmoe::runtime;
using llvm::StringRef;
using llvm::Twine;

llvm::Expected<std::vector<std::string>>
vmoe::runtime::readLabels(StringRef path, int64_t classes) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return llvm::createStringError(
        path + ": cannot read labels: " + file.getError().message());
  StringRef text = (*file)->getBuffer();
  text.consume_back("\n");
  llvm::SmallVector<StringRef> lines;
  if (!text.empty())
    text.split(lines, '\n');
  if (static_cast<int64_t>(lines.size()) != classes)
    return llvm::createStringError(path + ": " + Twine(lines.size()) +
                                   " lines, the model has " + Twine(classes) +
                                   " classes (one class name per line)");
  std::vector<std::string> names;
  for (auto [index, line] : llvm::enumerate(lines)) {
    StringRef name = line.trim();
    if (name.empty())
      return llvm::createStringError(path + ":" + Twine(index + 1) +
                                     ": empty class name");
    names.push_back(name.str());
  }
  return names;
}
