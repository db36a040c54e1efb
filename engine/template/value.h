// SPDX-License-Identifier: MIT
/**
 * @file value.h
 * @brief The values a Jinja chat template computes with, as Python sees them.
 *
 * A chat template is a Jinja program that transformers runs in Python, so its
 * values are Python values and its output is Python's `str()` of them. This
 * type carries exactly the kinds chat templates meet, and keeps Python's
 * rules where a template can see them:
 * @verbatim
 *   kind        from                              str()                truthy
 *   undefined   a missing variable or key         ""                   no
 *   none        JSON null, tools=None             "None"               no
 *   bool        true/false                        "True"/"False"       itself
 *   int, float  JSON numbers, 1, 2.5, 7/2         "3", "3.5", "1e+20"  != 0
 *   string      UTF-8 text                        itself               non-empty
 *   list        [..], tuples, message lists       "['a', 1]"           non-empty
 *   dict        {..}, messages (keys in order)    "{'a': 1}"           non-empty
 *   namespace   namespace(a=1): the one mutable   -                    yes
 *   function    macros, range, raise_exception    -                    yes
 * @endverbatim
 * Lists and dicts are shared and immutable (transformers renders in
 * jinja2's ImmutableSandboxedEnvironment, which forbids list.append and
 * dict.update); only a namespace's attributes change, through `set ns.x = ...`.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace servelab::jinja {

class Value;

/// What Python object a List stands for, where templates can tell them apart.
enum class ListKind {
  List,       ///< [1, 2]
  Tuple,      ///< (1, 2): printed with parentheses
  View,       ///< range(), dict.items(): iterable again, has a length, but printing it is refused
  Generator,  ///< map/select/items filters: always truthy, iterable once, no length, printing refused
};

/// A list, tuple, view or generator.
struct List {
  std::vector<Value> items;        ///< in order
  ListKind kind = ListKind::List;  ///< see ListKind
  /// Generator only: 0 fresh, 1 fully consumed (iterates as empty, as in Python), 2 partly consumed.
  mutable int consumed = 0;
};

/// A dict with string keys in insertion order, as Python's dict keeps them.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;  ///< key, value; keys unique
  /// The value under @p key, or nullptr.
  const Value* find(std::string_view key) const;
  /// Sets @p key (appends a new key, keeps the position of an old one).
  void set(const std::string& key, Value value);
};

/// Positional and keyword arguments of a call.
struct Args {
  std::vector<Value> positional;                       ///< f(a, b)
  std::vector<std::pair<std::string, Value>> keyword;  ///< f(x=1)
};

/// A callable: a macro, a global function (range, namespace) or loop.cycle.
struct Function {
  std::string name;                        ///< for errors
  std::function<Value(const Args&)> call;  ///< throws Error on bad arguments
};

/// A Python value; see the table in the file comment.
class Value {
 public:
  /// The kind of value.
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };

  /// An undefined value (a missing variable, key or attribute).
  Value() = default;
  /// Python None.
  static Value none();
  /// true/false.
  static Value boolean(bool b);
  /// An int (Python ints are unbounded; this one stops at 64 bits, with an error past it).
  static Value integer(std::int64_t i);
  /// A float.
  static Value number(double d);
  /// A UTF-8 string.
  static Value string(std::string s);
  /// A string marked safe (`|safe`: Python's markupsafe.Markup), whose `+` HTML-escapes a plain string operand.
  static Value markup(std::string s);
  /// A list (or a tuple, view or generator).
  static Value list(std::vector<Value> items, ListKind kind = ListKind::List);
  /// A dict.
  static Value dict(Dict d);
  /// A new namespace holding @p attributes.
  static Value namespace_of(Dict attributes);
  /// A function.
  static Value function(std::string name, std::function<Value(const Args&)> call);
  /// A JSON value: objects keep their key order (use nlohmann::ordered_json to read them in file order).
  static Value from_json(const nlohmann::ordered_json& j);

  /// Which kind.
  Kind kind() const { return kind_; }
  /// Whether it is jinja2's Undefined (a name or attribute that is not there).
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  /// Whether it is Python's None.
  bool is_none() const { return kind_ == Kind::None; }
  /// Whether it is a string, markup included.
  bool is_string() const { return kind_ == Kind::String; }
  /// Whether it is a Markup string (HTML-escaping on `+`).
  bool is_markup() const { return kind_ == Kind::String && markup_; }
  /// Whether it is an int, a float or a bool (a bool is an int in Python).
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  /// Whether it is a list.
  bool is_list() const { return kind_ == Kind::List; }
  /// Whether it is a dict.
  bool is_dict() const { return kind_ == Kind::Dict; }

  /// Python's type name, for errors ("str", "int", "list", "dict", "NoneType", "Undefined").
  const char* type_name() const;

  /// The bool; requires kind Bool (each accessor requires its kind; the variant throws otherwise).
  bool as_bool() const { return std::get<bool>(data_); }
  /// The int; requires kind Int.
  std::int64_t as_int() const { return std::get<std::int64_t>(data_); }
  /// The float; requires kind Float.
  double as_float() const { return std::get<double>(data_); }
  /// The string's UTF-8 bytes; requires kind String.
  const std::string& as_string() const { return std::get<std::string>(data_); }
  /// The list's items; requires kind List.
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  /// The dict's items in insertion order; requires kind Dict.
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  /// A namespace's attributes (mutable through every copy of the value).
  Dict& namespace_attributes() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  /// The function; requires kind Function.
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(data_); }

  /// An int, float or bool as a double (bool is an int in Python).
  double to_double() const;
  /// Python's bool(x).
  bool truthy() const;
  /// Python's str(x) (repr() for the items of a list or dict).
  std::string str() const;
  /// Python's repr(x).
  std::string repr() const;
  /// Python's x == y (1 == 1.0 == True; lists and dicts compare by value).
  bool equals(const Value& other) const;

 private:
  template <typename T>
  static Value make(Kind kind, T data) {
    Value v;
    v.kind_ = kind;
    v.data_ = std::move(data);
    return v;
  }

  Kind kind_ = Kind::Undefined;
  bool markup_ = false;  // String: a Markup
  std::variant<std::monostate, bool, std::int64_t, double, std::string, std::shared_ptr<const List>,
               std::shared_ptr<const Dict>, std::shared_ptr<Dict>, std::shared_ptr<const Function>>
      data_;
};

/// markupsafe's escape(): & < > ' " as HTML entities, what `Markup + str` applies to the str.
std::string html_escape(std::string_view s);

/// Python's repr() of a float: the shortest text that reads back the same double ("1.0", "1e-05", "1e+16").
std::string python_float_repr(double d);

/// Python's repr() of a str: quotes chosen as Python chooses them, escapes for unprintable characters.
std::string python_string_repr(std::string_view s);

/// json.dumps's layout options, as transformers' `tojson` filter passes them.
struct JsonLayout {
  int indent = -1;                   ///< spaces per level; -1: all on one line
  std::string item_separator;        ///< between items; empty: ", " on one line, "," when indented
  std::string key_separator = ": ";  ///< between a key and its value
  bool sort_keys = false;            ///< sort dict keys
  bool ensure_ascii = false;         ///< write non-ASCII characters as \\uXXXX (surrogate pairs past U+FFFF)
};

/**
 * @brief Python's json.dumps(x, ensure_ascii=False, ...), as transformers' `tojson` filter calls it.
 * @throws Issue for a value JSON cannot hold (undefined, a namespace, a function, a generator).
 */
std::string to_json(const Value& v, const JsonLayout& layout);

}  // namespace servelab::jinja
