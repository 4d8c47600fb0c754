// Divisions, in order: 1. main file fix-ups, 2. log fix-ups, 3. seed stores
// and known findings, 4. files, 5. the workout a store gets once opened.
#include "fuzz_common.hpp"

#include <steppe/error.hpp>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <typeinfo>

#include "storage/checksum.hpp"
#include "storage/file_format.hpp"
#include "storage/storage.hpp"
#include "storage/wal_format.hpp"

namespace steppe::fuzz {

namespace st = steppe::storage;

namespace {

[[noreturn]] void bug(const char* format, ...) {
    std::va_list args;
    va_start(args, format);
    std::fputs("steppe fuzz: BUG: ", stderr);
    std::vfprintf(stderr, format, args);
    std::fputc('\n', stderr);
    va_end(args);
    std::abort();
}

// STEPPE_FUZZ_VERBOSE=1: say what each step did (for diagnosing an input).
void trace(const char* format, ...) {
    static const bool verbose = std::getenv("STEPPE_FUZZ_VERBOSE") != nullptr;
    if (!verbose) return;
    std::va_list args;
    va_start(args, format);
    std::fputs("steppe fuzz: ", stderr);
    std::vfprintf(stderr, format, args);
    std::fputc('\n', stderr);
    va_end(args);
}

template <class T>
bool load(const bytes& b, std::size_t offset, T& out) {
    if (offset > b.size() || b.size() - offset < sizeof(T)) return false;
    std::memcpy(&out, b.data() + offset, sizeof(T));
    return true;
}

template <class T>
void store(bytes& b, std::size_t offset, const T& in) {
    std::memcpy(b.data() + offset, &in, sizeof(T));
}

template <class T>
std::uint32_t struct_crc(const T& s) {
    return st::crc32c(0, &s, offsetof(T, crc));
}

bool page_present(const bytes& b, std::uint64_t page) {
    return page < (std::uint64_t{1} << 40) && (page + 1) * st::page_size <= b.size();
}

// 1. Main file

void fix_main(bytes& main, std::uint8_t flags) {
    if (flags & fix_header_crc) {
        for (std::size_t slot = 0; slot < 2; ++slot) {
            st::file_header h;
            if (!load(main, slot * st::page_size, h) || std::memcmp(h.magic, st::header_magic, sizeof h.magic) != 0)
                continue;
            h.crc = struct_crc(h);
            store(main, slot * st::page_size, h);
        }
        st::commit_mark m;
        std::size_t at = st::commit_mark_page * st::page_size;
        if (load(main, at, m) && m.magic == st::commit_mark_magic) {
            m.crc = struct_crc(m);
            store(main, at, m);
        }
    }
    if (!(flags & (fix_group_crc | fix_page_sums))) return;
    for (std::uint64_t g = 0; page_present(main, st::checksum_slot_page(g, 0)); ++g) {
        for (int slot = 0; slot < 2; ++slot) {
            std::uint64_t at = st::checksum_slot_page(g, slot) * st::page_size;
            st::checksum_page cp;
            if (!load(main, at, cp) || cp.magic != st::checksum_page_magic) continue;
            if (flags & fix_page_sums) {
                for (std::size_t i = 0; i < st::group_data_pages; ++i) {
                    std::uint64_t phys = st::checksum_slot_page(g, 2) + i;
                    if (!page_present(main, phys)) break;
                    const auto* page = reinterpret_cast<const std::byte*>(main.data() + phys * st::page_size);
                    bool zero = std::all_of(page, page + st::page_size, [](std::byte b) { return b == std::byte{0}; });
                    if (cp.sums[i] != 0 || !zero) cp.sums[i] = st::page_checksum(page, st::page_size);
                }
            }
            if (flags & (fix_group_crc | fix_page_sums)) cp.crc = struct_crc(cp);
            store(main, at, cp);
        }
    }
}

// The header slot load_header() would pick, if any.
bool best_header(const bytes& main, st::file_header& out) {
    bool found = false;
    for (std::size_t slot = 0; slot < 2; ++slot) {
        st::file_header h;
        if (!load(main, slot * st::page_size, h)) continue;
        if (std::memcmp(h.magic, st::header_magic, sizeof h.magic) != 0 || h.version != st::format_version ||
            h.page_size != st::page_size || h.crc != struct_crc(h))
            continue;
        if (!found || h.header_seq > out.header_seq) out = h;
        found = true;
    }
    return found;
}

// 2. Log

void fix_wal(const bytes& main, bytes& wal, std::uint8_t flags) {
    st::wal_header wh;
    if (!load(wal, 0, wh)) return;
    std::uint64_t old_salt = wh.salt;
    st::file_header mh;
    if ((flags & adopt_identity) && best_header(main, mh)) {
        std::memcpy(wh.store_id, mh.store_id, sizeof wh.store_id);
        wh.generation = mh.checkpoint_gen + 1;
        wh.salt = mh.next_wal_salt;
    }
    if (flags & (fix_wal_header | adopt_identity)) wh.crc = struct_crc(wh);
    store(wal, 0, wh);
    if (!(flags & (fix_frames | adopt_identity))) return;

    std::uint32_t chain = st::chain_seed(wh.salt);
    for (std::uint64_t off = st::wal_frames_offset;;) {
        st::frame_header h;
        if (!load(wal, off, h) || h.magic != st::frame_magic) return;
        if (!st::payload_known(h)) return;
        std::size_t payload = st::payload_size(h);
        if (wal.size() - off - sizeof h < payload) return;
        const std::uint8_t* p = wal.data() + off + sizeof h;
        if ((flags & adopt_identity) && h.salt == old_salt) h.salt = wh.salt;
        if (flags & fix_frames) {
            if (h.kind == st::frame_kind::page) h.payload_crc = st::page_checksum(reinterpret_cast<const std::byte*>(p), payload);
            h.frame_crc = st::frame_crc_of(h, p);
            chain = st::chain_of(chain, h.frame_crc);
            h.chain = chain;
        }
        store(wal, off, h);
        off += sizeof h + payload;
    }
}

// 3. Seed stores

std::vector<std::byte> page_for(std::uint64_t txn, st::page_no page) {
    std::vector<std::byte> p(st::page_size);
    for (std::size_t i = 0; i < 24; ++i) p[i] = static_cast<std::byte>((txn * 31 + page * 7 + i) & 0xff);
    p[st::page_size - 1] = static_cast<std::byte>(txn);
    return p;
}

class builder {
public:
    explicit builder(const std::string& path) {
        std::filesystem::remove(path);
        std::filesystem::remove(path + "-wal");
        st::options o;
        o.durable = false;  // seeds need bytes, not durability
        store_ = st::storage::open(path, o);
    }
    builder& commit(std::initializer_list<st::page_no> pages) {
        std::uint64_t txn = store_->txn_seq() + 1;
        std::vector<std::vector<std::byte>> images;
        std::vector<st::page_image> list;
        for (auto p : pages) images.push_back(page_for(txn, p));
        std::size_t i = 0;
        for (auto p : pages) list.push_back({p, images[i++].data()});
        st::meta_bytes meta{};
        std::memcpy(meta.data(), &txn, sizeof txn);
        store_->commit(list, meta);
        return *this;
    }
    builder& checkpoint() {
        store_->checkpoint();
        return *this;
    }

private:
    std::unique_ptr<st::storage> store_;
};

void build_empty(const std::string& path) { builder b(path); }
void build_log_only(const std::string& path) { builder(path).commit({0, 1}).commit({2}).commit({0, 3}); }
void build_checkpointed(const std::string& path) {
    builder(path).commit({0, 1}).commit({2}).checkpoint().commit({1, 4}).commit({5});
}
void build_two_checkpoints(const std::string& path) {
    builder(path).commit({0, 1, 2}).checkpoint().commit({3}).commit({1}).checkpoint().commit({6, 0});
}
void build_sparse(const std::string& path) { builder(path).commit({7}).checkpoint().commit({2, 9}); }

}  // namespace

void build_replay_base(const std::string& path, int extra) {
    builder b(path);
    b.commit({0, 1}).commit({2}).commit({1, 3}).checkpoint().commit({0}).commit({4, 5}).commit({2});
    for (int i = 0; i < extra; ++i) b.commit({static_cast<st::page_no>(i % 3), 8});
}

const std::vector<seed_store>& seed_stores() {
    static const std::vector<seed_store> stores = {
        {"empty", build_empty},
        {"log_only", build_log_only},
        {"checkpointed", build_checkpointed},
        {"two_checkpoints", build_two_checkpoints},
        {"sparse", build_sparse},
        {"replay_base", [](const std::string& path) { build_replay_base(path); }},
    };
    return stores;
}

void apply_fixups(bytes& main, bytes& wal, std::uint8_t flags) {
    fix_main(main, flags);
    fix_wal(main, wal, flags);
}

bool known_finding(const bytes& main, const bytes& wal) {
    static const bool skip = std::getenv("STEPPE_FUZZ_SKIP_KNOWN") != nullptr;
    if (!skip) return false;
    // F1: a checksum-valid header whose page_count the main file cannot back
    // (load_checksums allocates a checksum page per group it claims).
    st::file_header h;
    std::uint64_t backed = main.size() / st::page_size + 4 * st::group_data_pages;
    if (best_header(main, h) && h.page_count > backed) return true;
    // F2: a commit frame in the log whose page count no page frame accounts for
    // (replay_wal takes it as is; check() then walks every page it claims).
    // F3: a page frame whose page is at or past its commit's page count.
    std::uint64_t highest = 0, highest_in_txn = 0;
    for (std::uint64_t off = st::wal_frames_offset;;) {
        st::frame_header f;
        if (!load(wal, off, f) || f.magic != st::frame_magic) break;
        if (f.kind == st::frame_kind::page || f.kind == st::frame_kind::diff) {
            highest = std::max(highest, f.number + 1);
            highest_in_txn = std::max(highest_in_txn, f.number + 1);
        }
        if (f.kind == st::frame_kind::commit && f.number > highest + backed) return true;
        if (f.kind == st::frame_kind::commit && highest_in_txn > f.number) return true;
        if (f.kind == st::frame_kind::commit) highest_in_txn = 0;
        if (!st::payload_known(f)) break;
        off += sizeof f + st::payload_size(f);
    }
    return false;
}

// 4. Files

// Crashes and timeouts end the process without atexit, so each process names
// its directory after its pid and removes those of processes that are gone.
void remove_stale_work_dirs(const std::string& base) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
        std::string name = entry.path().filename().string();
        unsigned long pid = 0;
        if (std::sscanf(name.c_str(), "steppe-fuzz-%lu-", &pid) != 1 || pid == 0) continue;
        if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove_all(entry.path(), ec);
    }
}

