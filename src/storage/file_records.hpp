// The main file's records as file_store and bulk_writer make them: a
// header slot of a new store, the commit mark, a record's checksum. The
// layouts are file_format.hpp's; this header only fills them in.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/system_error.hpp"
#include "storage/checksum.hpp"
#include "storage/file_format.hpp"

namespace steppe::storage {

// Nonzero random bits (store ids, log salts).
inline std::uint64_t random_u64() {
    std::uint64_t v = 0;
    while (v == 0) {
        if (::getrandom(&v, sizeof v, 0) != sizeof v) common::throw_system_error("getrandom", errno, "-");
    }
    return v;
}

// The CRC32C of a record's bytes before its `crc` field.
template <class T>
std::uint32_t struct_crc(const T& s) {
    return crc32c(0, &s, offsetof(T, crc));
}

inline commit_mark make_mark(const std::uint8_t (&store_id)[16], std::uint64_t generation, std::uint64_t txn,
                             std::uint64_t log_end) {
    commit_mark m{};
    m.magic = commit_mark_magic;
    std::memcpy(m.store_id, store_id, sizeof m.store_id);
    m.generation = generation;
    m.txn = txn;
    m.log_end = log_end;
    m.crc = struct_crc(m);
    return m;
}

// The first header of a new store: a random id and first salt, header_seq
// 1, checkpoint generation 0, nothing counted yet; the crc left for the
// caller, who fills in the rest.
inline file_header new_store_header() {
    file_header h{};
    std::memcpy(h.magic, header_magic, sizeof h.magic);
    h.version = format_version;
    h.page_size = page_size;
    std::uint64_t id[2] = {random_u64(), random_u64()};
    std::memcpy(h.store_id, id, sizeof id);
    h.header_seq = 1;
    h.next_wal_salt = random_u64();
    return h;
}

}  // namespace steppe::storage
