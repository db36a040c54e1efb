// SPDX-License-Identifier: MIT
#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/utf8.h"
#include "template/text.h"

namespace servelab::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : items)
    if (k == key) {
      v = std::move(value);
      return;
    }
  items.emplace_back(key, std::move(value));
}

Value Value::none() { return make(Kind::None, std::monostate{}); }
Value Value::boolean(bool b) { return make(Kind::Bool, b); }
Value Value::integer(std::int64_t i) { return make(Kind::Int, i); }
Value Value::number(double d) { return make(Kind::Float, d); }
Value Value::string(std::string s) { return make(Kind::String, std::move(s)); }

Value Value::markup(std::string s) {
  Value v = string(std::move(s));
  v.markup_ = true;
  return v;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&#39;"; break;
      case '"': out += "&#34;"; break;
      default: out += c;
    }
  }
  return out;
}

Value Value::list(std::vector<Value> items, ListKind kind) {
  return make(Kind::List, std::make_shared<const List>(List{.items = std::move(items), .kind = kind, .consumed = 0}));
}
Value Value::dict(Dict d) { return make(Kind::Dict, std::make_shared<const Dict>(std::move(d))); }
Value Value::namespace_of(Dict attributes) {
  return make(Kind::Namespace, std::make_shared<Dict>(std::move(attributes)));
}
Value Value::function(std::string name, std::function<Value(const Args&)> call) {
  return make(Kind::Function, std::make_shared<const Function>(Function{std::move(name), std::move(call)}));
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return integer(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      check(u <= static_cast<std::uint64_t>(INT64_MAX), "template input: integer ", u, " is larger than 2^63-1");
      return integer(static_cast<std::int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.items.emplace_back(k, from_json(e));
      return dict(std::move(d));
    }
    default: fail("template input: a JSON value of an unsupported type (binary)");
  }
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: {
      const ListKind k = as_list().kind;
      return k == ListKind::Tuple ? "tuple" : k == ListKind::List ? "list" : k == ListKind::View ? "view" : "generator";
    }
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Function: return "function";
  }
  return "?";
}

double Value::to_double() const {
  if (kind_ == Kind::Bool) return as_bool() ? 1 : 0;
  if (kind_ == Kind::Int) return static_cast<double>(as_int());
  return as_float();
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_float() != 0;
    case Kind::String: return !as_string().empty();
    case Kind::List: return as_list().kind == ListKind::Generator || !as_list().items.empty();
    case Kind::Dict: return !as_dict().items.empty();
    default: return true;
  }
}

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest round-tripping digits, as "d.ddde[+-]XX"; Python then writes them
  // positionally when the decimal point falls in (-4, 16], else in scientific form.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') sign = "-", sci.erase(0, 1);
  const std::size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::stoi(sci.substr(e + 1));
  const int point = exponent + 1;  // value = 0.digits × 10^point
  const int n = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {
    if (point <= 0) return sign + "0." + std::string(-point, '0') + digits;
    if (point >= n) return sign + digits + std::string(point - n, '0') + ".0";
    return sign + digits.substr(0, point) + "." + digits.substr(point);
  }
  std::string mantissa = digits.substr(0, 1);
  if (n > 1) mantissa += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return sign + mantissa + exp;
}

namespace {

// Python's str.isprintable() for the code points a template's text can carry: the
// ASCII controls, Latin-1's controls and no-break space, and the Unicode separators
// and format characters. Other code points are taken as printable; unassigned
// ones (which Python escapes) are the documented gap.
bool python_printable(char32_t c) {
  if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0xA0) || c == 0xAD) return false;
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F)) return false;
  if (c == 0x1680 || c == 0x3000 || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || c == 0x180E) return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || c >= 0xF0000 || (c >= 0xE0000 && c <= 0xE0FFF)) return false;
  return true;
}

}  // namespace

