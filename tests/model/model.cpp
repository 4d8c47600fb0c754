#include "model.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include <steppe/containers.hpp>

#include "crash_mode.hpp"
#include "engine/open_internal.hpp"
#include "support/fault_env.hpp"
#include "support/pg_server.hpp"
#include "support/temp_dir.hpp"

namespace steppe_model {

std::uint64_t fill_word(std::uint64_t id, std::uint64_t ver, std::size_t i) {
    std::uint64_t z = id * 0x9E3779B97F4A7C15ull ^ (ver << 21) ^ (i * 0xBF58476D1CE4E5B9ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

const char* to_string(opk k) {
    static const char* const names[] = {
        "make_one", "make_array", "make_wide", "root_get", "write", "write_many", "link", "unlink",
        "destroy", "set_root", "remove_root", "commit", "rollback", "reopen", "reopen_dirty", "kill_now",
        "power_loss_now", "crash_commit", "crash_open", "kill_timed", "readers", "second_writer",
        "transient_commit", "check", "kv_put", "kv_erase", "vec_push", "vec_pop", "vec_set"};
    static_assert(sizeof names / sizeof names[0] == static_cast<std::size_t>(opk::count_));
    auto i = static_cast<std::size_t>(k);
    return i < static_cast<std::size_t>(opk::count_) ? names[i] : "?";
}

config config_for_seed(std::uint64_t seed) {
    config c;
    c.backend = seed % 2 ? steppe::fault_backend::mprotect : steppe::fault_backend::uffd;
    static const std::uint64_t checkpoint[] = {64 << 10, 1, 256 << 10, 64ull << 20};
    c.checkpoint_bytes = checkpoint[(seed / 2) % 4];
    return c;
}

std::string describe(const config& c) {
    return std::string("backend ") + (c.backend == steppe::fault_backend::mprotect ? "mprotect" : "uffd") +
           ", checkpoint_bytes " + std::to_string(c.checkpoint_bytes) + ", durable" + (c.pg ? ", in PostgreSQL" : "");
}

namespace {

// ---- Protocol between the parent and a worker ---------------------------------

enum class sk : std::uint32_t {
    make_one = 1, make_array, make_wide, root_get, write, link, destroy, set_root, remove_root, commit, rollback,
    observe, dump, check, close, exit_now, crash_now, arm, transient_commit, try_commit, try_make,
    kv_put, kv_erase, vec_push, vec_pop, vec_set,
};
using kv_map = steppe::map<std::uint64_t, steppe::string>;
using node_vec = steppe::vector<Node*>;
constexpr std::size_t vec_capacity = 256;  // the most elements vec_push makes (growth frees old buffers)
struct command {
    sk kind;
    std::uint32_t len;  // payload bytes that follow
    std::uint64_t a, b, c, d;
};
enum : std::int32_t { st_ok = 0, st_steppe_error = 1, st_other_error = 2, st_anomaly = 3 };
struct reply_header {
    std::int32_t status;
    std::int32_t code;
    std::uint32_t len;
    std::uint32_t pad;
};
struct obs {
    std::uint64_t id, ver, link[3];
    std::uint32_t index, count, flags, pad;
};
enum : std::uint32_t { f_link0 = 1, f_fill = 8, f_no_handle = 16 };

bool write_all(int fd, const void* p, std::size_t n) {
    auto b = static_cast<const char*>(p);
    while (n) {
        ssize_t r = ::write(fd, b, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        b += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}
// false on end of file or error; `timeout_ms` < 0 waits forever.
enum class rd { ok, eof, timeout };
rd read_all(int fd, void* p, std::size_t n, int timeout_ms) {
    auto b = static_cast<char*>(p);
    while (n) {
        if (timeout_ms >= 0) {
            pollfd pf{fd, POLLIN, 0};
            int r = ::poll(&pf, 1, timeout_ms);
            if (r < 0 && errno == EINTR) continue;
            if (r == 0) return rd::timeout;
        }
        ssize_t r = ::read(fd, b, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return rd::eof;
        b += r;
        n -= static_cast<std::size_t>(r);
    }
    return rd::ok;
}

struct bytes_out {
    std::vector<std::byte> v;
    void put(const void* p, std::size_t n) {
        auto b = static_cast<const std::byte*>(p);
        v.insert(v.end(), b, b + n);
    }
    template <class T>
    void put(const T& x) { put(&x, sizeof x); }
    void put_str(const std::string& s) {
        put(static_cast<std::uint32_t>(s.size()));
        put(s.data(), s.size());
    }
};
struct bytes_in {
    const std::vector<std::byte>& v;
    std::size_t at = 0;
    bool get(void* p, std::size_t n) {
        if (v.size() - at < n) return false;
        std::memcpy(p, v.data() + at, n);
        at += n;
        return true;
    }
    template <class T>
    T get() {
        T x{};
        if (!get(&x, sizeof x)) throw std::runtime_error("short reply from the worker");
        return x;
    }
    std::string get_str() {
        auto n = get<std::uint32_t>();
        if (v.size() - at < n) throw std::runtime_error("short reply from the worker");
        std::string s(reinterpret_cast<const char*>(v.data() + at), n);
        at += n;
        return s;
    }
};

struct session_params {
    std::string path;
    config cfg;
    bool read_only = false;
    bool wait_for_lock = true;  // in PostgreSQL: until the server has seen a killed writer's session end
    long arm_calls = -1;
    mode arm_mode = mode::kill;
    std::uint64_t arm_seed = 0;
};

// Parent-side descriptors of live sessions: a worker closes them all after
// fork, so that only the parent holds the other end of each pipe (else a dead
// worker's pipe would not report end of file).
std::vector<int>& parent_fds() {
    static std::vector<int> fds;
    return fds;
}

// ---- The worker: one store session in a child process -----------------------

class worker {
public:
    worker(int in, int out) : in_(in), out_(out) {}

    [[noreturn]] void main(const session_params& p) {
        sabotage_ = p.cfg.sabotage;
        const char* real_fsync = std::getenv("STEPPE_MODEL_REAL_FSYNC");
        env_.sync_for_real(real_fsync && *real_fsync == '1');
        if (p.arm_calls >= 0) arm(p.arm_calls, p.arm_mode, p.arm_seed);
        try {
            steppe::open_options o;
            o.backend = p.cfg.backend;
            o.checkpoint_bytes = p.cfg.checkpoint_bytes;
            o.read_only = p.read_only;
            o.create = !p.read_only;
            o.durable = true;
            if (p.cfg.pg && p.wait_for_lock) o.lock_timeout = std::chrono::seconds(10);
            s_.emplace(steppe::detail::open_with_env(p.path, o, &env_));
        } catch (const steppe::error& e) {
            reply(st_steppe_error, static_cast<int>(e.code()), e.what());
            ::_exit(0);
        } catch (const std::exception& e) {
            reply(st_other_error, 0, e.what());
            ::_exit(0);
        }
        env_.clear_faults();
        reply(st_ok, 0, "");
        for (;;) {
            command c;
            if (read_all(in_, &c, sizeof c, -1) != rd::ok) ::_exit(0);
            std::vector<std::byte> payload(c.len);
            if (c.len && read_all(in_, payload.data(), c.len, -1) != rd::ok) ::_exit(0);
            try {
                step(c, payload);
            } catch (const steppe::error& e) {
                reply(st_steppe_error, static_cast<int>(e.code()), e.what());
            } catch (const std::exception& e) {
                reply(st_other_error, 0, e.what());
            }
        }
    }

private:
    // The n-th I/O call from now (0: the next) does not happen: the worker
    // dies there, its files left as `m` says.
    void arm(long calls, mode m, std::uint64_t seed) { env_.kill_after(calls, loss_of(m), seed); }

    void reply(std::int32_t status, std::int32_t code, const void* data, std::size_t len) {
        reply_header h{status, code, static_cast<std::uint32_t>(len), 0};
        if (!write_all(out_, &h, sizeof h) || (len && !write_all(out_, data, len))) ::_exit(0);
    }
    void reply(std::int32_t status, std::int32_t code, const std::string& text) {
        reply(status, code, text.data(), text.size());
    }
    void reply_ok(const bytes_out& b) { reply(st_ok, 0, b.v.data(), b.v.size()); }

    Node* handle(std::uint64_t id) {
        auto it = table_.find(id);
        if (it == table_.end()) throw std::runtime_error("worker has no pointer for node " + std::to_string(id));
        return it->second;
    }

    obs observe(Node* p) {
        obs o{};
        o.id = p->id;
        o.ver = p->ver;
        for (int k = 0; k < 3; ++k) {
            Node* t = p->link[k];
            if (!t) continue;
            o.link[k] = t->id;
            auto it = table_.find(t->id);
            if (it == table_.end() || it->second != t) o.flags |= f_link0 << k;
        }
        o.index = p->index;
        o.count = p->count;
        if (p->count == 0) {
            const Wide* w = reinterpret_cast<const Wide*>(p);
            for (std::size_t i = 0; i < 1000; ++i)
                if (w->fill[i] != fill_word(p->id, p->ver, i)) {
                    o.flags |= f_fill;
                    break;
                }
        }
        return o;
    }

    void put_roots(bytes_out& b) {
        auto roots = s_->roots();
        b.put(static_cast<std::uint32_t>(roots.size()));
        for (const auto& r : roots) {
            b.put_str(r.name);
            b.put_str(r.type);
            Node* p = r.type == "steppe_model::Node" ? s_->find_root<Node>(r.name) : nullptr;
            std::uint64_t id = p ? p->id : 0;
            std::uint32_t same = 1;
            if (p) {
                auto it = table_.find(id);
                same = it != table_.end() && it->second == p;
            }
            b.put(id);
            b.put(same);
        }
        // The containers: kv's pairs, vec's elements as ids (with an identity flag).
        kv_map* kv = has_root("kv") ? s_->find_root<kv_map>("kv") : nullptr;
        b.put(static_cast<std::uint32_t>(kv ? 1 : 0));
        if (kv) {
            b.put(static_cast<std::uint32_t>(kv->size()));
            for (const auto& [k, v] : *kv) {
                b.put(k);
                b.put_str(std::string(v));
            }
        }
        node_vec* vec = has_root("vec") ? s_->find_root<node_vec>("vec") : nullptr;
        b.put(static_cast<std::uint32_t>(vec ? 1 : 0));
        if (vec) {
            b.put(static_cast<std::uint32_t>(vec->size()));
            for (Node* p : *vec) {
                std::uint64_t id = p ? p->id : 0;
                std::uint32_t same = 1;
                if (p) {
                    auto it = table_.find(id);
                    same = it != table_.end() && it->second == p;
                }
                b.put(id);
                b.put(same);
            }
        }
    }
    bool has_root(const char* name) {
        for (const auto& r : s_->roots())
            if (r.name == name) return true;
        return false;
    }
    node_vec* vec() { return s_->root<node_vec>("vec"); }

    // Rebuilds the table from the roots: every group reachable, every element.
    std::string rebuild() {
        table_.clear();
        std::string anomalies;
        std::vector<Node*> queue;
        auto add_group = [&](Node* p) {
            if (p->count != 0 && (p->index >= p->count || p->count > 100000)) {
                anomalies += "node " + std::to_string(p->id) + " has index " + std::to_string(p->index) +
                             " of " + std::to_string(p->count) + "; ";
                return;
            }
            Node* head = p->count == 0 ? p : p - p->index;
            std::uint32_t n = p->count == 0 ? 1 : p->count;
            for (std::uint32_t i = 0; i < n; ++i) {
                Node* e = head + i;
                auto [it, fresh] = table_.try_emplace(e->id, e);
                if (fresh) queue.push_back(e);
                else if (it->second != e)
                    anomalies += "two objects claim id " + std::to_string(e->id) + "; ";
            }
        };
        for (const auto& r : s_->roots()) {
            if (r.name == "kv") continue;
            if (r.name == "vec") {
                for (Node* p : *s_->find_root<node_vec>("vec"))
                    if (p) add_group(p);
                continue;
            }
            if (Node* p = s_->find_root<Node>(r.name)) add_group(p);
        }
        while (!queue.empty()) {
            Node* e = queue.back();
            queue.pop_back();
            for (Node* t : e->link)
                if (t) add_group(t);
        }
        return anomalies;
    }

    void step(const command& c, const std::vector<std::byte>& payload) {
        std::string name(reinterpret_cast<const char*>(payload.data()), payload.size());
        bytes_out b;
        switch (c.kind) {
        case sk::make_one:
            table_[c.a] = s_->make<Node>(Node{c.a, 0, {nullptr, nullptr, nullptr}, 0, 1});
            break;
        case sk::make_array: {
            Node* p = s_->make_array<Node>(c.b);
            for (std::uint64_t i = 0; i < c.b; ++i) {
                p[i].id = c.a + i;
                p[i].index = static_cast<std::uint32_t>(i);
                p[i].count = static_cast<std::uint32_t>(c.b);
                table_[c.a + i] = p + i;
            }
            break;
        }
        case sk::make_wide: {
            Wide* w = s_->make<Wide>();
            w->head.id = c.a;
            for (std::size_t i = 0; i < 1000; ++i) w->fill[i] = fill_word(c.a, 0, i);
            table_[c.a] = &w->head;
            break;
        }
        case sk::root_get: {
            Node* p = s_->root<Node>(name);
            if (p->id == 0) {
                p->id = c.a;
                p->count = 1;
                table_[c.a] = p;
            } else if (table_.count(p->id) == 0 || table_[p->id] != p) {
                reply(st_anomaly, 0, "root<Node>(\"" + name + "\") returned " + std::to_string(p->id) +
                                         " at an address that is not that node's");
                return;
            }
            b.put(p->id);
            break;
        }
        case sk::write: {
            Node* p = handle(c.a);
            if (sabotage_ == 1 && c.b % 5 == 3) break;  // self-test: a lost write
            p->ver = c.b;
            if (p->count == 0) {
                Wide* w = reinterpret_cast<Wide*>(p);
                for (std::size_t i = 0; i < 1000; ++i) w->fill[i] = fill_word(c.a, c.b, i);
            }
            break;
        }
        case sk::link: handle(c.a)->link[c.b] = c.c ? handle(c.c) : nullptr; break;
        case sk::destroy: {
            Node* p = handle(c.a);
            if (p->count == 0) s_->destroy(reinterpret_cast<Wide*>(p));
            else s_->destroy(p, p->count);
            break;
        }
        case sk::set_root: s_->set_root(name, handle(c.a)); break;
        case sk::remove_root: b.put(static_cast<std::uint64_t>(s_->remove_root(name))); break;
        case sk::commit: {
            long before = env_.calls();
            if (sabotage_ != 2) s_->commit();  // self-test 2: a commit that does nothing
            b.put(static_cast<std::uint64_t>(env_.calls() - before));  // proves the fault env sees the I/O
            break;
        }
        case sk::rollback: s_->rollback(); break;
        case sk::observe: {
            put_roots(b);
            std::size_t n = payload.size() / 8;
            b.put(static_cast<std::uint32_t>(n));
            for (std::size_t i = 0; i < n; ++i) {
                std::uint64_t id;
                std::memcpy(&id, payload.data() + 8 * i, 8);
                auto it = table_.find(id);
                obs o{};
                if (it == table_.end()) {
                    o.id = id;
                    o.flags = f_no_handle;
                } else {
                    o = observe(it->second);
                }
                b.put(o);
            }
            break;
        }
        case sk::dump: {
            std::string anomalies = rebuild();
            if (!anomalies.empty()) {
                reply(st_anomaly, 0, anomalies);
                return;
            }
            put_roots(b);
            std::vector<std::uint64_t> ids;
            for (auto& [id, p] : table_) ids.push_back(id);
            std::sort(ids.begin(), ids.end());
            b.put(static_cast<std::uint32_t>(ids.size()));
            for (auto id : ids) b.put(observe(table_[id]));
            break;
        }
        case sk::check: {
            auto findings = s_->check();
            std::string text;
            for (auto& f : findings) text += f + "\n";
            if (!findings.empty()) {
                reply(st_anomaly, 0, text);
                return;
            }
            break;
        }
        case sk::close:
            s_.reset();
            reply_ok(b);
            ::_exit(0);
        case sk::exit_now: ::_exit(0);
        case sk::crash_now: env_.kill_now(loss_of(static_cast<mode>(c.a)), c.b);
        case sk::arm: arm(static_cast<long>(c.a), static_cast<mode>(c.b), c.c); break;
        case sk::transient_commit: {
            static Node transient{};  // ordinary memory, not the store's
            Node* p = handle(c.a);
            Node* saved = p->link[c.b];
            p->link[c.b] = &transient;
            try {
                s_->commit();
            } catch (const steppe::error& e) {
                p->link[c.b] = saved;
                throw;
            }
            reply(st_anomaly, 0, "commit accepted a pointer to transient memory");
            return;
        }
        case sk::kv_put: (*s_->root<kv_map>("kv"))[c.a].assign(name); break;
        case sk::kv_erase: b.put(static_cast<std::uint64_t>(s_->root<kv_map>("kv")->erase(c.a))); break;
        case sk::vec_push: vec()->push_back(c.a ? handle(c.a) : nullptr); break;
        case sk::vec_pop: vec()->pop_back(); break;
        case sk::vec_set: vec()->at(c.a) = c.b ? handle(c.b) : nullptr; break;
        case sk::try_commit: s_->commit(); break;
        case sk::try_make: s_->make<Node>(); break;
        }
        reply_ok(b);
    }

    int in_, out_, sabotage_ = 0;
    steppe::test::fault_env env_;  // the store's file system: it outlives the store
    std::optional<steppe::store> s_;
    std::unordered_map<std::uint64_t, Node*> table_;
};

// ---- The parent: model, sessions, checks --------------------------------------

struct mnode {
    std::uint64_t ver = 0;
    std::uint64_t link[3] = {};
    std::uint64_t head = 0;
    std::uint32_t index = 0, count = 1;  // count 0: a Wide
};
struct mstate {
    std::map<std::uint64_t, mnode> nodes;
    std::map<std::uint64_t, std::uint32_t> groups;  // head id -> elements
    std::map<std::string, std::uint64_t> roots;
    bool has_kv = false, has_vec = false;  // the container roots "kv" and "vec"
    std::map<std::uint64_t, std::string> kv;
    std::vector<std::uint64_t> vec;  // node ids, 0 = nullptr
    bool operator==(const mstate& o) const {
        if (nodes.size() != o.nodes.size() || roots != o.roots || groups != o.groups || has_kv != o.has_kv ||
            has_vec != o.has_vec || kv != o.kv || vec != o.vec)
            return false;
        for (auto& [id, n] : nodes) {
            auto it = o.nodes.find(id);
            if (it == o.nodes.end()) return false;
            const mnode& m = it->second;
            if (n.ver != m.ver || n.head != m.head || n.index != m.index || n.count != m.count ||
                !std::equal(n.link, n.link + 3, m.link))
                return false;
        }
        return true;
    }
};

// What stays reachable from the roots; the rest is garbage no later session can find.
mstate prune(const mstate& s) {
    mstate out;
    out.roots = s.roots;
    out.has_kv = s.has_kv;
    out.has_vec = s.has_vec;
    out.kv = s.kv;
    out.vec = s.vec;
    std::vector<std::uint64_t> stack;
    auto visit = [&](std::uint64_t id) {
        const mnode& n = s.nodes.at(id);
        if (out.groups.count(n.head)) return;
        std::uint32_t count = s.groups.at(n.head);
        out.groups[n.head] = count;
        for (std::uint64_t e = n.head; e < n.head + count; ++e) {
            out.nodes[e] = s.nodes.at(e);
            stack.push_back(e);
        }
    };
    for (auto& [name, id] : s.roots) visit(id);
    for (auto id : s.vec)
        if (id) visit(id);
    while (!stack.empty()) {
        std::uint64_t id = stack.back();
        stack.pop_back();
        for (auto t : s.nodes.at(id).link)
            if (t) visit(t);
    }
    return out;
}

struct session {
    pid_t pid = -1;
    int to = -1, from = -1;
};
struct reply {
    std::int32_t status = 0, code = 0;
    std::vector<std::byte> data;
    std::string text() const { return std::string(reinterpret_cast<const char*>(data.data()), data.size()); }
};
struct failure {
    std::string category, message;
};
struct observed_root {
    std::string name, type;
    std::uint64_t id;
    std::uint32_t same;
};
struct snapshot {
    std::vector<observed_root> roots;
    bool has_kv = false, has_vec = false;
    std::map<std::uint64_t, std::string> kv;
    std::vector<std::uint64_t> vec;
    bool vec_identity = true;
    std::vector<obs> nodes;
};

std::string node_name(std::uint64_t id) { return id ? "n" + std::to_string(id) : "nullptr"; }
std::string qt(const std::string& s) { return "\"" + s + "\""; }
std::string errc_name(std::int32_t code) { return steppe::to_string(static_cast<steppe::errc>(code)); }

bool expose_known_bugs() {
    const char* v = std::getenv("STEPPE_EXPOSE_KNOWN_BUGS");
    return v && *v == '1';
}

int reply_timeout_ms() {
    const char* v = std::getenv("STEPPE_MODEL_TIMEOUT_MS");
    return v ? std::atoi(v) : 120000;
}

class runner {
public:
    runner(const config& cfg, const std::string& dir, run_stats* stats, bool verbose)
        : cfg_(cfg), path_(dir + "/s.db"), stats_(stats ? *stats : own_stats_), verbose_(verbose) {
        if (!cfg.pg) return;
        std::string why;
        server_ = steppe::test::pg_server::get(why);
        if (!server_) throw std::runtime_error("no PostgreSQL server for the model test: " + why);
        static int runs = 0;  // a fresh store per run
        path_ = server_->url("model_" + std::to_string(::getpid()) + "_" + std::to_string(++runs));
    }

    outcome run(const std::vector<op>& ops) {
        outcome out;
        ::signal(SIGPIPE, SIG_IGN);
        try {
            trace("auto s = steppe::store::open(path, options);  // " + describe(cfg_));
            open_main();
            check_dump({&committed_});
            for (op_index_ = 0; op_index_ < ops.size(); ++op_index_) {
                ++stats_.ops;
                apply(ops[op_index_]);
            }
            op_index_ = ops.size();
            trace("s.~store();  // end of the run: close, reopen and compare");
            close_main();
            current_ = committed_ = prune(committed_);
            open_main();
            check_dump({&committed_});
            store_check();
            close_main();
        } catch (const failure& f) {
            out.failed = true;
            out.op_index = std::min(op_index_, ops.empty() ? 0 : ops.size() - 1);
            out.category = f.category;
            out.message = f.message;
        }
        kill_all();
        out.trace = trace_;
        ++stats_.runs;
        return out;
    }

private:
    // ---- sessions ----
    session spawn(const session_params& p) {
        int down[2], up[2];
        if (::pipe(down) != 0 || ::pipe(up) != 0) throw failure{"harness", "pipe failed"};
        std::fflush(stdout);
        std::fflush(stderr);
        pid_t pid = ::fork();
        if (pid < 0) throw failure{"harness", "fork failed"};
        if (pid == 0) {
            for (int fd : parent_fds()) ::close(fd);
            ::close(down[1]);
            ::close(up[0]);
            worker(down[0], up[1]).main(p);
        }
        ::close(down[0]);
        ::close(up[1]);
        parent_fds().push_back(down[1]);
        parent_fds().push_back(up[0]);
        return {pid, down[1], up[0]};
    }
    int reap(session& s, bool kill_first = false) {
        if (s.pid <= 0) return 0;
        if (kill_first) ::kill(s.pid, SIGKILL);
        int status = 0;
        ::waitpid(s.pid, &status, 0);
        for (int fd : {s.to, s.from}) {
            ::close(fd);
            auto& v = parent_fds();
            v.erase(std::remove(v.begin(), v.end(), fd), v.end());
        }
        s = session{};
        return status;
    }
    void kill_all() {
        for (session* s : {&main_, &reader_a_, &reader_b_}) reap(*s, true);
    }
    static std::string describe_status(int status) {
        if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
        if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
        return "status " + std::to_string(status);
    }

    bool send(session& s, sk kind, std::uint64_t a = 0, std::uint64_t b = 0, std::uint64_t c = 0,
              std::uint64_t d = 0, const std::vector<std::byte>& payload = {}) {
        command cmd{kind, static_cast<std::uint32_t>(payload.size()), a, b, c, d};
        ++stats_.steps;
        return write_all(s.to, &cmd, sizeof cmd) && (payload.empty() || write_all(s.to, payload.data(), payload.size()));
    }
    // nullopt: the worker died (its pipe closed).
    std::optional<reply> receive(session& s) {
        reply_header h;
        rd r = read_all(s.from, &h, sizeof h, reply_timeout_ms());
        if (r == rd::timeout) {
            reap(s, true);
            throw failure{"hang", "the worker did not answer within " + std::to_string(reply_timeout_ms()) + " ms"};
        }
        if (r == rd::eof) return std::nullopt;
        reply out;
        out.status = h.status;
        out.code = h.code;
        out.data.resize(h.len);
        if (h.len && read_all(s.from, out.data.data(), h.len, reply_timeout_ms()) != rd::ok) return std::nullopt;
        return out;
    }
    [[noreturn]] void died(session& s, const std::string& during) {
        int status = reap(s);
        throw failure{"worker died (" + describe_status(status) + ")",
                      "the worker process " + describe_status(status) + " during " + during};
    }
    reply call(session& s, const std::string& what, sk kind, std::uint64_t a = 0, std::uint64_t b = 0,
               std::uint64_t c = 0, std::uint64_t d = 0, const std::vector<std::byte>& payload = {}) {
        if (!send(s, kind, a, b, c, d, payload)) died(s, what);
        auto r = receive(s);
        if (!r) died(s, what);
        return *r;
    }
    reply ok(session& s, const std::string& what, sk kind, std::uint64_t a = 0, std::uint64_t b = 0,
             std::uint64_t c = 0, const std::string& name = {}) {
        std::vector<std::byte> payload(name.size());
        if (!name.empty()) std::memcpy(payload.data(), name.data(), name.size());
        reply r = call(s, what, kind, a, b, c, 0, payload);
        expect_ok(r, what);
        return r;
    }
    void expect_ok(const reply& r, const std::string& what) {
        if (r.status == st_ok) return;
        if (r.status == st_steppe_error)
            throw failure{"error " + errc_name(r.code), what + " threw steppe::error(" + errc_name(r.code) + "): " + r.text()};
        if (r.status == st_anomaly) throw failure{"anomaly", what + ": " + r.text()};
        throw failure{"exception", what + " threw: " + r.text()};
    }
    void expect_error(const reply& r, steppe::errc code, const std::string& what) {
        if (r.status == st_steppe_error && r.code == static_cast<std::int32_t>(code)) return;
        throw failure{"wrong outcome", what + ": expected steppe::error(" + std::string(steppe::to_string(code)) +
                                           "), got " +
                                           (r.status == st_ok ? std::string("success")
                                                              : "status " + std::to_string(r.status) + " code " +
                                                                    errc_name(r.code) + ": " + r.text())};
    }

    session_params params(bool read_only = false) {
        session_params p;
        p.path = path_;
        p.cfg = cfg_;
        p.read_only = read_only;
        return p;
    }
    // Opens the writer session; false if an armed crash killed it during open.
    bool open_main(long arm_calls = -1, mode m = mode::kill, std::uint64_t seed = 0) {
        destroyed_committed_ = false;
        session_params p = params();
        p.arm_calls = arm_calls;
        p.arm_mode = m;
        p.arm_seed = seed;
        main_ = spawn(p);
        auto r = receive(main_);
        if (!r) {
            int status = reap(main_);
            if (arm_calls >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return false;
            throw failure{"worker died", "the worker process " + describe_status(status) + " while opening the store"};
        }
        expect_ok(*r, "steppe::store::open");
        ++stats_.reopens;
        return true;
    }
    void close_main() {
        if (main_.pid <= 0) return;
        ok(main_, "s.~store()", sk::close);
        int status = reap(main_);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            throw failure{"worker died", "closing the store: the worker " + describe_status(status)};
    }

    // ---- model checks ----
    snapshot parse(const reply& r) {
        snapshot s;
        bytes_in in{r.data};
        auto nroots = in.get<std::uint32_t>();
        for (std::uint32_t i = 0; i < nroots; ++i) {
            observed_root o;
            o.name = in.get_str();
            o.type = in.get_str();
            o.id = in.get<std::uint64_t>();
            o.same = in.get<std::uint32_t>();
            s.roots.push_back(o);
        }
        s.has_kv = in.get<std::uint32_t>() != 0;
        if (s.has_kv) {
            auto pairs = in.get<std::uint32_t>();
            for (std::uint32_t i = 0; i < pairs; ++i) {
                auto k = in.get<std::uint64_t>();
                s.kv[k] = in.get_str();
            }
        }
        s.has_vec = in.get<std::uint32_t>() != 0;
        if (s.has_vec) {
            auto n = in.get<std::uint32_t>();
            for (std::uint32_t i = 0; i < n; ++i) {
                s.vec.push_back(in.get<std::uint64_t>());
                s.vec_identity &= in.get<std::uint32_t>() != 0;
            }
        }
        auto n = in.get<std::uint32_t>();
        for (std::uint32_t i = 0; i < n; ++i) s.nodes.push_back(in.get<obs>());
        return s;
    }
    static std::string show(const mnode& n, std::uint64_t id) {
        std::ostringstream o;
        o << node_name(id) << "{ver " << n.ver << ", link {" << n.link[0] << ", " << n.link[1] << ", " << n.link[2]
          << "}, index " << n.index << ", count " << n.count << "}";
        return o.str();
    }
    static std::string show(const obs& n) {
        std::ostringstream o;
        o << node_name(n.id) << "{ver " << n.ver << ", link {" << n.link[0] << ", " << n.link[1] << ", "
          << n.link[2] << "}, index " << n.index << ", count " << n.count;
        if (n.flags & 7) o << ", a link is not the object this session knows by that id";
        if (n.flags & f_fill) o << ", its fill words are wrong";
        if (n.flags & f_no_handle) o << ", the worker has no pointer for it";
        o << "}";
        return o.str();
    }
    // Empty if `got` agrees with `m`; with `whole`, got's nodes must be exactly m's.
    std::string compare(const mstate& m, const snapshot& got, bool whole) {
        std::string diff;
        auto add = [&](const std::string& d) {
            if (diff.size() < 4000) diff += "  " + d + "\n";
        };
        std::map<std::string, std::uint64_t> roots;
        bool kv_root = false, vec_root = false;
        for (auto& r : got.roots) {
            if (r.name == "kv" || r.name == "vec") {
                (r.name == "kv" ? kv_root : vec_root) = true;
                continue;
            }
            roots[r.name] = r.id;
            if (r.type != "steppe_model::Node") add("root " + qt(r.name) + " has type " + r.type);
            if (!r.same) add("root " + qt(r.name) + " is not at the address this session knows " + node_name(r.id) + " by");
        }
        if (roots != m.roots) {
            std::string a, b;
            for (auto& [n, id] : m.roots) a += n + "=" + node_name(id) + " ";
            for (auto& [n, id] : roots) b += n + "=" + node_name(id) + " ";
            add("roots: model {" + a + "}, store {" + b + "}");
        }
        if (kv_root != m.has_kv || got.has_kv != m.has_kv)
            add(std::string("root \"kv\": ") + (m.has_kv ? "the model has it, the store not" : "the store has it, the model not"));
        if (vec_root != m.has_vec || got.has_vec != m.has_vec)
            add(std::string("root \"vec\": ") + (m.has_vec ? "the model has it, the store not" : "the store has it, the model not"));
        if (got.kv != m.kv) {
            std::string d;
            for (auto& [k, v] : m.kv)
                if (!got.kv.count(k) || got.kv.at(k) != v) d += " model[" + std::to_string(k) + "]=" + qt(v.substr(0, 24));
            for (auto& [k, v] : got.kv)
                if (!m.kv.count(k) || m.kv.at(k) != v) d += " store[" + std::to_string(k) + "]=" + qt(v.substr(0, 24));
            add("kv differs:" + d);
        }
        if (got.vec != m.vec) {
            std::string a, b;
            for (auto id : m.vec) a += node_name(id) + " ";
            for (auto id : got.vec) b += node_name(id) + " ";
            add("vec: model {" + a + "}, store {" + b + "}");
        }
        if (!got.vec_identity) add("an element of vec is not at the address this session knows its node by");
        std::set<std::uint64_t> seen;
        for (const obs& o : got.nodes) {
            seen.insert(o.id);
            auto it = m.nodes.find(o.id);
            if (it == m.nodes.end()) {
                add("the store has " + show(o) + ", which the model does not");
                continue;
            }
            const mnode& n = it->second;
            bool same = o.ver == n.ver && std::equal(n.link, n.link + 3, o.link) && o.index == n.index &&
                        o.count == n.count && o.flags == 0;
            if (!same) add("model " + show(n, o.id) + " but store " + show(o));
        }
        if (whole)
            for (auto& [id, n] : m.nodes)
                if (!seen.count(id)) add("the model has " + show(n, id) + ", which the store lacks");
        return diff;
    }
    void check_ids(const std::vector<std::uint64_t>& ids) {
        std::vector<std::byte> payload(ids.size() * 8);
        if (!ids.empty()) std::memcpy(payload.data(), ids.data(), payload.size());
        reply r = call(main_, "observe", sk::observe, 0, 0, 0, 0, payload);
        expect_ok(r, "observe");
        ++stats_.checks;
        std::string d = compare(current_, parse(r), false);
        if (!d.empty()) throw failure{"mismatch", "after this step the store differs from the model:\n" + d};
    }
    void check_full() {
        std::vector<std::uint64_t> ids;
        for (auto& [id, n] : current_.nodes) ids.push_back(id);
        check_ids(ids);
        ops_since_full_ = 0;
    }
    void check_touched(std::vector<std::uint64_t> ids) {
        if (++ops_since_full_ >= 8) return check_full();
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
        if (ids.size() > 64) {
            ids.erase(ids.begin() + 32, ids.end() - 32);
        }
        check_ids(ids);
    }
    // After an open: the store must equal one of the candidates (pruned); the
    // model adopts it.
    void check_dump(const std::vector<const mstate*>& candidates, session* s = nullptr) {
        session& ses = s ? *s : main_;
        reply r = call(ses, "dump", sk::dump);
        expect_ok(r, "walking the reopened store from its roots");
        ++stats_.checks;
        snapshot snap = parse(r);
        std::string diffs;
        for (std::size_t i = 0; i < candidates.size(); ++i) {
            mstate pruned = prune(*candidates[i]);
            std::string d = compare(pruned, snap, true);
            if (d.empty()) {
                if (candidates.size() == 2) ++(i == 0 ? stats_.in_flight_lost : stats_.in_flight_kept);
                if (!s) committed_ = current_ = pruned;
                ops_since_full_ = 0;
                return;
            }
            diffs += (candidates.size() == 1 ? std::string("against the last commit:\n")
                                             : i == 0 ? "against the commit before the one in flight:\n"
                                                      : "against the commit in flight:\n") +
                     d;
        }
        throw failure{"recovery mismatch", "the reopened store is not the state that must be there\n" + diffs};
    }
    void store_check() {
        reply r = call(main_, "s.check()", sk::check);
        ++stats_.store_checks;
        if (r.status == st_anomaly) throw failure{"check", "steppe::store::check() reports:\n" + r.text()};
        expect_ok(r, "s.check()");
    }

    void trace(const std::string& line) {
        trace_.push_back(line);
        if (verbose_) std::printf("    %s\n", line.c_str());
    }

    // ---- picking ----
    std::vector<std::uint64_t> ids() const {
        std::vector<std::uint64_t> v;
        for (auto& [id, n] : current_.nodes) v.push_back(id);
        return v;
    }
    std::uint64_t pick(std::uint32_t r) const {
        auto v = ids();
        return v.empty() ? 0 : v[r % v.size()];
    }
    static std::string root_name(std::uint32_t r) { return "r" + std::to_string(r % 6); }
    static mode crash_mode(std::uint32_t r) { return static_cast<mode>(r % static_cast<std::uint32_t>(mode::count_)); }
    // A commit is one pwrite and one fdatasync of the log, plus a checkpoint's
    // writes (one per page) and syncs when the log is full: half the crash
    // points fall on the first two calls, a quarter in the first 16, a quarter
    // in the first 128.
    static long crash_point(std::uint32_t r) {
        return static_cast<long>(r % 2 ? r / 2 % 2 : r % 4 == 0 ? r / 4 % 16 : r / 4 % 128);
    }

    void add_group(std::uint64_t first, std::uint32_t count, bool wide) {
        current_.groups[first] = wide ? 1 : count;
        for (std::uint32_t i = 0; i < (wide ? 1u : count); ++i) {
            mnode n;
            n.head = first;
            n.index = wide ? 0 : i;
            n.count = wide ? 0 : count;
            current_.nodes[first + i] = n;
        }
    }
    void note_crash(mode m) {
        ++stats_.by_mode[static_cast<int>(m)];
        if (m == mode::kill) ++stats_.kills;
        else ++stats_.power_losses;
    }

    // ---- the operations ----
    void apply(const op& o) {
        switch (o.kind) {
        case opk::make_one: {
            std::uint64_t id = next_id_++;
            trace("Node* " + node_name(id) + " = s.make<Node>(Node{" + std::to_string(id) + ", 0, {}, 0, 1});");
            ok(main_, "make<Node>", sk::make_one, id);
            add_group(id, 1, false);
            return check_touched({id});
        }
        case opk::make_array: {
            static const std::uint32_t sizes[] = {2, 8, 64, 100, 300, 1000};
            std::uint32_t count = sizes[o.a % 6];
            std::uint64_t first = next_id_;
            next_id_ += count;
            trace("Node* " + node_name(first) + " = s.make_array<Node>(" + std::to_string(count) + ");  // " +
                  node_name(first) + ".." + node_name(first + count - 1) + " = &" + node_name(first) +
                  "[i], each given its id, index, count");
            ok(main_, "make_array<Node>", sk::make_array, first, count);
            add_group(first, count, false);
            std::vector<std::uint64_t> touched;
            for (std::uint64_t i = first; i < first + count; ++i) touched.push_back(i);
            return check_touched(touched);
        }
        case opk::make_wide: {
            std::uint64_t id = next_id_++;
            trace("Node* " + node_name(id) + " = &s.make<Wide>()->head;  // id " + std::to_string(id) +
                  ", count 0, fill words for ver 0");
            ok(main_, "make<Wide>", sk::make_wide, id);
            add_group(id, 1, true);
            return check_touched({id});
        }
        case opk::root_get: {
            std::string name = root_name(o.a);
            auto it = current_.roots.find(name);
            std::uint64_t fresh = next_id_;
            trace("Node* r = s.root<Node>(" + qt(name) + ");  // " +
                  (it != current_.roots.end() ? "exists: " + node_name(it->second)
                                              : "created: it becomes " + node_name(fresh)));
            reply r = ok(main_, "root<Node>", sk::root_get, fresh, 0, 0, name);
            std::uint64_t got = bytes_in{r.data}.get<std::uint64_t>();
            std::uint64_t want = it != current_.roots.end() ? it->second : fresh;
            if (got != want)
                throw failure{"mismatch", "root<Node>(" + qt(name) + ") returned " + node_name(got) +
                                              ", the model expects " + node_name(want)};
            if (it == current_.roots.end()) {
                ++next_id_;
                add_group(fresh, 1, false);
                current_.roots[name] = fresh;
            }
            return check_touched({want});
        }
        case opk::write: {
            std::uint64_t id = pick(o.a);
            if (!id) return;
            write(id);
            return check_touched({id});
        }
        case opk::write_many: {
            auto v = ids();
            if (v.empty()) return;
            std::mt19937 rng(o.b);
            std::vector<std::uint64_t> touched;
            for (std::uint32_t i = 0; i < 1 + o.a % 40; ++i) {
                std::uint64_t id = v[rng() % v.size()];
                write(id);
                touched.push_back(id);
            }
            return check_touched(touched);
        }
        case opk::link:
        case opk::unlink: {
            std::uint64_t from = pick(o.a);
            if (!from) return;
            std::uint32_t slot = o.b % 3;
            std::uint64_t to = o.kind == opk::link ? pick(o.c) : 0;
            trace(node_name(from) + "->link[" + std::to_string(slot) + "] = " + node_name(to) + ";");
            ok(main_, "link", sk::link, from, slot, to);
            current_.nodes[from].link[slot] = to;
            if (to) return check_touched({from, to});
            return check_touched({from});
        }
        case opk::destroy: {
            if (current_.groups.empty()) return;
            auto g = current_.groups.begin();
            std::advance(g, static_cast<long>(o.a % current_.groups.size()));
            std::uint64_t head = g->first;
            std::uint32_t count = g->second;
            bool wide = current_.nodes[head].count == 0;
            auto inside = [&](std::uint64_t id) { return id >= head && id < head + count; };
            std::vector<std::uint64_t> touched;
            for (auto& [id, n] : current_.nodes) {
                if (inside(id)) continue;
                for (std::uint32_t k = 0; k < 3; ++k)
                    if (n.link[k] && inside(n.link[k])) {
                        trace(node_name(id) + "->link[" + std::to_string(k) + "] = nullptr;  // before destroying " +
                              node_name(n.link[k]));
                        ok(main_, "unlink before destroy", sk::link, id, k, 0);
                        n.link[k] = 0;
                        touched.push_back(id);
                    }
            }
            for (std::size_t i = 0; i < current_.vec.size(); ++i)
                if (current_.vec[i] && inside(current_.vec[i])) {
                    trace("vec[" + std::to_string(i) + "] = nullptr;  // before destroying " + node_name(current_.vec[i]));
                    ok(main_, "vec[i] = nullptr before destroy", sk::vec_set, i, 0);
                    current_.vec[i] = 0;
                }
            for (auto it = current_.roots.begin(); it != current_.roots.end();) {
                if (inside(it->second)) {
                    trace("s.remove_root(" + qt(it->first) + ");  // before destroying " + node_name(it->second));
                    ok(main_, "remove_root before destroy", sk::remove_root, 0, 0, 0, it->first);
                    it = current_.roots.erase(it);
                } else {
                    ++it;
                }
            }
            trace(wide ? "s.destroy(reinterpret_cast<Wide*>(" + node_name(head) + "));"
                       : "s.destroy(" + node_name(head) + ", " + std::to_string(count) + ");");
            ok(main_, "destroy", sk::destroy, head);
            if (committed_.groups.count(head)) destroyed_committed_ = true;
            for (std::uint64_t e = head; e < head + count; ++e) current_.nodes.erase(e);
            current_.groups.erase(head);
            return check_touched(touched);
        }
        case opk::set_root: {
            std::uint64_t id = pick(o.b);
            if (!id) return;
            std::string name = root_name(o.a);
            trace("s.set_root(" + qt(name) + ", " + node_name(id) + ");");
            ok(main_, "set_root", sk::set_root, id, 0, 0, name);
            current_.roots[name] = id;
            return check_touched({id});
        }
        case opk::remove_root: {
            std::string name = root_name(o.a);
            bool had = current_.roots.erase(name) > 0;
            trace("s.remove_root(" + qt(name) + ");  // returns " + (had ? "true" : "false"));
            reply r = ok(main_, "remove_root", sk::remove_root, 0, 0, 0, name);
            if ((bytes_in{r.data}.get<std::uint64_t>() != 0) != had)
                throw failure{"mismatch", "remove_root(" + qt(name) + ") returned " + (had ? "false" : "true")};
            return check_touched({});
        }
        case opk::commit: {
            trace("s.commit();");
            reply r = ok(main_, "commit", sk::commit);
            stats_.tracked_io += bytes_in{r.data}.get<std::uint64_t>();
            ++stats_.commits;
            committed_ = current_;
            destroyed_committed_ = false;
            return check_full();
        }
        case opk::rollback: {
            trace("s.rollback();");
            ok(main_, "rollback", sk::rollback);
            ++stats_.rollbacks;
            current_ = committed_;
            if (destroyed_committed_ && !expose_known_bugs()) {
                // Known bug 7 (docs/guarantees.md): a pointer held to a committed
                // object destroyed in the rolled-back transaction is dead if its
                // page was handed out again before the rollback. Re-find every
                // object from the roots instead, unless STEPPE_EXPOSE_KNOWN_BUGS=1.
                destroyed_committed_ = false;
                trace("// workaround for known bug 7: after rolling back a destroy, re-find every object from the roots");
                return check_dump({&committed_});
            }
            destroyed_committed_ = false;
            return check_full();
        }
        case opk::reopen:
        case opk::reopen_dirty:
        case opk::kill_now: {
            if (o.kind == opk::reopen) {
                trace("s.~store();  // close: uncommitted changes are discarded; reopen in a fresh process");
                close_main();
            } else if (o.kind == opk::reopen_dirty) {
                trace("_exit(0);  // no destructor; reopen in a fresh process");
                send(main_, sk::exit_now);
                reap(main_);
            } else {
                trace("kill(worker, SIGKILL);  // between two steps; reopen in a fresh process");
                reap(main_, true);
                ++stats_.idle_crashes;
                note_crash(mode::kill);
            }
            open_main();
            check_dump({&committed_});
            return store_check();
        }
        case opk::power_loss_now: {
            if (cfg_.pg) {
                trace("server.crash(); kill(worker, SIGKILL); server.start();  // between two steps; reopen");
                server_->crash();
                reap(main_, true);
                server_->start();
                ++stats_.idle_crashes;
                note_crash(mode::drop_all);
                open_main();
                check_dump({&committed_});
                return store_check();
            }
            mode m = crash_mode(o.b);
            if (m == mode::kill) m = mode::drop_all;
            trace("power_loss();  // " + std::string(to_string(m)) + ", seed " + std::to_string(o.c) +
                  "; reopen in a fresh process");
            send(main_, sk::crash_now, static_cast<std::uint64_t>(m), o.c);
            if (receive(main_)) throw failure{"harness", "the worker survived its power loss"};
            reap(main_);
            ++stats_.idle_crashes;
            note_crash(m);
            open_main();
            check_dump({&committed_});
            return store_check();
        }
        case opk::crash_commit: {
            if (cfg_.pg) return server_crash_in_commit(std::chrono::microseconds(o.a % 4000));
            long n = crash_point(o.a);
            mode m = crash_mode(o.b);
            bool twice = o.d % 4 == 0;
            long n2 = static_cast<long>(o.d / 4 % 40);
            mode m2 = crash_mode(o.d / 256);
            trace("s.commit();  // CRASH (" + std::string(to_string(m)) + ", seed " + std::to_string(o.c) +
                  ") before I/O call " + std::to_string(n) + " of this commit" +
                  (twice ? "; then a second crash (" + std::string(to_string(m2)) +
                               ") before I/O call " + std::to_string(n2) + " of the recovering open"
                         : std::string()));
            ok(main_, "arm", sk::arm, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(m), o.c);
            if (!send(main_, sk::commit)) died(main_, "commit");
            auto r = receive(main_);
            mstate before = committed_, after = current_;
            std::vector<const mstate*> candidates;
            if (r) {
                expect_ok(*r, "commit (armed)");
                ++stats_.commits;
                ++stats_.crash_after_commit;
                send(main_, sk::crash_now, static_cast<std::uint64_t>(m), o.c);
                if (receive(main_)) throw failure{"harness", "the worker survived its crash"};
                candidates = {&after};
            } else {
                ++stats_.crash_in_commit;
                stats_.max_io_call = std::max<std::uint64_t>(stats_.max_io_call, static_cast<std::uint64_t>(n));
                stats_.points_hit[n] = 1;
                candidates = {&before, &after};
            }
            int status = reap(main_);
            if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
                throw failure{"worker died", "the armed commit ended with " + describe_status(status)};
            note_crash(m);
            return recover(candidates, twice ? n2 : -1, m2, o.c + 1);
        }
        case opk::crash_open: {
            long n = static_cast<long>(o.a % 40);
            mode m = crash_mode(o.b);
            // No destructor: a clean close would checkpoint, and the open is
            // to find the commits in the log.
            trace("_exit(0); reopen;  // CRASH (" + std::string(to_string(m)) +
                  ") before I/O call " + std::to_string(n) + " of the open (recovery, checkpoint)");
            if (main_.pid > 0) {
                send(main_, sk::exit_now);
                reap(main_);
            }
            current_ = committed_;
            return recover({&committed_}, n, m, o.c);
        }
        case opk::kill_timed: {
            auto delay = std::chrono::microseconds(o.a % 3000);
            trace("s.commit();  // kill -9 from outside " + std::to_string(delay.count()) +
                  " us after the commit was sent");
            if (!send(main_, sk::commit)) died(main_, "commit");
            std::this_thread::sleep_for(delay);
            ::kill(main_.pid, SIGKILL);
            auto r = receive(main_);
            mstate before = committed_, after = current_;
            std::vector<const mstate*> candidates = {&before, &after};
            if (r) {
                expect_ok(*r, "commit");
                ++stats_.commits;
                candidates = {&after};
            }
            reap(main_);
            ++stats_.timed_kills;
            note_crash(mode::kill);
            return recover(candidates, -1, mode::kill, 0);
        }
        case opk::readers: return readers();
        case opk::second_writer: {
            trace("steppe::store::open(path) in another process;  // must throw errc::locked naming the writer");
            session_params p = params();
            p.wait_for_lock = false;
            session other = spawn(p);
            auto r = receive(other);
            reap(other);
            if (!r) throw failure{"worker died", "a second writer died while opening"};
            expect_error(*r, steppe::errc::locked, "a second writer's open");
            // In PostgreSQL the holder is named by its session's backend.
            if (r->text().find(cfg_.pg ? "held by another writer" : std::to_string(main_.pid)) == std::string::npos)
                throw failure{"wrong outcome", "errc::locked does not name the writer's pid " +
                                                   std::to_string(main_.pid) + ": " + r->text()};
            ++stats_.lock_checks;
            return;
        }
        case opk::transient_commit: {
            std::uint64_t id = pick(o.a);
            if (!id) return;
            std::uint32_t slot = o.b % 3;
            trace(node_name(id) + "->link[" + std::to_string(slot) +
                  "] = &transient; s.commit();  // must throw errc::transient_pointer; the link is put back");
            reply r = call(main_, "commit with a transient pointer", sk::transient_commit, id, slot);
            expect_error(r, steppe::errc::transient_pointer, "commit with a pointer to transient memory");
            ++stats_.transient_checks;
            return check_touched({id});
        }
        case opk::check: {
            trace("assert(s.check().empty());");
            return store_check();
        }
        case opk::kv_put: {
            std::uint64_t key = o.a % 48;
            std::uint64_t v = next_ver_++;
            std::string value = "v" + std::to_string(v);
            std::size_t length = o.b % 4 == 0 ? 16 + o.b / 4 % 400 : o.b % 12;  // long strings live in the store's heap
            while (value.size() < length) value += static_cast<char>('a' + (value.size() + v) % 26);
            value.resize(std::max(length, std::size_t{1}));
            trace("(*s.root<kv_map>(\"kv\"))[" + std::to_string(key) + "] = " + qt(value.substr(0, 24)) +
                  (value.size() > 24 ? "...  // " + std::to_string(value.size()) + " chars" : ";"));
            ok(main_, "kv put", sk::kv_put, key, 0, 0, value);
            current_.has_kv = true;
            current_.kv[key] = value;
            return check_touched({});
        }
        case opk::kv_erase: {
            std::uint64_t key = o.a % 48;
            bool had = current_.kv.erase(key) > 0;
            trace("s.root<kv_map>(\"kv\")->erase(" + std::to_string(key) + ");  // returns " + (had ? "1" : "0"));
            reply r = ok(main_, "kv erase", sk::kv_erase, key);
            if ((bytes_in{r.data}.get<std::uint64_t>() != 0) != had)
                throw failure{"mismatch", "kv.erase(" + std::to_string(key) + ") returned the wrong count"};
            current_.has_kv = true;
            return check_touched({});
        }
        case opk::vec_push: {
            if (current_.vec.size() >= vec_capacity) return;
            std::uint64_t id = o.c % 8 == 0 ? 0 : pick(o.b);
            trace("s.root<node_vec>(\"vec\")->push_back(" + node_name(id) + ");");
            ok(main_, "vec push_back", sk::vec_push, id);
            current_.has_vec = true;
            current_.vec.push_back(id);
            return check_touched({});
        }
        case opk::vec_pop: {
            if (current_.vec.empty()) return;
            trace("s.root<node_vec>(\"vec\")->pop_back();");
            ok(main_, "vec pop_back", sk::vec_pop);
            current_.vec.pop_back();
            return check_touched({});
        }
        case opk::vec_set: {
            if (current_.vec.empty()) return;
            std::size_t i = o.a % current_.vec.size();
            std::uint64_t id = o.c % 8 == 0 ? 0 : pick(o.b);
            trace("(*s.root<node_vec>(\"vec\"))[" + std::to_string(i) + "] = " + node_name(id) + ";");
            ok(main_, "vec[i] =", sk::vec_set, i, id);
            current_.vec[i] = id;
            return check_touched({});
        }
        case opk::count_: return;
        }
    }

    void write(std::uint64_t id) {
        std::uint64_t v = next_ver_++;
        mnode& n = current_.nodes[id];
        trace(node_name(id) + "->ver = " + std::to_string(v) + ";" + (n.count == 0 ? "  // and its 1000 fill words" : ""));
        ok(main_, "write", sk::write, id, v);
        n.ver = v;
    }

    // In PostgreSQL: the server stopped like a power cut `delay` after the
    // commit was sent, then started again; the commit is there or not,
    // unless it returned.
    void server_crash_in_commit(std::chrono::microseconds delay) {
        trace("s.commit();  // the server crashes (pg_ctl stop -m immediate) " + std::to_string(delay.count()) +
              " us after the commit was sent, and starts again");
        if (!send(main_, sk::commit)) died(main_, "commit");
        std::this_thread::sleep_for(delay);
        server_->crash();
        auto r = receive(main_);
        mstate before = committed_, after = current_;
        std::vector<const mstate*> candidates = {&before, &after};
        if (r && r->status == st_ok) {
            ++stats_.commits;
            ++stats_.crash_after_commit;
            candidates = {&after};
        } else if (r && !(r->status == st_steppe_error && (r->code == static_cast<std::int32_t>(steppe::errc::io) ||
                                                           r->code == static_cast<std::int32_t>(steppe::errc::poisoned)))) {
            expect_ok(*r, "commit while the server crashed (io or poisoned expected)");
        } else {
            ++stats_.crash_in_commit;
        }
        reap(main_, true);
        server_->start();
        note_crash(mode::kill);
        recover(candidates, -1, mode::kill, 0);
    }

    // After a crash: the store must reopen as one of the candidates. With
    // arm_calls >= 0 the first reopen is itself crashed at that I/O call.
    void recover(const std::vector<const mstate*>& candidates, long arm_calls, mode m, std::uint64_t seed) {
        if (arm_calls >= 0) {
            if (!open_main(arm_calls, m, seed)) {
                ++stats_.crash_in_open;
                note_crash(m);
                trace("// the recovering open crashed; open again");
            }
        }
        if (main_.pid <= 0) open_main();
        check_dump(candidates);
        store_check();
    }

    void readers() {
        trace("s.~store();  // close the writer; two read-only opens share the store");
        close_main();
        current_ = committed_ = prune(committed_);
        trace("auto r1 = open(path, read_only), r2 = open(path, read_only);  // both see the last commit; "
              "a writer opens beside them and closes; r1.commit() and r1.make<Node>() throw invalid_argument");
        reader_a_ = spawn(params(true));
        auto ra = receive(reader_a_);
        if (!ra) died(reader_a_, "a read-only open");
        expect_ok(*ra, "read-only open");
        check_dump({&committed_}, &reader_a_);
        reader_b_ = spawn(params(true));
        auto rb = receive(reader_b_);
        if (!rb) died(reader_b_, "a second read-only open");
        expect_ok(*rb, "a second read-only open while another reader has the store");
        check_dump({&committed_}, &reader_b_);
        session w = spawn(params());
        auto rw = receive(w);
        if (!rw) {
            reap(w);
            throw failure{"worker died", "a writer died while opening a store readers hold"};
        }
        expect_ok(*rw, "a writer's open beside two readers");
        ok(w, "closing the writer beside two readers", sk::close);
        reap(w);
        check_dump({&committed_}, &reader_a_);
        expect_error(call(reader_a_, "commit in a read-only session", sk::try_commit), steppe::errc::invalid_argument,
                     "commit() in a read-only session");
        expect_error(call(reader_a_, "make in a read-only session", sk::try_make), steppe::errc::invalid_argument,
                     "make<Node>() in a read-only session");
        for (session* s : {&reader_a_, &reader_b_}) {
            ok(*s, "closing a reader", sk::close);
            reap(*s);
        }
        ++stats_.reader_checks;
        trace("auto s = steppe::store::open(path, options);");
        open_main();
        check_dump({&committed_});
    }

    config cfg_;
    std::string path_;
    steppe::test::pg_server* server_ = nullptr;
    run_stats own_stats_;
    run_stats& stats_;
    bool verbose_;
    session main_, reader_a_, reader_b_;
    mstate committed_, current_;
    std::uint64_t next_id_ = 1, next_ver_ = 1;
    std::vector<std::string> trace_;
    std::size_t op_index_ = 0, ops_since_full_ = 0;
    bool destroyed_committed_ = false;  // this transaction destroyed a committed object
};

}  // namespace

// ---- Public functions -----------------------------------------------------------

outcome run(const config& cfg, const std::vector<op>& ops, const std::string& dir, run_stats* stats, bool verbose) {
    return runner(cfg, dir, stats, verbose).run(ops);
}

std::vector<op> generate(std::uint64_t seed, std::size_t length) {
    static const std::pair<opk, int> weights[] = {
        {opk::make_one, 10},      {opk::make_array, 4},   {opk::make_wide, 2},       {opk::root_get, 3},
        {opk::write, 14},         {opk::write_many, 3},   {opk::link, 18},           {opk::unlink, 4},
        {opk::destroy, 5},        {opk::set_root, 6},     {opk::remove_root, 2},     {opk::commit, 10},
        {opk::rollback, 3},       {opk::reopen, 2},       {opk::reopen_dirty, 1},    {opk::kill_now, 1},
        {opk::power_loss_now, 1}, {opk::crash_commit, 6}, {opk::crash_open, 1},      {opk::kill_timed, 1},
        {opk::readers, 1},        {opk::second_writer, 1}, {opk::transient_commit, 1}, {opk::check, 1},
        {opk::kv_put, 4},         {opk::kv_erase, 2},     {opk::vec_push, 3},        {opk::vec_pop, 1},
        {opk::vec_set, 2}};
    int total = 0;
    for (auto& [k, w] : weights) total += w;
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 17);
    std::vector<op> ops;
    for (std::size_t i = 0; i < length; ++i) {
        int r = static_cast<int>(rng() % static_cast<std::uint64_t>(total));
        opk kind = opk::commit;
        for (auto& [k, w] : weights) {
            if (r < w) {
                kind = k;
                break;
            }
            r -= w;
        }
        ops.push_back({kind, static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng()),
                       static_cast<std::uint32_t>(rng()), static_cast<std::uint32_t>(rng())});
    }
    return ops;
}

std::vector<op> shrink(const config& cfg, std::vector<op> ops, const outcome& failure, outcome& last,
                       std::size_t max_runs, double max_seconds) {
    auto start = std::chrono::steady_clock::now();
    std::size_t runs = 0;
    last = failure;
    if (ops.size() > failure.op_index + 1) ops.resize(failure.op_index + 1);
    auto out_of_budget = [&] {
        return runs >= max_runs ||
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > max_seconds;
    };
    auto fails = [&](const std::vector<op>& candidate) {
        ++runs;
        steppe::test::temp_dir dir;
        outcome o = run(cfg, candidate, dir.dir().string());
        if (o.failed && o.category == failure.category) {
            last = o;
            return true;
        }
        return false;
    };
    std::size_t chunk = std::max<std::size_t>(1, ops.size() / 2);
    while (!out_of_budget()) {
        bool removed = false;
        for (std::size_t at = 0; at < ops.size() && !out_of_budget();) {
            std::vector<op> candidate;
            candidate.insert(candidate.end(), ops.begin(), ops.begin() + static_cast<long>(at));
            candidate.insert(candidate.end(), ops.begin() + static_cast<long>(std::min(ops.size(), at + chunk)),
                             ops.end());
            if (!candidate.empty() && fails(candidate)) {
                ops = candidate;
                if (ops.size() > last.op_index + 1) ops.resize(last.op_index + 1);
                removed = true;
            } else {
                at += chunk;
            }
        }
        if (!removed) {
            if (chunk == 1) break;
            chunk /= 2;
        }
    }
    // Simpler choices read better: try zeroing each op's random numbers.
    for (std::size_t i = 0; i < ops.size() && !out_of_budget(); ++i) {
        for (std::uint32_t op::*field : {&op::a, &op::b, &op::c, &op::d}) {
            if (ops[i].*field == 0 || out_of_budget()) continue;
            std::vector<op> candidate = ops;
            candidate[i].*field = 0;
            if (fails(candidate)) ops = candidate;
        }
    }
    return ops;
}

std::string encode(const config& cfg, const std::vector<op>& ops) {
    std::string s = cfg.backend == steppe::fault_backend::mprotect ? "m" : "u";
    if (cfg.pg) s += "p";
    s += std::to_string(cfg.checkpoint_bytes) + ":";
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const op& o = ops[i];
        if (i) s += ",";
        s += std::to_string(static_cast<int>(o.kind)) + "." + std::to_string(o.a) + "." + std::to_string(o.b) + "." +
             std::to_string(o.c) + "." + std::to_string(o.d);
    }
    return s;
}

bool decode(const std::string& text, config& cfg, std::vector<op>& ops) {
    auto colon = text.find(':');
    if (text.empty() || colon == std::string::npos) return false;
    cfg.backend = text[0] == 'm' ? steppe::fault_backend::mprotect : steppe::fault_backend::uffd;
    cfg.pg = text.size() > 1 && text[1] == 'p';
    cfg.checkpoint_bytes = std::stoull(text.substr(cfg.pg ? 2 : 1, colon - (cfg.pg ? 2 : 1)));
    ops.clear();
    std::stringstream in(text.substr(colon + 1));
    std::string item;
    while (std::getline(in, item, ',')) {
        unsigned long v[5] = {};
        if (std::sscanf(item.c_str(), "%lu.%lu.%lu.%lu.%lu", &v[0], &v[1], &v[2], &v[3], &v[4]) != 5) return false;
        if (v[0] >= static_cast<unsigned long>(opk::count_)) return false;
        ops.push_back({static_cast<opk>(v[0]), static_cast<std::uint32_t>(v[1]), static_cast<std::uint32_t>(v[2]),
                       static_cast<std::uint32_t>(v[3]), static_cast<std::uint32_t>(v[4])});
    }
    return true;
}

std::string report(const config& cfg, const std::vector<op>& ops, const outcome& o) {
    std::string s = "// steppe model reproducer: " + std::to_string(ops.size()) + " ops, " + describe(cfg) + "\n";
    s += "// struct Node { uint64_t id, ver; Node* link[3]; uint32_t index, count; };"
         "  struct Wide { Node head; uint64_t fill[1000]; };\n"
         "// using kv_map = steppe::map<uint64_t, steppe::string>;  using node_vec = steppe::vector<Node*>;\n";
    for (const auto& line : o.trace) s += "    " + line + "\n";
    s += "// FAILS (" + o.category + ", at op " + std::to_string(o.op_index) + " " +
         (o.op_index < ops.size() ? to_string(ops[o.op_index].kind) : "end") + "): " + o.message + "\n";
    s += "// replay: STEPPE_MODEL_REPLAY='" + encode(cfg, ops) + "'\n";
    return s;
}

void run_stats::add(const run_stats& o) {
    for (int i = 0; i < 128; ++i) points_hit[i] |= o.points_hit[i];
    tracked_io += o.tracked_io;
    runs += o.runs; ops += o.ops; steps += o.steps; checks += o.checks; commits += o.commits;
    rollbacks += o.rollbacks; reopens += o.reopens; crash_in_commit += o.crash_in_commit;
    crash_after_commit += o.crash_after_commit; in_flight_kept += o.in_flight_kept;
    in_flight_lost += o.in_flight_lost; crash_in_open += o.crash_in_open; power_losses += o.power_losses;
    kills += o.kills; timed_kills += o.timed_kills; idle_crashes += o.idle_crashes;
    for (int i = 0; i < 8; ++i) by_mode[i] += o.by_mode[i];
    max_io_call = std::max(max_io_call, o.max_io_call);
    reader_checks += o.reader_checks; lock_checks += o.lock_checks; transient_checks += o.transient_checks;
    store_checks += o.store_checks;
}

std::string run_stats::summary() const {
    std::ostringstream o;
    o << runs << " sequences, " << ops << " ops, " << steps << " worker steps, " << checks << " model checks, "
      << commits << " commits, " << rollbacks << " rollbacks, " << reopens << " opens\n"
      << "  crashes: " << crash_in_commit << " inside a commit (in-flight commit kept " << in_flight_kept
      << ", lost " << in_flight_lost << "; " << std::count(points_hit, points_hit + 128, 1)
      << " distinct crash points, up to I/O call " << max_io_call << "), " << crash_after_commit
      << " right after a commit, " << crash_in_open << " inside a recovering open, " << idle_crashes
      << " between steps, " << timed_kills << " timed kill -9\n  by kind:";
    for (int i = 0; i < static_cast<int>(mode::count_); ++i)
        o << " [" << to_string(static_cast<mode>(i)) << ": " << by_mode[i] << "]";
    o << "\n  " << reader_checks << " two-reader checks, " << lock_checks << " second-writer lock checks, "
      << transient_checks << " transient-pointer checks, " << store_checks << " store::check() runs, "
      << tracked_io << " I/O calls seen by the fault env in plain commits";
    return o.str();
}

}  // namespace steppe_model
