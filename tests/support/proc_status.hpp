// Reading this process's memory figures from /proc/self/status, as the
// kernel counts them (tests measure, they do not trust the store's own sums).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace steppe::test {

// The value of a "Key: N kB" line of /proc/self/status (key with its colon,
// "VmHWM:", "RssAnon:"), in bytes; 0 when the line is missing.
inline std::uint64_t proc_status_bytes(const std::string& key) {
    std::ifstream status("/proc/self/status");
    std::string word;
    std::uint64_t kib = 0;
    while (status >> word)
        if (word == key && status >> kib) return kib << 10;
    return 0;
}

}  // namespace steppe::test
