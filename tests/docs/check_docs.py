#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The documentation keeps its word (issue 33).

usage: check_docs.py links   SOURCE_DIR
       check_docs.py options SOURCE_DIR IBUS
       check_docs.py apt     SOURCE_DIR
       check_docs.py run     SOURCE_DIR IBUS PLUGIN_DIR NATS_SERVER

links    every relative link of README.md, docs/*.md, deploy/README.md and
         bench/README.md resolves to a file or directory inside the tree,
         and its #anchor to a heading of the target page (GitHub's rules).
         A page another branch is still writing may be named in
         tests/docs/pending-links.txt: a link to it is accepted while it is
         missing, and checked like any other once it exists.
options  every `--option` that README.md and docs/*.md give an `ibus`
         command (in a shell block, or in an inline `ibus CMD ...` span)
         is in `ibus CMD --help`; any other `--option` they mention is in
         the --help of some ibus command, or on FOREIGN below with the
         tool it belongs to.
apt      the README's by-hand apt-get line (the block after
         <!-- docs-test: apt-get -->) names exactly the build_packages of
         scripts/deps.sh.
run      every shell block after <!-- docs-test: run --> runs with `sh -eu`
         in a fresh directory, with IBUS's directory and NATS_SERVER's
         first on PATH, IB_PLUGIN_DIR=PLUGIN_DIR, and a free loopback port
         in place of 4222 (IB_NATS_URL names it); it must exit 0 within
         two minutes, and each line of a block after
         <!-- docs-test: output --> must begin one of its output lines.
         The block runs in a session of its own, whose processes are
         stopped when it ends.

Prints one line per problem and exits 1 when there is any.
"""

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile

# Options of other tools that the docs mention outside a command line, with
# the tool: they are not ibus options and are not checked against it.
FOREIGN = {
    "build": "cmake", "install": "cmake", "prefix": "cmake --install",
    "test-dir": "ctest", "output-on-failure": "ctest",
    "tool": "valgrind",
    "quick": "consumer_bench, recorder_bench", "only": "consumer_bench, recorder_bench",
    "rows": "consumer_bench", "repeat": "consumer_bench", "messages": "consumer_bench",
    "no-callgrind": "consumer_bench", "ibus": "consumer_bench",
    "kv": "marker_sizes", "memory": "marker_sizes",
    "nats-ur": "the mistyped option of a troubleshooting example",
    "cflags": "pkg-config", "libs": "pkg-config",
}
# Commands whose options are not ibus's, when a line or span starts with them.
FOREIGN_COMMANDS = {"cmake", "ctest", "cpack", "valgrind", "cc", "gcc", "pkg-config", "kubectl",
                    "consumer_bench", "recorder_bench", "marker_sizes", "nats-server", "python3",
                    "node", "sqlite3", "apt-get", "sudo", "man", "systemctl", "curl", "sh",
                    "bash", "IB_CHAOS_SEEDS=7,8,9", "tar", "docker"}

problems = []


def problem(where, text):
    problems.append("%s: %s" % (where, text))


def pages(root, extra=True):
    found = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    found += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    if extra:
        found += [os.path.join(root, "deploy", "README.md"), os.path.join(root, "bench", "README.md")]
    return found


def split_page(text):
    """Yields ("code", lang, lines, line_no) and ("prose", None, line, line_no)."""
    fence, lang, block, start = None, None, [], 0
    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r"^\s*(```+|~~~+)\s*([A-Za-z0-9_+-]*)", line)
        if fence is None and m:
            fence, lang, block, start = m.group(1), m.group(2), [], n
        elif fence is not None and line.strip().startswith(fence):
            yield ("code", lang, block, start)
            fence = None
        elif fence is not None:
            block.append(line)
        else:
            yield ("prose", None, line, n)


def paragraphs(text):
    """Like split_page, with the prose joined into paragraphs (a heading,
    a list item or a table row starts one), so that a code span or a link
    broken across lines is read whole."""
    para, start = [], 0
    for kind, lang, body, n in split_page(text):
        starts = kind == "code" or not body.strip() or re.match(r"^\s*(#|[-*] |\d+\. |\|)", body)
        if para and starts:
            yield ("prose", None, " ".join(para), start)
            para = []
        if kind == "code":
            yield (kind, lang, body, n)
        elif body.strip():
            if not para:
                start = n
            para.append(body.strip())
    if para:
        yield ("prose", None, " ".join(para), start)


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for kind, _, line, _ in split_page(open(path, encoding="utf-8").read()):
        if kind != "prose":
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def pending(root):
    path = os.path.join(root, "tests", "docs", "pending-links.txt")
    names = set()
    for line in open(path, encoding="utf-8"):
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(os.path.normpath(os.path.join(root, line.split()[0])))
    return names


def check_links(root):
    waiting = pending(root)
    for page in pages(root):
        rel = os.path.relpath(page, root)
        for kind, _, line, n in paragraphs(open(page, encoding="utf-8").read()):
            if kind != "prose":
                continue
            line = re.sub(r"`[^`]*`", "", line)  # no links inside code spans
            for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:
                path, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                where = "%s:%d" % (rel, n)
                if not (dest + os.sep).startswith(os.path.normpath(root) + os.sep):
                    problem(where, "%s leads outside the repository" % target)
                elif not os.path.exists(dest):
                    if dest not in waiting:
                        problem(where, "%s does not exist" % target)
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    problem(where, "%s: no heading makes the anchor #%s" % (target, anchor))
    for name in sorted(waiting):
        if os.path.exists(name):
            print("note: %s exists now; remove it from tests/docs/pending-links.txt"
                  % os.path.relpath(name, root))


def help_options(ibus):
    """{command: set of option names} from `ibus --help` and each command's."""
    out = subprocess.run([ibus, "--help"], capture_output=True, text=True).stdout
    commands = re.findall(r"^  ([a-z]+)\s{2,}", out.split("commands:", 1)[1], re.M)
    opts = {}
    for c in commands:
        text = subprocess.run([ibus, c, "--help"], capture_output=True, text=True).stdout
        lines = text.split("\n")
        names = set(re.findall(r"--([a-z0-9][a-z0-9-]*)", lines[0]))  # the usage line
        for line in lines:
            m = re.match(r"^\s+--([a-z0-9][a-z0-9-]*)", line)
            if m:
                names.add(m.group(1))
        names.add("help")
        opts[c] = names
    return opts


def commands_of(text):
    """The argument lists of the simple commands in a line of shell."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    cmd = []
    try:
        for tok in lexer:
            if tok and set(tok) <= set("|&;()<>"):
                if cmd:
                    yield cmd
                cmd = []
            else:
                cmd.append(tok)
    except ValueError:  # an unbalanced quote: an excerpt, not a command line
        return
    if cmd:
        yield cmd


def check_command(argv, opts, where):
    """Checks one ibus command line; True when it was one."""
    while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):
        argv = argv[1:]  # VAR=value before the command
    if not argv or os.path.basename(argv[0]) not in ("ibus", '"$ibus"', "$ibus"):
        return False
    sub = argv[1] if len(argv) > 1 else None
    if sub not in opts:
        return True  # `ibus --help`, or a command of a later build
    for tok in argv[2:]:
        m = re.match(r"^--([a-z0-9][a-z0-9-]*)", tok)
        if m and m.group(1) not in opts[sub]:
            problem(where, "ibus %s has no option --%s (see ibus %s --help)" % (sub, m.group(1), sub))
    return True


def check_bare(text, opts, where):
    every = set().union(*opts.values())
    for name, star in re.findall(r"(?<![\w-])--([a-z0-9][a-z0-9-]*)(\*?)", text):
        if star and any(o.startswith(name) for o in every):
            continue  # a family, such as --tls-*
        if name not in every and name not in FOREIGN:
            problem(where, "--%s is no option of any ibus command" % name)


def joined(lines):
    """Shell lines with their backslash continuations joined."""
    out, cur = [], ""
    for line in lines:
        if line.endswith("\\"):
            cur += line[:-1] + " "
        else:
            out.append(cur + line)
            cur = ""
    if cur:
        out.append(cur)
    return out


def check_options(root, ibus):
    opts = help_options(ibus)
    for page in pages(root, extra=False):
        rel = os.path.relpath(page, root)
        for kind, lang, body, n in paragraphs(open(page, encoding="utf-8").read()):
            where = "%s:%d" % (rel, n)
            if kind == "code" and lang in ("sh", "bash", "shell", "console"):
                for line in joined(body):
                    for argv in commands_of(line):
                        check_command(argv, opts, where)
            elif kind == "code":
                check_bare("\n".join(body), opts, where)
            else:
                for span in re.findall(r"`([^`]+)`", body):
                    argvs = list(commands_of(span)) if span.startswith("ibus ") else []
                    if argvs and check_command(argvs[0], opts, where):
                        continue
                    first = span.split()[0] if span.split() else ""
                    if os.path.basename(first) not in FOREIGN_COMMANDS:
                        check_bare(span, opts, where)
                check_bare(re.sub(r"`[^`]*`", "", body), opts, where)


def marked_blocks(page, marker):
    """The code blocks that follow <!-- docs-test: MARKER -->, with their line."""
    armed, out = False, []
    for kind, _, body, n in split_page(open(page, encoding="utf-8").read()):
        if kind == "prose" and body.strip() == "<!-- docs-test: %s -->" % marker:
            armed = True
        elif kind == "code" and armed:
            out.append((body, n))
            armed = False
        elif kind == "prose" and body.strip():
            armed = False
    return out


def check_apt(root):
    readme = os.path.join(root, "README.md")
    blocks = marked_blocks(readme, "apt-get")
    if len(blocks) != 1:
        problem("README.md", "expected one apt-get block, found %d" % len(blocks))
        return
    words = " ".join(joined(blocks[0][0])).split()
    named = set(words[words.index("install") + 1:]) if "install" in words else set()
    deps = open(os.path.join(root, "scripts", "deps.sh"), encoding="utf-8").read()
    m = re.search(r"^build_packages=\((.*?)\)", deps, re.S | re.M)
    wanted = set(m.group(1).split()) if m else set()
    if not wanted:
        problem("scripts/deps.sh", "no build_packages=(...) list")
    for p in sorted(wanted - named):
        problem("README.md:%d" % blocks[0][1], "the apt-get line lacks %s (scripts/deps.sh)" % p)
    for p in sorted(named - wanted):
        problem("README.md:%d" % blocks[0][1], "the apt-get line names %s, which scripts/deps.sh "
                "does not list among build_packages" % p)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_block(script, expected, where, env):
    port = free_port()
    script = script.replace("-p 4222", "-p %d" % port).replace(":4222", ":%d" % port)
    env = dict(env, IB_NATS_URL="nats://127.0.0.1:%d" % port)
    with tempfile.TemporaryDirectory(prefix="ib-docs.") as work:
        proc = subprocess.Popen(["sh", "-eu", "-c", script], cwd=work, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            out = "(timed out after 120 s)"
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the block's own session
            except ProcessLookupError:
                pass
            proc.wait()
        if proc.returncode != 0:
            problem(where, "the block failed (exit %s):\n%s" % (proc.returncode, out[-3000:]))
            return
        for line in expected:
            if line.strip() and not any(o.startswith(line) for o in out.split("\n")):
                problem(where, "its output has no line starting %r:\n%s" % (line, out[-3000:]))


def check_run(root, ibus, plugin_dir, nats_server):
    env = dict(os.environ)
    for var in [v for v in env if v.startswith("IB_")]:
        del env[var]  # nothing of the caller's settings
    env["PATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(ibus)),
                                   os.path.dirname(os.path.abspath(nats_server)), env["PATH"]])
    env["IB_PLUGIN_DIR"] = os.path.abspath(plugin_dir)
    count = 0
    for page in pages(root, extra=False):
        runs = marked_blocks(page, "run")
        outputs = marked_blocks(page, "output")
        for i, (body, n) in enumerate(runs):
            expected = next((o for o, m in outputs if m > n and
                             (i + 1 == len(runs) or m < runs[i + 1][1])), [])
            run_block("\n".join(body), expected, "%s:%d" % (os.path.relpath(page, root), n), env)
            count += 1
    if count == 0:
        problem("docs", "no block is marked <!-- docs-test: run -->")
    print("ran %d block(s)" % count)


def main(argv):
    if len(argv) < 3 or argv[1] not in ("links", "options", "apt", "run"):
        sys.stderr.write(__doc__)
        return 2
    root = os.path.abspath(argv[2])
    if argv[1] == "links":
        check_links(root)
    elif argv[1] == "options" and len(argv) == 4:
        check_options(root, argv[3])
    elif argv[1] == "apt":
        check_apt(root)
    elif argv[1] == "run" and len(argv) == 6:
        check_run(root, argv[3], argv[4], argv[5])
    else:
        sys.stderr.write(__doc__)
        return 2
    for p in problems:
        print(p)
    print("%s: %s" % (argv[1], "%d problem(s)" % len(problems) if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
