#!/usr/bin/env python3
"""The tests a sanitizer build skipped because of the sanitizer, so
scripts/test can run them on a build without one.

    skipped_tests.py BUILD_DIR JUNIT_REPORT

reads the report of `ctest --output-junit` and takes each skipped test whose
output gives a sanitizer as the reason (its GTEST_SKIP message names one:
"AddressSanitizer's allocator ...", "a sanitizer's shadow memory ..."); a
test skipped for any other reason (a scheme it does not apply to, a missing
PostgreSQL) would be skipped on the other build too. Prints nothing when
there is none, otherwise two lines:
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
import xml.etree.ElementTree as ET


def skipped_for_the_sanitizer(report_path):
    names = []
    for case in ET.parse(report_path).getroot().iter("testcase"):
        output = (case.findtext("system-out") or "").lower()
        if case.find("skipped") is not None and "sanitizer" in output:
            names.append(case.get("name"))
    return names


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
    build_dir, report_path = sys.argv[1:]
    names = skipped_for_the_sanitizer(report_path)
    if not names:
        return
    print(" ".join(programs_of(build_dir, names) + ["steppe_cli"]))
    print(ctest_regex(names))


if __name__ == "__main__":
    main()
