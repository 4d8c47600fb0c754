// steppe — inspect and verify stores.
//
//   steppe info  STORE   format, sizes, log state
//   steppe check STORE   verify every checksum and structural invariant;
//                        prints each finding, exits 1 if there is any
//   steppe roots STORE   the named roots and their types
//   steppe stats STORE   pages, objects per type, free space
//   steppe recover STORE salvage a store whose log is damaged: keep every
//                        commit before the damage, keep the damaged log as
//                        STORE-wal.damaged, say what was lost
//   steppe checkpoint STORE
//                        copy the log's commits into the main file and reset
//                        the log (a writable open: not while a program has
//                        the store open)
//   steppe dump STORE    each root, then every object the last commit reaches
//                        from them, one JSON object per line: id, type,
//                        count, value (fields by name; pointers and references
//                        as the id of their target)
//   steppe backup STORE DEST
//                        a copy of the last commit as one new main file DEST
//                        (as a reader: a program may go on committing),
//                        checked before it is reported done
//   steppe import STORE URL
//                        the last commit copied, as one commit, into a new
//                        store at URL (postgresql://HOST/DB?store=NAME),
//                        checked before it is reported done
//   steppe compact [--collect] STORE
//                        move the live objects together into a new store
//                        that replaces this one, pointers rewritten, files
//                        shrunk; --collect frees what no root reaches and
//                        says what, by type (stores of both engines; a
//                        writable open: not while a program has the store open)
//
// Every command reads stores of both engines (the page engine's and the
// object engine's): the storage meta says which made the store. STORE may
// be a PostgreSQL URL (postgresql://HOST/DB?store=NAME) wherever a command
// only reads it or checkpoints it.
//
// Exit codes: 0 fine, 1 findings, 2 usage or the store could not be opened.
#include <steppe/objects.hpp>
#include <steppe/steppe.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "engine/engine.hpp"
#include "objects/object_format.hpp"
#include "storage/backup.hpp"
#include "storage/pg_store.hpp"
#include "storage/storage.hpp"

