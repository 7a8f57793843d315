// Internal: a whole file read or written in one call (read(2) on POSIX, C stdio on Windows and
// for writing). The library and the command use no C++ file or string streams: any of them
// brings libstdc++'s locale machinery into the program, whose tables the loader relocates at
// every start (docs/performance.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpusel::detail {

// The bytes of file `path` from byte `offset`, at most `limit` of them; nullopt when it cannot be
// opened or a read fails (errno says why). A file shorter than `offset` gives an empty string.
std::optional<std::string> read_file_text(const std::string& path,
                                          std::size_t limit = std::size_t{64} << 20,
                                          std::uint64_t offset = 0);

// The first line of file `path`, without its line break; nullopt when it cannot be read or is
// empty (as std::getline finds no line there).
std::optional<std::string> read_first_line(const std::string& path);

// Writes `text` to file `path`, replacing what it held (or appending, with `append`); false when
// it cannot be opened or written whole (errno says why).
bool write_file_text(const std::string& path, std::string_view text, bool append = false);

// The next blank-separated word of `text` from `at` (spaces, tabs and line breaks part words),
// `at` moved past it; empty at the end.
std::string_view next_word(std::string_view text, std::size_t& at);

// The next line of `text` from `at`, without its '\n', `at` moved past it; nullopt at the end.
// A last line without a '\n' is a line.
std::optional<std::string_view> next_line(std::string_view text, std::size_t& at);

}  // namespace gpusel::detail
