//===- Safetensors.cpp - Load model weights from safetensors --------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The file is mapped with llvm::MemoryBuffer and its header parsed with
// llvm::json. Every number in the header is checked against the file before
// any byte is copied, so a corrupt or hostile file is an error, never a read
// out of bounds. Header entries are visited in sorted order so that the
// reported problem does not depend on hash order.
//
//===----------------------------------------------------------------------===//

#include "Safetensors.h"

#include "Manifest.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"
#include "vmoe/Support/BoundedJson.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"

#include <cerrno>
#include <cstring>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <optional>
#include <string>

using namespace vmoe::runtime;
using llvm::StringRef;
using llvm::Twine;
namespace json = llvm::json;

static_assert(sizeof(float) == 4, "F32 tensors are copied as raw bytes");

/// The header name reserved for free-form metadata.
static constexpr StringRef kMetadataKey = "__metadata__";

/// Formats a shape as "[8, 64, 128]".
static std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (const auto &[index, dim] : llvm::enumerate(shape)) {
    if (index != 0)
      text += ", ";
    text += std::to_string(dim);
  }
  return text + "]";
}

namespace {

/// One tensor entry of the header, after its fields have been checked.
struct Entry {
  /// BF16 data (widened to f32 at load), else F32.
  bool bf16 = false;
  llvm::SmallVector<int64_t, 4> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

/// Reads one safetensors file; reports every problem prefixed by its path.
class SafetensorsReader {
public:
  explicit SafetensorsReader(StringRef path) : path(path) {}

  /// Parses the header entry `name` or reports why it is unusable.
  llvm::Expected<Entry> readEntry(StringRef name, const json::Value &value,
                                  uint64_t dataSize) const;

