// Type catalog encoding. All integers little-endian; strings are raw bytes
// with a length prefix and no terminator.
//
// Header (16 bytes)
//   0  u32  magic         "STYC" (bytes 53 54 59 43)
//   4  u16  version       3 (1 and 2 are read too: 1 has no references, 2 no
//                         reference targets)
//   6  u16  reserved      0
//   8  u32  length        bytes in the whole encoding, header and trailer included
//   12 u32  entry count
// Entries, back to back; an entry's position is its catalog index:
//   u32 name length, name         the type's name, 1..65536 bytes, no NUL
//   u32 size, u32 align           1 <= size <= 2^30; align a power of two dividing size
//   u64 fingerprint               types::fingerprint() of this entry
//   u32 count, u32 offset[count]  pointer offsets
//   u32 count, u32 offset[count]  vptr offsets
//   u32 count, reference[count]   references (objects::ref; version 2 and later), each:
//       u32 offset, and (version 3) u32 length + the name of the type it
//       refers to (0..65536; all empty: not recorded, an entry from version 2)
//   u32 count, field[count]       fields, each:
//       u32 offset, u32 size, u8 kind (1 scalar, 2 pointer, 3 nested, 4 array, 5 base, 6 reference),
//       u64 type fingerprint, u32 length + type name (1..65536), u32 length + member name (0..65536)
// Trailer (8 bytes)
//   u64  FNV-1a 64 of every byte before it
//
// Example: a version 1 catalog holding `struct Node { Node* next; };` is 98 bytes
// (versions 2 and 3 add a reference count of 0 after the vptr count):
//   0  header: 53 54 59 43 | 01 00 | 00 00 | 62 00 00 00 | 01 00 00 00
//   16 name 04 00 00 00 "Node"; 24 size 8; 28 align 8; 32 fingerprint (8 bytes)
//   40 pointer count 1; 44 pointer offset 0; 48 vptr count 0; 52 field count 1
//   56 field: offset 0; 60 size 8; 64 kind 2; 65 type fingerprint (8 bytes);
//      73 type 05 00 00 00 "Node*"; 82 name 04 00 00 00 "next"
//   90 checksum (8 bytes)
//
// A catalog is valid if and only if
//  (1) magic, version and reserved are as above, length equals the bytes
//      given, and the checksum matches;
//  (2) every count fits in the bytes that remain, and the entries end exactly
//      at the trailer;
//  (3) names are unique, sizes and alignments are as above;
//  (4) pointer, vptr and reference offsets are strictly increasing, each slot
//      lies within the type, and no two slots (of any kind) overlap;
//  (5) fields lie within the type, in non-decreasing offset order, with a
//      known kind; a pointer field is 8 bytes at a listed pointer offset, a
//      reference field 8 bytes at a listed reference offset; reference
//      targets are all named or all empty;
//  (6) the stored fingerprint equals the one recomputed from the entry.
// The checksum alone catches damage; (2)-(6) make sure that even a catalog
// written by a buggy program can never send the swizzler outside an object.
#include <algorithm>
#include <bit>
#include <cstring>

#include "types/hash.hpp"
#include "types/types.hpp"

namespace steppe::types {

namespace {

constexpr std::uint32_t magic = 0x43595453;  // "STYC"
constexpr std::uint16_t version = 3, first_version = 1;
constexpr std::size_t header_size = 16;
constexpr std::size_t trailer_size = 8;
constexpr std::size_t min_entry_size = 4 + 1 + 4 + 4 + 8 + 4 + 4 + 4;
constexpr std::size_t min_field_size = 4 + 4 + 1 + 8 + 4 + 1 + 4;
constexpr std::uint32_t slot = sizeof(void*);

class writer {
public:
    void u8(std::uint8_t v) { out_.push_back(std::byte{v}); }
    void u16(std::uint16_t v) { put(v, 2); }
    void u32(std::uint32_t v) { put(v, 4); }
    void u64(std::uint64_t v) { put(v, 8); }
    void text(const std::string& s) {
        u32(static_cast<std::uint32_t>(s.size()));
        for (char c : s) out_.push_back(static_cast<std::byte>(c));
    }
    void offsets(const std::vector<std::uint32_t>& v) {
        u32(static_cast<std::uint32_t>(v.size()));
        for (std::uint32_t o : v) u32(o);
    }
    void references(const layout& l) {
        u32(static_cast<std::uint32_t>(l.refs.size()));
        for (std::size_t i = 0; i < l.refs.size(); ++i) {
            u32(l.refs[i]);
            text(l.ref_targets.empty() ? std::string() : l.ref_targets[i].type);
        }
    }
    void patch_u32(std::size_t at, std::uint32_t v) {
        for (int i = 0; i < 4; ++i) out_[at + i] = static_cast<std::byte>(v >> (8 * i));
    }
    std::vector<std::byte>& bytes() { return out_; }

private:
    void put(std::uint64_t v, int width) {
        for (int i = 0; i < width; ++i) out_.push_back(static_cast<std::byte>(v >> (8 * i)));
    }
    std::vector<std::byte> out_;
};

// Reads within [0, end) only; every failure is a corrupt error naming the
// entry and byte offset.
class reader {
public:
    reader(std::span<const std::byte> bytes, std::size_t end) : bytes_(bytes), end_(end) {}

