// The application header of the migration tests, as two builds of one
// program see it: MIGRATE_V1 is the old build (migrate_v1.cpp, "program 1"),
// without it the new one (migrate_test.cpp, "program 2"). Both name the
// type app::Contact, as the stored name is the qualified C++ name. From v1
// to v2 Contact gains `score` (default 1.5) and `visits`, loses `flags`,
// `phone` is renamed `mobile`, and `age` goes from int to long (through a
// conversion function). Note and Book do not change; they point at contacts
// (Book::where into one's phone/mobile field), contacts point at notes and
// at each other.
#pragma once

#include <steppe/steppe.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace app {

struct Note;

#ifdef MIGRATE_V1
struct Contact {
    char name[24];
    char phone[16];
    int age;
    int flags;
    Contact* friend_;
    Note* note;
    STEPPE_FIELDS(name, phone, age, flags, friend_, note)
};
#else
struct Contact {
    char name[24];
    char mobile[16];
    long age;
    double score = 1.5;
    int visits;
    Contact* friend_;
    Note* note;
    STEPPE_FIELDS(name, mobile, age, score, visits, friend_, note)
};
#endif

struct Note {
    char text[32];
    Contact* about;
    STEPPE_FIELDS(text, about)
};

// The root: contacts made one by one (a ring through friend_), a small
// array of them, a large one (more than 2048 bytes: pages of its own), the
// notes, and an interior pointer into the small array.
struct Book {
    Contact* first;
    Contact* few;        // few_count contacts in one small allocation
    Contact* many;       // many_count in one large allocation
    Note* notes;         // note_count
    char* where;         // few[where_index].phone (mobile after)
    Contact* last_many;  // &many[many_count - 1]
    STEPPE_FIELDS(first, few, many, notes, where, last_many)
};

inline constexpr int ring_count = 40, few_count = 3, many_count = 60, note_count = 10, where_index = 2;

// Contact number i of the whole book: the ring 0..39, few 40..42, many 43..102.
inline std::string name_of(int i) { return "contact-" + std::to_string(i); }
inline std::string phone_of(int i) { return "555-" + std::to_string(1000 + i); }
inline int age_of(int i) { return 20 + i; }
inline std::string note_text(int j) { return "note-" + std::to_string(j); }
// The contact note j is about, and the note contact i points at.
inline int about_of(int j) { return j * 7; }
inline int note_of(int i) { return i % note_count; }

// Every contact of the book, in number order.
inline std::vector<Contact*> contacts(Book& b) {
    std::vector<Contact*> all;
    Contact* c = b.first;
    for (int i = 0; i < ring_count; ++i, c = c->friend_) all.push_back(c);
    for (int k = 0; k < few_count; ++k) all.push_back(&b.few[k]);
    for (int k = 0; k < many_count; ++k) all.push_back(&b.many[k]);
    return all;
}

}  // namespace app
