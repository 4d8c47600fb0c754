// The application header of the object engine's migration tests, as two
// builds of one program see it: OBJECTS_MIGRATE_V1 is the old build
// (objects_migrate_v1.cpp, "program 1"), without it the new one
// (objects_migrate_test.cpp, "program 2"); both are built with the same
// scheme. From v1 to v2 Contact gains `score` (default 1.5), `visits`
// (filled from the dropped `flags` by the conversion function), `stars`
// (value-initialized) and `pinned` (a reference the function takes from the
// old object); loses `flags`; `phone` is renamed `mobile`; and `age` goes
// from int to long through the function. Note and Book do not change; they
// refer to contacts (single objects and arrays of them), contacts refer to
// notes and to each other.
#pragma once

#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace objapp {

namespace so = steppe::objects;
struct Note;

#ifdef OBJECTS_MIGRATE_V1
struct Contact {
    char name[24];
    char phone[16];
    std::int32_t age;
    std::int32_t flags;
    so::ref<Contact> friend_;
    so::ref<Note> note;
    STEPPE_FIELDS(name, phone, age, flags, friend_, note)
};
#else
struct Contact {
    char name[24];
    char mobile[16];
    long age;
    double score = 1.5;
    std::int32_t visits;
    std::int64_t stars;
    so::ref<Contact> friend_;
    so::ref<Note> note;
    so::ref<Note> pinned;
    STEPPE_FIELDS(name, mobile, age, score, visits, stars, friend_, note, pinned)
};
#endif

struct Note {
    char text[32];
    so::ref<Contact> about;
    STEPPE_FIELDS(text, about)
};

// The root: a ring of contacts made one by one (through friend_), a small
// and a bigger array of contacts, and an array of references to the notes.
struct Book {
    so::ref<Contact> first;
    so::ref<so::array<Contact>> few;
    so::ref<so::array<Contact>> many;
    so::ref<so::array<so::ref<Note>>> notes;
    so::ref<Contact> last;  // the ring's last contact
    STEPPE_FIELDS(first, few, many, notes, last)
};

inline constexpr int ring_count = 40, few_count = 3, many_count = 60, note_count = 10, trash_count = 12;
inline constexpr int contact_count = ring_count + few_count + many_count;

// Contact number i of the whole book: the ring 0..39, few 40..42, many 43..102.
inline std::string name_of(int i) { return "contact-" + std::to_string(i); }
inline std::string phone_of(int i) { return "555-" + std::to_string(1000 + i); }
inline int age_of(int i) { return 20 + i; }
inline int flags_of(int i) { return i * 7; }
inline std::string note_text(int j) { return "note-" + std::to_string(j); }
// The ring contact note j is about, the note contact i refers to, the ring
// contact array element k is a friend of.
inline int about_of(int j) { return j * 3; }
inline int note_of(int i) { return i % note_count; }
inline int friend_of_element(int k) { return k % ring_count; }

// Every contact of the book, in number order (array elements as themselves).
inline std::vector<const Contact*> contacts(const Book& b) {
    std::vector<const Contact*> all;
    so::ref<Contact> c = b.first;
    for (int i = 0; i < ring_count; ++i, c = c->friend_) all.push_back(c.get());
    for (const Contact& e : *b.few) all.push_back(&e);
    for (const Contact& e : *b.many) all.push_back(&e);
    return all;
}

}  // namespace objapp
