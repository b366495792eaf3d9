/// Memory advice for large arrays the runtime's callers allocate.
#ifndef PYPTO_RUNTIME_MEMORY_H_
#define PYPTO_RUNTIME_MEMORY_H_

#include <cstddef>

namespace pypto::runtime {

/// Arrays at least this large are worth backing with transparent huge pages.
constexpr size_t kHugePageMinBytes = size_t{4} << 20;

/// Asks the kernel to back the 2 MiB-aligned part of [ptr, ptr + bytes) with transparent huge
/// pages before it is first touched, so filling a fresh output costs a few page faults instead of
/// one per 4 KiB. Returns false when nothing was advised (too small, or the system refused);
/// the memory stays valid either way.
bool advise_huge_pages(void* ptr, size_t bytes);

}  // namespace pypto::runtime

#endif  // PYPTO_RUNTIME_MEMORY_H_
