// One way to turn a failed system call into a steppe::error, for every
// module: the code follows errno (ENOSPC -> no_space, EACCES/EPERM/EROFS ->
// permission, ENOENT -> not_found, EEXIST -> exists, else io) and the message
// says where, which call, and why: "<where>: <call> failed: <strerror>", or
// with a detail (an offset, the purpose of the call), "<where> (<detail>):
// <call> failed: <strerror>". `where` is the path the call was about, or
// the module and what it was doing ("vm: reserving an arena of ...").
#pragma once

#include <steppe/error.hpp>

#include <string>

namespace steppe::common {

errc code_of_errno(int err) noexcept;
[[noreturn]] void throw_system_error(const char* call, int err, const std::string& where,
                                     const std::string& detail = {});

}  // namespace steppe::common
