// The PostgreSQL page store's cache file (pg_cache_file.hpp).
#include "storage/pg_cache_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <optional>

#include "storage/checksum.hpp"
#include "storage/io.hpp"
#include "storage/pg_connection.hpp"

namespace steppe::storage {

pg_version_map::pg_version_map() : table_(static_cast<chunk**>(std::calloc(table_size, sizeof(chunk*)))) {
    if (!table_) throw std::bad_alloc();
}

pg_version_map::~pg_version_map() {
    for (std::size_t i = 0; i < table_size && chunks_.load(std::memory_order_relaxed); ++i)
        if (chunk* c = table_[i]) {
            delete c;
            chunks_.fetch_sub(1, std::memory_order_relaxed);
        }
    std::free(table_);
}

void pg_version_map::set(page_no page, std::uint64_t txn, std::uint32_t sum) {
    if (page >= max_pages) return;
    chunk*& slot = table_[page / chunk_pages];
    chunk* c = std::atomic_ref(slot).load(std::memory_order_relaxed);  // set() alone stores it
    if (!c) {
        c = new chunk;
        std::atomic_ref(slot).store(c, std::memory_order_release);
        chunks_.fetch_add(1, std::memory_order_relaxed);
    }
    c->txn[page % chunk_pages].store(txn, std::memory_order_relaxed);
    c->sum[page % chunk_pages].store(sum, std::memory_order_relaxed);
    c->filed[page % chunk_pages / 32].fetch_and(~filed_bit(page), std::memory_order_acq_rel);
}

namespace {

struct file_header {
    char magic[16];
    std::uint32_t format;
    std::uint32_t slot_size;
    std::uint64_t slot_count;
    std::uint32_t check;  // crc32c of the 32 bytes before it
};

std::uint32_t header_check(const file_header& h) noexcept {
    return crc32c(0, reinterpret_cast<const std::byte*>(&h), offsetof(file_header, check));
}

std::string failed(const char* call, const std::string& path) {
    return path + ": " + call + " failed: " + std::strerror(errno);
}

// Makes the directories above `path` that are missing (0700: page images
// are the user's data).
bool make_parents(const std::string& path, std::string& why) {
    for (auto slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
        const std::string dir = path.substr(0, slash);
        if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
            why = failed("mkdir", dir);
            return false;
        }
    }
    return true;
}

// The header and the full (sparse) size of a new file.
bool write_header(int fd, std::uint64_t slots, const std::string& path, std::string& why) {
    file_header h{};
    std::memcpy(h.magic, pg_cache_magic, sizeof h.magic);
    h.format = pg_cache_format;
    h.slot_size = pg_cache_slot_size;
    h.slot_count = slots;
    h.check = header_check(h);
    std::byte block[pg_cache_header_size] = {};
    std::memcpy(block, &h, sizeof h);
    if (::pwrite(fd, block, sizeof block, 0) != ssize_t(sizeof block)) {
        why = failed("pwrite", path);
        return false;
    }
    if (::ftruncate(fd, off_t(pg_cache_header_size + slots * pg_cache_slot_size)) != 0) {
        why = failed("ftruncate", path);
        return false;
    }
    return true;
}

// A new cache file at `path`, made whole beside it and then linked (or, to
// replace a damaged one, renamed) into place, so no process ever opens a
// file without its header. A file another process linked first is as good.
bool make_file(const std::string& path, std::uint64_t slots, bool replace, std::string& why) {
    const std::string temp = path + ".new." + std::to_string(::getpid());
    const int fd = ::open(temp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        why = failed("open", temp);
        return false;
    }
    bool ok = write_header(fd, slots, temp, why);
    ::close(fd);
    if (ok && replace && ::rename(temp.c_str(), path.c_str()) != 0) {
        why = failed("rename", path);
        ok = false;
    }
    if (ok && !replace && ::link(temp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
        why = failed("link", path);
        ok = false;
    }
    ::unlink(temp.c_str());  // after a rename, nothing is there
    return ok;
}

enum class header_state { sound, replaceable, foreign };

header_state judge_header(int fd, std::uint64_t& slots) {
    file_header h{};
    const ssize_t n = ::pread(fd, &h, sizeof h, 0);
    if (n <= 0) return header_state::replaceable;  // empty: a file truncated to nothing, or made by a crash
    // Only a file that begins as ours is ever replaced: never overwrite another program's file.
    if (std::memcmp(h.magic, pg_cache_magic, std::min<std::size_t>(std::size_t(n), sizeof h.magic)) != 0)
        return header_state::foreign;
    if (n < ssize_t(sizeof h) || h.check != header_check(h) || h.format != pg_cache_format ||
        h.slot_size != pg_cache_slot_size || h.slot_count == 0)
        return header_state::replaceable;
    slots = h.slot_count;
    return header_state::sound;
}

}  // namespace

std::string default_pg_cache_path() {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    if (xdg && *xdg == '/') return std::string(xdg) + "/steppe/pg-pages";
    const char* home = std::getenv("HOME");
    if (home && *home == '/') return std::string(home) + "/.cache/steppe/pg-pages";
    return {};
}

std::unique_ptr<pg_cache_file> pg_cache_file::open(const std::string& path, std::uint64_t slot_count,
                                                   std::string& why, bool& unusable) {
    unusable = true;
    if (!make_parents(path, why)) return nullptr;
    for (int attempt = 0; attempt < 3; ++attempt) {
        const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            if (errno != ENOENT) {
                why = failed("open", path);
                return nullptr;
            }
            if (!make_file(path, slot_count, false, why)) return nullptr;
            continue;
        }
        struct stat st {};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            why = path + " is not a regular file";
            unusable = false;
            ::close(fd);
            return nullptr;
        }
        std::uint64_t slots = 0;
        switch (judge_header(fd, slots)) {
        case header_state::sound:
            // Slots are read one at a time, by page: the kernel's read-ahead
            // of the slots after each (zeros, in a file still mostly holes)
            // was a fifth of a cold fetch thread's time. Only advice: no error.
            ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
            return std::unique_ptr<pg_cache_file>(new pg_cache_file(fd, path, slots, device_read_ahead_of(fd)));
        case header_state::foreign:
            ::close(fd);
            why = path + " is not a steppe page cache file (it does not begin with \"steppe pgcache\"); it is left "
                         "as it is";
            return nullptr;
        case header_state::replaceable:
            ::close(fd);
            if (!make_file(path, slot_count, true, why)) return nullptr;
            break;
        }
    }
    why = path + ": the file kept changing while it was opened";
    return nullptr;
}

