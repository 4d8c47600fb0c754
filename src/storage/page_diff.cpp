#include "storage/page_diff.hpp"

#include <cstring>

#include "storage/file_format.hpp"

namespace steppe::storage {

namespace {

constexpr std::size_t word = 8, run_header = 4;

bool word_differs(const std::byte* a, const std::byte* b, std::size_t at) noexcept {
    return std::memcmp(a + at, b + at, word) != 0;
}

void put_u16(std::byte* out, std::size_t value) noexcept {
    const std::uint16_t v = static_cast<std::uint16_t>(value);
    std::memcpy(out, &v, sizeof v);
}

std::size_t get_u16(const std::byte* in) noexcept {
    std::uint16_t v;
    std::memcpy(&v, in, sizeof v);
    return v;
}

// Walks the runs of a payload, calling visit(offset, bytes, length) for
// each; false at the first run that breaks the format's rules.
template <class Visit>
bool for_each_run(const std::byte* diff, std::size_t n, Visit visit) noexcept {
    std::size_t at = 0, previous_end = 0;
    while (at < n) {
        if (n - at < run_header) return false;
        const std::size_t offset = get_u16(diff + at), length = get_u16(diff + at + 2);
        at += run_header;
        if (length == 0 || offset < previous_end || offset + length > page_size || n - at < length) return false;
        visit(offset, diff + at, length);
        at += length;
        previous_end = offset + length;
    }
    return true;
}

}  // namespace

long encode_page_diff(const std::byte* base, const std::byte* target, std::byte* out) noexcept {
    std::size_t used = 0;
    for (std::size_t at = 0; at < page_size;) {
        if (!word_differs(base, target, at)) {
            at += word;
            continue;
        }
        std::size_t end = at + word;
        // Gives up as soon as the run passes the bound: a page rewritten
        // whole is found after 2 KiB, not 4.
        for (; end < page_size && word_differs(base, target, end); end += word)
            if (used + run_header + (end - at) > max_diff_bytes) return -1;
        const std::size_t length = end - at;
        if (used + run_header + length > max_diff_bytes) return -1;
        put_u16(out + used, at);
        put_u16(out + used + 2, length);
        std::memcpy(out + used + run_header, target + at, length);
        used += run_header + length;
        at = end;
    }
    return static_cast<long>(used);
}

bool page_diff_well_formed(const std::byte* diff, std::size_t n) noexcept {
    return n <= max_diff_bytes && for_each_run(diff, n, [](std::size_t, const std::byte*, std::size_t) {});
}

bool apply_page_diff(const std::byte* diff, std::size_t n, std::byte* page) noexcept {
    return page_diff_well_formed(diff, n) &&
           for_each_run(diff, n, [page](std::size_t offset, const std::byte* bytes, std::size_t length) {
               std::memcpy(page + offset, bytes, length);
           });
}

}  // namespace steppe::storage
