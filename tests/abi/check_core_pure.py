#!/usr/bin/env python3
"""gpusel_core is pure: its object files call nothing that does I/O, reads the environment, loads
libraries or starts processes (snprintf into a buffer is fine). Reads each object's undefined
symbols with nm and fails, naming the object and the symbol, on any of the listed ones.

Usage: check_core_pure.py OBJECT...
"""

import os
import subprocess
import sys

# C library and C++ runtime entry points that reach outside the process's memory.
FORBIDDEN = {
    # files and descriptors
    "open", "open64", "openat", "creat", "read", "write", "pread", "pwrite", "close", "lseek",
    "fopen", "fopen64", "fdopen", "fclose", "fread", "fwrite", "fgets", "fputs", "fputc", "fprintf",
    "printf", "puts", "putchar", "perror", "vfprintf", "vprintf", "getline", "stat", "fstat",
    "lstat", "access", "opendir", "readdir", "unlink", "mkdir", "flock", "fcntl", "ioctl", "mmap",
    "poll", "pipe", "pipe2", "dup", "dup2", "readlink", "realpath",
    # the environment, the clock and processes
    "getenv", "secure_getenv", "setenv", "unsetenv", "putenv", "fork", "vfork", "execv", "execve",
    "execvp", "posix_spawn", "posix_spawnp", "system", "popen", "waitpid", "kill", "getpid",
    "sleep", "usleep", "nanosleep", "clock_gettime", "time",
    # loading libraries
    "dlopen", "dlsym", "dlclose", "dlerror", "dladdr", "dlvsym",
    # sockets
    "socket", "connect", "bind", "listen", "accept",
}
# C++ streams on files or the standard streams (mangled prefixes).
FORBIDDEN_PREFIXES = ("_ZSt4cout", "_ZSt4cerr", "_ZSt4clog", "_ZSt3cin", "_ZNSt14basic_ifstream",
                      "_ZNSt14basic_ofstream", "_ZNSt13basic_fstream", "_ZNSt10filesystem")


def undefined(obj):
    out = subprocess.run(["nm", "-u", obj], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        name = line.split()[-1]
        yield name.split("@")[0]


def main():
    objects = [a for a in sys.argv[1:] if a]
    if not objects:
        sys.exit("usage: check_core_pure.py OBJECT...")
    bad = []
    for obj in objects:
        for name in undefined(obj):
            if name in FORBIDDEN or name.startswith(FORBIDDEN_PREFIXES):
                bad.append(f"{os.path.basename(obj)}: {name}")
    if bad:
        print("gpusel_core must do no I/O, read no environment and load no library; it calls:")
        for b in bad:
            print("  " + b)
        sys.exit(1)
    print(f"gpusel_core: {len(objects)} objects, none calls I/O, the environment or the loader")


if __name__ == "__main__":
    main()