    [[noreturn]] void fail(const std::string& what) const {
        std::string where = entry_ < 0 ? "" : "entry " + std::to_string(entry_) + ", ";
        throw error(errc::corrupt, "type catalog: " + what + " (" + where + "byte " + std::to_string(pos_) + ")");
    }
    void need(std::size_t n) const {
        if (n > end_ - pos_) fail("truncated: " + std::to_string(n) + " bytes needed, " + std::to_string(end_ - pos_) + " left");
    }
    std::uint64_t get(int width) {
        need(static_cast<std::size_t>(width));
        std::uint64_t v = 0;
        for (int i = 0; i < width; ++i) v |= std::to_integer<std::uint64_t>(bytes_[pos_ + i]) << (8 * i);
        pos_ += static_cast<std::size_t>(width);
        return v;
    }
    void skip(std::size_t n) {
        need(n);
        pos_ += n;
    }
    std::uint8_t u8() { return static_cast<std::uint8_t>(get(1)); }
    std::uint16_t u16() { return static_cast<std::uint16_t>(get(2)); }
    std::uint32_t u32() { return static_cast<std::uint32_t>(get(4)); }
    std::uint64_t u64() { return get(8); }
    std::string text(std::uint32_t min, const char* what) {
        std::uint32_t n = u32();
        if (n < min || n > max_name_length) fail(std::string(what) + " length " + std::to_string(n) + " out of range");
        need(n);
        std::string s(n, '\0');
        std::memcpy(s.data(), bytes_.data() + pos_, n);
        pos_ += n;
        return s;
    }
    // A count of records of at least `record` bytes each, that must fit in what is left.
    std::uint32_t count(std::size_t record, const char* what) {
        std::uint32_t n = u32();
        if (std::uint64_t{n} * record > end_ - pos_) fail(std::string(what) + " count " + std::to_string(n) + " exceeds the data");
        return n;
    }
    std::size_t pos() const { return pos_; }
    std::size_t end() const { return end_; }
    void set_entry(long e) { entry_ = e; }

private:
    std::span<const std::byte> bytes_;
    std::size_t end_;
    std::size_t pos_ = 0;
    long entry_ = -1;
};

std::vector<std::uint32_t> read_slots(reader& r, const layout& l, const char* what) {
    std::uint32_t n = r.count(4, what);
    std::vector<std::uint32_t> v(n);
    for (std::uint32_t i = 0; i < n; ++i) {
        v[i] = r.u32();
        if (std::uint64_t{v[i]} + slot > l.size)
            r.fail(std::string(what) + " offset " + std::to_string(v[i]) + " beyond size " + std::to_string(l.size));
        if (i > 0 && v[i] < v[i - 1] + slot) r.fail(std::string(what) + " offsets not increasing or overlapping");
    }
    return v;
}

// Version 3 references: offsets as read_slots checks them, each with its target.
void read_references(reader& r, layout& l) {
    std::uint32_t n = r.count(8, "reference");
    std::size_t named = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
        std::uint32_t offset = r.u32();
        if (std::uint64_t{offset} + slot > l.size)
            r.fail("reference offset " + std::to_string(offset) + " beyond size " + std::to_string(l.size));
        if (i > 0 && offset < l.refs.back() + slot) r.fail("reference offsets not increasing or overlapping");
        l.refs.push_back(offset);
        l.ref_targets.push_back({r.text(0, "reference target name"), {nullptr}});
        if (l.ref_targets.back().type.find('\0') != std::string::npos) r.fail("NUL in a reference target name");
        named += !l.ref_targets.back().type.empty();
    }
    if (named != 0 && named != n) r.fail("some reference targets named, some not");
    if (named == 0) l.ref_targets.clear();
}

layout read_entry(reader& r, std::uint16_t format) {
    layout l;
    l.name = r.text(1, "name");
    if (l.name.find('\0') != std::string::npos) r.fail("NUL in type name");
    l.size = r.u32();
    l.align = r.u32();
    if (l.size == 0 || l.size > max_type_size) r.fail("type size " + std::to_string(l.size) + " out of range");
    if (!std::has_single_bit(l.align) || l.size % l.align != 0)
        r.fail("alignment " + std::to_string(l.align) + " invalid for size " + std::to_string(l.size));
    std::uint64_t stored_fp = r.u64();
    l.pointers = read_slots(r, l, "pointer");
    l.vptrs = read_slots(r, l, "vptr");
    if (format == 2) l.refs = read_slots(r, l, "reference");
    if (format >= 3) read_references(r, l);
    std::vector<std::uint32_t> slots(l.pointers);
    slots.insert(slots.end(), l.vptrs.begin(), l.vptrs.end());
    slots.insert(slots.end(), l.refs.begin(), l.refs.end());
    std::sort(slots.begin(), slots.end());
    for (std::size_t i = 1; i < slots.size(); ++i)
        if (slots[i] - slots[i - 1] < slot) r.fail("pointer and vptr slots overlap");

    std::uint32_t n = r.count(min_field_size, "field");
    l.fields.reserve(n);
    for (std::uint32_t i = 0; i < n; ++i) {
        field f;
        f.offset = r.u32();
        f.size = r.u32();
        std::uint8_t kind = r.u8();
        f.type_fp = r.u64();
        f.type = r.text(1, "field type name");
        f.name = r.text(0, "field name");
        if (kind < 1 || kind > 6) r.fail("unknown field kind " + std::to_string(kind));
        f.kind = static_cast<field_kind>(kind);
        if (f.size == 0 || std::uint64_t{f.offset} + f.size > l.size) r.fail("field " + std::to_string(i + 1) + " outside the type");
        if (i > 0 && f.offset < l.fields.back().offset) r.fail("fields not in offset order");
        if (f.kind == field_kind::pointer &&
            (f.size != slot || !std::binary_search(l.pointers.begin(), l.pointers.end(), f.offset)))
            r.fail("pointer field " + std::to_string(i + 1) + " not in the pointer list");
        if (f.kind == field_kind::reference &&
            (f.size != slot || !std::binary_search(l.refs.begin(), l.refs.end(), f.offset)))
            r.fail("reference field " + std::to_string(i + 1) + " not in the reference list");
        l.fields.push_back(std::move(f));
    }
    l.fingerprint = fingerprint(l);
    if (l.fingerprint != stored_fp) r.fail("fingerprint does not match the entry");
    return l;
}

}  // namespace

