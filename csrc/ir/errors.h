/// The error hierarchy of pypto. Bindings map each class to a Python exception
/// (see csrc/bindings/bind_errors.cc), so no std:: message reaches a user.
#pragma once

#include <stdexcept>
#include <string>

namespace pypto {

/// Base of every error pypto raises on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad input from the user (shape, value, argument): Python ValueError.
class UserError : public Error {
 public:
  using Error::Error;
};

/// Wrong kind of input from the user (dtype, type of argument): Python TypeError.
class TypeError : public Error {
 public:
  using Error::Error;
};

/// A graph breaks an invariant of its level: a compiler bug or a bad hand-built graph.
class VerifyError : public Error {
 public:
  using Error::Error;
};

/// The host compiler or the loader failed.
class CompileError : public Error {
 public:
  using Error::Error;
};

/// A feature that pypto does not implement yet: Python NotImplementedError.
class NotSupportedError : public Error {
 public:
  using Error::Error;
};

/// Malformed .pto text: Python pypto.PtoSyntaxError (a SyntaxError) with
/// `line` and `column` (1-based) attributes.
class PtoSyntaxError : public Error {
 public:
  PtoSyntaxError(int line, int column, const std::string& msg);
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  int line_, column_;
};

/// A broken internal assumption.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace pypto
