// SPDX-License-Identifier: MIT
#include "template/builtins.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "template/text.h"
#include "core/utf8.h"

namespace servelab::jinja {

namespace {

// Argument @p index, or the keyword @p name, or undefined; at most @p count parameters are known.
class Params {
 public:
  Params(const Args& args, std::string_view what, std::initializer_list<std::string_view> names)
      : args_(args), names_(names) {
    if (args.positional.size() > names_.size())
      issue(what, " takes at most ", names_.size(), " arguments, got ", args.positional.size());
    for (const auto& [k, v] : args.keyword)
      if (std::find(names_.begin(), names_.end(), k) == names_.end())
        issue(what, " has no parameter '", k, "' (servelab implements: ", joined(), ")");
  }
  Value operator[](std::size_t i) const {
    if (i < args_.positional.size()) return args_.positional[i];
    for (const auto& [k, v] : args_.keyword)
      if (k == names_[i]) return v;
    return Value();
  }

 private:
  std::string joined() const {
    std::string s;
    for (auto n : names_) s += (s.empty() ? "" : ", ") + std::string(n);
    return s.empty() ? "none" : s;
  }
  const Args& args_;
  std::vector<std::string_view> names_;
};

const std::string& need_string(const Value& v, std::string_view what) {
  if (!v.is_string()) issue(what, " expects a string, got ", v.type_name());
  return v.as_string();
}

std::int64_t need_int(const Value& v, std::string_view what) {
  if (v.kind() == Value::Kind::Int) return v.as_int();
  if (v.kind() == Value::Kind::Bool) return v.as_bool();
  issue(what, " expects an integer, got ", v.type_name());
}

// Python's len().
std::int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return static_cast<std::int64_t>(code_points(v.as_string()));
    case Value::Kind::List:
      if (v.as_list().kind == ListKind::Generator) issue("length of a generator (Python has no len() for it)");
      return static_cast<std::int64_t>(v.as_list().items.size());
    case Value::Kind::Dict: return static_cast<std::int64_t>(v.as_dict().items.size());
    default: issue("object of type '", v.type_name(), "' has no len()");
  }
}

Value generator(std::vector<Value> items) { return Value::list(std::move(items), ListKind::Generator); }

// jinja2's attribute lookup for map/selectattr/sort: `a.b.0`, item first.
Value lookup_path(const Value& v, const std::string& path) {
  Value cur = v;
  for (const std::string& part : python_split(path, ".", false, -1)) {
    if (cur.is_dict()) {
      const Value* found = cur.as_dict().find(part);
      cur = found ? *found : Value();
    } else if (cur.is_list() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      const auto& items = cur.as_list().items;
      const std::size_t i = std::stoul(part);
      cur = i < items.size() ? items[i] : Value();
    } else {
      cur = Value();
    }
  }
  return cur;
}

// select/reject and selectattr/rejectattr: `seq | selectattr('role', 'equalto', 'user')`.
Value select(const Value& seq, const Args& args, bool by_attribute, bool keep) {
  std::size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) issue("selectattr/rejectattr need an attribute name");
    attribute = need_string(args.positional[next++], "selectattr's attribute");
  }
  std::string test;
  Args test_args;
  if (next < args.positional.size()) {
    test = need_string(args.positional[next++], "the test name of select/selectattr");
    if (!has_test(test)) issue("the test '", test, "' is not supported by servelab's template interpreter");
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end());
  }
  if (!args.keyword.empty()) issue("select/selectattr take no keyword arguments here");
  std::vector<Value> out;
  if (!seq.truthy()) return generator({});  // jinja2 checks `if value:` first, so None selects nothing
  for (const Value& item : iterate(seq)) {
    const Value subject = by_attribute ? lookup_path(item, attribute) : item;
    const bool pass = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
    if (pass == keep) out.push_back(item);
  }
  return generator(std::move(out));
}

std::string join(const Value& seq, const std::string& sep, const std::string& attribute) {
  std::string out;
  bool first = true;
  for (const Value& item : iterate(seq)) {
    out += (first ? "" : sep) + (attribute.empty() ? item : lookup_path(item, attribute)).str();
    first = false;
  }
  return out;
}

// The key jinja2's sort, dictsort and unique compare by: strings lower-cased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!v.is_string() || case_sensitive) return v;
  return Value::string(python_case(v.as_string(), "lower"));
}

bool numeric(const Value& v) {
  return v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Float || v.kind() == Value::Kind::Bool;
}

