// gpusel bench bw --csv and --plot.
#include "bench_report.hpp"

#include <fmt/format.h>
#ifdef _WIN32
#include <io.h>
#else
#include <unistd.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <vector>

#include "common.hpp"
#include "file_text.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"

namespace gpusel::cli {
namespace {

namespace fs = std::filesystem;

std::string csv_field(const nlohmann::json& v) {
  std::string text;
  if (v.is_null()) return "";
  if (v.is_string()) {
    text = v.get<std::string>();
  } else if (v.is_boolean()) {
    text = v.get<bool>() ? "true" : "false";
  } else if (v.is_number_float()) {
    text = fmt::format("{}", v.get<double>());  // shortest text that reads back as the same
  } else {
    text = v.dump();
  }
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        // Control bytes are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

const char* test_caption(const std::string& test) {
  if (test == "h2d") return "h2d: pinned host memory to device";
  if (test == "d2h") return "d2h: device to pinned host memory";
  if (test == "d2d") return "d2d: device-local copy (bytes copied)";
  if (test == "h2d-pageable") return "h2d-pageable: pageable host memory to device";
  if (test == "d2h-pageable") return "d2h-pageable: device to pageable host memory";
  if (test == "bidir") return "bidir: h2d and d2h at once (both directions' bytes)";
  if (test == "p2p") return "p2p: GPU to GPU (over NVLink or PCIe, or staged through host memory)";
  return "";
}

std::string gpu_label(const nlohmann::json& row) {
  if (row.value("sum", false)) return "all GPUs (sum)";
  const std::string uuid = row.value("uuid", std::string());
  const std::string index =
      row.contains("index") && !row["index"].is_null() ? row["index"].dump() : "-";
  if (row.contains("peer")) {  // p2p: both ends, by index
    const nlohmann::json& peer = row["peer"];
    return "GPU " + index + " to GPU " +
           (peer.contains("index") && !peer["index"].is_null() ? peer["index"].dump() : "-") +
           (row.value("peer_access", true) ? "" : " (staged)");
  }
  return "GPU " + index + " " + uuid.substr(0, std::min<std::size_t>(uuid.size(), 12));
}

// A round axis maximum at or above `v`: 1, 2 or 5 times a power of ten.
double nice_ceiling(double v) {
  if (!(v > 0)) return 1;
  if (!(v < 1e300)) return v;
  // The power of ten at or below v, found by steps rather than with std::log10 and std::pow (which
  // alone made the command load libm at every start: docs/performance.md).
  double p = 1;
  while (p * 10 <= v) p *= 10;
  while (p > v) p /= 10;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

}  // namespace

std::string bench_csv(const nlohmann::json& results) {
  std::string out;
  for (const char* c : kBenchCsvColumns) out += (out.empty() ? "" : ",") + std::string(c);
  out += "\n";
  for (const auto& row : results) {
    std::string line;
    bool first = true;
    for (const char* c : kBenchCsvColumns) {
      if (!first) line += ",";
      first = false;
      const std::string column = c;
      if (column.rfind("peer_", 0) == 0 && column != "peer_access") {
        const std::string key = column.substr(5);
        if (row.contains("peer") && row["peer"].contains(key)) line += csv_field(row["peer"][key]);
      } else if (row.contains(c)) {
        line += csv_field(row[c]);
      }
    }
    out += line + "\n";
  }
  return out;
}

namespace {

// The chart's geometry, in pixels.
struct SvgLayout {
  int width = 900, left = 20, label_w = 200, bar_x = 220, bar_w = 560;
  int row_h = 24, bar_h = 16, panel_head = 56, panel_gap = 16, top = 64;
};

// One bar: rank `i` of its panel at height `ry`; `x_of` maps GB/s to x.
std::string svg_row(const nlohmann::json& r, std::size_t i, int ry, const std::string& test,
                    const SvgLayout& g, const std::function<double(double)>& x_of) {
  const int left = g.left, bar_x = g.bar_x, bar_h = g.bar_h;
  std::string svg;
  const double gbps = r.value("gbps", 0.0);
  const bool ok = r.value("verified", true);
  const bool sum = r.value("sum", false);
  const std::string fill = sum ? "#7b61a8" : ok ? "#4c78a8" : "#d62728";
  const std::string idx = r.contains("index") && !r["index"].is_null() ? r["index"].dump() : "";
  std::string title = fmt::format("{} {}: {:.1f} GB/s", gpu_label(r), test, gbps);
  if (r.contains("gbps_min") && r.contains("gbps_max"))
    title += fmt::format(" (min {:.1f}, max {:.1f})", r["gbps_min"].get<double>(),
                         r["gbps_max"].get<double>());
  if (r.contains("link_gbps"))
    title += fmt::format("; the link carries {:.1f} GB/s", r["link_gbps"].get<double>());
  if (!ok) title += "; FAILED: " + r.value("failure", std::string("not verified"));
  svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left, ry + bar_h - 3,
                     xml_escape(gpu_label(r)));
  svg += fmt::format(
      "<rect class=\"bar\" data-index=\"{}\" data-uuid=\"{}\" data-test=\"{}\" "
      "data-gbps=\"{}\" x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\">"
      "<title>{}</title></rect>\n",
      idx, xml_escape(r.value("uuid", std::string())), xml_escape(test), gbps, bar_x, ry,
      x_of(gbps) - bar_x, bar_h, fill, xml_escape(title));
  if (r.contains("gbps_min") && r.contains("gbps_max")) {
    svg += fmt::format(
        "<line class=\"range\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" "
        "stroke=\"#222222\" stroke-width=\"1.5\"/>\n",
        x_of(r["gbps_min"].get<double>()), ry + bar_h / 2, x_of(r["gbps_max"].get<double>()),
        ry + bar_h / 2);
  }
  // The figure goes after the bar, or after a limit line close behind it.
  double label_x = x_of(std::max(gbps, r.value("gbps_max", gbps)));
  for (const char* key : {"link_gbps", "link_max_gbps"}) {
    if (!r.contains(key)) continue;
    const double lx = x_of(r[key].get<double>());
    if (lx >= label_x - 2 && lx < label_x + 50) label_x = lx;
  }
  svg += fmt::format("<text class=\"value\" x=\"{:.1f}\" y=\"{}\">{:.1f}{}</text>\n", label_x + 6,
                     ry + bar_h - 3, gbps, ok ? "" : " FAILED");
  // The link's theoretical limit for this GPU, as trained now, and what it could do.
  auto limit = [&](const char* key, const char* colour, const char* dash, const char* what,
                   const char* label) {
    if (!r.contains(key)) return;
    const double v = r[key].get<double>();
    if (i == 0) {  // named once, above the panel's first bar
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" font-size=\"10\" "
          "fill=\"{}\">{} {:.1f}</text>\n",
          x_of(v), ry - 6, colour, label, v);
    }
    svg += fmt::format(
        "<line class=\"limit\" data-gbps=\"{}\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" "
        "y2=\"{}\" stroke=\"{}\" stroke-width=\"2\" stroke-dasharray=\"{}\"><title>{}: {:.1f} "
        "GB/s</title></line>\n",
        v, x_of(v), ry - 3, x_of(v), ry + bar_h + 3, colour, dash, what, v);
  };
  limit("link_gbps", "#e45756", "4 2", "the link's theoretical limit as trained now", "link");
  if (r.contains("link_max_gbps") && r.contains("link_gbps") &&
      r["link_max_gbps"].get<double>() > r["link_gbps"].get<double>()) {
    limit("link_max_gbps", "#f58518", "1 2", "what the link could carry at full width/speed",
          "full link");
  }
  return svg;
}

// One test's panel, from height `y`; returns its SVG and sets `y` below it.
std::string svg_panel(const std::string& test, const std::vector<const nlohmann::json*>& rows,
                      int& y, const SvgLayout& g) {
  double scale_max = 0;
  for (const auto* r : rows) {
    scale_max = std::max(scale_max, r->value("gbps_max", r->value("gbps", 0.0)));
    scale_max = std::max(scale_max, r->value("gbps", 0.0));
    if (r->contains("link_gbps")) scale_max = std::max(scale_max, (*r)["link_gbps"].get<double>());
    if (r->contains("link_max_gbps"))
      scale_max = std::max(scale_max, (*r)["link_max_gbps"].get<double>());
  }
  scale_max = nice_ceiling(scale_max * 1.05);
  const std::function<double(double)> x_of = [&](double gbps) {
    return g.bar_x + g.bar_w * std::max(0.0, gbps) / scale_max;
  };
  std::string svg = fmt::format("<g class=\"panel\" data-test=\"{}\">\n", xml_escape(test));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
                     g.left, y + 18, xml_escape(test_caption(test)[0] ? test_caption(test) : test));
  const int rows_top = y + g.panel_head - 12;
  const int rows_bottom = rows_top + g.row_h * static_cast<int>(rows.size());
  // Grid: five steps of the axis.
  for (int k = 0; k <= 5; ++k) {
    const double v = scale_max * k / 5;
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#dddddd\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\" fill=\"#777777\" "
        "font-size=\"10\">{4:g}</text>\n",
        x_of(v), rows_top, rows_bottom, rows_bottom + 13, v);
  }
  for (std::size_t i = 0; i < rows.size(); ++i)
    svg += svg_row(*rows[i], i, rows_top + g.row_h * static_cast<int>(i), test, g, x_of);
  svg += "</g>\n";
  y = rows_bottom + 24 + g.panel_gap;
  return svg;
}

