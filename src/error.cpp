#include <steppe/error.hpp>

namespace steppe {

const char* to_string(errc code) noexcept {
    switch (code) {
    case errc::io: return "io";
    case errc::no_space: return "no_space";
    case errc::permission: return "permission";
    case errc::not_found: return "not_found";
    case errc::exists: return "exists";
    case errc::corrupt: return "corrupt";
    case errc::version: return "version";
    case errc::locked: return "locked";
    case errc::type_mismatch: return "type_mismatch";
    case errc::transient_pointer: return "transient_pointer";
    case errc::invalid_argument: return "invalid_argument";
    case errc::poisoned: return "poisoned";
    case errc::unsupported: return "unsupported";
    }
    return "unknown";
}

}  // namespace steppe
