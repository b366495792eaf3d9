/// SHA-256, for content-addressed kernel cache keys.
#pragma once

#include <string>

namespace pypto::codegen {

/// Lower-case hex SHA-256 digest of `data`.
std::string sha256_hex(const std::string& data);

}  // namespace pypto::codegen