pg_cache_file::~pg_cache_file() { ::close(fd_); }

off_t pg_cache_file::offset_of(const pg_cache_key& key, page_no page) const noexcept {
    const std::uint32_t h = crc32c(0, reinterpret_cast<const std::byte*>(&key), sizeof key);
    return off_t(pg_cache_header_size + (page + h) % slots_ * pg_cache_slot_size);
}

namespace {
// A slot's check from its image's crc32c(0, image): one pass over the
// image serves both the check and the sum (C1).
std::uint32_t slot_check(const pg_cache_slot_header& h, std::uint32_t image_crc) noexcept {
    const auto* bytes = reinterpret_cast<const std::byte*>(&h);
    return common::crc32c_extend_by_page(crc32c(0, bytes + 4, pg_cache_slot_header_size - 4), image_crc);
}

// The image's crc32c(0, image) from its page_checksum, which maps 0 to 1:
// read again only for a sum of 1.
std::uint32_t image_crc_of(std::uint32_t sum, const std::byte* image) noexcept {
    return sum != 1 ? sum : crc32c(0, image, page_size);
}

// Whether `image` is the one h's check and sum were made over (C1).
bool slot_matches(const pg_cache_slot_header& h, const std::byte* image) noexcept {
    const std::uint32_t crc = crc32c(0, image, page_size);
    return h.sum == (crc != 0 ? crc : 1) && h.check == slot_check(h, crc);
}

bool same_store(const pg_cache_slot_header& h, const pg_cache_key& key) noexcept {
    return std::memcmp(h.store_id, key.store_id, sizeof key.store_id) == 0 && h.server == key.server &&
           h.row == key.row;
}
}  // namespace

