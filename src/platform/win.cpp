#include "win.hpp"

#include <algorithm>
#include <cstdio>
#include <cwctype>
#include <vector>

namespace gpusel::detail::win {

std::wstring widen(const std::string& utf8) {
  if (utf8.empty()) return {};
  const int n =
      MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), nullptr, 0);
  std::wstring out(static_cast<std::size_t>(n > 0 ? n : 0), L'\0');
  if (n > 0)
    MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), out.data(), n);
  return out;
}

std::string narrow(const std::wstring& wide) {
  if (wide.empty()) return {};
  const int n = WideCharToMultiByte(CP_UTF8, 0, wide.data(), static_cast<int>(wide.size()), nullptr,
                                    0, nullptr, nullptr);
  std::string out(static_cast<std::size_t>(n > 0 ? n : 0), '\0');
  if (n > 0)
    WideCharToMultiByte(CP_UTF8, 0, wide.data(), static_cast<int>(wide.size()), out.data(), n,
                        nullptr, nullptr);
  return out;
}

std::string error_text(DWORD code) {
  wchar_t* buf = nullptr;
  const DWORD n = FormatMessageW(
      FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
      nullptr, code, 0, reinterpret_cast<wchar_t*>(&buf), 0, nullptr);
  std::wstring text = n > 0 && buf != nullptr ? std::wstring(buf, n) : std::wstring();
  if (buf != nullptr) LocalFree(buf);
  while (!text.empty() && (text.back() == L'\n' || text.back() == L'\r' || text.back() == L' ' ||
                           text.back() == L'.'))
    text.pop_back();
  std::string out = narrow(text);
  out += (out.empty() ? "" : " ") + std::string("(error ") + std::to_string(code) + ")";
  return out;
}

std::optional<std::wstring> environment(const wchar_t* name) {
  std::vector<wchar_t> buf(256);
  for (;;) {
    SetLastError(ERROR_SUCCESS);
    const DWORD n = GetEnvironmentVariableW(name, buf.data(), static_cast<DWORD>(buf.size()));
    if (n == 0) {
      if (GetLastError() == ERROR_ENVVAR_NOT_FOUND) return std::nullopt;
      return std::wstring();
    }
    if (n < buf.size()) return std::wstring(buf.data(), n);
    buf.resize(n);
  }
}

std::wstring module_path(HMODULE module) {
  std::vector<wchar_t> buf(MAX_PATH);
  for (;;) {
    const DWORD n = GetModuleFileNameW(module, buf.data(), static_cast<DWORD>(buf.size()));
    if (n == 0) return {};
    if (n < buf.size()) return std::wstring(buf.data(), n);
    buf.resize(buf.size() * 2);
  }
}

bool is_ntstatus_error(DWORD code) {
  return (code & 0xC0000000u) == 0xC0000000u;
}

std::string exit_code_text(DWORD code) {
  if (!is_ntstatus_error(code)) return "exit code " + std::to_string(code);
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%08lX", static_cast<unsigned long>(code));
  const char* what = nullptr;
  switch (code) {
    case 0xC0000005u:
      what = "access violation";
      break;
    case 0xC000001Du:
      what = "illegal instruction";
      break;
    case 0xC0000094u:
      what = "integer division by zero";
      break;
    case 0xC00000FDu:
      what = "stack overflow";
      break;
    case 0xC0000409u:
      what = "stack buffer overrun / fail-fast";
      break;
    case 0xC000013Au:
      what = "Ctrl-C";
      break;
    case 0xC0000135u:
      what = "a DLL was not found";
      break;
    case 0xC0000142u:
      what = "DLL initialisation failed";
      break;
    default:
      break;
  }
  return std::string("exception ") + hex + (what ? std::string(" (") + what + ")" : std::string());
}

std::wstring command_line(const std::vector<std::string>& argv) {
  std::wstring out;
  for (const std::string& arg8 : argv) {
    const std::wstring arg = widen(arg8);
    if (!out.empty()) out += L' ';
    if (!arg.empty() && arg.find_first_of(L" \t\n\v\"") == std::wstring::npos) {
      out += arg;
      continue;
    }
    out += L'"';
    std::size_t backslashes = 0;
    for (wchar_t c : arg) {
      if (c == L'\\') {
        ++backslashes;
        continue;
      }
      if (c == L'"') {
        out.append(backslashes * 2 + 1, L'\\');
      } else {
        out.append(backslashes, L'\\');
      }
      backslashes = 0;
      out += c;
    }
    out.append(backslashes * 2, L'\\');
    out += L'"';
  }
  return out;
}

