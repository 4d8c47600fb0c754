// "Program 1" of the migration tests (migrate_test.cpp): the old build of
// the application (migrate_model.hpp with MIGRATE_V1).
//   migrate_v1 write STORE         builds the book
//   migrate_v1 verify STORE        checks every object and pointer (exit 0)
//   migrate_v1 hold STORE READY    opens the store, creates READY, waits
#define MIGRATE_V1
#include "migrate_model.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <vector>

namespace {

using app::Book;
using app::Contact;
using app::Note;

void fill(Contact& c, int i) {
    std::snprintf(c.name, sizeof c.name, "%s", app::name_of(i).c_str());
    std::snprintf(c.phone, sizeof c.phone, "%s", app::phone_of(i).c_str());
    c.age = app::age_of(i);
    c.flags = i * 7;
}

void write(const std::string& path) {
    auto s = steppe::store::open(path);
    Book* b = s.root<Book>("book");
    b->notes = s.make_array<Note>(app::note_count);
    b->few = s.make_array<Contact>(app::few_count);
    b->many = s.make_array<Contact>(app::many_count);
    std::vector<Contact*> ring;
    for (int i = 0; i < app::ring_count; ++i) {
        if (i % 4 == 1) s.make<Note>();  // garbage between them: compaction moves the rest
        ring.push_back(s.make<Contact>());
    }
    b->first = ring[0];
    for (int i = 0; i < app::ring_count; ++i) ring[i]->friend_ = ring[(i + 1) % app::ring_count];
    std::vector<Contact*> all = app::contacts(*b);
    for (int i = 0; i < static_cast<int>(all.size()); ++i) {
        fill(*all[i], i);
        all[i]->note = &b->notes[app::note_of(i)];
    }
    for (int k = 0; k < app::few_count; ++k) b->few[k].friend_ = &b->many[k];
    for (int k = 0; k < app::many_count; ++k) b->many[k].friend_ = ring[k % app::ring_count];
    for (int j = 0; j < app::note_count; ++j) {
        std::snprintf(b->notes[j].text, sizeof b->notes[j].text, "%s", app::note_text(j).c_str());
        b->notes[j].about = all[app::about_of(j)];
    }
    b->where = b->few[app::where_index].phone;
    b->last_many = &b->many[app::many_count - 1];
    s.commit();
}

int verify(const std::string& path) {
    auto s = steppe::store::open(path, {.create = false});
    Book* b = s.find_root<Book>("book");
    if (!b) return 2;
    std::vector<Contact*> all = app::contacts(*b);
    int bad = 0;
    auto expect = [&](bool ok, const std::string& what) {
        if (!ok) std::cerr << "v1 verify: " << what << "\n", ++bad;
    };
    for (int i = 0; i < static_cast<int>(all.size()); ++i) {
        const Contact& c = *all[i];
        expect(c.name == app::name_of(i) && c.phone == app::phone_of(i), "contact " + std::to_string(i));
        expect(c.age == app::age_of(i) && c.flags == i * 7, "age/flags " + std::to_string(i));
        expect(c.note == &b->notes[app::note_of(i)], "note of " + std::to_string(i));
    }
    for (int j = 0; j < app::note_count; ++j)
        expect(b->notes[j].about == all[app::about_of(j)] && b->notes[j].text == app::note_text(j),
               "note " + std::to_string(j));
    expect(b->where == b->few[app::where_index].phone, "where");
    expect(b->last_many == &b->many[app::many_count - 1], "last_many");
    expect(s.check().empty(), "check");
    return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) return 64;
    const std::string mode = argv[1], path = argv[2];
    try {
        if (mode == "write") write(path);
        else if (mode == "verify") return verify(path);
        else if (mode == "hold" && argc == 4) {
            auto s = steppe::store::open(path, {.create = false});
            std::ofstream(argv[3]) << "open";
            for (;;) ::pause();
        } else return 64;
    } catch (const std::exception& e) {
        std::cerr << "migrate_v1 " << mode << ": " << e.what() << "\n";
        return 3;
    }
    return 0;
}
