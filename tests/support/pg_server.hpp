// A PostgreSQL server of the test process's own, for the PostgreSQL page
// store's tests: initdb and pg_ctl from Debian's postgresql package in a
// temporary directory, run as an unprivileged user (postgres, else nobody)
// when the tests run as root, listening on a Unix socket only.
#pragma once

#include <string>

namespace steppe::test {

class pg_server {
public:
    // The process's server, started on first use; null when none can run
    // here, with `why` saying what is missing (the test then skips).
    static pg_server* get(std::string& why);
    ~pg_server();

    // The URL of store `name` on this server, with extra "&key=value"
    // parameters; without a cache file unless `extra` names one.
    std::string url(const std::string& name, const std::string& extra = "") const;
    // Runs SQL through psql; its output, one row per line, columns by '|'.
    std::string sql(const std::string& statement) const;
    // A crash of the server (as pg_ctl stop -m immediate: at once), and its start again.
    void crash();
    void start();
    // Ends a backend's session as a network cut seen by the server would
    // (pg_terminate_backend).
    void terminate(int backend_pid) const;
    // Puts `line` first in pg_hba.conf and reloads the configuration.
    void add_hba_line(const std::string& line) const;
    // ALTER SYSTEM SET `setting` = `value` (RESET with an empty value) and a reload.
    void set(const std::string& setting, const std::string& value) const;

    // A streaming standby of this server (pg_basebackup -R), started on
    // first use; false with `why` when it cannot run. Then url_with_standby
    // names both servers (the primary first) for pages_from=standby.
    bool start_standby(std::string& why);
    std::string url_with_standby(const std::string& name, const std::string& extra = "") const;
    // Waits until the standby has replayed everything the primary committed.
    void wait_for_standby() const;
    // Runs SQL on the standby, as sql() on the primary.
    std::string standby_sql(const std::string& statement) const;

private:
    pg_server() = default;
    std::string as_user(const std::string& command) const;
    void start_on(const std::string& data, int& port);
    std::string stop_command() const;
    void watch_for_the_end_of_this_process() const;
    std::string sql_on(int port, const std::string& statement) const;
    std::string bin_, dir_, user_;
    int port_ = 0;
    int standby_port_ = 0;  // 0: no standby
};

}  // namespace steppe::test
