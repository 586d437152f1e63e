//===- ImageList.cpp - Image lists of model executables -------------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// Reads an image list with llvm::MemoryBuffer; fields are separated by any
// whitespace, so paths cannot contain spaces.
//
//===----------------------------------------------------------------------===//

#include "ImageList.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace vmoe::runtime;
using llvm::StringRef;
using llvm::Twine;

llvm::Error vmoe::runtime::readImageList(StringRef listPath,
                                         std::vector<ImageEntry> &entries) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(listPath, /*IsText=*/true);
  if (!file)
    return llvm::createStringError(
        listPath + ": cannot read image list: " + file.getError().message());
  StringRef directory = llvm::sys::path::parent_path(listPath);
  llvm::SmallVector<StringRef> lines;
  (*file)->getBuffer().split(lines, '\n');
  for (const auto &[index, rawLine] : llvm::enumerate(lines)) {
    StringRef line = rawLine.trim();
    if (line.empty() || line.starts_with("#"))
      continue;
    std::string origin = (listPath + ":" + Twine(index + 1)).str();
    llvm::SmallVector<StringRef> fields;
    llvm::SplitString(line, fields);
    if (fields.size() > 2)
      return llvm::createStringError(origin +
                                     ": expected 'path [label]', got " +
                                     Twine(fields.size()) + " fields");
    ImageEntry entry;
    llvm::SmallString<256> path(fields[0]);
    if (llvm::sys::path::is_relative(path) && !directory.empty()) {
      path = directory;
      llvm::sys::path::append(path, fields[0]);
    }
    entry.path = path.str().str();
    if (fields.size() == 2)
      entry.label = fields[1].str();
    entry.origin = std::move(origin);
    entries.push_back(std::move(entry));
  }
  return llvm::Error::success();
}