const std::string& work_dir() {
    // Never destroyed: the atexit cleanup below runs after static destructors.
    static const std::string* dir = [] {
        std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : std::filesystem::temp_directory_path().string();
        remove_stale_work_dirs(base);
        std::string templ = base + "/steppe-fuzz-" + std::to_string(::getpid()) + "-XXXXXX";
        if (!::mkdtemp(templ.data())) bug("mkdtemp %s failed", templ.c_str());
        auto* d = new std::string(templ);
        std::atexit([] {
            std::error_code ec;
            std::filesystem::remove_all(work_dir(), ec);
        });
        return d;
    }();
    return *dir;
}

void write_file(const std::string& path, const bytes& data) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    if (!f) bug("cannot write %s", path.c_str());
}

bytes read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return bytes(std::istreambuf_iterator<char>(f), {});
}

void remove_file(const std::string& path) { ::unlink(path.c_str()); }

// 5. The workout

namespace {

constexpr st::page_no max_pages_read = 4096;  // past that, the first and last pages

void read_pages(const st::storage& s) {
    std::vector<std::byte> buf(st::page_size);
    st::page_no n = s.page_count();
    auto read = [&](st::page_no p) {
        try {
            s.read_page(p, buf.data());
        } catch (const error& e) {
            trace("read_page(%llu): %s", static_cast<unsigned long long>(p), e.what());
        }
    };
    for (st::page_no p = 0; p < n && p < max_pages_read; ++p) read(p);
    if (n > max_pages_read) read(n - 1);
    read(n);  // one past the end: invalid_argument
}

std::unique_ptr<st::storage> open_store(const std::string& path, bool read_only, bool salvage = false) {
    st::options o;
    o.create = false;
    o.read_only = read_only;
    o.salvage = salvage;
    o.durable = false;  // tmpfs; the logic is the same
    return st::storage::open(path, o);
}

// A log open refused as damaged is salvaged (steppe recover); a salvaged
// store must then open without its log being called damaged again.
std::unique_ptr<st::storage> salvage_store(const std::string& path) {
    auto s = open_store(path, false, true);
    if (s->salvage_report().empty()) bug("salvage: a log refused as damaged was found sound");
    trace("salvage: %s", s->salvage_report().c_str());
    s.reset();
    try {
        return open_store(path, false);
    } catch (const error& e) {
        if (std::strstr(e.what(), "the log is damaged")) bug("after salvage the log is still damaged: %s", e.what());
        throw;
    }
}

void expect_page(const st::storage& s, st::page_no page, const std::vector<std::byte>& want, const char* when) {
    std::vector<std::byte> got(st::page_size);
    try {
        s.read_page(page, got.data());
    } catch (const error& e) {
        bug("%s: page %llu, just committed, cannot be read: %s", when, static_cast<unsigned long long>(page), e.what());
    }
    if (got != want) bug("%s: page %llu reads back different bytes", when, static_cast<unsigned long long>(page));
}

void workout(const std::string& path, bool read_only) {
    std::unique_ptr<st::storage> s;
    const char* mode = read_only ? "read-only" : "read-write";
    try {
        s = open_store(path, read_only);
    } catch (const error& e) {
        trace("open %s: %s", mode, e.what());
        if (read_only || !std::strstr(e.what(), "the log is damaged")) return;
        s = salvage_store(path);
    }
    trace("open %s: %llu pages, txn %llu", mode, static_cast<unsigned long long>(s->page_count()),
          static_cast<unsigned long long>(s->txn_seq()));
    read_pages(*s);
    try {
        auto info = s->describe();
        trace("describe: log generation %llu, %llu commits, %llu bytes", static_cast<unsigned long long>(info.wal_generation),
              static_cast<unsigned long long>(info.wal_commits), static_cast<unsigned long long>(info.wal_bytes_used));
        for (const auto& finding : s->check()) trace("check: %s", finding.c_str());
    } catch (const error& e) {
        trace("describe/check: %s", e.what());
    }
    if (read_only) return;

    // A successful commit must read back, before and after a checkpoint and a reopen.
    st::page_no target = s->page_count() < max_pages_read ? s->page_count() : 0;
    std::uint64_t txn = s->txn_seq() + 1;
    auto image = page_for(txn, target);
    st::page_image list[] = {{target, image.data()}};
    st::meta_bytes meta{};
    std::memcpy(meta.data(), &txn, sizeof txn);
    try {
        s->commit(list, meta);
    } catch (const error& e) {
        trace("commit: %s", e.what());
        return;
    }
    expect_page(*s, target, image, "after commit");
    try {
        s->checkpoint();
    } catch (const error& e) {
        trace("checkpoint: %s", e.what());
        return;
    }
    expect_page(*s, target, image, "after checkpoint");
    s.reset();
    try {
        s = open_store(path, false);
    } catch (const error& e) {
        trace("reopen: %s", e.what());
        return;  // damage elsewhere in the input may still make the store unopenable
    }
    expect_page(*s, target, image, "after reopen");
    if (s->meta() != meta) bug("after reopen: the meta is not the last commit's");
    trace("reopen: page %llu and the meta read back", static_cast<unsigned long long>(target));
}

}  // namespace

