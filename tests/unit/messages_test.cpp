// The library's messages speak to whoever gave the value: a program calling the library hears of a
// "GPU request" and is pointed to the library's functions and nvidia-smi; the gpusel command's
// users hear of --gpu and `gpusel list`, as they typed them. One error holds both wordings, and
// whoever shows it words it for its reader (Error::message, gpusel::worded): no setting of the
// process decides.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "fixtures.hpp"
#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel/spec.hpp"
#include "gpusel_detail.hpp"

using namespace gpusel;

namespace {

std::string message_of(const std::function<void()>& call, Audience audience = Audience::Program) {
  try {
    call();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
    EXPECT_EQ(e.message(Audience::Program), e.what());  // what() is the program's wording
    return e.message(audience);
  }
  ADD_FAILURE() << "no error";
  return {};
}

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
  const Audience words = Audience::CommandLine;
  for (const Slip& s : slips()) {
    const std::string msg = message_of(s.call, words);
    EXPECT_EQ(msg.rfind("--gpu ", 0), 0u) << s.what << ": " << msg;
    EXPECT_EQ(msg.find("GPU request"), std::string::npos) << s.what << ": " << msg;
  }
  EXPECT_NE(message_of([] { parse_gpu_spec("abc"); }, words).find("run `gpusel list`"),
            std::string::npos);
  const std::string blanks = message_of([] { parse_gpu_spec("0 1"); }, words);
  EXPECT_NE(blanks.find("commas, not blanks: --gpu 0,1"), std::string::npos) << blanks;
}

TEST(Messages, EachSaysTheSameThingToBoth) {
  // Only the words for the option and the commands differ: the value and the remedy are in both.
  for (const Slip& s : slips()) {
    const std::string library = message_of(s.call);
    const std::string command_line = message_of(s.call, Audience::CommandLine);
    EXPECT_NE(library, command_line) << s.what;
    const std::size_t quote = command_line.find('"');
    ASSERT_NE(quote, std::string::npos) << s.what << ": " << command_line;
    const std::string value = command_line.substr(quote, command_line.find('"', quote + 1) - quote);
    EXPECT_NE(library.find(value), std::string::npos) << s.what << ": " << library;
  }
}

TEST(Messages, OneErrorIsWordedForEachReaderAtOnce) {
  // The same error, shown to a program and to the command line from two threads at once: each
  // reader gets its own words, whatever the other does (no process-wide setting).
  Error error(ErrorKind::BadInput, "x");
  try {
    parse_gpu_spec("0 1");
  } catch (const Error& e) {
    error = e;
  }
  std::vector<std::string> program(200), command_line(200);
  std::thread a([&] {
    for (std::string& m : program) m = error.message(Audience::Program);
  });
  std::thread b([&] {
    for (std::string& m : command_line) m = error.message(Audience::CommandLine);
  });
  a.join();
  b.join();
  for (const std::string& m : program) EXPECT_EQ(m, program.front());
  for (const std::string& m : command_line) EXPECT_EQ(m, command_line.front());
  EXPECT_EQ(program.front().rfind("GPU entry ", 0), 0u) << program.front();
  EXPECT_EQ(command_line.front().rfind("--gpu ", 0), 0u) << command_line.front();
  // Built into another message, an error keeps both wordings (Error::text).
  const Error wrapped = bad_input("while reading: " + error.text());
  EXPECT_EQ(wrapped.message(Audience::CommandLine), "while reading: " + command_line.front());
  EXPECT_EQ(std::string(wrapped.what()), "while reading: " + program.front());
}

TEST(Messages, WordingsAndStrayMarks) {
  const std::string piece = detail::reader_text("--gpu 0,1", "\"0,1\"");
  EXPECT_EQ(worded("give " + piece + ".", Audience::CommandLine), "give --gpu 0,1.");
  EXPECT_EQ(worded("give " + piece + ".", Audience::Program), "give \"0,1\".");
  EXPECT_EQ(worded("plain \"text\"", Audience::CommandLine), "plain \"text\"");
  EXPECT_EQ(worded(worded(piece, Audience::Program), Audience::CommandLine), "\"0,1\"");
  // Raw text holding the marks (an environment value, a path) loses them, and nothing else: the
  // rest of the message, remedy included, stays for both readers.
  for (const Audience a : {Audience::Program, Audience::CommandLine}) {
    EXPECT_EQ(worded("a\x1e"
                     "b; fix it",
                     a),
              "ab; fix it");
    EXPECT_EQ(worded("a\x1f"
                     "b\x1d"
                     "c",
                     a),
              "abc");
    EXPECT_EQ(worded("x\x1e" + piece, a), "x" + worded(piece, a));
  }
  // A long run of marks is read in one pass (no recursion, no stack to exhaust).
  EXPECT_EQ(worded(std::string(1 << 20, '\x1e') + "end", Audience::Program), "end");
  // A value a message quotes never breaks a piece: an example shows it escaped.
  const std::string example = detail::gpu_example(
      "0\x1f"
      "1");
  EXPECT_EQ(worded(example, Audience::CommandLine), "--gpu 0\\x1f1");
  EXPECT_EQ(worded(example, Audience::Program), "\"0\\x1f1\"");
}

TEST(Messages, TheLauncherNamesTheCommandOnlyToItsUsers) {
  // A C++ program calling the launcher hears of LaunchOptions; `gpusel run`'s users of run's
  // syntax.
  try {
    find_program("");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("gpusel run"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("LaunchOptions::command"), std::string::npos) << e.what();
    EXPECT_NE(e.message(Audience::CommandLine).find("gpusel run --gpu 0,1 --"), std::string::npos);
  }
}