namespace {
std::wstring upper(std::wstring s) {
  for (wchar_t& c : s) c = static_cast<wchar_t>(std::towupper(c));
  return s;
}
}  // namespace

Environment Environment::current() {
  Environment env;
  wchar_t* block = GetEnvironmentStringsW();
  if (block == nullptr) return env;
  for (const wchar_t* p = block; *p != L'\0'; p += std::wcslen(p) + 1) {
    const std::wstring entry(p);
    // Entries such as "=C:=C:\\dir" (per-drive current directories) start with '='.
    const std::size_t eq = entry.find(L'=', 1);
    if (eq == std::wstring::npos) continue;
    const std::wstring name = entry.substr(0, eq);
    env.vars[upper(name)] = {name, entry.substr(eq + 1)};
  }
  FreeEnvironmentStringsW(block);
  return env;
}

void Environment::set(const std::string& name, const std::string& value) {
  const std::wstring w = widen(name);
  vars[upper(w)] = {w, widen(value)};
}

void Environment::unset(const std::string& name) {
  vars.erase(upper(widen(name)));
}

std::wstring Environment::block() const {
  std::wstring out;
  for (const auto& [key, entry] : vars) {
    out += entry.first;
    out += L'=';
    out += entry.second;
    out += L'\0';
  }
  out += L'\0';
  return out;
}

Handle kill_on_close_job() {
  Handle job(CreateJobObjectW(nullptr, nullptr));
  if (!job) return job;
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION limits{};
  limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
  if (!SetInformationJobObject(job.get(), JobObjectExtendedLimitInformation, &limits,
                               sizeof limits)) {
    job.reset();
  }
  return job;
}

}  // namespace gpusel::detail::win

// ---- file locks (win_lock.hpp) --------------------------------------------------------------
#include "win_lock.hpp"

namespace gpusel::detail::win {

Handle open_lock_file(const std::string& path, bool create, std::string& error, bool* writable) {
  const std::wstring wide = widen(path);
  constexpr DWORD kShare = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;
  constexpr DWORD kFlags = FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OPEN_REPARSE_POINT;
  const DWORD disposition = create ? OPEN_ALWAYS : OPEN_EXISTING;
  Handle h(CreateFileW(wide.c_str(), GENERIC_READ | GENERIC_WRITE, kShare, nullptr, disposition,
                       kFlags, nullptr));
  if (writable != nullptr) *writable = static_cast<bool>(h);
  if (!h && GetLastError() == ERROR_ACCESS_DENIED) {
    h = Handle(
        CreateFileW(wide.c_str(), GENERIC_READ, kShare, nullptr, OPEN_EXISTING, kFlags, nullptr));
  }
  if (!h) {
    error = error_text(GetLastError());
    return h;
  }
  FILE_ATTRIBUTE_TAG_INFO tag{};
  if (GetFileInformationByHandleEx(h.get(), FileAttributeTagInfo, &tag, sizeof tag) &&
      (tag.FileAttributes & FILE_ATTRIBUTE_REPARSE_POINT)) {
    error = "it is a symbolic link or junction, which gpusel does not follow there";
    return Handle();
  }
  if (GetFileInformationByHandleEx(h.get(), FileAttributeTagInfo, &tag, sizeof tag) &&
      (tag.FileAttributes & FILE_ATTRIBUTE_DIRECTORY)) {
    error = "it is not a regular file";
    return Handle();
  }
  return h;
}

bool try_lock(HANDLE file, bool exclusive, DWORD* error) {
  OVERLAPPED at{};
  at.Offset = kLockOffset;
  const DWORD flags = LOCKFILE_FAIL_IMMEDIATELY | (exclusive ? LOCKFILE_EXCLUSIVE_LOCK : 0);
  if (LockFileEx(file, flags, 0, 1, 0, &at)) return true;
  if (error != nullptr) *error = GetLastError();
  return false;
}

void unlock(HANDLE file) {
  OVERLAPPED at{};
  at.Offset = kLockOffset;
  UnlockFileEx(file, 0, 1, 0, &at);
}

}  // namespace gpusel::detail::win
