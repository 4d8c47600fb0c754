// "Program 1" of the object engine's migration tests (objects_migrate_test.cpp):
// the old build of the application (objects_migrate_model.hpp with
// OBJECTS_MIGRATE_V1), built once per scheme as the tests are.
//   objects_migrate_v1 write STORE    builds the book (and garbage: a book
//                                     no root reaches, with notes and contacts)
//   objects_migrate_v1 verify STORE   checks every object and reference (exit 0)
#define OBJECTS_MIGRATE_V1
#include "objects_migrate_model.hpp"

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace {

using objapp::Book;
using objapp::Contact;
using objapp::Note;
namespace so = steppe::objects;

so::options opts() {
    so::options o;
    o.durable = false;
    o.segment_objects = 16;
    return o;
}

void fill(Contact& c, int i, so::ref<Contact> friend_, so::ref<Note> note) {
    std::snprintf(c.name, sizeof c.name, "%s", objapp::name_of(i).c_str());
    std::snprintf(c.phone, sizeof c.phone, "%s", objapp::phone_of(i).c_str());
    c.age = objapp::age_of(i);
    c.flags = objapp::flags_of(i);
    c.friend_ = friend_;
    c.note = note;
}

so::ref<so::array<so::ref<Note>>> make_notes(so::store& s, int count, const std::vector<so::ref<Contact>>& ring) {
    auto notes = s.make_array<so::ref<Note>>(static_cast<std::size_t>(count));
    for (int j = 0; j < count; ++j) {
        auto n = s.make<Note>();
        std::snprintf(n.mut()->text, sizeof n->text, "%s", objapp::note_text(j).c_str());
        n.mut()->about = ring[static_cast<std::size_t>(objapp::about_of(j) % objapp::ring_count)];
        (*notes.mut())[static_cast<std::size_t>(j)] = n;
    }
    return notes;
}

void write(const std::string& path) {
    auto s = so::store::open(path, opts());
    std::vector<so::ref<Contact>> ring;
    for (int i = 0; i < objapp::ring_count; ++i) ring.push_back(s.make<Contact>());
    auto notes = make_notes(s, objapp::note_count, ring);
    auto note = [&](int i) { return (*notes)[static_cast<std::size_t>(objapp::note_of(i))]; };
    for (int i = 0; i < objapp::ring_count; ++i)
        fill(*ring[static_cast<std::size_t>(i)].mut(), i, ring[static_cast<std::size_t>((i + 1) % objapp::ring_count)],
             note(i));
    auto few = s.make_array<Contact>(objapp::few_count);
    auto many = s.make_array<Contact>(objapp::many_count);
    int i = objapp::ring_count;
    for (auto* array : {&few, &many})
        for (std::size_t k = 0; k < (*array)->size(); ++k, ++i)
            fill((*array->mut())[k], i, ring[static_cast<std::size_t>(objapp::friend_of_element(static_cast<int>(k)))],
                 note(i));
    auto book = s.root<Book>("book");
    *book.mut() = Book{ring.front(), few, many, notes, ring.back()};
    // Garbage once "trash" is removed: a book, its notes and two contacts.
    auto trash = s.root<Book>("trash");
    trash.mut()->notes = make_notes(s, objapp::trash_count, ring);
    trash.mut()->few = s.make_array<Contact>(2);
    s.commit();
    s.remove_root("trash");
    s.commit();
}

int verify(const std::string& path) {
    so::options o = opts();
    o.create = false;
    auto s = so::store::open(path, o);
    auto book = s.find_root<Book>("book");
    if (!book) return 2;
    int bad = 0;
    auto expect = [&](bool ok, const std::string& what) {
        if (!ok) std::cerr << "objects v1 verify: " << what << "\n", ++bad;
    };
    std::vector<const Contact*> all = objapp::contacts(*book);
    for (int i = 0; i < static_cast<int>(all.size()); ++i) {
        const Contact& c = *all[static_cast<std::size_t>(i)];
        expect(c.name == objapp::name_of(i) && c.phone == objapp::phone_of(i), "contact " + std::to_string(i));
        expect(c.age == objapp::age_of(i) && c.flags == objapp::flags_of(i), "age/flags " + std::to_string(i));
        expect(c.note == (*book->notes)[static_cast<std::size_t>(objapp::note_of(i))], "note of " + std::to_string(i));
    }
    expect(all.size() == objapp::contact_count, "contact count");
    expect(book->last->friend_ == book->first, "the ring closes");
    for (int j = 0; j < objapp::note_count; ++j) {
        so::ref<Note> n = (*book->notes)[static_cast<std::size_t>(j)];
        expect(n->text == objapp::note_text(j), "note " + std::to_string(j));
        expect(n->about.get() == all[static_cast<std::size_t>(objapp::about_of(j))], "about of " + std::to_string(j));
    }
    expect(s.check().empty(), "check");
    return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) return 64;
    const std::string mode = argv[1], path = argv[2];
    try {
        if (mode == "write") write(path);
        else if (mode == "verify") return verify(path);
        else return 64;
    } catch (const std::exception& e) {
        std::cerr << "objects_migrate_v1 " << mode << ": " << e.what() << "\n";
        return 3;
    }
    return 0;
}