std::string svg_legend(int y, int left) {
  std::string svg;
  svg += fmt::format(
      "<g class=\"legend\" font-size=\"11\">"
      "<rect x=\"{0}\" y=\"{1}\" width=\"14\" height=\"10\" fill=\"#4c78a8\"/>"
      "<text x=\"{2}\" y=\"{3}\">median of the samples</text>"
      "<line x1=\"{4}\" y1=\"{5}\" x2=\"{6}\" y2=\"{5}\" stroke=\"#222222\" stroke-width=\"1.5\"/>"
      "<text x=\"{7}\" y=\"{3}\">min to max</text>"
      "<line x1=\"{8}\" y1=\"{1}\" x2=\"{8}\" y2=\"{9}\" stroke=\"#e45756\" stroke-width=\"2\" "
      "stroke-dasharray=\"4 2\"/>"
      "<text x=\"{10}\" y=\"{3}\">the link's theoretical limit per direction (PCIe, x2 for "
      "bidir; NVLink or PCIe for p2p); dotted: at full width and speed</text>"
      "<rect x=\"{0}\" y=\"{11}\" width=\"14\" height=\"10\" fill=\"#d62728\"/>"
      "<text x=\"{2}\" y=\"{12}\">copied data did not verify</text></g>\n",
      left, y, left + 20, y + 9, left + 170, y + 5, left + 190, left + 196, left + 290, y + 10,
      left + 298, y + 18, y + 27);
  return svg;
}

}  // namespace

