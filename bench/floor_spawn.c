/* The floor of starting N workers from one process: posix_spawn (glibc starts each child sharing
 * this process's memory until its exec, as gpusel does) N times, then wait for all of them; no GPU
 * work, no parsing, no leases. bench/run_vs_shell.py times it beside gpusel run and the shell.
 * Usage: floor_spawn N PROGRAM [ARGS...] */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: floor_spawn N PROGRAM [ARGS...]\n");
    return 2;
  }
  const int n = atoi(argv[1]);
  if (n < 1 || n > 4096) {
    fprintf(stderr, "floor_spawn: N must be 1 to 4096, not %s\n", argv[1]);
    return 2;
  }
  pid_t* pids = calloc((size_t)n, sizeof *pids);
  if (pids == NULL) return 1;
  int status = 0;
  for (int i = 0; i < n; ++i) {
    if (posix_spawn(&pids[i], argv[2], NULL, NULL, argv + 2, environ) != 0) {
      perror("floor_spawn: posix_spawn");
      return 1;
    }
  }
  for (int i = 0; i < n; ++i) {
    int s = 0;
    if (waitpid(pids[i], &s, 0) < 0 || !WIFEXITED(s) || WEXITSTATUS(s) != 0) status = 1;
  }
  free(pids);
  return status;
}
