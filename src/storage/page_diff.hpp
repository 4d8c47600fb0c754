// Sub-page difference records for the log (Texas's design, digest 002
// §4.4.6): a page version that differs from the main file's copy of the
// page in a few words is logged as those words only.
//
// A difference payload is a sequence of runs, each
//     u16 offset, u16 length (bytes; length >= 1, offset + length <= 4096,
//     runs in ascending order without overlap), then `length` bytes,
// and it means "the base page with these bytes replaced". The encoder
// makes runs of whole 8-byte words and puts every word where the target
// differs from the base into one: so (D1) applying it to *any* page whose
// every byte equals the base's or the target's byte there gives the target.
// That is what makes a difference against the main file safe while a
// checkpoint (or a torn one) leaves the main page anywhere between the two
// versions. The reconstructed page is always checked against the full
// page's checksum, so nothing else has to be trusted.
//
// Async-signal-safe (no allocation): the fault path applies them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace steppe::storage {

// A difference larger than this is logged as the whole page instead: it
// saves little and costs a second read.
inline constexpr std::size_t max_diff_bytes = 2048;

// Encodes `target` against `base` (page_size bytes each) into `out`
// (max_diff_bytes). Returns the payload's length, or -1 if it would exceed
// max_diff_bytes.
long encode_page_diff(const std::byte* base, const std::byte* target, std::byte* out) noexcept;

// Whether `n` bytes form a valid difference payload (the rules above).
bool page_diff_well_formed(const std::byte* diff, std::size_t n) noexcept;

// Applies a well-formed payload to `page` (page_size bytes); false (page
// unspecified) if it is not well formed.
bool apply_page_diff(const std::byte* diff, std::size_t n, std::byte* page) noexcept;

}  // namespace steppe::storage
