// An outside program that only sees the installed headers and library.
#include <steppe/error.hpp>

#include <cstdio>

int main() {
    steppe::error e(steppe::errc::locked, "installed package works");
    std::printf("%s: %s\n", steppe::to_string(e.code()), e.what());
    return e.code() == steppe::errc::locked ? 0 : 1;
}
