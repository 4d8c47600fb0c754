// What a forked child leaves of its parent's open stores.
#pragma once

#include <memory>
#include <utility>
#include <vector>

namespace steppe::common {

// Objects a forked child holds of a store its parent opened (an engine, a
// storage handle, a trap service): never destroyed, since their destructors
// would let go of what the child shares with its parent (a reader's slot,
// the locks, a PostgreSQL connection), write the parent's files or join
// threads the child does not have; but still reachable, so leak checkers at
// the child's exit do not count them. One list for every engine.
inline std::vector<void*>& forsaken_objects() {
    static auto* objects = new std::vector<void*>;
    return *objects;
}

template <typename T>
void forsake(std::unique_ptr<T>& object) {
    if (object) forsaken_objects().push_back(object.release());
}

}  // namespace steppe::common
