// The PostgreSQL page store's SQL text helpers and constants, shared by
// pg_store.cpp (reads, commits, check) and pg_open.cpp (open's statements).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "storage/pg_connection.hpp"
#include "storage/pg_store.hpp"

namespace steppe::storage::pg_text {

// The first keys of the session advisory locks (P2, P3): 'STW1' and 'STR1'.
constexpr std::int32_t writer_class = 0x53545731;
constexpr std::int32_t reader_class = 0x53545231;
// Format 2 added the store row's digest (P6); a writer's open brings a
// format-1 store (and the tables) up to it.
constexpr std::uint32_t pg_format = 2;
constexpr std::uint32_t pg_format_without_digest = 1;

// Store names are SQL literals in some statements: this lets no quote in.
bool valid_store_name(std::string_view s);
void append_hex(std::string& out, const std::byte* p, std::size_t n);
std::string hex_bytea(const std::byte* p, std::size_t n);  // "\x..." as bytea's text input
// A bytea column of a text-format result ("\x..." hex output).
std::vector<std::byte> bytea_of(const pg_result& r, int row, int col, const std::string& shown);
// `n` bytes from 2n hex digits.
bool bytes_of_hex(const std::string& text, std::byte* out, std::size_t n);
// P6: the store row's digest, as decimal text (numeric in SQL), and back.
std::string digest_text(pg_digest d);
bool parse_digest(const std::string& text, pg_digest& out);
// The same in every report (open, check) of a store whose newest versions
// at commit `txn` do not add up to its digest (P6).
std::string digest_mismatch(const std::string& path, std::uint64_t txn, pg_digest recorded, pg_digest found);

}  // namespace steppe::storage::pg_text
