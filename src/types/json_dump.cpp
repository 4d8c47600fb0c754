#include "types/json_dump.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <optional>

namespace steppe::types {

namespace {

struct scalar {
    char code;  // as layout.hpp's scalar_code: b i u f n, e (enum of an integer)
    std::size_t size;
};

// The scalar whose fingerprint is `fp`, if any.
std::optional<scalar> scalar_of(std::uint64_t fp) {
    for (char code : {'i', 'u', 'f', 'b', 'n'})
        for (std::size_t size : {1, 2, 4, 8, 16}) {
            if (detail::code_fp(code, size) == fp) return scalar{code, size};
            if (code != 'f' && code != 'b' && code != 'n' && detail::code_fp('e', detail::code_fp(code, size)) == fp)
                return scalar{code == 'i' ? 'e' : 'E', size};
        }
    return std::nullopt;
}

std::string hex(const std::byte* p, std::size_t n) {
    std::string out = "\"0x";
    char buf[3];
    for (std::size_t i = n; i-- > 0;) {  // little-endian: the most significant byte last in memory
        std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(p[i]));
        out += buf;
    }
    return out + "\"";
}

std::string scalar_json(scalar s, const std::byte* p) {
    char buf[64];
    bool is_signed = s.code == 'i' || s.code == 'e';
    if (s.code == 'b') return p[0] != std::byte{0} ? "true" : "false";
    if (s.code == 'n') return "null";
    if (s.code == 'f' && s.size == 4) {
        float f;
        std::memcpy(&f, p, 4);
        std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
        return buf;
    }
    if (s.code == 'f' && s.size == 8) {
        double d;
        std::memcpy(&d, p, 8);
        std::snprintf(buf, sizeof buf, "%.17g", d);
        return buf;
    }
    if (s.size > 8 || s.code == 'f') return hex(p, s.size);  // long double, 128-bit integers
    std::uint64_t u = 0;
    std::memcpy(&u, p, s.size);
    if (is_signed && s.size < 8 && (u >> (s.size * 8 - 1)) & 1) u |= ~std::uint64_t{0} << (s.size * 8);  // sign-extend
    if (is_signed) std::snprintf(buf, sizeof buf, "%" PRId64, static_cast<std::int64_t>(u));
    else std::snprintf(buf, sizeof buf, "%" PRIu64, u);
    return buf;
}

class writer {
public:
    writer(const catalog& c, const word_to_json& word) : catalog_(c), word_(word) {}

    std::string object(const layout& l, const std::byte* p) {
        // A scalar type's own layout (an array object of ints) is its one unnamed field.
        if (l.fields.size() == 1 && l.fields[0].name.empty() && l.fields[0].offset == 0 && l.fields[0].size == l.size &&
            l.fields[0].kind != field_kind::base)
            return value(l.fields[0].kind, l.fields[0].type_fp, l.size, p);
        std::string out = "{";
        bool first = true;
        for (const field& f : l.fields) {
            out += first ? "" : ",";
            first = false;
            // Built by appending: GCC 12 at -O3 warns (-Wrestrict, its bug
            // 105329) on a literal + std::string temporary.
            std::string name = f.name;
            if (name.empty() && f.kind == field_kind::base) name.append("(base ").append(f.type).append(")");
            if (name.empty()) name.append("@").append(std::to_string(f.offset));
            out += json_string(name);
            out += ':';
            out += value(f.kind, f.type_fp, f.size, p + f.offset);
        }
        return out + "}";
    }

    std::string value(field_kind kind, std::uint64_t fp, std::size_t size, const std::byte* p) {
        switch (kind) {
        case field_kind::pointer:
        case field_kind::reference: {
            std::uint64_t w;
            std::memcpy(&w, p, sizeof w);
            return word_(w);
        }
        case field_kind::scalar:
            if (auto s = scalar_of(fp); s && s->size == size) return scalar_json(*s, p);
            return hex(p, size);
        case field_kind::nested:
        case field_kind::base:
            if (const layout* l = by_fingerprint(fp)) return object(*l, p);
            return hex(p, size);
        case field_kind::array: return array(fp, size, p);
        }
        return hex(p, size);
    }

private:
    // An array field: its element found by trying what the fingerprint can be.
    std::string array(std::uint64_t fp, std::size_t size, const std::byte* p) {
        if (detail::array_fp(detail::code_fp('i', 1), size) == fp || detail::array_fp(detail::code_fp('u', 1), size) == fp)
            if (auto text = as_text(p, size)) return *text;
        auto elements = [&](std::size_t elem, field_kind kind, std::uint64_t elem_fp) {
            std::string out = "[";
            for (std::size_t i = 0; i * elem < size; ++i) {
                if (i) out += ',';
                out += value(kind, elem_fp, elem, p + i * elem);
            }
            return out + "]";
        };
        for (std::size_t elem : {1, 2, 4, 8, 16}) {
            if (size % elem) continue;
            for (char code : {'i', 'u', 'f', 'b', 'p', 'r'}) {
                std::uint64_t e = detail::code_fp(code, elem);
                if (detail::array_fp(e, size / elem) != fp) continue;
                field_kind kind = code == 'p' ? field_kind::pointer : code == 'r' ? field_kind::reference : field_kind::scalar;
                return elements(elem, kind, e);
            }
        }
        for (const layout& l : catalog_.entries())
            if (l.size && size % l.size == 0 && detail::array_fp(l.fingerprint, size / l.size) == fp)
                return elements(l.size, field_kind::nested, l.fingerprint);
        return hex(p, size);
    }

    // A char array holding text (printable, then only NULs) as a string.
    static std::optional<std::string> as_text(const std::byte* p, std::size_t size) {
        std::size_t n = 0;
        while (n < size && p[n] != std::byte{0}) {
            if (static_cast<unsigned char>(p[n]) < 0x20 || static_cast<unsigned char>(p[n]) > 0x7e) return std::nullopt;
            ++n;
        }
        for (std::size_t i = n; i < size; ++i)
            if (p[i] != std::byte{0}) return std::nullopt;
        return json_string(std::string(reinterpret_cast<const char*>(p), n));
    }

    const layout* by_fingerprint(std::uint64_t fp) const {
        for (const layout& l : catalog_.entries())
            if (l.fingerprint == fp) return &l;
        return nullptr;
    }

    const catalog& catalog_;
    const word_to_json& word_;
};

}  // namespace

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string object_json(const catalog& c, catalog::index type, std::uint64_t count, const std::byte* bytes,
                        const word_to_json& word) {
    writer w(c, word);
    const layout& l = c.at(type);
    if (count == 1) return w.object(l, bytes);
    std::string out = "[";
    for (std::uint64_t i = 0; i < count; ++i) {
        if (i) out += ',';
        out += w.object(l, bytes + i * l.size);
    }
    return out + "]";
}

}  // namespace steppe::types
