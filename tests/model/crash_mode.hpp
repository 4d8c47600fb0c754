// How a crash the model test injects under the store (through the fault env
// its workers open it with, support/fault_env.hpp) leaves the files: as
// kill -9 does, or as a power loss of one of the fault env's kinds.
#pragma once

#include <cstdint>
#include <optional>

#include "support/fault_env.hpp"

namespace steppe_model {

// In this order, which the seeds' choices and run_stats::by_mode depend on.
enum class mode : std::uint32_t { kill, keep_all, drop_all, random_subset, torn, random_torn, count_ };

// The power loss a crash of mode `m` is, or none for kill -9.
inline std::optional<steppe::test::loss> loss_of(mode m) {
    using steppe::test::loss;
    switch (m) {
    case mode::keep_all: return loss::keep_all;
    case mode::drop_all: return loss::drop_all;
    case mode::random_subset: return loss::random_subset;
    case mode::torn: return loss::torn;
    case mode::random_torn: return loss::random_torn;
    case mode::kill: case mode::count_: break;
    }
    return std::nullopt;
}

inline const char* to_string(mode m) {
    const std::optional<steppe::test::loss> how = loss_of(m);
    return how ? steppe::test::to_string(*how) : m == mode::kill ? "kill -9" : "?";
}

}  // namespace steppe_model
