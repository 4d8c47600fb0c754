// The storage manager's options from an engine's open options (both
// engines' option structs name these fields alike), and its checkpoint and
// server counters into an engine's store_stats.
#pragma once

#include <steppe/steppe.hpp>

#include "storage/storage.hpp"

namespace steppe {

template<class Options> storage::options storage_options(const Options& o, storage::env* io = nullptr) {
    storage::options so;
    so.create = o.create;
    so.read_only = o.read_only;
    so.durable = o.durable;
    so.checkpoint_bytes = o.checkpoint_bytes;
    so.salvage = o.salvage_damaged_log;
    so.log_diffs = o.log_diffs;
    so.checkpoint_wait = o.checkpoint_wait;
    // Opening options the object engine's struct does not have (yet).
    if constexpr (requires { o.exclusive_create; }) so.exclusive_create = o.exclusive_create;
    if constexpr (requires { o.lock_timeout; }) so.lock_timeout = o.lock_timeout;
    so.io = io;
    return so;
}

inline void copy_storage_counters(const storage::storage& from, store_stats& to) {
    const storage::stats& s = from.counters();
    to.checkpoints = s.checkpoints;
    to.checkpoints_deferred = s.checkpoints_deferred;
    to.checkpoint_waits = s.checkpoint_waits;
    to.checkpoint_waits_expired = s.checkpoint_waits_expired;
    const storage::server_stats server = from.server_counters();
    to.server_round_trips = server.round_trips;
    to.server_fetches = server.fetches;
    to.server_pages_fetched = server.pages_fetched;
    to.cache_file_hits = server.cache_file_hits;
}

}  // namespace steppe