std::string python_string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t start = pos;
    const char32_t c = next_code_point(s, pos);
    char buf[16];
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (python_printable(c)) {
      out.append(s.substr(start, pos - start));
    } else {
      std::snprintf(buf, sizeof buf,
                    c < 0x100     ? "\\x%02x"
                    : c < 0x10000 ? "\\u%04x"
                                  : "\\U%08x",
                    static_cast<unsigned>(c));
      out += buf;
    }
  }
  return out + quote;
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::String: return python_string_repr(as_string());
    case Kind::List: {
      const List& l = as_list();
      if (l.kind == ListKind::View || l.kind == ListKind::Generator)
        issue("printing a ", type_name(), " (Python prints its object address) is not supported");
      const bool tuple = l.kind == ListKind::Tuple;
      std::string out = tuple ? "(" : "[";
      for (std::size_t i = 0; i < l.items.size(); ++i) out += (i ? ", " : "") + l.items[i].repr();
      if (tuple && l.items.size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : as_dict().items) {
        out += (first ? "" : ", ") + python_string_repr(k) + ": " + v.repr();
        first = false;
      }
      return out + "}";
    }
    default: return str();
  }
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return as_bool() ? "True" : "False";
    case Kind::Int: return std::to_string(as_int());
    case Kind::Float: return python_float_repr(as_float());
    case Kind::String: return as_string();
    case Kind::List:
    case Kind::Dict: return repr();
    case Kind::Namespace: issue("printing a namespace (jinja2 prints <Namespace ...>) is not supported");
    case Kind::Function: issue("function '", as_function().name, "' printed without being called");
  }
  return {};
}

bool Value::equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    const auto whole = [](const Value& v) { return v.kind_ == Kind::Bool ? std::int64_t{v.as_bool()} : v.as_int(); };
    if (kind_ != Kind::Float && other.kind_ != Kind::Float) return whole(*this) == whole(other);
    return to_double() == other.to_double();
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return true;
    case Kind::String: return as_string() == other.as_string();
    case Kind::List: {
      const auto &a = as_list(), &b = other.as_list();
      if (a.kind != b.kind || a.kind == ListKind::Generator || a.items.size() != b.items.size()) return false;
      for (std::size_t i = 0; i < a.items.size(); ++i)
        if (!a.items[i].equals(b.items[i])) return false;
      return true;
    }
    case Kind::Dict: {
      const auto &a = as_dict(), &b = other.as_dict();
      if (a.items.size() != b.items.size()) return false;
      for (const auto& [k, v] : a.items) {
        const Value* w = b.find(k);
        if (!w || !v.equals(*w)) return false;
      }
      return true;
    }
    case Kind::Namespace: return &namespace_attributes() == &other.namespace_attributes();
    case Kind::Function: return &as_function() == &other.as_function();
    default: return false;
  }
}

namespace {

// The characters json.dumps escapes with a backslash and a letter: kJsonEscaped[k] as kJsonEscapeLetters[k].
constexpr std::string_view kJsonEscaped = "\"\\\n\r\t\b\f";
constexpr std::string_view kJsonEscapeLetters = "\"\\nrtbf";

// json.dumps's string escaping: quotes, backslashes and the C0 controls; with
// ensure_ascii also every non-ASCII character, as \uXXXX (UTF-16 units).
void json_string(std::string& out, std::string_view s, bool ensure_ascii = false) {
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const auto c = static_cast<unsigned char>(ch);
    if (ensure_ascii && c >= 0x80) {
      std::size_t pos = i;
      char32_t cp = next_code_point(s, pos);
      i = pos - 1;
      char buf[16];
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + static_cast<unsigned>(cp >> 10),
                      0xDC00 + static_cast<unsigned>(cp & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      }
      out += buf;
      continue;
    }
    if (const std::size_t k = kJsonEscaped.find(ch); k != std::string_view::npos) {
      out += '\\';
      out += kJsonEscapeLetters[k];
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  out += '"';
}

void json_value(std::string& out, const Value& v, const JsonLayout& layout, int depth) {
  if (depth >= 256) issue("tojson of a value nested deeper than 256 levels");
  const int indent = layout.indent;
  const auto newline = [&](int level) {
    if (indent >= 0) out += "\n" + std::string(static_cast<std::size_t>(indent * level), ' ');
  };
  const std::string item_sep = !layout.item_separator.empty() ? layout.item_separator : indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
      const double d = v.as_float();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : python_float_repr(d);
      return;
    }
    case Value::Kind::String: json_string(out, v.as_string(), layout.ensure_ascii); return;
    case Value::Kind::List: {
      if (v.as_list().kind == ListKind::Generator) issue("tojson of a generator (Python cannot serialise it)");
      const auto& items = v.as_list().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_value(out, items[i], layout, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      auto items = v.as_dict().items;
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (layout.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(depth + 1);
        json_string(out, items[i].first, layout.ensure_ascii);
        out += layout.key_separator;
        json_value(out, items[i].second, layout, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    default: issue("tojson of a value of type ", v.type_name(), ", which JSON cannot hold");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonLayout& layout) {
  std::string out;
  json_value(out, v, layout, 0);
  return out;
}

}  // namespace servelab::jinja
