// The scanner of .pto text (see parser.h): `Line` reads the tokens, names, numbers, types and
// symbolic expressions of one line and reports errors with 1-based line and column. The statement
// parser (parser.cc) is its only user.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "ir/errors.h"
#include "ir/expr.h"

namespace pypto::pto_text {

/// Deepest expression and block (FOR / IF) nesting accepted, so that hostile
/// input cannot overflow the stack of the parser, the printer or destructors.
inline constexpr int kMaxDepth = 200;

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool name_start(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_' || u >= 0x80;
}
inline bool name_char(char c) { return name_start(c) || is_digit(c); }

/// The value of an expression without variables (the parser keeps `(2 - 3)` as written).
inline std::optional<int64_t> constant_value(const Expr& e) {
  struct HasVariable {};
  try {
    return e.eval([](const std::string&) -> int64_t { throw HasVariable{}; });
  } catch (const HasVariable&) {
    return std::nullopt;
  } catch (const UserError&) {
    return std::nullopt;  // a division by zero: the verifier or the run reports it
  }
}

/// The first character of `name` that a name may not hold, as (byte offset, code point; -1 for
/// bytes that are not UTF-8): C1 controls, bidirectional controls and invisible format characters
/// (a name must read as it is stored). Other non-ASCII letters are names' characters.
inline std::optional<std::pair<size_t, int32_t>> bad_name_char(std::string_view name) {
  for (size_t i = 0; i < name.size();) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const int len = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (len == 0 || c >= 0xF5 || i + len > name.size()) return std::make_pair(i, int32_t{-1});
    int32_t cp = c & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(name[i + k]);
      if ((cc & 0xC0) != 0x80) return std::make_pair(i, int32_t{-1});
      cp = (cp << 6) | (cc & 0x3F);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF));
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    const bool control = cp >= 0x80 && cp <= 0x9F;
    const bool bidi = cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
                      (cp >= 0x2066 && cp <= 0x2069);
    const bool invisible = (cp >= 0x200B && cp <= 0x200D) || cp == 0x2060 || cp == 0xFEFF || cp == 0x00AD;
    if (overlong || surrogate) return std::make_pair(i, int32_t{-1});
    if (control || bidi || invisible) return std::make_pair(i, cp);
    i += static_cast<size_t>(len);
  }
  return std::nullopt;
}

struct TileType {
  std::vector<int64_t> shape;
  DataType dtype = DataType::FP32;
};

struct MemrefType {
  bool bare = false;   ///< `!pto.memref` without parameters (seed signatures only)
  bool local = false;  ///< memory space `local` (else `gm`)
  std::vector<Expr> shape;
  DataType dtype = DataType::FP32;
};

/// Token scanner over one line of text.
class Line {
 public:
  /// Called with the position and the name of each variable an expression uses (see Parser::check_scope).
  using NameCheck = std::function<void(const Line&, size_t, const std::string&)>;

  Line(std::string_view text, int line, NameCheck check = {}) : t_(text), line_(line), check_(std::move(check)) {}
  /// Stops checking names (view declarations may name loop variables of later loops); returns the
  /// check, for `checked` to restore.
  NameCheck unchecked() { return std::exchange(check_, {}); }
  void checked(NameCheck check) { check_ = std::move(check); }

  int number() const { return line_; }
  size_t pos() const { return pos_; }
  size_t size() const { return t_.size(); }
  std::string_view text() const { return t_; }
  void advance(size_t n) { pos_ = std::min(t_.size(), pos_ + n); }

  [[noreturn]] void fail(size_t at, const std::string& msg) const {
    throw PtoSyntaxError(line_, static_cast<int>(std::min(at, t_.size())) + 1, msg);
  }
  [[noreturn]] void fail(const std::string& msg) const { fail(pos_, msg); }

