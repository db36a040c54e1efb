// SPDX-License-Identifier: MIT
/**
 * @file report.h
 * @brief What every lab prints and saves: a settings block, fixed-width
 *        Markdown tables, a verdict line; the same tables as JSON and CSV
 *        with the run's metadata, and plot specifications that
 *        tools/plot_lab.py draws from the JSON.
 *
 * Layout of a lab's results folder:
 * @verbatim
 *  <out>/<lab>/<lab>.json      metadata, settings, every table, plot specs, verdict
 *  <out>/<lab>/<table>.csv     one file per table
 *  <out>/<lab>/<plot>.png      drawn by tools/plot_lab.py from the JSON
 * @endverbatim
 */
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace servelab::lab {

/// One table cell: text, an integer, or a number printed with its column's precision.
using Cell = std::variant<std::string, long long, double>;

/**
 * Terminal columns @p text (UTF-8) takes: one per code point, two for an East Asian wide character
 * (Hangul, CJK, full-width forms). Tables pad their cells by it, not by bytes, so a cell holding "—"
 * (three bytes) or Korean lines up with its column.
 */
std::size_t display_width(const std::string& text);

/// One column of a table: its header and how many digits its numbers print with.
struct Column {
  /// A column headed @p name whose double cells print with @p digits after the point; a bare header
  /// converts, so a table lists its columns as `{"step", Column{"time [ms]", 2}}`.
  Column(std::string name, int digits = 0) : header(std::move(name)), precision(digits) {}
  /// A column headed @p name, printed with no digits after the point (a bare header in a column list).
  Column(const char* name) : Column(std::string(name)) {}

  std::string header;  ///< units in brackets, e.g. "time [ms]"
  int precision = 0;   ///< digits after the point for double cells (text and integer cells ignore it)
};

/**
 * @brief A named table with typed cells; printed as Markdown and saved as CSV/JSON.
 *
 * @code
 *   Table t{.name = "latency", .title = "Request latency",
 *           .columns = {"metric", Column{"median [ms]", 2}, Column{"p99 [ms]", 2}}};
 *   t.add_row({std::string("TTFT"), 12.3, 15.0});
 *   t.number(0, "p99 [ms]");  // 15.0: verdicts read cells by column name
 * @endcode
 */
struct Table {
  std::string name{};                     ///< file-safe id, e.g. "kv_cache_speedup"
  std::string title{};                    ///< heading printed above the table
  std::vector<Column> columns{};          ///< headers and precisions, left to right
  std::vector<std::vector<Cell>> rows{};  ///< the rows; each has columns.size() cells
  std::string note{};                     ///< optional line printed under the table

  /// Appends a row; @throws Error when its width differs from the header's.
  void add_row(std::vector<Cell> row);
  /// Index of the column headed @p header; @throws Error naming the table when there is none.
  std::size_t column(const std::string& header) const;
  /// The headers of columns @p from.. (e.g. a plot's lines: every column after the x axis).
  std::vector<std::string> headers(std::size_t from = 0) const;
  /// The cell of row @p row (negative: from the end, -1 = last) in the column headed @p header.
  const Cell& cell(long row, const std::string& header) const;
  /// cell() as a number (an integer cell widened); @throws Error when the cell is text.
  /// Index of the first row whose cell in the column headed @p header equals @p value (text matches
  /// text, an integer an integer); @throws Error naming the table and the value when no row does.
  long row_where(const std::string& header, const Cell& value) const;
  double number(long row, const std::string& header) const;
  /// Prints the table as fixed-width Markdown.
  void print_markdown(std::ostream& os) const;
  /// Writes the table as CSV (full precision).
  void write_csv(const std::filesystem::path& path) const;
  /// The table as JSON: {"name", "title", "columns" (headers), "precision", "rows", "note"}.
  nlohmann::ordered_json to_json() const;
};

/// What a plot draws: columns of one table in the JSON.
struct PlotData {
  std::string table{};           ///< table to read
  std::string x{};               ///< column for the x axis
  std::vector<std::string> y{};  ///< columns drawn as lines
};

/// A plot's words: its title and its two axis labels.
struct PlotLabels {
  std::string title{};   ///< plot title
  std::string xlabel{};  ///< x axis label
  std::string ylabel{};  ///< y axis label
};

/// Every column of @p table after its first, against the first: the usual shape of a lab's timing table.
PlotData columns_of(const Table& table);

/// A plot drawn by tools/plot_lab.py from tables in the JSON (the same fields, nested the same way).
struct PlotSpec {
  std::string name{};  ///< output file stem
  PlotData data{};
  PlotLabels labels{};
  bool logy = false;  ///< logarithmic y axis
  /// "line", or "roofline": log-log points (x = intensity, y = FLOP/s) under the
  /// roofs listed in table @ref roofs (columns "hardware", "peak GFLOP/s", "bandwidth GB/s").
  std::string kind = "line";
  std::string roofs{};  ///< roofline only: the table of roofs
  /// roofline only: a table of reference steps (columns "step", "intensity [FLOP/B]") drawn on the roof
  /// named @ref reference_roof, where they would run at the attainable rate (e.g. a source article's examples).
  std::string reference{};
  std::string reference_roof{};  ///< roofline only: the "hardware" row of @ref roofs the reference steps sit on
};

/**
 * One claim a chapter makes, checked on this run's own numbers.
 *
 * A verdict is a list of these: the lab decides @ref held from what it measured or computed on the
 * machine it runs on, never from the chapter's machine, and a claim that did not hold says why.
 * `tools/claims.py` gathers them from every lab's JSON into `docs/claims.md`.
 */
struct Claim {
  /// Stable key, "<lab>.<name>", e.g. "05.flash_fewer_bytes": a row of docs/claims.md across runs.
  std::string id{};
  /// Where the claim comes from: an article's title and section, a paper, or "this lab" for the lab's own.
  std::string source{};
  std::string statement{};  ///< the claim as the chapter words it, e.g. "flash moves fewer bytes than blocked"
  bool held = false;        ///< whether this run's numbers bear it out
  std::string evidence{};   ///< the numbers it was decided on, e.g. "flash 1.8 MB vs blocked 9.4 MB at L = 4096"
  /// When it did not hold, why: a measured or computed cause (e.g. "the 64 x L slab fits in this CPU's 2 MiB L2
  /// up to L = 8192"). Empty when it held.
  std::string cause{};
};

// The JSON of a plot or a claim is its fields by name (nested structs nest): tools/plot_lab.py and
// tools/claims.py read them.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PlotData, table, x, y)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PlotLabels, title, xlabel, ylabel)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PlotSpec, name, data, labels, logy, kind, roofs, reference, reference_roof)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Claim, id, source, statement, held, evidence, cause)

/// Collects one lab run's settings, tables and plots, prints them, and saves them.
class Report {
 public:
  /**
   * @param lab  lab folder name, e.g. "02_kv_cache".
   * @param out  results root (from --out); the lab's folder is created under it.
   * @throws Error naming --out when the folder cannot be created or written.
   */
  Report(std::string lab, const std::filesystem::path& out);

  /// Records a setting printed in the settings block and saved in the JSON.
  void setting(const std::string& key, const std::string& value);
  /// Prints the settings block (lab title and every setting so far) to stdout.
  void print_settings(const std::string& title) const;
  /// Keeps @p table for saving and, when @p print, prints it to stdout.
  void add_table(const Table& table, bool print = true);
  /// Adds a plot drawn later from the JSON.
  void add_plot(PlotSpec plot);
  /// Appends @p value to the JSON array @p key (not printed): e.g. the configurations a lab ran.
  void record(const std::string& key, nlohmann::ordered_json value);
  /// Records and prints the one-line verdict.
  void verdict(const std::string& text);
  /**
   * Records and prints one checked claim ("held" or "did not hold", the evidence, the cause).
   * @throws Error when @p claim has no id or statement, repeats an id, or did not hold and gives no cause.
   */
  void claim(Claim claim);
  /// The claims recorded so far, in order.
  const std::vector<Claim>& claims() const { return claims_; }
  /// Writes \<lab\>.json and one CSV per table; returns the JSON path.
  std::filesystem::path save() const;

  /// The run's metadata: machine, git commit, date.
  static nlohmann::ordered_json machine_metadata();

 private:
  std::string lab_;
  std::filesystem::path dir_;
  nlohmann::ordered_json settings_ = nlohmann::ordered_json::object();  // printed in insertion order
  std::vector<Table> tables_;
  std::vector<PlotSpec> plots_;
  nlohmann::ordered_json records_ = nlohmann::ordered_json::object();  // record()'s arrays, by key
  std::string verdict_;
  std::vector<Claim> claims_;
};

}  // namespace servelab::lab