const std::set<std::string_view> kFilters = {
    "abs",        "capitalize", "count", "d",      "default",    "dictsort", "sort",    "unique",   "first",
    "float",      "indent",     "int",   "items",  "join",       "last",     "length",  "list",     "lower",
    "map",        "max",        "min",   "reject", "rejectattr", "replace",  "reverse", "safe",     "select",
    "selectattr", "string",     "sum",   "title",  "tojson",     "trim",     "upper",   "wordcount"};

const std::set<std::string_view> kTests = {
    "boolean", "callable", "defined", "divisibleby", "eq",       "equalto",  "even",   "false", "float",
    "ge",      "gt",       "in",      "integer",     "iterable", "le",       "lower",  "lt",    "mapping",
    "ne",      "none",     "number",  "odd",         "sameas",   "sequence", "string", "true",  "undefined",
    "upper",   "==",       "!=",      "<",           "<=",       ">",        ">="};

}  // namespace

bool has_filter(std::string_view name) { return kFilters.count(name) > 0; }

bool jinja2_has(std::string_view name, bool test) {
  // jinja2 3.1's FILTERS and TESTS, plus transformers' tojson.
  static const std::set<std::string_view> kJinjaFilters = {
      "abs",       "attr",       "batch",       "capitalize", "center",  "count",
      "d",         "default",    "dictsort",    "e",          "escape",  "filesizeformat",
      "first",     "float",      "forceescape", "format",     "groupby", "indent",
      "int",       "join",       "last",        "length",     "list",    "lower",
      "items",     "map",        "min",         "max",        "pprint",  "random",
      "reject",    "rejectattr", "replace",     "reverse",    "round",   "safe",
      "select",    "selectattr", "slice",       "sort",       "string",  "striptags",
      "sum",       "title",      "trim",        "truncate",   "unique",  "upper",
      "urlencode", "urlize",     "wordcount",   "wordwrap",   "xmlattr", "tojson"};
  static const std::set<std::string_view> kJinjaTests = {
      "boolean",  "callable", "defined", "divisibleby", "eq",        "escaped",     "even",     "false",
      "filter",   "float",    "ge",      "gt",          "in",        "integer",     "iterable", "le",
      "lower",    "lt",       "mapping", "ne",          "none",      "number",      "odd",      "sameas",
      "sequence", "string",   "test",    "true",        "undefined", "upper",       "==",       "!=",
      "<",        "<=",       ">",       ">=",          "equalto",   "greaterthan", "lessthan"};
  return (test ? kJinjaTests : kJinjaFilters).count(name) > 0;
}
bool has_test(std::string_view name) { return kTests.count(name) > 0; }

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: {
      const List& l = v.as_list();
      if (l.kind != ListKind::Generator) return l.items;
      if (l.consumed == 2) issue("a generator used again after '|first' is not supported");
      if (l.consumed == 1) return {};  // Python: an exhausted generator yields nothing
      l.consumed = 1;
      return l.items;
    }
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.as_dict().items) keys.push_back(Value::string(k));
      return keys;
    }
    case Value::Kind::String: {
      std::vector<Value> chars;
      const std::string& s = v.as_string();
      for (std::size_t pos = 0; pos < s.size();) {
        const std::size_t start = pos;
        next_code_point(s, pos);
        chars.push_back(Value::string(s.substr(start, pos - start)));
      }
      return chars;
    }
    default: issue("'", v.type_name(), "' object is not iterable");
  }
}

