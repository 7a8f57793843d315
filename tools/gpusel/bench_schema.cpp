#include "bench_schema.hpp"

#include <nlohmann/json.hpp>

namespace gpusel::cli::bench {
namespace {

using nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json result_json(const BandwidthResult& r) {
  json j = {{"test", r.test}, {"bytes", r.bytes}, {"samples", r.gbps},      {"median", r.median},
            {"min", r.min},   {"max", r.max},     {"verified", r.verified}, {"failure", r.failure}};
  if (r.problem) {  // the failure as data, across the pipe from the bench worker
    j["problem"] = {{"code", static_cast<int>(r.problem.code)},
                    {"call", r.problem.call},
                    {"result", r.problem.result},
                    {"fields", json::object()}};
    for (const ProblemField& f : r.problem.fields) j["problem"]["fields"][f.name] = f.value;
  }
  if (r.peer >= 0) {
    j["peer"] = r.peer;
    j["peer_uuid"] = r.peer_uuid;
    j["peer_access"] = r.peer_access;
  }
  return j;
}

BandwidthResult result_from(const json& j) {
  BandwidthResult r;
  r.test = j.at("test").get<std::string>();
  r.bytes = j.at("bytes").get<std::uint64_t>();
  r.gbps = j.at("samples").get<std::vector<double>>();
  r.median = j.at("median").get<double>();
  r.min = j.at("min").get<double>();
  r.max = j.at("max").get<double>();
  r.verified = j.at("verified").get<bool>();
  r.failure = j.at("failure").get<std::string>();
  if (j.contains("problem")) {
    const json& p = j.at("problem");
    r.problem = Problem{static_cast<ErrorCode>(p.at("code").get<int>()),
                        p.at("call").get<std::string>(), p.at("result").get<long long>()};
    for (const auto& [name, value] : p.at("fields").items()) {
      r.problem.fields.push_back({name, value.get<std::string>()});
    }
  }
  if (j.contains("peer")) {
    r.peer = j.at("peer").get<int>();
    r.peer_uuid = j.at("peer_uuid").get<std::string>();
    r.peer_access = j.at("peer_access").get<bool>();
  }
  return r;
}

void put_gpu(json& j, const WorkerGpu& g) {
  j["uuid"] = g.uuid;
  j["name"] = g.name;
  j["pci_bus_id"] = g.pci_bus_id;
}

WorkerGpu gpu_from(const json& j) {
  return {j.at("uuid").get<std::string>(), j.at("name").get<std::string>(),
          j.at("pci_bus_id").get<std::string>()};
}

}  // namespace

std::string encode(const WorkerReport& report) {
  json j;
  if (!report.error.empty()) {
    j["error"] = report.error;
    return dump(j);
  }
  put_gpu(j, report.gpu);
  j["l2_cache_bytes"] = report.l2_cache_bytes;
  j["results"] = json::array();
  for (const BandwidthResult& r : report.results) j["results"].push_back(result_json(r));
  return dump(j);
}

std::string encode(const WorkerEvent& event) {
  json j;
  if (event.result) {
    put_gpu(j, event.gpu);
    j["test"] = event.test;
    j["result"] = result_json(*event.result);
  } else {
    j = {{"test", event.test}, {"sample", event.sample}, {"seconds", event.seconds}};
  }
  return dump(j);
}

std::optional<WorkerReport> decode_report(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  WorkerReport report;
  try {
    if (j.contains("error")) {
      report.error = j["error"].get<std::string>();
      return report;
    }
    report.gpu = gpu_from(j);
    report.l2_cache_bytes = j.at("l2_cache_bytes").get<std::uint64_t>();
    for (const json& r : j.at("results")) report.results.push_back(result_from(r));
  } catch (const json::exception&) {
    return std::nullopt;
  }
  return report;
}

std::optional<WorkerEvent> decode_event(const std::string& line) {
  const json j = json::parse(line, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  WorkerEvent event;
  try {
    event.test = j.value("test", std::string());
    if (j.contains("result")) {
      event.gpu = gpu_from(j);
      event.result = result_from(j["result"]);
    } else {
      event.sample = j.value("sample", 0);
      event.seconds = j.value("seconds", 0.0);
    }
  } catch (const json::exception&) {
    return std::nullopt;
  }
  return event;
}

}  // namespace gpusel::cli::bench
