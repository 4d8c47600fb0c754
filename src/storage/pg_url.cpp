// The PostgreSQL page store's URL (pg_store.hpp): what it names and asks
// for (parse_pg_address), and how it is shown in messages, passwords hidden
// however they are spelled (pg_shown_url).
#include "storage/pg_store.hpp"

#include <steppe/error.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "storage/pg_text.hpp"

namespace steppe::storage {

using namespace pg_text;


namespace {
// The number of a "key=N" parameter, at most `max`.
std::uint64_t url_number(const std::string& shown, std::string_view param, std::uint64_t max) {
    const auto eq = param.find('=');
    std::string v(param.substr(eq + 1));
    char* end = nullptr;
    unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end || n > max)
        throw error(errc::invalid_argument, "store URL " + shown + ": " + std::string(param.substr(0, eq)) +
                                                " must be a whole number up to " + std::to_string(max));
    return n;
}
}  // namespace

namespace {

// Where libpq finds a URL's parts (conninfo_uri_parse_options): the user
// part runs from "://" to the first '@', if one comes before any '/' (a
// '?' does not end it: "u:pa?ss@h" is user u, password pa?ss); the query
// starts at the first '?' after it.
struct url_parts {
    std::size_t user = std::string::npos;      // start of "user[:password]"
    std::size_t at = std::string::npos;        // its '@'
    std::size_t query = std::string::npos;     // the '?'
};

url_parts parts_of(std::string_view url) {
    url_parts u;
    const auto scheme_end = url.find("://");
    const std::size_t host = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
    const auto stop = url.find_first_of("@/", host);
    if (scheme_end != std::string_view::npos && stop != std::string_view::npos && url[stop] == '@') {
        u.user = host;
        u.at = stop;
    }
    u.query = url.find('?', u.at == std::string_view::npos ? host : u.at + 1);
    return u;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// libpq's percent-decoding of a URL part (conninfo_uri_decode): every '%'
// begins two hex digits, not 00; nullopt where libpq refuses the part, and
// its message then quotes the part whole.
std::optional<std::string> uri_decoded(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') {
            out += s[i];
            continue;
        }
        const int hi = i + 2 < s.size() ? hex_digit(s[i + 1]) : -1, lo = hi >= 0 ? hex_digit(s[i + 2]) : -1;
        if (lo < 0 || (hi == 0 && lo == 0)) return std::nullopt;
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

// A query keyword whose value is a secret: libpq decodes keywords, so
// "%70assword" is password, and sslpassword is one too. Any spelling with
// "password" in it counts (libpq refuses the ones it does not know, but the
// URL is still printed); so does a keyword libpq cannot decode.
bool holds_password(std::string_view keyword) {
    std::optional<std::string> k = uri_decoded(keyword);
    if (!k) return true;
    std::transform(k->begin(), k->end(), k->begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return k->find("password") != std::string::npos;
}

}  // namespace

std::string pg_shown_url(const std::string& url) {
    const url_parts u = parts_of(url);
    std::string shown;
    // scheme://user:password@host... without the password,
    if (u.at != std::string::npos) {
        const auto colon = url.find(':', u.user);
        shown = url.substr(0, std::min(colon, u.at)) + url.substr(u.at, u.query == std::string::npos
                                                                               ? std::string::npos
                                                                               : u.query - u.at);
    } else {
        shown = url.substr(0, u.query);
    }
    if (u.query == std::string::npos) return shown;
    // ...and the value of every query parameter that is a password masked.
    std::string_view params = std::string_view(url).substr(u.query + 1);
    shown += '?';
    for (;;) {
        const auto amp = params.find('&');
        const std::string_view p = params.substr(0, amp);
        const auto eq = p.find('=');
        shown += eq != std::string_view::npos && holds_password(p.substr(0, eq)) ? std::string(p.substr(0, eq)) + "=***"
                                                                                  : std::string(p);
        if (amp == std::string_view::npos) return shown;
        shown += '&';
        params = params.substr(amp + 1);
    }
}

pg_address parse_pg_address(const std::string& url) {
    pg_address a;
    // Every message below names the URL without its password.
    a.shown = pg_shown_url(url);
    const url_parts u = parts_of(url);
    // libpq quotes a part it cannot decode whole in its message: a password
    // must not reach it so.
    if (u.at != std::string::npos) {
        const auto colon = url.find(':', u.user);
        if (colon < u.at && !uri_decoded(std::string_view(url).substr(colon + 1, u.at - colon - 1)))
            throw error(errc::invalid_argument, "store URL " + a.shown + ": the password in the user part is not "
                                                "percent-encoded right (each % begins two hex digits, not %00)");
    }
    const auto q = u.query;
    std::string base = url.substr(0, q), kept, session_attrs;
    bool has_connect_timeout = false;
    std::string_view params = q == std::string::npos ? std::string_view{} : std::string_view(url).substr(q + 1);
    while (!params.empty()) {
        auto amp = params.find('&');
        std::string_view p = params.substr(0, amp);
        params = amp == std::string_view::npos ? std::string_view{} : params.substr(amp + 1);
        if (const auto eq = p.find('=');
            eq != std::string_view::npos && holds_password(p.substr(0, eq)) && !uri_decoded(p.substr(eq + 1)))
            throw error(errc::invalid_argument, "store URL " + a.shown + ": the value of " +
                                                    std::string(p.substr(0, eq)) +
                                                    " is not percent-encoded right (each % begins two hex digits, "
                                                    "not %00)");
        if (p.starts_with("store=")) {
            a.store = p.substr(6);
        } else if (p.starts_with("cache_mib=")) {
            a.cache_bytes = url_number(a.shown, p, 1u << 20) << 20;
        } else if (p.starts_with("cache_file=")) {
            a.cache_file = p.substr(11);
            a.cache_file_named = true;
            if (a.cache_file.empty() || a.cache_file[0] != '/')
                throw error(errc::invalid_argument, "store URL " + a.shown + ": cache_file must be an absolute path (" +
                                                        "cache_file_mib=0 for none)");
        } else if (p.starts_with("cache_file_mib=")) {
            a.cache_file_bytes = url_number(a.shown, p, 1u << 24) << 20;
        } else if (p.starts_with("fault_wait_s=")) {
            a.fault_wait = std::chrono::seconds(url_number(a.shown, p, 86400));
        } else if (p.starts_with("pages_from=")) {
            if (p != "pages_from=standby" && p != "pages_from=primary")
                throw error(errc::invalid_argument, "store URL " + a.shown + ": pages_from must be primary or standby");
            a.pages_from_standby = p == "pages_from=standby";
        } else if (p.starts_with("target_session_attrs=")) {
            session_attrs = p;
        } else if (!p.empty()) {
            if (p.starts_with("connect_timeout=")) has_connect_timeout = true;
            kept += (kept.empty() ? "?" : "&") + std::string(p);
        }
    }
    if (a.cache_file.empty()) a.cache_file = default_pg_cache_path();
    if (!valid_store_name(a.store))
        throw error(errc::invalid_argument,
                    "store URL " + a.shown +
                        " must name its store with store=NAME (1 to 63 of A-Z a-z 0-9 _ . -), e.g. "
                        "postgresql://host/db?store=cad");
    // A server that does not answer must not hang an open or a fault for good.
    if (!has_connect_timeout) kept += kept.empty() ? "?connect_timeout=10" : "&connect_timeout=10";
    // Reading pages from a standby: the URL lists the primary and its
    // standbys (host=a,b); registration and commits need the primary.
    if (a.pages_from_standby && session_attrs.empty()) session_attrs = "target_session_attrs=read-write";
    a.conninfo = base + kept + (session_attrs.empty() ? "" : "&" + session_attrs);
    a.fetch_conninfo = a.pages_from_standby ? base + kept + "&target_session_attrs=prefer-standby" : a.conninfo;
    return a;
}

}  // namespace steppe::storage
