// lmdb_env.hpp — what the OO1 and OO7 LMDB models share: error checks, the
// environment (one file, MDB_NOSUBDIR, plus its lock file) and its counters.
#pragma once

#include <lmdb.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "harness.hpp"

namespace bench::lmdb {

inline void ok(int rc, const std::string& what) {
    if (rc != 0) bench::fail("LMDB " + what + ": " + mdb_strerror(rc));
}

// The environment in file `path` (a new, empty one when `create`).
inline MDB_env* open_env(const std::string& path, bool create, unsigned max_dbs, std::size_t map_bytes) {
    if (create) {
        std::filesystem::remove(path);
        std::filesystem::remove(path + "-lock");
    }
    MDB_env* env = nullptr;
    ok(mdb_env_create(&env), "mdb_env_create");
    ok(mdb_env_set_maxdbs(env, max_dbs), "mdb_env_set_maxdbs");
    ok(mdb_env_set_mapsize(env, map_bytes), "mdb_env_set_mapsize");
    ok(mdb_env_open(env, path.c_str(), MDB_NOSUBDIR, 0664), "mdb_env_open " + path);
    return env;
}

inline std::map<std::string, std::int64_t> counters(MDB_env* env) {
    MDB_envinfo info;
    mdb_env_info(env, &info);
    return {{"lmdb_last_page", static_cast<std::int64_t>(info.me_last_pgno)}};
}

inline std::vector<std::string> files(const std::string& path) { return {path, path + "-lock"}; }

}  // namespace bench::lmdb