pg_cache_file::lookup pg_cache_file::find(const pg_cache_key& key, page_no page, std::uint64_t snapshot,
                                          const pg_version_map& versions, std::byte* out,
                                          bool read_around) const noexcept {
    pg_cache_slot_header h;
    iovec parts[2] = {{&h, sizeof h}, {out, page_size}};
    const off_t at = offset_of(key, page);
    // preadv is a plain system call (no allocation, no lock): as safe in a
    // fault handler as pread. A short read is a slot past a truncated end.
    const slot_read r = read_around ? read_cached(parts, at) : slot_read::uncached;
    if (r == slot_read::hole || (r == slot_read::uncached && ::preadv(fd_, parts, 2, at) != ssize_t(pg_cache_slot_size)))
        return lookup::absent;
    if (h.page != page || !same_store(h, key)) return lookup::absent;  // a filter; only the check below is trusted
    // C1: torn, damaged or mixed, it is a miss.
    if (!slot_matches(h, out) || h.version == 0)
        return lookup::rejected;
    // C4: the newest version at this snapshot, by the handle's map (the
    // server's word, sum included: C2) where it knows the page, else by the
    // slot's claim (C3).
    const std::uint64_t newest = versions.newest(page);
    const bool newest_at_snapshot = newest != pg_version_map::unknown
                                        ? newest == h.version && versions.sum(page) == h.sum
                                        : h.version <= snapshot && snapshot <= h.newest_through;
    return newest_at_snapshot ? lookup::hit : lookup::rejected;
}

namespace {
// The header of `slot` (its header, then its image) if it holds page
// `page` of `key` soundly (C1, C2).
std::optional<pg_cache_slot_header> sound_slot_of(const std::byte* slot, const pg_cache_key& key, page_no page) noexcept {
    pg_cache_slot_header h;
    std::memcpy(&h, slot, sizeof h);
    if (h.page != page || !same_store(h, key) || !slot_matches(h, slot + pg_cache_slot_header_size))
        return std::nullopt;
    return h;
}
}  // namespace

pg_cache_slot_header pg_cache_file::header_for(const pg_cache_key& key, page_no page, std::uint64_t version,
                                               std::uint64_t newest_through, std::uint32_t sum,
                                               const std::byte* image) noexcept {
    pg_cache_slot_header h{};
    h.sum = sum;
    std::memcpy(h.store_id, key.store_id, sizeof h.store_id);
    h.server = key.server;
    h.row = key.row;
    h.page = page;
    h.version = version;
    h.newest_through = newest_through;
    h.check = slot_check(h, image_crc_of(sum, image));
    return h;
}

bool pg_cache_file::put(const pg_cache_key& key, page_no page, std::uint64_t version, std::uint64_t newest_through,
                        const std::byte* image) const noexcept {
    return put(key, page, version, newest_through, page_checksum(image, page_size), image);
}

bool pg_cache_file::put(const pg_cache_key& key, page_no page, std::uint64_t version, std::uint64_t newest_through,
                        std::uint32_t sum, const std::byte* image) const noexcept {
    pg_cache_slot_header h = header_for(key, page, version, newest_through, sum, image);
    iovec parts[2] = {{&h, sizeof h}, {const_cast<std::byte*>(image), page_size}};
    // One call per slot: another process's write of the same slot may still
    // interleave with it, which C1 turns into a miss.
    return ::pwritev(fd_, parts, 2, offset_of(key, page)) == ssize_t(pg_cache_slot_size);
}

pg_cache_file::put_counts pg_cache_file::put_fetched(const pg_cache_key& key, std::span<fetched_page> fetched,
                                                     std::uint64_t newest_through) const {
    put_counts counts;
    // Made once: a megabyte allocated per call was an mmap, its page
    // faults and an munmap each time.
    std::vector<std::byte>& old = run_buffer_;
    std::vector<pg_cache_slot_header>& headers = run_headers_;
    old.resize(max_run * pg_cache_slot_size);
    headers.resize(max_run);
    std::vector<iovec>& parts = run_parts_;
    parts.clear();
    off_t write_at = 0;
    std::size_t parts_from = 0;  // the first of the fetched pages in `parts`
    auto write_parts = [&] {
        const std::size_t slots = parts.size() / 2;
        if (slots == 0) return;
        const bool ok = ::pwritev(fd_, parts.data(), int(parts.size()), write_at) == ssize_t(slots * pg_cache_slot_size);
        (ok ? counts.written : counts.failed) += slots;
        for (std::size_t i = 0; i < slots; ++i) fetched[parts_from + i].held = ok;
        parts.clear();
    };
    for (std::size_t at = 0; at < fetched.size();) {
        const off_t first = offset_of(key, fetched[at].page);
        std::size_t n = 1;  // consecutive pages in consecutive slots (a run stops where the slots wrap)
        while (at + n < fetched.size() && n < max_run && fetched[at + n].page == fetched[at].page + n &&
               offset_of(key, fetched[at + n].page) == first + off_t(n * pg_cache_slot_size))
            ++n;
        const ssize_t got = read_held(old.data(), n * pg_cache_slot_size, first);
        if (got > 0) ++counts.runs_read;
        for (std::size_t i = 0; i < n; ++i) {
            fetched_page& f = fetched[at + i];
            const off_t offset = first + off_t(i * pg_cache_slot_size);
            const auto held = got >= ssize_t((i + 1) * pg_cache_slot_size)
                                  ? sound_slot_of(old.data() + i * pg_cache_slot_size, key, f.page)
                                  : std::nullopt;
            // A slot that holds a newer version, or this one known newest
            // as far, is left: it serves more handles.
            // (The same version with another sum is a database restored to
            // an earlier point that committed the number again: replaced, C2.)
            const bool same = held && held->version == f.version && held->sum == f.sum;
            if (held && (held->version > f.version || (same && held->newest_through >= newest_through))) {
                write_parts();
                f.held = same;
                continue;
            }
            if (parts.empty()) {
                write_at = offset;
                parts_from = at + i;
            }
            headers[i] = header_for(key, f.page, f.version, newest_through, f.sum, f.image);
            // Slots written together may still interleave with another
            // process's write of one of them, which C1 turns into a miss.
            parts.push_back({&headers[i], sizeof headers[i]});
            parts.push_back({const_cast<std::byte*>(f.image), page_size});
        }
        write_parts();
        at += n;
    }
    return counts;
}

