//===- CInterfaceHeader.cpp - C header of entry points ----------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The `--vmoe-to-c-header` translation: a C header declaring the
// `_mlir_ciface_<name>` wrapper of every function marked
// `llvm.emit_c_interface`, as vmoe-lower-to-cpu (and vmoe-compile, whose
// models export `vmoe_forward` this way) compiles it. The signature follows
// MLIR's C interface (convertFunctionTypeCWrapper of the LLVM type
// converter):
//   - a tensor argument is bufferized to a memref with the identity layout
//     (the pipelines bufferize function boundaries that way); a memref
//     argument is passed as a pointer to its descriptor
//     {T *allocated, *aligned; int64_t offset, sizes[rank], strides[rank]};
//   - scalars are passed by value (index as int64_t);
//   - no result gives void, one scalar result is returned by value; one
//     memref result, or several results packed into a struct, are written
//     through a pointer that comes first in the argument list.
//
//===----------------------------------------------------------------------===//

#include "vmoe/Target/Translations.h"

#include "vmoe/InitVMoE.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <optional>

using namespace mlir;

namespace {

/// The C spelling of a scalar type and the suffix naming descriptors of it.
struct CScalar {
  std::string type;
  std::string suffix;
};

/// Writes the header: descriptor typedefs first (each once), then the
/// prototypes.
class HeaderWriter {
public:
  explicit HeaderWriter(raw_ostream &os) : os(os) {}

  /// Emits the prototype of `func`'s C wrapper, collecting the descriptor
  /// types it needs; fails (with a diagnostic) on a type C cannot express.
  LogicalResult addFunction(func::FuncOp func);

  /// Prints the whole header with include guard `guard`.
  void print(StringRef guard);

private:
  /// The C parameter or field type of `type` (a descriptor typedef name for
  /// memrefs and tensors, defined on first use).
  std::optional<std::string> cType(Type type);
  /// Defines the descriptor of `memref<...x elementType>` with `rank` dims.
  std::string defineDescriptor(std::optional<int64_t> rank,
                               const CScalar &element);

  raw_ostream &os;
  std::string typedefs;
  std::string prototypes;
  llvm::StringSet<> defined;
};

} // namespace

