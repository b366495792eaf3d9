// Parser of .pto assembly (see parser.h): a line-oriented recursive-descent
// reader of the text print_pto writes. Every statement is one line; the Line
// scanner of pto_lexer.h reads its tokens and reports errors with 1-based line
// and column; this file reads the statements.
#include "ir/parser.h"

#include <fmt/format.h>

#include <charconv>
#include <functional>
#include <cmath>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/errors.h"
#include "ir/pto_lexer.h"

namespace pypto {

namespace {
using namespace pto_text;  // NOLINT: the scanner is this file's vocabulary

/// Opcodes printed in a form of their own (not `%d = op a, b : T`).
bool has_own_form(Opcode op) {
  switch (opcode_info(op).form) {
    case OpForm::Load: case OpForm::Store: case OpForm::Fill: case OpForm::Gather: case OpForm::Scatter:
    case OpForm::Arange: case OpForm::Random: return true;
    default: return false;
  }
}

Instr make_instr(Opcode op) {
  Instr in;
  in.op = op;
  return in;
}

std::string tile_type_str(const std::vector<int64_t>& shape, DataType dt) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? "x" : "", shape[i]);
  return fmt::format("!pto.tile<{}x{}>", s, dtype_pto_name(dt));
}

enum class FnKind { None, InCore, Orchestration };

/// An open FOR or IF block.
struct Block {
  bool is_loop = true;
  bool is_fused = false;  ///< a FUSED run (is_loop false)
  Loop loop;
  IfThen cond;
  Fused fused;
  bool in_else = false;
  int line = 0;
  std::set<std::string> reads;  ///< variables READ binds in this block (in scope until it closes)
};

class Parser {
 public:
  explicit Parser(const std::string& text) {
    size_t start = 0;
    for (;;) {
      size_t nl = text.find('\n', start);
      if (nl == std::string::npos) {
        lines_.emplace_back(text.data() + start, text.size() - start);
        break;
      }
      lines_.emplace_back(text.data() + start, nl - start);
      start = nl + 1;
    }
  }

  ExecutionGraph run() {
    for (size_t i = 0; i < lines_.size(); ++i) {
      // Header lines are not checked: a parameter's dims may name a scalar parameter declared after it.
      Line L(lines_[i], static_cast<int>(i) + 1,
             in_func_ ? Line::NameCheck([this](const Line& l, size_t at, const std::string& n) { check_scope(l, at, n); })
                      : Line::NameCheck());
      line(L);
    }
    Line eof(lines_.back(), static_cast<int>(lines_.size()));
    eof.advance(lines_.back().size());
    if (in_func_) {
      if (!blocks_.empty()) unclosed_at(eof, eof.pos(), "the end of the text");
      eof.fail(fmt::format("missing '}}' at the end of func @{}", fn_name_));
    }
    if (!have_orch_) eof.fail("no orchestration function ('orchestration func @name(...)', or the module's entry)");
    g_.name = entry_ ? *entry_ : orch_name_;
    if (module_ && *module_ != g_.name) g_.module = *module_;
    return std::move(g_);
  }

 private:
  void line(Line& L) {
    L.skip_ws();
    if (L.at_end()) return;
    if (L.starts_with("//")) return comment(L);
    if (!in_func_) return func_header(L);
    statement(L);
  }

  // ---- top level -------------------------------------------------------------

  void comment(Line& L) {
    if (in_func_) return;  // comments inside functions carry nothing
    const size_t start = L.pos();
    L.advance(2);
    L.skip_ws();
    auto rest = [&] {
      L.skip_ws();
      std::string_view r = L.text().substr(L.pos());
      while (!r.empty() && (r.back() == ' ' || r.back() == '\t' || r.back() == '\r')) r.remove_suffix(1);
      return std::string(r);
    };
    if (L.accept("PTO Module:")) {
      if (module_) L.fail(start, "a second module name (a 'module' line or a '// PTO Module:' comment)");
      module_ = rest();
    } else if (L.accept("Entry:")) {
      set_entry(L, start);
      L.expect_end();
    } else if (L.accept("Function Type:")) {
      L.skip_ws();
      size_t at = L.pos();
      std::string kind = L.ident();
      if (kind == "InCore") pending_kind_ = FnKind::InCore;
      else if (kind == "Orchestration") pending_kind_ = FnKind::Orchestration;
      else L.fail(at, fmt::format("unknown function type '{}' (expected InCore or Orchestration)", kind));
      L.expect_end();
    } else if (L.accept("Buffer bytes:")) {
      int64_t n = L.whole_integer("a byte count");
      if (n < 0) L.fail("negative buffer bytes");
      L.expect_end();
      pending_bytes_ = n;
    } else if (L.accept("Fused:")) {
      std::string r = rest();
      std::vector<std::string> ops;
      size_t s = 0;
      while (s <= r.size() && !r.empty()) {
        size_t c = r.find(',', s);
        std::string item = r.substr(s, c == std::string::npos ? std::string::npos : c - s);
        size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
        ops.push_back(b == std::string::npos ? "" : item.substr(b, e - b + 1));
        if (c == std::string::npos) break;
        s = c + 1;
      }
      pending_fused_ = std::move(ops);
    }
    // Other comments are ignored.
  }

  /// `module @name entry @entry`: the module's name and its entry (the orchestration function).
  void module_line(Line& L, size_t start) {
    if (module_) L.fail(start, "a second module name (a 'module' line or a '// PTO Module:' comment)");
    module_ = L.sigil_name('@', "the module");
    if (!L.accept_word("entry")) L.fail("expected 'entry @<function>' after the module name, found " + L.found());
    set_entry(L, start);
    L.expect_end();
  }

  void set_entry(Line& L, size_t start) {
    if (entry_) L.fail(start, "a second entry (a 'module ... entry' line or a '// Entry:' comment)");
    L.skip_ws();
    size_t at = L.pos();
    std::string name = L.sigil_name('@', "the entry function");
    if (have_orch_ && name != orch_name_)
      L.fail(at, fmt::format("entry @{} is not the orchestration function @{}", name, orch_name_));
    entry_ = name;
  }

  void set_kind(Line& L, size_t at, FnKind kind) {
    if (pending_kind_ != FnKind::None && pending_kind_ != kind)
      L.fail(at, "the function's kind disagrees with the '// Function Type:' comment before it");
    pending_kind_ = kind;
  }

