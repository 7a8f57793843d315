// One setup_x (declares the subcommand and its options) and run_x (does the work, returns the
// exit status) per subcommand, each pair in its own file.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace gpusel::cli {

struct ListOptions {
  bool json = false;
};
CLI::App* setup_list(CLI::App& app, ListOptions& options);
int run_list(const ListOptions& options);

struct ResolveOptions {
  std::vector<std::string> gpus;
  std::string raw;
  bool json = false;
};
CLI::App* setup_resolve(CLI::App& app, ResolveOptions& options);
int run_resolve(const ResolveOptions& options);

struct SimOptions {
  CLI::App* list = nullptr;
  CLI::App* env = nullptr;
  std::string machine;
};
CLI::App* setup_sim(CLI::App& app, SimOptions& options);
int run_sim(const SimOptions& options);

}  // namespace gpusel::cli
