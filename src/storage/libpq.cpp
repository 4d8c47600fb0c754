#include "storage/libpq.hpp"

#include <steppe/error.hpp>

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace steppe::storage {

namespace {

// libpq's soname since PostgreSQL 8.2. Pipeline mode (PQenterPipelineMode,
// PQexitPipelineMode, PQpipelineSync) came with libpq 14; the rest is older.
constexpr const char* default_library = "libpq.so.5";
constexpr int oldest_version = 140000;

std::atomic<bool> g_loaded{false};

// The library, or a throw saying why not. secure_getenv: a set-user-ID
// program does not load what its caller's environment names.
void* open_library(const std::string& file, const std::string& advice) {
    void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char* why = dlerror();
        throw error(errc::unsupported, "a store in PostgreSQL needs the PostgreSQL client library, and " + file +
                                           " could not be loaded: " + (why ? why : "no reason given") + advice);
    }
    using version_fn = int (*)();
    const auto version = reinterpret_cast<version_fn>(dlsym(library, "PQlibVersion"));
    const int found = version ? version() : 0;
    if (found >= oldest_version) return library;
    dlclose(library);
    if (!version)
        throw error(errc::unsupported, "a store in PostgreSQL needs the PostgreSQL client library, and " + file +
                                           " is not it (it has no PQlibVersion)" + advice);
    throw error(errc::unsupported, "a store in PostgreSQL needs the PostgreSQL client library of version 14 or "
                                   "later (for pipeline mode), and " + file + " is version " +
                                       std::to_string(found / 10000) + advice);
}

libpq_functions load() {
    const char* chosen = secure_getenv("STEPPE_LIBPQ");
    const std::string file = chosen && *chosen ? chosen : default_library;
    const std::string advice = chosen && *chosen
                                   ? " (STEPPE_LIBPQ names it; unset it to load " + std::string(default_library) + ")"
                                   : " (install your system's PostgreSQL client library of version 14 or later, "
                                     "e.g. Debian's libpq5 or Fedora's libpq, or name its file with STEPPE_LIBPQ)";
    void* library = open_library(file, advice);  // never closed: the table's pointers live as long as the process
    libpq_functions f;
#define STEPPE_LIBPQ_RESOLVE(name)                                                                               \
    f.name = reinterpret_cast<decltype(f.name)>(dlsym(library, #name));                                          \
    if (!f.name) {                                                                                               \
        dlclose(library);                                                                                        \
        throw error(errc::unsupported,                                                                           \
                    "a store in PostgreSQL needs the function " #name " of the PostgreSQL client library, which " + \
                        file + " lacks" + advice);                                                               \
    }
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