  void func_header(Line& L) {
    size_t at = L.pos();
    if (L.accept_word("module")) return module_line(L, at);
    if (L.accept_word("incore")) set_kind(L, at, FnKind::InCore);
    else if (L.accept_word("orchestration")) set_kind(L, at, FnKind::Orchestration);
    L.skip_ws();
    at = L.pos();
    if (!L.accept_word("func"))
      L.fail(at, "expected 'module', 'func', 'incore func', 'orchestration func' or a comment, found " + L.found());
    L.skip_ws();
    size_t name_at = L.pos();
    std::string name = L.sigil_name('@', "the function");
    FnKind kind = pending_kind_;
    if (kind == FnKind::None) kind = entry_ && *entry_ == name ? FnKind::Orchestration : FnKind::InCore;
    if (kind == FnKind::Orchestration) {
      if (have_orch_)
        L.fail(name_at, fmt::format("a second orchestration function @{} (the first is @{})", name, orch_name_));
      if (entry_ && *entry_ != name)
        L.fail(name_at, fmt::format("orchestration function @{} is not the entry @{}", name, *entry_));
    } else if (functions_.count(name)) {
      L.fail(name_at, fmt::format("function @{} is defined twice", name));
    }
    in_func_ = true;
    is_orch_ = kind == FnKind::Orchestration;
    returned_ = false;
    fn_name_ = name;
    fn_ = InCoreFunction{};
    fn_.name = name;
    fn_.buffer_bytes = pending_bytes_.value_or(0);
    had_bytes_comment_ = pending_bytes_.has_value();
    fn_.fused_ops = pending_fused_;
    pending_kind_ = FnKind::None;
    pending_bytes_.reset();
    pending_fused_.clear();
    memref_names_.clear();
    tile_names_.clear();
    scalar_names_.clear();
    read_names_.clear();
    top_.clear();
    blocks_.clear();
    if (is_orch_) {
      have_orch_ = true;
      orch_name_ = name;
    }

    L.expect("(", "after the function name");
    L.skip_ws();
    if (L.peek() != ')') {
      for (;;) {
        L.skip_ws();
        size_t p_at = L.pos();
        std::string p = L.sigil_name('%', "a parameter");
        L.expect(":", "after the parameter name");
        L.skip_ws();
        size_t type_at = L.pos();
        if (L.starts_with("!pto.memref")) {
          MemrefType t = L.memref_type(false);
          if (t.local) L.fail(type_at, fmt::format("parameter %{} must be in gm, not local memory", p));
          if (!is_orch_) require_positive_dims(L, type_at, t, "parameter %" + p);
          L.skip_ws();
          const size_t mode_at = L.pos();
          const bool accum = L.accept_word("accum");
          if (accum && is_orch_) L.fail(mode_at, fmt::format("parameter %{}: accum marks InCore parameters only", p));
          bool out = accum || L.accept_word("out");
          if (memref_names_.count(p)) L.fail(p_at, fmt::format("parameter %{} is declared twice", p));
          int id = add_memref(p, t, out ? MemKind::Output : MemKind::Input);
          memref_names_[p] = id;
          if (is_orch_) {
            (out ? g_.outputs : g_.params).push_back(id);
          } else {
            RegionParam rp;
            rp.name = p;
            rp.memref = id;
            rp.dtype = t.dtype;
            rp.max_extents = t.shape;
            rp.is_output = out;
            rp.accumulate = accum;
            fn_.params.push_back(std::move(rp));
          }
        } else {
          std::string ty = L.ident();
          if (ty != "index" && ty != "idx")
            L.fail(type_at, fmt::format("expected a memref type or 'index' for parameter %{}", p));
          if (scalar_names_.count(p)) L.fail(p_at, fmt::format("scalar parameter %{} is declared twice", p));
          scalar_names_.insert(p);
          if (is_orch_) g_.dyn_dims.push_back(p);
          else fn_.scalar_params.push_back(p);
        }
        L.skip_ws();
        if (L.peek() == ',') {
          L.advance(1);
          continue;
        }
        break;
      }
    }
    L.expect(")", "to close the parameter list");
    function_attributes(L);
    L.expect("{", "to open the function body");
    L.expect_end();
  }

  /// `buffer_bytes=N` and `fused=[a, b, "c d"]` after an InCore function's parameters.
  void function_attributes(Line& L) {
    std::set<std::string> seen;
    for (;;) {
      L.skip_ws();
      size_t a = L.pos();
      std::string key;
      for (const char* k : {"buffer_bytes", "fused"})
        if (L.starts_with(k) && L.peek(std::string_view(k).size()) == '=') key = k;
      if (key.empty()) return;
      if (is_orch_) L.fail(a, fmt::format("{}= belongs to InCore functions", key));
      if (!seen.insert(key).second) L.fail(a, fmt::format("{} given twice", key));
      L.advance(key.size() + 1);
      if (key == "buffer_bytes") {
        if (had_bytes_comment_) L.fail(a, "buffer_bytes= and a '// Buffer bytes:' comment both given");
        L.skip_ws();
        const size_t n_at = L.pos();
        int64_t n = L.whole_integer("a byte count");
        if (n < 0) L.fail(n_at, "negative buffer bytes");
        fn_.buffer_bytes = n;
        continue;
      }
      if (!fn_.fused_ops.empty()) L.fail(a, "fused= and a '// Fused:' comment both given");
      L.expect("[", "to open the fused list");
      L.skip_ws();
      std::vector<std::string> ops;
      if (L.peek() != ']') {
        for (;;) {
          L.skip_ws();
          if (L.peek() == '"') {
            const size_t q_at = L.pos();
            L.advance(1);
            std::string_view r = L.text().substr(L.pos());
            size_t q = r.find('"');
            if (q == std::string_view::npos) L.fail(q_at, "unterminated quoted name in the fused list");
            ops.emplace_back(r.substr(0, q));
            L.advance(q + 1);
          } else {
            std::string n = L.ident();
            if (n.empty()) L.fail("expected a name in the fused list, found " + L.found());
            while (L.peek() == '.') {  // dotted names
              L.advance(1);
              n += "." + L.ident();
            }
            ops.push_back(std::move(n));
          }
          if (!L.accept(",")) break;
        }
      }
      L.expect("]", "to close the fused list");
      fn_.fused_ops = std::move(ops);
    }
  }

  int add_memref(const std::string& name, const MemrefType& t, MemKind kind) {
    MemRef m;
    m.id = static_cast<int>(g_.memrefs.size());
    m.name = name;
    m.dtype = t.dtype;
    m.shape = t.shape;
    m.kind = kind;
    g_.memrefs.push_back(std::move(m));
    return g_.memrefs.back().id;
  }

  // ---- statements ------------------------------------------------------------

  std::vector<Stmt>& body() {
    if (blocks_.empty()) return top_;
    Block& b = blocks_.back();
    if (b.is_fused) return b.fused.body;
    if (b.is_loop) return b.loop.body;
    return b.in_else ? b.cond.else_body : b.cond.then_body;
  }

  /// The innermost open block is still open at `before`.
  [[noreturn]] void unclosed_at(const Line& L, size_t at, const std::string& before) const {
    const Block& b = blocks_.back();
    L.fail(at, fmt::format("expected {} for the {} at line {} before {}", end_word(b), open_word(b), b.line, before));
  }

  static const char* open_word(const Block& b) { return b.is_fused ? "FUSED" : b.is_loop ? "FOR" : "IF"; }
  static const char* end_word(const Block& b) { return b.is_fused ? "ENDFUSED" : b.is_loop ? "ENDFOR" : "ENDIF"; }

