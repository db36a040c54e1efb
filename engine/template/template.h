// SPDX-License-Identifier: MIT
/**
 * @file template.h
 * @brief A Jinja template, parsed once and rendered as transformers renders
 *        chat templates (jinja2's ImmutableSandboxedEnvironment with
 *        `trim_blocks=True, lstrip_blocks=True`, loopcontrols and
 *        `{% generation %}`).
 *
 * @verbatim
 *   Template t("{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}{% endfor %}", "demo");
 *   t.render(vars)   // vars: messages = [{role: user, content: " hi "}]  ->  "<user>hi"
 * @endverbatim
 * What a template may use is jinja2's language minus what chat templates do
 * not need; a construct outside it is refused by name and line ("the filter
 * 'wordwrap' is not supported"), at parse time for statements, filters and
 * tests, at render time for methods and operations on values, so a template
 * is rendered exactly or not at all. docs/chat_templates.md lists the subset.
 */
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "template/value.h"

namespace servelab::jinja {

struct Node;

/// Bounds on one render, so a hostile template cannot exhaust memory or time.
struct Limits {
  std::size_t max_output_bytes = std::size_t{16} << 20;  ///< the rendered text (and any captured block)
  std::int64_t max_loop_iterations = 1'000'000;          ///< loop bodies run, all loops together
  int max_call_depth = 64;                               ///< nested macro calls
};

/// A parsed template.
class Template {
 public:
  /**
   * @brief Parses @p source.
   * @param origin names the template in errors (a file name).
   * @throws Error "<origin>: chat template line N: ..." on a syntax error or an unsupported construct.
   */
  Template(std::string_view source, std::string origin);

  /**
   * @brief Renders with @p variables (and the globals range, namespace, dict, raise_exception).
   * @throws Error naming the origin and line when an operation fails, the
   *         template calls raise_exception (the message is the template's), or
   *         a limit is reached.
   */
  std::string render(const Dict& variables, const Limits& limits = {}) const;

  /// The name given at construction.
  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
  std::shared_ptr<const std::vector<Node>> body_;  // shared: copies of a Template share the parse
};

}  // namespace servelab::jinja
