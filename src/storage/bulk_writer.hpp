// A store's main file written in one pass, without a log (bulk_writer.cpp):
// how write_main_file makes a backup or a compacted or migrated store.
//
// The result is a main file exactly as a checkpoint leaves a new store
// (docs/format.md): every page written once, at its place; one checksum
// slot per group; one header slot; a commit mark saying the log of the next
// generation holds nothing, so file_store opens it without a log (it makes
// one). Invariants, each kept at the line named and checked by
// file_store::open and file_store::check() on the result:
//  (B1) every page image given lies at physical_page(page), and slot A of
//       its group holds page_checksum of the last image given for it; every
//       page of a touched group never given has the sum 0 and is a hole
//       (reads as zeros)                                      [write, finish]
//  (B2) page_count = highest page given + 1, and the file reaches that
//       page (the page itself is written)                  [write; open's check_backed]
//  (B3) header slot A: header_seq 1, checkpoint generation 0, txn_seq 1 (the
//       one "commit" the load is), the meta; slot B all zeros (a slot never
//       written); the commit mark: generation 1, txn 1, an empty log  [finish]
//  (B4) the header is written last, after every page and checksum slot,
//       and the file is synced once after it: a file whose writing failed
//       has no header (open refuses it: "not a steppe store"), and one
//       whose finish() returned is whole and durable        [finish]
// Nothing makes the file a store but its name: the caller writes it under a
// temporary name no one opens, and renames it into place after finish().
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "storage/file_format.hpp"
#include "storage/io.hpp"
#include "storage/storage.hpp"

namespace steppe::storage {

class bulk_writer final : public page_sink {
public:
    // Creates the file `path` (create_new: exists if it is there already).
    bulk_writer(const std::string& path, env& io, mode_t file_mode);
    ~bulk_writer() override;
    bulk_writer(const bulk_writer&) = delete;
    bulk_writer& operator=(const bulk_writer&) = delete;

    // Writes the images at their place in the main file, in any order; a
    // page given again replaces its earlier image. Consecutive pages go out
    // in one write, up to a group's worth. Throws what writing throws.
    void write(std::span<const page_image> pages) override;
    // The checksum slots, then the header with `meta`, then one fdatasync
    // (B4): the file is then a whole, durable main file. Nothing may be
    // written after it.
    void finish(const meta_bytes& meta);

    page_no page_count() const { return page_count_; }

private:
    void stage(std::uint64_t physical, const std::byte* data);
    void flush();

    std::unique_ptr<file> file_;
    std::vector<checksum_page> sums_;  // by group; a sum of 0: never given
    page_no page_count_ = 0;
    // The run of consecutive physical pages not written yet.
    std::vector<std::byte> run_;
    std::uint64_t run_start_ = 0;  // physical page of run_'s first
    std::size_t run_pages_ = 0;
    bool finished_ = false;
};

}  // namespace steppe::storage