  /// `FUSED rows=R cols=C strip=S [registers=[%t, ...]] [aliases=[%t, ...]] [fast=[%t, ...]]`: a run the compiler
  /// fuses into one strip loop (pass fuse_chains), instructions only, up to ENDFUSED.
  void fused_stmt(Line& L, size_t at) {
    Block b;
    b.is_loop = false;
    b.is_fused = true;
    std::set<std::string> seen;
    for (;;) {
      L.skip_ws();
      if (L.at_end()) break;
      const size_t a = L.pos();
      std::string key = L.ident();
      const bool list = key == "registers" || key == "aliases" || key == "fast";
      if (key != "rows" && key != "cols" && key != "strip" && !list)
        L.fail(a, fmt::format("expected rows=, cols=, strip=, registers=, aliases= or fast= in FUSED, found {}",
                              key.empty() ? L.found() : "'" + key + "'"));
      if (!seen.insert(key).second) L.fail(a, fmt::format("{}= given twice", key));
      L.expect("=", "after " + key);
      if (list) {
        std::vector<int>& ids = key == "registers" ? b.fused.registers : key == "aliases" ? b.fused.aliases : b.fused.fast;
        L.expect("[", "to open the " + key + " list");
        L.skip_ws();
        if (L.peek() != ']') {
          do ids.push_back(src_tile(L));
          while (L.accept(","));
        }
        L.expect("]", "to close the " + key + " list");
      } else {
        const int64_t v = L.whole_integer(key.c_str());
        if (v <= 0) L.fail(a, fmt::format("{}= must be positive, found {}", key, v));
        (key == "rows" ? b.fused.rows : key == "cols" ? b.fused.cols : b.fused.strip) = v;
      }
    }
    for (const char* k : {"cols", "strip"})
      if (!seen.count(k)) L.fail(at, fmt::format("FUSED needs {}=", k));
    push_block(L, at, std::move(b));
  }

  void push_block(Line& L, size_t at, Block b) {
    if (static_cast<int>(blocks_.size()) >= kMaxDepth) L.fail(at, "FOR/IF blocks nested too deeply");
    b.line = L.number();
    blocks_.push_back(std::move(b));
  }

  void statement(Line& L) {
    L.skip_ws();
    size_t at = L.pos();
    if (returned_ && L.peek() != '}') L.fail(fmt::format("expected '}}' after 'return', found {}", L.found()));
    if (L.peek() == '}') {
      if (!blocks_.empty()) unclosed_at(L, at, "'}'");
      L.advance(1);
      L.expect_end();
      return close_function();
    }
    if (L.peek() == '%') return assignment(L);
    std::string w = L.ident();
    if (w.empty()) L.fail(at, "expected a statement, found " + L.found());
    if (w == "return") {
      if (!blocks_.empty()) unclosed_at(L, at, "'return'");
      L.expect_end();
      returned_ = true;
      return;
    }
    if (!blocks_.empty() && blocks_.back().is_fused && w != "ENDFUSED" && w != "ENDFOR" && w != "ENDIF" &&
        w != "tstore")
      L.fail(at, fmt::format("'{}' inside the FUSED at line {}: a fused run holds instructions only", w,
                             blocks_.back().line));
    if (w == "FOR") return for_stmt(L, at);
    if (w == "FUSED") {
      require_incore(L, at, w);
      return fused_stmt(L, at);
    }
    if (w == "ENDFOR" || w == "ENDIF" || w == "ENDFUSED") {
      const char* open = w == "ENDFOR" ? "FOR" : w == "ENDIF" ? "IF" : "FUSED";
      if (blocks_.empty()) L.fail(at, fmt::format("{} without a matching {}", w, open));
      if (end_word(blocks_.back()) != w)
        L.fail(at, fmt::format("{} closes the {} at line {}; expected {}", w, open_word(blocks_.back()),
                               blocks_.back().line, end_word(blocks_.back())));
      L.expect_end();
      Block b = std::move(blocks_.back());
      blocks_.pop_back();
      if (b.is_fused) body().push_back(Stmt{std::move(b.fused)});
      else if (b.is_loop) body().push_back(Stmt{std::move(b.loop)});
      else body().push_back(Stmt{std::move(b.cond)});
      return;
    }
    if (w == "IF") {
      Block b;
      b.is_loop = false;
      b.cond.cond = L.expr();
      L.expect_end();
      return push_block(L, at, std::move(b));
    }
    if (w == "ELSE") {
      if (blocks_.empty()) L.fail(at, "ELSE without IF");
      if (blocks_.back().is_loop)
        L.fail(at, fmt::format("ELSE inside the FOR at line {}; expected ENDFOR first", blocks_.back().line));
      if (blocks_.back().in_else) L.fail(at, fmt::format("a second ELSE for the IF at line {}", blocks_.back().line));
      L.expect_end();
      blocks_.back().in_else = true;
      blocks_.back().reads.clear();  // the THEN branch's READs end with it
      return;
    }
    if (w == "CALL") return call_stmt(L, at);
    if (w == "READ") return read_stmt(L, at);
    if (w == "tstore" || w == "tscatter") {
      require_incore(L, at, w);
      return w == "tstore" ? tstore(L) : tscatter(L);
    }
    bool op = opcode_by_name(w) ||
              (w.size() > 1 && w.back() == 's' && opcode_by_name(w.substr(0, w.size() - 1)));
    if (op || w.rfind("alloc_", 0) == 0 || w == "view" || w == "reshape")
      L.fail(at, fmt::format("'{}' needs a destination: %name = {} ...", w, w));
    L.fail(at, fmt::format("unknown instruction '{}'", w));
  }

