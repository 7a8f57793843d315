// gpusel bench bw's files: the rows as CSV for spreadsheets, and drawn as an SVG chart.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gpusel::cli {

// The columns of bench_csv, in order; each is the JSON row's key of the same name, but peer_index
// and peer_uuid, which are a p2p row's peer.index and peer.uuid.
inline constexpr const char* kBenchCsvColumns[] = {
    "index",    "uuid",     "name",          "pci_bus_id",   "test",      "bytes",
    "gbps",     "gbps_min", "gbps_max",      "traffic_gbps", "link_gbps", "link_max_gbps",
    "verified", "failure",  "sum",           "peer_index",   "peer_uuid", "peer_access",
    "path",     "nvlinks",  "nvlink_version"};

// A header line, then one line per row of `results` (bench bw's JSON rows); a key the row lacks
// is an empty field. Fields are quoted as RFC 4180 says when they need it.
std::string bench_csv(const nlohmann::json& results);

// An SVG chart (no script, no external resources): one panel per test, one bar per GPU with its
// median rate written beside it, whiskers from min to max, and a line at the link's theoretical
// limit where one is known. Each bar is a <rect class="bar"> with data-index, data-uuid,
// data-test and data-gbps attributes and a <title> giving the figure.
std::string bench_svg(const nlohmann::json& results, const std::string& subtitle);

// Refuses (Error(BadInput)) an output path whose folder does not exist or cannot be written,
// before any measuring starts. `option` names the option for the message.
void check_output_path(const std::string& option, const std::string& path);

// Writes `text` to `path` ("-": stdout). Throws Error(Failure) when it cannot.
void write_output(const std::string& option, const std::string& path, const std::string& text);

}  // namespace gpusel::cli