bool less_than(const Value& a, const Value& b) {
  if (numeric(a) && numeric(b)) {
    if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float) return need_int(a, "<") < need_int(b, "<");
    return a.to_double() < b.to_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order is code point order
  issue("'<' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

bool apply_test(std::string_view name, const Value& v, const Args& args) {
  const Params p(args, "the test '" + std::string(name) + "'", {"other"});
  const Value other = p[0];
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == K::Bool;
  if (name == "true") return v.kind() == K::Bool && v.as_bool();
  if (name == "false") return v.kind() == K::Bool && !v.as_bool();
  if (name == "integer") return v.kind() == K::Int;
  if (name == "float") return v.kind() == K::Float;
  if (name == "number") return numeric(v);
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "callable") return v.kind() == K::Function;
  if (name == "iterable") return v.is_undefined() || v.is_list() || v.is_dict() || v.is_string();
  if (name == "sequence")
    return v.is_string() || v.is_dict() || (v.is_list() && v.as_list().kind != ListKind::Generator);
  if (name == "odd" || name == "even" || name == "divisibleby") {
    const std::int64_t n = need_int(v, "the test '" + std::string(name) + "'");
    if (name == "odd") return n % 2 != 0;
    if (name == "even") return n % 2 == 0;
    const std::int64_t d = need_int(other, "divisibleby's divisor");
    if (d == 0) issue("divisibleby(0): integer division by zero");
    return n % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return v.equals(other);
  if (name == "ne" || name == "!=") return !v.equals(other);
  if (name == "lt" || name == "<") return less_than(v, other);
  if (name == "gt" || name == ">") return less_than(other, v);
  if (name == "le" || name == "<=") return !less_than(other, v);
  if (name == "ge" || name == ">=") return !less_than(v, other);
  if (name == "in") {
    for (const Value& item : iterate(other))
      if (item.equals(v)) return true;
    return false;
  }
  if (name == "sameas") {
    // Python's `is`: None, True and False are singletons; other objects are only themselves.
    if (v.is_none() || other.is_none() || v.kind() == K::Bool || other.kind() == K::Bool)
      return v.kind() == other.kind() && v.equals(other);
    issue("'sameas' of two values of type ", v.type_name(), " (object identity) is not supported");
  }
  if (name == "lower" || name == "upper") {
    const std::string& s = need_string(v, "the test '" + std::string(name) + "'");
    bool cased = false;
    for (const char c : s) {
      if (static_cast<unsigned char>(c) >= 0x80) issue("the test '", name, "' of non-ASCII text is not supported");
      if (std::isalpha(static_cast<unsigned char>(c))) {
        cased = true;
        if ((name == "lower") != (std::islower(static_cast<unsigned char>(c)) != 0)) return false;
      }
    }
    return cased;
  }
  issue("the test '", name, "' is not supported by servelab's template interpreter");
}

Value apply_filter(std::string_view name, const Value& v, const Args& args) {
  const std::string what = "the filter '" + std::string(name) + "'";
  // A Markup keeps its type through most filters, with escaping rules of its own; only these are the same.
  if (v.is_markup() && name != "safe" && name != "length" && name != "count" && name != "default" && name != "d" &&
      name != "tojson")
    issue(what, " of a |safe (Markup) string is not supported");
  if (name == "default" || name == "d") {
    const Params p(args, what, {"default_value", "boolean"});
    const Value fallback = p[0].is_undefined() ? Value::string("") : p[0];
    return v.is_undefined() || (p[1].truthy() && !v.truthy()) ? fallback : v;
  }
  if (name == "length" || name == "count") return Params(args, what, {}), Value::integer(length(v));
  if (name == "string") return Params(args, what, {}), Value::string(v.str());
  if (name == "safe") return Params(args, what, {}), Value::markup(v.str());
  if (name == "trim") {
    const Params p(args, what, {"chars"});
    return Value::string(python_strip(v.str(), p[0].is_undefined() || p[0].is_none() ? "" : need_string(p[0], what)));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
    return Params(args, what, {}), Value::string(python_case(v.str(), name));
  if (name == "tojson") {
    const Params p(args, what, {"ensure_ascii", "indent", "separators", "sort_keys"});
    JsonLayout layout;
    layout.ensure_ascii = p[0].truthy();
    if (!p[1].is_undefined() && !p[1].is_none()) layout.indent = static_cast<int>(need_int(p[1], "tojson's indent"));
    if (!p[2].is_undefined() && !p[2].is_none()) {
      const auto seps = iterate(p[2]);
      if (seps.size() != 2) issue("tojson's separators must be (item_separator, key_separator)");
      layout.item_separator = need_string(seps[0], "tojson's separators");
      layout.key_separator = need_string(seps[1], "tojson's separators");
      if (layout.item_separator.empty()) issue("tojson with an empty item separator is not supported");
    }
    layout.sort_keys = p[3].truthy();
    return Value::string(to_json(v, layout));
  }
  if (name == "join") {
    const Params p(args, what, {"d", "attribute"});
    return Value::string(join(v, p[0].is_undefined() ? "" : need_string(p[0], what),
                              p[1].is_undefined() ? "" : need_string(p[1], what)));
  }
  if (name == "items") {
    Params(args, what, {});
    if (v.is_undefined()) return generator({});
    if (!v.is_dict()) issue("|items expects a mapping, got ", v.type_name());
    std::vector<Value> pairs;
    for (const auto& [k, x] : v.as_dict().items) pairs.push_back(Value::list({Value::string(k), x}, ListKind::Tuple));
    return generator(std::move(pairs));
  }
  if (name == "list") return Params(args, what, {}), Value::list(iterate(v));
  if (name == "first") {
    Params(args, what, {});
    if (v.is_list() && v.as_list().kind == ListKind::Generator) {
      auto items = iterate(v);
      v.as_list().consumed = items.size() > 1 ? 2 : 1;
      return items.empty() ? Value() : items[0];
    }
    auto items = iterate(v);
    return items.empty() ? Value() : items[0];
  }
  if (name == "last") {
    Params(args, what, {});
    if (v.is_list() && v.as_list().kind == ListKind::Generator)
      issue("|last of a generator (Python cannot reverse it)");
    auto items = iterate(v);
    return items.empty() ? Value() : items.back();
  }
  if (name == "reverse") {
    Params(args, what, {});
    if (v.is_string()) {
      auto chars = iterate(v);
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->as_string();
      return Value::string(out);
    }
    auto items = iterate(v);
    std::reverse(items.begin(), items.end());
    return generator(std::move(items));
  }
  if (name == "map") {
    std::vector<Value> out;
    if (!v.truthy()) return generator({});  // as select: `if value:` first
    const auto pos = args.positional;
    const Value* attribute = nullptr;
    const Value* fallback = nullptr;
    for (const auto& [k, x] : args.keyword) {
      if (k == "attribute")
        attribute = &x;
      else if (k == "default")
        fallback = &x;
      else
        issue("map has no parameter '", k, "'");
    }
    if (attribute) {
      if (!pos.empty()) issue("map(attribute=...) takes no positional arguments");
      for (const Value& item : iterate(v)) {
        Value got = lookup_path(item, need_string(*attribute, "map's attribute"));
        out.push_back(got.is_undefined() && fallback ? *fallback : got);
      }
    } else {
      if (pos.empty()) issue("map needs a filter name or attribute=");
      const std::string& filter = need_string(pos[0], "map's filter name");
      if (!has_filter(filter)) issue("the filter '", filter, "' is not supported by servelab's template interpreter");
      Args rest;
      rest.positional.assign(pos.begin() + 1, pos.end());
      for (const Value& item : iterate(v)) out.push_back(apply_filter(filter, item, rest));
    }
    return generator(std::move(out));
  }
  if (name == "select" || name == "reject") return select(v, args, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select(v, args, true, name == "selectattr");
  if (name == "replace") {
    const Params p(args, what, {"old", "new", "count"});
    const std::string s = v.str(), old = need_string(p[0], what), with = need_string(p[1], what);
    const std::int64_t count = p[2].is_undefined() || p[2].is_none() ? -1 : need_int(p[2], what);
    if (old.empty()) issue("replace with an empty 'old' string is not supported");
    std::string out;
    std::size_t pos = 0;
    for (std::int64_t n = 0; count < 0 || n < count; ++n) {
      const std::size_t at = s.find(old, pos);
      if (at == std::string::npos) break;
      out += s.substr(pos, at - pos) + with;
      pos = at + old.size();
    }
    return Value::string(out + s.substr(pos));
  }
  if (name == "indent") {
    const Params p(args, what, {"width", "first", "blank"});
    const std::string pad =
        p[0].is_undefined() ? "    "
        : p[0].is_string()
            ? p[0].as_string()
            : std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, need_int(p[0], what))), ' ');
    const std::string s = v.str();
    for (const std::string_view other :
         {"\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xa9"})
      if (s.find(other) != std::string::npos) issue("indent of text with line breaks other than \\n is not supported");
    // jinja2 3.1: "\n" joins the lines; blank lines stay unindented unless blank=True.
    const auto lines = python_split(s, "\n", false, -1);
    std::string out;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const bool indent_it = i == 0 ? p[1].truthy() : p[2].truthy() || !lines[i].empty();
      out += (i ? "\n" : "") + (indent_it ? pad : "") + lines[i];
    }
    return Value::string(out);
  }
  if (name == "int") {
    const Params p(args, what, {"default", "base"});
    const Value fallback = p[0].is_undefined() ? Value::integer(0) : p[0];
    if (!p[1].is_undefined()) issue("int(base=...) is not supported");
    if (v.kind() == Value::Kind::Int) return v;
    if (v.kind() == Value::Kind::Bool) return Value::integer(v.as_bool());
    if (v.kind() == Value::Kind::Float) return Value::integer(static_cast<std::int64_t>(std::trunc(v.as_float())));
    if (v.is_string()) {
      const std::string s = python_strip(v.as_string());
      try {
        std::size_t used = 0;
        const long long n = std::stoll(s, &used);
        if (used == s.size()) return Value::integer(n);
      } catch (const std::exception&) {
      }
      issue("int of the string '", s, "' (jinja2 tries it as a float next) is not supported");
    }
    return fallback;
  }
  if (name == "float") {
    Params(args, what, {"default"});
    if (numeric(v)) return Value::number(v.to_double());
    issue("float of a ", v.type_name(), " is not supported");
  }
  if (name == "abs") {
    Params(args, what, {});
    if (v.kind() == Value::Kind::Float) return Value::number(std::fabs(v.as_float()));
    const std::int64_t n = need_int(v, what);
    return Value::integer(n < 0 ? -n : n);
  }
  if (name == "sum" || name == "max" || name == "min") {
    if (!args.positional.empty() || !args.keyword.empty()) issue(what, " with arguments is not supported");
    const auto items = iterate(v);
    if (name == "sum") {
      bool is_float = false;
      std::int64_t total = 0;
      double ftotal = 0;
      for (const Value& x : items) {
        if (!numeric(x)) issue("sum of a ", x.type_name());
        if (x.kind() == Value::Kind::Float) is_float = true;
        ftotal += x.to_double();
        if (!is_float) total += need_int(x, what);
      }
      return is_float ? Value::number(ftotal) : Value::integer(total);
    }
    if (items.empty()) return Value();
    Value best = items[0];
    for (const Value& x : items) {
      if (x.is_string()) issue(what, " of strings (jinja2 compares them case-insensitively) is not supported");
      if (name == "max" ? less_than(best, x) : less_than(x, best)) best = x;
    }
    return best;
  }
  if (name == "dictsort") {
    const Params p(args, what, {"case_sensitive", "by", "reverse"});
    if (!v.is_dict()) issue("dictsort expects a mapping, got ", v.type_name());
    const bool by_value = !p[1].is_undefined() && need_string(p[1], what) == "value";
    if (!p[1].is_undefined() && !by_value && p[1].as_string() != "key")
      issue("dictsort's 'by' must be 'key' or 'value'");
    std::vector<Value> pairs;
    for (const auto& [k, x] : v.as_dict().items) pairs.push_back(Value::list({Value::string(k), x}, ListKind::Tuple));
    const bool cs = p[0].truthy(), reverse = p[2].truthy();
    const std::size_t i = by_value ? 1 : 0;
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
      const Value ka = sort_key(a.as_list().items[i], cs), kb = sort_key(b.as_list().items[i], cs);
      return reverse ? less_than(kb, ka) : less_than(ka, kb);
    });
    return Value::list(std::move(pairs));
  }
  if (name == "sort" || name == "unique") {
    const bool sort = name == "sort";
    const Params p(args, what,
                   sort ? std::initializer_list<std::string_view>{"reverse", "case_sensitive", "attribute"}
                        : std::initializer_list<std::string_view>{"case_sensitive", "attribute"});
    const bool cs = p[sort ? 1 : 0].truthy();
    const Value attr = p[sort ? 2 : 1];
    const std::string attribute = attr.is_undefined() || attr.is_none() ? "" : need_string(attr, what);
    const auto key = [&](const Value& x) { return sort_key(attribute.empty() ? x : lookup_path(x, attribute), cs); };
    std::vector<Value> items = iterate(v);
    if (sort) {
      const bool reverse = p[0].truthy();
      // Python's sorted(reverse=True) is stable too: equal keys keep their order.
      std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        return reverse ? less_than(key(b), key(a)) : less_than(key(a), key(b));
      });
      return Value::list(std::move(items));
    }
    std::vector<Value> seen, out;
    for (const Value& x : items) {
      const Value k = key(x);
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s2) { return s2.equals(k); }))
        seen.push_back(k), out.push_back(x);
    }
    return generator(std::move(out));
  }
  if (name == "wordcount")
    return Params(args, what, {}),
           Value::integer(static_cast<std::int64_t>(python_split(v.str(), "", true, -1).size()));
  issue(what, " is not supported by servelab's template interpreter");
}