std::vector<std::byte> catalog::encode() const {
    writer w;
    w.u32(magic);
    w.u16(version);
    w.u16(0);
    w.u32(0);  // length, patched below
    w.u32(static_cast<std::uint32_t>(entries_.size()));
    for (const layout& l : entries_) {
        w.text(l.name);
        w.u32(l.size);
        w.u32(l.align);
        w.u64(l.fingerprint);
        w.offsets(l.pointers);
        w.offsets(l.vptrs);
        w.references(l);
        w.u32(static_cast<std::uint32_t>(l.fields.size()));
        for (const field& f : l.fields) {
            w.u32(f.offset);
            w.u32(f.size);
            w.u8(static_cast<std::uint8_t>(f.kind));
            w.u64(f.type_fp);
            w.text(f.type);
            w.text(f.name);
        }
    }
    w.patch_u32(8, static_cast<std::uint32_t>(w.bytes().size() + trailer_size));
    detail::fnv1a h;
    h.bytes(w.bytes());
    w.u64(h.value());
    return std::move(w.bytes());
}

catalog catalog::decode(std::span<const std::byte> bytes) {
    if (bytes.size() < header_size + trailer_size)
        throw error(errc::corrupt, "type catalog: " + std::to_string(bytes.size()) + " bytes, shorter than header and checksum");
    if (bytes.size() > UINT32_MAX) throw error(errc::corrupt, "type catalog: larger than 4 GiB");
    std::size_t body_end = bytes.size() - trailer_size;
    reader r(bytes, bytes.size());
    if (r.u32() != magic) r.fail("bad magic");
    std::uint16_t format = r.u16();
    if (format < first_version || format > version) r.fail("unknown version " + std::to_string(format));
    if (r.u16() != 0) r.fail("reserved field not zero");
    if (std::uint32_t len = r.u32(); len != bytes.size())
        r.fail("length " + std::to_string(len) + " recorded, " + std::to_string(bytes.size()) + " present");
    std::uint32_t n = r.u32();
    detail::fnv1a h;
    h.bytes(bytes.first(body_end));
    reader trailer(bytes.subspan(body_end), trailer_size);
    if (trailer.u64() != h.value()) r.fail("checksum mismatch");

    reader body(bytes.first(body_end), body_end);
    body.skip(header_size);
    if (std::uint64_t{n} * min_entry_size > body_end - header_size) body.fail("entry count " + std::to_string(n) + " exceeds the data");
    catalog c;
    c.entries_.reserve(n);
    for (std::uint32_t i = 0; i < n; ++i) {
        body.set_entry(i);
        layout l = read_entry(body, format);
        if (c.find(l.name)) body.fail("duplicate type name " + l.name);
        c.add(std::move(l));
    }
    body.set_entry(-1);
    if (body.pos() != body.end()) body.fail(std::to_string(body.end() - body.pos()) + " stray bytes after the entries");
    return c;
}

}  // namespace steppe::types