  /// Reports "<path>: <message>".
  llvm::Error fail(const Twine &message) const {
    return llvm::createStringError(path + ": " + message.str());
  }

private:
  std::string path;
};

} // namespace

llvm::Expected<Entry> SafetensorsReader::readEntry(StringRef name,
                                                   const json::Value &value,
                                                   uint64_t dataSize) const {
  std::string tensor = "tensor '" + name.str() + "'";
  const json::Object *object = value.getAsObject();
  if (!object)
    return fail("header entry '" + name + "' is not an object");
  for (StringRef key : {"dtype", "shape", "data_offsets"})
    if (!object->get(key))
      return fail(tensor + " has no '" + key + "'");

  std::optional<StringRef> dtype = object->getString("dtype");
  if (!dtype)
    return fail(tensor + ": 'dtype' is not a string");
  if (*dtype != "F32" && *dtype != "BF16")
    return fail(tensor + " has dtype " + *dtype + ", expected F32 or BF16");

  Entry entry;
  entry.bf16 = *dtype == "BF16";
  const json::Array *shape = object->getArray("shape");
  if (!shape)
    return fail(tensor + ": 'shape' is not an array");
  for (const json::Value &dimValue : *shape) {
    std::optional<int64_t> dim = dimValue.getAsInteger();
    if (!dim || *dim < 0)
      return fail(tensor + ": 'shape' holds a value that is not an integer " +
                  ">= 0");
    entry.shape.push_back(*dim);
  }

  const json::Array *offsets = object->getArray("data_offsets");
  std::optional<int64_t> begin, end;
  if (offsets && offsets->size() == 2) {
    begin = (*offsets)[0].getAsInteger();
    end = (*offsets)[1].getAsInteger();
  }
  if (!begin || !end || *begin < 0 || *end < *begin)
    return fail(tensor + ": 'data_offsets' must be two integers [begin, " +
                "end] with 0 <= begin <= end");
  entry.begin = static_cast<uint64_t>(*begin);
  entry.end = static_cast<uint64_t>(*end);
  if (entry.end > dataSize)
    return fail(tensor + " has data_offsets [" + Twine(entry.begin) + ", " +
                Twine(entry.end) + "] past the end of the data (" +
                Twine(dataSize) + " bytes): truncated file?");
  return entry;
}

/// Bytes of an F32 (or BF16) tensor of `shape`, or nullopt on overflow.
static std::optional<uint64_t> byteSize(llvm::ArrayRef<int64_t> shape,
                                        bool bf16 = false) {
  int64_t bytes = bf16 ? sizeof(uint16_t) : sizeof(float);
  for (int64_t dim : shape)
    if (llvm::MulOverflow(bytes, dim, bytes))
      return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

/// The format's rule: the tensors cover the data area exactly, without
/// overlap or holes. `tensors` have begin <= end <= dataSize; anything with
/// `name` and `entry` fields.
template <typename Range>
static llvm::Error checkCoverage(const SafetensorsReader &reader,
                                 const Range &tensors, uint64_t dataSize) {
  using Item = const std::remove_reference_t<decltype(*tensors.begin())> *;
  std::vector<Item> byBegin;
  for (const auto &tensor : tensors)
    byBegin.push_back(&tensor);
  // Ties (empty tensors) broken by name: deterministic messages.
  llvm::sort(byBegin, [](Item a, Item b) {
    return std::make_pair(a->entry.begin, a->name) <
           std::make_pair(b->entry.begin, b->name);
  });
  uint64_t covered = 0;
  Item previous = nullptr;
  for (Item item : byBegin) {
    const Entry &entry = item->entry;
    if (entry.begin < covered)
      return reader.fail("tensors '" + previous->name + "' [" +
                         Twine(previous->entry.begin) + ", " +
                         Twine(previous->entry.end) + "] and '" + item->name +
                         "' [" + Twine(entry.begin) + ", " + Twine(entry.end) +
                         "] overlap");
    if (entry.begin > covered)
      return reader.fail("no tensor covers data bytes [" + Twine(covered) +
                         ", " + Twine(entry.begin) +
                         ") (a hole in the data area)");
    if (entry.end > entry.begin || !previous) {
      covered = entry.end;
      previous = item;
    }
  }
  if (covered != dataSize)
    return reader.fail("no tensor covers data bytes [" + Twine(covered) +
                       ", " + Twine(dataSize) + ") (the data area has " +
                       Twine(dataSize) + " bytes)");
  return llvm::Error::success();
}

namespace {
/// A file read by offset (pread), so that a rank of an expert parallel
/// model reads only the bytes of its tensors and experts.
class PositionalFile {
public:
  explicit PositionalFile(StringRef path) {
    fd = ::open(path.str().c_str(), O_RDONLY | O_CLOEXEC);
    struct stat info;
    if (fd >= 0 && ::fstat(fd, &info) == 0 && S_ISDIR(info.st_mode))
      error = EISDIR;
    else if (fd >= 0 && ::fstat(fd, &info) == 0)
      size = static_cast<uint64_t>(info.st_size);
    else
      error = errno;
    if (error && fd >= 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ~PositionalFile() {
    if (fd >= 0)
      ::close(fd);
  }
  PositionalFile(const PositionalFile &) = delete;
  PositionalFile &operator=(const PositionalFile &) = delete;

  /// errno of open/fstat, 0 when the file is open.
  int openError() const { return fd < 0 ? error : 0; }
  uint64_t getSize() const { return size; }

  /// Reads `length` bytes at `offset`; false on a short read or error.
  bool read(uint64_t offset, uint64_t length, char *out) const {
    while (length > 0) {
      ssize_t got = ::pread(fd, out, length, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0)
        return false;
      out += got;
      offset += static_cast<uint64_t>(got);
      length -= static_cast<uint64_t>(got);
    }
    return true;
  }

private:
  int fd = -1;
  int error = 0;
  uint64_t size = 0;
};
} // namespace

llvm::Error vmoe::runtime::loadSafetensors(StringRef path,
                                           const Manifest &manifest,
                                           float *weights, int rank,
                                           int ranks) {
  SafetensorsReader reader(path);
  PositionalFile file(path);
  if (int error = file.openError())
    return reader.fail("cannot read weights: " +
                       std::error_code(error, std::generic_category())
                           .message());
  uint64_t fileSize = file.getSize();

  if (fileSize < 8)
    return reader.fail("file is " + Twine(fileSize) +
                       " bytes, too short for a safetensors header");
  char lengthBytes[8];
  if (!file.read(0, 8, lengthBytes))
    return reader.fail("cannot read the header length");
  uint64_t headerSize =
      llvm::support::endian::read64le(lengthBytes); // Unaligned read.
  uint64_t available = fileSize - 8;
  if (headerSize > kMaxSafetensorsHeaderSize)
    return reader.fail(
        "header length " + Twine(headerSize) + " exceeds the limit of " +
        Twine(kMaxSafetensorsHeaderSize) + " bytes: not a safetensors file?");
  if (headerSize > available)
    return reader.fail("header length " + Twine(headerSize) + " exceeds the " +
                       Twine(available) +
                       " bytes after it: truncated or not a safetensors file");
  std::string headerText(headerSize, '\0');
  if (!file.read(8, headerSize, headerText.data()))
    return reader.fail("cannot read the header");

  llvm::Expected<json::Value> header = vmoe::parseBoundedJson(headerText);
  if (!header)
    return reader.fail("header is not valid JSON: " +
                       llvm::toString(header.takeError()));
  const json::Object *entries = header->getAsObject();
  if (!entries)
    return reader.fail("header is not a JSON object");

  // Sorted names: deterministic messages.
  llvm::SmallVector<StringRef> names;
  for (const auto &entry : *entries)
    if (StringRef(entry.first) != kMetadataKey)
      names.push_back(entry.first);
  llvm::sort(names);

  llvm::StringMap<const TensorInfo *> expected;
  for (const TensorInfo &tensor : manifest.tensors)
    expected[tensor.name] = &tensor;

  // First the names, so that a file for another model says so at once.
  for (const TensorInfo &tensor : manifest.tensors)
    if (!entries->get(tensor.name))
      return reader.fail("missing tensor '" + tensor.name + "'");
  for (StringRef name : names)
    if (!expected.count(name))
      return reader.fail("unexpected tensor '" + name + "' (not in the model)");

  uint64_t dataStart = 8 + headerSize;
  uint64_t dataSize = available - headerSize;
  struct Checked {
    StringRef name;
    const TensorInfo *tensor;
    Entry entry;
  };
  std::vector<Checked> checked;
  for (StringRef name : names) {
    const TensorInfo &tensor = *expected[name];
    llvm::Expected<Entry> entry =
        reader.readEntry(name, *entries->get(name), dataSize);
    if (!entry)
      return entry.takeError();
    if (llvm::ArrayRef<int64_t>(entry->shape) != llvm::ArrayRef(tensor.shape))
      return reader.fail("tensor '" + name + "' has shape " +
                         formatShape(entry->shape) + ", expected " +
                         formatShape(tensor.shape));
    // The manifest bounds tensor.numElements, so this cannot overflow.
    uint64_t bytesNeeded = byteSize(tensor.shape, entry->bf16).value_or(0);
    if (entry->end - entry->begin != bytesNeeded)
      return reader.fail(
          "tensor '" + name + "' has data_offsets [" + Twine(entry->begin) +
          ", " + Twine(entry->end) + "] (" + Twine(entry->end - entry->begin) +
          " bytes), expected " + Twine(bytesNeeded) + " bytes for " +
          (entry->bf16 ? "BF16 " : "F32 ") + formatShape(tensor.shape));
    checked.push_back({name, &tensor, std::move(*entry)});
  }
  if (llvm::Error e = checkCoverage(reader, checked, dataSize))
    return e;
  for (const Checked &c : checked) {
    const TensorInfo &tensor = *c.tensor;
    uint64_t bytesNeeded = c.entry.end - c.entry.begin;
    // Safetensors data is little-endian, as are the hosts we target.
    static_assert(llvm::endianness::native == llvm::endianness::little,
                  "big-endian hosts would need a byte swap");
    // An expert tensor of an expert parallel model: only this rank's rows
    // (experts) of dim 0; the manifest's ranks divide it.
    uint64_t first = 0, length = bytesNeeded;
    if (tensor.expertSharded && ranks > 1 && !tensor.shape.empty()) {
      uint64_t rowBytes = bytesNeeded / static_cast<uint64_t>(tensor.shape[0]);
      uint64_t rows = static_cast<uint64_t>(tensor.shape[0] / ranks);
      first = rowBytes * rows * static_cast<uint64_t>(rank);
      length = rowBytes * rows;
    }
    if (!c.entry.bf16) {
      if (!file.read(dataStart + c.entry.begin + first, length,
                     reinterpret_cast<char *>(weights + tensor.offset) + first))
        return reader.fail("cannot read tensor '" + c.name + "'");
      continue;
    }
    // BF16: the f32 with the same high 16 bits (exact).
    std::vector<uint16_t> halves(length / sizeof(uint16_t));
    if (!file.read(dataStart + c.entry.begin + first, length,
                   reinterpret_cast<char *>(halves.data())))
      return reader.fail("cannot read tensor '" + c.name + "'");
    float *out = weights + tensor.offset + first / sizeof(uint16_t);
    for (size_t i = 0; i < halves.size(); ++i) {
      uint32_t bits = static_cast<uint32_t>(halves[i]) << 16;
      std::memcpy(out + i, &bits, sizeof(bits));
    }
  }
  return llvm::Error::success();
}