bool has_method(const Value& object, std::string_view name) {
  static const std::set<std::string_view> kString = {"strip",    "lstrip", "rstrip", "split", "startswith",
                                                     "endswith", "upper",  "lower",  "title", "capitalize",
                                                     "replace",  "find",   "count",  "join",  "format"};
  static const std::set<std::string_view> kDict = {"items", "keys", "values", "get"};
  if (object.is_string()) return kString.count(name) > 0;
  if (object.is_dict()) return kDict.count(name) > 0;
  return false;
}

Value call_method(const Value& object, const std::string& name, const Args& args) {
  const std::string what = std::string(object.type_name()) + "." + name + "()";
  if (object.is_markup()) issue("the method ", what, " of a |safe (Markup) string is not supported");
  if (!has_method(object, name)) issue("the method ", what, " is not supported by servelab's template interpreter");
  if (object.is_dict()) {
    const Dict& d = object.as_dict();
    if (name == "get") {
      const Params p(args, what, {"key", "default"});
      const Value* found = p[0].is_string() ? d.find(p[0].as_string()) : nullptr;
      return found ? *found : p[1].is_undefined() ? Value::none() : p[1];
    }
    Params(args, what, {});
    std::vector<Value> out;
    for (const auto& [k, x] : d.items)
      out.push_back(name == "keys"     ? Value::string(k)
                    : name == "values" ? x
                                       : Value::list({Value::string(k), x}, ListKind::Tuple));
    return Value::list(std::move(out), ListKind::View);
  }
  const std::string& s = object.as_string();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Params p(args, what, {"chars"});
    const std::string chars = p[0].is_undefined() || p[0].is_none() ? "" : need_string(p[0], what);
    return Value::string(python_strip(s, chars, name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    const Params p(args, what, {"sep", "maxsplit"});
    const bool ws = p[0].is_undefined() || p[0].is_none();
    const long maxsplit = p[1].is_undefined() ? -1 : static_cast<long>(need_int(p[1], what));
    std::vector<Value> parts;
    for (auto& part : python_split(s, ws ? "" : need_string(p[0], what), ws, maxsplit))
      parts.push_back(Value::string(std::move(part)));
    return Value::list(std::move(parts));
  }
  if (name == "startswith" || name == "endswith") {
    const Params p(args, what, {"prefix"});
    std::vector<Value> options = p[0].is_list() ? p[0].as_list().items : std::vector<Value>{p[0]};
    for (const Value& o : options) {
      const std::string& x = need_string(o, what);
      if (name == "startswith" ? s.starts_with(x) : s.ends_with(x)) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
    return Params(args, what, {}), Value::string(python_case(s, name));
  if (name == "replace") return apply_filter("replace", object, args);
  if (name == "find" || name == "count") {
    const Params p(args, what, {"sub"});
    const std::string& sub = need_string(p[0], what);
    if (name == "find") {
      const std::size_t at = s.find(sub);
      return Value::integer(at == std::string::npos ? -1 : static_cast<std::int64_t>(code_points(s.substr(0, at))));
    }
    if (sub.empty()) return Value::integer(static_cast<std::int64_t>(code_points(s) + 1));
    std::int64_t n = 0;
    for (std::size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
    return Value::integer(n);
  }
  if (name == "format") {  // str.format with `{}` / `{0}` fields only
    if (!args.keyword.empty()) issue("str.format() with keyword fields is not supported");
    std::string out;
    std::size_t next_auto = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if ((s[i] == '{' || s[i] == '}') && i + 1 < s.size() && s[i + 1] == s[i]) {
        out += s[i++];
        continue;
      }
      if (s[i] == '}') issue("str.format(): single '}' in the format string");
      if (s[i] != '{') {
        out += s[i];
        continue;
      }
      const std::size_t close = s.find('}', i);
      if (close == std::string::npos) issue("str.format(): '{' without '}'");
      const std::string field = s.substr(i + 1, close - i - 1);
      std::size_t index = next_auto++;
      if (!field.empty()) {
        if (!std::all_of(field.begin(), field.end(), ::isdigit))
          issue("str.format() field '{", field, "}' is not supported (only {} and {N})");
        index = std::stoul(field);
      }
      if (index >= args.positional.size()) issue("str.format(): no argument for field ", index);
      out += args.positional[index].str();
      i = close;
    }
    return Value::string(out);
  }
  // join
  const Params p(args, what, {"iterable"});
  std::string out;
  bool first = true;
  for (const Value& item : iterate(p[0])) {
    out += (first ? "" : s) + need_string(item, what);
    first = false;
  }
  return Value::string(out);
}

}  // namespace servelab::jinja
