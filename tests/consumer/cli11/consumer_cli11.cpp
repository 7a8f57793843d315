// docs/c-api.md's one line: gpusel's --gpu option in a CLI11 program.
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "gpusel/cli11.hpp"
#include "gpusel/spec.hpp"

int main(int argc, char** argv) {
  CLI::App app{"consumer_cli11"};
  std::vector<std::string> gpus;
  gpusel::add_gpu_option(app, gpus)->required();
  CLI11_PARSE(app, argc, argv);
  std::printf("gpus=");
  for (std::size_t i = 0; i < gpus.size(); ++i) std::printf("%s%s", i ? "," : "", gpus[i].c_str());
  std::printf("\n");
  return 0;
}
