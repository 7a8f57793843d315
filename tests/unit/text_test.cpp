// The core's text helpers (src/core/text.hpp): quoting, blanks, comma lists, decimal numbers.
#include <gtest/gtest.h>

#include <clocale>
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
