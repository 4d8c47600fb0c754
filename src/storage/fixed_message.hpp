// A message built without allocating, for paths that may run in a signal
// handler (the page engine's fault path reads pages through storage).
#pragma once

#include <cstddef>
#include <cstdint>

namespace steppe::storage {

class fixed_message {
public:
    fixed_message(char* buf, std::size_t capacity) noexcept : buf_(buf), cap_(capacity) {
        if (cap_ > 0) buf_[0] = '\0';
    }
    fixed_message& operator<<(const char* s) noexcept {
        while (s && *s) put(*s++);
        return *this;
    }
    fixed_message& operator<<(std::uint64_t v) noexcept {
        char digits[20];
        int n = 0;
        do { digits[n++] = static_cast<char>('0' + v % 10); v /= 10; } while (v);
        while (n) put(digits[--n]);
        return *this;
    }

private:
    void put(char c) noexcept {
        if (len_ + 1 < cap_) { buf_[len_++] = c; buf_[len_] = '\0'; }
    }
    char* buf_;
    std::size_t cap_, len_ = 0;
};

}  // namespace steppe::storage
