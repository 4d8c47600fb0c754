#include "support/pg_server.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>

namespace steppe::test {

namespace {

std::string run(const std::string& command) {
    std::string out;
    FILE* p = ::popen(command.c_str(), "r");
    if (!p) throw std::runtime_error("popen: " + command);
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    if (::pclose(p) != 0) throw std::runtime_error("failed: " + command + "\n" + out);
    return out;
}

// The newest /usr/lib/postgresql/N/bin holding initdb and pg_ctl.
std::string find_bin() {
    std::string best;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
        std::string bin = (e.path() / "bin").string();
        if (::access((bin + "/initdb").c_str(), X_OK) == 0 && ::access((bin + "/pg_ctl").c_str(), X_OK) == 0 &&
            bin > best)
            best = bin;
    }
    return best;
}

}  // namespace

pg_server* pg_server::get(std::string& why) {
    static std::unique_ptr<pg_server> server;
    static std::string failure;
    if (server || !failure.empty()) {
        why = failure;
        return server.get();
    }
    std::unique_ptr<pg_server> s(new pg_server);
    s->bin_ = find_bin();
    if (s->bin_.empty()) {
        failure = why = "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql-15)";
        return nullptr;
    }
    if (::geteuid() == 0) s->user_ = ::getpwnam("postgres") ? "postgres" : "nobody";
    char dir[] = "/tmp/steppe-pg-XXXXXX";
    if (!::mkdtemp(dir)) throw std::runtime_error("mkdtemp");
    s->dir_ = dir;
    ::chmod(dir, 0755);
    if (!s->user_.empty()) run("chown " + s->user_ + " " + s->dir_);
    s->port_ = 20000 + int(::getpid() % 20000);
    run(s->as_user(s->bin_ + "/initdb -D " + s->dir_ + "/data -A trust -U steppe --no-sync >/dev/null 2>&1"));
    s->start();
    s->watch_for_the_end_of_this_process();
    server = std::move(s);
    return server.get();
}

pg_server::~pg_server() {
    (void)std::system(stop_command().c_str());
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
}

