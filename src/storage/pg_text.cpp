// pg_text.hpp's helpers.
#include "storage/pg_text.hpp"

#include <steppe/error.hpp>

#include <algorithm>

namespace steppe::storage::pg_text {

bool valid_store_name(std::string_view s) {
    if (s.empty() || s.size() > 63) return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
               c == '-';
    });
}

void append_hex(std::string& out, const std::byte* p, std::size_t n) {
    static constexpr char digits[] = "0123456789abcdef";
    const std::size_t at = out.size();
    out.resize(at + 2 * n);
    for (std::size_t i = 0; i < n; ++i) {
        out[at + 2 * i] = digits[std::uint8_t(p[i]) >> 4];
        out[at + 2 * i + 1] = digits[std::uint8_t(p[i]) & 15];
    }
}

std::string hex_bytea(const std::byte* p, std::size_t n) {
    std::string s = "\\x";
    append_hex(s, p, n);
    return s;
}

namespace {
int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
}  // namespace

// A bytea column of a text-format result ("\x..." hex output).
std::vector<std::byte> bytea_of(const pg_result& r, int row, int col, const std::string& shown) {
    std::string t = r.text(row, col);
    if (t.size() < 2 || t[0] != '\\' || t[1] != 'x')
        throw error(errc::corrupt, shown + ": a bytea column is not in hex form (bytea_output must be 'hex')");
    std::vector<std::byte> bytes((t.size() - 2) / 2);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        int hi = hex_digit(t[2 + 2 * i]), lo = hex_digit(t[3 + 2 * i]);
        if (hi < 0 || lo < 0 || t.size() % 2) throw error(errc::corrupt, shown + ": a bytea column holds malformed hex");
        bytes[i] = std::byte(hi << 4 | lo);
    }
    return bytes;
}

bool bytes_of_hex(const std::string& text, std::byte* out, std::size_t n) {
    if (text.size() != 2 * n) return false;
    for (std::size_t i = 0; i < n; ++i) {
        const int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        out[i] = std::byte(hi << 4 | lo);
    }
    return true;
}

std::string digest_text(pg_digest d) {
    std::string out;
    do {
        out.insert(out.begin(), char('0' + int(d % 10)));
        d /= 10;
    } while (d != 0);
    return out;
}

bool parse_digest(const std::string& text, pg_digest& out) {
    if (text.empty() || text.size() > 39) return false;
    pg_digest d = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return false;
        const pg_digest next = d * 10 + pg_digest(c - '0');
        if (next / 10 != d) return false;
        d = next;
    }
    out = d;
    return true;
}

std::string digest_mismatch(const std::string& path, std::uint64_t txn, pg_digest recorded, pg_digest found) {
    return path + ": the newest page versions at commit " + std::to_string(txn) +
           " do not add up to the store row's digest (P6: recorded " + digest_text(recorded) + ", found " +
           digest_text(found) + "): " +
           (found < recorded ? "a page's newest version is missing from steppe_page (a row deleted, or the table "
                               "restored from an older copy than steppe_store)"
                             : "steppe_page holds versions no commit made (added by hand, or copied from another "
                               "store)");
}

}  // namespace steppe::storage::pg_text