std::string bench_svg(const nlohmann::json& results, const std::string& subtitle) {
  // Tests in the order they were measured; rows of each test in the order given.
  std::vector<std::string> tests;
  std::map<std::string, std::vector<const nlohmann::json*>> by_test;
  for (const auto& row : results) {
    const std::string test = row.value("test", std::string());
    if (by_test.find(test) == by_test.end()) tests.push_back(test);
    by_test[test].push_back(&row);
  }
  const SvgLayout g;
  int height = g.top;
  for (const auto& t : tests) {
    height += g.panel_head + g.row_h * static_cast<int>(by_test[t].size()) + 24 + g.panel_gap;
  }
  height += 44;  // the legend
  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n"
      "<text x=\"{2}\" y=\"26\" font-size=\"18\" font-weight=\"bold\">gpusel bench bw: copy "
      "rates, GB/s (1e9 bytes per second)</text>\n"
      "<text x=\"{2}\" y=\"46\" fill=\"#555555\">{3}</text>\n",
      g.width, height, g.left, xml_escape(subtitle));
  int y = g.top;
  for (const auto& test : tests) svg += svg_panel(test, by_test[test], y, g);
  svg += svg_legend(y, g.left);
  svg += "</svg>\n";
  return svg;
}

void check_output_path(const std::string& option, const std::string& path) {
  if (path.empty()) throw bad_input(option + " needs a file name");
  if (path == "-") return;
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw bad_input(option + " " + detail::quote_value(path) + " is a folder; give a file name");
  if (!fs::is_directory(dir, ec)) {
    throw bad_input(option + " " + detail::quote_value(path) + ": the folder " +
                    detail::quote_value(dir.string()) + " does not exist");
  }
#ifdef _WIN32
  if (_waccess(dir.c_str(), 2) != 0) {
#else
  if (access(dir.c_str(), W_OK) != 0) {
#endif
    throw bad_input(option + " " + detail::quote_value(path) + ": cannot write in " +
                    detail::quote_value(dir.string()) + " (" + std::strerror(errno) + ")");
  }
}

void write_output(const std::string& option, const std::string& path, const std::string& text) {
  if (path == "-") {
    to_stdout() << text << flushed;
    return;
  }
  if (!detail::write_file_text(path, text)) {
    throw failure(option + ": cannot write " + detail::quote_value(path) + " (" +
                  std::strerror(errno) + ")");
  }
}

}  // namespace gpusel::cli
