// SPDX-License-Identifier: MIT
#include "report.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "cuda/device_probe.h"

namespace servelab::lab {

namespace {

std::string format_cell(const Cell& cell, int precision) {
  std::ostringstream os;
  if (const auto* s = std::get_if<std::string>(&cell)) return *s;
  if (const auto* i = std::get_if<long long>(&cell)) return std::to_string(*i);
  os << std::fixed << std::setprecision(precision) << std::get<double>(cell);
  return os.str();
}

nlohmann::ordered_json cell_json(const Cell& cell) {
  return std::visit([](const auto& v) { return nlohmann::ordered_json(v); }, cell);
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// @p text padded with spaces to @p width terminal columns, on the right (left-aligned) or the left.
std::string pad(const std::string& text, std::size_t width, bool right_align) {
  const std::size_t used = display_width(text);
  const std::string fill(width > used ? width - used : 0, ' ');
  return right_align ? fill + text : text + fill;
}

std::string run_command(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace

std::size_t display_width(const std::string& s) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto byte = static_cast<unsigned char>(s[i]);
    if ((byte & 0xC0) == 0x80) continue;
    char32_t cp = byte;
    const std::size_t extra = byte >= 0xF0 ? 3 : byte >= 0xE0 ? 2 : byte >= 0xC0 ? 1 : 0;
    if (extra) cp = byte & (0x3F >> extra);
    for (std::size_t k = 1; k <= extra && i + k < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    const bool wide = (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF) ||
                      (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) ||
                      (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
                      (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x20000 && cp <= 0x3FFFD);
    width += wide ? 2 : 1;
  }
  return width;
}

void Table::add_row(std::vector<Cell> row) {
  check(row.size() == columns.size(), "table ", name, ": row has ", row.size(), " cells, header has ", columns.size());
  rows.push_back(std::move(row));
}

std::size_t Table::column(const std::string& header) const {
  for (std::size_t c = 0; c < columns.size(); ++c)
    if (columns[c].header == header) return c;
  fail("table ", name, " has no column '", header, "'");
}

std::vector<std::string> Table::headers(std::size_t from) const {
  std::vector<std::string> out;
  for (std::size_t c = from; c < columns.size(); ++c) out.push_back(columns[c].header);
  return out;
}

const Cell& Table::cell(long row, const std::string& header) const {
  const long n = static_cast<long>(rows.size());
  const long r = row < 0 ? n + row : row;
  check(r >= 0 && r < n, "table ", name, " has no row ", row, " (", n, " rows)");
  return rows[static_cast<std::size_t>(r)][column(header)];
}

long Table::row_where(const std::string& header, const Cell& value) const {
  const std::size_t c = column(header);
  for (std::size_t r = 0; r < rows.size(); ++r)
    if (rows[r][c] == value) return static_cast<long>(r);
  std::ostringstream shown;
  std::visit([&](const auto& v) { shown << v; }, value);
  fail("table ", name, " has no row with ", header, " = ", shown.str());
}

double Table::number(long row, const std::string& header) const {
  const Cell& c = cell(row, header);
  if (const auto* i = std::get_if<long long>(&c)) return static_cast<double>(*i);
  const auto* d = std::get_if<double>(&c);
  check(d != nullptr, "table ", name, ": column '", header, "' row ", row, " is text, not a number");
  return *d;
}

void Table::print_markdown(std::ostream& os) const {
  std::vector<std::vector<std::string>> text;
  std::vector<std::size_t> width(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) width[c] = display_width(columns[c].header);
  for (const auto& row : rows) {
    text.emplace_back();
    for (std::size_t c = 0; c < row.size(); ++c) {
      text.back().push_back(format_cell(row[c], columns[c].precision));
      width[c] = std::max(width[c], display_width(text.back().back()));
    }
  }
  os << "### " << title << "\n\n|";
  for (std::size_t c = 0; c < columns.size(); ++c) os << ' ' << pad(columns[c].header, width[c], false) << " |";
  os << "\n|";
  for (std::size_t c = 0; c < columns.size(); ++c) {
    // Text columns align left, numbers right (Markdown's ---: marker).
    const bool numeric = !rows.empty() && !std::holds_alternative<std::string>(rows[0][c]);
    os << std::string(width[c] + 1, '-') << (numeric ? ":|" : "-|");
  }
  os << "\n";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    os << "|";
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const bool numeric = !std::holds_alternative<std::string>(rows[r][c]);
      os << ' ' << pad(text[r][c], width[c], numeric) << " |";
    }
    os << "\n";
  }
  if (!note.empty()) os << "\n" << note << "\n";
  os << "\n";
}

void Table::write_csv(const std::filesystem::path& path) const {
  std::ofstream out(path);
  check(out.good(), path.string(), ": cannot write CSV");
  for (std::size_t c = 0; c < columns.size(); ++c) out << (c ? "," : "") << csv_escape(columns[c].header);
  out << "\n" << std::setprecision(17);
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      out << (c ? "," : "");
      std::visit(
          [&](const auto& v) {
            if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>)
              out << csv_escape(v);
            else
              out << v;
          },
          row[c]);
    }
    out << "\n";
  }
}

