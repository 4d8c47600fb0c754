#!/usr/bin/env python3
"""The tests a ctest run skipped, so scripts/test can run them on another build.

    skipped_tests.py BUILD_DIR CTEST_LOG

reads the "(Skipped)" lines at the end of CTEST_LOG (ctest's summary of the
tests that did not run) and prints nothing when none was skipped, otherwise
two lines:
  1. the CMake targets that build their programs (each program's file name,
     which is its target's name in this project), and steppe_cli, which the
     tests find through STEPPE_CLI;
  2. a ctest regular expression that matches exactly those tests' names.
"""
import json
import os
import re
import subprocess
import sys


def skipped_names(log_path):
    line = re.compile(r"^\s*\d+ - (.*) \(Skipped\)$")
    with open(log_path, encoding="utf-8", errors="replace") as log:
        return [m.group(1) for m in map(line.match, log) if m]


def programs_of(build_dir, names):
    listing = subprocess.run(["ctest", "--test-dir", build_dir, "-N", "--show-only=json-v1"],
                             check=True, capture_output=True, text=True).stdout
    command_of = {t["name"]: t.get("command", []) for t in json.loads(listing)["tests"]}
    missing = [n for n in names if not command_of.get(n)]
    if missing:
        sys.exit(f"skipped_tests.py: {build_dir} lists no program for: {', '.join(missing)}")
    return sorted({os.path.basename(command_of[n][0]) for n in names})


def ctest_regex(names):
    # ctest's regular expressions treat these characters specially; test
    # names of parameterized tests carry brackets, parentheses and '+'.
    escape = re.compile(r"([][\\.^$*+?(){}|])")
    return "^(" + "|".join(escape.sub(r"\\\1", n) for n in names) + ")$"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build_dir, log_path = sys.argv[1:]
    names = skipped_names(log_path)
    if not names:
        return
    print(" ".join(programs_of(build_dir, names) + ["steppe_cli"]))
    print(ctest_regex(names))


if __name__ == "__main__":
    main()
