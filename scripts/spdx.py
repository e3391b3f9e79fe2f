#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Licence headers: every source file of the tree says it is Apache-2.0.

usage: spdx.py --check [SOURCE_DIR]   list the files without the line; exit 1 if any
       spdx.py --fix   [SOURCE_DIR]   add the line where it is missing

A source file is code or a build, deploy or packaging file (SOURCES below);
its licence line is `SPDX-License-Identifier: Apache-2.0` in its comment
syntax, within its first lines: after a shell's #! line or a Dockerfile's
parser directives, else first. --check also checks that LICENSE is the
Apache License 2.0 and that the package's copyright file names it. --fix
touches nothing else, and a second run changes nothing. Build trees
(build*), hidden directories, the fuzz corpora and the deliberately broken
Dockerfiles of the deploy tests are not sources; the files of LATER wait
for the branch that rewrites them.
"""

import os
import re
import sys

TAG = "SPDX-License-Identifier: Apache-2.0"
SKIP_DIRS = {"corpus", "bad-dockerfiles", "__pycache__"}
# Files another branch is rewriting when this list was written: neither
# checked nor fixed, so the rewrite merges cleanly. Empty this list after
# merging it, then run --fix.
LATER = ()


def style(rel):
    """The comment around TAG for file `rel`, or None when it is no source."""
    name = os.path.basename(rel)
    if re.search(r"\.(c|h|proto|map)$", name) or name.endswith(".h.in"):
        return "/* %s */"
    if name.endswith(".js"):
        return "// %s"
    if re.search(r"\.(py|sh|cmake|in|yaml|yml)$", name) or name in (
            "CMakeLists.txt", "Dockerfile", "postinst", "postrm", "prerm") or rel == ".ci/run":
        return "# %s"
    return None


def sources(root):
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if (d == ".ci" or not d.startswith(".")) and
                         not d.startswith("build") and d not in SKIP_DIRS)
        for f in sorted(files):
            rel = os.path.relpath(os.path.join(top, f), root)
            if style(rel) is not None and not rel.startswith(LATER):
                yield rel


def header_end(lines, rel):
    """How many leading lines must stay before the licence line."""
    n = 0
    if lines and lines[0].startswith("#!"):
        n = 1
    if os.path.basename(rel) == "Dockerfile":
        while n < len(lines) and re.match(r"^#\s*[a-z]+=", lines[n]):
            n += 1  # parser directives come first or are not directives
    return n


def has_tag(lines):
    return any(TAG in line for line in lines[:5])


def check_files(root):
    bad = []
    if "Apache License" not in open(os.path.join(root, "LICENSE"), encoding="utf-8").read(2000) \
            or "Version 2.0, January 2004" not in open(os.path.join(root, "LICENSE"),
                                                        encoding="utf-8").read(2000):
        bad.append("LICENSE: not the Apache License, Version 2.0")
    copyright_file = open(os.path.join(root, "deploy", "debian", "copyright"), encoding="utf-8").read()
    if "License: Apache-2.0" not in copyright_file:
        bad.append("deploy/debian/copyright: does not name License: Apache-2.0")
    return bad


def main(argv):
    if len(argv) not in (2, 3) or argv[1] not in ("--check", "--fix"):
        sys.stderr.write(__doc__)
        return 2
    root = os.path.abspath(argv[2] if len(argv) == 3 else os.path.join(os.path.dirname(argv[0]), ".."))
    missing, fixed = [], 0
    for rel in sources(root):
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        if has_tag(lines):
            continue
        if argv[1] == "--check":
            missing.append(rel)
            continue
        at = header_end(lines, rel)
        lines.insert(at, style(rel) % TAG)
        mode = os.stat(path).st_mode
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        os.chmod(path, mode)
        fixed += 1
    if argv[1] == "--fix":
        print("spdx: added the licence line to %d file(s)" % fixed)
        return 0
    problems = check_files(root) + ["%s: no '%s' line (scripts/spdx.py --fix adds it)" % (m, TAG)
                                    for m in missing]
    for p in problems:
        print(p)
    print("spdx: %s" % ("%d problem(s)" % len(problems) if problems else "every source file is "
                        "Apache-2.0"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