nlohmann::ordered_json Table::to_json() const {
  nlohmann::ordered_json rows_json = nlohmann::ordered_json::array();
  for (const auto& row : rows) {
    nlohmann::ordered_json r = nlohmann::ordered_json::array();
    for (const auto& cell : row) r.push_back(cell_json(cell));
    rows_json.push_back(r);
  }
  std::vector<int> precision;
  for (const Column& c : columns) precision.push_back(c.precision);
  return {{"name", name},           {"title", title},    {"columns", headers()},
          {"precision", precision}, {"rows", rows_json}, {"note", note}};
}

Report::Report(std::string lab, const std::filesystem::path& out) : lab_(std::move(lab)), dir_(out / lab_) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  check(!ec, "--out ", out.string(), ": cannot create ", dir_.string(), " (", ec.message(), ")");
  const auto probe = dir_ / ".write-test";
  check(std::ofstream(probe).good(), "--out ", out.string(), ": folder ", dir_.string(), " is not writable");
  std::filesystem::remove(probe, ec);
}

void Report::setting(const std::string& key, const std::string& value) { settings_[key] = value; }

void Report::print_settings(const std::string& title) const {
  std::cout << "## " << title << "\n\n";
  std::size_t width = 0;
  for (const auto& [key, value] : settings_.items()) width = std::max(width, display_width(key));
  for (const auto& [key, value] : settings_.items())
    std::cout << pad(key, width, false) << "  " << value.get<std::string>() << "\n";
  std::cout << "\n";
}

void Report::add_table(const Table& table, bool print) {
  if (print) {
    table.print_markdown(std::cout);
    std::cout.flush();
  }
  tables_.push_back(table);
}

PlotData columns_of(const Table& table) {
  check(!table.columns.empty(), "table ", table.name, " has no columns to plot");
  return {.table = table.name, .x = table.columns.front().header, .y = table.headers(1)};
}

void Report::add_plot(PlotSpec plot) { plots_.push_back(std::move(plot)); }

void Report::record(const std::string& key, nlohmann::ordered_json value) {
  if (!records_.contains(key)) records_[key] = nlohmann::ordered_json::array();
  records_[key].push_back(std::move(value));
}

void Report::verdict(const std::string& text) {
  verdict_ = text;
  std::cout << "**Verdict:** " << text << "\n";
}

void Report::claim(Claim c) {
  check(!c.id.empty() && !c.statement.empty(), "lab ", lab_, ": a claim needs an id and a statement");
  for (const auto& other : claims_) check(other.id != c.id, "lab ", lab_, ": claim ", c.id, " recorded twice");
  check(c.held || !c.cause.empty(), "lab ", lab_, ": claim ", c.id, " did not hold and says no cause");
  std::cout << "- " << (c.held ? "[held] " : "[did not hold] ") << c.statement << ": " << c.evidence;
  if (!c.held) std::cout << "; because " << c.cause;
  std::cout << "\n";
  claims_.push_back(std::move(c));
}

nlohmann::ordered_json Report::machine_metadata() {
  // Read once per run: it shells out to git, and a lab asks for it several times.
  static const nlohmann::ordered_json metadata = [] {
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    std::string commit = run_command("git -C '" SERVELAB_SOURCE_DIR "' rev-parse --short HEAD 2>/dev/null");
    if (!commit.empty() &&
        !run_command("git -C '" SERVELAB_SOURCE_DIR "' status --porcelain --untracked-files=no 2>/dev/null").empty())
      commit += "-dirty";
    return nlohmann::ordered_json{{"cpu", cpu_model()},
                                  {"cpu_threads", std::thread::hardware_concurrency()},
                                  {"gpu", cuda_device_summary()},
                                  {"git_commit", commit.empty() ? "unknown" : commit},
                                  {"date_utc", date}};
  }();
  return metadata;
}

std::filesystem::path Report::save() const {
  nlohmann::ordered_json j;
  j["lab"] = lab_;
  j["machine"] = machine_metadata();
  j["settings"] = settings_;
  j["tables"] = nlohmann::ordered_json::array();
  for (const auto& t : tables_) {
    j["tables"].push_back(t.to_json());
    t.write_csv(dir_ / (t.name + ".csv"));
  }
  j["plots"] = nlohmann::json(plots_);  // the macros in report.h define to_json for nlohmann::json
  for (const auto& [key, value] : records_.items()) j[key] = value;
  j["verdict"] = verdict_;
  j["claims"] = nlohmann::json(claims_);
  const auto path = dir_ / (lab_ + ".json");
  std::ofstream out(path);
  check(out.good(), path.string(), ": cannot write results");
  out << j.dump(2) << "\n";
  std::cerr << "results: " << path.string() << " (+ " << tables_.size() << " CSV)\n";
  return path;
}

}  // namespace servelab::lab
