// Runs the steppe command-line tool ($STEPPE_CLI, else ../tools/steppe next
// to the test binary) and captures its output and exit code.
#pragma once

#include <string>

namespace steppe::test {

struct cli_result {
    int exit_code;
    std::string out;  // stdout and stderr together
};

cli_result run_cli(const std::string& args);

// The tool's path: $STEPPE_CLI, else ../tools/steppe next to the test binary.
std::string cli_path();

// Replaces every occurrence of `what` in `text` by `mask` (for golden output).
std::string mask(std::string text, const std::string& what, const std::string& with);

}  // namespace steppe::test
