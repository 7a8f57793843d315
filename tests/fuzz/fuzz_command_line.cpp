// Fuzzes the gpusel command's reader of its command line (tools/gpusel/args.cpp over the table in
// table.cpp): the input is argv, its words separated by NUL bytes. Any argv is read without a
// crash, a sanitizer report or an exception other than gpusel::Error; a refusal says something;
// what was read can be asked for, and help written for whatever command was named.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "args.hpp"
#include "gpusel/error.hpp"

namespace {

// Every name the table reads values by (a name no command has answers "not given").
const char* const kNames[] = {"--gpu",   "--json",  "--wait",      "--watch",        "--format",
                              "MACHINE", "COMMAND", "--lease-dir", "--copies",       "--size",
                              "--sim",   "--undo",  "--grace",     "--ranks-per-gpu"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> words{"gpusel"};
  std::string word;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      words.push_back(word);
      word.clear();
    } else {
      word += static_cast<char>(data[i]);
    }
  }
  words.push_back(word);
  if (words.size() > 64) return 0;
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  gpusel::cli::CommandLine line(gpusel::cli::kGpusel);
  try {
    line.parse(static_cast<int>(words.size()), argv.data());
    std::size_t seen = line.path().size() + line.sim().size() + line.words().size();
    for (const char* name : kNames) {
      if (const auto value = line.value(name)) seen += value->size();
      seen += line.flag(name) ? 1 : 0;
    }
    if (line.help().empty() || seen > (std::size_t{1} << 30)) __builtin_trap();
  } catch (const gpusel::Error& e) {
    if (std::string(e.what()).empty()) __builtin_trap();  // a refusal names what and why
  }
  return 0;
}
