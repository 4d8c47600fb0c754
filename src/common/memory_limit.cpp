// available_memory (memory_limit.hpp): /proc/self/cgroup names the process's
// groups, /proc/self/mountinfo where each hierarchy is mounted and which group
// its mount shows as its root (in a container, the container's own group),
// and the limit files are read from the process's group up to that root.
#include "common/memory_limit.hpp"

#include <steppe/error.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace steppe::common {

namespace {

bool read_number(const std::string& file, std::uint64_t& out) {
    std::ifstream in(file);
    std::string text;
    if (!(in >> text)) return false;
    if (text == "max") return false;  // v2: no limit
    try {
        out = std::stoull(text);
    } catch (...) {
        return false;
    }
    return out < (std::uint64_t{1} << 62);  // v1 writes PAGE_COUNTER_MAX-ish numbers for "no limit"
}

struct candidate {
    std::uint64_t limit, used;
    std::string source;
    std::uint64_t file_cache = 0;
};

void consider(std::vector<candidate>& all, std::uint64_t limit, std::uint64_t used, std::string source,
              std::uint64_t file_cache = 0) {
    used = std::min(used, limit);
    all.push_back({limit, used, std::move(source), std::min(file_cache, used)});
}

// The group's file pages from its memory.stat (v1 counts the group and
// those below it in total_*).
std::uint64_t file_cache_of(const std::string& stat_file, bool v2) {
    std::ifstream in(stat_file);
    const std::string inactive = v2 ? "inactive_file" : "total_inactive_file",
                      active = v2 ? "active_file" : "total_active_file";
    std::uint64_t sum = 0;
    for (std::string key; in >> key;) {
        std::uint64_t value = 0;
        if (!(in >> value)) break;
        if (key == inactive || key == active) sum += value;
    }
    return sum;
}

// Where hierarchy `v1_controller` (or the v2 one, for "") is mounted, and the
// group its mount root shows.
bool find_mount(const std::string& root, bool v2, std::string& mount_point, std::string& mount_root) {
    std::ifstream in(root + "/proc/self/mountinfo");
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::string id, parent, dev, mroot, point, rest;
        fields >> id >> parent >> dev >> mroot >> point;
        std::size_t dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        std::istringstream tail(line.substr(dash + 3));
        std::string fstype, source, options;
        tail >> fstype >> source >> options;
        bool match = v2 ? fstype == "cgroup2" : fstype == "cgroup" && ("," + options + ",").find(",memory,") != std::string::npos;
        if (!match) continue;
        mount_point = point;
        mount_root = mroot;
        return true;
    }
    return false;
}

// The limit files of `group` and every group above it, up to the mount's root.
void walk_groups(const std::string& root, bool v2, const std::string& group, std::vector<candidate>& all) {
    std::string point, mroot;
    if (!find_mount(root, v2, point, mroot)) return;
    std::string rel = group;
    if (mroot != "/" && rel.rfind(mroot, 0) == 0) rel = rel.substr(mroot.size());  // the mount shows mroot as "/"
    const char* limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
    const char* usage_file = v2 ? "memory.current" : "memory.usage_in_bytes";
    for (;;) {
        std::string dir = root + point + (rel == "/" ? "" : rel);
        std::uint64_t limit = 0, used = 0;
        if (read_number(dir + "/" + limit_file, limit)) {
            read_number(dir + "/" + usage_file, used);
            consider(all, limit, used, std::string(v2 ? "cgroup v2 " : "cgroup v1 ") + point + (rel == "/" ? "" : rel) + "/" + limit_file,
                     file_cache_of(dir + "/memory.stat", v2));
        }
        if (rel.empty() || rel == "/") break;
        std::size_t slash = rel.find_last_of('/');
        rel = slash == 0 || slash == std::string::npos ? "/" : rel.substr(0, slash);
    }
}

void cgroup_limits(const std::string& root, std::vector<candidate>& all) {
    std::ifstream in(root + "/proc/self/cgroup");
    for (std::string line; std::getline(in, line);) {
        std::size_t a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        std::string controllers = line.substr(a + 1, b - a - 1), group = line.substr(b + 1);
        if (line.compare(0, a, "0") == 0 && controllers.empty())
            walk_groups(root, true, group, all);
        else if (("," + controllers + ",").find(",memory,") != std::string::npos)
            walk_groups(root, false, group, all);
    }
}

// The process's resident size and virtual size, from /proc/self/status.
void process_size(const std::string& root, std::uint64_t& rss, std::uint64_t& vsize) {
    std::ifstream in(root + "/proc/self/status");
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::string key;
        std::uint64_t kib = 0;
        fields >> key >> kib;
        if (key == "VmRSS:") rss = kib << 10;
        if (key == "VmSize:") vsize = kib << 10;
    }
}

}  // namespace

memory_limit available_memory(const std::string& root) {
    std::vector<candidate> all;
    std::uint64_t rss = 0, vsize = 0;
    process_size(root, rss, vsize);
    long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) consider(all, static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page), rss, "physical RAM");
    cgroup_limits(root, all);
    struct rlimit r;
    if (::getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY) consider(all, r.rlim_cur, vsize, "RLIMIT_AS");
    if (::getrlimit(RLIMIT_DATA, &r) == 0 && r.rlim_cur != RLIM_INFINITY) consider(all, r.rlim_cur, rss, "RLIMIT_DATA");
    memory_limit best{std::uint64_t{1} << 40, std::uint64_t{1} << 40, "none found (1 TiB assumed)"};
    for (const candidate& c : all)
        if (c.limit - c.used + c.file_cache < best.available)
            best = {c.limit - c.used + c.file_cache, c.limit, c.source, c.file_cache};
    return best;
}

std::uint64_t ensure_available(std::uint64_t need, const std::string& what, const std::string& why) {
    const memory_limit m = available_memory();
    if (need <= m.available) return m.available - need;
    auto mib = [](std::uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20); };
    throw error(errc::no_space, what + " needs about " + mib(need) + " MiB of memory (" + why +
                                    "), and this process may use " + mib(m.available) + " MiB more (" + m.source +
                                    "): raise that limit, or run it where more memory is free; nothing was changed");
}

}  // namespace steppe::common
