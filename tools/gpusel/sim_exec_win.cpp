// gpusel sim exec (and bind -- PROGRAM) on Windows: Windows has no exec, so the program runs as a
// child process in a Job Object that kills it when gpusel ends, and gpusel exits with its exit
// code. Ctrl-C and Ctrl-Break reach the child through the shared console; gpusel ignores them while
// it waits.
#include <filesystem>

#include "commands.hpp"
#include "common.hpp"
#include "gpusel/error.hpp"
#include "gpusel/launch.hpp"
#include "gpusel/resolution.hpp"
#include "gpusel_detail.hpp"
#include "process.hpp"
#include "win.hpp"

namespace gpusel::cli {

namespace {

// While the child runs, Ctrl-C and Ctrl-Break are the child's to act on (it shares the console):
// gpusel ignores both. (SetConsoleCtrlHandler(nullptr, TRUE) would ignore Ctrl-C only.)
BOOL WINAPI ignore_control(DWORD type) {
  return type == CTRL_C_EVENT || type == CTRL_BREAK_EVENT ? TRUE : FALSE;
}

}  // namespace

std::string executable_path() {
  return detail::win::narrow(detail::win::module_path());
}

int run_program_in_job(const std::string& who, const std::vector<std::string>& command) {
  namespace win = detail::win;
  std::string program;
  try {
    program = find_program(command.front());
  } catch (const Error& e) {
    std::string what = said(e);
    if (what.rfind("run: ", 0) == 0) what = what.substr(5);
    throw bad_input(who + ": " + what);
  }
  win::Handle job = win::kill_on_close_job();
  if (!job)
    throw failure(who + ": cannot create a Job Object for " + detail::quote_value(program) + ": " +
                  win::error_text(GetLastError()) + "; nothing was started");
  detail::ChildSpec spec;
  spec.program = program;
  spec.args = command;
  spec.args[0] = program;
  spec.job = job.get();
  spec.resume = false;  // not before gpusel ignores Ctrl-C and Ctrl-Break (below)
  detail::Started started = detail::start_child(spec);
  if (started.failed == detail::Started::Step::create_process) {
    const DWORD e = started.error;
    const std::string message =
        who + ": cannot start " + detail::quote_value(program) + ": " + win::error_text(e);
    if (e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND || e == ERROR_ACCESS_DENIED ||
        e == ERROR_BAD_EXE_FORMAT)
      throw bad_input(message);
    throw failure(message);
  }
  if (started.failed == detail::Started::Step::join_job) {
    throw failure(who + ": cannot put " + detail::quote_value(program) +
                  " in a Job Object (it would outlive gpusel): " + win::error_text(started.error) +
                  "; it was stopped before it ran");
  }
  SetConsoleCtrlHandler(ignore_control, TRUE);  // the child decides what Ctrl-C/Ctrl-Break do
  started.child.resume();
  started.child.wait();
  return static_cast<int>(started.child.exit_code(1));
}

int run_sim_exec(const std::string& machine, const std::vector<std::string>& command) {
  if (command.empty() || command.front().empty()) {
    throw bad_input("sim exec " + machine +
                    ": no command given; put it after --, as in: gpusel sim exec " + machine +
                    " -- python prog.py");
  }
  const SimSetup setup = sim_setup(machine);
  // The program is looked up before the machine's settings change PATH.
  try {
    (void)find_program(command.front());
  } catch (const Error& e) {
    std::string what = said(e);
    if (what.rfind("run: ", 0) == 0) what = what.substr(5);
    throw bad_input("sim exec: " + what);
  }
  apply_sim(setup);
  return run_program_in_job("sim exec", command);
}

}  // namespace gpusel::cli
