// SPDX-License-Identifier: MIT
/**
 * @file ast.h
 * @brief The parsed form of a Jinja template: expressions and statements.
 *
 * A template such as
 * @verbatim
 *   {% for m in messages %}{{ '<|' + m['role'] + '|>' }}{% endfor %}
 * @endverbatim
 * parses to one For node whose body is one Output node holding the
 * expression Binary("+", Binary("+", Literal, GetItem(Name m, Literal)), ...).
 * Every node keeps its template line, so a run-time error names it.
 */
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "template/value.h"

namespace servelab::jinja {

struct Kwarg;

/// An expression.
struct Expr {
  /// What the node computes; the fields each kind uses are listed beside it.
  enum class Kind {
    Literal,       ///< value
    Name,          ///< name
    Attribute,     ///< args[0].name (`x.name`: attribute first, then item)
    Item,          ///< args[0][args[1]] (item first, then attribute)
    Slice,         ///< args[0][args[1]:args[2]:args[3]]; a missing part is an undefined Literal
    Call,          ///< `args[0](args[1..], kwargs)`
    Filter,        ///< `args[0] | name(args[1..], kwargs)`
    Test,          ///< args[0] is [not] name(args[1..]); negate
    Not,           ///< not args[0]
    Negate,        ///< -args[0]
    Binary,        ///< args[0] name args[1]; name is one of `+ - * / // % ** ~ and or`
    Compare,       ///< args[0] ops[0] args[1] ops[1] args[2] ... (chained as in Python)
    Conditional,   ///< args[1] if args[0] else args[2] (args[2] absent: undefined)
    ListLiteral,   ///< [args...]
    TupleLiteral,  ///< (args...)
    DictLiteral,   ///< {args[0]: args[1], args[2]: args[3], ...}
  };
  Kind kind = Kind::Literal;     ///< what the expression is
  int line = 0;                  ///< 1-based template line
  Value value;                   ///< Literal
  std::string name;              ///< Name, Attribute, Filter, Test, Binary
  std::vector<Expr> args;        ///< operands, see Kind
  std::vector<Kwarg> kwargs;     ///< Call, Filter
  std::vector<std::string> ops;  ///< Compare: == != < <= > >= in "not in"
  bool negate = false;           ///< Test: `is not`
};

/// A keyword argument of a call or filter, `name=value` (a struct, not a pair: a pair of the incomplete Expr
/// inside Expr is not a complete type for clang's standard library checks).
struct Kwarg {
  std::string name;  ///< the keyword
  Expr value;        ///< its expression
};

/// A statement, or a run of literal text.
struct Node {
  /// What the node does.
  enum class Kind {
    Text,         ///< text
    Output,       ///< {{ expr }}
    If,           ///< branches: (condition, body)...; a final else has an undefined Literal condition marked by is_else
    For,          ///< for targets in expr [if filter]: body [else: else_body]
    Set,          ///< set targets = expr, or set targets[0].attribute = expr (a namespace)
    SetBlock,     ///< set targets[0]: body rendered to a string
    Macro,        ///< macro name(params): body
    Break,        ///< break (loopcontrols)
    Continue,     ///< continue (loopcontrols)
    Block,        ///< a body rendered in place (transformers' {% generation %})
    FilterBlock,  ///< {% filter f(args) %}body{% endfilter %}: expr is the Filter, its operand the body's text
  };
  /// One branch of an If.
  struct Branch {
    Expr condition;          ///< unused when is_else
    bool is_else = false;    ///< the trailing else
    std::vector<Node> body;  ///< statements
  };
  Kind kind = Kind::Text;                            ///< what the statement is
  int line = 0;                                      ///< 1-based template line
  std::string text;                                  ///< Text; Macro: its name
  Expr expr;                                         ///< Output, Set, For (the iterable)
  std::vector<Branch> branches;                      ///< If
  std::vector<std::string> targets;                  ///< For, Set, SetBlock
  std::string attribute;                             ///< Set on a namespace: `set ns.attribute = ...`
  bool has_filter = false;                           ///< For: `if` after the iterable
  Expr filter;                                       ///< For
  std::vector<Node> body;                            ///< For, Macro, SetBlock, Block
  std::vector<Node> else_body;                       ///< For: the `else` when the loop ran no iteration
  std::vector<std::pair<std::string, Expr>> params;  ///< Macro: name and default (undefined Literal: none)
  std::vector<bool> has_default;                     ///< Macro: whether params[i] has a default
};

/// An Expr or Node of @p kind at @p line, with @p name (Expr::name, Node::text) and the other fields empty.
template <typename N>
N make(typename N::Kind kind, int line, std::string name = {}) {
  N n;
  n.kind = kind;
  n.line = line;
  if constexpr (std::is_same_v<N, Expr>) {
    n.name = std::move(name);
  } else {
    n.text = std::move(name);
  }
  return n;
}

/**
 * @brief Parses template source into statements.
 *
 * Settings are transformers' (`trim_blocks=True, lstrip_blocks=True`,
 * jinja2's default `keep_trailing_newline=False`), with its extensions
 * (loopcontrols, `{% generation %}`).
 * @param source the template, UTF-8.
 * @param origin names the template in errors ("tokenizer_config.json").
 * @throws Error "<origin>: chat template line N: ..." for a syntax error, or
 *         naming a statement, filter or test that servelab does not implement.
 */
std::vector<Node> parse_template(std::string_view source, const std::string& origin);

}  // namespace servelab::jinja
