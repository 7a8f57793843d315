// The core's text helpers (src/core/text.hpp): quoting, blanks, comma lists, decimal numbers.
#include <gtest/gtest.h>

#include <bit>
#include <charconv>
#include <clocale>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusel_detail.hpp"
#include "text.hpp"

using namespace gpusel;
using namespace gpusel::detail;

TEST(Text, QuoteValueEscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(detail::quote_value("0,1"), "\"0,1\"");
  EXPECT_EQ(detail::quote_value(""), "\"\"");
  EXPECT_EQ(detail::quote_value("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(detail::quote_value(std::string_view("a\nb\x7f\0", 5)), "\"a\\x0ab\\x7f\\x00\"");
  EXPECT_EQ(detail::quote_value("\xc3\xa9"), "\"\xc3\xa9\"");  // UTF-8 passes through
}

TEST(Text, PrintableEscapesControlsAndBrokenUtf8Only) {
  EXPECT_EQ(detail::printable(""), "");
  EXPECT_EQ(detail::printable("GPU-4ba71ab7 NVIDIA H100 (80 GiB)"),
            "GPU-4ba71ab7 NVIDIA H100 (80 GiB)");
  EXPECT_EQ(detail::printable("ab\x1b[31mcd"), "ab\\x1b[31mcd");  // the text before kept
  EXPECT_EQ(detail::printable("abc\x7f"), "abc\\x7f");
  EXPECT_EQ(detail::printable("h\xc3\xa9llo\n"), "h\xc3\xa9llo\\x0a");
  EXPECT_EQ(detail::printable("x\xff\xc3"), "x\\xff\\xc3");
}

// A probe timeout's message says the value given, to printf's six significant digits.
TEST(Text, GeneralNumberIsPrintfsG) {
  EXPECT_EQ(detail::general_number(20), "20");
  EXPECT_EQ(detail::general_number(0.5), "0.5");
  EXPECT_EQ(detail::general_number(0.0004), "0.0004");
  EXPECT_EQ(detail::general_number(1e-7), "1e-07");
  EXPECT_EQ(detail::general_number(1234.5678), "1234.57");
  EXPECT_EQ(detail::general_number(3600), "3600");
  EXPECT_EQ(detail::general_number(-2.25), "-2.25");
  for (double v : {1.0, 0.1, 123456.0, 1234567.0, 9.999995e-5}) {
    char expected[64];
    std::snprintf(expected, sizeof expected, "%g", v);
    EXPECT_EQ(detail::general_number(v), expected) << v;
  }
}

TEST(Text, TrimBlanksStripsTheCLocaleSpaces) {
  EXPECT_EQ(trim_blanks(" \t\n\v\f\r0,1 \r\n"), "0,1");
  EXPECT_EQ(trim_blanks("   "), "");
  EXPECT_EQ(trim_blanks("a b"), "a b");
  EXPECT_FALSE(is_blank('\0'));
  EXPECT_FALSE(is_blank('\xa0'));  // no-break space in Latin-1: not a blank
}

TEST(Text, SplitCommasKeepsEveryPieceUntouched) {
  using V = std::vector<std::string_view>;
  EXPECT_EQ(split_commas(""), V{""});
  EXPECT_EQ(split_commas("0"), V{"0"});
  EXPECT_EQ(split_commas("0, 1,,2,"), (V{"0", " 1", "", "2", ""}));
  EXPECT_EQ(split_commas(","), (V{"", ""}));
  // each_comma_piece hands out the same pieces and stops when told.
  V seen;
  EXPECT_FALSE(each_comma_piece("a,b,c", [&](std::string_view p) {
    seen.push_back(p);
    return p != "b";
  }));
  EXPECT_EQ(seen, (V{"a", "b"}));
}

TEST(Text, ReadDecimalTakesDigitsOnly) {
  EXPECT_EQ(read_decimal("0"), 0u);
  EXPECT_EQ(read_decimal("007"), 7u);
  EXPECT_EQ(read_decimal("0000000000000000000000000000042"), 42u);  // zeros do not overflow
  EXPECT_EQ(read_decimal("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(read_decimal("18446744073709551616"), std::nullopt);  // one past
  EXPECT_EQ(read_decimal("99999999999999999999999"), std::nullopt);
  for (const char* bad : {"", " 1", "1 ", "+1", "-1", "1e3", "0x10", "1.0", "١"}) {
    EXPECT_EQ(read_decimal(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(read_decimal("4096", 4096), 4096u);
  EXPECT_EQ(read_decimal("4097", 4096), std::nullopt);
  EXPECT_EQ(strip_zeros("007"), "7");
  EXPECT_EQ(strip_zeros("000"), "0");
  EXPECT_EQ(strip_zeros("10"), "10");
  EXPECT_TRUE(all_digits("0123456789"));
  EXPECT_FALSE(all_digits(""));
  EXPECT_FALSE(all_digits("1a"));
}

TEST(Text, ReadPlainNumberIgnoresTheLocale) {
  EXPECT_EQ(read_plain_number("12"), 12.0);
  EXPECT_EQ(read_plain_number("1.5"), 1.5);
  EXPECT_EQ(read_plain_number(".5"), 0.5);
  EXPECT_EQ(read_plain_number("5."), 5.0);
  for (const char* bad : {"", ".", "1.2.3", "-1", "+1", "1e3", "1,5", " 1", "inf", "nan"}) {
    EXPECT_EQ(read_plain_number(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(read_plain_number(std::string(400, '9')), std::nullopt);  // beyond any double
  // A locale whose decimal point is a comma changes nothing (where such a locale exists).
  if (std::setlocale(LC_NUMERIC, "de_DE.UTF-8") != nullptr) {
    EXPECT_EQ(read_plain_number("1.5"), 1.5);
    EXPECT_EQ(read_plain_number("1,5"), std::nullopt);
    std::setlocale(LC_NUMERIC, "C");
  }
}

// What std::from_chars makes of `text` where it reads the whole of it; nullopt otherwise, and
// infinity or 0 for its range errors (which leave the value unset), as read_decimal_number gives.
std::optional<double> from_chars_reading(const std::string& text, bool exponent) {
  double value = -1;
  const auto format = exponent ? std::chars_format::general : std::chars_format::fixed;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value, format);
  if (ptr != text.data() + text.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) {
    // Too large or too small: the C library's reading tells which (these tests run in the "C"
    // locale).
    return std::strtod(text.c_str(), nullptr) > 1 ? std::numeric_limits<double>::infinity() : 0.0;
  }
  if (ec != std::errc()) return std::nullopt;
  return value;
}

TEST(Text, ReadDecimalNumberRoundsAsFromCharsDoes) {
  EXPECT_EQ(read_decimal_number("12", false), 12.0);
  EXPECT_EQ(read_decimal_number("1.5e3", true), 1500.0);
  EXPECT_EQ(read_decimal_number("1.e5", true), 1e5);
  EXPECT_EQ(read_decimal_number("2.5E-2", true), 0.025);
  EXPECT_EQ(read_decimal_number("1e5", false), std::nullopt);  // no exponent asked for
  for (const char* bad : {"", ".", "e5", ".e5", "1e", "1e+", "1e-", "-1", "+1", "inf", "nan",
                          "0x10", " 1", "1 ", "1.2.3", "1e5e5", "1,5"}) {
    EXPECT_EQ(read_decimal_number(bad, true), std::nullopt) << bad;
  }
  EXPECT_EQ(read_decimal_number("1e400", true), std::numeric_limits<double>::infinity());
  EXPECT_EQ(read_decimal_number("1e-400", true), 0.0);
  EXPECT_EQ(read_decimal_number("4.9e-324", true), std::numeric_limits<double>::denorm_min());
  // Where rounding is hard (halfway cases, past 2^53, past 19 digits, past 1e22, near the ends of
  // the range) and a pseudo-random spread: the same double as std::from_chars, bit for bit.
  std::vector<std::string> cases = {
      "9007199254740992", "9007199254740993", "9007199254740995", "18446744073709551615",
      "18446744073709551616", "123456789012345678901234567890", "0.1", "0.3", "1e22", "1e23",
      "8.98846567431158e307", "1.7976931348623157e308", "1.7976931348623158e308",
      "1.7976931348623159e308", "2.2250738585072011e-308", "2.2250738585072014e-308",
      "2.4703282292062327e-324", "2.4703282292062328e-324", "0.000000000000000000000000001",
      "00000000000000000000000000001.5", "1.00000000000000011102230246251565404236316680908203125",
      "1.00000000000000011102230246251565404236316680908203124",
      "1.00000000000000011102230246251565404236316680908203126", "7.2057594037927933e16",
      "123456.789e-3", "3.14159265358979323846264338327950288", "100000000000000000000000.0",
      "0." + std::string(400, '0') + "1", "1" + std::string(400, '0'),
      // An exponent too long to add up, against a fraction's
      // million zeros (found by review: the two once met inside
      // the exact range and gave 1).
      "0." + std::string(999999, '0') + "1e1000000000",
      "0." + std::string(999999, '0') + "1e1000005", "1e" + std::string(30, '9'),
      "1e-" + std::string(30, '9')};
  std::uint64_t state = 0x9e3779b97f4a7c15u;
  const auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    const int digits = 1 + static_cast<int>(next() % 25);
    const int dot = static_cast<int>(next() % static_cast<std::uint64_t>(digits + 1));
    for (int d = 0; d < digits; ++d) {
      if (d == dot) text += '.';
      text += static_cast<char>('0' + next() % 10);
    }
    if (next() % 2 != 0) text += "e" + std::to_string(static_cast<int>(next() % 700) - 350);
    cases.push_back(text);
  }
  for (const std::string& text : cases) {
    for (bool exponent : {false, true}) {
      const std::optional<double> ours = read_decimal_number(text, exponent);
      const std::optional<double> theirs = from_chars_reading(text, exponent);
      // (A long case is named by its start and its length.)
      const std::string name =
          text.size() > 80 ? text.substr(0, 40) + "... (" + std::to_string(text.size()) + " bytes)"
                           : text;
      ASSERT_EQ(ours.has_value(), theirs.has_value()) << name << (exponent ? " with" : " without");
      if (ours) {
        EXPECT_EQ(std::bit_cast<std::uint64_t>(*ours), std::bit_cast<std::uint64_t>(*theirs))
            << name << ": " << *ours << " against " << *theirs;
      }
    }
  }
}

TEST(Text, PlainFileNamesAreLettersDigitsAndDashes) {
  EXPECT_TRUE(is_plain_file_name("GPU-3b7e1a2c-0000-4a1b-9c2d-abcdef012345"));
  EXPECT_TRUE(is_plain_file_name(std::string(96, 'a')));
  EXPECT_FALSE(is_plain_file_name(""));
  EXPECT_FALSE(is_plain_file_name(std::string(97, 'a')));
  EXPECT_FALSE(is_plain_file_name("../GPU-1"));
  EXPECT_FALSE(is_plain_file_name("GPU 1"));
  EXPECT_FALSE(is_plain_file_name("GPU-1/x"));
  EXPECT_FALSE(is_plain_file_name("GPU-\xc3\xa9"));
}

TEST(Text, FormatUuidWritesCudasBytesAsNvidiaSmiDoes) {
  const unsigned char bytes[16] = {0x4b, 0xa7, 0x1a, 0xb7, 0xac, 0x05, 0x04, 0xa5,
                                   0x6c, 0xc6, 0xbe, 0x18, 0x05, 0xfd, 0xf1, 0x79};
  EXPECT_EQ(gpusel::detail::format_uuid(bytes), "GPU-4ba71ab7-ac05-04a5-6cc6-be1805fdf179");
  EXPECT_EQ(gpusel::detail::format_uuid(bytes, "MIG-"), "MIG-4ba71ab7-ac05-04a5-6cc6-be1805fdf179");
  const unsigned char ends[16] = {0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0xff};
  EXPECT_EQ(gpusel::detail::format_uuid(ends, ""), "00010000-0000-0000-0000-00000000f0ff");
}

// A PCI address in NVML's form, as sscanf and snprintf made it before it was read by hand.
std::string bus_id_by_stdio(const std::string& bus) {
  unsigned domain = 0, b = 0, d = 0, f = 0;
  if (std::sscanf(bus.c_str(), "%x:%x:%x.%x", &domain, &b, &d, &f) != 4) return bus;
  char out[64];
  std::snprintf(out, sizeof out, "%08X:%02X:%02X.%X", domain, b, d, f);
  return out;
}

TEST(Text, NormaliseBusIdIsNvmlsForm) {
  EXPECT_EQ(gpusel::detail::normalise_bus_id("0000:18:00.0"), "00000000:18:00.0");
  EXPECT_EQ(gpusel::detail::normalise_bus_id("0001:ab:1f.7"), "00000001:AB:1F.7");
  for (const std::string bus : {"0000:18:00.0",    "00000000:5D:00.0",
                                "0:0:0.0",         "ffff:ff:1f.7",
                                "0001:AB:cd.E",    "12345678:00:00.0",
                                "0000:100:00.0",   "0000:18:00.10",
                                "0000:18:00",      "0000:18:00.",
                                "0000::00.0",      ":18:00.0",
                                "garbage",         "",
                                " 0000:18:00.0",   "0000:18:00.0 ",
                                "0000:18:00.0x",   "0x0:18:00.0",
                                "+1:2:3.4",        "0000:18:00:0",
                                "0000.18:00.0",    "g:1:2.3",
                                "FFFFFFFF:FF:FF.F"}) {
    EXPECT_EQ(gpusel::detail::normalise_bus_id(bus), bus_id_by_stdio(bus)) << bus;
  }
}

TEST(Text, AmdIdFormIsGpuAndUpToSixteenCharactersWithoutADash) {
  EXPECT_TRUE(gpusel::detail::amd_id_form("GPU-6e7f8091a2b3c4d5"));
  EXPECT_TRUE(gpusel::detail::amd_id_form("gpu-6E7F"));
  EXPECT_TRUE(gpusel::detail::amd_id_form("GPU-3ce1b347"));  // starts an NVIDIA UUID too
  EXPECT_FALSE(gpusel::detail::amd_id_form("GPU-"));
  EXPECT_FALSE(gpusel::detail::amd_id_form("GPU-3ce1b347-0187"));       // NVIDIA's dash
  EXPECT_FALSE(gpusel::detail::amd_id_form("GPU-6e7f8091a2b3c4d5ff"));  // too long
  EXPECT_FALSE(gpusel::detail::amd_id_form("MIG-6e7f"));
  EXPECT_FALSE(gpusel::detail::amd_id_form("1"));
}
