/* A worker for tests/windows/test_wine.py: what gpusel run's Windows supervision is tested with.
 *   worker_helper exit N            exit with N
 *   worker_helper exit-rank R N     exit with N when RANK is R, else sleep 60 s
 *   worker_helper crash-rank R      ends as a crash does, with NTSTATUS 0xC0000005 (access
 *                                   violation), when RANK is R, else sleeps (TerminateProcess with
 *                                   that code: a real fault would start wine's debugger)
 *   worker_helper sleep-tree FILE   start a child that sleeps, append both pids to FILE, sleep 60 s
 *                                   (the child's command line holds FILE too, so that the test
 *                                   can find both among the host's processes)
 *   worker_helper tree-or-exit R N FILE   rank R exits with N after 1 s; the others sleep-tree
 *   worker_helper sleep S           sleep S seconds
 *   worker_helper orphan-output     start a child that holds this process's stdout and stderr and
 *                                   sleeps 60 s, print "parent done", exit 0 at once
 *   worker_helper alive PID...      print "PID alive" or "PID gone" for each (exit 0)
 *   worker_helper env NAME...       print NAME=value for each (or NAME unset)
 *   worker_helper context ORD S     open a CUDA context on device ORD of the CUDA library
 *                                   GPUSEL_CUDA_LIBRARY names (else nvcuda.dll), the way a program
 *                                   that picks its own device does, print "context on ORD", hold it
 *                                   S seconds (exit 3 when the library or the device fails)
 *   worker_helper context-tree ORD S  start a child that starts `context ORD S` and exits at once
 *                                   (the context's process outlives its parent), then sleep S
 *   worker_helper partial-until FILE  print "\rstep 1/2" (no newline), wait until FILE exists
 *                                   (60 s at most), print "\rstep 2/2\n", exit 0
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

static int rank_is(const char* r) {
  const char* v = getenv("RANK");
  return v != NULL && strcmp(v, r) == 0;
}

static void append_pid(const char* file, DWORD pid) {
  FILE* f = fopen(file, "a");
  if (f == NULL) return;
  fprintf(f, "%lu\n", (unsigned long)pid);
  fclose(f);
}

static int sleep_tree(const char* file) {
  wchar_t self[MAX_PATH];
  GetModuleFileNameW(NULL, self, MAX_PATH);
  wchar_t cmd[2 * MAX_PATH + 32];
  _snwprintf(cmd, sizeof cmd / sizeof cmd[0], L"\"%ls\" sleep 60 %hs", self, file);
  STARTUPINFOW si;
  PROCESS_INFORMATION pi;
  memset(&si, 0, sizeof si);
  si.cb = sizeof si;
  if (CreateProcessW(self, cmd, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi)) {
    append_pid(file, pi.dwProcessId);
    CloseHandle(pi.hThread);
    CloseHandle(pi.hProcess);
  }
  append_pid(file, GetCurrentProcessId());
  Sleep(60000);
  return 0;
}

static int orphan_output(void) {
  wchar_t self[MAX_PATH];
  GetModuleFileNameW(NULL, self, MAX_PATH);
  wchar_t cmd[MAX_PATH + 32];
  _snwprintf(cmd, sizeof cmd / sizeof cmd[0], L"\"%ls\" sleep 60", self);
  STARTUPINFOW si;
  PROCESS_INFORMATION pi;
  memset(&si, 0, sizeof si);
  si.cb = sizeof si;
  si.dwFlags = STARTF_USESTDHANDLES;
  si.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  si.hStdOutput = GetStdHandle(STD_OUTPUT_HANDLE);
  si.hStdError = GetStdHandle(STD_ERROR_HANDLE);
  if (!CreateProcessW(self, cmd, NULL, NULL, TRUE, 0, NULL, NULL, &si, &pi)) return 3;
  CloseHandle(pi.hThread);
  CloseHandle(pi.hProcess);
  printf("parent done\n");
  fflush(stdout);
  return 0;
}

typedef int (*cu_init_t)(unsigned);
typedef int (*cu_device_get_t)(int*, int);
typedef int (*cu_retain_t)(void**, int);

static int hold_context(int ordinal, double seconds) {
  const char* path = getenv("GPUSEL_CUDA_LIBRARY");
  HMODULE cuda = LoadLibraryA(path != NULL && *path != '\0' ? path : "nvcuda.dll");
  if (cuda == NULL) {
    fprintf(stderr, "worker_helper: cannot load the CUDA library\n");
    return 3;
  }
  cu_init_t init = (cu_init_t)(void*)GetProcAddress(cuda, "cuInit");
  cu_device_get_t get = (cu_device_get_t)(void*)GetProcAddress(cuda, "cuDeviceGet");
  cu_retain_t retain = (cu_retain_t)(void*)GetProcAddress(cuda, "cuDevicePrimaryCtxRetain");
  int device = -1;
  void* ctx = NULL;
  if (init == NULL || get == NULL || retain == NULL || init(0) != 0 || get(&device, ordinal) != 0 ||
      retain(&ctx, device) != 0) {
    fprintf(stderr, "worker_helper: no context on device %d\n", ordinal);
    return 3;
  }
  printf("context on %d\n", ordinal);
  fflush(stdout);
  Sleep((DWORD)(seconds * 1000));
  return 0;
}

/* Starts this program with `args` (no handles inherited); waits for it when `wait` is set. */
static int start_self(const char* args, int wait) {
  wchar_t self[MAX_PATH];
  GetModuleFileNameW(NULL, self, MAX_PATH);
  wchar_t cmd[MAX_PATH + 128];
  _snwprintf(cmd, sizeof cmd / sizeof cmd[0], L"\"%ls\" %hs", self, args);
  STARTUPINFOW si;
  PROCESS_INFORMATION pi;
  memset(&si, 0, sizeof si);
  si.cb = sizeof si;
  if (!CreateProcessW(self, cmd, NULL, NULL, FALSE, 0, NULL, NULL, &si, &pi)) return 3;
  if (wait) WaitForSingleObject(pi.hProcess, INFINITE);
  CloseHandle(pi.hThread);
  CloseHandle(pi.hProcess);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "exit") == 0) return atoi(argv[2]);
  if (argc >= 4 && strcmp(argv[1], "exit-rank") == 0) {
    if (rank_is(argv[2])) return atoi(argv[3]);
    Sleep(60000);
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "crash-rank") == 0) {
    if (rank_is(argv[2])) TerminateProcess(GetCurrentProcess(), 0xC0000005u);
    Sleep(60000);
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "sleep") == 0) {
    Sleep((DWORD)(atof(argv[2]) * 1000));
    return 0;
  }
  if (argc >= 5 && strcmp(argv[1], "tree-or-exit") == 0) {
    if (rank_is(argv[2])) {
      Sleep(1000);
      return atoi(argv[3]);
    }
    return sleep_tree(argv[4]);
  }
  if (argc >= 3 && strcmp(argv[1], "sleep-tree") == 0) return sleep_tree(argv[2]);
  if (argc >= 2 && strcmp(argv[1], "orphan-output") == 0) return orphan_output();
  if (argc >= 3 && strcmp(argv[1], "partial-until") == 0) {
    printf("\rstep 1/2");
    fflush(stdout);
    for (int i = 0; i < 1200 && GetFileAttributesA(argv[2]) == INVALID_FILE_ATTRIBUTES; ++i)
      Sleep(50);
    printf("\rstep 2/2\n");
    fflush(stdout);
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "alive") == 0) {
    for (int i = 2; i < argc; ++i) {
      HANDLE h = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, FALSE,
                             (DWORD)strtoul(argv[i], NULL, 10));
      int alive = h != NULL && WaitForSingleObject(h, 0) == WAIT_TIMEOUT;
      if (h != NULL) CloseHandle(h);
      printf("%s %s\n", argv[i], alive ? "alive" : "gone");
    }
    return 0;
  }
  if (argc >= 4 && strcmp(argv[1], "context") == 0)
    return hold_context(atoi(argv[2]), atof(argv[3]));
  if (argc >= 4 && strcmp(argv[1], "spawn-context") == 0) {
    char args[64];
    _snprintf(args, sizeof args, "context %d %g", atoi(argv[2]), atof(argv[3]));
    return start_self(args, 0);
  }
  if (argc >= 4 && strcmp(argv[1], "context-tree") == 0) {
    char args[64];
    _snprintf(args, sizeof args, "spawn-context %d %g", atoi(argv[2]), atof(argv[3]));
    if (start_self(args, 1) != 0) return 3;
    Sleep((DWORD)(atof(argv[3]) * 1000));
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "env") == 0) {
    for (int i = 2; i < argc; ++i) {
      const char* v = getenv(argv[i]);
      if (v)
        printf("%s=%s\n", argv[i], v);
      else
        printf("%s unset\n", argv[i]);
    }
    return 0;
  }
  fprintf(stderr, "worker_helper: bad arguments\n");
  return 2;
}
