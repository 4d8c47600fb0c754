#include "common/system_error.hpp"

#include <cerrno>
#include <cstring>

namespace steppe::common {

errc code_of_errno(int err) noexcept {
    switch (err) {
    case ENOSPC: case EDQUOT: return errc::no_space;
    case EACCES: case EPERM: case EROFS: return errc::permission;
    case ENOENT: return errc::not_found;
    case EEXIST: return errc::exists;
    default: return errc::io;
    }
}

void throw_system_error(const char* call, int err, const std::string& where, const std::string& detail) {
    const std::string place = detail.empty() ? where : where + " (" + detail + ")";
    throw error(code_of_errno(err), place + ": " + call + " failed: " + std::strerror(err));
}

}  // namespace steppe::common