  /// An InCore function's regions and local buffers hold at least one element per dim.
  static void require_positive_dims(const Line& L, size_t at, const MemrefType& t, const std::string& what) {
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (auto c = t.shape[d].as_const(); c && *c <= 0)
        L.fail(at, fmt::format("dim {} of {} must be positive, found {}", d, what, *c));
    }
  }

  /// An expression in a function's body names a scalar of the function (a scalar parameter or, in the
  /// orchestration, an alloc_scalar declared before it) or the variable of an enclosing FOR.
  void check_scope(const Line& L, size_t at, const std::string& n) const {
    if (scalar_names_.count(n) || read_names_.count(n) || in_blocks(n)) return;
    std::string kind = tile_names_.count(n)     ? "a tile, not a scalar"
                       : memref_names_.count(n) ? "a memref, not a scalar"
                                                : "not a scalar or loop variable in scope here";
    std::string hint;
    if (!tile_names_.count(n) && !memref_names_.count(n)) {
      hint = is_orch_ ? " (the orchestration's scalars are its index parameters and alloc_scalar declarations; a FOR "
                        "variable is in scope inside its loop)"
                      : fmt::format(" (@{} sees only its index parameters and the variables of the FORs around the "
                                    "expression; pass an orchestration scalar as an index parameter)",
                                    fn_name_);
    }
    L.fail(at, fmt::format("'{}' is {}{}", n, kind, hint));
  }

  /// Names the expressions of the orchestration's views may use: its scalars and loop variables.
  void collect_loop_vars(const std::vector<Stmt>& body, std::set<std::string>& out) const {
    for (const Stmt& st : body) {
      if (auto* l = std::get_if<Loop>(&st.node)) {
        out.insert(l->var);
        collect_loop_vars(l->body, out);
      } else if (auto* c = std::get_if<IfThen>(&st.node)) {
        collect_loop_vars(c->then_body, out);
        collect_loop_vars(c->else_body, out);
      } else if (auto* r = std::get_if<ReadScalar>(&st.node)) {
        out.insert(r->var);
      }
    }
  }

  /// Every name in a view's offsets and shape is a scalar of the orchestration or one of its loop
  /// variables (a view may be declared before the loop whose variable it uses).
  void check_view_names() const {
    std::set<std::string> known(scalar_names_.begin(), scalar_names_.end());
    collect_loop_vars(top_, known);
    for (const ViewUse& v : view_uses_) {
      std::function<void(const Expr&)> walk = [&](const Expr& e) {
        if (e.is_const()) return;
        if (e.is_var()) {
          if (!known.count(e.name())) {
            const bool memref = memref_names_.count(e.name()) > 0;
            throw PtoSyntaxError(v.line, v.column,
                                 fmt::format("view %{} uses '{}', which is {} of the orchestration", v.name, e.name(),
                                             memref ? "a memref, not a scalar or loop variable"
                                                    : "not a scalar or loop variable"));
          }
          return;
        }
        walk(e.lhs());
        walk(e.rhs());
      };
      for (const Expr& e : v.exprs) walk(e);
    }
  }

  void close_function() {
    if (is_orch_) {
      check_view_names();
      view_uses_.clear();
      g_.orchestration = std::move(top_);
    } else {
      fn_.body = std::move(top_);
      functions_[fn_.name] = static_cast<int>(g_.functions.size());
      g_.functions.push_back(std::move(fn_));
    }
    top_.clear();
    fn_ = InCoreFunction{};
    in_func_ = false;
  }

  void require_incore(Line& L, size_t at, const std::string& what) {
    if (is_orch_) L.fail(at, fmt::format("instruction '{}' in the orchestration (only in InCore functions)", what));
  }
  void require_orch(Line& L, size_t at, const std::string& what) {
    if (!is_orch_) L.fail(at, fmt::format("'{}' in InCore function @{} (only in the orchestration)", what, fn_name_));
  }

  /// `:idx` after a FOR operand (optional).
  void opt_idx(Line& L) {
    L.skip_ws();
    if (L.peek() == ':') {
      L.advance(1);
      L.skip_ws();
      size_t at = L.pos();
      if (!L.accept_word("idx")) L.fail(at, "expected 'idx' after ':', found " + L.found());
    }
  }

  void for_stmt(Line& L, size_t at) {
    Block b;
    b.is_loop = true;
    Loop& l = b.loop;
    l.var = L.sigil_name('%', "the loop variable");
    opt_idx(L);
    L.expect(",", "after the loop variable");
    l.start = L.expr();
    opt_idx(L);
    L.expect(",", "after the loop start");
    l.stop = L.expr();
    opt_idx(L);
    L.expect(",", "after the loop stop");
    l.step = L.expr();
    opt_idx(L);
    // Binary-expansion attributes.
    std::set<std::string> seen;
    for (;;) {
      L.skip_ws();
      size_t a = L.pos();
      std::string key;
      for (const char* k : {"max_range", "min_range", "tile_levels"})
        if (L.starts_with(k) && L.peek(std::string_view(k).size()) == '=') key = k;
      if (key.empty()) break;
      if (!seen.insert(key).second) L.fail(a, fmt::format("{} given twice", key));
      L.advance(key.size() + 1);
      if (!l.range) l.range = LoopRange{};
      if (key == "max_range") {
        l.range->max_range = L.whole_integer("an integer for max_range");
      } else if (key == "min_range") {
        l.range->min_range = L.whole_integer("an integer for min_range");
      } else {
        L.expect("{", "to open tile_levels");
        L.skip_ws();
        if (L.peek() != '}') {
          for (;;) {
            L.skip_ws();
            size_t k_at = L.pos();
            int64_t k = L.whole_integer("a block size");
            L.expect(":", "between a block size and its tile rows");
            int64_t v = L.whole_integer("tile rows");
            if (!l.range->tile_levels.emplace(k, v).second) L.fail(k_at, fmt::format("tile level {} given twice", k));
            if (!L.accept(",")) break;
          }
        }
        L.expect("}", "to close tile_levels");
      }
    }
    L.skip_ws();
    if (L.accept_word("parallel")) {
      parallel_note(L, l);
      L.expect_end();
    } else if (L.starts_with("//")) {  // the older comment form of the note
      L.advance(2);
      L.skip_ws();
      if (L.accept_word("parallel")) {
        parallel_note(L, l);
        L.skip_ws();
        if (!L.at_end()) L.fail("unexpected " + L.found() + " after the parallel note");
      }
    } else {
      L.expect_end();
    }
    push_block(L, at, std::move(b));
  }

  /// `dim=D tile=T` after `parallel`: the loop walks dim D of an op's iteration space, T elements
  /// per iteration.
  void parallel_note(Line& L, Loop& l) {
    l.parallel = true;
    L.skip_ws();
    if (!L.starts_with("dim=")) L.fail("expected 'dim=' in the parallel note, found " + L.found());
    L.advance(4);
    int64_t d = L.whole_integer("the loop's dim");
    if (d < std::numeric_limits<int>::min() || d > std::numeric_limits<int>::max()) L.fail("dim is out of range");
    l.dim = static_cast<int>(d);
    L.skip_ws();
    if (!L.starts_with("tile=")) L.fail("expected 'tile=' in the parallel note, found " + L.found());
    L.advance(5);
    l.tile = L.whole_integer("the loop's tile");
  }

  /// `READ %var <- %tensor[index, ...]`: a scalar read from an input tensor (orchestration only).
  void read_stmt(Line& L, size_t at) {
    require_orch(L, at, "READ");
    L.skip_ws();
    ReadScalar r;
    r.var = L.sigil_name('%', "the variable READ binds");
    if (scalar_names_.count(r.var) || read_names_.count(r.var) || memref_names_.count(r.var) || in_blocks(r.var))
      L.fail(at, fmt::format("READ %{}: the name is already used", r.var));
    L.expect("<-", "after the READ variable");
    L.skip_ws();
    size_t m_at = L.pos();
    std::string mname = L.sigil_name('%', "the tensor READ reads");
    auto m = memref_names_.find(mname);
    if (m == memref_names_.end()) L.fail(m_at, fmt::format("unknown memref %{}", mname));
    r.memref = m->second;
    L.expect("[", "to open READ's index");
    r.index = L.exprs("]");
    L.expect("]", "to close READ's index");
    L.expect_end();
    if (r.index.size() != g_.memrefs[r.memref].shape.size())
      L.fail(m_at, fmt::format("READ gives {} indices for %{} of rank {}", r.index.size(), mname,
                               g_.memrefs[r.memref].shape.size()));
    // In scope for the rest of the body it is in: a FOR/IF block's, or the function's.
    if (blocks_.empty()) read_names_.insert(r.var);
    else blocks_.back().reads.insert(r.var);
    body().push_back(Stmt{std::move(r)});
  }

  /// True when `n` is the variable of an open FOR or a READ of an open block.
  bool in_blocks(const std::string& n) const {
    for (const Block& b : blocks_)
      if ((b.is_loop && b.loop.var == n) || b.reads.count(n)) return true;
    return false;
  }

  void call_stmt(Line& L, size_t at) {
    require_orch(L, at, "CALL");
    L.skip_ws();
    size_t name_at = L.pos();
    std::string name = L.sigil_name('@', "the callee");
    auto it = functions_.find(name);
    if (it == functions_.end())
      L.fail(name_at, fmt::format("call to unknown function @{} (InCore functions are defined before the orchestration)",
                                  name));
    const InCoreFunction& f = g_.functions[it->second];
    Call c;
    c.callee = it->second;
    size_t np = f.params.size(), total = np + f.scalar_params.size();
    size_t n = 0;
    L.expect("(", "after the callee");
    L.skip_ws();
    if (L.peek() != ')') {
      for (;;) {
        L.skip_ws();
        size_t a_at = L.pos();
        std::string p = L.sigil_name('%', "a parameter of the callee");
        if (n >= total) L.fail(a_at, fmt::format("too many arguments: @{} takes {}", name, total));
        const std::string& want = n < np ? f.params[n].name : f.scalar_params[n - np];
        if (p != want) L.fail(a_at, fmt::format("argument {} of @{} is %{}, found %{}", n + 1, name, want, p));
        L.expect("->", fmt::format("after the argument name %{}", p));
        if (n < np) {
          L.skip_ws();
          size_t m_at = L.pos();
          std::string mname = L.sigil_name('%', "a memref");
          auto m = memref_names_.find(mname);
          if (m == memref_names_.end()) L.fail(m_at, fmt::format("unknown memref %{}", mname));
          const MemRef& mem = g_.memrefs[m->second];
          CallArg arg;
          arg.memref = m->second;
          L.skip_ws();
          if (L.peek() == '[') {
            size_t r_at = L.pos();
            L.advance(1);
            arg.offsets = L.exprs(";]");
            L.expect(";", "between a region's offsets and extents");
            arg.extents = L.exprs("]");
            L.expect("]", "to close the region");
            if (arg.offsets.size() != mem.shape.size() || arg.extents.size() != mem.shape.size())
              L.fail(r_at, fmt::format("region of %{} has {} offsets and {} extents; %{} has rank {}", mname,
                                       arg.offsets.size(), arg.extents.size(), mname, mem.shape.size()));
          } else {
            arg.offsets.assign(mem.shape.size(), Expr(0));
            arg.extents = mem.shape;
          }
          c.args.push_back(std::move(arg));
        } else {
          c.scalars.push_back(L.expr());
        }
        ++n;
        L.skip_ws();
        if (L.peek() != ',') break;
        L.advance(1);
      }
    }
    L.skip_ws();
    if (L.peek() != ')') L.fail(fmt::format("expected ',' or ')' in the CALL, found {}", L.found()));
    if (n < total) L.fail(fmt::format("@{} takes {} arguments, {} given", name, total, n));
    L.advance(1);
    L.expect_end();
    body().push_back(Stmt{std::move(c)});
  }

  // ---- assignments: declarations and instructions ----------------------------

  void assignment(Line& L) {
    size_t name_at = L.pos();
    std::string name = L.sigil_name('%', "a destination");
    L.expect("=", fmt::format("after %{}", name));
    L.skip_ws();
    size_t op_at = L.pos();
    std::string w = L.ident();
    if (w.empty()) L.fail("expected an instruction, found " + L.found());
    if (w == "alloc_tile") {
      require_incore(L, op_at, w);
      L.expect(":", "before the tile type");
      L.skip_ws();
      TileType t = L.tile_type();
      L.expect_end();
      if (tile_names_.count(name)) L.fail(name_at, fmt::format("tile %{} is declared twice", name));
      declare_tile(name, t);
      return;
    }
    if (w == "alloc_local") {
      require_incore(L, op_at, w);
      L.expect(":", "before the memref type");
      L.skip_ws();
      size_t type_at = L.pos();
      MemrefType t = L.memref_type(false);
      if (!t.local) L.fail(type_at, fmt::format("local buffer %{} must have a local memref type", name));
      require_positive_dims(L, type_at, t, "local buffer %" + name);
      L.expect_end();
      if (memref_names_.count(name)) L.fail(name_at, fmt::format("memref %{} is declared twice", name));
      int id = add_memref(name, t, MemKind::Local);
      memref_names_[name] = id;
      fn_.locals.push_back(id);
      return;
    }
    if (w == "alloc_scalar") {
      require_orch(L, op_at, w);
      check_top_level(L, op_at, w);
      L.expect(":", "before the scalar type");
      DataType dt = L.dtype();
      L.expect_end();
      if (scalar_names_.count(name)) L.fail(name_at, fmt::format("scalar %{} is declared twice", name));
      scalar_names_.insert(name);
      g_.dyn_dims.push_back(name);
      if (dt != DataType::INT64) g_.scalar_dtypes[name] = dt;
      return;
    }
    if (w == "alloc_workspace") {
      require_orch(L, op_at, w);
      check_top_level(L, op_at, w);
      const bool uninit = L.accept_word("uninit");
      L.expect(":", "before the memref type");
      L.skip_ws();
      size_t type_at = L.pos();
      MemrefType t = L.memref_type(false);
      if (t.local) L.fail(type_at, fmt::format("workspace %{} must be in gm, not local memory", name));
      L.expect_end();
      if (memref_names_.count(name)) L.fail(name_at, fmt::format("memref %{} is declared twice", name));
      memref_names_[name] = add_memref(name, t, MemKind::Workspace);
      if (uninit) g_.memrefs[static_cast<size_t>(memref_names_[name])].zeroed = false;
      return;
    }
    if (w == "view" || w == "reshape") {
      require_orch(L, op_at, w);
      check_top_level(L, op_at, w);
      return view_decl(L, name, name_at, w == "reshape");
    }
    require_incore(L, op_at, w);
    if (w == "tload") return tload(L, name, name_at);
    if (w == "tfill") {
      Instr in = make_instr(Opcode::TFILL);
      constant(L, in);
      finish_def(L, in, name, name_at);
      return;
    }
    if (w == "tgather") return tgather(L, name, name_at);
    if (w == "tarange") {
      Instr in = make_instr(Opcode::TARANGE);
      in.scalar = number(L, "the start of tarange");
      L.expect(",", "after the start of tarange");
      in.step = number(L, "the step of tarange");
      L.expect(",", "after the step of tarange");
      in.offsets = {L.expr()};
      finish_def(L, in, name, name_at);
      return;
    }
    if (w == "trandom") {
      Instr in = make_instr(Opcode::TRANDOM);
      if (L.accept_word("uniform")) {
        const int64_t bits = L.whole_integer("the mantissa bits of trandom uniform");
        if (bits < 1 || bits > 23) L.fail(fmt::format("trandom uniform keeps 1 to 23 mantissa bits, found {}", bits));
        in.random.mantissa = static_cast<int>(bits);
      } else if (L.accept_word("normal")) {
        in.random.normal = true;
      } else {
        L.fail(fmt::format("expected uniform or normal after trandom, found {}", L.found()));
      }
      L.expect(",", "after the distribution of trandom");
      L.expect("key", "in trandom");
      in.random.key = L.unsigned_integer("the key of trandom");
      L.expect(",", "after the key of trandom");
      L.expect("counter", "in trandom");
      in.random.counter = L.unsigned_integer("the counter of trandom");
      L.expect(",", "after the counter of trandom");
      in.offsets = {L.expr()};
      L.expect("strides", "after the position of trandom");
      L.expect("[", "before the row strides of trandom");
      if (!L.accept("]")) {
        do in.offsets.push_back(L.expr());
        while (L.accept(","));
        L.expect("]", "after the row strides of trandom");
      }
      // Optional, in this order: the block base (the counter's low word of the stream's element 0)
      // and the rounds.
      Expr block0(0);
      if (L.accept(",")) {
        if (L.accept_word("block0")) {
          block0 = L.expr();
          if (L.accept(",")) {
            L.expect("rounds", "in trandom");
            in.random.rounds = static_cast<int>(L.whole_integer("the rounds of trandom"));
          }
        } else {
          L.expect("rounds", "in trandom (block0 or rounds)");
          in.random.rounds = static_cast<int>(L.whole_integer("the rounds of trandom"));
        }
        if (in.random.rounds != 7 && in.random.rounds != 10)
          L.fail(fmt::format("trandom takes 7 or 10 rounds, found {}", in.random.rounds));
      }
      in.offsets.push_back(block0);
      finish_def(L, in, name, name_at);
      return;
    }
    if (w == "tstore" || w == "tscatter") L.fail(op_at, fmt::format("'{}' has no destination", w));
    // Generic instruction; a trailing "s" marks a constant operand.
    std::optional<Opcode> op = opcode_by_name(w);
    bool with_scalar = false;
    if (!op && w.size() > 1 && w.back() == 's') {
      op = opcode_by_name(w.substr(0, w.size() - 1));
      with_scalar = true;
    }
    if (!op || has_own_form(*op))
      L.fail(op_at, fmt::format("unknown instruction '{}'", w));
    Instr in = make_instr(*op);
    int total = opcode_num_srcs(*op);
    for (int p = 0; p < total; ++p) {
      if (p) L.expect(",", fmt::format("between the operands of {}", w));
      L.skip_ws();
      size_t o_at = L.pos();
      if (L.peek() == '%') {
        in.srcs.push_back(src_tile(L));
        continue;
      }
      if (!with_scalar)
        L.fail(o_at, fmt::format("expected a tile operand %name of {} (constant operands need '{}s'), found {}", w, w,
                                 L.found()));
      if (in.scalar_pos >= 0) L.fail(o_at, fmt::format("{} has a second constant operand", w));
      in.scalar_pos = p;
      constant(L, in);
    }
    L.skip_ws();
    if (L.peek() == ',') L.fail(fmt::format("too many operands: {} takes {}", w, total));
    if (with_scalar && in.scalar_pos < 0) L.fail(op_at, fmt::format("'{}' needs a constant operand", w));
    attributes(L, in, true);
    finish_def(L, in, name, name_at);
  }

  /// Declarations of the orchestration stay outside loops and conditions.
  void check_top_level(Line& L, size_t at, const std::string& what) {
    if (!blocks_.empty()) L.fail(at, fmt::format("'{}' inside a FOR or IF block", what));
  }

  void view_decl(Line& L, const std::string& name, size_t name_at, bool reshape) {
    L.unchecked();  // check_view_names checks the names when the orchestration closes
    L.skip_ws();
    size_t b_at = L.pos();
    std::string base = L.sigil_name('%', "the viewed memref");
    auto it = memref_names_.find(base);
    if (it == memref_names_.end()) L.fail(b_at, fmt::format("unknown memref %{}", base));
    const int base_id = it->second;
    const size_t base_rank = g_.memrefs[base_id].shape.size();
    const DataType base_dt = g_.memrefs[base_id].dtype;
    ViewMap v;
    v.base = base_id;
    v.reshape = reshape;
    size_t map_at = 0;
    if (!reshape) {
      L.skip_ws();
      size_t off_at = L.pos();
      v.offsets = L.bracket_exprs();
      if (v.offsets.size() != base_rank)
        L.fail(off_at, fmt::format("{} offsets for %{} of rank {}", v.offsets.size(), base, base_rank));
      L.skip_ws();
      if (!L.accept_word("dims")) L.fail("expected 'dims', found " + L.found());
      L.skip_ws();
      map_at = L.pos();
      for (int64_t d : L.bracket_ints("a base dim")) {
        if (d < -1 || d >= static_cast<int64_t>(base_rank))
          L.fail(map_at, fmt::format("base dim {} is not a dim of %{} (rank {}) or -1", d, base, base_rank));
        v.map.push_back(static_cast<int>(d));
      }
      L.skip_ws();
      if (!L.accept_word("steps")) L.fail("expected 'steps', found " + L.found());
      L.skip_ws();
      size_t steps_at = L.pos();
      v.steps = L.bracket_ints("a step");
      if (v.steps.size() != v.map.size())
        L.fail(steps_at, fmt::format("{} steps for {} dims", v.steps.size(), v.map.size()));
    }
    L.expect(":", "before the memref type");
    L.skip_ws();
    size_t type_at = L.pos();
    MemrefType t = L.memref_type(false);
    if (t.local) L.fail(type_at, fmt::format("view %{} must be in gm, not local memory", name));
    if (t.dtype != base_dt && !reshape)  // a reshape may read the bytes as another type (a bitcast)
      L.fail(type_at, fmt::format("view %{} is {}, its base %{} is {}", name, dtype_pto_name(t.dtype), base,
                                  dtype_pto_name(base_dt)));
    if (!reshape && t.shape.size() != v.map.size())
      L.fail(type_at, fmt::format("view %{} has rank {} but {} dims", name, t.shape.size(), v.map.size()));
    L.expect_end();
    if (memref_names_.count(name)) L.fail(name_at, fmt::format("memref %{} is declared twice", name));
    ViewUse use{name, L.number(), static_cast<int>(b_at) + 1, v.offsets};
    use.exprs.insert(use.exprs.end(), t.shape.begin(), t.shape.end());
    view_uses_.push_back(std::move(use));
    int id = add_memref(name, t, MemKind::View);
    g_.memrefs[id].view = std::move(v);
    memref_names_[name] = id;
  }

  int declare_tile(const std::string& name, const TileType& t) {
    TileDecl d;
    d.id = static_cast<int>(fn_.tiles.size());
    d.name = name;
    d.shape = t.shape;
    d.dtype = t.dtype;
    fn_.tiles.push_back(std::move(d));
    tile_names_[name] = fn_.tiles.back().id;
    return fn_.tiles.back().id;
  }

  int src_tile(Line& L) {
    L.skip_ws();
    size_t at = L.pos();
    std::string n = L.sigil_name('%', "a tile");
    auto it = tile_names_.find(n);
    if (it == tile_names_.end()) L.fail(at, fmt::format("unknown tile %{}", n));
    return it->second;
  }

  /// `%m[offsets]` of a parameter or local buffer of the current function.
  void memref_box(Line& L, Instr& in) {
    L.skip_ws();
    size_t at = L.pos();
    std::string n = L.sigil_name('%', "a memref");
    auto it = memref_names_.find(n);
    if (it == memref_names_.end()) L.fail(at, fmt::format("unknown memref %{} in @{}", n, fn_name_));
    in.memref = it->second;
    L.skip_ws();
    size_t b_at = L.pos();
    in.offsets = L.bracket_exprs();
    size_t rank = g_.memrefs[in.memref].shape.size();
    if (in.offsets.size() != rank)
      L.fail(b_at, fmt::format("{} offsets for %{} of rank {}", in.offsets.size(), n, rank));
  }

  /// ` axis=N`, ` to=dtype`, ` valid [...]`, ` l0 [m, k, n]` (and a tload's ` view`, a tload's or
  /// matmul's ` panels=W`, a tstore's
  /// ` stream` and ` atomic_add`, a tscatter's ` reduce=` and ` window=[base, bound]`) in any order,
  /// each at most once.
  void attributes(Line& L, Instr& in, bool allow_to) {
    bool axis = false, to = false, valid = false, l0 = false, reduce = false, window = false;
    for (;;) {
      L.skip_ws();
      size_t at = L.pos();
      if (in.op == Opcode::TSTORE && L.starts_with_word("atomic_add")) {
        if (in.atomic) L.fail(at, "atomic_add given twice");
        in.atomic = true;
        L.advance(10);
      } else if ((in.op == Opcode::TLOAD && L.starts_with_word("view")) ||
          (in.op == Opcode::TSTORE && L.starts_with_word("stream"))) {
        bool& flag = in.op == Opcode::TLOAD ? in.view : in.stream;
        if (flag) L.fail(at, fmt::format("{} given twice", in.op == Opcode::TLOAD ? "view" : "stream"));
        flag = true;
        L.advance(in.op == Opcode::TLOAD ? 4 : 6);
        if (in.op == Opcode::TLOAD) {
          L.skip_ws();
          if (L.starts_with_word("strided")) {
            in.strided = true;
            L.advance(7);
          }
        }
      } else if (in.op == Opcode::TSCATTER && L.starts_with("reduce=")) {
        if (reduce) L.fail(at, "reduce= given twice");
        reduce = true;
        L.advance(7);
        const std::string word = L.ident();
        if (word != "add" && word != "mul") L.fail(at + 7, fmt::format("reduce= takes add or mul, found '{}'", word));
        in.reduce = scatter_reduce_by_name(word == "mul" ? "multiply" : word);
      } else if (in.op == Opcode::TSCATTER && L.starts_with("window=")) {
        if (window) L.fail(at, "window= given twice");
        window = true;
        L.advance(7);
        in.window = L.bracket_exprs();
        if (in.window.size() != 2)
          L.fail(at + 7, fmt::format("window= takes [base, bound], found {} expressions", in.window.size()));
      } else if (L.starts_with("axis=")) {
        if (axis) L.fail(at, "axis= given twice");
        axis = true;
        L.advance(5);
        int64_t a = L.whole_integer("an axis");
        if (a < 0 || a > std::numeric_limits<int>::max()) L.fail(at + 5, fmt::format("axis {} is out of range", a));
        in.axis = static_cast<int>(a);
      } else if (allow_to && L.starts_with("to=")) {
        if (to) L.fail(at, "to= given twice");
        to = true;
        L.advance(3);
        in.round_to = L.dtype();
      } else if (L.starts_with_word("valid")) {
        if (valid) L.fail(at, "valid given twice");
        valid = true;
        L.advance(5);
        in.valid = L.bracket_exprs();
      } else if ((in.op == Opcode::TLOAD || in.op == Opcode::TMATMUL || in.op == Opcode::TMATMUL_ACC) &&
                 L.starts_with("panels=")) {
        if (in.panels > 0) L.fail(at, "panels= given twice");
        L.advance(7);
        const int64_t w = L.whole_integer("a panel width");
        if (w <= 0 || w > (int64_t{1} << 20)) L.fail(at + 7, fmt::format("panels= takes a positive width, found {}", w));
        in.panels = w;
      } else if ((in.op == Opcode::TMATMUL || in.op == Opcode::TMATMUL_ACC) && L.starts_with_word("b_trans")) {
        if (in.b_trans) L.fail(at, "b_trans given twice");
        in.b_trans = true;
        L.advance(7);
      } else if (L.starts_with_word("l0")) {
        if (l0) L.fail(at, "l0 given twice");
        l0 = true;
        L.advance(2);
        L.skip_ws();
        const size_t list_at = L.pos();
        // Any name is refused below as not a constant, wherever it is declared.
        Line::NameCheck check = L.unchecked();
        const std::vector<Expr> sizes = L.bracket_exprs();
        L.checked(std::move(check));
        for (const Expr& e : sizes) {
          std::optional<int64_t> v = e.as_const();
          if (!v || *v <= 0) L.fail(list_at, fmt::format("l0 sizes must be positive integers, found {}", e.str()));
          in.l0.push_back(*v);
        }
        if (in.l0.size() != 3) L.fail(list_at, fmt::format("l0 takes 3 sizes (m, k, n), found {}", in.l0.size()));
      } else {
        return;
      }
    }
  }

  /// `: type` (or a seed signature) and the destination tile of a definition.
  void finish_def(Line& L, Instr& in, const std::string& name, size_t name_at) {
    L.skip_ws();
    if (L.peek() != ':') L.fail(fmt::format("expected ':' and the result type, found {}", L.found()));
    L.advance(1);
    size_t type_at = 0;
    TileType t = signature(L, type_at);
    L.expect_end();
    auto it = tile_names_.find(name);
    if (it == tile_names_.end()) {
      in.dst = declare_tile(name, t);  // seed form: the definition declares the tile
    } else {
      const TileDecl& d = fn_.tiles[it->second];
      if (d.shape != t.shape || d.dtype != t.dtype)
        L.fail(type_at, fmt::format("type {} does not match tile %{} declared as {}", tile_type_str(t.shape, t.dtype),
                                    name, tile_type_str(d.shape, d.dtype)));
      in.dst = d.id;
    }
    body().push_back(Stmt{std::move(in)});
  }

  /// `T`, `T -> T` or `(T, ...) -> T`; returns the result (last) type, a tile type.
  TileType signature(Line& L, size_t& type_at) {
    std::optional<TileType> last;
    for (;;) {
      L.skip_ws();
      type_at = L.pos();
      if (L.peek() == '(') {
        L.advance(1);
        for (;;) {
          any_type(L);
          if (!L.accept(",")) break;
        }
        L.expect(")", "to close the operand types");
        last.reset();
      } else if (L.starts_with("!pto.tile")) {
        last = L.tile_type();
      } else if (L.starts_with("!pto.memref")) {
        L.memref_type(true);
        last.reset();
      } else {
        L.fail("expected a type (!pto.tile<...>), found " + L.found());
      }
      L.skip_ws();
      if (!L.starts_with("->")) break;
      L.advance(2);
    }
    if (!last) L.fail(type_at, "the result type must be a tile type");
    return *last;
  }

  void any_type(Line& L) {
    L.skip_ws();
    if (L.starts_with("!pto.tile")) L.tile_type();
    else if (L.starts_with("!pto.memref")) L.memref_type(true);
    else L.fail("expected a type, found " + L.found());
  }

  /// A numeric literal: [-]digits[.digits][e[+-]digits], inf, -inf or nan.
  /// Returns false (consuming nothing) when the cursor is not at one.
  bool literal(Line& L, double& value, bool& integral, std::string_view& text) {
    L.skip_ws();
    size_t s = L.pos();
    std::string_view t = L.text();
    for (std::string_view special : {"-inf", "inf", "nan"}) {
      if (L.starts_with_word(special)) {
        L.advance(special.size());
        value = special == "nan" ? std::numeric_limits<double>::quiet_NaN()
                                 : (special[0] == '-' ? -1.0 : 1.0) * std::numeric_limits<double>::infinity();
        integral = false;
        text = t.substr(s, special.size());
        return true;
      }
    }
    size_t e = s;
    if (e < t.size() && t[e] == '-') ++e;
    if (e >= t.size() || !is_digit(t[e])) return false;
    integral = true;
    while (e < t.size() && is_digit(t[e])) ++e;
    if (e < t.size() && t[e] == '.') {
      integral = false;
      ++e;
      if (e >= t.size() || !is_digit(t[e])) L.fail(s, "malformed number");
      while (e < t.size() && is_digit(t[e])) ++e;
    }
    if (e < t.size() && (t[e] == 'e' || t[e] == 'E')) {
      integral = false;
      ++e;
      if (e < t.size() && (t[e] == '+' || t[e] == '-')) ++e;
      if (e >= t.size() || !is_digit(t[e])) L.fail(s, "malformed number");
      while (e < t.size() && is_digit(t[e])) ++e;
    }
    if (e < t.size() && (name_char(t[e]) || t[e] == '.')) L.fail(s, "malformed number");
    text = t.substr(s, e - s);
    auto r = std::from_chars(text.data(), text.data() + text.size(), value);
    if (r.ec == std::errc::result_out_of_range) L.fail(s, fmt::format("number {} is out of range", text));
    if (r.ec != std::errc() || r.ptr != text.data() + text.size()) L.fail(s, "malformed number");
    L.advance(e - s);
    return true;
  }

  double number(Line& L, const char* what) {
    double v = 0;
    bool integral = false;
    std::string_view text;
    if (!literal(L, v, integral, text)) L.fail(fmt::format("expected a number for {}, found {}", what, L.found()));
    return v;
  }

  /// A constant operand: a number (Instr::scalar) or a symbolic expression
  /// (Instr::scalar_expr; also an integer a double would not print back).
  void constant(Line& L, Instr& in) {
    double v = 0;
    bool integral = false;
    std::string_view text;
    if (literal(L, v, integral, text)) {
      if (integral && fmt::format("{}", v) != text) {
        int64_t i = 0;
        auto r = std::from_chars(text.data(), text.data() + text.size(), i);
        if (r.ec == std::errc() && r.ptr == text.data() + text.size()) {
          in.scalar_expr = Expr(i);
          return;
        }
      }
      in.scalar = v;
      return;
    }
    in.scalar_expr = L.expr();
  }

  void tload(Line& L, const std::string& name, size_t name_at) {
    Instr in = make_instr(Opcode::TLOAD);
    memref_box(L, in);
    attributes(L, in, false);
    if (in.axis >= 0) L.fail("tload takes no axis=");
    finish_def(L, in, name, name_at);
  }

  void tgather(Line& L, const std::string& name, size_t name_at) {
    Instr in = make_instr(Opcode::TGATHER);
    memref_box(L, in);
    L.expect(",", "before the index tile of tgather");
    in.srcs = {src_tile(L)};
    attributes(L, in, false);
    if (in.axis < 0) L.fail("expected axis= in tgather, found " + L.found());
    finish_def(L, in, name, name_at);
  }

  void tstore(Line& L) {
    Instr in = make_instr(Opcode::TSTORE);
    in.srcs = {src_tile(L)};
    L.expect(",", "after the stored tile");
    memref_box(L, in);
    attributes(L, in, false);
    if (in.axis >= 0) L.fail("tstore takes no axis=");
    L.expect_end();
    body().push_back(Stmt{std::move(in)});
  }

  void tscatter(Line& L) {
    Instr in = make_instr(Opcode::TSCATTER);
    int src = src_tile(L);
    L.expect(",", "after the scattered tile");
    memref_box(L, in);
    L.expect(",", "before the index tile of tscatter");
    int index = src_tile(L);
    in.srcs = {index, src};
    attributes(L, in, false);
    if (in.axis < 0) L.fail("expected axis= in tscatter, found " + L.found());
    L.expect_end();
    body().push_back(Stmt{std::move(in)});
  }

  std::vector<std::string_view> lines_;
  ExecutionGraph g_;
  std::optional<std::string> module_, entry_;
  FnKind pending_kind_ = FnKind::None;
  std::optional<int64_t> pending_bytes_;
  bool had_bytes_comment_ = false;  // the current function took its bytes from a comment
  std::vector<std::string> pending_fused_;
  bool have_orch_ = false;
  std::string orch_name_;
  std::map<std::string, int> functions_;  ///< InCore function name -> index

  // The function being parsed.
  bool in_func_ = false, is_orch_ = false, returned_ = false;
  /// The expressions of each view of the orchestration, checked when it closes (check_view_names).
  struct ViewUse {
    std::string name;
    int line = 0, column = 0;
    std::vector<Expr> exprs;
  };
  std::vector<ViewUse> view_uses_;
  std::string fn_name_;
  InCoreFunction fn_;
  std::map<std::string, int> memref_names_;  ///< params, locals (InCore) or params, workspaces, views
  std::map<std::string, int> tile_names_;
  std::set<std::string> scalar_names_;
  std::set<std::string> read_names_;  ///< variables READ statements bind
  std::vector<Stmt> top_;
  std::vector<Block> blocks_;
};

}  // namespace

ExecutionGraph parse_pto(const std::string& text) {
  try {
    return Parser(text).run();
  } catch (const Error&) {
    throw;  // PtoSyntaxError, or a pypto error class that already says what it is
  } catch (const std::bad_alloc&) {
    throw;  // Python's MemoryError
  } catch (const std::exception& e) {
    // The parser reports every malformed input itself: anything else is a bug in it, not in the text.
    throw InternalError(fmt::format("parse_pto: {}", e.what()));
  }
}

}  // namespace pypto
