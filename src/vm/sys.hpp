// Helpers shared by the vm module's sources; not part of its interface.
#pragma once

#include "vm/vm.hpp"

#include <optional>
#include <string>

namespace steppe::vm::detail {

// "Cannot allocate memory (ENOMEM)".
std::string errno_text(int err);

// The message for an ENOMEM from mprotect/mremap that is most likely
// vm.max_map_count, with the current limit and what to do.
std::string max_map_count_advice();

// Opens a userfaultfd (close-on-exec, user-mode faults only when the kernel
// knows the flag): the userfaultfd(2) system call, falling back to
// /dev/userfaultfd + USERFAULTFD_IOC_NEW when the call is refused.
// Returns the descriptor, or -errno of the last attempt. Async-signal-safe.
int open_userfaultfd() noexcept;

// Resolves the write-tracking variant for a space of `backend`: `requested`,
// else STEPPE_WRITE_TRACKING, else the best this kernel offers. Throws
// errc::unsupported (saying why) or errc::invalid_argument.
tracking_kind choose_tracking(backend_kind backend, std::optional<tracking_kind> requested);

}  // namespace steppe::vm::detail
