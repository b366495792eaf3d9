#include "codegen/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace pypto::codegen {
namespace {

// Vectors from FIPS 180-2 appendix B and NIST's example values.
TEST(Sha256Test, EmptyString) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, Abc) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// 56 bytes: the padding no longer fits the first block, so a second block is needed.
TEST(Sha256Test, TwoBlockMessage) {
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, OneMillionA) {
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Bytes >= 0x80 and embedded NULs must hash as raw bytes (cache keys contain \x1f separators).
TEST(Sha256Test, BinaryBytes) {
  EXPECT_NE(sha256_hex(std::string("a\0b", 3)), sha256_hex("ab"));
  EXPECT_EQ(sha256_hex(std::string(1, '\xff')), "a8100ae6aa1940d0b663bb31cd466142ebbdbd5187131b92d93818987832eb89");
}

// 55 and 64 bytes sit at the padding boundaries of one and two blocks.
TEST(Sha256Test, PaddingBoundaries) {
  EXPECT_EQ(sha256_hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

}  // namespace
}  // namespace pypto::codegen