/// `type` as MLIR prints it.
static std::string printed(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

/// The C type of a scalar (or of memref elements), or nullopt.
static std::optional<CScalar> cScalar(Type type) {
  if (type.isF32())
    return CScalar{"float", "f32"};
  if (type.isF64())
    return CScalar{"double", "f64"};
  // Half-precision values travel as their bits.
  if (type.isF16())
    return CScalar{"uint16_t", "f16"};
  if (type.isBF16())
    return CScalar{"uint16_t", "bf16"};
  if (type.isIndex())
    return CScalar{"int64_t", "index"};
  auto integer = dyn_cast<IntegerType>(type);
  if (!integer)
    return std::nullopt;
  unsigned width = integer.getWidth();
  if (width == 1)
    return CScalar{"bool", "i1"};
  if (width != 8 && width != 16 && width != 32 && width != 64)
    return std::nullopt;
  bool isUnsigned = integer.isUnsigned();
  return CScalar{llvm::formatv("{0}int{1}_t", isUnsigned ? "u" : "", width),
                 llvm::formatv("{0}i{1}", isUnsigned ? "u" : "", width)};
}

std::string HeaderWriter::defineDescriptor(std::optional<int64_t> rank,
                                           const CScalar &element) {
  if (!rank) {
    std::string name = "vmoe_memref_unranked";
    if (defined.insert(name).second)
      typedefs += "#ifndef VMOE_MEMREF_UNRANKED\n"
                  "#define VMOE_MEMREF_UNRANKED\n"
                  "/* An unranked memref: its rank and a pointer to the "
                  "ranked descriptor. */\n"
                  "typedef struct vmoe_memref_unranked {\n"
                  "  int64_t rank;\n"
                  "  void *descriptor;\n"
                  "} vmoe_memref_unranked;\n"
                  "#endif\n\n";
    return name;
  }
  std::string name =
      llvm::formatv("vmoe_memref_{0}d_{1}", *rank, element.suffix);
  if (!defined.insert(name).second)
    return name;
  std::string guard = StringRef(name).upper();
  llvm::raw_string_ostream out(typedefs);
  out << "#ifndef " << guard << "\n#define " << guard << "\n";
  out << "/* A rank-" << *rank << " memref of " << element.suffix
      << " (MLIR's strided memref descriptor). */\n";
  out << "typedef struct " << name << " {\n";
  out << "  " << element.type << " *allocated;\n";
  out << "  " << element.type << " *aligned;\n";
  out << "  int64_t offset;\n";
  if (*rank > 0) {
    out << "  int64_t sizes[" << *rank << "];\n";
    out << "  int64_t strides[" << *rank << "];\n";
  }
  out << "} " << name << ";\n#endif\n\n";
  return name;
}

std::optional<std::string> HeaderWriter::cType(Type type) {
  if (auto shaped = dyn_cast<ShapedType>(type)) {
    if (!isa<TensorType, BaseMemRefType>(type))
      return std::nullopt;
    std::optional<CScalar> element = cScalar(shaped.getElementType());
    if (!element)
      return std::nullopt;
    std::optional<int64_t> rank;
    if (shaped.hasRank())
      rank = shaped.getRank();
    return defineDescriptor(rank, *element);
  }
  if (std::optional<CScalar> scalar = cScalar(type))
    return scalar->type;
  return std::nullopt;
}

LogicalResult HeaderWriter::addFunction(func::FuncOp func) {
  FunctionType type = func.getFunctionType();
  auto unsupported = [&](Type t) {
    return emitError(func.getLoc())
           << "vmoe-to-c-header: type " << t << " has no C interface type";
  };
  SmallVector<std::string> params;
  std::string returnType = "void";
  std::string resultComment;
  // Results: a scalar by value, otherwise through a pointer in front.
  if (type.getNumResults() == 1 && !isa<ShapedType>(type.getResult(0))) {
    std::optional<std::string> c = cType(type.getResult(0));
    if (!c)
      return unsupported(type.getResult(0));
    returnType = *c;
  } else if (type.getNumResults() == 1) {
    std::optional<std::string> c = cType(type.getResult(0));
    if (!c)
      return unsupported(type.getResult(0));
    params.push_back(*c + " *result");
  } else if (type.getNumResults() > 1) {
    std::string name = (func.getSymName() + "_results").str();
    std::string fields;
    for (auto [i, result] : llvm::enumerate(type.getResults())) {
      std::optional<std::string> c = cType(result);
      if (!c)
        return unsupported(result);
      fields +=
          llvm::formatv("  {0} result{1}; /* {2} */\n", *c, i, printed(result));
    }
    typedefs += "/* The results of " + func.getSymName().str() + ". */\n";
    typedefs +=
        "typedef struct " + name + " {\n" + fields + "} " + name + ";\n\n";
    params.push_back(name + " *results");
  }
  for (auto [i, input] : llvm::enumerate(type.getInputs())) {
    std::optional<std::string> c = cType(input);
    if (!c)
      return unsupported(input);
    bool byPointer = isa<ShapedType>(input);
    params.push_back(llvm::formatv("{0} {1}arg{2} /* {3} */", *c,
                                   byPointer ? "*" : "", i, printed(input)));
  }

  llvm::raw_string_ostream out(prototypes);
  out << "/* @" << func.getSymName() << ": " << type
      << (func.isExternal() ? " (external: defined by the embedder)" : "")
      << " */\n";
  out << returnType << " _mlir_ciface_" << func.getSymName() << "(";
  if (params.empty())
    out << "void";
  for (auto [i, param] : llvm::enumerate(params))
    out << (i ? ",\n    " : "\n    ") << param;
  out << ");\n\n";
  return success();
}

void HeaderWriter::print(StringRef guard) {
  os << "/* C interface of a module compiled by vmoe (vmoe-lower-to-cpu or "
        "vmoe-compile),\n"
        "   generated by vmoe-translate --vmoe-to-c-header: the "
        "_mlir_ciface_ wrapper of\n"
        "   every function marked llvm.emit_c_interface.\n"
        "   - A tensor argument is a memref with the identity layout: pass "
        "a contiguous\n"
        "     row-major buffer with offset 0 (its strides are not read).\n"
        "   - Memref and tensor results are descriptors the function fills; "
        "a buffer it\n"
        "     allocated comes from malloc (free `allocated`), a constant "
        "may be a global.\n"
        "*/\n\n";
  os << "#ifndef " << guard << "\n#define " << guard << "\n\n";
  os << "#include <stdbool.h>\n#include <stdint.h>\n\n";
  os << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  os << typedefs << prototypes;
  os << "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " << guard << " */\n";
}

/// An include guard from the module name or the first function's name.
static std::string guardFor(ModuleOp module, func::FuncOp first) {
  StringRef base =
      module.getSymName() ? *module.getSymName() : first.getSymName();
  std::string guard = "VMOE_C_INTERFACE_";
  for (char c : base)
    guard += llvm::isAlnum(c) ? llvm::toUpper(c) : '_';
  return guard + "_H";
}

/// Writes the C header of `op` (a module) to `os`.
static LogicalResult translateToCHeader(Operation *op, raw_ostream &os) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    return op->emitError("vmoe-to-c-header expects a builtin.module");
  std::string header;
  llvm::raw_string_ostream headerStream(header);
  HeaderWriter writer(headerStream);
  func::FuncOp first;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!func->hasAttr("llvm.emit_c_interface"))
      continue;
    if (failed(writer.addFunction(func)))
      return failure();
    if (!first)
      first = func;
  }
  if (!first)
    return emitError(module.getLoc(), "vmoe-to-c-header: no func.func has the "
                                      "llvm.emit_c_interface attribute");
  writer.print(guardFor(module, first));
  os << header;
  return success();
}

void mlir::vmoe::registerVMoEToCHeaderTranslation() {
  TranslateFromMLIRRegistration registration(
      "vmoe-to-c-header",
      "Print a C header declaring the llvm.emit_c_interface entry points",
      translateToCHeader, [](DialectRegistry &registry) {
        registerAllDialects(registry);
        registerAllExtensions(registry);
        registerVMoEDialects(registry);
      });
}
