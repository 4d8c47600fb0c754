// pg_commit_bench — a durable commit of a store in PostgreSQL against
// PostgreSQL's own commit of the same bytes (issue 20's goal: within 1 ms
// and one round trip of it). Variants alternated repetition by repetition,
// so the server's and the disk's noise hit them alike:
//
//   steppe    storage::commit of N page images (random bytes) to a store
//   raw       BEGIN; COPY of the same N images, in the same text/hex form
//             steppe streams, into a table of the same shape with the same
//             primary key; UPDATE of one row; COMMIT — on a connection of its own
//   trip      SELECT 1 (one round trip), for the goal's "+ one round trip"
//
// for N = 1, 16, 256 and 2,560 pages (10 MiB). Both tables are emptied
// between repetitions, outside the timed region.
//
// First, what an open of the store costs: a writer's and a reader's open
// (and close), alternated, with the round trips the store counted
// (pg_cache_counters::round_trips) — at a network's delay each is a
// round trip's time of every open.
//
// --no-sync: both with synchronous_commit off (steppe's durable = false),
// which takes the server's WAL flush — bimodal on a shared virtual disk,
// 0.4 or 4 ms — out of both, leaving what steppe adds.
//
// Usage: pg_commit_bench URL [--reps N] [--no-sync]
//   URL names the server and database, e.g.
//   postgresql:///postgres?host=/tmp/pg&port=5432&user=steppe (no store=:
//   the bench uses store=pg_commit_bench). bench/micro/pg_commit.sh starts a
//   server of its own and runs it.
#include <steppe/error.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "storage/pg_connection.hpp"
#include "storage/pg_store.hpp"
#include "storage/storage.hpp"

