#include "storage/libpq.hpp"

#include <steppe/error.hpp>

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

namespace steppe::storage {

namespace {

// libpq's soname since PostgreSQL 8.2; pipeline mode needs the library of
// PostgreSQL 14 or later.
constexpr const char* default_library = "libpq.so.5";

std::atomic<bool> g_loaded{false};

libpq_functions load() {
    const char* chosen = std::getenv("STEPPE_LIBPQ");
    const std::string file = chosen && *chosen ? chosen : default_library;
    const std::string advice = chosen && *chosen
                                   ? " (STEPPE_LIBPQ names it; unset it to load " + std::string(default_library) + ")"
                                   : " (install PostgreSQL's client library of version 14 or later, e.g. Debian's "
                                     "libpq5, or name the file with STEPPE_LIBPQ)";
    // Never closed: the table's pointers live as long as the process.
    void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char* why = dlerror();
        throw error(errc::unsupported, "a store in PostgreSQL needs the PostgreSQL client library, and " + file +
                                           " could not be loaded: " + (why ? why : "no reason given") + advice);
    }
    libpq_functions f;
#define STEPPE_LIBPQ_RESOLVE(name)                                                                               \
    f.name = reinterpret_cast<decltype(f.name)>(dlsym(library, #name));                                          \
    if (!f.name)                                                                                                 \
        throw error(errc::unsupported, "a store in PostgreSQL needs the function " #name                         \
                                       " of the PostgreSQL client library, which " + file + " lacks (pipeline "  \
                                       "mode came with version 14)" + advice);
    STEPPE_LIBPQ_FUNCTIONS(STEPPE_LIBPQ_RESOLVE)
#undef STEPPE_LIBPQ_RESOLVE
    return f;
}

}  // namespace

const libpq_functions& libpq() {
    // A failed load throws out of the initializer, so the next call tries again.
    static const libpq_functions functions = [] {
        libpq_functions f = load();
        g_loaded.store(true, std::memory_order_release);
        return f;
    }();
    return functions;
}

bool libpq_loaded() noexcept { return g_loaded.load(std::memory_order_acquire); }

}  // namespace steppe::storage
