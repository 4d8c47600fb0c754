// Helpers shared by the vm module's sources; not part of its interface.
#pragma once

#include "vm/vm.hpp"

#include <cstdint>
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

// Installs the process-wide SIGBUS and SIGSEGV handlers (once; later calls
// do nothing). Throws errc::io when sigaction refuses.
void install_signal_handlers();

// For the handler, once a SIGSEGV protection fault at `address` is no
// arena's: a trap page's touch ends the process with its message; a trap
// range's function decides (true: served, retry the access). False: not ours.
// Async-signal-safe.
bool trap_touch(std::uintptr_t address, void* ucontext) noexcept;

// Ends the process with the closed range's message if `address` lies in
// one (closed_ranges.cpp); returns otherwise. Async-signal-safe.
void closed_touch(std::uintptr_t address) noexcept;

}  // namespace steppe::vm::detail
