//===- PassOptionChecks.h - Pass options checked where parsed ---*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The options of the vmoe passes and pipelines are checked where they are
// parsed from a pipeline's text (vmoe-opt flags, --pass-pipeline, mlir-opt
// with the plugin): an unknown option, a value that is not a number or one
// out of range is one line through the pipeline parser's error handler,
// before any pass runs or anything is printed (docs/Limits.md, "Options").
// llvm::cl prints some of these messages to stderr itself; they are caught
// and joined into that line (vmoe/Support/OneLineErrors.h).
//
//===----------------------------------------------------------------------===//

#ifndef VMOE_SUPPORT_PASSOPTIONCHECKS_H
#define VMOE_SUPPORT_PASSOPTIONCHECKS_H

#include "vmoe/Support/OneLineErrors.h"

#include "mlir/Pass/Pass.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::vmoe {

/// A handler of option errors, as Pass::initializeOptions takes.
using OptionErrorHandler = function_ref<LogicalResult(const Twine &)>;

/// Runs `parse`, which parses options and reports through the handler it is
/// given; on failure reports "<where>: <messages>" through `errorHandler`,
/// those llvm::cl printed to stderr included, in one line.
inline LogicalResult
parseOptionsInOneLine(StringRef where,
                      function_ref<LogicalResult(OptionErrorHandler)> parse,
                      OptionErrorHandler errorHandler) {
  std::string message;
  LogicalResult result = success();
  std::string printed = ::vmoe::captureStderr([&] {
    result = parse([&](const Twine &text) {
      message = text.str();
      return failure();
    });
  });
  if (succeeded(result)) {
    llvm::errs() << printed;
    return success();
  }
  std::string program = ::vmoe::programName() + ": ";
  std::string line = ::vmoe::joinLines(printed + "\n" + message,
                                       {program, "<Pass-Options-Parser>: "});
  return errorHandler(where + ": " + (line.empty() ? "bad options" : line));
}

/// Base of a vmoe pass with options: `Derived::checkOptions()` (an
/// llvm::Error naming the option) runs where the options are parsed from
/// text, and before the pass runs (verifyOptions(): options set in C++).
template <typename Derived, typename BaseT>
class PassWithCheckedOptions : public BaseT {
public:
  using BaseT::BaseT;

  LogicalResult initializeOptions(StringRef options,
                                  OptionErrorHandler errorHandler) override {
    StringRef where = this->getArgument();
    if (failed(parseOptionsInOneLine(
            where,
            [&](OptionErrorHandler handler) {
              return BaseT::initializeOptions(options, handler);
            },
            errorHandler)))
      return failure();
    if (llvm::Error error = static_cast<Derived *>(this)->checkOptions())
      return errorHandler(where + ": " + llvm::toString(std::move(error)));
    return success();
  }

protected:
  /// checkOptions() before the pass runs: its error on the pass's operation.
  LogicalResult verifyOptions() {
    if (llvm::Error error = static_cast<Derived *>(this)->checkOptions()) {
      this->getOperation()->emitError()
          << this->getArgument() << ": " << llvm::toString(std::move(error));
      return failure();
    }
    return success();
  }
};

} // namespace mlir::vmoe

#endif // VMOE_SUPPORT_PASSOPTIONCHECKS_H
