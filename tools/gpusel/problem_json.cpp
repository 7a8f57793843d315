#include "problem_json.hpp"

#include "common.hpp"

namespace gpusel::cli {

nlohmann::json problem_json(const Problem& problem) {
  if (!problem) return nullptr;
  nlohmann::json j;
  j["code"] = error_code_name(problem.code);
  j["call"] = problem.call.empty() ? nlohmann::json(nullptr) : nlohmann::json(problem.call);
  j["result"] = problem.call.empty() ? nlohmann::json(nullptr) : nlohmann::json(problem.result);
  j["subject"] = problem.subject == Subject::None ? nlohmann::json(nullptr)
                                                  : nlohmann::json(subject_name(problem.subject));
  j["fields"] = nlohmann::json::object();
  for (const ProblemField& f : problem.fields) j["fields"][f.name] = f.value;
  return j;
}

nlohmann::json failure_json(const std::exception& failure) {
  nlohmann::json j;
  if (const auto* e = dynamic_cast<const Error*>(&failure)) {
    j = problem_json(e->problem());
    j["exit_code"] = e->exit_code();
  } else {
    j = problem_json(Problem{ErrorCode::Unspecified, "", 0});
    j["exit_code"] = 1;
  }
  j["message"] = said(failure);
  return nlohmann::json{{"error", j}};
}

int report_failure(const std::exception& failure, bool json) {
  print_error(said(failure));
  if (json) {
    to_stdout() << failure_json(failure).dump(-1, ' ', false,
                                              nlohmann::json::error_handler_t::replace)
                << "\n"
                << flushed;
  }
  const auto* e = dynamic_cast<const Error*>(&failure);
  return e != nullptr ? e->exit_code() : 1;
}

}  // namespace gpusel::cli