// Whether the slots in [at, at + size) may hold data: false where the file
// has a hole there (a new file is mostly holes, and reading one makes the
// kernel zero page-cache pages for it: an eighth of a fetch's time) or
// ends before. Slots are not block-aligned, so the block the first starts
// in may hold the slot before it; every slot has bytes past that block, so
// data in none of them means none was written. An lseek error other than
// "no data from there on" says nothing: the slots are read.
bool pg_cache_file::may_hold_data(off_t at, std::size_t size) const noexcept {
    const off_t past_first_block = (at + off_t(page_size) - 1) / off_t(page_size) * off_t(page_size);
    const off_t data = ::lseek(fd_, past_first_block, SEEK_DATA);
    return !((data < 0 && errno == ENXIO) || data >= at + off_t(size));
}

// put_fetched's read of the slots a run will write: nothing (0) where they
// hold no data, short past the end, -1 on an error: each a slot that holds
// nothing.
ssize_t pg_cache_file::read_held(std::byte* into, std::size_t size, off_t at) const noexcept {
    return may_hold_data(at, size) ? ::pread(fd_, into, size, at) : 0;
}

// find()'s read with read-around: `cached` if the slot was in the page
// cache (read into `parts`); `hole` if the file holds no data there (a file
// still mostly holes: neither read nor read around; the kernel may still
// make the slot's own two blocks zero pages while it answers RWF_NOWAIT);
// else `uncached`, and the
// kernel is asked for the cluster around the slot (read_around.hpp: sized
// by how much of the clusters before was used), as file_store's
// read_main_page does for the main file. A cold process that finds its
// pages in the file then waits for the disk once a cluster, not once a
// page (with POSIX_FADV_RANDOM, the kernel reads nothing around a page).
pg_cache_file::slot_read pg_cache_file::read_cached(iovec* parts, off_t at) const noexcept {
    const ssize_t n = ::preadv2(fd_, parts, 2, at, RWF_NOWAIT);
    if (n == ssize_t(pg_cache_slot_size)) {
        around_.hit(std::uint64_t(at));
        return slot_read::cached;
    }
    if (n < 0 && errno != EAGAIN) return slot_read::uncached;  // no RWF_NOWAIT here: a plain read
    if (!may_hold_data(at, pg_cache_slot_size)) return slot_read::hole;
    const auto cluster = around_.miss(std::uint64_t(at));
    (void)::posix_fadvise(fd_, off_t(cluster.start), off_t(cluster.bytes), POSIX_FADV_WILLNEED);
    return slot_read::uncached;
}

