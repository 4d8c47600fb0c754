// steppe::error — the one exception type steppe throws.
//
// Every error carries a code a program can branch on and a message that says
// what happened and where (file, page, type, field, system call, errno).
#pragma once

#include <stdexcept>
#include <string>

namespace steppe {

enum class errc {
    io,                 // a system call failed (EIO, EBADF, ...)
    no_space,           // ENOSPC / EDQUOT: the disk is full
    permission,         // EACCES / EPERM / EROFS
    not_found,          // the store does not exist and create was not asked for
    exists,             // the store exists and exclusive create was asked for
    corrupt,            // a checksum or structural check failed
    version,            // not a steppe file of a format this build reads
    locked,             // another live process holds the store
    type_mismatch,      // a stored type's layout differs from the program's
    transient_pointer,  // a persistent object points into transient memory
    invalid_argument,   // the caller broke an API precondition
    poisoned,           // an earlier commit failed; reopen or rollback first
    unsupported,        // the kernel or platform lacks a needed feature
};

const char* to_string(errc code) noexcept;

class error : public std::runtime_error {
public:
    error(errc code, const std::string& message)
        : std::runtime_error(message), code_(code) {}
    errc code() const noexcept { return code_; }

private:
    errc code_;
};

}  // namespace steppe
