// Sample sizes of the sweeping and brute-force tests under the sanitizers.
//
// .ci/sanitize.sh runs every C++ test in an AddressSanitizer build, where
// instrumented code runs several times slower. The tests that sweep a domain or
// compare against a brute force for many random cases take every
// kSanitizerThinning-th case there: a memory error shows on the first case
// that reaches it, and the full samples run in the ordinary build.
#pragma once

#include <algorithm>
#include <cstdint>

namespace pypto::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr int kSanitizerThinning = 8;
#else
inline constexpr int kSanitizerThinning = 1;
#endif

// n cases in the ordinary build, n / kSanitizerThinning (at least one) under the sanitizers.
constexpr int Thinned(int n) { return std::max(1, n / kSanitizerThinning); }

// The stride of a sweep over bit patterns: `step`, about kSanitizerThinning times longer under the
// sanitizers and odd (an even stride would visit only even patterns).
constexpr uint64_t ThinnedStride(uint64_t step) {
  return kSanitizerThinning > 1 ? step * kSanitizerThinning + 1 : step;
}

}  // namespace pypto::test
