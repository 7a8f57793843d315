// Child processes on Windows (process.hpp): CreateProcessW, a Job Object joined while the child is
// still suspended, waiting for it and ending it.
#include "process.hpp"

#include <algorithm>

namespace gpusel::detail {

namespace {

// PROC_THREAD_ATTRIBUTE_HANDLE_LIST for `handles` (the child inherits those and no other handle);
// list() is null where Windows cannot make it. Neither copied nor moved: the list points into it.
class HandleList {
 public:
  explicit HandleList(std::vector<HANDLE> handles) : handles_(std::move(handles)) {
    SIZE_T size = 0;
    InitializeProcThreadAttributeList(nullptr, 1, 0, &size);
    buffer_.resize(size);
    auto* attrs = reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(buffer_.data());
    if (handles_.empty() || size == 0 || !InitializeProcThreadAttributeList(attrs, 1, 0, &size))
      return;
    made_ = attrs;
    if (UpdateProcThreadAttribute(attrs, 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, handles_.data(),
                                  handles_.size() * sizeof(HANDLE), nullptr, nullptr))
      list_ = attrs;
  }
  HandleList(const HandleList&) = delete;
  HandleList& operator=(const HandleList&) = delete;
  ~HandleList() {
    if (made_ != nullptr) DeleteProcThreadAttributeList(made_);
  }
  LPPROC_THREAD_ATTRIBUTE_LIST list() const { return list_; }

 private:
  std::vector<HANDLE> handles_;
  std::vector<char> buffer_;
  LPPROC_THREAD_ATTRIBUTE_LIST made_ = nullptr;
  LPPROC_THREAD_ATTRIBUTE_LIST list_ = nullptr;
};

// The standard handles, each once and not null: what the child inherits with std_handles_only.
std::vector<HANDLE> distinct_handles(const ChildSpec::StdHandles& h) {
  std::vector<HANDLE> out;
  for (HANDLE one : {h.in, h.out, h.err}) {
    if (one != nullptr && std::find(out.begin(), out.end(), one) == out.end()) out.push_back(one);
  }
  return out;
}

// Puts a suspended child in its job; when it cannot join a required job, it is terminated and
// the start fails.
void join_job(const ChildSpec& spec, Started& started) {
  if (AssignProcessToJobObject(spec.job, started.child.handle()) || !spec.job_required) return;
  started.error = GetLastError();
  started.failed = Started::Step::join_job;
  started.child.terminate(1);
}

}  // namespace

Started start_child(const ChildSpec& spec) {
  STARTUPINFOEXW six{};
  STARTUPINFOW& si = six.StartupInfo;
  si.cb = sizeof si;
  std::vector<HANDLE> inherit;
  if (spec.std_handles) {
    si.dwFlags = STARTF_USESTDHANDLES;
    si.hStdInput = spec.std_handles->in;
    si.hStdOutput = spec.std_handles->out;
    si.hStdError = spec.std_handles->err;
    if (spec.std_handles_only) inherit = distinct_handles(*spec.std_handles);
  }
  const HandleList handle_list(std::move(inherit));
  if (handle_list.list() != nullptr) {
    six.lpAttributeList = handle_list.list();
    si.cb = sizeof six;
  }
  DWORD flags = CREATE_UNICODE_ENVIRONMENT;
  if (spec.job != nullptr) flags |= CREATE_SUSPENDED;
  if (spec.own_group) flags |= CREATE_NEW_PROCESS_GROUP;
  if (spec.no_window) flags |= CREATE_NO_WINDOW;
  if (handle_list.list() != nullptr) flags |= EXTENDED_STARTUPINFO_PRESENT;
  std::wstring block = spec.environment ? spec.environment->block() : std::wstring();
  std::wstring line = win::command_line(spec.args);
  const std::wstring exe = win::widen(spec.program);
  const std::wstring folder = win::widen(spec.directory);
  PROCESS_INFORMATION pi{};
  Started started;
  if (!CreateProcessW(exe.c_str(), line.data(), nullptr, nullptr, TRUE, flags,
                      spec.environment ? block.data() : nullptr,
                      folder.empty() ? nullptr : folder.c_str(), &si, &pi)) {
    started.error = GetLastError();
    started.failed = Started::Step::create_process;
    return started;
  }
  win::Handle thread(pi.hThread);
  started.child = Child(win::Handle(pi.hProcess),
                        spec.job != nullptr ? std::move(thread) : win::Handle(), pi.dwProcessId);
  if (spec.job == nullptr) return started;
  join_job(spec, started);
  if (started.failed == Started::Step::none && spec.resume) started.child.resume();
  return started;
}

void Child::resume() {
  if (!thread_) return;
  ResumeThread(thread_.get());
  thread_.reset();
}

bool Child::wait(DWORD ms) const {
  return WaitForSingleObject(process_.get(), ms) == WAIT_OBJECT_0;
}

bool Child::running() const {
  return WaitForSingleObject(process_.get(), 0) == WAIT_TIMEOUT;
}

DWORD Child::exit_code(DWORD unknown) const {
  DWORD code = unknown;
  if (!GetExitCodeProcess(process_.get(), &code)) return unknown;
  return code;
}

bool Child::terminate(UINT code) const {
  return TerminateProcess(process_.get(), code) != 0;
}

bool terminate_job(HANDLE job, UINT code) {
  return TerminateJobObject(job, code) != 0;
}

bool break_group(DWORD group) {
  return GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, group) != 0;
}

}  // namespace gpusel::detail
