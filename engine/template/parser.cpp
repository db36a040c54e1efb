// SPDX-License-Identifier: MIT
// The lexer and parser of the Jinja subset chat templates use, with
// jinja2's whitespace rules under transformers' settings. The grammar and
// precedence follow jinja2's parser (loosest first):
//   conditional: or ["if" or ["else" conditional]]
//   or / and / not / compare (== != < <= > >= in, not in; chained)
//   math1 (+ -) / concat (~) / math2 (* / // %) / pow (**) / unary (-, +)
//   primary, then postfix (.name [item] (call)) and filters (| name, is test)
#include <charconv>
#include <cstdlib>
#include <cstdint>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/utf8.h"
#include "template/ast.h"
#include "template/builtins.h"
#include "template/text.h"

namespace servelab::jinja {

namespace {

constexpr int kMaxNesting = 200;  // nested statements or parentheses: a template needs tens

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };

struct Token {
  Tok type;
  std::string text;  // Text, Name, String (unescaped), Op; Int/Float as written
  int line;
};

// Python's one-character escapes: a backslash and kEscapeLetters[k] stand for kEscaped[k].
constexpr std::string_view kEscapeLetters = "\\'\"abfnrtv";
constexpr std::string_view kEscaped = "\\'\"\a\b\f\n\r\t\v";

// Python's unicode-escape decoding, which jinja2 applies to string literals.
std::string unescape(std::string_view s, const std::string& where) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char e = s[++i];
    const auto hex = [&](std::size_t n) {
      std::uint32_t cp = 0;
      for (std::size_t k = 0; k < n; ++k) {
        const char h = i + 1 + k < s.size() ? s[i + 1 + k] : '\0';
        const int d = h >= '0' && h <= '9'   ? h - '0'
                      : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                             : -1;
        check(d >= 0, where, ": a \\", e, " escape in a string needs ", n, " hex digits");
        cp = cp * 16 + static_cast<std::uint32_t>(d);
      }
      i += n;
      check(cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF), where, ": escape \\", e, " names no character");
      append_utf8(out, cp);
    };
    if (const std::size_t k = kEscapeLetters.find(e); k != std::string_view::npos) {
      out += kEscaped[k];
      continue;
    }
    switch (e) {
      case '\n': break;  // a line continuation
      case 'x': hex(2); break;
      case 'u': hex(4); break;
      case 'U': hex(8); break;
      case 'N': fail(where, ": the \\N{...} escape in a string is not supported");
      default:
        if (e >= '0' && e <= '7') {
          std::uint32_t cp = static_cast<std::uint32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
            cp = cp * 8 + static_cast<std::uint32_t>(s[++i] - '0');
          append_utf8(out, cp);
        } else {
          // jinja2 encodes the literal to ASCII with backslashreplace first, so a
          // backslash before a non-ASCII character would read that character's escape.
          check(static_cast<unsigned char>(e) < 0x80, where,
                ": a backslash before a non-ASCII character in a string is not supported");
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const std::string& origin) : origin_(origin) {
    // jinja2 turns \r\n and \r into \n and, without keep_trailing_newline, drops one final newline.
    src_.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    bool line_starting = true;  // jinja2's: the previous tag ended with a newline (or this is the start)
    while (pos_ < src_.size()) {
      std::size_t at = pos_;
      while (true) {
        at = src_.find('{', at);
        if (at == std::string::npos || at + 1 >= src_.size()) {
          at = std::string::npos;
          break;
        }
        const char k = src_[at + 1];
        if (k == '{' || k == '%' || k == '#') break;
        ++at;
      }
      std::string text = src_.substr(pos_, at == std::string::npos ? std::string::npos : at - pos_);
      if (at == std::string::npos) {
        emit_text(text);
        break;
      }
      const char kind = src_[at + 1];
      const char sign = at + 2 < src_.size() && (src_[at + 2] == '-' || src_[at + 2] == '+') ? src_[at + 2] : 0;
      if (sign == '-') {
        text = python_rstrip(text);
      } else if (sign != '+' && kind != '{') {
        // lstrip_blocks: a block or comment tag alone on its line takes the line's indentation with it.
        const std::size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((line_start > 0 || line_starting) && text.find_first_not_of(" \t", line_start) == std::string::npos)
          text.resize(line_start);
      }
      emit_text(text);
      line_ += count_newlines(src_.substr(pos_, at - pos_));
      pos_ = at + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        const std::size_t end = src_.find("#}", pos_);
        check(end != std::string::npos, origin_, ": chat template line ", line_, ": comment without '#}'");
        const bool strip = end > pos_ && src_[end - 1] == '-', keep = end > pos_ && src_[end - 1] == '+';
        line_ += count_newlines(src_.substr(pos_, end - pos_));
        pos_ = end + 2;
        line_starting = close_tag(strip, keep, true);
        continue;
      }
      tokens_.push_back({kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", line_});
      line_starting = lex_tag(kind == '{');
    }
    tokens_.push_back({Tok::End, "", line_});
    return std::move(tokens_);
  }

 private:
  static int count_newlines(std::string_view s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

  void emit_text(const std::string& text) {
    if (!text.empty()) tokens_.push_back({Tok::Text, text, line_});
  }

  // After a tag's closing delimiter: `-` strips the whitespace that follows,
  // trim_blocks drops one newline after a block or comment. Returns whether
  // what was consumed ended with a newline (jinja2's line_starting).
  bool close_tag(bool strip, bool keep, bool is_block) {
    std::size_t end = pos_;
    if (strip) {
      while (end < src_.size()) {
        std::size_t next = end;
        if (!is_python_space(next_code_point(src_, next))) break;
        end = next;
      }
    } else if (!keep && is_block && end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
    const bool ends_with_newline = end > pos_ && src_[end - 1] == '\n';
    pos_ = end;
    return ends_with_newline;
  }

  [[noreturn]] void error(const std::string& what) const { fail(origin_, ": chat template line ", line_, ": ", what); }

  // The tokens inside {{ }} or {% %}; returns line_starting for the text after.
  bool lex_tag(bool variable) {
    int depth = 0;  // open ( [ {: a '}}' inside a dict literal does not close the tag
    while (true) {
      while (pos_ < src_.size() && (src_[pos_] == ' ' || src_[pos_] == '\t' || src_[pos_] == '\n' ||
                                    src_[pos_] == '\r' || src_[pos_] == '\f' || src_[pos_] == '\v')) {
        if (src_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= src_.size()) error(variable ? "'{{' without '}}'" : "'{%' without '%}'");
      const std::string_view rest = std::string_view(src_).substr(pos_);
      const std::string_view close = variable ? "}}" : "%}";
      if (depth == 0) {
        const bool minus = rest.starts_with("-") && rest.substr(1).starts_with(close);
        const bool plus = !variable && rest.starts_with("+") && rest.substr(1).starts_with(close);
        if (minus || plus || rest.starts_with(close)) {
          tokens_.push_back({variable ? Tok::VarEnd : Tok::BlockEnd, "", line_});
          pos_ += close.size() + (minus || plus ? 1 : 0);
          return close_tag(minus, plus, !variable);
        }
      }
      const char c = rest[0];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t n = 1;
        while (n < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
        tokens_.push_back({Tok::Name, std::string(rest.substr(0, n)), line_});
        pos_ += n;
        if (tokens_.size() >= 2 && tokens_[tokens_.size() - 2].type == Tok::BlockBegin && tokens_.back().text == "raw")
          error("'{% raw %}' blocks are not supported by servelab's template interpreter");
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number(rest);
      } else if (c == '\'' || c == '"') {
        std::size_t n = 1;
        while (n < rest.size() && rest[n] != c) n += rest[n] == '\\' ? 2 : 1;
        if (n >= rest.size()) error("string literal without its closing quote");
        const std::string_view body = rest.substr(1, n - 1);
        tokens_.push_back(
            {Tok::String, unescape(body, origin_ + ": chat template line " + std::to_string(line_)), line_});
        line_ += count_newlines(body);
        pos_ += n + 1;
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "[",
                                           "]",  "(",  ")",  "{",  "}",  ",",  ".", ":", "|", "=", "<", ">", ";"};
        const char* op = nullptr;
        for (const char* o : kOps)
          if (rest.starts_with(o)) {
            op = o;
            break;
          }
        if (!op) error("unexpected character '" + std::string(1, c) + "'");
        const std::string_view o(op);
        if (o == "(" || o == "[" || o == "{") ++depth;
        if ((o == ")" || o == "]" || o == "}") && depth > 0) --depth;
        tokens_.push_back({Tok::Op, std::string(o), line_});
        pos_ += o.size();
      }
    }
  }

  void lex_number(std::string_view rest) {
    const auto digits = [&](std::size_t n) {  // digits with single underscores between them
      while (n < rest.size() &&
             (std::isdigit(static_cast<unsigned char>(rest[n])) ||
              (rest[n] == '_' && n + 1 < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n + 1])))))
        ++n;
      return n;
    };
    std::size_t n = digits(0);
    bool is_float = false;
    // After `x.` an integer is an item index (`x.0`), never the tail of a float.
    const bool after_dot = !tokens_.empty() && tokens_.back().type == Tok::Op && tokens_.back().text == ".";
    if (!after_dot && n + 1 < rest.size() && rest[n] == '.' && std::isdigit(static_cast<unsigned char>(rest[n + 1]))) {
      n = digits(n + 1);
      is_float = true;
    }
    if (!after_dot && n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
      std::size_t m = n + 1;
      if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
      if (m < rest.size() && std::isdigit(static_cast<unsigned char>(rest[m]))) n = digits(m), is_float = true;
    }
    std::string text(rest.substr(0, n));
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    tokens_.push_back({is_float ? Tok::Float : Tok::Int, text, line_});
    pos_ += n;
  }

  std::string src_;
  const std::string& origin_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& origin) : t_(std::move(tokens)), origin_(origin) {}

  std::vector<Node> parse_all() {
    std::vector<Node> body = parse_body({});
    if (peek().type != Tok::End) error("unexpected '{% " + block_name() + " %}'");
    return body;
  }

 private:
  const Token& peek(std::size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool at_op(std::string_view op) const { return peek().type == Tok::Op && peek().text == op; }
  bool at_name(std::string_view name) const { return peek().type == Tok::Name && peek().text == name; }

  [[noreturn]] void error(const std::string& what, int line = 0) const {
    fail(origin_, ": chat template line ", line ? line : peek().line, ": ", what);
  }
  [[noreturn]] void unsupported(const std::string& what, int line = 0) const {
    error(what + " is not supported by servelab's template interpreter", line);
  }
  void expect_op(std::string_view op) {
    if (!at_op(op)) error("expected '" + std::string(op) + "', got " + describe(peek()));
    ++i_;
  }
  std::string expect_name() {
    if (peek().type != Tok::Name) error("expected a name, got " + describe(peek()));
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != Tok::BlockEnd) error("expected '%}', got " + describe(peek()));
    ++i_;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::End: return "the end of the template";
      case Tok::BlockEnd: return "'%}'";
      case Tok::VarEnd: return "'}}'";
      case Tok::String: return "a string";
      default: return "'" + t.text + "'";
    }
  }
  // The statement name of the block tag at i_ (which is a BlockBegin), for messages.
  std::string block_name() const { return peek(1).type == Tok::Name ? peek(1).text : "?"; }

  void enter() {
    if (++depth_ > kMaxNesting) error("nested deeper than " + std::to_string(kMaxNesting) + " levels");
  }

  // Statements up to a block tag whose name is in @p stops (left unconsumed, at its BlockBegin).
  std::vector<Node> parse_body(const std::set<std::string>& stops) {
    enter();
    std::vector<Node> body;
    while (peek().type != Tok::End) {
      const Token& t = peek();
      if (t.type == Tok::Text) {
        body.push_back(make<Node>(Node::Kind::Text, t.line, t.text));
        ++i_;
      } else if (t.type == Tok::VarBegin) {
        ++i_;
        Node n = make<Node>(Node::Kind::Output, t.line);
        n.expr = parse_tuple_or_expression();
        if (peek().type != Tok::VarEnd) error("expected '}}', got " + describe(peek()));
        ++i_;
        body.push_back(std::move(n));
      } else if (t.type == Tok::BlockBegin) {
        if (stops.count(block_name())) break;
        body.push_back(parse_statement());
      } else {
        error("unexpected " + describe(t));
      }
    }
    --depth_;
    return body;
  }

  Node parse_statement() {
    const int line = next().line;  // BlockBegin
    if (peek().type != Tok::Name) error("expected a statement name after '{%'");
    const std::string name = next().text;
    if (name == "if") return parse_if(line);
    if (name == "for") return parse_for(line);
    if (name == "set") return parse_set(line);
    if (name == "macro") return parse_macro(line);
    if (name == "break" || name == "continue") {
      expect_block_end();
      return make<Node>(name == "break" ? Node::Kind::Break : Node::Kind::Continue, line);
    }
    if (name == "generation") {  // transformers' AssistantTracker: the body, rendered in place
      expect_block_end();
      Node n = make<Node>(Node::Kind::Block, line);
      n.body = parse_body({"endgeneration"});
      end_block("endgeneration", "generation", line);
      return n;
    }
    if (name == "filter") {
      Node n = make<Node>(Node::Kind::FilterBlock, line);
      // The body's text is the filter's operand: parse `| name(args)` after a placeholder.
      n.expr = parse_filters_after(literal(Value::string(""), line));
      if (n.expr.kind != Expr::Kind::Filter) error("expected a filter name after '{% filter'");
      expect_block_end();
      n.body = parse_body({"endfilter"});
      end_block("endfilter", "filter", line);
      return n;
    }
    static const std::set<std::string> kEnds = {"endif", "endfor", "endset",        "endmacro",
                                                "elif",  "else",   "endgeneration", "endfilter"};
    if (kEnds.count(name)) error("'{% " + name + " %}' without the statement it closes", line);
    unsupported("the '{% " + name + " %}' statement", line);
  }

  void end_block(const std::string& end, const std::string& opener, int opened) {
    if (peek().type != Tok::BlockBegin || block_name() != end)
      error("'{% " + opener + " %}' (line " + std::to_string(opened) + ") without '{% " + end + " %}'");
    i_ += 2;
    expect_block_end();
  }

  Node parse_if(int line) {
    Node n = make<Node>(Node::Kind::If, line);
    Node::Branch b;
    b.condition = parse_expression();
    expect_block_end();
    while (true) {
      b.body = parse_body({"elif", "else", "endif"});
      n.branches.push_back(std::move(b));
      b = Node::Branch{};
      if (peek().type != Tok::BlockBegin) error("'{% if %}' (line " + std::to_string(line) + ") without '{% endif %}'");
      const std::string tag = block_name();
      i_ += 2;
      if (tag == "endif") {
        expect_block_end();
        return n;
      }
      if (n.branches.back().is_else) error("'{% " + tag + " %}' after '{% else %}'");
      if (tag == "elif") {
        b.condition = parse_expression();
      } else {
        b.is_else = true;
      }
      expect_block_end();
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> targets = {expect_name()};
    while (at_op(",")) {
      ++i_;
      targets.push_back(expect_name());
    }
    return targets;
  }

  Node parse_for(int line) {
    Node n = make<Node>(Node::Kind::For, line);
    if (at_op("(")) unsupported("a parenthesised loop target");
    n.targets = parse_targets();
    if (!at_name("in")) error("expected 'in' in '{% for %}', got " + describe(peek()));
    ++i_;
    n.expr = parse_tuple_or_expression(/*stop_at_if=*/true);
    if (at_name("if")) {
      ++i_;
      n.has_filter = true;
      n.filter = parse_expression();
    }
    if (at_name("recursive")) unsupported("a recursive loop ('{% for ... recursive %}')");
    expect_block_end();
    n.body = parse_body({"else", "endfor"});
    if (peek().type == Tok::BlockBegin && block_name() == "else") {
      i_ += 2;
      expect_block_end();
      n.else_body = parse_body({"endfor"});
    }
    end_block("endfor", "for", line);
    return n;
  }

  Node parse_set(int line) {
    Node n = make<Node>(Node::Kind::Set, line);
    n.targets = parse_targets();
    if (n.targets.size() == 1 && at_op(".")) {
      ++i_;
      n.attribute = expect_name();
    }
    if (peek().type == Tok::BlockEnd) {  // {% set x %}...{% endset %}
      if (n.targets.size() != 1 || !n.attribute.empty()) error("a block '{% set %}' assigns one plain name");
      ++i_;
      n.kind = Node::Kind::SetBlock;
      n.body = parse_body({"endset"});
      end_block("endset", "set", line);
      return n;
    }
    if (at_op("|")) unsupported("a filtered block '{% set x | filter %}'");
    expect_op("=");
    n.expr = parse_tuple_or_expression();
    expect_block_end();
    return n;
  }

  Node parse_macro(int line) {
    Node n = make<Node>(Node::Kind::Macro, line);
    n.text = expect_name();
    expect_op("(");
    while (!at_op(")")) {
      if (!n.params.empty()) expect_op(",");
      if (at_op(")")) break;
      std::string param = expect_name();
      Expr def;
      bool has_default = false;
      if (at_op("=")) {
        ++i_;
        def = parse_expression();
        has_default = true;
      }
      n.params.emplace_back(std::move(param), std::move(def));
      n.has_default.push_back(has_default);
    }
    ++i_;
    expect_block_end();
    n.body = parse_body({"endmacro"});
    end_block("endmacro", "macro", line);
    return n;
  }

  // Expressions. A bare `a, b` is a tuple in {{ }}, set and for (jinja2's parse_tuple).
  Expr parse_tuple_or_expression(bool stop_at_if = false) {
    const int line = peek().line;
    Expr first = stop_at_if ? parse_or() : parse_expression();
    if (!at_op(",")) return first;
    Expr tuple = make<Expr>(Expr::Kind::TupleLiteral, line);
    tuple.args.push_back(std::move(first));
    while (at_op(",")) {
      ++i_;
      if (peek().type == Tok::BlockEnd || peek().type == Tok::VarEnd || at_name("if")) break;
      tuple.args.push_back(stop_at_if ? parse_or() : parse_expression());
    }
    return tuple;
  }

  Expr parse_expression() {
    enter();
    Expr e = parse_or();
    if (at_name("if")) {
      const int line = next().line;
      Expr c = make<Expr>(Expr::Kind::Conditional, line);
      c.args.push_back(parse_or());  // condition
      c.args.push_back(std::move(e));
      if (at_name("else")) {
        ++i_;
        c.args.push_back(parse_expression());
      }
      e = std::move(c);
    }
    --depth_;
    return e;
  }

  static Expr binary(std::string op, Expr a, Expr b, int line) {
    Expr e = make<Expr>(Expr::Kind::Binary, line, std::move(op));
    e.args.push_back(std::move(a));
    e.args.push_back(std::move(b));
    return e;
  }

  Expr parse_or() {
    Expr e = parse_and();
    while (at_name("or")) e = binary("or", std::move(e), (++i_, parse_and()), peek().line);
    return e;
  }
  Expr parse_and() {
    Expr e = parse_not();
    while (at_name("and")) e = binary("and", std::move(e), (++i_, parse_not()), peek().line);
    return e;
  }
  Expr parse_not() {
    if (at_name("not")) {
      enter();
      const int line = next().line;
      Expr n = make<Expr>(Expr::Kind::Not, line);
      n.args.push_back(parse_not());
      --depth_;
      return n;
    }
    return parse_compare();
  }
  Expr parse_compare() {
    const int line = peek().line;
    Expr first = parse_math1();
    Expr c = make<Expr>(Expr::Kind::Compare, line);
    c.args.push_back(std::move(first));
    while (true) {
      std::string op;
      if (peek().type == Tok::Op &&
          (at_op("==") || at_op("!=") || at_op("<") || at_op("<=") || at_op(">") || at_op(">="))) {
        op = next().text;
      } else if (at_name("in")) {
        ++i_;
        op = "in";
      } else if (at_name("not") && peek(1).type == Tok::Name && peek(1).text == "in") {
        i_ += 2;
        op = "not in";
      } else {
        break;
      }
      c.ops.push_back(op);
      c.args.push_back(parse_math1());
    }
    if (c.ops.empty()) return std::move(c.args[0]);
    return c;
  }
  Expr parse_math1() {
    Expr e = parse_concat();
    while (at_op("+") || at_op("-")) {
      const Token& op = next();
      e = binary(op.text, std::move(e), parse_concat(), op.line);
    }
    return e;
  }
  Expr parse_concat() {
    Expr e = parse_math2();
    while (at_op("~")) {
      const int line = next().line;
      e = binary("~", std::move(e), parse_math2(), line);
    }
    return e;
  }
  Expr parse_math2() {
    Expr e = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& op = next();
      e = binary(op.text, std::move(e), parse_pow(), op.line);
    }
    return e;
  }
  Expr parse_pow() {
    Expr e = parse_unary(true);
    while (at_op("**")) {
      const int line = next().line;
      e = binary("**", std::move(e), parse_unary(true), line);
    }
    return e;
  }
  Expr parse_unary(bool with_filter) {
    enter();
    Expr e;
    if (at_op("-") || at_op("+")) {
      const Token& op = next();
      Expr operand = parse_unary(false);
      if (op.text == "-") {
        e = make<Expr>(Expr::Kind::Negate, op.line);
        e.args.push_back(std::move(operand));
      } else {
        e = binary("+", literal(Value::integer(0), op.line), std::move(operand), op.line);
      }
    } else {
      e = parse_postfix(parse_primary());
    }
    if (with_filter) e = parse_filters(std::move(e));
    --depth_;
    return e;
  }

  Expr parse_primary() {
    const Token& t = peek();
    if (t.type == Tok::Name) {
      ++i_;
      if (t.text == "true" || t.text == "True") return literal(Value::boolean(true), t.line);
      if (t.text == "false" || t.text == "False") return literal(Value::boolean(false), t.line);
      if (t.text == "none" || t.text == "None") return literal(Value::none(), t.line);
      return make<Expr>(Expr::Kind::Name, t.line, t.text);
    }
    if (t.type == Tok::String) {
      std::string s;
      while (peek().type == Tok::String) s += next().text;  // adjacent literals join, as in Python
      return literal(Value::string(std::move(s)), t.line);
    }
    if (t.type == Tok::Int) {
      ++i_;
      std::int64_t v = 0;
      const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
      if (r.ec != std::errc()) error("integer literal " + t.text + " does not fit in 64 bits");
      return literal(Value::integer(v), t.line);
    }
    if (t.type == Tok::Float) {
      ++i_;
      // strtod, not stod: a literal past double's range is inf (or 0) as in Python, not an exception.
      return literal(Value::number(std::strtod(t.text.c_str(), nullptr)), t.line);
    }
    if (at_op("(")) {
      ++i_;
      if (at_op(")")) {
        ++i_;
        return make<Expr>(Expr::Kind::TupleLiteral, t.line);
      }
      Expr e = parse_expression();
      if (at_op(",")) {
        Expr tuple = make<Expr>(Expr::Kind::TupleLiteral, t.line);
        tuple.args.push_back(std::move(e));
        while (at_op(",")) {
          ++i_;
          if (at_op(")")) break;
          tuple.args.push_back(parse_expression());
        }
        e = std::move(tuple);
      }
      expect_op(")");
      return e;
    }
    if (at_op("[") || at_op("{")) {
      const bool is_list = next().text == "[";
      Expr e = make<Expr>(is_list ? Expr::Kind::ListLiteral : Expr::Kind::DictLiteral, t.line);
      // Items up to the closing bracket, comma-separated, a trailing comma allowed; a dict item is key: value.
      const std::string_view close = is_list ? "]" : "}";
      while (!at_op(close)) {
        if (!e.args.empty()) expect_op(",");
        if (at_op(close)) break;
        e.args.push_back(parse_expression());
        if (!is_list) {
          expect_op(":");
          e.args.push_back(parse_expression());
        }
      }
      ++i_;
      return e;
    }
    error("unexpected " + describe(t) + " in an expression");
  }

  static Expr literal(Value v, int line) {
    Expr e = make<Expr>(Expr::Kind::Literal, line);
    e.value = std::move(v);
    return e;
  }

  Expr parse_postfix(Expr e) {
    while (true) {
      if (at_op(".")) {
        const int line = next().line;
        if (peek().type == Tok::Int) {  // x.0 is x[0]
          Expr item = make<Expr>(Expr::Kind::Item, line);
          item.args.push_back(std::move(e));
          item.args.push_back(parse_primary());
          e = std::move(item);
          continue;
        }
        Expr a = make<Expr>(Expr::Kind::Attribute, line, expect_name());
        a.args.push_back(std::move(e));
        e = std::move(a);
      } else if (at_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  Expr parse_subscript(Expr e) {
    const int line = next().line;  // [
    const auto part = [&](std::initializer_list<std::string_view> ends) {
      for (auto end : ends)
        if (at_op(end)) return literal(Value(), line);
      return parse_expression();
    };
    Expr first = part({":", "]"});
    if (at_op("]")) {
      ++i_;
      Expr item = make<Expr>(Expr::Kind::Item, line);
      item.args.push_back(std::move(e));
      item.args.push_back(std::move(first));
      return item;
    }
    Expr slice = make<Expr>(Expr::Kind::Slice, line);
    slice.args.push_back(std::move(e));
    slice.args.push_back(std::move(first));
    expect_op(":");
    slice.args.push_back(part({":", "]"}));
    if (at_op(":")) {
      ++i_;
      slice.args.push_back(part({"]"}));
    } else {
      slice.args.push_back(literal(Value(), line));
    }
    expect_op("]");
    return slice;
  }

  // Arguments of a call, filter or test: (a, b, key=c).
  void parse_arguments(Expr& target) {
    expect_op("(");
    bool first = true;
    while (!at_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (at_op(")")) break;
      if (at_op("*") || at_op("**")) unsupported("'*args' and '**kwargs' in a call");
      if (peek().type == Tok::Name && peek(1).type == Tok::Op && peek(1).text == "=") {
        std::string key = next().text;
        ++i_;
        target.kwargs.push_back({std::move(key), parse_expression()});
      } else {
        if (!target.kwargs.empty()) error("a positional argument after a keyword argument");
        target.args.push_back(parse_expression());
      }
    }
    ++i_;
  }

  Expr parse_call(Expr callee) {
    Expr call = make<Expr>(Expr::Kind::Call, peek().line);
    call.args.push_back(std::move(callee));
    parse_arguments(call);
    return call;
  }

  // `{% filter a | b(1) %}`: the first name has no `|` before it.
  Expr parse_filters_after(Expr operand) {
    const int line = peek().line;
    Expr f = make<Expr>(Expr::Kind::Filter, line, expect_name());
    if (!has_filter(f.name) && jinja2_has(f.name, false)) unsupported("the filter '" + f.name + "'", line);
    f.args.push_back(std::move(operand));
    if (at_op("(")) parse_arguments(f);
    return parse_filters(std::move(f));
  }

  Expr parse_filters(Expr e) {
    while (true) {
      if (at_op("|")) {
        const int line = next().line;
        Expr f = make<Expr>(Expr::Kind::Filter, line, expect_name());
        if (!has_filter(f.name) && jinja2_has(f.name, false)) unsupported("the filter '" + f.name + "'", line);
        f.args.push_back(std::move(e));
        if (at_op("(")) parse_arguments(f);
        e = std::move(f);
      } else if (at_name("is")) {
        const int line = next().line;
        Expr t = make<Expr>(Expr::Kind::Test, line);
        if (at_name("not")) ++i_, t.negate = true;
        t.name = expect_name();
        if (!has_test(t.name) && jinja2_has(t.name, true)) unsupported("the test '" + t.name + "'", line);
        t.args.push_back(std::move(e));
        if (at_op("(")) {
          parse_arguments(t);
        } else if ((peek().type == Tok::Name || peek().type == Tok::String || peek().type == Tok::Int ||
                    peek().type == Tok::Float || at_op("[") || at_op("{")) &&
                   !at_name("else") && !at_name("or") && !at_name("and") && !at_name("if") && !at_name("in") &&
                   !at_name("not")) {
          if (at_name("is")) error("a test cannot be chained with another 'is'");
          t.args.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`
        }
        e = std::move(t);
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  const std::string& origin_;
  std::size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

std::vector<Node> parse_template(std::string_view source, const std::string& origin) {
  check_utf8(source, origin + ": chat template");
  return Parser(Lexer(source, origin).run(), origin).parse_all();
}

}  // namespace servelab::jinja
