// steppe::common::shared_files — files steppe maps shared (a store's reader
// table, NAME-shm), so that the fault handler can say what a SIGBUS in one
// means: another program cut the file short under the mapping (truncated,
// or emptied to be rewritten), which no check before an access can rule
// out. Without this the process died of a bare SIGBUS.
//
// A fixed table of slots; the lookup is a few atomic loads, async-signal-
// safe. A process with more files mapped at once than slots leaves the
// rest unnamed (the bare SIGBUS of before).
#pragma once

#include <cstddef>
#include <cstdint>

namespace steppe::common {

// `path` must stay valid until forget_shared_file(base).
void note_shared_file(const void* base, std::size_t bytes, const char* path) noexcept;
void forget_shared_file(const void* base) noexcept;
// The path of the noted file mapped at `address`, or null.
const char* shared_file_at(std::uintptr_t address) noexcept;

}  // namespace steppe::common
