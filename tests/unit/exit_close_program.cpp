// The program of exit_close_test.cpp: its stores are held in global
// objects, so exit() closes them after main returns, after the static
// objects of the library that were made later (static destruction runs in
// reverse order of construction).
//   exit_close_program ENGINE STORE VALUE
// ENGINE: uffd or mprotect (steppe::store on that fault backend), or
// objects (steppe::objects::store). Sets the store's root "value" to VALUE
// and commits, then writes VALUE + 1000 and returns without committing.
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace {

struct counter {
    long value;
};

std::optional<steppe::store> g_page_store;
std::optional<steppe::objects::store> g_object_store;

void write_page_store(const std::string& path, steppe::fault_backend backend, long value) {
    steppe::open_options o;
    o.backend = backend;
    g_page_store.emplace(steppe::store::open(path, o));
    long* stored = g_page_store->root<long>("value");
    *stored = value;
    g_page_store->commit();
    *stored = value + 1000;
}

void write_object_store(const std::string& path, long value) {
    g_object_store.emplace(steppe::objects::store::open(path));
    steppe::objects::ref<counter> stored = g_object_store->root<counter>("value");
    stored.mut()->value = value;
    g_object_store->commit();
    stored.mut()->value = value + 1000;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: exit_close_program uffd|mprotect|objects STORE VALUE\n");
        return 2;
    }
    const std::string engine = argv[1];
    const long value = std::atol(argv[3]);
    if (engine == "objects")
        write_object_store(argv[2], value);
    else
        write_page_store(argv[2], engine == "uffd" ? steppe::fault_backend::uffd : steppe::fault_backend::mprotect,
                         value);
    return 0;  // exit() closes the store
}