// Both servers stopped at once (either may not be running) and the directory gone.
std::string pg_server::stop_command() const {
    return as_user(bin_ + "/pg_ctl -D " + dir_ + "/standby -m immediate stop >/dev/null 2>&1") + "; " +
           as_user(bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate stop >/dev/null 2>&1") + "; rm -rf " + dir_;
}

// A test process that ends without its destructors (killed by ctest's
// timeout, or by the hang report's _exit) would leave its server running
// for good, and on a CI machine such servers pile up. So a watcher, not a
// child of this process (the hang report kills those), waits for the end
// of a pipe only this process holds (close-on-exec: not the commands it
// runs; its forked test children hold it until they end too) and then
// stops the servers. After a normal exit the destructor has already.
void pg_server::watch_for_the_end_of_this_process() const {
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 for the server's watcher");
    const std::string command = stop_command();  // made before fork: the child only calls what is async-signal-safe
    std::fflush(nullptr);
    const pid_t middle = ::fork();
    if (middle < 0) throw std::runtime_error("fork for the server's watcher");
    if (middle == 0) {
        // The watcher is the grandchild, adopted by init (_Fork: no fork
        // handlers in a child of a multi-threaded process).
        if (::_Fork() != 0) ::_exit(0);
        // It holds nothing of the test's but its end of the pipe: not ctest's
        // output pipe (ctest waits for every holder of it to close), not the
        // test's other pipes, files or sockets (their other ends would not
        // see them close).
        const int null = ::open("/dev/null", O_RDWR);
        for (int fd = 0; fd <= 2; ++fd) ::dup2(null, fd);
        ::dup2(ends[0], 3);
        ::close_range(4, ~0U, 0);
        char c;
        ssize_t n;
        do n = ::read(3, &c, 1);
        while (n < 0 && errno == EINTR);
        ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(ends[0]);
    ::waitpid(middle, nullptr, 0);
    // ends[1] stays open for the life of this process.
}

std::string pg_server::as_user(const std::string& command) const {
    return user_.empty() ? command : "runuser -u " + user_ + " -- sh -c '" + command + "'";
}

void pg_server::start() { start_on("data", port_); }

void pg_server::start_on(const std::string& data, int& port) {
    // fsync=off: a crash here is pg_ctl stop -m immediate, which the
    // kernel's page cache outlives, so every write the server made survives
    // it as it would survive with fsync; and the start after a crash does not
    // fsync the whole data directory first (seconds on a busy machine).
    // Tests run in parallel, each with a server: a port taken by another
    // (its socket file is per directory, but the port's lock file is not) moves on.
    for (int attempt = 0;; ++attempt, ++port) {
        try {
            run(as_user(bin_ + "/pg_ctl -D " + dir_ + "/" + data + " -o \"-k " + dir_ +
                        " -c listen_addresses= -c fsync=off -p " + std::to_string(port) + "\" -l " + dir_ + "/" +
                        data + ".log -w start >/dev/null"));
            return;
        } catch (const std::exception&) {
            if (attempt == 10) throw;
        }
    }
}

bool pg_server::start_standby(std::string& why) {
    if (standby_port_ != 0) return true;
    try {
        run(as_user(bin_ + "/pg_basebackup -c fast -D " + dir_ + "/standby -R -X stream -h " + dir_ + " -p " +
                    std::to_string(port_) + " -U steppe >/dev/null 2>&1"));
        int port = port_ + 1;
        start_on("standby", port);
        standby_port_ = port;
        return true;
    } catch (const std::exception& e) {
        why = std::string("no streaming standby: ") + e.what();
        return false;
    }
}

std::string pg_server::url_with_standby(const std::string& name, const std::string& extra) const {
    const bool file = extra.find("cache_file") != std::string::npos;  // as url()
    return "postgresql:///postgres?host=" + dir_ + "," + dir_ + "&port=" + std::to_string(port_) + "," +
           std::to_string(standby_port_) + "&user=steppe&store=" + name + (file ? "" : "&cache_file_mib=0") + extra;
}

void pg_server::wait_for_standby() const {
    std::string lsn = sql("SELECT pg_current_wal_lsn()");
    lsn = lsn.substr(0, lsn.find('\n'));
    for (int i = 0; i < 1000; ++i) {
        if (standby_sql("SELECT pg_last_wal_replay_lsn() < '" + lsn + "'::pg_lsn").starts_with("f")) return;
        ::usleep(10000);
    }
    throw std::runtime_error("the standby did not catch up in 10 s");
}

// What pg_ctl stop -m immediate does, without its start-up time, so a
// crash lands at the instant a test picks: SIGQUIT to the postmaster, then
// wait until it has gone (it removes postmaster.pid last).
void pg_server::crash() {
    const std::string lock = dir_ + "/data/postmaster.pid";
    long pid = 0;
    if (FILE* f = std::fopen(lock.c_str(), "r")) {
        if (std::fscanf(f, "%ld", &pid) != 1) pid = 0;
        std::fclose(f);
    }
    if (pid <= 0 || ::kill(pid_t(pid), SIGQUIT) != 0) {
        run(as_user(bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate stop >/dev/null"));
        return;
    }
    for (int i = 0; i < 30000 && ::access(lock.c_str(), F_OK) == 0; ++i) ::usleep(1000);
}

void pg_server::terminate(int backend_pid) const {
    sql("SELECT pg_terminate_backend(" + std::to_string(backend_pid) + ")");
}

void pg_server::add_hba_line(const std::string& line) const {
    const std::string file = dir_ + "/data/pg_hba.conf";
    std::string text;
    {
        FILE* f = std::fopen(file.c_str(), "r");
        if (!f) throw std::runtime_error("open " + file);
        char buf[4096];
        while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) text.append(buf, n);
        std::fclose(f);
    }
    text = line + "\n" + text;
    FILE* f = std::fopen(file.c_str(), "w");  // the same file: its owner stays the server's
    if (!f) throw std::runtime_error("open " + file);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
    sql("SELECT pg_reload_conf()");
}

void pg_server::set(const std::string& setting, const std::string& value) const {
    sql(value.empty() ? "ALTER SYSTEM RESET " + setting : "ALTER SYSTEM SET " + setting + " = '" + value + "'");
    sql("SELECT pg_reload_conf()");
}

std::string pg_server::url(const std::string& name, const std::string& extra) const {
    // No cache file unless the test asks for one: tests of the server's
    // side must reach it, and none should write under the user's $HOME.
    const bool file = extra.find("cache_file") != std::string::npos;
    return "postgresql:///postgres?host=" + dir_ + "&port=" + std::to_string(port_) + "&user=steppe&store=" + name +
           (file ? "" : "&cache_file_mib=0") + extra;
}

std::string pg_server::sql(const std::string& statement) const { return sql_on(port_, statement); }

std::string pg_server::standby_sql(const std::string& statement) const { return sql_on(standby_port_, statement); }

std::string pg_server::sql_on(int port, const std::string& statement) const {
    std::string quoted;
    for (char c : statement) {
        if (c == '"' || c == '$' || c == '\\' || c == '`') quoted += '\\';
        quoted += c;
    }
    // The test's own session writes even on a primary made read-only.
    const std::string writable = port == port_ ? "PGOPTIONS='-c default_transaction_read_only=off' " : "";
    return run(writable + bin_ + "/psql -X -At -v ON_ERROR_STOP=1 -h " + dir_ + " -p " + std::to_string(port) +
               " -U steppe -d postgres -c \"" + quoted + "\" 2>&1");
}

}  // namespace steppe::test
