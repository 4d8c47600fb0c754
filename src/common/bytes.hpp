// Little encoders for the store's small metadata tables (roots, vtable
// symbols): fixed-width integers and length-prefixed strings, appended to a
// byte vector and read back with every length checked against what is left,
// so damaged input is a corrupt error naming the table, never an overread.
#pragma once

#include <steppe/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace steppe::common {

class byte_writer {
public:
    template <class T>
        requires std::is_integral_v<T>
    void put(T value) {
        auto b = reinterpret_cast<const std::byte*>(&value);
        out_.insert(out_.end(), b, b + sizeof value);
    }
    void put(const std::string& s) {
        put(static_cast<std::uint32_t>(s.size()));
        auto b = reinterpret_cast<const std::byte*>(s.data());
        out_.insert(out_.end(), b, b + s.size());
    }
    std::vector<std::byte> take() { return std::move(out_); }

private:
    std::vector<std::byte> out_;
};

class byte_reader {
public:
    byte_reader(std::span<const std::byte> in, std::string what) : in_(in), what_(std::move(what)) {}
    template <class T>
        requires std::is_integral_v<T>
    T get() {
        T value;
        std::memcpy(&value, take(sizeof value), sizeof value);
        return value;
    }
    std::string get_string() {
        auto n = get<std::uint32_t>();
        return std::string(reinterpret_cast<const char*>(take(n)), n);
    }
    // Throws unless every byte was read.
    void expect_end() const {
        if (at_ != in_.size()) throw error(errc::corrupt, what_ + ": trailing bytes after its last entry");
    }

private:
    const std::byte* take(std::size_t n) {
        if (in_.size() - at_ < n) throw error(errc::corrupt, what_ + " is cut short");
        const std::byte* p = in_.data() + at_;
        at_ += n;
        return p;
    }
    std::span<const std::byte> in_;
    std::string what_;
    std::size_t at_ = 0;
};

}  // namespace steppe::common
