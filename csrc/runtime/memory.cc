#include "runtime/memory.h"

#include <sys/mman.h>

#include <cstdint>

namespace pypto::runtime {

bool advise_huge_pages(void* ptr, size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (ptr == nullptr || bytes < kHugePageMinBytes) return false;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(ptr) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(ptr) + bytes) & ~(kHuge - 1);
  if (end <= begin) return false;
  return ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0;
#else
  (void)ptr;
  (void)bytes;
  return false;
#endif
}

}  // namespace pypto::runtime