namespace {

namespace st = steppe::storage;

std::string hex_line(std::uint64_t page, std::uint64_t txn, const std::byte* image) {
    static const char digits[] = "0123456789abcdef";
    std::string line = "raw\t" + std::to_string(page) + "\t" + std::to_string(txn) + "\t0\t\\\\x";
    const std::size_t at = line.size();
    line.resize(at + 2 * st::page_size + 1);
    for (std::size_t i = 0; i < st::page_size; ++i) {
        auto b = static_cast<unsigned>(image[i]);
        line[at + 2 * i] = digits[b >> 4];
        line[at + 2 * i + 1] = digits[b & 15];
    }
    line.back() = '\n';
    return line;
}

// PostgreSQL's own commit of the same rows, one MiB of COPY text at a time.
double raw_commit(st::pg_connection& c, const std::vector<st::page_image>& pages, std::uint64_t txn) {
    auto t = bench_util::clock_type::now();
    c.exec("raw", "BEGIN");
    c.exec("raw", "SELECT txn FROM raw_row WHERE name = 'raw' FOR UPDATE");
    c.begin_copy("raw", "COPY raw_page (store, page, txn, sum, image) FROM STDIN");
    std::string chunk;
    for (const auto& p : pages) {
        chunk += hex_line(p.page, txn, p.data);
        if (chunk.size() >= (1u << 20)) {
            c.put_copy("raw", chunk);
            chunk.clear();
        }
    }
    if (!chunk.empty()) c.put_copy("raw", chunk);
    c.end_copy("raw");
    c.exec("raw", "UPDATE raw_row SET txn = $1 WHERE name = 'raw'", {std::to_string(txn)});
    c.exec("raw", "COMMIT");
    return bench_util::seconds_since(t) * 1e6;
}

double steppe_commit(st::storage& s, const std::vector<st::page_image>& pages) {
    auto t = bench_util::clock_type::now();
    s.commit(pages, s.meta());
    return bench_util::seconds_since(t) * 1e6;
}

// One open and close of the store; its round trips in `trips`.
double open_close(const std::string& url, st::options o, bool read_only, std::uint64_t& trips) {
    o.read_only = read_only;
    auto t = bench_util::clock_type::now();
    auto s = st::pg_store::open(url, o);
    trips = s->cache_counters().round_trips;
    s.reset();
    return bench_util::seconds_since(t) * 1e6;
}

void measure_opens(const std::string& url, const st::options& o, int reps) {
    std::vector<double> writer, reader;
    std::uint64_t writer_trips = 0, reader_trips = 0;
    for (int r = 0; r < reps; ++r) {
        writer.push_back(open_close(url, o, false, writer_trips));
        reader.push_back(open_close(url, o, true, reader_trips));
    }
    std::printf("%-8s %12s %12s\n", "open", "median_us", "round_trips");
    std::printf("%-8s %12.0f %12llu\n", "writer", bench_util::median(writer),
                static_cast<unsigned long long>(writer_trips));
    std::printf("%-8s %12.0f %12llu\n\n", "reader", bench_util::median(reader),
                static_cast<unsigned long long>(reader_trips));
}

double round_trip(st::pg_connection& c) {
    auto t = bench_util::clock_type::now();
    c.exec("trip", "SELECT 1");
    return bench_util::seconds_since(t) * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || std::string(argv[1]).find("postgresql") != 0) {
        std::fprintf(stderr, "usage: pg_commit_bench URL [--reps N] [--no-sync]\n");
        return 2;
    }
    const std::string base = argv[1];
    int reps = 15;
    bool durable = true;
    for (int i = 2; i < argc; ++i) {
        if (std::string(argv[i]) == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
        else if (std::string(argv[i]) == "--no-sync") durable = false;
    }
    const std::string sep = base.find('?') == std::string::npos ? "?" : "&";
    try {
        st::pg_connection raw(base, base);
        raw.exec("setup", "DROP TABLE IF EXISTS raw_page, raw_row");
        raw.exec("setup", "CREATE TABLE raw_row (name text PRIMARY KEY, txn bigint NOT NULL)");
        raw.exec("setup", "INSERT INTO raw_row VALUES ('raw', 0)");
        raw.exec("setup", "SET bytea_output = 'hex'");
        if (!durable) raw.exec("setup", "SET synchronous_commit = off");
        st::options o;
        o.checkpoint_bytes = 1ull << 40;  // collection between repetitions only
        o.durable = durable;
        const std::string url = base + sep + "store=pg_commit_bench";
        st::pg_store::open(url, o).reset();  // made if new: the opens measured find it
        // The same columns, key, storage and compression as steppe's table.
        raw.exec("setup", "CREATE TABLE raw_page (LIKE steppe_page INCLUDING ALL)");
        measure_opens(url, o, reps);
        auto store = st::storage::open(url, o);
        std::mt19937_64 random(42);
        std::uint64_t txn = 0;  // the raw table's commits, across the sizes
        std::printf("%-8s %10s %10s %10s %12s %12s\n", "pages", "steppe_us", "raw_us", "trip_us", "steppe-raw",
                    "goal(1ms+trip)");
        for (std::uint64_t n : {1ull, 16ull, 256ull, 2560ull}) {
            std::vector<std::byte> bytes(n * st::page_size);
            for (auto& b : bytes) b = std::byte(random());
            std::vector<st::page_image> pages;
            for (std::uint64_t i = 0; i < n; ++i) pages.push_back({i, bytes.data() + i * st::page_size});
            std::vector<double> ours, theirs, trips;
            for (int r = 0; r < reps; ++r) {
                ++txn;
                if (r % 2) {
                    ours.push_back(steppe_commit(*store, pages));
                    theirs.push_back(raw_commit(raw, pages, txn));
                } else {
                    theirs.push_back(raw_commit(raw, pages, txn));
                    ours.push_back(steppe_commit(*store, pages));
                }
                trips.push_back(round_trip(raw));
                store->checkpoint();  // drops the versions no reader needs
                raw.exec("reset", "DELETE FROM raw_page WHERE txn < $1", {std::to_string(txn)});
            }
            const double s = bench_util::median(ours), r = bench_util::median(theirs), t = bench_util::median(trips);
            std::printf("%-8llu %10.0f %10.0f %10.0f %12.0f %12s\n", static_cast<unsigned long long>(n), s, r, t, s - r,
                        s - r <= 1000 + t ? "met" : "MISSED");
        }
    } catch (const steppe::error& e) {
        std::fprintf(stderr, "pg_commit_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
