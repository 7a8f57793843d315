// gpusel: the core's small text helpers (pure, no I/O, no locale): blanks, comma lists and decimal
// numbers read by hand or with std::from_chars (quoting for messages is in gpusel_detail.hpp). The
// core's interface to the layers that may use it (cmake/layers.cmake): never installed, not on the
// gpusel command's include path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusel_detail.hpp"  // quote_value, printable

namespace gpusel::detail {

// The blanks of C's isspace in the "C" locale: space, \t, \n, \v, \f, \r.
constexpr bool is_blank(char c) noexcept {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

// `s` without blanks at either end.
std::string_view trim_blanks(std::string_view s) noexcept;

// ASCII letters to lower case; every other byte as it is.
constexpr char ascii_lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + ('a' - 'A')) : c;
}

// The value of an ASCII hexadecimal digit (either case); -1 for any other byte.
constexpr int hex_digit(char c) noexcept {
  return (c >= '0' && c <= '9')   ? c - '0'
         : (c >= 'a' && c <= 'f') ? c - 'a' + 10
         : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                  : -1;
}

// A number of seconds for a message: "1", "0.5", "2.25" (at most 3 decimals, no trailing zeros),
// never std::to_string's "1.000000".
std::string seconds_text(double seconds);

// A number as printf's "%g" writes it in the C locale, six significant digits ("0.0004",
// "1234.57", "20", "1e-07"), whatever decimal point the host program's LC_NUMERIC has.
std::string general_number(double value);

// True when `s` is one or more ASCII decimal digits and nothing else.
bool all_digits(std::string_view s) noexcept;

// The same pieces, handed one by one to `fn` (which returns false to stop), without allocating.
// Returns false when `fn` stopped early.
template <typename Fn>
bool each_comma_piece(std::string_view value, Fn&& fn) {
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) return fn(value.substr(start));
    if (!fn(value.substr(start, comma - start))) return false;
    start = comma + 1;
  }
}

// Digits without their leading zeros ("007" -> "7", "000" -> "0"); other text as it is.
std::string_view strip_zeros(std::string_view digits) noexcept;

// The value of a whole string of ASCII decimal digits (leading zeros allowed, no sign, no
// blanks); nullopt for anything else, or a value above `max`.
std::optional<std::uint64_t> read_decimal(std::string_view digits,
                                          std::uint64_t max = UINT64_MAX) noexcept;

// A whole string as a non-negative decimal number with an optional fraction ("12", "1.5", "0.25",
// ".5", "5."): no sign, no exponent, no blanks, independent of the locale; nullopt otherwise.
std::optional<double> read_plain_number(std::string_view text) noexcept;

// A whole string as a non-negative decimal number: digits with an optional fraction ("12", "1.5",
// ".5", "5."), and with `exponent` an optional power of ten ("1e3", "2.5E-2"); no sign, no blanks,
// no "inf" or "nan", independent of the locale; nullopt otherwise. Correctly rounded, as
// std::from_chars is (whose floating-point reader would bring libm into every process that links
// the core, for its rounding-mode calls); a value too large for a double is infinity, one too
// small is 0 (or the nearest denormal).
std::optional<double> read_decimal_number(std::string_view text, bool exponent) noexcept;

// Whether `name` can be used as a file name as it is: 1 to 96 ASCII letters, digits and dashes
// (what a GPU UUID holds). Lease files and the simulator's usage files are named by UUID.
bool is_plain_file_name(std::string_view name) noexcept;

}  // namespace gpusel::detail