void exercise_store(const std::string& path) {
    try {
        workout(path, true);
        workout(path, false);
    } catch (const error&) {
        // fine: steppe reported the problem
    } catch (const std::exception& e) {
        bug("%s escaped (not steppe::error): %s", typeid(e).name(), e.what());
    } catch (...) {
        bug("an exception of unknown type escaped");
    }
}

bytes encode_store_input(const bytes& main, const bytes& wal, std::uint8_t flags) {
    bytes in(5);
    auto len = static_cast<std::uint32_t>(main.size());
    std::memcpy(in.data(), &len, 4);
    in[4] = flags;
    in.insert(in.end(), main.begin(), main.end());
    in.insert(in.end(), wal.begin(), wal.end());
    return in;
}

bool write_store_input(const std::uint8_t* data, std::size_t size, const std::string& path) {
    if (size < 5) return false;
    std::uint32_t len;
    std::memcpy(&len, data, 4);
    std::uint8_t flags = data[4];
    data += 5;
    size -= 5;
    if (len > size) len = static_cast<std::uint32_t>(size);
    bytes main(data, data + len), wal(data + len, data + size);
    apply_fixups(main, wal, flags);
    if (known_finding(main, wal)) return false;
    write_file(path, main);
    if (flags & no_log) remove_file(path + "-wal");
    else write_file(path + "-wal", wal);
    return true;
}

}  // namespace steppe::fuzz
