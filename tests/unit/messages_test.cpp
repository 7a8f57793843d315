// The library's messages speak to whoever gave the value: a program calling the library hears of a
// "GPU request" and is pointed to the library's functions and nvidia-smi; the gpusel command's
// users hear of --gpu and `gpusel list`, as they typed them (speak_to_command_line).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "gpusel/error.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"

using namespace gpusel;

namespace {

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

// Leaves the process speaking to programs again, whatever the test did.
struct CommandLineWords {
  CommandLineWords() { detail::speak_to_command_line(true); }
  ~CommandLineWords() { detail::speak_to_command_line(false); }
};

struct Slip {
  const char* what;
  std::function<void()> call;
};

std::vector<Slip> slips() {
  static const auto gpus = test::four_same();
  const auto resolve = [](const char* value, const char* cvd = nullptr) {
    CudaEnv env;
    if (cvd != nullptr) env.visible_devices = cvd;
    resolve_entries(read_gpu_request(value, false).gpus, gpus, env);
  };
  return {
      {"neither index nor UUID", [] { parse_gpu_spec("abc"); }},
      {"a MIG device", [] { parse_gpu_spec("MIG-5b2c"); }},
      {"blanks for commas", [] { parse_gpu_spec("0 1"); }},
      {"an assignment", [] { parse_gpu_spec("CUDA_VISIBLE_DEVICES=2,3"); }},
      {"several lines", [] { parse_gpu_spec("GPU-aa\nGPU-bb"); }},
      {"no GPU", [] { parse_gpu_spec(" , "); }},
      {"a GPU twice", [] { parse_gpu_spec("1,01"); }},
      {"indices and UUIDs", [] { parse_gpu_spec("0,GPU-aa"); }},
      {"several for one", [] { read_single_gpu("0,1"); }},
      {"free:0", [] { read_gpu_request("free:0"); }},
      {"free: and a word", [] { read_gpu_request("free:two"); }},
      {"out of range", [=] { resolve("4"); }},
      {"no such UUID", [=] { resolve("GPU-ff"); }},
      {"outside the preset", [=] { resolve("3", "0,1"); }},
  };
}

}  // namespace

TEST(Messages, ProgramsHearOfAGpuRequestNotOfTheCommandsOption) {
  for (const Slip& s : slips()) {
    const std::string msg = message_of(s.call);
    EXPECT_EQ(msg.find("--gpu"), std::string::npos) << s.what << ": " << msg;
    EXPECT_EQ(msg.find("run `gpusel list`"), std::string::npos) << s.what << ": " << msg;
    EXPECT_TRUE(msg.rfind("GPU request ", 0) == 0 || msg.rfind("GPU entry ", 0) == 0)
        << s.what << ": " << msg;
  }
  // The remedies name what a program has: nvidia-smi, the C ABI's list.
  EXPECT_NE(message_of([] { parse_gpu_spec("abc"); }).find("nvidia-smi -L"), std::string::npos);
  const std::string range = message_of(
      [] { resolve_entries(read_gpu_request("4", false).gpus, test::four_same(), CudaEnv{}); });
  EXPECT_NE(range.find("GPU entry \"4\" is out of range"), std::string::npos) << range;
  EXPECT_NE(range.find("gpusel_list_gpus"), std::string::npos) << range;
  // An example value is written as a program passes it.
  const std::string blanks = message_of([] { parse_gpu_spec("0 1"); });
  EXPECT_NE(blanks.find("commas, not blanks: \"0,1\""), std::string::npos) << blanks;
}

TEST(Messages, TheCommandsUsersHearOfGpuAndItsCommands) {
  const CommandLineWords words;
  for (const Slip& s : slips()) {
    const std::string msg = message_of(s.call);
    EXPECT_EQ(msg.rfind("--gpu ", 0), 0u) << s.what << ": " << msg;
    EXPECT_EQ(msg.find("GPU request"), std::string::npos) << s.what << ": " << msg;
  }
  EXPECT_NE(message_of([] { parse_gpu_spec("abc"); }).find("run `gpusel list`"), std::string::npos);
  const std::string blanks = message_of([] { parse_gpu_spec("0 1"); });
  EXPECT_NE(blanks.find("commas, not blanks: --gpu 0,1"), std::string::npos) << blanks;
}

TEST(Messages, EachSaysTheSameThingToBoth) {
  // Only the words for the option and the commands differ: the value and the remedy are in both.
  for (const Slip& s : slips()) {
    const std::string library = message_of(s.call);
    std::string command_line;
    {
      const CommandLineWords words;
      command_line = message_of(s.call);
    }
    EXPECT_NE(library, command_line) << s.what;
    const std::size_t quote = command_line.find('"');
    ASSERT_NE(quote, std::string::npos) << s.what << ": " << command_line;
    const std::string value = command_line.substr(quote, command_line.find('"', quote + 1) - quote);
    EXPECT_NE(library.find(value), std::string::npos) << s.what << ": " << library;
  }
}