namespace {

int usage() {
    std::fprintf(stderr,
                 "usage: steppe info STORE    show format, sizes and log state\n"
                 "       steppe check STORE   verify checksums and invariants (exit 1 on any finding)\n"
                 "       steppe roots STORE   list the named roots and their types\n"
                 "       steppe stats STORE   pages, objects per type, free space\n"
                 "       steppe recover STORE open a store whose log is damaged at its last intact commit\n"
                 "       steppe checkpoint STORE\n"
                 "                            copy the log's commits into the main file, reset the log\n"
                 "       steppe dump STORE    the objects the roots reach, one JSON object per line\n"
                 "       steppe backup STORE DEST\n"
                 "                            copy the last commit to the new file DEST (while a program commits)\n"
                 "       steppe import STORE URL\n"
                 "                            copy the last commit into a new store in PostgreSQL (as one commit)\n"
                 "       steppe compact [--collect] STORE\n"
                 "                            pack the live objects into a smaller store, either engine's\n"
                 "                            (--collect: free what no root reaches)\n");
    return 2;
}

// A store's name as the CLI prints it: a URL without its password.
std::string shown(const std::string& path) {
    return steppe::storage::is_postgres_url(path) ? steppe::storage::pg_shown_url(path) : path;
}

std::unique_ptr<steppe::storage::storage> open_read_only(const std::string& path) {
    steppe::storage::options o;
    o.read_only = true;
    o.create = false;
    return steppe::storage::storage::open(path, o);
}

bool made_by_object_engine(const steppe::storage::storage& s) {
    return std::memcmp(s.meta().data(), steppe::objects::format::engine_magic,
                       sizeof steppe::objects::format::engine_magic) == 0;
}

// The engine that made the store, on it.
std::unique_ptr<steppe::engine> open_engine(const std::string& path, const steppe::open_options& o) {
    bool objects = made_by_object_engine(*open_read_only(path));
    return objects ? steppe::open_object_engine(path, o) : steppe::open_page_engine(path, o);
}

// A store in PostgreSQL has no log or commit mark (the server keeps its own
// log); its readers are registrations, not local processes.
int info_postgres(const steppe::storage::info& i) {
    std::printf("versions     %llu bytes of page images in steppe_page\n",
                static_cast<unsigned long long>(i.main_file_bytes));
    std::printf("last commit  %llu\n", static_cast<unsigned long long>(i.txn_seq));
    for (const auto& r : i.readers)
        std::printf("reader       registration %llu at commit %llu\n", static_cast<unsigned long long>(r.pid),
                    static_cast<unsigned long long>(r.txn));
    return 0;
}

int info(const std::string& path) {
    auto s = open_read_only(path);
    auto i = s->describe();
    std::printf("store        %s\n", shown(path).c_str());
    if (made_by_object_engine(*s)) {
        steppe::objects::format::object_meta m;
        std::memcpy(&m, s->meta().data(), sizeof m);
        std::printf("engine       objects: %s + %s, %llu objects in %llu segments of up to %u\n",
                    steppe::objects::to_string(static_cast<steppe::objects::detection>(m.detection)),
                    steppe::objects::to_string(static_cast<steppe::objects::barrier>(m.barrier)),
                    static_cast<unsigned long long>(m.objects), static_cast<unsigned long long>(m.segments),
                    m.segment_objects);
    } else {
        std::printf("engine       pages\n");
    }
    const bool in_postgres = steppe::storage::is_postgres_url(path);
    std::printf("format       %sversion %u, page size %u\n", in_postgres ? "PostgreSQL tables, " : "", i.version,
                i.page_size);
    std::printf("store id     %s\n", i.store_id.c_str());
    std::printf("pages        %llu (%.1f MiB)\n", static_cast<unsigned long long>(i.page_count),
                static_cast<double>(i.page_count) * i.page_size / (1 << 20));
    if (in_postgres) return info_postgres(i);
    std::printf("main file    %llu bytes\n", static_cast<unsigned long long>(i.main_file_bytes));
    std::printf("log          %s-wal: %llu bytes, generation %llu, %llu bytes in use\n", shown(path).c_str(),
                static_cast<unsigned long long>(i.wal_file_bytes), static_cast<unsigned long long>(i.wal_generation),
                static_cast<unsigned long long>(i.wal_bytes_used));
    std::printf("log state    %llu commits (%llu distinct pages) not yet checkpointed\n",
                static_cast<unsigned long long>(i.wal_commits), static_cast<unsigned long long>(i.wal_pages));
    std::printf("last commit  %llu\n", static_cast<unsigned long long>(i.txn_seq));
    if (i.marked_txn)
        std::printf("commit mark  commit %llu known durable\n", static_cast<unsigned long long>(i.marked_txn));
    else
        std::printf("commit mark  damaged or of another log generation: damage to the log's last commit could pass "
                    "for a torn tail\n");
    for (const auto& r : i.readers)  // other readers beside the writer, and their snapshots
        std::printf("reader       process %llu at commit %llu\n", static_cast<unsigned long long>(r.pid),
                    static_cast<unsigned long long>(r.txn));
    return 0;
}

// Salvage works below the page engine: the commits before the damage are
// whole commits, so the engine's state as of the last of them is consistent.
int recover(const std::string& path) {
    steppe::storage::options o;
    o.create = false;
    o.salvage = true;
    auto s = steppe::storage::storage::open(path, o);
    if (s->salvage_report().empty()) {
        std::printf("%s: the log is sound; nothing to recover (last commit %llu)\n", shown(path).c_str(),
                    static_cast<unsigned long long>(s->txn_seq()));
        return 0;
    }
    std::printf("%s\n", s->salvage_report().c_str());
    return 0;
}

std::unique_ptr<steppe::engine> open_store(const std::string& path) {
    steppe::open_options o;
    o.read_only = true;
    o.create = false;
    return open_engine(path, o);
}

// The engine's check of the store at `path`, an open it refuses counted as
// a finding (a store locked or missing is not checked: that error is thrown).
std::vector<std::string> findings_of(const std::string& path, std::uint64_t& pages) {
    try {
        auto s = open_store(path);
        pages = s->stats().store_pages;
        return s->check();
    } catch (const steppe::error& e) {
        if (e.code() == steppe::errc::locked || e.code() == steppe::errc::not_found) throw;
        return {std::string(steppe::to_string(e.code())) + ": " + e.what() + " (the store cannot be opened)"};
    }
}

int check(const std::string& path) {
    std::uint64_t pages = 0;
    const std::vector<std::string> findings = findings_of(path, pages);
    for (const auto& f : findings) std::printf("%s\n", f.c_str());
    std::printf("%s: %zu finding%s in %llu pages and the log\n", shown(path).c_str(), findings.size(),
                findings.size() == 1 ? "" : "s", static_cast<unsigned long long>(pages));
    return findings.empty() ? 0 : 1;
}

int dump(const std::string& path) {
    auto s = open_store(path);
    s->dump([](const std::string& line) { std::printf("%s\n", line.c_str()); });
    return 0;
}

// A root's name as `roots` prints it: as is when it is printable ASCII
// with single spaces between words, not starting with a quote; else
// quoted, with C escapes (\", \\, \n, \t, \xNN for every other byte outside
// printable ASCII), so that no name spans lines, hides the type column or
// reads like another (a name "a  unsigned" beside a root "a" of type
// "unsigned long", a DEL, a UTF-8 line separator).
std::string shown_root_name(const std::string& name) {
    const auto printable = [](char c) { return c >= 0x21 && c <= 0x7e; };
    bool plain = !name.empty() && printable(name.front()) && printable(name.back()) && name.front() != '"';
    for (std::size_t i = 0; plain && i < name.size(); ++i)
        plain = printable(name[i]) || (name[i] == ' ' && name[i - 1] != ' ');
    if (plain) return name;
    std::string out = "\"";
    for (char c : name) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == ' ' || printable(c)) {
            out += c;
        } else {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
            out += hex;
        }
    }
    return out + "\"";
}

