// storage::bulk_writer (bulk_writer.hpp): a main file written once, in
// place. The steps:
//   1. create the file (nothing in it yet: not a store)
//   2. write(): each image's sum into its group's slot A, the image into the
//      run of consecutive physical pages being gathered; a run goes out in
//      one pwrite when the next page does not follow it (a run never spans
//      two groups: their checksum slots lie between)
//   3. finish(): the last run, the checksum slot A of every touched group,
//      then header slot A and the commit mark (pages 0-2, one write), then
//      one fdatasync
// No crash ordering is needed inside the file (a crash leaves a file under
// a temporary name, which the next attempt removes); the header comes last
// only so that a write that failed leaves a file open() refuses (B4).
#include "storage/bulk_writer.hpp"

#include <steppe/error.hpp>

#include <algorithm>
#include <cassert>
#include <cstring>

#include "storage/file_records.hpp"
#include "storage/wal_format.hpp"

namespace steppe::storage {

bulk_writer::bulk_writer(const std::string& path, env& io, mode_t file_mode)
    : file_(io.open(path, open_mode::create_new, file_mode)) {}

bulk_writer::~bulk_writer() = default;

void bulk_writer::write(std::span<const page_image> pages) {
    if (finished_) throw error(errc::invalid_argument, file_->path() + ": bulk_writer::write after finish");
    check_page_numbers(pages, file_->path());
    for (const page_image& p : pages) {
        // (B1) the sum of the last image given; 0 stays "never given".
        const std::uint64_t g = group_of(p.page);
        if (g >= sums_.size()) sums_.resize(g + 1, checksum_page{});
        sums_[g].sums[p.page % group_data_pages] = page_checksum(p.data, page_size);
        page_count_ = std::max(page_count_, p.page + 1);  // (B2)
        stage(physical_page(p.page), p.data);
    }
}

// (B1) The image goes to physical_page(page): into the run if it lies in it
// or just past it, else the run goes out and a new one starts.
void bulk_writer::stage(std::uint64_t physical, const std::byte* data) {
    if (run_.empty()) run_.resize(group_data_pages * page_size);
    const bool in_run = run_pages_ > 0 && physical >= run_start_ && physical <= run_start_ + run_pages_;
    if (!in_run) {
        flush();
        run_start_ = physical;
    }
    const std::uint64_t at = physical - run_start_;
    // A run is data pages of one group (physical pages next to each other
    // that are both data pages are in one group), so run_ holds it.
    assert(at < group_data_pages);
    std::memcpy(run_.data() + at * page_size, data, page_size);
    run_pages_ = std::max<std::size_t>(run_pages_, at + 1);
}

void bulk_writer::flush() {
    if (run_pages_ == 0) return;
    file_->write_at(run_start_ * page_size, {run_.data(), run_pages_ * page_size});
    run_pages_ = 0;
}

void bulk_writer::finish(const meta_bytes& meta) {
    if (finished_) throw error(errc::invalid_argument, file_->path() + ": bulk_writer::finish twice");
    finished_ = true;
    flush();  // (B2) the highest page is written: the file reaches it
    // (B1) slot A of each touched group; slot B stays zeros (never written).
    for (std::uint64_t g = 0; g < sums_.size(); ++g) {
        checksum_page& c = sums_[g];
        if (std::all_of(std::begin(c.sums), std::end(c.sums), [](std::uint32_t s) { return s == 0; })) continue;
        c.magic = checksum_page_magic;
        c.group = static_cast<std::uint32_t>(g);
        c.seq = 1;
        c.crc = struct_crc(c);
        file_->write_at(checksum_slot_page(g, 0) * page_size, {reinterpret_cast<const std::byte*>(&c), page_size});
    }
    // (B3) the store as a checkpoint of its one commit leaves it: its log of
    // generation 1 holds nothing past txn 1, so it opens without one.
    file_header h = new_store_header();
    h.page_count = page_count_;
    h.txn_seq = 1;
    std::memcpy(h.meta, meta.data(), meta_size);
    h.crc = struct_crc(h);
    const commit_mark m = make_mark(h.store_id, h.checkpoint_gen + 1, h.txn_seq, wal_frames_offset);
    std::vector<std::byte> head(3 * page_size);
    std::memcpy(head.data(), &h, sizeof h);
    std::memcpy(head.data() + commit_mark_page * page_size, &m, sizeof m);
    // (B4) last, then the one sync.
    file_->write_at(0, head);
    file_->sync();
    run_ = {};
}

}  // namespace steppe::storage
