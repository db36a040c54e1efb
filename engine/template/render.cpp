// SPDX-License-Identifier: MIT
// The interpreter: statements write to an output string, expressions
// evaluate to Values. Scoping is jinja2's: a for loop's body gets a fresh
// scope each iteration (a `set` there is gone at the next one, which is why
// templates use namespace()), `if` adds no scope, a macro sees its
// arguments and the template's top level.
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/utf8.h"
#include "template/ast.h"
#include "template/builtins.h"
#include "template/template.h"
#include "template/text.h"

namespace servelab::jinja {

namespace {

struct Scope {
  const Scope* parent = nullptr;
  Dict vars;
  const Value* find(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent)
      if (const Value* v = s->vars.find(name)) return v;
    return nullptr;
  }
};

enum class Flow { Normal, Break, Continue };

// Python's ints are unbounded; servelab's stop at 64 bits, with an error rather than a wrapped value.
template <typename Op>
std::int64_t checked(Op op, std::int64_t x, std::int64_t y) {
  std::int64_t r = 0;
  if (op(x, y, &r)) issue("integer overflow (Python's ints are unbounded; servelab's stop at 64 bits)");
  return r;
}
constexpr auto kAdd = [](std::int64_t a, std::int64_t b, std::int64_t* r) { return __builtin_add_overflow(a, b, r); };
constexpr auto kSub = [](std::int64_t a, std::int64_t b, std::int64_t* r) { return __builtin_sub_overflow(a, b, r); };
constexpr auto kMul = [](std::int64_t a, std::int64_t b, std::int64_t* r) { return __builtin_mul_overflow(a, b, r); };

// Python's floor division and modulo: the quotient rounds down, the remainder takes the divisor's sign.
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  if (b == 0) issue("integer division or modulo by zero");
  if (a == std::numeric_limits<std::int64_t>::min() && b == -1) issue("integer overflow");
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

bool is_int_like(const Value& v) { return v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Bool; }
std::int64_t int_of(const Value& v) { return v.kind() == Value::Kind::Bool ? v.as_bool() : v.as_int(); }

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  const auto type_error = [&]() -> Value {
    issue("unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
  };
  if (a.is_number() && b.is_number()) {
    if (is_int_like(a) && is_int_like(b)) {
      const std::int64_t x = int_of(a), y = int_of(b);
      if (op == "+") return Value::integer(checked(kAdd, x, y));
      if (op == "-") return Value::integer(checked(kSub, x, y));
      if (op == "*") return Value::integer(checked(kMul, x, y));
      if (op == "//") return Value::integer(floor_div(x, y));
      if (op == "%") return Value::integer(x - floor_div(x, y) * y);
      if (op == "/") {
        if (y == 0) issue("division by zero");
        return Value::number(static_cast<double>(x) / static_cast<double>(y));
      }
      if (op == "**") {
        if (y < 0) return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
        std::int64_t result = 1;
        for (std::int64_t i = 0; i < y; ++i) result = checked(kMul, result, x);
        return Value::integer(result);
      }
    }
    const double x = a.to_double(), y = b.to_double();
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
    if (op == "**") return Value::number(std::pow(x, y));
    if (y == 0) issue("float division by zero");
    if (op == "/") return Value::number(x / y);
    if (op == "//") return Value::number(std::floor(x / y));
    if (op == "%") {
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::number(m);
    }
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    // markupsafe: Markup + str escapes the str (and str + Markup too, through Markup.__radd__).
    if (a.is_markup() || b.is_markup())
      return Value::markup((a.is_markup() ? a.as_string() : html_escape(a.as_string())) +
                           (b.is_markup() ? b.as_string() : html_escape(b.as_string())));
    return Value::string(a.as_string() + b.as_string());
  }
  if (a.is_markup() || b.is_markup()) issue("'", op, "' on a |safe (Markup) string is not supported");
  if (op == "+" && a.is_list() && b.is_list() && a.as_list().kind == b.as_list().kind &&
      (a.as_list().kind == ListKind::List || a.as_list().kind == ListKind::Tuple)) {
    std::vector<Value> items = a.as_list().items;
    items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
    return Value::list(std::move(items), a.as_list().kind);
  }
  if (op == "*" && (a.is_string() || a.is_list()) && is_int_like(b)) {
    const std::int64_t n = int_of(b);
    if (a.is_string()) {
      if (n > 0 && a.as_string().size() * static_cast<std::size_t>(n) > (std::size_t{1} << 26))
        issue("string repetition past 64 MiB");
      std::string out;
      for (std::int64_t i = 0; i < n; ++i) out += a.as_string();
      return Value::string(out);
    }
    std::vector<Value> items;
    for (std::int64_t i = 0; i < n && items.size() < (1u << 20); ++i)
      items.insert(items.end(), a.as_list().items.begin(), a.as_list().items.end());
    return Value::list(std::move(items), a.as_list().kind);
  }
  if (op == "*" && is_int_like(a) && (b.is_string() || b.is_list())) return arithmetic(op, b, a);
  if (op == "%" && a.is_string()) issue("printf-style string formatting ('...' % args) is not supported");
  return type_error();
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) issue("'in <string>' requires a string as left operand, not ", item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
  for (const Value& x : iterate(container))
    if (x.equals(item)) return true;
  return false;
}

// Python's slice of a list or string, s[start:stop:step].
Value slice(const Value& v, const Value& start_v, const Value& stop_v, const Value& step_v) {
  std::vector<Value> items;
  const bool is_string = v.is_string();
  if (is_string) {
    items = iterate(v);
  } else if (v.is_list() && v.as_list().kind != ListKind::Generator) {
    items = v.as_list().items;
  } else {
    issue("slicing a ", v.type_name(), " is not supported");
  }
  const auto n = static_cast<std::int64_t>(items.size());
  const auto part = [](const Value& x, const char* what) -> std::optional<std::int64_t> {
    if (x.is_undefined() || x.is_none()) return std::nullopt;
    if (!is_int_like(x)) issue("slice ", what, " must be an integer, got ", x.type_name());
    return int_of(x);
  };
  const std::int64_t step = part(step_v, "step").value_or(1);
  if (step == 0) issue("slice step cannot be zero");
  const auto clamp = [&](std::optional<std::int64_t> i, std::int64_t dflt) {
    if (!i) return dflt;
    std::int64_t x = *i < 0 ? *i + n : *i;
    if (step > 0) return std::clamp<std::int64_t>(x, 0, n);
    return std::clamp<std::int64_t>(x, -1, n - 1);
  };
  const std::int64_t start = clamp(part(start_v, "start"), step > 0 ? 0 : n - 1);
  const std::int64_t stop = clamp(part(stop_v, "stop"), step > 0 ? n : -1);
  std::vector<Value> out;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    out.push_back(items[static_cast<std::size_t>(i)]);
  if (!is_string)
    return Value::list(std::move(out), v.as_list().kind == ListKind::Tuple ? ListKind::Tuple : ListKind::List);
  std::string s;
  for (const Value& c : out) s += c.as_string();
  return Value::string(s);
}

// `x.name`: jinja2 tries the Python attribute first, then the item.
Value get_attribute(const Value& v, const std::string& name) {
  if (v.is_undefined()) issue("an attribute ('", name, "') of an undefined value");
  if (has_method(v, name)) issue("the method '", name, "' used without calling it is not supported");
  if (v.is_dict()) {
    const Value* found = v.as_dict().find(name);
    return found ? *found : Value();
  }
  if (v.kind() == Value::Kind::Namespace) {
    const Value* found = v.namespace_attributes().find(name);
    return found ? *found : Value();
  }
  return Value();  // the sandbox answers a missing attribute (of None, a string, a list) with undefined
}

// `x[key]`: the item first, then the attribute.
Value get_item(const Value& v, const Value& key) {
  if (v.is_undefined()) issue("an item of an undefined value");
  if (v.is_dict()) {
    if (!key.is_string()) return Value();
    const Value* found = v.as_dict().find(key.as_string());
    if (found) return *found;
    if (has_method(v, key.as_string())) issue("the method '", key.as_string(), "' used without calling it");
    return Value();
  }
  if ((v.is_list() || v.is_string()) && is_int_like(key)) {
    if (v.is_list() && v.as_list().kind == ListKind::Generator) issue("indexing a generator");
    const std::vector<Value> items = v.is_list() ? v.as_list().items : iterate(v);
    std::int64_t i = int_of(key);
    if (i < 0) i += static_cast<std::int64_t>(items.size());
    if (i < 0 || i >= static_cast<std::int64_t>(items.size())) return Value();
    return items[static_cast<std::size_t>(i)];
  }
  if (key.is_string()) return get_attribute(v, key.as_string());
  return Value();
}

class Renderer {
 public:
  Renderer(const std::string& origin, const Limits& limits) : origin_(origin), limits_(limits) {}

