// libFuzzer target: the quoting `gpusel sim env` applies to every value it prints for `eval`.
// A POSIX shell must read the quoted text back as exactly one word equal to the input, whatever
// the bytes (quotes, $(...), backquotes, line breaks, NUL excepted as no value can hold it).
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "gpusel_detail.hpp"
#include "text.hpp"

namespace {

// The word a POSIX shell reads from `text` (XCU 2.2 quoting, 2.6 word expansions), for words built
// from single-quoted strings, backslash-escaped characters and characters with no special meaning.
// nullopt when the text is not exactly one such word: an unterminated quote, a character that
// would start an expansion ($, `), a field split (blank, newline), an operator (; & | < > ( )),
// a glob (* ? [) or a comment (#), anywhere outside quotes.
std::optional<std::string> sh_word(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\'') {  // everything up to the next ' is literal, backslashes and newlines included
      const std::size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) return std::nullopt;
      out.append(text.substr(i + 1, close - i - 1));
      i = close + 1;
    } else if (c == '\\') {  // an escaped character; backslash-newline would be a line join
      if (i + 1 >= text.size() || text[i + 1] == '\n') return std::nullopt;
      out += text[i + 1];
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               std::string_view("_-./:=,+@%").find(c) != std::string_view::npos) {
      out += c;
      ++i;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string value(reinterpret_cast<const char*>(data), size);
  if (value.find('\0') != std::string::npos) return 0;  // no environment value holds a NUL
  const std::string quoted = gpusel::detail::shell_quote(value);
  const auto word = sh_word(quoted);
  if (!word || *word != value) std::abort();
  // And as the value of an assignment, as sim env prints it.
  const std::string line = "export K=" + quoted;
  const auto assigned = sh_word(std::string_view(line).substr(9));
  if (!assigned || *assigned != value) std::abort();
  return 0;
}