int roots(const std::string& path) {
    auto s = open_store(path);
    for (const auto& r : s->roots()) std::printf("%-24s %s\n", shown_root_name(r.name).c_str(), r.type.c_str());
    return 0;
}

int stats(const std::string& path) {
    auto s = open_store(path);
    auto st = s->stats();
    std::printf("pages        %llu (%llu free)\n", static_cast<unsigned long long>(st.store_pages),
                static_cast<unsigned long long>(st.free_pages));
    std::printf("%-40s %8s %12s %10s\n", "type", "size", "objects", "pages");
    for (const auto& t : s->types())
        std::printf("%-40s %8u %12llu %10llu\n", t.name.c_str(), t.size, static_cast<unsigned long long>(t.objects),
                    static_cast<unsigned long long>(t.pages));
    std::printf("(faults, resident, written, evicted, spilled and prefetched pages are counted per process: run a\n"
                " program with STEPPE_STATS=1 to have them printed when it closes the store, or call store::stats())\n");
    return 0;
}

// The open itself checkpoints (recovery ends with one); checkpoint() and a
// close that reports its errors make it explicit.
int checkpoint(const std::string& path) {
    steppe::open_options o;
    o.create = false;
    auto s = open_engine(path, o);
    s->checkpoint();
    std::uint64_t pages = s->stats().store_pages;
    s->close();
    std::printf("%s: checkpointed: the main file alone holds the store (%llu pages)\n", shown(path).c_str(),
                static_cast<unsigned long long>(pages));
    return 0;
}