  Flow exec(const std::vector<Node>& body, Scope& scope, std::string& out) {
    for (const Node& n : body) {
      const Flow f = exec(n, scope, out);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  const Scope* root = nullptr;

 private:
  [[noreturn]] void error(int line, const std::string& what) const {
    fail(origin_, ": chat template line ", line, ": ", what);
  }

  void write(std::string& out, std::string_view text, int line) const {
    if (out.size() + text.size() > limits_.max_output_bytes)
      error(line, "the rendered text passed " + std::to_string(limits_.max_output_bytes) + " bytes (the output limit)");
    out += text;
  }

  void bind(Scope& scope, const std::vector<std::string>& targets, const Value& v, int line) {
    if (targets.size() == 1) {
      scope.vars.set(targets[0], v);
      return;
    }
    std::vector<Value> items;
    try {
      items = iterate(v);
    } catch (const Issue& e) {
      error(line, e.what());
    }
    if (items.size() != targets.size())
      error(line, "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) +
                      " names");
    for (std::size_t i = 0; i < targets.size(); ++i) scope.vars.set(targets[i], items[i]);
  }

  Flow exec(const Node& n, Scope& scope, std::string& out) {
    switch (n.kind) {
      case Node::Kind::Text: write(out, n.text, n.line); return Flow::Normal;
      case Node::Kind::Output: {
        const Value v = eval(n.expr, scope);
        std::string text;
        try {
          text = v.str();
        } catch (const Issue& e) {
          error(n.line, e.what());
        }
        write(out, text, n.line);
        return Flow::Normal;
      }
      case Node::Kind::If:
        for (const auto& b : n.branches)
          if (b.is_else || eval(b.condition, scope).truthy()) return exec(b.body, scope, out);
        return Flow::Normal;
      case Node::Kind::For: return exec_for(n, scope, out);
      case Node::Kind::Set: {
        const Value v = eval(n.expr, scope);
        if (n.attribute.empty()) {
          bind(scope, n.targets, v, n.line);
          return Flow::Normal;
        }
        const Value* ns = scope.find(n.targets[0]);
        if (!ns || ns->kind() != Value::Kind::Namespace)
          error(n.line, "'set " + n.targets[0] + "." + n.attribute + "': " + n.targets[0] + " is not a namespace()");
        ns->namespace_attributes().set(n.attribute, v);
        return Flow::Normal;
      }
      case Node::Kind::SetBlock: {
        std::string captured;
        exec(n.body, scope, captured);
        scope.vars.set(n.targets[0], Value::string(std::move(captured)));
        return Flow::Normal;
      }
      case Node::Kind::Macro: define_macro(n, scope); return Flow::Normal;
      case Node::Kind::Break: return Flow::Break;
      case Node::Kind::Continue: return Flow::Continue;
      case Node::Kind::Block: return exec(n.body, scope, out);
      case Node::Kind::FilterBlock: {
        std::string body;
        const Flow f = exec(n.body, scope, body);
        // The filter chain's innermost operand is the placeholder literal; evaluate with the body in its place.
        Expr chain = n.expr;
        Expr* inner = &chain;
        while (inner->kind == Expr::Kind::Filter && inner->args[0].kind == Expr::Kind::Filter) inner = &inner->args[0];
        inner->args[0].value = Value::string(std::move(body));
        const Value v = eval(chain, scope);
        try {
          write(out, v.str(), n.line);
        } catch (const Issue& e) {
          error(n.line, e.what());
        }
        return f;
      }
    }
    return Flow::Normal;
  }

  Flow exec_for(const Node& n, Scope& scope, std::string& out) {
    std::vector<Value> items;
    try {
      items = iterate(eval(n.expr, scope));
    } catch (const Issue& e) {
      error(n.line, e.what());
    }
    if (n.has_filter) {  // `for x in xs if cond`: the loop (and loop.length) sees only the kept items
      std::vector<Value> kept;
      for (const Value& item : items) {
        Scope probe;
        probe.parent = &scope;
        bind(probe, n.targets, item, n.line);
        if (eval(n.filter, probe).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const auto count = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < count; ++i) {
      if (++iterations_ > limits_.max_loop_iterations)
        error(n.line, "more than " + std::to_string(limits_.max_loop_iterations) + " loop iterations (the loop limit)");
      Scope body;
      body.parent = &scope;
      bind(body, n.targets, items[static_cast<std::size_t>(i)], n.line);
      Dict loop;
      loop.set("index", Value::integer(i + 1));
      loop.set("index0", Value::integer(i));
      loop.set("revindex", Value::integer(count - i));
      loop.set("revindex0", Value::integer(count - i - 1));
      loop.set("first", Value::boolean(i == 0));
      loop.set("last", Value::boolean(i == count - 1));
      loop.set("length", Value::integer(count));
      loop.set("depth", Value::integer(1));
      loop.set("depth0", Value::integer(0));
      if (i > 0) loop.set("previtem", items[static_cast<std::size_t>(i - 1)]);
      if (i + 1 < count) loop.set("nextitem", items[static_cast<std::size_t>(i + 1)]);
      loop.set("cycle", Value::function("loop.cycle", [i](const Args& a) {
                 if (a.positional.empty()) issue("loop.cycle() needs at least one value");
                 return a.positional[static_cast<std::size_t>(i) % a.positional.size()];
               }));
      body.vars.set("loop", Value::dict(std::move(loop)));
      if (exec(n.body, body, out) == Flow::Break) break;
    }
    if (count == 0) return exec(n.else_body, scope, out);
    return Flow::Normal;
  }

  void define_macro(const Node& n, Scope& scope) {
    const Node* node = &n;
    scope.vars.set(n.text, Value::function(n.text, [this, node](const Args& args) {
                     if (++call_depth_ > limits_.max_call_depth)
                       issue("macro calls nested deeper than ", limits_.max_call_depth, " (the call depth limit)");
                     struct Leave {
                       int& depth;
                       ~Leave() { --depth; }
                     } leave{call_depth_};
                     if (args.positional.size() > node->params.size())
                       issue("macro '", node->text, "' takes ", node->params.size(), " arguments, got ",
                             args.positional.size());
                     Scope local;
                     local.parent = root;
                     for (std::size_t i = 0; i < node->params.size(); ++i) {
                       // Not a structured binding: clang 14 cannot capture one in the lambda below.
                       const std::string& name = node->params[i].first;
                       const Expr& def = node->params[i].second;
                       Value v;
                       if (i < args.positional.size()) {
                         v = args.positional[i];
                       } else if (const auto it = std::find_if(args.keyword.begin(), args.keyword.end(),
                                                               [&](const auto& kw) { return kw.first == name; });
                                  it != args.keyword.end()) {
                         v = it->second;
                       } else if (node->has_default[i]) {
                         v = eval(def, local);
                       }
                       local.vars.set(name, v);
                     }
                     for (const auto& [k, v] : args.keyword)
                       if (!local.vars.find(k)) issue("macro '", node->text, "' has no parameter '", k, "'");
                     std::string captured;
                     exec(node->body, local, captured);
                     return Value::string(std::move(captured));
                   }));
  }

  Args eval_args(const Expr& e, Scope& scope, std::size_t skip) {
    Args a;
    for (std::size_t i = skip; i < e.args.size(); ++i) a.positional.push_back(eval(e.args[i], scope));
    for (const auto& [k, v] : e.kwargs) a.keyword.emplace_back(k, eval(v, scope));
    return a;
  }

 public:
  Value eval(const Expr& e, Scope& scope) {
    try {
      return eval_inner(e, scope);
    } catch (const Issue& i) {
      error(e.line, i.what());
    }
  }

 private:
  Value eval_inner(const Expr& e, Scope& scope) {
    using K = Expr::Kind;
    switch (e.kind) {
      case K::Literal: return e.value;
      case K::Name: {
        const Value* v = scope.find(e.name);
        return v ? *v : Value();
      }
      case K::Attribute: return get_attribute(eval(e.args[0], scope), e.name);
      case K::Item: return get_item(eval(e.args[0], scope), eval(e.args[1], scope));
      case K::Slice:
        return slice(eval(e.args[0], scope), eval(e.args[1], scope), eval(e.args[2], scope), eval(e.args[3], scope));
      case K::Call: {
        const Expr& callee = e.args[0];
        if (callee.kind == K::Attribute) {
          const Value object = eval(callee.args[0], scope);
          if (has_method(object, callee.name)) return call_method(object, callee.name, eval_args(e, scope, 1));
          if (object.is_string() || object.is_dict() || object.is_list())
            issue("the method ", object.type_name(), ".", callee.name,
                  "() is not supported by servelab's template interpreter");
        }
        const Value f = eval(callee, scope);
        if (f.kind() != Value::Kind::Function) {
          if (f.is_undefined() && callee.kind == K::Name)
            issue("'", callee.name, "' is undefined (called as a function)");
          issue("a ", f.type_name(), " is not callable");
        }
        return f.as_function().call(eval_args(e, scope, 1));
      }
      case K::Filter: return apply_filter(e.name, eval(e.args[0], scope), eval_args(e, scope, 1));
      case K::Test: {
        const bool r = apply_test(e.name, eval(e.args[0], scope), eval_args(e, scope, 1));
        return Value::boolean(r != e.negate);
      }
      case K::Not: return Value::boolean(!eval(e.args[0], scope).truthy());
      case K::Negate: {
        const Value v = eval(e.args[0], scope);
        if (is_int_like(v)) return arithmetic("-", Value::integer(0), v);
        if (v.kind() == Value::Kind::Float) return Value::number(-v.as_float());
        issue("bad operand type for unary -: '", v.type_name(), "'");
      }
      case K::Binary: {
        if (e.name == "and" || e.name == "or") {
          Value a = eval(e.args[0], scope);
          if (a.truthy() == (e.name == "or")) return a;
          return eval(e.args[1], scope);
        }
        const Value a = eval(e.args[0], scope), b = eval(e.args[1], scope);
        if (e.name == "~") return Value::string(a.str() + b.str());
        return arithmetic(e.name, a, b);
      }
      case K::Compare: {
        Value left = eval(e.args[0], scope);
        for (std::size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(e.args[i + 1], scope);
          const std::string& op = e.ops[i];
          bool r = false;
          if (op == "==")
            r = left.equals(right);
          else if (op == "!=")
            r = !left.equals(right);
          else if (op == "<")
            r = less_than(left, right);
          else if (op == ">")
            r = less_than(right, left);
          else if (op == "<=")
            r = !less_than(right, left);
          else if (op == ">=")
            r = !less_than(left, right);
          else if (op == "in")
            r = contains(right, left);
          else
            r = !contains(right, left);
          if (!r) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case K::Conditional:
        if (eval(e.args[0], scope).truthy()) return eval(e.args[1], scope);
        return e.args.size() > 2 ? eval(e.args[2], scope) : Value();
      case K::ListLiteral:
      case K::TupleLiteral: {
        std::vector<Value> items;
        for (const Expr& x : e.args) items.push_back(eval(x, scope));
        return Value::list(std::move(items), e.kind == K::TupleLiteral ? ListKind::Tuple : ListKind::List);
      }
      case K::DictLiteral: {
        Dict d;
        for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value key = eval(e.args[i], scope);
          if (!key.is_string()) issue("dict keys other than strings are not supported");
          d.set(key.as_string(), eval(e.args[i + 1], scope));
        }
        return Value::dict(std::move(d));
      }
    }
    return Value();
  }

  const std::string& origin_;
  const Limits& limits_;
  std::int64_t iterations_ = 0;
  int call_depth_ = 0;
};

// jinja2's namespace(), dict() and range(), and transformers' raise_exception().
void add_globals(Dict& g) {
  const auto keywords = [](const Args& a, const char* what) {
    Dict d;
    for (const Value& p : a.positional) {
      if (!p.is_dict()) issue(what, "() takes a dict or keyword arguments, got ", p.type_name());
      for (const auto& [k, v] : p.as_dict().items) d.set(k, v);
    }
    for (const auto& [k, v] : a.keyword) d.set(k, v);
    return d;
  };
  g.set("namespace", Value::function("namespace", [keywords](const Args& a) {
          return Value::namespace_of(keywords(a, "namespace"));
        }));
  g.set("dict", Value::function("dict", [keywords](const Args& a) { return Value::dict(keywords(a, "dict")); }));
  g.set("range", Value::function("range", [](const Args& a) {
          if (!a.keyword.empty() || a.positional.empty() || a.positional.size() > 3)
            issue("range() takes 1 to 3 integers");
          std::vector<std::int64_t> p;
          for (const Value& v : a.positional) {
            if (!is_int_like(v)) issue("range() takes integers, got ", v.type_name());
            p.push_back(int_of(v));
          }
          const std::int64_t start = p.size() == 1 ? 0 : p[0], stop = p.size() == 1 ? p[0] : p[1],
                             step = p.size() == 3 ? p[2] : 1;
          if (step == 0) issue("range() step must not be zero");
          std::vector<Value> items;
          for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            // jinja2's sandbox caps range() at MAX_RANGE = 100000 items too.
            if (items.size() >= 100'000) issue("range too big (more than 100,000 items, jinja2's sandbox limit)");
            items.push_back(Value::integer(i));
          }
          return Value::list(std::move(items), ListKind::View);
        }));
  g.set("raise_exception", Value::function("raise_exception", [](const Args& a) -> Value {
          issue("the template raised an exception: ", a.positional.empty() ? std::string() : a.positional[0].str());
        }));
}

}  // namespace

Template::Template(std::string_view source, std::string origin)
    : origin_(std::move(origin)), body_(std::make_shared<const std::vector<Node>>(parse_template(source, origin_))) {}

std::string Template::render(const Dict& variables, const Limits& limits) const {
  Scope globals;
  add_globals(globals.vars);
  Scope top;
  top.parent = &globals;
  top.vars = variables;
  Renderer r(origin_, limits);
  r.root = &top;
  std::string out;
  r.exec(*body_, top, out);
  return out;
}

}  // namespace servelab::jinja