  void skip_ws() {
    while (pos_ < t_.size() && (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\r')) ++pos_;
  }
  bool at_end() const { return pos_ >= t_.size(); }
  char peek(size_t k = 0) const { return pos_ + k < t_.size() ? t_[pos_ + k] : '\0'; }
  bool starts_with(std::string_view s) const { return t_.substr(pos_).substr(0, s.size()) == s; }
  /// `word` at the cursor, not followed by a name character.
  bool starts_with_word(std::string_view word) const { return starts_with(word) && !name_char(peek(word.size())); }

  /// The token at the cursor, for messages: "'abc'" or "end of line".
  std::string found() const {
    if (at_end()) return "end of line";
    size_t e = pos_;
    if (name_char(t_[e])) {
      while (e < t_.size() && name_char(t_[e]) && e - pos_ < 40) ++e;
    } else {
      ++e;
    }
    std::string tok;
    for (size_t i = pos_; i < e; ++i) {
      unsigned char c = static_cast<unsigned char>(t_[i]);
      if (c < 0x20 || c == 0x7f) tok += fmt::format("\\x{:02x}", c);
      else tok += static_cast<char>(c);
    }
    return "'" + tok + "'";
  }

  bool accept(std::string_view s) {
    skip_ws();
    if (!starts_with(s)) return false;
    pos_ += s.size();
    return true;
  }
  bool accept_word(std::string_view word) {
    skip_ws();
    if (!starts_with_word(word)) return false;
    pos_ += word.size();
    return true;
  }
  void expect(std::string_view s, std::string_view context = "") {
    skip_ws();
    if (!starts_with(s))
      fail(fmt::format("expected '{}'{}{}, found {}", s, context.empty() ? "" : " ", context, found()));
    pos_ += s.size();
  }
  /// Nothing but blanks or a comment may follow.
  void expect_end() {
    skip_ws();
    if (at_end() || starts_with("//")) return;
    fail("unexpected " + found() + " at the end of the statement");
  }

  /// [A-Za-z_][A-Za-z0-9_]* (bytes >= 0x80 count as letters); empty if none.
  std::string ident() {
    skip_ws();
    size_t s = pos_;
    if (!name_start(peek())) return "";
    while (name_char(peek())) ++pos_;
    return checked_name(s);
  }
  /// The name from `s` to the cursor, refused when it holds a character names may not hold.
  std::string checked_name(size_t s) const {
    std::string_view name = t_.substr(s, pos_ - s);
    if (auto bad = bad_name_char(name)) {
      if (bad->second < 0) fail(s + bad->first, "a name holds bytes that are not valid UTF-8");
      fail(s + bad->first, fmt::format("a name may not hold the control or bidirectional formatting character "
                                       "U+{:04X}", bad->second));
    }
    return std::string(name);
  }
  /// The name after a sigil ('%' or '@'): one or more name characters.
  std::string sigil_name(char sigil, const char* what) {
    skip_ws();
    if (peek() != sigil) fail(fmt::format("expected {} ({}name), found {}", what, sigil, found()));
    ++pos_;
    if (!name_char(peek())) fail(fmt::format("expected the name of {} after '{}', found {}", what, sigil, found()));
    size_t s = pos_;
    while (name_char(peek())) ++pos_;
    return checked_name(s);
  }

  /// An integer literal, optionally negative.
  int64_t integer(const char* what) { return integer_of<int64_t>(what); }
  /// A non-negative integer literal up to 2^64 - 1 (Philox keys and counters).
  uint64_t unsigned_integer(const char* what) { return integer_of<uint64_t>(what); }
  /// An integer literal of type T (a minus sign only where T is signed).
  template <typename T>
  T integer_of(const char* what) {
    skip_ws();
    size_t s = pos_;
    if (std::is_signed_v<T> && peek() == '-') ++pos_;
    if (!is_digit(peek())) {
      pos_ = s;
      fail(fmt::format("expected {}, found {}", what, found()));
    }
    while (is_digit(peek())) ++pos_;
    T v = 0;
    auto r = std::from_chars(t_.data() + s, t_.data() + pos_, v);
    if (r.ec != std::errc() || r.ptr != t_.data() + pos_)
      fail(s, fmt::format("integer {} is out of range", t_.substr(s, pos_ - s)));
    return v;
  }
  /// An integer literal that must end at a non-name character.
  int64_t whole_integer(const char* what) {
    skip_ws();
    size_t s = pos_;
    int64_t v = integer(what);
    if (name_char(peek()) || peek() == '.') fail(s, fmt::format("malformed {}", what));
    return v;
  }

  /// A symbolic integer expression as Expr::str prints it: an integer, a name
  /// (optionally `%name`), `(a op b)`, `min(a, b)`, `max(a, b)`; redundant
  /// parentheses around one operand are accepted.
  Expr expr(int depth = 0) {
    skip_ws();
    if (depth > kMaxDepth) fail("expression nested too deeply");
    size_t s = pos_;
    char c = peek();
    if (c == '(') {
      ++pos_;
      Expr a = expr(depth + 1);
      skip_ws();
      if (peek() == ')') {
        ++pos_;
        return a;
      }
      Expr::Kind k = binop();
      Expr b = expr(depth + 1);
      skip_ws();
      if (peek() != ')') fail(fmt::format("expected ')' to close the '(' at column {}, found {}", s + 1, found()));
      ++pos_;
      return Expr::node(k, a, b);
    }
    if (c == '-' || is_digit(c)) {
      int64_t v = integer("an expression");
      if (name_char(peek()) || peek() == '.') fail(s, "malformed integer in an expression");
      return Expr(v);
    }
    if (c == '%' && name_start(peek(1))) {
      ++pos_;
      std::string n = ident();
      if (check_) check_(*this, s, n);
      return Expr::var(std::move(n));
    }
    if (name_start(c)) {
      std::string n = ident();
      if (n == "min" || n == "max") {
        skip_ws();
        if (peek() == '(') {
          ++pos_;
          Expr a = expr(depth + 1);
          expect(",", fmt::format("between the operands of {}", n));
          Expr b = expr(depth + 1);
          skip_ws();
          if (peek() != ')') fail(fmt::format("expected ')' to close {}( at column {}, found {}", n, s + 1, found()));
          ++pos_;
          return Expr::node(n == "min" ? Expr::Kind::Min : Expr::Kind::Max, a, b);
        }
      }
      if (check_) check_(*this, s, n);
      return Expr::var(n);
    }
    fail("expected an expression, found " + found());
  }

  /// Expressions separated by commas, up to (not including) one of `stops`.
  std::vector<Expr> exprs(std::string_view stops) {
    std::vector<Expr> out;
    skip_ws();
    if (at_end() || stops.find(peek()) != std::string_view::npos) return out;
    for (;;) {
      out.push_back(expr());
      skip_ws();
      if (peek() != ',') return out;
      ++pos_;
    }
  }

  /// `[e, e, ...]`.
  std::vector<Expr> bracket_exprs() {
    expect("[");
    std::vector<Expr> v = exprs("]");
    expect("]");
    return v;
  }

  /// `[i, i, ...]` of integers.
  std::vector<int64_t> bracket_ints(const char* what) {
    expect("[");
    std::vector<int64_t> v;
    skip_ws();
    if (peek() != ']') {
      for (;;) {
        v.push_back(whole_integer(what));
        if (!accept(",")) break;
      }
    }
    expect("]");
    return v;
  }

  DataType dtype() {
    skip_ws();
    size_t s = pos_;
    while (name_char(peek())) ++pos_;
    std::string_view n = t_.substr(s, pos_ - s);
    if (n.empty()) fail(fmt::format("expected a dtype (f32, f16, bf16, i32, ...), found {}", found()));
    auto d = dtype_by_pto_name(n);
    if (!d) fail(s, fmt::format("unknown dtype '{}'", n));
    return *d;
  }

  /// `!pto.tile<AxBxf32>`.
  TileType tile_type() {
    expect("!pto.tile<");
    TileType t;
    if (peek() == 'x' && !is_digit(peek(1))) {
      ++pos_;  // rank 0
    } else {
      for (;;) {
        size_t s = pos_;
        if (!is_digit(peek())) fail(fmt::format("expected a tile dim, found {}", found()));
        while (is_digit(peek())) ++pos_;
        int64_t v = 0;
        auto r = std::from_chars(t_.data() + s, t_.data() + pos_, v);
        if (r.ec != std::errc()) fail(s, "tile dim is out of range");
        t.shape.push_back(v);
        if (peek() != 'x') fail(fmt::format("expected 'x' after a tile dim, found {}", found()));
        ++pos_;
        if (!is_digit(peek())) break;
      }
    }
    t.dtype = dtype();
    expect(">", "to close the tile type");
    return t;
  }

  /// `!pto.memref<gm,Ax(M),f32>` (also `<gm,AxBxf32>`); `!pto.memref` alone when `allow_bare`.
  MemrefType memref_type(bool allow_bare) {
    expect("!pto.memref");
    MemrefType m;
    if (peek() != '<') {
      if (!allow_bare) fail(fmt::format("expected '<' after !pto.memref, found {}", found()));
      m.bare = true;
      return m;
    }
    ++pos_;
    skip_ws();
    size_t s = pos_;
    std::string space = ident();
    if (space != "gm" && space != "local") {
      pos_ = s;
      fail(fmt::format("expected the memory space gm or local, found {}", found()));
    }
    m.local = space == "local";
    expect(",");
    skip_ws();
    if (peek() == ',') {
      ++pos_;  // rank 0
      m.dtype = dtype();
    } else {
      for (;;) {
        skip_ws();
        char c = peek();
        if (c == '(') {
          const size_t at = pos_;
          m.shape.push_back(expr());
          if (auto v = constant_value(m.shape.back()); v && *v < 0)
            fail(at, fmt::format("a memref dim cannot be negative, found {}", *v));
        }
        else if (c == '-' || is_digit(c)) {
          const size_t at = pos_;
          const int64_t d = integer("a memref dim");
          if (d < 0) fail(at, fmt::format("a memref dim cannot be negative, found {}", d));
          m.shape.emplace_back(d);
        }
        else fail(fmt::format("expected a memref dim (an integer or a parenthesized expression), found {}", found()));
        skip_ws();
        if (peek() == ',') {
          ++pos_;
          m.dtype = dtype();
          break;
        }
        if (peek() != 'x') fail(fmt::format("expected 'x' or ',' after a memref dim, found {}", found()));
        ++pos_;
        char n = peek();
        if (!(n == '(' || n == '-' || is_digit(n))) {
          m.dtype = dtype();  // seed form AxBxf32
          break;
        }
      }
    }
    expect(">", "to close the memref type");
    return m;
  }

 private:
  Expr::Kind binop() {
    skip_ws();
    static const std::pair<std::string_view, Expr::Kind> ops[] = {
        {"//", Expr::Kind::FloorDiv}, {"<=", Expr::Kind::Le}, {"==", Expr::Kind::Eq}, {"!=", Expr::Kind::Ne},
        {"&&", Expr::Kind::And},      {"||", Expr::Kind::Or}, {"+", Expr::Kind::Add},  {"-", Expr::Kind::Sub},
        {"*", Expr::Kind::Mul},       {"%", Expr::Kind::Mod}, {"<", Expr::Kind::Lt}};
    for (const auto& [text, kind] : ops) {
      if (starts_with(text)) {
        pos_ += text.size();
        return kind;
      }
    }
    fail("expected an operator (+ - * // % < <= == != && ||) or ')', found " + found());
  }

  std::string_view t_;
  int line_;
  size_t pos_ = 0;
  NameCheck check_;
};

}  // namespace pypto::pto_text