// `steppe backup STORE DEST` and `steppe import STORE URL`: the last commit
// of one store copied into another, by `copy`; `done` says how ("backed up to").
int copy_store(const std::string& path, const std::string& dest, const char* done,
               steppe::storage::backup_result (*copy)(const std::string&, const std::string&,
                                                      steppe::storage::env*)) {
    auto started = std::chrono::steady_clock::now();
    steppe::storage::backup_result r = copy(path, dest, nullptr);
    // The copy checked its pages and their sums; the engine's check reads
    // what they hold (a copy of damaged engine data is whole, and unusable).
    std::uint64_t pages = 0;
    const std::vector<std::string> findings = findings_of(dest, pages);
    if (!findings.empty()) {
        for (const auto& f : findings) std::printf("%s\n", f.c_str());
        std::fprintf(stderr,
                     "steppe: %s: commit %llu was copied to %s, but the copy does not check out (%zu finding%s, "
                     "above): the store it was copied from holds the same damage (steppe check %s). The copy is "
                     "left for inspection\n",
                     shown(path).c_str(), static_cast<unsigned long long>(r.txn), shown(dest).c_str(), findings.size(),
                     findings.size() == 1 ? "" : "s", shown(path).c_str());
        return 1;
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("%s: commit %llu %s %s: %llu pages (%llu written, %.1f MiB), checked, %.2f s\n", shown(path).c_str(),
                static_cast<unsigned long long>(r.txn), done, shown(dest).c_str(), static_cast<unsigned long long>(r.pages),
                static_cast<unsigned long long>(r.copied),
                static_cast<double>(r.copied) * steppe::storage::page_size / (1 << 20), s);
    return 0;
}

void print_by_type(const char* what, const std::vector<steppe::compact_report::by_type>& types) {
    for (const auto& t : types)
        std::printf("%-6s %10llu objects %12llu bytes  %s\n", what, static_cast<unsigned long long>(t.objects),
                    static_cast<unsigned long long>(t.bytes), t.type.c_str());
}

int compact(const std::string& path, bool collect) {
    auto started = std::chrono::steady_clock::now();
    steppe::compact_options o;
    o.collect = collect;
    steppe::compact_report r = steppe::compact(path, o);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    print_by_type("kept", r.kept);
    print_by_type("freed", r.freed);
    std::printf("%s: compacted%s: %llu pages -> %llu, %llu bytes -> %llu (main file and log), %.2f s\n", shown(path).c_str(),
                collect ? " and collected" : "", static_cast<unsigned long long>(r.pages_before),
                static_cast<unsigned long long>(r.pages_after), static_cast<unsigned long long>(r.bytes_before),
                static_cast<unsigned long long>(r.bytes_after), s);
    return 0;
}

// `steppe compact [--collect] STORE`; nullopt if the arguments are not that.
std::optional<int> compact_command(int argc, char** argv) {
    if (argc < 3 || std::string(argv[1]) != "compact") return std::nullopt;
    bool collect = argc == 4 && std::string(argv[2]) == "--collect";
    if (argc != 3 && !collect) return usage();
    try {
        return compact(argv[argc - 1], collect);
    } catch (const steppe::error& e) {
        std::fprintf(stderr, "steppe compact: %s (%s)\n", e.what(), steppe::to_string(e.code()));
        return 2;
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (std::optional<int> done = compact_command(argc, argv)) return *done;
    if (argc == 4 && (std::string(argv[1]) == "backup" || std::string(argv[1]) == "import")) {
        const bool backup = std::string(argv[1]) == "backup";
        try {
            return backup ? copy_store(argv[2], argv[3], "backed up to", steppe::storage::backup)
                          : copy_store(argv[2], argv[3], "imported into", steppe::storage::import_store);
        } catch (const steppe::error& e) {
            std::fprintf(stderr, "steppe %s: %s (%s)\n", argv[1], e.what(), steppe::to_string(e.code()));
            return 2;
        }
    }
    if (argc != 3) return usage();
    std::string command = argv[1], path = argv[2];
    try {
        if (command == "info") return info(path);
        if (command == "check") return check(path);
        if (command == "roots") return roots(path);
        if (command == "dump") return dump(path);
        if (command == "stats") return stats(path);
        if (command == "recover") return recover(path);
        if (command == "checkpoint") return checkpoint(path);
    } catch (const steppe::error& e) {
        std::fprintf(stderr, "steppe %s: %s (%s)\n", command.c_str(), e.what(), steppe::to_string(e.code()));
        if (command == "checkpoint" && e.code() == steppe::errc::locked)
            std::fprintf(stderr, "steppe checkpoint: a program has the store open; its clean close checkpoints "
                                 "(unless it turned open_options::checkpoint_on_close off)\n");
        return 2;
    }
    return usage();
}