// A store's slots are consecutive, from its page 0's, wrapping at the end.
// Without this, a process whose store fits in memory read its slots 128 KiB
// at a time, and OO1 large's warm iterations still waited for the disk
// (8.5 MB over 30 of them) where the file store's read the same pages in
// its cold one.
void pg_cache_file::plan_reads(const pg_cache_key& key, std::uint64_t pages) const {
    const std::uint64_t slots = std::min(pages, slots_);
    if (slots == 0) return;  // a length of 0 would ask for the rest of the file
    if (!around_.plan(slots * pg_cache_slot_size, around_.limit())) return;
    const std::uint64_t first = (std::uint64_t(offset_of(key, 0)) - pg_cache_header_size) / pg_cache_slot_size;
    const std::uint64_t before_end = std::min(slots, slots_ - first);
    (void)::posix_fadvise(fd_, offset_of(key, 0), off_t(before_end * pg_cache_slot_size), POSIX_FADV_WILLNEED);
    if (slots > before_end)
        (void)::posix_fadvise(fd_, off_t(pg_cache_header_size), off_t((slots - before_end) * pg_cache_slot_size),
                              POSIX_FADV_WILLNEED);
}

// One request per run of pages whose slots are consecutive (a hint's pages
// often are: a page's targets sit together), not one system call a page.
void pg_cache_file::will_need(const pg_cache_key& key, std::span<const page_no> pages) const noexcept {
    for (std::size_t i = 0; i < pages.size();) {
        const off_t at = offset_of(key, pages[i]);
        std::size_t n = 1;
        while (i + n < pages.size() && offset_of(key, pages[i + n]) == at + off_t(n * pg_cache_slot_size)) ++n;
        (void)::posix_fadvise(fd_, at, off_t(n * pg_cache_slot_size), POSIX_FADV_WILLNEED);
        i += n;
    }
}

std::vector<std::string> pg_cache_file::check_against(const pg_cache_key& key, pg_connection& conn,
                                                      const std::string& name, const std::string& shown) const {
    struct cached {
        std::uint64_t version, newest_through;
        std::uint32_t sum;
    };
    std::map<page_no, cached> ours;  // the sound slots of this store
    std::vector<std::byte> buf(64 * pg_cache_slot_size);
    for (std::uint64_t first = 0; first < slots_;) {
        // A file of 1 GiB is mostly holes: skip them (SEEK_DATA) instead of reading zeros.
        const off_t at = off_t(pg_cache_header_size + first * pg_cache_slot_size);
        const off_t data = ::lseek(fd_, at, SEEK_DATA);
        if (data < 0) break;  // ENXIO: nothing past `at`
        if (data >= at + off_t(pg_cache_slot_size)) {
            first = (std::uint64_t(data) - pg_cache_header_size) / pg_cache_slot_size;
            continue;
        }
        const ssize_t n = ::pread(fd_, buf.data(), buf.size(), at);
        first += 64;
        if (n < 0) return {path_ + ": pread failed while checking the cache file: " + std::strerror(errno)};
        for (std::size_t o = 0; o + pg_cache_slot_size <= std::size_t(n); o += pg_cache_slot_size) {
            pg_cache_slot_header h;
            std::memcpy(&h, buf.data() + o, sizeof h);
            const std::byte* image = buf.data() + o + pg_cache_slot_header_size;
            if (same_store(h, key) && slot_matches(h, image))
                ours[h.page] = {h.version, h.newest_through, h.sum};
        }
        if (std::size_t(n) < buf.size()) break;
    }
    std::vector<std::string> findings;
    if (ours.empty()) return findings;
    pg_result rows = conn.exec("checking the cache file", "SELECT page, txn, sum FROM steppe_page WHERE store = $1",
                               {name}, true);
    for (int r = 0; r < rows.rows(); ++r) {
        const auto it = ours.find(page_no(rows.binary_integer(r, 0)));
        if (it == ours.end()) continue;
        const auto txn = std::uint64_t(rows.binary_integer(r, 1));
        const auto sum = std::uint32_t(rows.binary_integer(r, 2));
        const cached& c = it->second;
        const std::string where = path_ + ": the cached page " + std::to_string(it->first) + " of " + shown +
                                  " (version of commit " + std::to_string(c.version) + ", newest through " +
                                  std::to_string(c.newest_through) + ")";
        if (txn > c.version && txn <= c.newest_through)
            findings.push_back(where + " is not the newest: commit " + std::to_string(txn) + " wrote the page (C3)");
        if (txn == c.version && sum != c.sum)
            findings.push_back(where + " is not the image the server holds for that version (C2)");
    }
    for (const auto& [page, c] : ours)
        if (c.version > c.newest_through)
            findings.push_back(path_ + ": the cached page " + std::to_string(page) + " claims a range that ends before "
                                                                                     "its version (C3)");
    return findings;
}

}  // namespace steppe::storage
