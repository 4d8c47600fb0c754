// The one page size of every module: a logical page of the store file, a page
// of an arena, of the page map, of heap metadata. Modules that name it in
// their own namespace say `using common::page_size`; on-disk formats that
// spell the number out static_assert that it agrees with this one.
#pragma once

#include <cstddef>

namespace steppe::common {

inline constexpr std::size_t page_size = 4096;

}  // namespace steppe::common
